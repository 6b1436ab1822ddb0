//! Which MPI a launch command uses, where its tracer library is, and how to
//! hand the tracer's environment to every rank.

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The MPI implementations `mpi/Makefile` builds for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    OpenMpi,
    Mpich,
}

impl Impl {
    /// Folder name under `mpi/build/`.
    pub fn dir(self) -> &'static str {
        match self {
            Impl::OpenMpi => "openmpi",
            Impl::Mpich => "mpich",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Impl::OpenMpi => "Open MPI",
            Impl::Mpich => "MPICH",
        }
    }

    pub fn parse(s: &str) -> Result<Impl> {
        match s {
            "openmpi" | "ompi" => Ok(Impl::OpenMpi),
            "mpich" => Ok(Impl::Mpich),
            _ => bail!("--impl: expected openmpi or mpich, got '{s}'"),
        }
    }
}

fn from_name(name: &str) -> Option<Impl> {
    let n = name.to_ascii_lowercase();
    if n.contains("openmpi") || n.contains("orterun") || n.contains("ompi") || n == "prterun" {
        Some(Impl::OpenMpi)
    } else if n.contains("mpich") || n.contains("hydra") {
        Some(Impl::Mpich)
    } else {
        None
    }
}

/// Finds `prog` like the shell would (a name without `/` is looked up in PATH).
fn which(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        return p.exists().then_some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Detects the MPI of `launcher`: from its name (`mpirun.openmpi`,
/// `mpiexec.mpich`), then from the name it resolves to through symlinks
/// (Debian's `/usr/bin/mpirun` -> `/etc/alternatives/mpirun` ->
/// `mpirun.openmpi`), then from `launcher --version`.
pub fn detect(launcher: &str) -> Result<Impl> {
    let base = Path::new(launcher)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(i) = from_name(&base) {
        return Ok(i);
    }
    let Some(path) = which(launcher) else {
        bail!("launcher '{launcher}' not found in PATH");
    };
    if let Ok(real) = std::fs::canonicalize(&path) {
        if let Some(i) = real
            .file_name()
            .and_then(|f| from_name(&f.to_string_lossy()))
        {
            return Ok(i);
        }
    }
    let out = Command::new(&path).arg("--version").output();
    if let Ok(out) = out {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if text.contains("Open MPI") || text.contains("OpenRTE") || text.contains("PRRTE") {
            return Ok(Impl::OpenMpi);
        }
        if text.contains("HYDRA") || text.contains("MPICH") {
            return Ok(Impl::Mpich);
        }
    }
    bail!(
        "cannot tell which MPI '{launcher}' launches (not Open MPI or MPICH by name, path or \
         --version); say it with --impl openmpi|mpich"
    )
}

/// Candidate folders holding `<impl>/libtopocomm-*.so`, in search order:
/// `$TOPOCOMM_MPI_BUILD`, then `topocomm_measure::backends::mpi_build_candidates`
/// of the running program (`<exe>/../lib/topocomm` of an installed
/// `topocomm`, `<exe>/../../mpi/build` of a checkout, `./mpi/build`).
pub fn build_dirs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(d) = std::env::var_os(super::MPI_BUILD_ENV) {
        v.push(PathBuf::from(d));
    }
    let exe = std::env::current_exe().ok();
    v.extend(topocomm_measure::backends::mpi_build_candidates(
        exe.as_deref(),
    ));
    v
}

/// Finds `libtopocomm-<lib>.so` built for `imp` (`trace`, `reorder`,
/// `fortran`, ...), in the folders of [`build_dirs`]; the error names the
/// paths tried and says how to build it.
pub fn find_lib(imp: Impl, lib: &str) -> Result<PathBuf> {
    let file = format!("libtopocomm-{lib}.so");
    let dirs = build_dirs();
    for d in &dirs {
        let p = d.join(imp.dir()).join(&file);
        if p.is_file() {
            return Ok(std::fs::canonicalize(&p).unwrap_or(p));
        }
    }
    let tried: Vec<String> = dirs
        .iter()
        .map(|d| d.join(imp.dir()).join(&file).display().to_string())
        .collect();
    bail!(
        "{file} for {} not found (tried {}); build it with `make -C mpi` (after `cargo build \
         --release`), or point ${} at the folder holding <mpi>/",
        imp.name(),
        tried.join(", "),
        super::MPI_BUILD_ENV
    )
}

/// The `LD_PRELOAD` value that loads the PMPI tool `tool_lib` for `imp`:
/// `<fortran bridge>:<tool>[:<existing $LD_PRELOAD>]`. The Fortran bridge
/// (`libtopocomm-fortran.so`, mpi/lib/fortran) comes first: it defines the
/// Fortran entry points (`mpi_send_`, ...) on top of the C `MPI_` functions,
/// so that the tool also sees the calls of Fortran programs (Open MPI's own
/// Fortran bindings call `PMPI_` directly). It is harmless for C programs.
/// Fails, saying to run `make -C mpi`, when the bridge is not built.
pub fn preload_value(imp: Impl, tool_lib: &Path) -> Result<String> {
    let bridge = find_lib(imp, "fortran").map_err(|e| {
        anyhow::anyhow!(
            "the Fortran bridge is needed in front of {}: {e:#}",
            tool_lib.display()
        )
    })?;
    Ok(join_preload(
        &bridge,
        tool_lib,
        std::env::var("LD_PRELOAD").ok().as_deref(),
    ))
}

fn join_preload(bridge: &Path, tool: &Path, old: Option<&str>) -> String {
    let mut v = format!("{}:{}", bridge.display(), tool.display());
    if let Some(old) = old.filter(|o| !o.trim().is_empty()) {
        v.push(':');
        v.push_str(old);
    }
    v
}

/// The launch command with `vars` exported to every rank, placed right after
/// the launcher: Open MPI `-x NAME=VALUE` (needed for ranks on other hosts;
/// local ranks would inherit the environment anyway), MPICH Hydra
/// `-genv NAME VALUE`. The launcher itself is not preloaded.
pub fn with_env(imp: Impl, cmd: &[String], vars: &[(String, String)]) -> Vec<String> {
    let mut out = vec![cmd[0].clone()];
    for (k, v) in vars {
        match imp {
            Impl::OpenMpi => {
                out.push("-x".into());
                out.push(format!("{k}={v}"));
            }
            Impl::Mpich => {
                out.push("-genv".into());
                out.push(k.clone());
                out.push(v.clone());
            }
        }
    }
    out.extend(cmd[1..].iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(from_name("mpirun.openmpi"), Some(Impl::OpenMpi));
        assert_eq!(from_name("mpiexec.mpich"), Some(Impl::Mpich));
        assert_eq!(from_name("orterun"), Some(Impl::OpenMpi));
        assert_eq!(from_name("mpiexec.hydra"), Some(Impl::Mpich));
        assert_eq!(from_name("mpirun"), None);
    }

    #[test]
    fn preload_order() {
        let (b, t) = (Path::new("/b/f.so"), Path::new("/b/t.so"));
        assert_eq!(join_preload(b, t, None), "/b/f.so:/b/t.so");
        assert_eq!(join_preload(b, t, Some("")), "/b/f.so:/b/t.so");
        assert_eq!(join_preload(b, t, Some("/x.so")), "/b/f.so:/b/t.so:/x.so");
    }

    #[test]
    fn env_flags() {
        let cmd: Vec<String> = ["mpirun", "-n", "2", "./a"].map(String::from).into();
        let vars = vec![("A".to_string(), "1".to_string())];
        assert_eq!(
            with_env(Impl::OpenMpi, &cmd, &vars),
            ["mpirun", "-x", "A=1", "-n", "2", "./a"]
        );
        assert_eq!(
            with_env(Impl::Mpich, &cmd, &vars),
            ["mpirun", "-genv", "A", "1", "-n", "2", "./a"]
        );
    }
}
