//! A small SVG chart of the restart phase, in the manner of
//! `examples/storm_reconnect/svg.rs`: panels stacked on one time axis (ms
//! since the node stopped), one line per policy.

use std::fmt::Write as _;

use crate::model::{Sample, SimResult};

const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"];
const W: f64 = 900.0;
const PANEL_H: f64 = 180.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 40.0;
const GAP: f64 = 50.0;

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
    let mut o = String::new();
    let height = TOP + panels.len() as f64 * (PANEL_H + GAP) + 20.0;
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let title = results.first().map_or(String::new(), |r| {
        let p = &r.params;
        format!(
            "Simulated restart of one node: {} sessions x {} nodes x {} shards (virtual time)",
            p.sessions, p.nodes, p.shards
        )
    });
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="20" font-size="15" font-weight="bold">{title}</text>"#
    );
    let t_max = results
        .iter()
        .filter_map(|r| r.restart.samples.last().map(|s| s.t_ms))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let plot_w = W - LEFT - RIGHT;
    let x = |t: f64| LEFT + plot_w * t / t_max;
    for (i, (name, f)) in panels.iter().enumerate() {
        let y0 = TOP + i as f64 * (PANEL_H + GAP);
        let v_max = results
            .iter()
            .flat_map(|r| r.restart.samples.iter().map(f))
            .fold(1.0f64, f64::max);
        let _ = writeln!(
            o,
            r##"<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#999"/>"##
        );
        let _ = writeln!(
            o,
            r#"<text x="{LEFT}" y="{}" font-weight="bold">{name}</text>"#,
            y0 - 6.0
        );
        for k in 0..=4 {
            let v = v_max * f64::from(k) / 4.0;
            let y = y0 + PANEL_H - PANEL_H * f64::from(k) / 4.0;
            let _ = writeln!(
                o,
                r#"<text x="{}" y="{}" text-anchor="end">{v:.0}</text>"#,
                LEFT - 6.0,
                y + 4.0
            );
        }
        for k in 0..=5 {
            let t = t_max * f64::from(k) / 5.0;
            let _ = writeln!(
                o,
                r#"<text x="{}" y="{}" text-anchor="middle">{:.1} s</text>"#,
                x(t),
                y0 + PANEL_H + 14.0,
                t / 1000.0
            );
        }
        for (j, r) in results.iter().enumerate() {
            let color = COLORS[j % COLORS.len()];
            let mut pts = String::new();
            for s in &r.restart.samples {
                let y = y0 + PANEL_H - PANEL_H * f(s) / v_max;
                let _ = write!(pts, "{:.1},{:.1} ", x(s.t_ms as f64), y);
            }
            let _ = writeln!(
                o,
                r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>"#
            );
            if i == 0 {
                let _ = writeln!(
                    o,
                    r#"<text x="{}" y="{}" fill="{color}">{}</text>"#,
                    W - RIGHT + 10.0,
                    y0 + 16.0 + 16.0 * j as f64,
                    r.params.policy.name()
                );
            }
        }
        // The node's start (it stopped at 0).
        if let Some(r) = results.first() {
            let t = r.params.down.as_millis() as f64;
            let _ = writeln!(
                o,
                r##"<line x1="{0:.1}" y1="{y0}" x2="{0:.1}" y2="{1}" stroke="#777" stroke-dasharray="4 3"/>"##,
                x(t),
                y0 + PANEL_H
            );
        }
    }
    let _ = writeln!(o, "</svg>");
    o
}
