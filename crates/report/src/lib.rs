//! # topocomm-report
//!
//! Renders topocomm results for people: a self-contained HTML page (no
//! external scripts, styles or images) made of sections that each command
//! contributes, SVG drawings (the topology tree), and HTML tables.

pub mod heatmap;
pub mod png;
mod svg_chart;
mod svg_tree;

pub use svg_chart::{bytes_label, svg_loglog, Series};
pub use svg_tree::svg_tree;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Escapes text for HTML/SVG content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// An HTML table from a header and rows of already-formatted cells (escaped
/// here), in a box that scrolls sideways on a narrow screen instead of
/// widening the page.
pub fn html_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from("<div class=\"tbl\"><table><thead><tr>");
    for h in header {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>");
    s
}

/// One section of the report.
#[derive(Clone, Debug)]
pub struct Section {
    pub id: String,
    pub title: String,
    /// Trusted HTML (built with [`esc`], [`html_table`], SVG renderers).
    pub html: String,
}

/// A report under construction.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub title: String,
    pub subtitle: String,
    /// Facts shown under the title (date, host, versions, ...), in order.
    pub header: Vec<(String, String)>,
    pub sections: Vec<Section>,
}

/// The page's style. Readable from a phone to a wide screen: charts
/// (SVGs with a viewBox, except the
/// topology tree) scale down to the width of the page, tables and the topology
/// drawing (`.svgbox`) scroll inside their box, long words and code wrap;
/// the page itself never scrolls sideways.
const STYLE: &str = "*{box-sizing:border-box}\
body{font-family:system-ui,sans-serif;margin:0 auto;padding:1em;max-width:1400px;color:#222;overflow-wrap:anywhere}\
h1{margin-bottom:0;font-size:1.6em}.sub{color:#666;margin-top:.3em}nav{display:flex;flex-wrap:wrap;gap:.3em 1em}\
.tbl{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:1em 0}\
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;overflow-wrap:normal}\
th{background:#f0f0f0}section{margin-top:2.5em}.svgbox{overflow-x:auto;max-width:100%;border:1px solid #ddd;padding:.5em}\
.svgbox:not(.tree) svg[viewBox]{max-width:100%;height:auto}.meta th{font-weight:normal;color:#555}\
.good{color:#1a7f37}.improve{color:#b35900}.note{color:#555;font-size:.92em}\
code,pre{background:#f6f6f6;padding:.1em .3em;white-space:pre-wrap}";

impl Report {
    pub fn new(title: impl Into<String>, subtitle: impl Into<String>) -> Self {
        Report {
            title: title.into(),
            subtitle: subtitle.into(),
            header: Vec::new(),
            sections: Vec::new(),
        }
    }

    /// Adds a fact to the header under the title.
    pub fn fact(&mut self, name: &str, value: impl Into<String>) {
        self.header.push((name.to_string(), value.into()));
    }

    pub fn add(&mut self, id: &str, title: &str, html: String) {
        self.sections.push(Section {
            id: id.to_string(),
            title: title.to_string(),
            html,
        });
    }

    /// The whole page as one self-contained HTML document.
    pub fn to_html(&self) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1><p class=\"sub\">{sub}</p>",
            t = esc(&self.title),
            sub = esc(&self.subtitle)
        );
        if !self.header.is_empty() {
            s.push_str("<div class=\"tbl\"><table class=\"meta\"><tbody>");
            for (k, v) in &self.header {
                let _ = write!(s, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
            }
            s.push_str("</tbody></table></div>");
        }
        s.push_str("<nav>");
        for sec in &self.sections {
            let _ = write!(s, "<a href=\"#{}\">{}</a>", esc(&sec.id), esc(&sec.title));
        }
        s.push_str("</nav>");
        for sec in &self.sections {
            let _ = write!(
                s,
                "<section id=\"{}\"><h2>{}</h2>{}</section>",
                esc(&sec.id),
                esc(&sec.title),
                sec.html
            );
        }
        s.push_str("</body></html>\n");
        s
    }

    /// Writes `index.html` and `report.json` into `dir` (created if needed);
    /// returns the path of the HTML file.
    pub fn write(&self, dir: &Path, json: &serde_json::Value) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let html = dir.join("index.html");
        write_atomic(&html, self.to_html().as_bytes())?;
        let text = serde_json::to_string_pretty(json).expect("JSON values always serialize");
        write_atomic(&dir.join("report.json"), text.as_bytes())?;
        Ok(html)
    }
}

/// Writes through a temporary file and a rename, so that an interrupted run
/// never leaves a half-written file behind.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_builds_sections() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let mut r = Report::new("T<1>", "sub");
        r.fact("host", "h<1>");
        r.add("s1", "First", html_table(&["a"], &[vec!["<b>".into()]]));
        let h = r.to_html();
        assert!(h.contains("T&lt;1&gt;"));
        assert!(h.contains("<td>&lt;b&gt;</td>"));
        assert!(h.contains("href=\"#s1\""));
        assert!(h.contains("<tr><th>host</th><td>h&lt;1&gt;</td></tr>"));
        assert!(h.find("h&lt;1&gt;").unwrap() < h.find("<nav>").unwrap());
        assert!(!h.contains("<script"));
    }
}
