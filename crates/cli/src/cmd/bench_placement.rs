//! `topocomm bench placement`: CG (HPCCG-style) and STREAM triad with k
//! pinned workers under several mappings (seed 004). Kernels in
//! `topocomm_measure::placement`.

use super::charact::{self, fmt_ci, num, Progress};
use crate::common::{text_table, GlobalOpts};
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_measure::meta::RunMeta;
use topocomm_measure::placement::{self, PlacementRun, Workload};
use topocomm_topo::Machine;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// Worker counts k, e.g. `1,2,4` (default: 1..N; with --quick: 1 and N)
    #[arg(long, value_name = "LIST")]
    pub workers: Option<String>,
    /// Grid points per worker along each axis (default 48; 12 with --quick)
    #[arg(long)]
    pub grid: Option<usize>,
    /// Triad elements per worker and array (default 4M; 256K with --quick)
    #[arg(long, value_name = "SIZE")]
    pub triad_len: Option<String>,
    /// Samples per (k, mapping) (default 5; 2 with --quick)
    #[arg(long)]
    pub samples: Option<usize>,
    /// Most CG iterations
    #[arg(long, default_value_t = 500)]
    pub max_iter: usize,
    /// Relative residual at which CG stops
    #[arg(long, default_value_t = 1e-9)]
    pub tolerance: f64,
    /// Fast, coarse run for CI and the report
    #[arg(long)]
    pub quick: bool,
    /// Print the JSON result on stdout instead of the table
    #[arg(long)]
    pub json: bool,
    /// Folder to write placement.json into
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
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

/// Residual and error bounds a run must meet to count as verified.
pub const MAX_REL_RESIDUAL: f64 = 1e-6;
pub const MAX_ERROR: f64 = 1e-4;

pub fn measure(m: &Machine, a: &Args) -> Result<PlacementReport> {
    charact::require_live(m)?;
    let timer = charact::timer_checked();
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
                    .ok_or_else(|| anyhow!("--workers: '{s}' is not a worker count in 1..={n} (this machine has {n} PUs)"))
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
        bail!("--workers: the list is empty");
    }
    let triad_len = match &a.triad_len {
        Some(t) => charact::parse_size(t).map_err(|e| anyhow!("--triad-len: {e}"))? as usize,
        None if a.quick => 1 << 18,
        None => 1 << 22,
    };
    let wl = Workload {
        grid: a.grid.unwrap_or(if a.quick { 12 } else { 48 }),
        max_iter: a.max_iter,
        tolerance: a.tolerance,
        triad_len,
        triad_reps: if a.quick { 3 } else { 10 },
        samples: a.samples.unwrap_or(if a.quick { 2 } else { 5 }),
    };
    if wl.grid < 2 || wl.samples == 0 || wl.tolerance.is_nan() || wl.tolerance <= 0.0 {
        bail!("--grid must be >= 2, --samples >= 1 and --tolerance > 0");
    }
    let mut plan = Vec::new();
    for &k in &ks {
        for mp in placement::mappings(m, k).map_err(|e| anyhow!("--workers: {e}"))? {
            plan.push(mp);
        }
    }
    let mut bar = Progress::new("bench placement", plan.len());
    let mut runs = Vec::new();
    for (i, mp) in plan.iter().enumerate() {
        let r = placement::run_mapping(mp, &wl).map_err(|e| anyhow!("bench placement: {e}"))?;
        // NaN fails too.
        let converged = r.cg_relative_residual < MAX_REL_RESIDUAL && r.cg_max_error < MAX_ERROR;
        if !converged {
            bail!(
                "bench placement: CG with {} workers on PUs {:?} did not converge (relative residual {:.2e}, max error {:.2e} after {} iterations); raise --max-iter",
                r.workers, mp.pus, r.cg_relative_residual, r.cg_max_error, r.cg_iterations
            );
        }
        runs.push(r);
        bar.tick(i + 1);
    }
    let per_k = ks
        .iter()
        .map(|&k| {
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
        })
        .collect();
    Ok(PlacementReport {
        schema: "topocomm.bench-placement/1".into(),
        meta: RunMeta::new(m, timer),
        quick: a.quick,
        workload: wl,
        runs,
        per_k,
    })
}

fn rows(r: &PlacementReport) -> Vec<Vec<String>> {
    r.runs
        .iter()
        .map(|x| {
            let tag = r
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
                topocomm_topo::PuSet::from_indexes(x.mapping.pus.iter().copied()).to_string(),
                fmt_ci(&x.cg),
                fmt_ci(&x.triad),
                x.cg_iterations.to_string(),
                format!("{:.1e}", x.cg_relative_residual),
                tag.into(),
            ]
        })
        .collect()
}

const HEADER: [&str; 8] = [
    "k",
    "mapping",
    "PUs",
    "CG MFLOPS [95% CI]",
    "triad GB/s [95% CI]",
    "CG iters",
    "rel. residual",
    "",
];

fn ratios(r: &PlacementReport) -> Vec<Vec<String>> {
    r.per_k
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

const RATIO_HEADER: [&str; 5] = [
    "k",
    "best (CG)",
    "worst (CG)",
    "CG best/worst",
    "triad best/worst",
];

pub fn html(r: &PlacementReport) -> String {
    format!(
        "<p>CG on a 27-point stencil, {g}^3 points per worker (HPCCG style, matrix in CSR), and STREAM triad with {t} elements per worker and array; workers are pinned threads that first-touch their own data. Median of {s} samples. Every solve verified (relative residual &lt; {MAX_REL_RESIDUAL:e}, error against the exact solution &lt; {MAX_ERROR:e}).{q}</p>{}{}",
        topocomm_report::html_table(&HEADER, &rows(r)),
        topocomm_report::html_table(&RATIO_HEADER, &ratios(r)),
        g = r.workload.grid,
        t = r.workload.triad_len,
        s = r.workload.samples,
        q = if r.quick { " Quick mode: problem sizes may fit in cache." } else { "" }
    )
}

pub fn report_section(m: &Machine) -> Result<(String, serde_json::Value)> {
    let a = Args {
        quick: true,
        max_iter: 500,
        tolerance: 1e-9,
        ..Args::default()
    };
    let r = measure(m, &a)?;
    Ok((html(&r), serde_json::to_value(&r)?))
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    let r = measure(&m, a)?;
    if let Some(dir) = &a.out {
        charact::write_json(&dir.join("placement.json"), &r)?;
        eprintln!("results written to {}", dir.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "bench placement: CG {}^3 points/worker, triad {} elements/worker/array, {} samples{}",
        r.workload.grid,
        r.workload.triad_len,
        r.workload.samples,
        if r.quick { " (quick)" } else { "" }
    );
    print!("{}", text_table(&HEADER, &rows(&r)));
    println!();
    print!("{}", text_table(&RATIO_HEADER, &ratios(&r)));
    Ok(ExitCode::SUCCESS)
}
