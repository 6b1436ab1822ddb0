//! `topocomm map`: place the ranks of a communication matrix on a node or a
//! cluster (docs/commands/map.md). The work is `topocomm_map::request`'s;
//! this module passes the options on and writes the results.

use crate::common::{usage, GlobalOpts};
use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_map::request::Request;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Communication matrix: a CSV edge list (src,dst,bytes,msgs), a TreeMatch
    /// .mat file, Open MPI monitoring .prof files or a directory of them
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Output: perm (`<node> <pu>` per rank; `run` is the same), rankfile
    /// (Open MPI), hydra (MPICH machinefile), slurm, json; each launcher file
    /// says in a `# run:` line how to launch it (docs/formats/mapping-outputs.md)
    #[arg(long, default_value = "perm")]
    pub format: String,
    /// What to minimize: cost (estimated time), hop-bytes (bytes x tree links),
    /// bytes (bandwidth term), msgs (latency term), max-congestion (largest
    /// traffic across one tree object's boundary); `--metric` is an alias
    #[arg(long, visible_alias = "metric", default_value = "cost")]
    pub objective: String,
    /// auto, multilevel, treematch, greedy, packed-refined, packed, round-robin, scatter, random
    #[arg(long, default_value = "auto")]
    pub strategy: String,
    /// Number of copies of the node topology forming a cluster
    #[arg(long, conflicts_with = "hostfile")]
    pub nodes: Option<usize>,
    /// Hostfile: `HOST [slots=LIST] [topology=SPEC]` per line
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// Network tree arities from the bottom (e.g. `16,8`: 16 nodes per leaf
    /// switch, 8 leaf switches per group); default: one flat level
    #[arg(long, value_name = "A,B,...")]
    pub network_levels: Option<String>,
    /// PUs that may hold ranks on every node: OS indexes, e.g. `0-7,16-23`, or hwloc
    /// locations, e.g. `core:0-3` or `package:0` (docs/concepts/locations.md)
    #[arg(long, value_name = "LIST")]
    pub slots: Option<String>,
    /// Allow several ranks per PU when there are more ranks than PUs
    #[arg(long)]
    pub oversubscribe: bool,
    /// Per-class latency/bandwidth JSON (docs/formats/costs-json.md)
    #[arg(long, value_name = "FILE")]
    pub costs: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Maximum refinement sweeps
    #[arg(long, default_value_t = 8)]
    pub passes: usize,
    /// Seconds after which the multilevel mapper tries no further seed
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub time_limit: f64,
    /// Number of ranks (default: the largest rank named in the input + 1)
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Score this mapping (a perm file) instead of computing one
    #[arg(long, value_name = "FILE")]
    pub evaluate: Option<String>,
    /// Write the mapping here (the summary then goes to stdout)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The mapping as JSON (the same as `--format json`, which stays accepted)
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

impl Args {
    /// The library's request.
    fn request(&self, g: &GlobalOpts) -> Request {
        Request {
            inputs: self.inputs.clone(),
            format: if self.json {
                "json".into()
            } else {
                self.format.clone()
            },
            metric: self.objective.clone(),
            strategy: self.strategy.clone(),
            nodes: self.nodes,
            hostfile: self.hostfile.clone(),
            network_levels: self.network_levels.clone(),
            slots: self.slots.clone(),
            oversubscribe: self.oversubscribe,
            costs: self.costs.clone(),
            seed: self.seed,
            passes: self.passes,
            time_limit: self.time_limit,
            ranks: self.ranks,
            evaluate: self.evaluate.clone(),
            topology: g.topology.clone(),
        }
    }
}

pub fn run(global: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let o = a.request(global).run().map_err(usage)?;
    match &a.out {
        Some(p) => {
            std::fs::write(p, &o.mapping).with_context(|| format!("--out {}", p.display()))?;
            if !global.quiet {
                print!("{}", o.summary);
            }
        }
        None => {
            print!("{}", o.mapping);
            if !global.quiet {
                eprint!("{}", o.summary);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
