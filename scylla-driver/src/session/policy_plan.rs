//! The targets of one request: the routing table's plan (without a policy,
//! or with a built-in one), or the plan a user's load-balancing policy gives
//! through [`pick`](LoadBalancingPolicy::pick) and
//! [`fallback`](LoadBalancingPolicy::fallback), which is also told how each
//! attempt went.
//!
//! A user's policy sees the cluster as a [`ClusterState`], built once
//! per cluster state (and again, at most once a second, while some node's
//! sharding is not yet known) and shared by the requests that need it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use scylla_cql::sharding::Shard;
use scylla_cql::token::Token;
use scylla_cql::types::TableSpec;
use scylla_cql::Consistency;
use uuid::Uuid;

use crate::cluster::state::Snapshot;
use crate::cluster::tablets::TabletStore;
use crate::cluster::view::ClusterView;
use crate::cluster::ClusterState;
use crate::error::RequestAttemptError;
use crate::policy::load_balancing::{LoadBalancingPolicy, RoutingInfo};
use crate::policy::steering::{restricted_next, Only};
use crate::routing::{NodeIdx, Plan, Target};
use crate::statement::SerialConsistency;

/// Where a request's attempts go, one target at a time, and who hears how
/// they went.
pub(super) trait Targets: Sync {
    /// The next target, `None` when the plan is exhausted.
    fn next(&self) -> Option<Target>;

    /// An attempt on `node` ended after `latency`: answered (`None`) or
    /// failed. Only requests with a load-balancing policy call it.
    fn attempt_finished(
        &self,
        _node: NodeIdx,
        _latency: Duration,
        _error: Option<&RequestAttemptError>,
    ) {
    }
}

/// The routing table's plan, restricted as a built-in policy says.
pub(super) struct Routed<'a, F>(pub(super) Mutex<(Plan<'a, F>, Only)>);

impl<F> Targets for Routed<'_, F>
where
    F: Fn(NodeIdx) -> bool + Sync + Send,
{
    fn next(&self) -> Option<Target> {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (plan, only) = &mut *guard;
        match *only {
            // Without a restriction (every request without a
            // load-balancing policy), the plan's next target as it comes.
            Only::Any => plan.next(),
            only => restricted_next(plan, only),
        }
    }
}

/// The session's cluster as user policies see it, kept while it is current.
#[derive(Default)]
pub(super) struct PolicyClusterCache(ArcSwapOption<Cached>);

struct Cached {
    cluster: Arc<ClusterState>,
    built: Instant,
    /// Every node's sharding was known when it was built.
    complete: bool,
}

/// How often a cluster whose shardings are not all known is rebuilt.
const INCOMPLETE_REBUILD: Duration = Duration::from_secs(1);

impl PolicyClusterCache {
    /// The cluster of `state` for user policies: the cached one while it was
    /// built from `state` (and is complete, or recent), else one built from
    /// the session's `current` state (`state`, unless it changed since the
    /// request loaded it).
    pub(super) fn get(
        &self,
        state: &Snapshot,
        current: impl FnOnce() -> Arc<Snapshot>,
        tablets: &Arc<TabletStore>,
    ) -> Arc<ClusterState> {
        if let Some(c) = &*self.0.load() {
            if std::ptr::eq(Arc::as_ptr(c.cluster.view().snapshot()), state)
                && (c.complete || c.built.elapsed() < INCOMPLETE_REBUILD)
            {
                return Arc::clone(&c.cluster);
            }
        }
        let cluster = Arc::new(ClusterState::new(ClusterView::new(
            current(),
            Arc::clone(tablets),
        )));
        let complete = cluster
            .get_nodes_info()
            .iter()
            .all(|n| n.sharder().is_some());
        self.0.store(Some(Arc::new(Cached {
            cluster: Arc::clone(&cluster),
            built: Instant::now(),
            complete,
        })));
        cluster
    }
}

/// A target as a user policy names it: the node's host id and the shard.
type Named = (Uuid, Option<Shard>);

/// How far a user policy's plan has been taken.
enum Progress {
    /// Nothing asked yet.
    Start,
    /// `pick` gave this target (or none); the fallback is not asked yet.
    Picked(Option<Named>),
    /// The fallback's targets still to take (reversed, taken from the end),
    /// and the picked target, which they skip.
    Fallback(Vec<Named>, Option<Named>),
}

/// The plan of a user's load-balancing policy for one request.
pub(super) struct PolicyTargets<'a> {
    policy: &'a dyn LoadBalancingPolicy,
    cluster: Arc<ClusterState>,
    state: &'a Snapshot,
    consistency: Consistency,
    serial_consistency: Option<SerialConsistency>,
    token: Option<Token>,
    table: Option<TableSpec<'a>>,
    lwt: bool,
    progress: Mutex<Progress>,
}

impl<'a> PolicyTargets<'a> {
    pub(super) fn new(
        policy: &'a dyn LoadBalancingPolicy,
        cluster: Arc<ClusterState>,
        state: &'a Snapshot,
        (consistency, serial_consistency): (Consistency, Option<Consistency>),
        token: Option<Token>,
        table: Option<TableSpec<'a>>,
        lwt: bool,
    ) -> Self {
        PolicyTargets {
            policy,
            cluster,
            state,
            consistency,
            serial_consistency: serial_consistency.and_then(|c| match c {
                Consistency::Serial => Some(SerialConsistency::Serial),
                Consistency::LocalSerial => Some(SerialConsistency::LocalSerial),
                _ => None,
            }),
            token,
            table,
            lwt,
            progress: Mutex::new(Progress::Start),
        }
    }

    fn info(&self) -> RoutingInfo<'_> {
        RoutingInfo {
            consistency: self.consistency,
            serial_consistency: self.serial_consistency,
            token: self.token,
            table: self.table.as_ref(),
            is_confirmed_lwt: self.lwt,
        }
    }

    /// The target of a node the policy named, if the request's cluster
    /// state has it.
    fn target(&self, (host, shard): Named) -> Option<Target> {
        match self.state.node_of_host(&host) {
            Some(node) => Some(Target { node, shard }),
            None => {
                tracing::debug!(%host, policy = %self.policy.name(), "load balancing: the policy named a node the request's cluster state does not have");
                None
            }
        }
    }
}

impl Targets for PolicyTargets<'_> {
    fn next(&self) -> Option<Target> {
        let mut progress = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: every turn either returns or takes a target off the
        // fallback's (finite) list; `Start` and `Picked` are left at once.
        loop {
            match &mut *progress {
                Progress::Start => {
                    let info = self.info();
                    let picked = self
                        .policy
                        .pick(&info, &self.cluster)
                        .map(|(node, shard)| (node.host_id, shard));
                    *progress = Progress::Picked(picked);
                    if let Some(t) = picked.and_then(|p| self.target(p)) {
                        return Some(t);
                    }
                }
                Progress::Picked(picked) => {
                    let picked = *picked;
                    let info = self.info();
                    let mut rest: Vec<Named> = self
                        .policy
                        .fallback(&info, &self.cluster)
                        .map(|(node, shard)| (node.host_id, shard))
                        .collect();
                    rest.reverse();
                    if picked.is_none() && rest.is_empty() {
                        tracing::debug!(policy = %self.policy.name(), "load balancing: the policy gave an empty plan; the request fails without an attempt");
                    }
                    *progress = Progress::Fallback(rest, picked);
                }
                Progress::Fallback(rest, picked) => {
                    let next = rest.pop()?;
                    if Some(next) == *picked {
                        continue;
                    }
                    if let Some(t) = self.target(next) {
                        return Some(t);
                    }
                }
            }
        }
    }

    fn attempt_finished(
        &self,
        node: NodeIdx,
        latency: Duration,
        error: Option<&RequestAttemptError>,
    ) {
        let Some(host) = self.state.node(node).map(|n| n.host_id) else {
            return;
        };
        let Some(node) = self.cluster.get_node_by_host_id(host) else {
            return;
        };
        let info = self.info();
        match error {
            None => self.policy.on_request_success(&info, latency, node),
            Some(e) => self.policy.on_request_failure(&info, latency, node, e),
        }
    }
}
