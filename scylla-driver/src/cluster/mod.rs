//! The cluster as the driver knows it: nodes, keyspaces and tables, kept
//! current by the control connection.
//!
//! For applications: [`ClusterView`] (from
//! [`Session::cluster`](crate::Session::cluster)) and, in the official
//! `scylla` crate's shape, [`ClusterState`] (from
//! [`Session::get_cluster_state`](crate::Session::get_cluster_state)) with
//! its [`Node`]s and [`NodeAddr`]s. The submodules below are the driver's
//! internals, public only with the `unstable-internals` feature.
//!
//! - `system_tables`: the immutable `Metadata` snapshot and how it is read
//!   from the system tables (topology, schema, schema agreement).
//! - [`metadata`]: the schema model applications read
//!   ([`ClusterState::get_keyspace`]), built by `system_tables`.
//! - `state`: the `state::Snapshot` requests see: nodes
//!   with their pools and the routing table, swapped atomically.
//! - `runtime`: the running cluster (`Cluster`): the control connection,
//!   the tablet store and the task that rebuilds the state on changes.
//! - `control`: the control connection (`ControlHandle`): events,
//!   debounced and periodic refreshes, reconnection to another node.
//! - `translation`: `AddressTranslator`, from the address a node reports
//!   to the address the driver connects to.
//! - [`client_routes`]: [`client_routes::ClientRoutes`], dialling nodes
//!   through the endpoints `system.client_routes` names.
//! - `host_filter`: `HostFilter`, which nodes the driver uses at all.
//! - [`view`]: [`ClusterView`], the read-only snapshot applications get
//!   from [`Session::cluster`](crate::Session::cluster).
//! - [`events`]: [`events::NodeEvents`], the node events applications get
//!   from [`Session::node_events`](crate::Session::node_events).
//! - `location`: datacenter and rack names interned as a `Copy` id, which
//!   results record for their coordinator.
//! - `tablets`: the tablet maps of tablet tables (`TabletStore`):
//!   learned from responses, warmed up from `system.tablets`, invalidated by
//!   schema and topology changes.
//!
//! Layering: this module uses `connection` (to query), `routing` (the
//! replication parser and `TopologyInput`)
//! and `pool` (reconnect backoff); none of those imports it.

pub mod client_routes;
internal_mods!(control);
pub mod events;
internal_mods!(host_filter);
pub(crate) mod location;
internal_mods!(system_tables);
internal_mods!(runtime);
internal_mods!(state);
internal_mods!(tablets);
internal_mods!(translation);
pub mod view;

pub mod metadata;

pub use tablets::TabletWarmup;
pub use view::{
    ClusterState, ClusterStateTokenError, ClusterView, Node, NodeAddr, NodeInfo, NodeRef, Replica,
    ReplicaLocator,
};
// Errors applications see (also at `crate::errors`).
pub use control::{ContactError, ContactFailure, ControlError};
pub use system_tables::MetadataError;
pub use translation::TranslationError;
// The address of the node of a session through ScyllaDB's maintenance socket
// (`SessionBuilder::maintenance_socket`), as the cluster view shows it.
pub use crate::connection::UNIX_SOCKET_NODE_ADDRESS;

#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub use internal::*;

/// The internals' names at this module's root, for the project's tests and
/// benches.
#[cfg(feature = "unstable-internals")]
mod internal {
    pub use super::control::{ControlHandle, ControlOptions, NodeEvent};
    pub use super::host_filter::{
        AllowListHostFilter, DatacenterFilter, FnHostFilter, HostFilter, HostInfo,
    };
    pub use super::system_tables::{
        KeyspaceMeta, Metadata, NodeMeta, NodeOptions, SchemaFetch, TableMeta,
    };
    pub use super::tablets::TabletStore;
    pub use super::translation::{
        AddressTranslator, IdentityTranslator, MapTranslator, UntranslatedPeer,
    };
}
