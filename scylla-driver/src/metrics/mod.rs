//! The driver's numbers, two ways.
//!
//! - **Through the [`metrics`](https://docs.rs/metrics) facade**, the Rust
//!   ecosystem's standard: the application installs a recorder
//!   (`metrics-exporter-prometheus`, an OpenTelemetry bridge, statsd...) and
//!   every session records into it. With no recorder installed nothing is
//!   recorded: each call is one atomic load, with no allocation (per-request
//!   metrics carry no dynamic labels). The names and labels below are stable
//!   (constants in [`names`]); `examples/prometheus.rs` scrapes them.
//! - **In process**: [`Metrics`], relaxed atomic counters of one session
//!   (`Session::metrics()`), read without blocking the driver;
//!   [`Metrics::snapshot`] copies them. [`SessionMetrics`]
//!   (`Session::get_metrics()`, the official `scylla` crate's form) reads
//!   the same counters as requests by kind of paging, latency statistics in
//!   milliseconds and request rates.
//!
//! # Metrics of the facade
//!
//! | name | type | labels | what |
//! | --- | --- | --- | --- |
//! | `scylla_driver_requests_total` | counter | `outcome` | requests finished, after retries and speculative attempts |
//! | `scylla_driver_request_duration_seconds` | histogram | | request latency, retries included, any outcome |
//! | `scylla_driver_requests_in_flight` | gauge | | requests started, not finished |
//! | `scylla_driver_requests_queued` | gauge | | requests waiting for a free stream id (a saturated connection) |
//! | `scylla_driver_retries_total` | counter | | attempts retried by the retry policy |
//! | `scylla_driver_speculative_attempts_total` | counter | | speculative attempts started |
//! | `scylla_driver_shard_fallback_requests_total` | counter | | requests sent to another shard's connection (theirs had none) |
//! | `scylla_driver_connection_attempts_total` | counter | `node`, `shard`, `port`, `outcome` | connection attempts of the pools |
//! | `scylla_driver_connections` | gauge | `node`, `shard`, `port` | open pooled connections |
//! | `scylla_driver_shard_aware_fallbacks_total` | counter | `node`, `reason` | times a pool stopped using the shard-aware port |
//! | `scylla_driver_shard_aware_restored_total` | counter | `node` | times a pool used the shard-aware port again |
//! | `scylla_driver_reconnect_delay_seconds` | histogram | `node` | backoff delays waited before reconnecting |
//! | `scylla_driver_tablet_misroutes_total` | counter | `outcome` | requests the server answered with a tablet's routing (v1: misrouted; v2: stale tablet version) (`error`: payload did not decode) |
//! | `scylla_driver_tablets_known` | gauge | | tablets known, over all tables |
//! | `scylla_driver_tls_handshakes_total` | counter | `node`, `kind` | TLS handshakes of pool connections: `full`, or `resumed` with a session ticket |
//!
//! Label values:
//!
//! | label | values |
//! | --- | --- |
//! | `outcome` | `ok`, `error` |
//! | `node` | the node's CQL address, `ip:port` |
//! | `shard` | the shard number; `none` for an unsharded node (Cassandra); `unknown` for a failed regular-port attempt |
//! | `port` | `regular` (9042), `shard_aware` (19042), `regular_tls` (9142), `shard_aware_tls` (19142) |
//! | `reason` | `shard_mismatch` (NAT rewriting source ports?), `refused`, `timed_out`, `ports_exhausted` |
//! | `kind` | `full`, `resumed` (a TLS handshake with an accepted session ticket) |
//!
//! Connection and pool metrics are shared by every session of the process
//! (a recorder is process-wide); install the recorder before building
//! sessions so that it also sees their first connections.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use crate::connection::{IoCounters, IoSnapshot};

pub mod names;
pub(crate) mod record;
mod stats;

pub(crate) use self::stats::OpenConnections;
pub use self::stats::{MetricsError, SessionMetrics, Snapshot};

/// How a request pages, as [`SessionMetrics`] counts requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paging {
    /// The whole result at once (and batches).
    Unpaged,
    /// One page, the caller holding the paging state.
    Manual,
    /// A page fetched by a row stream.
    Auto,
}

/// Session-wide counters.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Socket I/O of every connection of the session.
    pub io: Arc<IoCounters>,
    /// Connection attempts to the regular port that succeeded.
    pub connects_regular_ok: AtomicU64,
    /// Connection attempts to the regular port that failed.
    pub connects_regular_failed: AtomicU64,
    /// Connection attempts to the shard-aware port that succeeded.
    pub connects_shard_aware_ok: AtomicU64,
    /// Connection attempts to the shard-aware port that failed.
    pub connects_shard_aware_failed: AtomicU64,
    /// Shard-aware connections that landed on another shard than asked for.
    pub wrong_shard_landings: AtomicU64,
    /// Connections closed right after opening because their shard was full.
    pub excess_connections_closed: AtomicU64,
    /// Source ports skipped because the kernel said they were taken.
    pub source_port_retries: AtomicU64,
    /// Times a node's pool stopped using the shard-aware port.
    pub shard_aware_fallbacks: AtomicU64,
    /// Times a node's pool started using the shard-aware port again.
    pub shard_aware_restored: AtomicU64,
    /// Reconnect delays waited, count and total in microseconds.
    pub reconnect_delays: AtomicU64,
    /// Sum of reconnect delays, in microseconds.
    pub reconnect_delay_micros_total: AtomicU64,
    /// Requests sent to another shard's connection because their shard had none.
    pub shard_fallback_requests: AtomicU64,
    /// Pool handshakes the node shed under load (answered with backoff).
    pub handshakes_shed: AtomicU64,
    /// Pool connections whose TLS handshake ran in full.
    pub tls_handshakes_full: AtomicU64,
    /// Pool connections whose TLS handshake resumed an earlier session (the
    /// node accepted a session ticket).
    pub tls_handshakes_resumed: AtomicU64,
    /// Background attempts to cover a shard that has no connection (regular
    /// port, rate-limited; see `pool::refill`).
    pub coverage_attempts: AtomicU64,
    /// First connections to a node raced by a second attempt because the
    /// first had not completed its setup in time (a stalled setup).
    pub setup_races: AtomicU64,
    /// The slowest recent connection setup of the session's pools, in
    /// microseconds, decaying by 1/8 with each setup (0: none yet): a first
    /// connection still setting up after 4 times this (at least 100 ms) is
    /// raced by a second one.
    pub slowest_recent_setup_micros: AtomicU64,
    /// Connection setups of the session's pools in flight now.
    pub setups_in_flight: AtomicU64,
    /// The quickest first connection of the session's pools to any node
    /// (opened while the pool held none), in microseconds (0: none yet):
    /// after an outage, a pool spreads its first open over a window in
    /// proportion to it (see `pool::pacing`).
    pub quickest_setup_micros: AtomicU64,
    /// Surplus connections closed because a new one covered a missing shard.
    pub surplus_connections_retired: AtomicU64,
    /// Requests started.
    pub requests: AtomicU64,
    /// Requests that ended in an error (after retries).
    pub request_errors: AtomicU64,
    /// Of [`requests`](Self::requests): pages of `query_single_page` /
    /// `execute_single_page`.
    pub requests_manually_paged: AtomicU64,
    /// Of [`requests`](Self::requests): pages fetched by row streams.
    pub requests_automatically_paged: AtomicU64,
    /// Of [`request_errors`](Self::request_errors): manually paged ones.
    pub errors_manually_paged: AtomicU64,
    /// Of [`request_errors`](Self::request_errors): pages of row streams.
    pub errors_automatically_paged: AtomicU64,
    /// Requests that failed because their deadline passed.
    pub request_timeouts: AtomicU64,
    /// Connection attempts of the pools that timed out.
    pub connect_timeouts: AtomicU64,
    /// Attempts retried on another target.
    pub retries: AtomicU64,
    /// Speculative attempts started.
    pub speculative_attempts: AtomicU64,
    /// Tablet routing payloads received: `tablets-routing-v1`, requests the
    /// server saw misrouted (wrong node or shard for a tablet table), or
    /// `tablets-routing-v2`, requests whose tablet version block was stale.
    pub tablet_payloads: AtomicU64,
    /// Tablet routing payloads that did not decode (ignored).
    pub tablet_payload_errors: AtomicU64,
    /// Tablets currently known, over all tables.
    pub tablets_known: AtomicU64,
    /// Rows of `system.tablets` read by warm-ups.
    pub tablet_warmup_rows: AtomicU64,
    /// Request latency histogram (log-linear buckets of microseconds).
    pub latency: LatencyHistogram,
    /// The request rate's moving averages ([`SessionMetrics`]).
    rates: stats::Rates,
}

/// A copy of the counters at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)] // same names as `Metrics`
pub struct MetricsSnapshot {
    pub connects_regular_ok: u64,
    pub connects_regular_failed: u64,
    pub connects_shard_aware_ok: u64,
    pub connects_shard_aware_failed: u64,
    pub wrong_shard_landings: u64,
    pub excess_connections_closed: u64,
    pub source_port_retries: u64,
    pub shard_aware_fallbacks: u64,
    pub shard_aware_restored: u64,
    pub reconnect_delays: u64,
    pub reconnect_delay_micros_total: u64,
    pub shard_fallback_requests: u64,
    pub handshakes_shed: u64,
    pub tls_handshakes_full: u64,
    pub tls_handshakes_resumed: u64,
    pub coverage_attempts: u64,
    pub setup_races: u64,
    pub surplus_connections_retired: u64,
    pub requests: u64,
    pub request_errors: u64,
    pub requests_manually_paged: u64,
    pub requests_automatically_paged: u64,
    pub errors_manually_paged: u64,
    pub errors_automatically_paged: u64,
    pub request_timeouts: u64,
    pub connect_timeouts: u64,
    pub retries: u64,
    pub speculative_attempts: u64,
    pub tablet_payloads: u64,
    pub tablet_payload_errors: u64,
    pub tablets_known: u64,
    pub tablet_warmup_rows: u64,
}

impl MetricsSnapshot {
    /// Every connection attempt, of any port and outcome.
    pub fn connect_attempts(&self) -> u64 {
        self.connects_regular_ok
            + self.connects_regular_failed
            + self.connects_shard_aware_ok
            + self.connects_shard_aware_failed
    }
}

impl Metrics {
    pub(crate) fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request of `paging` that `run` (which counted it in
    /// [`requests`](Self::requests) and, failed, in
    /// [`request_errors`](Self::request_errors)) ended with: a page in its
    /// paged counter (unpaged requests are the rest, so they cost nothing
    /// here), a failure in its paged error counter and a timeout in
    /// [`request_timeouts`](Self::request_timeouts). Counted after the
    /// totals, so that the unpaged counts derived from them never wrap.
    pub(crate) fn request_ended(&self, paging: Paging, failed: bool, timed_out: bool) {
        let (requests, errors) = match paging {
            Paging::Unpaged => (None, None),
            Paging::Manual => (
                Some(&self.requests_manually_paged),
                Some(&self.errors_manually_paged),
            ),
            Paging::Auto => (
                Some(&self.requests_automatically_paged),
                Some(&self.errors_automatically_paged),
            ),
        };
        if let Some(c) = requests {
            Self::inc(c);
        }
        if failed {
            if let Some(c) = errors {
                Self::inc(c);
            }
            if timed_out {
                Self::inc(&self.request_timeouts);
            }
        }
    }

    /// Copies the counters.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            connects_regular_ok: r(&self.connects_regular_ok),
            connects_regular_failed: r(&self.connects_regular_failed),
            connects_shard_aware_ok: r(&self.connects_shard_aware_ok),
            connects_shard_aware_failed: r(&self.connects_shard_aware_failed),
            wrong_shard_landings: r(&self.wrong_shard_landings),
            excess_connections_closed: r(&self.excess_connections_closed),
            source_port_retries: r(&self.source_port_retries),
            shard_aware_fallbacks: r(&self.shard_aware_fallbacks),
            shard_aware_restored: r(&self.shard_aware_restored),
            reconnect_delays: r(&self.reconnect_delays),
            reconnect_delay_micros_total: r(&self.reconnect_delay_micros_total),
            shard_fallback_requests: r(&self.shard_fallback_requests),
            handshakes_shed: r(&self.handshakes_shed),
            tls_handshakes_full: r(&self.tls_handshakes_full),
            tls_handshakes_resumed: r(&self.tls_handshakes_resumed),
            coverage_attempts: r(&self.coverage_attempts),
            setup_races: r(&self.setup_races),
            surplus_connections_retired: r(&self.surplus_connections_retired),
            requests: r(&self.requests),
            request_errors: r(&self.request_errors),
            requests_manually_paged: r(&self.requests_manually_paged),
            requests_automatically_paged: r(&self.requests_automatically_paged),
            errors_manually_paged: r(&self.errors_manually_paged),
            errors_automatically_paged: r(&self.errors_automatically_paged),
            request_timeouts: r(&self.request_timeouts),
            connect_timeouts: r(&self.connect_timeouts),
            retries: r(&self.retries),
            speculative_attempts: r(&self.speculative_attempts),
            tablet_payloads: r(&self.tablet_payloads),
            tablet_payload_errors: r(&self.tablet_payload_errors),
            tablets_known: r(&self.tablets_known),
            tablet_warmup_rows: r(&self.tablet_warmup_rows),
        }
    }
}

/// Buckets per power of two in [`LatencyHistogram`].
const SUB_BUCKETS: usize = 8;
/// Powers of two covered: 1 µs .. 2^31 µs (about 36 min).
const OCTAVES: usize = 32;

/// A lock-free latency histogram: log-linear buckets (8 per power of two, so
/// quantiles are within about 9%), microsecond resolution.
#[derive(Debug)]
pub struct LatencyHistogram {
    buckets: Box<[AtomicU64]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            buckets: (0..SUB_BUCKETS * OCTAVES)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
}

impl LatencyHistogram {
    fn index(micros: u64) -> usize {
        if micros < SUB_BUCKETS as u64 {
            return micros as usize;
        }
        let octave = 63 - micros.leading_zeros() as usize; // >= 3
        let sub = ((micros >> (octave - 3)) & (SUB_BUCKETS as u64 - 1)) as usize;
        ((octave - 2) * SUB_BUCKETS + sub).min(SUB_BUCKETS * OCTAVES - 1)
    }

    /// The smallest value that falls in bucket `i`.
    fn lower_bound(i: usize) -> u64 {
        if i < SUB_BUCKETS {
            return i as u64;
        }
        let octave = i / SUB_BUCKETS + 2;
        let sub = (i % SUB_BUCKETS) as u64;
        (1u64 << octave) + (sub << (octave - 3))
    }

    /// One past the largest value that falls in bucket `i`.
    fn upper_bound(i: usize) -> u64 {
        if i + 1 < SUB_BUCKETS * OCTAVES {
            Self::lower_bound(i + 1)
        } else {
            u64::MAX
        }
    }

    /// The middle of bucket `i`, the value a bucket stands for in means.
    fn midpoint(i: usize) -> f64 {
        let lo = Self::lower_bound(i) as f64;
        match i + 1 < SUB_BUCKETS * OCTAVES {
            true => (lo + Self::upper_bound(i) as f64) / 2.0,
            false => lo,
        }
    }

    /// The count of every bucket.
    fn counts(&self) -> Vec<u64> {
        self.buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    /// Records one latency.
    pub fn record(&self, latency: std::time::Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.buckets[Self::index(micros)].fetch_add(1, Ordering::Relaxed);
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The `q`-quantile (0.0..=1.0) in microseconds (a bucket's lower bound);
    /// `None` when empty.
    pub fn quantile_micros(&self, q: f64) -> Option<u64> {
        let counts = self.counts();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Self::lower_bound(i));
            }
        }
        Some(Self::lower_bound(counts.len() - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..100_000u64).step_by(7) {
            let i = LatencyHistogram::index(v);
            assert!(i >= last);
            last = i;
            let lb = LatencyHistogram::lower_bound(i);
            assert!(lb <= v, "v {v} lb {lb}");
            assert!(
                v < 8 || (v - lb) as f64 / v as f64 <= 0.125,
                "v {v} lb {lb}"
            );
        }
    }

    #[test]
    fn quantiles() {
        let h = LatencyHistogram::default();
        assert_eq!(h.quantile_micros(0.5), None);
        for us in 1..=1000 {
            h.record(Duration::from_micros(us));
        }
        let p50 = h.quantile_micros(0.5).unwrap();
        assert!((440..=500).contains(&p50), "{p50}");
        let p99 = h.quantile_micros(0.99).unwrap();
        assert!((870..=990).contains(&p99), "{p99}");
        assert_eq!(h.count(), 1000);
    }
}
