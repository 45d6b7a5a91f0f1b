//! The chart of the restart phase: panels on one time axis (ms since the
//! node stopped), one line per policy, the node's start marked.

use measure::chart::{Chart, Mark, Panel, Stroke};

use crate::model::{Sample, SimResult};

type Series = fn(&Sample) -> f64;

/// The chart as an SVG document.
pub(crate) fn chart(results: &[SimResult]) -> String {
    let panels: [(&str, Series); 4] = [
        (
            "handshakes in their CPU stage at the restarted node (peak per 100 ms)",
            |s| s.peak_in_progress as f64,
        ),
        (
            "handshakes waiting for admission at the restarted node (peak per 100 ms)",
            |s| s.peak_waiting as f64,
        ),
        (
            "connection attempts per 100 ms to the restarted node",
            |s| s.attempts as f64,
        ),
        (
            "sessions with every shard of the restarted node covered",
            |s| s.covered_sessions as f64,
        ),
    ];
    let title = results.first().map_or(String::new(), |r| {
        let p = &r.params;
        format!(
            "Simulated restart of one node: {} sessions x {} nodes x {} shards (virtual time)",
            p.sessions, p.nodes, p.shards
        )
    });
    let mut chart = Chart::new(title, "time since the node stopped (s)", 1000.0);
    for (i, r) in results.iter().enumerate() {
        chart.legend(i, r.params.policy.name());
    }
    // The node's start (it stopped at 0).
    if let Some(r) = results.first() {
        chart.mark(Mark::new(r.params.down.as_millis() as f64, Stroke::Dashed));
        chart.note("dashed: node started");
    }
    for (name, f) in panels {
        let mut panel = Panel::new(name);
        for (i, r) in results.iter().enumerate() {
            let points = r.restart.samples.iter();
            panel.line(i, points.map(|s| (s.t_ms as f64, f(s))).collect());
        }
        chart.panel(panel);
    }
    chart.to_svg()
}
