//! Covering a pool's shards in the background: when the shard-aware port is
//! not usable, the pool holds as many connections as it wants wherever the
//! node put them, and shards still without one are covered by extra
//! attempts (see [`Coverage::after_round`] for their pace, and the `refill`
//! module).

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
    /// Background attempts in a row that covered nothing.
    pub misses: u32,
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
            misses: 0,
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

    /// Whether the next attempt follows at once: behind a NAT, until
    /// [`eager_attempts`] missed in a row.
    fn eager(&self, nat_via_shard_aware: bool, shards: usize) -> bool {
        nat_via_shard_aware && self.misses < eager_attempts(shards)
    }

    /// After a round that filled the pool as `fill` says: `covered`,
    /// whether it covered a shard; `nat_via_shard_aware`, whether the node's
    /// shard-aware port is usable behind a NAT; `shards`, the node's.
    ///
    /// Behind a NAT the shard-aware port lands each attempt on a random
    /// shard: a fair chance at a missing one for every client, however
    /// many cover the same node. There the attempts follow one another at
    /// once (one at a time, paced like every open by the pool's
    /// [`OpenPacer`](super::pacing::OpenPacer), which slows them when the
    /// node's handshakes queue) until [`eager_attempts`] miss in a row;
    /// covering a random shard's place costs about as many throwaway
    /// connections whatever the pace (a coupon collector's draws), so the
    /// pace only decides how long requests go to other shards' connections.
    /// After that many misses, one attempt per interval. Without a NAT (the
    /// regular port alone, which gives every client the same least loaded
    /// shard), one attempt per interval, doubled by each miss.
    pub fn after_round(
        &mut self,
        now: Instant,
        fill: Fill,
        covered: bool,
        nat_via_shard_aware: bool,
        plan: &mut RefillPlan,
        shards: usize,
    ) {
        let eager = self.eager(nat_via_shard_aware, shards);
        if fill == Fill::Total {
            // Filled: the first background attempt waits one interval (other
            // clients' connections settle the node's least loaded shard),
            // unless behind a NAT.
            self.next = if eager {
                now
            } else {
                now + coverage_delay(self.interval, plan.rng())
            };
        }
        if covered {
            self.slowdown = 1;
            self.misses = 0;
            if nat_via_shard_aware && fill == Fill::Background {
                self.next = now;
            }
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
        self.misses = self.misses.saturating_add(1);
        if nat_via_shard_aware {
            if self.eager(nat_via_shard_aware, shards) {
                self.next = now;
            }
        } else {
            // With the regular port alone, misses are what many clients
            // get: try less often (up to MAX_SLOWDOWN intervals apart)
            // rather than churn connections at full rate for long.
            self.slowdown = (self.slowdown * 2).min(MAX_SLOWDOWN);
        }
    }
}

/// Background attempts in a row behind a NAT that may miss before the
/// next waits an interval: sixteen per shard. With one shard missing of
/// `n`, about one attempt in `n` covers it (through either port, when many
/// clients share the node), so the eager attempts give up on it about once
/// in e^16 (ten million); a NAT that never reaches a shard costs that many
/// throwaway connections, then one per interval.
pub fn eager_attempts(shards: usize) -> u32 {
    u32::try_from(shards.saturating_mul(16)).unwrap_or(u32::MAX)
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
    fn behind_a_nat_attempts_follow_at_once_until_too_many_miss() {
        let (t0, mut plan) = (Instant::now(), plan());
        let mut c = Coverage::new(t0, SEC);
        // Filled behind a NAT: the first attempt is due at once.
        c.after_round(t0, Fill::Total, false, true, &mut plan, 4);
        assert_eq!(c.next, t0);
        let mut t = t0;
        for _ in 0..eager_attempts(4) - 1 {
            assert!(c.attempt_due(t, &mut plan, 4).is_some());
            c.after_round(t, Fill::Background, false, true, &mut plan, 4);
            assert_eq!(c.next, t, "the next attempt at once");
            t += Duration::from_millis(1);
        }
        // The budget's last miss: the next one waits an interval, not
        // longer (no slowdown behind a NAT).
        assert!(c.attempt_due(t, &mut plan, 4).is_some());
        c.after_round(t, Fill::Background, false, true, &mut plan, 4);
        assert!(
            c.next >= t + SEC / 2 && c.next < t + SEC * 3 / 2,
            "{:?}",
            c.next - t
        );
        assert_eq!(c.slowdown, 1);
        // A cover: at once again, the misses forgotten.
        let t = c.next;
        assert!(c.attempt_due(t, &mut plan, 4).is_some());
        c.after_round(t, Fill::Background, true, true, &mut plan, 4);
        assert_eq!((c.next, c.misses), (t, 0));
    }

    #[test]
    fn without_a_nat_each_miss_doubles_the_interval() {
        let (t0, mut plan) = (Instant::now(), plan());
        let mut c = Coverage::new(t0, SEC);
        c.after_round(t0, Fill::Total, false, false, &mut plan, 4);
        assert!(
            c.next >= t0 + SEC / 2,
            "the first attempt waits an interval"
        );
        let t = c.next;
        assert!(c.attempt_due(t, &mut plan, 4).is_some());
        assert!(c.attempt_due(t, &mut plan, 4).is_none(), "one per interval");
        c.after_round(t, Fill::Background, false, false, &mut plan, 4);
        assert_eq!(c.slowdown, 2);
        assert!(!c.via_regular, "the other port next time");
        c.after_round(t, Fill::Background, true, false, &mut plan, 4);
        assert_eq!(c.slowdown, 1);
    }
}
