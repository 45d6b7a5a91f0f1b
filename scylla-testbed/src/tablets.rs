//! The tablet map of one table: token ranges and their (node, shard) replicas.
//!
//! Pure data, no I/O: how a table of a tablets keyspace is split
//! ([`initial_tablets`]), where its replicas go ([`TabletMap::place`]),
//! which tablet owns a token ([`TabletMap::find`]), and the two changes a
//! test can make ([`TabletMap::split`], [`TabletMap::migrate`]).
//!
//! [`TabletRegistry`] holds the maps of every tablet table of a cluster,
//! shared by all its nodes (ScyllaDB keeps them in its token metadata, which
//! every node has a copy of); the CQL layer creates and drops entries with
//! the tables and asks it who owns a token, `TestCluster` moves and splits
//! tablets through it.
//!
//! A table of a strongly consistent keyspace (`consistency = 'global'`, as
//! ScyllaDB spells it) has a Raft leader per tablet ([`Tablet::leader`]:
//! replica `i % RF` of tablet `i`, so that leaders spread over the nodes,
//! until moved with [`TabletMap::set_leader`]). Every tablet has a version
//! ([`Tablet::routing_v2`], tablets routing v2): a hash of its replica list
//! sorted, then shifted so that the leader comes first on a strongly
//! consistent table.
//!
//! Tablet `i` covers the tokens `(first_token, last_token]`; the first tablet
//! starts at the minimum token (`i64::MIN`) and the last ends at `i64::MAX`,
//! so the tablets cover the whole ring without gaps.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use scylla_cql::types::{ColumnType, CqlValue, NativeType};

/// One tablet as a test sees it (host ids, in token order from
/// `TestCluster::tablets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabletInfo {
    /// Exclusive start of the token range.
    pub first_token: i64,
    /// Inclusive end of the token range.
    pub last_token: i64,
    /// Replicas as (host id, shard).
    pub replicas: Vec<(uuid::Uuid, u16)>,
}

/// One tablet with replicas as (node index, shard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tablet {
    /// Exclusive start of the token range.
    pub first_token: i64,
    /// Inclusive end of the token range.
    pub last_token: i64,
    /// Replicas as (node index, shard).
    pub replicas: Vec<(usize, u16)>,
    /// The Raft leader's index in `replicas` (meaningful on strongly
    /// consistent tables only).
    pub leader: usize,
}

impl Tablet {
    /// The routing of this tablet as tablets routing v2 describes it, with
    /// replicas as (host id, shard) by `host_of` (node index to host id):
    /// the replica list sorted (by host id, then shard), shifted on a
    /// strongly consistent table (`strongly_consistent`) so that the leader comes first, and the
    /// version of that list.
    pub fn routing_v2(
        &self,
        strongly_consistent: bool,
        host_of: impl Fn(usize) -> Option<uuid::Uuid>,
    ) -> (Vec<(uuid::Uuid, u16)>, u64) {
        let tablet = self;
        let mut list: Vec<(uuid::Uuid, u16)> = tablet
            .replicas
            .iter()
            .filter_map(|&(n, s)| Some((host_of(n)?, s)))
            .collect();
        list.sort_unstable();
        if strongly_consistent {
            let leader = tablet
                .replicas
                .get(tablet.leader)
                .and_then(|&(n, s)| Some((host_of(n)?, s)));
            if let Some(at) = leader.and_then(|l| list.iter().position(|r| *r == l)) {
                list.rotate_left(at);
            }
        }
        let version = version_of(&list);
        (list, version)
    }
}

/// A node as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementNode {
    /// The node's datacenter.
    pub datacenter: String,
    /// The node's shard count (at least 1).
    pub shards: u16,
}

/// Why a tablet change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TabletError {
    /// No tablet with this index.
    NoSuchTablet(usize),
    /// The tablet has no replica with this index.
    NoSuchReplica(usize),
    /// The target node is not in the cluster.
    NoSuchNode(usize),
    /// The target shard is not below the node's shard count.
    NoSuchShard(u16),
    /// The target node already holds another replica of this tablet.
    AlreadyReplica(usize),
    /// Splitting would need tablets narrower than one token.
    TooNarrow,
    /// No tablet table with this name (no such table, or a vnode table).
    NoSuchTable(String, String),
}

impl fmt::Display for TabletError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TabletError::NoSuchTablet(i) => write!(f, "no tablet with index {i}"),
            TabletError::NoSuchReplica(i) => write!(f, "the tablet has no replica with index {i}"),
            TabletError::NoSuchNode(i) => write!(f, "no node with index {i}"),
            TabletError::NoSuchShard(s) => write!(f, "the node has no shard {s}"),
            TabletError::AlreadyReplica(n) => {
                write!(f, "node {n} already holds a replica of this tablet")
            }
            TabletError::TooNarrow => write!(f, "a tablet is too narrow to split"),
            TabletError::NoSuchTable(ks, t) => write!(f, "{ks}.{t} is not a tablet table"),
        }
    }
}

impl std::error::Error for TabletError {}

/// The tablet count for a requested `initial`: rounded up to a power of two,
/// at least 1 (ScyllaDB's rule).
pub fn initial_tablets(initial: usize) -> usize {
    initial
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(1 << 30)
        .min(1 << 30)
}

/// The `tablets-routing-v1` custom payload key.
pub const ROUTING_PAYLOAD_KEY: &str = "tablets-routing-v1";

/// The CQL type of the routing payload value:
/// `tuple<bigint, bigint, list<frozen<tuple<uuid, int>>>>`.
pub fn routing_payload_type() -> ColumnType {
    ColumnType::Tuple(vec![
        ColumnType::Native(NativeType::BigInt),
        ColumnType::Native(NativeType::BigInt),
        ColumnType::list(ColumnType::Tuple(vec![
            ColumnType::Native(NativeType::Uuid),
            ColumnType::Native(NativeType::Int),
        ])),
    ])
}

/// The `tablets-routing-v1` payload value for `tablet`, serialized with the
/// protocol crate's generic [`CqlValue`] serializer (independent of the
/// driver's dedicated decoder, so the two cross-check).
pub fn routing_payload(tablet: &TabletInfo) -> Result<Vec<u8>, String> {
    let replicas = tablet
        .replicas
        .iter()
        .map(|(h, s)| {
            CqlValue::Tuple(vec![
                Some(CqlValue::Uuid(*h)),
                Some(CqlValue::Int(i32::from(*s))),
            ])
        })
        .collect();
    let v = CqlValue::Tuple(vec![
        Some(CqlValue::BigInt(tablet.first_token)),
        Some(CqlValue::BigInt(tablet.last_token)),
        Some(CqlValue::List(replicas)),
    ]);
    let mut out = Vec::new();
    scylla_cql::types::serialize::serialize_bytes(&v, &routing_payload_type(), &mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// The `tablets-routing-v2` custom payload key.
pub const ROUTING_V2_PAYLOAD_KEY: &str = "tablets-routing-v2";

/// The `tablets-routing-v2` payload value: the v1 tuple plus the tablet
/// version as a bigint, serialized with the generic [`CqlValue`] serializer
/// (independent of the driver's decoder). `tablet.replicas` must be in the
/// version's order ([`Tablet::routing_v2`]).
pub fn routing_v2_payload(tablet: &TabletInfo, version: u64) -> Result<Vec<u8>, String> {
    let v1 = routing_payload(tablet)?;
    // The v1 tuple's elements followed by one more: a tuple value is the
    // concatenation of its elements as [bytes].
    let mut out = v1;
    out.extend_from_slice(&8i32.to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    Ok(out)
}

/// FNV-1a, 64 bits.
fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// The tablet version of an ordered replica list. The spec only says "a
/// 64-bit hash" of the list and leaves the function to the server: this
/// test cluster's is FNV-1a over each replica's host id bytes and shard
/// (big-endian), in list order.
pub fn version_of(replicas: &[(uuid::Uuid, u16)]) -> u64 {
    replicas
        .iter()
        .fold(0xCBF2_9CE4_8422_2325, |h, (host, shard)| {
            fnv1a(fnv1a(h, host.as_bytes()), &shard.to_be_bytes())
        })
}

/// The tablets of one table, in token order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabletMap {
    tablets: Vec<Tablet>,
    /// Strongly consistent: each tablet has a Raft leader, first in its
    /// routing and part of its version.
    strongly_consistent: bool,
}

impl TabletMap {
    /// `count` tablets (rounded as [`initial_tablets`]) splitting the ring
    /// evenly, with `rf` replicas per datacenter (clamped to the nodes of that
    /// datacenter) placed deterministically from `seed` (mix in the table's
    /// identity so tables differ), balanced across nodes and, on each node,
    /// across shards.
    pub fn place(seed: u64, count: usize, nodes: &[PlacementNode], rf: &[(String, usize)]) -> Self {
        let count = initial_tablets(count);
        let mut rng = fastrand::Rng::with_seed(seed);
        // Per node: how many replicas it has got so far and a seeded shard offset.
        let mut load: Vec<u64> = vec![0; nodes.len()];
        let shard_offset: Vec<u16> = nodes.iter().map(|n| rng.u16(0..n.shards.max(1))).collect();
        let mut per_dc: Vec<(usize, Vec<usize>)> = Vec::new();
        for (dc, f) in rf {
            let mut members: Vec<usize> = nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| &n.datacenter == dc)
                .map(|(i, _)| i)
                .collect();
            rng.shuffle(&mut members);
            let f = (*f).min(members.len());
            if f > 0 {
                per_dc.push((f, members));
            }
        }
        let width = (1u128 << 64) / count as u128;
        let mut tablets = Vec::with_capacity(count);
        for i in 0..count {
            let first = (i64::MIN as i128 + (width * i as u128) as i128) as i64;
            let last = if i + 1 == count {
                i64::MAX
            } else {
                (i64::MIN as i128 + (width * (i as u128 + 1)) as i128) as i64
            };
            let mut replicas = Vec::new();
            for (f, members) in &per_dc {
                for k in 0..*f {
                    let node = members[(i + k) % members.len()];
                    let shards = nodes[node].shards.max(1);
                    let shard =
                        ((load[node] + u64::from(shard_offset[node])) % u64::from(shards)) as u16;
                    load[node] += 1;
                    replicas.push((node, shard));
                }
            }
            // Leaders spread over the replicas (as Raft elections spread
            // them over nodes): `system.tablets`' replica order names the
            // leader first for only some tablets.
            let leader = i % replicas.len().max(1);
            tablets.push(Tablet {
                first_token: first,
                last_token: last,
                replicas,
                leader,
            });
        }
        TabletMap {
            tablets,
            strongly_consistent: false,
        }
    }

    /// Whether the table is strongly consistent.
    pub fn strongly_consistent(&self) -> bool {
        self.strongly_consistent
    }

    /// Makes the table strongly consistent (or not).
    pub fn set_strongly_consistent(&mut self, yes: bool) {
        self.strongly_consistent = yes;
    }

    /// Makes replica `replica` of tablet `tablet` its Raft leader (a leader
    /// change: the tablet's version changes on a strongly consistent
    /// table).
    pub fn set_leader(&mut self, tablet: usize, replica: usize) -> Result<(), TabletError> {
        let t = self
            .tablets
            .get_mut(tablet)
            .ok_or(TabletError::NoSuchTablet(tablet))?;
        if replica >= t.replicas.len() {
            return Err(TabletError::NoSuchReplica(replica));
        }
        t.leader = replica;
        Ok(())
    }

    /// The tablets in token order.
    pub fn tablets(&self) -> &[Tablet] {
        &self.tablets
    }

    /// The index of the tablet owning `token` (the first whose `last_token >=
    /// token`; `i64::MIN` belongs to the first tablet).
    pub fn find(&self, token: i64) -> usize {
        self.tablets
            .partition_point(|t| t.last_token < token)
            .min(self.tablets.len().saturating_sub(1))
    }

    /// Every tablet split in two at its midpoint, with the same replicas.
    pub fn split(&mut self) -> Result<(), TabletError> {
        let mut out = Vec::with_capacity(self.tablets.len() * 2);
        for t in &self.tablets {
            let mid = ((t.first_token as i128 + t.last_token as i128).div_euclid(2)) as i64;
            if mid <= t.first_token || mid >= t.last_token {
                return Err(TabletError::TooNarrow);
            }
            out.push(Tablet {
                first_token: t.first_token,
                last_token: mid,
                replicas: t.replicas.clone(),
                leader: t.leader,
            });
            out.push(Tablet {
                first_token: mid,
                last_token: t.last_token,
                replicas: t.replicas.clone(),
                leader: t.leader,
            });
        }
        self.tablets = out;
        Ok(())
    }

    /// Moves replica `replica` of tablet `tablet` to `(node, shard)`. Moving
    /// to a node that holds another replica of the tablet is refused; moving
    /// to another shard of the same node is allowed.
    pub fn migrate(
        &mut self,
        tablet: usize,
        replica: usize,
        to: (usize, u16),
        nodes: &[PlacementNode],
    ) -> Result<(), TabletError> {
        let node = nodes.get(to.0).ok_or(TabletError::NoSuchNode(to.0))?;
        if to.1 >= node.shards.max(1) {
            return Err(TabletError::NoSuchShard(to.1));
        }
        let t = self
            .tablets
            .get_mut(tablet)
            .ok_or(TabletError::NoSuchTablet(tablet))?;
        if replica >= t.replicas.len() {
            return Err(TabletError::NoSuchReplica(replica));
        }
        if t.replicas
            .iter()
            .enumerate()
            .any(|(k, r)| k != replica && r.0 == to.0)
        {
            return Err(TabletError::AlreadyReplica(to.0));
        }
        t.replicas[replica] = to;
        Ok(())
    }
}

/// The tablet count of a table created with `initial = 0` ("auto") when the
/// cluster has no default: about one tablet per shard of the cluster, which
/// is where ScyllaDB's own sizing starts for an empty table.
pub fn auto_tablets(nodes: &[PlacementNode]) -> usize {
    initial_tablets(nodes.iter().map(|n| usize::from(n.shards.max(1))).sum())
}

/// The maps of every tablet table, by (keyspace, table).
#[derive(Debug, Default)]
struct Maps {
    tables: BTreeMap<(String, String), TabletMap>,
    /// Tables created so far: mixed into the placement seed, so a table that
    /// is dropped and created again gets a fresh placement (as on ScyllaDB),
    /// still deterministic for a given sequence of schema changes.
    created: u64,
}

/// Every tablet map of a cluster (see the module docs).
#[derive(Debug)]
pub struct TabletRegistry {
    seed: u64,
    default_initial: Option<usize>,
    maps: RwLock<Maps>,
}

impl TabletRegistry {
    /// A registry placing replicas from `seed`; `default_initial` is the
    /// cluster-wide default (`Some(n)`: new NetworkTopologyStrategy keyspaces
    /// use tablets with `n` initial tablets per table).
    pub fn new(seed: u64, default_initial: Option<usize>) -> Self {
        TabletRegistry {
            seed,
            default_initial,
            maps: RwLock::new(Maps::default()),
        }
    }

    /// The cluster-wide default (see [`TabletRegistry::new`]).
    pub fn default_initial(&self) -> Option<usize> {
        self.default_initial
    }

    // A poisoned lock (a panic while writing, which the code avoids) still
    // gives the maps: a test server keeps serving.
    fn read(&self) -> RwLockReadGuard<'_, Maps> {
        self.maps.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Maps> {
        self.maps.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Places a new table's tablets (replacing any map under that name).
    pub fn create(
        &self,
        keyspace: &str,
        table: &str,
        count: usize,
        nodes: &[PlacementNode],
        rf: &[(String, usize)],
    ) {
        let mut m = self.write();
        m.created += 1;
        let mut seed = self.seed ^ m.created.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for b in keyspace.bytes().chain([0]).chain(table.bytes()) {
            seed = (seed ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
        let map = TabletMap::place(seed, count, nodes, rf);
        m.tables
            .insert((keyspace.to_owned(), table.to_owned()), map);
    }

    /// Forgets a table's tablets.
    pub fn drop_table(&self, keyspace: &str, table: &str) {
        self.write()
            .tables
            .remove(&(keyspace.to_owned(), table.to_owned()));
    }

    /// Forgets the tablets of every table of a keyspace.
    pub fn drop_keyspace(&self, keyspace: &str) {
        self.write().tables.retain(|(ks, _), _| ks != keyspace);
    }

    /// Whether `keyspace.table` is a tablet table.
    pub fn contains(&self, keyspace: &str, table: &str) -> bool {
        self.read()
            .tables
            .contains_key(&(keyspace.to_owned(), table.to_owned()))
    }

    /// The tablet owning `token` in `keyspace.table`, if that is a tablet table.
    pub fn owner(&self, keyspace: &str, table: &str, token: i64) -> Option<Tablet> {
        self.owner_in(keyspace, table, token).map(|(t, _)| t)
    }

    /// [`owner`](Self::owner), and whether the table is strongly consistent.
    pub fn owner_in(&self, keyspace: &str, table: &str, token: i64) -> Option<(Tablet, bool)> {
        let m = self.read();
        // A map lookup by borrowed parts would need a custom key type; the
        // test server can afford the two small strings.
        let map = m.tables.get(&(keyspace.to_owned(), table.to_owned()))?;
        let t = map.tablets().get(map.find(token)).cloned()?;
        Some((t, map.strongly_consistent()))
    }

    /// A copy of one table's map.
    pub fn map(&self, keyspace: &str, table: &str) -> Option<TabletMap> {
        self.read()
            .tables
            .get(&(keyspace.to_owned(), table.to_owned()))
            .cloned()
    }

    /// A copy of every map, by (keyspace, table).
    pub fn all(&self) -> BTreeMap<(String, String), TabletMap> {
        self.read().tables.clone()
    }

    /// Changes one table's map with `f` (a migration, a split).
    pub fn update(
        &self,
        keyspace: &str,
        table: &str,
        f: impl FnOnce(&mut TabletMap) -> Result<(), TabletError>,
    ) -> Result<(), TabletError> {
        let mut m = self.write();
        let map = m
            .tables
            .get_mut(&(keyspace.to_owned(), table.to_owned()))
            .ok_or_else(|| TabletError::NoSuchTable(keyspace.to_owned(), table.to_owned()))?;
        // Work on a copy so that a refused change leaves the map as it was.
        let mut next = map.clone();
        f(&mut next)?;
        *map = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize, shards: u16) -> Vec<PlacementNode> {
        (0..n)
            .map(|_| PlacementNode {
                datacenter: "dc1".into(),
                shards,
            })
            .collect()
    }

    fn covers_ring(m: &TabletMap) {
        let t = m.tablets();
        assert_eq!(t[0].first_token, i64::MIN);
        assert_eq!(t[t.len() - 1].last_token, i64::MAX);
        for w in t.windows(2) {
            assert_eq!(w[0].last_token, w[1].first_token, "gap or overlap");
            assert!(w[0].first_token < w[0].last_token);
        }
    }

    #[test]
    fn routing_payload_round_trips_through_the_generic_decoder() {
        use scylla_cql::types::deserialize::DeserializeValue;
        let h = uuid::Uuid::from_u128(0x1234);
        let t = TabletInfo {
            first_token: -5,
            last_token: 77,
            replicas: vec![(h, 3), (uuid::Uuid::from_u128(9), 0)],
        };
        let b = routing_payload(&t).unwrap();
        let v = CqlValue::deserialize(&routing_payload_type(), Some(&b)).unwrap();
        let CqlValue::Tuple(parts) = v else {
            panic!("not a tuple: {v:?}")
        };
        assert_eq!(parts[0], Some(CqlValue::BigInt(-5)));
        assert_eq!(parts[1], Some(CqlValue::BigInt(77)));
        let Some(CqlValue::List(reps)) = &parts[2] else {
            panic!("not a list")
        };
        assert_eq!(
            reps[0],
            CqlValue::Tuple(vec![Some(CqlValue::Uuid(h)), Some(CqlValue::Int(3))])
        );
        assert_eq!(reps.len(), 2);
    }

    #[test]
    fn versions_follow_the_sorted_list_and_the_leader() {
        let ns = nodes(3, 2);
        let mut m = TabletMap::place(9, 1, &ns, &[("dc1".into(), 3)]);
        let host = |n: usize| Some(uuid::Uuid::from_u128(100 - n as u128));
        let t = m.tablets()[0].clone();
        let (list, v) = t.routing_v2(m.strongly_consistent(), host);
        // Eventually consistent: sorted, the leader plays no part.
        let mut sorted = list.clone();
        sorted.sort_unstable();
        assert_eq!(list, sorted);
        m.set_leader(0, 2).unwrap();
        let t = m.tablets()[0].clone();
        assert_eq!(
            t.routing_v2(m.strongly_consistent(), host),
            (list.clone(), v)
        );
        // Strongly consistent: the leader first, the rest in sorted order
        // after it, and a leader change is a version change.
        m.set_strongly_consistent(true);
        let (sc, v2) = t.routing_v2(m.strongly_consistent(), host);
        let (n, s) = t.replicas[2];
        assert_eq!(sc[0], (host(n).unwrap(), s));
        assert_ne!(v2, v);
        m.set_leader(0, 1).unwrap();
        let t = m.tablets()[0].clone();
        let (sc1, v3) = t.routing_v2(m.strongly_consistent(), host);
        assert_ne!(v3, v2);
        assert_eq!(sc1[0], (host(t.replicas[1].0).unwrap(), t.replicas[1].1));
        assert_eq!(m.set_leader(0, 3), Err(TabletError::NoSuchReplica(3)));
        // The v2 payload decodes with the driver's codec.
        let info = TabletInfo {
            first_token: t.first_token,
            last_token: t.last_token,
            replicas: sc1.clone(),
        };
        let bytes = routing_v2_payload(&info, v3).unwrap();
        let d = scylla_cql::frame::tablets::TabletRoutingV2::decode(&bytes).unwrap();
        assert_eq!((d.routing.replicas, d.version), (sc1, v3));
    }

    #[test]
    fn initial_rounds_up_to_a_power_of_two() {
        assert_eq!(initial_tablets(0), 1);
        assert_eq!(initial_tablets(1), 1);
        assert_eq!(initial_tablets(5), 8);
        assert_eq!(initial_tablets(16), 16);
    }

    #[test]
    fn placement_is_deterministic_balanced_and_covers_the_ring() {
        let ns = nodes(3, 4);
        let rf = vec![("dc1".to_string(), 3)];
        let a = TabletMap::place(7, 12, &ns, &rf);
        assert_eq!(a, TabletMap::place(7, 12, &ns, &rf));
        assert_eq!(a.tablets().len(), 16);
        covers_ring(&a);
        let mut per_node = [0usize; 3];
        let mut per_shard = vec![[0usize; 4]; 3];
        for t in a.tablets() {
            assert_eq!(t.replicas.len(), 3);
            let mut ids: Vec<_> = t.replicas.iter().map(|r| r.0).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), 3, "a node holds two replicas of one tablet");
            for &(n, s) in &t.replicas {
                per_node[n] += 1;
                per_shard[n][s as usize] += 1;
            }
        }
        assert_eq!(per_node, [16, 16, 16]);
        for s in per_shard {
            assert_eq!(s, [4, 4, 4, 4]);
        }
        // RF 1 on 3 nodes: leaders spread across nodes.
        let b = TabletMap::place(7, 16, &ns, &[("dc1".to_string(), 1)]);
        let mut c = [0usize; 3];
        for t in b.tablets() {
            c[t.replicas[0].0] += 1;
        }
        assert!(c.iter().all(|&x| (5..=6).contains(&x)), "{c:?}");
    }

    #[test]
    fn rf_is_clamped_per_datacenter() {
        let mut ns = nodes(2, 2);
        ns.push(PlacementNode {
            datacenter: "dc2".into(),
            shards: 2,
        });
        let m = TabletMap::place(1, 4, &ns, &[("dc1".into(), 3), ("dc2".into(), 3)]);
        for t in m.tablets() {
            assert_eq!(t.replicas.len(), 3);
            assert_eq!(t.replicas.iter().filter(|r| r.0 == 2).count(), 1);
        }
    }

    #[test]
    fn find_locates_the_owner() {
        let m = TabletMap::place(3, 8, &nodes(3, 2), &[("dc1".into(), 1)]);
        for (i, t) in m.tablets().iter().enumerate() {
            assert_eq!(m.find(t.last_token), i);
            if t.first_token != i64::MIN {
                assert_eq!(m.find(t.first_token), i - 1);
            }
            assert_eq!(m.find(t.first_token.saturating_add(1)), i);
        }
        assert_eq!(m.find(i64::MIN), 0);
    }

    #[test]
    fn split_doubles_and_keeps_replicas() {
        let mut m = TabletMap::place(3, 4, &nodes(3, 2), &[("dc1".into(), 2)]);
        let before = m.clone();
        m.split().unwrap();
        assert_eq!(m.tablets().len(), 8);
        covers_ring(&m);
        for (i, t) in before.tablets().iter().enumerate() {
            assert_eq!(m.tablets()[2 * i].replicas, t.replicas);
            assert_eq!(m.tablets()[2 * i + 1].replicas, t.replicas);
            assert_eq!(m.tablets()[2 * i].first_token, t.first_token);
            assert_eq!(m.tablets()[2 * i + 1].last_token, t.last_token);
        }
    }

    #[test]
    fn registry_creates_drops_and_updates() {
        let ns = nodes(3, 2);
        let rf = [("dc1".to_string(), 2)];
        let r = TabletRegistry::new(5, Some(8));
        assert_eq!(r.default_initial(), Some(8));
        r.create("ks", "a", 4, &ns, &rf);
        r.create("ks", "b", 4, &ns, &rf);
        r.create("other", "a", 2, &ns, &rf);
        assert!(r.contains("ks", "a"));
        assert_ne!(
            r.map("ks", "a"),
            r.map("ks", "b"),
            "tables are placed apart"
        );
        let t = r.owner("ks", "a", 0).unwrap();
        assert!(t.first_token < 0 && t.last_token >= 0);
        assert_eq!(r.owner("ks", "zz", 0), None);
        // A refused change leaves the map alone; an accepted one sticks.
        let before = r.map("ks", "a").unwrap();
        assert_eq!(
            r.update("ks", "a", |m| {
                m.split()?;
                m.migrate(99, 0, (0, 0), &ns)
            }),
            Err(TabletError::NoSuchTablet(99))
        );
        assert_eq!(r.map("ks", "a").unwrap(), before);
        r.update("ks", "a", TabletMap::split).unwrap();
        assert_eq!(r.map("ks", "a").unwrap().tablets().len(), 8);
        assert_eq!(
            r.update("ks", "zz", TabletMap::split),
            Err(TabletError::NoSuchTable("ks".into(), "zz".into()))
        );
        r.drop_table("ks", "b");
        assert!(!r.contains("ks", "b"));
        r.drop_keyspace("ks");
        assert_eq!(r.all().len(), 1);
        // Created again: placed afresh.
        r.create("ks", "a", 4, &ns, &rf);
        assert_ne!(r.map("ks", "a").unwrap(), before);
        assert_eq!(auto_tablets(&ns), 8);
    }

    #[test]
    fn migrate_moves_and_refuses_duplicates() {
        let ns = nodes(3, 2);
        let mut m = TabletMap::place(3, 2, &ns, &[("dc1".into(), 2)]);
        let reps = m.tablets()[0].replicas.clone();
        let free = (0..3).find(|n| reps.iter().all(|r| r.0 != *n)).unwrap();
        m.migrate(0, 1, (free, 1), &ns).unwrap();
        assert_eq!(m.tablets()[0].replicas[1], (free, 1));
        assert_eq!(
            m.migrate(0, 1, (reps[0].0, 0), &ns),
            Err(TabletError::AlreadyReplica(reps[0].0))
        );
        // Same node, other shard: allowed.
        m.migrate(0, 1, (free, 0), &ns).unwrap();
        assert_eq!(
            m.migrate(5, 0, (0, 0), &ns),
            Err(TabletError::NoSuchTablet(5))
        );
        assert_eq!(
            m.migrate(0, 0, (9, 0), &ns),
            Err(TabletError::NoSuchNode(9))
        );
        assert_eq!(
            m.migrate(0, 0, (free, 7), &ns),
            Err(TabletError::NoSuchShard(7))
        );
    }
}
