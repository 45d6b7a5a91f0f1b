//! A fast, shard-aware async CQL driver for ScyllaDB and Apache Cassandra.
//!
//! Under the API: a connection layer with writer/reader loops and time-based
//! frame coalescing ([`Coalescing`]) feeds a precomputed token/shard-aware
//! routing table that opens per-shard connections via source-port selection
//! on the shard-aware port ([`PortRange`]), with NAT fallback and jittered
//! reconnect backoff ([`ReconnectPolicy`]). Those layers are the driver's
//! own business; what a program sets is on [`SessionBuilder`].
//!
//! Users start from [`SessionBuilder`] and [`Session`]:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use scylla_driver::SessionBuilder;
//!
//! let session = SessionBuilder::new().known_node("127.0.0.1:9042").build().await?;
//! let result = session
//!     .query_unpaged("SELECT release_version FROM system.local", ())
//!     .await?;
//! let (version,): (&str,) = result.single_row()?;
//! println!("connected to {version}");
//! # Ok(()) }
//! ```
//!
//! Rows, bound values and UDTs map to structs with derives:
//!
//! ```
//! use scylla_driver::{DeserializeRow, DeserializeValue, SerializeRow, SerializeValue};
//!
//! /// A UDT `address (street text, number int)`, fields matched by name.
//! #[derive(SerializeValue, DeserializeValue)]
//! struct Address {
//!     street: String,
//!     number: Option<i32>,
//! }
//!
//! /// A row, columns matched by name; `name` borrows the response frame.
//! #[derive(DeserializeRow)]
//! struct Person<'a> {
//!     id: i32,
//!     #[scylla(rename = "full_name")]
//!     name: &'a str,
//!     home: Option<Address>,
//! }
//!
//! /// Bound values, matched to the bind markers by name.
//! #[derive(SerializeRow)]
//! struct NewPerson<'a> {
//!     id: i32,
//!     full_name: &'a str,
//! }
//! // session.execute_unpaged(&insert, NewPerson { id: 1, full_name: "Ada" }).await?;
//! // let p: Person = result.single_row()?;
//! ```
//!
//! # Layout
//! - [`session`]: the public API ([`Session`], [`SessionBuilder`], paging).
//! - [`statement`]: statements, prepared statements, batches, options.
//! - [`result`]: results and typed rows.
//! - [`value`]: CQL values in Rust ([`CqlValue`](value::CqlValue),
//!   [`Row`](value::Row), dates, times, decimals...).
//! - [`serialize`], [`deserialize`]: the traits that bind values and read
//!   rows, and their errors.
//! - [`types`]: column types and specs, tokens, protocol versions.
//! - [`policy`]: retry, speculative execution, address translation, host
//!   filters.
//! - [`tls`] (feature `tls`): encryption.
//! - [`error`]: the error catalogue.
//! - [`metrics`]: counters and latency histogram.
//!
//! The paths of the official `scylla` 1.x crate are offered as aliases of
//! these: [`client`], [`response`], [`errors`], [`frame`], [`policies`],
//! [`observability`] and
//! the `statement::{unprepared, prepared, batch}` modules, so everyday code
//! written for it compiles with `scylla::` replaced by `scylla_driver::`
//! (see `docs/migrating-from-scylla.md` in the repository).
//!
//! # Cargo features
//! - `tls` (default): client encryption through rustls.
//! - `unstable-internals`: makes the connection, pool, routing and cluster
//!   layers public (hidden from this documentation). No semver guarantee;
//!   for the project's own benches and tests.

// The internals: public (and hidden from the docs) with
// `unstable-internals`, crate-private otherwise. In the private build their
// `pub` items are unreachable from outside, and the helpers and re-exports
// only benches and tests use are unused.
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod cluster;
#[cfg(not(feature = "unstable-internals"))]
#[allow(unreachable_pub, dead_code, unused_imports)]
pub(crate) mod cluster;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod connection;
#[cfg(not(feature = "unstable-internals"))]
#[allow(unreachable_pub, dead_code, unused_imports)]
pub(crate) mod connection;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod pool;
#[cfg(not(feature = "unstable-internals"))]
#[allow(unreachable_pub, dead_code, unused_imports)]
pub(crate) mod pool;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod routing;
#[cfg(not(feature = "unstable-internals"))]
#[allow(unreachable_pub, dead_code, unused_imports)]
pub(crate) mod routing;

pub mod client;
pub mod deserialize;
pub mod error;
pub mod errors;
pub mod frame;
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

pub use cluster::TabletWarmup;
pub use connection::{AuthError, AuthSession, Authenticator, Coalescing, PasswordAuthenticator};
pub use error::{ExecutionError, NewSessionError, PrepareError};
pub use pool::backoff::{Backoff, ExponentialBackoff, Jitter, ReconnectPolicy, ReconnectSchedule};
pub use pool::shard_port::PortRange;
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
pub use scylla_cql::Token;
pub use scylla_driver_macros::{DeserializeRow, DeserializeValue, SerializeRow, SerializeValue};
pub use session::{Session, SessionBuilder, SessionConfig};
pub use statement::{Batch, BatchType, Consistency, PreparedStatement, Statement};
