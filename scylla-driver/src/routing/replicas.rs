//! Replica lists of every ring position, precomputed once per distinct
//! replication strategy.
//!
//! A request's replicas are then one binary search on the ring plus one slice
//! of a flat array. Strategies are first *normalized* against the topology
//! (replication factors capped by the nodes that exist, unknown datacenters
//! and zero factors dropped, unknown classes mapped to `SimpleStrategy` with
//! `rf = 1`), so keyspaces whose settings place replicas identically share one
//! precomputed `ReplicaSets`.
//!
//! The algorithms walk the ring clockwise from a position:
//! - `SimpleStrategy`: the first `rf` distinct nodes.
//! - `NetworkTopologyStrategy`, following Cassandra's
//!   `NetworkTopologyStrategy.calculateNaturalReplicas`: for each datacenter
//!   with factor `rf_d` (capped by its `n_d` ring nodes) and `racks_d` racks,
//!   a node of that datacenter is taken when it is new and either its rack is
//!   new, or fewer than `rf_d - racks_d` rack repeats have been taken so far.
//!   So replicas land on distinct racks as long as there are enough racks,
//!   and the shortfall is filled by the first nodes met on racks already used.
//!   Replicas are listed in walk order, so the ring owner comes first whenever
//!   its datacenter has a replica.
//! - `EverywhereStrategy`: every ring node, the owner first. Storing a list
//!   per position would cost nodes x positions (10 MB for 100 nodes of 256
//!   vnodes) and as many walk steps, so one list per owner is stored: the walk
//!   order from the owner's *first* ring position. Every node is a replica
//!   anyway; the order after the owner only spreads load.
//!
//! The cost of building is one ring walk per position, usually a few steps; a
//! walk is bounded by the ring length (reached when a datacenter's last needed
//! rack has few tokens). Memory is `positions x replicas` node indices, twice
//! for strategies with replicas in several datacenters (ring order for
//! [`RoutingTable::replicas`](super::RoutingTable::replicas), grouped by
//! datacenter for the plan): 1.8 MB for 100 nodes x 256 vnodes with 3 x RF 3.

use super::directory::{DcId, Directory};
use super::ring::Ring;
use super::topology::{NodeIdx, ReplicationStrategy};

/// A replication strategy reduced to what decides replica placement on one
/// topology. Ordered so that the set of strategies (and their indices) is
/// deterministic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PlacementRule {
    /// No replica is preferred (`LocalStrategy`, zero factors, empty ring).
    None,
    /// `SimpleStrategy` with `1 <= rf <= ring nodes`.
    Simple(usize),
    /// `NetworkTopologyStrategy`: `(dc, rf)` with `1 <= rf <= ring nodes of dc`,
    /// sorted by dc, non-empty.
    NetworkTopology(Vec<(DcId, usize)>),
    /// `EverywhereStrategy` on a non-empty ring.
    Everywhere,
}

/// Counts of ring nodes and racks per datacenter: the caps on replication.
#[derive(Debug)]
pub(crate) struct RingCensus {
    /// Distinct nodes on the ring.
    nodes: usize,
    /// Distinct ring nodes per datacenter.
    dc_nodes: Vec<usize>,
    /// Distinct racks of ring nodes per datacenter.
    dc_racks: Vec<usize>,
}

impl RingCensus {
    /// Counts the ring's nodes and racks.
    pub(crate) fn new(ring: &Ring, dir: &Directory) -> Self {
        let mut node_seen = vec![false; dir.node_count()];
        let mut rack_seen = vec![false; dir.rack_count()];
        let mut census = Self {
            nodes: 0,
            dc_nodes: vec![0; dir.dc_count()],
            dc_racks: vec![0; dir.dc_count()],
        };
        for &n in ring.owners() {
            let (Some(dc), Some(rack)) = (dir.dc_of(n), dir.rack_of(n)) else {
                continue;
            };
            if !std::mem::replace(&mut node_seen[n.index()], true) {
                census.nodes += 1;
                census.dc_nodes[dc.0 as usize] += 1;
            }
            if !std::mem::replace(&mut rack_seen[rack as usize], true) {
                census.dc_racks[dc.0 as usize] += 1;
            }
        }
        census
    }
}

impl PlacementRule {
    /// Reduces `strategy` against the ring and nodes that exist.
    pub(crate) fn new(
        strategy: &ReplicationStrategy,
        dir: &Directory,
        census: &RingCensus,
    ) -> Self {
        if census.nodes == 0 {
            return Self::None;
        }
        let simple = |rf: usize| match rf.min(census.nodes) {
            0 => Self::None,
            rf => Self::Simple(rf),
        };
        match strategy {
            ReplicationStrategy::Simple { rf } => simple(*rf),
            ReplicationStrategy::Other { .. } => simple(1),
            ReplicationStrategy::Local => Self::None,
            ReplicationStrategy::Everywhere => Self::Everywhere,
            ReplicationStrategy::NetworkTopology { dc_rfs } => {
                let mut rfs: Vec<(DcId, usize)> = dc_rfs
                    .iter()
                    .filter_map(|(name, &rf)| {
                        let dc = dir.dc_id(name)?;
                        let rf = rf.min(census.dc_nodes[dc.0 as usize]);
                        (rf > 0).then_some((dc, rf))
                    })
                    .collect();
                rfs.sort_unstable();
                if rfs.is_empty() {
                    Self::None
                } else {
                    Self::NetworkTopology(rfs)
                }
            }
        }
    }
}

/// The replica lists of every ring position under one placement rule.
///
/// Every list of a rule has the same length (the rule's factors are capped
/// by the nodes on the ring, and a full walk of the ring always fills them),
/// so the lists are stored back to back with a fixed stride and a lookup is
/// one multiplication and one slice: no per-position offsets to load.
///
/// For the plan, each list is also kept grouped by datacenter (in [`DcId`]
/// order, ring order within a datacenter) when every list has the same
/// number of replicas in each datacenter (always for NetworkTopologyStrategy
/// and Everywhere; for SimpleStrategy when the ring spans one datacenter).
/// The local replicas are then one fixed sub-slice, found without scanning:
/// a scan with a data-dependent branch per replica mispredicts often enough
/// to double the cost of choosing a target.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ReplicaSets {
    /// Entries per list (0: the rule prefers no replica).
    stride: usize,
    /// Lists are indexed by the owner node of a position (Everywhere) rather
    /// than by the position itself.
    by_owner: bool,
    /// `stride` entries per ring position (per node when `by_owner`), in
    /// ring-walk order.
    lists: Vec<NodeIdx>,
    /// `lists` with each list grouped by datacenter; empty when `lists` is
    /// already grouped (one datacenter) or cannot be (see `groups`).
    grouped: Vec<NodeIdx>,
    /// `groups[d]`: the range of a grouped list holding datacenter `d`'s
    /// replicas, the same for every list. Empty when the counts per
    /// datacenter vary between lists (SimpleStrategy over several
    /// datacenters): the plan then scans.
    groups: Vec<(usize, usize)>,
}

/// The replicas of one position as the plan walks them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplicaView<'a> {
    /// The replicas, in an order where the local ones are `list[local.0..local.1]`
    /// when `local` is known.
    pub(crate) list: &'a [NodeIdx],
    /// The range of local replicas in `list`; `None`: unknown, scan `list`.
    pub(crate) local: Option<(usize, usize)>,
}

impl ReplicaSets {
    /// Precomputes the replicas of every ring position under `rule`.
    pub(crate) fn new(
        rule: &PlacementRule,
        ring: &Ring,
        dir: &Directory,
        census: &RingCensus,
    ) -> Self {
        let mut walker = Walker::new(ring, dir);
        let mut out = Self::default();
        // Replicas per datacenter in every list, when that is fixed.
        let mut sizes: Option<Vec<usize>> = None;
        match rule {
            PlacementRule::None => return out,
            PlacementRule::Simple(rf) => {
                out.stride = *rf;
                out.lists.reserve_exact(ring.len() * out.stride);
                for pos in 0..ring.len() {
                    walker.simple(pos, *rf, &mut out.lists);
                }
                if census.dc_nodes.iter().filter(|&&n| n > 0).count() == 1 {
                    sizes = Some(census.dc_nodes.iter().map(|&n| n.min(*rf)).collect());
                }
            }
            PlacementRule::NetworkTopology(rfs) => {
                out.stride = rfs.iter().map(|&(_, rf)| rf).sum();
                out.lists.reserve_exact(ring.len() * out.stride);
                let mut dcs = DcQuotas::new(rfs, census, dir.dc_count());
                for pos in 0..ring.len() {
                    walker.network_topology(pos, &mut dcs, &mut out.lists);
                }
                let mut per_dc = vec![0; dir.dc_count()];
                for &(dc, rf) in rfs {
                    per_dc[dc.0 as usize] = rf;
                }
                sizes = Some(per_dc);
            }
            PlacementRule::Everywhere => {
                out.stride = census.nodes;
                out.by_owner = true;
                // Slots of nodes that own no token are never read; they hold
                // the first ring node's list so that every slot is a valid
                // list (which keeps grouping uniform).
                let mut first = None;
                let mut scratch = Vec::with_capacity(out.stride);
                let mut slots: Vec<Option<Vec<NodeIdx>>> = vec![None; dir.node_count()];
                for (pos, &owner) in ring.owners().iter().enumerate() {
                    if slots[owner.index()].is_none() {
                        scratch.clear();
                        walker.simple(pos, census.nodes, &mut scratch);
                        first.get_or_insert_with(|| scratch.clone());
                        slots[owner.index()] = Some(scratch.clone());
                    }
                }
                let first = first.unwrap_or_default();
                out.lists.reserve_exact(dir.node_count() * out.stride);
                for slot in &slots {
                    out.lists.extend_from_slice(slot.as_ref().unwrap_or(&first));
                }
                sizes = Some(census.dc_nodes.clone());
            }
        }
        // A walk once around the ring meets every ring node, so it fills every
        // (capped) factor and each list has exactly `stride` entries. Should
        // that ever fail, prefer no replicas (plans degrade to round robin)
        // over misaligned lists.
        let lists = if out.by_owner {
            dir.node_count()
        } else {
            ring.len()
        };
        debug_assert_eq!(out.lists.len(), lists * out.stride);
        if out.lists.len() != lists * out.stride {
            return Self::default();
        }
        if let Some(sizes) = sizes {
            out.group_by_dc(&sizes, dir);
        }
        out
    }

    /// Fills `grouped` and `groups` given the replicas per datacenter that
    /// every list holds; leaves both empty (scan mode) if a list disagrees.
    fn group_by_dc(&mut self, sizes: &[usize], dir: &Directory) {
        let mut offset = 0;
        let groups: Vec<(usize, usize)> = sizes
            .iter()
            .map(|&n| {
                offset += n;
                (offset - n, offset)
            })
            .collect();
        if offset != self.stride {
            return;
        }
        let dc_index = |n: &NodeIdx| dir.dc_of(*n).map_or(usize::MAX, |d| d.0 as usize);
        let mut grouped = self.lists.clone();
        for list in grouped.chunks_exact_mut(self.stride.max(1)) {
            // Stable: ring order is kept within a datacenter.
            list.sort_by_key(dc_index);
            let fits = groups
                .iter()
                .enumerate()
                .all(|(dc, &(a, b))| list[a..b].iter().all(|n| dc_index(n) == dc));
            if !fits {
                return;
            }
        }
        self.groups = groups;
        // With one datacenter holding replicas the lists are grouped already.
        if sizes.iter().filter(|&&n| n > 0).count() > 1 {
            self.grouped = grouped;
        }
    }

    /// The index of the list of ring position `pos`.
    #[inline]
    fn list_index(&self, ring: &Ring, pos: usize) -> Option<usize> {
        if self.by_owner {
            ring.owner_at(pos).map(NodeIdx::index)
        } else {
            Some(pos)
        }
    }

    /// The replicas of ring position `pos` in ring-walk order (empty when
    /// there are none).
    #[inline]
    pub(crate) fn at(&self, ring: &Ring, pos: usize) -> &[NodeIdx] {
        let Some(i) = self.list_index(ring, pos) else {
            return &[];
        };
        let start = i * self.stride;
        // In range by construction; `get` keeps a mismatch from panicking.
        self.lists.get(start..start + self.stride).unwrap_or(&[])
    }

    /// The replicas of ring position `pos` arranged for a plan preferring
    /// `local_dc` (`None`: every replica is local, in ring-walk order).
    #[inline]
    pub(crate) fn view(&self, ring: &Ring, pos: usize, local_dc: Option<DcId>) -> ReplicaView<'_> {
        let ring_order = self.at(ring, pos);
        let Some(dc) = local_dc else {
            return ReplicaView {
                list: ring_order,
                local: Some((0, ring_order.len())),
            };
        };
        if self.groups.is_empty() {
            return ReplicaView {
                list: ring_order,
                local: None,
            };
        }
        let list = if self.grouped.is_empty() {
            ring_order
        } else {
            // `pos` comes from the same ring the lists were built from, so
            // it has an owner and a list; a mismatch is a bug, and yields no
            // replicas (the plan degrades to round robin) rather than the
            // replicas of another position.
            let start = self.list_index(ring, pos).map(|i| i * self.stride);
            debug_assert!(start.is_some(), "ring position {pos} without a list");
            start
                .and_then(|start| self.grouped.get(start..start + self.stride))
                .unwrap_or(&[])
        };
        // A datacenter without replicas (or unknown) has an empty range.
        let local = self.groups.get(dc.0 as usize).copied().unwrap_or((0, 0));
        ReplicaView {
            list,
            local: Some(local),
        }
    }
}

/// Per-datacenter quotas of a `NetworkTopologyStrategy` walk.
#[derive(Debug)]
struct DcQuotas {
    /// `slot_of_dc[d]`: index into the vectors below, or `usize::MAX` when
    /// the strategy has no replicas in `d`.
    slot_of_dc: Vec<usize>,
    /// Replication factor per slot (already capped by the dc's ring nodes).
    rf: Vec<usize>,
    /// Rack repeats allowed per slot: `rf - racks` (negative: none).
    repeats: Vec<isize>,
    /// Working copies for one walk.
    rf_left: Vec<usize>,
    repeats_left: Vec<isize>,
}

impl DcQuotas {
    fn new(rfs: &[(DcId, usize)], census: &RingCensus, dc_count: usize) -> Self {
        let mut slot_of_dc = vec![usize::MAX; dc_count];
        for (slot, (dc, _)) in rfs.iter().enumerate() {
            slot_of_dc[dc.0 as usize] = slot;
        }
        let rf: Vec<usize> = rfs.iter().map(|&(_, rf)| rf).collect();
        let repeats = rfs
            .iter()
            .map(|&(dc, rf)| rf as isize - census.dc_racks[dc.0 as usize] as isize)
            .collect();
        Self {
            slot_of_dc,
            rf_left: rf.clone(),
            repeats_left: Vec::new(),
            rf,
            repeats,
        }
    }
}

/// Ring-walking scratch space reused across positions: "seen" marks are
/// stamps (the walk number) so nothing needs clearing between walks.
#[derive(Debug)]
struct Walker<'a> {
    ring: &'a Ring,
    dir: &'a Directory,
    stamp: u32,
    node_stamp: Vec<u32>,
    rack_stamp: Vec<u32>,
}

impl<'a> Walker<'a> {
    fn new(ring: &'a Ring, dir: &'a Directory) -> Self {
        Self {
            ring,
            dir,
            stamp: 0,
            node_stamp: vec![0; dir.node_count()],
            rack_stamp: vec![0; dir.rack_count()],
        }
    }

    /// Owners in walk order from `pos`, once around the ring.
    fn walk(&self, pos: usize) -> impl Iterator<Item = NodeIdx> + 'a {
        let owners = self.ring.owners();
        owners[pos..].iter().chain(&owners[..pos]).copied()
    }

    /// Appends the first `rf` distinct nodes from `pos` to `out`.
    fn simple(&mut self, pos: usize, rf: usize, out: &mut Vec<NodeIdx>) {
        self.stamp += 1;
        let mut taken = 0;
        for n in self.walk(pos) {
            if taken == rf {
                break;
            }
            let seen = &mut self.node_stamp[n.index()];
            if *seen != self.stamp {
                *seen = self.stamp;
                out.push(n);
                taken += 1;
            }
        }
    }

    /// Appends the `NetworkTopologyStrategy` replicas of `pos` to `out`.
    fn network_topology(&mut self, pos: usize, q: &mut DcQuotas, out: &mut Vec<NodeIdx>) {
        self.stamp += 1;
        q.rf_left.clone_from(&q.rf);
        q.repeats_left.clone_from(&q.repeats);
        let mut dcs_left = q.rf.len();
        for n in self.walk(pos) {
            if dcs_left == 0 {
                break;
            }
            let (Some(dc), Some(rack)) = (self.dir.dc_of(n), self.dir.rack_of(n)) else {
                continue;
            };
            let slot = q.slot_of_dc[dc.0 as usize];
            if slot == usize::MAX || q.rf_left[slot] == 0 {
                continue;
            }
            if self.node_stamp[n.index()] == self.stamp {
                continue; // already a replica (another of its vnodes)
            }
            if self.rack_stamp[rack as usize] != self.stamp {
                self.rack_stamp[rack as usize] = self.stamp;
            } else if q.repeats_left[slot] > 0 {
                q.repeats_left[slot] -= 1;
            } else {
                continue; // more new racks are still to come in this dc
            }
            self.node_stamp[n.index()] = self.stamp;
            out.push(n);
            q.rf_left[slot] -= 1;
            if q.rf_left[slot] == 0 {
                dcs_left -= 1;
            }
        }
    }
}
