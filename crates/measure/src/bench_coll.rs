//! `topocomm bench coll` without its command line: osu-style collective
//! latency of `mpi/bench/std_coll` (standard MPI only) run plain and under
//! `topocomm accel`, for each MPI of `--vs`, as independent interleaved
//! jobs. The plan (what to run, validated), the run (bounded jobs, a failed
//! job recorded with its stderr tail) and the raw per-job results are here;
//! the statistics, tables, plots and the result document
//! (`topocomm.bench.coll/1`, docs/formats/bench-coll-json.md) are in
//! [`crate::coll_summary`].

use crate::backends::{locate_mpi_build, parse_peers, MpiImpl};
use crate::p2p::parse_sizes;
use crate::procrun::run_bounded;
use crate::Error;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use thiserror::Error;

/// The collectives std_coll measures, in its order.
pub const COLLECTIVES: [&str; 8] = [
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "gather",
    "scatter",
    "allgather",
    "alltoall",
];

/// The default `--collectives`.
pub const DEFAULT_COLLECTIVES: &str = "barrier,bcast,reduce,allreduce,allgather,alltoall";

/// The default `--sizes` (bytes; per rank for allgather and alltoall).
pub const DEFAULT_SIZES: &str = "8,1K,64K,1M";

/// The two configurations of every MPI.
pub const CONFIGS: [&str; 2] = ["plain", "accel"];

/// Why a run could not be planned or produced nothing; every message names
/// the argument at fault, as the CLI prints it.
#[derive(Debug, Error)]
pub enum BenchCollError {
    #[error("--np {value}: expected a number of ranks from 2 to 1024")]
    Np { value: u32 },
    #[error("--np {np}: more ranks than the {cpus} usable CPUs; add --oversubscribe (ranks then run unbound)")]
    NeedsOversubscribe { np: u32, cpus: usize },
    #[error("--collectives: unknown collective '{name}' (expected {})", COLLECTIVES.join(", "))]
    UnknownCollective { name: String },
    #[error("--collectives: '{name}' given twice")]
    DuplicateCollective { name: String },
    #[error("--collectives: empty list (expected {})", COLLECTIVES.join(", "))]
    NoCollective,
    #[error("--sizes: {cause}")]
    Sizes { cause: Error },
    #[error("--sizes {size}: std_coll takes sizes up to 1 GiB")]
    SizeTooLarge { size: u64 },
    #[error("--jobs {value}: expected a number of jobs from 1 to 1000")]
    Jobs { value: u32 },
    #[error("--vs: {cause}")]
    Peers { cause: Error },
    #[error("--vs '{value}': bench coll compares against at least one MPI (openmpi, mpich)")]
    NoPeers { value: String },
    #[error("--time-ms {value}: expected a number of milliseconds in (0, 10000]")]
    TimeMs { value: f64 },
    #[error("--reps {value}: expected 1 to 101 timed batches")]
    Reps { value: u32 },
    #[error("--timeout 0: expected a number of seconds >= 1")]
    Timeout,
    /// The per-MPI build folder is missing.
    #[error(transparent)]
    Build(Error),
    /// A program of the per-MPI build is missing.
    #[error("{} not found; build it with `make -C mpi` (after `cargo build --release`)", .path.display())]
    Missing { path: PathBuf },
    /// No job succeeded.
    #[error("every job failed (see the messages above)")]
    AllFailed,
}

impl BenchCollError {
    /// An argument that cannot be used (exit status 2), not a failed run.
    pub fn is_usage(&self) -> bool {
        !matches!(
            self,
            BenchCollError::Build(_) | BenchCollError::Missing { .. } | BenchCollError::AllFailed
        )
    }
}

/// The options of a run as given (`None`: the default).
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub np: u32,
    pub collectives: Option<String>,
    pub sizes: Option<String>,
    pub jobs: u32,
    /// `None`: [`default_vs`].
    pub vs: Option<String>,
    pub oversubscribe: bool,
    pub time_ms: f64,
    pub reps: u32,
    pub timeout: Option<u64>,
    pub resamples: u32,
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            np: 2,
            collectives: None,
            sizes: None,
            jobs: 5,
            vs: None,
            oversubscribe: false,
            time_ms: 10.0,
            reps: 5,
            timeout: None,
            resamples: 2000,
            seed: 1,
        }
    }
}

/// A validated run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub np: u32,
    pub collectives: Vec<String>,
    pub sizes: Vec<u64>,
    pub jobs: u32,
    #[serde(serialize_with = "ser_impls")]
    pub impls: Vec<MpiImpl>,
    /// Ranks bound one per core (`core`), or left unbound (`none`,
    /// `--oversubscribe`).
    pub bind: String,
    pub oversubscribe: bool,
    pub time_ms: f64,
    pub reps: u32,
    pub timeout_s: u64,
    pub resamples: u32,
    pub seed: u64,
}

fn ser_impls<S: serde::Serializer>(v: &[MpiImpl], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|m| m.name()))
}

/// The collectives of `--collectives`, in the order given.
pub fn parse_collectives(text: &str) -> Result<Vec<String>, BenchCollError> {
    let mut out: Vec<String> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if !COLLECTIVES.contains(&part) {
            return Err(BenchCollError::UnknownCollective { name: part.into() });
        }
        if out.iter().any(|c| c == part) {
            return Err(BenchCollError::DuplicateCollective { name: part.into() });
        }
        out.push(part.into());
    }
    if out.is_empty() {
        return Err(BenchCollError::NoCollective);
    }
    Ok(out)
}

/// Why MPICH is left out of an oversubscribed run unless `--vs` names it.
pub const MPICH_CROWDED_NOTE: &str = "MPICH not compared (--vs openmpi,mpich to run it): with \
     more ranks than CPUs its collectives poll without yielding the CPU, and a call takes \
     milliseconds (8 ranks on 2 vCPUs, MPICH 4.0: barrier 37 ms, 8-byte allreduce 23 ms, against \
     Open MPI's 15-16 us), so its jobs run into the timeout";

/// The MPIs compared when `--vs` is not given: both, but Open MPI alone
/// with `--oversubscribe` ([`MPICH_CROWDED_NOTE`]: such runs spent 85 s per
/// MPICH job before the timeout killed it, for nothing to compare).
pub fn default_vs(oversubscribe: bool) -> &'static str {
    if oversubscribe {
        "openmpi"
    } else {
        "openmpi,mpich"
    }
}

/// The line to say when the default left MPICH out ([`default_vs`]).
pub fn default_vs_note(o: &Options) -> Option<&'static str> {
    (o.vs.is_none() && o.oversubscribe).then_some(MPICH_CROWDED_NOTE)
}

/// Checks the options against this machine's `cpus` usable CPUs.
pub fn plan(o: &Options, cpus: usize) -> Result<Plan, BenchCollError> {
    if !(2..=1024).contains(&o.np) {
        return Err(BenchCollError::Np { value: o.np });
    }
    if o.np as usize > cpus && !o.oversubscribe {
        return Err(BenchCollError::NeedsOversubscribe { np: o.np, cpus });
    }
    let collectives = parse_collectives(o.collectives.as_deref().unwrap_or(DEFAULT_COLLECTIVES))?;
    let sizes = parse_sizes(o.sizes.as_deref().unwrap_or(DEFAULT_SIZES))
        .map_err(|cause| BenchCollError::Sizes { cause })?;
    if let Some(&s) = sizes.iter().find(|&&s| s > 1 << 30) {
        return Err(BenchCollError::SizeTooLarge { size: s });
    }
    if !(1..=1000).contains(&o.jobs) {
        return Err(BenchCollError::Jobs { value: o.jobs });
    }
    let vs = o.vs.as_deref().unwrap_or(default_vs(o.oversubscribe));
    // `none` (bench p2p's way to measure no peer) and an empty list alike:
    // parse_peers' own message for the empty one points to `none`.
    if vs.trim() == "none" || vs.split(',').all(|p| p.trim().is_empty()) {
        return Err(BenchCollError::NoPeers { value: vs.into() });
    }
    let impls = parse_peers(vs).map_err(|cause| BenchCollError::Peers { cause })?;
    if !(o.time_ms > 0.0 && o.time_ms <= 10_000.0) {
        return Err(BenchCollError::TimeMs { value: o.time_ms });
    }
    if !(1..=101).contains(&o.reps) {
        return Err(BenchCollError::Reps { value: o.reps });
    }
    if o.timeout == Some(0) {
        return Err(BenchCollError::Timeout);
    }
    // Points of one job: barrier has no size.
    let points: usize = collectives
        .iter()
        .map(|c| if c == "barrier" { 1 } else { sizes.len() })
        .sum();
    // A batch lasts about time_ms, plus a probe batch and the data check;
    // ten times that and a minute for the launch and the check's large sizes.
    let planned = points as f64 * (o.reps as f64 + 1.0) * o.time_ms / 1000.0;
    let timeout_s = o.timeout.unwrap_or(60 + (10.0 * planned).ceil() as u64);
    Ok(Plan {
        np: o.np,
        collectives,
        sizes,
        jobs: o.jobs,
        impls,
        bind: if o.oversubscribe { "none" } else { "core" }.into(),
        oversubscribe: o.oversubscribe,
        time_ms: o.time_ms,
        reps: o.reps,
        timeout_s,
        resamples: o.resamples,
        seed: o.seed,
    })
}

/// The programs a run needs: `std_coll` per MPI and the `topocomm`
/// binary that runs `accel`.
#[derive(Clone, Debug)]
pub struct Programs {
    pub topocomm: PathBuf,
    /// `<build>/<impl>/std_coll` per MPI of the plan, in its order.
    pub std_coll: Vec<PathBuf>,
}

/// Finds std_coll and the accelerator library of every MPI of the plan
/// (the per-MPI build folder as every other MPI piece is found).
pub fn programs(p: &Plan, topocomm: &Path) -> Result<Programs, BenchCollError> {
    let build = locate_mpi_build(Some(topocomm)).map_err(BenchCollError::Build)?;
    let mut std_coll = Vec::new();
    for m in &p.impls {
        let dir = build.join(m.name());
        for f in ["std_coll", "libtopocomm-accel.so"] {
            if !dir.join(f).is_file() {
                return Err(BenchCollError::Missing { path: dir.join(f) });
            }
        }
        std_coll.push(dir.join("std_coll"));
    }
    Ok(Programs {
        topocomm: topocomm.to_path_buf(),
        std_coll,
    })
}

/// The argv of one job: `mpirun.<impl> ... std_coll ...`, behind
/// `topocomm accel --mpi <impl> --` for `accel`.
pub fn command(p: &Plan, progs: &Programs, which: MpiImpl, config: &str) -> Vec<String> {
    let idx = p.impls.iter().position(|&m| m == which).unwrap_or(0);
    let mut v: Vec<String> = Vec::new();
    if config == "accel" {
        v.push(progs.topocomm.display().to_string());
        v.extend(["accel", "--mpi", which.name(), "--"].map(String::from));
    }
    v.push(which.mpirun().into());
    v.extend(["-n".into(), p.np.to_string()]);
    match which {
        MpiImpl::OpenMpi => {
            v.extend(["--bind-to".into(), p.bind.clone()]);
            if p.oversubscribe {
                v.push("--oversubscribe".into());
            }
        }
        MpiImpl::Mpich => v.extend(["-bind-to".into(), p.bind.clone()]),
    }
    let sizes: Vec<String> = p.sizes.iter().map(u64::to_string).collect();
    v.push(progs.std_coll[idx].display().to_string());
    v.extend([
        "--json".into(),
        "--tests".into(),
        p.collectives.join(","),
        "--sizes".into(),
        sizes.join(","),
        "--time-ms".into(),
        p.time_ms.to_string(),
        "--reps".into(),
        p.reps.to_string(),
    ]);
    if !p.oversubscribe {
        // Where the host had ranks 0 and 1 (bound one per core) while each
        // point ran (coll_summary::Placement).
        v.extend(["--probe".into(), PROBE_PINGPONGS.to_string()]);
    }
    v
}

/// std_coll's `--probe`: 8-byte ping-pongs after each point.
const PROBE_PINGPONGS: u32 = 100;

/// One measured point of one job: std_coll's value (median over the
/// batches of the mean latency per call, averaged over the ranks, us) and
/// the per-batch values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub collective: String,
    pub size: u64,
    pub value_us: f64,
    pub samples_us: Vec<f64>,
    /// std_coll's `--probe`: the one-way time (us) of 8-byte ping-pongs
    /// between ranks 0 and 1 right after the point, through the library
    /// measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_us: Option<f64>,
}

/// One job: what ran, how it ended, what it measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job: u32,
    pub mpi: String,
    pub config: String,
    /// `ok` or `failed`.
    pub status: String,
    pub wall_s: f64,
    /// Why it failed (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The last lines of a failed job's stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
    /// std_coll's `meta` (library, ranks and their CPUs, data check).
    #[serde(default)]
    pub meta: serde_json::Value,
    pub results: Vec<Point>,
    /// Where the host had the CPUs of ranks 0 and 1 during the job: the
    /// points' `probe_us` (8-byte ping-pongs between ranks 0 and 1 through
    /// the library measured, after each point); ranks bound one per core
    /// only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe_us: Vec<f64>,
}

/// The one-way time (us, median of 5 samples of about 2 ms) of an 8-byte
/// cache-line ping-pong between two CPUs now; `None` when it cannot be
/// measured (a CPU this process may not use). A virtual machine's host
/// moves its vCPUs between near and distant physical cores from second to
/// second (on the 2-vCPU AMD EPYC VM: 0.02-0.05 us or 0.2-0.3 us), so
/// `bench p2p` classes each round of its limits by this probe just before
/// it (crate::p2p_placement). Jobs are classed by probes of their own: a
/// probe from outside reads where the host put the vCPUs while they idled
/// between jobs.
pub fn probe(pair: (u32, u32)) -> Option<f64> {
    let p = crate::limits::LimitParams {
        pair,
        cold: false,
        llc: 0,
        samples: 5,
        min_time: Duration::from_millis(2),
    };
    let mut v = crate::limits::latency(&p, 8).ok()?.samples;
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// The order of the configurations in job `j`: plain first in even jobs,
/// accel first in odd ones (neither always runs on a warmer machine).
pub fn order(j: u32) -> [&'static str; 2] {
    if j % 2 == 0 {
        CONFIGS
    } else {
        [CONFIGS[1], CONFIGS[0]]
    }
}

/// The last `n` non-empty lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Reads std_coll's JSON line from a job's stdout.
pub fn parse_std_coll(stdout: &str) -> Result<(serde_json::Value, Vec<Point>), String> {
    let line = stdout
        .lines()
        .rfind(|l| l.trim_start().starts_with("{\"benchmark\":\"std_coll\""))
        .ok_or("std_coll printed no JSON line")?;
    let doc: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|e| format!("std_coll's JSON: {e}"))?;
    if doc["meta"]["check"].as_str() == Some("failed") {
        return Err("std_coll's data check failed".into());
    }
    let mut points = Vec::new();
    for (coll, pts) in doc["results"]
        .as_object()
        .ok_or("std_coll's JSON: no results")?
    {
        for p in pts.as_array().into_iter().flatten() {
            let num = |k: &str| {
                p[k].as_f64()
                    .ok_or(format!("std_coll's JSON: {coll}: no {k}"))
            };
            let samples = p["samples"]
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
                .unwrap_or_default();
            points.push(Point {
                collective: coll.clone(),
                size: num("size")? as u64,
                value_us: num("value")?,
                samples_us: samples,
                probe_us: p["probe_us"].as_f64(),
            });
        }
    }
    Ok((doc["meta"].clone(), points))
}

/// Runs one job, bounded by the plan's timeout; a failure is a record.
pub fn run_job(p: &Plan, argv: &[String], job: u32, which: MpiImpl, config: &str) -> JobRecord {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    // Open MPI refuses root without these (containers, CI).
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let what = format!("{} {config} job {}", which.name(), job + 1);
    let mut rec = JobRecord {
        job,
        mpi: which.name().into(),
        config: config.into(),
        status: "failed".into(),
        wall_s: 0.0,
        reason: None,
        stderr_tail: None,
        meta: serde_json::Value::Null,
        results: Vec::new(),
        probe_us: Vec::new(),
    };
    match run_bounded(cmd, &what, Duration::from_secs(p.timeout_s)) {
        Err(e) => rec.reason = Some(e.to_string()),
        Ok(out) => {
            rec.wall_s = out.elapsed.as_secs_f64();
            let parsed = if out.status.success() {
                parse_std_coll(&out.stdout)
            } else {
                Err(format!("exited with {}", out.status))
            };
            match parsed {
                Ok((meta, points)) => {
                    rec.status = "ok".into();
                    rec.meta = meta;
                    rec.results = points;
                }
                Err(why) => {
                    rec.reason = Some(why);
                    rec.stderr_tail = Some(tail(&out.stderr, 8));
                }
            }
        }
    }
    rec
}

/// What a run reports as it goes.
pub enum Progress<'a> {
    Command {
        mpi: &'a str,
        config: &'a str,
        argv: &'a [String],
    },
    Job(&'a JobRecord),
}

/// Runs every job: for each job index, for each MPI, plain and accel in
/// the order of [`order`]. A failed job is a record (see [`check_any`]).
pub fn run(p: &Plan, progs: &Programs, progress: &mut dyn FnMut(Progress)) -> Vec<JobRecord> {
    for &m in &p.impls {
        for c in CONFIGS {
            let argv = command(p, progs, m, c);
            progress(Progress::Command {
                mpi: m.name(),
                config: c,
                argv: &argv,
            });
        }
    }
    let mut jobs = Vec::new();
    for j in 0..p.jobs {
        for &m in &p.impls {
            for c in order(j) {
                let mut rec = run_job(p, &command(p, progs, m, c), j, m, c);
                // The job's own probes, one per point (none oversubscribed:
                // the ranks are unbound).
                rec.probe_us = rec.results.iter().filter_map(|p| p.probe_us).collect();
                progress(Progress::Job(&rec));
                jobs.push(rec);
            }
        }
    }
    jobs
}

/// [`BenchCollError::AllFailed`] when no job succeeded.
pub fn check_any(jobs: &[JobRecord]) -> Result<(), BenchCollError> {
    if jobs.iter().any(|r| r.status == "ok") {
        Ok(())
    } else {
        Err(BenchCollError::AllFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options::default()
    }

    #[test]
    fn plan_checks_every_argument() {
        let p = plan(&opts(), 2).unwrap();
        assert_eq!(p.collectives.len(), 6);
        assert_eq!(p.sizes, vec![8, 1024, 65536, 1 << 20]);
        assert_eq!(p.bind, "core");
        let err = |o: Options| plan(&o, 2).unwrap_err().to_string();
        assert!(err(Options { np: 0, ..opts() }).starts_with("--np 0:"));
        assert!(err(Options { np: 4, ..opts() }).contains("--oversubscribe"));
        let o = Options {
            np: 4,
            oversubscribe: true,
            ..opts()
        };
        assert_eq!(plan(&o, 2).unwrap().bind, "none");
        // Oversubscribed, MPICH only when asked for, and said.
        assert_eq!(plan(&o, 2).unwrap().impls, [MpiImpl::OpenMpi]);
        assert_eq!(default_vs_note(&o), Some(MPICH_CROWDED_NOTE));
        assert_eq!(default_vs_note(&opts()), None);
        let asked = Options {
            vs: Some("openmpi,mpich".into()),
            ..o.clone()
        };
        assert_eq!(
            plan(&asked, 2).unwrap().impls,
            [MpiImpl::OpenMpi, MpiImpl::Mpich]
        );
        assert_eq!(default_vs_note(&asked), None);
        assert_eq!(
            plan(&opts(), 2).unwrap().impls,
            [MpiImpl::OpenMpi, MpiImpl::Mpich]
        );
        let e = err(Options {
            collectives: Some("bcast,scan".into()),
            ..opts()
        });
        assert!(
            e.starts_with("--collectives: unknown collective 'scan'"),
            "{e}"
        );
        let e = err(Options {
            collectives: Some("bcast,bcast".into()),
            ..opts()
        });
        assert!(e.contains("twice"), "{e}");
        let e = err(Options {
            sizes: Some("8,4X".into()),
            ..opts()
        });
        assert!(e.starts_with("--sizes: "), "{e}");
        assert!(err(Options {
            sizes: Some("2G".into()),
            ..opts()
        })
        .contains("1 GiB"));
        assert!(err(Options {
            vs: Some("none".into()),
            ..opts()
        })
        .starts_with("--vs 'none': "));
        // An empty list: no MPI named, and no pointer to `none` (which
        // bench coll refuses) as bench p2p's message gives.
        for vs in ["", " , "] {
            let e = err(Options {
                vs: Some(vs.into()),
                ..opts()
            });
            assert!(
                e.contains("at least one MPI") && !e.contains("use none"),
                "{e}"
            );
        }
        assert!(err(Options {
            vs: Some("lam".into()),
            ..opts()
        })
        .starts_with("--vs: "));
        assert!(err(Options { jobs: 0, ..opts() }).starts_with("--jobs 0"));
        assert!(err(Options {
            time_ms: 0.0,
            ..opts()
        })
        .starts_with("--time-ms"));
        assert!(plan(&Options { jobs: 0, ..opts() }, 2)
            .unwrap_err()
            .is_usage());
    }

    #[test]
    fn commands_wrap_the_plain_job() {
        let p = plan(
            &Options {
                vs: Some("mpich,openmpi".into()),
                ..opts()
            },
            2,
        )
        .unwrap();
        let progs = Programs {
            topocomm: "/bin/topocomm".into(),
            std_coll: vec!["/b/mpich/std_coll".into(), "/b/openmpi/std_coll".into()],
        };
        let plain = command(&p, &progs, MpiImpl::Mpich, "plain");
        assert_eq!(plain[..5], ["mpirun.mpich", "-n", "2", "-bind-to", "core"]);
        assert_eq!(plain[5], "/b/mpich/std_coll");
        let accel = command(&p, &progs, MpiImpl::OpenMpi, "accel");
        assert_eq!(
            accel[..5],
            ["/bin/topocomm", "accel", "--mpi", "openmpi", "--"]
        );
        assert!(accel.contains(&"/b/openmpi/std_coll".to_string()));
        assert_eq!(order(0), ["plain", "accel"]);
        assert_eq!(order(1), ["accel", "plain"]);
    }

    #[test]
    fn reads_std_coll_output() {
        let out = "# noise\n{\"benchmark\":\"std_coll\",\"meta\":{\"np\":2,\"check\":\"ok\"},\
                   \"results\":{\"barrier\":[{\"size\":0,\"value\":0.5,\"unit\":\"us\",\"iters\":9,\
                   \"samples\":[0.5,0.6]}],\"bcast\":[{\"size\":8,\"value\":0.25,\"samples\":[0.25]}]}}\n";
        let (meta, pts) = parse_std_coll(out).unwrap();
        assert_eq!(meta["np"], 2);
        assert_eq!(pts.len(), 2);
        assert_eq!(pts[0].samples_us, vec![0.5, 0.6]);
        assert!(parse_std_coll("nothing").is_err());
        let bad = out.replace("\"ok\"", "\"failed\"");
        assert!(parse_std_coll(&bad).unwrap_err().contains("data check"));
        assert_eq!(tail("a\n\nb\nc\n", 2), "b\nc");
    }
}
