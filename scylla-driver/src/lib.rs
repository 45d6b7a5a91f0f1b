//! A fast, shard-aware async CQL driver for ScyllaDB and Apache Cassandra.
//!
//! *A connection layer with writer/reader loops and time-based frame
//! coalescing feeds a precomputed token/shard-aware routing table that opens
//! per-shard connections via source-port selection on the shard-aware port
//! with NAT fallback and jittered reconnect backoff.* Phrase by phrase:
//!
//! | the design | where it lives |
//! | --- | --- |
//! | connection layer with writer/reader loops | [`connection`] (its `writer` and `reader` tasks, `connection::stream_slots`) |
//! | time-based frame coalescing | [`connection::Coalescing`] |
//! | precomputed token/shard-aware routing table | [`routing`], built by [`cluster`] |
//! | per-shard connections | [`pool`] |
//! | source-port selection on the shard-aware port | [`pool::shard_port`] |
//! | NAT fallback | [`pool::nat`] |
//! | jittered reconnect backoff | [`pool::backoff`] |
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
//! - [`policy`]: retry and speculative execution.
//! - [`error`]: the error catalogue.
//! - [`metrics`]: counters and latency histogram.
//! - [`cluster`]: metadata, the control connection, the cluster state.
//! - [`routing`]: the precomputed routing table (pure data).
//! - [`pool`]: per-node pools of per-shard connections.
//! - [`connection`]: one connection: handshake, writer, reader, stream slots.
//!
//! Layers only import downwards: `connection` <- `pool` <- `cluster` ->
//! `routing`; `session` on top.

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
