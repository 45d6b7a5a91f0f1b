//! A hand-written SVG chart of the timeline: connections open at the
//! restarted node over time, and the p99 latency of each 100 ms window (log
//! scale), one line per variant, with the node's stop and start marked.
//!
//! Every variant is drawn on one clock whose zero is the moment its node
//! stopped (negative before): variants reach that moment at different
//! times since their sessions started (their cold starts differ), and on
//! their own clocks the stops would not line up.

use std::fmt::Write as _;

use crate::scenario::VariantResult;

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];
const W: f64 = 900.0;
const PANEL_H: f64 = 260.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 160.0;
const TOP: f64 = 40.0;
const GAP: f64 = 70.0;

struct Panel {
    y0: f64,
    title: &'static str,
}

/// The chart as an SVG document.
pub(crate) fn chart(results: &[VariantResult], restarted: usize) -> String {
    let mut o = String::new();
    let height = TOP + 2.0 * PANEL_H + GAP + 50.0;
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="20" font-size="15" font-weight="bold">Reconnect storm: node {restarted} restarted under load</text>"#
    );
    // Times relative to each variant's node stop (ms; negative before).
    let rel = |r: &VariantResult, t: u64| t as f64 - stop_ms(r);
    let t_min = results
        .iter()
        .filter_map(|r| r.timeline.first().map(|s| rel(r, s.t_ms)))
        .fold(0.0f64, f64::min);
    let t_max = results
        .iter()
        .filter_map(|r| r.timeline.last().map(|s| rel(r, s.t_ms)))
        .fold(1.0f64, f64::max);
    let span = Span {
        min: t_min,
        max: t_max,
    };
    let plot_w = W - LEFT - RIGHT;
    let x = |t: f64| LEFT + plot_w * (t - span.min) / (span.max - span.min);

    // Panel 1: connections.
    let conn = Panel {
        y0: TOP,
        title: "connections open at the restarted node",
    };
    let c_max = results
        .iter()
        .flat_map(|r| r.timeline.iter().map(|s| s.connections))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    frame(&mut o, &conn, &span);
    for i in 0..=4 {
        let v = c_max * f64::from(i) / 4.0;
        let y = conn.y0 + PANEL_H - PANEL_H * f64::from(i) / 4.0;
        tick_y(&mut o, y, &format!("{v:.0}"));
    }
    // Panel 2: p99, log scale from 0.1 ms.
    let lat = Panel {
        y0: TOP + PANEL_H + GAP,
        title: "p99 latency per 100 ms window (ms, log scale)",
    };
    let l_max = results
        .iter()
        .flat_map(|r| r.timeline.iter().map(|s| s.p99_us))
        .max()
        .unwrap_or(1000)
        .max(1000) as f64
        / 1000.0;
    let (lo, hi) = (0.1f64.log10(), l_max.log10().ceil().max(0.0));
    let ly = |ms: f64| lat.y0 + PANEL_H - PANEL_H * ((ms.max(0.1).log10() - lo) / (hi - lo));
    frame(&mut o, &lat, &span);
    let mut d = lo;
    while d <= hi + 1e-9 {
        let v = 10f64.powf(d);
        tick_y(
            &mut o,
            ly(v),
            &if v < 1.0 {
                format!("{v:.1}")
            } else {
                format!("{v:.0}")
            },
        );
        d += 1.0;
    }

    // The node stops at 0 in every variant: one mark for all.
    for p in [&conn, &lat] {
        let _ = writeln!(
            o,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="#444" stroke-dasharray="2,4"/>"##,
            x(0.0),
            p.y0,
            p.y0 + PANEL_H,
        );
    }
    for (i, r) in results.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        // The node's start, per variant, in both panels.
        if let Some(&started) = r.marks.get(1) {
            for p in [&conn, &lat] {
                let _ = writeln!(
                    o,
                    r#"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="{color}" stroke-dasharray="8,4" stroke-opacity="0.5"/>"#,
                    x(rel(r, started)),
                    p.y0,
                    p.y0 + PANEL_H,
                );
            }
        }
        let pts: Vec<String> = r
            .timeline
            .iter()
            .map(|s| {
                format!(
                    "{:.1},{:.1}",
                    x(rel(r, s.t_ms)),
                    conn.y0 + PANEL_H - PANEL_H * s.connections as f64 / c_max
                )
            })
            .collect();
        polyline(&mut o, &pts, color);
        let pts: Vec<String> = r
            .timeline
            .iter()
            .filter(|s| s.ok > 0)
            .map(|s| {
                format!(
                    "{:.1},{:.1}",
                    x(rel(r, s.t_ms)),
                    ly(s.p99_us as f64 / 1000.0)
                )
            })
            .collect();
        polyline(&mut o, &pts, color);
        let ly_legend = TOP + 20.0 * i as f64 + 10.0;
        let lx = W - RIGHT + 15.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" x2="{}" y1="{ly_legend}" y2="{ly_legend}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly_legend + 4.0,
            r.variant.name
        );
    }
    let ly_note = TOP + 20.0 * results.len() as f64 + 20.0;
    let _ = writeln!(
        o,
        r#"<text x="{0}" y="{1}" font-size="10">dotted (0 s): node stopped</text><text x="{0}" y="{2}" font-size="10">dashed: node started</text>"#,
        W - RIGHT + 15.0,
        ly_note,
        ly_note + 14.0
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">time since the node stopped (s; negative: before)</text>"#,
        LEFT + plot_w / 2.0,
        height - 12.0
    );
    o.push_str("</svg>\n");
    o
}

/// The time axis: milliseconds relative to the node's stop.
struct Span {
    min: f64,
    max: f64,
}

/// When `r`'s node stopped, in ms since its sessions started (0 if the run
/// has no stop mark).
fn stop_ms(r: &VariantResult) -> f64 {
    r.marks.first().copied().unwrap_or(0) as f64
}

fn frame(o: &mut String, p: &Panel, span: &Span) {
    let plot_w = W - LEFT - RIGHT;
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#888"/><text x="{LEFT}" y="{}" font-weight="bold">{}</text>"##,
        p.y0,
        p.y0 - 8.0,
        p.title
    );
    // A tick per second (or per 5 s on long runs), on whole seconds
    // counted from the stop.
    let step = if span.max - span.min > 30_000.0 {
        5000.0
    } else {
        1000.0
    };
    let mut t = (span.min / step).ceil() * step;
    while t <= span.max {
        let xx = LEFT + plot_w * (t - span.min) / (span.max - span.min);
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{}" y2="{}" stroke="#eee"/><text x="{xx:.1}" y="{}" text-anchor="middle" font-size="10">{}</text>"##,
            p.y0,
            p.y0 + PANEL_H,
            p.y0 + PANEL_H + 14.0,
            // `+ 0.0`: a tick at -0 s reads 0.
            t / 1000.0 + 0.0
        );
        t += step;
    }
}

fn tick_y(o: &mut String, y: f64, label: &str) {
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end" font-size="10">{label}</text>"##,
        W - RIGHT,
        LEFT - 5.0,
        y + 3.0
    );
}

fn polyline(o: &mut String, pts: &[String], color: &str) {
    if pts.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
        pts.join(" ")
    );
}
