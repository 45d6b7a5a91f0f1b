//! How a built-in load-balancing policy steers one request: its
//! preferences (datacenter, rack, token awareness) replace the session's in
//! the request's routing request, and its restriction (the local datacenter
//! only, one node) filters the plan's targets. Without a policy none of this
//! runs: the request takes the session's plan as it is.
//!
//! Also the same plan as a list, for a caller that asks a built-in policy
//! for it ([`targets`]).

use std::sync::Arc;

use crate::cluster::state::Snapshot;
use crate::cluster::ClusterState;
use crate::cluster::NodeRef;
use crate::policy::load_balancing::{
    preference, DefaultPolicy, FallbackPlan, LoadBalancingPolicy, NodeIdentifier, Preference,
    RoutingInfo, SingleTargetLoadBalancingPolicy,
};
use crate::routing::{NodeIdx, Plan, RackId, RoutingRequest, Target};
use scylla_cql::sharding::Shard;

/// Which of its plan's targets a request may use (a load-balancing
/// policy's restriction).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Only {
    /// All of them.
    Any,
    /// Those in the plan's local datacenter (the policy's preferred one).
    LocalDc,
    /// This node, on this shard if given (else the plan's).
    Node(NodeIdx, Option<Shard>),
    /// None: the request fails without an attempt.
    Nothing,
}

/// Whether a request with load-balancing policy `policy` routes by token
/// (every request without a policy does).
pub(crate) fn token_aware(policy: Option<&Arc<dyn LoadBalancingPolicy>>) -> bool {
    !matches!(
        policy.and_then(|p| preference(&**p)),
        Some(Preference::Default(p)) if !p.is_token_aware()
    )
}

/// Applies a load-balancing policy to one request: its preferences replace
/// the session's in `request` and `local_rack`; returns the restriction on
/// targets. Allocation-free: a
/// [`DefaultPolicy`](crate::policy::load_balancing::DefaultPolicy)'s names
/// are resolved once per routing table, a single target's node is found
/// by host id (a hash lookup) or address (a scan of the nodes).
pub(crate) fn steer(
    pref: Preference<'_>,
    state: &Snapshot,
    request: &mut RoutingRequest,
    local_rack: &mut Option<RackId>,
) -> Only {
    match pref {
        Preference::Default(p) => {
            let resolved = p.resolve(&state.routing);
            request.local_dc = resolved.dc;
            *local_rack = resolved.rack;
            if !p.is_token_aware() {
                request.keyspace = None;
            }
            if !p.shuffles_replicas() {
                // No rotation: replicas in ring order, then the other nodes
                // in a fixed order.
                request.seed = 0;
            }
            match (p.has_preferred_dc(), p.permits_dc_failover(), resolved.dc) {
                (false, _, _) | (true, true, _) => Only::Any,
                (true, false, Some(_)) => Only::LocalDc,
                (true, false, None) => Only::Nothing,
            }
        }
        Preference::Single(p) => {
            let node = match p.node() {
                NodeIdentifier::Node(n) => state.node_of_host(&n.host_id),
                NodeIdentifier::HostId(host) => state.node_of_host(host),
                NodeIdentifier::NodeAddress(addr) => state
                    .nodes
                    .iter()
                    .position(|n| n.address == *addr)
                    .and_then(|i| u32::try_from(i).ok())
                    .map(NodeIdx),
            };
            match node {
                Some(node) => {
                    // Its datacenter first, so that the plan reaches it early.
                    request.local_dc = state.routing.node_dc(node);
                    Only::Node(node, p.shard())
                }
                None => {
                    tracing::debug!(target_node = ?p.node(), "load balancing: the single target is not a known node");
                    Only::Nothing
                }
            }
        }
    }
}

/// The next of `plan`'s targets that `only` permits.
pub(crate) fn restricted_next<F: Fn(NodeIdx) -> bool>(
    plan: &mut Plan<'_, F>,
    only: Only,
) -> Option<Target> {
    // Bounded: the plan yields each node at most once.
    loop {
        let t = plan.next()?;
        match only {
            Only::Any => return Some(t),
            Only::LocalDc if plan.is_local(t.node) => return Some(t),
            Only::Node(node, shard) if t.node == node => {
                return Some(Target {
                    node,
                    shard: shard.or(t.shard),
                })
            }
            Only::Nothing => return None,
            Only::LocalDc | Only::Node(..) => {}
        }
    }
}

/// The plan a request described by `info` takes under the built-in policy
/// `pref`, in `cluster` (every target, in order; nodes without an open
/// connection left out, as requests skip them): what the built-in policies'
/// `pick` and `fallback` give their callers. Allocates: for callers of
/// [`LoadBalancingPolicy::fallback`], not for requests.
pub(crate) fn plan<'a>(
    pref: Preference<'_>,
    info: &RoutingInfo<'_>,
    cluster: &'a crate::cluster::ClusterState,
) -> FallbackPlan<'a> {
    let state: &Snapshot = cluster.view().snapshot();
    let table = info.table;
    let mut request = RoutingRequest {
        keyspace: table.and_then(|t| state.routing.keyspace_id(t.ks_name())),
        token: info.token,
        lwt: info.should_route_as_lwt(),
        local_dc: state.local_dc,
        seed: fastrand::u64(..),
    };
    let mut local_rack = state.local_rack;
    let only = steer(pref, state, &mut request, &mut local_rack);
    let is_up = |idx: NodeIdx| state.node(idx).is_some_and(|n| n.pool.is_connected());
    let tablets = table
        .zip(request.keyspace.and(info.token))
        .and_then(|(t, token)| {
            let slot = cluster
                .view()
                .tablet_store()
                .existing(t.ks_name(), t.table_name())?;
            slot.uses_tablets().then(|| (slot.snapshot(), token))
        });
    let plan = match &tablets {
        Some((snapshot, token)) => match snapshot.lookup(state.layout, *token) {
            Some(replicas) => state.routing.plan_tablet(&request, replicas, &is_up),
            None => state.routing.plan(
                &RoutingRequest {
                    keyspace: None,
                    ..request
                },
                &is_up,
            ),
        },
        None => state.routing.plan(&request, &is_up),
    };
    let mut plan = plan.with_local_rack(local_rack);
    let targets = std::iter::from_fn(|| restricted_next(&mut plan, only))
        .filter_map(|t| {
            let host = state.node(t.node)?.host_id;
            Some((cluster.get_node_by_host_id(host)?, t.shard))
        })
        .collect::<Vec<(NodeRef<'a>, Option<Shard>)>>();
    Box::new(targets.into_iter())
}

// The built-in policies answer `pick` and `fallback` with the plan their
// requests take.
impl LoadBalancingPolicy for SingleTargetLoadBalancingPolicy {
    fn pick<'a>(
        &'a self,
        request: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> Option<(NodeRef<'a>, Option<Shard>)> {
        self.fallback(request, cluster).next()
    }

    fn fallback<'a>(
        &'a self,
        request: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> FallbackPlan<'a> {
        plan(Preference::Single(self), request, cluster)
    }

    fn name(&self) -> String {
        "SingleTargetLoadBalancingPolicy".to_owned()
    }

    fn built_in(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl LoadBalancingPolicy for DefaultPolicy {
    fn pick<'a>(
        &'a self,
        request: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> Option<(NodeRef<'a>, Option<Shard>)> {
        self.fallback(request, cluster).next()
    }

    /// The plan a request with this policy takes (replicas first, see the
    /// [module documentation](crate::policy::load_balancing)), computed for the caller: requests
    /// themselves walk the routing table without asking.
    fn fallback<'a>(
        &'a self,
        request: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> FallbackPlan<'a> {
        plan(Preference::Default(self), request, cluster)
    }

    fn name(&self) -> String {
        "DefaultPolicy".to_owned()
    }

    fn built_in(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
