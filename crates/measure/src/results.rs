//! From sample lines to results: one summarized row per (pair, test, size,
//! impl, cache), ratios between implementations, and the per-test table.

use crate::p2p::{size_label, Test};
use crate::record::SampleLine;
use crate::stats::Summary;
use serde::{Deserialize, Serialize};

/// One result of the `--json` file (docs/formats/bench-json.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    pub test: String,
    pub size: u64,
    #[serde(rename = "impl")]
    pub implementation: String,
    pub cache: String,
    /// The PU pair as `P,Q` (OS indexes) and its locality class.
    pub pair: String,
    pub class: String,
    pub median: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub min: f64,
    pub p99: f64,
    pub n: usize,
    pub unit: String,
    pub samples: Vec<f64>,
}

impl ResultRow {
    /// Summarizes one sample line; `None` if it has no usable sample.
    pub fn from_line(l: &SampleLine, pair: (u32, u32), class: &str) -> Option<ResultRow> {
        let s = Summary::of(&l.samples)?;
        Some(ResultRow {
            test: l.test.clone(),
            size: l.size,
            implementation: l.implementation.clone(),
            cache: l.cache.clone(),
            pair: format!("{},{}", pair.0, pair.1),
            class: class.to_string(),
            median: s.median,
            ci_low: s.ci_low,
            ci_high: s.ci_high,
            min: s.min,
            p99: s.p99,
            n: s.n,
            unit: l.unit.clone(),
            samples: l.samples.clone(),
        })
    }

    fn key(&self) -> (&str, &str, &str, u64) {
        (&self.pair, &self.cache, &self.test, self.size)
    }
}

/// `num / den` of two implementations' medians at one (pair, test, size,
/// cache), with a conservative interval from their CIs:
/// `[num.ci_low / den.ci_high, num.ci_high / den.ci_low]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub test: String,
    pub size: u64,
    pub cache: String,
    pub pair: String,
    pub class: String,
    pub num: String,
    pub den: String,
    pub median: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

/// The implementations in table order: topocomm, the peers, the limit.
pub fn impl_order(rows: &[ResultRow]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in rows {
        if !names.contains(&r.implementation) {
            names.push(r.implementation.clone());
        }
    }
    let rank = |n: &str| match n {
        "topocomm" => 0,
        "openmpi" => 1,
        "mpich" => 2,
        "limit" => 9,
        _ => 5,
    };
    names.sort_by_key(|n| (rank(n), n.clone()));
    names
}

/// Which ratios to show: topocomm against each peer and the limit; without
/// topocomm, each peer against the limit.
pub fn ratio_pairs(impls: &[String]) -> Vec<(String, String)> {
    let has = |n: &str| impls.iter().any(|i| i == n);
    let peers: Vec<&String> = impls
        .iter()
        .filter(|i| *i != "topocomm" && *i != "limit")
        .collect();
    let mut out = Vec::new();
    if has("topocomm") {
        for p in &peers {
            out.push(("topocomm".to_string(), (*p).clone()));
        }
        out.push(("topocomm".into(), "limit".into()));
    } else {
        for p in &peers {
            out.push(((*p).clone(), "limit".into()));
        }
    }
    out
}

/// Every ratio of [`ratio_pairs`] for which both rows exist; the pairs are
/// chosen per (PU pair, cache, test) from the implementations present there.
pub fn ratios(rows: &[ResultRow]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for num in rows {
        let group: Vec<ResultRow> = rows
            .iter()
            .filter(|r| r.pair == num.pair && r.cache == num.cache && r.test == num.test)
            .cloned()
            .collect();
        let pairs = ratio_pairs(&impl_order(&group));
        for (n, d) in &pairs {
            if &num.implementation != n {
                continue;
            }
            let Some(den) = rows
                .iter()
                .find(|r| &r.implementation == d && r.key() == num.key())
            else {
                continue;
            };
            if den.median <= 0.0 || den.ci_low <= 0.0 {
                continue;
            }
            out.push(Ratio {
                test: num.test.clone(),
                size: num.size,
                cache: num.cache.clone(),
                pair: num.pair.clone(),
                class: num.class.clone(),
                num: n.clone(),
                den: d.clone(),
                median: num.median / den.median,
                ci_low: num.ci_low / den.ci_high,
                ci_high: num.ci_high / den.ci_low,
            });
        }
    }
    out
}

/// A value with its CI, short: `0.123 [0.120,0.130]`.
pub fn fmt_ci(median: f64, lo: f64, hi: f64) -> String {
    format!("{} [{},{}]", num(median), num(lo), num(hi))
}

/// Three significant digits, no exponent for the usual ranges.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else if a >= 0.001 {
        format!("{x:.3}")
    } else {
        format!("{x:.2e}")
    }
}

/// The table of one (pair, cache, test): one line per size, a column per
/// implementation and per ratio, each `median [ci_low,ci_high]`.
pub fn table(
    rows: &[ResultRow],
    ratios: &[Ratio],
    pair: &str,
    cache: &str,
    test: Test,
) -> (Vec<String>, Vec<Vec<String>>) {
    let mine: Vec<&ResultRow> = rows
        .iter()
        .filter(|r| r.pair == pair && r.cache == cache && r.test == test.name())
        .collect();
    let owned: Vec<ResultRow> = mine.iter().map(|r| (*r).clone()).collect();
    let impls = impl_order(&owned);
    let rpairs = ratio_pairs(&impls);
    let mut header = vec![format!("size (B)")];
    header.extend(impls.iter().map(|i| format!("{i} ({})", test.unit())));
    header.extend(rpairs.iter().map(|(n, d)| format!("{n}/{d}")));
    let mut sizes: Vec<u64> = mine.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut lines = Vec::new();
    for s in sizes {
        let mut line = vec![size_label(s)];
        for i in &impls {
            line.push(
                mine.iter()
                    .find(|r| r.size == s && &r.implementation == i)
                    .map(|r| fmt_ci(r.median, r.ci_low, r.ci_high))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        for (n, d) in &rpairs {
            line.push(
                ratios
                    .iter()
                    .find(|r| {
                        r.pair == pair
                            && r.cache == cache
                            && r.test == test.name()
                            && r.size == s
                            && &r.num == n
                            && &r.den == d
                    })
                    .map(|r| fmt_ci(r.median, r.ci_low, r.ci_high))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        lines.push(line);
    }
    (header, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(imp: &str, test: &str, size: u64, samples: Vec<f64>) -> SampleLine {
        SampleLine {
            implementation: imp.into(),
            test: test.into(),
            size,
            cache: "hot".into(),
            unit: if test == "latency" { "us" } else { "GB/s" }.into(),
            samples,
            probe_us: None,
        }
    }

    fn rows() -> Vec<ResultRow> {
        let seven = |x: f64| vec![x * 0.9, x * 0.95, x, x, x, x * 1.05, x * 1.1];
        [
            line("openmpi", "latency", 8, seven(0.2)),
            line("mpich", "latency", 8, seven(0.25)),
            line("topocomm", "latency", 8, seven(0.1)),
            line("limit", "latency", 8, seven(0.05)),
            line("openmpi", "bw", 65536, seven(10.0)),
            line("limit", "bw", 65536, seven(40.0)),
        ]
        .iter()
        .map(|l| ResultRow::from_line(l, (0, 1), "l3").unwrap())
        .collect()
    }

    #[test]
    fn summarizes_and_orders() {
        let r = rows();
        assert_eq!(r[0].median, 0.2);
        assert_eq!((r[0].ci_low, r[0].ci_high), (0.2 * 0.9, 0.2 * 1.1));
        assert_eq!(r[0].pair, "0,1");
        assert_eq!(
            impl_order(&r),
            vec!["topocomm", "openmpi", "mpich", "limit"]
        );
    }

    #[test]
    fn ratios_with_conservative_intervals() {
        let r = rows();
        let q = ratios(&r);
        let find = |t: &str, n: &str, d: &str| {
            q.iter()
                .find(|x| x.test == t && x.num == n && x.den == d)
                .cloned()
        };
        let a = find("latency", "topocomm", "openmpi").unwrap();
        assert!((a.median - 0.5).abs() < 1e-12);
        assert!((a.ci_low - 0.09 / 0.22).abs() < 1e-12);
        assert!((a.ci_high - 0.11 / 0.18).abs() < 1e-12);
        assert!((find("latency", "topocomm", "limit").unwrap().median - 2.0).abs() < 1e-12);
        assert!(find("latency", "topocomm", "mpich").is_some());
        // No topocomm bw row: no topocomm bw ratio is invented.
        assert!(find("bw", "topocomm", "openmpi").is_none());
        // Without topocomm, peers are compared with the limit.
        let peers_only: Vec<ResultRow> = r
            .into_iter()
            .filter(|x| x.implementation != "topocomm")
            .collect();
        let q2 = ratios(&peers_only);
        let b = q2
            .iter()
            .find(|x| x.test == "bw" && x.num == "openmpi" && x.den == "limit")
            .unwrap();
        assert!((b.median - 0.25).abs() < 1e-12);
    }

    #[test]
    fn table_has_a_column_per_impl_and_ratio() {
        let r = rows();
        let q = ratios(&r);
        let (h, lines) = table(&r, &q, "0,1", "hot", Test::Latency);
        assert_eq!(
            h,
            vec![
                "size (B)",
                "topocomm (us)",
                "openmpi (us)",
                "mpich (us)",
                "limit (us)",
                "topocomm/openmpi",
                "topocomm/mpich",
                "topocomm/limit"
            ]
        );
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0][0], "8");
        assert_eq!(lines[0][1], "0.100 [0.090,0.110]");
        assert_eq!(lines[0][5], "0.500 [0.409,0.611]");
        let (h, lines) = table(&r, &q, "0,1", "hot", Test::Bw);
        assert_eq!(h.len(), 4, "{h:?}");
        assert_eq!(lines[0][0], "64K");
        assert_eq!(lines[0][3], "0.250 [0.205,0.306]");
    }
}
