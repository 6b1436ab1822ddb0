//! Verdicts over several jobs: a size slower in every run, or established
//! by the verification's alternations, and the comparisons where every size
//! moved together (a machine event rather than the setting).

use super::{evidence, judged, ClassVerdict, SizeCompare, TOLERANCE};

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

/// The evidence behind the verification's verdicts, to be printed.
#[derive(Clone, Debug, Default)]
pub struct Alternations {
    /// Every size established slower, in order: the pooled interval when
    /// the pooled samples show it, else the intervals of the alternations
    /// that did (the pooled one would not pass the rule).
    pub slower: Vec<String>,
    /// Sizes slower in one alternation only (not established).
    pub once: Vec<String>,
}

/// The verification's verdict from the pooled comparison and the
/// alternations (same classes, same order, all judged with [`judge`](super::judge)): a
/// size is slower when it is slower in the pooled samples, or in at least
/// two alternations (a setting that is slow only some of the time, a
/// bimodal pipeline, is not a safe export). A size slower in one
/// alternation only is not established (one job can run at another speed).
pub fn established(pooled: &mut [ClassVerdict], runs: &[Vec<ClassVerdict>]) -> Alternations {
    let mut out = Alternations::default();
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
            if c.slower {
                out.slower.push(evidence(&v.class, c));
            } else if hits.len() >= 2 {
                c.slower = true;
                let each: Vec<String> = hits.iter().map(|x| judged(x)).collect();
                out.slower.push(format!(
                    "{} {} {} x{:.2} pooled, slower in {} of {} alternations: {}",
                    v.class,
                    c.test,
                    topocomm_measure::p2p::size_label(c.size),
                    c.gain,
                    hits.len(),
                    runs.len(),
                    each.join("; ")
                ));
            } else {
                out.once.extend(hits.iter().map(|x| evidence(&v.class, x)));
            }
        }
    }
    out
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
    use topocomm_measure::Summary;

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
        let alt = established(&mut pooled, &runs);
        let slower: Vec<bool> = pooled[0].sizes.iter().map(|c| c.slower).collect();
        assert_eq!(slower, vec![false, true, true]);
        let once = &alt.once;
        assert_eq!(once.len(), 1);
        assert!(
            once[0].starts_with("l3 bw 1 x1.00 (slowdown [1.30, 1.50] > 1 + A/A noise 10%)"),
            "{once:?}"
        );
        // Size 2 is slower through the alternations alone: its evidence is
        // theirs, not the pooled interval (which does not show it); size 4
        // keeps the pooled one.
        assert_eq!(
            alt.slower,
            vec![
                "l3 bw 2 x1.00 pooled, slower in 2 of 3 alternations: x1.00 (slowdown [1.30, 1.50] > 1 + A/A noise 10%); x1.00 (slowdown [1.30, 1.50] > 1 + A/A noise 10%)".to_string(),
                "l3 bw 4 x1.00 (slowdown [1.30, 1.50] > 1 + A/A noise 10%)".to_string(),
            ]
        );
    }
}
