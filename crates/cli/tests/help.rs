//! `--help` of every command, nested ones included (issue 18): it exits 0,
//! its first line is the command's own description (the one its parent
//! lists for it, no other command's), and it lists `--quiet` and
//! `--verbose` everywhere and `--json` wherever the command prints a
//! result of its own (docs/README.md, "Options of every command").

use std::collections::BTreeMap;
use std::process::Command;

/// Commands without `--json`, and why: their stdout is a launched program's
/// or a group's, or they are internal.
const NO_JSON: [(&str, &str); 6] = [
    ("bench", "a group: each benchmark has --json"),
    ("run", "stdout is the launched ranks'"),
    ("accel", "stdout is the MPI program's"),
    ("rails exec", "replaced by the program (exec)"),
    ("completions", "stdout is a shell script to source"),
    (
        "selftest",
        "transport checks run under `topocomm run`, for the tests",
    ),
];

fn help(cmd: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_topocomm"))
        .args(cmd)
        .arg("--help")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{cmd:?} --help: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// `name -> description` of the `Commands:` section (without `help`).
fn listed(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(rest) = text.split("\nCommands:\n").nth(1) else {
        return out;
    };
    for l in rest.lines().take_while(|l| l.starts_with("  ")) {
        let (name, about) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
        if name != "help" {
            out.insert(name.to_string(), about.trim().to_string());
        }
    }
    out
}

/// Every command reachable from the top, with the description its parent lists.
fn walk(path: Vec<String>, about: String, seen: &mut Vec<(Vec<String>, String, String)>) {
    let args: Vec<&str> = path.iter().map(String::as_str).collect();
    let text = help(&args);
    for (name, a) in listed(&text) {
        let mut p = path.clone();
        p.push(name);
        walk(p, a, seen);
    }
    seen.push((path, about, text));
}

#[test]
fn every_help_is_the_commands_own_with_the_common_options() {
    let mut seen = Vec::new();
    walk(Vec::new(), String::new(), &mut seen);
    let names: Vec<String> = seen.iter().map(|(p, _, _)| p.join(" ")).collect();
    for must in [
        "topo",
        "bench p2p",
        "bench matrix",
        "run",
        "rails exec",
        "tune",
        "map",
    ] {
        assert!(
            names.iter().any(|n| n == must),
            "{must} not reached: {names:?}"
        );
    }
    let mut firsts: BTreeMap<String, String> = BTreeMap::new();
    for (path, about, text) in &seen {
        let name = path.join(" ");
        let first = text.lines().next().unwrap_or("").trim().to_string();
        if !path.is_empty() {
            // Its own words: what the parent lists for it, and no second
            // sentence glued from a neighbour (the merged bench/run help).
            assert_eq!(
                &first, about,
                "{name}: first help line vs the parent's listing"
            );
            assert!(!first.is_empty(), "{name}: no description");
            if let Some(other) = firsts.insert(first.clone(), name.clone()) {
                panic!("{name} and {other} share the description '{first}'");
            }
        }
        for opt in ["--quiet", "--verbose"] {
            assert!(text.contains(opt), "{name}: {opt} not listed:\n{text}");
        }
        if path.is_empty() {
            continue;
        }
        let exempt = NO_JSON.iter().any(|(n, _)| *n == name);
        assert_eq!(
            text.contains("--json"),
            !exempt,
            "{name}: --json listed = {}, expected {}",
            text.contains("--json"),
            !exempt
        );
    }
    // map keeps --format for its several text formats, and has --json too.
    let map = help(&["map"]);
    assert!(map.contains("--format") && map.contains("--json"), "{map}");
}

#[test]
fn the_top_level_help_lists_bench_and_run_apart() {
    let top = listed(&help(&[]));
    assert!(top["bench"].starts_with("Benchmarks"), "{top:?}");
    assert!(top["run"].starts_with("Launch N ranks"), "{top:?}");
    assert!(!top["bench"].contains("Launch"), "{top:?}");
}
