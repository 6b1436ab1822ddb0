//! `topocomm bench placement`: CG (HPCCG-style) and STREAM triad with k
//! pinned workers under several mappings (seed 004). Kernels in
//! `topocomm_measure::placement`, the plan, run and result file in
//! `topocomm_measure::placement_report`.

use super::charact::{self, Progress};
use crate::common::{text_table, GlobalOpts};
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_measure::placement_report::{
    self, PlacementOptions, PlacementReport, HEADER, MAX_ERROR, MAX_REL_RESIDUAL, RATIO_HEADER,
};
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

impl Args {
    /// The library's options.
    pub fn options(&self) -> PlacementOptions {
        PlacementOptions {
            workers: self.workers.clone(),
            grid: self.grid,
            triad_len: self.triad_len.clone(),
            samples: self.samples,
            max_iter: self.max_iter,
            tolerance: self.tolerance,
            quick: self.quick,
        }
    }
}

/// Plans and runs the benchmark (no printing besides the timer and progress).
pub fn measure(m: &Machine, a: &Args) -> Result<PlacementReport> {
    charact::require_live(m)?;
    let timer = charact::timer_checked();
    let plan = placement_report::plan(m, &a.options())?;
    let mut bar = Progress::new("bench placement", plan.mappings.len());
    Ok(placement_report::measure(m, &plan, timer, &mut |d| {
        bar.tick(d)
    })?)
}

/// HTML for the report: the workload, then both tables.
pub fn html(r: &PlacementReport) -> String {
    format!(
        "<p>CG on a 27-point stencil, {g}^3 points per worker (HPCCG style, matrix in CSR), and STREAM triad with {t} elements per worker and array; workers are pinned threads that first-touch their own data. Median of {s} samples. Every solve verified (relative residual &lt; {MAX_REL_RESIDUAL:e}, error against the exact solution &lt; {MAX_ERROR:e}).{q}</p>{}{}",
        topocomm_report::html_table(&HEADER, &r.rows()),
        topocomm_report::html_table(&RATIO_HEADER, &r.ratios()),
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
        crate::common::note(&format!("results written to {}", dir.display()));
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
    print!("{}", text_table(&HEADER, &r.rows()));
    println!();
    print!("{}", text_table(&RATIO_HEADER, &r.ratios()));
    Ok(ExitCode::SUCCESS)
}
