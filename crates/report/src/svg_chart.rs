//! Log-log line charts (size vs bandwidth) as self-contained SVG.

use crate::esc;
use std::fmt::Write as _;

/// One curve: a name for the legend and its (x, y) points (positive values;
/// others are dropped).
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed line (e.g. for a physical limit).
    pub dashed: bool,
    /// Confidence band: (x, low, high), drawn as a shaded area behind the
    /// curve (empty: none).
    pub band: Vec<(f64, f64, f64)>,
}

const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#555555", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
    "#bcbd22", "#17becf",
];

/// Byte counts as 1K, 64K, 1M, 1G (for the x axis of size curves).
pub fn bytes_label(v: f64) -> String {
    let units = [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (u, size) in units {
        if v >= size as f64 {
            return format!("{}{u}", (v / size as f64 * 10.0).round() / 10.0);
        }
    }
    format!("{v}")
}

/// Width in pixels of the legend column: the longest name at about 6.6 px
/// per character (11 px sans-serif) after the 40 px sample line.
fn legend_width(series: &[Series]) -> f64 {
    let longest = series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    50.0 + 6.6 * longest as f64
}

/// A log-log chart, 490 px of plot plus a legend column as wide as its
/// longest name, 400 high, axes labelled with powers of 2 on x (bytes) and
/// decades on y; `x_fmt` turns an x tick into a label. Series with a
/// `band` get it shaded behind their curve. The legend is the
/// `<g class="legend">` element (the render test checks it lies inside the
/// SVG).
pub fn svg_loglog(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_fmt: &dyn Fn(f64) -> String,
) -> String {
    let (l, r, t, b) = (70.0, legend_width(series).max(80.0), 30.0, 50.0);
    let (w, h) = ((l + 420.0 + r).round(), 400.0);
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .copied()
                .chain(s.band.iter().flat_map(|(x, lo, hi)| [(*x, *lo), (*x, *hi)]))
        })
        .filter(|(x, y)| *x > 0.0 && *y > 0.0 && x.is_finite() && y.is_finite())
        .collect();
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"11\">\
<text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">{}</text>",
        (l + w - r) / 2.0,
        esc(title)
    );
    if pts.is_empty() {
        s.push_str("<text x=\"20\" y=\"60\">no data</text></svg>");
        return s;
    }
    let lg = |v: f64| v.log10();
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in &pts {
        x0 = x0.min(lg(*x));
        x1 = x1.max(lg(*x));
        y0 = y0.min(lg(*y));
        y1 = y1.max(lg(*y));
    }
    y0 = y0.floor();
    y1 = y1.ceil().max(y0 + 1.0);
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    let px = |x: f64| l + (lg(x) - x0) / (x1 - x0) * (w - l - r);
    let py = |y: f64| h - b - (lg(y) - y0) / (y1 - y0) * (h - t - b);
    let _ = write!(
        s,
        "<rect x=\"{l}\" y=\"{t}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>",
        w - l - r,
        h - t - b
    );
    // y ticks: decades.
    let mut d = y0;
    while d <= y1 + 1e-9 {
        let v = 10f64.powf(d);
        let y = py(v);
        let _ = write!(
            s,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            w - r,
            l - 4.0,
            y + 4.0,
            esc(&trim_num(v))
        );
        d += 1.0;
    }
    // x ticks: powers of 4 within range (base 2 exponents, every other).
    let (e0, e1) = (
        (x0 / 2f64.log10()).ceil() as i32,
        (x1 / 2f64.log10()).floor() as i32,
    );
    let step = if e1 - e0 > 12 { 4 } else { 2 };
    for e in (e0..=e1).filter(|e| e % step == 0) {
        let v = 2f64.powi(e);
        let x = px(v);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{t}\" y2=\"{}\" stroke=\"#eee\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            h - b,
            h - b + 14.0,
            esc(&x_fmt(v))
        );
    }
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text><text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        (l + w - r) / 2.0,
        h - 12.0,
        esc(x_label),
        (t + h - b) / 2.0,
        esc(y_label)
    );
    let ok = |x: f64, y: f64| x > 0.0 && y > 0.0 && x.is_finite() && y.is_finite();
    for (i, se) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let mut band: Vec<(f64, f64, f64)> = se
            .band
            .iter()
            .copied()
            .filter(|(x, lo, hi)| ok(*x, *lo) && ok(*x, *hi))
            .collect();
        band.sort_by(|a, b| a.0.total_cmp(&b.0));
        if band.len() >= 2 {
            let upper = band.iter().map(|(x, _, hi)| (*x, *hi));
            let lower = band.iter().rev().map(|(x, lo, _)| (*x, *lo));
            let poly: Vec<String> = upper
                .chain(lower)
                .map(|(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = write!(
                s,
                "<polygon class=\"band\" fill=\"{c}\" fill-opacity=\"0.15\" stroke=\"none\" points=\"{}\"/>",
                poly.join(" ")
            );
        }
        let mut p: Vec<(f64, f64)> = se
            .points
            .iter()
            .copied()
            .filter(|(x, y)| ok(*x, *y))
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = p
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let dash = if se.dashed {
            " stroke-dasharray=\"5,3\""
        } else {
            ""
        };
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
            path.join(" ")
        );
        for (x, y) in &p {
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{c}\"/>",
                px(*x),
                py(*y)
            );
        }
    }
    s.push_str("<g class=\"legend\">");
    for (i, se) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let dash = if se.dashed {
            " stroke-dasharray=\"5,3\""
        } else {
            ""
        };
        let ly = t + 14.0 + 18.0 * i as f64;
        let _ = write!(
            s,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{c}\" stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{}\">{}</text>",
            w - r + 10.0,
            w - r + 34.0,
            w - r + 40.0,
            ly + 4.0,
            esc(&se.name)
        );
    }
    s.push_str("</g></svg>");
    s
}

fn trim_num(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_curves_and_legend() {
        let s = svg_loglog(
            "bw <l3>",
            "size",
            "GB/s",
            &[
                Series {
                    name: "openmpi".into(),
                    points: vec![(1.0, 0.01), (1024.0, 5.0), (1048576.0, 20.0)],
                    dashed: false,
                    band: vec![(1.0, 0.008, 0.012), (1048576.0, 18.0, 22.0)],
                },
                Series {
                    name: "limit".into(),
                    points: vec![(1.0, 0.1), (1048576.0, 40.0), (4.0, -1.0)],
                    dashed: true,
                    ..Series::default()
                },
            ],
            &|v| format!("{v}"),
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("bw &lt;l3&gt;"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains(">openmpi</text>") && s.contains("stroke-dasharray"));
        assert!(!s.contains("NaN"));
        assert!(svg_loglog("t", "x", "y", &[], &|v| v.to_string()).contains("no data"));
        // One band (the limit has none), drawn before the curves.
        assert_eq!(s.matches("<polygon class=\"band\"").count(), 1);
        assert!(s.find("<polygon").unwrap() < s.find("<polyline").unwrap());
        assert!(s.contains("<g class=\"legend\">"));
    }

    #[test]
    fn legend_column_grows_with_the_longest_name() {
        let width = |name: &str| {
            let s = svg_loglog(
                "t",
                "x",
                "y",
                &[Series {
                    name: name.into(),
                    points: vec![(1.0, 1.0), (2.0, 2.0)],
                    ..Series::default()
                }],
                &|v| v.to_string(),
            );
            let w = s.split("width=\"").nth(1).unwrap();
            w[..w.find('"').unwrap()].parse::<f64>().unwrap()
        };
        let (short, long) = (width("mpi"), width(&"x".repeat(40)));
        // The plot is 70 + 420 px; the text starts 40 px into the legend
        // column and must end inside the SVG.
        assert_eq!(short, 70.0 + 420.0 + 80.0);
        assert!(70.0 + 420.0 + 40.0 + 6.6 * 40.0 <= long, "{long}");
    }
}
