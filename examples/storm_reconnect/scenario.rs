//! One variant of the storm against the in-process test cluster: the cold
//! start of every session at once (phase 1), then a node restart under a
//! steady workload (phase 2), with a 100 ms timeline of both.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use scylla_cql::frame::wire::{put_inet, put_string};
use scylla_driver::metrics::MetricsSnapshot;
use scylla_driver::pool::backoff::{ExponentialBackoff, Jitter};
use scylla_driver::pool::{NodePool, PoolSnapshot};
use scylla_driver::tls::TlsConfig;
use scylla_driver::{Session, SessionBuilder};
use scylla_testbed::{
    AdmissionConfig, EventKind, Faults, HandshakeCost, NatMode, StatsCounters, TestCluster,
    TicketScope, TlsOptions,
};
use tokio_util::sync::CancellationToken;

use crate::progress::Progress;
use crate::workload::{self, LatencyStats, Recorder, Workload};

/// Which driver configuration (and network) a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Variant {
    pub(crate) name: &'static str,
    pub(crate) shard_aware_port: bool,
    pub(crate) nat: bool,
    pub(crate) lockstep: bool,
}

/// Every variant, in the order they run and are reported.
pub(crate) const VARIANTS: [Variant; 4] = [
    Variant {
        name: "baseline",
        shard_aware_port: true,
        nat: false,
        lockstep: false,
    },
    Variant {
        name: "no-shard-aware",
        shard_aware_port: false,
        nat: false,
        lockstep: false,
    },
    Variant {
        name: "nat",
        shard_aware_port: true,
        nat: true,
        lockstep: false,
    },
    Variant {
        name: "lockstep",
        shard_aware_port: true,
        nat: false,
        lockstep: true,
    },
];

/// The size and timing of a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub(crate) nodes: usize,
    pub(crate) shards: u16,
    pub(crate) sessions: usize,
    /// Requests per second over all sessions.
    pub(crate) rate: u32,
    pub(crate) rf: usize,
    pub(crate) cost: HandshakeCost,
    pub(crate) cpu_concurrency: usize,
    pub(crate) shed_after: Duration,
    /// Workload before the restart.
    pub(crate) steady: Duration,
    /// How long the node stays down.
    pub(crate) down: Duration,
    /// Workload after every shard is covered again.
    pub(crate) after: Duration,
    /// Bound on waiting for coverage (each phase).
    pub(crate) coverage_timeout: Duration,
    /// The pools' background coverage interval (without the shard-aware port).
    pub(crate) coverage_interval: Duration,
    /// Reconnect backoff bounds.
    pub(crate) backoff_base: Duration,
    pub(crate) backoff_cap: Duration,
    pub(crate) reconnect_spread: Duration,
    pub(crate) request_timeout: Duration,
    /// Every connection over TLS (the cluster's TLS ports and its CA).
    pub(crate) tls: bool,
    /// With TLS: which shards of a node accept its session tickets.
    pub(crate) tickets: TicketScope,
    /// With TLS: the pools pace a node's opens by the tickets held for it.
    pub(crate) ticket_pacing: bool,
    /// With TLS: the cluster's CPU time per full and per resumed handshake.
    pub(crate) tls_costs: (Duration, Duration),
}

/// TLS handshakes a node (or the cluster) counted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TlsHandshakes {
    pub(crate) full: u64,
    pub(crate) resumed: u64,
}

impl TlsHandshakes {
    fn of(c: &StatsCounters) -> Self {
        TlsHandshakes {
            full: c.tls_handshakes_full,
            resumed: c.tls_handshakes_resumed,
        }
    }
}

/// The node that is restarted in phase 2.
pub(crate) const RESTARTED: usize = 1;
/// Tablets of the workload's tablets table (`storm_tablets.kv`).
pub(crate) const WORKLOAD_TABLETS: usize = 32;

/// One 100 ms point of the timeline.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sample {
    pub(crate) t_ms: u64,
    /// Connections open at the restarted node (cluster side).
    pub(crate) connections: u64,
    /// Connections the restarted node accepted in its current lifetime.
    pub(crate) accepted: u64,
    /// Handshakes waiting for admission at the restarted node.
    pub(crate) waiting: u64,
    /// Handshakes in their CPU stage at the restarted node.
    pub(crate) in_progress: u64,
    /// Shards of the restarted node covered, summed over sessions (driver side).
    pub(crate) covered: u64,
    /// Requests issued in this window that succeeded / failed.
    pub(crate) ok: u64,
    pub(crate) failed: u64,
    /// p99 latency of the window's successful requests (0: none).
    pub(crate) p99_us: u64,
}

/// Phase 1: every session connects at once.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ColdStart {
    /// sessions x nodes x shards.
    pub(crate) ideal: u64,
    /// Connections the cluster accepted, both ports (includes one control
    /// connection per session).
    pub(crate) accepted: u64,
    pub(crate) accepted_regular: u64,
    pub(crate) accepted_shard_aware: u64,
    /// Control connections among the accepted (one per session).
    pub(crate) control: u64,
    /// The pools' connection attempts (driver metrics, any outcome).
    pub(crate) attempts: u64,
    pub(crate) driver: MetricsSnapshot,
    pub(crate) time_ms: u64,
    pub(crate) covered: bool,
    /// Until every pool held one connection per shard (wherever they landed).
    pub(crate) filled_ms: u64,
    pub(crate) filled: bool,
    /// Accepted by then (both ports, control connections included).
    pub(crate) accepted_filled: u64,
    pub(crate) peak_waiting: u64,
    pub(crate) peak_in_progress: u64,
    pub(crate) shed: u64,
    /// TLS handshakes the cluster counted when every shard was covered
    /// (control connections included).
    pub(crate) tls: TlsHandshakes,
}

/// Phase 2: a node restart under load.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Restart {
    /// sessions x shards.
    pub(crate) ideal: u64,
    /// Connections the restarted node accepted until its shards were covered again.
    pub(crate) accepted: u64,
    /// Accepted by the end of the run (late excess connections included).
    pub(crate) accepted_end: u64,
    /// The pools' attempts from the node's start until coverage.
    pub(crate) attempts: u64,
    /// The pools' failed attempts while the node was down.
    pub(crate) attempts_while_down: u64,
    pub(crate) wrong_shard: u64,
    pub(crate) excess_closed: u64,
    /// From the node's start until every session covers all its shards.
    pub(crate) time_ms: u64,
    pub(crate) covered: bool,
    /// From the node's start until every pool held one connection per shard.
    pub(crate) filled_ms: u64,
    pub(crate) filled: bool,
    /// Accepted by the restarted node by then.
    pub(crate) accepted_filled: u64,
    pub(crate) down_ms: u64,
    pub(crate) peak_waiting: u64,
    pub(crate) peak_in_progress: u64,
    pub(crate) shed: u64,
    /// PREPAREs the restarted node received after its start (it forgot
    /// every statement).
    pub(crate) prepares: u64,
    /// TLS handshakes the restarted node counted in its new lifetime, when
    /// every session covered it again.
    pub(crate) tls: TlsHandshakes,
    pub(crate) failed_requests: u64,
    pub(crate) skipped: u64,
    /// Requests to the tablets table, and how many of them the cluster saw
    /// at a node or shard not holding their tablet (over the whole phase).
    pub(crate) tablet_requests: u64,
    pub(crate) tablet_misrouted: u64,
    /// Of which before the node went down (the steady state).
    pub(crate) tablet_misrouted_steady: u64,
    /// `tablets-routing-v1` payloads the sessions received in the phase.
    pub(crate) tablet_payloads: u64,
    pub(crate) before: LatencyStats,
    pub(crate) during: LatencyStats,
    pub(crate) after: LatencyStats,
}

/// Everything measured for one variant.
#[derive(Debug, Clone)]
pub(crate) struct VariantResult {
    pub(crate) variant: Variant,
    pub(crate) cold: ColdStart,
    pub(crate) restart: Restart,
    pub(crate) timeline: Vec<Sample>,
    /// Offsets (ms) of the node's stop, start and full coverage, for the chart.
    pub(crate) marks: [u64; 3],
    pub(crate) wall_ms: u64,
}

fn session_builder(
    contact: SocketAddr,
    v: Variant,
    p: &Params,
    tls: Option<&TlsConfig>,
) -> SessionBuilder {
    let mut backoff = ExponentialBackoff::new(p.backoff_base, p.backoff_cap);
    if v.lockstep {
        backoff = backoff.with_jitter(Jitter::None);
    }
    let mut b = SessionBuilder::new()
        .known_node(contact.to_string())
        .shard_aware_port(v.shard_aware_port)
        .request_timeout(p.request_timeout)
        .reconnect_policy(Arc::new(backoff))
        .reconnect_spread(if v.lockstep {
            Duration::ZERO
        } else {
            p.reconnect_spread
        })
        .coverage_interval(p.coverage_interval)
        .tls_ticket_pacing(p.ticket_pacing);
    b.config.initial_connect_timeout = p.coverage_timeout;
    match tls {
        Some(t) => b.tls(t.clone()),
        None => b,
    }
}

/// Sums the sessions' driver metrics.
pub(crate) fn driver_metrics(sessions: &[Session]) -> MetricsSnapshot {
    let mut t = MetricsSnapshot::default();
    for s in sessions {
        let m = s.metrics().snapshot();
        t.connects_regular_ok += m.connects_regular_ok;
        t.connects_regular_failed += m.connects_regular_failed;
        t.connects_shard_aware_ok += m.connects_shard_aware_ok;
        t.connects_shard_aware_failed += m.connects_shard_aware_failed;
        t.wrong_shard_landings += m.wrong_shard_landings;
        t.excess_connections_closed += m.excess_connections_closed;
        t.setup_races += m.setup_races;
        t.shard_aware_fallbacks += m.shard_aware_fallbacks;
        t.reconnect_delays += m.reconnect_delays;
        t.requests += m.requests;
        t.request_errors += m.request_errors;
        t.retries += m.retries;
        t.tablet_payloads += m.tablet_payloads;
        t.handshakes_shed += m.handshakes_shed;
        t.coverage_attempts += m.coverage_attempts;
        t.surplus_connections_retired += m.surplus_connections_retired;
    }
    t
}

/// The pools of every session for the node at `addr`.
pub(crate) fn pools_of(sessions: &[Session], addr: SocketAddr) -> Vec<NodePool> {
    sessions
        .iter()
        .filter_map(|s| {
            s.cluster_state()
                .nodes
                .iter()
                .find(|n| n.address == addr)
                .map(|n| n.pool.clone())
        })
        .collect()
}

/// Waits (bounded) until every session's current pool for `addr` has all
/// its shards; the time it took, or `None`. Polls every 10 ms: a session may
/// replace a node's pool when its metadata changes, so pools are looked up
/// afresh each time rather than held.
pub(crate) async fn wait_all_full(
    sessions: &[Session],
    addr: SocketAddr,
    timeout: Duration,
) -> Option<Duration> {
    wait_all(sessions, &[addr], timeout, is_full).await
}

/// Every shard has a connection.
pub(crate) fn is_full(s: &PoolSnapshot) -> bool {
    !s.shards.is_empty() && s.shards.iter().all(|c| !c.is_empty())
}

/// The pool holds one connection per shard, wherever they landed.
pub(crate) fn is_filled(s: &PoolSnapshot) -> bool {
    !s.shards.is_empty() && s.len() >= s.shards.len()
}

/// Waits (bounded, polling every 10 ms) until `pred` holds for every
/// session's pool of every node in `addrs`; the time it took, or `None`.
pub(crate) async fn wait_all(
    sessions: &[Session],
    addrs: &[SocketAddr],
    timeout: Duration,
    pred: fn(&PoolSnapshot) -> bool,
) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        let full = addrs.iter().all(|&addr| {
            let pools = pools_of(sessions, addr);
            pools.len() == sessions.len() && pools.iter().all(|p| pred(&p.snapshot()))
        });
        if full {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// The STATUS_CHANGE UP event body for `addr`, as a node's gossip would push it.
fn up_event(addr: SocketAddr) -> bytes::Bytes {
    let mut b = BytesMut::new();
    // Both strings are short constants: encoding cannot fail.
    let _ = put_string(&mut b, "STATUS_CHANGE", "event type");
    let _ = put_string(&mut b, "UP", "change");
    put_inet(&mut b, &addr);
    b.freeze()
}

/// Runs one variant from cluster start to shutdown.
pub(crate) async fn run(
    v: Variant,
    p: &Params,
    progress: &Progress,
) -> Result<VariantResult, String> {
    let wall = Instant::now();
    let mut cb = TestCluster::builder()
        .nodes(p.nodes)
        .shards(p.shards)
        .admission(AdmissionConfig {
            cpu_concurrency: p.cpu_concurrency,
            cost: p.cost,
            shed_after: p.shed_after,
        });
    if p.tls {
        cb = cb.tls(
            TlsOptions::default()
                .tickets(p.tickets)
                .handshake_costs(p.tls_costs.0, p.tls_costs.1),
        );
    }
    if v.nat {
        for i in 0..p.nodes {
            cb = cb.faults(i, Faults::none().with_nat(NatMode::Random));
        }
    }
    let cluster = Arc::new(cb.start().await.map_err(|e| format!("cluster: {e}"))?);
    let (addrs, tls) = if p.tls {
        let ca = cluster.tls_ca_pem().ok_or("the cluster has no TLS CA")?;
        let tls = TlsConfig::builder()
            .ca_pem(ca.as_bytes())
            .and_then(|b| b.build())
            .map_err(|e| format!("TLS: {e}"))?;
        (cluster.tls_addrs(), Some(tls))
    } else {
        (cluster.cql_addrs(), None)
    };
    let restarted_addr = addrs[RESTARTED];
    let recorder = Recorder::new(Instant::now());
    let t0 = Instant::now();

    // The sampler: cluster-side gauges of the restarted node and driver-side
    // coverage of it, every 100 ms, bounded in count.
    let watched: Arc<Mutex<Vec<Session>>> = Arc::default();
    let stop_sampler = CancellationToken::new();
    let sampler = {
        let (cluster, watched, stop, progress) = (
            cluster.clone(),
            watched.clone(),
            stop_sampler.clone(),
            progress.clone(),
        );
        let recorder = recorder.clone();
        let ideal = (p.sessions * p.shards as usize) as u64;
        tokio::spawn(async move {
            let mut out = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            // At most 5 minutes of samples.
            for _ in 0..3000 {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let n = cluster
                    .node_stats(RESTARTED)
                    .map(|s| s.node)
                    .unwrap_or_default();
                let sessions = watched.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let covered: u64 = pools_of(&sessions, restarted_addr)
                    .iter()
                    .map(|pool| pool.snapshot().covered_shards() as u64)
                    .sum();
                out.push(Sample {
                    t_ms: t0.elapsed().as_millis() as u64,
                    connections: n.connections,
                    accepted: n.accepted_regular + n.accepted_shard_aware,
                    waiting: n.handshakes_waiting,
                    in_progress: n.handshakes_in_progress,
                    covered,
                    ..Sample::default()
                });
                let (ok, failed) = recorder.counts();
                progress.update(format_args!(
                    "node {RESTARTED}: {} conns, {covered}/{ideal} shards covered, {} waiting | requests ok {ok} failed {failed}",
                    n.connections, n.handshakes_waiting
                ));
            }
            out
        })
    };

    // Phase 1: every session at once.
    progress.phase(v.name, "cold start");
    let mut tasks = tokio::task::JoinSet::new();
    // Contact points (and so control connections) avoid the node that will be
    // restarted: the test cluster drops a stopped node from system.peers
    // (ScyllaDB keeps it), so a control connection that had to move during
    // the restart would make its session forget the node and start a fresh
    // pool for it, which is not the reconnect path this measures.
    let contacts: Vec<SocketAddr> = addrs
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != RESTARTED || addrs.len() == 1)
        .map(|(_, a)| *a)
        .collect();
    for i in 0..p.sessions {
        let b = session_builder(contacts[i % contacts.len()], v, p, tls.as_ref());
        let watched = watched.clone();
        tasks.spawn(async move {
            let s = b.build().await.map_err(|e| format!("session: {e}"))?;
            watched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(s.clone());
            Ok::<_, String>(s)
        });
    }
    let mut sessions = Vec::with_capacity(p.sessions);
    let mut cold = ColdStart {
        ideal: (p.sessions * p.nodes * p.shards as usize) as u64,
        ..ColdStart::default()
    };
    while let Some(r) = tasks.join_next().await {
        sessions.push(r.map_err(|e| format!("session task: {e}"))??);
    }
    let accepted_now = |c: &TestCluster| {
        let st = c.stats();
        st.total(|c| c.accepted_regular) + st.total(|c| c.accepted_shard_aware)
    };
    let left = p.coverage_timeout.saturating_sub(t0.elapsed());
    cold.filled = wait_all(&sessions, &addrs, left, is_filled).await.is_some();
    cold.filled_ms = t0.elapsed().as_millis() as u64;
    cold.accepted_filled = accepted_now(&cluster);
    cold.covered = wait_all(&sessions, &addrs, p.coverage_timeout, is_full)
        .await
        .is_some();
    cold.time_ms = t0.elapsed().as_millis() as u64;
    let stats = cluster.stats();
    cold.accepted_regular = stats.total(|c| c.accepted_regular);
    cold.accepted_shard_aware = stats.total(|c| c.accepted_shard_aware);
    cold.accepted = cold.accepted_regular + cold.accepted_shard_aware;
    cold.control = p.sessions as u64;
    cold.peak_waiting = stats
        .nodes
        .iter()
        .map(|n| n.node.peak_handshakes_waiting)
        .max()
        .unwrap_or(0);
    cold.peak_in_progress = stats
        .nodes
        .iter()
        .map(|n| n.node.peak_handshakes_in_progress)
        .max()
        .unwrap_or(0);
    cold.shed = stats.total(|c| c.handshakes_shed);
    cold.tls = TlsHandshakes {
        full: stats.total(|c| c.tls_handshakes_full),
        resumed: stats.total(|c| c.tls_handshakes_resumed),
    };
    cold.driver = driver_metrics(&sessions);
    cold.attempts = cold.driver.connect_attempts();

    // Phase 2: steady workload, then the restart.
    progress.phase(v.name, "workload");
    let phase2_start = driver_metrics(&sessions);
    let statements = workload::prepare(&sessions, p.rf, Some(WORKLOAD_TABLETS))
        .await
        .map_err(|e| format!("schema: {e}"))?;
    let load = Workload::start(&sessions, &statements, p.rate, recorder.clone());
    tokio::time::sleep(p.steady).await;

    progress.phase(v.name, "node down");
    let before_stop = driver_metrics(&sessions);
    // The restarted node's counters start again from zero: keep its count.
    let misrouted_before_stop = cluster
        .node_stats(RESTARTED)
        .map_or(0, |s| s.node.requests_tablet_misrouted);
    let tablet_misrouted_steady = cluster.stats().total(|c| c.requests_tablet_misrouted);
    let t_stop = t0.elapsed();
    cluster
        .stop_node(RESTARTED)
        .await
        .map_err(|e| format!("stop: {e}"))?;
    for pool in pools_of(&sessions, restarted_addr) {
        pool.wait_for(p.coverage_timeout, |s| s.is_empty()).await;
    }
    tokio::time::sleep((t_stop + p.down).saturating_sub(t0.elapsed())).await;

    progress.phase(v.name, "node restarted");
    let at_start = driver_metrics(&sessions);
    let t_start = t0.elapsed();
    cluster
        .start_node(RESTARTED)
        .await
        .map_err(|e| format!("start: {e}"))?;
    // The other nodes' gossip sees it up and every control connection hears.
    tokio::time::sleep(Duration::from_millis(50)).await;
    cluster.push_event(EventKind::StatusChange, up_event(restarted_addr));
    let filled = wait_all(&sessions, &[restarted_addr], p.coverage_timeout, is_filled).await;
    let t_filled = t0.elapsed();
    let accepted_filled = cluster
        .node_stats(RESTARTED)
        .map_or(0, |s| s.node.accepted_regular + s.node.accepted_shard_aware);
    let full = wait_all_full(&sessions, restarted_addr, p.coverage_timeout).await;
    let t_covered = t0.elapsed();
    let covered_stats = cluster
        .node_stats(RESTARTED)
        .map(|s| s.node)
        .unwrap_or_default();
    let at_covered = driver_metrics(&sessions);

    progress.phase(v.name, "after");
    tokio::time::sleep(p.after).await;
    load.stop().await;
    let t_end = t0.elapsed();
    stop_sampler.cancel();
    let mut timeline = sampler.await.map_err(|e| format!("sampler: {e}"))?;
    let end_stats = cluster
        .node_stats(RESTARTED)
        .map(|s| s.node)
        .unwrap_or_default();
    let tablet_misrouted =
        cluster.stats().total(|c| c.requests_tablet_misrouted) + misrouted_before_stop;
    let at_end = driver_metrics(&sessions);

    let ms = |d: Duration| d.as_millis() as u64;
    let records = recorder.records();
    let during = LatencyStats::of(&records, ms(t_stop), ms(t_covered));
    let after = LatencyStats::of(&records, ms(t_covered), ms(t_end));
    let restart = Restart {
        ideal: (p.sessions * p.shards as usize) as u64,
        accepted: covered_stats.accepted_regular + covered_stats.accepted_shard_aware,
        accepted_end: end_stats.accepted_regular + end_stats.accepted_shard_aware,
        attempts: at_covered.connect_attempts() - at_start.connect_attempts(),
        attempts_while_down: at_start.connect_attempts() - before_stop.connect_attempts(),
        wrong_shard: at_covered.wrong_shard_landings - at_start.wrong_shard_landings,
        excess_closed: at_covered.excess_connections_closed - at_start.excess_connections_closed,
        time_ms: ms(t_covered - t_start),
        covered: full.is_some(),
        filled_ms: ms(t_filled - t_start),
        filled: filled.is_some(),
        accepted_filled,
        down_ms: ms(t_start - t_stop),
        peak_waiting: end_stats.peak_handshakes_waiting,
        peak_in_progress: end_stats.peak_handshakes_in_progress,
        shed: end_stats.handshakes_shed,
        prepares: end_stats.prepares,
        tls: TlsHandshakes::of(&covered_stats),
        failed_requests: during.failed + after.failed,
        skipped: recorder.skipped(),
        tablet_requests: recorder.tablet_requests(),
        tablet_misrouted,
        tablet_misrouted_steady,
        tablet_payloads: at_end.tablet_payloads - phase2_start.tablet_payloads,
        before: LatencyStats::of(&records, ms(t_stop.saturating_sub(p.steady)), ms(t_stop)),
        during,
        after,
    };
    // Fill the timeline's request columns from the records.
    for s in &mut timeline {
        let w = LatencyStats::of(&records, s.t_ms.saturating_sub(100), s.t_ms);
        s.ok = w.ok;
        s.failed = w.failed;
        s.p99_us = w.p99_us;
    }

    watched.lock().unwrap_or_else(|e| e.into_inner()).clear();
    drop(statements);
    drop(sessions);
    if let Ok(c) = Arc::try_unwrap(cluster) {
        c.shutdown().await;
    }
    Ok(VariantResult {
        variant: v,
        cold,
        restart,
        timeline,
        marks: [ms(t_stop), ms(t_start), ms(t_covered)],
        wall_ms: ms(wall.elapsed()),
    })
}
