//! `--nodes`: the same measurements against a real cluster. Phase 1 (every
//! session connecting at once) is measured from the driver's side only (a
//! real cluster's accounting is not at hand); then the workload runs for
//! `--duration` seconds while the operator restarts a node, and the dip in
//! shard coverage it causes is found in the timeline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_driver::pool::backoff::ExponentialBackoff;
use scylla_driver::{Session, SessionBuilder};
use tokio_util::sync::CancellationToken;

use crate::progress::Progress;
use crate::scenario::{driver_metrics, ColdStart, Params, Restart, Sample, Variant, VariantResult};
use crate::workload::{self, LatencyStats, Recorder, Workload};

/// Runs against `nodes` (`host:port`), with the workload lasting `duration`.
pub(crate) async fn run(
    nodes: &[String],
    p: &Params,
    shard_aware_port: bool,
    duration: Duration,
    progress: &Progress,
) -> Result<VariantResult, String> {
    let variant = Variant {
        name: "real",
        shard_aware_port,
        nat: false,
        lockstep: false,
    };
    let wall = Instant::now();
    let recorder = Recorder::new(Instant::now());
    let t0 = Instant::now();
    progress.phase("real", "cold start");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..p.sessions {
        let b = SessionBuilder::new()
            .known_nodes(nodes.iter().cloned())
            .shard_aware_port(shard_aware_port)
            .request_timeout(p.request_timeout)
            .reconnect_policy(Arc::new(ExponentialBackoff::new(
                p.backoff_base,
                p.backoff_cap,
            )))
            .reconnect_spread(p.reconnect_spread);
        let timeout = p.coverage_timeout;
        tasks.spawn(async move {
            let s = b.build().await.map_err(|e| format!("session: {e}"))?;
            let full = s.wait_for_all_shards(timeout).await;
            Ok::<_, String>((s, full, t0.elapsed()))
        });
    }
    let mut sessions: Vec<Session> = Vec::new();
    let mut cold = ColdStart {
        covered: true,
        ..ColdStart::default()
    };
    while let Some(r) = tasks.join_next().await {
        let (s, full, at) = r.map_err(|e| format!("session task: {e}"))??;
        cold.covered &= full;
        cold.time_ms = cold.time_ms.max(at.as_millis() as u64);
        sessions.push(s);
    }
    let shards_total = |s: &Session| -> u64 {
        s.cluster_state()
            .nodes
            .iter()
            .map(|n| n.pool.snapshot().shards.len() as u64)
            .sum()
    };
    let covered = |sessions: &[Session]| -> u64 {
        sessions
            .iter()
            .flat_map(|s| {
                s.cluster_state()
                    .nodes
                    .iter()
                    .map(|n| n.pool.snapshot().covered_shards() as u64)
                    .collect::<Vec<_>>()
            })
            .sum()
    };
    cold.ideal = sessions.iter().map(shards_total).sum();
    cold.driver = driver_metrics(&sessions);
    cold.attempts = cold.driver.connect_attempts();
    let node_count = sessions
        .first()
        .map_or(1, |s| s.cluster_state().nodes.len());

    progress.phase("real", "workload");
    let rf = p.rf.min(node_count).max(1);
    // No tablets table: a real Cassandra does not know the keyspace option.
    let statements = workload::prepare(&sessions, rf, None)
        .await
        .map_err(|e| format!("schema: {e}"))?;
    let load = Workload::start(&sessions, &statements, p.rate, recorder.clone());
    progress.finish();
    eprintln!(
        "Measuring for {} s: restart one node now (for example `nodetool drain` then restart \
         scylla-server) and watch the coverage recover.",
        duration.as_secs()
    );
    progress.phase("real", "measuring");
    let stop = CancellationToken::new();
    let mut timeline = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let end = Instant::now() + duration;
    // Bounded: one sample per 100 ms until `end`.
    while Instant::now() < end {
        tick.tick().await;
        let m = driver_metrics(&sessions);
        let c = covered(&sessions);
        let conns: u64 = sessions
            .iter()
            .flat_map(|s| {
                s.cluster_state()
                    .nodes
                    .iter()
                    .map(|n| n.pool.snapshot().len() as u64)
                    .collect::<Vec<_>>()
            })
            .sum();
        timeline.push(Sample {
            t_ms: t0.elapsed().as_millis() as u64,
            connections: conns,
            accepted: m.connect_attempts(),
            covered: c,
            ..Sample::default()
        });
        let (ok, failed) = recorder.counts();
        progress.update(format_args!(
            "{c}/{} shards covered | requests ok {ok} failed {failed}",
            cold.ideal
        ));
    }
    stop.cancel();
    load.stop().await;
    let records = recorder.records();
    for s in &mut timeline {
        let w = LatencyStats::of(&records, s.t_ms.saturating_sub(100), s.t_ms);
        s.ok = w.ok;
        s.failed = w.failed;
        s.p99_us = w.p99_us;
    }
    // The restart: the first sample below full coverage, until the next one
    // at full coverage.
    let dip_start = timeline.iter().position(|s| s.covered < cold.ideal);
    let dip_end = dip_start.and_then(|i| {
        timeline[i..]
            .iter()
            .position(|s| s.covered >= cold.ideal)
            .map(|j| i + j)
    });
    let t_first = timeline.first().map_or(0, |s| s.t_ms);
    let t_last = timeline.last().map_or(0, |s| s.t_ms);
    let mut restart = Restart {
        ideal: cold.ideal / node_count.max(1) as u64,
        ..Restart::default()
    };
    if let Some(i) = dip_start {
        let t_stop = timeline[i].t_ms;
        let (t_cov, attempts_end) = match dip_end {
            Some(j) => (timeline[j].t_ms, timeline[j].accepted),
            None => (t_last, timeline.last().map_or(0, |s| s.accepted)),
        };
        restart.covered = dip_end.is_some();
        restart.time_ms = t_cov - t_stop;
        restart.attempts = attempts_end - timeline[i].accepted;
        restart.before = LatencyStats::of(&records, t_first, t_stop);
        restart.during = LatencyStats::of(&records, t_stop, t_cov);
        restart.after = LatencyStats::of(&records, t_cov, t_last);
        restart.failed_requests = restart.during.failed + restart.after.failed;
        eprintln!(
            "Coverage dipped at {:.1} s and was {} after {} ms ({} connection attempts).",
            t_stop as f64 / 1000.0,
            if restart.covered { "back" } else { "not back" },
            restart.time_ms,
            restart.attempts
        );
    } else {
        eprintln!("No node went down during the measurement: phase 2 has no restart to report.");
        restart.before = LatencyStats::of(&records, t_first, t_last);
    }
    restart.skipped = recorder.skipped();
    let marks = [
        dip_start.map_or(0, |i| timeline[i].t_ms),
        dip_start.map_or(0, |i| timeline[i].t_ms),
        dip_end.map_or(0, |j| timeline[j].t_ms),
    ];
    Ok(VariantResult {
        variant,
        cold,
        restart,
        timeline,
        marks,
        wall_ms: wall.elapsed().as_millis() as u64,
    })
}
