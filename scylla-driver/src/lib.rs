#![doc = include_str!("lib.md")]

/// Declares internal modules, the one way the driver has of them: public
/// (and hidden from the docs) with the `unstable-internals` feature, for the
/// project's own tests, benches and tools; crate-private otherwise, where
/// their `pub` items are unreachable from outside. Dead code is not hidden:
/// an item only tests, benches or tools use is itself declared
/// `#[cfg(any(test, feature = "unstable-internals"))]`, so the build users
/// get warns about anything unused. `cluster` and `routing` are public
/// either way for their user-facing items (the cluster's state, tokens and
/// shards); their internal submodules are declared with this inside them.
macro_rules! internal_mods {
    ($($name:ident),+ $(,)?) => {$(
        #[cfg(feature = "unstable-internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "unstable-internals"))]
        #[allow(unreachable_pub)]
        pub(crate) mod $name;
    )+};
}

pub mod authentication;
pub mod cluster;
internal_mods!(connection);
internal_mods!(pool);
pub mod routing;

pub mod client;
pub mod deserialize;
pub mod error;
pub mod errors;
pub mod frame;
mod handle;
mod history;
pub mod metrics;
pub mod observability;
pub mod policies;
pub mod policy;
pub mod response;
pub mod result;
pub mod serialize;
pub mod session;
pub mod statement;
#[cfg(feature = "tls")]
pub mod tls;
pub mod types;
pub mod value;

#[doc(no_inline)]
pub use cluster::client_routes::ClientRoutes;
#[doc(no_inline)]
pub use cluster::view::{ClusterView, NodeInfo, Replica};
#[doc(no_inline)]
pub use cluster::TabletWarmup;
pub use connection::Coalescing;
#[doc(no_inline)]
pub use error::{ExecutionError, NewSessionError, PrepareError};
pub use pool::backoff::{Backoff, ExponentialBackoff, Jitter, ReconnectPolicy, ReconnectSchedule};
pub use pool::shard_port::PortRange;
#[doc(no_inline)]
pub use result::QueryResult;
#[doc(hidden)]
pub use scylla_cql::_macro_internal;
pub use scylla_cql::compression::Compression;
pub use scylla_cql::frame::ProtocolVersion;
/// The row and value traits, each with its derive macro of the same name
/// (see `scylla-driver-macros`): `#[derive(DeserializeRow)]` on a struct
/// reads rows into it, `#[derive(SerializeRow)]` binds its fields to bind
/// markers, `#[derive(SerializeValue, DeserializeValue)]` maps it to a UDT.
pub use scylla_cql::types::serialize::BatchValues;
pub use scylla_cql::types::{DeserializeRow, DeserializeValue, SerializeRow, SerializeValue};
#[doc(no_inline)]
pub use scylla_cql::Token;
pub use scylla_driver_macros::{DeserializeRow, DeserializeValue, SerializeRow, SerializeValue};
#[doc(no_inline)]
pub use session::{Session, SessionBuilder, SessionConfig, ShardGroup};
#[doc(no_inline)]
pub use statement::{Batch, BatchType, Consistency, PreparedStatement, Statement};
