//! UNAVAILABLE, as a coordinator answers it: fewer replicas of the
//! partition are up than the request's consistency level needs.
//!
//! The test cluster's nodes share one store, so any node can serve any
//! partition whatever is down; this check is therefore opt-in
//! ([`Topology::set_check_live_replicas`](crate::topology::Topology::set_check_live_replicas)).
//! With it on, a single-partition read or write counts the partition's
//! replicas (the keyspace's replication, [`super::replicas`]) that are
//! running and refuses before touching any data. Datacenter-local levels
//! count the whole replica set (the test cluster has one datacenter).

use scylla_cql::token::Token;
use scylla_cql::Consistency;

use super::error::CqlError;
use super::replicas::{replicas, Strategy};
use super::store::Schema;
use crate::handler::ConnCtx;

/// Replicas a level needs out of `rf`.
fn required(c: Consistency, rf: usize) -> usize {
    let quorum = rf / 2 + 1;
    match c {
        Consistency::Any => 0,
        Consistency::One | Consistency::LocalOne => 1,
        Consistency::Two => 2,
        Consistency::Three => 3,
        Consistency::All => rf,
        _ => quorum,
    }
}

/// Keyspace `ks`'s replication when the check is on (`None`: off).
pub(crate) fn strategy_if_checked(ctx: &ConnCtx, schema: &Schema, ks: &str) -> Option<Strategy> {
    ctx.topology().checks_live_replicas().then(|| {
        schema
            .keyspaces
            .get(ks)
            .map_or(Strategy::Everywhere, |k| Strategy::from_map(&k.replication))
    })
}

/// `Err(Unavailable)` when the check is on (`strategy` is the keyspace's,
/// from [`strategy_if_checked`]) and too few replicas of `token` are up for
/// `consistency`.
pub(crate) fn check(
    ctx: &ConnCtx,
    strategy: Option<&Strategy>,
    token: Token,
    consistency: Option<Consistency>,
) -> Result<(), CqlError> {
    let (Some(strategy), Some(consistency)) = (strategy, consistency) else {
        return Ok(());
    };
    let topo = ctx.topology();
    let owners = replicas(topo.nodes(), strategy, token);
    let alive = owners.iter().filter(|&&i| topo.is_up(i)).count();
    let need = required(consistency, owners.len());
    if alive >= need {
        return Ok(());
    }
    Err(CqlError::Unavailable {
        consistency,
        required: i32::try_from(need).unwrap_or(i32::MAX),
        alive: i32::try_from(alive).unwrap_or(i32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_need_their_replicas() {
        assert_eq!(required(Consistency::All, 3), 3);
        assert_eq!(required(Consistency::Quorum, 3), 2);
        assert_eq!(required(Consistency::LocalQuorum, 5), 3);
        assert_eq!(required(Consistency::One, 3), 1);
        assert_eq!(required(Consistency::Any, 3), 0);
    }
}
