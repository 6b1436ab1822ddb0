//! The transport bootstrapped from MPI (`topocomm_mpi_init`,
//! libtopocomm-mpi.so) under the real Open MPI and MPICH: the `shm_check`
//! example verifies ring and ping-pong payloads from 1 B to 4 MiB on every
//! node rank, nothing appears in /dev/shm, and failures (a bad rules file, a
//! rank too late for the hand-off, a rank that exits) end the job with an
//! error within the bound instead of hanging. Runs oversubscribed (CI
//! machines have 2 cores).
//!
//! Prerequisites: `mpicc.<impl>`/`mpirun.<impl>` (a missing MPI is skipped
//! with a notice) and `target/release/libtopocomm.so` (`cargo build
//! --release`, or `make build`), which libtopocomm-mpi.so links.

mod common;

use common::{build_mpi, mpi_impls, output_isolated};
use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Payload sizes of shm_check (its SIZES).
const SIZES: usize = 10;

/// `mpirun.<imp>` of `shm_check ARGS` on `np` ranks, bounded by
/// `timeout -k 5 60`, with extra environment `env`.
fn shm_check(imp: &str, np: usize, env: &[(&str, &str)], args: &[&str]) -> (Output, Duration) {
    let dir = {
        // The two tests run in parallel: one make at a time on the same targets.
        static BUILD: Mutex<()> = Mutex::new(());
        let _g = BUILD.lock().unwrap_or_else(|e| e.into_inner());
        build_mpi(imp, &["shm_check", "libtopocomm-mpi.so"])
    };
    let mut c = Command::new("timeout");
    c.args(["-k", "5", "60", &format!("mpirun.{imp}")]);
    if imp == "openmpi" && np > 2 {
        c.arg("--oversubscribe");
    }
    c.args(["-n", &np.to_string()])
        .arg(dir.join("shm_check"))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("TOPOCOMM_TOPOLOGY")
        .env_remove("TOPOCOMM_RULES")
        .env_remove("TOPOCOMM_TIMEOUT")
        .env_remove("TOPOCOMM_MPI_BOOT_DELAY");
    for (k, v) in env {
        c.env(k, v);
    }
    let t = Instant::now();
    let out = output_isolated(&mut c).expect("timeout/mpirun runs");
    (out, t.elapsed())
}

/// Held by each test for its whole run: the protocol test's check that its
/// jobs left nothing in /dev/shm would otherwise see the segments of the
/// failure test's jobs, running at the same time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn shm_names() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("topocomm"))
                .collect()
        })
        .unwrap_or_default()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn mpi_bootstrap_carries_every_protocol_on_every_node_rank() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for imp in mpi_impls() {
        for np in [2usize, 4] {
            let before = shm_names();
            let (o, took) = shm_check(imp, np, &[], &[]);
            let (out, err) = text(&o);
            assert!(
                o.status.success(),
                "{imp} -n {np} failed ({:?}, {took:?}):\n{out}{err}",
                o.status
            );
            assert!(!out.contains("FAILED"), "{imp} -n {np}:\n{out}");
            for r in 0..np {
                let ring = format!("rank {r}/{np}: ring ");
                let pp = format!("rank {r}/{np}: ping-pong ");
                let count = |p: &str| {
                    out.lines()
                        .filter(|l| l.contains(p) && l.ends_with(" B ok"))
                        .count()
                };
                assert_eq!(count(&ring), SIZES, "{imp} -n {np} rank {r}:\n{out}");
                let want_pp = if r == 0 { (np - 1) * SIZES } else { SIZES };
                assert_eq!(count(&pp), want_pp, "{imp} -n {np} rank {r}:\n{out}");
            }
            assert!(
                out.contains("ring 4194304 B ok") && out.contains("ring 1 B ok"),
                "{out}"
            );
            let checks = np * SIZES + 2 * (np - 1) * SIZES;
            assert!(
                out.contains(&format!(
                    "shm_check: all {checks} checks passed on {np} ranks"
                )),
                "{imp} -n {np}:\n{out}"
            );
            let new: Vec<_> = shm_names().difference(&before).cloned().collect();
            assert!(new.is_empty(), "{imp}: new files in /dev/shm: {new:?}");
        }
    }
}

/// Asserts the job failed by itself (not killed by `timeout`) within `max`.
fn failed_in_time(imp: &str, o: &Output, took: Duration, max: Duration) {
    let (out, err) = text(o);
    let code = o.status.code();
    assert!(!o.status.success(), "{imp}: should fail:\n{out}{err}");
    assert!(
        !matches!(code, Some(124) | Some(137) | None) && took < max,
        "{imp}: hung or was killed ({code:?}, {took:?}):\n{out}{err}"
    );
}

#[test]
fn mpi_bootstrap_failures_end_the_job_on_every_rank_with_the_cause() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for imp in mpi_impls() {
        // Node rank 0 cannot create the segment: every rank reports why.
        let (o, took) = shm_check(imp, 4, &[("TOPOCOMM_RULES", "/nonexistent/r.toml")], &[]);
        failed_in_time(imp, &o, took, Duration::from_secs(30));
        let (_, err) = text(&o);
        for r in 0..4 {
            let line = err
                .lines()
                .find(|l| l.starts_with(&format!("shm_check: rank {r}: ")))
                .unwrap_or_else(|| panic!("{imp}: no error line from rank {r}:\n{err}"));
            assert!(
                line.contains("rank 0 (node rank 0)") && line.contains("/nonexistent/r.toml"),
                "{imp}: {line}"
            );
        }

        // Node rank 2 comes 3 s late for a hand-off bounded to 1 s.
        let env = [
            ("TOPOCOMM_TIMEOUT", "1"),
            ("TOPOCOMM_MPI_BOOT_DELAY", "2:3"),
        ];
        let (o, took) = shm_check(imp, 4, &env, &[]);
        failed_in_time(imp, &o, took, Duration::from_secs(30));
        let (_, err) = text(&o);
        let n = err
            .lines()
            .filter(|l| l.contains("(first: node rank 2) did not fetch the segment within 1 s"))
            .count();
        assert_eq!(n, 4, "{imp}: every rank names the late rank:\n{err}");

        // A rank exits before the bootstrap: mpirun ends the job.
        let (o, took) = shm_check(imp, 4, &[], &["--exit-rank", "2"]);
        failed_in_time(imp, &o, took, Duration::from_secs(50));
    }
}
