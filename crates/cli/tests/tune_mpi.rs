//! `topocomm tune --mpi`: bad input gives
//! one-line errors; the quick tuner on a tiny grid writes a file the MPI
//! accepts, prints the side-by-side table and the read-back. Real MPIs,
//! oversubscription-safe (2 ranks on whatever PUs exist).

mod common;

use common::{build_mpi, have};
use std::process::{Command, Output};

fn topocomm(args: &[&str]) -> Output {
    Command::new("timeout")
        .args(["-k", "5", "300", env!("CARGO_BIN_EXE_topocomm")])
        .args(args)
        .env_remove("OMPI_MCA_mca_base_param_files")
        .output()
        .expect("runs")
}

fn build(which: &str) {
    build_mpi(which, &["tc_mpit_cvars", "tc_mpibench"]);
}

fn one_line_error(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "should fail: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    assert!(lines[0].contains(needle), "'{needle}' not in: {err}");
}

fn two_pus() -> bool {
    topocomm_measure::pin::allowed_pus().is_ok_and(|p| p.len() >= 2)
}

#[test]
fn bad_input_is_a_one_line_error() {
    one_line_error(
        &topocomm(&["tune", "--mpi", "intelmpi", "--quick"]),
        "--mpi 'intelmpi'",
    );
    one_line_error(
        &topocomm(&["tune", "--mpi", "openmpi", "--sizes", "4X"]),
        "--sizes",
    );
    one_line_error(
        &topocomm(&["tune", "--mpi", "mpich", "--pair", "0,0"]),
        "--pair 0,0",
    );
    one_line_error(
        &topocomm(&["tune", "--mpi", "openmpi", "--objective", "16K-4K"]),
        "--objective: '16K-4K'",
    );
    one_line_error(
        &topocomm(&[
            "tune",
            "--mpi",
            "openmpi",
            "--objective",
            "3K",
            "--sizes",
            "4K,64K",
        ]),
        "none of the measured sizes",
    );
    // A missing MPI build.
    let empty = std::env::temp_dir().join(format!("tc-tune-mpi-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    if two_pus() {
        let o = Command::new(env!("CARGO_BIN_EXE_topocomm"))
            .args(["tune", "--mpi", "openmpi", "--quick"])
            .env("TOPOCOMM_MPI_BUILD", &empty)
            .output()
            .unwrap();
        one_line_error(&o, "tc_mpibench not found");
    }
    // A preset tuned variable would make "defaults" not the defaults.
    if two_pus() && have("mpirun.mpich") {
        build("mpich");
        let o = Command::new(env!("CARGO_BIN_EXE_topocomm"))
            .args(["tune", "--mpi", "mpich", "--quick"])
            .env("UCX_RNDV_SCHEME", "get_zcopy")
            .output()
            .unwrap();
        one_line_error(&o, "$UCX_RNDV_SCHEME is set");
    }
    std::fs::remove_dir_all(&empty).ok();
}

fn quick(which: &str, out_name: &str) {
    if !two_pus() || !have(&format!("mpirun.{which}")) {
        eprintln!("notice: {which} or 2 PUs absent; skipping");
        return;
    }
    build(which);
    let dir = std::env::temp_dir().join(format!("tc-tune-mpi-{which}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(out_name);
    let json = dir.join("t.json");
    let o = topocomm(&[
        "tune",
        "--mpi",
        which,
        "--quick",
        "--samples",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    // The side-by-side table, per size, and the summary.
    assert!(stdout.contains("default") && stdout.contains("tuned") && stdout.contains("gain"));
    for size in ["4K", "64K", "1M"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("bw") && l.contains(size)),
            "{stdout}"
        );
    }
    assert!(stdout.contains("weighted bw gain over 64K-4M"), "{stdout}");
    // The file exists, says how to use it, and its values were read back.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("# Tuned shared-memory settings"), "{text}");
    assert!(text.contains("Use:") && text.contains("Verified"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "topocomm.tune-mpi/1");
    assert_eq!(v["mpi"], which);
    // 1 parameter x 1 candidate: the A/A baseline (defaults twice), that
    // candidate, and its re-measurement when a size vetoed it.
    let steps = v["search"]["steps"].as_array().unwrap();
    assert!((3..=4).contains(&steps.len()), "{}", v["search"]);
    assert_eq!(steps[0]["param"], "A/A baseline", "{}", v["search"]);
    // The acceptance rule and its A/A noise are printed.
    assert!(stdout.contains("rule: a size is slower when"), "{stdout}");
    assert!(stdout.contains("A/A noise"), "{stdout}");
    assert!(text.contains("gain [95% interval], A/A noise"), "{text}");
    let rb = v["verification"]["readback"].as_array().unwrap();
    assert!(rb.iter().all(|r| r["ok"] == true), "{rb:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn quick_tuning_openmpi_writes_an_mca_file() {
    quick("openmpi", "t.conf");
}

#[test]
fn quick_tuning_mpich_writes_an_env_file() {
    quick("mpich", "t.env");
}

/// `--verify FILE` on a file written by hand: the side-by-side table, the
/// values read back inside the MPI, exit 0 (nothing slower) or 1 (a size
/// slower: possible on a noisy machine, and still a complete report); a
/// misspelled parameter is caught by the read-back; a missing file is a
/// one-line error. The file itself is never modified.
fn verify(which: &str, name: &str, good: &str, bad: &str, value_name: &str) {
    if !two_pus() || !have(&format!("mpirun.{which}")) {
        eprintln!("notice: {which} or 2 PUs absent; skipping");
        return;
    }
    build(which);
    let dir = std::env::temp_dir().join(format!("tc-tune-verify-{which}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(name);
    std::fs::write(&f, good).unwrap();
    let fast = ["--sizes", "4K,64K", "--samples", "3", "--window", "8"];
    let run = |file: &std::path::Path| {
        let mut args = vec!["tune", "--mpi", which, "--verify", file.to_str().unwrap()];
        args.extend(fast);
        topocomm(&args)
    };
    let o = run(&f);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let code = o.status.code();
    assert!(
        code == Some(0) || code == Some(1),
        "{code:?}\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("weighted bw gain over 64K-4M"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("bw") && l.contains("64K")),
        "{stdout}"
    );
    let rb = stdout
        .lines()
        .find(|l| l.starts_with(value_name))
        .unwrap_or_else(|| panic!("no read-back line for {value_name}: {stdout}"));
    assert!(rb.ends_with("ok"), "{rb}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), good);
    // A name the MPI does not know never "takes effect".
    let g = dir.join(format!("bad-{name}"));
    std::fs::write(&g, bad).unwrap();
    let o = run(&g);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("did not take effect"), "{err}");
    one_line_error(&run(&dir.join("absent.conf")), "--verify");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn verify_checks_an_existing_openmpi_file() {
    verify(
        "openmpi",
        "v.conf",
        "# by hand\nbtl_vader_eager_limit = 8192\n",
        "btl_vader_eagre_limit = 8192\n",
        "btl_vader_eager_limit",
    );
}

#[test]
fn verify_checks_an_existing_mpich_file() {
    verify(
        "mpich",
        "v.env",
        "# by hand\nexport UCX_RNDV_THRESH=16384\n",
        "export UCX_RNDV_TRESH=16384\n",
        "UCX_RNDV_THRESH",
    );
}
