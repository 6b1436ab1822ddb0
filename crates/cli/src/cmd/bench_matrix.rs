//! `topocomm bench matrix`: per-PU-pair characterization with
//! topology-ordered heatmaps, per-class summaries, resumable partial
//! results and a costs file for the mapping engine. The plan, the run, the
//! result file and what is derived from it (CSVs, heatmaps, tables, costs)
//! are `topocomm_measure::matrix_report`'s; this module parses, probes the
//! transport, shows progress, and writes and prints.

use super::charact::{self, Progress};
use crate::common::{text_table, GlobalOpts};
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_measure::matrix::TransportBackend;
use topocomm_measure::matrix_report::{
    self, MatrixOptions, MatrixProgress, MatrixReport, SUMMARY_HEADER,
};
use topocomm_topo::{Machine, PuSet};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// Only pairs among these PUs: OS indexes, e.g. `0-3,8`, or hwloc locations,
    /// e.g. `core:0-3` or `package:0` (docs/concepts/locations.md)
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

impl Args {
    /// The library's options.
    pub fn options(&self) -> MatrixOptions {
        MatrixOptions {
            pus: self.pus.clone(),
            per_class: self.per_class,
            size: self.size.clone(),
            samples: self.samples,
            rounds: self.rounds,
            quick: self.quick,
        }
    }
}

/// Plans and runs the benchmark, rewriting `matrix.json` in `--out` after
/// every pair (no printing besides the timer, resumption and progress).
pub fn measure(m: &Machine, a: &Args) -> Result<MatrixReport> {
    charact::require_live(m)?;
    let timer = charact::timer_checked();
    let plan = matrix_report::plan(m, &a.options())?;
    let transport = if a.no_transport {
        Err("skipped by --no-transport".to_string())
    } else {
        let worker = topocomm_transport::worker::locate().map_err(|e| e.to_string());
        worker.and_then(|w| TransportBackend::probe(&w).map_err(|e| e.to_string()))
    };
    let out_json = a.out.join("matrix.json");
    let mut bar = Progress::new("bench matrix", plan.pairs.len());
    let mut progress = |p: MatrixProgress| -> Result<()> {
        match p {
            MatrixProgress::Resumed { measured, planned } => {
                eprintln!("resuming: {measured} of {planned} pairs already measured");
            }
            MatrixProgress::Measured { done, report } => {
                charact::write_json(&out_json, report)?;
                bar.tick(done);
            }
        }
        Ok(())
    };
    let resume = a.resume.as_deref();
    matrix_report::measure(m, &plan, transport, timer, resume, &mut progress)
}

/// The report draws heatmaps only for at least this many PUs.
pub const MIN_HEATMAP_PUS: usize = 4;

pub fn html(m: &Machine, r: &MatrixReport) -> String {
    let mut s = format!(
        "<p>{} pairs, {} samples per metric{}. Lines between rows/columns mark L2, L3, NUMA-node and package boundaries (thicker = higher level).</p>",
        r.pairs.len(),
        r.params.samples,
        if r.params.quick { ", quick mode" } else { "" }
    );
    // A heatmap of fewer than 4 PUs (1 pair on 2 PUs) says nothing the
    // table below does not; `bench matrix` still writes them as files.
    if r.pus.len() >= MIN_HEATMAP_PUS {
        for (_, h) in r.heatmaps(m) {
            s.push_str(&format!("<div class=\"svgbox\">{}</div>", h.svg()));
        }
    } else {
        s.push_str(&format!(
            "<p class=\"note\">Heatmaps are drawn from {MIN_HEATMAP_PUS} PUs on; with {} PUs the table says it all.</p>",
            r.pus.len()
        ));
    }
    s.push_str(&topocomm_report::html_table(
        &SUMMARY_HEADER,
        &r.summary_rows(),
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
    let (summary_csv, raw_csv) = r.csv();
    charact::write_file(&dir.join("matrix.csv"), summary_csv.as_bytes())?;
    charact::write_file(&dir.join("matrix-samples.csv"), raw_csv.as_bytes())?;
    for (name, h) in r.heatmaps(&m) {
        charact::write_file(&dir.join(format!("heatmap-{name}.svg")), h.svg().as_bytes())?;
        charact::write_file(&dir.join(format!("heatmap-{name}.png")), &h.png())?;
    }
    if let Some(c) = &a.costs_out {
        charact::write_json(c, &r.costs())?;
        crate::common::note(&format!("costs written to {}", c.display()));
    }
    crate::common::note(&format!("results written to {}", dir.display()));
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
    print!("{}", text_table(&SUMMARY_HEADER, &r.summary_rows()));
    for o in &r.omitted {
        println!("not measured: {o}");
    }
    Ok(ExitCode::SUCCESS)
}
