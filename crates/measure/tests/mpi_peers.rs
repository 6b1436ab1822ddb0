//! tc_mpibench under Open MPI and MPICH, pinned on two PUs of this machine,
//! produces valid sample lines (small sizes, few samples).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use topocomm_measure::backends::{Backend, MpiImpl};
use topocomm_measure::p2p::{P2pParams, Test};
use topocomm_measure::pin::allowed_pus;

/// The repository's mpi/build, built here if needed (make is incremental).
fn build() -> Option<PathBuf> {
    let root = topocomm_topo::testdata::repo_root();
    let ok = Command::new("make")
        .args(["-s", "-C"])
        .arg(root.join("mpi"))
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "make -C mpi failed");
    Some(root.join("mpi/build"))
}

/// Two usable PUs of this machine and the built mpi/ programs; `None`
/// (with a notice) when the machine has fewer than 2 PUs.
fn pair_and_build() -> Option<((u32, u32), PathBuf)> {
    let pus = allowed_pus().unwrap();
    if pus.len() < 2 {
        eprintln!("notice: fewer than 2 usable PUs; skipping");
        return None;
    }
    Some(((pus[0], pus[1]), build()?))
}

/// The MPIs whose launcher is installed (a notice for each absent one).
fn present_mpis() -> impl Iterator<Item = MpiImpl> {
    MpiImpl::ALL.into_iter().filter(|w| {
        let ok = have(w.mpirun());
        if !ok {
            eprintln!("notice: {} absent; skipping it", w.mpirun());
        }
        ok
    })
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn tc_mpibench_under_both_mpis() {
    let Some((pus, build)) = pair_and_build() else {
        return;
    };
    let params = P2pParams {
        tests: vec![Test::Latency, Test::Bw, Test::Bibw, Test::Msgrate],
        sizes: vec![8, 4096],
        cold: false,
        llc: 1 << 20,
        samples: 3,
        min_time_ms: 0.5,
        window: 4,
        probe: 0,
    };
    for which in present_mpis() {
        let b = Backend::Mpi {
            which,
            build: build.clone(),
            env: Vec::new(),
        };
        let run = b
            .run(pus, &params, Duration::from_secs(120), &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(run.lines.len(), 8, "{:?}", run.lines);
        for l in &run.lines {
            assert_eq!(l.implementation, which.name());
            assert_eq!(l.samples.len(), 3);
            assert!(l.samples.iter().all(|x| *x > 0.0 && x.is_finite()));
        }
        let meta = run.meta.expect("tc_mpibench reports its pinning");
        assert_eq!(meta.ranks[1].cpu, i64::from(pus.1));

        // Cold mode: rotating pools, the lines say so.
        let mut cold = params.clone();
        cold.cold = true;
        cold.tests = vec![Test::Latency];
        let run = b
            .run(pus, &cold, Duration::from_secs(120), &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            run.lines.iter().all(|l| l.cache == "cold"),
            "{:?}",
            run.lines
        );

        // Bad arguments: one line naming the argument, non-zero exit.
        let mut bad = params.clone();
        bad.cold = true;
        bad.llc = 0;
        let e = b
            .run(pus, &bad, Duration::from_secs(60), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("--llc"), "{e}");
    }
}

/// Runs an MPI job (Open MPI allowed as root) with its own Open MPI
/// session directory: the other tests here start mpiruns at the same time.
fn isolated(cmd: &mut Command) -> std::process::Output {
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let _session = topocomm_measure::ompi_session::SessionBase::isolate(cmd);
    cmd.output().unwrap()
}

/// `--probe N` follows every sample with N 8-byte ping-pongs and prints their
/// one-way time per sample (`probe_us`), under both MPIs.
#[test]
fn tc_mpibench_probe_tags_every_sample() {
    let Some((pus, build)) = pair_and_build() else {
        return;
    };
    for which in present_mpis() {
        let o = isolated(
            Command::new(which.mpirun())
                .args(["-np", "2"])
                .args(which.bind_args(pus))
                .arg(build.join(which.name()).join("tc_mpibench"))
                .args(["--tests", "latency,bw", "--sizes", "8", "--samples", "3"])
                .args(["--min-time-ms", "0.5", "--window", "4", "--probe", "10"]),
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let lines = topocomm_measure::SampleLine::parse_all(&out, which.name()).unwrap();
        assert_eq!(lines.len(), 2, "{out}");
        for l in &lines {
            let p = l.probe_us.as_ref().expect("probe_us on every line");
            assert_eq!(p.len(), 3, "{out}");
            // Positive and finite; no tighter bound: one probe is a few
            // ping-pongs, and a scheduler tick on a loaded 2-core machine
            // (4 ms, seen in CI) can land in any of them.
            assert!(p.iter().all(|x| x.is_finite() && *x > 0.0), "{p:?}");
        }
        // A bad count is one line naming the argument.
        let o = isolated(
            Command::new(which.mpirun())
                .args(["-np", "2"])
                .arg(build.join(which.name()).join("tc_mpibench"))
                .args(["--probe", "-1"]),
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("--probe"), "{err}");
    }
}
