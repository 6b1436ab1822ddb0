//! The format pages of JSON built by hand (`serde_json::json!` envelopes in
//! the CLI) against the commands' real output, so that page and code cannot
//! drift apart: docs/formats/tune-mpi-json.md (`tune --mpi --json`),
//! rails-json.md (`rails --json`, `--pu --json`, `--env --json`) and
//! report-json.md (`report.json`).
//!
//! Each page has, under a heading naming the schema, a table
//! `| field | type | meaning |`: `field` holds one or more paths in
//! backticks (`a.b[].c`: `[]` = every element of an array, `*` = every key of
//! a map), `type` the JSON types allowed (`string`, `integer`, `number`,
//! `boolean`, `object`, `array`, `null`; `summary` and `sample line` for the
//! two shared records), `optional` when the field may be absent. The check
//! goes both ways: every documented field is present (unless optional or its
//! parent is null) with a documented type, and every field of the output is
//! documented. A documented `object`/`array` with nothing documented below it
//! is opaque (another page's document).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{build_mpi, have, ok};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    String,
    Integer,
    Number,
    Boolean,
    Object,
    Array,
    Null,
    /// `{n, median, ci_low, ci_high, min, max, p99, mean}`.
    Summary,
    /// `{impl, test, size, cache, unit, samples}` (bench-json.md).
    SampleLine,
}

#[derive(Debug)]
struct Row {
    types: Vec<Ty>,
    optional: bool,
}

fn page_path(page: &str) -> PathBuf {
    topocomm_topo::testdata::repo_root()
        .join("docs/formats")
        .join(page)
}

fn parse_types(cell: &str) -> (Vec<Ty>, bool) {
    let mut c = cell.to_lowercase().replace('`', "");
    let mut types = Vec::new();
    for (name, ty) in [("sample line", Ty::SampleLine), ("summary", Ty::Summary)] {
        if c.contains(name) {
            types.push(ty);
            c = c.replace(name, "");
        }
    }
    let optional = c.contains("optional");
    for w in c.split(|ch: char| !ch.is_ascii_alphabetic()) {
        types.push(match w {
            "string" => Ty::String,
            "integer" => Ty::Integer,
            "number" => Ty::Number,
            "boolean" => Ty::Boolean,
            "object" => Ty::Object,
            "array" => Ty::Array,
            "null" => Ty::Null,
            "" | "or" | "optional" => continue,
            other => panic!("unknown type word '{other}' in '{cell}'"),
        });
    }
    assert!(!types.is_empty(), "no type in '{cell}'");
    (types, optional)
}

/// The field table under the first heading of `page` that contains
/// `heading`: path -> row.
fn page_table(page: &str, heading: &str) -> BTreeMap<String, Row> {
    let text = std::fs::read_to_string(page_path(page))
        .unwrap_or_else(|e| panic!("docs/formats/{page}: {e}"));
    let mut lines = text
        .lines()
        .skip_while(|l| !(l.starts_with('#') && l.contains(heading)));
    assert!(
        lines.next().is_some(),
        "{page}: no heading with '{heading}'"
    );
    let mut lines = lines.skip_while(|l| !l.starts_with("| field | type |"));
    assert!(
        lines.next().is_some(),
        "{page}: no field table under '{heading}'"
    );
    let mut out = BTreeMap::new();
    for l in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = l.splitn(4, '|').skip(1).collect();
        assert_eq!(cells.len(), 3, "{page}: row {l}");
        let (types, optional) = parse_types(cells[1]);
        let paths: Vec<&str> = cells[0].split('`').skip(1).step_by(2).collect();
        assert!(!paths.is_empty(), "{page}: no field in {l}");
        for p in paths {
            let row = Row {
                types: types.clone(),
                optional,
            };
            assert!(
                out.insert(p.to_string(), row).is_none(),
                "{page}: {p} twice"
            );
        }
    }
    assert!(!out.is_empty(), "{page}: empty table under '{heading}'");
    // Well-formed: every `x[]` row has its `x` row (whose type and
    // optionality say whether the array is there).
    for p in out.keys() {
        if let Some(array) = p.strip_suffix("[]") {
            assert!(
                out.contains_key(array),
                "{page}: `{p}` without a row for `{array}`"
            );
        }
    }
    out
}

fn is(v: &Value, t: Ty) -> bool {
    match t {
        Ty::String => v.is_string(),
        Ty::Integer => v.is_u64() || v.is_i64(),
        Ty::Number => v.is_number(),
        Ty::Boolean => v.is_boolean(),
        Ty::Object => v.is_object(),
        Ty::Array => v.is_array(),
        Ty::Null => v.is_null(),
        Ty::Summary => {
            let Some(o) = v.as_object() else { return false };
            let keys: BTreeSet<&str> = o.keys().map(String::as_str).collect();
            let want = [
                "n", "median", "ci_low", "ci_high", "min", "max", "p99", "mean",
            ];
            keys == want.into()
                && v["n"].is_u64()
                && want[1..].iter().all(|k| v[k].is_number())
                && v["min"].as_f64() <= v["median"].as_f64()
                && v["median"].as_f64() <= v["max"].as_f64()
        }
        Ty::SampleLine => {
            let Some(o) = v.as_object() else { return false };
            let keys: BTreeSet<&str> = o.keys().map(String::as_str).collect();
            keys == ["impl", "test", "size", "cache", "unit", "samples"].into()
                && ["impl", "test", "cache", "unit"]
                    .iter()
                    .all(|k| v[k].is_string())
                && v["size"].is_u64()
                && v["samples"]
                    .as_array()
                    .is_some_and(|s| !s.is_empty() && s.iter().all(Value::is_number))
        }
    }
}

/// Whether documented `path` has documented fields below it.
fn has_children(doc: &BTreeMap<String, Row>, path: &str) -> bool {
    doc.keys().any(|k| {
        k.len() > path.len()
            && k.starts_with(path)
            && matches!(k.as_bytes()[path.len()], b'.' | b'[')
    })
}

/// Every value at a documented path: `Ok(value)`, or `Err(parent path)`
/// where the key is missing from an object.
fn lookup<'a>(v: &'a Value, path: &str) -> Vec<Result<&'a Value, String>> {
    let mut cur: Vec<(String, &Value)> = vec![(String::new(), v)];
    let mut missing = Vec::new();
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let key = part.trim_end_matches("[]");
        let each = (part.len() - key.len()) / 2;
        let mut next = Vec::new();
        for (at, x) in cur {
            if x.is_null() {
                continue; // the parent's type allows null: nothing below
            }
            let here = if at.is_empty() {
                key.to_string()
            } else {
                format!("{at}.{key}")
            };
            let found: Vec<&Value> = if key == "*" {
                x.as_object()
                    .unwrap_or_else(|| panic!("{at}: not an object"))
                    .values()
                    .collect()
            } else {
                match x.as_object().and_then(|o| o.get(key)) {
                    Some(y) => vec![y],
                    // A missing parent (or the array of a `[]` row) is
                    // another row's business.
                    None => {
                        if last && each == 0 {
                            missing.push(Err(here));
                        }
                        continue;
                    }
                }
            };
            let mut level: Vec<&Value> = found;
            for _ in 0..each {
                level = level
                    .into_iter()
                    .filter(|y| !y.is_null())
                    .flat_map(|y| {
                        y.as_array()
                            .unwrap_or_else(|| panic!("{here}: not an array: {y}"))
                            .iter()
                    })
                    .collect();
            }
            next.extend(level.into_iter().map(|y| (here.clone(), y)));
        }
        cur = next;
    }
    cur.into_iter().map(|(_, y)| Ok(y)).chain(missing).collect()
}

/// Fields of `v` that the table does not document (paths normalized with
/// `[]` and `*`), not descending into opaque ones.
fn undocumented(doc: &BTreeMap<String, Row>, v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let named = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                let any = format!("{at}.*");
                let p = if doc.contains_key(&named) {
                    named
                } else if doc.contains_key(&any) {
                    any
                } else {
                    out.push(named);
                    continue;
                };
                let row = &doc[&p];
                let named_type = row
                    .types
                    .iter()
                    .any(|t| matches!(t, Ty::Summary | Ty::SampleLine));
                if !named_type && has_children(doc, &p) {
                    undocumented(doc, x, &p, out);
                }
            }
        }
        Value::Array(a) => {
            let p = format!("{at}[]");
            let named_type = doc.get(&p).is_some_and(|row| {
                row.types
                    .iter()
                    .any(|t| matches!(t, Ty::Summary | Ty::SampleLine))
            });
            if named_type {
                return;
            }
            if !has_children(doc, &p) {
                // Scalar elements: documented as `at[]`, or `at` is opaque.
                if !doc.contains_key(&p) && has_children(doc, at) {
                    out.push(p);
                }
                return;
            }
            for x in a {
                undocumented(doc, x, &p, out);
            }
        }
        _ => {}
    }
}

/// Checks `v` against the table under `heading` of `page`, both ways.
/// Returns the documented paths seen with a value (for coverage).
fn check_page(page: &str, heading: &str, v: &Value, what: &str) -> BTreeSet<String> {
    let doc = page_table(page, heading);
    let mut seen = BTreeSet::new();
    for (path, row) in &doc {
        for r in lookup(v, path) {
            match r {
                Ok(x) => {
                    assert!(
                        row.types.iter().any(|&t| is(x, t)),
                        "{what}: {page}: `{path}` is documented as {:?}, got {x}",
                        row.types
                    );
                    seen.insert(path.clone());
                }
                Err(at) => assert!(
                    row.optional,
                    "{what}: {page}: `{path}` is documented but missing (at {at})"
                ),
            }
        }
    }
    let mut extra = Vec::new();
    undocumented(&doc, v, "", &mut extra);
    let extra: BTreeSet<String> = extra.into_iter().collect();
    assert!(
        extra.is_empty(),
        "{what}: fields missing from docs/formats/{page} ('{heading}'), add a row for each: {extra:?}"
    );
    seen
}

fn json_of(o: &Output, what: &str) -> Value {
    assert!(
        o.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"))
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tc-format-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fixture() -> String {
    topocomm_topo::testdata::fixture("two-socket-nic.xml")
        .to_string_lossy()
        .into_owned()
}

/// The checker itself: a field the page does not list, a listed field
/// missing, and a wrong type are all caught.
#[test]
fn the_checker_catches_drift() {
    let page = "rails-json.md";
    let heading = "without rails";
    let good = serde_json::json!({"local_rank": 0, "env": [], "notice": "why"});
    check_page(page, heading, &good, "good");
    for bad in [
        serde_json::json!({"local_rank": 0, "env": [], "notice": "why", "extra": 1}),
        serde_json::json!({"local_rank": 0, "env": []}),
        serde_json::json!({"local_rank": "0", "env": [], "notice": "why"}),
        serde_json::json!({"local_rank": 0.5, "env": [], "notice": "why"}),
    ] {
        let r = std::panic::catch_unwind(|| check_page(page, heading, &bad, "bad"));
        assert!(r.is_err(), "not caught: {bad}");
    }
}

#[test]
fn rails_json_matches_its_page() {
    let page = "rails-json.md";
    let fx = fixture();
    let mut tops = vec![fx.clone()];
    for f in ["intel-2xE5-2650-ib-gpu.xml", "intel-2x8c-usnic-vfs.xml"] {
        if let Some(p) = topocomm_topo::testdata::shared_topology(f) {
            tops.push(p.to_string_lossy().into_owned());
        }
    }
    let mut seen = BTreeSet::new();
    for t in &tops {
        let v = json_of(&ok(&["rails", "--topology", t, "--json"]), t);
        assert_eq!(v["schema"], "topocomm.rails/1");
        assert!(v["notice"].is_null(), "{t} has rails: {v}");
        seen.extend(check_page(page, "`topocomm.rails/1`", &v, t));
        let v = json_of(
            &ok(&["rails", "--topology", t, "--json", "--contention"]),
            t,
        );
        assert_eq!(v["contention"], true);
        seen.extend(check_page(page, "`topocomm.rails/1`", &v, t));
        for (pu, size) in [("0", "4M"), ("0", "16K"), ("0-1", "1G")] {
            for extra in [&[][..], &["--contention"][..]] {
                let mut a = vec![
                    "rails",
                    "--topology",
                    t,
                    "--pu",
                    pu,
                    "--size",
                    size,
                    "--json",
                ];
                a.extend(extra);
                let v = json_of(&ok(&a), &format!("{a:?}"));
                assert_eq!(v["schema"], "topocomm.rails-plan/1");
                let plan = &v["plan"];
                let bytes: u64 = plan["chunks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["bytes"].as_u64().unwrap())
                    .sum();
                assert_eq!(Some(bytes), plan["size"].as_u64(), "{v}");
                check_page(page, "`topocomm.rails-plan/1`", &v, &format!("{a:?}"));
            }
        }
        for rank in ["0", "1"] {
            let a = [
                "rails",
                "--topology",
                t,
                "--env",
                "--pu",
                "1",
                "--local-rank",
                rank,
                "--json",
            ];
            let v = json_of(&ok(&a), &format!("{a:?}"));
            assert_eq!(v["schema"], "topocomm.rails-env/1");
            check_page(page, "`topocomm.rails-env/1`", &v, &format!("{a:?}"));
        }
    }
    // Every rail field was seen on the fixture or the shared machines.
    if tops.len() == 3 {
        let doc = page_table(page, "`topocomm.rails/1`");
        let unseen: Vec<&String> = doc.keys().filter(|k| !seen.contains(*k)).collect();
        assert!(
            unseen.is_empty(),
            "documented but never produced: {unseen:?}"
        );
    }
    // Without rails: a notice, and the schema-less env line.
    let synth = "synthetic:pack:1 core:2 pu:1";
    let v = json_of(&ok(&["rails", "--topology", synth, "--json"]), synth);
    assert!(v["notice"].is_string() && v["rails"]["nics"] == serde_json::json!([]));
    check_page(page, "`topocomm.rails/1`", &v, synth);
    let v = json_of(
        &ok(&["rails", "--topology", synth, "--env", "--json"]),
        synth,
    );
    check_page(page, "without rails", &v, synth);
}

/// Runs `topocomm report ARGS --out DIR` and returns report.json.
fn report(args: &[&str], dir: &Path) -> Value {
    let mut a = vec!["report"];
    a.extend(args);
    a.extend(["--out", dir.to_str().unwrap()]);
    ok(&a);
    let text = std::fs::read_to_string(dir.join("report.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn report_json_matches_its_page() {
    let page = "report-json.md";
    let dir = tempdir("report");
    let fx = fixture();
    for (args, benched) in [
        (vec!["--no-bench"], false),
        (vec!["--topology", fx.as_str(), "--no-bench"], false),
        // Benchmarks on a topology that is not this machine: error notes.
        (vec!["--topology", fx.as_str()], true),
    ] {
        let v = report(&args, &dir);
        let what = format!("report {args:?}");
        assert_eq!(v["schema"], "topocomm.report/1");
        assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
        check_page(page, "## Fields", &v, &what);
        if benched {
            let b = v["bench"].as_object().unwrap();
            let keys: Vec<&str> = b.keys().map(String::as_str).collect();
            assert_eq!(keys, ["bench-cache", "bench-matrix", "bench-placement"]);
            assert!(b.values().all(|x| x["error"].is_string()), "{what}");
            assert!(v["p2p"]["error"].is_string(), "{what}");
        } else {
            for k in ["bench", "p2p", "model", "tune"] {
                assert!(v[k].is_null(), "{what}: {k}");
            }
        }
        // machine, classes and tree are the topo crate's types, and the
        // classes and tree are those of that machine.
        let m: topocomm_topo::Machine = serde_json::from_value(v["machine"].clone()).unwrap();
        assert_eq!(serde_json::to_value(&m).unwrap(), v["machine"], "{what}");
        let classes: Vec<topocomm_topo::ClassSummary> =
            serde_json::from_value(v["classes"].clone()).unwrap();
        assert_eq!(
            classes,
            topocomm_topo::ClassMatrix::new(&m).classes(),
            "{what}"
        );
        let tree: topocomm_topo::TreeView = serde_json::from_value(v["tree"].clone()).unwrap();
        assert_eq!(tree, topocomm_topo::TreeView::new(&m), "{what}");
        assert_eq!(serde_json::to_value(&tree).unwrap(), v["tree"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn two_pus() -> bool {
    topocomm_measure::pin::allowed_pus().is_ok_and(|p| p.len() >= 2)
}

fn tune(args: &[&str]) -> Output {
    Command::new("timeout")
        .args(["-k", "5", "300", env!("CARGO_BIN_EXE_topocomm")])
        .args(args)
        .env_remove("OMPI_MCA_mca_base_param_files")
        .env_remove("TOPOCOMM_TOPOLOGY")
        .output()
        .expect("runs")
}

#[test]
fn tune_mpi_json_matches_its_page() {
    let page = "tune-mpi-json.md";
    if !two_pus() {
        eprintln!("notice: fewer than 2 usable PUs; skipping");
        return;
    }
    let dir = tempdir("tune-mpi");
    let mut runs = 0;
    // A quick search with Open MPI: every part of the document.
    if have("mpirun.openmpi") && have("mpicc.openmpi") {
        build_mpi("openmpi", &["tc_mpit_cvars", "tc_mpibench"]);
        let (out, json) = (dir.join("t.conf"), dir.join("t.json"));
        let o = tune(&[
            "tune",
            "--mpi",
            "openmpi",
            "--quick",
            "--samples",
            "3",
            "--out",
            out.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(v["schema"], "topocomm.tune-mpi/1");
        assert!(
            v["space"].is_object() && v["search"].is_object(),
            "a search run"
        );
        assert_eq!(v["file"], out.to_str().unwrap());
        check_page(page, "## Fields", &v, "tune --mpi openmpi --quick");
        runs += 1;
    } else {
        eprintln!("notice: Open MPI absent; skipping its tune run");
    }
    // --verify with MPICH: no space/search, a UCX value read back by parsing.
    if have("mpirun.mpich") && have("mpicc.mpich") {
        build_mpi("mpich", &["tc_mpit_cvars", "tc_mpibench"]);
        let (f, json) = (dir.join("v.env"), dir.join("v.json"));
        std::fs::write(&f, "# by hand\nexport UCX_RNDV_THRESH=16384\n").unwrap();
        let o = tune(&[
            "tune",
            "--mpi",
            "mpich",
            "--verify",
            f.to_str().unwrap(),
            "--sizes",
            "4K,64K",
            "--samples",
            "3",
            "--window",
            "8",
            "--json",
            json.to_str().unwrap(),
        ]);
        // 0: nothing slower; 1: a size slower (noise); both write the JSON.
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert!(v.get("space").is_none() && v.get("search").is_none(), "{v}");
        assert_eq!(v["layer"], "mpichucx");
        let rb = &v["verification"]["readback"][0];
        assert_eq!(rb["name"], "UCX_RNDV_THRESH");
        assert!(
            rb["read"].is_null(),
            "a UCX variable is not read through MPI_T: {rb}"
        );
        check_page(page, "## Fields", &v, "tune --mpi mpich --verify");
        runs += 1;
    } else {
        eprintln!("notice: MPICH absent; skipping its --verify run");
    }
    if runs == 0 {
        eprintln!("notice: no MPI installed; tune-mpi-json.md not checked");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
