//! The malformed-input corpus (issue 19): every file under
//! `tests/malformed/<format>/` is listed in `tests/malformed/MANIFEST.tsv`
//! with the command that reads it and a substring of the expected error.
//! Each runs through the real `topocomm` binary, which must fail with a
//! short error (no panic, at most 3 lines, the first naming the file and
//! the field or line) within 20 s. How to add a case: docs/testing.md.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(20);

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root exists")
}

struct Entry {
    file: String,
    command: String,
    expect: String,
}

fn manifest(root: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(root.join("tests/malformed/MANIFEST.tsv"))
        .expect("tests/malformed/MANIFEST.tsv is readable");
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(
                f.len(),
                3,
                "MANIFEST.tsv:{}: expected 3 tab-separated columns",
                i + 1
            );
            assert!(
                f[1].starts_with("topocomm ") && f[1].contains("{}"),
                "MANIFEST.tsv:{}: the command must start with `topocomm` and hold {{}}",
                i + 1
            );
            assert!(
                !f[2].is_empty(),
                "MANIFEST.tsv:{}: empty expected text",
                i + 1
            );
            Entry {
                file: f[0].to_string(),
                command: f[1].to_string(),
                expect: f[2].to_string(),
            }
        })
        .collect()
}

/// Every corpus file, as `<format>/<name>`.
fn corpus_files(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for dir in std::fs::read_dir(root.join("tests/malformed")).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let format = dir.file_name().unwrap().to_string_lossy().into_owned();
        for f in std::fs::read_dir(&dir).unwrap() {
            let name = f.unwrap().file_name().to_string_lossy().into_owned();
            out.insert(format!("{format}/{name}"));
        }
    }
    out
}

/// Runs one entry; `Err` says what is wrong with the outcome.
fn check(root: &Path, e: &Entry) -> Result<Duration, String> {
    let path = format!("tests/malformed/{}", e.file);
    let args: Vec<String> = e
        .command
        .split_whitespace()
        .skip(1)
        .map(|a| a.replace("{}", &path))
        .collect();
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_topocomm"))
        .args(&args)
        .current_dir(root)
        .env("TOPOCOMM_AUTOTUNE", "0")
        .env_remove("TOPOCOMM_TOPOLOGY")
        .env_remove("TOPOCOMM_RULES")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot start topocomm: {err}"))?;
    // Read stderr on a thread so that a chatty child cannot block on a full pipe.
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    });
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|err| err.to_string())? {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("did not finish within {} s", TIMEOUT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    let first = stderr.lines().next().unwrap_or("");
    if status.success() {
        return Err(format!("exited 0 (stderr: {stderr:?})"));
    }
    if stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE") {
        return Err(format!("panicked: {stderr}"));
    }
    if !first.contains(&e.expect) {
        return Err(format!(
            "first stderr line does not contain {:?}: {first:?}",
            e.expect
        ));
    }
    let n = stderr.lines().count();
    if n > 3 {
        return Err(format!(
            "{n} lines on stderr, at most 3 expected: {stderr:?}"
        ));
    }
    Ok(took)
}

#[test]
fn every_malformed_file_fails_with_one_clear_line() {
    let root = repo_root();
    let entries = manifest(&root);
    let listed: BTreeSet<String> = entries.iter().map(|e| e.file.clone()).collect();
    assert_eq!(
        listed.len(),
        entries.len(),
        "a file is listed twice in MANIFEST.tsv"
    );
    let files = corpus_files(&root);
    let unlisted: Vec<&String> = files.difference(&listed).collect();
    let missing: Vec<&String> = listed.difference(&files).collect();
    assert!(
        unlisted.is_empty() && missing.is_empty(),
        "corpus files not in MANIFEST.tsv: {unlisted:?}; listed but absent: {missing:?}"
    );
    assert!(entries.len() >= 150, "only {} corpus files", entries.len());
    let mut failures = Vec::new();
    let mut slowest = (Duration::ZERO, String::new());
    for e in &entries {
        match check(&root, e) {
            Ok(took) if took > slowest.0 => slowest = (took, e.file.clone()),
            Ok(_) => {}
            Err(why) => failures.push(format!("{} ({}): {why}", e.file, e.command)),
        }
    }
    eprintln!(
        "{} corpus files checked; slowest {} ({:.2} s)",
        entries.len(),
        slowest.1,
        slowest.0.as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} corpus entries failed:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}
