//! Load-balancing policies in the official `scylla` crate's shape, set on an
//! execution profile or a statement.
//!
//! The two built-in policies do not compute a plan per request: the request
//! walks the session's precomputed routing table (replicas of the token
//! first, local datacenter first, see the `routing` module), and the policy
//! is a declarative set of preferences that this walk applies, without
//! allocating:
//!
//! - [`DefaultPolicy`]: the datacenter (and rack) to prefer, whether to
//!   route by token, whether other datacenters may be tried, whether to
//!   rotate among equally good replicas. Its names are resolved to the
//!   routing table's ids once per topology, not per request.
//! - [`SingleTargetLoadBalancingPolicy`]: one node (and shard, if given),
//!   and nothing else: the request fails when that node is unknown or has no
//!   open connection.
//!
//! Any other implementation of [`LoadBalancingPolicy`] is asked for each
//! request's plan: [`pick`](LoadBalancingPolicy::pick) for the first target,
//! [`fallback`](LoadBalancingPolicy::fallback) (only when more are needed)
//! for the rest, and told of each attempt's outcome. Such a request pays for
//! what the policy does (the fallback's box and the targets it yields, a
//! lookup of each node by host id), and for a
//! [`ClusterState`] built once per topology change.
//!
//! Without a policy (the default), a request routes with the session's own
//! settings ([`SessionBuilder::local_datacenter`](crate::SessionBuilder::local_datacenter),
//! [`local_rack`](crate::SessionBuilder::local_rack)). A policy replaces
//! them for the requests it applies to.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use scylla_cql::sharding::Shard;
use scylla_cql::token::Token;
use scylla_cql::types::TableSpec;
use scylla_cql::Consistency;
use uuid::Uuid;

use crate::cluster::ClusterState;
pub use crate::cluster::NodeRef;
use crate::error::RequestAttemptError;
use crate::handle::Handle;
use crate::routing::{DcId, RackId, RoutingTable};
use scylla_cql::SerialConsistency;

/// What a load-balancing policy learns of a request.
///
/// ```
/// use scylla_driver::policies::load_balancing::RoutingInfo;
///
/// let info = RoutingInfo::default();
/// assert!(info.token.is_none() && info.table.is_none() && !info.is_confirmed_lwt);
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RoutingInfo<'a> {
    /// The request's consistency.
    pub consistency: Consistency,
    /// Its serial consistency, if set.
    pub serial_consistency: Option<SerialConsistency>,
    /// The token of its partition key (a prepared statement whose bound
    /// values hold the whole partition key).
    pub token: Option<Token>,
    /// The table of a prepared statement.
    pub table: Option<&'a TableSpec<'a>>,
    /// Whether the server said, when it prepared the statement, that it is a
    /// lightweight transaction (ScyllaDB only; always `false` on Cassandra).
    pub is_confirmed_lwt: bool,
}

impl RoutingInfo<'_> {
    /// Whether the request is a lightweight transaction: confirmed as one,
    /// or run at a serial consistency (how a `SELECT` reads as Paxos does).
    pub fn should_route_as_lwt(&self) -> bool {
        self.is_confirmed_lwt
            || matches!(
                self.consistency,
                Consistency::Serial | Consistency::LocalSerial
            )
    }
}

/// The targets of a request's plan after the first, from
/// [`LoadBalancingPolicy::fallback`].
pub type FallbackPlan<'a> =
    Box<dyn Iterator<Item = (NodeRef<'a>, Option<Shard>)> + Send + Sync + 'a>;

/// Where a request goes: a node and, if the policy chooses one, its shard
/// (a shard past the node's count is taken modulo the count; `None` takes
/// the shard owning the request's token, or any).
///
/// A request tries the target of [`pick`](Self::pick) first, then those of
/// [`fallback`](Self::fallback) (asked for only when the first target
/// failed, was unreachable, or a speculative attempt starts; the picked
/// target is skipped if the fallback repeats it). When `pick` returns
/// `None`, the fallback's targets are the whole plan.
///
/// ```
/// use scylla_driver::cluster::{ClusterState, NodeRef};
/// use scylla_driver::policies::load_balancing::{FallbackPlan, LoadBalancingPolicy, RoutingInfo};
/// use scylla_driver::routing::Shard;
///
/// /// Only the nodes of one datacenter, in host-id order.
/// #[derive(Debug)]
/// struct OneDatacenter(String);
///
/// impl LoadBalancingPolicy for OneDatacenter {
///     fn pick<'a>(
///         &'a self,
///         info: &'a RoutingInfo,
///         cluster: &'a ClusterState,
///     ) -> Option<(NodeRef<'a>, Option<Shard>)> {
///         self.fallback(info, cluster).next()
///     }
///
///     fn fallback<'a>(&'a self, _: &'a RoutingInfo, cluster: &'a ClusterState) -> FallbackPlan<'a> {
///         let nodes = cluster.replica_locator().unique_nodes_in_datacenter_ring(&self.0);
///         Box::new(nodes.unwrap_or(&[]).iter().map(|node| (node, None)))
///     }
///
///     fn name(&self) -> String {
///         "OneDatacenter".into()
///     }
/// }
/// ```
pub trait LoadBalancingPolicy: fmt::Debug + Send + Sync {
    /// The first target of a request's plan.
    fn pick<'a>(
        &'a self,
        request: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> Option<(NodeRef<'a>, Option<Shard>)>;

    /// The rest of a request's plan (all of it when `pick` gave none).
    fn fallback<'a>(
        &'a self,
        request: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> FallbackPlan<'a>;

    /// Told when an attempt on `node` got an answer (errors the server sent
    /// as answers included: see [`on_request_failure`](Self::on_request_failure)).
    fn on_request_success(&self, _request: &RoutingInfo, _latency: Duration, _node: NodeRef<'_>) {}

    /// Told when an attempt on `node` failed: the node answered with an
    /// error, or the connection broke or timed out.
    fn on_request_failure(
        &self,
        _request: &RoutingInfo,
        _latency: Duration,
        _node: NodeRef<'_>,
        _error: &RequestAttemptError,
    ) {
    }

    /// The policy's name, for logs.
    fn name(&self) -> String;

    /// The built-in policy this is, which requests apply without asking it
    /// for plans; `None` (the default) for every other policy.
    #[doc(hidden)]
    fn built_in(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Which node a [`SingleTargetLoadBalancingPolicy`] sends to.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum NodeIdentifier {
    /// A node as [`ClusterState::get_nodes_info`](crate::cluster::ClusterState::get_nodes_info)
    /// lists it (matched by its host id).
    Node(Arc<crate::cluster::Node>),
    /// The node with this host id.
    HostId(Uuid),
    /// The node the driver connects to at this address (after address
    /// translation, as [`Node::address`](crate::cluster::Node::address)
    /// shows it).
    NodeAddress(SocketAddr),
}

/// Sends every request to one node, and to one shard of it if given (a
/// shard past the node's count is taken modulo the count by the pool).
/// No other node is tried: when the node is unknown to the session or has
/// no open connection, the request fails with
/// [`ExecutionError::ConnectionPoolError`](crate::ExecutionError::ConnectionPoolError)
/// (an unknown node: [`ExecutionError::EmptyPlan`](crate::ExecutionError::EmptyPlan)).
///
/// ```
/// use scylla_driver::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
/// use scylla_driver::statement::Statement;
///
/// let mut s = Statement::new("SELECT host_id FROM system.local");
/// let host = "6d0b2c6e-7a6e-4a4c-9d83-2b9c3a1e5f00".parse().unwrap();
/// s.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
///     NodeIdentifier::HostId(host),
///     None,
/// )));
/// assert!(s.get_load_balancing_policy().is_some());
/// ```
#[derive(Debug)]
pub struct SingleTargetLoadBalancingPolicy {
    node: NodeIdentifier,
    shard: Option<Shard>,
}

impl SingleTargetLoadBalancingPolicy {
    /// The policy sending to `node` (and `shard`, if given).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(node: NodeIdentifier, shard: Option<Shard>) -> Arc<dyn LoadBalancingPolicy> {
        Arc::new(Self { node, shard })
    }

    /// The node it sends to.
    pub fn node(&self) -> &NodeIdentifier {
        &self.node
    }

    /// The shard it sends to, if one was given.
    pub fn shard(&self) -> Option<Shard> {
        self.shard
    }
}

/// Routing preferences: a preferred datacenter (and rack), token
/// awareness, failover to other datacenters, rotation among replicas.
///
/// [`DefaultPolicy::default()`] prefers no datacenter (every node alike),
/// routes by token, and rotates among replicas; build others with
/// [`DefaultPolicy::builder`].
///
/// ```
/// use scylla_driver::policies::load_balancing::DefaultPolicy;
///
/// let policy = DefaultPolicy::builder()
///     .prefer_datacenter_and_rack("dc1".to_owned(), "rack1".to_owned())
///     .token_aware(true)
///     .permit_dc_failover(true)
///     .enable_shuffling_replicas(true)
///     .build();
/// assert_eq!(policy.name(), "DefaultPolicy");
/// ```
pub struct DefaultPolicy {
    preferred_dc: Option<String>,
    preferred_rack: Option<String>,
    token_aware: bool,
    permit_dc_failover: bool,
    shuffle_replicas: bool,
    /// The preferred datacenter and rack as ids of the last routing table
    /// they were resolved against (see [`Resolved`]).
    resolved: AtomicU64,
}

impl fmt::Debug for DefaultPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultPolicy")
            .field("preferred_dc", &self.preferred_dc)
            .field("preferred_rack", &self.preferred_rack)
            .field("token_aware", &self.token_aware)
            .field("permit_dc_failover", &self.permit_dc_failover)
            .field("shuffle_replicas", &self.shuffle_replicas)
            .finish()
    }
}

impl Default for DefaultPolicy {
    fn default() -> Self {
        DefaultPolicyBuilder::new().policy()
    }
}

/// Set in a cached resolution word that holds one (0 means none yet).
const CACHED: u64 = 1 << 63;
/// The datacenter field's "none" (15 bits).
const NO_DC: u64 = 0x7fff;
/// The rack field's "none" (16 bits).
const NO_RACK: u64 = 0xffff;

/// A [`DefaultPolicy`]'s preferences in terms of one routing table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The preferred datacenter, when the table knows it.
    pub(crate) dc: Option<DcId>,
    /// The preferred rack, when the table knows it.
    pub(crate) rack: Option<RackId>,
}

impl DefaultPolicy {
    /// A builder, starting from the defaults of [`DefaultPolicy::default`].
    pub fn builder() -> DefaultPolicyBuilder {
        DefaultPolicyBuilder::new()
    }

    /// The preferred datacenter, if any.
    pub fn preferred_datacenter(&self) -> Option<&str> {
        self.preferred_dc.as_deref()
    }

    /// The preferred rack (of the preferred datacenter), if any.
    pub fn preferred_rack(&self) -> Option<&str> {
        self.preferred_rack.as_deref()
    }

    /// Whether requests go to the replicas of their token first.
    pub fn is_token_aware(&self) -> bool {
        self.token_aware
    }

    /// Whether nodes outside the preferred datacenter may be tried.
    pub fn permits_dc_failover(&self) -> bool {
        self.permit_dc_failover
    }

    /// Whether requests rotate among equally good replicas (else they
    /// take them in ring order).
    pub fn shuffles_replicas(&self) -> bool {
        self.shuffle_replicas
    }

    /// Whether a preferred datacenter is set.
    pub(crate) fn has_preferred_dc(&self) -> bool {
        self.preferred_dc.is_some()
    }

    /// The preferred datacenter and rack as ids of `table`: remembered
    /// while `table` names its datacenters and racks as the table they were
    /// resolved against did (one atomic load), else looked up by name and
    /// remembered.
    pub(crate) fn resolve(&self, table: &RoutingTable) -> Resolved {
        let tag = u64::from(table.names_tag());
        let bits = self.resolved.load(Ordering::Relaxed);
        if bits & CACHED != 0 && bits & 0xffff_ffff == tag {
            let dc = (bits >> 48) & NO_DC;
            let rack = (bits >> 32) & NO_RACK;
            return Resolved {
                dc: (dc != NO_DC).then_some(DcId(dc as u32)),
                rack: (rack != NO_RACK).then_some(RackId(rack as u32)),
            };
        }
        let dc_name = self.preferred_dc.as_deref();
        let resolved = Resolved {
            dc: dc_name.and_then(|dc| table.dc_id(dc)),
            rack: dc_name
                .zip(self.preferred_rack.as_deref())
                .and_then(|(dc, rack)| table.rack_id(dc, rack)),
        };
        let dc = resolved.dc.map_or(NO_DC, |d| u64::from(d.0));
        let rack = resolved.rack.map_or(NO_RACK, |r| u64::from(r.0));
        // Ids that do not fit the word are not remembered (looked up each
        // time instead): far beyond any real cluster's datacenter count.
        if dc <= NO_DC && rack <= NO_RACK {
            self.resolved
                .store(CACHED | (dc << 48) | (rack << 32) | tag, Ordering::Relaxed);
        }
        if dc_name.is_some() && resolved.dc.is_none() {
            tracing::debug!(
                datacenter = dc_name,
                "load balancing: the preferred datacenter has no known node"
            );
        }
        resolved
    }
}

/// Builds a [`DefaultPolicy`].
#[derive(Debug, Clone)]
pub struct DefaultPolicyBuilder {
    preferred_dc: Option<String>,
    preferred_rack: Option<String>,
    token_aware: bool,
    permit_dc_failover: bool,
    shuffle_replicas: bool,
}

impl Default for DefaultPolicyBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl DefaultPolicyBuilder {
    /// No preferred datacenter, token-aware, no datacenter failover (moot
    /// without a preferred datacenter), replicas rotated.
    pub fn new() -> Self {
        Self {
            preferred_dc: None,
            preferred_rack: None,
            token_aware: true,
            permit_dc_failover: false,
            shuffle_replicas: true,
        }
    }

    /// Prefers the nodes of datacenter `datacenter_name` (and no rack).
    #[must_use]
    pub fn prefer_datacenter(mut self, datacenter_name: String) -> Self {
        self.preferred_dc = Some(datacenter_name);
        self.preferred_rack = None;
        self
    }

    /// Prefers the nodes of datacenter `datacenter_name`, and in it those
    /// of rack `rack_name`.
    #[must_use]
    pub fn prefer_datacenter_and_rack(
        mut self,
        datacenter_name: String,
        rack_name: String,
    ) -> Self {
        self.preferred_dc = Some(datacenter_name);
        self.preferred_rack = Some(rack_name);
        self
    }

    /// Whether requests go to the replicas of their token first (else any
    /// node, preferred datacenter first).
    #[must_use]
    pub fn token_aware(mut self, is_token_aware: bool) -> Self {
        self.token_aware = is_token_aware;
        self
    }

    /// Whether nodes outside the preferred datacenter may be tried when
    /// those in it fail or are down. Without it, a request whose preferred
    /// datacenter has no node up (or is unknown) fails.
    #[must_use]
    pub fn permit_dc_failover(mut self, permit: bool) -> Self {
        self.permit_dc_failover = permit;
        self
    }

    /// Whether requests rotate among equally good replicas (the default);
    /// `false` takes them, and the other nodes, in a fixed order.
    #[must_use]
    pub fn enable_shuffling_replicas(mut self, enable: bool) -> Self {
        self.shuffle_replicas = enable;
        self
    }

    fn policy(self) -> DefaultPolicy {
        DefaultPolicy {
            preferred_dc: self.preferred_dc,
            preferred_rack: self.preferred_rack,
            token_aware: self.token_aware,
            permit_dc_failover: self.permit_dc_failover,
            shuffle_replicas: self.shuffle_replicas,
            resolved: AtomicU64::new(0),
        }
    }

    /// The policy, ready for
    /// [`ExecutionProfileBuilder::load_balancing_policy`](crate::client::execution_profile::ExecutionProfileBuilder::load_balancing_policy).
    pub fn build(self) -> Arc<dyn LoadBalancingPolicy> {
        Arc::new(self.policy())
    }
}

/// What a request's policy asks of its plan, read per request without
/// allocating.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Preference<'a> {
    /// A [`DefaultPolicy`].
    Default(&'a DefaultPolicy),
    /// A [`SingleTargetLoadBalancingPolicy`].
    Single(&'a SingleTargetLoadBalancingPolicy),
}

/// The preference of `policy` when it is a built-in one (`None`: a policy
/// asked for each request's plan).
pub(crate) fn preference(policy: &dyn LoadBalancingPolicy) -> Option<Preference<'_>> {
    let any = policy.built_in()?;
    if let Some(p) = any.downcast_ref::<DefaultPolicy>() {
        return Some(Preference::Default(p));
    }
    any.downcast_ref::<SingleTargetLoadBalancingPolicy>()
        .map(Preference::Single)
}

/// A load-balancing policy as a statement holds it (see [`Handle`]).
pub type PolicyHandle = Handle<dyn LoadBalancingPolicy>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{NodeInfo, TopologyInput};
    use scylla_cql::token::Token;
    use std::collections::BTreeMap;

    fn table(dcs: &[(&str, &str)]) -> RoutingTable {
        let nodes = dcs
            .iter()
            .enumerate()
            .map(|(i, (dc, rack))| NodeInfo {
                datacenter: (*dc).into(),
                rack: (*rack).into(),
                tokens: vec![Token(i as i64 * 100)],
                sharder: None,
            })
            .collect();
        RoutingTable::build(&TopologyInput {
            nodes,
            keyspaces: BTreeMap::new(),
        })
    }

    fn default_policy(p: &Arc<dyn LoadBalancingPolicy>) -> &DefaultPolicy {
        match preference(&**p) {
            Some(Preference::Default(d)) => d,
            other => panic!("not a DefaultPolicy: {other:?}"),
        }
    }

    #[test]
    fn names_resolve_per_table_and_are_remembered() {
        let p = DefaultPolicy::builder()
            .prefer_datacenter_and_rack("dc2".into(), "r2".into())
            .build();
        let p = default_policy(&p);
        let a = table(&[("dc1", "r1"), ("dc2", "r1"), ("dc2", "r2")]);
        let want = Resolved {
            dc: a.dc_id("dc2"),
            rack: a.rack_id("dc2", "r2"),
        };
        assert!(want.dc.is_some() && want.rack.is_some());
        assert_eq!(p.resolve(&a), want);
        // Remembered, and still right.
        assert_ne!(p.resolved.load(Ordering::Relaxed), 0);
        assert_eq!(p.resolve(&a), want);
        // Another table with other names: resolved again.
        let b = table(&[("dc0", "r0"), ("dc1", "r1"), ("dc2", "r2")]);
        assert_ne!(a.names_tag(), b.names_tag());
        let got = p.resolve(&b);
        assert_eq!(got.dc, b.dc_id("dc2"));
        assert_eq!(got.rack, b.rack_id("dc2", "r2"));
        assert_ne!(got.dc, want.dc);
        // An unknown datacenter resolves to none.
        let c = table(&[("dc1", "r1")]);
        assert_eq!(
            p.resolve(&c),
            Resolved {
                dc: None,
                rack: None
            }
        );
    }

    #[test]
    fn defaults_and_builder() {
        let d = DefaultPolicy::default();
        assert!(d.is_token_aware() && d.shuffles_replicas() && !d.permits_dc_failover());
        assert_eq!(d.preferred_datacenter(), None);
        let p = DefaultPolicy::builder()
            .prefer_datacenter("x".into())
            .token_aware(false)
            .permit_dc_failover(true)
            .enable_shuffling_replicas(false)
            .build();
        let p = default_policy(&p);
        assert_eq!(p.preferred_datacenter(), Some("x"));
        assert_eq!(p.preferred_rack(), None);
        assert!(!p.is_token_aware() && p.permits_dc_failover() && !p.shuffles_replicas());
        let single =
            SingleTargetLoadBalancingPolicy::new(NodeIdentifier::HostId(Uuid::nil()), Some(3));
        assert!(matches!(
            preference(&*single),
            Some(Preference::Single(s)) if s.shard() == Some(3)
        ));
    }
}
