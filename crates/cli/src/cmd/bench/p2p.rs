//! `topocomm bench p2p`: point-to-point latency, bandwidth, bidirectional
//! bandwidth and message rate of topocomm's transport, Open MPI and MPICH
//! (tc_mpibench), and the physical limits, on the same PU pairs in the same
//! run (docs/commands/bench-p2p.md). The plan, the run and the result
//! document are `topocomm_measure::bench_p2p`'s; this module parses, shows
//! progress and prints.

use crate::common::{text_table, usage, GlobalOpts};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_measure::bench_p2p::{self, check_live, plan, Options, Outcome, Progress};
use topocomm_measure::results::num;
use topocomm_topo::text::origin_text;
use topocomm_topo::Machine;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Measure this pair of PUs: OS indexes, e.g. 0,1, or hwloc locations, e.g.
    /// core:0,core:1 (a location of several PUs: its first; docs/concepts/locations.md)
    #[arg(long, value_name = "A,B", conflicts_with = "class")]
    pub pair: Option<String>,
    /// Measure the representative pair of this locality class (see `topocomm topo`);
    /// default: one representative pair per class present
    #[arg(long, value_name = "NAME")]
    pub class: Option<String>,
    /// Message sizes in bytes (K, M, G suffixes), comma-separated; default powers of 4 from 1 B to 64 MiB, plus 8 B
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Smoke run for tests and CI: sizes 8,4K,64K, latency and bw, 5 samples,
    /// window 8, 1 ms batches (explicit options still win)
    #[arg(long)]
    pub quick: bool,
    /// Tests among latency,bw,bibw,msgrate (default: all four; --quick: latency,bw)
    #[arg(long, value_name = "LIST")]
    pub tests: Option<String>,
    /// Cache mode: hot (buffer reuse), cold (rotating buffers beyond 2x LLC), or both
    #[arg(long, default_value = "hot", value_parser = ["hot", "cold", "both"])]
    pub cache: String,
    /// MPI peers measured in the same run: openmpi, mpich (comma-separated), or none
    #[arg(long, default_value = "openmpi,mpich", value_name = "LIST|none")]
    pub vs: String,
    /// Samples per (test, size) and implementation (default 20; --quick: 5)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub samples: Option<u32>,
    /// Each sample lasts at least this long (default 10; --quick: 1)
    #[arg(long, value_name = "MS")]
    pub min_time_ms: Option<f64>,
    /// Messages in flight in bw, bibw and msgrate (default 64; --quick: 8)
    #[arg(long, value_name = "W", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: Option<u32>,
    /// Independent jobs per implementation, interleaved with the other implementations' jobs;
    /// the samples are split between them and pooled (default 3; --quick: 1)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub jobs: Option<u32>,
    /// Kill a backend job that runs longer than this (default: a bound computed from the settings)
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=crate::common::MAX_SECS))]
    pub timeout: Option<u64>,
    /// Write the results (raw samples included) and metadata as JSON to FILE, or on stdout instead of the tables without FILE
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
}

impl Args {
    /// The library's options.
    pub fn options(&self) -> Options {
        Options {
            pair: self.pair.clone(),
            class: self.class.clone(),
            sizes: self.sizes.clone(),
            quick: self.quick,
            tests: self.tests.clone(),
            cache: self.cache.clone(),
            vs: self.vs.clone(),
            samples: self.samples,
            min_time_ms: self.min_time_ms,
            window: self.window,
            timeout: self.timeout,
            jobs: self.jobs,
        }
    }
}

/// Progress on stderr (nothing under `--quiet`).
fn show(quiet: bool, p: Progress) {
    match p {
        _ if quiet => {}
        Progress::Start { label } => eprintln!("bench p2p: {label} ..."),
        Progress::Step { what } => eprintln!("bench p2p:   {what}"),
        Progress::Done {
            label,
            elapsed_s: t,
        } => eprintln!("bench p2p: {label}: done in {t:.1} s"),
        Progress::Skipped { label, reason } => eprintln!("bench p2p: {label}: skipped: {reason}"),
    }
}

/// Plans against `m`, checks the pairs exist here, and runs.
fn measure(m: &Machine, o: &Options, quiet: bool) -> Result<Outcome> {
    let p = plan(m, o).map_err(usage)?;
    check_live(&p, &origin_text(m)).map_err(usage)?;
    // A first use measures the transport's rules here, once the pairs are
    // known to exist: a mistyped pair fails at once, not after it.
    if p.with_topocomm {
        crate::autotune::before_benchmarks_on(m);
    }
    let worker = topocomm_transport::worker::locate().map_err(|e| e.to_string());
    let exe = std::env::current_exe().ok();
    let now = super::utc_now();
    let mut progress = |x: Progress| show(quiet, x);
    Ok(bench_p2p::measure(&p, worker, exe, now, &mut progress)?)
}

/// The `--json` document (docs/formats/bench-json.md).
fn to_json(o: &Outcome, m: &Machine) -> serde_json::Value {
    o.to_json(super::common_meta(m), super::utc_now())
}

/// The terminal tables: per pair, cache mode and test, one line per size.
pub fn render_tables(o: &Outcome) -> String {
    let mut s = String::new();
    for (title, h, lines) in o.tables() {
        let hr: Vec<&str> = h.iter().map(String::as_str).collect();
        s.push_str(&format!("\n{title}\n{}", text_table(&hr, &lines)));
    }
    s
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    let o = measure(&m, &a.options(), g.quiet)?;
    if crate::common::json_stdout(&a.json) {
        return crate::common::print_json(&to_json(&o, &m));
    }
    let params = &o.plan.params;
    println!(
        "topocomm bench p2p: timer resolution {} ns, overhead {} ns; {} samples per point{}, LLC {}",
        num(o.timer.resolution_ns),
        num(o.timer.overhead_ns),
        o.plan.samples_per_job() * o.plan.jobs,
        if o.plan.jobs > 1 {
            format!(" from {} interleaved jobs per implementation", o.plan.jobs)
        } else {
            String::new()
        },
        topocomm_topo::human_bytes(params.llc)
    );
    for p in &o.placements {
        println!("{}", p.line());
    }
    print!("{}", render_tables(&o));
    for b in o.backends.iter().filter(|b| b.status != "ok") {
        let why = b.reason.as_deref().unwrap_or("");
        println!(
            "note: {} on PUs {} ({}) missing: {why}",
            b.backend, b.pair, b.cache
        );
    }
    for b in o.backends.iter().filter(|b| b.status == "ok") {
        if let Some(r) = &b.reason {
            println!("note: {r}");
        }
    }
    let noise: Vec<String> = o
        .noise()
        .iter()
        .map(|(i, x)| format!("{i} +-{:.1}%", x * 100.0))
        .collect();
    println!(
        "noise (median half-width of the 95% CI relative to the median): {}",
        noise.join(", ")
    );
    print_slowest(&o.slowest());
    for (placement, tables) in o.placement_tables() {
        println!("\nover the samples of the {placement} placement alone:");
        for (title, h, lines) in tables {
            let hr: Vec<&str> = h.iter().map(String::as_str).collect();
            println!("\n{title}\n{}", text_table(&hr, &lines).trim_end());
        }
        if let Some(p) = o.by_placement.iter().find(|p| p.placement == placement) {
            print_slowest(&bench_p2p::slowest(&p.results));
        }
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&to_json(&o, &m))?;
        topocomm_report::write_atomic(path, text.as_bytes())
            .with_context(|| format!("cannot write '{}'", path.display()))?;
        println!("json written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The slowest sample of each implementation against its point's median
/// ([`bench_p2p::slowest`]), as one line.
fn print_slowest(slowest: &[(String, f64, String, u64)]) {
    let parts: Vec<String> = slowest
        .iter()
        .map(|(i, x, test, size)| {
            format!("{i} {x:.2} ({test} {})", topocomm_topo::human_bytes(*size))
        })
        .collect();
    if !parts.is_empty() {
        println!(
            "slowest sample against its point's median, as speed (points of 10 samples or more, the lowest): {}",
            parts.join(", ")
        );
    }
}

/// The point-to-point data of `topocomm report`: a quick run on every
/// class's representative pair (about 10-30 s on 2 cores), as the
/// `topocomm.bench.p2p/1` document, or `{"error": ...}` when it cannot run.
/// `cmd::report_page` draws it.
pub fn report_section(m: &Machine) -> serde_json::Value {
    match measure(m, &Options::report(), false) {
        Ok(o) => to_json(&o, m),
        Err(e) => serde_json::json!({ "error": format!("{e:#}") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        T::try_parse_from(std::iter::once("p2p").chain(args.iter().copied())).map(|t| t.a)
    }

    #[test]
    fn arguments_reach_the_plan() {
        let m = topocomm_topo::load(&"synthetic:pack:2 l3:2 core:2 pu:1".parse().unwrap()).unwrap();
        let p = plan(&m, &parse(&["--pair", "0,1", "--quick"]).unwrap().options()).unwrap();
        assert_eq!((p.pairs[0].pair, p.params.samples), ((0, 1), 5));
        let e = plan(&m, &parse(&["--pair", "x"]).unwrap().options()).unwrap_err();
        assert!(e.to_string().starts_with("--pair: "), "{e}");
        assert!(parse(&["--cache", "warm"]).is_err());
        assert!(parse(&["--pair", "0,1", "--class", "l3"]).is_err());
        assert!(parse(&["--samples", "0"]).is_err());
    }
}
