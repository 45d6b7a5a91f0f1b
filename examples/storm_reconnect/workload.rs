//! The client side of the storm: a fixed-rate read/write workload spread over
//! many sessions, and a record of every request (when it was issued, how long
//! it took, whether it succeeded) from which the latency windows are computed.
//!
//! The workload is open-loop: each session issues its share of the rate on a
//! ticker whether or not earlier requests have finished (a slow cluster must
//! show as latency, not as a lower rate). A bound on requests in flight per
//! session keeps a stuck cluster from piling up tasks without limit; ticks
//! that find the bound reached are counted as skipped.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scylla_driver::{PreparedStatement, Session, Statement};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Requests in flight per session before ticks are skipped.
const MAX_IN_FLIGHT_PER_SESSION: usize = 64;
/// Distinct partition keys written and read.
const KEYS: i64 = 10_000;

/// One finished request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    /// When it was issued, in milliseconds since the run's start.
    pub(crate) at_ms: u32,
    /// How long it took (until its result or its error), in microseconds.
    pub(crate) micros: u32,
    /// Whether it succeeded.
    pub(crate) ok: bool,
}

/// Every request of a run, in completion order.
#[derive(Debug)]
pub(crate) struct Recorder {
    start: Instant,
    records: Mutex<Vec<Record>>,
    ok: AtomicU64,
    failed: AtomicU64,
    skipped: AtomicU64,
    tablet_requests: AtomicU64,
}

impl Recorder {
    pub(crate) fn new(start: Instant) -> Arc<Self> {
        Arc::new(Self {
            start,
            records: Mutex::new(Vec::with_capacity(1 << 16)),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            tablet_requests: AtomicU64::new(0),
        })
    }

    fn push(&self, issued: Instant, took: Duration, ok: bool) {
        let at_ms = issued.saturating_duration_since(self.start).as_millis();
        let rec = Record {
            at_ms: u32::try_from(at_ms).unwrap_or(u32::MAX),
            micros: u32::try_from(took.as_micros()).unwrap_or(u32::MAX),
            ok,
        };
        (if ok { &self.ok } else { &self.failed }).fetch_add(1, Ordering::Relaxed);
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(rec);
    }

    /// A copy of the records so far.
    pub(crate) fn records(&self) -> Vec<Record> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// (succeeded, failed) so far.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }

    /// Requests issued to the tablets table.
    pub(crate) fn tablet_requests(&self) -> u64 {
        self.tablet_requests.load(Ordering::Relaxed)
    }

    /// Ticks skipped because a session had too many requests in flight.
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
}

/// An INSERT and a SELECT of one table.
#[derive(Debug, Clone)]
struct Pair {
    insert: PreparedStatement,
    select: PreparedStatement,
}

/// The statements every session runs.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    vnodes: Pair,
    /// The tablets table's, when the workload has one.
    tablets: Option<Pair>,
}

async fn prepare_pair(s: &Session, table: &str) -> Result<Pair, scylla_driver::ExecutionError> {
    let insert = s
        .prepare(
            Statement::new(format!("INSERT INTO {table} (k, v) VALUES (?, ?)"))
                .with_idempotent(true),
        )
        .await?;
    let select = s
        .prepare(
            Statement::new(format!("SELECT k, v FROM {table} WHERE k = ?")).with_idempotent(true),
        )
        .await?;
    Ok(Pair { insert, select })
}

/// Creates the keyspaces and tables (through the first session) and
/// prepares the statements on every session: `storm.kv` (vnodes) and, with
/// `tablets = Some(n)` (ScyllaDB and the test cluster only: Cassandra has no
/// tablets), `storm_tablets.kv` with `n` tablets, which every other request
/// uses. The statements are idempotent, so a request caught on a node that
/// goes down is retried on another replica.
pub(crate) async fn prepare(
    sessions: &[Session],
    rf: usize,
    tablets: Option<usize>,
) -> Result<Vec<Statements>, Box<dyn std::error::Error + Send + Sync>> {
    let Some(first) = sessions.first() else {
        return Ok(Vec::new());
    };
    first
        .query_unpaged(
            format!(
                "CREATE KEYSPACE IF NOT EXISTS storm WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
            )
            .as_str(),
            (),
        )
        .await?;
    first
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS storm.kv (k bigint PRIMARY KEY, v text)",
            (),
        )
        .await?;
    if let Some(n) = tablets {
        first
            .query_unpaged(
                format!(
                    "CREATE KEYSPACE IF NOT EXISTS storm_tablets WITH replication = \
                     {{'class': 'NetworkTopologyStrategy', 'replication_factor': {rf}}} \
                     AND tablets = {{'enabled': true, 'initial': {n}}}"
                )
                .as_str(),
                (),
            )
            .await?;
        first
            .query_unpaged(
                "CREATE TABLE IF NOT EXISTS storm_tablets.kv (k bigint PRIMARY KEY, v text)",
                (),
            )
            .await?;
    }
    let mut out = Vec::with_capacity(sessions.len());
    for s in sessions {
        // The other sessions learn the new keyspace's replication from their
        // metadata; refresh it now rather than wait for the event.
        s.refresh_metadata().await?;
        let vnodes = prepare_pair(s, "storm.kv").await?;
        let tablets = match tablets {
            Some(_) => Some(prepare_pair(s, "storm_tablets.kv").await?),
            None => None,
        };
        out.push(Statements { vnodes, tablets });
    }
    Ok(out)
}

/// The running workload; [`Workload::stop`] ends it.
#[derive(Debug)]
pub(crate) struct Workload {
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Workload {
    /// Starts `rate` requests per second in total, half writes, half reads,
    /// spread evenly over `sessions`.
    pub(crate) fn start(
        sessions: &[Session],
        statements: &[Statements],
        rate: u32,
        recorder: Arc<Recorder>,
    ) -> Workload {
        let stop = CancellationToken::new();
        let n = sessions.len().max(1) as f64;
        let period = Duration::from_secs_f64(n / f64::from(rate.max(1)));
        let tasks = sessions
            .iter()
            .zip(statements)
            .enumerate()
            .map(|(i, (s, st))| {
                let (s, st, rec, stop) = (s.clone(), st.clone(), recorder.clone(), stop.clone());
                tokio::spawn(async move {
                    // Stagger the sessions' tickers over one period.
                    tokio::time::sleep(period.mul_f64(i as f64 / n)).await;
                    session_loop(s, st, period, rec, stop).await;
                })
            })
            .collect();
        Workload { stop, tasks }
    }

    /// Stops issuing requests and waits for the session loops (requests in
    /// flight finish on their own, bounded by the request timeout).
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

async fn session_loop(
    session: Session,
    st: Statements,
    period: Duration,
    rec: Arc<Recorder>,
    stop: CancellationToken,
) {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut rng = fastrand::Rng::new();
    // Requests cycle: write, read, then (with a tablets table) the same there.
    let mut turn = 0u8;
    let cycle = if st.tablets.is_some() { 4 } else { 2 };
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        if in_flight.load(Ordering::Relaxed) >= MAX_IN_FLIGHT_PER_SESSION {
            rec.skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let (s, st, rec, in_flight) = (session.clone(), st.clone(), rec.clone(), in_flight.clone());
        let k = rng.i64(0..KEYS);
        let is_write = turn % 2 == 0;
        let on_tablets = turn >= 2;
        turn = (turn + 1) % cycle;
        if on_tablets {
            rec.tablet_requests.fetch_add(1, Ordering::Relaxed);
        }
        tokio::spawn(async move {
            let issued = Instant::now();
            let pair = match (&st.tablets, on_tablets) {
                (Some(t), true) => t,
                _ => &st.vnodes,
            };
            let ok = if is_write {
                s.execute_unpaged(&pair.insert, (k, format!("value-{k}")))
                    .await
                    .is_ok()
            } else {
                s.execute_unpaged(&pair.select, (k,)).await.is_ok()
            };
            rec.push(issued, issued.elapsed(), ok);
            in_flight.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// p50, p99 and max of successful requests' latencies, in microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LatencyStats {
    pub(crate) ok: u64,
    pub(crate) failed: u64,
    pub(crate) p50_us: u64,
    pub(crate) p99_us: u64,
    pub(crate) max_us: u64,
}

impl LatencyStats {
    /// Statistics of the requests issued in `[from_ms, to_ms)`.
    pub(crate) fn of(records: &[Record], from_ms: u64, to_ms: u64) -> LatencyStats {
        let mut lat: Vec<u32> = Vec::new();
        let mut failed = 0;
        for r in records {
            let at = u64::from(r.at_ms);
            if at < from_ms || at >= to_ms {
                continue;
            }
            if r.ok {
                lat.push(r.micros);
            } else {
                failed += 1;
            }
        }
        lat.sort_unstable();
        let q = |q: f64| measure::percentile(&lat, q).map_or(0, u64::from);
        LatencyStats {
            ok: lat.len() as u64,
            failed,
            p50_us: q(0.5),
            p99_us: q(0.99),
            max_us: lat.last().map_or(0, |&m| u64::from(m)),
        }
    }
}
