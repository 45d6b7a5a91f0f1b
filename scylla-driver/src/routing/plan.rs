//! The query plan of one request: an allocation-free iterator over the
//! (node, shard) targets to try, replicas first.
//!
//! # Order
//! 1. Replicas of the token in the local datacenter, skipping nodes that are
//!    down. Rotated by the request's `seed` so that load spreads over the
//!    replicas; for LWT not rotated: the primary replica (first in ring
//!    order) comes first, so that concurrent Paxos rounds on one partition
//!    meet at the same coordinator instead of contending.
//! 2. Replicas in the other datacenters, by datacenter (ring order within
//!    one; plain ring order for SimpleStrategy over several datacenters),
//!    rotated by `seed` unless LWT.
//! 3. The other nodes of the local datacenter, rotated by `seed`.
//! 4. The other nodes of the remote datacenters, rotated by `seed`.
//!
//! With a local rack ([`Plan::with_local_rack`]), steps 1 and 3 each start
//! with the nodes of that rack (rotated among themselves), then the rest of
//! the local datacenter; LWT replicas keep their fixed order.
//!
//! With per-node load ([`Plan::with_loads`]), each step (but LWT replica
//! steps) starts at the better of two of its candidates, by requests in
//! flight and latency average, and goes on in rotation order from there:
//! see [`load`](super::load) for the policy and why no node starves.
//!
//! No node is yielded twice, down nodes (per `is_up`) are never yielded, and
//! with every node up each node is yielded exactly once. Without a local
//! datacenter every node counts as local (steps 2 and 4 are empty). Without a
//! keyspace or a token there are no replicas, so the plan is a round robin
//! over all nodes driven by `seed`, local datacenter first.
//!
//! Each target carries the shard that owns the token on that node
//! (`sharder.shard_of(token)`), for replicas and fallback nodes alike;
//! `None` when there is no token or the node does not shard.
//!
//! # Tablet tables
//! For a table whose keyspace uses tablets, the replicas come from the
//! tablet holding the token ([`RoutingTable::plan_tablet`](super::RoutingTable::plan_tablet))
//! and carry their own shards: a replica target has the shard the tablet
//! names, not the token's shard. Steps and order are the same (local
//! replicas first, rotated by `seed`, the tablet's replica order for LWT),
//! and the fallback steps yield shard `None` (any shard will do).
//!
//! # Cost model
//! Precomputed by [`RoutingTable::build`](super::RoutingTable::build): the
//! sorted ring, the replica list of every ring position for every distinct
//! replication strategy, datacenters and racks interned to integers, and all
//! nodes grouped by datacenter.
//!
//! Per request, to get the first target:
//! - one binary search over the ring's tokens (`log2(ring len)` steps: 15 for
//!   25,600 vnodes) and one slice of the precomputed replica lists;
//! - the local replicas are a precomputed sub-slice of that position's
//!   replicas grouped by datacenter (no scan, no data-dependent branch);
//!   one 32-bit `seed % count` picks where to start among them. Only
//!   SimpleStrategy over several datacenters, whose local count varies by
//!   position, scans its (short) list instead;
//! - `is_up` on each candidate until one is up, and one `shard_of` (a
//!   multiply and a shift).
//!
//! Each further target costs a few comparisons; fallback steps also check
//! "is this node a replica?" by scanning the (short) replica list. The plan
//! is a small fixed-size struct of indices and counters: no heap allocation
//! anywhere, fallback included.

use scylla_cql::sharding::Shard;
use scylla_cql::token::Token;

use std::sync::Arc;

use super::directory::{DcId, Directory, RackId};
use super::load::{mix, NodeLoad, PROBE_EVERY};
use super::replicas::ReplicaView;
use super::topology::NodeIdx;
use super::KeyspaceId;

/// What routing needs to know about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoutingRequest {
    /// The keyspace's placement, resolved once per prepared statement.
    pub keyspace: Option<KeyspaceId>,
    /// The partition key's token, when the statement has a full partition key.
    pub token: Option<Token>,
    /// Whether the request is a lightweight transaction (fixed replica order).
    pub lwt: bool,
    /// The datacenter to prefer; `None` treats all nodes alike.
    pub local_dc: Option<DcId>,
    /// Spreads load: rotates the order among equally good targets. A
    /// per-session counter or a random number both work.
    pub seed: u64,
}

/// One place to send a request: a node and, when known, the shard to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    /// The node.
    pub node: NodeIdx,
    /// The shard owning the request's token on that node, if the node shards
    /// and the request has a token.
    pub shard: Option<Shard>,
}

/// The steps of a plan, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Not started: the first `next` enters `RackReplicas` or `LocalReplicas`.
    Start,
    /// Local replicas in the local rack (with a local rack, not LWT).
    RackReplicas,
    /// Local replicas (outside the local rack, with one).
    LocalReplicas,
    RemoteReplicas,
    /// Other nodes in the local rack (with a local rack).
    RackOthers,
    /// Other nodes of the local datacenter (outside the local rack, with one).
    LocalOthers,
    RemoteOthers,
    Done,
}

/// Which candidates of a step's walk qualify (besides being up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filter {
    /// All of them (the walk's range holds exactly the right nodes).
    All,
    /// Nodes of the local datacenter (replicas not grouped by datacenter).
    Local,
    /// Nodes of other datacenters (replicas not grouped by datacenter).
    Remote,
    /// Nodes that are not replicas (fallback steps).
    NotReplica,
}

/// Which candidates of a step's walk qualify by rack (with a local rack).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RackFilter {
    Any,
    /// In the local rack.
    In,
    /// Not in the local rack.
    Out,
}

/// An iterator over the [`Target`]s of one request; see the
/// [module documentation](self) for the order and the cost.
///
/// It borrows the table and `is_up`, and holds only indices and counters.
pub struct Plan<'a, F> {
    dir: &'a Directory,
    is_up: &'a F,
    token: Option<Token>,
    lwt: bool,
    seed: u64,
    local_dc: Option<DcId>,
    /// The replicas, local ones first when `local_replicas` is known.
    replicas: &'a [NodeIdx],
    /// The range of local replicas in `replicas`; `None`: find them by
    /// scanning (SimpleStrategy over several datacenters, tablets).
    local_replicas: Option<(usize, usize)>,
    /// Tablets: `replica_shards[i]` is the shard of `replicas[i]`. Empty for
    /// ring replicas (their shard is the token's).
    replica_shards: &'a [Shard],
    /// The local datacenter's range of `dir.dc_nodes()` (all of it without a
    /// local datacenter).
    local_nodes: (usize, usize),
    /// The rack to prefer inside the local datacenter.
    rack: Option<RackId>,
    /// Per-node load by node index (empty: ignore load).
    loads: &'a [Arc<NodeLoad>],
    /// The rotation key: the seed's low 32 bits, or for a probe (a request
    /// that ignores load) the number of the probe.
    turn: u32,
    /// This request ignores load (one in `PROBE_EVERY`).
    probe: bool,
    step: Step,
    /// The current step walks `list` inside `hole` (`inside`) or around it,
    /// `pos` running over `0..len` and visiting candidate
    /// `(start + pos) % len`.
    list: &'a [NodeIdx],
    hole: (usize, usize),
    inside: bool,
    filter: Filter,
    rack_filter: RackFilter,
    /// The current walk keeps its order (LWT replicas).
    fixed: bool,
    start: usize,
    len: usize,
    pos: usize,
}

impl<F> std::fmt::Debug for Plan<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("replicas", &self.replicas)
            .field("token", &self.token)
            .field("local_dc", &self.local_dc)
            .field("lwt", &self.lwt)
            .field("rack", &self.rack)
            .field("balanced", &!self.loads.is_empty())
            .field("step", &self.step)
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

impl<'a, F> Plan<'a, F>
where
    F: Fn(NodeIdx) -> bool,
{
    /// A plan over `replicas` (an empty list: no routing information) for
    /// `request`, whose local datacenter the caller has checked to be
    /// `local_dc` (known to `dir`, or `None`).
    pub(crate) fn new(
        dir: &'a Directory,
        replicas: ReplicaView<'a>,
        request: &RoutingRequest,
        local_dc: Option<DcId>,
        is_up: &'a F,
    ) -> Self {
        let local_nodes = match local_dc {
            Some(dc) => dir.dc_span(dc),
            None => (0, dir.node_count()),
        };
        Self {
            dir,
            is_up,
            token: request.token,
            lwt: request.lwt,
            seed: request.seed,
            local_dc,
            replicas: replicas.list,
            local_replicas: replicas.local,
            replica_shards: &[],
            local_nodes,
            rack: None,
            loads: &[],
            turn: request.seed as u32,
            probe: false,
            step: Step::Start,
            list: &[],
            hole: (0, 0),
            inside: true,
            filter: Filter::All,
            rack_filter: RackFilter::Any,
            fixed: false,
            start: 0,
            len: 0,
            pos: 0,
        }
    }

    /// A plan over the replicas of a tablet (`nodes[i]` on `shards[i]`,
    /// in the tablet's replica order): the replica steps walk them by
    /// scanning (tablet replica lists are not grouped by datacenter), and
    /// targets carry the tablet's shards.
    pub(crate) fn with_tablet(
        dir: &'a Directory,
        nodes: &'a [NodeIdx],
        shards: &'a [Shard],
        request: &RoutingRequest,
        local_dc: Option<DcId>,
        is_up: &'a F,
    ) -> Self {
        let view = ReplicaView {
            list: nodes,
            local: match local_dc {
                Some(_) => None,
                None => Some((0, nodes.len())),
            },
        };
        let mut plan = Self::new(dir, view, request, local_dc, is_up);
        // The token's shard means nothing on a tablet table.
        plan.token = None;
        plan.replica_shards = shards;
        plan
    }

    /// Prefers the nodes of `rack` inside the local datacenter: the local
    /// replicas in that rack come first (but for LWT, whose replicas keep
    /// their fixed order), then the other local replicas; likewise for the
    /// other nodes of the local datacenter. `None` changes nothing. Call it
    /// before the first `next`.
    #[must_use]
    pub fn with_local_rack(mut self, rack: Option<RackId>) -> Self {
        self.rack = rack;
        self
    }

    /// Puts the less loaded, faster of two candidates first in each step,
    /// with `loads[i]` the load of node `i` (an empty slice, or a node
    /// without an entry, changes nothing); see [`load`](super::load). One
    /// request in [`PROBE_EVERY`] by seed ignores the load, so that every
    /// node keeps being tried. Call it before the first `next`.
    #[must_use]
    pub fn with_loads(mut self, loads: &'a [Arc<NodeLoad>]) -> Self {
        self.loads = loads;
        let seed = self.seed as u32;
        self.probe = !loads.is_empty() && seed % PROBE_EVERY == 0;
        self.turn = if self.probe { seed / PROBE_EVERY } else { seed };
        self
    }

    /// Whether `node` is in the plan's local datacenter (every node is,
    /// without one).
    #[inline]
    pub fn is_local(&self, node: NodeIdx) -> bool {
        match self.local_dc {
            Some(dc) => self.dir.dc_of(node) == Some(dc),
            None => true,
        }
    }

    /// The seed (its rotation key `turn`) reduced to a rotation in
    /// `0..count` (`count > 0`). A 32-bit remainder: a counter seed still
    /// rotates through every value, and the division is about half the cost
    /// of a 64-bit one. `count` is at most the node count, which fits in
    /// `u32` (node indices are `u32`), so the divisor is not zero.
    #[inline]
    fn rotation(&self, count: usize) -> usize {
        (self.turn % count as u32) as usize
    }

    /// Sets up a walk over `list` inside or around `hole`, rotated by the
    /// seed unless `fixed`.
    fn walk(
        &mut self,
        list: &'a [NodeIdx],
        hole: (usize, usize),
        inside: bool,
        filter: Filter,
        fixed: bool,
    ) {
        let width = hole.1.saturating_sub(hole.0);
        self.list = list;
        self.hole = hole;
        self.inside = inside;
        self.filter = filter;
        self.rack_filter = RackFilter::Any;
        self.fixed = fixed;
        self.len = if inside {
            width
        } else {
            list.len().saturating_sub(width)
        };
        self.pos = 0;
        self.start = if fixed || self.len == 0 {
            0
        } else {
            self.rotation(self.len)
        };
    }

    /// Sets up the walk over the local replicas, those in or out of the
    /// local rack per `rack`.
    fn local_replicas_walk(&mut self, rack: RackFilter) {
        let (replicas, lwt) = (self.replicas, self.lwt);
        match self.local_replicas {
            Some(local) => {
                self.walk(replicas, local, true, Filter::All, lwt);
                self.filter_rack(rack);
            }
            None => {
                self.walk(replicas, (0, 0), false, Filter::Local, lwt);
                self.rack_filter = rack;
                self.fair_start();
            }
        }
    }

    /// Restricts the current walk to the nodes in or out of the local rack.
    fn filter_rack(&mut self, rack: RackFilter) {
        if rack != RackFilter::Any {
            self.rack_filter = rack;
            self.fair_start();
        }
    }

    /// For a walk whose candidates do not all qualify: starts at the k-th
    /// qualifying candidate, `k` the rotation over their count (the first
    /// one for a fixed walk), so each is first equally often. Used when
    /// replicas are not grouped by datacenter, and for rack steps.
    fn fair_start(&mut self) {
        let count = (0..self.len)
            .filter(|&i| self.candidate(i).is_some())
            .count();
        if count == 0 {
            self.len = 0;
            return;
        }
        let k = if self.fixed { 0 } else { self.rotation(count) };
        self.start = (0..self.len)
            .filter(|&i| self.candidate(i).is_some())
            .nth(k)
            .unwrap_or(0);
    }

    /// Moves to the step after the current one and sets up its walk.
    fn advance(&mut self) {
        let all = self.dir.dc_nodes();
        let (replicas, lwt, nodes) = (self.replicas, self.lwt, self.local_nodes);
        let rack_others = self.rack.is_some();
        let rack_replicas = rack_others && !lwt;
        let (local_replicas_rack, local_others_rack) = (
            if rack_replicas {
                RackFilter::Out
            } else {
                RackFilter::Any
            },
            if rack_others {
                RackFilter::Out
            } else {
                RackFilter::Any
            },
        );
        self.step = match self.step {
            Step::Start if rack_replicas => {
                self.local_replicas_walk(RackFilter::In);
                Step::RackReplicas
            }
            Step::Start | Step::RackReplicas => {
                self.local_replicas_walk(local_replicas_rack);
                Step::LocalReplicas
            }
            Step::LocalReplicas if self.local_dc.is_some() => {
                match self.local_replicas {
                    Some(local) => self.walk(replicas, local, false, Filter::All, lwt),
                    None => {
                        self.walk(replicas, (0, 0), false, Filter::Remote, lwt);
                        self.fair_start();
                    }
                }
                Step::RemoteReplicas
            }
            Step::LocalReplicas | Step::RemoteReplicas if rack_others => {
                self.walk(all, nodes, true, Filter::NotReplica, false);
                self.filter_rack(RackFilter::In);
                Step::RackOthers
            }
            Step::LocalReplicas | Step::RemoteReplicas | Step::RackOthers => {
                self.walk(all, nodes, true, Filter::NotReplica, false);
                self.filter_rack(local_others_rack);
                Step::LocalOthers
            }
            Step::LocalOthers if self.local_dc.is_some() => {
                self.walk(all, nodes, false, Filter::NotReplica, false);
                Step::RemoteOthers
            }
            Step::LocalOthers | Step::RemoteOthers | Step::Done => {
                self.len = 0;
                Step::Done
            }
        };
        self.balance();
    }

    /// Power of two choices (see [`load`](super::load)): between the
    /// candidate the rotation puts first and a pseudo-random other one, both
    /// up, starts the walk at the one that promises the faster answer. The
    /// walk still visits every position once.
    fn balance(&mut self) {
        if self.loads.is_empty() || self.probe || self.fixed || self.len < 2 {
            return;
        }
        let Some((_, a)) = self.first_up_from(self.start) else {
            return;
        };
        let offset = 1 + (mix(self.seed) % (self.len as u64 - 1)) as usize;
        let mut from = self.start + offset;
        if from >= self.len {
            from -= self.len;
        }
        let Some((b_pos, b)) = self.first_up_from(from) else {
            return;
        };
        if let (Some(load_a), Some(load_b)) = (self.loads.get(a.index()), self.loads.get(b.index()))
        {
            if a != b && load_b.better_than(load_a) {
                self.start = b_pos;
            }
        }
    }

    /// The first qualifying, up candidate of the current walk at or after
    /// walk position `from` (wrapping), with its position.
    fn first_up_from(&self, from: usize) -> Option<(usize, NodeIdx)> {
        (0..self.len).find_map(|k| {
            let mut i = from + k;
            if i >= self.len {
                i -= self.len;
            }
            let (_, node) = self.candidate(i)?;
            (self.is_up)(node).then_some((i, node))
        })
    }

    /// The `i`-th candidate of the current walk, if it qualifies (apart from
    /// being up).
    #[inline]
    fn candidate(&self, i: usize) -> Option<(usize, NodeIdx)> {
        let (a, b) = self.hole;
        let index = if self.inside {
            a + i
        } else if i < a {
            i
        } else {
            i + (b - a)
        };
        let node = *self.list.get(index)?;
        let qualifies = match self.filter {
            Filter::All => true,
            Filter::Local => self.is_local(node),
            Filter::Remote => !self.is_local(node),
            Filter::NotReplica => !self.replicas.contains(&node),
        };
        let rack_ok = match self.rack_filter {
            RackFilter::Any => true,
            RackFilter::In => self.dir.rack_of(node) == self.rack.map(|r| r.0),
            RackFilter::Out => self.dir.rack_of(node) != self.rack.map(|r| r.0),
        };
        (qualifies && rack_ok).then_some((index, node))
    }

    /// The target for `node`, found at `index` of the current walk's list.
    #[inline]
    fn target(&self, index: usize, node: NodeIdx) -> Target {
        let in_replicas = matches!(
            self.step,
            Step::RackReplicas | Step::LocalReplicas | Step::RemoteReplicas
        );
        if in_replicas && !self.replica_shards.is_empty() {
            return Target {
                node,
                shard: self.replica_shards.get(index).copied(),
            };
        }
        let shard = match (self.token, self.dir.sharder_of(node)) {
            (Some(token), Some(sharder)) => Some(sharder.shard_of(token)),
            _ => None,
        };
        Target { node, shard }
    }
}

impl<F> Iterator for Plan<'_, F>
where
    F: Fn(NodeIdx) -> bool,
{
    type Item = Target;

    fn next(&mut self) -> Option<Target> {
        loop {
            while self.pos < self.len {
                // start < len and pos < len, so one subtraction wraps it.
                let mut i = self.start + self.pos;
                if i >= self.len {
                    i -= self.len;
                }
                self.pos += 1;
                if let Some((index, node)) = self.candidate(i) {
                    if (self.is_up)(node) {
                        return Some(self.target(index, node));
                    }
                }
            }
            if self.step == Step::Done {
                return None;
            }
            self.advance();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.step {
            Step::Done => (0, Some(0)),
            _ => (0, Some(self.dir.node_count())),
        }
    }
}

impl<F> std::iter::FusedIterator for Plan<'_, F> where F: Fn(NodeIdx) -> bool {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_small() {
        // A plan is a handful of words: worth keeping an eye on, since it
        // lives on the stack of every request (216 bytes with the rack and
        // load preferences).
        let size = std::mem::size_of::<Plan<'static, fn(NodeIdx) -> bool>>();
        assert!(size <= 224, "Plan is {size} bytes");
    }
}
