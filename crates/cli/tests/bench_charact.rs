//! Quick-mode runs of `topocomm bench cache|placement|matrix` on this
//! machine, checked for sanity, plus the errors for PUs/classes it lacks.

use serde_json::Value;

mod common;
use common::{fails_with, topocomm};

fn ok_json(args: &[&str]) -> Value {
    let out = topocomm(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn live_pus() -> usize {
    let m: Value = ok_json(&["topo", "--json"]);
    m["machine"]["pus"]
        .as_array()
        .or_else(|| m["pus"].as_array())
        .map(|a| a.len())
        .unwrap_or(1)
}

fn medians(points: &[Value], class: &str, state: &str, op: &str) -> Vec<(u64, f64)> {
    points
        .iter()
        .filter(|p| p["class"] == class && p["state"] == state && p["op"] == op)
        .map(|p| {
            (
                p["size"].as_u64().unwrap(),
                p["summary"]["median"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn cache_quick_is_sane() {
    let r = ok_json(&[
        "bench",
        "cache",
        "--quick",
        "--json",
        "--classes",
        "self,none",
        "--states",
        "M,I",
    ]);
    assert_eq!(r["schema"], "topocomm.bench-cache/1");
    assert!(r["meta"]["timer"]["resolution_ns"].as_f64().unwrap() > 0.0);
    let pts = r["points"].as_array().unwrap();
    assert!(pts
        .iter()
        .all(|p| p["summary"]["median"].as_f64().unwrap() > 0.0));
    assert!(pts
        .iter()
        .all(|p| !p["samples"].as_array().unwrap().is_empty()));
    let load_m = medians(pts, "self", "M", "load");
    let load_i = medians(pts, "none", "I", "load");
    let chase_m = medians(pts, "self", "M", "chase");
    let chase_i = medians(pts, "none", "I", "chase");
    let l1 = |v: &[(u64, f64)]| v.iter().find(|x| x.0 == 16 * 1024).unwrap().1;
    let dram = |v: &[(u64, f64)]| v.last().unwrap().1;
    // L1-sized hits beat DRAM-sized misses, in throughput and in latency.
    assert!(l1(&load_m) > dram(&load_i), "{load_m:?} vs {load_i:?}");
    assert!(dram(&chase_i) > l1(&chase_m), "{chase_i:?} vs {chase_m:?}");
    assert!(dram(&chase_i) > 20.0, "DRAM chase {chase_i:?} ns");
}

#[test]
fn placement_quick_converges() {
    let r = ok_json(&["bench", "placement", "--quick", "--json", "--grid", "8"]);
    let runs = r["runs"].as_array().unwrap();
    assert!(!runs.is_empty());
    for x in runs {
        assert!(x["cg_relative_residual"].as_f64().unwrap() < 1e-6, "{x}");
        assert!(x["cg_max_error"].as_f64().unwrap() < 1e-4, "{x}");
        assert!(x["cg"]["median"].as_f64().unwrap() > 0.0);
        assert!(x["triad"]["median"].as_f64().unwrap() > 0.0);
    }
    for k in r["per_k"].as_array().unwrap() {
        assert!(k["cg_best_over_worst"].as_f64().unwrap() >= 1.0);
    }
}

#[test]
fn matrix_quick_files_resume_and_costs() {
    if live_pus() < 2 {
        eprintln!("notice: one PU only; skipping the pair matrix test");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tc-matrix-test-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let costs = dir.join("costs.json");
    let r = ok_json(&[
        "bench",
        "matrix",
        "--quick",
        "--json",
        "--per-class",
        "1",
        "--out",
        d,
        "--costs-out",
        costs.to_str().unwrap(),
    ]);
    assert_eq!(r["complete"], true);
    for p in r["pairs"].as_array().unwrap() {
        let lat = p["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "c2c_latency")
            .unwrap();
        let us = lat["summary"]["median"].as_f64().unwrap() / 1000.0;
        assert!(us > 0.0 && us < 10.0, "cross-core latency {us} us");
    }
    let png = std::fs::read(dir.join("heatmap-c2c_latency.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let svg = std::fs::read_to_string(dir.join("heatmap-c2c_latency.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    let csv = std::fs::read_to_string(dir.join("matrix.csv")).unwrap();
    assert!(csv.lines().count() >= 2);
    let c: Value = serde_json::from_str(&std::fs::read_to_string(&costs).unwrap()).unwrap();
    let classes = c["classes"].as_object().unwrap();
    assert!(!classes.is_empty());
    for v in classes.values() {
        assert!(v["latency_us"].as_f64().unwrap() > 0.0);
        assert!(v["bandwidth_gbs"].as_f64().unwrap() > 0.0);
    }
    // Resuming a complete file measures nothing new; other parameters are refused.
    let file = dir.join("matrix.json");
    let f = file.to_str().unwrap();
    let again = ok_json(&[
        "bench",
        "matrix",
        "--quick",
        "--json",
        "--per-class",
        "1",
        "--out",
        d,
        "--resume",
        f,
    ]);
    assert_eq!(again["pairs"], r["pairs"]);
    fails_with(
        &[
            "bench",
            "matrix",
            "--quick",
            "--per-class",
            "1",
            "--samples",
            "3",
            "--out",
            d,
            "--resume",
            f,
        ],
        "other parameters",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn absent_pus_and_classes_are_errors() {
    fails_with(
        &[
            "--topology",
            "synthetic:pack:4 core:8 pu:1",
            "bench",
            "matrix",
            "--quick",
        ],
        "does not have",
    );
    fails_with(
        &[
            "--topology",
            "synthetic:pack:4 core:8 pu:1",
            "bench",
            "cache",
            "--quick",
        ],
        "does not have",
    );
    fails_with(
        &[
            "--topology",
            "synthetic:pack:4 core:8 pu:1",
            "bench",
            "placement",
            "--quick",
        ],
        "does not have",
    );
    fails_with(
        &["bench", "cache", "--quick", "--classes", "network"],
        "not present",
    );
    fails_with(&["bench", "matrix", "--quick", "--pus", "0,4096"], "4096");
    fails_with(&["bench", "placement", "--workers", "4096"], "4096");
    fails_with(&["bench", "cache", "--states", "Q"], "unknown cache state");
}
