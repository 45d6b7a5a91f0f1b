#![doc = include_str!("lib.md")]

pub mod cluster;
pub mod connection;
pub mod error;
pub mod metrics;
pub mod policy;
pub mod pool;
pub mod result;
pub mod routing;
pub mod session;
pub mod statement;

pub use cluster::view::{ClusterView, NodeInfo, Replica};
pub use cluster::TabletWarmup;
pub use error::{ExecutionError, NewSessionError, PrepareError};
pub use result::QueryResult;
#[doc(hidden)]
pub use scylla_cql::_macro_internal;
/// The row and value traits, each with its derive macro of the same name
/// (see `scylla-driver-macros`): `#[derive(DeserializeRow)]` on a struct
/// reads rows into it, `#[derive(SerializeRow)]` binds its fields to bind
/// markers, `#[derive(SerializeValue, DeserializeValue)]` maps it to a UDT.
pub use scylla_cql::types::serialize::BatchValues;
pub use scylla_cql::types::{DeserializeRow, DeserializeValue, SerializeRow, SerializeValue};
pub use scylla_driver_macros::{DeserializeRow, DeserializeValue, SerializeRow, SerializeValue};
pub use session::{Session, SessionBuilder, SessionConfig};
pub use statement::{Batch, BatchType, Consistency, PreparedStatement, Statement};
