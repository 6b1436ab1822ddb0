//! Pair heatmaps (SVG and PNG) with axes in topology order and group
//! boundaries (L2, L3, NUMA node, package) drawn between rows/columns.

use crate::esc;
use std::fmt::Write as _;

/// Boundaries of one level: positions `i` where a new group starts (a line
/// is drawn between rows/columns `i-1` and `i`).
#[derive(Clone, Debug)]
pub struct Boundaries {
    pub level: String,
    pub starts: Vec<usize>,
}

#[derive(Clone, Debug)]
pub struct Heatmap {
    pub title: String,
    pub unit: String,
    /// Row/column labels (PU OS indexes) in topology order.
    pub labels: Vec<String>,
    /// Row-major n*n values; `None` = not measured (diagonal, skipped pairs).
    pub values: Vec<Option<f64>>,
    /// Finest level first; later ones are drawn thicker.
    pub boundaries: Vec<Boundaries>,
}

/// Viridis-like ramp, t in [0, 1]: dark purple (low) to yellow (high).
pub fn ramp(t: f64) -> [u8; 3] {
    const STOPS: [[f64; 3]; 5] = [
        [68.0, 1.0, 84.0],
        [59.0, 82.0, 139.0],
        [33.0, 145.0, 140.0],
        [94.0, 201.0, 98.0],
        [253.0, 231.0, 37.0],
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let mut c = [0u8; 3];
    for k in 0..3 {
        c[k] = (STOPS[i][k] + (STOPS[i + 1][k] - STOPS[i][k]) * f).round() as u8;
    }
    c
}

impl Heatmap {
    fn n(&self) -> usize {
        self.labels.len()
    }

    fn range(&self) -> (f64, f64) {
        let v: Vec<f64> = self.values.iter().flatten().copied().collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() {
            (lo, hi)
        } else {
            (0.0, 1.0)
        }
    }

    fn color(&self, v: Option<f64>) -> [u8; 3] {
        let (lo, hi) = self.range();
        match v {
            None => [235, 235, 235],
            Some(x) if hi > lo => ramp((x - lo) / (hi - lo)),
            Some(_) => ramp(0.5),
        }
    }

    fn cell(&self) -> usize {
        (640 / self.n().max(1)).clamp(2, 40)
    }

    /// SVG drawing with labels, legend and boundaries.
    pub fn svg(&self) -> String {
        let n = self.n();
        let c = self.cell();
        let (lo, hi) = self.range();
        let margin = 50;
        let side = n * c;
        // Room for the title, the 160 px legend ramp and its labels even
        // when the matrix itself is tiny (2 PUs).
        let title_w = 8 * self.title.chars().count() + margin;
        let (w, h) = (
            (side + margin + 140).max(title_w),
            side.max(200) + margin + 30,
        );
        let mut s = String::new();
        let _ = write!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"10\"><text x=\"{margin}\" y=\"14\" font-size=\"13\">{}</text>",
            esc(&self.title)
        );
        for i in 0..n {
            for j in 0..n {
                let v = self.values[i * n + j];
                let [r, g, b] = self.color(v);
                let tip = match v {
                    Some(x) => format!(
                        "{} - {}: {x:.4} {}",
                        self.labels[i], self.labels[j], self.unit
                    ),
                    None => format!("{} - {}: not measured", self.labels[i], self.labels[j]),
                };
                let _ = write!(
                    s,
                    "<rect x=\"{}\" y=\"{}\" width=\"{c}\" height=\"{c}\" fill=\"rgb({r},{g},{b})\"><title>{}</title></rect>",
                    margin + j * c,
                    margin + i * c,
                    esc(&tip)
                );
            }
        }
        let step = n.div_ceil(32).max(1);
        for i in (0..n).step_by(step) {
            let mid = margin + i * c + c / 2;
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><text x=\"{mid}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                margin - 3,
                mid + 3,
                esc(&self.labels[i]),
                margin - 4,
                esc(&self.labels[i])
            );
        }
        for (k, b) in self.boundaries.iter().enumerate() {
            let width = 1 + k;
            for &p in &b.starts {
                let x = margin + p * c;
                let _ = write!(
                    s,
                    "<line x1=\"{x}\" y1=\"{margin}\" x2=\"{x}\" y2=\"{}\" stroke=\"#fff\" stroke-width=\"{width}\"><title>{} boundary</title></line><line x1=\"{margin}\" y1=\"{x}\" x2=\"{}\" y2=\"{x}\" stroke=\"#fff\" stroke-width=\"{width}\"/>",
                    margin + side,
                    esc(&b.level),
                    margin + side
                );
            }
        }
        // Legend: ramp with min/max, then the boundary levels.
        let lx = margin + side + 15;
        for k in 0..20 {
            let [r, g, b] = ramp(1.0 - k as f64 / 19.0);
            let _ = write!(
                s,
                "<rect x=\"{lx}\" y=\"{}\" width=\"14\" height=\"8\" fill=\"rgb({r},{g},{b})\"/>",
                margin + k * 8
            );
        }
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\">{hi:.3} {u}</text><text x=\"{}\" y=\"{}\">{lo:.3} {u}</text>",
            lx + 18,
            margin + 8,
            lx + 18,
            margin + 160,
            u = esc(&self.unit)
        );
        let levels: Vec<String> = self
            .boundaries
            .iter()
            .enumerate()
            .map(|(k, b)| format!("{} ({}px)", b.level, 1 + k))
            .collect();
        if !levels.is_empty() {
            let _ = write!(
                s,
                "<text x=\"{lx}\" y=\"{}\">lines: {}</text>",
                margin + 180,
                esc(&levels.join(", "))
            );
        }
        s.push_str("</svg>");
        s
    }

    /// PNG of the cells with black boundary lines (no text).
    pub fn png(&self) -> Vec<u8> {
        let n = self.n();
        let c = self.cell().max(4);
        let side = (n * c).max(1);
        let mut px = vec![255u8; side * side * 3];
        for i in 0..n {
            for j in 0..n {
                let col = self.color(self.values[i * n + j]);
                for y in i * c..(i + 1) * c {
                    for x in j * c..(j + 1) * c {
                        px[(y * side + x) * 3..(y * side + x) * 3 + 3].copy_from_slice(&col);
                    }
                }
            }
        }
        for (k, b) in self.boundaries.iter().enumerate() {
            for &p in &b.starts {
                for d in 0..=k.min(c / 2) {
                    let at = (p * c + d).saturating_sub(k.min(c / 2) / 2).min(side - 1);
                    for t in 0..side {
                        px[(t * side + at) * 3..(t * side + at) * 3 + 3].fill(255);
                        px[(at * side + t) * 3..(at * side + t) * 3 + 3].fill(255);
                    }
                }
            }
        }
        crate::png::encode_rgb(side as u32, side as u32, &px)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_cells_and_boundaries() {
        let h = Heatmap {
            title: "t".into(),
            unit: "ns".into(),
            labels: vec!["0".into(), "1".into(), "2".into(), "3".into()],
            values: (0..16)
                .map(|i| if i % 5 == 0 { None } else { Some(i as f64) })
                .collect(),
            boundaries: vec![Boundaries {
                level: "L3".into(),
                starts: vec![2],
            }],
        };
        let svg = h.svg();
        assert_eq!(svg.matches("<rect").count(), 16 + 20);
        assert!(svg.contains("L3 boundary"));
        assert!(svg.contains("not measured"));
        let png = h.png();
        assert_eq!(&png[1..4], b"PNG");
        assert_eq!(ramp(0.0), [68, 1, 84]);
    }
}
