//! `topocomm bench cache`: mbench-style cache-state curves (seed 001).
//! Kernels in `topocomm_measure::cache`; states explained in docs/cache-states.md.

use super::charact::{self, num, size_label, Progress};
use crate::common::{text_table, GlobalOpts};
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_measure::cache::{self, CacheConfig, CachePoint, Holder, Omission, Op, State};
use topocomm_measure::meta::RunMeta;
use topocomm_report::{bytes_label, svg_loglog, Series};
use topocomm_topo::Machine;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// PU whose loads/stores are timed (OS index; default: the first PU)
    #[arg(long, value_name = "P")]
    pub pu: Option<u32>,
    /// Locality classes of the holder core, e.g. `self,l3,package` (default: all present, plus `none` for I)
    #[arg(long, value_name = "LIST")]
    pub classes: Option<String>,
    /// Cache states among M,E,S,O,F,I (default: M,E,S,I plus O on AMD, F on Intel)
    #[arg(long, value_name = "LIST")]
    pub states: Option<String>,
    /// Operations among load,store,chase
    #[arg(long, value_name = "LIST", default_value = "load,store,chase")]
    pub ops: String,
    /// Buffer sizes (default: 1K to 4x the LLC, doubling; x4 steps with --quick)
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Largest buffer size (caps the default list)
    #[arg(long, value_name = "SIZE")]
    pub max_size: Option<String>,
    /// Samples per point, each prepared afresh (default 11; 3 with --quick)
    #[arg(long)]
    pub samples: Option<usize>,
    /// Fast, coarse run for CI and the report
    #[arg(long)]
    pub quick: bool,
    /// Print the JSON result on stdout instead of the tables
    #[arg(long)]
    pub json: bool,
    /// Folder to write cache.json and the SVG curves into
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The JSON file (docs/formats/bench-cache-json.md).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CacheReport {
    pub schema: String,
    pub meta: RunMeta,
    pub measurer: u32,
    pub quick: bool,
    pub sizes: Vec<u64>,
    pub samples: usize,
    pub chase_cap: usize,
    pub evict_bytes: u64,
    pub holders: Vec<Holder>,
    pub states: Vec<State>,
    pub points: Vec<CachePoint>,
    pub omitted: Vec<Omission>,
}

fn list<T: std::str::FromStr>(text: &str, what: &str) -> Result<Vec<T>>
where
    T::Err: std::fmt::Display,
{
    let v: Result<Vec<T>, T::Err> = text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse())
        .collect();
    let v = v.map_err(|e| anyhow!("{what}: {e}"))?;
    if v.is_empty() {
        bail!("{what}: the list is empty");
    }
    Ok(v)
}

/// Runs the benchmark (no printing besides progress).
pub fn measure(m: &Machine, a: &Args) -> Result<CacheReport> {
    charact::require_live(m)?;
    let timer = charact::timer_checked();
    let p = a.pu.unwrap_or_else(|| m.pus[0].os_index);
    m.require_pu(p).map_err(|e| anyhow!("--pu: {e}"))?;
    let wanted: Option<Vec<String>> = a.classes.as_deref().map(|c| {
        c.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    });
    if let Some(w) = &wanted {
        for c in w {
            if c != "none" {
                c.parse::<topocomm_topo::LocalityClass>()
                    .map_err(|e| anyhow!("--classes: {e}"))?;
            }
        }
    }
    let holders =
        cache::plan_holders(m, p, wanted.as_deref()).map_err(|e| anyhow!("--classes: {e}"))?;
    let mut states = match &a.states {
        Some(s) => list::<State>(s, "--states")?,
        None => State::defaults_for(m.cpu_model.as_deref()),
    };
    if let Some(w) = &wanted {
        if !w.iter().any(|c| c == "none") {
            states.retain(|s| *s != State::I);
        }
        if w.iter().all(|c| c == "none") {
            states.retain(|s| *s == State::I);
        }
    }
    if states.is_empty() {
        bail!(
            "--states/--classes: nothing left to measure (state I is measured under class 'none')"
        );
    }
    let ops = list::<Op>(&a.ops, "--ops")?;
    let llc = m.llc_size().unwrap_or(32 << 20);
    let mut sizes = match &a.sizes {
        Some(s) => charact::parse_sizes(s).map_err(|e| anyhow!("--sizes: {e}"))?,
        None => cache::default_sizes(llc, a.quick),
    };
    if let Some(ms) = &a.max_size {
        let ms = charact::parse_size(ms).map_err(|e| anyhow!("--max-size: {e}"))?;
        sizes.retain(|&s| s <= ms);
    }
    if sizes.is_empty() || sizes.iter().any(|&s| s < 64) {
        bail!("--sizes: need at least one size, each at least 64 bytes");
    }
    let samples = a.samples.unwrap_or(if a.quick { 3 } else { 11 });
    if samples == 0 {
        bail!("--samples must be at least 1");
    }
    let cfg = CacheConfig {
        measurer: p,
        holders: holders.clone(),
        states: states.clone(),
        ops,
        sizes: sizes.clone(),
        samples,
        chase_cap: if a.quick { 1 << 14 } else { 1 << 17 },
        evict_bytes: cache::evict_bytes(m),
        timer_overhead_ns: timer.overhead_ns,
        timer_resolution_ns: timer.resolution_ns,
    };
    let mut bar = Progress::new("bench cache", 1);
    let mut first = true;
    let mut tick = |d: usize, t: usize| {
        if first {
            bar = Progress::new("bench cache", t);
            first = false;
        }
        bar.tick(d);
    };
    let (points, omitted) = cache::run(&cfg, &mut tick).map_err(|e| anyhow!("bench cache: {e}"))?;
    Ok(CacheReport {
        schema: "topocomm.bench-cache/1".into(),
        meta: RunMeta::new(m, timer),
        measurer: p,
        quick: a.quick,
        sizes,
        samples,
        chase_cap: cfg.chase_cap,
        evict_bytes: cfg.evict_bytes,
        holders,
        states,
        points,
        omitted,
    })
}

fn curve_key(p: &CachePoint) -> String {
    format!("{} {}", p.class, p.state)
}

/// The (class, state) curves in measurement order.
fn curve_names(r: &CacheReport) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for p in &r.points {
        let k = curve_key(p);
        if !v.contains(&k) {
            v.push(k);
        }
    }
    v
}

/// One text table per operation: rows = sizes, columns = (class, state).
pub fn tables(r: &CacheReport) -> String {
    let curves = curve_names(r);
    let mut out = String::new();
    let ops: Vec<Op> = Op::ALL
        .into_iter()
        .filter(|o| r.points.iter().any(|p| p.op == *o))
        .collect();
    for op in ops {
        out.push_str(&format!(
            "\n{} ({}, median of {} samples; columns: holder class + state)\n",
            match op {
                Op::Load => "Load throughput",
                Op::Store => "Store throughput",
                Op::Chase => "Pointer-chase latency",
            },
            op.unit(),
            r.samples
        ));
        let mut header = vec!["size".to_string()];
        header.extend(curves.iter().cloned());
        let rows: Vec<Vec<String>> = r
            .sizes
            .iter()
            .map(|&s| {
                let mut row = vec![size_label(s)];
                for c in &curves {
                    row.push(
                        r.points
                            .iter()
                            .find(|p| p.op == op && p.size == s && &curve_key(p) == c)
                            .map(|p| {
                                let v = num(p.summary.median);
                                if p.resolved {
                                    v
                                } else {
                                    format!("~{v}")
                                }
                            })
                            .unwrap_or_else(|| "-".into()),
                    );
                }
                row
            })
            .collect();
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        out.push_str(&text_table(&h, &rows));
    }
    if r.points.iter().any(|p| !p.resolved) {
        out.push_str("~ = timed span under 10x the timer resolution: coarse\n");
    }
    for o in &r.omitted {
        out.push_str(&format!(
            "not measured: {} {}: {}\n",
            o.class, o.state, o.reason
        ));
    }
    out
}

/// One log-log SVG per operation.
pub fn curves_svg(r: &CacheReport) -> Vec<(Op, String)> {
    let curves = curve_names(r);
    Op::ALL
        .into_iter()
        .filter(|o| r.points.iter().any(|p| p.op == *o))
        .map(|op| {
            let series: Vec<Series> = curves
                .iter()
                .map(|c| Series {
                    name: c.clone(),
                    points: r
                        .points
                        .iter()
                        .filter(|p| p.op == op && &curve_key(p) == c)
                        .map(|p| (p.size as f64, p.summary.median))
                        .collect(),
                    dashed: false,
                })
                .filter(|s| !s.points.is_empty())
                .collect();
            let (title, unit) = match op {
                Op::Load => ("Load throughput from PU", "GB/s"),
                Op::Store => ("Store throughput from PU", "GB/s"),
                Op::Chase => ("Pointer-chase load latency on PU", "ns per load"),
            };
            (
                op,
                svg_loglog(
                    &format!("{title} {} (holder class, state)", r.measurer),
                    "buffer size (bytes)",
                    unit,
                    &series,
                    &bytes_label,
                ),
            )
        })
        .collect()
}

/// HTML for the report: curves, then the omissions.
pub fn html(r: &CacheReport) -> String {
    let mut s = format!(
        "<p>Measuring PU {}; holders: {}. Median of {} samples per point, each prepared afresh (docs/cache-states.md). Timer resolution {:.0} ns.{}</p>",
        r.measurer,
        topocomm_report::esc(
            &r.holders
                .iter()
                .map(|h| format!("{}=PU {}", h.class, h.q))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        r.samples,
        r.meta.timer.resolution_ns,
        if r.quick { " Quick mode." } else { "" }
    );
    for (_, svg) in curves_svg(r) {
        s.push_str(&format!("<div class=\"svgbox\">{svg}</div>"));
    }
    if !r.omitted.is_empty() {
        let rows: Vec<Vec<String>> = r
            .omitted
            .iter()
            .map(|o| vec![o.class.clone(), o.state.to_string(), o.reason.clone()])
            .collect();
        s.push_str(&topocomm_report::html_table(
            &["class", "state", "not measured because"],
            &rows,
        ));
    }
    s
}

/// Quick run for `topocomm report`.
pub fn report_section(m: &Machine) -> Result<(String, serde_json::Value)> {
    let a = Args {
        quick: true,
        ops: "load,store,chase".into(),
        samples: Some(3),
        ..Args::default()
    };
    let r = measure(m, &a)?;
    Ok((html(&r), serde_json::to_value(&r)?))
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    let r = measure(&m, a)?;
    if let Some(dir) = &a.out {
        charact::write_json(&dir.join("cache.json"), &r)?;
        for (op, svg) in curves_svg(&r) {
            charact::write_file(&dir.join(format!("cache-{op}.svg")), svg.as_bytes())?;
        }
        eprintln!("results written to {}", dir.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "bench cache: measuring PU {}, holders {}; timer resolution {:.0} ns{}",
            r.measurer,
            r.holders
                .iter()
                .map(|h| format!("{}=PU {}", h.class, h.q))
                .collect::<Vec<_>>()
                .join(", "),
            r.meta.timer.resolution_ns,
            if r.quick { " (quick)" } else { "" }
        );
        print!("{}", tables(&r));
    }
    Ok(ExitCode::SUCCESS)
}
