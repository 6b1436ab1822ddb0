//! The page of `topocomm report` drawn from its JSON document: the header,
//! the verdict and the point-to-point section are rebuilt from the data,
//! the other sections are kept as the run rendered them. A run and
//! `topocomm report --from report.json` therefore give the same page.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use topocomm_measure::p2p::{size_label, Test};
use topocomm_measure::results::{table, Ratio, ResultRow};
use topocomm_measure::verdict::{beyond_limit, bw_curves, verdicts};
use topocomm_report::{esc, html_table, svg_loglog, Report, Series};

/// The point-to-point data of a report.
struct P2p {
    rows: Vec<ResultRow>,
    ratios: Vec<Ratio>,
    pairs: Vec<(String, String)>,
    notes: Vec<String>,
}

/// The report JSON's `p2p`: the data, or why there is none.
fn p2p_of(doc: &Value) -> Result<P2p, String> {
    let v = &doc["p2p"];
    if v.is_null() {
        return Err("not measured (--no-bench)".into());
    }
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(format!("not measured: {e}"));
    }
    let rows: Vec<ResultRow> =
        serde_json::from_value(v["results"].clone()).map_err(|e| format!("p2p.results: {e}"))?;
    let ratios: Vec<Ratio> =
        serde_json::from_value(v["ratios"].clone()).map_err(|e| format!("p2p.ratios: {e}"))?;
    let meta = &v["meta"];
    let pairs = meta["pairs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["pair"].as_str()?.into(), p["class"].as_str()?.into())))
        .collect();
    let notes = meta["backends"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| {
            let s = |k: &str| b[k].as_str().unwrap_or("").to_string();
            if s("status") != "ok" {
                Some(format!(
                    "{} on PUs {} not measured: {}",
                    s("backend"),
                    s("pair"),
                    s("reason")
                ))
            } else {
                b["reason"].as_str().map(str::to_string)
            }
        })
        .collect();
    Ok(P2p {
        rows,
        ratios,
        pairs,
        notes,
    })
}

/// The verdict section: per class the key figures, then a table of
/// verdicts, what to change and the files to use.
fn verdict_html(p: &Result<P2p, String>) -> String {
    let p = match p {
        Ok(p) => p,
        Err(why) => return format!("<p>No verdict: point-to-point {}.</p>", esc(why)),
    };
    topocomm_measure::verdict::html(&verdicts(&p.rows))
}

/// The point-to-point section: per pair a bandwidth chart with 95% CI
/// bands and a latency table, then every figure beyond its limit with the
/// reason, then the backends' notes.
fn p2p_html(p: &P2p) -> String {
    let mut h = String::from(
        "<p>Quick run: medians of few samples, hot cache, both processes pinned; the shaded \
         bands are the 95% confidence intervals. Reproduce precisely with \
         <code>topocomm bench p2p</code> (docs/commands/bench-p2p.md).</p>",
    );
    for (pair, class) in &p.pairs {
        let series: Vec<Series> = bw_curves(&p.rows, pair)
            .into_iter()
            .map(|(name, points, band)| Series {
                dashed: name == "limit",
                name,
                points,
                band,
            })
            .collect();
        if !series.is_empty() {
            let title = format!("bw, class {class}, PUs {pair}");
            let svg = svg_loglog(&title, "message size (bytes)", "GB/s", &series, &|v| {
                size_label(v as u64)
            });
            h.push_str(&format!(
                "<h3>Streaming bandwidth, class {} (PUs {pair})</h3><div class=\"svgbox\">{svg}</div>",
                esc(class),
            ));
        }
        let (hd, lines) = table(&p.rows, &p.ratios, pair, "hot", Test::Latency);
        if !lines.is_empty() {
            let hr: Vec<&str> = hd.iter().map(String::as_str).collect();
            h.push_str(&format!(
                "<h3>One-way latency, class {} (PUs {pair}), median [95% CI]</h3>{}",
                esc(class),
                html_table(&hr, &lines)
            ));
        }
    }
    let beyond = beyond_limit(&p.rows);
    if !beyond.is_empty() {
        h.push_str("<h3>Figures beyond the limit</h3><ul class=\"note\">");
        for b in beyond {
            h.push_str(&format!("<li>{}</li>", esc(&b)));
        }
        h.push_str("</ul>");
    }
    for note in &p.notes {
        h.push_str(&format!("<p class=\"note\">Note: {}</p>", esc(note)));
    }
    h
}

/// The page of a `topocomm.report/1` document.
pub fn page(doc: &Value) -> Result<Report> {
    if doc["schema"].as_str() != Some("topocomm.report/1") {
        bail!("not a topocomm report JSON file (schema topocomm.report/1)");
    }
    let Some(page) = doc["page"].as_object() else {
        bail!("field 'page' missing (a report JSON written before version 0.1 of the page)");
    };
    let text = |k: &str| {
        page.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut r = Report::new(text("title"), text("subtitle"));
    for f in page
        .get("header")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(k), Some(v)) = (f[0].as_str(), f[1].as_str()) {
            r.fact(k, v);
        }
    }
    let p2p = p2p_of(doc);
    r.add("verdict", "Verdict", verdict_html(&p2p));
    let sections = page.get("sections").and_then(Value::as_array);
    for s in sections.into_iter().flatten() {
        let (Some(id), Some(title)) = (s["id"].as_str(), s["title"].as_str()) else {
            bail!("field 'page.sections': each needs 'id' and 'title'");
        };
        let html = match (id, &p2p) {
            ("p2p", Ok(p)) => p2p_html(p),
            ("p2p", Err(why)) => format!("<p>Point-to-point {}.</p>", esc(why)),
            _ => s["html"].as_str().unwrap_or("").to_string(),
        };
        r.add(id, title, html);
    }
    Ok(r)
}

/// `topocomm report --from FILE`: the page of a saved report JSON.
pub fn from_file(path: &std::path::Path) -> Result<(Report, Value)> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--from {}: cannot read it", path.display()))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("--from {}: not JSON: {e}", path.display()))?;
    let r = page(&doc).map_err(|e| anyhow::anyhow!("--from {}: {e}", path.display()))?;
    Ok((r, doc))
}

/// The page's JSON: title, subtitle, header facts and the sections (the
/// p2p section's HTML is left out: it is drawn from `p2p`).
pub fn page_json(r: &Report) -> Value {
    let sections: Vec<Value> = r
        .sections
        .iter()
        .map(|s| {
            let html = (s.id != "p2p").then_some(s.html.as_str());
            serde_json::json!({ "id": s.id, "title": s.title, "html": html })
        })
        .collect();
    serde_json::json!({
        "title": r.title,
        "subtitle": r.subtitle,
        "header": r.header,
        "sections": sections,
    })
}

/// The first line of a command's output, if it runs.
fn first_line(cmd: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.to_string())
}

/// The installed MPIs' versions, as the header shows them.
pub fn mpi_versions() -> (String, String) {
    let ompi =
        first_line("ompi_info", &["--version"]).unwrap_or_else(|| "not found (ompi_info)".into());
    let mpich = first_line("mpichversion", &[])
        .or_else(|| first_line("mpichversion.mpich", &[]))
        .map(|l| {
            l.replace("MPICH Version:", "MPICH")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "not found (mpichversion)".into());
    (ompi, mpich)
}
