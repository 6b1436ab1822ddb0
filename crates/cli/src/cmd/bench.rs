//! `topocomm bench ...`: the benchmark command group. Each benchmark lives in
//! its own module (`bench_cache`, `bench_placement`, `bench_matrix`, ...).

use crate::common::GlobalOpts;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: BenchCmd,
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchCmd {
    /// Load/store throughput and pointer-chase latency per cache state (M/E/S/O/F/I) and locality class
    Cache(super::bench_cache::Args),
    /// CG (27-point stencil) and STREAM triad under several worker-to-PU mappings
    Placement(super::bench_placement::Args),
    /// Per-PU-pair latency, bandwidth and message rate, with topology-ordered heatmaps
    Matrix(super::bench_matrix::Args),
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    match &a.cmd {
        BenchCmd::Cache(x) => super::bench_cache::run(g, x),
        BenchCmd::Placement(x) => super::bench_placement::run(g, x),
        BenchCmd::Matrix(x) => super::bench_matrix::run(g, x),
    }
}
