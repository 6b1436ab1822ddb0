//! `topocomm model` and `topocomm tune` on this machine: quick runs with
//! real measurements, checked for structure (the rules parse and load in
//! `plan` and `run`, every class has a section, the verification ran), and
//! bad input. Whether tuned rules are faster is a benchmark claim
//! (`topocomm tune`), not asserted here.

use serde_json::Value;
use std::path::PathBuf;

mod common;
use common::{fails_with, ok};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tc-tune-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Classes present (from `plan --json`, which lists them plus `default`).
fn classes() -> Vec<String> {
    let out = ok(&["plan", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class"].as_str().unwrap().to_string())
        .filter(|c| c != "default")
        .collect()
}

#[test]
fn tune_quick_writes_rules_the_transport_reads() {
    let classes = classes();
    if classes.is_empty() {
        eprintln!("skipped: a single PU, no pair to tune");
        return;
    }
    let d = tmp("quick");
    let rules = d.join("rules.toml");
    let json = d.join("tune.json");
    let start = std::time::Instant::now();
    ok(&[
        "tune",
        "--quick",
        "--mode",
        "both",
        "--sizes",
        "4K,256K,2M",
        "--rounds",
        "1",
        "--out",
        rules.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    eprintln!("tune --quick took {:.1} s", start.elapsed().as_secs_f64());
    let text = std::fs::read_to_string(&rules).unwrap();
    for c in &classes {
        assert!(text.contains(&format!("[{c}]")), "no [{c}] in:\n{text}");
    }
    // The transport's own readers accept it.
    let out = ok(&["plan", "--rules", rules.to_str().unwrap(), "--json"]);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["source"], rules.to_str().unwrap());
    ok(&[
        "run",
        "-n",
        "2",
        "--rules",
        rules.to_str().unwrap(),
        "--",
        "true",
    ]);
    // Structure of the results.
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["schema"], "topocomm.tune/1");
    let cs = r["classes"].as_array().unwrap();
    assert_eq!(cs.len(), classes.len());
    for c in cs {
        let grid = &c["grid"];
        let model = &c["model"];
        // The grid measured every candidate of the quick space (no budget hit).
        assert_eq!(
            grid["jobs"].as_u64().unwrap() as usize,
            r["grid_size"].as_u64().unwrap() as usize
        );
        assert_eq!(grid["skipped"], 0);
        // The model search measured fewer sets than the grid.
        assert!(model["jobs"].as_u64().unwrap() < grid["jobs"].as_u64().unwrap());
        assert!(model["fit"].is_object());
        let names: Vec<&str> = c["verified"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        for n in ["defaults", "global", "grid", "model"] {
            assert!(names.contains(&n), "{names:?}");
        }
        for v in c["verified"].as_array().unwrap() {
            let pts = v["points"].as_array().unwrap();
            assert_eq!(pts.len(), 3, "{v}");
            for p in pts {
                assert!(p["median"].as_f64().unwrap() > 0.0);
                assert!(p["ci_low"].as_f64().unwrap() <= p["ci_high"].as_f64().unwrap());
            }
        }
        // The written section is the chosen verified set's.
        let chosen = c["chosen"].as_str().unwrap();
        let v = c["verified"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == chosen)
            .unwrap();
        assert_eq!(c["tuned"], v["params"]);
        // A search's section is its assembled one.
        assert_eq!(
            c["verified"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == "grid")
                .unwrap()["params"],
            grid["assembled"]["params"]
        );
        assert!(!c["ratios"].as_array().unwrap().is_empty());
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn model_predicts_from_a_cache_file_and_measures() {
    if classes().is_empty() {
        eprintln!("skipped: a single PU");
        return;
    }
    let d = tmp("model");
    ok(&[
        "bench",
        "cache",
        "--quick",
        "--ops",
        "load,store",
        "--states",
        "M,S",
        "--out",
        d.to_str().unwrap(),
    ]);
    let cache = d.join("cache.json");
    let json = d.join("model.json");
    ok(&[
        "model",
        "--cache",
        cache.to_str().unwrap(),
        "--measure",
        "--sizes",
        "4K,256K,2M",
        "--samples",
        "3",
        "--min-time-ms",
        "1",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        d.to_str().unwrap(),
    ]);
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["schema"], "topocomm.model/1");
    for c in r["classes"].as_array().unwrap() {
        let rows = c["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 6, "two protocols x three sizes");
        for row in rows {
            let pure = row["pure"].as_f64().unwrap();
            assert!(pure > 0.0 && pure.is_finite());
            assert!(row["measured"]["median"].as_f64().unwrap() > 0.0);
            assert!(row["fitted"].as_f64().unwrap() >= pure * (1.0 - 1e-9));
        }
        // The pipelined prediction grows with the size.
        let two: Vec<f64> = rows
            .iter()
            .filter(|r| r["protocol"] == "two-copy")
            .map(|r| r["pure"].as_f64().unwrap())
            .collect();
        assert!(two.windows(2).all(|w| w[0] < w[1]), "{two:?}");
        let svg = d.join(format!("model-{}.svg", c["class"].as_str().unwrap()));
        assert!(std::fs::read_to_string(svg).unwrap().contains("<svg"));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_is_one_line_naming_it() {
    let d = tmp("bad");
    let garbled = d.join("garbled.json");
    std::fs::write(
        &garbled,
        "{\"schema\": \"topocomm.bench-cache/1\", \"points\": [",
    )
    .unwrap();
    fails_with(
        &["model", "--cache", garbled.to_str().unwrap()],
        "garbled.json",
    );
    let missing = d.join("missing.json");
    fails_with(
        &["model", "--cache", missing.to_str().unwrap()],
        "missing.json",
    );
    fails_with(&["tune", "--quick", "--classes", "l9"], "--classes");
    fails_with(&["tune", "--quick", "--classes", "bogus"], "bogus");
    fails_with(&["tune", "--quick", "--classes", "network"], "not present");
    fails_with(&["tune", "--quick", "--mode", "random"], "--mode");
    fails_with(&["model", "--sizes", "4Q"], "--sizes");
    let out = d.join("report");
    fails_with(
        &[
            "report",
            "--no-bench",
            "--tune",
            missing.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        "missing.json",
    );
    let _ = std::fs::remove_dir_all(&d);
}
