//! `topocomm bench matrix`: per-PU-pair characterization with
//! topology-ordered heatmaps, per-class summaries, resumable partial
//! results and a costs file for the mapping engine.

use super::charact::{self, fmt_ci, Progress};
use crate::common::{text_table, GlobalOpts};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use topocomm_measure::cache::{self, CacheConfig, Holder, Op, State};
use topocomm_measure::matrix::{self, Metric, PairResult, PairSelection, TransportBackend};
use topocomm_measure::meta::RunMeta;
use topocomm_measure::Summary;
use topocomm_report::heatmap::{Boundaries, Heatmap};
use topocomm_topo::{ClassMatrix, Machine, ObjectKind, PuSet};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// Only pairs among these PUs (OS indexes, e.g. `0-3,8`)
    #[arg(long, value_name = "LIST")]
    pub pus: Option<String>,
    /// At most N pairs per locality class (for big machines)
    #[arg(long, value_name = "N", conflicts_with = "pus")]
    pub per_class: Option<usize>,
    /// Message size for bandwidth and message rate
    #[arg(long, default_value = "1M", value_name = "SIZE")]
    pub size: String,
    /// Samples per pair and metric (default 21; 5 with --quick)
    #[arg(long)]
    pub samples: Option<usize>,
    /// Cache-line round trips per latency sample (default 2000; 300 with --quick)
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Fast, coarse run for CI and the report
    #[arg(long)]
    pub quick: bool,
    /// Skip the transport metrics even if the transport is available
    #[arg(long)]
    pub no_transport: bool,
    /// Folder for matrix.json (rewritten after every pair), CSVs and heatmaps
    #[arg(long, value_name = "DIR", default_value = "topocomm-matrix")]
    pub out: PathBuf,
    /// Continue a partial run from its matrix.json (same machine and parameters)
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,
    /// Also write per-class costs for the mapping engine here
    #[arg(long, value_name = "FILE")]
    pub costs_out: Option<PathBuf>,
    /// Print the JSON result on stdout instead of the tables
    #[arg(long)]
    pub json: bool,
}

/// What decides whether a partial file can be resumed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixParams {
    pub selection: String,
    pub size: u64,
    pub samples: usize,
    pub rounds: u32,
    pub quick: bool,
    pub transport: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClassStat {
    pub class: String,
    pub metric: String,
    pub unit: String,
    pub pairs: usize,
    /// Over the raw samples of all pairs of the class.
    pub summary: Summary,
}

/// The JSON file (docs/formats/bench-matrix-json.md).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MatrixReport {
    pub schema: String,
    pub meta: RunMeta,
    pub params: MatrixParams,
    /// PUs of the rows/columns, topology order.
    pub pus: Vec<u32>,
    pub planned: Vec<(u32, u32)>,
    pub pairs: Vec<PairResult>,
    /// Metrics not measured, and why.
    pub omitted: Vec<String>,
    pub classes: Vec<ClassStat>,
    pub complete: bool,
}

const SCHEMA: &str = "topocomm.bench-matrix/1";

fn c2c_read_bw(
    m: &Machine,
    p: u32,
    q: u32,
    class: &str,
    size: u64,
    samples: usize,
    overhead: f64,
) -> Result<Metric> {
    let cfg = CacheConfig {
        measurer: p,
        holders: vec![Holder {
            class: class.into(),
            q,
            r: None,
        }],
        states: vec![State::M],
        ops: vec![Op::Load],
        sizes: vec![size],
        samples,
        chase_cap: 1,
        evict_bytes: cache::evict_bytes(m),
        timer_overhead_ns: overhead,
        timer_resolution_ns: 1.0,
    };
    let (pts, _) = cache::run(&cfg, &mut |_, _| {})?;
    let pt = pts
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("no point measured"))?;
    Ok(Metric::new("c2c_read_bw", "GB/s", pt.samples)?)
}

fn load_resume(path: &Path, m: &Machine, params: &MatrixParams) -> Result<MatrixReport> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--resume: cannot read '{}'", path.display()))?;
    let r: MatrixReport = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "--resume: '{}' is not a bench matrix file ({e})",
            path.display()
        )
    })?;
    if r.schema != SCHEMA {
        bail!(
            "--resume: '{}' has schema '{}', expected '{SCHEMA}'",
            path.display(),
            r.schema
        );
    }
    if r.meta.fingerprint != m.fingerprint {
        bail!(
            "--resume: '{}' was measured on another machine (fingerprint {}, this one {})",
            path.display(),
            r.meta.fingerprint,
            m.fingerprint
        );
    }
    if &r.params != params {
        bail!(
            "--resume: '{}' used other parameters ({:?}); rerun with the same --pus/--per-class/--size/--samples/--rounds/--quick",
            path.display(),
            r.params
        );
    }
    Ok(r)
}

/// Per-class pooled summaries of every metric.
fn class_stats(pairs: &[PairResult]) -> Vec<ClassStat> {
    let mut out: Vec<ClassStat> = Vec::new();
    let mut keys: Vec<(String, String, String)> = Vec::new();
    for p in pairs {
        for mt in &p.metrics {
            let k = (p.class.clone(), mt.name.clone(), mt.unit.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    for (class, metric, unit) in keys {
        let mut all = Vec::new();
        let mut n = 0;
        for p in pairs.iter().filter(|p| p.class == class) {
            if let Some(mt) = p.metrics.iter().find(|x| x.name == metric) {
                all.extend_from_slice(&mt.samples);
                n += 1;
            }
        }
        if let Some(summary) = Summary::of(&all) {
            out.push(ClassStat {
                class,
                metric,
                unit,
                pairs: n,
                summary,
            });
        }
    }
    out
}

pub fn measure(m: &Machine, a: &Args) -> Result<MatrixReport> {
    charact::require_live(m)?;
    let timer = charact::timer_checked();
    let size = charact::parse_size(&a.size).map_err(|e| anyhow!("--size: {e}"))?;
    if size < 64 {
        bail!("--size: at least 64 bytes");
    }
    let sel = match (&a.pus, a.per_class) {
        (Some(l), _) => {
            PairSelection::Pus(PuSet::parse_list(l).map_err(|e| anyhow!("--pus: {e}"))?)
        }
        (None, Some(0)) => bail!("--per-class must be at least 1"),
        (None, Some(k)) => PairSelection::PerClass(k),
        (None, None) => PairSelection::All,
    };
    let planned = matrix::select_pairs(m, &sel)?;
    let samples = a.samples.unwrap_or(if a.quick { 5 } else { 21 });
    let rounds = a.rounds.unwrap_or(if a.quick { 300 } else { 2000 });
    if samples == 0 || rounds == 0 {
        bail!("--samples and --rounds must be at least 1");
    }
    let mut omitted = Vec::new();
    let backend = if a.no_transport {
        omitted.push(
            "latency, bw, msgrate (topocomm transport): skipped by --no-transport".to_string(),
        );
        None
    } else {
        let worker = topocomm_transport::worker::locate().map_err(|e| e.to_string());
        match worker.and_then(|w| TransportBackend::probe(&w).map_err(|e| e.to_string())) {
            Ok(b) => Some(b),
            Err(e) => {
                omitted.push(format!("latency, bw, msgrate (topocomm transport): {e}"));
                None
            }
        }
    };
    let params = MatrixParams {
        selection: match &sel {
            PairSelection::All => "all".into(),
            PairSelection::Pus(s) => format!("pus:{s}"),
            PairSelection::PerClass(k) => format!("per-class:{k}"),
        },
        size,
        samples,
        rounds,
        quick: a.quick,
        transport: backend.is_some(),
    };
    let cm = ClassMatrix::new(m);
    let mut report = match &a.resume {
        Some(f) => {
            let r = load_resume(f, m, &params)?;
            eprintln!(
                "resuming: {} of {} pairs already measured",
                r.pairs.len(),
                r.planned.len()
            );
            r
        }
        None => MatrixReport {
            schema: SCHEMA.into(),
            meta: RunMeta::new(m, timer.clone()),
            params: params.clone(),
            pus: Vec::new(),
            planned: planned.clone(),
            pairs: Vec::new(),
            omitted: omitted.clone(),
            classes: Vec::new(),
            complete: false,
        },
    };
    let mut rows: Vec<u32> = planned.iter().flat_map(|&(p, q)| [p, q]).collect();
    rows.sort_by_key(|&p| m.pu_position(p));
    rows.dedup();
    report.pus = rows;
    let out_json = a.out.join("matrix.json");
    let todo: Vec<(u32, u32)> = planned
        .iter()
        .copied()
        .filter(|&(p, q)| !report.pairs.iter().any(|r| r.p == p && r.q == q))
        .collect();
    let mut bar = Progress::new("bench matrix", planned.len());
    let mut done = planned.len() - todo.len();
    for (p, q) in todo {
        let (pa, qa) = (m.require_pu(p)?, m.require_pu(q)?);
        let class = cm.class_at(pa, qa).to_string();
        let lat = matrix::cacheline_latency(p, q, rounds, samples)?;
        let mut metrics = vec![Metric::new("c2c_latency", "ns", lat)?];
        metrics.push(c2c_read_bw(
            m,
            p,
            q,
            &class,
            size,
            samples,
            timer.overhead_ns,
        )?);
        if let Some(b) = &backend {
            let lines = b.measure(p, q, size, samples, Duration::from_secs(300))?;
            for l in lines {
                let want =
                    (l.test == "latency" && l.size == 8) || (l.test != "latency" && l.size == size);
                if want {
                    metrics.push(Metric::new(&l.test, &l.unit, l.samples)?);
                }
            }
        }
        report.pairs.push(PairResult {
            p,
            q,
            class,
            metrics,
        });
        done += 1;
        // Partial results after every pair, so an interrupted run can resume.
        report.classes = class_stats(&report.pairs);
        charact::write_json(&out_json, &report)?;
        bar.tick(done);
    }
    report.complete = true;
    report.classes = class_stats(&report.pairs);
    Ok(report)
}

/// Group boundaries of the rows for L2, L3, NUMA node and package.
fn boundaries(m: &Machine, rows: &[u32]) -> Vec<Boundaries> {
    let group_of = |pu: u32, level: &str| -> Option<usize> {
        let pos = m.pu_position(pu)?;
        if level == "NUMA" {
            return m.pus[pos].numa_node.map(|n| n as usize);
        }
        m.ancestry(m.pus[pos].object).into_iter().find(|&o| {
            let ob = &m.objects[o];
            match level {
                "package" => ob.kind == ObjectKind::Package,
                "L2" => {
                    ob.cache.as_ref().is_some_and(|c| c.level == 2) && !ob.is_instruction_cache()
                }
                "L3" => {
                    ob.cache.as_ref().is_some_and(|c| c.level == 3) && !ob.is_instruction_cache()
                }
                _ => false,
            }
        })
    };
    ["L2", "L3", "NUMA", "package"]
        .iter()
        .filter_map(|lv| {
            let g: Vec<Option<usize>> = rows.iter().map(|&p| group_of(p, lv)).collect();
            let starts: Vec<usize> = (1..g.len()).filter(|&i| g[i] != g[i - 1]).collect();
            if g.iter().all(|x| x.is_none()) {
                None
            } else {
                Some(Boundaries {
                    level: lv.to_string(),
                    starts,
                })
            }
        })
        .collect()
}

fn metric_names(r: &MatrixReport) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    for p in &r.pairs {
        for mt in &p.metrics {
            if !v.iter().any(|(n, _)| n == &mt.name) {
                v.push((mt.name.clone(), mt.unit.clone()));
            }
        }
    }
    v
}

pub fn heatmaps(m: &Machine, r: &MatrixReport) -> Vec<(String, Heatmap)> {
    let n = r.pus.len();
    let b = boundaries(m, &r.pus);
    metric_names(r)
        .into_iter()
        .map(|(name, unit)| {
            let mut values = vec![None; n * n];
            for p in &r.pairs {
                let (Some(i), Some(j)) = (
                    r.pus.iter().position(|&x| x == p.p),
                    r.pus.iter().position(|&x| x == p.q),
                ) else {
                    continue;
                };
                if let Some(mt) = p.metrics.iter().find(|x| x.name == name) {
                    values[i * n + j] = Some(mt.summary.median);
                    values[j * n + i] = Some(mt.summary.median);
                }
            }
            let h = Heatmap {
                title: format!("{name} ({unit}), median per PU pair, axes in topology order"),
                unit,
                labels: r.pus.iter().map(|p| p.to_string()).collect(),
                values,
                boundaries: b.clone(),
            };
            (name, h)
        })
        .collect()
}

fn summary_rows(r: &MatrixReport) -> Vec<Vec<String>> {
    r.classes
        .iter()
        .map(|c| {
            vec![
                c.class.clone(),
                c.metric.clone(),
                c.unit.clone(),
                c.pairs.to_string(),
                fmt_ci(&c.summary),
                charact::num(c.summary.min),
                charact::num(c.summary.max),
            ]
        })
        .collect()
}

const SUMMARY_HEADER: [&str; 7] = [
    "class",
    "metric",
    "unit",
    "pairs",
    "median [95% CI]",
    "min",
    "max",
];

fn csv(r: &MatrixReport) -> (String, String) {
    let mut s = String::from("p,q,class,metric,unit,n,median,ci_low,ci_high,min,max\n");
    let mut raw = String::from("p,q,class,metric,unit,sample,value\n");
    for p in &r.pairs {
        for mt in &p.metrics {
            let x = &mt.summary;
            s.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{}\n",
                p.p,
                p.q,
                p.class,
                mt.name,
                mt.unit,
                x.n,
                x.median,
                x.ci_low,
                x.ci_high,
                x.min,
                x.max
            ));
            for (i, v) in mt.samples.iter().enumerate() {
                raw.push_str(&format!(
                    "{},{},{},{},{},{i},{v}\n",
                    p.p, p.q, p.class, mt.name, mt.unit
                ));
            }
        }
    }
    (s, raw)
}

/// Costs for the mapping engine (docs/formats/costs-json.md).
pub fn costs(r: &MatrixReport) -> serde_json::Value {
    let mut classes = serde_json::Map::new();
    let mut names: Vec<&str> = r.classes.iter().map(|c| c.class.as_str()).collect();
    names.dedup();
    for class in names {
        let get = |metric: &str| {
            r.classes
                .iter()
                .find(|c| c.class == class && c.metric == metric)
                .map(|c| c.summary.median)
        };
        let (lat, lsrc) = match get("latency") {
            Some(v) => (Some(v), "transport"),
            None => (get("c2c_latency").map(|ns| ns / 1000.0), "cacheline"),
        };
        let (bw, bsrc) = match get("bw") {
            Some(v) => (Some(v), "transport"),
            None => (get("c2c_read_bw"), "coherence-read"),
        };
        classes.insert(
            class.to_string(),
            serde_json::json!({
                "latency_us": lat, "bandwidth_gbs": bw,
                "latency_source": lsrc, "bandwidth_source": bsrc,
            }),
        );
    }
    serde_json::json!({
        "schema": "topocomm.costs/1",
        "fingerprint": r.meta.fingerprint,
        "size": r.params.size,
        "classes": classes,
    })
}

pub fn html(m: &Machine, r: &MatrixReport) -> String {
    let mut s = format!(
        "<p>{} pairs, {} samples per metric{}. Lines between rows/columns mark L2, L3, NUMA-node and package boundaries (thicker = higher level).</p>",
        r.pairs.len(),
        r.params.samples,
        if r.params.quick { ", quick mode" } else { "" }
    );
    for (_, h) in heatmaps(m, r) {
        s.push_str(&format!("<div class=\"svgbox\">{}</div>", h.svg()));
    }
    s.push_str(&topocomm_report::html_table(
        &SUMMARY_HEADER,
        &summary_rows(r),
    ));
    for o in &r.omitted {
        s.push_str(&format!("<p>Not measured: {}</p>", topocomm_report::esc(o)));
    }
    s
}

pub fn report_section(m: &Machine) -> Result<(String, serde_json::Value)> {
    let dir = std::env::temp_dir().join(format!("topocomm-report-matrix-{}", std::process::id()));
    let a = Args {
        quick: true,
        per_class: Some(2),
        size: "1M".into(),
        out: dir.clone(),
        ..Args::default()
    };
    let r = measure(m, &a);
    let _ = std::fs::remove_dir_all(&dir);
    let r = r?;
    Ok((html(m, &r), serde_json::to_value(&r)?))
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    let r = measure(&m, a)?;
    let dir = &a.out;
    charact::write_json(&dir.join("matrix.json"), &r)?;
    let (summary_csv, raw_csv) = csv(&r);
    charact::write_file(&dir.join("matrix.csv"), summary_csv.as_bytes())?;
    charact::write_file(&dir.join("matrix-samples.csv"), raw_csv.as_bytes())?;
    for (name, h) in heatmaps(&m, &r) {
        charact::write_file(&dir.join(format!("heatmap-{name}.svg")), h.svg().as_bytes())?;
        charact::write_file(&dir.join(format!("heatmap-{name}.png")), &h.png())?;
    }
    if let Some(c) = &a.costs_out {
        charact::write_json(c, &costs(&r))?;
        eprintln!("costs written to {}", c.display());
    }
    eprintln!("results written to {}", dir.display());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "bench matrix: {} pairs over PUs {}, {} samples, size {}{}",
        r.pairs.len(),
        PuSet::from_indexes(r.pus.iter().copied()),
        r.params.samples,
        charact::size_label(r.params.size),
        if r.params.quick { " (quick)" } else { "" }
    );
    print!("{}", text_table(&SUMMARY_HEADER, &summary_rows(&r)));
    for o in &r.omitted {
        println!("not measured: {o}");
    }
    Ok(ExitCode::SUCCESS)
}
