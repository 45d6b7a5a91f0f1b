//! An in-process, ScyllaDB-like test cluster on loopback.
//!
//! ScyllaDB cannot run on the test machines, so the driver's integration
//! tests, examples and benches run against this: real TCP servers on
//! `127.x.y.N` that speak CQL v4 and follow ScyllaDB's sharding rules
//! (shard-aware port, `SCYLLA_*` options, fewest-connections balancing on
//! the regular port), with handshake admission and shedding, faults (NAT,
//! refusing or silent shard-aware port, latency) and stats to assert on.
//!
//! ```no_run
//! # async fn demo() -> Result<(), scylla_testbed::ClusterError> {
//! use scylla_testbed::TestCluster;
//! let cluster = TestCluster::builder().nodes(3).shards(8).vnodes(16).seed(42).start().await?;
//! println!("contact points: {:?}", cluster.cql_addrs());
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`cluster`]: the [`TestCluster`] handle (start/stop/restart nodes, faults,
//!   events, stats, shutdown).
//! - [`error`]: why a cluster operation failed, [`ClusterError`].
//! - [`config`]: [`ClusterConfig`] and [`TestClusterBuilder`].
//! - [`topology`]: node identities ([`NodeInfo`]: address, host id, dc/rack,
//!   tokens) and [`Topology`].
//! - `node` (internal): listeners, accept loops, one lifetime of a node.
//! - `node_shared` (internal): what every task of one node lifetime shares.
//! - `shard` (internal): which shard a new connection lands on.
//! - `connection` (internal): one connection's frames, handshake, REGISTER.
//! - `outgoing` (internal): what a connection's writer is handed.
//!
//! Modules only import "downwards" in this list's dependency order: no two
//! modules import each other, directly or through others.
//! - [`handler`]: the seam to the CQL layer: [`RequestHandler`], [`ConnCtx`],
//!   [`Request`], [`Response`], [`Reply`].
//! - [`cql`]: the CQL layer, [`CqlHandler`] (the default handler): system
//!   tables, schema (user-defined types and storage-attached indexes
//!   included), rows in memory, paging, vector search (`ORDER BY v ANN OF`),
//!   routing accounting.
//! - [`supported`]: the SUPPORTED options (ScyllaDB's extension keys).
//! - [`tablets`]: tablet maps (placement, lookup, split, migration).
//! - [`admission`]: handshake CPU-stage limit, modelled cost, shedding.
//! - [`tls`]: [`TlsOptions`], certificates made at start, TLS ports.
//! - [`faults`]: [`Faults`] a test sets per node at run time.
//! - [`events`]: [`EventKind`] and delivery to registered connections.
//! - [`stats`]: [`ClusterStats`] snapshots of the counters.
//! - [`proxy_v2`]: the PROXY protocol v2 header (encode, parse).
//! - [`routes`]: client routes: the `system.client_routes` rows and the
//!   load-balancer fronts that forward to the nodes' PROXY v2 listeners.
//! - [`cli`]: the `testbed` program's command line.

pub mod admission;
pub mod cli;
mod clients;
pub mod cluster;
pub mod config;
mod connection;
pub mod cql;
pub mod error;
pub mod events;
pub mod faults;
pub mod handler;
mod node;
mod node_shared;
mod outgoing;
mod prepared_ids;
pub mod proxy_v2;
pub mod routes;
mod shard;
pub mod stats;
pub mod supported;
pub mod tablet_script;
pub mod tablets;
pub mod tls;
pub mod topology;

pub use admission::{AdmissionConfig, HandshakeCost};
pub use cluster::TestCluster;
pub use config::{ClusterConfig, Credentials, TestClusterBuilder};
pub use cql::{CqlHandler, Store};
pub use error::ClusterError;
pub use events::EventKind;
pub use faults::{Faults, NatMode, ShardAwarePortMode};
pub use handler::{
    error_code, Compression, ConnCtx, HandlerFuture, NotImplementedHandler, PortKind, Reply,
    Request, RequestHandler, Response, SessionState,
};
pub use stats::{ClusterStats, NodeStatsSnapshot, StatsCounters};
pub use tablet_script::{TabletAction, TabletScript};
pub use tablets::{TabletError, TabletInfo};
pub use tls::{TicketScope, TlsOptions, TlsSetupError};
pub use topology::{NodeInfo, Topology};
