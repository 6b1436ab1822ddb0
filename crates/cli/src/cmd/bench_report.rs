//! The benchmark sections of `topocomm report` (quick modes, so the report
//! stays fast). A benchmark that cannot run here (e.g. the topology is not
//! this machine) gets a section saying why instead of numbers.

use anyhow::Result;
use topocomm_report::{esc, Report};
use topocomm_topo::Machine;

type Section = fn(&Machine) -> Result<(String, serde_json::Value)>;

/// Adds the sections to `r`; returns their JSON keyed by section id.
pub fn add_sections(m: &Machine, r: &mut Report) -> serde_json::Value {
    let sections: [(&str, &str, Section); 3] = [
        (
            "bench-matrix",
            "PU-pair matrix (quick)",
            super::bench_matrix::report_section,
        ),
        (
            "bench-cache",
            "Cache-state curves (quick)",
            super::bench_cache::report_section,
        ),
        (
            "bench-placement",
            "Placement: CG and triad (quick)",
            super::bench_placement::report_section,
        ),
    ];
    let mut json = serde_json::Map::new();
    for (id, title, f) in sections {
        match f(m) {
            Ok((html, j)) => {
                r.add(id, title, html);
                json.insert(id.into(), j);
            }
            Err(e) => {
                let msg: Vec<String> = e.chain().map(|c| c.to_string()).collect();
                let msg = msg.join(": ");
                r.add(id, title, format!("<p>Not measured: {}</p>", esc(&msg)));
                json.insert(id.into(), serde_json::json!({ "error": msg }));
            }
        }
    }
    serde_json::Value::Object(json)
}
