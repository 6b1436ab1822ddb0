//! One candidate setting against the defaults, per locality class:
//! the bandwidth gain over the target sizes (an [`Objective`] range, 64 KiB
//! to 4 MiB unless the user picks the sizes their application sends) and
//! the sizes that got slower.
//!
//! The acceptance rule ([`judge`]), the same in the search, the final
//! verification and `--verify FILE`: at each (test, size) the slowdown
//! `default/tuned` (bw) or `tuned/default` (latency) of the medians gets a
//! conservative 95% interval from the two medians' 95% CIs
//! (`[d.ci_low / t.ci_high, d.ci_high / t.ci_low]` for bw). The size counts
//! as slower only when the whole interval lies above `1 + bound`, where
//! `bound` is the larger of [`TOLERANCE`] and the A/A noise at that size:
//! how far the medians of two jobs of the *defaults* measured in the same
//! run (interleaved with the candidates) drifted apart ([`NoiseFloor`]).
//! Within-job spread is in the CIs, between-job spread in the bound, so two
//! jobs of identical settings never count as slower (a pair that fed the
//! bound cannot exceed it). A size outside the setting's scope (sizes its
//! parameters cannot change, [`crate::space::Space::scope`]) is judged by
//! the same rule but does not veto in the search.

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
    /// Slowdown tuned vs default (> 1: slower; `1 / gain`), conservative
    /// 95% interval from the two medians' CIs: `[low, high]`.
    pub slowdown_ci: (f64, f64),
    /// A/A noise bound at this size (relative: 0.2 = two default jobs'
    /// medians 20% apart); the rule uses `max(TOLERANCE, noise)`.
    pub noise: f64,
    /// Whether the setting's parameters can change this size; a size out
    /// of scope is judged but does not veto in the search.
    pub in_scope: bool,
    pub test: String,
    pub size: u64,
    pub unit: String,
    pub default: Summary,
    pub tuned: Summary,
    /// Speed-up: tuned / default for rates, default / tuned for times.
    pub gain: f64,
    /// Slower than default beyond the noise: the slowdown's whole interval
    /// lies above `1 + max(TOLERANCE, noise)` ([`judge`]).
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
    /// No size in scope is slower (every size is in scope unless a scope
    /// was given).
    pub fn feasible(&self) -> bool {
        !self.sizes.iter().any(|s| s.slower && s.in_scope)
    }

    /// Sizes slower beyond the noise but outside the setting's scope.
    pub fn out_of_scope_slower(&self) -> impl Iterator<Item = &SizeCompare> {
        self.sizes.iter().filter(|s| s.slower && !s.in_scope)
    }
}

/// The slowdown interval of `tuned` vs `default` at one point and whether
/// it counts as slower: the whole interval above `1 + max(TOLERANCE,
/// noise)`. Returns `(gain, (low, high), slower)`.
pub fn judge(
    higher_is_better: bool,
    default: &Summary,
    tuned: &Summary,
    noise: f64,
) -> (f64, (f64, f64), bool) {
    let (gain, lo, hi) = if higher_is_better {
        (
            tuned.median / default.median,
            default.ci_low / tuned.ci_high,
            default.ci_high / tuned.ci_low,
        )
    } else {
        (
            default.median / tuned.median,
            tuned.ci_low / default.ci_high,
            tuned.ci_high / default.ci_low,
        )
    };
    let fix = |x: f64| if x.is_finite() { x } else { f64::INFINITY };
    let (lo, hi) = (fix(lo), fix(hi));
    let slower = lo > 1.0 + TOLERANCE.max(noise);
    (gain, (lo, hi), slower)
}

/// The A/A noise of one run: for every class and (test, size), how far the
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

/// The evidence for one slower size, as printed: `l3 bw 64K x0.80
/// (slowdown [1.15, 1.40] > 1 + A/A noise 8%)`.
pub fn evidence(class: &str, c: &SizeCompare) -> String {
    format!(
        "{class} {} {} x{:.2} (slowdown [{:.2}, {:.2}] > 1 + {} {:.0}%)",
        c.test,
        topocomm_measure::p2p::size_label(c.size),
        c.gain,
        c.slowdown_ci.0,
        c.slowdown_ci.1,
        if c.noise > TOLERANCE {
            "A/A noise"
        } else {
            "tolerance"
        },
        TOLERANCE.max(c.noise) * 100.0
    )
}

/// How a comparison is judged: the A/A noise of this class (none: only the
/// tolerance) and the sizes the setting can change (none: all).
#[derive(Clone, Copy, Default)]
pub struct Rule<'a> {
    pub noise: Option<(&'a NoiseFloor, usize)>,
    pub scope: Option<&'a crate::space::Scope>,
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

/// Compares `tuned` with `default` (same class, same tests and sizes), with
/// the tolerance only (no A/A noise, every size in scope).
pub fn compare(default: &ClassMeasure, tuned: &ClassMeasure, obj: &Objective) -> ClassVerdict {
    compare_with(default, tuned, obj, Rule::default())
}

/// Compares `tuned` with `default` under `rule` ([`judge`] at every size).
pub fn compare_with(
    default: &ClassMeasure,
    tuned: &ClassMeasure,
    obj: &Objective,
    rule: Rule,
) -> ClassVerdict {
    let d = summaries(&default.lines);
    let t = summaries(&tuned.lines);
    let mut sizes = Vec::new();
    for (test, size, unit, ds) in &d {
        let Some((_, _, _, ts)) = t.iter().find(|(tt, ss, _, _)| tt == test && ss == size) else {
            continue;
        };
        let noise = rule
            .noise
            .map_or(0.0, |(f, c)| f.bound(c, test.name(), *size));
        let (gain, slowdown_ci, slower) = judge(test.higher_is_better(), ds, ts, noise);
        let in_scope = rule.scope.is_none_or(|s| s.contains(*size));
        sizes.push(SizeCompare {
            slowdown_ci,
            noise,
            in_scope,
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

/// The verification's verdict from the pooled comparison and the
/// alternations (same classes, same order, all judged with [`judge`]): a
/// size is slower when it is slower in the pooled samples, or in at least
/// two alternations (a setting that is slow only some of the time, a
/// bimodal pipeline, is not a safe export). A size slower in one
/// alternation only is not established (one job can run at another speed);
/// its evidence is returned, to be printed.
pub fn established(pooled: &mut [ClassVerdict], runs: &[Vec<ClassVerdict>]) -> Vec<String> {
    let mut once = Vec::new();
    for (ci, v) in pooled.iter_mut().enumerate() {
        for c in v.sizes.iter_mut() {
            let hits: Vec<&SizeCompare> = runs
                .iter()
                .filter_map(|r| {
                    r.get(ci)?
                        .sizes
                        .iter()
                        .find(|x| x.test == c.test && x.size == c.size && x.slower)
                })
                .collect();
            if hits.len() >= 2 {
                c.slower = true;
            } else if !c.slower {
                once.extend(hits.iter().map(|x| evidence(&v.class, x)));
            }
        }
    }
    once
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
            probe_us: None,
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
                slowdown_ci: (1.0, 1.0),
                noise: 0.0,
                in_scope: true,
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
                        slowdown_ci: (1.0 / g, 1.0 / g),
                        noise: 0.0,
                        in_scope: true,
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

    /// Deterministic pseudo-random samples: `n` values around `x` with
    /// multiplicative noise up to `spread` (uniform).
    fn noisy(seed: &mut u64, x: f64, spread: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (*seed >> 11) as f64 / (1u64 << 53) as f64;
                x * (1.0 + spread * (2.0 * u - 1.0))
            })
            .collect()
    }

    /// One job of a noisy machine: every point of a job shares a job-level
    /// speed factor in [1 - drift, 1 + drift], plus sample noise (+-15% on a
    /// noisy machine, +-4% on a quiet one). `speed` < 1 is a slower setting (bw lower, latency higher).
    fn job(seed: &mut u64, points: &[(&str, u64, f64)], drift: f64, speed: f64) -> ClassMeasure {
        let spread = if drift > 0.1 { 0.15 } else { 0.04 };
        let f = noisy(seed, 1.0, drift, 1)[0] * speed;
        cm(points
            .iter()
            .map(|(t, size, x)| {
                let base = if *t == "latency" { x / f } else { x * f };
                line(t, *size, noisy(seed, base, spread, 9))
            })
            .collect())
    }

    const POINTS: [(&str, u64, f64); 6] = [
        ("bw", 1, 0.006),
        ("bw", 1024, 2.0),
        ("bw", 65536, 10.0),
        ("bw", 1 << 20, 13.0),
        ("latency", 1, 0.36),
        ("latency", 4096, 3.0),
    ];

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
    fn a_real_regression_above_the_noise_is_slower_and_a_gain_is_not() {
        // A quiet machine (drift +-3%, sample noise +-4%), A/A floor from
        // three defaults jobs; the candidate is 1.3x slower everywhere.
        let mut seed = 11;
        let d: Vec<ClassMeasure> = (0..3).map(|_| job(&mut seed, &POINTS, 0.03, 1.0)).collect();
        let mut floor = NoiseFloor::default();
        floor.add_pair(&d[..1], &d[1..2]);
        floor.add_pair(&d[1..2], &d[2..3]);
        let rule = Rule {
            noise: Some((&floor, 0)),
            scope: None,
        };
        let slow = job(&mut seed, &POINTS, 0.03, 1.0 / 1.3);
        let v = compare_with(&d[2], &slow, &Objective::default(), rule);
        assert!(v.sizes.iter().all(|c| c.slower), "{:?}", v.sizes);
        for c in &v.sizes {
            assert!(c.slowdown_ci.0 > 1.0 + c.noise.max(TOLERANCE), "{c:?}");
            assert!(c.slowdown_ci.0 <= 1.0 / c.gain && 1.0 / c.gain <= c.slowdown_ci.1);
        }
        assert!(!v.feasible());
        // A 1.5x gain is never slower.
        let fast = job(&mut seed, &POINTS, 0.03, 1.5);
        let v = compare_with(&d[2], &fast, &Objective::default(), rule);
        assert!(v.feasible() && v.sizes.iter().all(|c| !c.slower));
        assert!(v.score > 1.3, "{}", v.score);
        // The same 1.3x regression hidden in A/A noise of +-60% between
        // jobs does not count: it is not established.
        let mut wild = NoiseFloor::default();
        let a = cm(POINTS
            .iter()
            .map(|(t, s, x)| line(t, *s, around(*x, 0.01)))
            .collect());
        let b = cm(POINTS
            .iter()
            .map(|(t, s, x)| line(t, *s, around(x * 1.6, 0.01)))
            .collect());
        wild.add_pair(std::slice::from_ref(&a), std::slice::from_ref(&b));
        assert!((wild.bound(0, "bw", 65536) - 0.6).abs() < 1e-9);
        let reg = cm(POINTS
            .iter()
            .map(|(t, s, x)| {
                let y = if *t == "latency" { x * 1.3 } else { x / 1.3 };
                line(t, *s, around(y, 0.01))
            })
            .collect());
        let quiet = compare(&a, &reg, &Objective::default());
        assert!(!quiet.feasible());
        let noisy_run = compare_with(
            &a,
            &reg,
            &Objective::default(),
            Rule {
                noise: Some((&wild, 0)),
                scope: None,
            },
        );
        assert!(noisy_run.feasible(), "{:?}", noisy_run.sizes);
    }

    #[test]
    fn sizes_out_of_scope_are_judged_but_do_not_veto() {
        let d = cm(vec![
            line("bw", 1024, around(2.0, 0.01)),
            line("bw", 1 << 20, around(10.0, 0.01)),
        ]);
        // 1 KiB 2x slower, 1 MiB 2x faster.
        let t = cm(vec![
            line("bw", 1024, around(1.0, 0.01)),
            line("bw", 1 << 20, around(20.0, 0.01)),
        ]);
        let scope = crate::space::Scope {
            ranges: vec![(4096, u64::MAX)],
        };
        let rule = Rule {
            noise: None,
            scope: Some(&scope),
        };
        let v = compare_with(&d, &t, &Objective::default(), rule);
        assert!(v.feasible());
        let out: Vec<u64> = v.out_of_scope_slower().map(|c| c.size).collect();
        assert_eq!(out, vec![1024]);
        // Without a scope (the final verification) it vetoes.
        assert!(!compare(&d, &t, &Objective::default()).feasible());
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

    #[test]
    fn the_verification_needs_the_pool_or_two_alternations() {
        let mk = |slower: &[bool]| ClassVerdict {
            class: "l3".into(),
            score: 1.0,
            sizes: slower
                .iter()
                .enumerate()
                .map(|(i, &sl)| {
                    let s = Summary::of(&[1.0, 1.0, 1.0]).unwrap();
                    SizeCompare {
                        slowdown_ci: if sl { (1.3, 1.5) } else { (0.9, 1.1) },
                        noise: 0.1,
                        in_scope: true,
                        test: "bw".into(),
                        size: 1 << i,
                        unit: "GB/s".into(),
                        default: s.clone(),
                        tuned: s,
                        gain: 1.0,
                        slower: sl,
                    }
                })
                .collect(),
        };
        // Size 1: slower in one alternation of three -> not established,
        // reported. Size 2: in two -> slower. Size 4: pooled -> slower.
        let mut pooled = vec![mk(&[false, false, true])];
        let runs = vec![
            vec![mk(&[true, true, false])],
            vec![mk(&[false, true, false])],
            vec![mk(&[false, false, false])],
        ];
        let once = established(&mut pooled, &runs);
        let slower: Vec<bool> = pooled[0].sizes.iter().map(|c| c.slower).collect();
        assert_eq!(slower, vec![false, true, true]);
        assert_eq!(once.len(), 1);
        assert!(
            once[0].starts_with("l3 bw 1 x1.00 (slowdown [1.30, 1.50] > 1 + A/A noise 10%)"),
            "{once:?}"
        );
    }
}
