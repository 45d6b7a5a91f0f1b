//! Speculative execution: for idempotent statements, start another attempt on
//! the next target of the plan when the current ones are slow; the first
//! answer wins.
//!
//! The delay between attempts is either fixed ([`SpeculativeExecution::new`])
//! or the session's request latency at a percentile
//! ([`SpeculativeExecution::percentile`]), read from the session's latency
//! histogram when a request starts speculating.

use std::time::Duration;

/// When to start speculative attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpeculativeExecution {
    /// Attempts in flight at most (1 = no speculation).
    pub max_attempts: usize,
    /// Start the next attempt after this long without an answer. With a
    /// percentile, the delay used while the session has no latency recorded
    /// yet.
    pub delay: Duration,
    /// The latency percentile that sets the delay, in millionths
    /// (99.0 % is 990_000); `None`: the fixed `delay`.
    percentile_ppm: Option<u32>,
}

/// The delay of a percentile schedule before any request has finished.
pub const PERCENTILE_FALLBACK_DELAY: Duration = Duration::from_millis(100);

impl SpeculativeExecution {
    /// Up to `max_attempts` attempts, one more every `delay`.
    pub fn new(max_attempts: usize, delay: Duration) -> Self {
        Self {
            max_attempts: max_attempts.max(1),
            delay,
            percentile_ppm: None,
        }
    }

    /// Up to `max_attempts` attempts, one more each time the request has
    /// waited as long as the session's requests take at `percentile`
    /// (0.0 to 100.0; clamped, and NaN reads as 100): the value of the
    /// session's request latency histogram
    /// ([`Metrics::latency`](crate::metrics::Metrics::latency), buckets
    /// within about 9 %) at that percentile, read when a request starts
    /// speculating. Before any request has finished, the delay is
    /// [`PERCENTILE_FALLBACK_DELAY`].
    pub fn percentile(max_attempts: usize, percentile: f64) -> Self {
        let p = if percentile.is_nan() {
            100.0
        } else {
            percentile.clamp(0.0, 100.0)
        };
        Self {
            max_attempts: max_attempts.max(1),
            delay: PERCENTILE_FALLBACK_DELAY,
            percentile_ppm: Some((p * 10_000.0).round() as u32),
        }
    }

    /// The percentile (0.0 to 100.0) that sets the delay, if any.
    pub fn latency_percentile(&self) -> Option<f64> {
        self.percentile_ppm.map(|ppm| f64::from(ppm) / 10_000.0)
    }

    /// The delay between attempts for a request starting now, given the
    /// session's latency histogram.
    pub(crate) fn delay_with(&self, latency: &crate::metrics::LatencyHistogram) -> Duration {
        match self.percentile_ppm {
            None => self.delay,
            Some(ppm) => latency
                .quantile_micros(f64::from(ppm) / 1_000_000.0)
                .map_or(self.delay, Duration::from_micros),
        }
    }
}

/// A speculative execution policy, for
/// [`ExecutionProfileBuilder::speculative_execution_policy`](crate::client::execution_profile::ExecutionProfileBuilder::speculative_execution_policy).
pub trait SpeculativeExecutionPolicy: std::fmt::Debug + Send + Sync {
    /// The schedule the policy asks for.
    fn schedule(&self) -> SpeculativeExecution;
}

/// Up to `max_retry_count` extra attempts, one more each
/// `retry_interval` without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimpleSpeculativeExecutionPolicy {
    /// Most extra attempts (0: no speculation).
    pub max_retry_count: usize,
    /// Pause before each extra attempt.
    pub retry_interval: Duration,
}

impl SpeculativeExecutionPolicy for SimpleSpeculativeExecutionPolicy {
    fn schedule(&self) -> SpeculativeExecution {
        SpeculativeExecution::new(self.max_retry_count.saturating_add(1), self.retry_interval)
    }
}

/// Up to `max_retry_count` extra attempts, one more each time the
/// request has waited as long as the session's requests take at
/// `percentile` (0.0 to 100.0), read from the session's latency
/// histogram when a request starts speculating (100 ms before any
/// request has finished); see [`SpeculativeExecution::percentile`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PercentileSpeculativeExecutionPolicy {
    /// Most extra attempts (0: no speculation).
    pub max_retry_count: usize,
    /// The latency percentile, 0.0 to 100.0.
    pub percentile: f64,
}

impl SpeculativeExecutionPolicy for PercentileSpeculativeExecutionPolicy {
    fn schedule(&self) -> SpeculativeExecution {
        SpeculativeExecution::percentile(self.max_retry_count.saturating_add(1), self.percentile)
    }
}

impl From<PercentileSpeculativeExecutionPolicy> for SpeculativeExecution {
    fn from(p: PercentileSpeculativeExecutionPolicy) -> Self {
        p.schedule()
    }
}

impl From<SimpleSpeculativeExecutionPolicy> for SpeculativeExecution {
    fn from(p: SimpleSpeculativeExecutionPolicy) -> Self {
        p.schedule()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::LatencyHistogram;

    #[test]
    fn percentile_delay_follows_the_histogram() {
        let s = SpeculativeExecution::percentile(3, 50.0);
        assert_eq!(s.latency_percentile(), Some(50.0));
        let h = LatencyHistogram::default();
        assert_eq!(s.delay_with(&h), PERCENTILE_FALLBACK_DELAY);
        for _ in 0..10 {
            h.record(Duration::from_millis(2));
        }
        for _ in 0..10 {
            h.record(Duration::from_millis(40));
        }
        let mid = s.delay_with(&h);
        assert!(
            mid >= Duration::from_micros(1_800) && mid <= Duration::from_millis(2),
            "{mid:?}"
        );
        let high = SpeculativeExecution::percentile(3, 99.0).delay_with(&h);
        assert!(high >= Duration::from_millis(36), "{high:?}");
        let fixed = SpeculativeExecution::new(2, Duration::from_millis(7));
        assert_eq!(fixed.delay_with(&h), Duration::from_millis(7));
        assert_eq!(
            SpeculativeExecution::percentile(2, f64::NAN).latency_percentile(),
            Some(100.0)
        );
        assert_eq!(
            SpeculativeExecution::percentile(2, 250.0).latency_percentile(),
            Some(100.0)
        );
    }

    #[test]
    fn retry_count_counts_extra_attempts() {
        let p = SimpleSpeculativeExecutionPolicy {
            max_retry_count: 2,
            retry_interval: Duration::from_millis(5),
        };
        let s = p.schedule();
        assert_eq!((s.max_attempts, s.delay), (3, Duration::from_millis(5)));
        let none = SimpleSpeculativeExecutionPolicy {
            max_retry_count: 0,
            retry_interval: Duration::ZERO,
        };
        assert_eq!(SpeculativeExecution::from(none).max_attempts, 1);
        let p = PercentileSpeculativeExecutionPolicy {
            max_retry_count: 2,
            percentile: 99.0,
        }
        .schedule();
        assert_eq!(p.max_attempts, 3);
        assert_eq!(p.latency_percentile(), Some(99.0));
    }
}
