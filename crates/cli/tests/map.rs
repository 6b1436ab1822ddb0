//! `topocomm map` end to end: output formats, evaluation, bad input.

use std::path::PathBuf;
use std::process::Output;

mod common;

const TOPO: &str = "synthetic:pack:2 core:2 pu:1";

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tc-cli-map-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `text` to a file of its own: the tests of this binary run in
/// parallel threads, and rewriting a file another test's `topocomm` is
/// reading would race (a truncated matrix).
fn write(name: &str, text: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = dir().join(format!("{n}-{name}"));
    std::fs::write(&p, text).unwrap();
    p
}

fn run(args: &[&str]) -> Output {
    common::topocomm(args)
}

/// Two interleaved pairs: (0,2) and (1,3) talk.
fn pairs() -> PathBuf {
    write(
        "pairs.csv",
        "src,dst,bytes,msgs\n0,2,1000000,10\n2,0,1000000,10\n1,3,1000000,10\n3,1,1000000,10\n",
    )
}

#[test]
fn perm_output_and_evaluate_round_trip() {
    let input = pairs();
    let out = run(&["map", input.to_str().unwrap(), "--topology", TOPO]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<(u32, u32)> = text
        .lines()
        .map(|l| {
            let f: Vec<u32> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            (f[0], f[1])
        })
        .collect();
    assert_eq!(lines.len(), 4);
    // Same package = PUs {0,1} or {2,3}.
    assert_eq!(lines[0].1 / 2, lines[2].1 / 2, "{text}");
    assert_eq!(lines[1].1 / 2, lines[3].1 / 2, "{text}");
    let summary = String::from_utf8(out.stderr).unwrap();
    for b in ["packed", "round-robin", "scatter", "random"] {
        assert!(summary.contains(b), "{summary}");
    }
    let perm = write("m.perm", &text);
    let ev = run(&[
        "map",
        input.to_str().unwrap(),
        "--topology",
        TOPO,
        "--evaluate",
        perm.to_str().unwrap(),
        "--format",
        "json",
        "-q",
    ]);
    assert!(
        ev.status.success(),
        "{}",
        String::from_utf8_lossy(&ev.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&ev.stdout).unwrap();
    assert_eq!(v["strategy"], "given");
    assert_eq!(v["ranks"].as_array().unwrap().len(), 4);
    let cost = v["score"]["cost_us"].as_f64().unwrap();
    let packed = v["baselines"][0]["score"]["cost_us"].as_f64().unwrap();
    assert!(cost < packed, "{cost} vs {packed}");
}

#[test]
fn launcher_formats() {
    let input = pairs();
    let i = input.to_str().unwrap();
    let rf = String::from_utf8(
        run(&["map", i, "--topology", TOPO, "--format", "rankfile", "-q"]).stdout,
    )
    .unwrap();
    // A synthetic (not live) one-node target is `localhost`; slot= is the
    // PU OS index, the same numbers as the perm output.
    let perm = String::from_utf8(run(&["map", i, "--topology", TOPO, "-q"]).stdout).unwrap();
    let pus: Vec<&str> = perm
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    let body: Vec<&str> = rf.lines().filter(|l| !l.starts_with('#')).collect();
    let want: Vec<String> = pus
        .iter()
        .enumerate()
        .map(|(r, p)| format!("rank {r}=localhost slot={p}"))
        .collect();
    assert_eq!(body, want, "{rf}");
    assert!(rf.contains("rmaps_rank_file_physical 1"), "{rf}");
    let hy =
        String::from_utf8(run(&["map", i, "--topology", TOPO, "--format", "hydra", "-q"]).stdout)
            .unwrap();
    let body: Vec<&str> = hy.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        body,
        [format!("localhost:4 binding=user:{}", pus.join(","))],
        "{hy}"
    );
    let sl = String::from_utf8(
        run(&[
            "map",
            i,
            "--topology",
            "synthetic:pack:1 core:2 pu:1",
            "--nodes",
            "2",
            "--format",
            "slurm",
            "-q",
        ])
        .stdout,
    )
    .unwrap();
    assert!(sl.contains("--cpu-bind=map_cpu:"), "{sl}");
    assert_eq!(
        sl.lines().filter(|l| l.starts_with("node")).count(),
        4,
        "{sl}"
    );
    let hf = write("hosts", "alpha topology=synthetic:pack:1 core:2 pu:1\nbeta slots=0-1 topology=synthetic:pack:1 core:2 pu:1\n");
    let rf2 = String::from_utf8(
        run(&[
            "map",
            i,
            "--hostfile",
            hf.to_str().unwrap(),
            "--format",
            "rankfile",
            "-q",
        ])
        .stdout,
    )
    .unwrap();
    assert!(
        rf2.contains("=alpha slot=") && rf2.contains("=beta slot="),
        "{rf2}"
    );
}

#[test]
fn bad_input_is_one_line_with_position() {
    let bad = write("bad.csv", "0,1,10,1\n1,0,nan,1\n");
    let out = run(&["map", bad.to_str().unwrap(), "--topology", TOPO]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.csv:2:5:"), "{err}");
    let big = write("big.csv", "0,9,10,1\n");
    let out = run(&["map", big.to_str().unwrap(), "--topology", TOPO]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        !out.status.success() && err.contains("--oversubscribe"),
        "{err}"
    );
    let out = run(&[
        "map",
        big.to_str().unwrap(),
        "--topology",
        TOPO,
        "--oversubscribe",
        "-q",
    ]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 10);
    let out = run(&[
        "map",
        big.to_str().unwrap(),
        "--topology",
        TOPO,
        "--slots",
        "0,9",
    ]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success() && err.contains("PU 9"), "{err}");
}

#[test]
fn objectives_are_printed_with_every_baseline() {
    let p = pairs();
    for (flag, name, unit) in [
        ("--objective", "hop-bytes", "B.hops"),
        ("--objective", "max-congestion", "B"),
        ("--metric", "bytes", "us"),
    ] {
        let out = run(&["map", p.to_str().unwrap(), "--topology", TOPO, flag, name]);
        assert!(out.status.success(), "{name}: {:?}", out);
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains(&format!("objective {name} ({unit};")),
            "{name}: {err}"
        );
        for b in ["packed", "round-robin", "scatter", "random"] {
            assert!(
                err.lines().any(|l| l.starts_with(b)),
                "{name}: no {b} row: {err}"
            );
        }
    }
    // (0,2) and (1,3) talk: hop-bytes puts each pair in one package (2
    // links apart): 4 directed edges x 1e6 B x 2 hops.
    let out = run(&[
        "map",
        p.to_str().unwrap(),
        "--topology",
        TOPO,
        "--objective",
        "hop-bytes",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["objective"], "hop-bytes");
    assert_eq!(v["score"]["objective"], 8e6, "{}", v["score"]);
    assert_eq!(v["score"]["hop_bytes"], 8e6);
    let out = run(&[
        "map",
        p.to_str().unwrap(),
        "--topology",
        TOPO,
        "--objective",
        "hops",
    ]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--objective") && err.contains("hop-bytes"),
        "{err}"
    );
    let out = run(&[
        "map",
        p.to_str().unwrap(),
        "--topology",
        TOPO,
        "--time-limit=-1",
    ]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        !out.status.success() && err.contains("--time-limit"),
        "{err}"
    );
}

#[test]
fn bench_map_on_the_synthetic_clusters() {
    // An empty topology directory: only the three synthetic clusters, 5
    // patterns each.
    let empty = dir().join("no-topologies");
    std::fs::create_dir_all(&empty).unwrap();
    let json = dir().join("bench-map.json");
    let out = run(&[
        "bench",
        "map",
        "--topologies",
        empty.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("hop-bytes: geometric mean"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "topocomm.bench-map/1");
    assert_eq!(v["ranks_per_pu"], 1, "{v}");
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 15, "{v}");
    for c in cases {
        for s in c["scores"].as_array().unwrap() {
            let tc = s["topocomm"].as_f64().unwrap();
            // topocomm's own algorithm beats packed on every pattern here
            // (all are numbered against the slot order), and round-robin.
            assert!(tc > 0.0 && tc <= s["packed"].as_f64().unwrap(), "{c}");
            assert!(tc <= s["round_robin"].as_f64().unwrap(), "{c}");
            if v["scotch"] == true {
                assert!(s["scotch"].as_f64().is_some(), "{c}");
            }
        }
    }
}

#[test]
fn bench_map_refuses_a_bad_ranks_per_pu_in_one_line() {
    for (args, want) in [
        (
            &["--ranks-per-pu", "0"][..],
            "--ranks-per-pu 0: expected 1 to 64",
        ),
        (
            &["--ranks-per-pu", "65"][..],
            "--ranks-per-pu 65: expected 1 to 64",
        ),
        (&["--ranks-per-pu", "x"][..], "--ranks-per-pu"),
        (&["--ranks-per-pu", "2", "--scale", "100"][..], "--scale"),
    ] {
        let mut a = vec!["bench", "map", "-q"];
        a.extend_from_slice(args);
        let out = run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
