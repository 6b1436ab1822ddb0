//! The producers of p2p sample lines for one PU pair: the physical limits
//! (in-process threads), tc_mpibench under Open MPI and MPICH (mpirun), and
//! topocomm's own transport (the `topocomm-worker` binary). Each is
//! one [`Backend`]; a backend that cannot run is reported by the caller, it
//! does not stop the others.

use crate::limits::{self, LimitParams};
use crate::p2p::{find_meta, verify_pinning, JobMeta, P2pParams, Test};
use crate::procrun::{last_error_line, run_bounded_with};
use crate::record::SampleLine;
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Environment variable naming the folder with `<impl>/tc_mpibench`.
pub const MPI_BUILD_ENV: &str = "TOPOCOMM_MPI_BUILD";

/// An MPI implementation installed as a Debian package.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpiImpl {
    OpenMpi,
    Mpich,
}

impl MpiImpl {
    pub const ALL: [MpiImpl; 2] = [MpiImpl::OpenMpi, MpiImpl::Mpich];

    pub fn name(self) -> &'static str {
        match self {
            MpiImpl::OpenMpi => "openmpi",
            MpiImpl::Mpich => "mpich",
        }
    }

    pub fn mpirun(self) -> &'static str {
        match self {
            MpiImpl::OpenMpi => "mpirun.openmpi",
            MpiImpl::Mpich => "mpirun.mpich",
        }
    }

    /// Launcher options that pin rank 0 on `p` and rank 1 on `q` (OS indexes).
    pub fn bind_args(self, (p, q): (u32, u32)) -> Vec<String> {
        match self {
            MpiImpl::OpenMpi => vec![
                "--cpu-list".into(),
                format!("{p},{q}"),
                "--bind-to".into(),
                "cpu-list:ordered".into(),
            ],
            MpiImpl::Mpich => vec!["-bind-to".into(), format!("user:{p},{q}")],
        }
    }
}

/// Parses `--vs`: `openmpi,mpich`, `openmpi`, or `none`.
pub fn parse_peers(text: &str) -> Result<Vec<MpiImpl>> {
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let m = MpiImpl::ALL
            .into_iter()
            .find(|m| m.name() == part)
            .ok_or_else(|| Error::UnknownPeer { name: part.into() })?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        return Err(Error::NoPeers);
    }
    Ok(out)
}

/// Where an installed `topocomm` keeps its per-MPI folders
/// (`<impl>/libtopocomm-*.so`, `<impl>/tc_mpibench`, ...), relative to the
/// prefix that holds its `bin/` (`make install`, docs/install.md).
pub const INSTALLED_MPI_DIR: &str = "lib/topocomm";

/// The folders that may hold the per-MPI builds (`<impl>/...`), in search
/// order, after `$TOPOCOMM_MPI_BUILD`: `<dir of exe>/../lib/topocomm` (an
/// installed `topocomm`, `make install`), `<dir of exe>/../../mpi/build` (a
/// checkout's `target/<profile>/topocomm`), `./mpi/build`. This is the one
/// list every lookup of the MPI pieces uses (the benchmark, `tune --mpi`,
/// and the libraries `trace` and `accel` preload).
pub fn mpi_build_candidates(exe: Option<&Path>) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(bin) = exe.and_then(Path::parent) {
        if let Some(prefix) = bin.parent() {
            v.push(prefix.join(INSTALLED_MPI_DIR));
            if let Some(root) = prefix.parent() {
                v.push(root.join("mpi/build"));
            }
        }
    }
    v.push(PathBuf::from("mpi/build"));
    v
}

/// Folder holding `openmpi/tc_mpibench` and `mpich/tc_mpibench`:
/// `$TOPOCOMM_MPI_BUILD` when set (an error when it is not a folder), else
/// the first of [`mpi_build_candidates`] that exists.
pub fn locate_mpi_build(exe: Option<&Path>) -> Result<PathBuf> {
    if let Some(d) = std::env::var_os(MPI_BUILD_ENV) {
        let d = PathBuf::from(d);
        if d.is_dir() {
            return Ok(d);
        }
        return Err(Error::MpiBuildNotFolder { path: d });
    }
    let tried = mpi_build_candidates(exe);
    for d in &tried {
        if d.is_dir() {
            return Ok(d.canonicalize().unwrap_or_else(|_| d.clone()));
        }
    }
    Err(Error::MpiBuildMissing { tried })
}

/// What one backend produced for one pair and cache mode.
#[derive(Clone, Debug)]
pub struct BackendRun {
    /// `topocomm`, `openmpi`, `mpich`, `limit`.
    pub name: String,
    pub lines: Vec<SampleLine>,
    /// Where the ranks ran, when the backend says.
    pub meta: Option<JobMeta>,
    /// Something the reader should know (e.g. pinning not verifiable).
    pub note: Option<String>,
    pub elapsed: Duration,
}

/// A producer of sample lines.
#[derive(Clone, Debug)]
pub enum Backend {
    /// topocomm's transport: `<worker> --bind P,Q -- ARGS`, where `worker`
    /// is the `topocomm-worker` binary (`topocomm_transport::worker`:
    /// launches two ranks of itself, like `topocomm run -n 2 --bind P,Q`).
    Topocomm { worker: PathBuf },
    /// tc_mpibench under an MPI, from the build folder; `env` is added to
    /// the job's environment (MCA parameters, CVARs, UCX variables being
    /// tuned by `topocomm tune --mpi`; empty for default settings).
    Mpi {
        which: MpiImpl,
        build: PathBuf,
        env: Vec<(String, String)>,
    },
    /// The physical limits (latency and bw only).
    Limit,
}

impl Backend {
    pub fn name(&self) -> &str {
        match self {
            Backend::Topocomm { .. } => "topocomm",
            Backend::Mpi { which, .. } => which.name(),
            Backend::Limit => limits::IMPL,
        }
    }

    /// Runs the backend on `pair` with a time bound (job backends only).
    pub fn run(
        &self,
        pair: (u32, u32),
        params: &P2pParams,
        timeout: Duration,
        progress: &mut dyn FnMut(&str),
    ) -> Result<BackendRun> {
        let start = std::time::Instant::now();
        match self {
            Backend::Limit => {
                let lines = run_limits(pair, params, progress)?;
                Ok(BackendRun {
                    name: self.name().into(),
                    lines,
                    meta: None,
                    note: None,
                    elapsed: start.elapsed(),
                })
            }
            Backend::Mpi { which, build, env } => {
                let bin = build.join(which.name()).join("tc_mpibench");
                if !bin.is_file() {
                    return Err(Error::MpiBenchMissing { path: bin });
                }
                let mut cmd = Command::new(which.mpirun());
                cmd.args(["-n", "2"])
                    .args(which.bind_args(pair))
                    .arg(&bin)
                    .args(params.worker_args())
                    .args(["--impl", which.name()]);
                if *which == MpiImpl::OpenMpi {
                    // Open MPI refuses root without these (containers, CI).
                    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
                }
                cmd.envs(env.iter().map(|(k, v)| (k, v)));
                run_job(cmd, which.name(), pair, params, timeout, true, progress)
            }
            Backend::Topocomm { worker } => {
                let mut cmd = Command::new(worker);
                cmd.args(["--bind", &format!("{},{}", pair.0, pair.1), "--"])
                    .args(params.worker_args());
                run_job(cmd, "topocomm", pair, params, timeout, false, progress)
            }
        }
    }
}

/// Runs a 2-rank job, checks its pinning and parses its sample lines.
/// `require_meta`: refuse a job that does not say where its ranks ran.
fn run_job(
    cmd: Command,
    name: &str,
    pair: (u32, u32),
    params: &P2pParams,
    timeout: Duration,
    require_meta: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<BackendRun> {
    let mut on_line = |line: &str| {
        if let Ok(l) = serde_json::from_str::<SampleLine>(line) {
            progress(&format!("{} {} {} B", name, l.test, l.size));
        }
    };
    let out = run_bounded_with(cmd, name, timeout, &mut on_line)?;
    if !out.status.success() {
        return Err(Error::JobFailed {
            name: name.into(),
            status: out.status,
            line: last_error_line(&out.stderr),
        });
    }
    let meta = find_meta(&out.stderr).or_else(|| find_meta(&out.stdout));
    let note = match &meta {
        Some(m) => {
            verify_pinning(m, pair, name)?;
            None
        }
        None if require_meta => return Err(Error::NoPinningMeta { name: name.into() }),
        None => Some(format!(
            "{name}: pinning not verified (the job printed no meta line)"
        )),
    };
    let lines = SampleLine::parse_all(
        &out.stdout
            .lines()
            .filter(|l| !l.contains("_meta\""))
            .collect::<Vec<_>>()
            .join("\n"),
        name,
    )?;
    check_complete(&lines, name, params)?;
    Ok(BackendRun {
        name: name.into(),
        lines,
        meta,
        note,
        elapsed: out.elapsed,
    })
}

/// Every requested (test, size) is present once, with the expected impl,
/// cache, unit and number of samples.
pub fn check_complete(lines: &[SampleLine], name: &str, params: &P2pParams) -> Result<()> {
    for l in lines {
        if l.implementation != name || l.cache != params.cache() {
            return Err(Error::ForeignLine {
                name: name.into(),
                implementation: l.implementation.clone(),
                cache: l.cache.clone(),
            });
        }
        let t: Test = l.test.parse().map_err(|e| Error::BadLine {
            name: name.into(),
            cause: Box::new(e),
        })?;
        if l.unit != t.unit() {
            return Err(Error::WrongUnit {
                name: name.into(),
                test: l.test.clone(),
                unit: l.unit.clone(),
                expected: t.unit(),
            });
        }
        if l.samples.iter().any(|x| !x.is_finite() || *x <= 0.0) {
            return Err(Error::BadSample {
                name: name.into(),
                test: l.test.clone(),
                size: l.size,
            });
        }
    }
    let mut missing = Vec::new();
    for &t in &params.tests {
        for &s in &params.sizes {
            if !lines.iter().any(|l| l.test == t.name() && l.size == s) {
                missing.push((t, s));
            }
        }
    }
    if !missing.is_empty() {
        return Err(Error::MissingResults {
            name: name.into(),
            missing,
        });
    }
    Ok(())
}

/// The limits for every requested size: latency (one-way transfer, sizes up
/// to one cache line of payload) and bw (cross-core copy rate); bibw and
/// msgrate have no measured limit.
pub fn run_limits(
    pair: (u32, u32),
    params: &P2pParams,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<SampleLine>> {
    // Batches of at most 1 ms: long against the clock (20-30 ns here), short
    // enough that on a busy machine most samples see no preemption of one of
    // the two spinning threads, which would inflate a whole batch.
    let lp = LimitParams {
        pair,
        cold: params.cold,
        llc: params.llc,
        samples: params.samples,
        min_time: Duration::from_secs_f64(params.min_time_ms.min(1.0) / 1e3),
    };
    let mut out = Vec::new();
    for t in &params.tests {
        for &s in &params.sizes {
            match t {
                Test::Latency if s <= limits::LATENCY_MAX_SIZE => {
                    progress(&format!("limit latency {s} B"));
                    out.push(limits::latency(&lp, s)?);
                }
                Test::Bw => {
                    progress(&format!("limit copy rate {s} B"));
                    out.push(limits::copy_rate(&lp, s)?);
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpi_build_candidates_installed_then_checkout_then_cwd() {
        let v = mpi_build_candidates(Some(Path::new("/opt/tc/bin/topocomm")));
        assert_eq!(
            v,
            vec![
                PathBuf::from("/opt/tc/lib/topocomm"),
                PathBuf::from("/opt/mpi/build"),
                PathBuf::from("mpi/build"),
            ]
        );
        let v = mpi_build_candidates(Some(Path::new("/r/target/release/topocomm")));
        assert_eq!(v[1], PathBuf::from("/r/mpi/build"));
        assert_eq!(mpi_build_candidates(None), vec![PathBuf::from("mpi/build")]);
    }

    #[test]
    fn peers_and_binding_options() {
        assert_eq!(
            parse_peers("openmpi,mpich").unwrap(),
            vec![MpiImpl::OpenMpi, MpiImpl::Mpich]
        );
        assert!(parse_peers("none").unwrap().is_empty());
        assert_eq!(
            parse_peers("intelmpi").unwrap_err().to_string(),
            "unknown peer 'intelmpi' (expected openmpi, mpich, or none)"
        );
        assert_eq!(
            parse_peers(" , ").unwrap_err().to_string(),
            "empty list of peers (use none to measure no peer)"
        );
        assert_eq!(
            MpiImpl::Mpich.bind_args((2, 5)),
            vec!["-bind-to", "user:2,5"]
        );
        assert_eq!(
            MpiImpl::OpenMpi.bind_args((2, 5)).join(" "),
            "--cpu-list 2,5 --bind-to cpu-list:ordered"
        );
    }

    #[test]
    fn incomplete_or_foreign_lines_are_refused() {
        let p = P2pParams {
            tests: vec![Test::Latency],
            sizes: vec![8, 64],
            cold: false,
            llc: 1 << 20,
            samples: 3,
            min_time_ms: 1.0,
            window: 4,
            probe: 0,
        };
        let l = |size, imp: &str, unit: &str| SampleLine {
            implementation: imp.into(),
            test: "latency".into(),
            size,
            cache: "hot".into(),
            unit: unit.into(),
            samples: vec![1.0, 2.0, 3.0],
            probe_us: None,
        };
        check_complete(&[l(8, "mpich", "us"), l(64, "mpich", "us")], "mpich", &p).unwrap();
        let err =
            |lines: &[SampleLine]| check_complete(lines, "mpich", &p).unwrap_err().to_string();
        assert_eq!(
            err(&[l(8, "mpich", "us")]),
            "mpich: no result for latency 64 B"
        );
        assert_eq!(
            err(&[l(8, "openmpi", "us")]),
            "mpich: unexpected line for impl 'openmpi', cache 'hot'"
        );
        assert_eq!(
            err(&[l(8, "mpich", "GB/s")]),
            "mpich: latency in 'GB/s', expected 'us'"
        );
        let mut odd = l(8, "mpich", "us");
        odd.test = "pingpong".into();
        assert_eq!(
            err(&[odd]),
            "mpich: unknown test 'pingpong' (expected latency, bw, bibw, msgrate)"
        );
        let mut bad = l(8, "mpich", "us");
        bad.samples[1] = f64::NAN;
        assert_eq!(
            err(&[bad]),
            "mpich: latency 8 B has a non-positive or non-finite sample"
        );
    }
}
