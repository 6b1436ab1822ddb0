//! `topocomm model`: predicted vs measured one-way time of the transport's
//! two-copy and single-copy protocols per locality class, from bench cache
//! throughputs (docs/commands/model.md, docs/model.md). The computation and
//! the model JSON document are `topocomm_model::compare`'s; this module reads
//! the bench cache results, builds the runner and prints.

use super::bench_cache;
use super::charact;
use crate::common::{json_stdout, usage, GlobalOpts, Progress};
use anyhow::{anyhow, bail, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use topocomm_measure::cache_report::CacheReport;
use topocomm_measure::p2p::Test;
use topocomm_model::compare::{self, CacheInput, ModelReport, Options};
use topocomm_topo::Machine;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// bench cache JSON (`topocomm bench cache --out DIR` writes DIR/cache.json); default: run it in quick mode
    #[arg(long, value_name = "FILE")]
    pub cache: Option<PathBuf>,
    /// Also measure the transport forced into each protocol and print the error
    #[arg(long)]
    pub measure: bool,
    /// One PU pair instead of one representative pair per class: PU OS indexes like
    /// 0,4 or hwloc locations like core:0,core:1 (docs/concepts/locations.md)
    #[arg(long, value_name = "A,B", conflicts_with = "class")]
    pub pair: Option<String>,
    /// One locality class (its representative pair)
    #[arg(long, value_name = "CLASS")]
    pub class: Option<String>,
    /// Message sizes (default 1K,4K,16K,64K,256K,1M,4M,16M)
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Samples per measured point (default 7)
    #[arg(long, default_value_t = 7, value_parser = crate::common::count(1, 10_000))]
    pub samples: usize,
    /// Minimum duration of one sample's batch, ms
    #[arg(long, default_value_t = 2.0, value_parser = crate::common::millis)]
    pub min_time_ms: f64,
    /// Write the results as JSON (docs/formats/model-json.md) to FILE, or on stdout instead of the tables without FILE
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// Write a log-log SVG plot per class into this folder
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

impl Args {
    /// The library's options.
    pub fn options(&self) -> Options {
        Options {
            pair: self.pair.clone(),
            class: self.class.clone(),
            sizes: self.sizes.clone(),
            measure: self.measure,
            samples: self.samples,
            min_time_ms: self.min_time_ms,
        }
    }
}

/// Reads a bench cache JSON file; errors are one line naming the file.
pub fn load_cache(path: &Path) -> Result<CacheReport> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("{}: cannot read bench cache results: {e}", path.display()))?;
    let r: CacheReport = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{}: not a bench cache JSON file (topocomm.bench-cache/1): {e}",
            path.display()
        )
    })?;
    if r.schema != "topocomm.bench-cache/1" {
        bail!(
            "{}: schema '{}', expected topocomm.bench-cache/1",
            path.display(),
            r.schema
        );
    }
    Ok(r)
}

/// Cache points from `file`, or a quick load/store M/S run from PU `p`.
pub fn cache_points(m: &Machine, file: Option<&Path>, p: u32) -> Result<(CacheReport, String)> {
    match file {
        Some(f) => Ok((load_cache(f).map_err(usage)?, f.display().to_string())),
        None => {
            let a = bench_cache::Args {
                pu: Some(p.to_string()),
                quick: true,
                ops: "load,store".into(),
                states: Some("M,S".into()),
                samples: Some(3),
                ..Default::default()
            };
            Ok((
                bench_cache::measure(m, &a)?,
                "bench cache --quick (this run)".into(),
            ))
        }
    }
}

/// Plans, checks the machine is live when measuring, reads (or measures)
/// the bench cache points and computes; progress on stderr.
pub fn compute(m: &Machine, a: &Args, quiet: bool) -> Result<ModelReport> {
    let plan = compare::plan(m, &a.options()).map_err(usage)?;
    if a.measure || a.cache.is_none() {
        charact::require_live(m)?;
    }
    let (cache, source) = cache_points(m, a.cache.as_deref(), plan.measurer())?;
    let input = CacheInput {
        points: &cache.points,
        measurer: cache.measurer,
        source: &source,
    };
    let mut runner = super::tune::runner(
        m,
        Test::Latency,
        &plan.sizes,
        plan.samples,
        plan.min_time_ms,
    )?;
    let mut bar = Progress::new(quiet, false, 1);
    let mut progress = |msg: &str| bar.step(&format!("model: {msg}"));
    let r = compare::compute(m, &plan, input, &mut runner, &mut progress)?;
    bar.finish();
    Ok(r)
}

/// Quick model with measurement for `topocomm report`.
pub fn report_section(m: &Machine) -> Result<(String, serde_json::Value)> {
    let a = Args {
        measure: true,
        sizes: Some("4K,64K,1M,8M".into()),
        samples: 5,
        min_time_ms: 1.0,
        ..Default::default()
    };
    let r = compute(m, &a, false)?;
    Ok((r.html(), serde_json::to_value(&r)?))
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    let r = compute(&m, a, g.quiet)?;
    if !json_stdout(&a.json) {
        print!("{}", r.tables());
    }
    if let Some(f) = &a.json {
        if json_stdout(&a.json) {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            charact::write_json(f, &r)?;
            g.note(&format!("json written to {}", f.display()));
        }
    }
    if let Some(d) = &a.plot {
        for c in &r.classes {
            charact::write_file(
                &d.join(format!("model-{}.svg", c.class)),
                c.plot().as_bytes(),
            )?;
        }
        crate::common::note(&format!("plots written to {}", d.display()));
    }
    Ok(ExitCode::SUCCESS)
}
