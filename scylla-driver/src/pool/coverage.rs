//! Covering a pool's shards in the background: when the shard-aware port is
//! not usable, the pool holds as many connections as it wants wherever the
//! node put them, and shards still without one are covered by an extra
//! attempt now and then (see the `refill` module).

use std::time::{Duration, Instant};

use scylla_cql::sharding::Shard;

use super::backoff::spread;
use super::fill::Fill;
use super::plan::RefillPlan;

/// The background coverage attempts of a pool without a usable shard-aware
/// port.
#[derive(Debug, Clone)]
pub struct Coverage {
    /// The earliest moment of the next attempt.
    pub next: Instant,
    /// Whether the next attempt goes to the regular port (else, behind a
    /// NAT, to the shard-aware port).
    pub via_regular: bool,
    /// Intervals between attempts: doubled by each miss when only the
    /// regular port is usable, back to 1 when an attempt covers a shard.
    pub slowdown: u32,
    /// The pool's `coverage_interval`.
    interval: Duration,
}

impl Coverage {
    /// A pool's coverage before its first round: an attempt is due at once
    /// (through the regular port) once the pool needs one; `interval`: the
    /// pool's `coverage_interval`.
    pub fn new(now: Instant, interval: Duration) -> Self {
        Coverage {
            next: now,
            via_regular: true,
            slowdown: 1,
            interval,
        }
    }

    /// The shard a background attempt aims at, if one is due now (and then
    /// the next one is scheduled). Through the shard-aware port, a source
    /// port for any shard: the NAT decides where it lands (a NAT that
    /// shifts ports by a constant would otherwise never reach the one
    /// missing shard).
    pub fn attempt_due(
        &mut self,
        now: Instant,
        plan: &mut RefillPlan,
        shards: usize,
    ) -> Option<Shard> {
        if now < self.next {
            return None;
        }
        let interval = self.interval.saturating_mul(self.slowdown);
        self.next = now + coverage_delay(interval, plan.rng());
        Some(plan.rng().u16(..shards as u16))
    }

    /// After a round that filled the pool as `fill` says: `covered`,
    /// whether it covered a shard; `nat_via_shard_aware`, whether the node's
    /// shard-aware port is usable behind a NAT.
    pub fn after_round(
        &mut self,
        now: Instant,
        fill: Fill,
        covered: bool,
        nat_via_shard_aware: bool,
        plan: &mut RefillPlan,
    ) {
        if fill == Fill::Total {
            // Filled: the first background attempt waits one interval.
            self.next = now + coverage_delay(self.interval, plan.rng());
        }
        if covered {
            self.slowdown = 1;
            return;
        }
        if fill != Fill::Background {
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
pub fn coverage_delay(interval: Duration, rng: &mut fastrand::Rng) -> Duration {
    interval / 2 + spread(interval, rng)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::backoff::{ExponentialBackoff, ReconnectPolicy};

    const SEC: Duration = Duration::from_secs(1);

    fn plan() -> RefillPlan {
        RefillPlan::new(
            ExponentialBackoff::default().new_schedule(),
            SEC,
            fastrand::Rng::with_seed(7),
        )
    }

    #[test]
    fn without_a_nat_each_miss_doubles_the_interval() {
        let (t0, mut plan) = (Instant::now(), plan());
        let mut c = Coverage::new(t0, SEC);
        c.after_round(t0, Fill::Total, false, false, &mut plan);
        assert!(
            c.next >= t0 + SEC / 2,
            "the first attempt waits an interval"
        );
        let t = c.next;
        assert!(c.attempt_due(t, &mut plan, 4).is_some());
        assert!(c.attempt_due(t, &mut plan, 4).is_none(), "one per interval");
        c.after_round(t, Fill::Background, false, false, &mut plan);
        assert_eq!(c.slowdown, 2);
        assert!(!c.via_regular, "the other port next time");
        c.after_round(t, Fill::Background, true, false, &mut plan);
        assert_eq!(c.slowdown, 1);
    }
}
