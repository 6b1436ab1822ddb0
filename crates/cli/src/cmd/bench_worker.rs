//! `topocomm bench-worker p2p` (hidden): the topocomm side of
//! `topocomm bench p2p`, run as two ranks under
//! `topocomm run -n 2 --bind P,Q`. Rank 0 prints one JSON line per
//! (test, size, cache): `{"impl":"topocomm","test":..,"size":..,"cache":..,"unit":..,"samples":[..]}`
//! (with `--probe N`, also `"probe_us":[..]`, one per sample),
//! and one pinning line on stderr: `{"bench_meta":{"ranks":[{"rank":0,"cpu":0,"affinity":"0"},..]}}`.

use crate::common::GlobalOpts;
use anyhow::{anyhow, bail, Result};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use topocomm_transport::bench::{self, Spec, Test};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub kind: Kind,
}

#[derive(clap::Subcommand, Debug)]
pub enum Kind {
    /// Point-to-point latency, bandwidth, bidirectional bandwidth, message rate
    P2p(P2pArgs),
}

#[derive(clap::Args, Debug)]
pub struct P2pArgs {
    /// Comma-separated tests: latency, bw, bibw, msgrate
    #[arg(long, default_value = "latency,bw")]
    pub tests: String,
    /// Comma-separated message sizes in bytes
    #[arg(long, default_value = "8,65536")]
    pub sizes: String,
    /// hot (one buffer reused), cold (rotating buffers beyond 2x LLC), or hot,cold
    #[arg(long, default_value = "hot")]
    pub cache: String,
    /// Last-level cache size in bytes (sizes the cold pool)
    #[arg(long, default_value_t = 32 << 20)]
    pub llc: usize,
    /// Samples per point
    #[arg(long, default_value_t = 11)]
    pub samples: usize,
    /// Minimum duration of one sample's batch, in milliseconds
    #[arg(long, default_value_t = 20.0)]
    pub min_time_ms: f64,
    /// Outstanding messages per window (bw, bibw, msgrate)
    #[arg(long, default_value_t = 64)]
    pub window: usize,
    /// 8-byte ping-pongs after every sample, their one-way time printed as
    /// `probe_us` next to the samples (0: none)
    #[arg(long, default_value_t = 0)]
    pub probe: u64,
}

fn list<T, E: std::fmt::Display>(
    s: &str,
    what: &str,
    f: impl Fn(&str) -> Result<T, E>,
) -> Result<Vec<T>> {
    let v: Vec<T> = s
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| f(x.trim()))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("--{what}: {e}"))?;
    if v.is_empty() {
        bail!("--{what}: empty list");
    }
    Ok(v)
}

pub fn run(_g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let Kind::P2p(p) = &a.kind;
    let spec = Spec {
        tests: list(&p.tests, "tests", str::parse::<Test>)?,
        sizes: list(&p.sizes, "sizes", |x| {
            x.parse::<usize>()
                .map_err(|_| format!("'{x}' is not a size in bytes"))
        })?,
        cold: list(&p.cache, "cache", |x| match x {
            "hot" => Ok(false),
            "cold" => Ok(true),
            o => Err(format!("'{o}': expected hot or cold")),
        })?,
        llc: p.llc,
        samples: p.samples.max(1),
        min_time: Duration::from_secs_f64((p.min_time_ms.max(0.0)) / 1e3),
        window: p.window.max(1),
        probe: p.probe,
    };
    let mut comm = topocomm_transport::Comm::init()?;
    // Where the ranks run, on stderr, for the orchestrator's pinning check.
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
    Ok(ExitCode::SUCCESS)
}
