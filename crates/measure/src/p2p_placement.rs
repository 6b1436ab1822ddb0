//! Where the host ran the benchmarked pair during each sample of `topocomm
//! bench p2p`, and which samples the tables per placement compare.
//!
//! A virtual machine's host moves its vCPUs between near and distant
//! physical cores, and the two differ 3-8x in a cache-line round trip and
//! 2-3x in small-message latency for every implementation (2-vCPU AMD EPYC
//! VMs). The host moves them when they idle: while both spin (a job's
//! samples) the placement holds, and a job's start or end, which idles,
//! may change it. So a cache-line probe taken by `bench p2p` itself just
//! before and after a job cannot tell where the job ran (on a Zen 5 VM,
//! 2026-12-02, the probes after the jobs read distant for 8 of topocomm's
//! 10 jobs whose own 8-byte latency was the near one throughout). Each
//! sample of a job is therefore followed by a probe through the
//! implementation itself (the workers' `--probe N`: N 8-byte ping-pongs,
//! their one-way time), and classed by it: distant above [`far_cut`] of the
//! implementation's own probes (2x their 10th percentile, the near time of
//! that implementation). A limit round runs in this process; it is classed
//! by the cache-line probe just before it, against the cut of those probes.
//!
//! Besides the tables over all samples, a run has tables over the near
//! samples and over the distant ones, each when every implementation ran at
//! least [`MIN_SHARE`] of its samples there: a comparison within one
//! placement, where an implementation that loses in one of them shows it
//! (on a Zen 1 VM topocomm led in the near placement and lost at some sizes
//! in the distant one, which the mixed medians hid). An implementation
//! that ran distant throughout has no near probes to set its cut, so its
//! samples all read near: the tables then compare within one placement as
//! far as it is concerned, which is what they are for.

use crate::coll_summary::far_cut;
use crate::record::SampleLine;
use serde::Serialize;
use std::collections::BTreeMap;

/// The least share of an implementation's samples a placement must hold
/// for that placement to have tables.
pub const MIN_SHARE: f64 = 0.1;

/// One run of a (pair, cache) schedule as the placement sees it.
#[derive(Clone, Debug)]
pub struct RunSamples<'a> {
    /// The backend's name (`topocomm`, `openmpi`, `mpich`, `limit`).
    pub backend: &'a str,
    /// A round of the limits (between jobs), not a job.
    pub is_limit: bool,
    /// It measured something.
    pub ok: bool,
    /// A limit round: the cache-line probe (one-way us) just before it.
    pub limit_probe_us: Option<f64>,
    /// A job's sample lines, each with the probe after every sample.
    pub lines: &'a [SampleLine],
}

/// How the samples of one run are classed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Classed {
    /// A job's samples, each by the probe after it: distant above this
    /// cut (us).
    Samples(f64),
    /// A limit round as a whole: near (`true`) or distant.
    Round(bool),
}

/// The placement of one (pair, cache) mode's samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct P2pPlacement {
    /// `P,Q`.
    pub pair: String,
    /// `hot` or `cold`.
    pub cache: String,
    /// Per implementation (and `limit`, for its rounds' probes): probes
    /// above this (us) read distant ([`far_cut`]).
    pub cut_us: BTreeMap<String, f64>,
    /// Samples that ran near, per implementation (limit: rounds).
    pub near: BTreeMap<String, usize>,
    /// Samples that ran distant, per implementation (limit: rounds).
    pub distant: BTreeMap<String, usize>,
    /// Placements with tables of their own: `near`, `distant` (some samples
    /// ran in the other, and every implementation ran at least
    /// [`MIN_SHARE`] of its samples here).
    pub tables: Vec<String>,
}

impl P2pPlacement {
    /// One line, as the tables say it.
    pub fn line(&self) -> String {
        let jobs = |m: &BTreeMap<String, usize>| -> String {
            m.iter()
                .filter(|(k, _)| *k != "limit")
                .map(|(k, v)| {
                    let all = v + self.distant.get(k).copied().unwrap_or(0);
                    format!("{k} {v} of {all}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let cuts = self
            .cut_us
            .iter()
            .filter(|(k, _)| *k != "limit")
            .map(|(k, v)| format!("{k} {v:.3}"))
            .collect::<Vec<_>>()
            .join(", ");
        let head = format!(
            "placement of PUs {} ({} cache): each sample classed by the 8-byte ping-pongs \
             its implementation ran right after it (distant above 2x its 10th percentile, \
             us: {cuts}); samples near: {}",
            self.pair,
            self.cache,
            jobs(&self.near)
        );
        let distant: usize = self.sum(&self.distant);
        let near: usize = self.sum(&self.near);
        if distant == 0 || near == 0 {
            format!("{head}: one placement throughout")
        } else if self.tables.is_empty() {
            format!(
                "{head}: no tables per placement (each needs {:.0}% of every \
                 implementation's samples, and some implementation that many in the other)",
                MIN_SHARE * 100.0
            )
        } else {
            format!(
                "{head}: mixed; tables over the {} samples alone further down",
                self.tables.join(" and the ")
            )
        }
    }

    /// Samples of the implementations (not the limit rounds) in `m`.
    fn sum(&self, m: &BTreeMap<String, usize>) -> usize {
        m.iter()
            .filter(|(k, _)| *k != "limit")
            .map(|(_, v)| v)
            .sum()
    }
}

/// The probes of a job's lines, one per sample of every line; `None` when a
/// line has none or not one per sample (a worker without `--probe`).
fn probes_of(lines: &[SampleLine]) -> Option<Vec<f64>> {
    let mut out = Vec::new();
    for l in lines {
        let p = l.probe_us.as_ref()?;
        if p.len() != l.samples.len() {
            return None;
        }
        out.extend(p.iter().copied());
    }
    (!out.is_empty()).then_some(out)
}

/// `lines` with only the samples that ran near (`near`) or distant by
/// their probes against `cut_us`; a line left without samples goes.
pub fn placed_lines(lines: &[SampleLine], cut_us: f64, near: bool) -> Vec<SampleLine> {
    lines
        .iter()
        .filter_map(|l| {
            let probes = l.probe_us.as_ref()?;
            let samples: Vec<f64> = l
                .samples
                .iter()
                .zip(probes)
                .filter(|(_, &p)| (p <= cut_us) == near)
                .map(|(&s, _)| s)
                .collect();
            let kept: Vec<f64> = probes
                .iter()
                .copied()
                .filter(|&p| (p <= cut_us) == near)
                .collect();
            (!samples.is_empty()).then(|| SampleLine {
                samples,
                probe_us: Some(kept),
                ..l.clone()
            })
        })
        .collect()
}

/// The cuts of the limits' own samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LimitCuts {
    /// Per size, of the latency samples (a cache-line ping-pong's one-way
    /// time, which is itself the placement): [`far_cut`] of all the limit
    /// rounds' samples at that size.
    pub latency: BTreeMap<u64, f64>,
    /// Of the probes after the copy samples (`probe_us` of the limits' bw
    /// lines): [`far_cut`] of all of them.
    pub copy: Option<f64>,
}

/// [`LimitCuts`] of the limit rounds among `runs`.
pub fn limit_cuts(runs: &[RunSamples]) -> LimitCuts {
    let mut by_size: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    let mut copy = Vec::new();
    for r in runs.iter().filter(|r| r.is_limit && r.ok) {
        for l in r.lines {
            if l.test == "latency" {
                by_size
                    .entry(l.size)
                    .or_default()
                    .extend(l.samples.iter().copied());
            } else if let Some(p) = &l.probe_us {
                copy.extend(p.iter().copied());
            }
        }
    }
    LimitCuts {
        latency: by_size
            .into_iter()
            .filter_map(|(size, mut v)| far_cut(&mut v).map(|c| (size, c)))
            .collect(),
        copy: far_cut(&mut copy),
    }
}

/// A limit round's lines in a table over one placement: its latency
/// samples by their own value against their size's cut, its copy samples
/// by the probe after each against the copy cut, and a line with neither
/// (no cut, or no probes) whole when the round is kept (`keep`, from
/// [`keep_limits`]).
pub fn placed_limit_lines(
    lines: &[SampleLine],
    cuts: &LimitCuts,
    keep: bool,
    near: bool,
) -> Vec<SampleLine> {
    lines
        .iter()
        .filter_map(|l| {
            if let Some(&cut) = cuts.latency.get(&l.size).filter(|_| l.test == "latency") {
                let samples: Vec<f64> = l
                    .samples
                    .iter()
                    .copied()
                    .filter(|&v| (v <= cut) == near)
                    .collect();
                return (!samples.is_empty()).then(|| SampleLine {
                    samples,
                    ..l.clone()
                });
            }
            match (cuts.copy, &l.probe_us) {
                (Some(cut), Some(p)) if p.len() == l.samples.len() && l.test != "latency" => {
                    placed_lines(std::slice::from_ref(l), cut, near).pop()
                }
                _ => keep.then(|| l.clone()),
            }
        })
        .collect()
}

/// Which limit rounds (`is_limit`) a table over one placement keeps: those
/// of that placement, or all of them when none was (or none could be
/// classed).
pub fn keep_limits(classes: &[Option<Classed>], is_limit: &[bool], near: bool) -> Vec<bool> {
    let any = classes.contains(&Some(Classed::Round(near)));
    classes
        .iter()
        .zip(is_limit)
        .map(|(c, &l)| l && (!any || *c == Some(Classed::Round(near))))
        .collect()
}

/// Classes the runs of one (pair, cache) mode: the placement, and each
/// run's class (`None`: failed, or no probes to class it by). `None`
/// when no job has probes (one PU, or workers run without `--probe`).
pub fn classify(
    pair: &str,
    cache: &str,
    runs: &[RunSamples],
) -> Option<(P2pPlacement, Vec<Option<Classed>>)> {
    let probes: Vec<Option<Vec<f64>>> = runs
        .iter()
        .map(|r| (r.ok && !r.is_limit).then(|| probes_of(r.lines)).flatten())
        .collect();
    if probes.iter().all(Option::is_none) {
        return None;
    }
    let mut cut_us = BTreeMap::new();
    for r in runs.iter().filter(|r| r.ok) {
        if cut_us.contains_key(r.backend) {
            continue;
        }
        let mut all: Vec<f64> = if r.is_limit {
            runs.iter()
                .filter(|x| x.is_limit && x.ok)
                .filter_map(|x| x.limit_probe_us)
                .collect()
        } else {
            runs.iter()
                .zip(&probes)
                .filter(|(x, _)| x.backend == r.backend)
                .flat_map(|(_, p)| p.iter().flatten().copied())
                .collect()
        };
        if let Some(cut) = far_cut(&mut all) {
            cut_us.insert(r.backend.to_string(), cut);
        }
    }
    let (mut near, mut distant) = (BTreeMap::new(), BTreeMap::new());
    let mut classes = Vec::with_capacity(runs.len());
    for (r, p) in runs.iter().zip(&probes) {
        let Some(&cut) = cut_us.get(r.backend) else {
            classes.push(None);
            continue;
        };
        let class = if r.is_limit {
            r.limit_probe_us.map(|v| Classed::Round(v <= cut))
        } else {
            p.as_ref().map(|_| Classed::Samples(cut))
        };
        let (n, d) = match (class, p) {
            (Some(Classed::Round(is_near)), _) => (usize::from(is_near), usize::from(!is_near)),
            (Some(Classed::Samples(_)), Some(p)) => {
                let n = p.iter().filter(|&&v| v <= cut).count();
                (n, p.len() - n)
            }
            _ => (0, 0),
        };
        *near.entry(r.backend.to_string()).or_insert(0) += n;
        *distant.entry(r.backend.to_string()).or_insert(0) += d;
        classes.push(class);
    }
    let implementations: Vec<&String> = near.keys().filter(|k| *k != "limit").collect();
    let share = |m: &BTreeMap<String, usize>, k: &String| {
        let all = near[k] + distant[k];
        if all == 0 {
            0.0
        } else {
            m[k] as f64 / all as f64
        }
    };
    // Tables per placement only where they separate something: some
    // implementation ran at least MIN_SHARE of its samples in each.
    let some = |m: &BTreeMap<String, usize>| {
        implementations
            .iter()
            .any(|k| share(m, k) >= MIN_SHARE && m[*k] > 0)
    };
    let mixed = some(&near) && some(&distant);
    let enough = |m: &BTreeMap<String, usize>| {
        implementations
            .iter()
            .all(|k| share(m, k) >= MIN_SHARE && m[*k] > 0)
    };
    let mut tables = Vec::new();
    if mixed && enough(&near) {
        tables.push("near".to_string());
    }
    if mixed && enough(&distant) {
        tables.push("distant".to_string());
    }
    Some((
        P2pPlacement {
            pair: pair.into(),
            cache: cache.into(),
            cut_us,
            near,
            distant,
            tables,
        },
        classes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A latency line of `samples` with `probes` after them.
    fn line(samples: &[f64], probes: Option<&[f64]>) -> SampleLine {
        SampleLine {
            implementation: "x".into(),
            test: "latency".into(),
            size: 8,
            cache: "hot".into(),
            unit: "us".into(),
            samples: samples.to_vec(),
            probe_us: probes.map(<[f64]>::to_vec),
        }
    }

    fn job<'a>(backend: &'a str, lines: &'a [SampleLine]) -> RunSamples<'a> {
        RunSamples {
            backend,
            is_limit: false,
            ok: true,
            limit_probe_us: None,
            lines,
        }
    }

    fn limit(probe: f64) -> RunSamples<'static> {
        RunSamples {
            backend: "limit",
            is_limit: true,
            ok: true,
            limit_probe_us: Some(probe),
            lines: &[],
        }
    }

    #[test]
    fn samples_are_classed_by_their_own_probe_against_their_implementation() {
        // topocomm near at 0.07 us, distant at 0.2; openmpi near at 0.13,
        // distant at 0.3: one cut would class openmpi's near as distant.
        let t = [
            line(&[1.0, 1.0, 1.0, 1.0], Some(&[0.07, 0.07, 0.07, 0.07])),
            line(&[2.0, 2.0, 1.0, 1.0], Some(&[0.2, 0.21, 0.07, 0.07])),
        ];
        let o = [
            line(&[3.0, 3.0, 3.0, 3.0], Some(&[0.13, 0.13, 0.13, 0.13])),
            line(&[6.0, 6.0, 3.0, 3.0], Some(&[0.3, 0.31, 0.13, 0.13])),
        ];
        let runs = vec![
            limit(0.04),
            job("topocomm", &t),
            limit(0.2),
            job("openmpi", &o),
            limit(0.04),
        ];
        let (p, classes) = classify("0,1", "hot", &runs).unwrap();
        assert!(
            (p.cut_us["topocomm"] - 0.14).abs() < 1e-12,
            "{:?}",
            p.cut_us
        );
        assert!((p.cut_us["openmpi"] - 0.26).abs() < 1e-12, "{:?}", p.cut_us);
        assert_eq!((p.near["topocomm"], p.distant["topocomm"]), (6, 2));
        assert_eq!((p.near["openmpi"], p.distant["openmpi"]), (6, 2));
        assert_eq!((p.near["limit"], p.distant["limit"]), (2, 1));
        assert_eq!(p.tables, vec!["near", "distant"]);
        assert!(p.line().contains("topocomm 6 of 8"), "{}", p.line());
        assert!(
            p.line().contains("near and the distant samples"),
            "{}",
            p.line()
        );
        assert_eq!(classes[1], Some(Classed::Samples(p.cut_us["topocomm"])));
        // The limit's latency samples are classed by their own value, its
        // copy samples by the probe after each, a line with neither by its
        // round.
        let lim = [
            SampleLine {
                implementation: "limit".into(),
                ..line(&[0.04, 0.05, 0.2], None)
            },
            SampleLine {
                test: "bw".into(),
                ..line(&[30.0, 10.0], Some(&[0.04, 0.3]))
            },
            SampleLine {
                test: "bw".into(),
                size: 64,
                ..line(&[40.0], None)
            },
        ];
        let rounds = [RunSamples {
            lines: &lim,
            ..limit(0.04)
        }];
        let cuts = limit_cuts(&rounds);
        assert_eq!(cuts.latency.len(), 1);
        assert!((cuts.latency[&8] - 0.08).abs() < 1e-12, "{cuts:?}");
        assert!((cuts.copy.unwrap() - 0.08).abs() < 1e-12, "{cuts:?}");
        let far = placed_limit_lines(&lim, &cuts, false, false);
        assert_eq!(far.len(), 2, "the unprobed bw line goes with its round");
        assert_eq!(
            (far[0].samples.clone(), far[1].samples.clone()),
            (vec![0.2], vec![10.0])
        );
        let near = placed_limit_lines(&lim, &cuts, true, true);
        assert_eq!(near[0].samples, vec![0.04, 0.05]);
        assert_eq!(near[1].samples, vec![30.0]);
        assert_eq!(near[2].samples, vec![40.0]);
        assert_eq!(classes[2], Some(Classed::Round(false)));
        // The distant samples of the second line alone, with their probes.
        let far = placed_lines(&t, p.cut_us["topocomm"], false);
        assert_eq!(far.len(), 1, "the first line ran near throughout");
        assert_eq!(far[0].samples, vec![2.0, 2.0]);
        assert_eq!(far[0].probe_us.as_deref(), Some(&[0.2, 0.21][..]));
        let near = placed_lines(&t, p.cut_us["topocomm"], true);
        assert_eq!(near.iter().map(|l| l.samples.len()).sum::<usize>(), 6);
        let is_limit = [true, false, true, false, true];
        assert_eq!(
            keep_limits(&classes, &is_limit, true),
            vec![true, false, false, false, true]
        );
        assert_eq!(
            keep_limits(&classes, &is_limit, false),
            vec![false, false, true, false, false]
        );
    }

    #[test]
    fn a_placement_under_the_least_share_or_one_placement_has_no_tables() {
        // openmpi ran 1 of its 20 samples distant: 5% < MIN_SHARE.
        let probes_t: Vec<f64> = (0..20).map(|i| if i < 10 { 0.07 } else { 0.2 }).collect();
        let probes_o: Vec<f64> = (0..20).map(|i| if i == 0 { 0.3 } else { 0.13 }).collect();
        let t = [line(&[1.0; 20], Some(&probes_t))];
        let o = [line(&[3.0; 20], Some(&probes_o))];
        let runs = vec![job("topocomm", &t), job("openmpi", &o)];
        let (p, _) = classify("0,1", "hot", &runs).unwrap();
        assert_eq!(p.tables, vec!["near"]);
        // Nobody ran 10% of its samples distant: no tables at all.
        let probes_t: Vec<f64> = (0..20).map(|i| if i == 0 { 0.2 } else { 0.07 }).collect();
        let t = [line(&[1.0; 20], Some(&probes_t))];
        let runs = vec![job("topocomm", &t), job("openmpi", &o)];
        let (p, _) = classify("0,1", "hot", &runs).unwrap();
        assert!(p.tables.is_empty(), "{:?}", p.tables);
        assert!(p.line().contains("no tables per placement"), "{}", p.line());
        // Every sample near.
        let n = [line(&[1.0; 4], Some(&[0.07; 4]))];
        let (p, classes) = classify("0,1", "hot", &[job("topocomm", &n)]).unwrap();
        assert!(p.tables.is_empty() && classes == vec![Some(Classed::Samples(0.14))]);
        assert!(
            p.line().ends_with("one placement throughout"),
            "{}",
            p.line()
        );
        // No probes at all (one PU, or a worker without --probe), or not
        // one per sample.
        let none = [line(&[1.0; 4], None)];
        assert!(classify("0,1", "hot", &[job("topocomm", &none)]).is_none());
        let short = [line(&[1.0; 4], Some(&[0.07; 3]))];
        assert!(classify("0,1", "hot", &[job("topocomm", &short)]).is_none());
    }

    #[test]
    fn a_failed_job_counts_nowhere_and_limits_stay_when_none_was_in_the_placement() {
        let probes: Vec<f64> = (0..10).map(|i| if i < 5 { 0.07 } else { 0.2 }).collect();
        let t = [line(&[1.0; 10], Some(&probes))];
        let mut failed = job("topocomm", &t);
        failed.ok = false;
        let runs = vec![limit(0.04), limit(0.05), job("topocomm", &t), failed];
        let (p, classes) = classify("0,1", "hot", &runs).unwrap();
        assert_eq!((p.near["topocomm"], p.distant["topocomm"]), (5, 5));
        assert_eq!(classes[3], None);
        assert_eq!(
            keep_limits(&classes, &[true, true, false, false], false),
            vec![true, true, false, false],
            "no distant limit round: the distant tables keep them all"
        );
    }
}
