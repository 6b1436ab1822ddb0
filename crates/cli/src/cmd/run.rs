//! `topocomm run`: launch N ranks of a program on this node over the
//! shared-memory transport (docs/commands/run.md).

use crate::common::{usage, GlobalOpts};
use anyhow::{anyhow, bail, Result};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use topocomm_transport::launch::{self, Bind, Launch};
use topocomm_transport::{parse_timeout, Rules};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Number of ranks
    #[arg(short = 'n', long = "np", value_name = "N")]
    pub n: usize,
    /// Pinning: none, core (round-robin over cores in topology order), pu,
    /// PU OS indexes per rank like 0,4, or hwloc locations like core:0,core:2
    /// or pu:0-1 (docs/concepts/locations.md) (default: core when there are at
    /// least N cores, else none)
    #[arg(long, value_name = "POLICY", conflicts_with = "map")]
    pub bind: Option<String>,
    /// Placement file from `topocomm map --format perm`: one `<node> <pu>` line per rank
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// Transport rules file (TOML, docs/formats/rules-toml.md) instead of
    /// this machine's measured rules (measured and cached by the first job;
    /// TOPOCOMM_AUTOTUNE=0: the built-in model)
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Seconds a blocking call may wait before failing (exported as TOPOCOMM_TIMEOUT; default 60)
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub timeout: Option<String>,
    /// Program and its arguments
    #[arg(last = true, required = true, value_name = "PROG [ARGS]")]
    pub command: Vec<OsString>,
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    // Everything before the launch checks the command line: usage errors.
    let job = launch_of(g, a).map_err(usage)?;
    let code = launch::run(&job).map_err(|e| anyhow!(e))?;
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// The job `a` asks for, checked: ranks, binding, rules, wait bound.
fn launch_of(g: &GlobalOpts, a: &Args) -> Result<Launch> {
    if a.n == 0 || a.n > 4096 {
        bail!("-n {}: expected 1..=4096 ranks", a.n);
    }
    topocomm_transport::cma::enabled().map_err(|e| anyhow!(e))?;
    topocomm_transport::duplex_enabled().map_err(|e| anyhow!(e))?;
    topocomm_transport::demote_enabled().map_err(|e| anyhow!(e))?;
    topocomm_transport::spread_enabled().map_err(|e| anyhow!(e))?;
    topocomm_transport::help_enabled().map_err(|e| anyhow!(e))?;
    topocomm_transport::spin_override().map_err(|e| anyhow!(e))?;
    topocomm_transport::copy_checked().map_err(|e| anyhow!(e))?;
    // Checked here, once, rather than by every rank (the ranks read
    // TOPOCOMM_TIMEOUT, which --timeout sets).
    let timeout = match (&a.timeout, std::env::var("TOPOCOMM_TIMEOUT")) {
        (Some(t), _) => Some(parse_timeout("--timeout", t).map_err(|e| anyhow!(e))?),
        (None, Ok(t)) => {
            parse_timeout("TOPOCOMM_TIMEOUT", &t).map_err(|e| anyhow!(e))?;
            None
        }
        (None, Err(_)) => None,
    };
    let m = g.machine()?;
    let pus = match (&a.map, &a.bind) {
        (Some(f), _) => launch::read_map(f, &m, a.n).map_err(|e| anyhow!(e))?,
        (None, Some(b)) => {
            let b: Bind = b.parse().map_err(|e: String| anyhow!(e))?;
            launch::bind_pus(&m, &b, a.n).map_err(|e| anyhow!(e))?
        }
        (None, None) => {
            launch::default_pus(&m, a.n, &launch::allowed_cpus()).map_err(|e| anyhow!(e))?
        }
    };
    let file = a.rules.clone().or_else(rules_from_env);
    let rules = match &file {
        Some(f) => Rules::load(f, &m).map_err(|e| anyhow!(e))?,
        None => crate::autotune::job_rules(&m, false)?.rules,
    };
    let plans = topocomm_transport::plan::resolve(&m, &rules, &pus).map_err(|e| anyhow!(e))?;
    let (program, args) = a.command.split_first().expect("clap requires a program");
    Ok(Launch {
        pus,
        plans,
        timeout: timeout.map(|d| d.as_secs_f64()),
        grace: Duration::from_secs(2),
        program: program.clone(),
        args: args.to_vec(),
    })
}

/// `$TOPOCOMM_RULES` when set and no `--rules` is given (the same variable
/// `topocomm_mpi_init` reads, so a job gets the same rules either way).
pub fn rules_from_env() -> Option<PathBuf> {
    topocomm_transport::rules_from_env()
}
