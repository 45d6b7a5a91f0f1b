//! The cluster as the driver knows it: nodes, keyspaces and tables, kept
//! current by the control connection.
//!
//! - [`metadata`]: the immutable [`Metadata`] snapshot and how it is read
//!   from the system tables (topology, schema, schema agreement).
//! - [`state`]: the [`ClusterState`](state::ClusterState) requests see: nodes
//!   with their pools and the routing table, swapped atomically.
//! - `runtime`: the running cluster (`Cluster`): the control connection,
//!   the tablet store and the task that rebuilds the state on changes.
//! - [`control`]: the control connection ([`ControlHandle`]): events,
//!   debounced and periodic refreshes, reconnection to another node.
//! - [`translation`]: [`AddressTranslator`], from the address a node reports
//!   to the address the driver connects to.
//! - [`host_filter`]: [`HostFilter`], which nodes the driver uses at all.
//! - [`view`]: [`ClusterView`](view::ClusterView), the read-only snapshot
//!   applications get from [`Session::cluster`](crate::Session::cluster).
//! - [`tablets`]: the tablet maps of tablet tables ([`TabletStore`]):
//!   learned from responses, warmed up from `system.tablets`, invalidated by
//!   schema and topology changes.
//!
//! Layering: this module uses `connection` (to query), `routing` (the
//! replication parser and [`TopologyInput`](crate::routing::TopologyInput))
//! and `pool` (reconnect backoff); none of those imports it.

pub mod control;
pub mod host_filter;
pub mod metadata;
pub(crate) mod runtime;
pub mod state;
pub mod tablets;
pub mod translation;
pub mod view;

pub use control::{
    ContactError, ContactFailure, ControlError, ControlHandle, ControlOptions, NodeEvent,
};
pub use host_filter::{DatacenterFilter, FnHostFilter, HostFilter, HostInfo};
pub use metadata::{KeyspaceMeta, Metadata, MetadataError, NodeMeta, NodeOptions, TableMeta};
pub use tablets::{TabletStore, TabletWarmup};
pub use translation::{AddressTranslator, IdentityTranslator, MapTranslator, TranslationError};
