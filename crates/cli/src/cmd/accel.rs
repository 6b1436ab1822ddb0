//! `topocomm accel -- mpirun -n 8 ./app`: runs an unmodified MPI program
//! with the accelerator preloaded (mpi/lib/accel), so that point-to-point
//! messages between ranks of one node go through topocomm's shared-memory
//! transport (docs/commands/accel.md).

use super::trace::launcher::{self, Impl};
use crate::common::{usage, GlobalOpts};
use anyhow::{anyhow, Context, Result};
use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// Variables read by the accelerator (mpi/lib/accel/state.c).
const NODES_ENV: &str = "TOPOCOMM_ACCEL_NODES";
const VERBOSE_ENV: &str = "TOPOCOMM_ACCEL_VERBOSE";
const PASSED_ENV: [&str; 7] = [
    "TOPOCOMM_ACCEL",
    "TOPOCOMM_ACCEL_ALLREDUCE",
    "TOPOCOMM_ACCEL_MALLOC",
    "TOPOCOMM_ACCEL_COLL_MAX",
    "TOPOCOMM_ACCEL_COLL_HIER",
    "TOPOCOMM_ACCEL_COLL_LANES",
    "TOPOCOMM_ACCEL_LAZY",
];

#[derive(clap::Args, Debug)]
pub struct Args {
    /// MPI of the launcher, when it cannot be detected: openmpi or mpich
    #[arg(long = "mpi", value_name = "openmpi|mpich")]
    pub imp: Option<String>,
    /// Treat each block of consecutive ranks as one of N nodes (tests the
    /// mixed local/remote paths on one machine)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub nodes: Option<u32>,
    /// The accelerator library to preload (default: searched in $TOPOCOMM_MPI_BUILD,
    /// <exe>/../lib/topocomm, <exe>/../../mpi/build, ./mpi/build)
    #[arg(long, value_name = "FILE")]
    pub lib: Option<PathBuf>,
    /// The launch command, after `--`: e.g. `-- mpirun -n 8 ./app args`
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `--verbose` (global): per rank at MPI_Finalize, the messages and bytes of each path.
pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let launcher = &a.command[0];
    let imp = match &a.imp {
        Some(s) => Impl::parse(s).context("--mpi").map_err(usage)?,
        None => launcher::detect(launcher).map_err(usage)?,
    };
    let lib = match &a.lib {
        Some(p) if p.is_file() => std::fs::canonicalize(p).unwrap_or(p.clone()),
        Some(p) => return Err(usage(anyhow!("--lib {}: no such file", p.display()))),
        None => launcher::find_lib(imp, "accel")?,
    };
    let mut vars = vec![(
        "LD_PRELOAD".to_string(),
        launcher::preload_value(imp, &lib)?,
    )];
    if let Some(n) = a.nodes {
        vars.push((NODES_ENV.to_string(), n.to_string()));
    }
    if g.verbose {
        vars.push((VERBOSE_ENV.to_string(), "1".to_string()));
    }
    // Settings of the library the user exported: passed on explicitly, as
    // a launcher may not forward the whole environment to remote ranks.
    for k in PASSED_ENV {
        if let Ok(v) = std::env::var(k) {
            vars.push((k.to_string(), v));
        }
    }
    let argv = launcher::with_env(imp, &a.command, &vars);
    if g.verbose {
        eprintln!(
            "accel: {} launcher, preloading {}",
            imp.name(),
            lib.display()
        );
    }
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .status()
        .with_context(|| format!("cannot run '{}'", argv[0]))?;
    // The application's own exit status is ours.
    Ok(match status.code() {
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::from(128 + 9),
    })
}
