//! Covering a pool's shards in the background: when the shard-aware port is
//! not usable, the pool holds as many connections as it wants wherever the
//! node put them, and shards still without one are covered by an extra
//! attempt now and then (see the `refill` module).

use std::time::{Duration, Instant};

use scylla_cql::sharding::Shard;

use super::backoff::spread;
use super::plan::RefillPlan;
use super::PoolInner;
use crate::metrics::Metrics;

/// The background coverage attempts of a pool without a usable shard-aware
/// port.
pub(super) struct Coverage {
    /// The earliest moment of the next attempt.
    pub(super) next: Instant,
    /// Whether the next attempt goes to the regular port (else, behind a
    /// NAT, to the shard-aware port).
    pub(super) via_regular: bool,
    /// Intervals between attempts: doubled by each miss when only the
    /// regular port is usable, back to 1 when an attempt covers a shard.
    pub(super) slowdown: u32,
}

impl Coverage {
    /// The shard a background attempt aims at, if one is due now (and then
    /// the next one is scheduled). Through the shard-aware port, a source
    /// port for any shard: the NAT decides where it lands (a NAT that
    /// shifts ports by a constant would otherwise never reach the one
    /// missing shard).
    pub(super) fn attempt_due(
        &mut self,
        inner: &PoolInner,
        plan: &mut RefillPlan,
        shards: usize,
    ) -> Option<Shard> {
        let now = Instant::now();
        if now < self.next {
            return None;
        }
        let interval = inner.config.coverage_interval.saturating_mul(self.slowdown);
        self.next = now + coverage_delay(interval, plan.rng());
        Metrics::inc(&inner.metrics.coverage_attempts);
        Some(plan.rng().u16(..shards as u16))
    }

    /// After a round (`background`: a background attempt): `covered`,
    /// whether it covered a shard;
    /// `nat_via_shard_aware`, whether the node's shard-aware port is usable
    /// behind a NAT.
    pub(super) fn after_round(
        &mut self,
        background: bool,
        covered: bool,
        nat_via_shard_aware: bool,
    ) {
        if covered {
            self.slowdown = 1;
            return;
        }
        if !background {
            return;
        }
        // Missed: the other port next time. The regular port gives every
        // client the same least loaded shard (ties: the lowest), so many
        // clients behind a NAT miss there; one client alone hits its missing
        // shard there at once.
        self.via_regular = !self.via_regular;
        // With the regular port alone, misses are what many clients get:
        // try less often (up to MAX_SLOWDOWN intervals apart) rather than
        // churn connections at full rate for long.
        if !nat_via_shard_aware {
            self.slowdown = (self.slowdown * 2).min(MAX_SLOWDOWN);
        }
    }
}

/// The longest gap between background attempts, in coverage intervals.
const MAX_SLOWDOWN: u32 = 16;

/// A delay uniformly drawn from `[interval / 2, 3 * interval / 2)`: pools
/// that filled at the same moment do not try to cover shards in step.
pub(super) fn coverage_delay(interval: Duration, rng: &mut fastrand::Rng) -> Duration {
    interval / 2 + spread(interval, rng)
}
