//! The cluster as requests see it: nodes with their pools, and the routing
//! table, in one immutable [`Snapshot`] replaced atomically whenever the
//! metadata changes. A request loads it once (lock-free) and only indexes
//! arrays from then on.
//!
//! `Snapshot::build` makes the next state from a metadata snapshot and
//! the previous state: it reuses the pools of known nodes (by host id),
//! starts pools for new ones, shuts those of removed ones down, and builds
//! the routing table. The tasks that call it live in `runtime`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use uuid::Uuid;

use super::location::Location;
use super::system_tables::Metadata;
use crate::metrics::Metrics;
use crate::pool::{NodePool, PoolConfig, ShardAwareTarget};
use crate::routing::{DcId, NodeIdx, NodeLoad, RackId, RoutingTable};

/// One node and its pool.
#[derive(Debug)]
pub struct PooledNode {
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
    /// Its datacenter and rack as an id, which results record for their
    /// coordinator.
    pub(crate) location: Location,
}

/// Nodes (indexed like the routing table's `NodeIdx`), the routing table and
/// the metadata they were built from.
#[derive(Debug)]
pub struct Snapshot {
    /// Nodes, in `NodeIdx` order.
    pub nodes: Vec<Arc<PooledNode>>,
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

/// What the official metrics' open connection count reads: the pools of
/// the session's current cluster state.
impl crate::metrics::OpenConnections for arc_swap::ArcSwap<Snapshot> {
    fn open_connections(&self) -> u64 {
        self.load()
            .nodes
            .iter()
            .map(|n| n.pool.snapshot().len() as u64)
            .sum()
    }
}

impl Snapshot {
    /// The node at `idx`.
    pub fn node(&self, idx: NodeIdx) -> Option<&Arc<PooledNode>> {
        self.nodes.get(idx.0 as usize)
    }

    /// The index of the node with host id `host`.
    pub fn node_of_host(&self, host: &Uuid) -> Option<NodeIdx> {
        self.host_index.get(host).copied()
    }

    pub(super) fn build(
        metadata: Arc<Metadata>,
        previous: Option<&Snapshot>,
        pool_config: &PoolConfig,
        metrics: &Arc<Metrics>,
        local_dc: Option<&str>,
        local_rack: Option<&str>,
    ) -> Snapshot {
        let mut old: HashMap<Uuid, &Arc<PooledNode>> = previous
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
        // New pools start (their refill tasks are spawned) in a random
        // order: a session opens its first connections one at a time
        // (`pool::session_opens`), and in the metadata's order every session
        // of a cluster starting at once would send its first to one node.
        let mut order: Vec<usize> = (0..metadata.nodes.len()).collect();
        fastrand::shuffle(&mut order);
        let mut placed: Vec<Option<Arc<PooledNode>>> = vec![None; order.len()];
        for i in order {
            let Some(m) = metadata.nodes.get(i) else {
                continue;
            };
            let node = match old.remove(&m.host_id) {
                Some(n) if n.address == m.address => Arc::new(PooledNode {
                    host_id: m.host_id,
                    address: m.address,
                    datacenter: m.datacenter.clone(),
                    rack: m.rack.clone(),
                    pool: n.pool.clone(),
                    location: Location::of(&m.datacenter, &m.rack),
                }),
                moved => {
                    if let Some(old) = moved {
                        // Same node, another address (a client route or a
                        // translation changed): the new pool takes over,
                        // the old one drains what is in flight.
                        tracing::info!(host_id = %m.host_id, from = %old.address, to = %m.address, "node reached at a new address; retiring the old pool");
                        old.pool.retire();
                    } else {
                        tracing::info!(node = %m.address, host_id = %m.host_id, dc = %m.datacenter, "new node");
                    }
                    let mut config = pool_config.clone();
                    if m.via_client_route {
                        config.shard_aware_target = if config.route_proxy_protocol {
                            ShardAwareTarget::Dialled
                        } else {
                            ShardAwareTarget::Disabled
                        };
                    }
                    Arc::new(PooledNode {
                        host_id: m.host_id,
                        address: m.address,
                        datacenter: m.datacenter.clone(),
                        rack: m.rack.clone(),
                        pool: NodePool::new(m.address, config, metrics.clone()),
                        location: Location::of(&m.datacenter, &m.rack),
                    })
                }
            };
            if let Some(slot) = placed.get_mut(i) {
                *slot = Some(node);
            }
        }
        let nodes: Vec<Arc<PooledNode>> = placed.into_iter().flatten().collect();
        for gone in old.values() {
            tracing::info!(node = %gone.address, host_id = %gone.host_id, "node removed");
            gone.pool.shutdown();
        }
        let by_host: HashMap<Uuid, &Arc<PooledNode>> =
            nodes.iter().map(|n| (n.host_id, n)).collect();
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
        Snapshot {
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
fn layout_of(nodes: &[Arc<PooledNode>]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for n in nodes {
        for &b in n.host_id.as_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}
