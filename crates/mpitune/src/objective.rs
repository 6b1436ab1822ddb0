//! One candidate setting against the defaults, per locality class:
//! the bandwidth gain over the target sizes (an [`Objective`] range, 64 KiB
//! to 4 MiB unless the user picks the sizes their application sends) and
//! the sizes that got slower. Noise-aware: a size counts as slower only when its
//! median is more than the tolerance worse AND the two 95% confidence
//! intervals of the medians do not overlap (so a noisy run does not veto a
//! good setting, and a real regression is not hidden by one lucky sample).

use serde::Serialize;
use topocomm_measure::p2p::Test;
use topocomm_measure::{SampleLine, Summary};

/// Default target range of the objective (inclusive).
pub const TARGET_MIN: u64 = 64 << 10;
pub const TARGET_MAX: u64 = 4 << 20;

/// The message sizes whose streaming bandwidth the tuner maximizes
/// (inclusive); every other measured size only has to stay no slower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Objective {
    pub min: u64,
    pub max: u64,
}

impl Default for Objective {
    fn default() -> Objective {
        Objective {
            min: TARGET_MIN,
            max: TARGET_MAX,
        }
    }
}

impl Objective {
    /// `MIN-MAX` with K/M/G suffixes (`4K-16K`), or one size (`64K`).
    pub fn parse(s: &str) -> Result<Objective, String> {
        let size = |t: &str| {
            topocomm_measure::p2p::parse_sizes(t.trim())
                .map_err(|e| e.to_string())
                .and_then(|v| match v.as_slice() {
                    [one] => Ok(*one),
                    _ => Err(format!("'{t}' is not one size")),
                })
        };
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (size(a)?, size(b)?),
            None => {
                let one = size(s)?;
                (one, one)
            }
        };
        if min > max {
            return Err(format!("'{s}': the range is empty (min > max)"));
        }
        Ok(Objective { min, max })
    }

    pub fn contains(&self, size: u64) -> bool {
        (self.min..=self.max).contains(&size)
    }

    /// `64K-4M` (or `4K` for a single size).
    pub fn label(&self) -> String {
        use topocomm_measure::p2p::size_label;
        if self.min == self.max {
            size_label(self.min)
        } else {
            format!("{}-{}", size_label(self.min), size_label(self.max))
        }
    }
}
/// "No size more than 5% slower than default."
pub const TOLERANCE: f64 = 0.05;

/// What one setting measured on one class's representative pair.
#[derive(Clone, Debug, Serialize)]
pub struct ClassMeasure {
    pub class: String,
    pub pair: (u32, u32),
    pub lines: Vec<SampleLine>,
}

/// One (test, size) of a comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SizeCompare {
    pub test: String,
    pub size: u64,
    pub unit: String,
    pub default: Summary,
    pub tuned: Summary,
    /// Speed-up: tuned / default for rates, default / tuned for times.
    pub gain: f64,
    /// Slower than default beyond the tolerance, CIs apart.
    pub slower: bool,
}

/// A candidate against the defaults on one class.
#[derive(Clone, Debug, Serialize)]
pub struct ClassVerdict {
    pub class: String,
    pub sizes: Vec<SizeCompare>,
    /// Geometric mean of the bw gains over the target sizes (1 = no change).
    pub score: f64,
}

impl ClassVerdict {
    pub fn feasible(&self) -> bool {
        !self.sizes.iter().any(|s| s.slower)
    }
}

fn summaries(lines: &[SampleLine]) -> Vec<(Test, u64, &str, Summary)> {
    lines
        .iter()
        .filter_map(|l| {
            let t: Test = l.test.parse().ok()?;
            Some((t, l.size, l.unit.as_str(), Summary::of(&l.samples)?))
        })
        .collect()
}

/// Compares `tuned` with `default` (same class, same tests and sizes).
pub fn compare(default: &ClassMeasure, tuned: &ClassMeasure, obj: &Objective) -> ClassVerdict {
    let d = summaries(&default.lines);
    let t = summaries(&tuned.lines);
    let mut sizes = Vec::new();
    for (test, size, unit, ds) in &d {
        let Some((_, _, _, ts)) = t.iter().find(|(tt, ss, _, _)| tt == test && ss == size) else {
            continue;
        };
        let (gain, slower) = if test.higher_is_better() {
            (
                ts.median / ds.median,
                ts.median < ds.median * (1.0 - TOLERANCE) && ts.ci_high < ds.ci_low,
            )
        } else {
            (
                ds.median / ts.median,
                ts.median > ds.median * (1.0 + TOLERANCE) && ts.ci_low > ds.ci_high,
            )
        };
        sizes.push(SizeCompare {
            test: test.name().into(),
            size: *size,
            unit: unit.to_string(),
            default: ds.clone(),
            tuned: ts.clone(),
            gain,
            slower,
        });
    }
    let score = target_score(&sizes, obj);
    ClassVerdict {
        class: default.class.clone(),
        sizes,
        score,
    }
}

/// Geometric mean of the bw gains on the target sizes; all bw sizes when
/// none of them falls in the target range (e.g. `--sizes 4K`).
fn target_score(sizes: &[SizeCompare], obj: &Objective) -> f64 {
    let bw: Vec<&SizeCompare> = sizes.iter().filter(|s| s.test == "bw").collect();
    let in_range: Vec<&&SizeCompare> = bw.iter().filter(|s| obj.contains(s.size)).collect();
    let pick: Vec<f64> = if in_range.is_empty() {
        bw.iter().map(|s| s.gain).collect()
    } else {
        in_range.iter().map(|s| s.gain).collect()
    };
    if pick.is_empty() {
        return 1.0;
    }
    (pick.iter().map(|g| g.ln()).sum::<f64>() / pick.len() as f64).exp()
}

/// The weighted score over classes: `exp(sum w_c ln score_c / sum w_c)`,
/// and feasibility on every class with a positive weight.
pub fn combine(verdicts: &[ClassVerdict], weights: &[f64]) -> (f64, bool) {
    let total: f64 = weights.iter().sum();
    if verdicts.is_empty() || total <= 0.0 {
        return (1.0, true);
    }
    let mut log = 0.0;
    let mut feasible = true;
    for (v, w) in verdicts.iter().zip(weights) {
        if *w > 0.0 {
            log += w * v.score.ln();
            feasible &= v.feasible();
        }
    }
    ((log / total).exp(), feasible)
}

/// Keeps a size marked slower in `verdicts` only if it is also slower in
/// every one of `runs` (same classes, in the same order). The CIs of one
/// job hold the spread within that job, not between jobs: on a shared
/// machine a whole job sometimes runs at another speed, so a regression
/// counts only when it reproduces.
pub fn slower_in_every(verdicts: &mut [ClassVerdict], runs: &[&[ClassVerdict]]) {
    for (ci, v) in verdicts.iter_mut().enumerate() {
        for c in v.sizes.iter_mut() {
            c.slower &= runs.iter().all(|r| {
                r.get(ci).is_some_and(|rv| {
                    rv.sizes
                        .iter()
                        .any(|x| x.test == c.test && x.size == c.size && x.slower)
                })
            });
        }
    }
}

/// Which way every size moved in a [`job_level_shift`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shift {
    /// The setting's job ran slower at (almost) every size.
    Slower,
    /// ... faster: most likely the defaults' job ran slow.
    Faster,
}

/// Whether one comparison looks like a machine event rather than the
/// setting: at least two thirds of all measured points (bw and latency, every
/// class) moved beyond the tolerance in the same direction. On a shared VM a
/// whole job sometimes runs at another speed; a parameter usually moves a
/// range of sizes. The caller measures such a pair again; a setting that
/// really moves everything (e.g. another pml) does so again.
pub fn job_level_shift(verdicts: &[ClassVerdict]) -> Option<Shift> {
    let gains: Vec<f64> = verdicts
        .iter()
        .flat_map(|v| v.sizes.iter().map(|c| c.gain))
        .collect();
    if gains.len() < 3 {
        return None;
    }
    let slower = gains.iter().filter(|&&g| g < 1.0 - TOLERANCE).count();
    let faster = gains
        .iter()
        .filter(|&&g| g > 1.0 / (1.0 - TOLERANCE))
        .count();
    if 3 * slower >= 2 * gains.len() {
        Some(Shift::Slower)
    } else if 3 * faster >= 2 * gains.len() {
        Some(Shift::Faster)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(test: &str, size: u64, samples: Vec<f64>) -> SampleLine {
        SampleLine {
            implementation: "openmpi".into(),
            test: test.into(),
            size,
            cache: "hot".into(),
            unit: if test == "latency" { "us" } else { "GB/s" }.into(),
            samples,
        }
    }

    fn around(x: f64, spread: f64) -> Vec<f64> {
        (0..9)
            .map(|i| x * (1.0 + spread * (i as f64 - 4.0) / 4.0))
            .collect()
    }

    fn cm(lines: Vec<SampleLine>) -> ClassMeasure {
        ClassMeasure {
            class: "l3".into(),
            pair: (0, 1),
            lines,
        }
    }

    #[test]
    fn gain_is_the_geometric_mean_over_the_target_sizes() {
        let d = cm(vec![
            line("bw", 4096, around(10.0, 0.01)),
            line("bw", 65536, around(5.0, 0.01)),
            line("bw", 1 << 20, around(10.0, 0.01)),
        ]);
        let t = cm(vec![
            line("bw", 4096, around(10.0, 0.01)),
            line("bw", 65536, around(20.0, 0.01)),
            line("bw", 1 << 20, around(20.0, 0.01)),
        ]);
        let v = compare(&d, &t, &Objective::default());
        // sqrt(4 * 2): 4 KiB is outside the target range.
        assert!((v.score - 8f64.sqrt()).abs() < 1e-9, "{}", v.score);
        assert!(v.feasible());
    }

    #[test]
    fn slower_needs_both_the_tolerance_and_separated_cis() {
        // 10% slower with tight samples: a regression.
        let d = cm(vec![line("bw", 65536, around(10.0, 0.01))]);
        let t = cm(vec![line("bw", 65536, around(9.0, 0.01))]);
        assert!(!compare(&d, &t, &Objective::default()).feasible());
        // 10% slower but very noisy (CIs overlap): not proven slower.
        let t = cm(vec![line("bw", 65536, around(9.0, 0.5))]);
        assert!(compare(&d, &t, &Objective::default()).feasible());
        // 3% slower, tight: within the tolerance.
        let t = cm(vec![line("bw", 65536, around(9.7, 0.001))]);
        assert!(compare(&d, &t, &Objective::default()).feasible());
        // Latency: higher is worse.
        let d = cm(vec![line("latency", 8, around(0.2, 0.01))]);
        let t = cm(vec![line("latency", 8, around(0.3, 0.01))]);
        let v = compare(&d, &t, &Objective::default());
        assert!(!v.feasible());
        assert!((v.sizes[0].gain - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn classes_combine_by_weight() {
        let mk = |score: f64, slower: bool| ClassVerdict {
            class: "x".into(),
            sizes: vec![SizeCompare {
                test: "bw".into(),
                size: 1,
                unit: "GB/s".into(),
                default: Summary::of(&[1.0]).unwrap(),
                tuned: Summary::of(&[1.0]).unwrap(),
                gain: 1.0,
                slower,
            }],
            score,
        };
        let (s, f) = combine(&[mk(4.0, false), mk(1.0, true)], &[1.0, 1.0]);
        assert!((s - 2.0).abs() < 1e-9);
        assert!(!f);
        // A class nobody uses neither scores nor vetoes.
        let (s, f) = combine(&[mk(4.0, false), mk(1.0, true)], &[1.0, 0.0]);
        assert!((s - 4.0).abs() < 1e-9);
        assert!(f);
    }

    #[test]
    fn objective_ranges_parse_and_choose_the_scored_sizes() {
        assert_eq!(Objective::default().label(), "64K-4M");
        let o = Objective::parse("4K-16K").unwrap();
        assert_eq!((o.min, o.max), (4096, 16384));
        assert_eq!(Objective::parse("64K").unwrap().label(), "64K");
        for bad in ["16K-4K", "x", "4K-", "4K,8K"] {
            assert!(Objective::parse(bad).is_err(), "{bad}");
        }
        // 4K doubles, 1M halves: each range scores only its own sizes.
        let d = ClassMeasure {
            class: "l3".into(),
            pair: (0, 1),
            lines: vec![
                line("bw", 4096, vec![1.0; 9]),
                line("bw", 1 << 20, vec![10.0; 9]),
            ],
        };
        let t = ClassMeasure {
            lines: vec![
                line("bw", 4096, vec![2.0; 9]),
                line("bw", 1 << 20, vec![5.0; 9]),
            ],
            ..d.clone()
        };
        let small = compare(&d, &t, &Objective::parse("4K-16K").unwrap());
        assert!((small.score - 2.0).abs() < 1e-9, "{}", small.score);
        let large = compare(&d, &t, &Objective::default());
        assert!((large.score - 0.5).abs() < 1e-9, "{}", large.score);
        // The constraint does not depend on the range: 1M is slower either way.
        assert!(!small.feasible() && !large.feasible());
    }

    #[test]
    fn a_shift_of_every_size_is_told_from_a_range() {
        let mk = |gains: &[f64]| ClassVerdict {
            class: "l3".into(),
            score: 1.0,
            sizes: gains
                .iter()
                .enumerate()
                .map(|(i, &g)| {
                    let s = Summary::of(&[1.0, 1.0, 1.0]).unwrap();
                    SizeCompare {
                        test: "bw".into(),
                        size: 1 << i,
                        unit: "GB/s".into(),
                        default: s.clone(),
                        tuned: s,
                        gain: g,
                        slower: g < 0.95,
                    }
                })
                .collect(),
        };
        // A slow job: everything x0.4-0.6.
        let slow = [mk(&[0.4, 0.5, 0.6, 0.45, 0.5, 1.0])];
        assert_eq!(job_level_shift(&slow), Some(Shift::Slower));
        // A slow defaults job seen from the other side.
        let fast = [mk(&[2.0, 1.9, 2.1, 1.0, 2.2, 2.0])];
        assert_eq!(job_level_shift(&fast), Some(Shift::Faster));
        // A setting that moves the large sizes only.
        assert_eq!(
            job_level_shift(&[mk(&[1.0, 1.0, 1.0, 0.8, 0.8, 0.8])]),
            None
        );
        assert_eq!(job_level_shift(&[mk(&[0.5, 0.5])]), None);
    }
}
