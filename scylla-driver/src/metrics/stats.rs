//! [`SessionMetrics`]: the session's counters read the way the official
//! `scylla` crate's `observability::metrics::Metrics` reads them (requests
//! and errors by kind of paging, latency statistics in milliseconds, request
//! rates, connections, timeouts).
//!
//! Everything here is computed when it is read, from the counters and the
//! latency histogram that requests update anyway: reading costs a pass over
//! the histogram's buckets; requests pay nothing for it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use super::{LatencyHistogram, Metrics};

/// Reading a latency statistic failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// No request has finished yet, so there is no latency to describe.
    #[error("no request latency recorded yet: run a request first")]
    Empty,
}

/// Latency statistics at one moment, in milliseconds (rounded down).
///
/// The values come from the latency histogram, whose buckets are about 12%
/// wide: a percentile is the lower bound of the bucket it falls in, the mean
/// and the standard deviation are computed from the buckets' midpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Snapshot {
    /// The smallest latency recorded.
    pub min: u64,
    /// The largest latency recorded.
    pub max: u64,
    /// The mean latency.
    pub mean: u64,
    /// The standard deviation of the latencies.
    pub stddev: u64,
    /// The 50th percentile.
    pub median: u64,
    /// The 75th percentile.
    pub percentile_75: u64,
    /// The 95th percentile.
    pub percentile_95: u64,
    /// The 98th percentile.
    pub percentile_98: u64,
    /// The 99th percentile.
    pub percentile_99: u64,
    /// The 99.9th percentile.
    pub percentile_99_9: u64,
}

/// Time constants of the moving averages: one, five and fifteen minutes.
const RATE_WINDOWS_SECS: [f64; 3] = [60.0, 300.0, 900.0];

/// The moving averages of the request rate, brought up to date on each read.
#[derive(Debug)]
pub(crate) struct Rates {
    started: Instant,
    state: Mutex<RateState>,
}

#[derive(Debug)]
struct RateState {
    /// When the averages were last brought up to date.
    at: Instant,
    /// The request counter then.
    count: u64,
    /// Requests per second, one per window; `None` before the first read.
    averages: Option<[f64; 3]>,
}

impl Default for Rates {
    fn default() -> Self {
        let now = Instant::now();
        Rates {
            started: now,
            state: Mutex::new(RateState {
                at: now,
                count: 0,
                averages: None,
            }),
        }
    }
}

impl Rates {
    /// Brings the averages up to `count` requests at `now` and returns them.
    ///
    /// The requests since the last read are taken as spread evenly over the
    /// time since then, so the exponentially weighted average moves towards
    /// their rate `r` as it would have, continuously, under that rate:
    /// `avg = r + (avg - r) * exp(-elapsed / window)`. The first read starts
    /// every average at the mean rate since the session started.
    fn update(&self, count: u64, now: Instant) -> [f64; 3] {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(state.at).as_secs_f64();
        let delta = count.saturating_sub(state.count);
        let averages = match state.averages {
            None => {
                let mean = if elapsed > 0.0 {
                    delta as f64 / elapsed
                } else {
                    0.0
                };
                [mean; 3]
            }
            Some(_) if elapsed <= 0.0 => return state.averages.unwrap_or_default(),
            Some(mut averages) => {
                let rate = delta as f64 / elapsed;
                for (avg, window) in averages.iter_mut().zip(RATE_WINDOWS_SECS) {
                    *avg = rate + (*avg - rate) * (-elapsed / window).exp();
                }
                averages
            }
        };
        state.at = now;
        state.count = count;
        state.averages = Some(averages);
        averages
    }
}

/// A session's metrics, with the official `scylla` crate's names
/// (`Session::get_metrics`). The counters behind it are the session's
/// [`Metrics`] (`Session::metrics`), shared: the numbers are current at
/// each call, not when this was made.
///
/// A request is what the application asked for, counted once whatever its
/// retries and speculative attempts: an unpaged request (`query_unpaged`,
/// `execute_unpaged`, `batch`, and the reads of `get_tracing_info`), one
/// page of a manually paged request (`query_single_page`,
/// `execute_single_page`), or one page fetched by a row stream
/// (`query_iter`, `execute_iter`).
#[derive(Debug, Clone)]
pub struct SessionMetrics {
    counters: Arc<Metrics>,
    pools: Weak<dyn OpenConnections>,
}

/// Counts the pools' open connections (the session's cluster state does);
/// what [`SessionMetrics::get_total_connections`] reads.
pub(crate) trait OpenConnections: Send + Sync {
    /// The pools' open connections now, over every node.
    fn open_connections(&self) -> u64;
}

impl SessionMetrics {
    pub(crate) fn new(counters: Arc<Metrics>, pools: Weak<dyn OpenConnections>) -> Self {
        SessionMetrics { counters, pools }
    }

    fn load(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// Unpaged requests started (every request that is not a page of a
    /// paged one).
    pub fn get_requests_unpaged_num(&self) -> u64 {
        // The paged counters are read first and counted after the total
        // (see `Metrics::paged_request`), so the difference never wraps.
        let paged =
            self.get_requests_manually_paged_num() + self.get_requests_automatically_paged_num();
        Self::load(&self.counters.requests).saturating_sub(paged)
    }

    /// Pages requested by `query_single_page` / `execute_single_page`.
    pub fn get_requests_manually_paged_num(&self) -> u64 {
        Self::load(&self.counters.requests_manually_paged)
    }

    /// Pages requested by row streams (`query_iter` / `execute_iter`).
    pub fn get_requests_automatically_paged_num(&self) -> u64 {
        Self::load(&self.counters.requests_automatically_paged)
    }

    /// Unpaged requests that failed (after retries).
    pub fn get_errors_unpaged_num(&self) -> u64 {
        let paged =
            self.get_errors_manually_paged_num() + self.get_errors_automatically_paged_num();
        Self::load(&self.counters.request_errors).saturating_sub(paged)
    }

    /// Manually paged requests that failed (after retries).
    pub fn get_errors_manually_paged_num(&self) -> u64 {
        Self::load(&self.counters.errors_manually_paged)
    }

    /// Pages of row streams that failed (after retries).
    pub fn get_errors_automatically_paged_num(&self) -> u64 {
        Self::load(&self.counters.errors_automatically_paged)
    }

    /// Failed requests that are not pages of row streams: unpaged and
    /// manually paged ones (the official crate's meaning, kept for code
    /// written against it). Every failed request, of any kind, is
    /// `Session::metrics().snapshot().request_errors`.
    #[deprecated(note = "add get_errors_unpaged_num() and get_errors_manually_paged_num()")]
    pub fn get_errors_num(&self) -> u64 {
        self.get_errors_unpaged_num() + self.get_errors_manually_paged_num()
    }

    /// Requests that are not pages of row streams: unpaged and manually
    /// paged ones (the official crate's meaning). Every request, of any
    /// kind, is `Session::metrics().snapshot().requests`.
    #[deprecated(note = "add get_requests_unpaged_num() and get_requests_manually_paged_num()")]
    pub fn get_queries_num(&self) -> u64 {
        self.get_requests_unpaged_num() + self.get_requests_manually_paged_num()
    }

    /// [`get_errors_automatically_paged_num`](Self::get_errors_automatically_paged_num)
    /// under its older official name.
    #[deprecated(note = "use get_errors_automatically_paged_num()")]
    pub fn get_errors_iter_num(&self) -> u64 {
        self.get_errors_automatically_paged_num()
    }

    /// [`get_requests_automatically_paged_num`](Self::get_requests_automatically_paged_num)
    /// under its older official name.
    #[deprecated(note = "use get_requests_automatically_paged_num()")]
    pub fn get_queries_iter_num(&self) -> u64 {
        self.get_requests_automatically_paged_num()
    }

    /// Attempts the retry policy retried.
    pub fn get_retries_num(&self) -> u64 {
        Self::load(&self.counters.retries)
    }

    /// Requests that failed because their deadline passed (the request
    /// timeout, or a stream's deadline).
    pub fn get_request_timeouts(&self) -> u64 {
        Self::load(&self.counters.request_timeouts)
    }

    /// Connection attempts of the pools that timed out.
    pub fn get_connection_timeouts(&self) -> u64 {
        Self::load(&self.counters.connect_timeouts)
    }

    /// The pools' open connections now, over every node (the control
    /// connection is not counted); 0 once the session is gone.
    pub fn get_total_connections(&self) -> u64 {
        self.pools.upgrade().map_or(0, |p| p.open_connections())
    }

    /// The mean latency, in milliseconds.
    pub fn get_latency_avg_ms(&self) -> Result<u64, MetricsError> {
        Ok(self.latency_stats()?.mean_micros / 1000)
    }

    /// The latency at `percentile` (0 to 100), in milliseconds.
    pub fn get_latency_percentile_ms(&self, percentile: f64) -> Result<u64, MetricsError> {
        self.counters
            .latency
            .quantile_micros(percentile / 100.0)
            .map(|us| us / 1000)
            .ok_or(MetricsError::Empty)
    }

    /// Minimum, maximum, mean, standard deviation and percentiles of the
    /// latency, in milliseconds.
    pub fn get_snapshot(&self) -> Result<Snapshot, MetricsError> {
        let stats = self.latency_stats()?;
        let ms = |q: f64| self.get_latency_percentile_ms(q);
        Ok(Snapshot {
            min: stats.min_micros / 1000,
            max: stats.max_micros / 1000,
            mean: stats.mean_micros / 1000,
            stddev: stats.stddev_micros / 1000,
            median: ms(50.0)?,
            percentile_75: ms(75.0)?,
            percentile_95: ms(95.0)?,
            percentile_98: ms(98.0)?,
            percentile_99: ms(99.0)?,
            percentile_99_9: ms(99.9)?,
        })
    }

    /// Requests per second since the session started.
    pub fn get_mean_rate(&self) -> f64 {
        let elapsed = self.counters.rates.started.elapsed().as_secs_f64();
        if elapsed > 0.0 {
            Self::load(&self.counters.requests) as f64 / elapsed
        } else {
            0.0
        }
    }

    /// Requests per second, exponentially weighted over about a minute.
    pub fn get_one_minute_rate(&self) -> f64 {
        self.rates()[0]
    }

    /// Requests per second, exponentially weighted over about five minutes.
    pub fn get_five_minute_rate(&self) -> f64 {
        self.rates()[1]
    }

    /// Requests per second, exponentially weighted over about fifteen
    /// minutes.
    pub fn get_fifteen_minute_rate(&self) -> f64 {
        self.rates()[2]
    }

    fn rates(&self) -> [f64; 3] {
        let count = Self::load(&self.counters.requests);
        self.counters.rates.update(count, Instant::now())
    }

    fn latency_stats(&self) -> Result<LatencyStats, MetricsError> {
        LatencyStats::of(&self.counters.latency).ok_or(MetricsError::Empty)
    }
}

/// Statistics of the latency histogram, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LatencyStats {
    min_micros: u64,
    max_micros: u64,
    mean_micros: u64,
    stddev_micros: u64,
}

impl LatencyStats {
    /// `None` when nothing was recorded.
    fn of(h: &LatencyHistogram) -> Option<Self> {
        let counts = h.counts();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let used = || counts.iter().enumerate().filter(|(_, &c)| c > 0);
        let (first, _) = used().next()?;
        let (last, _) = used().next_back()?;
        let n = total as f64;
        let mean = used()
            .map(|(i, &c)| LatencyHistogram::midpoint(i) * c as f64)
            .sum::<f64>()
            / n;
        let variance = used()
            .map(|(i, &c)| (LatencyHistogram::midpoint(i) - mean).powi(2) * c as f64)
            .sum::<f64>()
            / n;
        Some(LatencyStats {
            min_micros: LatencyHistogram::lower_bound(first),
            // The largest value the last used bucket holds.
            max_micros: LatencyHistogram::upper_bound(last).saturating_sub(1),
            mean_micros: mean as u64,
            stddev_micros: variance.sqrt() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stats_of_an_empty_histogram_are_none() {
        assert_eq!(LatencyStats::of(&LatencyHistogram::default()), None);
    }

    #[test]
    fn stats_are_within_a_bucket_of_the_truth() {
        let h = LatencyHistogram::default();
        // 1 ms to 10 ms, evenly: mean 5.5 ms, stddev about 2.6 ms.
        for us in (1_000..=10_000).step_by(10) {
            h.record(Duration::from_micros(us));
        }
        let s = LatencyStats::of(&h).unwrap();
        assert!((900..=1_000).contains(&s.min_micros), "{s:?}");
        assert!((10_000..=11_300).contains(&s.max_micros), "{s:?}");
        assert!((5_200..=5_800).contains(&s.mean_micros), "{s:?}");
        assert!((2_400..=2_800).contains(&s.stddev_micros), "{s:?}");
    }

    #[test]
    fn a_constant_rate_is_what_every_average_converges_to() {
        let rates = Rates::default();
        let t0 = rates.started;
        // First read: the mean since the start.
        let first = rates.update(100, t0 + Duration::from_secs(1));
        assert_eq!(first, [100.0; 3]);
        // Ten minutes at 10 requests per second.
        let mut count = 100;
        let mut at = t0 + Duration::from_secs(1);
        let mut last = first;
        for _ in 0..120 {
            count += 50;
            at += Duration::from_secs(5);
            last = rates.update(count, at);
        }
        assert!((last[0] - 10.0).abs() < 0.01, "{last:?}");
        // The longer windows still remember the start, in their order.
        assert!(last[0] < last[1] && last[1] < last[2], "{last:?}");
        // A read at the same instant changes nothing.
        assert_eq!(rates.update(count, at), last);
    }

    #[test]
    fn an_idle_minute_decays_the_one_minute_rate_by_e() {
        let rates = Rates::default();
        let t0 = rates.started;
        let first = rates.update(600, t0 + Duration::from_secs(60));
        assert_eq!(first[0], 10.0);
        let idle = rates.update(600, t0 + Duration::from_secs(120));
        let expected = 10.0 * (-1.0f64).exp();
        assert!((idle[0] - expected).abs() < 1e-9, "{idle:?}");
        assert!((idle[2] - 10.0 * (-60.0f64 / 900.0).exp()).abs() < 1e-9);
    }
}
