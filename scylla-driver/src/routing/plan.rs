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

use super::directory::{DcId, Directory};
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
    /// Not started: the first `next` enters `LocalReplicas`.
    Start,
    LocalReplicas,
    RemoteReplicas,
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
    step: Step,
    /// The current step walks `list` inside `hole` (`inside`) or around it,
    /// `pos` running over `0..len` and visiting candidate
    /// `(start + pos) % len`.
    list: &'a [NodeIdx],
    hole: (usize, usize),
    inside: bool,
    filter: Filter,
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
            step: Step::Start,
            list: &[],
            hole: (0, 0),
            inside: true,
            filter: Filter::All,
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

    #[inline]
    fn is_local(&self, node: NodeIdx) -> bool {
        match self.local_dc {
            Some(dc) => self.dir.dc_of(node) == Some(dc),
            None => true,
        }
    }

    /// `seed` reduced to a rotation in `0..count` (`count > 0`). A 32-bit
    /// remainder: a counter seed still rotates through every value, and the
    /// division is about half the cost of a 64-bit one. `count` is at most
    /// the node count, which fits in `u32` (node indices are `u32`), so the
    /// divisor is not zero.
    #[inline]
    fn rotation(&self, count: usize) -> usize {
        (self.seed as u32 % count as u32) as usize
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

    /// Sets up a walk over the whole replica list for the replicas that are
    /// local (`want_local`) or remote, beginning at the k-th of them. Used
    /// only when replicas are not grouped by datacenter.
    fn scan_replicas(&mut self, want_local: bool) {
        let filter = if want_local {
            Filter::Local
        } else {
            Filter::Remote
        };
        self.walk(self.replicas, (0, 0), false, filter, true);
        let count = self
            .replicas
            .iter()
            .filter(|&&n| self.is_local(n) == want_local)
            .count();
        if count == 0 {
            self.len = 0;
            return;
        }
        let k = if self.lwt { 0 } else { self.rotation(count) };
        self.start = self
            .replicas
            .iter()
            .enumerate()
            .filter(|&(_, &n)| self.is_local(n) == want_local)
            .nth(k)
            .map_or(0, |(i, _)| i);
    }

    /// Moves to the step after the current one and sets up its walk.
    fn advance(&mut self) {
        let all = self.dir.dc_nodes();
        let (replicas, lwt, nodes) = (self.replicas, self.lwt, self.local_nodes);
        self.step = match self.step {
            Step::Start => {
                match self.local_replicas {
                    Some(local) => self.walk(replicas, local, true, Filter::All, lwt),
                    None => self.scan_replicas(true),
                }
                Step::LocalReplicas
            }
            Step::LocalReplicas if self.local_dc.is_some() => {
                match self.local_replicas {
                    Some(local) => self.walk(replicas, local, false, Filter::All, lwt),
                    None => self.scan_replicas(false),
                }
                Step::RemoteReplicas
            }
            Step::LocalReplicas | Step::RemoteReplicas => {
                self.walk(all, nodes, true, Filter::NotReplica, false);
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
        qualifies.then_some((index, node))
    }

    /// The target for `node`, found at `index` of the current walk's list.
    #[inline]
    fn target(&self, index: usize, node: NodeIdx) -> Target {
        let in_replicas = matches!(self.step, Step::LocalReplicas | Step::RemoteReplicas);
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
        // lives on the stack of every request.
        let size = std::mem::size_of::<Plan<'static, fn(NodeIdx) -> bool>>();
        assert!(size <= 192, "Plan is {size} bytes");
    }
}
