//! Helpers shared by the CLI integration tests: run the freshly built
//! `topocomm` as a user would (without a topology inherited from the
//! environment) and check its outcome.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::process::{Command, Output};
use topocomm_measure::ompi_session::SessionBase;

/// Runs `cmd` to its end with an Open MPI session directory of its own:
/// tests run in parallel, and Open MPI 4.1's mpiruns of one user race on
/// the shared one (`topocomm_measure::ompi_session` says how). Tests that
/// start mpirun themselves or behind `topocomm accel`/`trace` (which exec
/// it) go through here; `topocomm` commands that start their jobs through
/// `topocomm_measure::procrun` (bench, tune, report) isolate each job
/// themselves.
pub fn output_isolated(cmd: &mut Command) -> std::io::Result<Output> {
    let _session = SessionBase::isolate(cmd);
    cmd.output()
}

/// Runs `topocomm ARGS` and returns its output.
pub fn topocomm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topocomm"))
        .args(args)
        .env_remove("TOPOCOMM_TOPOLOGY")
        .output()
        .expect("topocomm runs")
}

/// Runs `topocomm ARGS`, which must succeed.
pub fn ok(args: &[&str]) -> Output {
    let out = topocomm(args);
    assert!(
        out.status.success(),
        "topocomm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `topocomm ARGS`, which must fail with exactly one error line
/// containing `needle`.
pub fn fails_with(args: &[&str], needle: &str) {
    let out = topocomm(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(err.contains(needle), "{args:?}: '{needle}' not in: {err}");
    assert_eq!(
        err.trim().lines().filter(|l| l.contains("error")).count(),
        1,
        "{err}"
    );
}

/// Whether `prog` is on the PATH.
pub fn have(prog: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {prog}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The MPI implementations (`openmpi`, `mpich`) whose `mpicc.<impl>` and
/// `mpirun.<impl>` are installed; prints a skip notice for each missing one.
pub fn mpi_impls() -> Vec<&'static str> {
    ["openmpi", "mpich"]
        .into_iter()
        .filter(|i| {
            let ok = have(&format!("mpicc.{i}")) && have(&format!("mpirun.{i}"));
            if !ok {
                eprintln!(
                    "notice: mpicc.{i}/mpirun.{i} not found, skipping {i} (scripts/setup.sh installs it)"
                );
            }
            ok
        })
        .collect()
}

/// Builds `mpi/build/<imp>/<target>` for each target (make is incremental)
/// and returns `mpi/build/<imp>`.
pub fn build_mpi(imp: &str, targets: &[&str]) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../mpi");
    let paths: Vec<String> = targets.iter().map(|t| format!("build/{imp}/{t}")).collect();
    let out = Command::new("make")
        .arg("-C")
        .arg(&dir)
        .args(&paths)
        .output()
        .expect("make runs");
    assert!(
        out.status.success(),
        "make -C mpi {} failed:\n{}{}",
        paths.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("build").join(imp)
}

/// Runs `topocomm ARGS` with extra environment variables (and without an
/// inherited topology or launcher local rank unless given here).
pub fn topocomm_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_topocomm"));
    c.args(args);
    for v in [
        "TOPOCOMM_TOPOLOGY",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "SLURM_LOCALID",
    ] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied()).output().expect("topocomm runs")
}

/// Bound on every MPI run of the tests (a deadlock must fail the test, not
/// hang it).
pub const MPI_TIMEOUT_S: &str = "120";

/// `topocomm`, bounded by `timeout` (a deadlocked MPI job fails the test
/// instead of hanging it; mpirun then kills its ranks).
pub fn topocomm_bounded() -> Command {
    let mut c = Command::new("timeout");
    c.args(["-k", "5", MPI_TIMEOUT_S, env!("CARGO_BIN_EXE_topocomm")]);
    c
}

/// `mpirun.<imp>` with `np` ranks (oversubscribed), env vars given to every
/// rank.
pub fn mpirun_argv(imp: &str, np: usize, env: &[(&str, &str)], prog: &[String]) -> Vec<String> {
    let mut v: Vec<String> = vec![format!("mpirun.{imp}")];
    if imp == "openmpi" {
        v.extend(["--oversubscribe".into(), "-np".into(), np.to_string()]);
        for (k, val) in env {
            v.extend(["-x".into(), format!("{k}={val}")]);
        }
    } else {
        v.extend(["-n".into(), np.to_string()]);
        for (k, val) in env {
            v.extend(["-genv".into(), k.to_string(), val.to_string()]);
        }
    }
    v.extend(prog.iter().cloned());
    v
}

/// Runs a command (Open MPI allowed as root), asserting success.
pub fn run_ok(cmd: &mut Command) -> Output {
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = output_isolated(cmd).expect("spawn");
    assert!(
        out.status.success(),
        "{:?} failed ({}):\n{}{}",
        cmd,
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
