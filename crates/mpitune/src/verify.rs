//! Proof that an exported file takes effect in the real MPI:
//! - Open MPI: `mpirun --tune FILE` runs tc_mpit_cvars (MPI_T), which reads
//!   each MCA parameter back from inside the library; `ompi_info` with
//!   `OMPI_MCA_mca_base_envar_file_prefix=FILE` names the file as source;
//! - MPICH: the file is sourced by `sh`, then `mpirun.mpich` runs
//!   tc_mpit_cvars: MPIR_CVAR_* values are read back through MPI_T; UCX_*
//!   variables are not MPI_T variables, so the check is that UCX parsed them
//!   (an unknown name draws UCX's "unused env variable" warning, a bad value
//!   an "Invalid value" error; both fail the check). Their effect shows in
//!   the measured default-vs-tuned table.

use crate::space::Layer;
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use topocomm_measure::backends::MpiImpl;
use topocomm_measure::procrun::{last_error_line, run_bounded};

/// One value of the file, as the MPI reports it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReadBack {
    pub name: String,
    pub expected: String,
    /// What MPI_T reported; `None` when the variable is not an MPI_T one.
    pub read: Option<String>,
    /// `MPI_T`, `UCX parser` or `not found`.
    pub how: String,
    pub ok: bool,
}

/// Parses tc_mpit_cvars output (`name=value` lines; ranks may repeat).
pub fn parse_cvars(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for l in text.lines() {
        if let Some((k, v)) = l.trim().split_once('=') {
            let name_ok = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if name_ok && !out.iter().any(|(kk, _)| kk == k) {
                out.push((k.to_string(), v.to_string()));
            }
        }
    }
    out
}

fn same_value(expected: &str, read: &str) -> bool {
    expected == read
        || matches!((expected.parse::<u64>(), read.parse::<u64>()), (Ok(a), Ok(b)) if a == b)
}

/// Runs the MPI on the file and checks every value.
pub fn verify_file(
    which: MpiImpl,
    layer: Layer,
    build: &Path,
    file: &Path,
    entries: &[(String, String)],
) -> Result<Vec<ReadBack>, String> {
    let bin = build.join(which.name()).join("tc_mpit_cvars");
    if !bin.is_file() {
        return Err(format!(
            "{} not found; build it with `make -C mpi`",
            bin.display()
        ));
    }
    let file = file
        .canonicalize()
        .map_err(|e| format!("{}: {e}", file.display()))?;
    // Names MPI_T knows: MCA parameters (Open MPI; the env list under pml
    // ucx), MPIR_CVAR_* (MPICH).
    let mpit: Vec<(String, String)> = match layer {
        Layer::Vader => entries.to_vec(),
        Layer::OmpiUcx => vec![(
            "mca_base_env_list".to_string(),
            entries
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(";"),
        )],
        Layer::MpichUcx => entries
            .iter()
            .filter(|(k, _)| k.starts_with("MPIR_CVAR_"))
            .cloned()
            .collect(),
    };
    let mut names: Vec<String> = mpit.iter().map(|(k, _)| k.clone()).collect();
    if names.is_empty() {
        // Still run the job: it proves the file sources and UCX accepts it.
        names.push("MPIR_CVAR_CH4_NETMOD".into());
    }
    let cmd = match which {
        MpiImpl::OpenMpi => {
            let mut c = Command::new(which.mpirun());
            c.args(["-n", "2", "--oversubscribe", "--tune"])
                .arg(&file)
                .arg(&bin)
                .args(&names)
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            c
        }
        MpiImpl::Mpich => {
            // Two ranks: UCX endpoints (and their config) are set up.
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg("set -e; . \"$1\"; shift; exec \"$@\"")
                .arg("sh")
                .arg(&file)
                .args([which.mpirun(), "-n", "2"])
                .arg(&bin)
                .args(&names)
                .env("UCX_WARN_UNUSED_ENV_VARS", "y");
            c
        }
    };
    let out = run_bounded(cmd, "read-back", Duration::from_secs(60)).map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "read-back: the MPI job under {} failed ({}): {}",
            file.display(),
            out.status,
            last_error_line(&out.stderr)
        ));
    }
    let got = parse_cvars(&out.stdout);
    let mut res = Vec::new();
    for (k, v) in &mpit {
        let read = got.iter().find(|(n, _)| n == k).map(|(_, r)| r.clone());
        let ok = read.as_deref().is_some_and(|r| same_value(v, r));
        res.push(ReadBack {
            name: k.clone(),
            expected: v.clone(),
            how: if read.is_some() { "MPI_T" } else { "not found" }.into(),
            read,
            ok,
        });
    }
    if which == MpiImpl::Mpich {
        for (k, v) in entries.iter().filter(|(k, _)| k.starts_with("UCX_")) {
            let short = k.trim_start_matches("UCX_");
            // UCX logs to stdout unless told otherwise; look at both.
            let rejected = out.stderr.lines().chain(out.stdout.lines()).any(|l| {
                (l.contains("unused env variable") && l.contains(k.as_str()))
                    || (l.contains("Invalid value") && l.contains(short))
            });
            res.push(ReadBack {
                name: k.clone(),
                expected: v.clone(),
                read: None,
                how: "UCX parser".into(),
                ok: !rejected,
            });
        }
    }
    Ok(res)
}

/// `ompi_info` run with `OMPI_MCA_mca_base_envar_file_prefix=FILE`: each
/// parameter's current value and its data source (`file (FILE:LINE)`).
pub fn ompi_info_sources(file: &Path, names: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut c = Command::new("ompi_info");
    c.args(["--all", "--parsable"])
        .env(crate::export::OPENMPI_FILE_VAR, file);
    let out = run_bounded(c, "ompi_info", Duration::from_secs(60)).map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "ompi_info failed ({}): {}",
            out.status,
            last_error_line(&out.stderr)
        ));
    }
    // mca:btl:vader:param:btl_vader_eager_limit:value:16384
    // mca:btl:vader:param:btl_vader_eager_limit:source:file (/tmp/f:3)
    let mut res = Vec::new();
    for n in names {
        let find = |what: &str| {
            let key = format!(":param:{n}:{what}:");
            out.stdout
                .lines()
                .find_map(|l| l.split_once(&key).map(|(_, v)| v.to_string()))
        };
        if let (Some(v), Some(s)) = (find("value"), find("source")) {
            res.push((format!("{n}={v}"), s));
        }
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cvar_lines_are_deduplicated_and_compared_as_numbers() {
        let t = "btl_vader_eager_limit=16384\nbtl_vader_eager_limit=16384\nnoise\nx y=1\n";
        assert_eq!(
            parse_cvars(t),
            vec![("btl_vader_eager_limit".to_string(), "16384".to_string())]
        );
        assert!(same_value("016384", "16384"));
        assert!(same_value("none", "none"));
        assert!(!same_value("none", "cma"));
    }
}
