//! Per-PU-pair characterization: the one-way cache-line transfer latency
//! (two pinned threads bouncing one line), pair selection (all pairs, a PU
//! list, or N pairs per class), and the driver of the topocomm transport
//! worker for message latency, bandwidth and message rate.

use crate::record::SampleLine;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::hint::spin_loop;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use topocomm_topo::{ClassMatrix, Machine, PuSet};

/// The bounced line, alone on its own 128 bytes (adjacent-line prefetchers
/// pull pairs of lines).
#[repr(C, align(128))]
struct Flag(AtomicU64);

/// Sent by the side that gives up, so the other stops waiting too.
const ABORT: u64 = u64::MAX;

/// Spins until `flag` holds `want` (or ABORT) or `limit` elapses.
fn wait_for(flag: &AtomicU64, want: u64, limit: Duration) -> Result<()> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        // Acquire pairs with the peer's Release store: nothing else is
        // communicated, but it keeps the ping-pong ordered on weak-memory CPUs.
        let v = flag.load(Ordering::Acquire);
        if v == want {
            return Ok(());
        }
        if v == ABORT {
            return Err(Error::PeerGaveUp);
        }
        spin_loop();
        spins = spins.wrapping_add(1);
        if spins % 4096 == 0 {
            if start.elapsed() > limit {
                return Err(Error::PeerTimeout { limit });
            }
            // More threads than cores (CI): let the peer run.
            if spins % (1 << 20) == 0 {
                std::thread::yield_now();
            }
        }
    }
}

/// One-way cache-line transfer latency between PUs `p` and `q` in ns: each
/// sample times `rounds` round trips of one line and halves the mean. The
/// first sample is a warm-up and is dropped.
pub fn cacheline_latency(p: u32, q: u32, rounds: u32, samples: usize) -> Result<Vec<f64>> {
    if p == q {
        return Err(Error::SamePu { pu: p });
    }
    let rounds = rounds.max(1) as u64;
    let flag = Flag(AtomicU64::new(0));
    let limit = Duration::from_secs(5);
    let total = (samples + 1) as u64;
    std::thread::scope(|s| {
        let flag = &flag;
        let pong = s.spawn(move || -> Result<()> {
            let r = (|| {
                crate::pin::pin_current_thread(q)?;
                for i in 0..total * rounds {
                    wait_for(&flag.0, 2 * i + 1, limit)?;
                    // Release: see wait_for.
                    flag.0.store(2 * i + 2, Ordering::Release);
                }
                Ok(())
            })();
            if r.is_err() {
                flag.0.store(ABORT, Ordering::Release);
            }
            r
        });
        // The ping side runs on its own thread too: pinning the caller would
        // leave its affinity restricted for the processes it starts later
        // (the transport worker of the same matrix run).
        let ping = s.spawn(move || -> Result<Vec<f64>> {
            crate::pin::pin_current_thread(p)?;
            let mut out = Vec::with_capacity(samples);
            for k in 0..total {
                let start = Instant::now();
                for i in k * rounds..(k + 1) * rounds {
                    flag.0.store(2 * i + 1, Ordering::Release);
                    wait_for(&flag.0, 2 * i + 2, limit)?;
                }
                let ns = start.elapsed().as_nanos() as f64;
                if k > 0 {
                    out.push(ns / (2 * rounds) as f64);
                }
            }
            Ok(out)
        });
        let ping = ping.join().map_err(|_| Error::Panicked {
            thread: "the measuring thread",
        })?;
        if ping.is_err() {
            flag.0.store(ABORT, Ordering::Release);
        }
        let pong = pong.join().map_err(|_| Error::Panicked {
            thread: "the peer thread",
        })?;
        let in_pair = |e| Error::Pair {
            p,
            q,
            cause: Box::new(e),
        };
        let v = ping.map_err(in_pair)?;
        pong.map_err(in_pair)?;
        Ok(v)
    })
}

/// One metric of one pair, with raw samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// `c2c_latency` (ns), `c2c_read_bw` (GB/s), `latency` (us), `bw` (GB/s), `msgrate` (Mmsg/s).
    pub name: String,
    pub unit: String,
    pub samples: Vec<f64>,
    pub summary: crate::Summary,
}

impl Metric {
    pub fn new(name: &str, unit: &str, samples: Vec<f64>) -> Result<Metric> {
        let summary = crate::Summary::of(&samples)
            .ok_or_else(|| Error::NoFiniteSamples { name: name.into() })?;
        Ok(Metric {
            name: name.into(),
            unit: unit.into(),
            samples,
            summary,
        })
    }
}

/// All metrics of one unordered PU pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    pub p: u32,
    pub q: u32,
    pub class: String,
    pub metrics: Vec<Metric>,
}

/// Which pairs to measure.
#[derive(Clone, Debug)]
pub enum PairSelection {
    All,
    Pus(PuSet),
    PerClass(usize),
}

/// Unordered pairs (p < q in topology order) as OS indexes, in topology order.
pub fn select_pairs(m: &Machine, sel: &PairSelection) -> Result<Vec<(u32, u32)>> {
    let cm = ClassMatrix::new(m);
    let os = cm.pu_os_indexes();
    let n = cm.len();
    let rows: Vec<usize> = match sel {
        PairSelection::Pus(set) => {
            let mut v = Vec::new();
            for &p in set.indexes() {
                v.push(
                    m.require_pu(p)
                        .map_err(|cause| Error::PusOption { cause })?,
                );
            }
            v.sort_unstable();
            v
        }
        _ => (0..n).collect(),
    };
    if rows.len() < 2 {
        return Err(Error::TooFewPus);
    }
    let mut pairs = Vec::new();
    let mut per_class = vec![0usize; cm.classes().len()];
    for (i, &a) in rows.iter().enumerate() {
        for &b in &rows[i + 1..] {
            if let PairSelection::PerClass(k) = sel {
                let c = cm.code_at(a, b).expect("distinct PUs have a class") as usize;
                if per_class[c] >= *k {
                    continue;
                }
                per_class[c] += 1;
            }
            pairs.push((os[a], os[b]));
        }
    }
    Ok(pairs)
}

/// The transport's p2p backend: the `topocomm-worker` binary
/// (`topocomm_transport::worker`), which launches two ranks of itself.
#[derive(Clone, Debug)]
pub struct TransportBackend {
    pub worker: std::path::PathBuf,
}

impl TransportBackend {
    /// Checks that `worker` runs (its `--help`); the error says why not
    /// (reported as an omission).
    pub fn probe(worker: &std::path::Path) -> Result<TransportBackend> {
        let ok = Command::new(worker)
            .arg("--help")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            return Err(Error::WorkerUnusable {
                path: worker.to_path_buf(),
            });
        }
        Ok(TransportBackend {
            worker: worker.to_path_buf(),
        })
    }

    /// Runs latency (8 B), bandwidth and message rate (at `size`) between `p` and `q`.
    pub fn measure(
        &self,
        p: u32,
        q: u32,
        size: u64,
        samples: usize,
        limit: Duration,
    ) -> Result<Vec<SampleLine>> {
        let mut child = Command::new(&self.worker)
            .args([
                "--bind",
                &format!("{p},{q}"),
                "--",
                "--tests",
                "latency,bw,msgrate",
            ])
            .args([
                "--sizes",
                &format!("8,{size}"),
                "--samples",
                &samples.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|cause| Error::WorkerSpawn { cause })?;
        let start = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if start.elapsed() > limit => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(Error::WorkerTimeout { p, q, limit });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(cause) => return Err(Error::WorkerWait { cause }),
            }
        }
        let out = child
            .wait_with_output()
            .map_err(|cause| Error::WorkerOutput { cause })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(Error::WorkerFailed {
                p,
                q,
                line: err.lines().last().unwrap_or("no message").into(),
            });
        }
        SampleLine::parse_all(&String::from_utf8_lossy(&out.stdout), "transport worker")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_class_limits_pairs() {
        let m = topocomm_topo::load(&"synthetic:pack:2 l3:2 core:2 pu:1".parse().unwrap()).unwrap();
        let all = select_pairs(&m, &PairSelection::All).unwrap();
        assert_eq!(all.len(), 8 * 7 / 2);
        let one = select_pairs(&m, &PairSelection::PerClass(1)).unwrap();
        assert_eq!(one.len(), ClassMatrix::new(&m).classes().len());
        let e = select_pairs(&m, &PairSelection::Pus(PuSet::from_indexes([0, 99]))).unwrap_err();
        assert!(
            e.to_string().starts_with("--pus: PU with OS index 99 "),
            "{e}"
        );
        let e = select_pairs(&m, &PairSelection::Pus(PuSet::from_indexes([3]))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "at least two PUs are needed to measure pairs"
        );
        assert_eq!(
            cacheline_latency(2, 2, 1, 1).unwrap_err().to_string(),
            "PU pair 2,2: the two PUs must differ"
        );
        assert_eq!(
            Metric::new("bw", "GB/s", vec![f64::NAN])
                .unwrap_err()
                .to_string(),
            "metric bw: no finite samples"
        );
    }

    #[test]
    fn pingpong_between_two_pus() {
        let pus = crate::pin::allowed_pus().unwrap();
        if pus.len() < 2 {
            eprintln!("notice: one PU only; skipping the ping-pong test");
            return;
        }
        let v = cacheline_latency(pus[0], pus[1], 200, 5).unwrap();
        assert_eq!(v.len(), 5);
        let s = crate::Summary::of(&v).unwrap();
        // A sanity bound, not a performance claim: on CI's 2-vCPU machine the
        // other tests of this binary run beside it and CI once measured 20 µs
        // for every sample. 1 ms per one-way hop would mean a sample of 400 ms,
        // a broken measurement (or a unit error) rather than a slow machine.
        assert!(
            v.iter().all(|&x| x.is_finite() && x > 0.0) && s.median < 1_000_000.0,
            "{s:?}"
        );
    }
}
