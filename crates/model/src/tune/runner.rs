//! Measures the transport under one parameter set: writes a rules file with
//! the class's section, runs the p2p worker (`topocomm-worker --bind P,Q
//! --rules FILE -- ...`, `topocomm_transport::worker`) and returns the
//! one-way time per size.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use topocomm_measure::backends::check_complete;
use topocomm_measure::p2p::{P2pParams, Test};
use topocomm_measure::procrun::{last_error_line, run_bounded};
use topocomm_measure::{SampleLine, Summary};
use topocomm_transport::{Params, Rules};

/// Time per message at one size: median and 95% CI of the samples, in
/// seconds (one-way time for `latency`; size / rate for `bw`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimePoint {
    pub size: u64,
    pub median: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub n: usize,
    /// Raw samples in seconds per message.
    pub samples: Vec<f64>,
}

impl TimePoint {
    pub fn of(size: u64, samples: Vec<f64>) -> Option<TimePoint> {
        let s = Summary::of(&samples)?;
        Some(TimePoint {
            size,
            median: s.median,
            ci_low: s.ci_low,
            ci_high: s.ci_high,
            n: s.n,
            samples,
        })
    }
}

/// What every measurement of one tuning (or model) run shares.
#[derive(Clone, Debug)]
pub struct Runner {
    /// The `topocomm-worker` binary (`topocomm_transport::worker::locate`).
    pub worker: PathBuf,
    /// Built-in rules of this machine (the file overrides one class).
    pub builtin: Rules,
    /// `latency` or `bw`.
    pub test: Test,
    pub sizes: Vec<u64>,
    pub samples: usize,
    pub min_time_ms: f64,
    pub window: u32,
    pub llc: u64,
    /// Jobs run so far (one per parameter set and pair).
    pub jobs: usize,
    /// Where the temporary rules files go.
    pub tmp: PathBuf,
}

impl Runner {
    /// A runner of transport benchmark jobs on machine `m`: the p2p worker
    /// found by `topocomm_transport::worker::locate`, the built-in rules as
    /// the base of every candidate file, a window of 64, temporary files in
    /// the system's temporary folder.
    pub fn new(
        m: &topocomm_topo::Machine,
        test: Test,
        sizes: &[u64],
        samples: usize,
        min_time_ms: f64,
    ) -> Result<Runner, String> {
        Ok(Runner {
            worker: topocomm_transport::worker::locate().map_err(|e| e.to_string())?,
            builtin: Rules::builtin(m),
            test,
            sizes: sizes.to_vec(),
            samples,
            min_time_ms,
            window: 64,
            llc: m.llc_size().unwrap_or(32 << 20),
            jobs: 0,
            tmp: std::env::temp_dir(),
        })
    }

    fn p2p(&self, sizes: &[u64]) -> P2pParams {
        P2pParams {
            tests: vec![self.test],
            sizes: sizes.to_vec(),
            cold: false,
            llc: self.llc,
            samples: self.samples,
            min_time_ms: self.min_time_ms,
            window: self.window,
            probe: 0,
        }
    }

    /// A rules file that gives `class` exactly `params`.
    pub fn rules_text(&self, class: &str, params: &Params) -> String {
        let mut r = self.builtin.clone();
        r.classes = BTreeMap::from([(class.to_string(), params.clone())]);
        r.to_toml()
    }

    /// Measures `params` on `pair` (of class `class`) at every size.
    pub fn measure(
        &mut self,
        pair: (u32, u32),
        class: &str,
        params: &Params,
    ) -> Result<Vec<TimePoint>, String> {
        let sizes = self.sizes.clone();
        self.measure_sizes(pair, class, params, &sizes)
    }

    pub fn measure_sizes(
        &mut self,
        pair: (u32, u32),
        class: &str,
        params: &Params,
        sizes: &[u64],
    ) -> Result<Vec<TimePoint>, String> {
        params
            .validate()
            .map_err(|(f, why)| format!("candidate parameters: {f} {why}"))?;
        let file = self.tmp.join(format!(
            "topocomm-tune-{}-{}.toml",
            std::process::id(),
            self.jobs
        ));
        std::fs::write(&file, self.rules_text(class, params))
            .map_err(|e| format!("{}: cannot write a rules file: {e}", file.display()))?;
        let res = self.run_job(pair, &file, sizes);
        let _ = std::fs::remove_file(&file);
        self.jobs += 1;
        res
    }

    /// Runs the worker with an existing rules file (None = built-in rules).
    pub fn run_job(
        &self,
        pair: (u32, u32),
        rules: &Path,
        sizes: &[u64],
    ) -> Result<Vec<TimePoint>, String> {
        let p = self.p2p(sizes);
        let args = p.worker_args();
        let mut cmd = topocomm_transport::worker::p2p_job(&self.worker, pair, Some(rules), &args);
        cmd.env("TOPOCOMM_QUIET", "1");
        let out = run_bounded(cmd, "topocomm", p.time_bound()).map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "topocomm-worker --rules {}: the job failed ({}): {}",
                rules.display(),
                out.status,
                last_error_line(&out.stderr)
            ));
        }
        let lines = SampleLine::parse_all(&out.stdout, "topocomm").map_err(|e| e.to_string())?;
        check_complete(&lines, "topocomm", &p).map_err(|e| e.to_string())?;
        let mut pts = Vec::new();
        for &s in sizes {
            let l = lines
                .iter()
                .find(|l| l.size == s)
                .ok_or_else(|| format!("topocomm: no result for {s} B"))?;
            let secs: Vec<f64> = l
                .samples
                .iter()
                .map(|&v| match self.test {
                    Test::Latency => v * 1e-6,
                    // GB/s -> seconds per message.
                    _ => s as f64 / (v * 1e9),
                })
                .collect();
            pts.push(TimePoint::of(s, secs).ok_or("topocomm: a sample is not finite")?);
        }
        Ok(pts)
    }
}

/// Pools the samples of several runs of the same configuration per size.
pub fn pool(runs: &[Vec<TimePoint>]) -> Vec<TimePoint> {
    let mut by: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for r in runs {
        for p in r {
            by.entry(p.size).or_default().extend(&p.samples);
        }
    }
    by.into_iter()
        .filter_map(|(s, v)| TimePoint::of(s, v))
        .collect()
}

/// A bound on the search: a deadline for starting new jobs.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub start: Instant,
    pub limit: Duration,
}

impl Budget {
    pub fn exhausted(&self) -> bool {
        self.start.elapsed() >= self.limit
    }
}
