//! The precomputed token- and shard-aware routing table: pure data, no I/O.
//!
//! The cluster layer describes the cluster once per topology or schema change
//! ([`TopologyInput`]: nodes by [`NodeIdx`], keyspaces with their
//! [`ReplicationStrategy`]) and builds an immutable [`RoutingTable`] off the
//! hot path; requests then only index its arrays. Nothing here knows about
//! connections or pools: a node is an index, and the caller says which nodes
//! are up.
//!
//! # Layout
//! - [`topology`](super::topology): the input ([`TopologyInput`], [`NodeInfo`],
//!   [`ReplicationStrategy`] and its parser from `system_schema.keyspaces`).
//! - `directory`: per-node facts, datacenters and racks interned ([`DcId`]).
//! - `ring`: sorted tokens and their owners, searched by binary search.
//! - `replicas`: the replica list of every ring position, once per distinct
//!   strategy (SimpleStrategy, NetworkTopologyStrategy, Everywhere).
//! - [`plan`](super::plan): the allocation-free [`Plan`] iterator of [`Target`]s for one
//!   request ([`RoutingRequest`]), with the cost model.
//! - [`load`](super::load): [`NodeLoad`], per-node requests in flight and latency
//!   average, with which plans put a less loaded, faster replica first
//!   ([`Plan::with_loads`]: two choices, never starving a node).
//! - [`tablets`](super::tablets): [`TabletMap`], the tablets of one tablet table (token
//!   ranges with (node, shard) replicas), searched by binary search; plans
//!   over a tablet's replicas come from [`RoutingTable::plan_tablet`].
//!
//! # Example
//! ```
//! use std::collections::BTreeMap;
//! use scylla_cql::token::Token;
//! use scylla_driver::routing::*;
//!
//! let node = |dc: &str, t: i64| NodeInfo {
//!     datacenter: dc.into(),
//!     rack: "r1".into(),
//!     tokens: vec![Token(t)],
//!     sharder: None,
//! };
//! let mut keyspaces = BTreeMap::new();
//! keyspaces.insert("ks".to_owned(), ReplicationStrategy::Simple { rf: 2 });
//! let input = TopologyInput {
//!     nodes: vec![node("dc1", -100), node("dc1", 0), node("dc1", 100)],
//!     keyspaces,
//! };
//! let table = RoutingTable::build(&input);
//! let ks = table.keyspace_id("ks").unwrap(); // once per prepared statement
//! assert_eq!(table.replicas(ks, Token(1)), &[NodeIdx(2), NodeIdx(0)]);
//!
//! let request = RoutingRequest { keyspace: Some(ks), token: Some(Token(1)), ..Default::default() };
//! let is_up = |n: NodeIdx| n != NodeIdx(2);
//! let first = table.plan(&request, &is_up).next().unwrap();
//! assert_eq!(first.node, NodeIdx(0));
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use scylla_cql::sharding::Sharder;
use scylla_cql::token::Token;

pub use super::directory::{DcId, RackId};
pub use super::load::NodeLoad;
pub use super::plan::{Plan, RoutingRequest, Target};
pub use super::tablets::{Tablet, TabletMap, TabletReplicas, TabletTable};
pub use super::topology::{NodeIdx, NodeInfo, ReplicationStrategy, TopologyInput};

use super::directory::Directory;
use super::replicas::{PlacementRule, ReplicaSets, ReplicaView, RingCensus};
use super::ring::Ring;

/// A keyspace's replica placement in one [`RoutingTable`]: resolve it once by
/// name ([`RoutingTable::keyspace_id`]), typically when a statement is
/// prepared, and pass it with every request.
///
/// Keyspaces whose replication places replicas identically share an id. An
/// id carries a tag of the table's keyspace-to-placement mapping: after a
/// schema change that remaps keyspaces, an old id no longer matches
/// ([`RoutingTable::is_current`] is false) and yields no replicas (the plan
/// then degrades to non-token-aware order, never to wrong answers) until the
/// caller resolves the name again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyspaceId {
    placement: u32,
    tag: u32,
}

/// A [`KeyspaceId`] remembered for one keyspace name (a prepared
/// statement's, say) across routing tables: resolved by name once, then
/// reused for as long as the current table maps keyspaces as the table it
/// came from did ([`RoutingTable::is_current`]), so that a request does not
/// look its keyspace up by name.
///
/// ```
/// use std::collections::BTreeMap;
/// use scylla_driver::routing::{KeyspaceIdCache, ReplicationStrategy, RoutingTable, TopologyInput};
///
/// let mut keyspaces = BTreeMap::new();
/// keyspaces.insert("ks".to_owned(), ReplicationStrategy::Simple { rf: 1 });
/// let table = RoutingTable::build(&TopologyInput { nodes: vec![], keyspaces });
/// let cache = KeyspaceIdCache::default();
/// assert_eq!(cache.resolve(&table, "ks"), table.keyspace_id("ks"));
/// // Now without a lookup by name:
/// assert_eq!(cache.resolve(&table, "ks"), table.keyspace_id("ks"));
/// ```
#[derive(Debug, Default)]
pub struct KeyspaceIdCache(AtomicU64);

/// Set in a cached word that holds an id (0 means none yet).
const CACHED: u64 = 1 << 63;

impl KeyspaceIdCache {
    /// The id of keyspace `name` in `table`: the remembered one while
    /// `table` still maps keyspaces the same way, else looked up by name
    /// (and remembered).
    pub fn resolve(&self, table: &RoutingTable, name: &str) -> Option<KeyspaceId> {
        let bits = self.0.load(Ordering::Relaxed);
        // Placement and tag share one word, so a racing store never pairs
        // one table's placement with another's tag.
        if bits & CACHED != 0 {
            let id = KeyspaceId {
                placement: ((bits & !CACHED) >> 32) as u32,
                tag: bits as u32,
            };
            if table.is_current(id) {
                return Some(id);
            }
        }
        let id = table.keyspace_id(name)?;
        // Placements index a table's distinct replication rules: far below
        // 2^31; one that is not is simply not remembered.
        if id.placement < 1 << 31 {
            let bits = CACHED | (u64::from(id.placement) << 32) | u64::from(id.tag);
            self.0.store(bits, Ordering::Relaxed);
        }
        Some(id)
    }
}

/// The immutable routing snapshot of one topology and schema.
///
/// Built by [`RoutingTable::build`] (cost: one ring walk per ring position
/// and distinct replication strategy), then shared (e.g. in an `Arc` swapped
/// atomically on refresh) and only read. Building twice from equal input
/// yields equal tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingTable {
    ring: Ring,
    dir: Directory,
    /// The distinct placement rules, sorted; a [`KeyspaceId`] indexes these.
    rules: Vec<PlacementRule>,
    /// `replica_sets[i]` holds the replica lists of `rules[i]`.
    replica_sets: Vec<ReplicaSets>,
    /// Keyspace name -> index into `rules`.
    keyspaces: BTreeMap<String, u32>,
    /// Fingerprint of `keyspaces`, stamped into every [`KeyspaceId`].
    tag: u32,
    /// Fingerprint of the datacenter and rack names ([`Self::names_tag`]).
    names_tag: u32,
}

impl RoutingTable {
    /// Builds the table for `input`. Never fails: unknown datacenters in a
    /// strategy contribute no replicas, replication factors are capped by the
    /// nodes that exist, and a node without tokens coordinates but
    /// replicates nothing. Only the first `u32::MAX` nodes are considered.
    pub fn build(input: &TopologyInput) -> Self {
        let nodes = &input.nodes[..input.nodes.len().min(u32::MAX as usize)];
        let ring = Ring::new(nodes);
        let dir = Directory::new(nodes);
        let census = RingCensus::new(&ring, &dir);

        let per_keyspace: Vec<(&String, PlacementRule)> = input
            .keyspaces
            .iter()
            .map(|(name, s)| (name, PlacementRule::new(s, &dir, &census)))
            .collect();
        let mut rules: Vec<PlacementRule> = per_keyspace.iter().map(|(_, r)| r.clone()).collect();
        rules.sort_unstable();
        rules.dedup();
        let keyspaces: BTreeMap<String, u32> = per_keyspace
            .iter()
            .filter_map(|(name, rule)| {
                // `rules` holds every keyspace's rule, so the search succeeds;
                // were that broken, the keyspace would route without replicas
                // (any node) rather than by another keyspace's placement.
                match rules.binary_search(rule) {
                    Ok(idx) => Some(((*name).clone(), idx as u32)),
                    Err(_) => {
                        tracing::error!(keyspace = %name, "routing: a keyspace's placement rule is missing (bug); it routes without replicas");
                        None
                    }
                }
            })
            .collect();
        let replica_sets = rules
            .iter()
            .map(|rule| ReplicaSets::new(rule, &ring, &dir, &census))
            .collect();
        let tag = fingerprint(&keyspaces);
        let names_tag = dir.names_fingerprint();
        Self {
            names_tag,
            ring,
            dir,
            rules,
            replica_sets,
            keyspaces,
            tag,
        }
    }

    /// The placement id of keyspace `name`, or `None` for a keyspace the
    /// table does not know (route without a keyspace then).
    pub fn keyspace_id(&self, name: &str) -> Option<KeyspaceId> {
        self.keyspaces.get(name).map(|&placement| KeyspaceId {
            placement,
            tag: self.tag,
        })
    }

    /// Whether `id` was resolved against a table with this table's
    /// keyspace-to-placement mapping (if not, resolve the name again).
    #[inline]
    pub fn is_current(&self, id: KeyspaceId) -> bool {
        id.tag == self.tag
    }

    /// A fingerprint of the table's datacenter and rack names: tables with
    /// equal fingerprints give the names equal [`DcId`]s and [`RackId`]s
    /// (up to a 32-bit hash collision), so ids resolved once can be kept
    /// while it does not change.
    #[inline]
    pub fn names_tag(&self) -> u32 {
        self.names_tag
    }

    /// The id of the datacenter named `name`.
    pub fn dc_id(&self, name: &str) -> Option<DcId> {
        self.dir.dc_id(name)
    }

    /// The id of rack `rack` in datacenter `dc` (for
    /// [`Plan::with_local_rack`]).
    pub fn rack_id(&self, dc: &str, rack: &str) -> Option<RackId> {
        self.dir.rack_id(dc, rack)
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// The name of datacenter `dc`.
    pub fn dc_name(&self, dc: DcId) -> Option<&str> {
        self.dir.dc_name(dc)
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// Number of nodes (indices `0..node_count()`).
    pub fn node_count(&self) -> usize {
        self.dir.node_count()
    }

    /// The datacenter of `node`.
    pub fn node_dc(&self, node: NodeIdx) -> Option<DcId> {
        self.dir.dc_of(node)
    }

    /// The sharder of `node`, if it shards.
    pub fn sharder(&self, node: NodeIdx) -> Option<Sharder> {
        self.dir.sharder_of(node)
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// Number of entries (tokens) on the ring.
    pub fn ring_len(&self) -> usize {
        self.ring.len()
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// The node that owns `token` on the ring (`None` on an empty ring).
    pub fn owner(&self, token: Token) -> Option<NodeIdx> {
        self.ring.owner(token)
    }

    /// The replicas of `token` in keyspace `keyspace`, in ring-walk order
    /// (the owner first when it holds a replica). Empty when the keyspace's
    /// strategy prefers no replica (`LocalStrategy`), the ring is empty, or
    /// `keyspace` is not current. Costs one binary search; never allocates.
    #[inline]
    pub fn replicas(&self, keyspace: KeyspaceId, token: Token) -> &[NodeIdx] {
        if keyspace.tag != self.tag {
            return &[];
        }
        match (
            self.replica_sets.get(keyspace.placement as usize),
            self.ring.position(token),
        ) {
            (Some(sets), Some(pos)) => sets.at(&self.ring, pos),
            _ => &[],
        }
    }

    /// The order in which to try nodes (and shards) for one request; see
    /// [`plan`](super::plan) for the order and its cost. `is_up` is asked about each
    /// candidate as the plan reaches it; nodes it rejects are skipped.
    #[inline]
    pub fn plan<'a, F>(&'a self, request: &RoutingRequest, is_up: &'a F) -> Plan<'a, F>
    where
        F: Fn(NodeIdx) -> bool,
    {
        // An unknown local datacenter is as good as none.
        let local_dc = request
            .local_dc
            .filter(|dc| (dc.0 as usize) < self.dir.dc_count());
        let no_replicas = ReplicaView {
            list: &[],
            local: Some((0, 0)),
        };
        let replicas = match (request.keyspace, request.token) {
            (Some(ks), Some(token)) if ks.tag == self.tag => match (
                self.replica_sets.get(ks.placement as usize),
                self.ring.position(token),
            ) {
                (Some(sets), Some(pos)) => sets.view(&self.ring, pos, local_dc),
                _ => no_replicas,
            },
            _ => no_replicas,
        };
        Plan::new(&self.dir, replicas, request, local_dc, is_up)
    }

    /// The plan of a request to a tablet table whose token falls in a known
    /// tablet with `replicas` (from [`TabletMap::lookup`], resolved against
    /// this table's node numbering): the tablet's replicas with their shards
    /// (local datacenter first, rotated by `seed`; replica order for LWT),
    /// then the other nodes as in [`plan`](Self::plan). `request.keyspace`
    /// is not used. When the tablet is not known, use
    /// [`plan`](Self::plan) without a keyspace instead (any node, local
    /// datacenter first). Allocation-free, like every plan.
    #[inline]
    pub fn plan_tablet<'a, F>(
        &'a self,
        request: &RoutingRequest,
        replicas: TabletReplicas<'a>,
        is_up: &'a F,
    ) -> Plan<'a, F>
    where
        F: Fn(NodeIdx) -> bool,
    {
        let local_dc = request
            .local_dc
            .filter(|dc| (dc.0 as usize) < self.dir.dc_count());
        // Replicas past the node count cannot be routed to; a resolver that
        // matches this table never produces them, but stay safe.
        let n = replicas
            .nodes
            .iter()
            .take_while(|x| x.index() < self.dir.node_count())
            .count()
            .min(replicas.shards.len());
        Plan::with_tablet(
            &self.dir,
            &replicas.nodes[..n],
            &replicas.shards[..n],
            request,
            local_dc,
            is_up,
        )
    }
}

/// FNV-1a of the keyspace-to-placement mapping, folded to 32 bits: a cheap,
/// deterministic tag (equal mappings, equal tags) that makes a stale
/// [`KeyspaceId`] detectable with one comparison.
fn fingerprint(keyspaces: &BTreeMap<String, u32>) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, idx) in keyspaces {
        eat(&(name.len() as u64).to_le_bytes());
        eat(name.as_bytes());
        eat(&idx.to_le_bytes());
    }
    (h ^ (h >> 32)) as u32
}
