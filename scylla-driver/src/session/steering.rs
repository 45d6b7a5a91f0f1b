//! How a load-balancing policy steers one request: its preferences
//! (datacenter, rack, token awareness) replace the session's in the
//! request's routing request, and its restriction (the local datacenter
//! only, one node) filters the plan's targets. Without a policy none of this
//! runs: the request takes the session's plan as it is.

use std::sync::Arc;

use crate::cluster::state::ClusterState;
use crate::policy::load_balancing::{preference, LoadBalancingPolicy, NodeIdentifier, Preference};
use crate::routing::{NodeIdx, RackId, RoutingRequest};
use scylla_cql::sharding::Shard;

/// Which of its plan's targets a request may use (a load-balancing
/// policy's restriction).
#[derive(Debug, Clone, Copy)]
pub(super) enum Only {
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
pub(super) fn token_aware(policy: Option<&Arc<dyn LoadBalancingPolicy>>) -> bool {
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
pub(super) fn steer(
    pref: Preference<'_>,
    state: &ClusterState,
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
