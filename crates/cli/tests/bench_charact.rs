//! Quick-mode runs of `topocomm bench cache|placement|matrix` on this
//! machine, checked against their documentation (docs/commands/bench-*.md,
//! docs/formats/bench-*-json.md, bench-matrix-csv.md, costs-json.md): every
//! documented field with its unit, counts that follow from the parameters,
//! summaries that are those of the raw samples, the pair matrix square over
//! the topology's PUs, symmetric with an unmeasured diagonal, the costs file
//! that `topocomm map --costs` then uses, values inside physical bounds, and
//! bad arguments as one-line errors naming the argument with exit code 2.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;
use common::topocomm;

fn ok_json(args: &[&str]) -> Value {
    let out = topocomm(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn ok_text(args: &[&str]) -> String {
    let out = topocomm(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

/// Runs `topocomm ARGS`, which must fail with exit code 2 and exactly one
/// error line (`topocomm: error: ...`) that names `needle`; nothing else on
/// stderr may mention an error.
fn fails_naming(args: &[&str], needle: &str) {
    let out = topocomm(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: exit code; {err}");
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.to_lowercase().contains("error"))
        .collect();
    assert_eq!(errors.len(), 1, "{args:?}: one error line expected: {err}");
    assert!(
        errors[0].starts_with("topocomm: error: "),
        "{args:?}: {}",
        errors[0]
    );
    assert!(
        errors[0].contains(needle),
        "{args:?}: '{needle}' not in: {}",
        errors[0]
    );
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tc-charact-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The live machine as `topocomm topo --json` describes it.
struct Live {
    json: Value,
    /// PU OS indexes in topology (logical) order.
    pus: Vec<u64>,
    /// Locality classes present (`topo --classes`): class -> pair count.
    classes: BTreeMap<String, u64>,
}

fn live() -> Live {
    let json = ok_json(&["topo", "--json"]);
    let pus = json["pus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["os_index"].as_u64().unwrap())
        .collect();
    let classes = ok_text(&["topo", "--classes"])
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 3, "topo --classes line: {l}");
            (f[0].to_string(), f[1].parse().unwrap())
        })
        .collect();
    Live { json, pus, classes }
}

impl Live {
    /// The last-level cache size as the commands see it (largest level
    /// present, data or unified; 32 MiB when hwloc reports no cache).
    fn llc(&self) -> u64 {
        let caches: Vec<(u64, u64)> = self.json["objects"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|o| o.get("cache"))
            .filter(|c| c["type"] != "instruction")
            .map(|c| (c["level"].as_u64().unwrap(), c["size"].as_u64().unwrap()))
            .collect();
        caches.iter().max().map_or(32 << 20, |&(top, _)| {
            caches
                .iter()
                .filter(|c| c.0 == top)
                .map(|c| c.1)
                .max()
                .unwrap()
        })
    }

    /// The class of a pair, as `topocomm topo --pair P,Q` says.
    fn class_of(&self, p: u64, q: u64) -> String {
        ok_text(&["topo", "--pair", &format!("{p},{q}")])
            .trim()
            .to_string()
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

/// A `summary` object is that of `samples`: count, extremes and mean exact,
/// median between the two middle samples, min <= ci_low <= median <=
/// ci_high <= max, p99 within the range.
fn check_summary(s: &Value, samples: &[f64], what: &str) {
    let keys: BTreeSet<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["n", "median", "ci_low", "ci_high", "min", "max", "p99", "mean"]),
        "{what}: summary fields"
    );
    assert!(!samples.is_empty(), "{what}: no samples");
    assert!(samples.iter().all(|x| x.is_finite()), "{what}: {samples:?}");
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    assert_eq!(s["n"].as_u64(), Some(n as u64), "{what}: {s}");
    assert_eq!(f(&s["min"]), sorted[0], "{what}: {s}");
    assert_eq!(f(&s["max"]), sorted[n - 1], "{what}: {s}");
    let mean = samples.iter().sum::<f64>() / n as f64;
    assert!(close(f(&s["mean"]), mean), "{what}: mean {mean}: {s}");
    let med = f(&s["median"]);
    assert!(
        sorted[(n - 1) / 2] <= med && med <= sorted[n / 2],
        "{what}: median {med} of {sorted:?}"
    );
    let (lo, hi) = (f(&s["ci_low"]), f(&s["ci_high"]));
    assert!(
        sorted[0] <= lo && lo <= med && med <= hi && hi <= sorted[n - 1],
        "{what}: CI [{lo}, {hi}] around {med}: {s}"
    );
    assert!(
        (sorted[0]..=sorted[n - 1]).contains(&f(&s["p99"])),
        "{what}: {s}"
    );
}

fn samples_of(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(f).collect()
}

/// The run metadata every characterization file starts with.
fn check_meta(meta: &Value, live: &Live, args: &[&str]) {
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"), "{meta}");
    let command: Vec<&str> = meta["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(&command[1..], args, "meta.command is the command line");
    assert_eq!(meta["fingerprint"], live.json["fingerprint"], "{meta}");
    assert_eq!(meta["cpu_model"], live.json["cpu_model"], "{meta}");
    for k in ["kernel", "hostname"] {
        assert!(meta[k].is_string(), "meta.{k}: {meta}");
    }
    assert!(
        meta["started_unix"].as_u64().unwrap() > 1_600_000_000,
        "{meta}"
    );
    let res = f(&meta["timer"]["resolution_ns"]);
    let over = f(&meta["timer"]["overhead_ns"]);
    assert!(res > 0.0 && res < 1e6, "timer resolution: {meta}");
    assert!((0.0..1e6).contains(&over), "timer overhead: {meta}");
}

/// Upper bound of any throughput a core (or a few) can show: GB/s.
const MAX_GBS: f64 = 2000.0;

#[test]
fn cache_quick_follows_its_format() {
    let live = live();
    let dir = tempdir("cache");
    let args = [
        "bench",
        "cache",
        "--quick",
        "--json",
        "--classes",
        "self,none",
        "--states",
        "M,I",
        "--out",
        dir.to_str().unwrap(),
    ];
    let r = ok_json(&args);
    // --out writes the same document as --json prints, and the curves.
    assert_eq!(read_json(&dir.join("cache.json")), r);
    for op in ["load", "store", "chase"] {
        let svg = std::fs::read_to_string(dir.join(format!("cache-{op}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("self M") && svg.contains("none I"), "{op}");
    }
    assert_eq!(r["schema"], "topocomm.bench-cache/1");
    check_meta(&r["meta"], &live, &args);
    // Defaults of --quick: the first PU in topology order, 3 samples,
    // sizes x4 apart from 1 KiB, the last one 4x the LLC.
    let measurer = r["measurer"].as_u64().unwrap();
    assert_eq!(measurer, live.pus[0]);
    assert_eq!(r["quick"], true);
    assert_eq!(r["samples"], 3);
    let top = 4 * live.llc().max(64 * 1024) / 64 * 64;
    let mut want = Vec::new();
    let mut s = 1024;
    while s < top {
        want.push(s);
        s *= 4;
    }
    want.push(top);
    let sizes: Vec<u64> = r["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(sizes, want);
    assert_eq!(r["states"], serde_json::json!(["M", "I"]));
    assert!(r["chase_cap"].as_u64().unwrap() > 0 && r["evict_bytes"].as_u64().unwrap() > 0);
    let holders = r["holders"].as_array().unwrap();
    let me = holders.iter().find(|h| h["class"] == "self").unwrap();
    assert_eq!(me["q"].as_u64(), Some(measurer), "{me}");
    assert!(
        r["omitted"].as_array().unwrap().is_empty(),
        "{}",
        r["omitted"]
    );

    // One point per (class, state) curve, operation and size; state I is
    // reported under class `none` and only there.
    let pts = r["points"].as_array().unwrap();
    let mut seen = BTreeSet::new();
    for p in pts {
        let (class, state, op) = (
            p["class"].as_str().unwrap(),
            p["state"].as_str().unwrap(),
            p["op"].as_str().unwrap(),
        );
        assert!(
            matches!((class, state), ("self", "M") | ("none", "I")),
            "{p}"
        );
        let size = p["size"].as_u64().unwrap();
        assert!(seen.insert((class, op, size)), "duplicate point {p}");
        let unit = if op == "chase" { "ns" } else { "GB/s" };
        assert_eq!(p["unit"], unit, "{p}");
        assert!(
            p.get("second").is_none(),
            "M and I need no second core: {p}"
        );
        assert!(
            p["holder"].is_u64() && p["passes"].as_u64().unwrap() >= 1,
            "{p}"
        );
        assert!(p["resolved"].is_boolean(), "{p}");
        let v = samples_of(&p["samples"]);
        assert_eq!(v.len(), 3, "{p}");
        assert!(v.iter().all(|&x| x > 0.0), "{p}");
        check_summary(&p["summary"], &v, &format!("{class} {state} {op} {size}"));
        // On the median: a sample whose span is below the timer overhead
        // (a loaded machine at the clock check) is clamped to 1 ns.
        let m = f(&p["summary"]["median"]);
        if op == "chase" {
            // A dependent load takes at least a cycle; DRAM well under 100 us.
            assert!(m > 0.1 && m < 1e5, "chase {m} ns: {p}");
        } else {
            assert!(m < MAX_GBS, "{op} {m} GB/s: {p}");
        }
    }
    assert_eq!(seen.len(), 2 * 3 * sizes.len());

    let medians = |class: &str, op: &str| -> Vec<(u64, f64)> {
        pts.iter()
            .filter(|p| p["class"] == class && p["op"] == op)
            .map(|p| (p["size"].as_u64().unwrap(), f(&p["summary"]["median"])))
            .collect()
    };
    let l1 = |v: &[(u64, f64)]| v.iter().find(|x| x.0 == 16 * 1024).unwrap().1;
    let dram = |v: &[(u64, f64)]| v.last().unwrap().1;
    // L1-sized hits beat DRAM-sized misses, in throughput and in latency.
    let (load_m, load_i) = (medians("self", "load"), medians("none", "load"));
    let (chase_m, chase_i) = (medians("self", "chase"), medians("none", "chase"));
    assert!(l1(&load_m) > dram(&load_i), "{load_m:?} vs {load_i:?}");
    assert!(dram(&chase_i) > l1(&chase_m), "{chase_i:?} vs {chase_m:?}");
    assert!(dram(&chase_i) > 20.0, "DRAM chase {chase_i:?} ns");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Known defect (crates/measure/src/cache.rs): a chase sample times
/// `passes` back-to-back passes that each restart at line 0, so the passes
/// are independent dependency chains that an out-of-order core overlaps.
/// Small buffers get the most passes and a latency below the L1's: on the
/// dev VM 0.47 ns at 1 KiB (64 passes), 0.78 at 4 KiB (16), 1.2 at 16 KiB
/// (4), 1.25 at 32 KiB (2), all L1 hits.
#[test]
#[ignore = "known defect: pointer-chase latency of small L1-resident buffers is underestimated (passes overlap)"]
fn chase_latency_is_flat_within_l1() {
    let r = ok_json(&[
        "bench",
        "cache",
        "--quick",
        "--json",
        "--classes",
        "self",
        "--states",
        "M",
        "--ops",
        "chase",
        "--sizes",
        "1K,16K",
        "--samples",
        "7",
    ]);
    let m: Vec<f64> = r["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| f(&p["summary"]["median"]))
        .collect();
    assert_eq!(m.len(), 2);
    assert!(
        m[0] >= 0.7 * m[1],
        "chase 1K {} ns vs 16K {} ns",
        m[0],
        m[1]
    );
}

#[test]
fn placement_quick_follows_its_format() {
    let live = live();
    let dir = tempdir("placement");
    let args = [
        "bench",
        "placement",
        "--quick",
        "--json",
        "--grid",
        "8",
        "--out",
        dir.to_str().unwrap(),
    ];
    let r = ok_json(&args);
    assert_eq!(read_json(&dir.join("placement.json")), r);
    assert_eq!(r["schema"], "topocomm.bench-placement/1");
    check_meta(&r["meta"], &live, &args);
    assert_eq!(r["quick"], true);
    // --grid as given, the rest --quick's defaults.
    assert_eq!(
        r["workload"],
        serde_json::json!({"grid": 8, "max_iter": 500, "tolerance": 1e-9,
            "triad_len": 262144, "triad_reps": 3, "samples": 2})
    );
    let n = live.pus.len();
    let ks: BTreeSet<usize> = [1, n].into();
    let runs = r["runs"].as_array().unwrap();
    let run_ks: BTreeSet<usize> = runs
        .iter()
        .map(|x| x["workers"].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(run_ks, ks, "--quick runs k = 1 and N");
    let names = [
        "compact",
        "reverse",
        "scatter-package",
        "scatter-numa",
        "scatter-l3",
        "scatter-l2",
        "scatter-core",
    ];
    let mut sets: BTreeSet<(usize, Vec<u64>)> = BTreeSet::new();
    for x in runs {
        let k = x["workers"].as_u64().unwrap() as usize;
        let name = x["mapping"]["name"].as_str().unwrap();
        let parts: Vec<&str> = name.split('+').collect();
        assert!(parts.iter().all(|p| names.contains(p)), "{name}");
        let pus: Vec<u64> = x["mapping"]["pus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        let mut set = pus.clone();
        set.sort_unstable();
        set.dedup();
        assert_eq!(set.len(), k, "{k} distinct PUs: {x}");
        assert!(pus.iter().all(|p| live.pus.contains(p)), "{x}");
        // Mappings giving the same PU set are merged into one run.
        assert!(
            sets.insert((k, set.clone())),
            "two runs on the same PUs: {x}"
        );
        let first: BTreeSet<u64> = live.pus[..k].iter().copied().collect();
        let last: BTreeSet<u64> = live.pus[n - k..].iter().copied().collect();
        let got: BTreeSet<u64> = set.iter().copied().collect();
        if parts.contains(&"compact") {
            assert_eq!(got, first, "compact = first k PUs: {x}");
        }
        if parts.contains(&"reverse") {
            assert_eq!(got, last, "reverse = last k PUs: {x}");
        }
        let cg = samples_of(&x["cg_mflops"]);
        let triad = samples_of(&x["triad_gbs"]);
        assert_eq!((cg.len(), triad.len()), (2, 2), "{x}");
        check_summary(&x["cg"], &cg, name);
        check_summary(&x["triad"], &triad, name);
        assert!(cg.iter().all(|&v| v > 1.0 && v < 1e6 * k as f64), "{x}");
        assert!(
            triad.iter().all(|&v| v > 0.1 && v < MAX_GBS * k as f64),
            "{x}"
        );
        let it = x["cg_iterations"].as_u64().unwrap();
        assert!((1..=500).contains(&it), "{x}");
        assert!(f(&x["cg_relative_residual"]) < 1e-6, "{x}");
        assert!(f(&x["cg_max_error"]) < 1e-4, "{x}");
    }
    // Per k: best and worst by median CG rate, and the two ratios.
    let per_k = r["per_k"].as_array().unwrap();
    assert_eq!(per_k.len(), ks.len());
    for (s, &k) in per_k.iter().zip(&ks) {
        assert_eq!(s["workers"].as_u64(), Some(k as u64));
        let rs: Vec<&Value> = runs
            .iter()
            .filter(|x| x["workers"].as_u64() == Some(k as u64))
            .collect();
        let med = |x: &Value, key: &str| f(&x[key]["median"]);
        let by = |a: &&&Value, b: &&&Value| med(a, "cg").total_cmp(&med(b, "cg"));
        let best = rs.iter().max_by(by).unwrap();
        let worst = rs.iter().min_by(by).unwrap();
        assert_eq!(s["best"], best["mapping"]["name"], "{s}");
        assert_eq!(s["worst"], worst["mapping"]["name"], "{s}");
        let cg = f(&s["cg_best_over_worst"]);
        assert!(
            close(cg, med(best, "cg") / med(worst, "cg")) && cg >= 1.0,
            "{s}"
        );
        let tb = rs.iter().map(|x| med(x, "triad")).fold(f64::MIN, f64::max);
        let tw = rs.iter().map(|x| med(x, "triad")).fold(f64::MAX, f64::min);
        let t = f(&s["triad_best_over_worst"]);
        assert!(close(t, tb / tw) && t >= 1.0, "{s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cells of a heatmap SVG: `(row label, column label) -> value`, None
/// for "not measured".
fn heatmap_cells(svg: &str) -> Vec<(String, String, Option<f64>)> {
    svg.split("<title>")
        .skip(1)
        .filter_map(|t| t.split_once("</title>").map(|(a, _)| a))
        .filter(|t| !t.ends_with("boundary"))
        .map(|t| {
            let (pair, val) = t.split_once(": ").unwrap_or_else(|| panic!("cell {t}"));
            let (p, q) = pair.split_once(" - ").unwrap();
            let v = if val == "not measured" {
                None
            } else {
                Some(val.split_whitespace().next().unwrap().parse().unwrap())
            };
            (p.to_string(), q.to_string(), v)
        })
        .collect()
}

/// Width and height of a PNG (signature, then the IHDR chunk).
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

/// A costs file written by `bench matrix --costs-out` from the report `r`:
/// per class, the pooled median of the transport's 8-byte latency and
/// bandwidth, else of the cache-line latency (ns -> us) and the remote-M
/// read rate, with the source named (docs/formats/costs-json.md).
fn check_costs(c: &Value, r: &Value) {
    assert_eq!(c["schema"], "topocomm.costs/1");
    assert_eq!(c["fingerprint"], r["meta"]["fingerprint"]);
    assert_eq!(c["size"], r["params"]["size"]);
    let classes = r["classes"].as_array().unwrap();
    let class_median = |class: &str, metric: &str| {
        classes
            .iter()
            .find(|x| x["class"] == class && x["metric"] == metric)
            .map(|x| f(&x["summary"]["median"]))
            .unwrap_or_else(|| panic!("no {metric} summary for {class}"))
    };
    let transport = r["params"]["transport"] == true;
    let cc = c["classes"].as_object().unwrap();
    let measured: BTreeSet<&str> = classes
        .iter()
        .map(|x| x["class"].as_str().unwrap())
        .collect();
    assert_eq!(
        cc.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        measured
    );
    for (class, v) in cc {
        let (lat, lsrc, bw, bsrc) = if transport {
            (
                class_median(class, "latency"),
                "transport",
                class_median(class, "bw"),
                "transport",
            )
        } else {
            (
                class_median(class, "c2c_latency") / 1000.0,
                "cacheline",
                class_median(class, "c2c_read_bw"),
                "coherence-read",
            )
        };
        assert!(close(f(&v["latency_us"]), lat), "{class}: {v} vs {lat} us");
        assert!(
            close(f(&v["bandwidth_gbs"]), bw),
            "{class}: {v} vs {bw} GB/s"
        );
        assert_eq!(v["latency_source"], lsrc, "{class}: {v}");
        assert_eq!(v["bandwidth_source"], bsrc, "{class}: {v}");
    }
}

#[test]
fn matrix_quick_files_resume_and_costs() {
    let live = live();
    if live.pus.len() < 2 {
        eprintln!("notice: one PU only; skipping the pair matrix test");
        return;
    }
    let dir = tempdir("matrix");
    let d = dir.to_str().unwrap();
    let costs = dir.join("costs.json");
    let args = [
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
    ];
    let r = ok_json(&args);
    assert_eq!(
        read_json(&dir.join("matrix.json")),
        r,
        "matrix.json is the result"
    );
    assert_eq!(r["schema"], "topocomm.bench-matrix/1");
    check_meta(&r["meta"], &live, &args);
    assert_eq!(r["complete"], true);
    let transport = r["params"]["transport"].as_bool().unwrap();
    assert_eq!(
        r["params"],
        serde_json::json!({"selection": "per-class:1", "size": 1048576, "samples": 5,
            "rounds": 300, "quick": true, "transport": transport})
    );

    // --per-class 1: one pair per locality class present, each of its class.
    let planned: Vec<(u64, u64)> = r["planned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
        .collect();
    let mut planned_classes = BTreeSet::new();
    for &(p, q) in &planned {
        assert_ne!(p, q);
        assert!(planned_classes.insert(live.class_of(p, q)), "{planned:?}");
    }
    let present: BTreeSet<String> = live.classes.keys().cloned().collect();
    assert_eq!(planned_classes, present, "one pair per class");
    // Rows/columns: the planned pairs' PUs, in topology order.
    let pus: Vec<u64> = r["pus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    let want: Vec<u64> = live
        .pus
        .iter()
        .copied()
        .filter(|x| planned.iter().any(|&(p, q)| p == *x || q == *x))
        .collect();
    assert_eq!(pus, want, "pus: planned PUs in topology order");

    let mut units = BTreeMap::from([("c2c_latency", "ns"), ("c2c_read_bw", "GB/s")]);
    if transport {
        units.extend([("latency", "us"), ("bw", "GB/s"), ("msgrate", "Mmsg/s")]);
        assert!(
            r["omitted"].as_array().unwrap().is_empty(),
            "{}",
            r["omitted"]
        );
    } else {
        let o = r["omitted"].to_string();
        assert!(o.contains("latency, bw, msgrate"), "{o}");
    }
    let pairs = r["pairs"].as_array().unwrap();
    let measured: Vec<(u64, u64)> = pairs
        .iter()
        .map(|p| (p["p"].as_u64().unwrap(), p["q"].as_u64().unwrap()))
        .collect();
    assert_eq!(measured, planned, "every planned pair measured once");
    // (pair, metric) -> (median, samples)
    let mut med: BTreeMap<(u64, u64, String), (f64, Vec<f64>)> = BTreeMap::new();
    for p in pairs {
        let (pp, qq) = (p["p"].as_u64().unwrap(), p["q"].as_u64().unwrap());
        assert_eq!(p["class"], live.class_of(pp, qq).as_str(), "{p}");
        let metrics = p["metrics"].as_array().unwrap();
        let names: BTreeSet<&str> = metrics
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            units.keys().copied().collect(),
            "metrics of {pp},{qq}"
        );
        for m in metrics {
            let name = m["name"].as_str().unwrap();
            assert_eq!(m["unit"], units[name], "{name}");
            let v = samples_of(&m["samples"]);
            // The c2c_latency warm-up sample is dropped: 5 remain.
            assert_eq!(v.len(), 5, "{name}: {v:?}");
            check_summary(&m["summary"], &v, name);
            assert!(v.iter().all(|&x| x > 0.0), "{name}: {v:?}");
            med.insert((pp, qq, name.into()), (f(&m["summary"]["median"]), v));
        }
        // Physics and cross-metric checks on each metric's best sample (the
        // least disturbed by other jobs: metrics are measured one after the
        // other, and a loaded machine slows some of them more than others).
        let samples = |name: &str| &med[&(pp, qq, name.to_string())].1;
        let lowest = |name: &str| samples(name).iter().copied().fold(f64::MAX, f64::min);
        let highest = |name: &str| samples(name).iter().copied().fold(0.0, f64::max);
        let lat_ns = lowest("c2c_latency");
        // The upper bound is a unit sanity check, not a performance claim: a
        // busy CI machine has measured 20 µs per hop.
        assert!(
            lat_ns > 1.0 && lat_ns < 1_000_000.0,
            "c2c latency {lat_ns} ns"
        );
        let read = highest("c2c_read_bw");
        assert!(read > 0.1 && read < MAX_GBS, "c2c read {read} GB/s");
        if transport {
            // A transport message needs at least the one-way cache-line
            // transfer (the "cacheline" lower bound of costs-json.md). The
            // two are measured by different processes, and on these VMs a
            // process-level state moves a line transfer up to 5x
            // (docs/transport.md, "Job-level slow mode"): checked within 10x,
            // which still catches a unit slip.
            let us = lowest("latency");
            assert!(us * 1000.0 >= 0.1 * lat_ns, "{us} us vs {lat_ns} ns");
            // Again a unit sanity bound, not a performance claim.
            assert!(us < 10_000.0, "transport latency {us} us");
            // The bandwidth is not compared with the remote-Modified read
            // rate: that bounds a copy of freshly written data, and the bw
            // test resends one buffer the sender never rewrites (clean lines,
            // read from the shared cache). CI saw 15.1 GB/s against 5.1.
            let bw = highest("bw");
            assert!(bw > 0.1 && bw < MAX_GBS, "bw {bw} GB/s");
            // Message rate x size is a bandwidth, below the physical bound.
            // (Not compared with bw: on a loaded machine the two jobs' best
            // samples were seen 10x apart, either way.)
            let rate_gbs = highest("msgrate") * 1e6 * 1048576.0 / 1e9;
            assert!(
                rate_gbs > 0.0 && rate_gbs < MAX_GBS,
                "msgrate x 1 MiB = {rate_gbs} GB/s"
            );
        }
    }
    // Per-class summaries pool the raw samples of the class's pairs.
    let classes = r["classes"].as_array().unwrap();
    assert_eq!(classes.len(), planned_classes.len() * units.len());
    for c in classes {
        let (class, metric) = (c["class"].as_str().unwrap(), c["metric"].as_str().unwrap());
        assert_eq!(c["unit"], units[metric], "{c}");
        let of_class: Vec<&Value> = pairs.iter().filter(|p| p["class"] == class).collect();
        assert_eq!(c["pairs"].as_u64(), Some(of_class.len() as u64), "{c}");
        let pooled: Vec<f64> = of_class
            .iter()
            .flat_map(|p| {
                let key = (
                    p["p"].as_u64().unwrap(),
                    p["q"].as_u64().unwrap(),
                    metric.to_string(),
                );
                med[&key].1.clone()
            })
            .collect();
        check_summary(&c["summary"], &pooled, &format!("class {class} {metric}"));
    }

    // Heatmaps: one SVG and PNG per metric, n x n over `pus`, symmetric,
    // the median of each measured pair, the diagonal not measured.
    let n = pus.len();
    for name in units.keys() {
        let svg = std::fs::read_to_string(dir.join(format!("heatmap-{name}.svg"))).unwrap();
        assert!(svg.starts_with("<svg"));
        let cells = heatmap_cells(&svg);
        assert_eq!(cells.len(), n * n, "{name}: {n}x{n} cells");
        let mut at: BTreeMap<(u64, u64), Option<f64>> = BTreeMap::new();
        for (k, (p, q, v)) in cells.iter().enumerate() {
            let (i, j) = (k / n, k % n);
            assert_eq!(
                (p.as_str(), q.as_str()),
                (pus[i].to_string().as_str(), pus[j].to_string().as_str()),
                "{name}: cell order"
            );
            at.insert((pus[i], pus[j]), *v);
        }
        for &a in &pus {
            assert_eq!(at[&(a, a)], None, "{name}: diagonal {a}");
            for &b in &pus {
                assert_eq!(at[&(a, b)], at[&(b, a)], "{name}: symmetric at {a},{b}");
                let m = med
                    .get(&(a, b, name.to_string()))
                    .or_else(|| med.get(&(b, a, name.to_string())));
                match (m, at[&(a, b)]) {
                    (Some((m, _)), Some(v)) => {
                        assert!(
                            (v - m).abs() <= 1e-4 * m.abs().max(1.0),
                            "{name} {a},{b}: {v} vs {m}"
                        )
                    }
                    (None, None) => {}
                    (m, v) => panic!("{name} {a},{b}: measured {m:?}, drawn {v:?}"),
                }
            }
        }
        let (w, h) = png_size(&std::fs::read(dir.join(format!("heatmap-{name}.png"))).unwrap());
        assert!(
            w == h && w > 0 && w as usize % n == 0,
            "{name}: PNG {w}x{h}"
        );
    }

    // CSVs: one row per pair and metric / per raw sample, the JSON's numbers.
    let csv = std::fs::read_to_string(dir.join("matrix.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("p,q,class,metric,unit,n,median,ci_low,ci_high,min,max")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), pairs.len() * units.len());
    for row in &rows {
        let (p, q): (u64, u64) = (row[0].parse().unwrap(), row[1].parse().unwrap());
        let pair = pairs.iter().find(|x| x["p"] == p && x["q"] == q).unwrap();
        assert_eq!(pair["class"], row[2]);
        let m = pair["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == row[3])
            .unwrap();
        assert_eq!(m["unit"], row[4]);
        let s = &m["summary"];
        assert_eq!(s["n"].as_u64(), Some(row[5].parse().unwrap()));
        // (serde_json's float parsing may differ from Rust's by an ulp.)
        for (k, key) in ["median", "ci_low", "ci_high", "min", "max"]
            .iter()
            .enumerate()
        {
            let v: f64 = row[6 + k].parse().unwrap();
            assert!(close(f(&s[key]), v), "{key}: {row:?} vs {s}");
        }
    }
    let raw = std::fs::read_to_string(dir.join("matrix-samples.csv")).unwrap();
    let mut lines = raw.lines();
    assert_eq!(lines.next(), Some("p,q,class,metric,unit,sample,value"));
    let mut got: BTreeMap<(u64, u64, String), Vec<(usize, f64)>> = BTreeMap::new();
    for l in lines {
        let c: Vec<&str> = l.split(',').collect();
        assert_eq!(c.len(), 7, "{l}");
        got.entry((
            c[0].parse().unwrap(),
            c[1].parse().unwrap(),
            c[3].to_string(),
        ))
        .or_default()
        .push((c[5].parse().unwrap(), c[6].parse().unwrap()));
    }
    assert_eq!(got.len(), med.len());
    for (key, (_, samples)) in &med {
        let rows = &got[key];
        assert_eq!(rows.len(), samples.len(), "{key:?}");
        for (k, (&(i, v), &want)) in rows.iter().zip(samples).enumerate() {
            assert!(
                i == k && close(v, want),
                "{key:?}: sample {k}: {i},{v} vs {want}"
            );
        }
    }

    // Costs: per class, the pooled medians of the transport metrics.
    let c = read_json(&costs);
    check_costs(&c, &r);
    let cc = c["classes"].as_object().unwrap();
    assert_eq!(cc.keys().cloned().collect::<BTreeSet<_>>(), planned_classes);

    // The mapper takes the file: each class's cost is msgs * latency_us +
    // bytes / (bandwidth_gbs * 1000) with this file's numbers.
    let edges = dir.join("edges.csv");
    std::fs::write(&edges, "src,dst,bytes,msgs\n0,1,1000000,10\n").unwrap();
    let m = ok_json(&[
        "map",
        edges.to_str().unwrap(),
        "--costs",
        costs.to_str().unwrap(),
        "--format",
        "json",
        "-q",
    ]);
    assert_eq!(m["costs"], costs.to_str().unwrap(), "{m}");
    let by_class = m["score"]["by_class"].as_array().unwrap();
    assert!(!by_class.is_empty(), "{m}");
    for b in by_class {
        let class = b["class"].as_str().unwrap();
        let Some(k) = cc.get(class) else { continue };
        let want = f(&b["msgs"]) * f(&k["latency_us"])
            + f(&b["bytes"]) / (f(&k["bandwidth_gbs"]) * 1000.0);
        assert!(close(f(&b["cost_us"]), want), "{class}: {b} vs costs {k}");
    }

    // Resuming a complete file measures nothing new; other parameters are refused.
    let file = dir.join("matrix.json");
    let fpath = file.to_str().unwrap();
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
        fpath,
    ]);
    assert_eq!(again["pairs"], r["pairs"]);
    fails_naming(
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
            fpath,
        ],
        &format!("--resume: '{fpath}' used other parameters"),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn matrix_without_transport_says_so_and_costs_fall_back() {
    let live = live();
    if live.pus.len() < 2 {
        eprintln!("notice: one PU only; skipping the pair matrix test");
        return;
    }
    let dir = tempdir("matrix-nt");
    let costs = dir.join("costs.json");
    let r = ok_json(&[
        "bench",
        "matrix",
        "--quick",
        "--json",
        "--per-class",
        "1",
        "--no-transport",
        "--samples",
        "3",
        "--rounds",
        "100",
        "--out",
        dir.to_str().unwrap(),
        "--costs-out",
        costs.to_str().unwrap(),
    ]);
    assert_eq!(r["params"]["transport"], false);
    assert_eq!(
        (
            r["params"]["samples"].as_u64(),
            r["params"]["rounds"].as_u64()
        ),
        (Some(3), Some(100))
    );
    assert_eq!(
        r["omitted"],
        serde_json::json!(["latency, bw, msgrate (topocomm transport): skipped by --no-transport"])
    );
    for p in r["pairs"].as_array().unwrap() {
        let names: Vec<&str> = p["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["c2c_latency", "c2c_read_bw"], "{p}");
        for m in p["metrics"].as_array().unwrap() {
            assert_eq!(m["samples"].as_array().unwrap().len(), 3, "{m}");
        }
    }
    for name in ["latency", "bw", "msgrate"] {
        assert!(
            !dir.join(format!("heatmap-{name}.svg")).exists(),
            "{name}: not measured"
        );
    }
    check_costs(&read_json(&costs), &r);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn absent_pus_and_classes_are_errors() {
    let big = "synthetic:pack:4 core:8 pu:1";
    for cmd in ["matrix", "cache", "placement"] {
        fails_naming(
            &["--topology", big, "bench", cmd, "--quick"],
            "does not have",
        );
    }
    fails_naming(
        &["bench", "cache", "--quick", "--classes", "network"],
        "--classes: locality class 'network' is not present",
    );
    fails_naming(
        &["bench", "matrix", "--quick", "--pus", "0,4096"],
        "--pus: PU with OS index 4096",
    );
    fails_naming(
        &["bench", "cache", "--quick", "--pu", "4096"],
        "--pu: PU with OS index 4096",
    );
    fails_naming(
        &["bench", "placement", "--workers", "4096"],
        "--workers: '4096'",
    );
    fails_naming(&["bench", "placement", "--workers", "0"], "--workers: '0'");
}

#[test]
fn bad_arguments_are_one_line_errors_naming_them() {
    let tmp = std::env::temp_dir().join(format!("tc-charact-bad-{}", std::process::id()));
    let out = tmp.to_str().unwrap();
    // `topocomm bench <cmd> <base args> <extra>` fails naming `needle`.
    let bad = |base: &[&str], extra: &[&str], needle: &str| {
        let a: Vec<&str> = base.iter().chain(extra).copied().collect();
        fails_naming(&a, needle);
    };
    let matrix_base = ["bench", "matrix", "--quick", "--out", out];
    let matrix = |extra: &[&str], needle: &str| bad(&matrix_base, extra, needle);
    matrix(&["--size", "32"], "--size: at least 64 bytes");
    matrix(&["--size", "1X"], "--size: '1X' is not a size");
    matrix(&["--per-class", "0"], "--per-class");
    matrix(&["--samples", "0"], "--samples");
    matrix(&["--rounds", "0"], "--rounds");
    matrix(&["--resume", "/nonexistent/matrix.json"], "--resume");
    let cache = |extra: &[&str], needle: &str| bad(&["bench", "cache", "--quick"], extra, needle);
    cache(&["--sizes", "32"], "--sizes");
    cache(&["--sizes", "4Q"], "--sizes: '4Q'");
    cache(&["--max-size", "1X"], "--max-size");
    cache(&["--ops", "fly"], "--ops: unknown operation 'fly'");
    cache(&["--states", "Q"], "--states: unknown cache state 'Q'");
    cache(&["--samples", "0"], "--samples");
    let placement =
        |extra: &[&str], needle: &str| bad(&["bench", "placement", "--quick"], extra, needle);
    placement(&["--grid", "1"], "--grid");
    placement(&["--samples", "0"], "--samples");
    placement(&["--tolerance", "0"], "--tolerance");
    placement(&["--triad-len", "1X"], "--triad-len: '1X'");
    let _ = std::fs::remove_dir_all(&tmp);
}
