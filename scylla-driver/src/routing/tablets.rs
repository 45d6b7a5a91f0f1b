//! The tablets of one table: an immutable, sorted snapshot of token ranges
//! `(first, last]` and their replicas as (node, shard). Pure data, no I/O.
//!
//! ScyllaDB splits a tablet table's token range into tablets that it places
//! (and moves) on (node, shard) replicas; the token ring says nothing about
//! them. A driver learns tablets from the `tablets-routing-v1` payload of
//! misrouted requests, and eagerly from `system.tablets`.
//!
//! # Rules
//! - Tablets never overlap: inserting one removes every tablet whose range
//!   overlaps it (the protocol extension's rule), whatever its extent.
//! - Replicas are learned as host ids and resolved to [`NodeIdx`]s by the
//!   caller's resolver when the snapshot is built, so that lookups never hash
//!   a uuid. A host the resolver does not know is skipped (the tablet keeps
//!   its other replicas); a node named twice is kept once.
//! - [`TabletMap::reresolve`] rebuilds the snapshot for another node
//!   numbering (the cluster state was rebuilt), dropping the tablets that
//!   name a node that no longer exists.
//!
//! # Cost
//! # Tablet versions (tablets routing v2)
//! A tablet learned from a `tablets-routing-v2` payload keeps the version
//! the server sent with it ([`Tablet::version`]); EXECUTE requests on a v2
//! connection present a block of it ([`TabletMap::version`]). Tablets from
//! `system.tablets` or from a v1 payload have none.
//!
//! A lookup is one binary search over a contiguous `Vec<i64>` of last
//! tokens and two slices: no allocation, no lock, no hashing. Every update
//! builds a new snapshot (`O(tablets)`): updates are rare (a misroute, a
//! warm-up, a topology change), lookups are per request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use scylla_cql::sharding::Shard;
use scylla_cql::token::Token;
use uuid::Uuid;

use super::topology::NodeIdx;

/// One learned tablet: its range `(first_token, last_token]` and its replicas
/// by host id, in the tablet's replica order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tablet {
    /// The range's exclusive start (`i64::MIN` for a table's first tablet,
    /// which then also holds `i64::MIN`).
    pub first_token: Token,
    /// The range's inclusive end.
    pub last_token: Token,
    /// (host id, shard) of each replica.
    pub replicas: Vec<(Uuid, Shard)>,
    /// The tablet version the server sent with it (tablets routing v2),
    /// `None` when learned otherwise.
    pub version: Option<u64>,
}

impl Tablet {
    /// Whether the tablet's range holds `token`.
    #[cfg(any(test, feature = "unstable-internals"))]
    #[inline]
    pub fn contains(&self, token: Token) -> bool {
        contains(self.first_token.0, self.last_token.0, token.0)
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// Whether the ranges of `self` and `other` share a token.
    pub fn overlaps(&self, other: &Tablet) -> bool {
        // (a1, a2] and (b1, b2] meet iff a1 < b2 and b1 < a2 (the minimum
        // token belongs to a range starting there: ranges are still
        // half-open on the left otherwise, so this holds for it too).
        self.first_token.0 < other.last_token.0 && other.first_token.0 < self.last_token.0
    }
}

#[inline]
fn contains(first: i64, last: i64, t: i64) -> bool {
    (first < t || (first == i64::MIN && t == i64::MIN)) && t <= last
}

/// The replicas of one tablet: `nodes[i]` on shard `shards[i]`, in the
/// tablet's replica order (the primary replica first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TabletReplicas<'a> {
    /// The nodes.
    pub nodes: &'a [NodeIdx],
    /// Their shards, index for index.
    pub shards: &'a [Shard],
}

impl TabletReplicas<'_> {
    #[cfg(any(test, feature = "unstable-internals"))]
    /// Number of replicas.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// The tablets known for one table (see the [module documentation](self)).
///
/// Stored as flat arrays (no allocation per tablet), so that an update
/// copies contiguous runs and resolves only the new tablet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TabletMap {
    /// Last token of each tablet, sorted (tablets never overlap): the
    /// search key, contiguous.
    last: Vec<i64>,
    /// First token of each tablet.
    first: Vec<i64>,
    /// Version of each tablet, if known (tablets routing v2).
    versions: Vec<Option<u64>>,
    /// Tablet `i`'s learned replicas: `hosts[a..b]`.
    host_spans: Vec<(u32, u32)>,
    hosts: Vec<(Uuid, Shard)>,
    /// Tablet `i`'s resolved replicas: `nodes[a..b]` on `shards[a..b]`.
    spans: Vec<(u32, u32)>,
    nodes: Vec<NodeIdx>,
    shards: Vec<Shard>,
}

/// Inserts `t` into sorted, non-overlapping `tablets`, removing those it
/// overlaps.
fn insert_sorted(tablets: &mut Vec<Tablet>, t: Tablet) {
    if t.first_token.0 >= t.last_token.0 {
        return; // an empty range holds nothing
    }
    // Sorted and disjoint: both ends are monotonic, so the overlapping
    // tablets are one run.
    let start = tablets.partition_point(|x| x.last_token.0 <= t.first_token.0);
    let end = tablets.partition_point(|x| x.first_token.0 < t.last_token.0);
    let end = end.max(start);
    tablets.splice(start..end, std::iter::once(t));
}

/// `v` as a `u32` offset. Maps hold far fewer than 2^32 replicas (a few per
/// tablet); saturating keeps a violation from wrapping.
fn offset(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl TabletMap {
    #[cfg(any(test, feature = "unstable-internals"))]
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    fn with_capacity(tablets: usize, replicas: usize) -> Self {
        Self {
            last: Vec::with_capacity(tablets),
            first: Vec::with_capacity(tablets),
            versions: Vec::with_capacity(tablets),
            host_spans: Vec::with_capacity(tablets),
            hosts: Vec::with_capacity(replicas),
            spans: Vec::with_capacity(tablets),
            nodes: Vec::with_capacity(replicas),
            shards: Vec::with_capacity(replicas),
        }
    }

    /// Appends a tablet (after every tablet already in `self`), resolving
    /// its replicas.
    fn push(
        &mut self,
        (first, last, version): (i64, i64, Option<u64>),
        hosts: &[(Uuid, Shard)],
        resolve: &dyn Fn(&Uuid) -> Option<NodeIdx>,
    ) {
        self.first.push(first);
        self.last.push(last);
        self.versions.push(version);
        let h = self.hosts.len();
        self.hosts.extend_from_slice(hosts);
        self.host_spans.push((offset(h), offset(self.hosts.len())));
        let a = self.nodes.len();
        for (host, shard) in hosts {
            let Some(node) = resolve(host) else { continue };
            if self.nodes[a..].contains(&node) {
                continue;
            }
            self.nodes.push(node);
            self.shards.push(*shard);
        }
        self.spans.push((offset(a), offset(self.nodes.len())));
    }

    /// Appends tablets `range` of `other` as they are (already resolved).
    fn copy_run(&mut self, other: &TabletMap, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        let (i, j) = (range.start, range.end - 1);
        self.first.extend_from_slice(&other.first[range.clone()]);
        self.last.extend_from_slice(&other.last[range.clone()]);
        self.versions
            .extend_from_slice(&other.versions[range.clone()]);
        let (h0, h1) = (other.host_spans[i].0, other.host_spans[j].1);
        let hd = offset(self.hosts.len()).wrapping_sub(h0);
        self.hosts
            .extend_from_slice(&other.hosts[h0 as usize..h1 as usize]);
        self.host_spans.extend(
            other.host_spans[range.clone()]
                .iter()
                .map(|&(a, b)| (a.wrapping_add(hd), b.wrapping_add(hd))),
        );
        let (n0, n1) = (other.spans[i].0, other.spans[j].1);
        let nd = offset(self.nodes.len()).wrapping_sub(n0);
        self.nodes
            .extend_from_slice(&other.nodes[n0 as usize..n1 as usize]);
        self.shards
            .extend_from_slice(&other.shards[n0 as usize..n1 as usize]);
        self.spans.extend(
            other.spans[range]
                .iter()
                .map(|&(a, b)| (a.wrapping_add(nd), b.wrapping_add(nd))),
        );
    }

    /// A map of `tablets` (applied in order, later ones replacing earlier
    /// ones they overlap), replicas resolved by `resolve`.
    pub fn from_tablets(
        tablets: impl IntoIterator<Item = Tablet>,
        resolve: &dyn Fn(&Uuid) -> Option<NodeIdx>,
    ) -> Self {
        let mut sorted = Vec::new();
        for t in tablets {
            insert_sorted(&mut sorted, t);
        }
        let replicas = sorted.iter().map(|t| t.replicas.len()).sum();
        let mut out = Self::with_capacity(sorted.len(), replicas);
        for t in &sorted {
            out.push(
                (t.first_token.0, t.last_token.0, t.version),
                &t.replicas,
                resolve,
            );
        }
        out
    }

    /// This map with `tablet` inserted (the tablets it overlaps removed).
    /// Copies the other tablets as they are and resolves only the new one.
    pub fn with_tablet(&self, tablet: Tablet, resolve: &dyn Fn(&Uuid) -> Option<NodeIdx>) -> Self {
        let (first, last) = (tablet.first_token.0, tablet.last_token.0);
        if first >= last {
            return self.clone(); // an empty range holds nothing
        }
        // Sorted and disjoint: the overlapping tablets are one run.
        let start = self.last.partition_point(|&l| l <= first);
        let end = self.first.partition_point(|&f| f < last).max(start);
        let mut out = Self::with_capacity(
            self.len() + 1 - (end - start),
            self.hosts.len() + tablet.replicas.len(),
        );
        out.copy_run(self, 0..start);
        out.push((first, last, tablet.version), &tablet.replicas, resolve);
        out.copy_run(self, end..self.len());
        out
    }

    /// This map resolved by `resolve` (a new node numbering), without the
    /// tablets naming a host `resolve` does not know.
    pub fn reresolve(&self, resolve: &dyn Fn(&Uuid) -> Option<NodeIdx>) -> Self {
        let mut out = Self::with_capacity(self.len(), self.hosts.len());
        for i in 0..self.len() {
            let hosts = self.hosts_of(i);
            if hosts.iter().all(|(h, _)| resolve(h).is_some()) {
                let version = self.versions.get(i).copied().flatten();
                out.push((self.first[i], self.last[i], version), hosts, resolve);
            }
        }
        out
    }

    fn hosts_of(&self, i: usize) -> &[(Uuid, Shard)] {
        let (a, b) = self.host_spans.get(i).copied().unwrap_or((0, 0));
        self.hosts.get(a as usize..b as usize).unwrap_or(&[])
    }

    /// The index of the tablet holding `token`.
    #[inline]
    fn position(&self, token: Token) -> Option<usize> {
        let i = self.last.partition_point(|&l| l < token.0);
        let first = *self.first.get(i)?;
        let last = *self.last.get(i)?;
        contains(first, last, token.0).then_some(i)
    }

    /// The replicas of the tablet holding `token`, if that tablet is known.
    #[inline]
    pub fn lookup(&self, token: Token) -> Option<TabletReplicas<'_>> {
        let i = self.position(token)?;
        let (a, b) = *self.spans.get(i)?;
        let (a, b) = (a as usize, b as usize);
        Some(TabletReplicas {
            nodes: self.nodes.get(a..b)?,
            shards: self.shards.get(a..b)?,
        })
    }

    /// The version of the tablet holding `token`, if that tablet is known
    /// and came with one (tablets routing v2).
    #[inline]
    pub fn version(&self, token: Token) -> Option<u64> {
        let i = self.position(token)?;
        self.versions.get(i).copied().flatten()
    }

    fn tablet_at(&self, i: usize) -> Tablet {
        Tablet {
            first_token: Token(self.first[i]),
            last_token: Token(self.last[i]),
            replicas: self.hosts_of(i).to_vec(),
            version: self.versions.get(i).copied().flatten(),
        }
    }

    /// The tablet holding `token`, as learned (a copy).
    pub fn tablet(&self, token: Token) -> Option<Tablet> {
        self.position(token).map(|i| self.tablet_at(i))
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// Every tablet as learned, sorted by range (copies).
    pub fn to_tablets(&self) -> Vec<Tablet> {
        (0..self.len()).map(|i| self.tablet_at(i)).collect()
    }

    /// Number of tablets.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether no tablet is known.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }
}

/// A tablet map resolved against one node numbering.
#[derive(Debug, Default)]
pub struct ResolvedTablets {
    /// Fingerprint of the node numbering the indices belong to (the
    /// cluster layer's layout).
    pub layout: u64,
    /// The tablets.
    pub map: TabletMap,
}

impl ResolvedTablets {
    /// The replicas of `token`'s tablet, if known and resolved against the
    /// node numbering `layout`.
    #[inline]
    pub fn lookup(&self, layout: u64, token: Token) -> Option<TabletReplicas<'_>> {
        if self.layout != layout {
            return None;
        }
        self.map.lookup(token)
    }
}

/// The tablet routing slot of one table: whether it routes by tablets, and
/// its current [`ResolvedTablets`] snapshot, swapped atomically. Requests
/// read it with one `ArcSwap` load; the cluster layer updates it.
#[derive(Debug)]
pub struct TabletTable {
    keyspace: String,
    table: String,
    enabled: AtomicBool,
    /// Strongly consistent (Raft per tablet): plans keep the tablet's
    /// replica order, the leader first (see `set_leader_first`).
    leader_first: AtomicBool,
    map: ArcSwap<ResolvedTablets>,
}

impl TabletTable {
    /// The table's keyspace and name.
    pub fn table_spec(&self) -> scylla_cql::types::TableSpec<'_> {
        scylla_cql::types::TableSpec::borrowed(&self.keyspace, &self.table)
    }

    /// An empty slot for `keyspace.table`.
    pub fn new(keyspace: &str, table: &str, uses_tablets: bool) -> Self {
        Self {
            keyspace: keyspace.to_owned(),
            table: table.to_owned(),
            enabled: AtomicBool::new(uses_tablets),
            leader_first: AtomicBool::new(false),
            map: ArcSwap::from_pointee(ResolvedTablets::default()),
        }
    }

    /// Whether requests to this table route by tablets.
    #[inline]
    pub fn uses_tablets(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Sets whether the table routes by tablets.
    pub fn set_uses_tablets(&self, yes: bool) {
        self.enabled.store(yes, Ordering::Relaxed);
    }

    /// Whether plans keep the tablet's replica order (the table is
    /// strongly consistent: a `tablets-routing-v2` payload lists the Raft
    /// leader first, and the plan starts there instead of spreading the
    /// load over the replicas).
    #[inline]
    pub fn leader_first(&self) -> bool {
        self.leader_first.load(Ordering::Relaxed)
    }

    /// Sets whether plans keep the tablet's replica order.
    pub fn set_leader_first(&self, yes: bool) {
        self.leader_first.store(yes, Ordering::Relaxed);
    }

    /// The version of `token`'s tablet, if known (tablets routing v2). A
    /// guard load, no reference count and no allocation: one binary search.
    #[inline]
    pub fn version(&self, token: Token) -> Option<u64> {
        self.map.load().map.version(token)
    }

    /// The current snapshot (an `Arc` clone: lock-free, no allocation).
    #[inline]
    pub fn snapshot(&self) -> Arc<ResolvedTablets> {
        self.map.load_full()
    }

    /// Replaces the snapshot by `f(current)`, retrying if another update
    /// raced; returns the tablet counts before and after.
    pub fn update(&self, f: impl Fn(&ResolvedTablets) -> ResolvedTablets) -> (usize, usize) {
        let mut sizes = (0, 0);
        self.map.rcu(|current| {
            let next = f(current);
            sizes = (current.map.len(), next.map.len());
            next
        });
        sizes
    }

    /// Empties the slot; returns how many tablets it held.
    pub fn clear(&self) -> usize {
        self.map
            .swap(Arc::new(ResolvedTablets::default()))
            .map
            .len()
    }

    /// The keyspace.
    pub fn keyspace(&self) -> &str {
        &self.keyspace
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn host(i: u8) -> Uuid {
        Uuid::from_u128(u128::from(i) + 1)
    }

    fn resolve(h: &Uuid) -> Option<NodeIdx> {
        let i = h.as_u128();
        (1..=8).contains(&i).then(|| NodeIdx(i as u32 - 1))
    }

    fn tablet(first: i64, last: i64, replicas: &[(u8, Shard)]) -> Tablet {
        Tablet {
            first_token: Token(first),
            last_token: Token(last),
            replicas: replicas.iter().map(|&(h, s)| (host(h), s)).collect(),
            // Some tablets with a version, some without.
            version: (first % 3 == 0).then_some(first as u64 ^ 0xABCD),
        }
    }

    #[test]
    fn lookup_and_overlap_replacement() {
        let m = TabletMap::from_tablets(
            [
                tablet(i64::MIN, -100, &[(0, 1), (1, 2)]),
                tablet(-100, 0, &[(1, 0)]),
                tablet(0, 100, &[(2, 5)]),
            ],
            &resolve,
        );
        assert_eq!(m.len(), 3);
        let r = m.lookup(Token(i64::MIN)).unwrap();
        assert_eq!(r.nodes, &[NodeIdx(0), NodeIdx(1)]);
        assert_eq!(r.shards, &[1, 2]);
        assert_eq!(
            m.lookup(Token(-100)).unwrap().nodes,
            &[NodeIdx(0), NodeIdx(1)]
        );
        assert_eq!(m.lookup(Token(-99)).unwrap().nodes, &[NodeIdx(1)]);
        assert_eq!(m.lookup(Token(100)).unwrap().shards, &[5]);
        assert!(m.lookup(Token(101)).is_none());
        // A merge of the last two replaces both.
        let m = m.with_tablet(tablet(-100, 100, &[(3, 7)]), &resolve);
        assert_eq!(m.len(), 2);
        assert_eq!(m.lookup(Token(-5)).unwrap().nodes, &[NodeIdx(3)]);
        // A split keeps the untouched half out: the old tablet goes entirely.
        let m = m.with_tablet(tablet(-100, 0, &[(4, 0)]), &resolve);
        assert_eq!(m.len(), 2);
        assert!(m.lookup(Token(50)).is_none());
        // Unknown hosts are skipped, duplicates kept once.
        let m = m.with_tablet(tablet(200, 300, &[(9, 0), (2, 1), (2, 3)]), &resolve);
        assert_eq!(m.lookup(Token(250)).unwrap().nodes, &[NodeIdx(2)]);
        // ... and a re-resolution drops the tablet naming the unknown host.
        let m = m.reresolve(&resolve);
        assert!(m.lookup(Token(250)).is_none());
        assert_eq!(m.len(), 2);
    }

    /// The reference model: a plain list, the overlap rule applied by a scan.
    fn model_insert(model: &mut Vec<Tablet>, t: Tablet) {
        if t.first_token.0 >= t.last_token.0 {
            return;
        }
        model.retain(|x| !x.overlaps(&t));
        model.push(t);
    }

    fn arb_tablet() -> impl Strategy<Value = Tablet> {
        (
            -50i64..50,
            1i64..30,
            proptest::collection::vec((0u8..10, 0u16..4), 0..4),
        )
            .prop_map(|(first, len, r)| tablet(first, first + len, &r))
    }

    proptest! {
        #[test]
        fn matches_the_reference_model(
            inserts in proptest::collection::vec(arb_tablet(), 0..40),
            probes in proptest::collection::vec(-60i64..90, 1..40),
        ) {
            let mut model = Vec::new();
            let mut map = TabletMap::new();
            for t in inserts {
                model_insert(&mut model, t.clone());
                map = map.with_tablet(t, &resolve);
            }
            prop_assert_eq!(map.len(), model.len());
            for p in probes {
                let want = model.iter().find(|t| t.contains(Token(p)));
                prop_assert_eq!(map.tablet(Token(p)), want.cloned());
                prop_assert_eq!(map.version(Token(p)), want.and_then(|t| t.version));
                let got = map.lookup(Token(p));
                match want {
                    None => prop_assert!(got.is_none()),
                    Some(t) => {
                        let mut nodes = Vec::new();
                        let mut shards = Vec::new();
                        for (h, s) in &t.replicas {
                            if let Some(n) = resolve(h) {
                                if !nodes.contains(&n) {
                                    nodes.push(n);
                                    shards.push(*s);
                                }
                            }
                        }
                        let got = got.unwrap();
                        prop_assert_eq!(got.nodes, &nodes[..]);
                        prop_assert_eq!(got.shards, &shards[..]);
                    }
                }
            }
            // Bulk building agrees with one-by-one insertion.
            let bulk = TabletMap::from_tablets(map.to_tablets(), &resolve);
            prop_assert_eq!(&bulk, &map);
            // Re-resolution keeps exactly the tablets whose hosts all resolve.
            model.sort_by_key(|t| t.last_token.0);
            model.retain(|t| t.replicas.iter().all(|(h, _)| resolve(h).is_some()));
            prop_assert_eq!(map.reresolve(&resolve).to_tablets(), model);
        }
    }
}
