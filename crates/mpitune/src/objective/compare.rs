//! One setting against the defaults: [`judge`] at each (test, size), the
//! class's verdict and score over the objective's sizes, and the classes
//! combined by weight.

use super::{ClassMeasure, ClassVerdict, NoiseFloor, Objective, SizeCompare, TOLERANCE};
use topocomm_measure::p2p::Test;
use topocomm_measure::{SampleLine, Summary};

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

/// The evidence for one slower size, as printed: `l3 bw 64K x0.80
/// (slowdown [1.15, 1.40] > 1 + A/A noise 8%)`.
pub fn evidence(class: &str, c: &SizeCompare) -> String {
    format!(
        "{class} {} {} {}",
        c.test,
        topocomm_measure::p2p::size_label(c.size),
        judged(c)
    )
}

/// The gain and the interval that judged it: `x0.80 (slowdown [1.15,
/// 1.40] > 1 + A/A noise 8%)`.
pub fn judged(c: &SizeCompare) -> String {
    format!(
        "x{:.2} (slowdown [{:.2}, {:.2}] > 1 + {} {:.0}%)",
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

pub(super) fn summaries(lines: &[SampleLine]) -> Vec<(Test, u64, &str, Summary)> {
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

#[cfg(test)]
mod tests {
    use super::super::testdata::{around, cm, job, line, POINTS};
    use super::*;

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
}
