//! The README's "5-minute tour" is copy-pasteable: every command of its
//! ```console blocks (lines starting with `$ `) runs from the repository
//! root after `make report` / `make test` (PATH with target/release,
//! TOPOCOMM_AUTOTUNE=0), succeeds, and prints output of the shape the
//! README shows: its header lines (`Name:` labels) and table headers appear
//! in the same order; outputs of `--topology` commands (machine
//! independent) must match exactly unless the README elides lines (`...`).
//! Needs the release build; skipped with a notice without it.

use std::process::Command;
use std::time::Instant;

/// A command of the tour and the output the README shows for it.
#[derive(Debug)]
struct Step {
    cmd: String,
    expected: Vec<String>,
}

fn tour_steps(readme: &str) -> Vec<Step> {
    let start = readme
        .find("## A 5-minute tour")
        .expect("README has the tour");
    let rest = &readme[start + 3..];
    let tour = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    for line in tour.lines() {
        if line.starts_with("```") {
            in_console = !in_console && line.trim() == "```console";
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            steps.push(Step {
                cmd: cmd.to_string(),
                expected: Vec::new(),
            });
        } else if let Some(s) = steps.last_mut() {
            s.expected.push(line.to_string());
        }
    }
    steps
}

/// The lines that give an output its shape: `Name:` labels (first word
/// ending with a colon) and table headers (3 or more words, no digit).
fn shape(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let first = words.first()?;
            if first.ends_with(':') {
                Some(first.to_string())
            } else if words.len() >= 3 && !l.chars().any(|c| c.is_ascii_digit()) {
                Some(words.join(" "))
            } else {
                None
            }
        })
        .collect()
}

/// Whether `want` appears in `have` in order (other items in between).
fn subsequence(want: &[String], have: &[String]) -> bool {
    let mut it = have.iter();
    want.iter().all(|w| it.any(|h| h == w))
}

#[test]
fn tour_commands_run_and_print_what_the_readme_shows() {
    let root = topocomm_topo::testdata::repo_root();
    let bin = root.join("target/release/topocomm");
    if !bin.is_file() {
        eprintln!(
            "notice: {} absent (make report builds it); skipping the tour",
            bin.display()
        );
        return;
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let steps = tour_steps(&readme);
    assert!(steps.len() >= 8, "too few tour commands found: {steps:?}");
    let shared = root.join("../shared/topologies").is_dir();
    let before: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let path = format!(
        "{}:{}",
        root.join("target/release").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let t0 = Instant::now();
    let mut failures = Vec::new();
    for s in &steps {
        if s.cmd.contains("../shared") && !shared {
            eprintln!("notice: ../shared absent; skipping `{}`", s.cmd);
            continue;
        }
        let t = Instant::now();
        let out = Command::new("timeout")
            .args(["60", "bash", "-c", &format!("{{ {}\n}} 2>&1", s.cmd)])
            .current_dir(&root)
            .env("PATH", &path)
            .env("TOPOCOMM_AUTOTUNE", "0")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env_remove("TOPOCOMM_TOPOLOGY")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        eprintln!("{:5.1} s  $ {}", t.elapsed().as_secs_f64(), s.cmd);
        let got: Vec<String> = text.lines().map(str::to_string).collect();
        let elided = s.expected.iter().any(|l| l.trim() == "...");
        let problem = if !out.status.success() {
            Some(format!("exit {:?}", out.status.code()))
        } else if s.cmd.contains("--topology") && !elided && got != s.expected {
            Some("output differs from the README".into())
        } else if !subsequence(&shape(&s.expected), &shape(&got)) {
            Some(format!(
                "shape differs: README {:?}, got {:?}",
                shape(&s.expected),
                shape(&got)
            ))
        } else if !s.expected.is_empty() && got.is_empty() {
            Some("no output".into())
        } else {
            None
        };
        if let Some(p) = problem {
            failures.push(format!("`{}`: {p}\n{text}", s.cmd));
        }
    }
    let total = t0.elapsed().as_secs_f64();
    // Files the tour writes into the checkout (compiled examples, traces).
    for e in std::fs::read_dir(&root).unwrap() {
        let e = e.unwrap();
        if !before.contains(&e.file_name()) && e.path().is_file() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    eprintln!("tour: {} commands in {total:.1} s", steps.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn shape_keeps_labels_and_table_headers() {
    let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let s = shape(&l(&[
        "Machine: live machine vm",
        "class  pairs  example (OS P,Q)",
        "l3     1      0,1",
        "Layout:  2 PUs",
    ]));
    assert_eq!(
        s,
        l(&["Machine:", "class pairs example (OS P,Q)", "Layout:"])
    );
    assert!(subsequence(&l(&["a", "c"]), &l(&["a", "b", "c"])));
    assert!(!subsequence(&l(&["c", "a"]), &l(&["a", "b", "c"])));
    let steps = tour_steps("## A 5-minute tour\n```console\n$ echo hi\nhi\n```\n```\n$ no\n```\n## Next\n```console\n$ later\n```\n");
    assert_eq!(steps.len(), 1);
    assert_eq!(
        (steps[0].cmd.as_str(), steps[0].expected.clone()),
        ("echo hi", l(&["hi"]))
    );
}
