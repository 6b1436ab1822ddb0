//! The A/A noise of a run: how far two jobs of the defaults drift apart.

use super::compare::summaries;
use super::ClassMeasure;
use serde::Serialize;

/// medians of consecutive jobs of the defaults drifted apart (`|ln(m2 /
/// m1)|`). The jobs of the defaults are interleaved with the candidates'
/// (paired measurements), so they see the same machine.
#[derive(Clone, Debug, Default, Serialize)]
pub struct NoiseFloor {
    /// Per class (in weight order): `(test, size) -> |ln ratio|` per pair.
    #[serde(skip)]
    classes: Vec<std::collections::BTreeMap<(String, u64), Vec<f64>>>,
    /// A/A pairs added.
    pub pairs: usize,
}

impl NoiseFloor {
    /// Adds one A/A pair: two jobs of the defaults, per class.
    pub fn add_pair(&mut self, a: &[ClassMeasure], b: &[ClassMeasure]) {
        if self.classes.len() < a.len() {
            self.classes.resize_with(a.len(), Default::default);
        }
        for (ci, (ca, cb)) in a.iter().zip(b).enumerate() {
            let sa = summaries(&ca.lines);
            let sb = summaries(&cb.lines);
            for (test, size, _, x) in &sa {
                let Some((_, _, _, y)) = sb.iter().find(|(t, s, _, _)| t == test && s == size)
                else {
                    continue;
                };
                if x.median > 0.0 && y.median > 0.0 {
                    self.classes[ci]
                        .entry((test.name().to_string(), *size))
                        .or_default()
                        .push((y.median / x.median).ln().abs());
                }
            }
        }
        self.pairs += 1;
    }

    /// Merges the pairs of another run's floor (same classes).
    pub fn merge(&mut self, other: &NoiseFloor) {
        if self.classes.len() < other.classes.len() {
            self.classes
                .resize_with(other.classes.len(), Default::default);
        }
        for (mine, theirs) in self.classes.iter_mut().zip(&other.classes) {
            for (k, v) in theirs {
                mine.entry(k.clone()).or_default().extend(v);
            }
        }
        self.pairs += other.pairs;
    }

    /// The noise bound at one point (relative, 0 without pairs): the 90th
    /// percentile (upper nearest rank) of the A/A deviations, i.e. the
    /// largest one while there are at most 10 pairs; a rare machine event
    /// in a long search does not blind the rule for the rest of it.
    pub fn bound(&self, class: usize, test: &str, size: u64) -> f64 {
        let Some(v) = self
            .classes
            .get(class)
            .and_then(|m| m.get(&(test.to_string(), size)))
        else {
            return 0.0;
        };
        if v.is_empty() {
            return 0.0;
        }
        let mut s = v.clone();
        s.sort_by(f64::total_cmp);
        // Leave out the largest tenth beyond the first 10 pairs.
        let rank = s.len() - (s.len() - 1) / 10;
        s[rank - 1].exp() - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{cm, job, line, POINTS};
    use super::super::{compare, compare_with, Objective, Rule};
    use super::*;

    #[test]
    fn an_aa_comparison_is_never_slower() {
        // Many runs of a noisy machine (job-level drift up to +-30%, sample
        // noise +-15%): defaults vs defaults, interleaved. The A/A pairs
        // that fed the noise floor can never be slower than it.
        let mut seed = 7;
        for _ in 0..200 {
            let jobs: Vec<ClassMeasure> =
                (0..4).map(|_| job(&mut seed, &POINTS, 0.3, 1.0)).collect();
            let mut floor = NoiseFloor::default();
            for w in jobs.windows(2) {
                floor.add_pair(std::slice::from_ref(&w[0]), std::slice::from_ref(&w[1]));
            }
            assert_eq!(floor.pairs, 3);
            for w in jobs.windows(2) {
                let rule = Rule {
                    noise: Some((&floor, 0)),
                    scope: None,
                };
                let v = compare_with(&w[0], &w[1], &Objective::default(), rule);
                assert!(v.feasible(), "{:?}", v.sizes);
                let v = compare_with(&w[1], &w[0], &Objective::default(), rule);
                assert!(v.feasible(), "{:?}", v.sizes);
            }
        }
        // Without the A/A bound (tolerance only), the same kind of data
        // does report sizes slower: the false vetoes.
        let mut seed = 7;
        let mut false_vetoes = 0;
        for _ in 0..200 {
            let a = job(&mut seed, &POINTS, 0.3, 1.0);
            let b = job(&mut seed, &POINTS, 0.3, 1.0);
            false_vetoes += usize::from(!compare(&a, &b, &Objective::default()).feasible());
        }
        assert!(false_vetoes > 20, "{false_vetoes}");
    }

    #[test]
    fn the_noise_bound_is_a_high_quantile_of_the_aa_pairs() {
        let mk = |x: f64| cm(vec![line("bw", 65536, vec![x; 9])]);
        let mut f = NoiseFloor::default();
        assert_eq!(f.bound(0, "bw", 65536), 0.0);
        // Ten pairs: 1.01 .. 1.10 apart; then one machine event (3x).
        for i in 1..=10 {
            f.add_pair(&[mk(10.0)], &[mk(10.0 * (1.0 + 0.01 * i as f64))]);
        }
        assert!((f.bound(0, "bw", 65536) - 0.10).abs() < 1e-9);
        f.add_pair(&[mk(10.0)], &[mk(30.0)]);
        // 11 pairs: the largest (the event) is left out.
        assert!((f.bound(0, "bw", 65536) - 0.10).abs() < 1e-9);
        // Unknown points have no noise.
        assert_eq!(f.bound(0, "latency", 1), 0.0);
        assert_eq!(f.bound(3, "bw", 65536), 0.0);
    }
}
