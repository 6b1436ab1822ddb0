//! `topocomm bench coll`: osu-style collective latency of topocomm
//! (`topocomm accel` over each MPI) against Open MPI and MPICH in the same
//! run (docs/commands/bench-coll.md). The plan, the jobs and the
//! statistics are `topocomm_measure::{bench_coll, coll_summary}`'s; this
//! module parses, shows progress and prints.

use crate::common::{text_table, usage, GlobalOpts};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use topocomm_measure::bench_coll::{
    self, command, plan, programs, BenchCollError, Options, Plan, Progress, COLLECTIVES,
};
use topocomm_measure::coll_summary::{self, failures, summarize, tables, RATIO_METHOD};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Ranks per job (all on this machine)
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub np: u32,
    /// Collectives, comma-separated, among barrier,bcast,reduce,allreduce,gather,scatter,allgather,alltoall
    /// (default barrier,bcast,reduce,allreduce,allgather,alltoall)
    #[arg(long, value_name = "LIST")]
    pub collectives: Option<String>,
    /// Sizes in bytes (K, M, G suffixes), comma-separated; per rank for gather,
    /// scatter, allgather and alltoall (default 8,1K,64K,1M)
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Independent jobs per MPI and configuration (plain, accel), interleaved
    #[arg(long, value_name = "J", default_value_t = 5)]
    pub jobs: u32,
    /// The MPIs to compare with (each also runs under `topocomm accel`): openmpi, mpich
    /// (default openmpi,mpich; with --oversubscribe openmpi: MPICH's collectives poll without
    /// yielding the CPU and take milliseconds when crowded)
    #[arg(long, value_name = "LIST")]
    pub vs: Option<String>,
    /// Allow more ranks than CPUs (ranks run unbound; Open MPI gets --oversubscribe)
    #[arg(long)]
    pub oversubscribe: bool,
    /// Length of one timed batch of std_coll
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    pub time_ms: f64,
    /// Timed batches per point and job (std_coll's value is their median)
    #[arg(long, value_name = "R", default_value_t = 5)]
    pub reps: u32,
    /// Kill a job that runs longer than this (default: a bound computed from the settings)
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Bootstrap resamples of the ratio's CI
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub resamples: u32,
    /// Seed of the bootstrap
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Write the results (every job's raw values) as JSON to FILE, or on stdout instead of the tables without FILE
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// Folder to write bench-coll.json and one SVG plot per collective into
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

impl Args {
    /// The library's options.
    pub fn options(&self) -> Options {
        Options {
            np: self.np,
            collectives: self.collectives.clone(),
            sizes: self.sizes.clone(),
            jobs: self.jobs,
            vs: self.vs.clone(),
            oversubscribe: self.oversubscribe,
            time_ms: self.time_ms,
            reps: self.reps,
            timeout: self.timeout,
            resamples: self.resamples,
            seed: self.seed,
        }
    }
}

fn fail(e: BenchCollError) -> anyhow::Error {
    if e.is_usage() {
        usage(e)
    } else {
        e.into()
    }
}

/// Progress on stderr (nothing under `--quiet`).
fn show(quiet: bool, p: Progress) {
    match p {
        _ if quiet => {}
        Progress::Command { mpi, config, argv } => {
            eprintln!("bench coll: {mpi:7} {config:5} {}", argv.join(" "))
        }
        Progress::Job(r) if r.status == "ok" => eprintln!(
            "bench coll: job {} {:7} {:5} {:.1} s",
            r.job + 1,
            r.mpi,
            r.config,
            r.wall_s
        ),
        Progress::Job(r) => eprintln!(
            "bench coll: job {} {:7} {:5} FAILED: {}",
            r.job + 1,
            r.mpi,
            r.config,
            r.reason.as_deref().unwrap_or("")
        ),
    }
}

/// The argv of every MPI and configuration, for the document.
fn commands(p: &Plan, progs: &bench_coll::Programs) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for &which in &p.impls {
        let c: serde_json::Map<String, serde_json::Value> = bench_coll::CONFIGS
            .iter()
            .map(|c| (c.to_string(), command(p, progs, which, c).into()))
            .collect();
        m.insert(which.name().into(), c.into());
    }
    m.into()
}

fn write(path: &Path, text: &[u8]) -> Result<()> {
    topocomm_report::write_atomic(path, text)
        .with_context(|| format!("cannot write '{}'", path.display()))
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let o = a.options();
    let p = plan(&o, cpus).map_err(fail)?;
    if let Some(note) = bench_coll::default_vs_note(&o).filter(|_| !g.quiet) {
        eprintln!("bench coll: {note}");
    }
    let exe = std::env::current_exe().context("cannot find the topocomm binary")?;
    let progs = programs(&p, &exe).map_err(fail)?;
    let m = g.machine()?;
    let mut progress = |x: Progress| show(g.quiet, x);
    let jobs = bench_coll::run(&p, &progs, &mut progress);
    let failed = failures(&jobs);
    if let Err(e) = bench_coll::check_any(&jobs) {
        for f in &failed {
            eprintln!("bench coll: {f}");
        }
        return Err(fail(e));
    }
    let rows = summarize(&p, &jobs);
    let doc = coll_summary::to_json(
        &p,
        commands(&p, &progs),
        &jobs,
        &rows,
        super::common_meta(&m),
        super::utc_now(),
    );
    if crate::common::json_stdout(&a.json) {
        for f in &failed {
            eprintln!("bench coll: {f}");
        }
        crate::common::print_json(&doc)?;
        return Ok(status(&failed));
    }
    println!(
        "topocomm bench coll: {} ranks (bind {}), {} jobs per MPI and configuration, latency per call in us",
        p.np, p.bind, p.jobs
    );
    println!(
        "{RATIO_METHOD}; slower: upper CI end > {}",
        coll_summary::SLOWER_ABOVE
    );
    if let Some(pl) = coll_summary::placement(&p, &jobs) {
        println!("{}", coll_summary::placement_line(&pl));
    }
    for (title, h, lines) in tables(&p, &rows) {
        let hr: Vec<&str> = h.iter().map(String::as_str).collect();
        print!("\n# {title}\n{}", text_table(&hr, &lines));
    }
    for f in &failed {
        println!("{f}");
    }
    let text = serde_json::to_string_pretty(&doc)?;
    if let Some(path) = &a.json {
        write(path, text.as_bytes())?;
        println!("json written to {}", path.display());
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--out {}: cannot create it", dir.display()))?;
        write(&dir.join("bench-coll.json"), text.as_bytes())?;
        let mut n = 0;
        for c in COLLECTIVES {
            if let Some(svg) = coll_summary::plot(c, &rows) {
                write(&dir.join(format!("coll-{c}.svg")), svg.as_bytes())?;
                n += 1;
            }
        }
        println!("bench-coll.json and {n} plots written to {}", dir.display());
    }
    Ok(status(&failed))
}

/// Exit status 1 when a job failed (its results are left out, and said).
fn status(failed: &[String]) -> ExitCode {
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
