//! Routing judgement: was a single-partition request sent to the shard and
//! node that own its token? Uses the same token and shard math as a real
//! ScyllaDB node (Murmur3 of the partition key, the node's [`Sharder`]) and
//! the replica placement in [`super::replicas`].
//!
//! For a table of a tablets keyspace the owner is the tablet's replica set,
//! each replica naming its shard: a request that reached any other (node,
//! shard) is a misrouted tablet request. ScyllaDB serves it anyway (it
//! forwards) and, on a connection that negotiated `TABLETS_ROUTING_V1`,
//! attaches the `tablets-routing-v1` payload describing the tablet, so the
//! driver learns where to go next time.
//!
//! [`Sharder`]: scylla_cql::sharding::Sharder

use super::dml::Routing;
use super::replicas::{replicas, Strategy};
use super::store::Store;
use crate::handler::ConnCtx;
use crate::tablets::{routing_payload, TabletInfo};

/// Whether this shard of this node owns the partition at `r`: one of its
/// tablet's replicas (node and shard), or, for a vnode table, a replica node
/// on the shard of the token. Counts nothing.
pub(crate) fn owned_here(ctx: &ConnCtx, store: &Store, r: &Routing) -> bool {
    let topo = ctx.topology();
    if let Some(tablet) = topo.tablets().owner(&r.keyspace, &r.table, r.token.0) {
        return tablet.replicas.contains(&(ctx.node_index(), ctx.shard()));
    }
    if ctx.sharder().shard_of(r.token) != ctx.shard() {
        return false;
    }
    let strategy = store
        .read()
        .keyspaces
        .get(&r.keyspace)
        .map_or(Strategy::Everywhere, |k| Strategy::from_map(&k.replication));
    replicas(topo.nodes(), &strategy, r.token).contains(&ctx.node_index())
}

/// Bumps the routing counters for a request that touched the partition at
/// `r`; returns the `tablets-routing-v1` payload value to attach, if any.
pub(crate) fn account(ctx: &ConnCtx, store: &Store, r: &Routing) -> Option<Vec<u8>> {
    let topo = ctx.topology();
    if let Some(tablet) = topo.tablets().owner(&r.keyspace, &r.table, r.token.0) {
        let here = (ctx.node_index(), ctx.shard());
        if tablet.replicas.contains(&here) {
            return None;
        }
        ctx.record_tablet_misrouted();
        if !ctx.tablets_routing_v1() {
            return None;
        }
        let info = TabletInfo {
            first_token: tablet.first_token,
            last_token: tablet.last_token,
            replicas: tablet
                .replicas
                .iter()
                .filter_map(|&(n, shard)| topo.node(n).map(|n| (n.host_id, shard)))
                .collect(),
        };
        return match routing_payload(&info) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!(error = %e, "cannot encode a tablets-routing-v1 payload");
                None
            }
        };
    }
    if ctx.sharder().shard_of(r.token) != ctx.shard() {
        ctx.record_wrong_shard();
    }
    let strategy = store
        .read()
        .keyspaces
        .get(&r.keyspace)
        .map_or(Strategy::Everywhere, |k| Strategy::from_map(&k.replication));
    if !replicas(topo.nodes(), &strategy, r.token).contains(&ctx.node_index()) {
        ctx.record_non_replica();
    }
    None
}
