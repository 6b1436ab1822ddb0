//! Rules from measurement (docs/transport.md "Rules from measurement"): the
//! first job on a machine measures and caches, later jobs load, a bad cache
//! is measured again, `TOPOCOMM_AUTOTUNE=0` opts out, concurrent first jobs
//! measure once, `kill -9` during the measurement leaves no cache file, and
//! `plan` says where each class's parameters come from, and a busy machine
//! is not measured. Every test uses a cache folder of its own
//! (`XDG_CACHE_HOME`) and turns measuring on explicitly (the rest of the
//! suite runs with `TOPOCOMM_AUTOTUNE=0`).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Each test measures the machine: one at a time, so that measurements do
/// not slow each other past the lock wait of the concurrency test.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_topocomm")
}

fn cache_home(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tc-autotune-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cmd(home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .env_remove("TOPOCOMM_TOPOLOGY")
        .env("XDG_CACHE_HOME", home)
        // Measure even if the machine is busy (e.g. other tests of the suite).
        .env("TOPOCOMM_AUTOTUNE", "force");
    c
}

fn run(home: &Path, args: &[&str]) -> Output {
    cmd(home, args).output().expect("topocomm runs")
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The files of the cache folder (entries, lock files, temporaries).
fn files(home: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(home.join("topocomm"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn entries(home: &Path) -> Vec<PathBuf> {
    files(home)
        .into_iter()
        .filter(|f| f.starts_with("rules-") && f.ends_with(".json"))
        .map(|f| home.join("topocomm").join(f))
        .collect()
}

const MEASURING: &str = "measuring this machine's transport rules once";
const FAILED: &str = "topocomm: measuring failed";
const STORED: &str = "topocomm: measured in";

#[test]
fn the_first_job_measures_and_caches_and_later_jobs_load_it() {
    let _serial = serial();
    let home = cache_home("first");
    let stress = [
        "run",
        "-n",
        "2",
        "--",
        bin(),
        "selftest",
        "stress",
        "--messages",
        "30",
    ];
    let t = Instant::now();
    let o = run(&home, &stress);
    let first = t.elapsed();
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(MEASURING), "{err}");
    // The time it took is printed, and bounded.
    let secs: f64 = err
        .split("measured in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no 'measured in S s' line: {err}"));
    assert!(secs > 0.0 && secs < 30.0, "{secs} s: {err}");
    // One entry, no temporary file left; it is a complete cache entry.
    let e = entries(&home);
    assert_eq!(e.len(), 1, "{:?}", files(&home));
    assert!(
        !files(&home).iter().any(|f| f.contains(".tmp")),
        "{:?}",
        files(&home)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&e[0]).unwrap()).unwrap();
    assert_eq!(v["format"], "topocomm.rules-cache/6");
    for k in ["fingerprint", "cpu_model", "kernel"] {
        assert!(v["key"][k].as_str().is_some_and(|s| !s.is_empty()), "{v}");
    }
    assert!(
        v["rules_toml"].as_str().unwrap().contains("[default]"),
        "{v}"
    );
    assert!(v["measured_classes"].is_array(), "{v}");
    // The second job loads it: no measurement, and faster.
    let t = Instant::now();
    let o = run(&home, &stress);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains(MEASURING),
        "{}",
        text(&o)
    );
    assert!(t.elapsed() < first, "{:?} then {:?}", first, t.elapsed());
    // `plan` shows the measured rules, with the origin of every class.
    let o = run(&home, &["plan"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("rules: measured on this machine 20"),
        "{out}"
    );
    assert!(out.contains(&e[0].display().to_string()), "{out}");
    let o = run(&home, &["plan", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let measured: Vec<String> =
        serde_json::from_str::<Value>(&std::fs::read_to_string(&e[0]).unwrap()).unwrap()
            ["measured_classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
    for c in v["classes"].as_array().unwrap() {
        let name = c["class"].as_str().unwrap();
        let want = if measured.iter().any(|m| m == name) {
            "measured"
        } else {
            "built-in"
        };
        assert_eq!(c["origin"], want, "{c}");
    }
    // A rules file given explicitly wins, and says so.
    let rules = home.join("r.toml");
    std::fs::write(&rules, "[default]\ndepth = 4\n").unwrap();
    let o = run(
        &home,
        &["plan", "--json", "--rules", rules.to_str().unwrap()],
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["origin"] == "rules file"),
        "{v}"
    );
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn a_corrupt_or_foreign_cache_entry_is_reported_and_measured_again() {
    let _serial = serial();
    let home = cache_home("corrupt");
    assert!(run(&home, &["plan"]).status.success());
    let e = entries(&home);
    assert_eq!(e.len(), 1);
    for (bad, why) in [
        ("{ half an entry".to_string(), "not a rules cache entry"),
        (
            std::fs::read_to_string(&e[0])
                .unwrap()
                .replace("\"kernel\": \"", "\"kernel\": \"other-"),
            "measured for another machine or kernel",
        ),
    ] {
        std::fs::write(&e[0], bad).unwrap();
        let o = run(&home, &["plan"]);
        assert!(o.status.success(), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        let line = err
            .lines()
            .find(|l| l.contains("ignoring the rules cache"))
            .unwrap_or_else(|| panic!("no notice: {err}"));
        assert!(
            line.contains(why) && line.ends_with("measuring again"),
            "{line}"
        );
        assert!(err.contains(MEASURING), "{err}");
        // Measured again: the entry is whole once more.
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&e[0]).unwrap()).unwrap();
        assert_eq!(v["format"], "topocomm.rules-cache/6");
        assert!(!v["key"]["kernel"].as_str().unwrap().starts_with("other-"));
    }
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn opting_out_uses_the_built_in_rules_and_writes_nothing() {
    let _serial = serial();
    let home = cache_home("optout");
    let o = cmd(&home, &["plan", "--json"])
        .env("TOPOCOMM_AUTOTUNE", "0")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["source"], "built-in model (TOPOCOMM_AUTOTUNE=0)");
    assert!(
        v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["origin"] == "built-in"),
        "{v}"
    );
    assert!(files(&home).is_empty(), "{:?}", files(&home));
    // A value that is neither 0 nor 1 is an error naming the variable.
    let o = cmd(&home, &["run", "-n", "1", "--", "true"])
        .env("TOPOCOMM_AUTOTUNE", "maybe")
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("TOPOCOMM_AUTOTUNE='maybe': expected 0"),
        "{}",
        text(&o)
    );
    // A busy machine is not measured automatically (a CPU hog on every PU).
    let hogs: Vec<_> = (0..std::thread::available_parallelism().map_or(2, |n| n.get()))
        .map(|_| {
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let o = cmd(&home, &["plan"])
        .env("TOPOCOMM_AUTOTUNE", "1")
        .output()
        .unwrap();
    for mut h in hogs {
        h.kill().unwrap();
        h.wait().unwrap();
    }
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .starts_with("rules: built-in model (the machine was busy; measuring later)"),
        "{}",
        text(&o)
    );
    assert!(entries(&home).is_empty(), "{:?}", files(&home));
    // Another topology than this machine's is never measured.
    let o = cmd(&home, &["plan", "--topology", "synthetic:core:2 pu:1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout)
        .starts_with("rules: built-in model (the topology is not this machine's)"));
    assert!(files(&home).is_empty(), "{:?}", files(&home));
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn concurrent_first_jobs_measure_once_and_agree() {
    let _serial = serial();
    let home = cache_home("concurrent");
    let kids: Vec<_> = (0..3)
        .map(|_| {
            cmd(&home, &["plan"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = kids
        .into_iter()
        .map(|k| k.wait_with_output().unwrap())
        .collect();
    for o in &outs {
        assert!(o.status.success(), "{}", text(o));
    }
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let all = outs.iter().map(stderr).collect::<Vec<_>>().join("\n--\n");
    // A job whose measurement fails falls back to the built-in rules and
    // stores nothing, so the next job holding the lock measures again (the
    // designed behaviour); what the lock guarantees is one stored
    // measurement, taken by one job, which every other job loads.
    let failed: Vec<&Output> = outs.iter().filter(|o| stderr(o).contains(FAILED)).collect();
    if !failed.is_empty() {
        eprintln!("a measurement failed (the next job measured again):\n{all}");
    }
    let measured = outs
        .iter()
        .filter(|o| stderr(o).contains(MEASURING))
        .count();
    let stored = outs.iter().filter(|o| stderr(o).contains(STORED)).count();
    assert_eq!(
        stored, 1,
        "exactly one job measures and stores; their stderr:\n{all}"
    );
    assert_eq!(
        measured,
        1 + failed.len(),
        "a job measures only when no other did successfully before it; their stderr:\n{all}"
    );
    assert!(failed.len() < outs.len() - 1, "{all}");
    let first_lines: Vec<String> = outs
        .iter()
        .filter(|o| !stderr(o).contains(FAILED))
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        first_lines.iter().all(|l| *l == first_lines[0]),
        "{first_lines:?}"
    );
    assert_eq!(entries(&home).len(), 1, "{:?}", files(&home));
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn kill_9_during_the_measurement_leaves_no_cache_entry() {
    let _serial = serial();
    let home = cache_home("kill");
    let mut child = cmd(&home, &["plan", "--measure"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the measurement to start, then kill the process.
    let mut err = child.stderr.take().unwrap();
    let mut seen = String::new();
    let t = Instant::now();
    while !seen.contains(MEASURING) && t.elapsed() < Duration::from_secs(30) {
        let mut b = [0u8; 256];
        let n = std::io::Read::read(&mut err, &mut b).unwrap();
        if n == 0 {
            break;
        }
        seen.push_str(&String::from_utf8_lossy(&b[..n]));
    }
    assert!(seen.contains(MEASURING), "{seen}");
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    // The benchmark jobs it had started finish on their own within their bound.
    std::thread::sleep(Duration::from_secs(2));
    assert!(entries(&home).is_empty(), "{:?}", files(&home));
    assert!(
        !files(&home).iter().any(|f| f.contains(".tmp")),
        "{:?}",
        files(&home)
    );
    // The next job measures from scratch and succeeds.
    assert!(run(&home, &["plan"]).status.success());
    assert_eq!(entries(&home).len(), 1);
    std::fs::remove_dir_all(&home).unwrap();
}
