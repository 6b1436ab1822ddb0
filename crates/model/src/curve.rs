//! A throughput curve: GB/s as a function of the buffer size, interpolated
//! linearly in log-log space between measured points and flat beyond them.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// (size in bytes, throughput in GB/s = 1e9 B/s), sizes strictly increasing.
    points: Vec<(u64, f64)>,
}

impl Curve {
    /// Builds a curve; rejects empty input, non-positive or non-finite values
    /// and duplicate sizes, with a message naming the offending point.
    pub fn new(mut points: Vec<(u64, f64)>) -> Result<Curve, String> {
        if points.is_empty() {
            return Err("a throughput curve needs at least one point".into());
        }
        points.sort_by_key(|p| p.0);
        for w in points.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(format!("two throughputs for the same size {} B", w[0].0));
            }
        }
        if let Some(p) = points
            .iter()
            .find(|p| p.0 == 0 || !(p.1.is_finite() && p.1 > 0.0))
        {
            return Err(format!(
                "invalid point ({} B, {} GB/s): sizes and throughputs must be positive",
                p.0, p.1
            ));
        }
        Ok(Curve { points })
    }

    /// A flat curve (the same throughput at every size).
    pub fn flat(gbps: f64) -> Curve {
        Curve::new(vec![(1, gbps)]).expect("positive constant")
    }

    pub fn points(&self) -> &[(u64, f64)] {
        &self.points
    }

    /// Throughput (GB/s) at `size` bytes.
    pub fn at(&self, size: u64) -> f64 {
        let p = &self.points;
        let size = size.max(1);
        if size <= p[0].0 {
            return p[0].1;
        }
        if size >= p[p.len() - 1].0 {
            return p[p.len() - 1].1;
        }
        let i = p.partition_point(|q| q.0 <= size);
        let (x0, y0) = p[i - 1];
        let (x1, y1) = p[i];
        let t = ((size as f64).ln() - (x0 as f64).ln()) / ((x1 as f64).ln() - (x0 as f64).ln());
        (y0.ln() + t * (y1.ln() - y0.ln())).exp()
    }

    /// Seconds to move `bytes` at the throughput measured for `at_size`.
    pub fn seconds(&self, bytes: u64, at_size: u64) -> f64 {
        bytes as f64 / (self.at(at_size) * 1e9)
    }

    /// Pointwise minimum of two curves (a copy runs at the slower of its load
    /// and its store stream), on the union of their sizes.
    pub fn min(&self, other: &Curve) -> Curve {
        let mut sizes: Vec<u64> = self
            .points
            .iter()
            .chain(&other.points)
            .map(|p| p.0)
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        Curve {
            points: sizes
                .into_iter()
                .map(|s| (s, self.at(s).min(other.at(s))))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_in_log_space_and_clamps() {
        let c = Curve::new(vec![(1024, 100.0), (1 << 20, 10.0)]).unwrap();
        assert_eq!(c.at(1), 100.0);
        assert_eq!(c.at(1 << 30), 10.0);
        // Half-way in log(size) is the geometric mean.
        let mid = c.at(32 * 1024);
        assert!((mid - (1000.0f64).sqrt()).abs() < 1e-9, "{mid}");
        assert!((c.seconds(1_000_000_000, 1 << 20) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn rejects_bad_points() {
        assert!(Curve::new(vec![]).is_err());
        assert!(Curve::new(vec![(0, 1.0)]).is_err());
        assert!(Curve::new(vec![(8, -1.0)]).is_err());
        assert!(Curve::new(vec![(8, f64::NAN)]).is_err());
        assert!(Curve::new(vec![(8, 1.0), (8, 2.0)])
            .unwrap_err()
            .contains("8 B"));
    }

    #[test]
    fn min_takes_the_slower_stream() {
        let a = Curve::new(vec![(10, 5.0), (1000, 5.0)]).unwrap();
        let b = Curve::new(vec![(10, 9.0), (1000, 1.0)]).unwrap();
        let m = a.min(&b);
        assert_eq!(m.at(10), 5.0);
        assert_eq!(m.at(1000), 1.0);
    }
}
