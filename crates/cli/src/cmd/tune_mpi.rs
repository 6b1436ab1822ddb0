//! `topocomm tune --mpi openmpi|mpich` (dispatched from `cmd::tune`): tunes the installed MPI's shared-memory
//! parameters with tc_mpibench, writes them as an MCA parameter file (Open
//! MPI) or an environment file (MPICH), measures defaults vs that file side
//! by side and proves the file's values take effect
//! (docs/commands/tune-mpi.md, docs/formats/mpi-exports.md).

use crate::common::{text_table, GlobalOpts};
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use topocomm_measure::backends::{locate_mpi_build, MpiImpl};
use topocomm_measure::meta::RunMeta;
use topocomm_measure::p2p::{default_sizes, parse_sizes, size_label, P2pParams};
use topocomm_mpitune::export::{
    openmpi_file_env, parse_env_file, parse_mca_file, render, Entry, OPENMPI_FILE_VAR,
};
use topocomm_mpitune::objective::{
    combine, compare_with, established, job_level_shift, ClassMeasure, ClassVerdict, NoiseFloor,
    Objective, Rule, TOLERANCE,
};
use topocomm_mpitune::runner::{layer_of_pml, openmpi_pml, Runner};
use topocomm_mpitune::search::{coordinate_descent, Adoption, SearchOptions, SearchResult};
use topocomm_mpitune::space::{describe, Layer, Space};
use topocomm_mpitune::verify::{ompi_info_sources, verify_file, ReadBack};
use topocomm_mpitune::weights::{self, ClassWeight};
use topocomm_topo::{pair_class, parse_pair, Machine};

/// A setting must beat the defaults by this fraction, in the search and in
/// the verification, to be exported.
const MIN_GAIN: f64 = 0.03;

#[derive(clap::Args, Debug, Clone)]
pub struct MpiArgs {
    /// The MPI to tune: openmpi or mpich (the Debian packages' mpirun.<name>)
    #[arg(long, value_name = "openmpi|mpich")]
    pub mpi: String,
    /// Tune on this PU pair only (OS indexes), e.g. 0,1; default: the
    /// representative pair of every locality class, equally weighted
    #[arg(long, value_name = "P,Q", conflicts_with_all = ["matrix", "map"])]
    pub pair: Option<String>,
    /// Message sizes (K, M, G suffixes), comma-separated; default powers of 4
    /// from 1 B to 64 MiB (--quick: 4K,64K,1M)
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Smoke run: one parameter, one candidate, 3 sizes, 5 samples
    #[arg(long)]
    pub quick: bool,
    /// Communication matrix (as `topocomm map` reads) to weight the classes by bytes
    #[arg(long, value_name = "FILE", requires = "map")]
    pub matrix: Option<PathBuf>,
    /// Placement of the matrix's ranks: perm file, `<node> <pu>` per rank
    #[arg(long, value_name = "FILE", requires = "matrix")]
    pub map: Option<PathBuf>,
    /// Where to write the settings (default: topocomm-openmpi.conf or topocomm-mpich.env)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Time budget of the search in seconds (default 1200; --quick: 120)
    #[arg(long, value_name = "SECS")]
    pub budget: Option<u64>,
    /// Coordinate-descent rounds at most (default 2; --quick: 1)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10))]
    pub rounds: Option<u32>,
    /// Samples per size and setting (default 9; --quick: 5)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(3..=1000))]
    pub samples: Option<u32>,
    /// Messages in flight in bw (default 16; --quick: 8)
    #[arg(long, value_name = "W", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: Option<u32>,
    /// Kill one benchmark job after this many seconds (default: computed)
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Also write everything (search steps, raw samples, read-back) as JSON
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No search: measure the defaults against an existing exported FILE
    /// (an earlier run's, or edited by hand) and check that its values take
    /// effect; exit status 1 when a size is slower than default
    #[arg(long, value_name = "FILE", conflicts_with_all = ["out", "budget", "rounds", "quick"])]
    pub verify: Option<PathBuf>,
    /// Message sizes whose bandwidth is maximized, MIN-MAX (default 64K-4M);
    /// every other size must only not get slower
    #[arg(long, value_name = "MIN-MAX")]
    pub objective: Option<String>,
}

/// Everything resolved from the arguments before any MPI job runs.
struct Setup {
    which: MpiImpl,
    params: P2pParams,
    classes: Vec<ClassWeight>,
    out: PathBuf,
    budget: Duration,
    rounds: usize,
    objective: Objective,
}

fn parse_mpi(text: &str) -> Result<MpiImpl> {
    MpiImpl::ALL
        .into_iter()
        .find(|m| m.name() == text.trim())
        .ok_or_else(|| anyhow!("--mpi '{text}': unknown MPI (expected openmpi or mpich)"))
}

fn setup(m: &Machine, a: &MpiArgs) -> Result<Setup> {
    let which = parse_mpi(&a.mpi)?;
    let sizes = match (&a.sizes, a.quick) {
        (Some(s), _) => parse_sizes(s).map_err(|e| anyhow!("--sizes: {e}"))?,
        (None, true) => vec![4096, 65536, 1 << 20],
        (None, false) => default_sizes(),
    };
    let classes = if let Some(text) = &a.pair {
        let (p, q) = parse_pair(text).context("--pair")?;
        if p == q {
            bail!("--pair {text}: the two PUs must differ");
        }
        let class = pair_class(m, p, q).with_context(|| format!("--pair {text}"))?;
        vec![ClassWeight {
            class: class.to_string(),
            pair: (p, q),
            weight: 1.0,
            bytes: None,
        }]
    } else if let (Some(mat), Some(map)) = (&a.matrix, &a.map) {
        weights::from_matrix(m, mat, map).map_err(|e| anyhow!(e))?
    } else {
        weights::equal(m)
    };
    if classes.is_empty() {
        bail!("this topology has a single PU: there is no pair to tune on");
    }
    let allowed = topocomm_measure::pin::allowed_pus()?;
    for c in &classes {
        for pu in [c.pair.0, c.pair.1] {
            if !allowed.contains(&pu) {
                bail!(
                    "pair {},{} (class {}): PU {pu} is not usable on this machine (usable: {}); tuning runs on the live machine",
                    c.pair.0,
                    c.pair.1,
                    c.class,
                    topocomm_topo::PuSet::from_indexes(allowed.clone())
                );
            }
        }
    }
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from(match which {
            MpiImpl::OpenMpi => "topocomm-openmpi.conf",
            MpiImpl::Mpich => "topocomm-mpich.env",
        })
    });
    let params = P2pParams {
        tests: Vec::new(),
        sizes,
        cold: false,
        llc: m.llc_size().unwrap_or(32 << 20),
        samples: a.samples.unwrap_or(if a.quick { 5 } else { 9 }) as usize,
        min_time_ms: if a.quick { 1.0 } else { 2.0 },
        window: a.window.unwrap_or(if a.quick { 8 } else { 16 }),
    };
    let objective = match &a.objective {
        Some(o) => {
            let obj = Objective::parse(o).map_err(|e| anyhow!("--objective: {e}"))?;
            if !params.sizes.iter().any(|&z| obj.contains(z)) {
                bail!(
                    "--objective {o}: none of the measured sizes lies in it (add them with --sizes)"
                );
            }
            obj
        }
        None => Objective::default(),
    };
    Ok(Setup {
        which,
        params,
        classes,
        out,
        budget: Duration::from_secs(a.budget.unwrap_or(if a.quick { 120 } else { 1200 })),
        rounds: a.rounds.unwrap_or(if a.quick { 1 } else { 2 }) as usize,
        objective,
    })
}

/// The MPI build folder with both programs this command runs.
fn mpi_build(which: MpiImpl) -> Result<PathBuf> {
    let exe = std::env::current_exe().ok();
    let build = locate_mpi_build(exe.as_deref())?;
    for prog in ["tc_mpibench", "tc_mpit_cvars"] {
        let p = build.join(which.name()).join(prog);
        if !p.is_file() {
            bail!(
                "{} not found: the {} build of the MPI programs is missing (run `make -C mpi`)",
                p.display(),
                which.name()
            );
        }
    }
    Ok(build)
}

fn mpi_version(which: MpiImpl) -> String {
    let (prog, arg) = match which {
        MpiImpl::OpenMpi => ("mpirun.openmpi", "--version"),
        MpiImpl::Mpich => ("mpichversion", "--version"),
    };
    let mut c = std::process::Command::new(prog);
    c.arg(arg);
    topocomm_measure::procrun::run_bounded(c, prog, Duration::from_secs(20))
        .ok()
        .and_then(|o| {
            o.stdout
                .lines()
                .find(|l| !l.trim().is_empty())
                // `MPICH Version:    \t4.0.2` -> `MPICH Version: 4.0.2`
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| which.name().to_string())
}

pub fn run_mpi(g: &GlobalOpts, a: &MpiArgs) -> Result<ExitCode> {
    let m = g.machine()?;
    let s = setup(&m, a)?;
    // Bad input fails before any MPI job starts.
    let to_verify = match &a.verify {
        Some(f) => Some(read_export(s.which, f).map_err(|e| anyhow!("--verify: {e:#}"))?),
        None => None,
    };
    if which_exists(s.which.mpirun()).is_none() {
        bail!(
            "{} not found: install the {} package (scripts/setup.sh)",
            s.which.mpirun(),
            s.which.name()
        );
    }
    let build = mpi_build(s.which)?;
    let layer = match s.which {
        MpiImpl::OpenMpi => {
            let pml = openmpi_pml(&build).map_err(|e| anyhow!(e))?;
            eprintln!("openmpi: pml {pml} carries intra-node messages");
            layer_of_pml(&pml)
        }
        MpiImpl::Mpich => Layer::MpichUcx,
    };
    let space = if a.quick {
        Space::quick(s.which, layer)
    } else {
        Space::full(s.which, layer)
    };
    // The defaults must be the MPI's defaults, not the caller's environment.
    let mut preset = space.env_names();
    if s.which == MpiImpl::OpenMpi {
        preset.push("OMPI_MCA_mca_base_param_files".into());
        preset.push(OPENMPI_FILE_VAR.into());
    }
    if let Some(v) = preset.iter().find(|v| std::env::var_os(v).is_some()) {
        bail!("${v} is set in the environment: unset it, so that the defaults measured are the MPI's own");
    }
    let (bw, latency) = Runner::params(&s.params);
    let runner = Runner {
        which: s.which,
        build: build.clone(),
        layer,
        pairs: s
            .classes
            .iter()
            .map(|c| (c.class.clone(), c.pair))
            .collect(),
        bw,
        latency,
        timeout: a.timeout.map(Duration::from_secs),
    };
    let weights: Vec<f64> = s.classes.iter().map(|c| c.weight).collect();
    let load_start = loadavg();
    if let (Some(file), Some(export)) = (&a.verify, to_verify) {
        return verify_only(
            &m, &s, layer, &build, &runner, &weights, file, export, a, load_start,
        );
    }
    eprintln!(
        "tuning {} ({} presets, {} parameters, {} candidate values) on {} over {} sizes; budget {} s",
        s.which.name(),
        space.presets.len(),
        space.params.len(),
        space
            .params
            .iter()
            .map(|p| p.candidates.len())
            .sum::<usize>(),
        s.classes
            .iter()
            .map(|c| format!(
                "{} {},{} (weight {:.2})",
                c.class, c.pair.0, c.pair.1, c.weight
            ))
            .collect::<Vec<_>>()
            .join(", "),
        s.params.sizes.len(),
        s.budget.as_secs()
    );
    let opts = SearchOptions {
        budget: s.budget,
        max_rounds: s.rounds,
        min_gain: MIN_GAIN,
        confirm: !a.quick,
        paired: !a.quick,
        objective: s.objective,
    };
    let mut progress = |msg: &str| eprintln!("  {msg}");
    let result = coordinate_descent(
        &space,
        &weights,
        &opts,
        &mut |set| runner.measure(set, &mut |_| {}),
        &mut progress,
    )
    .map_err(|e| anyhow!("{}: {e}", s.which.name()))?;
    eprintln!(
        "search: {} measurements in {} round(s){}; best: {} (x{:.2} over the defaults while searching)",
        result.steps.len(),
        result.rounds,
        if result.budget_exhausted { ", stopped by the time budget" } else { "" },
        describe(&result.best),
        result.best_score
    );

    // Write the file, then measure defaults vs the file itself.
    let meta = RunMeta::new(&m, topocomm_measure::timer::check());
    let version = mpi_version(s.which);
    let entries = entries_for(&space, &result, &s.objective);
    let mut header = header_lines(&meta, &version, layer, &s, &a.out, None, None);
    header.extend(tried_lines(&result, &s.objective));
    write_file(&s.out, &render(layer, &header, &entries))?;
    let file_env = read_export(s.which, &s.out)?.env;
    let verify_runner = verification_runner(&runner, &s.params);
    let reps = if a.quick { 1 } else { 2 };
    let Verification {
        defaults: d,
        tuned: t,
        verdicts,
        clean,
        once,
        noise,
    } = verify_alternating(
        &verify_runner,
        &file_env,
        reps,
        &s.out,
        &s.objective,
        &weights,
        Some(&result.noise),
    )?;
    let (score, feasible) = combine(&verdicts, &weights);
    // The file changes a value only when the verification shows that it
    // pays: no size slower (pooled or in any alternation), and the same gain
    // the search asked for. A setting adopted on noisy search measurements,
    // or one that is slower only some of the time, is otherwise dropped.
    let keep = clean && score > 1.0 + MIN_GAIN;
    let load = Load {
        pus: topocomm_measure::pin::allowed_pus().map_or(0, |p| p.len()),
        start: load_start,
        end: loadavg(),
    };

    // Rewrite the file with the verified numbers in its header (same values).
    let header = header_lines(
        &meta,
        &version,
        layer,
        &s,
        &a.out,
        Some((&verdicts, score, feasible)),
        Some(&load),
    );
    let mut header = header;
    header.extend(tried_lines(&result, &s.objective));
    write_file(&s.out, &render(layer, &header, &entries))?;
    let values: Vec<(String, String)> = entries
        .iter()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
    let readback = verify_file(s.which, layer, &build, &s.out, &values).map_err(|e| anyhow!(e))?;
    let sources = if s.which == MpiImpl::OpenMpi && layer == Layer::Vader && !values.is_empty() {
        let names: Vec<String> = values.iter().map(|(k, _)| k.clone()).collect();
        ompi_info_sources(&s.out, &names).unwrap_or_default()
    } else {
        Vec::new()
    };

    let rejected = !keep && !entries.is_empty();
    if rejected {
        let mut note = vec![format!(
            "REJECTED by the verification ({}): this file keeps the MPI's defaults. The search's setting was:",
            rejection(feasible, clean, score)
        )];
        note.extend(
            entries
                .iter()
                .map(|e| format!("  {} = {}", e.name, e.value)),
        );
        note.push(String::new());
        // After the title line, before everything else.
        let mut header = header;
        header.splice(1..1, note);
        write_file(&s.out, &render(layer, &header, &[]))?;
    }
    print_report(&s, &verdicts, &readback, &sources, score, feasible, &result);
    print_evidence(&verdicts, &once, &noise);
    if rejected {
        println!(
            "the verification rejected {} ({}): {} keeps the MPI's defaults (the read-back above checked the rejected values)",
            describe(&result.best),
            rejection(feasible, clean, score),
            s.out.display()
        );
    }
    println!("{}", load.text());
    if let Some(path) = &a.json {
        let doc = serde_json::json!({
            "schema": "topocomm.tune-mpi/1",
            "meta": meta,
            "mpi": s.which.name(),
            "mpi_version": version,
            "layer": layer,
            "space": space,
            "classes": s.classes,
            "objective": s.objective,
            "search": result,
            "file": s.out.display().to_string(),
            "load": load,
            "verification": verification_json(score, feasible, &verdicts, &d, &t, &readback),
        });
        let text = serde_json::to_string_pretty(&doc)?;
        topocomm_report::write_atomic(path, text.as_bytes())
            .with_context(|| format!("--json {}", path.display()))?;
    }
    if readback.iter().any(|r| !r.ok) {
        bail!(
            "{}: some values did not take effect in {} (see the read-back table)",
            s.out.display(),
            s.which.name()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The 1-minute load average (`/proc/loadavg`), to report how busy the
/// machine was: other processes competing for the PUs are the main noise.
fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Appends the samples of `more` to the matching lines of `acc`.
fn pool(acc: &mut Vec<ClassMeasure>, more: Vec<ClassMeasure>) {
    if acc.is_empty() {
        *acc = more;
        return;
    }
    for (a, m) in acc.iter_mut().zip(more) {
        for l in m.lines {
            match a
                .lines
                .iter_mut()
                .find(|x| x.test == l.test && x.size == l.size)
            {
                Some(x) => x.samples.extend(l.samples),
                None => a.lines.push(l),
            }
        }
    }
}

/// How busy the machine was during the run.
#[derive(Debug, serde::Serialize)]
struct Load {
    pus: usize,
    start: Option<f64>,
    end: Option<f64>,
}

impl Load {
    fn text(&self) -> String {
        let f = |x: Option<f64>| x.map_or_else(|| "?".to_string(), |v| format!("{v:.2}"));
        format!(
            "machine load (1-min load average) {} at the start, {} at the end, on {} usable PUs{}",
            f(self.start),
            f(self.end),
            self.pus,
            if self.start.unwrap_or(0.0).max(self.end.unwrap_or(0.0)) > self.pus as f64 {
                ": other processes competed for the PUs, medians are unreliable"
            } else {
                ""
            }
        )
    }
}

fn which_exists(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(prog))
            .find(|p| p.is_file())
    })
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    topocomm_report::write_atomic(path, text.as_bytes())
        .with_context(|| format!("--out {}", path.display()))
}

/// The `verification` object of the JSON output.
fn verification_json(
    score: f64,
    feasible: bool,
    verdicts: &[ClassVerdict],
    defaults: &[ClassMeasure],
    tuned: &[ClassMeasure],
    readback: &[ReadBack],
) -> serde_json::Value {
    serde_json::json!({
        "score": score,
        "feasible": feasible,
        "classes": verdicts,
        "defaults": defaults,
        "tuned": tuned,
        "readback": readback,
    })
}

/// The runner of the verification: the search's, with 6 more samples.
fn verification_runner(runner: &Runner, params: &P2pParams) -> Runner {
    Runner {
        bw: P2pParams {
            samples: params.samples + 6,
            ..runner.bw.clone()
        },
        latency: runner.latency.clone().map(|p| P2pParams {
            samples: params.samples + 6,
            ..p
        }),
        ..runner.clone()
    }
}

/// `--verify FILE`: the verification and read-back of an existing export,
/// without a search. The file is only read.
#[allow(clippy::too_many_arguments)]
fn verify_only(
    m: &Machine,
    s: &Setup,
    layer: Layer,
    build: &Path,
    runner: &Runner,
    weights: &[f64],
    file: &Path,
    Export { values, env }: Export,
    a: &MpiArgs,
    load_start: Option<f64>,
) -> Result<ExitCode> {
    let shown = file.display().to_string();
    eprintln!(
        "verifying {} ({} value(s)) against the defaults of {}",
        file.display(),
        values.len(),
        s.which.name()
    );
    let Verification {
        defaults: d,
        tuned: t,
        verdicts,
        clean,
        once,
        noise,
    } = verify_alternating(
        &verification_runner(runner, &s.params),
        &env,
        2,
        file,
        &s.objective,
        weights,
        None,
    )?;
    let (score, feasible) = combine(&verdicts, weights);
    let load = Load {
        pus: topocomm_measure::pin::allowed_pus().map_or(0, |p| p.len()),
        start: load_start,
        end: loadavg(),
    };
    let readback = verify_file(s.which, layer, build, file, &values).map_err(|e| anyhow!(e))?;
    let sources = if s.which == MpiImpl::OpenMpi && layer == Layer::Vader && !values.is_empty() {
        let names: Vec<String> = values.iter().map(|(k, _)| k.clone()).collect();
        ompi_info_sources(file, &names).unwrap_or_default()
    } else {
        Vec::new()
    };
    print_verdicts(s, &verdicts);
    if values.is_empty() {
        println!(
            "\n({} sets nothing: an A/A test; the differences are the machine's noise)",
            file.display()
        );
    }
    print_summary(&verdicts, score, feasible, &s.objective);
    print_evidence(&verdicts, &once, &noise);
    print_readback(&readback, &sources);
    println!("{}", load.text());
    if let Some(path) = &a.json {
        let doc = serde_json::json!({
            "schema": "topocomm.tune-mpi/1",
            "meta": RunMeta::new(m, topocomm_measure::timer::check()),
            "mpi": s.which.name(),
            "mpi_version": mpi_version(s.which),
            "layer": layer,
            "classes": s.classes,
            "objective": s.objective,
            "file": shown,
            "load": load,
            "verification": verification_json(score, feasible, &verdicts, &d, &t, &readback),
        });
        topocomm_report::write_atomic(path, serde_json::to_string_pretty(&doc)?.as_bytes())
            .with_context(|| format!("--json {}", path.display()))?;
    }
    if readback.iter().any(|r| !r.ok) {
        bail!(
            "{}: some values did not take effect in {} (see the read-back table)",
            file.display(),
            s.which.name()
        );
    }
    if !clean && feasible && !values.is_empty() {
        println!("not confirmed: {}", rejection(feasible, clean, score));
    }
    // A file that sets nothing cannot make anything slower: an A/A test.
    Ok(if clean || values.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Why the verification did not confirm a setting.
fn rejection(feasible: bool, clean: bool, score: f64) -> String {
    if !feasible || !clean {
        "some size is slower than default beyond the A/A noise".into()
    } else {
        format!("gain x{score:.2} is not above x{:.2}", 1.0 + MIN_GAIN)
    }
}

/// What the alternating verification measured.
struct Verification {
    /// Pooled samples of the defaults and of the file, per class.
    defaults: Vec<ClassMeasure>,
    tuned: Vec<ClassMeasure>,
    /// Pooled comparison under the noise rule; a size is marked slower when
    /// it is slower pooled or in at least two alternations (`established`).
    verdicts: Vec<ClassVerdict>,
    /// No size slower (established): what a file must pass to be kept.
    clean: bool,
    /// Evidence of sizes slower in one alternation only (not established).
    once: Vec<String>,
    /// The A/A noise the rule used (this verification's jobs of the
    /// defaults, plus the search's when there was one).
    noise: NoiseFloor,
}

/// Defaults and `file_env` measured alternately `reps` times (D, T, D, T),
/// samples pooled per setting, so that a load change during one job biases
/// both sides alike. Consecutive jobs of the defaults are the A/A pairs of
/// the noise rule (merged with the search's, `prior`). Before a size is
/// declared slower, one more alternation is measured (the re-measurement);
/// a size is then slower when it is slower in the pooled samples or in at
/// least two alternations. Every size is judged (no scope here).
fn verify_alternating(
    runner: &Runner,
    file_env: &[(String, String)],
    reps: usize,
    file: &Path,
    obj: &Objective,
    weights: &[f64],
    prior: Option<&NoiseFloor>,
) -> Result<Verification> {
    let mut d_jobs: Vec<Vec<ClassMeasure>> = Vec::new();
    let mut t_jobs: Vec<Vec<ClassMeasure>> = Vec::new();
    let measure_pair = || -> Result<_> {
        let d1 = runner
            .measure_env(Vec::new(), &mut |_| {})
            .map_err(|e| anyhow!("verification, defaults: {e}"))?;
        let t1 = runner
            .measure_env(file_env.to_vec(), &mut |_| {})
            .map_err(|e| anyhow!("verification, {}: {e}", file.display()))?;
        Ok((d1, t1))
    };
    let judge = |d_jobs: &[Vec<ClassMeasure>], t_jobs: &[Vec<ClassMeasure>]| {
        let mut noise = NoiseFloor::default();
        if let Some(p) = prior {
            noise.merge(p);
        }
        for w in d_jobs.windows(2) {
            noise.add_pair(&w[0], &w[1]);
        }
        let cmp = |d: &[ClassMeasure], t: &[ClassMeasure]| -> Vec<ClassVerdict> {
            d.iter()
                .zip(t)
                .enumerate()
                .map(|(i, (d, t))| {
                    let rule = Rule {
                        noise: Some((&noise, i)),
                        scope: None,
                    };
                    compare_with(d, t, obj, rule)
                })
                .collect()
        };
        let runs: Vec<Vec<ClassVerdict>> =
            d_jobs.iter().zip(t_jobs).map(|(d, t)| cmp(d, t)).collect();
        let (mut d, mut t) = (Vec::new(), Vec::new());
        for (dj, tj) in d_jobs.iter().zip(t_jobs) {
            pool(&mut d, dj.clone());
            pool(&mut t, tj.clone());
        }
        let mut verdicts = cmp(&d, &t);
        let once = established(&mut verdicts, &runs);
        let clean = combine(&verdicts, weights).1;
        let any_run_slower = runs.iter().any(|r| !combine(r, weights).1);
        (
            Verification {
                defaults: d,
                tuned: t,
                verdicts,
                clean,
                once,
                noise,
            },
            any_run_slower,
        )
    };
    for rep in 1..=reps {
        eprintln!(
            "verification {rep}/{reps}: defaults, then {}",
            file.display()
        );
        let (mut d1, mut t1) = measure_pair()?;
        let v: Vec<ClassVerdict> = d1
            .iter()
            .zip(&t1)
            .map(|(d, t)| compare_with(d, t, obj, Rule::default()))
            .collect();
        if job_level_shift(&v).is_some() {
            // Every size moved together: one of the two jobs most likely ran
            // in another machine mode. Measured again, once; a setting that
            // really moves everything does so again.
            eprintln!(
                "verification {rep}/{reps}: every size moved together (a machine event?): measuring this pair again"
            );
            (d1, t1) = measure_pair()?;
        }
        d_jobs.push(d1);
        t_jobs.push(t1);
    }
    let (v, any_run_slower) = judge(&d_jobs, &t_jobs);
    if v.clean && !any_run_slower {
        return Ok(v);
    }
    // A size looked slower (pooled, or in one alternation): measured again
    // once before the verdict.
    eprintln!(
        "verification: a size looked slower than default beyond the A/A noise: measuring one more alternation before the verdict"
    );
    let (d1, t1) = measure_pair()?;
    d_jobs.push(d1);
    t_jobs.push(t1);
    Ok(judge(&d_jobs, &t_jobs).0)
}

/// An exported file, read once: its values (syntax-checked) and the
/// environment that makes an MPI job read it the way the file's users
/// would. Open MPI reads the MCA file itself (as `mpirun --tune` makes it
/// do, on top of its default files); MPICH's variables are what
/// `source FILE` would export.
struct Export {
    values: Vec<(String, String)>,
    env: Vec<(String, String)>,
}

fn read_export(which: MpiImpl, path: &Path) -> Result<Export> {
    let abs = path
        .canonicalize()
        .with_context(|| format!("{}", path.display()))?;
    let text = std::fs::read_to_string(&abs).with_context(|| format!("{}", abs.display()))?;
    let shown = abs.display().to_string();
    Ok(match which {
        MpiImpl::OpenMpi => Export {
            values: parse_mca_file(&shown, &text).map_err(|e| anyhow!(e))?,
            env: openmpi_file_env(&abs),
        },
        MpiImpl::Mpich => {
            let values = parse_env_file(&shown, &text).map_err(|e| anyhow!(e))?;
            Export {
                env: values.clone(),
                values,
            }
        }
    })
}

fn gains_text(v: &ClassVerdict, obj: &Objective) -> String {
    v.sizes
        .iter()
        .filter(|s| s.test == "bw" && obj.contains(s.size))
        .map(|s| format!("{} x{:.2}", size_label(s.size), s.gain))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One entry per parameter the search moved, with why (from the step that
/// adopted its final value).
fn entries_for(space: &Space, r: &SearchResult, obj: &Objective) -> Vec<Entry> {
    let mut out = Vec::new();
    for (name, value) in &r.best {
        let prm = space.param(name);
        let mut why = Vec::new();
        if let Some(p) = prm {
            why.push(format!("{name}: {} (default {}).", p.what, p.default));
        }
        let adopted = |a: &&Adoption| a.moved.iter().any(|(k, _)| k == name);
        if let Some(ad) = r.adoptions.iter().rev().find(adopted) {
            if let Some(p) = &ad.preset {
                why.push(format!("Set with the preset \"{p}\"."));
            }
            why.push(format!(
                "Chosen in round {}: weighted bw gain over {} vs the defaults went x{:.2} -> x{:.2}",
                ad.round,
                obj.label(),
                ad.score_before,
                ad.score_after
            ));
            for v in &ad.verdicts {
                why.push(format!("  {}: {}", v.class, gains_text(v, obj)));
            }
            why.push(format!(
                "  and no measured size it can change (bw, latency <= 4K) slower beyond the A/A noise (the whole 95% interval of the slowdown above 1 + max({:.0}%, noise)).",
                TOLERANCE * 100.0
            ));
        }
        out.push(Entry {
            name: name.clone(),
            value: value.clone(),
            why,
        });
    }
    out
}

fn header_lines(
    meta: &RunMeta,
    version: &str,
    layer: Layer,
    s: &Setup,
    out_arg: &Option<PathBuf>,
    verified: Option<(&[ClassVerdict], f64, bool)>,
    load: Option<&Load>,
) -> Vec<String> {
    let f = out_arg
        .as_ref()
        .map_or_else(|| s.out.display().to_string(), |p| p.display().to_string());
    let mut h = vec![
        format!("Tuned shared-memory settings for {version}, written by topocomm {} (topocomm tune --mpi {}).", meta.version, s.which.name()),
        format!(
            "Machine: {} ({}), topology {}; measured on {}.",
            meta.hostname.clone().unwrap_or_default(),
            meta.cpu_model.clone().unwrap_or_else(|| "unknown CPU".into()),
            meta.fingerprint,
            s.classes
                .iter()
                .map(|c| format!("{} pair {},{} weight {:.2}", c.class, c.pair.0, c.pair.1, c.weight))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        format!("Command: {}", meta.command.join(" ")),
    ];
    h.push(match layer {
        Layer::Vader => format!(
            "Use: mpirun --tune {f} ...   or   export OMPI_MCA_mca_base_envar_file_prefix={f} (Open MPI 4.1; pml ob1, btl vader).\nNot OMPI_MCA_mca_base_param_files={f} alone: it replaces the default files (Debian's /etc/openmpi/openmpi-mca-params.conf excludes pml ucx, btl uct/ofi; without it Open MPI picks pml cm, ~40x slower here)."
        ),
        Layer::OmpiUcx => format!(
            "Use: mpirun --tune {f} ...   or   export OMPI_MCA_mca_base_envar_file_prefix={f} (pml ucx: mca_base_env_list exports the UCX variables to every rank)."
        ),
        Layer::MpichUcx => format!(
            "Use: source {f} (or . {f}) before mpiexec/mpirun.mpich; Hydra passes the environment to every rank."
        ),
    });
    match verified {
        None => h.push("Verification pending.".into()),
        Some((vs, score, feasible)) => {
            h.push(String::new());
            h.push(format!(
                "Verified (defaults vs this file, same run): weighted bw gain over {} x{score:.2}; {}.",
                s.objective.label(),
                if feasible {
                    "no size slower beyond the A/A noise".to_string()
                } else {
                    "SOME SIZE IS SLOWER THAN DEFAULT beyond the A/A noise (see below)".to_string()
                }
            ));
            if let Some(l) = load {
                h.push(l.text());
            }
            for v in vs {
                h.push(format!(
                    "{} (median GB/s or us, default -> tuned, gain [95% interval], A/A noise):",
                    v.class
                ));
                for c in &v.sizes {
                    let (lo, hi) = gain_interval(c);
                    h.push(format!(
                        "  {:<7} {:>5}  {:>9.3} -> {:>9.3}  x{:.2} [{:.2}, {:.2}]  {:.0}%{}",
                        c.test,
                        size_label(c.size),
                        c.default.median,
                        c.tuned.median,
                        c.gain,
                        lo,
                        hi,
                        c.noise * 100.0,
                        if c.slower { "  SLOWER" } else { "" }
                    ));
                }
            }
        }
    }
    h
}

/// What the search tried, so that "nothing to set" is explained too.
fn tried_lines(r: &SearchResult, obj: &Objective) -> Vec<String> {
    let mut h = vec![
        String::new(),
        format!(
            "Search: {} jobs in {} round(s){}; each candidate vs defaults measured just before it (x = weighted bw gain over {}):",
            r.steps.len(),
            r.rounds,
            if r.budget_exhausted { ", stopped by the time budget" } else { "" },
            obj.label()
        ),
    ];
    for st in r.steps.iter().filter(|s| s.role != "defaults") {
        h.push(format!(
            "  round {} {:<12} {:<60} x{:.2}{}",
            st.round,
            st.role,
            describe(&st.setting),
            st.score,
            match (&st.error, st.feasible) {
                (Some(_), _) => " failed",
                (None, false) => " rejected (a size slower beyond the A/A noise)",
                _ => "",
            }
        ));
        for e in &st.slower {
            h.push(format!("      slower: {e}"));
        }
        for e in &st.out_of_scope {
            h.push(format!("      out of scope (not vetoing): {e}"));
        }
    }
    h
}

/// The gain's 95% interval: the inverse of the slowdown's.
fn gain_interval(c: &topocomm_mpitune::objective::SizeCompare) -> (f64, f64) {
    (1.0 / c.slowdown_ci.1, 1.0 / c.slowdown_ci.0)
}

/// The rule, and the evidence of every size it found slower (or slower in
/// one alternation only).
fn print_evidence(verdicts: &[ClassVerdict], once: &[String], noise: &NoiseFloor) {
    println!(
        "rule: a size is slower when the whole 95% interval of its slowdown lies above 1 + max({:.0}%, the A/A noise at that size); A/A noise from {} pair(s) of default jobs in this run",
        TOLERANCE * 100.0,
        noise.pairs
    );
    for v in verdicts {
        for c in v.sizes.iter().filter(|c| c.slower) {
            println!(
                "slower: {}",
                topocomm_mpitune::objective::evidence(&v.class, c)
            );
        }
    }
    for e in once {
        println!("slower in one alternation only (not established): {e}");
    }
}

fn ci(s: &topocomm_measure::Summary) -> String {
    let digits = if s.median < 1.0 { 3 } else { 2 };
    format!(
        "{:.*} [{:.*}, {:.*}]",
        digits, s.median, digits, s.ci_low, digits, s.ci_high
    )
}

fn print_report(
    s: &Setup,
    verdicts: &[ClassVerdict],
    readback: &[ReadBack],
    sources: &[(String, String)],
    score: f64,
    feasible: bool,
    result: &SearchResult,
) {
    print_verdicts(s, verdicts);
    if result.best.is_empty() {
        println!(
            "\n(no setting beat the defaults: both columns are the defaults, an A/A test; their differences are the machine's noise)"
        );
    }
    print_summary(verdicts, score, feasible, &s.objective);
    println!(
        "search: {} measurements, {} round(s){}; settings: {}",
        result.steps.len(),
        result.rounds,
        if result.budget_exhausted {
            " (time budget reached)"
        } else {
            ""
        },
        describe(&result.best)
    );
    println!("wrote {}", s.out.display());
    print_readback(readback, sources);
}

/// The side-by-side table of each class.
fn print_verdicts(s: &Setup, verdicts: &[ClassVerdict]) {
    for v in verdicts {
        println!(
            "\n{} — class {} (median [95% CI]; bw in GB/s, latency in us)",
            s.which.name(),
            v.class
        );
        let rows: Vec<Vec<String>> = v
            .sizes
            .iter()
            .map(|c| {
                let (lo, hi) = gain_interval(c);
                vec![
                    c.test.clone(),
                    size_label(c.size),
                    ci(&c.default),
                    ci(&c.tuned),
                    format!("x{:.2} [{lo:.2}, {hi:.2}]", c.gain),
                    format!("{:.0}%", c.noise * 100.0),
                    if c.slower {
                        "slower".into()
                    } else if c.gain < 1.0 - TOLERANCE {
                        "within noise".into()
                    } else {
                        String::new()
                    },
                ]
            })
            .collect();
        print!(
            "{}",
            text_table(
                &[
                    "test",
                    "size",
                    "default",
                    "tuned",
                    "gain [95%]",
                    "A/A noise",
                    "note"
                ],
                &rows
            )
        );
    }
}

/// The weighted gain, the verdict and the noise floor.
fn print_summary(verdicts: &[ClassVerdict], score: f64, feasible: bool, obj: &Objective) {
    println!(
        "\nweighted bw gain over {}: x{score:.2} (geometric mean); {}",
        obj.label(),
        if feasible {
            "no size slower than default beyond the A/A noise"
        } else {
            "some size is slower than default beyond the A/A noise"
        }
    );
    let noise: Vec<f64> = verdicts
        .iter()
        .flat_map(|v| v.sizes.iter().map(|c| c.default.relative_ci()))
        .collect();
    if let Some(max) = noise.iter().copied().reduce(f64::max) {
        let mut sorted = noise.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "noise: CI half-width of the default medians {:.0}% median, {:.0}% worst",
            sorted[sorted.len() / 2] * 100.0,
            max * 100.0
        );
    }
}

/// What the MPI read back from the file.
fn print_readback(readback: &[ReadBack], sources: &[(String, String)]) {
    if !readback.is_empty() {
        let rows: Vec<Vec<String>> = readback
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.expected.clone(),
                    r.read.clone().unwrap_or_else(|| "-".into()),
                    r.how.clone(),
                    if r.ok { "ok" } else { "NOT APPLIED" }.into(),
                ]
            })
            .collect();
        println!("read-back under the file:");
        print!(
            "{}",
            text_table(&["name", "file", "read", "how", "status"], &rows)
        );
    }
    for (v, src) in sources {
        println!("ompi_info: {v} (source: {src})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_mpi_names_are_one_line_errors() {
        let e = parse_mpi("intelmpi").unwrap_err().to_string();
        assert!(
            e.contains("--mpi 'intelmpi'") && e.contains("openmpi or mpich"),
            "{e}"
        );
        assert_eq!(parse_mpi("mpich").unwrap(), MpiImpl::Mpich);
    }
}
