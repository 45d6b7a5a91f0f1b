//! The results as a text table, as JSON (hand-formatted) and as a timeline CSV.

use std::fmt::Write as _;

use crate::scenario::{Params, VariantResult};
use crate::workload::LatencyStats;

fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.2}x", a as f64 / b as f64)
    }
}

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

/// The summary tables.
pub(crate) fn table(p: &Params, results: &[VariantResult]) -> String {
    let mut o = String::new();
    let Some(first) = results.first() else {
        return o;
    };
    let _ = writeln!(
        o,
        "\nPhase 1, cold start: {} sessions x {} nodes x {} shards = {} pool connections ideal \
         (+{} control connections); admission {} per shard, handshake cost {:?}{}",
        p.sessions,
        p.nodes,
        p.shards,
        first.cold.ideal,
        p.sessions,
        p.cpu_concurrency,
        p.cost,
        if p.tls {
            format!(
                "; over TLS, tickets {} ({} pacing), TLS handshake cost {:?} full / {:?} resumed",
                p.tickets.name(),
                if p.ticket_pacing { "with" } else { "without" },
                p.tls_costs.0,
                p.tls_costs.1
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        o,
        "(filled = every pool holds one connection per shard, wherever they landed; \
         covered = every shard of every pool has one; accepted counted by the cluster at each)"
    );
    let _ = writeln!(
        o,
        "{:<15} {:>9} {:>9} {:>10} {:>8} {:>7} {:>9} {:>9} {:>10} {:>7} {:>7} {:>9} {:>8} {:>5}",
        "variant",
        "acc@fill",
        "/ideal+cc",
        "filled-in",
        "attempts",
        "/ideal",
        "accepted",
        "/ideal+cc",
        "covered-in",
        "wrong",
        "excess",
        "peak-wait",
        "peak-hs",
        "shed"
    );
    for r in results {
        let c = &r.cold;
        let _ = writeln!(
            o,
            "{:<15} {:>9} {:>9} {:>8}ms {:>8} {:>7} {:>9} {:>9} {:>8}ms {:>7} {:>7} {:>9} {:>8} {:>5}{}{}",
            r.variant.name,
            c.accepted_filled,
            ratio(c.accepted_filled, c.ideal + c.control),
            c.filled_ms,
            c.attempts,
            ratio(c.attempts, c.ideal),
            c.accepted,
            ratio(c.accepted, c.ideal + c.control),
            c.time_ms,
            c.driver.wrong_shard_landings,
            c.driver.excess_connections_closed,
            c.peak_waiting,
            c.peak_in_progress,
            c.shed,
            if c.filled { "" } else { "  (NOT all filled)" },
            if c.covered { "" } else { "  (NOT all covered)" }
        );
    }
    let _ = writeln!(
        o,
        "\nPhase 2, node {} down {} ms then restarted under {} req/s (RF {}): {} pool connections ideal; \
         prepares = PREPAREs the restarted node got after its start (it forgot every statement: \
         one per statement per session is the least)",
        crate::scenario::RESTARTED, first.restart.down_ms, p.rate, p.rf, first.restart.ideal
    );
    let _ = writeln!(
        o,
        "{:<15} {:>9} {:>7} {:>10} {:>8} {:>7} {:>9} {:>7} {:>10} {:>7} {:>7} {:>9} {:>8} {:>5} {:>7} {:>7} {:>8}",
        "variant",
        "acc@fill",
        "/ideal",
        "filled-in",
        "attempts",
        "/ideal",
        "accepted",
        "/ideal",
        "covered-in",
        "wrong",
        "excess",
        "peak-wait",
        "peak-hs",
        "shed",
        "failed",
        "down-att",
        "prepares"
    );
    for r in results {
        let x = &r.restart;
        let _ = writeln!(
            o,
            "{:<15} {:>9} {:>7} {:>8}ms {:>8} {:>7} {:>9} {:>7} {:>8}ms {:>7} {:>7} {:>9} {:>8} {:>5} {:>7} {:>7} {:>8}{}{}",
            r.variant.name,
            x.accepted_filled,
            ratio(x.accepted_filled, x.ideal),
            x.filled_ms,
            x.attempts,
            ratio(x.attempts, x.ideal),
            x.accepted,
            ratio(x.accepted, x.ideal),
            x.time_ms,
            x.wrong_shard,
            x.excess_closed,
            x.peak_waiting,
            x.peak_in_progress,
            x.shed,
            x.failed_requests,
            x.attempts_while_down,
            x.prepares,
            if x.filled { "" } else { "  (NOT all filled)" },
            if x.covered { "" } else { "  (NOT all covered)" }
        );
    }
    if p.tls {
        let _ = writeln!(
            o,
            "\nTLS handshakes counted by the cluster (full / resumed): cold start = all nodes when \
             every shard was covered (control connections included); restart = the restarted node's \
             new lifetime when every session covered it again"
        );
        for r in results {
            let (c, x) = (&r.cold.tls, &r.restart.tls);
            let _ = writeln!(
                o,
                "{:<15} cold start {:>5} full / {:>5} resumed ({:.1}% resumed)   restart {:>5} full / {:>5} resumed ({:.1}% resumed)",
                r.variant.name,
                c.full,
                c.resumed,
                100.0 * c.resumed as f64 / (c.full + c.resumed).max(1) as f64,
                x.full,
                x.resumed,
                100.0 * x.resumed as f64 / (x.full + x.resumed).max(1) as f64,
            );
        }
    }
    let _ = writeln!(
        o,
        "\nTablets: half the workload goes to storm_tablets.kv ({} tablets, RF {}); \
         misrouted = requests the cluster saw at a node or shard not holding their tablet",
        crate::scenario::WORKLOAD_TABLETS,
        p.rf
    );
    for r in results {
        let x = &r.restart;
        let _ = writeln!(
            o,
            "{:<15} {:>7} tablet requests, {:>4} misrouted ({:.2}%; {} before the node went down), {:>4} routing payloads received",
            r.variant.name,
            x.tablet_requests,
            x.tablet_misrouted,
            100.0 * x.tablet_misrouted as f64 / x.tablet_requests.max(1) as f64,
            x.tablet_misrouted_steady,
            x.tablet_payloads
        );
    }
    let _ = writeln!(
        o,
        "\nLatency of successful requests, ms (p50 / p99 / max), by when they were issued:"
    );
    let _ = writeln!(
        o,
        "{:<15} {:>22} {:>22} {:>22}",
        "variant", "before the restart", "until covered again", "after"
    );
    let l = |s: &LatencyStats| format!("{} / {} / {}", ms(s.p50_us), ms(s.p99_us), ms(s.max_us));
    for r in results {
        let x = &r.restart;
        let _ = writeln!(
            o,
            "{:<15} {:>22} {:>22} {:>22}",
            r.variant.name,
            l(&x.before),
            l(&x.during),
            l(&x.after)
        );
    }
    if let Some(base) = results.iter().find(|r| r.variant.name == "baseline") {
        let _ = writeln!(o, "\nRelative to baseline (variant / baseline):");
        let _ = writeln!(
            o,
            "{:<15} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "variant",
            "cold-att",
            "cold-time",
            "cold-peak",
            "rst-att",
            "rst-time",
            "rst-peak",
            "failed"
        );
        for r in results {
            let (c, b, x, y) = (&r.cold, &base.cold, &r.restart, &base.restart);
            let peak = |w: u64, h: u64| w + h;
            let _ = writeln!(
                o,
                "{:<15} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                r.variant.name,
                ratio(c.attempts, b.attempts),
                ratio(c.time_ms, b.time_ms),
                ratio(
                    peak(c.peak_waiting, c.peak_in_progress),
                    peak(b.peak_waiting, b.peak_in_progress)
                ),
                ratio(x.attempts, y.attempts),
                ratio(x.time_ms, y.time_ms),
                ratio(
                    peak(x.peak_waiting, x.peak_in_progress),
                    peak(y.peak_waiting, y.peak_in_progress)
                ),
                if y.failed_requests == 0 {
                    format!("{} vs 0", x.failed_requests)
                } else {
                    ratio(x.failed_requests, y.failed_requests)
                }
            );
        }
        let _ = writeln!(
            o,
            "(peak = peak handshakes waiting + peak in their CPU stage at the busiest node)"
        );
    }
    o
}

/// A latency summary as JSON.
fn latency_json(s: &LatencyStats) -> serde_json::Value {
    serde_json::json!({
        "ok": s.ok,
        "failed": s.failed,
        "p50_us": s.p50_us,
        "p99_us": s.p99_us,
        "max_us": s.max_us,
    })
}

/// A ratio rounded to 4 decimals.
fn ratio4(n: u64, d: u64) -> f64 {
    (n as f64 / d.max(1) as f64 * 1e4).round() / 1e4
}

/// The results as JSON (pretty-printed, through `serde_json`).
pub(crate) fn json(p: &Params, results: &[VariantResult]) -> String {
    let params = serde_json::json!({
        "nodes": p.nodes,
        "shards": p.shards,
        "sessions": p.sessions,
        "rate_per_s": p.rate,
        "rf": p.rf,
        "tls": p.tls,
        "tls_tickets": if p.tls { p.tickets.name() } else { "-" },
        "tls_ticket_pacing": p.tls && p.ticket_pacing,
        "tls_full_handshake_us": p.tls_costs.0.as_micros() as u64,
        "tls_resumed_handshake_us": p.tls_costs.1.as_micros() as u64,
        "cpu_concurrency": p.cpu_concurrency,
        "handshake_cost": format!("{:?}", p.cost),
        "down_ms": p.down.as_millis() as u64,
    });
    let variants: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            let (c, x) = (&r.cold, &r.restart);
            serde_json::json!({
                "name": r.variant.name,
                "wall_ms": r.wall_ms,
                "cold_start": {
                    "ideal": c.ideal,
                    "attempts": c.attempts,
                    "attempts_per_ideal": ratio4(c.attempts, c.ideal),
                    "accepted": c.accepted,
                    "accepted_regular": c.accepted_regular,
                    "accepted_shard_aware": c.accepted_shard_aware,
                    "control_connections": c.control,
                    "wrong_shard_landings": c.driver.wrong_shard_landings,
                    "excess_closed": c.driver.excess_connections_closed,
                    "setup_races": c.driver.setup_races,
                    "shard_aware_fallbacks": c.driver.shard_aware_fallbacks,
                    "accepted_when_filled": c.accepted_filled,
                    "time_to_filled_ms": c.filled_ms,
                    "filled": c.filled,
                    "time_to_coverage_ms": c.time_ms,
                    "covered": c.covered,
                    "driver_handshakes_shed": c.driver.handshakes_shed,
                    "coverage_attempts": c.driver.coverage_attempts,
                    "peak_handshakes_waiting": c.peak_waiting,
                    "peak_handshakes_in_progress": c.peak_in_progress,
                    "handshakes_shed": c.shed,
                    "tls_handshakes_full": c.tls.full,
                    "tls_handshakes_resumed": c.tls.resumed,
                },
                "restart": {
                    "ideal": x.ideal,
                    "attempts": x.attempts,
                    "attempts_per_ideal": ratio4(x.attempts, x.ideal),
                    "attempts_while_down": x.attempts_while_down,
                    "accepted": x.accepted,
                    "accepted_by_end": x.accepted_end,
                    "wrong_shard_landings": x.wrong_shard,
                    "excess_closed": x.excess_closed,
                    "down_ms": x.down_ms,
                    "accepted_when_filled": x.accepted_filled,
                    "time_to_filled_ms": x.filled_ms,
                    "filled": x.filled,
                    "time_to_coverage_ms": x.time_ms,
                    "covered": x.covered,
                    "peak_handshakes_waiting": x.peak_waiting,
                    "peak_handshakes_in_progress": x.peak_in_progress,
                    "handshakes_shed": x.shed,
                    "prepares_at_restarted_node": x.prepares,
                    "tls_handshakes_full": x.tls.full,
                    "tls_handshakes_resumed": x.tls.resumed,
                    "tablet_requests": x.tablet_requests,
                    "tablet_misrouted": x.tablet_misrouted,
                    "tablet_misrouted_before_stop": x.tablet_misrouted_steady,
                    "tablet_payloads": x.tablet_payloads,
                    "failed_requests": x.failed_requests,
                    "skipped_ticks": x.skipped,
                    "before": latency_json(&x.before),
                    "during": latency_json(&x.during),
                    "after": latency_json(&x.after),
                },
            })
        })
        .collect();
    let all = serde_json::json!({ "params": params, "variants": variants });
    // Serializing a `Value` built from numbers and strings cannot fail.
    let mut text = serde_json::to_string_pretty(&all).unwrap_or_default();
    text.push('\n');
    text
}

/// The timeline: one row per variant and 100 ms window.
pub(crate) fn csv(results: &[VariantResult]) -> String {
    let mut o = String::from(
        "t_ms,variant,connections,accepted,handshakes_waiting,handshakes_in_progress,covered_shards,requests_ok,requests_failed,p99_us\n",
    );
    for r in results {
        for s in &r.timeline {
            let _ = writeln!(
                o,
                "{},{},{},{},{},{},{},{},{},{}",
                s.t_ms,
                r.variant.name,
                s.connections,
                s.accepted,
                s.waiting,
                s.in_progress,
                s.covered,
                s.ok,
                s.failed,
                s.p99_us
            );
        }
    }
    o
}
