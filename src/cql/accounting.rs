//! Routing judgement: was a single-partition request sent to the shard and
//! node that own its token? Uses the same token and shard math as a real
//! ScyllaDB node (Murmur3 of the partition key, the node's [`Sharder`]) and
//! the replica placement in [`super::replicas`].
//!
//! [`Sharder`]: scylla_cql::sharding::Sharder

use super::dml::Routing;
use super::replicas::{replicas, Strategy};
use super::store::Store;
use crate::handler::ConnCtx;

/// Bumps the wrong-shard and non-replica counters for a request that
/// touched the partition at `r`.
pub(crate) fn account(ctx: &ConnCtx, store: &Store, r: &Routing) {
    if ctx.sharder().shard_of(r.token) != ctx.shard() {
        ctx.record_wrong_shard();
    }
    let strategy = store
        .read()
        .keyspaces
        .get(&r.keyspace)
        .map_or(Strategy::Everywhere, |k| Strategy::from_map(&k.replication));
    if !replicas(ctx.topology().nodes(), &strategy, r.token).contains(&ctx.node_index()) {
        ctx.record_non_replica();
    }
}
