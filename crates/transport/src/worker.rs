//! The p2p benchmark worker as a program of its own: `topocomm-worker`
//! (docs/commands/bench-worker.md).
//!
//! Libraries that measure the transport (`measure`'s p2p and matrix
//! backends, `model::tune`'s runner) start this small binary instead of the
//! `topocomm` CLI, so they work from a test or another program with no CLI
//! around. One binary plays both parts of a 2-rank job:
//!
//! - **launcher** (no `TOPOCOMM_RANK` in the environment):
//!   `topocomm-worker --bind P,Q [--rules FILE] [--timeout SECS] -- P2P-ARGS`
//!   binds, creates the segment and starts two ranks of itself with
//!   `P2P-ARGS`, exactly as `topocomm run -n 2 --bind P,Q` would; without
//!   `--rules` the job runs with [`crate::autotune::cached_or_builtin`]
//!   (the machine's cached measurement, never a new one);
//! - **rank** (started by a launcher): runs [`crate::bench`] with
//!   `P2P-ARGS` ([`P2P_USAGE`]) and rank 0 prints the JSON sample lines.
//!
//! [`locate`] is the one place that finds the binary (through
//! `current_exe`, documented there); `topocomm bench-worker p2p` is the
//! same rank part behind the CLI, for `topocomm run` users and scripts.

use crate::bench::{self, Spec, Test};
use crate::launch::{self, Bind, Launch};
use crate::{Comm, Error, Result, Rules};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The worker binary's file name.
pub const BIN: &str = "topocomm-worker";
/// Environment variable naming the worker binary (overrides [`locate`]'s search).
pub const ENV: &str = "TOPOCOMM_WORKER";

/// The arguments of the rank part, with their defaults.
pub const P2P_USAGE: &str = concat!(
    "  --tests LIST       latency, bw, bibw, msgrate (default latency,bw)\n",
    "  --sizes LIST       message sizes in bytes (default 8,65536)\n",
    "  --cache LIST       hot, cold or hot,cold (default hot)\n",
    "  --llc BYTES        last-level cache size, sizes the cold pool (default 33554432)\n",
    "  --samples N        samples per point (default 11)\n",
    "  --min-time-ms MS   minimum duration of one sample's batch (default 20)\n",
    "  --window N         outstanding messages per window (default 64)\n",
    "  --probe N          8-byte ping-pongs after every sample, printed as probe_us (default 0)\n",
);

/// Finds the worker binary: `$TOPOCOMM_WORKER` when set; else
/// `topocomm-worker` beside the running program, or one folder up (cargo
/// puts test programs in `target/<profile>/deps/`, binaries in
/// `target/<profile>/`); else the first one on `PATH`. This is the only
/// use of `current_exe` behind the libraries' benchmark jobs.
pub fn locate() -> Result<PathBuf> {
    search(
        std::env::var_os(ENV).map(PathBuf::from),
        std::env::current_exe().ok(),
        std::env::var_os("PATH"),
    )
}

/// [`locate`] over given values (testable without touching the process).
fn search(named: Option<PathBuf>, exe: Option<PathBuf>, path: Option<OsString>) -> Result<PathBuf> {
    if let Some(p) = named {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(Error::Setup(format!(
                "{ENV}={}: no such file (expected the {BIN} binary)",
                p.display()
            )))
        };
    }
    let mut dirs = Vec::new();
    if let Some(dir) = exe.as_deref().and_then(Path::parent) {
        dirs.push(dir.to_path_buf());
        dirs.extend(dir.parent().map(Path::to_path_buf));
    }
    dirs.extend(path.iter().flat_map(std::env::split_paths));
    dirs.iter()
        .map(|d| d.join(BIN))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::Setup(format!(
                "{BIN} not found beside this program nor on PATH (it is built with \
                 `cargo build --workspace`; or set {ENV} to its path)"
            ))
        })
}

/// The command of a 2-rank p2p job on PUs `pair` (launcher part of
/// `worker`), with `rules` or the machine's cached/built-in rules.
pub fn p2p_job(worker: &Path, pair: (u32, u32), rules: Option<&Path>, args: &[String]) -> Command {
    let mut cmd = Command::new(worker);
    cmd.args(["--bind", &format!("{},{}", pair.0, pair.1)]);
    if let Some(r) = rules {
        cmd.arg("--rules").arg(r);
    }
    cmd.arg("--").args(args);
    cmd
}

/// `topocomm-worker`'s `main`: the launcher part, or the rank part when
/// started by a launcher. Returns the exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    let args: Vec<String> = match args.into_iter().map(OsString::into_string).collect() {
        Ok(a) => a,
        Err(bad) => {
            eprintln!("{BIN}: argument {bad:?} is not UTF-8");
            return 2;
        }
    };
    let rank_part = std::env::var_os("TOPOCOMM_RANK").is_some();
    let r = if rank_part {
        p2p_rank(&args)
    } else {
        launcher(&args)
    };
    r.unwrap_or_else(|e| {
        eprintln!("{BIN}: {e}");
        1
    })
}

fn usage() -> String {
    format!(
        "usage: {BIN} --bind P,Q [--rules FILE] [--timeout SECS] -- [P2P-ARGS]\n\
         P2P-ARGS (the rank part, also `topocomm bench-worker p2p`):\n{P2P_USAGE}"
    )
}

/// Launcher part: two ranks of this program on the given PUs.
fn launcher(args: &[String]) -> Result<i32> {
    let split = args.iter().position(|a| a == "--");
    let (own, rest) = match split {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    let (mut bind, mut rules, mut timeout) = (None, None, None);
    let mut it = own.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| Error::Invalid(format!("{name}: expected a value")))
        };
        match a.as_str() {
            "--bind" => bind = Some(value("--bind")?),
            "--rules" => rules = Some(PathBuf::from(value("--rules")?)),
            "--timeout" => {
                let v = value("--timeout")?;
                let t = crate::parse_timeout("--timeout", &v).map_err(Error::Invalid)?;
                timeout = Some(t.as_secs_f64());
            }
            "-h" | "--help" => {
                print!("{}", usage());
                return Ok(0);
            }
            o => {
                return Err(Error::Invalid(format!(
                    "'{o}': unknown option\n{}",
                    usage()
                )))
            }
        }
    }
    // The ranks' arguments are checked here too: one error line, not one per rank.
    if p2p_spec(rest)?.is_none() {
        print!("{}", usage());
        return Ok(0);
    }
    let bind = bind.ok_or_else(|| Error::Invalid(format!("--bind is required\n{}", usage())))?;
    let bind: Bind = bind.parse().map_err(Error::Invalid)?;
    let m = topocomm_topo::load_default(None).map_err(|e| Error::Setup(e.to_string()))?;
    let pus = launch::bind_pus(&m, &bind, 2).map_err(Error::Invalid)?;
    let rules = match rules.or_else(crate::rules_from_env) {
        Some(f) => Rules::load(&f, &m).map_err(Error::Invalid)?,
        None => crate::autotune::cached_or_builtin(&m),
    };
    let plans = crate::plan::resolve(&m, &rules, &pus).map_err(Error::Setup)?;
    let me = std::env::current_exe()
        .map_err(|e| Error::Setup(format!("cannot locate this program: {e}")))?;
    launch::run(&Launch {
        pus,
        plans,
        timeout,
        grace: Duration::from_secs(2),
        program: me.into_os_string(),
        args: rest.iter().map(OsString::from).collect(),
    })
    .map_err(Error::Setup)
}

/// Parses the rank part's arguments ([`P2P_USAGE`]); `None` for `--help`.
pub fn p2p_spec(args: &[String]) -> Result<Option<Spec>> {
    let mut spec = Spec {
        tests: vec![Test::Latency, Test::Bw],
        sizes: vec![8, 65536],
        cold: vec![false],
        llc: 32 << 20,
        samples: 11,
        min_time: Duration::from_millis(20),
        window: 64,
        probe: 0,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-h" || a == "--help" {
            return Ok(None);
        }
        let v = it
            .next()
            .ok_or_else(|| Error::Invalid(format!("{a}: expected a value")))?;
        let bad = |what: &str| Error::Invalid(format!("{a} '{v}': expected {what}"));
        match a.as_str() {
            "--tests" => spec.tests = list(a, v, |x| x.parse::<Test>().map_err(|e| e.to_string()))?,
            "--sizes" => {
                spec.sizes = list(a, v, |x| {
                    x.parse::<usize>()
                        .map_err(|_| format!("'{x}' is not a size in bytes"))
                })?
            }
            "--cache" => {
                spec.cold = list(a, v, |x| match x {
                    "hot" => Ok(false),
                    "cold" => Ok(true),
                    o => Err(format!("'{o}': expected hot or cold")),
                })?
            }
            "--llc" => spec.llc = v.parse().map_err(|_| bad("a size in bytes"))?,
            "--samples" => spec.samples = v.parse::<usize>().map_err(|_| bad("a count"))?.max(1),
            "--min-time-ms" => {
                let ms = v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| (0.0..=60_000.0).contains(x))
                    .ok_or_else(|| bad("milliseconds from 0 to 60000"))?;
                spec.min_time = Duration::from_secs_f64(ms / 1e3);
            }
            "--window" => spec.window = v.parse::<usize>().map_err(|_| bad("a count"))?.max(1),
            "--probe" => spec.probe = v.parse().map_err(|_| bad("a count >= 0"))?,
            o => {
                return Err(Error::Invalid(format!(
                    "'{o}': unknown option; expected:\n{P2P_USAGE}"
                )))
            }
        }
    }
    Ok(Some(spec))
}

fn list<T>(
    name: &str,
    s: &str,
    f: impl Fn(&str) -> std::result::Result<T, String>,
) -> Result<Vec<T>> {
    let v: Vec<T> = s
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| f(x.trim()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::Invalid(format!("{name}: {e}")))?;
    if v.is_empty() {
        return Err(Error::Invalid(format!("{name}: empty list")));
    }
    Ok(v)
}

/// Rank part: joins the job, says where the ranks run (one `bench_meta`
/// line on stderr, for the orchestrator's pinning check) and runs the
/// benchmark; rank 0 prints one JSON line per point on stdout.
pub fn p2p_rank(args: &[String]) -> Result<i32> {
    let Some(spec) = p2p_spec(args)? else {
        print!("P2P-ARGS:\n{P2P_USAGE}");
        return Ok(0);
    };
    let mut comm = Comm::init()?;
    if let Some(meta) = bench::meta_line(&mut comm)? {
        let _ = std::io::stderr().write_all(format!("{meta}\n").as_bytes());
    }
    let out = std::io::stdout();
    bench::run(&mut comm, &spec, |pt| {
        let mut o = out.lock();
        let _ = writeln!(
            o,
            "{}",
            serde_json::to_string(pt).expect("point serializes")
        );
        let _ = o.flush();
    })?;
    comm.finalize()?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn p2p_arguments_parse_with_defaults_and_name_the_bad_one() {
        let s = p2p_spec(&args("--tests msgrate,bw --sizes 8,4096 --probe 3"))
            .unwrap()
            .unwrap();
        assert_eq!(s.tests, vec![Test::Msgrate, Test::Bw]);
        assert_eq!(s.sizes, vec![8, 4096]);
        assert_eq!((s.samples, s.window, s.probe), (11, 64, 3));
        assert!(p2p_spec(&args("--help")).unwrap().is_none());
        for (bad, names) in [
            ("--probe -1", "--probe"),
            ("--sizes 8,x", "--sizes"),
            ("--tests foo", "--tests"),
            ("--cache warm", "--cache"),
            ("--samples", "--samples"),
            ("--frob 1", "--frob"),
        ] {
            let e = p2p_spec(&args(bad)).unwrap_err().to_string();
            assert!(e.contains(names), "{bad}: {e}");
        }
    }

    #[test]
    fn the_worker_is_found_where_documented_and_missing_is_said() {
        let dir = std::env::temp_dir().join(format!("tc-worker-{}", std::process::id()));
        let deps = dir.join("deps");
        std::fs::create_dir_all(&deps).unwrap();
        let bin = dir.join(BIN);
        std::fs::write(&bin, b"").unwrap();
        // Beside the program, and one folder up (a cargo test binary).
        assert_eq!(search(None, Some(dir.join("prog")), None).unwrap(), bin);
        assert_eq!(search(None, Some(deps.join("t-123")), None).unwrap(), bin);
        // On PATH.
        let on_path = search(None, None, Some(dir.clone().into_os_string()));
        assert_eq!(on_path.unwrap(), bin);
        // Named: must exist; a wrong name is not replaced by a search.
        let e = search(Some("/nonexistent/w".into()), Some(dir.join("prog")), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(ENV) && e.contains("/nonexistent/w"), "{e}");
        let e = search(None, Some("/nonexistent/prog".into()), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(BIN) && e.contains(ENV), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
