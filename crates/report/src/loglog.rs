//! Log-log line charts (size vs. throughput or latency) as SVG.

use crate::esc;
use std::fmt::Write as _;

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    /// (x, y) with x, y > 0; others are skipped.
    pub points: Vec<(f64, f64)>,
}

const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Byte counts as 1K, 64K, 1M, 1G.
pub fn bytes_label(v: f64) -> String {
    let units = [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (u, s) in units {
        if v >= s as f64 {
            return format!("{}{u}", (v / s as f64 * 10.0).round() / 10.0);
        }
    }
    format!("{v}")
}

/// A log-log chart. `x_bytes` labels the x axis as byte sizes.
pub fn loglog_svg(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    x_bytes: bool,
    series: &[Series],
) -> String {
    let (w, h, ml, mr, mt, mb) = (720.0, 400.0, 70.0, 190.0, 30.0, 45.0);
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|(x, y)| *x > 0.0 && *y > 0.0 && x.is_finite() && y.is_finite())
        .collect();
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"10\"><text x=\"{ml}\" y=\"16\" font-size=\"13\">{}</text>",
        esc(title)
    );
    if pts.is_empty() {
        s.push_str("<text x=\"80\" y=\"80\">no data</text></svg>");
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
    let (x0, x1) = (x0.floor(), x1.ceil().max(x0.floor() + 1.0));
    let (y0, y1) = (y0.floor(), y1.ceil().max(y0.floor() + 1.0));
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let px = |x: f64| ml + (lg(x) - x0) / (x1 - x0) * pw;
    let py = |y: f64| mt + ph - (lg(y) - y0) / (y1 - y0) * ph;
    let _ = write!(
        s,
        "<rect x=\"{ml}\" y=\"{mt}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>"
    );
    // Decade ticks (x in powers of 2 when bytes: every 4x).
    if x_bytes {
        let mut v = 2f64.powf((10f64.powf(x0)).log2().ceil());
        while lg(v) <= x1 + 1e-9 {
            let x = px(v);
            let _ = write!(s, "<line x1=\"{x}\" y1=\"{mt}\" x2=\"{x}\" y2=\"{}\" stroke=\"#eee\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text>", mt + ph, mt + ph + 12.0, bytes_label(v));
            v *= 4.0;
        }
    } else {
        for d in x0 as i32..=x1 as i32 {
            let v = 10f64.powi(d);
            let x = px(v);
            let _ = write!(s, "<line x1=\"{x}\" y1=\"{mt}\" x2=\"{x}\" y2=\"{}\" stroke=\"#eee\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{v}</text>", mt + ph, mt + ph + 12.0);
        }
    }
    for d in y0 as i32..=y1 as i32 {
        let v = 10f64.powi(d);
        let y = py(v);
        let _ = write!(s, "<line x1=\"{ml}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{v}</text>", ml + pw, ml - 4.0, y + 3.0);
    }
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">{}</text>",
        ml + pw / 2.0,
        h - 8.0,
        esc(xlabel),
        mt + ph / 2.0,
        mt + ph / 2.0,
        esc(ylabel)
    );
    for (k, se) in series.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let path: Vec<String> = se
            .points
            .iter()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0 && x.is_finite() && y.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        if path.is_empty() {
            continue;
        }
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>",
            path.join(" "),
            esc(&se.name)
        );
        let ly = mt + 10.0 + 13.0 * k as f64;
        let _ = write!(
            s,
            "<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"/><text x=\"{}\" y=\"{}\">{}</text>",
            ml + pw + 10.0,
            ml + pw + 28.0,
            ml + pw + 32.0,
            ly + 3.0,
            esc(&se.name)
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_series_and_skips_bad_points() {
        let s = loglog_svg(
            "t",
            "size",
            "GB/s",
            true,
            &[Series {
                name: "a<b".into(),
                points: vec![(1024.0, 10.0), (1048576.0, 5.0), (0.0, 1.0)],
            }],
        );
        assert!(s.contains("<polyline"));
        assert!(s.contains("a&lt;b"));
        assert!(s.contains(">1K<") && s.contains(">1M<"));
        assert!(loglog_svg("t", "x", "y", false, &[]).contains("no data"));
    }
}
