//! `topocomm bench cache`: mbench-style cache-state curves (seed 001).
//! Kernels in `topocomm_measure::cache`, the run and its result file in
//! `topocomm_measure::cache_report`; states explained in docs/cache-states.md.

use super::charact::{self, Progress};
use crate::common::{text_table, GlobalOpts};
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_measure::cache_report::{self, CacheOptions, CacheReport};
use topocomm_topo::Machine;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// PU whose loads/stores are timed: a PU OS index or an hwloc location
    /// such as core:2 (its first PU; docs/concepts/locations.md); default: the first PU
    #[arg(long, value_name = "LOCATION")]
    pub pu: Option<String>,
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

impl Args {
    /// The library's options, `--pu` resolved against `m`.
    pub fn options(&self, m: &Machine) -> Result<CacheOptions> {
        let pu = match &self.pu {
            Some(l) => Some(
                topocomm_topo::resolve_pu(m, l)
                    .map_err(|e| crate::common::usage(anyhow::anyhow!("--pu: {e}")))?,
            ),
            None => None,
        };
        Ok(CacheOptions {
            pu,
            classes: self.classes.clone(),
            states: self.states.clone(),
            ops: self.ops.clone(),
            sizes: self.sizes.clone(),
            max_size: self.max_size.clone(),
            samples: self.samples,
            quick: self.quick,
        })
    }
}

/// Runs the benchmark (no printing besides the timer and progress).
pub fn measure(m: &Machine, a: &Args) -> Result<CacheReport> {
    charact::require_live(m)?;
    let timer = charact::timer_checked();
    let mut bar = Progress::new("bench cache", 1);
    let mut first = true;
    let mut tick = |d: usize, t: usize| {
        if first {
            bar = Progress::new("bench cache", t);
            first = false;
        }
        bar.tick(d);
    };
    Ok(cache_report::measure(m, &a.options(m)?, timer, &mut tick)?)
}

/// One text table per operation (rows = sizes, columns = (class, state)),
/// then the notes.
pub fn tables(r: &CacheReport) -> String {
    let mut out = String::new();
    for (title, header, rows) in r.tables() {
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        out.push_str(&format!("\n{title}\n{}", text_table(&h, &rows)));
    }
    for n in r.notes() {
        out.push_str(&format!("{n}\n"));
    }
    out
}

/// HTML for the report: curves, then the omissions.
pub fn html(r: &CacheReport) -> String {
    let mut s = format!(
        "<p>Measuring PU {}; holders: {}. Median of {} samples per point, each prepared afresh (docs/cache-states.md). Timer resolution {:.0} ns.{}</p>",
        r.measurer,
        topocomm_report::esc(&r.holders_text()),
        r.samples,
        r.meta.timer.resolution_ns,
        if r.quick { " Quick mode." } else { "" }
    );
    for (_, svg) in r.curves_svg() {
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
        for (op, svg) in r.curves_svg() {
            charact::write_file(&dir.join(format!("cache-{op}.svg")), svg.as_bytes())?;
        }
        crate::common::note(&format!("results written to {}", dir.display()));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "bench cache: measuring PU {}, holders {}; timer resolution {:.0} ns{}",
            r.measurer,
            r.holders_text(),
            r.meta.timer.resolution_ns,
            if r.quick { " (quick)" } else { "" }
        );
        print!("{}", tables(&r));
    }
    Ok(ExitCode::SUCCESS)
}
