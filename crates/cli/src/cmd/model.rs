//! `topocomm model`: predicted vs measured one-way time of the transport's
//! two-copy and single-copy protocols per locality class, from bench cache
//! throughputs (docs/commands/model.md, docs/model.md).

use super::bench_cache;
use super::charact::{self, num, size_label};
use crate::common::{text_table, GlobalOpts};
use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use topocomm_measure::cache_report::CacheReport;
use topocomm_measure::meta::RunMeta;
use topocomm_measure::p2p::Test;
use topocomm_model::fit::{fit, Fit, Observation};
use topocomm_model::tune::runner::{Runner, TimePoint};
use topocomm_model::tune::space::single_copy;
use topocomm_model::{class_rates, predict, ClassRates, Overheads};
use topocomm_report::{bytes_label, svg_loglog, Series};
use topocomm_topo::{ClassMatrix, LocalityClass, Machine};
use topocomm_transport::{Params, Rules};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// bench cache JSON (`topocomm bench cache --out DIR` writes DIR/cache.json); default: run it in quick mode
    #[arg(long, value_name = "FILE")]
    pub cache: Option<PathBuf>,
    /// Also measure the transport forced into each protocol and print the error
    #[arg(long)]
    pub measure: bool,
    /// One PU pair (OS indexes) instead of one representative pair per class
    #[arg(long, value_name = "P,Q", conflicts_with = "class")]
    pub pair: Option<String>,
    /// One locality class (its representative pair)
    #[arg(long, value_name = "CLASS")]
    pub class: Option<String>,
    /// Message sizes (default 1K,4K,16K,64K,256K,1M,4M,16M)
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Samples per measured point (default 7)
    #[arg(long, default_value_t = 7)]
    pub samples: usize,
    /// Minimum duration of one sample's batch, ms
    #[arg(long, default_value_t = 2.0)]
    pub min_time_ms: f64,
    /// Write the results as JSON (docs/formats/model-json.md)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a log-log SVG plot per class into this folder
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

pub const DEFAULT_SIZES: &str = "1K,4K,16K,64K,256K,1M,4M,16M";

/// Reads a bench cache JSON file; errors are one line naming the file.
pub fn load_cache(path: &Path) -> Result<CacheReport> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("{}: cannot read bench cache results: {e}", path.display()))?;
    let r: CacheReport = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{}: not a bench cache JSON file (topocomm.bench-cache/1): {e}",
            path.display()
        )
    })?;
    if r.schema != "topocomm.bench-cache/1" {
        bail!(
            "{}: schema '{}', expected topocomm.bench-cache/1",
            path.display(),
            r.schema
        );
    }
    Ok(r)
}

/// Cache points from `file`, or a quick load/store M/S run from PU `p`.
pub fn cache_points(m: &Machine, file: Option<&Path>, p: u32) -> Result<(CacheReport, String)> {
    match file {
        Some(f) => Ok((load_cache(f)?, f.display().to_string())),
        None => {
            let a = bench_cache::Args {
                pu: Some(p),
                quick: true,
                ops: "load,store".into(),
                states: Some("M,S".into()),
                samples: Some(3),
                ..Default::default()
            };
            Ok((
                bench_cache::measure(m, &a)?,
                "bench cache --quick (this run)".into(),
            ))
        }
    }
}

/// The classes present with their representative pairs, restricted to
/// `wanted` (an unknown or absent class is an error naming it).
pub fn targets(m: &Machine, wanted: Option<&[String]>) -> Result<Vec<(String, (u32, u32))>> {
    let all: Vec<(String, (u32, u32))> = ClassMatrix::new(m)
        .classes()
        .iter()
        .map(|c| (c.class.to_string(), c.representative))
        .collect();
    let Some(w) = wanted else { return Ok(all) };
    let mut out = Vec::new();
    for c in w {
        c.parse::<LocalityClass>()
            .map_err(|e| anyhow!("--classes: {e}"))?;
        let t = all.iter().find(|(n, _)| n == c).ok_or_else(|| {
            anyhow!(
                "--classes: class '{c}' is not present on this machine (present: {})",
                all.iter()
                    .map(|a| a.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    if out.is_empty() {
        bail!("--classes: empty list");
    }
    Ok(out)
}

pub fn parse_sizes(text: &str) -> Result<Vec<u64>> {
    let mut v = charact::parse_sizes(text).map_err(|e| anyhow!("--sizes: {e}"))?;
    if v.is_empty() || v.iter().any(|&s| s == 0 || s > 1 << 30) {
        bail!("--sizes: expected sizes from 1 B to 1 GiB");
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// The two protocols the model compares, under a class's plan.
pub fn protocol_params(plan: &Params) -> [(&'static str, Params); 2] {
    [
        (
            "two-copy",
            Params {
                cma: false,
                ..plan.clone()
            },
        ),
        ("single-copy", single_copy(plan, plan.cma_chunk)),
    ]
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub protocol: String,
    pub size: u64,
    /// Pure model (copies only), seconds.
    pub pure: f64,
    /// With the fixed costs fitted on every measured size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitted: Option<f64>,
    /// With the fixed costs fitted on the other sizes only (out of sample).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_out: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<TimePoint>,
}

impl Row {
    /// (pred - measured) / measured and its range over the measured CI.
    pub fn error(&self, pred: f64) -> Option<(f64, f64, f64)> {
        let m = self.measured.as_ref()?;
        Some((
            pred / m.median - 1.0,
            pred / m.ci_high - 1.0,
            pred / m.ci_low - 1.0,
        ))
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ClassModel {
    pub class: String,
    pub pair: (u32, u32),
    pub plan: Params,
    pub rates: ClassRates,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fit>,
    pub rows: Vec<Row>,
    /// Median |relative error| per protocol: (protocol, pure, fitted, held-out).
    pub summary: Vec<ErrorSummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ErrorSummary {
    pub protocol: String,
    pub pure: f64,
    pub fitted: f64,
    pub held_out: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ModelReport {
    pub schema: String,
    pub meta: RunMeta,
    pub cache_source: String,
    pub cache_measurer: u32,
    pub test: String,
    pub sizes: Vec<u64>,
    pub cma_available: bool,
    pub classes: Vec<ClassModel>,
}

fn median_abs(v: Vec<f64>) -> f64 {
    let mut v: Vec<f64> = v
        .into_iter()
        .filter(|x| x.is_finite())
        .map(f64::abs)
        .collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    topocomm_measure::stats::quantile_sorted(&v, 0.5)
}

/// Computes everything (no printing besides progress).
pub fn compute(m: &Machine, a: &Args) -> Result<ModelReport> {
    let sizes = parse_sizes(a.sizes.as_deref().unwrap_or(DEFAULT_SIZES))?;
    let tg: Vec<(String, (u32, u32))> = match (&a.pair, &a.class) {
        (Some(p), _) => {
            let pair = topocomm_topo::parse_pair(p).map_err(|e| anyhow!("--pair: {e}"))?;
            if pair.0 == pair.1 {
                bail!("--pair {p}: the two PUs must differ");
            }
            let c =
                topocomm_topo::pair_class(m, pair.0, pair.1).map_err(|e| anyhow!("--pair: {e}"))?;
            vec![(c.to_string(), pair)]
        }
        (None, Some(c)) => targets(m, Some(std::slice::from_ref(c)))
            .map_err(|e| anyhow!("{}", e.to_string().replace("--classes", "--class")))?,
        (None, None) => targets(m, None)?,
    };
    if tg.is_empty() {
        bail!("this machine has a single PU: no pair to model");
    }
    if a.measure || a.cache.is_none() {
        charact::require_live(m)?;
    }
    let (cache, source) = cache_points(m, a.cache.as_deref(), tg[0].1 .0)?;
    let rules = Rules::builtin(m);
    let cma_ok = !a.measure || topocomm_transport::cma::probe_fork().is_ok();
    let mut runner = Runner {
        worker: topocomm_transport::worker::locate()?,
        builtin: rules.clone(),
        test: Test::Latency,
        sizes: sizes.clone(),
        samples: a.samples.max(1),
        min_time_ms: a.min_time_ms.max(0.0),
        window: 64,
        llc: m.llc_size().unwrap_or(32 << 20),
        jobs: 0,
        tmp: std::env::temp_dir(),
    };
    let mut classes = Vec::new();
    for (class, pair) in tg {
        let rates = class_rates(&cache.points, &class)
            .map_err(|e| anyhow!("{source}: class {class}: {e}"))?;
        let plan = rules.params_for(Some(&class)).clone();
        let protos = protocol_params(&plan);
        let mut measured: Vec<Vec<TimePoint>> = Vec::new();
        if a.measure {
            for (name, p) in &protos {
                eprintln!("model: measuring {class} pair {},{} {name}", pair.0, pair.1);
                measured.push(
                    runner
                        .measure(pair, &class, p)
                        .map_err(|e| anyhow!("measuring {name} on {class}: {e}"))?,
                );
            }
        }
        let obs_of = |skip: Option<u64>| -> Vec<Observation> {
            let mut v = Vec::new();
            for ((_, p), pts) in protos.iter().zip(&measured) {
                for pt in pts.iter().filter(|pt| Some(pt.size) != skip) {
                    v.push(Observation {
                        params: p,
                        size: pt.size,
                        seconds: pt.median,
                    });
                }
            }
            v
        };
        let full_fit = a.measure.then(|| fit(&rates, &obs_of(None), cma_ok));
        let mut rows = Vec::new();
        for (k, (name, p)) in protos.iter().enumerate() {
            for &s in &sizes {
                let meas = measured
                    .get(k)
                    .and_then(|v| v.iter().find(|pt| pt.size == s).cloned());
                let held = a.measure.then(|| {
                    let f = fit(&rates, &obs_of(Some(s)), cma_ok);
                    predict(&rates, p, s, &f.overheads, cma_ok)
                });
                rows.push(Row {
                    protocol: name.to_string(),
                    size: s,
                    pure: predict(&rates, p, s, &Overheads::default(), cma_ok),
                    fitted: full_fit
                        .as_ref()
                        .map(|f| predict(&rates, p, s, &f.overheads, cma_ok)),
                    held_out: held,
                    measured: meas,
                });
            }
        }
        let summary = protos
            .iter()
            .map(|(name, _)| {
                let rs: Vec<&Row> = rows.iter().filter(|r| r.protocol == *name).collect();
                let err = |f: &dyn Fn(&Row) -> Option<f64>| {
                    median_abs(
                        rs.iter()
                            .filter_map(|r| f(r).and_then(|p| r.error(p)).map(|e| e.0))
                            .collect(),
                    )
                };
                ErrorSummary {
                    protocol: name.to_string(),
                    pure: err(&|r| Some(r.pure)),
                    fitted: err(&|r| r.fitted),
                    held_out: err(&|r| r.held_out),
                }
            })
            .collect();
        classes.push(ClassModel {
            class,
            pair,
            plan,
            rates,
            fit: full_fit,
            rows,
            summary,
        });
    }
    Ok(ModelReport {
        schema: "topocomm.model/1".into(),
        meta: RunMeta::new(m, topocomm_measure::timer::check()),
        cache_source: source,
        cache_measurer: cache.measurer,
        test: "latency".into(),
        sizes,
        cma_available: cma_ok,
        classes,
    })
}

fn us(s: f64) -> String {
    num(s * 1e6)
}

fn pct(e: Option<(f64, f64, f64)>) -> String {
    match e {
        Some((m, lo, hi)) => format!(
            "{:+.0}% [{:+.0},{:+.0}]",
            m * 100.0,
            lo.min(hi) * 100.0,
            hi.max(lo) * 100.0
        ),
        None => "-".into(),
    }
}

/// Terminal tables.
pub fn tables(r: &ModelReport) -> String {
    let mut out = format!(
        "model: rates from {} (measuring PU {}); one-way time (latency test, hot buffers), us\n",
        r.cache_source, r.cache_measurer
    );
    for c in &r.classes {
        out.push_str(&format!(
            "\nclass {} (pair {},{}): fragment {} x {}, single-copy chunk {}\n",
            c.class,
            c.pair.0,
            c.pair.1,
            size_label(c.plan.fragment),
            c.plan.depth,
            size_label(c.plan.cma_chunk)
        ));
        for s in &c.rates.sources {
            out.push_str(&format!(
                "  {} = {}{}\n",
                s.rate.to_uppercase(),
                s.used,
                s.fallback
                    .as_ref()
                    .map(|f| format!(" (fallback: {f})"))
                    .unwrap_or_default()
            ));
        }
        if let Some(f) = &c.fit {
            let o = &f.overheads;
            out.push_str(&format!(
                "  fitted costs: message {} us, rendezvous {} us, per chunk {} us, per CMA call {} us, per page {} ns (rms rel. error {:.0}%)\n",
                us(o.message), us(o.rendezvous), us(o.per_chunk), us(o.per_call), num(o.per_page * 1e9), f.rms_relative * 100.0
            ));
        }
        let measured = c.rows.iter().any(|r| r.measured.is_some());
        let rows: Vec<Vec<String>> = c
            .rows
            .iter()
            .map(|r| {
                let mut v = vec![r.protocol.clone(), size_label(r.size), us(r.pure)];
                if measured {
                    v.push(r.fitted.map(us).unwrap_or("-".into()));
                    v.push(
                        r.measured
                            .as_ref()
                            .map(|m| {
                                format!("{} [{}-{}]", us(m.median), us(m.ci_low), us(m.ci_high))
                            })
                            .unwrap_or("-".into()),
                    );
                    v.push(pct(r.error(r.pure)));
                    v.push(pct(r.fitted.and_then(|p| r.error(p))));
                    v.push(pct(r.held_out.and_then(|p| r.error(p))));
                }
                v
            })
            .collect();
        let header: Vec<&str> = if measured {
            vec![
                "protocol",
                "size",
                "pure",
                "fitted",
                "measured [95% CI]",
                "err pure",
                "err fitted",
                "err held-out",
            ]
        } else {
            vec!["protocol", "size", "predicted"]
        };
        out.push_str(&text_table(&header, &rows));
        if measured {
            for s in &c.summary {
                out.push_str(&format!(
                    "  {} {}: median |error| pure {:.0}%, fitted {:.0}%, held-out {:.0}%\n",
                    c.class,
                    s.protocol,
                    s.pure * 100.0,
                    s.fitted * 100.0,
                    s.held_out * 100.0
                ));
            }
        }
    }
    out
}

/// One log-log plot per class: predicted (dashed) and measured time.
pub fn plot(c: &ClassModel) -> String {
    let mut series = Vec::new();
    for proto in ["two-copy", "single-copy"] {
        let rs: Vec<&Row> = c.rows.iter().filter(|r| r.protocol == proto).collect();
        let fitted = rs.iter().all(|r| r.fitted.is_some());
        series.push(Series {
            name: format!("{proto} model{}", if fitted { " (fitted)" } else { "" }),
            points: rs
                .iter()
                .map(|r| (r.size as f64, r.fitted.unwrap_or(r.pure) * 1e6))
                .collect(),
            dashed: true,
        });
        if rs.iter().any(|r| r.measured.is_some()) {
            series.push(Series {
                name: format!("{proto} measured"),
                points: rs
                    .iter()
                    .filter_map(|r| r.measured.as_ref().map(|m| (r.size as f64, m.median * 1e6)))
                    .collect(),
                dashed: false,
            });
        }
    }
    svg_loglog(
        &format!(
            "Model vs measured, class {} (pair {},{})",
            c.class, c.pair.0, c.pair.1
        ),
        "message size (bytes)",
        "one-way time (us)",
        &series,
        &bytes_label,
    )
}

/// HTML for `topocomm report`.
pub fn html(r: &ModelReport) -> String {
    let mut s = format!(
        "<p>Seed 001's model (docs/model.md) with rates from {}; the fixed costs are fitted to the measured points (held-out = fitted without that size). One-way time of the latency test, hot buffers.</p>",
        topocomm_report::esc(&r.cache_source)
    );
    for c in &r.classes {
        s.push_str(&format!("<div class=\"svgbox\">{}</div>", plot(c)));
        let rows: Vec<Vec<String>> = c
            .summary
            .iter()
            .map(|e| {
                vec![
                    c.class.clone(),
                    e.protocol.clone(),
                    format!("{:.0}%", e.pure * 100.0),
                    format!("{:.0}%", e.fitted * 100.0),
                    format!("{:.0}%", e.held_out * 100.0),
                ]
            })
            .collect();
        s.push_str(&topocomm_report::html_table(
            &[
                "class",
                "protocol",
                "median |err| pure",
                "fitted",
                "held-out",
            ],
            &rows,
        ));
    }
    s
}

/// Quick model with measurement for `topocomm report`.
pub fn report_section(m: &Machine) -> Result<(String, serde_json::Value)> {
    let a = Args {
        measure: true,
        sizes: Some("4K,64K,1M,8M".into()),
        samples: 5,
        min_time_ms: 1.0,
        ..Default::default()
    };
    let r = compute(m, &a)?;
    Ok((html(&r), serde_json::to_value(&r)?))
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    let r = compute(&m, a)?;
    print!("{}", tables(&r));
    if let Some(f) = &a.json {
        charact::write_json(f, &r)?;
        eprintln!("json written to {}", f.display());
    }
    if let Some(d) = &a.plot {
        for c in &r.classes {
            charact::write_file(
                &d.join(format!("model-{}.svg", c.class)),
                plot(c).as_bytes(),
            )?;
        }
        eprintln!("plots written to {}", d.display());
    }
    Ok(ExitCode::SUCCESS)
}
