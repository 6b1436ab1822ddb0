//! `topocomm bench p2p` on this machine, quick mode: the JSON file, the
//! peers, and the clear failures for PUs this machine does not have.

use std::process::Command;

fn topocomm() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_topocomm"));
    // The MPI benchmark of this checkout (built by `make -C mpi`).
    c.env(
        "TOPOCOMM_MPI_BUILD",
        topocomm_topo::testdata::repo_root().join("mpi/build"),
    );
    c.env_remove("TOPOCOMM_TOPOLOGY");
    c
}

fn live_pus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn quick_run_writes_results_with_peers_and_limits() {
    if live_pus() < 2 {
        eprintln!("notice: fewer than 2 PUs; skipping");
        return;
    }
    let root = topocomm_topo::testdata::repo_root();
    let made = Command::new("make")
        .args(["-s", "-C"])
        .arg(root.join("mpi"))
        .status()
        .unwrap();
    assert!(made.success());
    let dir = std::env::temp_dir().join(format!("tc-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("p2p.json");
    let out = topocomm()
        .args([
            "bench", "p2p", "--quick", "--pair", "0,1", "--sizes", "8,4K",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("latency (us), PUs 0,1"), "{stdout}");
    assert!(
        stderr.contains("bench p2p: ["),
        "progress on stderr: {stderr}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let results = v["results"].as_array().unwrap();
    let has = |imp: &str, test: &str, size: u64| {
        results.iter().any(|r| {
            r["impl"] == imp
                && r["test"] == test
                && r["size"] == size
                && r["median"].as_f64().unwrap() > 0.0
                && r["ci_low"].as_f64().unwrap() <= r["median"].as_f64().unwrap()
                && r["samples"].as_array().unwrap().len() >= 5
        })
    };
    for imp in ["openmpi", "mpich"] {
        for (t, s) in [("latency", 8), ("latency", 4096), ("bw", 8), ("bw", 4096)] {
            assert!(has(imp, t, s), "{imp} {t} {s}: {results:?}");
        }
    }
    assert!(has("limit", "latency", 8) && has("limit", "bw", 4096));
    // topocomm's own transport, through the `topocomm-worker` binary.
    for (t, s) in [("latency", 8), ("bw", 4096)] {
        assert!(
            has("topocomm", t, s),
            "topocomm {t} {s}: {stdout}\n{stderr}"
        );
    }
    assert!(stdout.contains("topocomm/openmpi"), "{stdout}");
    let meta = &v["meta"];
    assert_eq!(meta["pair"], "0,1");
    assert!(meta["timer_resolution_ns"].as_f64().unwrap() > 0.0);
    assert!(meta["topology_fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("fnv1a64:"));
    assert!(v["ratios"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["den"] == "limit"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--jobs 2`: every implementation runs as two jobs, the second round in
/// the other order, and each point pools the samples of both.
#[test]
fn jobs_are_interleaved_and_their_samples_pooled() {
    if live_pus() < 2 {
        eprintln!("notice: fewer than 2 PUs; skipping");
        return;
    }
    let made = Command::new("make")
        .args(["-s", "-C"])
        .arg(topocomm_topo::testdata::repo_root().join("mpi"))
        .status()
        .unwrap();
    assert!(made.success());
    let out = topocomm()
        .args([
            "bench",
            "p2p",
            "--quick",
            "--pair",
            "0,1",
            "--sizes",
            "8",
            "--tests",
            "latency",
            "--vs",
            "openmpi",
            "--samples",
            "3",
            "--jobs",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Progress lines name the job backends in schedule order (limits between).
    let order: Vec<&str> = stderr
        .lines()
        .filter(|l| l.ends_with("..."))
        .filter_map(|l| l.split("] ").nth(1)?.split(' ').next())
        .filter(|n| *n != "limit")
        .collect();
    assert_eq!(
        order,
        ["topocomm", "openmpi", "openmpi", "topocomm"],
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["meta"]["jobs"], 2);
    for imp in ["topocomm", "openmpi"] {
        let r = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["impl"] == imp && r["test"] == "latency")
            .unwrap_or_else(|| panic!("no {imp} latency: {v}"));
        // 3 samples split in 2 jobs of 2 (rounded up), pooled: 4.
        assert_eq!(r["samples"].as_array().unwrap().len(), 4, "{imp}: {r}");
    }
    // Each limits' round is probed just before it; the jobs are not (their
    // samples carry probes of their own), and the pair's placement is
    // classed sample by sample: 2 jobs of 2 samples per implementation.
    for b in v["meta"]["backends"].as_array().unwrap() {
        let probes = b["probe_us"].as_array().map_or(0, Vec::len);
        let want = if b["backend"] == "limit" { 1 } else { 0 };
        assert_eq!(probes, want, "{b}");
    }
    let placement = &v["meta"]["placement"][0];
    assert_eq!(placement["pair"], "0,1", "{v}");
    for imp in ["topocomm", "openmpi"] {
        let n = |k: &str| placement[k][imp].as_u64().unwrap_or(0);
        assert_eq!(n("near") + n("distant"), 4, "{imp}: {placement}");
        let cut = placement["cut_us"][imp]
            .as_f64()
            .expect("a cut per implementation");
        assert!(cut > 0.0 && cut < 1000.0, "{placement}");
    }
}

#[test]
fn missing_pu_fails_clearly() {
    let out = topocomm()
        .args([
            "bench", "p2p", "--quick", "--pair", "0,4096", "--vs", "none",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("4096") && stderr.lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn class_of_a_bigger_synthetic_machine_fails_clearly() {
    // Two packages: the representative cross-package ("machine") pair uses
    // PU 8, which a small test machine does not have.
    if live_pus() > 8 {
        eprintln!("notice: this machine has more than 8 PUs; skipping");
        return;
    }
    let out = topocomm()
        .args(["--topology", "synthetic:pack:2 l3:1 core:8 pu:1"])
        .args([
            "bench", "p2p", "--quick", "--class", "machine", "--vs", "none",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("does not exist on this machine") && stderr.contains("class machine"),
        "{stderr}"
    );
    // A class absent from the topology is named too.
    let out = topocomm()
        .args(["--topology", "synthetic:pack:1 l3:1 core:2 pu:1"])
        .args(["bench", "p2p", "--class", "package", "--vs", "none"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("classes present"), "{stderr}");
}
