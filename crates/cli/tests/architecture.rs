//! Keeps docs/ARCHITECTURE.md true: its "Crate graph" section must list,
//! one line per workspace crate, exactly the normal dependencies on other
//! workspace crates that `cargo metadata` reports; and no library crate may
//! depend on the CLI (`topocomm`) or on the C ABI (`topocomm-capi`).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The packages that sit on top of the graph: nothing else may use them.
const TOP: [&str; 2] = ["topocomm", "topocomm-capi"];

/// The heading of the checked section in the page.
const SECTION: &str = "## Crate graph";

/// `cargo metadata --no-deps` of the workspace this crate belongs to.
fn metadata() -> Value {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

struct Package {
    /// Has a library target (lib, rlib, cdylib, staticlib, ...).
    is_lib: bool,
    /// Normal (not dev, not build) dependencies on workspace crates.
    normal: BTreeSet<String>,
    /// Workspace dependencies of any kind, with their kind.
    all: Vec<(String, String)>,
}

/// Workspace packages by name.
fn packages(meta: &Value) -> BTreeMap<String, Package> {
    let list = meta["packages"].as_array().expect("packages is an array");
    let names: BTreeSet<String> = list
        .iter()
        .map(|p| p["name"].as_str().expect("package name").to_string())
        .collect();
    let mut out = BTreeMap::new();
    for p in list {
        let is_lib = p["targets"]
            .as_array()
            .expect("targets")
            .iter()
            .flat_map(|t| t["kind"].as_array().expect("target kind").iter())
            .filter_map(Value::as_str)
            .any(|k| k.ends_with("lib") || k == "proc-macro");
        let mut normal = BTreeSet::new();
        let mut all = Vec::new();
        for d in p["dependencies"].as_array().expect("dependencies") {
            let name = d["name"].as_str().expect("dependency name");
            // A workspace crate: a path dependency on one of the packages.
            if d["path"].is_null() || !names.contains(name) {
                continue;
            }
            let kind = d["kind"].as_str().unwrap_or("normal");
            if kind == "normal" {
                normal.insert(name.to_string());
            }
            all.push((name.to_string(), kind.to_string()));
        }
        let name = p["name"].as_str().expect("package name").to_string();
        out.insert(
            name,
            Package {
                is_lib,
                normal,
                all,
            },
        );
    }
    out
}

/// The page's line for one crate.
fn line(name: &str, deps: &BTreeSet<String>) -> String {
    if deps.is_empty() {
        format!("- {name}: depends on nothing")
    } else {
        let list: Vec<&str> = deps.iter().map(String::as_str).collect();
        format!("- {name}: depends on {}", list.join(", "))
    }
}

/// The crate lines (`- topocomm...`) of the "Crate graph" section of the
/// page; other lines of the section (prose) are ignored.
fn page_lines(page: &str) -> Vec<String> {
    let mut lines = page.lines();
    assert!(
        lines.any(|l| l.trim_end() == SECTION),
        "docs/ARCHITECTURE.md has no '{SECTION}' heading"
    );
    lines
        .take_while(|l| !l.starts_with("## "))
        .map(str::trim_end)
        .filter(|l| l.starts_with("- topocomm"))
        .map(str::to_string)
        .collect()
}

fn workspace_root(meta: &Value) -> PathBuf {
    PathBuf::from(meta["workspace_root"].as_str().expect("workspace_root"))
}

#[test]
fn crate_graph_in_architecture_md_matches_cargo_metadata() {
    let meta = metadata();
    let pkgs = packages(&meta);
    let expected: Vec<String> = pkgs.iter().map(|(n, p)| line(n, &p.normal)).collect();

    let path = workspace_root(&meta).join("docs/ARCHITECTURE.md");
    let page = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let actual = page_lines(&page);

    if actual != expected {
        let missing: Vec<&String> = expected.iter().filter(|l| !actual.contains(l)).collect();
        let extra: Vec<&String> = actual.iter().filter(|l| !expected.contains(l)).collect();
        panic!(
            "\n{} disagrees with `cargo metadata`.\n\n\
             Replace the list under '{SECTION}' with (from cargo metadata):\n\n{}\n\n\
             The page says:\n\n{}\n\n\
             Lines missing from the page: {missing:#?}\nLines on the page but not true: {extra:#?}\n",
            path.display(),
            expected.join("\n"),
            if actual.is_empty() {
                "(no '- topocomm...' lines)".to_string()
            } else {
                actual.join("\n")
            },
        );
    }
}

#[test]
fn no_library_crate_depends_on_the_cli_or_the_c_abi() {
    let pkgs = packages(&metadata());
    for top in TOP {
        assert!(pkgs.contains_key(top), "workspace has no package '{top}'");
    }
    let mut wrong = Vec::new();
    for (name, p) in pkgs.iter().filter(|(_, p)| p.is_lib) {
        for (dep, kind) in &p.all {
            if TOP.contains(&dep.as_str()) {
                wrong.push(format!("{name} -> {dep} ({kind} dependency)"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "library crates must not depend on {} (they sit on top of the graph, see docs/ARCHITECTURE.md):\n{}",
        TOP.join(" or "),
        wrong.join("\n")
    );
}
