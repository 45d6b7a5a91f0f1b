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
        if p.tls { "; over TLS" } else { "" }
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
        "\nPhase 2, node {} down {} ms then restarted under {} req/s (RF {}): {} pool connections ideal",
        crate::scenario::RESTARTED, first.restart.down_ms, p.rate, p.rf, first.restart.ideal
    );
    let _ = writeln!(
        o,
        "{:<15} {:>9} {:>7} {:>10} {:>8} {:>7} {:>9} {:>7} {:>10} {:>7} {:>7} {:>9} {:>8} {:>5} {:>7} {:>7}",
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
        "down-att"
    );
    for r in results {
        let x = &r.restart;
        let _ = writeln!(
            o,
            "{:<15} {:>9} {:>7} {:>8}ms {:>8} {:>7} {:>9} {:>7} {:>8}ms {:>7} {:>7} {:>9} {:>8} {:>5} {:>7} {:>7}{}{}",
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
            if x.filled { "" } else { "  (NOT all filled)" },
            if x.covered { "" } else { "  (NOT all covered)" }
        );
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

/// A tiny JSON object writer: keys and numbers/strings, nested objects.
struct Json {
    out: String,
    first: Vec<bool>,
}

impl Json {
    fn new() -> Self {
        Json {
            out: String::new(),
            first: vec![],
        }
    }
    fn sep(&mut self) {
        if let Some(f) = self.first.last_mut() {
            if !*f {
                self.out.push(',');
            }
            *f = false;
        }
        self.out.push('\n');
        self.out.push_str(&"  ".repeat(self.first.len()));
    }
    fn open(&mut self, key: Option<&str>, bracket: char) {
        self.sep();
        if let Some(k) = key {
            let _ = write!(self.out, "\"{k}\": ");
        }
        self.out.push(bracket);
        self.first.push(true);
    }
    fn close(&mut self, bracket: char) {
        self.first.pop();
        self.out.push('\n');
        self.out.push_str(&"  ".repeat(self.first.len()));
        self.out.push(bracket);
    }
    fn num(&mut self, key: &str, v: impl std::fmt::Display) {
        self.sep();
        let _ = write!(self.out, "\"{key}\": {v}");
    }
    fn text(&mut self, key: &str, v: &str) {
        self.sep();
        // Only our own identifiers and numbers go here: no escaping needed
        // beyond quotes and backslashes, which they never contain.
        let _ = write!(self.out, "\"{key}\": \"{}\"", v.replace(['"', '\\'], ""));
    }
    fn latency(&mut self, key: &str, s: &LatencyStats) {
        self.open(Some(key), '{');
        self.num("ok", s.ok);
        self.num("failed", s.failed);
        self.num("p50_us", s.p50_us);
        self.num("p99_us", s.p99_us);
        self.num("max_us", s.max_us);
        self.close('}');
    }
}

/// The results as JSON.
pub(crate) fn json(p: &Params, results: &[VariantResult]) -> String {
    let mut j = Json::new();
    j.out.push('{');
    j.first.push(true);
    j.open(Some("params"), '{');
    j.num("nodes", p.nodes);
    j.num("shards", p.shards);
    j.num("sessions", p.sessions);
    j.num("rate_per_s", p.rate);
    j.num("rf", p.rf);
    j.num("tls", p.tls);
    j.num("cpu_concurrency", p.cpu_concurrency);
    j.text("handshake_cost", &format!("{:?}", p.cost));
    j.num("down_ms", p.down.as_millis());
    j.close('}');
    j.open(Some("variants"), '[');
    for r in results {
        let (c, x) = (&r.cold, &r.restart);
        j.open(None, '{');
        j.text("name", r.variant.name);
        j.num("wall_ms", r.wall_ms);
        j.open(Some("cold_start"), '{');
        j.num("ideal", c.ideal);
        j.num("attempts", c.attempts);
        j.num(
            "attempts_per_ideal",
            format!("{:.4}", c.attempts as f64 / c.ideal.max(1) as f64),
        );
        j.num("accepted", c.accepted);
        j.num("accepted_regular", c.accepted_regular);
        j.num("accepted_shard_aware", c.accepted_shard_aware);
        j.num("control_connections", c.control);
        j.num("wrong_shard_landings", c.driver.wrong_shard_landings);
        j.num("excess_closed", c.driver.excess_connections_closed);
        j.num("shard_aware_fallbacks", c.driver.shard_aware_fallbacks);
        j.num("accepted_when_filled", c.accepted_filled);
        j.num("time_to_filled_ms", c.filled_ms);
        j.num("filled", c.filled);
        j.num("time_to_coverage_ms", c.time_ms);
        j.num("covered", c.covered);
        j.num("driver_handshakes_shed", c.driver.handshakes_shed);
        j.num("coverage_attempts", c.driver.coverage_attempts);
        j.num("peak_handshakes_waiting", c.peak_waiting);
        j.num("peak_handshakes_in_progress", c.peak_in_progress);
        j.num("handshakes_shed", c.shed);
        j.close('}');
        j.open(Some("restart"), '{');
        j.num("ideal", x.ideal);
        j.num("attempts", x.attempts);
        j.num(
            "attempts_per_ideal",
            format!("{:.4}", x.attempts as f64 / x.ideal.max(1) as f64),
        );
        j.num("attempts_while_down", x.attempts_while_down);
        j.num("accepted", x.accepted);
        j.num("accepted_by_end", x.accepted_end);
        j.num("wrong_shard_landings", x.wrong_shard);
        j.num("excess_closed", x.excess_closed);
        j.num("down_ms", x.down_ms);
        j.num("accepted_when_filled", x.accepted_filled);
        j.num("time_to_filled_ms", x.filled_ms);
        j.num("filled", x.filled);
        j.num("time_to_coverage_ms", x.time_ms);
        j.num("covered", x.covered);
        j.num("peak_handshakes_waiting", x.peak_waiting);
        j.num("peak_handshakes_in_progress", x.peak_in_progress);
        j.num("handshakes_shed", x.shed);
        j.num("tablet_requests", x.tablet_requests);
        j.num("tablet_misrouted", x.tablet_misrouted);
        j.num("tablet_misrouted_before_stop", x.tablet_misrouted_steady);
        j.num("tablet_payloads", x.tablet_payloads);
        j.num("failed_requests", x.failed_requests);
        j.num("skipped_ticks", x.skipped);
        j.latency("before", &x.before);
        j.latency("during", &x.during);
        j.latency("after", &x.after);
        j.close('}');
        j.close('}');
    }
    j.close(']');
    j.close('}');
    j.out.push('\n');
    j.out
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
