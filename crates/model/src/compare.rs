//! `topocomm model` without its command line: the model's predicted one-way
//! time of the two-copy and single-copy protocols per locality class, from
//! bench cache throughputs, optionally against the transport measured in
//! each protocol, with the fixed costs fitted (in and out of sample); the
//! [model JSON](../../../docs/formats/model-json.md) document
//! ([`ModelReport`]), its terminal tables, plots and report HTML.
//!
//! The caller reads the bench cache results and builds the [`Runner`] (it
//! starts the `topocomm` executable); see [`plan`] and [`compute`].

use crate::choice::{parse_sizes, select, ClassPair, DEFAULT_SIZES};
use crate::fit::{fit, Fit, Observation};
use crate::text::{num, size_label, us};
use crate::tune::runner::{Runner, TimePoint};
use crate::tune::space::single_copy;
use crate::{class_rates, predict, ClassRates, ModelError, Overheads};
use serde::Serialize;
use topocomm_measure::cache::CachePoint;
use topocomm_measure::meta::RunMeta;
use topocomm_measure::p2p::Test;
use topocomm_report::{bytes_label, svg_loglog, Series};
use topocomm_topo::text::text_table;
use topocomm_topo::Machine;
use topocomm_transport::{Params, Rules};

/// The options of a model run, as given (docs/commands/model.md).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// One PU pair `P,Q` instead of one representative pair per class.
    pub pair: Option<String>,
    /// One locality class (its representative pair).
    pub class: Option<String>,
    /// Message sizes (default [`DEFAULT_SIZES`]).
    pub sizes: Option<String>,
    /// Also measure the transport forced into each protocol.
    pub measure: bool,
    /// Samples per measured point.
    pub samples: usize,
    /// Minimum duration of one sample's batch, ms.
    pub min_time_ms: f64,
}

/// What a model run covers: the sizes and the (class, pair) targets.
#[derive(Clone, Debug)]
pub struct Plan {
    pub sizes: Vec<u64>,
    /// Class name and pair (OS indexes), at least one.
    pub targets: Vec<ClassPair>,
    pub measure: bool,
    pub samples: usize,
    pub min_time_ms: f64,
}

impl Plan {
    /// The PU a quick bench cache run should measure from: the first
    /// target's first PU.
    pub fn measurer(&self) -> u32 {
        self.targets[0].1 .0
    }
}

/// Resolves `o` against `m`: sizes, then the pair, the class or every class.
pub fn plan(m: &Machine, o: &Options) -> Result<Plan, ModelError> {
    let sizes = parse_sizes(o.sizes.as_deref().unwrap_or(DEFAULT_SIZES))?;
    let targets: Vec<ClassPair> = match (&o.pair, &o.class) {
        (Some(p), _) => {
            let pair =
                topocomm_topo::resolve_pair(m, p).map_err(|cause| ModelError::Pair { cause })?;
            if pair.0 == pair.1 {
                return Err(ModelError::SamePu { text: p.clone() });
            }
            let c = topocomm_topo::pair_class(m, pair.0, pair.1)
                .map_err(|cause| ModelError::Pair { cause })?;
            vec![(c.to_string(), pair)]
        }
        (None, Some(c)) => select(m, Some(std::slice::from_ref(c)), "--class")?,
        (None, None) => select(m, None, "--classes")?,
    };
    if targets.is_empty() {
        return Err(ModelError::SinglePu {
            what: "no pair to model",
        });
    }
    Ok(Plan {
        sizes,
        targets,
        measure: o.measure,
        samples: o.samples.max(1),
        min_time_ms: o.min_time_ms.max(0.0),
    })
}

/// The bench cache results the copy rates come from.
#[derive(Clone, Copy, Debug)]
pub struct CacheInput<'a> {
    pub points: &'a [CachePoint],
    /// The PU that measured them.
    pub measurer: u32,
    /// Where they came from (a file name, or a quick run), for messages.
    pub source: &'a str,
}

/// The two protocols the model compares, under a class's plan. Single
/// copy without the sender's help (docs/transport.md, "Helped single
/// copy"): the model is of the receiver's copy alone, so the measurement
/// it is compared with must be too.
pub fn protocol_params(plan: &Params) -> [(&'static str, Params); 2] {
    [
        (
            "two-copy",
            Params {
                cma: false,
                ..plan.clone()
            },
        ),
        (
            "single-copy",
            Params {
                help_min: topocomm_transport::rules::HELP_NEVER,
                ..single_copy(plan, plan.cma_chunk)
            },
        ),
    ]
}

/// One protocol at one size: predictions and, if measured, the time.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub protocol: String,
    pub size: u64,
    /// Pure model (copies only), seconds.
    pub pure: f64,
    /// With the fixed costs fitted on every measured size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitted: Option<f64>,
    /// With the fixed costs fitted on the other sizes only (out of sample).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_out: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<TimePoint>,
}

impl Row {
    /// (pred - measured) / measured and its range over the measured CI.
    pub fn error(&self, pred: f64) -> Option<(f64, f64, f64)> {
        let m = self.measured.as_ref()?;
        Some((
            pred / m.median - 1.0,
            pred / m.ci_high - 1.0,
            pred / m.ci_low - 1.0,
        ))
    }
}

/// The model of one class: its pair, plan, rates, fit and rows.
#[derive(Clone, Debug, Serialize)]
pub struct ClassModel {
    pub class: String,
    pub pair: (u32, u32),
    pub plan: Params,
    pub rates: ClassRates,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fit>,
    pub rows: Vec<Row>,
    /// Median |relative error| per protocol: (protocol, pure, fitted, held-out).
    pub summary: Vec<ErrorSummary>,
}

/// Median |relative error| of one protocol's predictions.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorSummary {
    pub protocol: String,
    pub pure: f64,
    pub fitted: f64,
    pub held_out: f64,
}

/// `topocomm.model/1` (docs/formats/model-json.md).
#[derive(Clone, Debug, Serialize)]
pub struct ModelReport {
    pub schema: String,
    pub meta: RunMeta,
    pub cache_source: String,
    pub cache_measurer: u32,
    pub test: String,
    pub sizes: Vec<u64>,
    pub cma_available: bool,
    pub classes: Vec<ClassModel>,
}

fn median_abs(v: Vec<f64>) -> f64 {
    let mut v: Vec<f64> = v
        .into_iter()
        .filter(|x| x.is_finite())
        .map(f64::abs)
        .collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    topocomm_measure::stats::quantile_sorted(&v, 0.5)
}

/// Computes everything for `plan` (measuring, if asked, with `runner`,
/// whose test, sizes, samples and batch time are set from the plan);
/// `progress` gets a line per measured protocol and class.
pub fn compute(
    m: &Machine,
    plan: &Plan,
    cache: CacheInput,
    runner: &mut Runner,
    progress: &mut dyn FnMut(&str),
) -> Result<ModelReport, ModelError> {
    let rules = Rules::builtin(m);
    let cma_ok = !plan.measure || topocomm_transport::cma::probe_fork().is_ok();
    runner.test = Test::Latency;
    runner.sizes = plan.sizes.clone();
    runner.samples = plan.samples;
    runner.min_time_ms = plan.min_time_ms;
    let mut classes = Vec::new();
    for (class, pair) in &plan.targets {
        let rates = class_rates(cache.points, class).map_err(|reason| ModelError::Rates {
            origin: cache.source.to_string(),
            class: class.clone(),
            reason,
        })?;
        let params = rules.params_for(Some(class)).clone();
        let protos = protocol_params(&params);
        let mut measured: Vec<Vec<TimePoint>> = Vec::new();
        if plan.measure {
            for (name, p) in &protos {
                progress(&format!(
                    "measuring {class} pair {},{} {name}",
                    pair.0, pair.1
                ));
                measured.push(runner.measure(*pair, class, p).map_err(|reason| {
                    ModelError::Measure {
                        protocol: name.to_string(),
                        class: class.clone(),
                        reason,
                    }
                })?);
            }
        }
        let (fit, rows) = rows(&rates, &protos, &measured, &plan.sizes, cma_ok);
        let summary = protos
            .iter()
            .map(|(name, _)| {
                let rs: Vec<&Row> = rows.iter().filter(|r| r.protocol == *name).collect();
                let err = |f: &dyn Fn(&Row) -> Option<f64>| {
                    median_abs(
                        rs.iter()
                            .filter_map(|r| f(r).and_then(|p| r.error(p)).map(|e| e.0))
                            .collect(),
                    )
                };
                ErrorSummary {
                    protocol: name.to_string(),
                    pure: err(&|r| Some(r.pure)),
                    fitted: err(&|r| r.fitted),
                    held_out: err(&|r| r.held_out),
                }
            })
            .collect();
        classes.push(ClassModel {
            class: class.clone(),
            pair: *pair,
            plan: params,
            rates,
            fit,
            rows,
            summary,
        });
    }
    Ok(ModelReport {
        schema: "topocomm.model/1".into(),
        meta: RunMeta::new(m, topocomm_measure::timer::check()),
        cache_source: cache.source.to_string(),
        cache_measurer: cache.measurer,
        test: "latency".into(),
        sizes: plan.sizes.clone(),
        cma_available: cma_ok,
        classes,
    })
}

/// One class's rows (protocol x size) and, when measured, the fit of the
/// fixed costs on every point; held-out predictions refit without the size.
fn rows(
    rates: &ClassRates,
    protos: &[(&'static str, Params); 2],
    measured: &[Vec<TimePoint>],
    sizes: &[u64],
    cma_ok: bool,
) -> (Option<Fit>, Vec<Row>) {
    let is_measured = !measured.is_empty();
    let obs_of = |skip: Option<u64>| -> Vec<Observation> {
        let mut v = Vec::new();
        for ((_, p), pts) in protos.iter().zip(measured) {
            for pt in pts.iter().filter(|pt| Some(pt.size) != skip) {
                v.push(Observation {
                    params: p,
                    size: pt.size,
                    seconds: pt.median,
                });
            }
        }
        v
    };
    let full_fit = is_measured.then(|| fit(rates, &obs_of(None), cma_ok));
    let mut rows = Vec::new();
    for (k, (name, p)) in protos.iter().enumerate() {
        for &s in sizes {
            let meas = measured
                .get(k)
                .and_then(|v| v.iter().find(|pt| pt.size == s).cloned());
            let held = is_measured.then(|| {
                let f = fit(rates, &obs_of(Some(s)), cma_ok);
                predict(rates, p, s, &f.overheads, cma_ok)
            });
            rows.push(Row {
                protocol: name.to_string(),
                size: s,
                pure: predict(rates, p, s, &Overheads::default(), cma_ok),
                fitted: full_fit
                    .as_ref()
                    .map(|f| predict(rates, p, s, &f.overheads, cma_ok)),
                held_out: held,
                measured: meas,
            });
        }
    }
    (full_fit, rows)
}

fn pct(e: Option<(f64, f64, f64)>) -> String {
    match e {
        Some((m, lo, hi)) => format!(
            "{:+.0}% [{:+.0},{:+.0}]",
            m * 100.0,
            lo.min(hi) * 100.0,
            hi.max(lo) * 100.0
        ),
        None => "-".into(),
    }
}

impl ModelReport {
    /// Terminal tables.
    pub fn tables(&self) -> String {
        let mut out = format!(
            "model: rates from {} (measuring PU {}); one-way time (latency test, hot buffers), us\n",
            self.cache_source, self.cache_measurer
        );
        for c in &self.classes {
            out.push_str(&c.table());
        }
        out
    }

    /// HTML for `topocomm report`: a plot and the error summary per class.
    pub fn html(&self) -> String {
        let mut s = format!(
            "<p>Seed 001's model (docs/model.md) with rates from {}; the fixed costs are fitted to the measured points (held-out = fitted without that size). One-way time of the latency test, hot buffers.</p>",
            topocomm_report::esc(&self.cache_source)
        );
        for c in &self.classes {
            s.push_str(&format!("<div class=\"svgbox\">{}</div>", c.plot()));
            let rows: Vec<Vec<String>> = c
                .summary
                .iter()
                .map(|e| {
                    vec![
                        c.class.clone(),
                        e.protocol.clone(),
                        format!("{:.0}%", e.pure * 100.0),
                        format!("{:.0}%", e.fitted * 100.0),
                        format!("{:.0}%", e.held_out * 100.0),
                    ]
                })
                .collect();
            s.push_str(&topocomm_report::html_table(
                &[
                    "class",
                    "protocol",
                    "median |err| pure",
                    "fitted",
                    "held-out",
                ],
                &rows,
            ));
        }
        s
    }
}

impl ClassModel {
    /// This class's part of [`ModelReport::tables`].
    fn table(&self) -> String {
        let c = self;
        let mut out = format!(
            "\nclass {} (pair {},{}): fragment {} x {}, single-copy chunk {}\n",
            c.class,
            c.pair.0,
            c.pair.1,
            size_label(c.plan.fragment),
            c.plan.depth,
            size_label(c.plan.cma_chunk)
        );
        for s in &c.rates.sources {
            out.push_str(&format!(
                "  {} = {}{}\n",
                s.rate.to_uppercase(),
                s.used,
                s.fallback
                    .as_ref()
                    .map(|f| format!(" (fallback: {f})"))
                    .unwrap_or_default()
            ));
        }
        if let Some(f) = &c.fit {
            let o = &f.overheads;
            out.push_str(&format!(
                "  fitted costs: message {} us, rendezvous {} us, per chunk {} us, per CMA call {} us, per page {} ns (rms rel. error {:.0}%)\n",
                us(o.message), us(o.rendezvous), us(o.per_chunk), us(o.per_call), num(o.per_page * 1e9), f.rms_relative * 100.0
            ));
        }
        let measured = c.rows.iter().any(|r| r.measured.is_some());
        let rows: Vec<Vec<String>> = c
            .rows
            .iter()
            .map(|r| {
                let mut v = vec![r.protocol.clone(), size_label(r.size), us(r.pure)];
                if measured {
                    v.push(r.fitted.map(us).unwrap_or("-".into()));
                    v.push(
                        r.measured
                            .as_ref()
                            .map(|m| {
                                format!("{} [{}-{}]", us(m.median), us(m.ci_low), us(m.ci_high))
                            })
                            .unwrap_or("-".into()),
                    );
                    v.push(pct(r.error(r.pure)));
                    v.push(pct(r.fitted.and_then(|p| r.error(p))));
                    v.push(pct(r.held_out.and_then(|p| r.error(p))));
                }
                v
            })
            .collect();
        let header: Vec<&str> = if measured {
            vec![
                "protocol",
                "size",
                "pure",
                "fitted",
                "measured [95% CI]",
                "err pure",
                "err fitted",
                "err held-out",
            ]
        } else {
            vec!["protocol", "size", "predicted"]
        };
        out.push_str(&text_table(&header, &rows));
        if measured {
            for s in &c.summary {
                out.push_str(&format!(
                    "  {} {}: median |error| pure {:.0}%, fitted {:.0}%, held-out {:.0}%\n",
                    c.class,
                    s.protocol,
                    s.pure * 100.0,
                    s.fitted * 100.0,
                    s.held_out * 100.0
                ));
            }
        }
        out
    }

    /// A log-log plot (SVG): predicted (dashed) and measured time.
    pub fn plot(&self) -> String {
        let mut series = Vec::new();
        for proto in ["two-copy", "single-copy"] {
            let rs: Vec<&Row> = self.rows.iter().filter(|r| r.protocol == proto).collect();
            let fitted = rs.iter().all(|r| r.fitted.is_some());
            series.push(Series {
                name: format!("{proto} model{}", if fitted { " (fitted)" } else { "" }),
                points: rs
                    .iter()
                    .map(|r| (r.size as f64, r.fitted.unwrap_or(r.pure) * 1e6))
                    .collect(),
                dashed: true,
                band: Vec::new(),
            });
            if rs.iter().any(|r| r.measured.is_some()) {
                series.push(Series {
                    name: format!("{proto} measured"),
                    points: rs
                        .iter()
                        .filter_map(|r| {
                            r.measured.as_ref().map(|m| (r.size as f64, m.median * 1e6))
                        })
                        .collect(),
                    dashed: false,
                    band: rs
                        .iter()
                        .filter_map(|r| {
                            let m = r.measured.as_ref()?;
                            Some((r.size as f64, m.ci_low * 1e6, m.ci_high * 1e6))
                        })
                        .collect(),
                });
            }
        }
        svg_loglog(
            &format!(
                "Model vs measured, class {} (pair {},{})",
                self.class, self.pair.0, self.pair.1
            ),
            "message size (bytes)",
            "one-way time (us)",
            &series,
            &bytes_label,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rates::tests::pt;
    use topocomm_measure::cache::{Op, State};

    fn points() -> Vec<CachePoint> {
        let mut v = Vec::new();
        for size in [4096u64, 1 << 20] {
            v.push(pt("self", State::M, Op::Load, size, 100.0));
            v.push(pt("self", State::S, Op::Store, size, 10.0));
            v.push(pt("self", State::M, Op::Store, size, 60.0));
            v.push(pt("l3", State::M, Op::Load, size, 40.0));
        }
        v
    }

    fn machine() -> Machine {
        topocomm_topo::load(&"synthetic:pack:1 l3:1 core:2 pu:1".parse().unwrap()).unwrap()
    }

    #[test]
    fn plans_check_pairs_classes_and_sizes() {
        let m = machine();
        let o = |f: fn(&mut Options)| {
            let mut o = Options::default();
            f(&mut o);
            plan(&m, &o)
        };
        let p = o(|_| {}).unwrap();
        assert_eq!(p.targets, vec![("l3".to_string(), (0, 1))]);
        assert_eq!(p.sizes.len(), 8);
        assert_eq!(p.samples, 1, "at least one sample");
        let e = o(|o| o.pair = Some("1,1".into())).unwrap_err();
        assert_eq!(e.to_string(), "--pair 1,1: the two PUs must differ");
        let e = o(|o| o.pair = Some("0,7".into())).unwrap_err();
        assert!(e.to_string().starts_with("--pair: "), "{e}");
        let e = o(|o| o.class = Some("smt".into())).unwrap_err();
        assert!(e.to_string().starts_with("--class: class 'smt'"), "{e}");
        let single = topocomm_topo::load(&"synthetic:pack:1 core:1 pu:1".parse().unwrap()).unwrap();
        let e = plan(&single, &Options::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "this machine has a single PU: no pair to model"
        );
    }

    /// The measured protocols are the modelled ones: two-copy without
    /// single copy, single copy for every message above the inline limit
    /// and without the sender's help, whatever the plan says.
    #[test]
    fn protocols_measured_are_the_modelled_ones() {
        let plan = Rules::builtin(&machine()).params_for(Some("l3")).clone();
        assert!(
            plan.help_min < topocomm_transport::rules::HELP_NEVER,
            "helped in the plan"
        );
        let [(two, t), (single, p)] = protocol_params(&plan);
        assert_eq!((two, single), ("two-copy", "single-copy"));
        assert!(!t.cma);
        assert!(p.cma && p.cma_threshold == 0 && p.eager_max == plan.inline_max);
        assert_eq!(p.help_min, topocomm_transport::rules::HELP_NEVER);
    }

    #[test]
    fn predicts_without_measuring() {
        let m = machine();
        let o = Options {
            sizes: Some("4K,1M".into()),
            ..Options::default()
        };
        let p = plan(&m, &o).unwrap();
        let pts = points();
        let cache = CacheInput {
            points: &pts,
            measurer: 0,
            source: "test",
        };
        let mut runner = Runner {
            worker: "/nonexistent".into(),
            builtin: Rules::builtin(&m),
            test: Test::Bw,
            sizes: Vec::new(),
            samples: 1,
            min_time_ms: 1.0,
            window: 64,
            llc: 32 << 20,
            jobs: 0,
            tmp: std::env::temp_dir(),
        };
        let r = compute(&m, &p, cache, &mut runner, &mut |_| {
            panic!("no measurement")
        })
        .unwrap();
        assert_eq!(r.classes.len(), 1);
        let c = &r.classes[0];
        assert_eq!(c.rows.len(), 4, "two protocols x two sizes");
        assert!(c.fit.is_none() && c.rows.iter().all(|r| r.measured.is_none()));
        assert!(c.rows.iter().all(|r| r.pure > 0.0));
        let t = r.tables();
        assert!(
            t.starts_with("model: rates from test (measuring PU 0)"),
            "{t}"
        );
        assert!(t.contains("protocol     size  predicted\n"), "{t}");
        assert!(c.plot().starts_with("<svg"));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["schema"], "topocomm.model/1");
        let e = compute(
            &m,
            &p,
            CacheInput {
                points: &[],
                ..cache
            },
            &mut runner,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("test: class l3: "), "{e}");
    }
}
