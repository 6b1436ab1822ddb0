//! `topocomm bench placement` without its command line: the plan (worker
//! counts, workload, mappings), the run over [`crate::placement::run_mapping`]
//! with every CG solve verified, the result file ([`PlacementReport`],
//! docs/formats/bench-placement-json.md) and its tables.

use crate::charact::{fmt_ci, num, parse_size};
use crate::meta::RunMeta;
use crate::placement::{self, Mapping, PlacementRun, Workload};
use crate::timer::TimerInfo;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use topocomm_topo::{Machine, PuSet};

/// The schema of [`PlacementReport`].
pub const SCHEMA: &str = "topocomm.bench-placement/1";

/// Residual and error bounds a run must meet to count as verified.
pub const MAX_REL_RESIDUAL: f64 = 1e-6;
/// See [`MAX_REL_RESIDUAL`].
pub const MAX_ERROR: f64 = 1e-4;

/// The options of a run, as given (`None`: the default, or the `quick` one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlacementOptions {
    /// Worker counts, comma-separated.
    pub workers: Option<String>,
    /// Grid points per worker along each axis.
    pub grid: Option<usize>,
    /// Triad elements per worker and array (a size, `4M`).
    pub triad_len: Option<String>,
    /// Samples per (k, mapping).
    pub samples: Option<usize>,
    /// Most CG iterations.
    pub max_iter: usize,
    /// Relative residual at which CG stops.
    pub tolerance: f64,
    /// Fast, coarse run.
    pub quick: bool,
}

/// What a run will measure, resolved from its options and the machine.
#[derive(Clone, Debug)]
pub struct PlacementPlan {
    /// The worker counts k, as given.
    pub ks: Vec<usize>,
    pub workload: Workload,
    /// Every mapping of every k, in order.
    pub mappings: Vec<Mapping>,
    pub quick: bool,
}

/// Best and worst mapping for one k, by median CG rate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KSummary {
    pub workers: usize,
    pub best: String,
    pub worst: String,
    /// best median MFLOPS / worst median MFLOPS.
    pub cg_best_over_worst: f64,
    pub triad_best_over_worst: f64,
}

/// The JSON file (docs/formats/bench-placement-json.md).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlacementReport {
    pub schema: String,
    pub meta: RunMeta,
    pub quick: bool,
    pub workload: Workload,
    pub runs: Vec<PlacementRun>,
    pub per_k: Vec<KSummary>,
}

/// Resolves the options against the machine model; every bad value is a
/// one-line error naming the option.
pub fn plan(m: &Machine, a: &PlacementOptions) -> Result<PlacementPlan> {
    let n = m.pus.len();
    let ks: Vec<usize> = match &a.workers {
        Some(t) => t
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                s.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|k| (1..=n).contains(k))
                    .ok_or_else(|| Error::WorkerArg {
                        text: s.into(),
                        pus: n,
                    })
            })
            .collect::<Result<_>>()?,
        None if a.quick => {
            let mut v = vec![1, n];
            v.dedup();
            v
        }
        None => (1..=n).collect(),
    };
    if ks.is_empty() {
        return Err(Error::EmptyArgList { arg: "--workers" });
    }
    let triad_len = match &a.triad_len {
        Some(t) => parse_size(t).map_err(|e| Error::Arg {
            arg: "--triad-len",
            cause: Box::new(e),
        })? as usize,
        None if a.quick => 1 << 18,
        None => 1 << 22,
    };
    // Three arrays of f64 per worker: 1.5 GiB each at the bound.
    if triad_len > 1 << 26 {
        return Err(Error::ArgTooLarge {
            arg: "--triad-len",
            value: triad_len as u64,
            max: "64M elements",
        });
    }
    let workload = Workload {
        grid: a.grid.unwrap_or(if a.quick { 12 } else { 48 }),
        max_iter: a.max_iter,
        tolerance: a.tolerance,
        triad_len,
        triad_reps: if a.quick { 3 } else { 10 },
        samples: a.samples.unwrap_or(if a.quick { 2 } else { 5 }),
    };
    let wl = &workload;
    // grid^3 points per worker, about 330 bytes each: 2.6 GB at the bound.
    for (arg, value, max, shown) in [
        ("--grid", wl.grid, 200, "200"),
        ("--samples", wl.samples, 1000, "1000"),
        ("--max-iter", wl.max_iter, 10_000_000, "10000000"),
    ] {
        if value > max {
            return Err(Error::ArgTooLarge {
                arg,
                value: value as u64,
                max: shown,
            });
        }
    }
    let tolerance_ok = wl.tolerance > 0.0 && wl.tolerance < 1.0;
    if wl.grid < 2 || wl.samples == 0 || wl.max_iter == 0 || !tolerance_ok {
        return Err(Error::PlacementArgs);
    }
    let mut mappings = Vec::new();
    for &k in &ks {
        mappings.extend(placement::mappings(m, k).map_err(|e| Error::Arg {
            arg: "--workers",
            cause: Box::new(e),
        })?);
    }
    Ok(PlacementPlan {
        ks,
        workload,
        mappings,
        quick: a.quick,
    })
}

/// Runs every mapping of the plan on the live machine (checked by the
/// caller) and verifies every CG solve; `timer` is the timer check to
/// record, `progress(done)` is called after each mapping.
pub fn measure(
    m: &Machine,
    plan: &PlacementPlan,
    timer: TimerInfo,
    progress: &mut dyn FnMut(usize),
) -> Result<PlacementReport> {
    let mut runs = Vec::new();
    for (i, mp) in plan.mappings.iter().enumerate() {
        let r = placement::run_mapping(mp, &plan.workload).map_err(|e| Error::Bench {
            bench: "bench placement",
            cause: Box::new(e),
        })?;
        // NaN fails too.
        let converged = r.cg_relative_residual < MAX_REL_RESIDUAL && r.cg_max_error < MAX_ERROR;
        if !converged {
            return Err(Error::NotConverged {
                workers: r.workers,
                pus: mp.pus.clone(),
                residual: r.cg_relative_residual,
                error: r.cg_max_error,
                iterations: r.cg_iterations,
            });
        }
        runs.push(r);
        progress(i + 1);
    }
    let per_k = plan.ks.iter().map(|&k| k_summary(&runs, k)).collect();
    Ok(PlacementReport {
        schema: SCHEMA.into(),
        meta: RunMeta::new(m, timer),
        quick: plan.quick,
        workload: plan.workload.clone(),
        runs,
        per_k,
    })
}

/// Best and worst of the runs with `k` workers (at least one).
fn k_summary(runs: &[PlacementRun], k: usize) -> KSummary {
    let rs: Vec<&PlacementRun> = runs.iter().filter(|r| r.workers == k).collect();
    let best = rs
        .iter()
        .max_by(|a, b| a.cg.median.total_cmp(&b.cg.median))
        .expect("one mapping at least");
    let worst = rs
        .iter()
        .min_by(|a, b| a.cg.median.total_cmp(&b.cg.median))
        .expect("one mapping at least");
    let tb = rs.iter().map(|r| r.triad.median).fold(f64::MIN, f64::max);
    let tw = rs.iter().map(|r| r.triad.median).fold(f64::MAX, f64::min);
    KSummary {
        workers: k,
        best: best.mapping.name.clone(),
        worst: worst.mapping.name.clone(),
        cg_best_over_worst: best.cg.median / worst.cg.median,
        triad_best_over_worst: tb / tw,
    }
}

/// Header of [`PlacementReport::rows`].
pub const HEADER: [&str; 8] = [
    "k",
    "mapping",
    "PUs",
    "CG MFLOPS [95% CI]",
    "triad GB/s [95% CI]",
    "CG iters",
    "rel. residual",
    "",
];

/// Header of [`PlacementReport::ratios`].
pub const RATIO_HEADER: [&str; 5] = [
    "k",
    "best (CG)",
    "worst (CG)",
    "CG best/worst",
    "triad best/worst",
];

impl PlacementReport {
    /// One row per run (header [`HEADER`]), tagged best, worst or only for its k.
    pub fn rows(&self) -> Vec<Vec<String>> {
        self.runs
            .iter()
            .map(|x| {
                let tag = self
                    .per_k
                    .iter()
                    .find(|k| k.workers == x.workers)
                    .map(|k| {
                        if k.best == k.worst {
                            "only"
                        } else if k.best == x.mapping.name {
                            "best"
                        } else if k.worst == x.mapping.name {
                            "worst"
                        } else {
                            ""
                        }
                    })
                    .unwrap_or("");
                vec![
                    x.workers.to_string(),
                    x.mapping.name.clone(),
                    PuSet::from_indexes(x.mapping.pus.iter().copied()).to_string(),
                    fmt_ci(&x.cg),
                    fmt_ci(&x.triad),
                    x.cg_iterations.to_string(),
                    format!("{:.1e}", x.cg_relative_residual),
                    tag.into(),
                ]
            })
            .collect()
    }

    /// One row per k (header [`RATIO_HEADER`]): best and worst mapping and
    /// their ratios.
    pub fn ratios(&self) -> Vec<Vec<String>> {
        self.per_k
            .iter()
            .map(|k| {
                vec![
                    k.workers.to_string(),
                    k.best.clone(),
                    k.worst.clone(),
                    num(k.cg_best_over_worst),
                    num(k.triad_best_over_worst),
                ]
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_resolves_and_names_bad_options() {
        let m = topocomm_topo::load(&"synthetic:pack:2 core:2 pu:1".parse().unwrap()).unwrap();
        let o = |f: fn(&mut PlacementOptions)| {
            let mut o = PlacementOptions {
                max_iter: 500,
                tolerance: 1e-9,
                quick: true,
                ..PlacementOptions::default()
            };
            f(&mut o);
            plan(&m, &o)
        };
        let p = o(|_| ()).unwrap();
        assert_eq!(p.ks, vec![1, 4]);
        assert_eq!((p.workload.grid, p.workload.triad_len), (12, 1 << 18));
        assert!(p.mappings.iter().any(|mp| mp.pus.len() == 4));
        let err = |f| o(f).unwrap_err().to_string();
        assert_eq!(
            err(|o| o.workers = Some("5".into())),
            "--workers: '5' is not a worker count in 1..=4 (this machine has 4 PUs)"
        );
        assert_eq!(
            err(|o| o.workers = Some(",".into())),
            "--workers: the list is empty"
        );
        assert!(err(|o| o.triad_len = Some("1X".into())).starts_with("--triad-len: '1X'"));
        assert!(err(|o| o.grid = Some(1)).starts_with("--grid must be >= 2"));
        // Refused before allocating (2^31 used to overflow, 2^63 to panic).
        assert_eq!(
            err(|o| o.grid = Some(1 << 31)),
            "--grid: 2147483648 is too large (at most 200)"
        );
        assert!(err(|o| o.tolerance = 1.0).contains("--tolerance in (0, 1)"));
        assert!(err(|o| o.max_iter = 0).contains("--max-iter >= 1"));
        assert_eq!(
            err(|o| o.samples = Some(usize::MAX)),
            format!("--samples: {} is too large (at most 1000)", usize::MAX)
        );
        assert_eq!(
            err(|o| o.triad_len = Some("1G".into())),
            "--triad-len: 1073741824 is too large (at most 64M elements)"
        );
    }
}
