//! `topocomm tune`: per locality class, the transport parameters that
//! minimize the time per message, by exhaustive grid and/or model-guided
//! search; writes a rules file (docs/commands/tune.md). The plan, the
//! searches and the tune JSON document are `topocomm_model::tune`'s; this
//! module reads the bench cache results, builds the runner, writes the
//! files and prints. `--mpi` goes to `tune_mpi`.

use super::charact;
use super::model::cache_points;
use crate::common::{json_stdout, usage, GlobalOpts, Progress};
use anyhow::{anyhow, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use topocomm_measure::p2p::Test;
use topocomm_model::tune::plan::{plan, rules_text, search, Options};
use topocomm_model::tune::report::TuneReport;
use topocomm_model::tune::runner::Runner;
use topocomm_model::tune::SearchMode;
use topocomm_topo::Machine;
use topocomm_transport::Rules;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Tune the installed MPI's shared-memory settings instead of topocomm's
    /// transport, and export them (MCA file / environment file): openmpi or
    /// mpich. See docs/commands/tune-mpi.md
    #[arg(long, value_name = "openmpi|mpich")]
    pub mpi: Option<String>,
    /// With --mpi: tune on this PU pair only (PU OS indexes like 0,1 or hwloc
    /// locations like core:0,core:1); default: one
    /// representative pair per class, equally weighted
    #[arg(long, value_name = "A,B", requires = "mpi", conflicts_with_all = ["matrix", "map"])]
    pub pair: Option<String>,
    /// With --mpi: weight the classes by this communication matrix (CSV
    /// src,dst,bytes,msgs) placed by --map
    #[arg(long, value_name = "FILE", requires = "mpi", requires = "map")]
    pub matrix: Option<PathBuf>,
    /// With --mpi: the placement of the matrix's ranks (perm file: `<node> <pu>` per rank)
    #[arg(long, value_name = "FILE", requires = "mpi", requires = "matrix")]
    pub map: Option<PathBuf>,
    /// With --mpi: outstanding messages per bandwidth window
    #[arg(long, value_name = "W", requires = "mpi", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: Option<u32>,
    /// With --mpi: time bound of one MPI job, seconds
    #[arg(long, value_name = "SECS", requires = "mpi", value_parser = clap::value_parser!(u64).range(1..=crate::common::MAX_SECS))]
    pub timeout: Option<u64>,
    /// With --mpi: no search; measure the defaults against this exported
    /// file and read its values back (exit status 1 if a size is slower)
    #[arg(long, value_name = "FILE", requires = "mpi", conflicts_with_all = ["out", "budget", "rounds", "quick"])]
    pub verify: Option<PathBuf>,
    /// With --mpi: message sizes whose bandwidth is maximized, MIN-MAX
    /// (default 64K-4M); the other sizes must only not get slower
    #[arg(long, value_name = "MIN-MAX", requires = "mpi")]
    pub objective: Option<String>,
    /// grid (measure every candidate), model (measure around the model's optimum), or both
    #[arg(long, default_value = "both")]
    pub mode: String,
    /// Locality classes to tune (default: every class present)
    #[arg(long, value_name = "LIST")]
    pub classes: Option<String>,
    /// Message sizes (default 1K,4K,16K,64K,256K,1M,4M,16M; quick: 4K,64K,512K,4M)
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Small grid, few samples: for tests and a first look (well under a minute on 2 cores)
    #[arg(long)]
    pub quick: bool,
    /// Rules file to write
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write the full results as JSON (docs/formats/tune-json.md) to FILE, or on stdout instead of the tables without FILE
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// bench cache JSON for the model (default: a quick bench cache run)
    #[arg(long, value_name = "FILE")]
    pub cache: Option<PathBuf>,
    /// Seconds after which the searches start no new candidate (verification still runs);
    /// default 600, quick 60 (with --mpi: 1200, quick 120)
    #[arg(long, value_name = "SECS", value_parser = crate::common::seconds)]
    pub budget: Option<f64>,
    /// Objective: latency (ping-pong one-way time) or bw (streaming, time per message)
    #[arg(long, default_value = "latency")]
    pub test: String,
    /// Samples per point (default 7; quick 3)
    #[arg(long, value_parser = crate::common::count(1, 10_000))]
    pub samples: Option<usize>,
    /// Minimum duration of one sample's batch, ms (default 2; quick 1)
    #[arg(long, value_parser = crate::common::millis)]
    pub min_time_ms: Option<f64>,
    /// Verification rounds, interleaving the rule sets (default 3; quick 2)
    #[arg(long, value_parser = crate::common::count(1, 100))]
    pub rounds: Option<usize>,
}

impl Args {
    /// The transport tuner's options.
    fn options(&self) -> Options {
        Options {
            mode: self.mode.clone(),
            test: self.test.clone(),
            classes: self.classes.clone(),
            sizes: self.sizes.clone(),
            quick: self.quick,
            budget: self.budget,
            samples: self.samples,
            min_time_ms: self.min_time_ms,
            rounds: self.rounds,
        }
    }
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    if let Some(mpi) = &a.mpi {
        return crate::cmd::tune_mpi::run_mpi(g, &mpi_args(mpi, a).map_err(usage)?);
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("tuned-rules.toml"));
    let start = Instant::now();
    let m: Machine = g.machine()?;
    let plan = plan(&m, &a.options()).map_err(usage)?;
    if let Some(p) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !p.is_dir() {
            let e = anyhow!(
                "--out {}: folder '{}' does not exist",
                out.display(),
                p.display()
            );
            return Err(usage(e));
        }
    }
    charact::require_live(&m)?;
    let mut bar = Progress::new(g.quiet, g.verbose, 10);
    let mut progress = |msg: &str| bar.step(msg);
    let s = &plan.search;
    let cache = match s.mode {
        SearchMode::Grid => None,
        _ => Some(cache_points(&m, a.cache.as_deref(), plan.targets[0].1 .0)?),
    };
    let points = cache
        .as_ref()
        .map(|(c, src)| (c.points.as_slice(), src.as_str()));
    let mut runner = runner(&m, s.test, &s.sizes, s.samples, s.min_time_ms)?;
    let (rules, classes) = search(&m, &plan.targets, s, points, &mut runner, &mut progress)?;
    bar.finish();
    charact::write_file(&out, rules_text(&plan, &classes, &rules).as_bytes())?;
    // What we wrote must load.
    Rules::load(&out, &m).map_err(|e| anyhow!("the written rules do not load: {e}"))?;
    let report = TuneReport::new(
        &m,
        &plan,
        cache.map(|c| c.1),
        out.display().to_string(),
        classes,
        start.elapsed().as_secs_f64(),
    );
    if !json_stdout(&a.json) {
        print!("{}", report.tables());
    }
    if let Some(f) = &a.json {
        if json_stdout(&a.json) {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            charact::write_json(f, &report)?;
            g.note(&format!("json written to {}", f.display()));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A runner of transport benchmark jobs on this machine
/// (`model::tune::runner::Runner::new`).
pub fn runner(
    m: &Machine,
    test: Test,
    sizes: &[u64],
    samples: usize,
    min_time_ms: f64,
) -> Result<Runner> {
    Runner::new(m, test, sizes, samples, min_time_ms).map_err(anyhow::Error::msg)
}

/// The options of `tune --mpi` (implemented in `tune_mpi`), from `tune`'s.
fn mpi_args(mpi: &str, a: &Args) -> Result<crate::cmd::tune_mpi::MpiArgs> {
    // Options that only mean something for the transport tuner.
    for (given, name) in [
        (a.mode != "both", "--mode"),
        (a.classes.is_some(), "--classes"),
        (a.cache.is_some(), "--cache"),
        (a.test != "latency", "--test"),
        (a.min_time_ms.is_some(), "--min-time-ms"),
    ] {
        if given {
            anyhow::bail!("{name} applies to the transport tuner, not to `tune --mpi`");
        }
    }
    // The ranges of `tune_mpi::MpiArgs`'s own options (clap checks
    // `tune`'s wider ones).
    let ranged = |v: Option<usize>, name: &str, lo: usize, hi: usize| -> Result<Option<u32>> {
        match v {
            Some(x) if !(lo..=hi).contains(&x) => Err(crate::common::usage(anyhow!(
                "{name} {x}: `tune --mpi` takes {lo}..={hi}"
            ))),
            v => Ok(v.map(|x| x as u32)),
        }
    };
    Ok(crate::cmd::tune_mpi::MpiArgs {
        mpi: mpi.to_string(),
        pair: a.pair.clone(),
        sizes: a.sizes.clone(),
        quick: a.quick,
        matrix: a.matrix.clone(),
        map: a.map.clone(),
        out: a.out.clone(),
        // clap bounded it to (0, 604800]
        budget: a.budget.map(|b| b.ceil() as u64),
        rounds: ranged(a.rounds, "--rounds", 1, 10)?,
        samples: ranged(a.samples, "--samples", 3, 1000)?,
        window: a.window,
        timeout: a.timeout,
        json: a.json.clone(),
        verify: a.verify.clone(),
        objective: a.objective.clone(),
    })
}
