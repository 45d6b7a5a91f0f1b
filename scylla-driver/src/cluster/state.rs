//! The cluster as requests see it: nodes with their pools, and the routing
//! table, in one immutable [`ClusterState`] replaced atomically whenever the
//! metadata changes. A request loads it once (lock-free) and only indexes
//! arrays from then on.
//!
//! `Cluster` owns the control connection and the task that rebuilds the
//! state: on a new metadata snapshot it reuses the pools of known nodes (by
//! host id), starts pools for new ones, drops those of removed ones, and
//! rebuilds the routing table; on a node's UP event it tells that node's pool
//! to reconnect now.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::{CancellationToken, DropGuard};
use uuid::Uuid;

use super::control::{ControlHandle, NodeEvent};
use super::metadata::Metadata;
use super::tablets::{TabletStore, TabletWarmup};
use crate::metrics::Metrics;
use crate::pool::{NodePool, PoolConfig};
use crate::routing::{DcId, NodeIdx, NodeLoad, RackId, RoutingTable};
use scylla_cql::frame::response::result::{SchemaChange, SchemaChangeTarget, SchemaChangeType};

/// One node and its pool.
#[derive(Debug)]
pub struct Node {
    /// The node's host id.
    pub host_id: Uuid,
    /// Its CQL address.
    pub address: SocketAddr,
    /// Datacenter.
    pub datacenter: String,
    /// Rack.
    pub rack: String,
    /// Its connections.
    pub pool: NodePool,
}

/// Nodes (indexed like the routing table's `NodeIdx`), the routing table and
/// the metadata they were built from.
#[derive(Debug)]
pub struct ClusterState {
    /// Nodes, in `NodeIdx` order.
    pub nodes: Vec<Arc<Node>>,
    /// The precomputed routing table.
    pub routing: RoutingTable,
    /// The metadata snapshot.
    pub metadata: Arc<Metadata>,
    /// The local datacenter's id in the routing table.
    pub local_dc: Option<DcId>,
    /// The preferred rack of the local datacenter, if configured and known.
    pub local_rack: Option<RackId>,
    /// Per-node load (requests in flight, latency average) in `NodeIdx`
    /// order, kept across rebuilds by host id; the session records its
    /// attempts here and plans read it.
    pub loads: Vec<Arc<NodeLoad>>,
    /// Fingerprint of the node numbering (host ids in `NodeIdx` order):
    /// tablet maps resolved against another layout are not used.
    pub layout: u64,
    /// Host id -> node index, for resolving tablet replicas (off the
    /// request path).
    host_index: HashMap<Uuid, NodeIdx>,
}

impl ClusterState {
    /// The node at `idx`.
    pub fn node(&self, idx: NodeIdx) -> Option<&Arc<Node>> {
        self.nodes.get(idx.0 as usize)
    }

    /// The index of the node with host id `host`.
    pub fn node_of_host(&self, host: &Uuid) -> Option<NodeIdx> {
        self.host_index.get(host).copied()
    }

    pub(super) fn build(
        metadata: Arc<Metadata>,
        previous: Option<&ClusterState>,
        pool_config: &PoolConfig,
        metrics: &Arc<Metrics>,
        local_dc: Option<&str>,
        local_rack: Option<&str>,
    ) -> ClusterState {
        let mut old: HashMap<Uuid, &Arc<Node>> = previous
            .map(|p| p.nodes.iter().map(|n| (n.host_id, n)).collect())
            .unwrap_or_default();
        let mut old_loads: HashMap<Uuid, &Arc<NodeLoad>> = previous
            .map(|p| {
                p.nodes
                    .iter()
                    .zip(&p.loads)
                    .map(|(n, l)| (n.host_id, l))
                    .collect()
            })
            .unwrap_or_default();
        let loads = metadata
            .nodes
            .iter()
            .map(|m| old_loads.remove(&m.host_id).cloned().unwrap_or_default())
            .collect();
        let nodes: Vec<Arc<Node>> = metadata
            .nodes
            .iter()
            .map(|m| match old.remove(&m.host_id) {
                Some(n) if n.address == m.address => Arc::new(Node {
                    host_id: m.host_id,
                    address: m.address,
                    datacenter: m.datacenter.clone(),
                    rack: m.rack.clone(),
                    pool: n.pool.clone(),
                }),
                _ => {
                    tracing::info!(node = %m.address, host_id = %m.host_id, dc = %m.datacenter, "new node");
                    Arc::new(Node {
                        host_id: m.host_id,
                        address: m.address,
                        datacenter: m.datacenter.clone(),
                        rack: m.rack.clone(),
                        pool: NodePool::new(m.address, pool_config.clone(), metrics.clone()),
                    })
                }
            })
            .collect();
        for gone in old.values() {
            tracing::info!(node = %gone.address, host_id = %gone.host_id, "node removed");
            gone.pool.shutdown();
        }
        let by_host: HashMap<Uuid, &Arc<Node>> = nodes.iter().map(|n| (n.host_id, n)).collect();
        let input =
            metadata.to_topology_input(&|host| by_host.get(host).and_then(|n| n.pool.sharder()));
        let routing = RoutingTable::build(&input);
        let local_rack = local_dc
            .zip(local_rack)
            .and_then(|(dc, rack)| routing.rack_id(dc, rack));
        let local_dc = local_dc.and_then(|dc| routing.dc_id(dc));
        let host_index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.host_id, NodeIdx(i as u32)))
            .collect();
        let layout = layout_of(&nodes);
        ClusterState {
            nodes,
            routing,
            metadata,
            local_dc,
            local_rack,
            loads,
            layout,
            host_index,
        }
    }
}

/// FNV-1a of the host ids in node order.
fn layout_of(nodes: &[Arc<Node>]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for n in nodes {
        for &b in n.host_id.as_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The control connection, the pools and the current [`ClusterState`].
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) state: Arc<ArcSwap<ClusterState>>,
    pub(crate) control: ControlHandle,
    pub(crate) tablets: Arc<TabletStore>,
    /// Stops the background tasks on [`shutdown`](Self::shutdown).
    cancel: CancellationToken,
    _stop: DropGuard,
}

impl Cluster {
    /// Builds the first state from the control connection's metadata and
    /// starts the task that keeps it current.
    pub(crate) fn start(
        control: ControlHandle,
        updates: watch::Receiver<Arc<Metadata>>,
        pool_config: PoolConfig,
        metrics: Arc<Metrics>,
        local_dc: Option<String>,
        local_rack: Option<String>,
        warmup: TabletWarmup,
    ) -> Cluster {
        // Pools push their sharding as they learn it; the worker rebuilds the
        // routing table with it (the table is the one that routes requests).
        let sharding_changed = Arc::new(tokio::sync::Notify::new());
        let mut pool_config = pool_config;
        pool_config.sharding_changed = Some(sharding_changed.clone());
        let first = ClusterState::build(
            control.metadata(),
            None,
            &pool_config,
            &metrics,
            local_dc.as_deref(),
            local_rack.as_deref(),
        );
        let state = Arc::new(ArcSwap::from_pointee(first));
        let cancel = CancellationToken::new();
        let tablets = Arc::new(
            TabletStore::new(state.clone(), metrics.clone())
                .with_node_options(control.options().nodes.clone()),
        );
        let query = control.options().query;
        tokio::spawn(super::tablets::warmup_task(
            tablets.clone(),
            control.clone(),
            warmup,
            query,
            cancel.clone(),
        ));
        let worker = Worker {
            state: state.clone(),
            pool_config,
            metrics,
            local_dc,
            local_rack,
            tablets: tablets.clone(),
        };
        tokio::spawn(worker.run(
            updates,
            control.node_events(),
            control.schema_changes(),
            sharding_changed,
            cancel.clone(),
        ));
        Cluster {
            state,
            control,
            tablets,
            cancel: cancel.clone(),
            _stop: cancel.drop_guard(),
        }
    }

    /// Stops everything the cluster runs: the state and tablet tasks, the
    /// control connection, and every node's pool (which closes its
    /// connections); then waits, up to `timeout`, until every pool has
    /// closed its connections. Returns whether they all did.
    pub(crate) async fn shutdown(&self, timeout: Duration) -> bool {
        self.cancel.cancel();
        self.control.shutdown();
        let state = self.state.load_full();
        for n in &state.nodes {
            n.pool.shutdown();
        }
        let mut waits = tokio::task::JoinSet::new();
        for n in &state.nodes {
            let n = n.clone();
            waits.spawn(async move { n.pool.wait_for(timeout, |s| s.is_empty()).await });
        }
        let mut all = true;
        while let Some(joined) = waits.join_next().await {
            all &= joined.unwrap_or(false);
        }
        all
    }

    /// Waits until every node's pool has a connection (or `timeout` passes).
    /// Returns the addresses of the nodes still without one.
    pub(crate) async fn wait_for_pools(&self, timeout: Duration) -> Vec<SocketAddr> {
        let state = self.state.load_full();
        let mut waits = tokio::task::JoinSet::new();
        for n in &state.nodes {
            let n = n.clone();
            waits.spawn(
                async move { (n.address, n.pool.wait_for(timeout, |s| !s.is_empty()).await) },
            );
        }
        let mut missing = Vec::new();
        while let Some(joined) = waits.join_next().await {
            if let Ok((addr, false)) = joined {
                missing.push(addr);
            }
        }
        missing
    }
}

struct Worker {
    state: Arc<ArcSwap<ClusterState>>,
    pool_config: PoolConfig,
    metrics: Arc<Metrics>,
    local_dc: Option<String>,
    local_rack: Option<String>,
    tablets: Arc<TabletStore>,
}

impl Worker {
    async fn run(
        self,
        mut updates: watch::Receiver<Arc<Metadata>>,
        mut events: broadcast::Receiver<NodeEvent>,
        mut schema: broadcast::Receiver<SchemaChange>,
        sharding_changed: Arc<tokio::sync::Notify>,
        cancel: CancellationToken,
    ) {
        // Pools learn each node's sharding after their first connection and
        // say so through `sharding_changed`; the routing table carries
        // shards too, so it is rebuilt then (a permit stored while a rebuild
        // ran is not lost: `Notify` keeps it).
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                changed = updates.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let metadata = updates.borrow_and_update().clone();
                    self.rebuild(metadata);
                }
                event = events.recv() => match event {
                    Ok(NodeEvent { address, up: true, .. }) => {
                        let state = self.state.load();
                        for n in state.nodes.iter().filter(|n| n.address.ip() == address.ip()) {
                            tracing::debug!(node = %n.address, "node reported up; reconnecting");
                            n.pool.node_up_hint();
                        }
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                change = schema.recv() => match change {
                    Ok(change) => self.on_schema_change(&change),
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = sharding_changed.notified() => {
                    let state = self.state.load_full();
                    let stale = state.nodes.iter().enumerate().any(|(i, n)| {
                        n.pool.sharder() != state.routing.sharder(NodeIdx(i as u32))
                    });
                    if stale {
                        self.rebuild(state.metadata.clone());
                    }
                }
            }
        }
        for n in self.state.load().nodes.iter() {
            n.pool.shutdown();
        }
    }

    fn rebuild(&self, metadata: Arc<Metadata>) {
        let previous = self.state.load_full();
        let next = ClusterState::build(
            metadata,
            Some(&previous),
            &self.pool_config,
            &self.metrics,
            self.local_dc.as_deref(),
            self.local_rack.as_deref(),
        );
        let layout_changed = next.layout != previous.layout;
        let next = Arc::new(next);
        self.state.store(next.clone());
        self.tablets.sync(&previous, &next);
        if layout_changed {
            // Nodes came or went: tablets moved; read them again.
            self.tablets.request_warmup();
        }
    }

    /// DROP TABLE / DROP KEYSPACE forget tablets at once (a table recreated
    /// under the same name before the next refresh must not inherit them);
    /// a created or altered table of a used keyspace is warmed up.
    fn on_schema_change(&self, change: &SchemaChange) {
        let (keyspace, table) = match &change.target {
            SchemaChangeTarget::Keyspace { keyspace } => (keyspace, None),
            SchemaChangeTarget::Table { keyspace, name } => (keyspace, Some(name)),
            _ => return,
        };
        match (change.change, table) {
            (SchemaChangeType::Dropped, Some(t)) => self.tablets.drop_table(keyspace, t),
            (SchemaChangeType::Dropped, None) => self.tablets.drop_keyspace(keyspace),
            (_, Some(_)) if self.tablets.used_keyspaces().contains(keyspace) => {
                self.tablets.request_warmup()
            }
            _ => {}
        }
    }
}
