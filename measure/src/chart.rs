//! Time charts as SVG documents: panels stacked on one horizontal axis, each
//! with its own vertical scale (linear, or logarithmic for latencies), lines
//! coloured from one palette with a legend, and vertical marks for events
//! (a node stopped, a churn step).
//!
//! ```
//! use measure::chart::{Chart, Mark, Panel, Stroke};
//!
//! let mut connections = Panel::new("connections open");
//! connections.line(0, vec![(0.0, 3.0), (1000.0, 0.0), (2000.0, 3.0)]);
//! let mut chart = Chart::new("A restart", "time (s)", 1000.0);
//! chart.legend(0, "ours");
//! chart.mark(Mark::new(1000.0, Stroke::Dotted));
//! chart.panel(connections);
//! let svg = chart.to_svg();
//! assert!(svg.starts_with("<svg") && svg.contains("<polyline"));
//! ```

use std::fmt::Write as _;

/// The line colours, by index (indices wrap around).
pub const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];
const MARK_GREY: &str = "#777";
const W: f64 = 900.0;
const LEFT: f64 = 70.0;
const TOP: f64 = 44.0;
const GAP: f64 = 50.0;

/// How a mark's line is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stroke {
    Solid,
    Dashed,
    Dotted,
}

/// A vertical line at `x` (in the data's units).
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    x: f64,
    stroke: Stroke,
    color: Option<usize>,
}

impl Mark {
    /// A grey mark.
    pub fn new(x: f64, stroke: Stroke) -> Self {
        Mark {
            x,
            stroke,
            color: None,
        }
    }

    /// The mark in palette colour `color` (half transparent).
    pub fn colored(mut self, color: usize) -> Self {
        self.color = Some(color);
        self
    }
}

/// The vertical scale of a panel.
#[derive(Clone, Copy, Debug)]
enum Scale {
    /// From 0 to the largest value (at least 1).
    Linear,
    /// Decades from `floor` (values below it are drawn at it).
    Log10 { floor: f64 },
}

/// One panel: a title, a vertical scale, lines and marks of its own.
#[derive(Clone, Debug)]
pub struct Panel {
    title: String,
    scale: Scale,
    lines: Vec<(usize, Vec<(f64, f64)>)>,
    marks: Vec<Mark>,
}

impl Panel {
    /// An empty panel on a linear scale from 0.
    pub fn new(title: impl Into<String>) -> Self {
        Panel {
            title: title.into(),
            scale: Scale::Linear,
            lines: Vec::new(),
            marks: Vec::new(),
        }
    }

    /// A logarithmic scale from `floor` (> 0) up to the next decade above the
    /// largest value.
    pub fn log10(mut self, floor: f64) -> Self {
        let floor = if floor > 0.0 { floor } else { 1.0 };
        self.scale = Scale::Log10 { floor };
        self
    }

    /// A line through `points` (x, y), in palette colour `color`.
    pub fn line(&mut self, color: usize, points: Vec<(f64, f64)>) {
        self.lines.push((color, points));
    }

    /// A mark in this panel only.
    pub fn mark(&mut self, mark: Mark) {
        self.marks.push(mark);
    }

    fn y_max(&self) -> f64 {
        self.lines
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
            .filter(|y| y.is_finite())
            .fold(1.0, f64::max)
    }
}

/// A chart: panels on one horizontal axis, a legend and notes on the right.
#[derive(Clone, Debug)]
pub struct Chart {
    title: String,
    x_label: String,
    per_unit: f64,
    panel_height: f64,
    panels: Vec<Panel>,
    marks: Vec<Mark>,
    legend: Vec<(usize, String)>,
    notes: Vec<String>,
}

impl Chart {
    /// An empty chart. The data's x values are shown divided by `per_unit`
    /// (1000 for milliseconds shown as seconds) under `x_label`.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, per_unit: f64) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            per_unit: if per_unit > 0.0 { per_unit } else { 1.0 },
            panel_height: 180.0,
            panels: Vec::new(),
            marks: Vec::new(),
            legend: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Each panel's height in pixels (180 unless set).
    pub fn panel_height(mut self, height: f64) -> Self {
        self.panel_height = height.max(40.0);
        self
    }

    /// Adds a panel below the others.
    pub fn panel(&mut self, panel: Panel) {
        self.panels.push(panel);
    }

    /// A mark drawn across every panel.
    pub fn mark(&mut self, mark: Mark) {
        self.marks.push(mark);
    }

    /// A legend entry: palette colour `color` stands for `label`.
    pub fn legend(&mut self, color: usize, label: impl Into<String>) {
        self.legend.push((color, label.into()));
    }

    /// A line of small text under the legend.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// The x range shown: from the smallest x (or 0 if that is larger) to
    /// the largest, points and marks alike.
    fn x_range(&self) -> (f64, f64) {
        let xs = self
            .panels
            .iter()
            .flat_map(|p| {
                p.lines
                    .iter()
                    .flat_map(|(_, pts)| pts.iter().map(|&(x, _)| x))
                    .chain(p.marks.iter().map(|m| m.x))
            })
            .chain(self.marks.iter().map(|m| m.x))
            .filter(|x| x.is_finite());
        let (lo, hi) = xs.fold((0.0f64, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
        (lo, hi.max(lo + self.per_unit))
    }

    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let ph = self.panel_height;
        let right = if self.legend.is_empty() && self.notes.is_empty() {
            20.0
        } else {
            170.0
        };
        let plot_w = W - LEFT - right;
        let height = TOP + self.panels.len() as f64 * (ph + GAP) + 10.0;
        let (x_min, x_max) = self.x_range();
        let x = |v: f64| LEFT + plot_w * (v - x_min) / (x_max - x_min);
        let mut o = String::new();
        let _ = writeln!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            o,
            r#"<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{}</text>"#,
            escape(&self.title)
        );
        let x_step = nice_step((x_max - x_min) / self.per_unit / 8.0);
        for (i, p) in self.panels.iter().enumerate() {
            let y0 = TOP + i as f64 * (ph + GAP);
            let _ = writeln!(
                o,
                r##"<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{ph}" fill="none" stroke="#999"/><text x="{LEFT}" y="{}" font-weight="bold">{}</text>"##,
                y0 - 6.0,
                escape(&p.title)
            );
            // The x ticks, on whole steps of the shown unit.
            let mut k = (x_min / self.per_unit / x_step).ceil();
            while k * x_step * self.per_unit <= x_max + 1e-9 {
                let shown = k * x_step;
                let px = x(shown * self.per_unit);
                let _ = writeln!(
                    o,
                    r##"<line x1="{px:.1}" x2="{px:.1}" y1="{y0}" y2="{}" stroke="#eee"/><text x="{px:.1}" y="{}" text-anchor="middle" font-size="10">{}</text>"##,
                    y0 + ph,
                    y0 + ph + 14.0,
                    label(shown, x_step)
                );
                k += 1.0;
            }
            // The y scale and its ticks.
            let y: Box<dyn Fn(f64) -> f64> = match p.scale {
                Scale::Linear => {
                    let step = nice_step(p.y_max() / 4.0);
                    let top = (p.y_max() / step).ceil() * step;
                    let mut v = 0.0;
                    while v <= top + step / 2.0 {
                        tick_y(&mut o, y0 + ph - ph * v / top, plot_w, &label(v, step));
                        v += step;
                    }
                    Box::new(move |v: f64| y0 + ph - ph * (v / top).clamp(0.0, 1.0))
                }
                Scale::Log10 { floor } => {
                    let lo = floor.log10();
                    let hi = p.y_max().log10().ceil().max(lo + 1.0);
                    let mut d = lo;
                    while d <= hi + 1e-9 {
                        let v = 10f64.powf(d);
                        let y = y0 + ph - ph * (d - lo) / (hi - lo);
                        tick_y(&mut o, y, plot_w, &label(v, v));
                        d += 1.0;
                    }
                    Box::new(move |v: f64| {
                        y0 + ph - ph * ((v.max(floor).log10() - lo) / (hi - lo)).min(1.0)
                    })
                }
            };
            for m in self.marks.iter().chain(&p.marks) {
                let (color, opacity) = match m.color {
                    Some(c) => (PALETTE[c % PALETTE.len()], 0.5),
                    None => (MARK_GREY, 1.0),
                };
                let dash = match m.stroke {
                    Stroke::Solid => "none",
                    Stroke::Dashed => "8,4",
                    Stroke::Dotted => "2,4",
                };
                let _ = writeln!(
                    o,
                    r#"<line x1="{0:.1}" x2="{0:.1}" y1="{y0}" y2="{1}" stroke="{color}" stroke-opacity="{opacity}" stroke-dasharray="{dash}"/>"#,
                    x(m.x),
                    y0 + ph
                );
            }
            for (color, points) in &p.lines {
                if points.is_empty() {
                    continue;
                }
                let mut pts = String::new();
                for &(px, py) in points
                    .iter()
                    .filter(|(a, b)| a.is_finite() && b.is_finite())
                {
                    let _ = write!(pts, "{:.1},{:.1} ", x(px), y(py));
                }
                let _ = writeln!(
                    o,
                    r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
                    PALETTE[color % PALETTE.len()],
                    pts.trim_end()
                );
            }
        }
        let lx = W - right + 15.0;
        for (i, (color, name)) in self.legend.iter().enumerate() {
            let ly = TOP + 10.0 + 18.0 * i as f64;
            let _ = writeln!(
                o,
                r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
                lx + 20.0,
                PALETTE[color % PALETTE.len()],
                lx + 26.0,
                ly + 4.0,
                escape(name)
            );
        }
        for (i, note) in self.notes.iter().enumerate() {
            let ly = TOP + 18.0 * self.legend.len() as f64 + 24.0 + 14.0 * i as f64;
            let _ = writeln!(
                o,
                r#"<text x="{lx}" y="{ly}" font-size="10">{}</text>"#,
                escape(note)
            );
        }
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            height - 8.0,
            escape(&self.x_label)
        );
        o.push_str("</svg>\n");
        o
    }
}

fn tick_y(o: &mut String, y: f64, plot_w: f64, text: &str) {
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end" font-size="10">{text}</text>"##,
        LEFT + plot_w,
        LEFT - 5.0,
        y + 3.0
    );
}

/// 1, 2 or 5 times a power of ten, at least `raw` (and positive).
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let pow = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * pow)
        .find(|&s| s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * pow)
}

/// `v` with as many decimals as `step` needs (`+ 0.0`: never "-0").
fn label(v: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).clamp(0.0, 6.0) as usize;
    format!("{:.*}", decimals, v + 0.0)
}

/// Text made safe inside an SVG element.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_1_2_5() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(1.1), 2.0);
        assert_eq!(nice_step(37.0), 50.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(f64::NAN), 1.0);
    }

    #[test]
    fn labels_follow_the_step() {
        assert_eq!(label(-0.0, 1.0), "0");
        assert_eq!(label(1.5, 0.5), "1.5");
        assert_eq!(label(0.1, 0.1), "0.1");
        assert_eq!(label(2000.0, 500.0), "2000");
    }

    #[test]
    fn one_polyline_per_line_and_the_legend_named() {
        let mut p = Panel::new("a <b>");
        p.line(0, vec![(0.0, 1.0), (10.0, 2.0)]);
        p.line(1, vec![(-5.0, 0.5), (10.0, 0.0)]);
        p.line(2, vec![]);
        let mut q = Panel::new("latency").log10(0.1);
        q.line(0, vec![(0.0, 0.01), (5.0, 250.0)]);
        let mut c = Chart::new("t", "x", 1.0);
        c.legend(0, "ours");
        c.legend(1, "theirs");
        c.note("dotted: stop");
        c.mark(Mark::new(0.0, Stroke::Dotted));
        c.panel(p);
        c.panel(q);
        let svg = c.to_svg();
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.contains("a &lt;b&gt;") && svg.contains(">theirs<"));
        assert!(svg.trim_end().ends_with("</svg>"));
        // Negative x widens the range to the left (-5..10, ticks every 2).
        assert!(svg.contains(">-4<") && svg.contains(">10<"), "{svg}");
        // Every coordinate lies inside the document.
        for pts in svg.split("points=\"").skip(1) {
            for xy in pts.split('"').next().unwrap_or("").split_whitespace() {
                let (a, b) = xy.split_once(',').unwrap();
                let (a, b): (f64, f64) = (a.parse().unwrap(), b.parse().unwrap());
                assert!((0.0..=W).contains(&a) && b >= 0.0, "{xy}");
            }
        }
    }

    #[test]
    fn an_empty_chart_is_a_document() {
        let svg = Chart::new("nothing", "time", 1000.0).to_svg();
        assert!(svg.starts_with("<svg") && !svg.contains("NaN"));
    }
}
