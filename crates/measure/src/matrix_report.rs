//! `topocomm bench matrix` without its command line: the plan (which PU
//! pairs, size, samples), the run over every pair (cache-line latency,
//! coherence read bandwidth, and the transport's metrics when a backend is
//! given), resuming a partial run, the result file ([`MatrixReport`],
//! docs/formats/bench-matrix-json.md), its per-class statistics, CSVs,
//! heatmaps, summary table and the costs document for the mapping engine
//! (docs/formats/costs-json.md).

use crate::cache::{self, CacheConfig, Holder, Op, State};
use crate::charact::{fmt_ci, num, parse_size};
use crate::matrix::{self, Metric, PairResult, PairSelection, TransportBackend};
use crate::meta::RunMeta;
use crate::timer::TimerInfo;
use crate::{Error, Result, Summary};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;
use topocomm_report::heatmap::{Boundaries, Heatmap};
use topocomm_topo::{ClassMatrix, Machine, ObjectKind};

/// The schema of [`MatrixReport`].
pub const SCHEMA: &str = "topocomm.bench-matrix/1";

/// The options of a run, as given (`None`: the default, or the `quick` one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MatrixOptions {
    /// Only pairs among these PUs (a PU list, `0-3,8`).
    pub pus: Option<String>,
    /// At most this many pairs per locality class.
    pub per_class: Option<usize>,
    /// Message size for bandwidth and message rate (`1M`).
    pub size: String,
    /// Samples per pair and metric.
    pub samples: Option<usize>,
    /// Cache-line round trips per latency sample.
    pub rounds: Option<u32>,
    /// Fast, coarse run.
    pub quick: bool,
}

/// What a run will measure, resolved from its options and the machine.
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixPlan {
    /// The pairs, in topology order.
    pub pairs: Vec<(u32, u32)>,
    /// `all`, `pus:LIST` or `per-class:N` (recorded in [`MatrixParams`]).
    pub selection: String,
    pub size: u64,
    pub samples: usize,
    pub rounds: u32,
    pub quick: bool,
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

/// One metric pooled over the pairs of one locality class.
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

/// What a run reports while it goes.
#[derive(Clone, Copy, Debug)]
pub enum MatrixProgress<'a> {
    /// A partial file was loaded: `measured` of `planned` pairs are done.
    Resumed { measured: usize, planned: usize },
    /// One more pair is measured, `done` in all; `report` is the partial
    /// result to save, so that an interrupted run can resume.
    Measured {
        done: usize,
        report: &'a MatrixReport,
    },
}

/// Resolves the options against the machine model; every bad value is a
/// one-line error naming the option.
pub fn plan(m: &Machine, a: &MatrixOptions) -> Result<MatrixPlan> {
    let size = parse_size(&a.size).map_err(|e| Error::Arg {
        arg: "--size",
        cause: Box::new(e),
    })?;
    if size < 64 {
        return Err(Error::MatrixSizeTooSmall);
    }
    if size > 1 << 30 {
        return Err(Error::ArgTooLarge {
            arg: "--size",
            value: size,
            max: "1G",
        });
    }
    let sel =
        match (&a.pus, a.per_class) {
            (Some(l), _) => PairSelection::Pus(topocomm_topo::resolve_set(m, l).map_err(|e| {
                Error::ArgReason {
                    arg: "--pus",
                    reason: e.to_string(),
                }
            })?),
            (None, Some(0)) => {
                return Err(Error::AtLeastOne {
                    what: "--per-class",
                })
            }
            (None, Some(k)) => PairSelection::PerClass(k),
            (None, None) => PairSelection::All,
        };
    let pairs = matrix::select_pairs(m, &sel)?;
    let samples = a.samples.unwrap_or(if a.quick { 5 } else { 21 });
    let rounds = a.rounds.unwrap_or(if a.quick { 300 } else { 2000 });
    if samples == 0 || rounds == 0 {
        return Err(Error::AtLeastOne {
            what: "--samples and --rounds",
        });
    }
    if samples > 10_000 {
        return Err(Error::ArgTooLarge {
            arg: "--samples",
            value: samples as u64,
            max: "10000",
        });
    }
    if rounds > 10_000_000 {
        return Err(Error::ArgTooLarge {
            arg: "--rounds",
            value: rounds.into(),
            max: "10000000",
        });
    }
    Ok(MatrixPlan {
        pairs,
        selection: match &sel {
            PairSelection::All => "all".into(),
            PairSelection::Pus(s) => format!("pus:{s}"),
            PairSelection::PerClass(k) => format!("per-class:{k}"),
        },
        size,
        samples,
        rounds,
        quick: a.quick,
    })
}

/// Coherence read bandwidth of `q`'s modified lines from `p`, at `size`.
pub fn c2c_read_bw(
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
    let pt = pts.into_iter().next().ok_or(Error::NoPoint)?;
    Metric::new("c2c_read_bw", "GB/s", pt.samples)
}

/// Reads a partial file to resume: it must be a bench matrix file of this
/// machine, measured with the same `params`.
pub fn load_resume(path: &Path, m: &Machine, params: &MatrixParams) -> Result<MatrixReport> {
    let text = std::fs::read_to_string(path).map_err(|cause| Error::ResumeRead {
        path: path.into(),
        cause,
    })?;
    let r: MatrixReport = serde_json::from_str(&text).map_err(|cause| Error::ResumeNotMatrix {
        path: path.into(),
        cause,
    })?;
    if r.schema != SCHEMA {
        return Err(Error::ResumeSchema {
            path: path.into(),
            schema: r.schema,
        });
    }
    if r.meta.fingerprint != m.fingerprint {
        return Err(Error::ResumeMachine {
            path: path.into(),
            file: r.meta.fingerprint,
            live: m.fingerprint.clone(),
        });
    }
    if &r.params != params {
        return Err(Error::ResumeParams {
            path: path.into(),
            params: r.params,
        });
    }
    Ok(r)
}

/// Per-class pooled summaries of every metric.
pub fn class_stats(pairs: &[PairResult]) -> Vec<ClassStat> {
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

/// Measures the planned pairs on the live machine (checked by the caller).
/// `transport` is the transport's backend, or why its metrics are not
/// measured; `timer` the timer check to use and record; `resume` a partial
/// file of the same plan to continue. `progress` sees the resumption and
/// every measured pair; an error it returns stops the run.
pub fn measure<E: From<Error>>(
    m: &Machine,
    plan: &MatrixPlan,
    transport: std::result::Result<TransportBackend, String>,
    timer: TimerInfo,
    resume: Option<&Path>,
    progress: &mut dyn FnMut(MatrixProgress<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<MatrixReport, E> {
    let mut omitted = Vec::new();
    let backend = match transport {
        Ok(b) => Some(b),
        Err(e) => {
            omitted.push(format!("latency, bw, msgrate (topocomm transport): {e}"));
            None
        }
    };
    let params = MatrixParams {
        selection: plan.selection.clone(),
        size: plan.size,
        samples: plan.samples,
        rounds: plan.rounds,
        quick: plan.quick,
        transport: backend.is_some(),
    };
    let planned = &plan.pairs;
    let cm = ClassMatrix::new(m);
    let mut report = match resume {
        Some(f) => {
            let r = load_resume(f, m, &params)?;
            progress(MatrixProgress::Resumed {
                measured: r.pairs.len(),
                planned: r.planned.len(),
            })?;
            r
        }
        None => MatrixReport {
            schema: SCHEMA.into(),
            meta: RunMeta::new(m, timer.clone()),
            params: params.clone(),
            pus: Vec::new(),
            planned: planned.clone(),
            pairs: Vec::new(),
            omitted,
            classes: Vec::new(),
            complete: false,
        },
    };
    let mut rows: Vec<u32> = planned.iter().flat_map(|&(p, q)| [p, q]).collect();
    rows.sort_by_key(|&p| m.pu_position(p));
    rows.dedup();
    report.pus = rows;
    let todo: Vec<(u32, u32)> = planned
        .iter()
        .copied()
        .filter(|&(p, q)| !report.pairs.iter().any(|r| r.p == p && r.q == q))
        .collect();
    let before = planned.len() - todo.len();
    let (size, samples) = (plan.size, plan.samples);
    for (i, (p, q)) in todo.into_iter().enumerate() {
        let (pa, qa) = (
            m.require_pu(p).map_err(Error::from)?,
            m.require_pu(q).map_err(Error::from)?,
        );
        let class = cm.class_at(pa, qa).to_string();
        let lat = matrix::cacheline_latency(p, q, plan.rounds, samples)?;
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
        report.classes = class_stats(&report.pairs);
        progress(MatrixProgress::Measured {
            done: before + i + 1,
            report: &report,
        })?;
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

/// Header of [`MatrixReport::summary_rows`].
pub const SUMMARY_HEADER: [&str; 7] = [
    "class",
    "metric",
    "unit",
    "pairs",
    "median [95% CI]",
    "min",
    "max",
];

impl MatrixReport {
    /// The metrics measured (name, unit), in order of first appearance.
    fn metric_names(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = Vec::new();
        for p in &self.pairs {
            for mt in &p.metrics {
                if !v.iter().any(|(n, _)| n == &mt.name) {
                    v.push((mt.name.clone(), mt.unit.clone()));
                }
            }
        }
        v
    }

    /// One heatmap per metric (named by it): medians per PU pair, axes in
    /// topology order with `m`'s L2, L3, NUMA and package boundaries.
    pub fn heatmaps(&self, m: &Machine) -> Vec<(String, Heatmap)> {
        let n = self.pus.len();
        let b = boundaries(m, &self.pus);
        self.metric_names()
            .into_iter()
            .map(|(name, unit)| {
                let mut values = vec![None; n * n];
                for p in &self.pairs {
                    let (Some(i), Some(j)) = (
                        self.pus.iter().position(|&x| x == p.p),
                        self.pus.iter().position(|&x| x == p.q),
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
                    labels: self.pus.iter().map(|p| p.to_string()).collect(),
                    values,
                    boundaries: b.clone(),
                };
                (name, h)
            })
            .collect()
    }

    /// The per-class summary table (header [`SUMMARY_HEADER`]).
    pub fn summary_rows(&self) -> Vec<Vec<String>> {
        self.classes
            .iter()
            .map(|c| {
                vec![
                    c.class.clone(),
                    c.metric.clone(),
                    c.unit.clone(),
                    c.pairs.to_string(),
                    fmt_ci(&c.summary),
                    num(c.summary.min),
                    num(c.summary.max),
                ]
            })
            .collect()
    }

    /// `matrix.csv` (one line per pair and metric: its summary) and
    /// `matrix-samples.csv` (one line per raw sample).
    pub fn csv(&self) -> (String, String) {
        let mut s = String::from("p,q,class,metric,unit,n,median,ci_low,ci_high,min,max\n");
        let mut raw = String::from("p,q,class,metric,unit,sample,value\n");
        for p in &self.pairs {
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

    /// Costs for the mapping engine (docs/formats/costs-json.md): per class
    /// the transport's latency and bandwidth, or else the cache-line latency
    /// and coherence read bandwidth, with their source.
    pub fn costs(&self) -> serde_json::Value {
        let mut classes = serde_json::Map::new();
        let mut names: Vec<&str> = self.classes.iter().map(|c| c.class.as_str()).collect();
        names.dedup();
        for class in names {
            let get = |metric: &str| {
                self.classes
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
            "fingerprint": self.meta.fingerprint,
            "size": self.params.size,
            "classes": classes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        topocomm_topo::load(&"synthetic:pack:2 l3:2 core:2 pu:1".parse().unwrap()).unwrap()
    }

    #[test]
    fn plan_resolves_and_names_bad_options() {
        let m = machine();
        let o = |f: fn(&mut MatrixOptions)| {
            let mut o = MatrixOptions {
                size: "1M".into(),
                quick: true,
                ..MatrixOptions::default()
            };
            f(&mut o);
            plan(&m, &o)
        };
        let p = o(|o| o.per_class = Some(1)).unwrap();
        assert_eq!(
            (p.selection.as_str(), p.samples, p.rounds),
            ("per-class:1", 5, 300)
        );
        assert_eq!(p.pairs.len(), ClassMatrix::new(&m).classes().len());
        let err = |f| o(f).unwrap_err().to_string();
        assert_eq!(err(|o| o.size = "32".into()), "--size: at least 64 bytes");
        assert_eq!(
            err(|o| o.samples = Some(1 << 31)),
            "--samples: 2147483648 is too large (at most 10000)"
        );
        assert_eq!(
            err(|o| o.size = "2G".into()),
            "--size: 2147483648 is too large (at most 1G)"
        );
        assert!(err(|o| o.size = "1X".into()).starts_with("--size: '1X' is not a size"));
        assert!(err(|o| o.pus = Some("x".into())).starts_with("--pus: "));
        assert_eq!(
            err(|o| o.per_class = Some(0)),
            "--per-class must be at least 1"
        );
        assert_eq!(
            err(|o| o.rounds = Some(0)),
            "--samples and --rounds must be at least 1"
        );
    }

    #[test]
    fn class_stats_pool_pairs_and_costs_fall_back() {
        let pair = |p, q, v: f64| PairResult {
            p,
            q,
            class: "l3".into(),
            metrics: vec![
                Metric::new("c2c_latency", "ns", vec![v, v]).unwrap(),
                Metric::new("c2c_read_bw", "GB/s", vec![10.0]).unwrap(),
            ],
        };
        let s = class_stats(&[pair(0, 1, 100.0), pair(2, 3, 300.0)]);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].metric.as_str(), s[0].pairs, s[0].summary.n),
            ("c2c_latency", 2, 4)
        );
        let m = machine();
        let timer = crate::timer::TimerInfo {
            resolution_ns: 1.0,
            overhead_ns: 1.0,
        };
        let r = MatrixReport {
            schema: SCHEMA.into(),
            meta: RunMeta::new(&m, timer),
            params: MatrixParams {
                selection: "all".into(),
                size: 64,
                samples: 1,
                rounds: 1,
                quick: true,
                transport: false,
            },
            pus: vec![0, 1, 2, 3],
            planned: vec![(0, 1), (2, 3)],
            pairs: vec![pair(0, 1, 100.0), pair(2, 3, 300.0)],
            omitted: Vec::new(),
            classes: s,
            complete: true,
        };
        let c = r.costs();
        assert_eq!(c["classes"]["l3"]["latency_source"], "cacheline");
        assert_eq!(c["classes"]["l3"]["bandwidth_source"], "coherence-read");
        assert_eq!(r.summary_rows()[0][0], "l3");
        assert_eq!(r.heatmaps(&m).len(), 2);
        assert_eq!(r.csv().1.lines().count(), 1 + 2 * 3);
    }
}
