//! Robust summaries of repeated measurements (Hoefler & Belli, SC'15):
//! medians with non-parametric confidence intervals, never means of ratios.

use serde::{Deserialize, Serialize};

/// Summary of a set of samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    /// Bounds of the 95% confidence interval of the median (order statistics).
    pub ci_low: f64,
    pub ci_high: f64,
    pub min: f64,
    pub max: f64,
    pub p99: f64,
    pub mean: f64,
}

impl Summary {
    /// Summarizes `samples`; `None` if there are none or any is not finite.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.partial_cmp(b).expect("finite values compare"));
        let n = s.len();
        let median = quantile_sorted(&s, 0.5);
        let (lo, hi) = median_ci_ranks(n);
        Some(Summary {
            n,
            median,
            ci_low: s[lo],
            ci_high: s[hi],
            min: s[0],
            max: s[n - 1],
            p99: quantile_sorted(&s, 0.99),
            mean: s.iter().sum::<f64>() / n as f64,
        })
    }

    /// Half-width of the CI relative to the median (0.05 = +-5%).
    pub fn relative_ci(&self) -> f64 {
        if self.median == 0.0 {
            return 0.0;
        }
        (self.ci_high - self.ci_low) / 2.0 / self.median.abs()
    }
}

/// Linear-interpolated quantile of sorted data.
pub fn quantile_sorted(s: &[f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// 0-based ranks (low, high) of the order statistics bounding a 95% CI of the
/// median: the normal approximation of the Binomial(n, 1/2) quantiles
/// (Le Boudec), exact enough from n = 6; below that the CI is [min, max].
pub fn median_ci_ranks(n: usize) -> (usize, usize) {
    if n < 6 {
        return (0, n - 1);
    }
    let nf = n as f64;
    let half = 1.96 * nf.sqrt() / 2.0;
    let lo = ((nf / 2.0 - half).floor() as isize - 1).max(0) as usize;
    let hi = ((nf / 2.0 + half).ceil() as usize).min(n - 1);
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_ci_of_known_data() {
        let v: Vec<f64> = (1..=101).map(f64::from).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!(s.median, 51.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 101.0);
        assert!(s.ci_low < 51.0 && s.ci_high > 51.0);
        // ~ +-10 ranks for n = 101.
        assert!((40.0..=42.0).contains(&s.ci_low), "{}", s.ci_low);
        assert!((60.0..=62.0).contains(&s.ci_high), "{}", s.ci_high);
        assert!((s.p99 - 100.0).abs() < 1e-9);
    }

    #[test]
    fn small_and_bad_inputs() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.ci_low, s.ci_high), (2.0, 1.0, 3.0));
    }

    #[test]
    fn ci_covers_the_true_median_about_95_percent() {
        // Deterministic LCG, uniform samples on [0,1): true median 0.5.
        let mut x: u64 = 12345;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let trials = 2000;
        let mut covered = 0;
        for _ in 0..trials {
            let v: Vec<f64> = (0..31).map(|_| next()).collect();
            let s = Summary::of(&v).unwrap();
            if s.ci_low <= 0.5 && 0.5 <= s.ci_high {
                covered += 1;
            }
        }
        let rate = covered as f64 / trials as f64;
        assert!((0.93..=0.995).contains(&rate), "coverage {rate}");
    }
}
