//! Where the host ran the benchmarked pair during each job of `topocomm
//! bench p2p`, and which jobs the ratios compare.
//!
//! A virtual machine's host moves its vCPUs between near and distant
//! physical cores from second to second; a job meets one placement or the
//! other for most of its life, and the two differ 3-8x in a cache-line
//! round trip and 2-3x in small-message latency for every implementation
//! (2-vCPU AMD EPYC VMs). Ten interleaved jobs per implementation are not
//! enough to give every implementation the same mix: on a Zen 1 VM
//! (2026-12-02) topocomm met the distant placement in 6 of its 10 jobs,
//! Open MPI in 2, and the ratio of medians compared one placement with the
//! other. So each job is classed by cache-line probes just before and just
//! after it (as `bench coll` does, [`crate::coll_summary::placement`]) and,
//! besides the tables over all jobs, the run has tables over the near jobs
//! and over the distant ones, each when every implementation has at least
//! [`MIN_NEAR`] jobs in that placement: a comparison within one placement,
//! where an implementation that loses in one of them shows it (on that Zen
//! 1 VM topocomm led in the near placement and lost at some sizes in the
//! distant one, which the mixed medians hid).

use crate::coll_summary::{far_cut, MIN_NEAR};
use serde::Serialize;
use std::collections::BTreeMap;

/// One run of a (pair, cache) schedule as the placement sees it.
#[derive(Clone, Debug)]
pub struct RunProbes<'a> {
    /// The backend's name (`topocomm`, `openmpi`, `mpich`, `limit`).
    pub backend: &'a str,
    /// A round of the limits (between jobs), not a job.
    pub is_limit: bool,
    /// It measured something.
    pub ok: bool,
    /// A job's probes (before and after); a limit round's, the probe next
    /// to it (before the following job, or after the last one).
    pub probes_us: &'a [f64],
}

/// The placement of one (pair, cache) mode's jobs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct P2pPlacement {
    /// `P,Q`.
    pub pair: String,
    /// `hot` or `cold`.
    pub cache: String,
    /// Probes above this (us) read distant ([`far_cut`]).
    pub cut_us: f64,
    /// Jobs that ran near (every probe at or under the cut), per backend.
    pub near: BTreeMap<String, usize>,
    /// Jobs with a probe above the cut, per backend.
    pub distant: BTreeMap<String, usize>,
    /// Placements with tables of their own: `near`, `distant` (some jobs
    /// ran in the other, and every implementation has [`MIN_NEAR`] here).
    pub tables: Vec<String>,
}

impl P2pPlacement {
    /// One line, as the tables say it.
    pub fn line(&self) -> String {
        let list = |m: &BTreeMap<String, usize>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let head = format!(
            "placement of PUs {} ({} cache): cache-line probe before and after each job; \
             near (every probe <= {:.3} us): {}; distant: {}",
            self.pair,
            self.cache,
            self.cut_us,
            list(&self.near),
            list(&self.distant)
        );
        let distant: usize = self.distant.values().sum();
        let near: usize = self.near.values().sum();
        if distant == 0 || near == 0 {
            format!("{head}: one placement throughout")
        } else if self.tables.is_empty() {
            format!(
                "{head}: mixed; fewer than {MIN_NEAR} jobs of some implementation in each \
                 placement, no tables per placement"
            )
        } else {
            format!(
                "{head}: mixed; tables over the {} jobs alone further down",
                self.tables.join(" and the ")
            )
        }
    }
}

/// Which runs a table over one placement keeps: the jobs of that
/// placement, and the limit rounds next to it (all of them when none was).
pub fn keep(states: &[Option<bool>], limits: &[bool], near: bool) -> Vec<bool> {
    let any_limit = states
        .iter()
        .zip(limits)
        .any(|(s, l)| *l && *s == Some(near));
    states
        .iter()
        .zip(limits)
        .map(|(s, l)| *s == Some(near) || (*l && !any_limit))
        .collect()
}

/// Classes the runs of one (pair, cache) mode: the placement, and each
/// run's (`Some(true)` near, `Some(false)` distant, `None` without probes
/// or failed). `None` without probes (nothing to class).
pub fn classify(
    pair: &str,
    cache: &str,
    runs: &[RunProbes],
) -> Option<(P2pPlacement, Vec<Option<bool>>)> {
    let mut all: Vec<f64> = runs
        .iter()
        .filter(|r| !r.is_limit)
        .flat_map(|r| r.probes_us.iter().copied())
        .collect();
    let cut_us = far_cut(&mut all)?;
    let near = |r: &RunProbes| r.probes_us.iter().all(|&v| v <= cut_us);
    let (mut near_jobs, mut distant_jobs) = (BTreeMap::new(), BTreeMap::new());
    for r in runs.iter().filter(|r| !r.is_limit && r.ok) {
        near_jobs.entry(r.backend.to_string()).or_insert(0);
        distant_jobs.entry(r.backend.to_string()).or_insert(0);
        if r.probes_us.is_empty() {
            continue;
        }
        let m = if near(r) {
            &mut near_jobs
        } else {
            &mut distant_jobs
        };
        *m.entry(r.backend.to_string()).or_insert(0) += 1;
    }
    let mixed = distant_jobs.values().any(|&d| d > 0) && near_jobs.values().any(|&n| n > 0);
    let enough = |m: &BTreeMap<String, usize>| m.values().all(|&n| n >= MIN_NEAR);
    let mut tables = Vec::new();
    if mixed && enough(&near_jobs) {
        tables.push("near".to_string());
    }
    if mixed && enough(&distant_jobs) {
        tables.push("distant".to_string());
    }
    let states = runs
        .iter()
        .map(|r| (r.ok && !r.probes_us.is_empty()).then(|| near(r)))
        .collect();
    Some((
        P2pPlacement {
            pair: pair.into(),
            cache: cache.into(),
            cut_us,
            near: near_jobs,
            distant: distant_jobs,
            tables,
        },
        states,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job<'a>(backend: &'a str, probes_us: &'a [f64]) -> RunProbes<'a> {
        RunProbes {
            backend,
            is_limit: false,
            ok: true,
            probes_us,
        }
    }

    fn limit(probes_us: &[f64]) -> RunProbes<'_> {
        RunProbes {
            backend: "limit",
            is_limit: true,
            ok: true,
            probes_us,
        }
    }

    fn kept(states: &[Option<bool>], runs: &[RunProbes], near: bool) -> Vec<usize> {
        let limits: Vec<bool> = runs.iter().map(|r| r.is_limit).collect();
        keep(states, &limits, near)
            .iter()
            .enumerate()
            .filter(|(_, k)| **k)
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn each_placement_has_tables_when_every_implementation_has_three_there() {
        let (n, f) = ([0.05, 0.05], [0.05, 0.3]);
        let mut runs = vec![
            limit(&[0.05]),
            job("topocomm", &f),
            limit(&[0.3]),
            job("openmpi", &n),
            limit(&[0.05]),
            job("topocomm", &n),
            job("openmpi", &n),
            job("topocomm", &n),
            job("openmpi", &f),
            job("topocomm", &n),
            job("openmpi", &n),
        ];
        let (p, states) = classify("0,1", "hot", &runs).unwrap();
        assert_eq!(
            p.tables,
            vec!["near"],
            "one distant job each: no distant tables"
        );
        assert_eq!((p.near["topocomm"], p.distant["topocomm"]), (3, 1));
        assert_eq!((p.near["openmpi"], p.distant["openmpi"]), (3, 1));
        assert!((p.cut_us - 0.1).abs() < 1e-12, "{}", p.cut_us);
        assert_eq!(
            kept(&states, &runs, true),
            vec![0, 3, 4, 5, 6, 7, 9, 10],
            "the distant jobs and the distant limit round go"
        );
        assert_eq!(kept(&states, &runs, false), vec![1, 2, 8]);
        assert!(
            p.line().contains("tables over the near jobs alone"),
            "{}",
            p.line()
        );
        // Three distant jobs each: both placements get tables.
        for _ in 0..2 {
            runs.push(job("topocomm", &f));
            runs.push(job("openmpi", &f));
        }
        let (p, _) = classify("0,1", "hot", &runs).unwrap();
        assert_eq!(p.tables, vec!["near", "distant"]);
        assert!(
            p.line().contains("near and the distant jobs"),
            "{}",
            p.line()
        );
    }

    #[test]
    fn too_few_jobs_in_a_placement_or_one_placement_make_no_tables() {
        let (n, f) = ([0.05, 0.05], [0.3, 0.3]);
        // openmpi has two near jobs and one distant only.
        let runs = vec![
            job("topocomm", &n),
            job("topocomm", &n),
            job("topocomm", &n),
            job("openmpi", &n),
            job("openmpi", &n),
            job("openmpi", &f),
        ];
        let (p, _) = classify("0,1", "hot", &runs).unwrap();
        assert!(p.tables.is_empty());
        assert!(p.line().contains("no tables per placement"), "{}", p.line());
        // Every job near.
        let runs = vec![job("topocomm", &n), job("openmpi", &n)];
        let (p, states) = classify("0,1", "hot", &runs).unwrap();
        assert!(p.tables.is_empty() && states.iter().all(|s| *s == Some(true)));
        assert!(
            p.line().ends_with("one placement throughout"),
            "{}",
            p.line()
        );
        // No probes at all (one PU, or a probe that could not run).
        assert!(classify("0,1", "hot", &[job("topocomm", &[])]).is_none());
    }

    #[test]
    fn a_failed_job_counts_nowhere_and_limits_stay_when_none_was_near() {
        let (n, f) = ([0.05, 0.05], [0.05, 0.4]);
        let mut failed = job("openmpi", &f);
        failed.ok = false;
        let mut runs = vec![limit(&[0.4])];
        for _ in 0..3 {
            runs.push(job("topocomm", &n));
            runs.push(job("openmpi", &n));
        }
        runs.push(job("topocomm", &f));
        runs.push(failed);
        let (p, states) = classify("0,1", "hot", &runs).unwrap();
        assert_eq!(p.tables, vec!["near"]);
        assert_eq!((p.distant["topocomm"], p.distant["openmpi"]), (1, 0));
        assert_eq!((states[7], states[8]), (Some(false), None));
        let k = kept(&states, &runs, true);
        assert_eq!(k[0], 0, "the only limit round is kept");
        assert!(!k.contains(&7) && !k.contains(&8));
    }
}
