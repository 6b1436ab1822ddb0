//! `topocomm topo` and `topocomm report` as a user runs them.

use std::path::PathBuf;
use std::process::Command;
use topocomm_topo::testdata::{fixture, shared_topology};

mod common;
use common::topocomm;

fn ok(args: &[&str]) -> String {
    let out = topocomm(args);
    assert!(
        out.status.success(),
        "topocomm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a command expected to fail with a usage error (exit status 2);
/// returns its stderr after checking that it is one line without a panic.
fn fails(args: &[&str]) -> String {
    fails_with_status(args, 2)
}

/// [`fails`] with exit status `code` (1: a failure, not a usage error).
fn fails_with_status(args: &[&str], code: i32) -> String {
    let out = topocomm(args);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(code), "topocomm {args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.starts_with("topocomm: error: "), "{err}");
    err
}

fn fixture_arg() -> String {
    fixture("two-socket-nic.xml").to_string_lossy().into_owned()
}

#[test]
fn classes_lines_have_the_documented_format() {
    let out = ok(&["topo", "--topology", &fixture_arg(), "--classes"]);
    assert_eq!(out, "smt 4 0,2\nl3 8 0,4\nmachine 16 0,1\n");
}

#[test]
fn pair_prints_one_class() {
    let f = fixture_arg();
    assert_eq!(ok(&["topo", "--topology", &f, "--pair", "0,2"]), "smt\n");
    assert_eq!(
        ok(&["topo", "--topology", &f, "--pair", "5,0"]),
        "machine\n"
    );
    let e = fails(&["topo", "--topology", &f, "--pair", "0,99"]);
    assert!(e.contains("OS index 99") && e.contains("0-7"), "{e}");
    let e = fails(&["topo", "--topology", &f, "--pair", "0;1"]);
    assert!(e.contains("'0;1'"), "{e}");
}

#[test]
fn summary_shows_tree_classes_and_devices() {
    let out = ok(&["topo", "--topology", &fixture_arg()]);
    for needle in [
        "Package L#1",
        "PU L#7 (P#7)",
        "smt",
        "machine",
        "mlx5_0",
        "0000:81:00.0",
        "package 1",
        "NUMALatency",
    ] {
        assert!(out.contains(needle), "missing {needle} in\n{out}");
    }
}

#[test]
fn matrix_is_ordered_by_topology() {
    let out = ok(&["topo", "--topology", &fixture_arg(), "--matrix"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "legend: 0=smt 1=l3 2=machine");
    // Header columns are PU OS indexes in topology order: 0 2 4 6 1 3 5 7.
    let header: Vec<&str> = lines[1]
        .split('|')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["0", "2", "4", "6", "1", "3", "5", "7"]);
    let row0: Vec<&str> = lines[2]
        .split('|')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row0, [".", "0", "1", "1", "2", "2", "2", "2"]);
    assert_eq!(lines.len(), 2 + 8);
}

#[test]
fn json_is_the_versioned_model_and_reloads() {
    let out = ok(&["topo", "--topology", &fixture_arg(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "topocomm.machine/1");
    assert_eq!(v["pus"].as_array().unwrap().len(), 8);
    let dir = tempdir("json");
    let path = dir.join("m.json");
    std::fs::write(&path, &out).unwrap();
    assert_eq!(
        ok(&[
            "topo",
            "--topology",
            path.to_str().unwrap(),
            "--pair",
            "0,2"
        ]),
        "smt\n"
    );
}

#[test]
fn topology_comes_from_the_environment_too() {
    let out = Command::new(env!("CARGO_BIN_EXE_topocomm"))
        .args(["topo", "--classes"])
        .env("TOPOCOMM_TOPOLOGY", "synthetic:pack:2 core:2 pu:1")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "numa 2 0,1\nmachine 4 0,2\n"
    );
}

#[test]
fn synthetic_topologies_and_their_errors() {
    let out = ok(&[
        "topo",
        "--topology",
        "synthetic:pack:2 numa:2 l3:2 core:4 pu:2",
        "--classes",
    ]);
    let classes: Vec<&str> = out.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(classes.first(), Some(&"smt"));
    assert!(
        classes.contains(&"l3") && classes.contains(&"machine"),
        "{out}"
    );
    assert!(fails(&["topo", "--topology", "synthetic:"]).contains("empty"));
    assert!(fails(&["topo", "--topology", "synthetic:pack:2 frob:2"])
        .contains("synthetic topology 'pack:2 frob:2'"));
}

#[test]
fn bad_files_are_one_line_errors() {
    let dir = tempdir("bad");
    let e = fails(&["topo", "--topology", "/no/such/file.xml"]);
    assert!(
        e.contains("/no/such/file.xml") && e.contains("no such file"),
        "{e}"
    );
    let good = std::fs::read_to_string(fixture("two-socket-nic.xml")).unwrap();
    for (name, content, expect) in [
        ("garbage.xml", "not xml at all".to_string(), "not XML"),
        (
            "cut.xml",
            good[..good.len() * 2 / 3].to_string(),
            "truncated",
        ),
        (
            "v3.xml",
            good.replace("version=\"2.0\"", "version=\"3.0\""),
            "version 3.0",
        ),
        ("empty.xml", String::new(), "empty"),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        let e = fails(&["topo", "--topology", p.to_str().unwrap()]);
        assert!(e.contains(name) && e.contains(expect), "{name}: {e}");
    }
}

#[test]
fn shared_clovertown_pairs() {
    let Some(f) = shared_topology("intel-2xE5345-clovertown.xml") else {
        return;
    };
    let f = f.to_string_lossy().into_owned();
    assert_eq!(
        ok(&["topo", "--topology", &f, "--pair", "0,1"]),
        "machine\n"
    );
    assert_eq!(ok(&["topo", "--topology", &f, "--pair", "0,4"]), "l2\n");
}

#[test]
fn report_writes_html_and_json() {
    let dir = tempdir("report");
    let out = ok(&[
        "report",
        "--topology",
        &fixture_arg(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.contains("index.html"));
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<svg") && html.contains(">P#7<"));
    assert!(html.contains("Locality classes") && html.contains("mlx5_0"));
    // The fixture's HCA is a rail: the NUIOA split table is in the report.
    assert!(
        html.contains("Rails: NUIOA split") && html.contains("Split of a large message"),
        "rails section missing"
    );
    assert!(
        !html.contains("<script src") && !html.contains("<link "),
        "self-contained"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["schema"], "topocomm.report/1");
    assert_eq!(json["classes"].as_array().unwrap().len(), 3);
    // An unwritable destination is a clear error, not a panic; a failure
    // (exit status 1), not a usage error: the command line was valid.
    let e = fails_with_status(
        &[
            "report",
            "--topology",
            &fixture_arg(),
            "--out",
            "/proc/topocomm-nope",
        ],
        1,
    );
    assert!(e.contains("/proc/topocomm-nope"), "{e}");
}

#[test]
fn live_machine_loads() {
    let out = ok(&["topo", "--classes"]);
    // Every line: class, pair count, P,Q.
    for l in out.lines() {
        let parts: Vec<&str> = l.split(' ').collect();
        assert_eq!(parts.len(), 3, "{l}");
        parts[1].parse::<u64>().unwrap();
        assert!(parts[2].contains(','));
    }
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("topocomm-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_million_pus_load_and_the_matrix_is_refused_in_one_line() {
    let big = "synthetic:pack:16 core:256 pu:256";
    let out = ok(&["topo", "--topology", big, "--pair", "0,1048575"]);
    assert_eq!(out, "machine\n");
    let err = fails(&[
        "topo",
        "--topology",
        "synthetic:pack:2 core:64 pu:64",
        "--matrix",
    ]);
    assert!(
        err.contains("--matrix: this topology has 8192 PUs") && err.contains("--classes"),
        "{err}"
    );
}
