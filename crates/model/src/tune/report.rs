//! What `topocomm tune` reports: the [tune JSON](../../../../docs/formats/tune-json.md)
//! document ([`TuneReport`]), its terminal tables, and the HTML section
//! `topocomm report --tune FILE` builds from such a file.

use super::plan::Plan;
use super::space::label;
use super::{ClassTune, SearchMode};
use crate::text::{num, size_label, us};
use serde::Serialize;
use topocomm_measure::meta::RunMeta;
use topocomm_topo::text::text_table;
use topocomm_topo::Machine;

/// `topocomm.tune/1`: the settings of a tuning run and every class's
/// searches, verification and ratios.
#[derive(Serialize)]
pub struct TuneReport {
    pub schema: String,
    pub meta: RunMeta,
    pub mode: SearchMode,
    pub test: String,
    pub quick: bool,
    pub sizes: Vec<u64>,
    pub samples: usize,
    pub min_time_ms: f64,
    pub rounds: usize,
    pub budget_s: f64,
    pub grid_size: usize,
    pub cache_source: Option<String>,
    pub rules_file: String,
    pub classes: Vec<ClassTune>,
    pub seconds: f64,
}

impl TuneReport {
    /// The document of a run of `plan` on `m` that tuned `classes` and
    /// wrote `rules_file`, in `seconds` in all.
    pub fn new(
        m: &Machine,
        plan: &Plan,
        cache_source: Option<String>,
        rules_file: String,
        classes: Vec<ClassTune>,
        seconds: f64,
    ) -> TuneReport {
        let s = &plan.search;
        TuneReport {
            schema: "topocomm.tune/1".into(),
            meta: RunMeta::new(m, topocomm_measure::timer::check()),
            mode: s.mode,
            test: plan.test.clone(),
            quick: plan.quick,
            sizes: s.sizes.clone(),
            samples: s.samples,
            min_time_ms: s.min_time_ms,
            rounds: s.rounds,
            budget_s: plan.budget_s,
            grid_size: s.space.size(),
            cache_source,
            rules_file,
            classes,
            seconds,
        }
    }

    /// Terminal summary.
    pub fn tables(&self) -> String {
        let r = self;
        let mut out = format!(
            "tune: {} test, hot buffers, sizes {}; median of {} samples per point{}\n",
            r.test,
            r.sizes
                .iter()
                .map(|&s| size_label(s))
                .collect::<Vec<_>>()
                .join(","),
            r.samples,
            if r.quick { " (quick)" } else { "" }
        );
        for c in &r.classes {
            out.push_str(&self.class_tables(c));
        }
        out.push_str(&format!(
            "\nratios < 1: tuned faster. Rules written to {} ({:.0} s in all)\n",
            r.rules_file, r.seconds
        ));
        out
    }

    /// One class's part of [`TuneReport::tables`].
    fn class_tables(&self, c: &ClassTune) -> String {
        let mut out = format!("\nclass {} (pair {},{})\n", c.class, c.pair.0, c.pair.1);
        let searches: Vec<_> = [&c.grid, &c.model].into_iter().flatten().collect();
        let rows: Vec<Vec<String>> = searches
            .iter()
            .map(|s| {
                vec![
                    s.mode.clone(),
                    s.jobs.to_string(),
                    s.points.to_string(),
                    format!("{:.1} s", s.seconds),
                    s.skipped.to_string(),
                    label(&s.assembled.params),
                ]
            })
            .collect();
        out.push_str(&text_table(
            &[
                "search",
                "jobs",
                "points",
                "time",
                "skipped",
                "assembled section",
            ],
            &rows,
        ));
        if let Some(m) = &c.model {
            if let (Some(f), Some(p)) = (&m.fit, &m.predicted) {
                let o = &f.overheads;
                out.push_str(&format!(
                    "model: fitted message {} us, rendezvous {} us, per CMA call {} us, per page {} ns; predicted optimum: {}\n",
                    us(o.message), us(o.rendezvous), us(o.per_call), num(o.per_page * 1e9), label(&p.params)
                ));
            }
        }
        if let Some(g) = &c.grid {
            out.push_str("per-size winners (grid):\n");
            let rows: Vec<Vec<String>> = g
                .winners
                .iter()
                .map(|w| vec![size_label(w.size), w.candidate.clone(), us(w.seconds)])
                .collect();
            out.push_str(&text_table(&["size", "candidate", "us"], &rows));
        }
        let names: Vec<&str> = c.verified.iter().map(|v| v.name.as_str()).collect();
        out.push_str(&format!(
            "verification (us, median [95% CI], {} rounds pooled); written: {}\n",
            self.rounds, c.chosen
        ));
        let mut header = vec!["size".to_string()];
        header.extend(names.iter().map(|n| n.to_string()));
        header.push("tuned/defaults".into());
        header.push("tuned/global".into());
        let rows: Vec<Vec<String>> = self
            .sizes
            .iter()
            .map(|&s| {
                let mut row = vec![size_label(s)];
                for v in &c.verified {
                    row.push(
                        v.points
                            .iter()
                            .find(|p| p.size == s)
                            .map(|p| {
                                format!("{} [{}-{}]", us(p.median), us(p.ci_low), us(p.ci_high))
                            })
                            .unwrap_or("-".into()),
                    );
                }
                for den in ["defaults", "global"] {
                    row.push(
                        c.ratios
                            .iter()
                            .find(|x| x.size == s && x.den == den)
                            .map(|x| format!("{:.2} [{:.2},{:.2}]", x.median, x.ci_low, x.ci_high))
                            .unwrap_or("-".into()),
                    );
                }
                row
            })
            .collect();
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        out.push_str(&text_table(&h, &rows));
        if let (Some(g), Some(m), Some(x)) = (&c.grid, &c.model, c.model_vs_grid) {
            out.push_str(&format!(
                "model vs grid: {} vs {} jobs; verified time ratio model/grid (geometric mean over sizes) {:.2}\n",
                m.jobs, g.jobs, x
            ));
        }
        out
    }
}

/// HTML for `topocomm report --tune FILE`, from the JSON value of a tune
/// document (read loosely: missing fields show as empty or `?`).
pub fn html_from_json(v: &serde_json::Value) -> String {
    let mut s = String::from("<p>From <code>topocomm tune --json</code> (docs/commands/tune.md). Time ratios &lt; 1: the tuned rules are faster.</p>");
    let Some(classes) = v.get("classes").and_then(|c| c.as_array()) else {
        return s + "<p>no classes in the file</p>";
    };
    for c in classes {
        let class = c.get("class").and_then(|x| x.as_str()).unwrap_or("?");
        let mut rows = Vec::new();
        for m in ["grid", "model"] {
            if let Some(sr) = c.get(m).filter(|x| !x.is_null()) {
                rows.push(vec![
                    class.to_string(),
                    m.to_string(),
                    sr.get("jobs").map(|x| x.to_string()).unwrap_or_default(),
                    sr.get("seconds")
                        .and_then(|x| x.as_f64())
                        .map(|x| format!("{x:.1} s"))
                        .unwrap_or_default(),
                ]);
            }
        }
        s.push_str(&topocomm_report::html_table(
            &["class", "search", "jobs", "time"],
            &rows,
        ));
        let rows: Vec<Vec<String>> = c
            .get("ratios")
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .map(|x| {
                        let f = |k: &str| x.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
                        vec![
                            size_label(x.get("size").and_then(|v| v.as_u64()).unwrap_or(0)),
                            format!(
                                "tuned / {}",
                                x.get("den").and_then(|v| v.as_str()).unwrap_or("?")
                            ),
                            format!(
                                "{:.2} [{:.2}, {:.2}]",
                                f("median"),
                                f("ci_low"),
                                f("ci_high")
                            ),
                        ]
                    })
                    .collect()
            })
            .unwrap_or_default();
        s.push_str(&topocomm_report::html_table(
            &["size", "ratio", "median [95% CI]"],
            &rows,
        ));
    }
    s
}
