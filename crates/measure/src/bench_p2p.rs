//! `topocomm bench p2p` without its command line: the plan (which PU
//! pairs, tests, sizes, cache modes and peers, resolved against the machine
//! model), the run (every backend on every pair and cache mode, the limits
//! in rounds interleaved with the job backends) and the result document
//! (`topocomm.bench.p2p/1`, docs/formats/bench-json.md).

use crate::backends::{locate_mpi_build, parse_peers, Backend, MpiImpl};
use crate::p2p::{default_sizes, parse_sizes, parse_tests, JobMeta, P2pParams, Test};
use crate::p2p_placement::{
    classify, keep_limits, limit_cuts, placed_limit_lines, placed_lines, Classed, P2pPlacement,
    RunSamples,
};
use crate::results::{impl_order, ratios, table, Ratio, ResultRow};
use crate::timer::TimerInfo;
use crate::{Error, PinError, SampleLine, Summary};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use thiserror::Error;
use topocomm_topo::{pair_class, ClassMatrix, LocalityClass, Machine, PuSet, TopoError};

/// Why a p2p run could not be planned or produced nothing; every message
/// names the argument at fault, as the CLI prints it.
#[derive(Debug, Error)]
pub enum BenchP2pError {
    /// `--pair` is not `P,Q`.
    #[error("--pair: {cause}")]
    PairSyntax { cause: TopoError },
    /// `--pair` names one PU twice.
    #[error("--pair {text}: the two PUs must differ")]
    SamePu { text: String },
    /// A PU of `--pair` is not in the topology.
    #[error("--pair {text}: {cause}")]
    PairAbsent { text: String, cause: TopoError },
    /// `--class` is not a locality class name.
    #[error("--class: {reason}")]
    BadClass { reason: String },
    /// No PU pair has the `--class` class.
    #[error("--class {name}: no pair of PUs has this class on this topology (classes present: {present})")]
    ClassAbsent { name: String, present: String },
    /// The topology has one PU.
    #[error("this topology has a single PU: there is no pair to measure")]
    SinglePu,
    /// `--tests` does not parse.
    #[error("--tests: {cause}")]
    Tests { cause: Error },
    /// `--sizes` does not parse.
    #[error("--sizes: {cause}")]
    Sizes { cause: Error },
    /// `--min-time-ms` is out of range.
    #[error("--min-time-ms {value}: expected a number of milliseconds in (0, 60000]")]
    MinTime { value: f64 },
    /// `--vs` does not parse.
    #[error("--vs: {cause}")]
    Peers { cause: Error },
    /// The usable PUs of this machine could not be read.
    #[error(transparent)]
    Pin(#[from] PinError),
    /// A PU of a planned pair does not exist on the live machine.
    #[error("pair {},{} (class {class} on {origin}): PU {pu} does not exist on this machine (usable PUs: {usable}); benchmarks run on the live machine", .pair.0, .pair.1)]
    NotLive {
        pair: (u32, u32),
        class: String,
        origin: String,
        pu: u32,
        usable: PuSet,
    },
    /// Every backend failed.
    #[error("no backend produced a result (see the messages above)")]
    NoResult,
}

/// The options of a run, as given (`None`: the default, or the `quick` one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// `P,Q`: measure this pair only.
    pub pair: Option<String>,
    /// Measure the representative pair of this locality class only.
    pub class: Option<String>,
    /// Message sizes (list syntax of [`parse_sizes`]).
    pub sizes: Option<String>,
    /// Smoke-run defaults.
    pub quick: bool,
    /// Tests (list syntax of [`parse_tests`]).
    pub tests: Option<String>,
    /// `hot`, `cold` or `both`.
    pub cache: String,
    /// MPI peers ([`parse_peers`]).
    pub vs: String,
    /// Samples per point.
    pub samples: Option<u32>,
    /// Minimum duration of a sample (ms).
    pub min_time_ms: Option<f64>,
    /// Messages in flight.
    pub window: Option<u32>,
    /// Time bound of one backend job (s).
    pub timeout: Option<u64>,
    /// Independent jobs per implementation, interleaved (default 3; quick 1).
    pub jobs: Option<u32>,
}

impl Options {
    /// What `topocomm report` measures: latency and bw, hot cache, a few
    /// sizes and samples, every class's representative pair.
    pub fn report() -> Self {
        Options {
            sizes: Some("8,512,4K,32K,256K,1M".into()),
            tests: Some("latency,bw".into()),
            cache: "hot".into(),
            vs: "openmpi,mpich".into(),
            samples: Some(7),
            min_time_ms: Some(1.0),
            window: Some(8),
            timeout: Some(120),
            jobs: Some(1),
            ..Options::default()
        }
    }
}

/// A PU pair to measure and its class on the topology in use.
#[derive(Clone, Debug, PartialEq)]
pub struct PairChoice {
    /// OS indexes of the two PUs.
    pub pair: (u32, u32),
    /// Their locality class.
    pub class: String,
}

impl PairChoice {
    /// `P,Q`.
    pub fn label(&self) -> String {
        format!("{},{}", self.pair.0, self.pair.1)
    }
}

/// What the command will do, resolved from its arguments and the machine.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The pairs, in order.
    pub pairs: Vec<PairChoice>,
    /// Cache modes: false = hot, true = cold.
    pub modes: Vec<bool>,
    /// Parameters of the hot mode (cold differs by `cold` only).
    pub params: P2pParams,
    /// MPI peers.
    pub peers: Vec<MpiImpl>,
    /// Whether topocomm's transport is measured.
    pub with_topocomm: bool,
    /// Time bound of one backend job (default: from the parameters).
    pub timeout: Option<Duration>,
    /// Independent jobs per implementation ([`measure`]).
    pub jobs: usize,
}

impl Plan {
    /// Samples each job of an implementation takes: `samples` split
    /// between the jobs, rounded up (so a point pools at least `samples`).
    pub fn samples_per_job(&self) -> usize {
        self.params.samples.div_ceil(self.jobs).max(1)
    }
}

/// Resolves the options against the machine model; every bad value is a
/// one-line error naming the argument.
pub fn plan(m: &Machine, a: &Options) -> Result<Plan, BenchP2pError> {
    use BenchP2pError as E;
    let cm = ClassMatrix::new(m);
    let choice = |pair, class: &LocalityClass| PairChoice {
        pair,
        class: class.to_string(),
    };
    let pairs = if let Some(text) = &a.pair {
        let (p, q) = topocomm_topo::resolve_pair(m, text).map_err(|cause| match cause {
            TopoError::BadPair { .. } => E::PairSyntax { cause },
            cause => E::PairAbsent {
                text: text.clone(),
                cause,
            },
        })?;
        if p == q {
            return Err(E::SamePu { text: text.clone() });
        }
        let class = pair_class(m, p, q).map_err(|cause| E::PairAbsent {
            text: text.clone(),
            cause,
        })?;
        vec![choice((p, q), &class)]
    } else if let Some(name) = &a.class {
        let want: LocalityClass = name.parse().map_err(|reason| E::BadClass { reason })?;
        let c = cm.classes().iter().find(|c| c.class == want);
        let c = c.ok_or_else(|| E::ClassAbsent {
            name: name.clone(),
            present: present(&cm),
        })?;
        vec![choice(c.representative, &c.class)]
    } else {
        cm.classes()
            .iter()
            .map(|c| choice(c.representative, &c.class))
            .collect()
    };
    if pairs.is_empty() {
        return Err(E::SinglePu);
    }
    let tests = match (&a.tests, a.quick) {
        (Some(t), _) => parse_tests(t).map_err(|cause| E::Tests { cause })?,
        (None, true) => vec![Test::Latency, Test::Bw],
        (None, false) => Test::ALL.to_vec(),
    };
    let sizes = match (&a.sizes, a.quick) {
        (Some(s), _) => parse_sizes(s).map_err(|cause| E::Sizes { cause })?,
        (None, true) => vec![8, 4096, 65536],
        (None, false) => default_sizes(),
    };
    let min_time_ms = a.min_time_ms.unwrap_or(if a.quick { 1.0 } else { 10.0 });
    if !(min_time_ms > 0.0 && min_time_ms <= 60_000.0) {
        return Err(E::MinTime { value: min_time_ms });
    }
    let params = P2pParams {
        tests,
        sizes,
        cold: false,
        llc: m.llc_size().unwrap_or(32 << 20),
        samples: a.samples.unwrap_or(if a.quick { 5 } else { 20 }) as usize,
        min_time_ms,
        window: a.window.unwrap_or(if a.quick { 8 } else { 64 }),
        probe: 0,
    };
    let modes = match a.cache.as_str() {
        "cold" => vec![true],
        "both" => vec![false, true],
        _ => vec![false],
    };
    let peers = parse_peers(&a.vs).map_err(|cause| E::Peers { cause })?;
    Ok(Plan {
        pairs,
        modes,
        params,
        peers,
        with_topocomm: true,
        timeout: a.timeout.map(Duration::from_secs),
        jobs: a.jobs.unwrap_or(if a.quick { 1 } else { 3 }).max(1) as usize,
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
/// describes a bigger machine): benchmarks run here, never on a stand-in
/// PU. `origin` names the topology in the message.
pub fn check_live(plan: &Plan, origin: &str) -> Result<(), BenchP2pError> {
    let allowed = crate::pin::allowed_pus()?;
    for c in &plan.pairs {
        for pu in [c.pair.0, c.pair.1] {
            if !allowed.contains(&pu) {
                return Err(BenchP2pError::NotLive {
                    pair: c.pair,
                    class: c.class.clone(),
                    origin: origin.into(),
                    pu,
                    usable: PuSet::from_indexes(allowed.clone()),
                });
            }
        }
    }
    Ok(())
}

/// How one backend fared on one pair and cache mode.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BackendStatus {
    /// `topocomm`, `openmpi`, `mpich`, `limit`.
    pub backend: String,
    /// `P,Q`.
    pub pair: String,
    /// `hot` or `cold`.
    pub cache: String,
    /// `ok` or `failed` (the reason says why; the others still ran).
    pub status: String,
    /// Why it failed, or a note on a success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Seconds it ran.
    pub elapsed_s: f64,
    /// Where its ranks ran, when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinning: Option<JobMeta>,
    /// A limit round's cache-line probe between the pair's PUs (one-way
    /// us), just before it ([`crate::p2p_placement`]; a job's samples carry
    /// probes of their own).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probe_us: Vec<f64>,
}

/// 8-byte ping-pongs after every sample of a job (`--probe`): a few tens
/// of microseconds per sample, enough for a median one-way time.
const PROBE_PINGPONGS: u32 = 100;

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The plan it ran.
    pub plan: Plan,
    /// One row per (implementation, pair, cache, test, size).
    pub rows: Vec<ResultRow>,
    /// Ratios between implementations.
    pub ratios: Vec<Ratio>,
    /// Where the host ran each (pair, cache) mode's jobs.
    pub placements: Vec<P2pPlacement>,
    /// `near` and `distant`: rows and ratios over the samples of one placement
    /// (`rows` and `ratios` are over every job), for the modes whose
    /// placement has tables there ([`P2pPlacement::tables`]).
    pub by_placement: Vec<PlacementRows>,
    /// One status per scheduled backend run.
    pub backends: Vec<BackendStatus>,
    /// The timer check.
    pub timer: TimerInfo,
    /// UTC start of the run (the meta `date`).
    pub started: String,
}

/// What a run reports while it goes.
#[derive(Clone, Copy, Debug)]
pub enum Progress<'a> {
    /// A backend starts; `label` is `[STEP/TOTAL] NAME on PUs P,Q (CLASS, CACHE)`.
    Start { label: &'a str },
    /// A line of the backend's own progress.
    Step { what: &'a str },
    /// The backend finished after `elapsed_s` seconds.
    Done { label: &'a str, elapsed_s: f64 },
    /// The backend failed (recorded; the run goes on).
    Skipped { label: &'a str, reason: &'a str },
}

/// A backend of a run, or why it cannot run at all.
type Slot = (String, Result<Backend, String>);

/// The backends of a run, in the order they run; an error with a reason for
/// one that cannot run at all (e.g. the MPI benchmark is not built).
/// `worker` is the `topocomm-worker` binary (the transport's backend runs
/// it) or why it was not found; `exe` the running program (the MPI build
/// folder is looked for from it).
fn backends(plan: &Plan, worker: Result<PathBuf, String>, exe: Option<PathBuf>) -> Vec<Slot> {
    let mut out = Vec::new();
    if plan.with_topocomm {
        out.push((
            "topocomm".to_string(),
            worker.map(|worker| Backend::Topocomm { worker }),
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

/// Runs every backend on every pair and cache mode. Each implementation
/// runs as `plan.jobs` independent jobs, interleaved with the others' (the
/// order rotated from one round to the next), and the limits run in rounds
/// between them (before each job and after the last); every backend's
/// samples are split between its jobs or rounds and pooled. So a state of a
/// whole process (a slow start, a rank's memory placed far) counts as one
/// job among several, and a change of the machine's state during a long run
/// (a VM's vCPUs moved by the host, other load) falls on every
/// implementation alike instead of skewing the ratios. `worker`
/// and `exe` are as in `backends`, `started` the UTC start time to record. A
/// backend that fails is recorded (and reported to `progress`), not fatal.
pub fn measure(
    plan: &Plan,
    worker: Result<PathBuf, String>,
    exe: Option<PathBuf>,
    started: String,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome, BenchP2pError> {
    let timer = crate::timer::check();
    let (limit, jobs): (Vec<_>, Vec<_>) = backends(plan, worker, exe)
        .into_iter()
        .partition(|(n, _)| n == "limit");
    let rounds = jobs.len() * plan.jobs + 1;
    let per_round = plan.params.samples.div_ceil(rounds).max(1);
    let per_job = plan.samples_per_job();
    // The schedule of one (pair, mode): limit round, job, limit round, ...
    let mut schedule = Vec::new();
    for round in 0..plan.jobs {
        for k in 0..jobs.len() {
            schedule.extend(limit.iter().cloned().map(|l| (l, true)));
            schedule.push((jobs[(k + round) % jobs.len()].clone(), false));
        }
    }
    schedule.extend(limit.iter().cloned().map(|l| (l, true)));

    let mut rows = Vec::new();
    let mut placed_rows: [Vec<ResultRow>; 2] = [Vec::new(), Vec::new()];
    let mut placements = Vec::new();
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
            // Every run of the schedule: its probes and sample lines.
            let mut runs: Vec<ModeRun> = Vec::new();
            let mut limit_failed = false;
            for ((name, backend), is_limit) in &schedule {
                step += 1;
                if *is_limit && limit_failed {
                    continue;
                }
                let pinned = c.pair.0 != c.pair.1;
                let round_params = P2pParams {
                    samples: if *is_limit { per_round } else { per_job },
                    probe: if pinned && !*is_limit {
                        PROBE_PINGPONGS
                    } else {
                        0
                    },
                    ..params.clone()
                };
                let t0 = Instant::now();
                let label = format!(
                    "[{step}/{total}] {name} on PUs {} ({}, {})",
                    c.label(),
                    c.class,
                    params.cache()
                );
                progress(Progress::Start { label: &label });
                // A limit round runs in this process right after its probe;
                // a job's samples carry their own (p2p_placement).
                let before = (*is_limit && pinned)
                    .then(|| crate::bench_coll::probe(c.pair))
                    .flatten();
                let result = backend.clone().and_then(|b| {
                    let mut on_step = |what: &str| progress(Progress::Step { what });
                    b.run(c.pair, &round_params, timeout, &mut on_step)
                        .map_err(|e| e.to_string())
                });
                let elapsed_s = t0.elapsed().as_secs_f64();
                let probe_us: Vec<f64> = before.into_iter().collect();
                let mut status = BackendStatus {
                    backend: name.clone(),
                    pair: c.label(),
                    cache: params.cache().into(),
                    status: "ok".into(),
                    reason: None,
                    elapsed_s,
                    pinning: None,
                    probe_us: probe_us.clone(),
                };
                let mut run = ModeRun {
                    backend: name.clone(),
                    is_limit: *is_limit,
                    ok: false,
                    probe_us,
                    lines: Vec::new(),
                };
                match result {
                    Ok(got) => {
                        progress(Progress::Done {
                            label: &label,
                            elapsed_s,
                        });
                        run.ok = true;
                        run.lines = got.lines;
                        status.reason = got.note;
                        status.pinning = got.meta;
                    }
                    Err(e) => {
                        progress(Progress::Skipped {
                            label: &label,
                            reason: &e,
                        });
                        limit_failed |= *is_limit;
                        status.status = "failed".into();
                        status.reason = Some(e);
                    }
                }
                statuses.push(status);
                runs.push(run);
            }
            if limit_failed {
                runs.retain(|r| !r.is_limit);
            }
            let seen: Vec<RunSamples> = runs
                .iter()
                .map(|r| RunSamples {
                    backend: &r.backend,
                    is_limit: r.is_limit,
                    ok: r.ok,
                    limit_probe_us: r.probe_us.first().copied(),
                    lines: &r.lines,
                })
                .collect();
            let every: Vec<&ModeRun> = runs.iter().collect();
            rows.extend(mode_rows(&every, &jobs, c));
            if let Some((placement, classes)) = classify(&c.label(), params.cache(), &seen) {
                let limits: Vec<bool> = runs.iter().map(|r| r.is_limit).collect();
                let cuts = limit_cuts(&seen);
                for (k, near) in [(0, true), (1, false)] {
                    let name = if near { "near" } else { "distant" };
                    if !placement.tables.iter().any(|t| t == name) {
                        continue;
                    }
                    let kept = keep_limits(&classes, &limits, near);
                    let chosen: Vec<ModeRun> = runs
                        .iter()
                        .zip(&classes)
                        .zip(kept)
                        .filter_map(|((r, class), keep)| {
                            let lines = match class {
                                Some(Classed::Samples(cut)) => placed_lines(&r.lines, *cut, near),
                                _ if r.is_limit => placed_limit_lines(&r.lines, &cuts, keep, near),
                                _ => return None,
                            };
                            Some(ModeRun { lines, ..r.clone() })
                        })
                        .collect();
                    let chosen: Vec<&ModeRun> = chosen.iter().collect();
                    placed_rows[k].extend(mode_rows(&chosen, &jobs, c));
                }
                placements.push(placement);
            }
        }
    }
    if rows.is_empty() {
        return Err(BenchP2pError::NoResult);
    }
    let by_placement = ["near", "distant"]
        .into_iter()
        .zip(placed_rows)
        .filter(|(_, r)| !r.is_empty())
        .map(|(name, results)| PlacementRows {
            placement: name.into(),
            ratios: ratios(&results),
            results,
        })
        .collect();
    let ratios = ratios(&rows);
    Ok(Outcome {
        plan: plan.clone(),
        rows,
        ratios,
        placements,
        by_placement,
        backends: statuses,
        timer,
        started,
    })
}

/// The rows and ratios over the samples of one placement.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PlacementRows {
    /// `near` or `distant`.
    pub placement: String,
    pub results: Vec<ResultRow>,
    pub ratios: Vec<Ratio>,
}

/// One run of a (pair, cache) mode's schedule: a job or a round of the
/// limits.
#[derive(Clone)]
struct ModeRun {
    backend: String,
    is_limit: bool,
    ok: bool,
    probe_us: Vec<f64>,
    lines: Vec<SampleLine>,
}

/// The rows of one (pair, cache) mode from `runs`: each implementation's
/// jobs pooled (in the order of `jobs`), then the limits.
fn mode_rows(runs: &[&ModeRun], jobs: &[Slot], c: &PairChoice) -> Vec<ResultRow> {
    let mut out = Vec::new();
    let names = jobs.iter().map(|(n, _)| n.as_str()).chain(["limit"]);
    for name in names {
        let mut pooled = Vec::new();
        for r in runs.iter().filter(|r| r.ok && r.backend == name) {
            pool(&mut pooled, r.lines.clone());
        }
        out.extend(
            pooled
                .iter()
                .filter_map(|l| ResultRow::from_line(l, c.pair, &c.class)),
        );
    }
    out
}

/// Adds a round's lines to the pool: samples of the same (test, size) are
/// appended in measurement order.
pub fn pool(pooled: &mut Vec<SampleLine>, lines: Vec<SampleLine>) {
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

/// [`Outcome::slowest`] of `rows`.
pub fn slowest(rows: &[ResultRow]) -> Vec<(String, f64, String, u64)> {
    let mut out = Vec::new();
    for i in impl_order(rows) {
        let worst = rows
            .iter()
            .filter(|r| r.implementation == i && r.samples.len() >= 10 && r.median > 0.0)
            .filter_map(|r| {
                let ratio = if r.test == "latency" {
                    r.median / r.samples.iter().copied().fold(f64::MIN, f64::max)
                } else {
                    r.samples.iter().copied().fold(f64::MAX, f64::min) / r.median
                };
                ratio.is_finite().then(|| (ratio, r.test.clone(), r.size))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((ratio, test, size)) = worst {
            out.push((i, ratio, test, size));
        }
    }
    out
}

/// A result table: title, header, one line per size.
pub type ResultTable = (String, Vec<String>, Vec<Vec<String>>);

impl Outcome {
    /// What the reader should know of each backend run: why it was not
    /// measured, or its note (e.g. pinning not verifiable).
    pub fn backend_notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for b in &self.backends {
            if b.status != "ok" {
                let why = b.reason.as_deref().unwrap_or("");
                out.push(format!(
                    "{} on PUs {} not measured: {why}",
                    b.backend, b.pair
                ));
            } else if let Some(r) = &b.reason {
                out.push(r.clone());
            }
        }
        out
    }

    /// The result tables, per pair, cache mode and test that has results;
    /// titled `TEST (UNIT), PUs P,Q (CLASS), CACHE cache; median [95% CI]`.
    pub fn tables(&self) -> Vec<ResultTable> {
        self.tables_of(&self.rows, &self.ratios)
    }

    /// [`Outcome::tables`] over the samples of each placement that has
    /// them: (`near` or `distant`, its tables).
    pub fn placement_tables(&self) -> Vec<(String, Vec<ResultTable>)> {
        self.by_placement
            .iter()
            .map(|p| (p.placement.clone(), self.tables_of(&p.results, &p.ratios)))
            .collect()
    }

    fn tables_of(&self, rows: &[ResultRow], ratios: &[Ratio]) -> Vec<ResultTable> {
        let mut out = Vec::new();
        for c in &self.plan.pairs {
            let pair = c.label();
            for &cold in &self.plan.modes {
                let cache = if cold { "cold" } else { "hot" };
                for t in &self.plan.params.tests {
                    let (h, lines) = table(rows, ratios, &pair, cache, *t);
                    if lines.is_empty() {
                        continue;
                    }
                    let title = format!(
                        "{} ({}), PUs {pair} ({}), {cache} cache; median [95% CI]",
                        t.name(),
                        t.unit(),
                        c.class
                    );
                    out.push((title, h, lines));
                }
            }
        }
        out
    }

    /// Median relative CI half-width per implementation: how noisy the run was.
    pub fn noise(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        for i in impl_order(&self.rows) {
            let rel: Vec<f64> = self
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

    /// Per implementation (in [`impl_order`]), its slowest sample against
    /// the median of its point, as a speed ratio (1: no slower sample; a
    /// latency's median / its largest sample, a rate's smallest sample /
    /// its median), at the point where that ratio is lowest: (name, ratio,
    /// test, size). A job-level slow mode shows here even where the medians
    /// look fine; a point of fewer than 10 samples is left out (one slow
    /// sample of a handful says little).
    pub fn slowest(&self) -> Vec<(String, f64, String, u64)> {
        slowest(&self.rows)
    }

    /// The hot-cache bw medians of pair `P,Q` per implementation (size,
    /// GB/s), implementations in [`impl_order`], those without points left out.
    pub fn bw_curves(&self, pair: &str) -> Vec<(String, Vec<(f64, f64)>)> {
        impl_order(&self.rows)
            .into_iter()
            .map(|i| {
                let points = self
                    .rows
                    .iter()
                    .filter(|r| {
                        r.pair == pair
                            && r.test == "bw"
                            && r.implementation == i
                            && r.cache == "hot"
                    })
                    .map(|r| (r.size as f64, r.median))
                    .collect();
                (i, points)
            })
            .filter(|(_, p): &(String, Vec<(f64, f64)>)| !p.is_empty())
            .collect()
    }

    /// The `topocomm.bench.p2p/1` document (docs/formats/bench-json.md):
    /// `meta` (the fields every benchmark file carries) completed with this
    /// run's, `finished` the UTC end time.
    pub fn to_json(&self, mut meta: serde_json::Value, finished: String) -> serde_json::Value {
        let pairs: Vec<serde_json::Value> = self
            .plan
            .pairs
            .iter()
            .map(|c| serde_json::json!({"pair": c.label(), "class": c.class}))
            .collect();
        let p = &self.plan.params;
        let single = (self.plan.pairs.len() == 1).then(|| &self.plan.pairs[0]);
        let extra = serde_json::json!({
            "schema": "topocomm.bench.p2p/1",
            "date": self.started,
            "finished": finished,
            "timer_resolution_ns": self.timer.resolution_ns,
            "timer_overhead_ns": self.timer.overhead_ns,
            "pairs": pairs,
            "pair": single.map(PairChoice::label),
            "class": single.map(|c| c.class.clone()),
            "tests": p.tests.iter().map(|t| t.name()).collect::<Vec<_>>(),
            "sizes": p.sizes,
            "cache": self.plan.modes.iter().map(|c| if *c { "cold" } else { "hot" }).collect::<Vec<_>>(),
            "samples": p.samples,
            "jobs": self.plan.jobs,
            "min_time_ms": p.min_time_ms,
            "window": p.window,
            "llc": p.llc,
            "backends": self.backends,
            "noise_median_relative_ci": self.noise().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
            "placement": self.placements,
        });
        if let (Some(a), Some(b)) = (meta.as_object_mut(), extra.as_object()) {
            for (k, v) in b {
                a.insert(k.clone(), v.clone());
            }
        }
        let mut doc =
            serde_json::json!({ "results": self.rows, "ratios": self.ratios, "meta": meta });
        if !self.by_placement.is_empty() {
            doc["by_placement"] = serde_json::json!(self.by_placement);
        }
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(implementation: &str, test: &str, size: u64, samples: Vec<f64>) -> ResultRow {
        let l = SampleLine {
            implementation: implementation.into(),
            test: test.into(),
            size,
            cache: "hot".into(),
            unit: if test == "latency" { "us" } else { "GB/s" }.into(),
            samples,
            ..serde_json::from_str(
                r#"{"impl":"x","test":"bw","size":0,"cache":"hot","unit":"us","samples":[]}"#,
            )
            .unwrap()
        };
        ResultRow::from_line(&l, (0, 1), "l3").unwrap()
    }

    #[test]
    fn slowest_sample_per_implementation() {
        let steady: Vec<f64> = (0..30).map(|i| 10.0 + (i % 3) as f64 * 0.1).collect();
        let mut bimodal = steady.clone();
        bimodal[7] = 0.03; // one sample of a slow mode: a rate 300x below
        let mut slow_latency = steady.clone();
        slow_latency[3] = 40.0; // one ping-pong 4x the median
        let rows = vec![
            row("topocomm", "msgrate", 8, steady.clone()),
            row("topocomm", "latency", 8, slow_latency),
            row("openmpi", "msgrate", 8, bimodal),
            row("openmpi", "bw", 65536, steady.clone()),
            // Fewer than 10 samples: left out however slow.
            row("mpich", "bw", 8, vec![10.0, 10.0, 0.1]),
        ];
        let s = slowest(&rows);
        assert_eq!(s.len(), 2, "{s:?}");
        let (name, ratio, test, size) = &s[0];
        assert_eq!(
            (name.as_str(), test.as_str(), *size),
            ("topocomm", "latency", 8)
        );
        assert!((ratio - 10.1 / 40.0).abs() < 0.01, "{ratio}");
        let (name, ratio, test, _) = &s[1];
        assert_eq!((name.as_str(), test.as_str()), ("openmpi", "msgrate"));
        assert!(*ratio < 0.01, "{ratio}");
    }

    fn machine() -> Machine {
        topocomm_topo::load(&"synthetic:pack:2 l3:2 core:2 pu:1".parse().unwrap()).unwrap()
    }

    fn opts(f: impl FnOnce(&mut Options)) -> Options {
        let mut o = Options {
            cache: "hot".into(),
            vs: "openmpi,mpich".into(),
            ..Options::default()
        };
        f(&mut o);
        o
    }

    #[test]
    fn defaults_and_quick() {
        let m = machine();
        let p = plan(&m, &opts(|_| ())).unwrap();
        assert_eq!(p.params.tests, Test::ALL.to_vec());
        assert_eq!(p.params.sizes, default_sizes());
        assert_eq!(p.modes, vec![false]);
        assert_eq!(p.peers, vec![MpiImpl::OpenMpi, MpiImpl::Mpich]);
        assert_eq!(p.params.window, 64);
        assert_eq!(p.jobs, 3);
        // One representative pair per class present (l3, package here).
        let classes: Vec<&str> = p.pairs.iter().map(|c| c.class.as_str()).collect();
        assert_eq!(classes.len(), ClassMatrix::new(&m).classes().len());
        assert!(classes.len() >= 2, "{classes:?}");
        let q = plan(
            &m,
            &opts(|o| {
                o.quick = true;
                o.cache = "both".into();
                o.vs = "none".into();
            }),
        )
        .unwrap();
        assert_eq!(q.params.sizes, vec![8, 4096, 65536]);
        assert_eq!(q.jobs, 1);
        assert_eq!(q.params.samples, 5);
        assert_eq!(q.modes, vec![false, true]);
        assert!(q.peers.is_empty());
        let r = plan(&m, &Options::report()).unwrap();
        assert_eq!((r.params.samples, r.params.window), (7, 8));
    }

    #[test]
    fn pair_and_class_selection() {
        let m = machine();
        let p = plan(&m, &opts(|o| o.pair = Some("0,1".into()))).unwrap();
        assert_eq!(p.pairs[0].pair, (0, 1));
        let cls = ClassMatrix::new(&m).classes().last().unwrap().clone();
        let p = plan(&m, &opts(|o| o.class = Some(cls.class.to_string()))).unwrap();
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
            probe_us: None,
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
        let err = |f: fn(&mut Options)| plan(&m, &opts(f)).unwrap_err().to_string();
        assert!(err(|o| o.pair = Some("0,99".into())).contains("99"));
        assert!(err(|o| o.pair = Some("1,1".into())).contains("must differ"));
        assert!(err(|o| o.pair = Some("x".into())).starts_with("--pair: "));
        assert!(err(|o| o.class = Some("smt".into())).contains("classes present"));
        assert!(err(|o| o.class = Some("L9!".into())).starts_with("--class: "));
        assert!(err(|o| o.sizes = Some("4X".into())).starts_with("--sizes: "));
        assert!(err(|o| o.tests = Some("pingpong".into())).starts_with("--tests: "));
        assert!(err(|o| o.vs = "intelmpi".into()).starts_with("--vs: "));
        assert_eq!(
            err(|o| o.min_time_ms = Some(0.0)),
            "--min-time-ms 0: expected a number of milliseconds in (0, 60000]"
        );
        let q = plan(
            &m,
            &opts(|o| {
                o.quick = true;
                o.sizes = Some("8".into());
                o.samples = Some(9);
            }),
        )
        .unwrap();
        assert_eq!((q.params.sizes.clone(), q.params.samples), (vec![8], 9));
    }
}
