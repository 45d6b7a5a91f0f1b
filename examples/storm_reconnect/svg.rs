//! The chart of the timeline: connections open at the restarted node over
//! time, and the p99 latency of each 100 ms window (log scale), one line per
//! variant, with the node's stop and start marked.
//!
//! Every variant is drawn on one clock whose zero is the moment its node
//! stopped (negative before): variants reach that moment at different
//! times since their sessions started (their cold starts differ), and on
//! their own clocks the stops would not line up.

use measure::chart::{Chart, Mark, Panel, Stroke};

use crate::scenario::VariantResult;

/// The chart as an SVG document.
pub(crate) fn chart(results: &[VariantResult], restarted: usize) -> String {
    let mut chart = Chart::new(
        format!("Reconnect storm: node {restarted} restarted under load"),
        "time since the node stopped (s; negative: before)",
        1000.0,
    )
    .panel_height(260.0);
    let mut connections = Panel::new("connections open at the restarted node");
    let mut latency = Panel::new("p99 latency per 100 ms window (ms, log scale)").log10(0.1);
    // The node stops at 0 in every variant: one mark for all.
    chart.mark(Mark::new(0.0, Stroke::Dotted));
    for (i, r) in results.iter().enumerate() {
        chart.legend(i, r.variant.name);
        // When `r`'s node stopped, in ms since its sessions started.
        let stop = r.marks.first().copied().unwrap_or(0) as f64;
        let rel = |t: u64| t as f64 - stop;
        // The node's start, per variant, in both panels.
        if let Some(&started) = r.marks.get(1) {
            let start = Mark::new(rel(started), Stroke::Dashed).colored(i);
            connections.mark(start);
            latency.mark(start);
        }
        let points = r.timeline.iter();
        connections.line(
            i,
            points
                .map(|s| (rel(s.t_ms), s.connections as f64))
                .collect(),
        );
        let answered = r.timeline.iter().filter(|s| s.ok > 0);
        latency.line(
            i,
            answered
                .map(|s| (rel(s.t_ms), s.p99_us as f64 / 1000.0))
                .collect(),
        );
    }
    chart.note("dotted (0 s): node stopped");
    chart.note("dashed: node started");
    chart.panel(connections);
    chart.panel(latency);
    chart.to_svg()
}
