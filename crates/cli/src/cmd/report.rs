//! `topocomm report`: the main job. Discovers the machine and writes one
//! self-contained HTML page plus the same content as JSON. Later stages
//! (measurements, model, tuning) add their sections here; the page itself
//! is drawn from the JSON (`cmd::report_page`), so `--from` redraws it.

use crate::cmd::report_page;
use crate::common::GlobalOpts;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_report::{esc, html_table, svg_tree, Report};
use topocomm_topo::text::{
    class_rows, device_row, inventory, level_chain, origin_text, DEVICE_HEADER,
};
use topocomm_topo::{ClassMatrix, TreeView};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Folder to write index.html and report.json into
    #[arg(long, default_value = "topocomm-report")]
    pub out: PathBuf,
    /// Skip the benchmark sections (point-to-point, pair matrix, cache states, placement)
    #[arg(long)]
    pub no_bench: bool,
    /// Add a Tuning section from the results of `topocomm tune --json FILE`
    /// (tuning takes longer than a report should; docs/commands/report.md)
    #[arg(long, value_name = "FILE")]
    pub tune: Option<PathBuf>,
    /// Add a Collectives section from the results of `topocomm bench coll --json FILE`
    #[arg(long, value_name = "FILE")]
    pub coll: Option<PathBuf>,
    /// Draw the page again from a report.json of an earlier run (measures nothing)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["no_bench", "tune", "coll"])]
    pub from: Option<PathBuf>,
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let started = std::time::Instant::now();
    if let Some(f) = &a.from {
        let (r, doc) = report_page::from_file(f)?;
        return write(&r, &doc, a);
    }
    let m = g.machine()?;
    let cm = ClassMatrix::new(&m);
    let tree = TreeView::new(&m);
    let mut r = Report::new(
        format!("topocomm report: {}", origin_text(&m)),
        format!(
            "topocomm {} · {} · fingerprint {}",
            env!("CARGO_PKG_VERSION"),
            m.cpu_model.as_deref().unwrap_or("CPU model unknown"),
            m.fingerprint
        ),
    );

    let date = crate::cmd::bench::utc_now();
    r.fact("date (UTC)", date.replace('T', " ").replace('Z', ""));
    r.fact(
        "host",
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
    );
    r.fact("CPU", m.cpu_model.as_deref().unwrap_or("unknown"));
    r.fact(
        "kernel",
        kernel_release().unwrap_or_else(|| "unknown".into()),
    );
    let (ompi, mpich) = report_page::mpi_versions();
    r.fact("Open MPI", ompi);
    r.fact("MPICH", mpich);
    r.fact("topocomm", env!("CARGO_PKG_VERSION"));
    let mut summary = format!(
        "<p>{}</p><p>Levels: <code>{}</code>{}</p>",
        esc(&inventory(&m)),
        esc(&level_chain(&tree)),
        if tree.symmetric {
            ""
        } else {
            " (asymmetric tree)"
        }
    );
    if let Some(k) = kernel_release() {
        summary.push_str(&format!("<p>Kernel: {}</p>", esc(&k)));
    }
    r.add("machine", "Machine", summary);

    let rows = class_rows(&cm);
    r.add(
        "classes",
        "Locality classes",
        format!(
            "<p>Nearest first. A pair's class is named after the lowest object its two PUs share (docs/concepts/locality-classes.md).</p>{}",
            html_table(&["class", "PU pairs", "representative pair (OS P,Q)"], &rows)
        ),
    );
    r.add(
        "tree",
        "Topology",
        format!("<div class=\"svgbox tree\">{}</div>", svg_tree(&m)),
    );
    if !m.devices.is_empty() {
        let rows: Vec<Vec<String>> = m.devices.iter().map(|d| device_row(&m, d)).collect();
        r.add(
            "devices",
            "I/O devices and their locality",
            html_table(&DEVICE_HEADER, &rows),
        );
    }

    if let Some(html) = crate::cmd::rails::report_section(&m) {
        r.add("rails", "Rails: NUIOA split from each NUMA node", html);
    }

    let p2p = if a.no_bench {
        serde_json::Value::Null
    } else {
        // Drawn from its JSON by report_page.
        r.add(
            "p2p",
            "Point-to-point: topocomm, MPI peers, physical limits",
            String::new(),
        );
        crate::cmd::bench::p2p::report_section(&m)
    };
    let bench = if a.no_bench {
        serde_json::Value::Null
    } else {
        crate::cmd::bench_report::add_sections(&m, &mut r)
    };

    let model = if a.no_bench {
        serde_json::Value::Null
    } else {
        match crate::cmd::model::report_section(&m) {
            Ok((html, json)) => {
                r.add("model", "Model: predicted vs measured transfer time", html);
                json
            }
            Err(e) => {
                r.add(
                    "model",
                    "Model: predicted vs measured transfer time",
                    format!("<p>not available: {}</p>", esc(&e.to_string())),
                );
                serde_json::Value::Null
            }
        }
    };
    let tune = match &a.tune {
        Some(f) => {
            let v: serde_json::Value = std::fs::read_to_string(f)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                .map_err(|e| anyhow::anyhow!("--tune {}: {e}", f.display()))?;
            if v.get("schema").and_then(|s| s.as_str()) != Some("topocomm.tune/1") {
                anyhow::bail!(
                    "--tune {}: not a topocomm tune JSON file (schema topocomm.tune/1)",
                    f.display()
                );
            }
            r.add(
                "tuning",
                "Tuning: multi-tuned rules vs global vs defaults",
                topocomm_model::tune::report::html_from_json(&v),
            );
            v
        }
        None => serde_json::Value::Null,
    };
    let coll = match &a.coll {
        Some(f) => {
            let (html, v) = coll_section(f)?;
            r.add(
                "coll",
                "Collectives: topocomm accel vs Open MPI and MPICH",
                html,
            );
            v
        }
        None => serde_json::Value::Null,
    };
    let secs = started.elapsed().as_secs_f64();
    r.fact(
        "report runtime",
        format!(
            "{secs:.1} s ({})",
            if a.no_bench {
                "--no-bench"
            } else {
                "with the quick measurements"
            }
        ),
    );
    let json = serde_json::json!({
        "schema": "topocomm.report/1",
        "version": env!("CARGO_PKG_VERSION"),
        "command": std::env::args().collect::<Vec<_>>(),
        "kernel": kernel_release(),
        "machine": m,
        "classes": cm.classes(),
        "tree": tree,
        "bench": bench,
        "p2p": p2p,
        "model": model,
        "tune": tune,
        "coll": coll,
        "date": date,
        "runtime_s": secs,
        "page": report_page::page_json(&r),
    });
    let page = report_page::page(&json)?;
    write(&page, &json, a)?;
    println!("report runtime {secs:.1} s");
    Ok(ExitCode::SUCCESS)
}

fn write(r: &Report, json: &serde_json::Value, a: &Args) -> Result<ExitCode> {
    let path = r
        .write(&a.out, json)
        .with_context(|| format!("cannot write the report into '{}'", a.out.display()))?;
    println!("report written to {}", path.display());
    println!("json written to {}", a.out.join("report.json").display());
    Ok(ExitCode::SUCCESS)
}

/// `--coll FILE`: the section's HTML and the document.
fn coll_section(f: &std::path::Path) -> Result<(String, serde_json::Value)> {
    let v: serde_json::Value = std::fs::read_to_string(f)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| crate::common::usage(anyhow::anyhow!("--coll {}: {e}", f.display())))?;
    let html = topocomm_measure::coll_summary::html_from_json(&v)
        .map_err(|e| crate::common::usage(anyhow::anyhow!("--coll {}: {e}", f.display())))?;
    Ok((html, v))
}

fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
}
