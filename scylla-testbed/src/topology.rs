//! Who the nodes are: loopback address, host id, datacenter, rack, tokens.
//!
//! A node's identity is fixed when the cluster is built and survives
//! restarts, as a real node's does (its address, host id and tokens live on
//! disk). Everything is derived from the cluster's seed, so a test that
//! fixes the seed gets the same ring every run.
//!
//! Addresses: each cluster takes its own `127.x.y.0/24` block and node `i`
//! (0-based) is `127.x.y.(i+1)`. Linux routes the whole of `127.0.0.0/8` to
//! loopback, so every node can listen on the *same* ports (9042 and 19042 by
//! default) like a real cluster, and parallel tests do not collide. The block
//! is drawn from a process-wide counter mixed with the process id, so test
//! binaries running at once use different blocks too.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use scylla_cql::sharding::Sharder;
use scylla_cql::token::Token;
use uuid::Uuid;

use crate::stats::{ClusterStats, NodeStats};
use crate::tablets::{PlacementNode, TabletRegistry};

/// ScyllaDB's default `SCYLLA_SHARDING_IGNORE_MSB`.
pub const SHARDING_IGNORE_MSB: u8 = 12;

/// The identity of one node (fixed for the cluster's life).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Index in the cluster (0-based).
    pub index: usize,
    /// The node's loopback address (where it listens).
    pub address: IpAddr,
    /// The address it reports in `system.local`, `system.peers(_v2)`: its
    /// listening address, or (with
    /// [`TestClusterBuilder::advertise_unreachable`](crate::TestClusterBuilder::advertise_unreachable))
    /// [`advertised_address`] of it, where nothing listens.
    pub advertised: IpAddr,
    /// The regular CQL port (the same on every node).
    pub port: u16,
    /// The shard-aware port, if this node has one (the same on every node that has one).
    pub shard_aware_port: Option<u16>,
    /// Host id (as in `system.local.host_id`).
    pub host_id: Uuid,
    /// Datacenter name.
    pub datacenter: String,
    /// Rack name.
    pub rack: String,
    /// The node's vnode tokens, sorted.
    pub tokens: Vec<Token>,
    /// Number of shards.
    pub shards: NonZeroU16,
}

impl NodeInfo {
    /// The regular CQL endpoint.
    pub fn cql_addr(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }

    /// The shard-aware endpoint, if the node has one.
    pub fn shard_aware_addr(&self) -> Option<SocketAddr> {
        self.shard_aware_port
            .map(|p| SocketAddr::new(self.address, p))
    }

    /// This node's shard math.
    pub fn sharder(&self) -> Sharder {
        Sharder::new(self.shards, SHARDING_IGNORE_MSB)
    }
}

/// The whole cluster's identity, shared (read-only) by every connection, plus
/// which nodes are up.
#[derive(Debug)]
pub struct Topology {
    nodes: Vec<NodeInfo>,
    up: Vec<AtomicBool>,
    cluster_name: String,
    /// The counters of each node's latest lifetime, so the CQL layer can
    /// serve every node's stats (`testbed.stats`) from any node.
    stats: Mutex<Vec<Option<Arc<NodeStats>>>>,
    /// The tablet maps of tablet tables (ScyllaDB keeps them with the token
    /// metadata: every node knows every table's tablets).
    tablets: TabletRegistry,
    /// Whether `system.peers_v2` exists.
    peers_v2: bool,
    /// Whether coordinators answer UNAVAILABLE when too few replicas are up
    /// (see [`Topology::set_check_live_replicas`]).
    check_live_replicas: AtomicBool,
    /// Whether traced requests are answered with a trace (see
    /// [`Topology::set_record_traces`]).
    record_traces: AtomicBool,
    /// Whether each node is a member of the cluster (see
    /// [`Topology::set_member`]).
    members: Vec<AtomicBool>,
    /// The rows of `system.client_routes`.
    client_routes: crate::routes::ClientRouteTable,
}

impl Topology {
    pub(crate) fn new(nodes: Vec<NodeInfo>, cluster_name: String) -> Self {
        let up = nodes.iter().map(|_| AtomicBool::new(false)).collect();
        let members = nodes.iter().map(|_| AtomicBool::new(true)).collect();
        let stats = Mutex::new(nodes.iter().map(|_| None).collect());
        Topology {
            nodes,
            up,
            cluster_name,
            stats,
            tablets: TabletRegistry::new(0, None),
            peers_v2: false,
            check_live_replicas: AtomicBool::new(false),
            record_traces: AtomicBool::new(false),
            members,
            client_routes: crate::routes::ClientRouteTable::default(),
        }
    }

    /// The rows of `system.client_routes`.
    pub fn client_routes(&self) -> &crate::routes::ClientRouteTable {
        &self.client_routes
    }

    /// Makes node `i` a member of the cluster or not: a node that is not
    /// (decommissioned, not joined yet) is left out of the other nodes'
    /// `system.peers` and `system.peers_v2`. Every node is a member from
    /// the start.
    pub fn set_member(&self, i: usize, member: bool) {
        if let Some(m) = self.members.get(i) {
            m.store(member, Ordering::Release);
        }
    }

    /// Whether node `i` is a member of the cluster (see
    /// [`Topology::set_member`]).
    pub fn is_member(&self, i: usize) -> bool {
        self.members
            .get(i)
            .is_some_and(|m| m.load(Ordering::Acquire))
    }

    /// The same topology with `tablets` as its tablet registry.
    pub(crate) fn with_tablets(mut self, tablets: TabletRegistry) -> Self {
        self.tablets = tablets;
        self
    }

    /// The same topology, serving `system.peers_v2` or not.
    pub(crate) fn with_peers_v2(mut self, on: bool) -> Self {
        self.peers_v2 = on;
        self
    }

    /// Whether the nodes serve `system.peers_v2` (Cassandra 4+ does,
    /// ScyllaDB does not).
    pub fn has_peers_v2(&self) -> bool {
        self.peers_v2
    }

    /// The tablet maps of the cluster's tablet tables.
    pub fn tablets(&self) -> &TabletRegistry {
        &self.tablets
    }

    /// The nodes as tablet placement sees them.
    pub fn placement_nodes(&self) -> Vec<PlacementNode> {
        self.nodes
            .iter()
            .map(|n| PlacementNode {
                datacenter: n.datacenter.clone(),
                shards: n.shards.get(),
            })
            .collect()
    }

    /// Records the counters of node `i`'s new lifetime.
    pub(crate) fn set_stats(&self, i: usize, stats: Arc<NodeStats>) {
        if let Ok(mut s) = self.stats.lock() {
            if let Some(slot) = s.get_mut(i) {
                *slot = Some(stats);
            }
        }
    }

    /// A snapshot of every node's counters (zeros for a node never started).
    pub fn stats_snapshot(&self) -> ClusterStats {
        let all = self.stats.lock().map(|s| s.clone()).unwrap_or_default();
        ClusterStats {
            nodes: (0..self.nodes.len())
                .map(|i| match all.get(i).and_then(Clone::clone) {
                    Some(s) => s.snapshot(self.is_up(i)),
                    None => {
                        let shards = self.nodes.get(i).map_or(1, |n| n.shards.get());
                        NodeStats::new(shards).snapshot(false)
                    }
                })
                .collect(),
        }
    }

    /// Every node, indexed by node.
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// One node, if the index is valid.
    pub fn node(&self, i: usize) -> Option<&NodeInfo> {
        self.nodes.get(i)
    }

    /// The cluster name (as in `system.local.cluster_name`).
    pub fn cluster_name(&self) -> &str {
        &self.cluster_name
    }

    /// Whether node `i` is running (its listeners are open).
    pub fn is_up(&self, i: usize) -> bool {
        self.up.get(i).is_some_and(|u| u.load(Ordering::Acquire))
    }

    /// Makes every coordinator answer UNAVAILABLE (as a real one does) to a
    /// single-partition read or write when fewer of the partition's
    /// replicas are running than its consistency level needs. Off by
    /// default: the nodes share one store, so any node can serve any
    /// partition whatever is down.
    pub fn set_check_live_replicas(&self, on: bool) {
        self.check_live_replicas.store(on, Ordering::Relaxed);
    }

    /// Whether [`Topology::set_check_live_replicas`] is on.
    pub fn checks_live_replicas(&self) -> bool {
        self.check_live_replicas.load(Ordering::Relaxed)
    }

    /// Makes the nodes answer requests with the TRACING flag as a real
    /// coordinator does: the response carries a trace id, and
    /// `system_traces.sessions` and `.events` hold the trace (a few events
    /// recording what the test cluster did). Off by default: a traced
    /// request then fails with an Invalid error
    /// ([`TRACING_UNSUPPORTED`](crate::cql::TRACING_UNSUPPORTED)) and
    /// `system_traces` does not exist.
    pub fn set_record_traces(&self, on: bool) {
        self.record_traces.store(on, Ordering::Relaxed);
    }

    /// Whether [`Topology::set_record_traces`] is on.
    pub fn records_traces(&self) -> bool {
        self.record_traces.load(Ordering::Relaxed)
    }

    pub(crate) fn set_up(&self, i: usize, up: bool) {
        if let Some(u) = self.up.get(i) {
            u.store(up, Ordering::Release);
        }
    }

    /// The node owning `token` first on the ring (the primary replica), with
    /// the ring walked clockwise: the first node token `>= token`, wrapping.
    pub fn primary_replica(&self, token: Token) -> Option<usize> {
        let mut best: Option<(Token, usize)> = None;
        let mut lowest: Option<(Token, usize)> = None;
        for n in &self.nodes {
            for &t in &n.tokens {
                if t >= token && best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, n.index));
                }
                if lowest.is_none_or(|(l, _)| t < l) {
                    lowest = Some((t, n.index));
                }
            }
        }
        best.or(lowest).map(|(_, i)| i)
    }
}

/// Counter of blocks handed out by this process.
static NEXT_BLOCK: AtomicU32 = AtomicU32::new(0);

/// Usable `x.y` blocks: x in 1..=254, y in 0..=255 (x = 0 is left to the
/// usual 127.0.0.1 traffic).
const BLOCKS: u32 = 254 * 256;

/// The next `127.x.y.0/24` block for a cluster of this process.
pub(crate) fn next_block() -> (u8, u8) {
    let n = NEXT_BLOCK.fetch_add(1, Ordering::Relaxed);
    // Spread processes far apart (a multiplier coprime with BLOCKS), then step
    // by one per cluster within the process.
    let base = std::process::id().wrapping_mul(7919) % BLOCKS;
    let b = (base + n) % BLOCKS;
    ((1 + b / 256) as u8, (b % 256) as u8)
}

/// The address of node `i` (0-based) in block `(x, y)`.
pub(crate) fn node_address((x, y): (u8, u8), i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, x, y, (i + 1) as u8))
}

/// The address a node listening on `listen` advertises when advertising
/// unreachable addresses: `127.255.y.n` for `127.x.y.n`. Blocks never use
/// `x = 255`, so nothing listens there and a connection to it is refused on
/// loopback.
pub fn advertised_address(listen: IpAddr) -> IpAddr {
    match listen {
        IpAddr::V4(v4) => {
            let [_, _, y, n] = v4.octets();
            IpAddr::V4(Ipv4Addr::new(127, 255, y, n))
        }
        other => other,
    }
}

/// The deterministic identity parts of node `i`: host id and tokens.
/// `taken` holds every token already given to earlier nodes (kept distinct).
pub(crate) fn node_identity(
    seed: u64,
    i: usize,
    vnodes: usize,
    taken: &mut HashSet<i64>,
) -> (Uuid, Vec<Token>) {
    let mut rng =
        fastrand::Rng::with_seed(seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut id = [0u8; 16];
    rng.fill(&mut id);
    let host_id = uuid::Builder::from_random_bytes(id).into_uuid();
    let mut tokens = Vec::with_capacity(vnodes);
    // Bounded: each draw is a fresh 64-bit value, so collisions are
    // astronomically rare; the loop still stops after a fixed number of tries.
    let mut tries = 0usize;
    while tokens.len() < vnodes && tries < vnodes.saturating_mul(16) + 64 {
        tries += 1;
        let t = rng.i64(i64::MIN + 1..=i64::MAX);
        if taken.insert(t) {
            tokens.push(Token(t));
        }
    }
    tokens.sort_unstable();
    (host_id, tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_valid_and_distinct() {
        let a = next_block();
        let b = next_block();
        assert_ne!(a, b);
        assert!(a.0 >= 1 && b.0 >= 1);
        assert_eq!(
            node_address((3, 4), 2),
            IpAddr::V4(Ipv4Addr::new(127, 3, 4, 3))
        );
    }

    #[test]
    fn identities_are_deterministic_and_distinct() {
        let mut t1 = HashSet::new();
        let a = node_identity(42, 0, 16, &mut t1);
        let b = node_identity(42, 1, 16, &mut t1);
        let mut t2 = HashSet::new();
        assert_eq!(node_identity(42, 0, 16, &mut t2), a);
        assert_ne!(a.0, b.0);
        assert_eq!(a.1.len(), 16);
        assert!(a.1.iter().all(|t| !b.1.contains(t)));
        assert_eq!(t1.len(), 32);
    }

    #[test]
    fn primary_replica_walks_clockwise() {
        let mk = |index: usize, tokens: Vec<i64>| NodeInfo {
            index,
            address: node_address((1, 1), index),
            advertised: node_address((1, 1), index),
            port: 9042,
            shard_aware_port: None,
            host_id: Uuid::nil(),
            datacenter: "dc".into(),
            rack: "r".into(),
            tokens: tokens.into_iter().map(Token).collect(),
            shards: NonZeroU16::MIN,
        };
        let topo = Topology::new(vec![mk(0, vec![-100, 50]), mk(1, vec![0])], "c".into());
        assert_eq!(topo.primary_replica(Token(-200)), Some(0));
        assert_eq!(topo.primary_replica(Token(-1)), Some(1));
        assert_eq!(topo.primary_replica(Token(0)), Some(1));
        assert_eq!(topo.primary_replica(Token(10)), Some(0));
        assert_eq!(topo.primary_replica(Token(60)), Some(0));
    }
}
