//! The verdict of `topocomm report`: from the point-to-point rows of a run
//! (topocomm, Open MPI, MPICH and the physical limit on each class's
//! representative pair), per class a small table of key figures, a
//! plain-words verdict on the MPI configuration, what to change and the
//! files to use. Every figure is a measured median of the run; nothing is
//! estimated.

use crate::p2p::size_label;
use crate::results::{fmt_ci, num, ResultRow};
use topocomm_report::{esc, html_table};

/// The columns of the figure table of a class.
pub const FIGURE_HEADER: [&str; 7] = [
    "figure",
    "topocomm",
    "Open MPI",
    "MPICH",
    "limit",
    "Open MPI % of limit",
    "MPICH % of limit",
];

/// The MPIs the verdict speaks of: (implementation name in the rows, name
/// for people).
const MPIS: [(&str, &str); 2] = [("openmpi", "Open MPI"), ("mpich", "MPICH")];

/// An MPI whose large-message bandwidth is at least this fraction of the
/// copy limit is called good.
const GOOD_BW: f64 = 0.7;
/// An MPI whose small-message latency is at most this multiple of the
/// cache-line limit is called good.
const GOOD_LAT: f64 = 4.0;

/// The verdict on one MPI for one class.
#[derive(Clone, Debug, PartialEq)]
pub struct MpiVerdict {
    /// `Open MPI` or `MPICH`.
    pub name: String,
    /// At least [`GOOD_BW`] of the copy limit and within [`GOOD_LAT`]x the
    /// cache-line limit on every figure.
    pub good: bool,
    /// What was measured, in words, at its worst figure.
    pub measured: String,
    /// The commands to run (empty when good).
    pub commands: Vec<String>,
    /// The file to use (empty when good).
    pub file: String,
}

/// The verdict of one locality class.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassVerdict {
    pub class: String,
    /// The measured pair, `P,Q`.
    pub pair: String,
    /// Rows under [`FIGURE_HEADER`].
    pub figures: Vec<Vec<String>>,
    /// One per MPI measured with the limit.
    pub mpis: Vec<MpiVerdict>,
    /// Set when a figure's 95% CI is wider than its median: the run was
    /// noisy and its verdict needs confirming.
    pub noisy: Option<String>,
}

impl ClassVerdict {
    /// Whether every MPI measured on this class is good.
    pub fn good(&self) -> bool {
        self.mpis.iter().all(|m| m.good)
    }
}

fn row<'a>(
    rows: &'a [ResultRow],
    pair: &str,
    test: &str,
    size: u64,
    imp: &str,
) -> Option<&'a ResultRow> {
    rows.iter().find(|r| {
        r.pair == pair
            && r.test == test
            && r.size == size
            && r.implementation == imp
            && r.cache == "hot"
    })
}

/// The (test, size) figures of a pair: the smallest latency size, and the
/// bw sizes nearest to 64 KiB and the largest measured (one if they are the
/// same).
fn figures_of(rows: &[ResultRow], pair: &str) -> Vec<(String, u64)> {
    let sizes = |test: &str| {
        let mut v: Vec<u64> = rows
            .iter()
            .filter(|r| r.pair == pair && r.test == test && r.cache == "hot")
            .map(|r| r.size)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let mut out = Vec::new();
    if let Some(s) = sizes("latency").first() {
        out.push(("latency".to_string(), *s));
    }
    let bw = sizes("bw");
    let dist = |s: u64| ((s as f64).log2() - 16.0).abs();
    if let Some(mid) = bw
        .iter()
        .copied()
        .min_by(|a, b| dist(*a).total_cmp(&dist(*b)))
    {
        out.push(("bw".to_string(), mid));
    }
    if let Some(&big) = bw.last() {
        if !out.contains(&("bw".to_string(), big)) {
            out.push(("bw".to_string(), big));
        }
    }
    out
}

/// `8 B`, `64K`, `1M`.
fn bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else {
        size_label(n)
    }
}

/// `a / b` where `better_high` says whether larger values are better
/// (bandwidth) or smaller (latency): the efficiency against the limit.
fn efficiency(v: f64, limit: f64, better_high: bool) -> f64 {
    if better_high {
        v / limit
    } else {
        limit / v
    }
}

/// The verdict of every class present in `rows`, in the order the pairs
/// first appear.
pub fn verdicts(rows: &[ResultRow]) -> Vec<ClassVerdict> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for r in rows {
        if !pairs.iter().any(|(p, _)| *p == r.pair) {
            pairs.push((r.pair.clone(), r.class.clone()));
        }
    }
    pairs
        .into_iter()
        .filter_map(|(pair, class)| class_verdict(rows, &pair, &class))
        .collect()
}

fn class_verdict(rows: &[ResultRow], pair: &str, class: &str) -> Option<ClassVerdict> {
    let figs = figures_of(rows, pair);
    if figs.is_empty() {
        return None;
    }
    let mut figures = Vec::new();
    for (test, size) in &figs {
        let unit = if test == "latency" { "us" } else { "GB/s" };
        let mut line = vec![format!("{test} {} ({unit})", bytes(*size))];
        for imp in ["topocomm", "openmpi", "mpich", "limit"] {
            line.push(
                row(rows, pair, test, *size, imp)
                    .map(|r| fmt_ci(r.median, r.ci_low, r.ci_high))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        let lim = row(rows, pair, test, *size, "limit");
        for (imp, _) in MPIS {
            let e = match (row(rows, pair, test, *size, imp), lim) {
                (Some(m), Some(l)) => {
                    format!(
                        "{:.0}%",
                        100.0 * efficiency(m.median, l.median, test == "bw")
                    )
                }
                _ => "-".into(),
            };
            line.push(e);
        }
        figures.push(line);
    }

    // The verdict per MPI: the worst efficiency over the figures, and
    // topocomm's measured advantage at that figure.
    let mut mpis = Vec::new();
    let mut noisy = None;
    for (imp, name) in MPIS {
        let mut worst: Option<(f64, &str, u64, f64, Option<f64>)> = None;
        for (test, size) in &figs {
            let (Some(m), Some(l)) = (
                row(rows, pair, test, *size, imp),
                row(rows, pair, test, *size, "limit"),
            ) else {
                continue;
            };
            for r in [m, l] {
                if noisy.is_none() && r.ci_high - r.ci_low > r.median {
                    noisy = Some(format!(
                        "{} {test} {}: {} (95% CI wider than the median)",
                        r.implementation,
                        bytes(*size),
                        fmt_ci(r.median, r.ci_low, r.ci_high)
                    ));
                }
            }
            let hi = test == "bw";
            let e = efficiency(m.median, l.median, hi);
            let bar = if hi { GOOD_BW } else { 1.0 / GOOD_LAT };
            let topo = row(rows, pair, test, *size, "topocomm")
                .map(|t| efficiency(t.median, m.median, hi));
            let score = e / bar;
            if worst.is_none_or(|w| score < w.0) {
                worst = Some((score, test.as_str(), *size, e, topo));
            }
        }
        let Some((score, test, size, e, topo)) = worst else {
            continue;
        };
        let at = format!("{test} {}", bytes(size));
        let of = if test == "bw" {
            format!("{:.0}% of the copy limit", e * 100.0)
        } else {
            format!("{}x the cache-line limit", num(1.0 / e))
        };
        if score >= 1.0 {
            mpis.push(MpiVerdict {
                name: name.into(),
                good: true,
                measured: format!("at worst {of} ({at})"),
                commands: Vec::new(),
                file: String::new(),
            });
            continue;
        }
        let gain = match topo {
            Some(g) if g > 1.0 => format!("; topocomm is {}x faster there", num(g)),
            _ => String::new(),
        };
        let (file, use_it) = if imp == "openmpi" {
            ("tuned.conf", "mpirun --tune tuned.conf -n N ./app")
        } else {
            (
                "tuned.env",
                "set -a; . ./tuned.env; set +a; mpirun -n N ./app",
            )
        };
        mpis.push(MpiVerdict {
            name: name.into(),
            good: false,
            measured: format!("{of} at {at}{gain}"),
            commands: vec![
                format!("topocomm tune --mpi {imp} --out {file}"),
                use_it.to_string(),
                "topocomm accel -- mpirun -n N ./app".to_string(),
            ],
            file: file.to_string(),
        });
    }
    if mpis.is_empty() {
        return None;
    }
    Some(ClassVerdict {
        class: class.to_string(),
        pair: pair.to_string(),
        figures,
        mpis,
        noisy,
    })
}

/// Why a median lies above (bw) or below (latency) the plotted limit, one
/// line per (pair, test, size, implementation) where it does; empty when
/// none does.
pub fn beyond_limit(rows: &[ResultRow]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| r.implementation != "limit") {
        let Some(l) = row(rows, &r.pair, &r.test, r.size, "limit") else {
            continue;
        };
        if r.cache != "hot" {
            continue;
        }
        let (beyond, why) = match r.test.as_str() {
            "bw" => (
                r.median > l.median,
                "the limit copies a buffer the other core has just written (its lines come modified from that core's cache), while a benchmark that re-sends the same hot buffer reads lines that are already clean and shared, which is cheaper",
            ),
            "latency" => (
                r.median < l.median,
                "the limit is one cache-line round trip halved; a smaller median is within the noise of the two (see the CIs)",
            ),
            _ => (false, ""),
        };
        if beyond {
            // topocomm's sender copies part of a large single-copy message
            // into the receiver's buffer while the receiver reads the rest
            // (transport `help_min`, 1 MiB and up by the built-in rules of a
            // 2 MiB L2): two cores copy, the limit is one core's.
            let helped = if r.implementation == "topocomm" && r.test == "bw" && r.size >= 64 << 10 {
                "; and if the size is at least its rules' help_min (built-in: half the private cache; docs/transport.md, \"Helped single copy\"), topocomm's sender copies part of each message too: two cores copy, the limit is one core's"
            } else {
                ""
            };
            out.push(format!(
                "{} {} {} on PUs {} ({}): {} vs limit {}: {why}{helped}.",
                r.implementation,
                r.test,
                size_label(r.size),
                r.pair,
                r.class,
                num(r.median),
                num(l.median),
            ));
        }
    }
    out
}

/// The hot-cache bw curves of pair `P,Q` per implementation with their
/// 95% CI: (name, (size, median) points, (size, low, high) band).
pub type BandCurve = (String, Vec<(f64, f64)>, Vec<(f64, f64, f64)>);

/// [`BandCurve`]s of a pair, implementations in first-seen order.
pub fn bw_curves(rows: &[ResultRow], pair: &str) -> Vec<BandCurve> {
    crate::results::impl_order(rows)
        .into_iter()
        .filter_map(|i| {
            let sel: Vec<&ResultRow> = rows
                .iter()
                .filter(|r| {
                    r.pair == pair && r.test == "bw" && r.implementation == i && r.cache == "hot"
                })
                .collect();
            if sel.is_empty() {
                return None;
            }
            let points = sel.iter().map(|r| (r.size as f64, r.median)).collect();
            let band = sel
                .iter()
                .map(|r| (r.size as f64, r.ci_low, r.ci_high))
                .collect();
            Some((i, points, band))
        })
        .collect()
}

/// The verdict section of the report: per class its figure table (and a
/// note when the run was noisy), then one verdict table over classes and
/// MPIs with what to change and the file to use.
pub fn html(v: &[ClassVerdict]) -> String {
    if v.is_empty() {
        return "<p>No verdict: no MPI and limit were measured on the same pair.</p>".into();
    }
    let mut h = String::from(
        "<p>Is this machine's MPI configuration good? Per locality class, the MPIs as installed \
         (default settings) against topocomm and the physical limit of the same pinned pair; \
         medians [95% CI] of this run. An MPI is called good when it streams at 70% of the \
         copy limit or more and its latency is within 4x the cache-line limit \
         (% of limit: MPI bandwidth / limit bandwidth, limit latency / MPI latency).</p>",
    );
    let mut t = String::from(
        "<div class=\"tbl\"><table class=\"verdict\"><thead><tr><th>class</th><th>MPI</th><th>verdict</th>\
         <th>measured</th><th>what to change</th><th>files to use</th></tr></thead><tbody>",
    );
    for c in v {
        h.push_str(&format!(
            "<h3>Class {} (PUs {})</h3>",
            esc(&c.class),
            esc(&c.pair)
        ));
        h.push_str(&html_table(&FIGURE_HEADER, &c.figures));
        if let Some(n) = &c.noisy {
            h.push_str(&format!(
                "<p class=\"note\">Noisy run: {}; confirm with <code>topocomm bench p2p --class {}</code> on a quiet machine.</p>",
                esc(n),
                esc(&c.class)
            ));
        }
        for m in &c.mpis {
            let (cls, word) = if m.good {
                ("good", "good")
            } else {
                ("improve", "can improve")
            };
            let change = if m.commands.is_empty() {
                "nothing".to_string()
            } else {
                format!(
                    "tune it: <code>{}</code>, then <code>{}</code>; or run the program unchanged on topocomm's transport: <code>{}</code>",
                    esc(&m.commands[0]),
                    esc(&m.commands[1]),
                    esc(&m.commands[2])
                )
            };
            let file = if m.file.is_empty() {
                "-".to_string()
            } else {
                format!("<code>{}</code>", esc(&m.file))
            };
            t.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"{cls}\">{word}</td><td>{}</td><td>{change}</td><td>{file}</td></tr>",
                esc(&c.class),
                esc(&m.name),
                esc(&m.measured)
            ));
        }
    }
    t.push_str("</tbody></table></div>");
    h.push_str("<h3>Verdict</h3>");
    h.push_str(&t);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(test: &str, size: u64, imp: &str, median: f64) -> ResultRow {
        ResultRow {
            test: test.into(),
            size,
            implementation: imp.into(),
            cache: "hot".into(),
            pair: "0,1".into(),
            class: "l3".into(),
            median,
            ci_low: median * 0.9,
            ci_high: median * 1.1,
            min: median * 0.8,
            p99: median * 1.2,
            n: 7,
            unit: if test == "bw" { "GB/s" } else { "us" }.into(),
            samples: vec![median],
        }
    }

    fn rows(openmpi_bw: f64) -> Vec<ResultRow> {
        let mut v = Vec::new();
        for (imp, lat, bw) in [
            ("topocomm", 0.07, 36.0),
            ("openmpi", 0.13, openmpi_bw),
            ("mpich", 0.12, 30.0),
            ("limit", 0.04, 40.0),
        ] {
            v.push(r("latency", 8, imp, lat));
            v.push(r("latency", 512, imp, lat * 2.0));
            for s in [4096, 65536, 1 << 20] {
                v.push(r("bw", s, imp, bw));
            }
        }
        v
    }

    #[test]
    fn slow_mpi_gets_a_change_and_fast_one_is_good() {
        let v = verdicts(&rows(12.0));
        assert_eq!(v.len(), 1);
        let c = &v[0];
        assert_eq!((c.class.as_str(), c.pair.as_str()), ("l3", "0,1"));
        // latency 8 B, bw 64K, bw 1M.
        let names: Vec<&str> = c.figures.iter().map(|f| f[0].as_str()).collect();
        assert_eq!(names, ["latency 8 B (us)", "bw 64K (GB/s)", "bw 1M (GB/s)"]);
        assert_eq!(c.figures[1][5], "30%");
        assert!(!c.good());
        let (o, m) = (&c.mpis[0], &c.mpis[1]);
        assert_eq!((o.name.as_str(), o.good), ("Open MPI", false));
        assert_eq!(
            o.measured,
            "30% of the copy limit at bw 64K; topocomm is 3.00x faster there"
        );
        assert_eq!(
            o.commands[0],
            "topocomm tune --mpi openmpi --out tuned.conf"
        );
        assert_eq!(o.file, "tuned.conf");
        assert!(m.good && m.commands.is_empty(), "{m:?}");
        assert_eq!(c.noisy, None);
        let h = html(&v);
        assert!(h.contains("<td class=\"improve\">can improve</td>"), "{h}");
        assert!(h.contains("tune it: <code>topocomm tune --mpi openmpi --out tuned.conf</code>"));
        assert!(
            h.contains("<td class=\"good\">good</td><td>at worst"),
            "{h}"
        );
        assert!(html(&[]).starts_with("<p>No verdict"));

        let v = verdicts(&rows(35.0));
        assert!(v[0].good(), "{:?}", v[0]);
        let mut wide = rows(35.0);
        wide[5].ci_high = 10.0;
        assert!(verdicts(&wide)[0].noisy.is_some());
    }

    #[test]
    fn beyond_the_limit_is_explained() {
        let mut v = rows(12.0);
        assert!(beyond_limit(&v).is_empty());
        v.push(r("bw", 1 << 22, "openmpi", 50.0));
        v.push(r("bw", 1 << 22, "limit", 40.0));
        let e = beyond_limit(&v);
        assert_eq!(e.len(), 1);
        assert!(
            e[0].starts_with("openmpi bw 4M on PUs 0,1 (l3): 50.0 vs limit 40.0"),
            "{}",
            e[0]
        );
        // topocomm's own: the sender's help named, as a condition, from
        // 64 KiB (the least help_min).
        v.push(r("bw", 1 << 22, "topocomm", 80.0));
        let e = beyond_limit(&v);
        assert_eq!(e.len(), 2);
        assert!(
            e[1].contains("topocomm bw 4M") && e[1].contains("two cores copy"),
            "{e:?}"
        );
        assert!(!e[0].contains("two cores copy"), "{e:?}");
        let c = bw_curves(&v, "0,1");
        assert_eq!(c[1].0, "openmpi");
        assert_eq!(c[1].2[0], (4096.0, 12.0 * 0.9, 12.0 * 1.1));
    }
}
