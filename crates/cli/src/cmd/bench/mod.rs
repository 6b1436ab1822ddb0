//! `topocomm bench ...`: the benchmark commands, one module per benchmark.
//! To add one: a module here, a variant in [`BenchCommand`], a match arm in
//! [`run`].

pub mod coll;
pub mod p2p;

use crate::common::GlobalOpts;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Point-to-point latency/bandwidth of topocomm vs Open MPI, MPICH and the physical limits
    P2p(p2p::Args),
    /// Collective latency per size of topocomm (`accel`) vs Open MPI and MPICH, median + 95% CI
    Coll(coll::Args),
    /// Load/store throughput and pointer-chase latency per cache state (M/E/S/O/F/I) and locality class
    Cache(crate::cmd::bench_cache::Args),
    /// CG (27-point stencil) and STREAM triad under several worker-to-PU mappings
    Placement(crate::cmd::bench_placement::Args),
    /// Per-PU-pair latency, bandwidth and message rate, with topology-ordered heatmaps
    Matrix(crate::cmd::bench_matrix::Args),
    /// Mapping quality: topocomm's multilevel mapper vs Scotch and the baselines
    Map(crate::cmd::bench_map::Args),
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    match &a.command {
        BenchCommand::P2p(x) => p2p::run(g, x),
        BenchCommand::Coll(x) => coll::run(g, x),
        BenchCommand::Cache(x) => crate::cmd::bench_cache::run(g, x),
        BenchCommand::Placement(x) => crate::cmd::bench_placement::run(g, x),
        BenchCommand::Matrix(x) => crate::cmd::bench_matrix::run(g, x),
        BenchCommand::Map(x) => crate::cmd::bench_map::run(g, x),
    }
}

/// Metadata every benchmark file carries (DESIGN.md "Data flow").
pub fn common_meta(m: &topocomm_topo::Machine) -> serde_json::Value {
    serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "command": std::env::args().collect::<Vec<_>>(),
        "cpu_model": m.cpu_model.clone().or_else(live_cpu_model),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
        "topology_fingerprint": m.fingerprint,
        "date": utc_now(),
    })
}

fn live_cpu_model() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    })
}

/// The current time as `YYYY-MM-DDTHH:MM:SSZ` (no date crate needed).
pub fn utc_now() -> String {
    let (y, m, d, hh, mm, ss) =
        topocomm_measure::meta::civil_utc(topocomm_measure::meta::unix_now());
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

#[cfg(test)]
mod tests {
    #[test]
    fn date_is_iso() {
        let d = super::utc_now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.starts_with("20") && d.ends_with('Z'), "{d}");
    }
}
