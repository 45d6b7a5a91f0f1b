//! Reconnect backoff: exponential with *full* jitter.
//!
//! After the n-th consecutive failure (n = 0, 1, ...) the next attempt waits a
//! delay drawn uniformly from `[0, min(cap, base * 2^n))`. Full jitter (rather
//! than "bound ± 10%") is what keeps thousands of clients that lost a node at
//! the same instant from retrying in lockstep: their attempts spread evenly over
//! the whole window instead of arriving as a wave, and because the draw is
//! strictly below the bound there is no point mass at the cap where every
//! client that has backed off long enough would otherwise meet again.
//!
//! [`ReconnectPolicy`] is the shared, user-pluggable configuration;
//! [`ReconnectSchedule`] is the per-node state it creates (one per pool), which
//! alone is mutable.

use std::fmt;
use std::time::Duration;

/// Creates reconnect schedules (one per node pool).
pub trait ReconnectPolicy: Send + Sync + fmt::Debug {
    /// A fresh schedule, starting at the first (shortest) delay.
    fn new_schedule(&self) -> Box<dyn ReconnectSchedule>;
}

/// The delays between consecutive failed attempts to one target.
pub trait ReconnectSchedule: Send + fmt::Debug {
    /// The delay before the next attempt, after one more failure.
    fn next_delay(&mut self) -> Duration;
    /// Called after a success: the next failure starts from the beginning.
    fn reset(&mut self);
}

/// How a delay is drawn from the current bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Uniform in `[0, bound)`: the default.
    Full,
    /// Exactly `bound`: every client retries at the same instants. Only for
    /// demonstrating a reconnect storm.
    None,
}

/// Exponential backoff with jitter: the default [`ReconnectPolicy`].
///
/// ```
/// use std::time::Duration;
/// use scylla_driver::pool::backoff::{ExponentialBackoff, ReconnectPolicy};
///
/// let policy = ExponentialBackoff::new(Duration::from_millis(100), Duration::from_secs(10));
/// let mut schedule = policy.new_schedule();
/// let first = schedule.next_delay();
/// assert!(first < Duration::from_millis(100));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExponentialBackoff {
    /// The bound of the first delay.
    pub base: Duration,
    /// The largest bound.
    pub cap: Duration,
    /// How a delay is drawn from the bound.
    pub jitter: Jitter,
}

impl ExponentialBackoff {
    /// Full-jitter backoff from `base` up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap: cap.max(base),
            jitter: Jitter::Full,
        }
    }

    /// The same bounds with another jitter mode.
    #[must_use]
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The bound after `failures` consecutive failures: `min(cap, base * 2^failures)`.
    pub fn bound(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }
}

impl Default for ExponentialBackoff {
    /// 100 ms doubling up to 10 s, full jitter.
    fn default() -> Self {
        Self::new(Duration::from_millis(100), Duration::from_secs(10))
    }
}

impl ReconnectPolicy for ExponentialBackoff {
    fn new_schedule(&self) -> Box<dyn ReconnectSchedule> {
        Box::new(Backoff::new(*self))
    }
}

/// The state of one [`ExponentialBackoff`] schedule.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: ExponentialBackoff,
    failures: u32,
    rng: fastrand::Rng,
}

impl Backoff {
    /// A schedule seeded from the process's random source.
    pub fn new(config: ExponentialBackoff) -> Self {
        Self::with_rng(config, fastrand::Rng::new())
    }

    /// A schedule with a given random generator (for reproducible tests).
    pub fn with_rng(config: ExponentialBackoff, rng: fastrand::Rng) -> Self {
        Self {
            config,
            failures: 0,
            rng,
        }
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

impl ReconnectSchedule for Backoff {
    fn next_delay(&mut self) -> Duration {
        let bound = self.config.bound(self.failures);
        self.failures = self.failures.saturating_add(1);
        match self.config.jitter {
            Jitter::None => bound,
            Jitter::Full => {
                let nanos = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
                if nanos == 0 {
                    Duration::ZERO
                } else {
                    Duration::from_nanos(self.rng.u64(0..nanos))
                }
            }
        }
    }

    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// A uniformly random delay in `[0, window)`: how reconnects to a node that
/// just came back are spread out.
pub fn spread(window: Duration, rng: &mut fastrand::Rng) -> Duration {
    let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        Duration::ZERO
    } else {
        Duration::from_nanos(rng.u64(0..nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bounds_double_up_to_the_cap() {
        let b = ExponentialBackoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let bounds: Vec<u128> = (0..6).map(|n| b.bound(n).as_millis()).collect();
        assert_eq!(bounds, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.bound(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn lockstep_is_exactly_the_bound() {
        let b = ExponentialBackoff::new(Duration::from_millis(10), Duration::from_millis(40))
            .with_jitter(Jitter::None);
        let mut s = b.new_schedule();
        let d: Vec<u128> = (0..4).map(|_| s.next_delay().as_millis()).collect();
        assert_eq!(d, vec![10, 20, 40, 40]);
        s.reset();
        assert_eq!(s.next_delay(), Duration::from_millis(10));
    }

    #[test]
    fn full_jitter_spreads_over_the_window() {
        // 10,000 draws at the cap: roughly uniform (each tenth of the window
        // gets 10% +- 2%) and none at or above the cap.
        let cfg = ExponentialBackoff::new(Duration::from_millis(1), Duration::from_millis(1000));
        let mut s = Backoff::with_rng(cfg, fastrand::Rng::with_seed(7));
        for _ in 0..20 {
            s.next_delay();
        }
        let mut buckets = [0u32; 10];
        for _ in 0..10_000 {
            let d = s.next_delay();
            assert!(d < cfg.cap);
            buckets[(d.as_millis() / 100) as usize] += 1;
        }
        for b in buckets {
            assert!((800..=1200).contains(&b), "{buckets:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// No delay reaches its bound (so none sits at the cap), and the
        /// bounds never decrease until a reset.
        #[test]
        fn delays_stay_below_the_bound(base_ms in 1u64..1000, cap_ms in 1u64..60_000, seed: u64, n in 1usize..64) {
            let cfg = ExponentialBackoff::new(Duration::from_millis(base_ms), Duration::from_millis(cap_ms));
            let mut s = Backoff::with_rng(cfg, fastrand::Rng::with_seed(seed));
            let mut last_bound = Duration::ZERO;
            for i in 0..n {
                let bound = cfg.bound(i as u32);
                prop_assert!(bound >= last_bound);
                prop_assert!(bound <= cfg.cap);
                last_bound = bound;
                let d = s.next_delay();
                prop_assert!(d < bound, "delay {:?} not below bound {:?}", d, bound);
            }
        }

        #[test]
        fn spread_stays_in_the_window(window_us in 0u64..10_000_000, seed: u64) {
            let mut rng = fastrand::Rng::with_seed(seed);
            let w = Duration::from_micros(window_us);
            let d = spread(w, &mut rng);
            prop_assert!(d < w || w.is_zero());
        }
    }
}
