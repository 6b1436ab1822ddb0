//! `topocomm bench p2p`: point-to-point latency, bandwidth, bidirectional
//! bandwidth and message rate of topocomm's transport, Open MPI and MPICH
//! (tc_mpibench), and the physical limits, on the same PU pairs in the same
//! run (docs/commands/bench-p2p.md).

use crate::common::{text_table, GlobalOpts};
use anyhow::{anyhow, bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use topocomm_measure::backends::{locate_mpi_build, parse_peers, Backend, MpiImpl};
use topocomm_measure::p2p::{default_sizes, parse_sizes, parse_tests, size_label, P2pParams, Test};
use topocomm_measure::results::{num, ratios, table, Ratio, ResultRow};
use topocomm_measure::timer::TimerInfo;
use topocomm_measure::{SampleLine, Summary};
use topocomm_report::{esc, html_table, svg_loglog, Series};
use topocomm_topo::{pair_class, parse_pair, ClassMatrix, LocalityClass, Machine};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Measure this pair of PUs (OS indexes), e.g. 0,1
    #[arg(long, value_name = "P,Q", conflicts_with = "class")]
    pub pair: Option<String>,
    /// Measure the representative pair of this locality class (see `topocomm topo`);
    /// default: one representative pair per class present
    #[arg(long, value_name = "NAME")]
    pub class: Option<String>,
    /// Message sizes in bytes (K, M, G suffixes), comma-separated; default powers of 4 from 1 B to 64 MiB, plus 8 B
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Smoke run for tests and CI: sizes 8,4K,64K, latency and bw, 5 samples,
    /// window 8, 1 ms batches (explicit options still win)
    #[arg(long)]
    pub quick: bool,
    /// Tests among latency,bw,bibw,msgrate (default: all four; --quick: latency,bw)
    #[arg(long, value_name = "LIST")]
    pub tests: Option<String>,
    /// Cache mode: hot (buffer reuse), cold (rotating buffers beyond 2x LLC), or both
    #[arg(long, default_value = "hot", value_parser = ["hot", "cold", "both"])]
    pub cache: String,
    /// MPI peers measured in the same run: openmpi, mpich (comma-separated), or none
    #[arg(long, default_value = "openmpi,mpich", value_name = "LIST|none")]
    pub vs: String,
    /// Samples per (test, size) and implementation (default 20; --quick: 5)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub samples: Option<u32>,
    /// Each sample lasts at least this long (default 10; --quick: 1)
    #[arg(long, value_name = "MS")]
    pub min_time_ms: Option<f64>,
    /// Messages in flight in bw, bibw and msgrate (default 64; --quick: 8)
    #[arg(long, value_name = "W", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: Option<u32>,
    /// Kill a backend job that runs longer than this (default: a bound computed from the settings)
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Write the results (raw samples included) and metadata as JSON
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// A PU pair to measure and its class on the topology in use.
#[derive(Clone, Debug, PartialEq)]
pub struct PairChoice {
    pub pair: (u32, u32),
    pub class: String,
}

/// What the command will do, resolved from its arguments and the machine.
#[derive(Clone, Debug)]
pub struct Plan {
    pub pairs: Vec<PairChoice>,
    /// Cache modes: false = hot, true = cold.
    pub modes: Vec<bool>,
    /// Parameters of the hot mode (cold differs by `cold` only).
    pub params: P2pParams,
    pub peers: Vec<MpiImpl>,
    pub with_topocomm: bool,
    pub timeout: Option<Duration>,
}

/// Resolves the arguments against the machine model; every bad value is a
/// one-line error naming the argument.
pub fn plan(m: &Machine, a: &Args) -> Result<Plan> {
    let cm = ClassMatrix::new(m);
    let pairs = if let Some(text) = &a.pair {
        let (p, q) = parse_pair(text).context("--pair")?;
        if p == q {
            bail!("--pair {text}: the two PUs must differ");
        }
        let class = pair_class(m, p, q).with_context(|| format!("--pair {text}"))?;
        vec![PairChoice {
            pair: (p, q),
            class: class.to_string(),
        }]
    } else if let Some(name) = &a.class {
        let want: LocalityClass = name.parse().map_err(|e: String| anyhow!("--class: {e}"))?;
        let c = cm.classes().iter().find(|c| c.class == want).ok_or_else(|| {
            anyhow!(
                "--class {name}: no pair of PUs has this class on this topology (classes present: {})",
                present(&cm)
            )
        })?;
        vec![PairChoice {
            pair: c.representative,
            class: c.class.to_string(),
        }]
    } else {
        cm.classes()
            .iter()
            .map(|c| PairChoice {
                pair: c.representative,
                class: c.class.to_string(),
            })
            .collect()
    };
    if pairs.is_empty() {
        bail!("this topology has a single PU: there is no pair to measure");
    }
    let tests = match (&a.tests, a.quick) {
        (Some(t), _) => parse_tests(t).map_err(|e| anyhow!("--tests: {e}"))?,
        (None, true) => vec![Test::Latency, Test::Bw],
        (None, false) => Test::ALL.to_vec(),
    };
    let sizes = match (&a.sizes, a.quick) {
        (Some(s), _) => parse_sizes(s).map_err(|e| anyhow!("--sizes: {e}"))?,
        (None, true) => vec![8, 4096, 65536],
        (None, false) => default_sizes(),
    };
    let min_time_ms = a.min_time_ms.unwrap_or(if a.quick { 1.0 } else { 10.0 });
    if !(min_time_ms > 0.0 && min_time_ms <= 60_000.0) {
        bail!("--min-time-ms {min_time_ms}: expected a number of milliseconds in (0, 60000]");
    }
    let params = P2pParams {
        tests,
        sizes,
        cold: false,
        llc: m.llc_size().unwrap_or(32 << 20),
        samples: a.samples.unwrap_or(if a.quick { 5 } else { 20 }) as usize,
        min_time_ms,
        window: a.window.unwrap_or(if a.quick { 8 } else { 64 }),
    };
    let modes = match a.cache.as_str() {
        "cold" => vec![true],
        "both" => vec![false, true],
        _ => vec![false],
    };
    let peers = parse_peers(&a.vs).map_err(|e| anyhow!("--vs: {e}"))?;
    Ok(Plan {
        pairs,
        modes,
        params,
        peers,
        with_topocomm: true,
        timeout: a.timeout.map(Duration::from_secs),
    })
}

fn present(cm: &ClassMatrix) -> String {
    cm.classes()
        .iter()
        .map(|c| c.class.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses pairs whose PUs this machine does not have (e.g. `--topology`
/// describes a bigger machine): benchmarks run here, never on a stand-in PU.
pub fn check_live(plan: &Plan, m: &Machine) -> Result<()> {
    let allowed = topocomm_measure::pin::allowed_pus()?;
    for c in &plan.pairs {
        for pu in [c.pair.0, c.pair.1] {
            if !allowed.contains(&pu) {
                bail!(
                    "pair {},{} (class {} on {}): PU {pu} does not exist on this machine (usable PUs: {}); benchmarks run on the live machine",
                    c.pair.0,
                    c.pair.1,
                    c.class,
                    crate::cmd::topo::origin_text(m),
                    topocomm_topo::PuSet::from_indexes(allowed.clone())
                );
            }
        }
    }
    Ok(())
}

/// How one backend fared on one pair and cache mode.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BackendStatus {
    pub backend: String,
    pub pair: String,
    pub cache: String,
    /// `ok` or `failed` (the reason says why; the others still ran).
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub elapsed_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinning: Option<topocomm_measure::p2p::JobMeta>,
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub plan: Plan,
    pub rows: Vec<ResultRow>,
    pub ratios: Vec<Ratio>,
    pub backends: Vec<BackendStatus>,
    pub timer: TimerInfo,
    /// UTC start of the run (the meta `date`).
    pub started: String,
}

/// The backends of a run, in the order they run; `None` with a reason for
/// one that cannot run at all (e.g. the MPI benchmark is not built).
fn backends(plan: &Plan) -> Vec<(String, Result<Backend, String>)> {
    let exe = std::env::current_exe().ok();
    let mut out = Vec::new();
    if plan.with_topocomm {
        out.push((
            "topocomm".to_string(),
            exe.clone()
                .map(|exe| Backend::Topocomm { exe })
                .ok_or_else(|| "cannot find the topocomm executable".to_string()),
        ));
    }
    let build = locate_mpi_build(exe.as_deref()).map_err(|e| e.to_string());
    for which in &plan.peers {
        out.push((
            which.name().to_string(),
            build.clone().map(|build| Backend::Mpi {
                which: *which,
                build,
                env: Vec::new(),
            }),
        ));
    }
    out.push(("limit".to_string(), Ok(Backend::Limit)));
    out
}

/// Runs every backend on every pair and cache mode. The limits run in
/// rounds interleaved with the job backends (before each and after the last,
/// the samples split between rounds and pooled), so that a change of the
/// machine's state during a long run (a VM's vCPUs moved by the host, other
/// load) shows up in the limit's CI instead of skewing the ratios. Progress
/// goes to stderr when `verbose`. A backend that fails is recorded, not fatal.
pub fn measure(plan: &Plan, verbose: bool) -> Result<Outcome> {
    let started = super::utc_now();
    let timer = topocomm_measure::timer::check();
    let list = backends(plan);
    let (limit, jobs): (Vec<_>, Vec<_>) = list.into_iter().partition(|(n, _)| n == "limit");
    let rounds = jobs.len() + 1;
    let per_round = plan.params.samples.div_ceil(rounds).max(1);
    // The schedule of one (pair, mode): limit round, job, limit round, ...
    let mut schedule = Vec::new();
    for j in &jobs {
        schedule.extend(limit.iter().cloned().map(|l| (l, true)));
        schedule.push((j.clone(), false));
    }
    schedule.extend(limit.iter().cloned().map(|l| (l, true)));

    let mut rows = Vec::new();
    let mut statuses = Vec::new();
    let total = plan.pairs.len() * plan.modes.len() * schedule.len();
    let mut step = 0;
    for c in &plan.pairs {
        for &cold in &plan.modes {
            let params = P2pParams {
                cold,
                ..plan.params.clone()
            };
            let timeout = plan.timeout.unwrap_or_else(|| params.time_bound());
            let mut pooled: Vec<SampleLine> = Vec::new();
            let mut limit_failed = false;
            for ((name, backend), is_limit) in &schedule {
                step += 1;
                if *is_limit && limit_failed {
                    continue;
                }
                let round_params = P2pParams {
                    samples: if *is_limit { per_round } else { params.samples },
                    ..params.clone()
                };
                let started = Instant::now();
                let label = format!(
                    "[{step}/{total}] {name} on PUs {},{} ({}, {})",
                    c.pair.0,
                    c.pair.1,
                    c.class,
                    params.cache()
                );
                if verbose {
                    eprintln!("bench p2p: {label} ...");
                }
                let mut progress = |what: &str| {
                    if verbose {
                        eprintln!("bench p2p:   {what}");
                    }
                };
                let result = backend.clone().and_then(|b| {
                    b.run(c.pair, &round_params, timeout, &mut progress)
                        .map_err(|e| e.to_string())
                });
                let pair = format!("{},{}", c.pair.0, c.pair.1);
                let elapsed_s = started.elapsed().as_secs_f64();
                let mut status = BackendStatus {
                    backend: name.clone(),
                    pair,
                    cache: params.cache().into(),
                    status: "ok".into(),
                    reason: None,
                    elapsed_s,
                    pinning: None,
                };
                match result {
                    Ok(run) => {
                        if verbose {
                            eprintln!("bench p2p: {label}: done in {elapsed_s:.1} s");
                        }
                        if *is_limit {
                            pool(&mut pooled, run.lines);
                        } else {
                            rows.extend(
                                run.lines
                                    .iter()
                                    .filter_map(|l| ResultRow::from_line(l, c.pair, &c.class)),
                            );
                        }
                        status.reason = run.note;
                        status.pinning = run.meta;
                    }
                    Err(e) => {
                        eprintln!("bench p2p: {label}: skipped: {e}");
                        limit_failed |= *is_limit;
                        status.status = "failed".into();
                        status.reason = Some(e);
                    }
                }
                statuses.push(status);
            }
            if !limit_failed {
                rows.extend(
                    pooled
                        .iter()
                        .filter_map(|l| ResultRow::from_line(l, c.pair, &c.class)),
                );
            }
        }
    }
    if rows.is_empty() {
        bail!("no backend produced a result (see the messages above)");
    }
    let ratios = ratios(&rows);
    Ok(Outcome {
        plan: plan.clone(),
        rows,
        ratios,
        backends: statuses,
        timer,
        started,
    })
}

/// Adds a round's lines to the pool: samples of the same (test, size) are
/// appended in measurement order.
fn pool(pooled: &mut Vec<SampleLine>, lines: Vec<SampleLine>) {
    for l in lines {
        match pooled
            .iter_mut()
            .find(|p| p.test == l.test && p.size == l.size && p.cache == l.cache)
        {
            Some(p) => p.samples.extend(l.samples),
            None => pooled.push(l),
        }
    }
}

/// The terminal tables: per pair, cache mode and test, one line per size.
pub fn render_tables(o: &Outcome) -> String {
    let mut s = String::new();
    for c in &o.plan.pairs {
        let pair = format!("{},{}", c.pair.0, c.pair.1);
        for &cold in &o.plan.modes {
            let cache = if cold { "cold" } else { "hot" };
            for t in &o.plan.params.tests {
                let (h, lines) = table(&o.rows, &o.ratios, &pair, cache, *t);
                if lines.is_empty() {
                    continue;
                }
                s.push_str(&format!(
                    "\n{} ({}), PUs {pair} ({}), {cache} cache; median [95% CI]\n",
                    t.name(),
                    t.unit(),
                    c.class
                ));
                let hr: Vec<&str> = h.iter().map(String::as_str).collect();
                s.push_str(&text_table(&hr, &lines));
            }
        }
    }
    s
}

/// Median relative CI half-width per implementation: how noisy the run was.
pub fn noise(o: &Outcome) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for i in topocomm_measure::results::impl_order(&o.rows) {
        let rel: Vec<f64> = o
            .rows
            .iter()
            .filter(|r| r.implementation == i)
            .filter_map(|r| Summary::of(&r.samples).map(|s| s.relative_ci()))
            .collect();
        if let Some(s) = Summary::of(&rel) {
            out.push((i, s.median));
        }
    }
    out
}

/// The `--json` document (docs/formats/bench-json.md).
pub fn to_json(o: &Outcome, m: &Machine) -> serde_json::Value {
    let mut meta = super::common_meta(m);
    let pairs: Vec<serde_json::Value> = o
        .plan
        .pairs
        .iter()
        .map(
            |c| serde_json::json!({"pair": format!("{},{}", c.pair.0, c.pair.1), "class": c.class}),
        )
        .collect();
    let p = &o.plan.params;
    let extra = serde_json::json!({
        "schema": "topocomm.bench.p2p/1",
        "date": o.started,
        "finished": super::utc_now(),
        "timer_resolution_ns": o.timer.resolution_ns,
        "timer_overhead_ns": o.timer.overhead_ns,
        "pairs": pairs,
        "pair": (o.plan.pairs.len() == 1).then(|| format!("{},{}", o.plan.pairs[0].pair.0, o.plan.pairs[0].pair.1)),
        "class": (o.plan.pairs.len() == 1).then(|| o.plan.pairs[0].class.clone()),
        "tests": p.tests.iter().map(|t| t.name()).collect::<Vec<_>>(),
        "sizes": p.sizes,
        "cache": o.plan.modes.iter().map(|c| if *c { "cold" } else { "hot" }).collect::<Vec<_>>(),
        "samples": p.samples,
        "min_time_ms": p.min_time_ms,
        "window": p.window,
        "llc": p.llc,
        "backends": o.backends,
        "noise_median_relative_ci": noise(o).into_iter().collect::<std::collections::BTreeMap<_, _>>(),
    });
    if let (Some(a), Some(b)) = (meta.as_object_mut(), extra.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
    serde_json::json!({ "results": o.rows, "ratios": o.ratios, "meta": meta })
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    let plan = plan(&m, a)?;
    check_live(&plan, &m)?;
    let o = measure(&plan, true)?;
    println!(
        "topocomm bench p2p: timer resolution {} ns, overhead {} ns; {} samples per point, LLC {}",
        num(o.timer.resolution_ns),
        num(o.timer.overhead_ns),
        plan.params.samples,
        topocomm_topo::human_bytes(plan.params.llc)
    );
    print!("{}", render_tables(&o));
    let failed: Vec<&BackendStatus> = o.backends.iter().filter(|b| b.status != "ok").collect();
    for b in &failed {
        println!(
            "note: {} on PUs {} ({}) missing: {}",
            b.backend,
            b.pair,
            b.cache,
            b.reason.as_deref().unwrap_or("")
        );
    }
    for b in o.backends.iter().filter(|b| b.status == "ok") {
        if let Some(r) = &b.reason {
            println!("note: {r}");
        }
    }
    let noise: Vec<String> = noise(&o)
        .iter()
        .map(|(i, x)| format!("{i} +-{:.1}%", x * 100.0))
        .collect();
    println!(
        "noise (median half-width of the 95% CI relative to the median): {}",
        noise.join(", ")
    );
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&to_json(&o, &m))?;
        topocomm_report::write_atomic(path, text.as_bytes())
            .with_context(|| format!("cannot write '{}'", path.display()))?;
        println!("json written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The p2p section of `topocomm report`: a quick run on every class's
/// representative pair (about 10-30 s on 2 cores), bandwidth curves per class
/// and a latency table. Returns the section's HTML and its JSON.
pub fn report_section(m: &Machine) -> (String, serde_json::Value) {
    let args = Args {
        pair: None,
        class: None,
        sizes: Some("8,512,4K,32K,256K,1M".into()),
        quick: false,
        tests: Some("latency,bw".into()),
        cache: "hot".into(),
        vs: "openmpi,mpich".into(),
        samples: Some(7),
        min_time_ms: Some(1.0),
        window: Some(8),
        timeout: Some(120),
        json: None,
    };
    let outcome = plan(m, &args).and_then(|p| {
        check_live(&p, m)?;
        measure(&p, true)
    });
    match outcome {
        Ok(o) => (section_html(&o), to_json(&o, m)),
        Err(e) => {
            let msg = format!("{e:#}");
            (
                format!("<p>Not measured: {}</p>", esc(&msg)),
                serde_json::json!({ "error": msg }),
            )
        }
    }
}

/// HTML for a finished run: per class a log-log bandwidth chart (every
/// implementation and the limit), then the latency table, then notes.
pub fn section_html(o: &Outcome) -> String {
    let mut h = String::from(
        "<p>Quick run: medians of few samples, hot cache, both processes pinned. \
         Reproduce precisely with <code>topocomm bench p2p</code> (docs/commands/bench-p2p.md).</p>",
    );
    for c in &o.plan.pairs {
        let pair = format!("{},{}", c.pair.0, c.pair.1);
        let impls = topocomm_measure::results::impl_order(&o.rows);
        let series: Vec<Series> = impls
            .iter()
            .map(|i| Series {
                name: i.clone(),
                points: o
                    .rows
                    .iter()
                    .filter(|r| {
                        r.pair == pair
                            && r.test == "bw"
                            && &r.implementation == i
                            && r.cache == "hot"
                    })
                    .map(|r| (r.size as f64, r.median))
                    .collect(),
                dashed: i == "limit",
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        if !series.is_empty() {
            h.push_str(&format!(
                "<h3>Streaming bandwidth, class {} (PUs {pair})</h3><div class=\"svgbox\">{}</div>",
                esc(&c.class),
                svg_loglog(
                    &format!("bw, class {}, PUs {pair}", c.class),
                    "message size (bytes)",
                    "GB/s",
                    &series,
                    &|v| size_label(v as u64)
                )
            ));
        }
        let (hd, lines) = table(&o.rows, &o.ratios, &pair, "hot", Test::Latency);
        if !lines.is_empty() {
            let hr: Vec<&str> = hd.iter().map(String::as_str).collect();
            h.push_str(&format!(
                "<h3>One-way latency, class {} (PUs {pair}), median [95% CI]</h3>{}",
                esc(&c.class),
                html_table(&hr, &lines)
            ));
        }
    }
    for b in &o.backends {
        if b.status != "ok" {
            h.push_str(&format!(
                "<p>Note: {} on PUs {} not measured: {}</p>",
                esc(&b.backend),
                esc(&b.pair),
                esc(b.reason.as_deref().unwrap_or(""))
            ));
        } else if let Some(r) = &b.reason {
            h.push_str(&format!("<p>Note: {}</p>", esc(r)));
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        T::try_parse_from(std::iter::once("p2p").chain(args.iter().copied())).map(|t| t.a)
    }

    fn machine() -> Machine {
        topocomm_topo::load(&"synthetic:pack:2 l3:2 core:2 pu:1".parse().unwrap()).unwrap()
    }

    #[test]
    fn defaults_and_quick() {
        let m = machine();
        let p = plan(&m, &parse(&[]).unwrap()).unwrap();
        assert_eq!(p.params.tests, Test::ALL.to_vec());
        assert_eq!(p.params.sizes, default_sizes());
        assert_eq!(p.modes, vec![false]);
        assert_eq!(p.peers, vec![MpiImpl::OpenMpi, MpiImpl::Mpich]);
        assert_eq!(p.params.window, 64);
        // One representative pair per class present (l3, package here).
        let classes: Vec<&str> = p.pairs.iter().map(|c| c.class.as_str()).collect();
        assert_eq!(classes.len(), ClassMatrix::new(&m).classes().len());
        assert!(classes.len() >= 2, "{classes:?}");
        let q = plan(
            &m,
            &parse(&["--quick", "--cache", "both", "--vs", "none"]).unwrap(),
        )
        .unwrap();
        assert_eq!(q.params.sizes, vec![8, 4096, 65536]);
        assert_eq!(q.params.samples, 5);
        assert_eq!(q.modes, vec![false, true]);
        assert!(q.peers.is_empty());
    }

    #[test]
    fn pair_and_class_selection() {
        let m = machine();
        let p = plan(&m, &parse(&["--pair", "0,1"]).unwrap()).unwrap();
        assert_eq!(p.pairs[0].pair, (0, 1));
        let cls = ClassMatrix::new(&m).classes().last().unwrap().clone();
        let p = plan(&m, &parse(&["--class", &cls.class.to_string()]).unwrap()).unwrap();
        assert_eq!(p.pairs[0].pair, cls.representative);
    }

    #[test]
    fn limit_rounds_pool_their_samples() {
        let l = |size, samples: Vec<f64>| SampleLine {
            implementation: "limit".into(),
            test: "bw".into(),
            size,
            cache: "hot".into(),
            unit: "GB/s".into(),
            samples,
        };
        let mut p = Vec::new();
        pool(&mut p, vec![l(8, vec![1.0, 2.0]), l(64, vec![5.0])]);
        pool(&mut p, vec![l(8, vec![3.0])]);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].samples, vec![1.0, 2.0, 3.0]);
        assert_eq!(p[1].samples, vec![5.0]);
    }

    #[test]
    fn bad_arguments_name_themselves() {
        let m = machine();
        let err = |a: &[&str]| format!("{:#}", plan(&m, &parse(a).unwrap()).unwrap_err());
        assert!(err(&["--pair", "0,99"]).contains("99"));
        assert!(err(&["--pair", "1,1"]).contains("must differ"));
        assert!(err(&["--pair", "x"]).contains("--pair"));
        assert!(err(&["--class", "smt"]).contains("classes present"));
        assert!(err(&["--class", "L9!"]).contains("--class"));
        assert!(err(&["--sizes", "4X"]).contains("--sizes"));
        assert!(err(&["--tests", "pingpong"]).contains("--tests"));
        assert!(err(&["--vs", "intelmpi"]).contains("--vs"));
        assert!(err(&["--min-time-ms", "0"]).contains("--min-time-ms"));
        assert!(parse(&["--cache", "warm"]).is_err());
        assert!(parse(&["--pair", "0,1", "--class", "l3"]).is_err());
        let q = plan(
            &m,
            &parse(&["--quick", "--sizes", "8", "--samples", "9"]).unwrap(),
        )
        .unwrap();
        assert_eq!((q.params.sizes.clone(), q.params.samples), (vec![8], 9));
        assert!(parse(&["--samples", "0"]).is_err());
    }
}
