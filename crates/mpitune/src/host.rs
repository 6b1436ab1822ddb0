//! What a run needs from this host: the installed MPI (its `mpirun` on the
//! `PATH`, its version), the build of topocomm's MPI programs for it, and
//! how busy the machine was while measuring.

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use topocomm_measure::backends::{locate_mpi_build, MpiImpl};

/// `prog` found in a folder of `$PATH`.
pub fn which_exists(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(prog))
            .find(|p| p.is_file())
    })
}

/// The MPI's own version line (`mpirun --version`, `mpichversion`); its
/// name when that fails.
pub fn mpi_version(which: MpiImpl) -> String {
    let (prog, arg) = match which {
        MpiImpl::OpenMpi => ("mpirun.openmpi", "--version"),
        MpiImpl::Mpich => ("mpichversion", "--version"),
    };
    let mut c = std::process::Command::new(prog);
    c.arg(arg);
    topocomm_measure::procrun::run_bounded(c, prog, Duration::from_secs(20))
        .ok()
        .and_then(|o| {
            o.stdout
                .lines()
                .find(|l| !l.trim().is_empty())
                // `MPICH Version:    \t4.0.2` -> `MPICH Version: 4.0.2`
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| which.name().to_string())
}

/// The MPI build folder ([`locate_mpi_build`]) with both programs a run
/// uses for `which`: tc_mpibench and tc_mpit_cvars.
/// `exe` is the running program (the folder is looked for from it).
pub fn mpi_build(which: MpiImpl, exe: Option<&Path>) -> Result<PathBuf, String> {
    let build = locate_mpi_build(exe).map_err(|e| crate::session::chain(&e))?;
    for prog in ["tc_mpibench", "tc_mpit_cvars"] {
        let p = build.join(which.name()).join(prog);
        if !p.is_file() {
            return Err(format!(
                "{} not found: the {} build of the MPI programs is missing (run `make -C mpi`)",
                p.display(),
                which.name()
            ));
        }
    }
    Ok(build)
}

/// The 1-minute load average (`/proc/loadavg`), to report how busy the
/// machine was: other processes competing for the PUs are the main noise.
pub fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// How busy the machine was during the run.
#[derive(Clone, Debug, Serialize)]
pub struct Load {
    /// PUs this process may use.
    pub pus: usize,
    /// The 1-minute load average at the start and at the end.
    pub start: Option<f64>,
    pub end: Option<f64>,
}

impl Load {
    /// The load of a run that started with load average `start`, ending now.
    pub fn since(start: Option<f64>) -> Load {
        Load {
            pus: topocomm_measure::pin::allowed_pus().map_or(0, |p| p.len()),
            start,
            end: loadavg(),
        }
    }

    /// Whether the load exceeded the usable PUs at the start or at the end.
    pub fn overloaded(&self) -> bool {
        self.start.unwrap_or(0.0).max(self.end.unwrap_or(0.0)) > self.pus as f64
    }
}
