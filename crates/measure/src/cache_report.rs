//! `topocomm bench cache` without its command line: the options resolved
//! against the machine (holders, states, operations, sizes), the run over
//! [`crate::cache::run`], the result file ([`CacheReport`],
//! docs/formats/bench-cache-json.md), its text tables and SVG curves.

use crate::cache::{self, CacheConfig, CachePoint, Holder, Omission, Op, State};
use crate::charact::{num, parse_size, parse_sizes, size_label, TextTable};
use crate::meta::RunMeta;
use crate::timer::TimerInfo;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use topocomm_report::{bytes_label, svg_loglog, Series};
use topocomm_topo::{LocalityClass, Machine};

/// The schema of [`CacheReport`].
pub const SCHEMA: &str = "topocomm.bench-cache/1";

/// Largest buffer `--sizes` may ask for (4 GiB, refused before allocating).
const MAX_BUFFER: u64 = 4 << 30;

/// The options of a run, as given (`None`: the default, or the `quick` one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CacheOptions {
    /// PU whose loads and stores are timed (default: the first PU).
    pub pu: Option<u32>,
    /// Holder locality classes, comma-separated (`none`: state I).
    pub classes: Option<String>,
    /// Cache states, comma-separated.
    pub states: Option<String>,
    /// Operations, comma-separated (`load,store,chase`).
    pub ops: String,
    /// Buffer sizes ([`parse_sizes`]).
    pub sizes: Option<String>,
    /// Largest buffer size.
    pub max_size: Option<String>,
    /// Samples per point.
    pub samples: Option<usize>,
    /// Fast, coarse run.
    pub quick: bool,
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

/// A non-empty comma-separated list; errors name the argument `arg`.
fn list<T: std::str::FromStr<Err = Error>>(text: &str, arg: &'static str) -> Result<Vec<T>> {
    let v: Vec<T> = text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse())
        .collect::<Result<_>>()
        .map_err(|e| arg_error(arg, e))?;
    if v.is_empty() {
        return Err(Error::EmptyArgList { arg });
    }
    Ok(v)
}

fn arg_error(arg: &'static str, e: Error) -> Error {
    Error::Arg {
        arg,
        cause: Box::new(e),
    }
}

/// Resolves the options against `m` and runs the benchmark on the live
/// machine (checked by the caller); `timer` is the timer check to use and
/// record, `progress(done, total)` is called after each curve point. Every
/// bad option is a one-line error naming it.
pub fn measure(
    m: &Machine,
    a: &CacheOptions,
    timer: TimerInfo,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<CacheReport> {
    let p = a.pu.unwrap_or_else(|| m.pus[0].os_index);
    m.require_pu(p).map_err(|e| arg_error("--pu", e.into()))?;
    let wanted: Option<Vec<String>> = a.classes.as_deref().map(|c| {
        c.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    });
    if let Some(w) = &wanted {
        for c in w.iter().filter(|c| *c != "none") {
            c.parse::<LocalityClass>()
                .map_err(|reason| Error::ArgReason {
                    arg: "--classes",
                    reason,
                })?;
        }
    }
    let holders =
        cache::plan_holders(m, p, wanted.as_deref()).map_err(|e| arg_error("--classes", e))?;
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
        return Err(Error::NothingToMeasure);
    }
    let ops = list::<Op>(&a.ops, "--ops")?;
    let llc = m.llc_size().unwrap_or(32 << 20);
    let mut sizes = match &a.sizes {
        Some(s) => parse_sizes(s).map_err(|e| arg_error("--sizes", e))?,
        None => cache::default_sizes(llc, a.quick),
    };
    if let Some(ms) = &a.max_size {
        let ms = parse_size(ms).map_err(|e| arg_error("--max-size", e))?;
        sizes.retain(|&s| s <= ms);
    }
    if sizes.is_empty() || sizes.iter().any(|&s| s < 64) {
        return Err(Error::CacheSizes);
    }
    if let Some(&s) = sizes.iter().find(|&&s| s > MAX_BUFFER) {
        return Err(Error::ArgTooLarge {
            arg: "--sizes",
            value: s,
            max: "4G",
        });
    }
    let samples = a.samples.unwrap_or(if a.quick { 3 } else { 11 });
    if samples > 10_000 {
        return Err(Error::ArgTooLarge {
            arg: "--samples",
            value: samples as u64,
            max: "10000",
        });
    }
    if samples == 0 {
        return Err(Error::AtLeastOne { what: "--samples" });
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
    let (points, omitted) = cache::run(&cfg, progress).map_err(|e| Error::Bench {
        bench: "bench cache",
        cause: Box::new(e),
    })?;
    Ok(CacheReport {
        schema: SCHEMA.into(),
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

impl CacheReport {
    /// The (class, state) curves in measurement order.
    fn curve_names(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for p in &self.points {
            let k = curve_key(p);
            if !v.contains(&k) {
                v.push(k);
            }
        }
        v
    }

    /// The operations measured, in [`Op::ALL`] order.
    fn ops(&self) -> Vec<Op> {
        Op::ALL
            .into_iter()
            .filter(|o| self.points.iter().any(|p| p.op == *o))
            .collect()
    }

    /// `holders self=PU 0, l3=PU 1`'s list part.
    pub fn holders_text(&self) -> String {
        self.holders
            .iter()
            .map(|h| format!("{}=PU {}", h.class, h.q))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One table per operation: rows = sizes, columns = (class, state);
    /// medians, `~` before an unresolved one, `-` where not measured.
    pub fn tables(&self) -> Vec<TextTable> {
        let curves = self.curve_names();
        let mut out = Vec::new();
        for op in self.ops() {
            let title = format!(
                "{} ({}, median of {} samples; columns: holder class + state)",
                match op {
                    Op::Load => "Load throughput",
                    Op::Store => "Store throughput",
                    Op::Chase => "Pointer-chase latency",
                },
                op.unit(),
                self.samples
            );
            let mut header = vec!["size".to_string()];
            header.extend(curves.iter().cloned());
            let rows: Vec<Vec<String>> = self
                .sizes
                .iter()
                .map(|&s| {
                    let mut row = vec![size_label(s)];
                    for c in &curves {
                        row.push(
                            self.points
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
            out.push((title, header, rows));
        }
        out
    }

    /// The lines under the tables: what `~` means (when used), what was
    /// not measured and why.
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.points.iter().any(|p| !p.resolved) {
            out.push("~ = timed span under 10x the timer resolution: coarse".to_string());
        }
        for o in &self.omitted {
            out.push(format!(
                "not measured: {} {}: {}",
                o.class, o.state, o.reason
            ));
        }
        out
    }

    /// One log-log SVG per operation.
    pub fn curves_svg(&self) -> Vec<(Op, String)> {
        let curves = self.curve_names();
        self.ops()
            .into_iter()
            .map(|op| {
                let series: Vec<Series> = curves
                    .iter()
                    .map(|c| Series {
                        name: c.clone(),
                        points: self
                            .points
                            .iter()
                            .filter(|p| p.op == op && &curve_key(p) == c)
                            .map(|p| (p.size as f64, p.summary.median))
                            .collect(),
                        dashed: false,
                        band: self
                            .points
                            .iter()
                            .filter(|p| p.op == op && &curve_key(p) == c)
                            .map(|p| (p.size as f64, p.summary.ci_low, p.summary.ci_high))
                            .collect(),
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
                        &format!("{title} {} (holder class, state)", self.measurer),
                        "buffer size (bytes)",
                        unit,
                        &series,
                        &bytes_label,
                    ),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_name_themselves() {
        let m = topocomm_topo::load(&"synthetic:pack:2 core:2 pu:1".parse().unwrap()).unwrap();
        let timer = TimerInfo {
            resolution_ns: 1.0,
            overhead_ns: 1.0,
        };
        let err = |f: fn(&mut CacheOptions)| {
            let mut o = CacheOptions {
                ops: "load".into(),
                quick: true,
                ..CacheOptions::default()
            };
            f(&mut o);
            measure(&m, &o, timer.clone(), &mut |_, _| {})
                .unwrap_err()
                .to_string()
        };
        assert!(err(|o| o.pu = Some(99)).starts_with("--pu: "));
        assert!(err(|o| o.classes = Some("bogus".into())).starts_with("--classes: "));
        assert!(err(|o| o.ops = "fly".into()).starts_with("--ops: unknown operation 'fly'"));
        assert_eq!(
            err(|o| o.states = Some(",".into())),
            "--states: the list is empty"
        );
        assert_eq!(
            err(|o| o.sizes = Some("32".into())),
            "--sizes: need at least one size, each at least 64 bytes"
        );
        assert!(err(|o| o.max_size = Some("1X".into())).starts_with("--max-size: '1X'"));
        assert_eq!(err(|o| o.samples = Some(0)), "--samples must be at least 1");
        assert_eq!(
            err(|o| o.sizes = Some("8G".into())),
            "--sizes: 8589934592 is too large (at most 4G)"
        );
        assert_eq!(
            err(|o| o.samples = Some(1 << 31)),
            "--samples: 2147483648 is too large (at most 10000)"
        );
        assert_eq!(
            err(|o| {
                o.classes = Some("none".into());
                o.states = Some("M".into());
            }),
            "--states/--classes: nothing left to measure (state I is measured under class 'none')"
        );
    }
}
