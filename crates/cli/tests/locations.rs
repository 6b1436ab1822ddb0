//! hwloc locations on the command line (issue 18, docs/concepts/locations.md):
//! `bench p2p --pair core:0,core:1`, `run --bind pu:0-1`, `topo --pair`,
//! and one clear line for locations that do not exist here.

use std::process::{Command, Output};
use topocomm_topo::{load, Machine, ObjectKind};

fn topocomm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topocomm"))
        .env_remove("TOPOCOMM_TOPOLOGY")
        .env("TOPOCOMM_AUTOTUNE", "0")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = topocomm(args);
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{args:?}: {o}\n{e}");
    o.into_owned()
}

/// Exit code 2 and one stderr line holding every `want`.
fn fails(args: &[&str], want: &[&str]) {
    let out = topocomm(args);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
    assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
    for w in want {
        assert!(e.contains(w), "{args:?}: want {w:?} in {e}");
    }
}

/// First PU (topology order) of every core of the live machine, computed
/// from the model directly rather than through the location resolver.
fn core_firsts(m: &Machine) -> Vec<u32> {
    m.objects
        .iter()
        .filter(|o| o.kind == ObjectKind::Core && !o.cpuset.is_empty())
        .map(|o| {
            m.pus
                .iter()
                .find(|p| o.cpuset.contains(p.os_index))
                .unwrap()
                .os_index
        })
        .collect()
}

#[test]
fn bench_p2p_pair_of_cores() {
    let m = load(&"live".parse().unwrap()).unwrap();
    let cores = core_firsts(&m);
    if cores.len() < 2 {
        eprintln!("notice: fewer than 2 cores; skipping");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tc-loc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("p2p.json");
    let j = json.to_str().unwrap();
    let out = ok(&[
        "bench",
        "p2p",
        "--quick",
        "--pair",
        "core:0,core:1",
        "--vs",
        "none",
        "--tests",
        "latency",
        "--sizes",
        "8",
        "--json",
        j,
    ]);
    let pair = format!("{},{}", cores[0], cores[1]);
    assert!(out.contains(&format!("PUs {pair} ")), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["meta"]["pair"], pair.as_str());
    let _ = std::fs::remove_dir_all(&dir);
    fails(
        &[
            "bench",
            "p2p",
            "--quick",
            "--pair",
            "core:0,core:4096",
            "--vs",
            "none",
        ],
        &["--pair", "core:4096 does not exist here", "cores 0-"],
    );
}

#[test]
fn run_binds_ranks_over_a_pu_range() {
    let m = load(&"live".parse().unwrap()).unwrap();
    if m.pus.len() < 2 {
        eprintln!("notice: fewer than 2 PUs; skipping");
        return;
    }
    let probe = "echo rank $TOPOCOMM_RANK $(grep Cpus_allowed_list /proc/self/status)";
    let out = ok(&[
        "run", "-n", "2", "--bind", "pu:0-1", "--", "sh", "-c", probe,
    ]);
    for r in 0..2 {
        let want = format!("rank {r} Cpus_allowed_list: {}", m.pus[r].os_index);
        assert!(out.lines().any(|l| l == want), "{want}: {out}");
    }
    // Reversed per-rank list: rank 0 on logical PU 1.
    let out = ok(&[
        "run",
        "-n",
        "2",
        "--bind",
        "pu:1,pu:0",
        "--",
        "sh",
        "-c",
        probe,
    ]);
    let want = format!("rank 0 Cpus_allowed_list: {}", m.pus[1].os_index);
    assert!(out.lines().any(|l| l == want), "{out}");
    fails(
        &["run", "-n", "2", "--bind", "core:4096", "--", "true"],
        &["--bind core:4096", "does not exist here"],
    );
    fails(
        &["run", "-n", "2", "--bind", "bogus:1", "--", "true"],
        &["--bind 'bogus:1'", "unknown type 'bogus'"],
    );
}

#[test]
fn topo_pair_of_locations_on_a_synthetic_machine() {
    let t = "synthetic:pack:2 core:2 pu:2";
    let class = |pair: &str| ok(&["--topology", t, "topo", "--pair", pair]);
    assert_eq!(class("pu:0,pu:1"), "smt\n");
    // The same class as the OS-index pair the locations name.
    for (loc, os) in [
        ("core:0,core:1", "0,2"),
        ("package:0,package:1.pu:1", "0,5"),
        ("core:P#1,pu:7", "2,7"),
        ("0x1,0x40", "0,6"),
    ] {
        assert_eq!(class(loc), class(os), "{loc}");
    }
    assert_ne!(class("core:0,core:1"), class("core:0,core:2"));
    fails(
        &["--topology", t, "topo", "--pair", "core:0,numa:3"],
        &["--pair", "numa:3 does not exist here"],
    );
    fails(
        &["--topology", t, "topo", "--pair", "core:0"],
        &["--pair", "expected two locations"],
    );
}
