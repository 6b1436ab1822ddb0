//! Per-PU-pair characterization: the one-way cache-line transfer latency
//! (two pinned threads bouncing one line), pair selection (all pairs, a PU
//! list, or N pairs per class), and the driver of the topocomm transport
//! worker for message latency, bandwidth and message rate.

use crate::record::SampleLine;
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
fn wait_for(flag: &AtomicU64, want: u64, limit: Duration) -> Result<(), String> {
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
            return Err("the peer thread gave up".into());
        }
        spin_loop();
        spins = spins.wrapping_add(1);
        if spins % 4096 == 0 {
            if start.elapsed() > limit {
                return Err(format!(
                    "no answer from the peer within {} s",
                    limit.as_secs()
                ));
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
pub fn cacheline_latency(p: u32, q: u32, rounds: u32, samples: usize) -> Result<Vec<f64>, String> {
    if p == q {
        return Err(format!("PU pair {p},{q}: the two PUs must differ"));
    }
    let rounds = rounds.max(1) as u64;
    let flag = Flag(AtomicU64::new(0));
    let limit = Duration::from_secs(5);
    let total = (samples + 1) as u64;
    std::thread::scope(|s| {
        let flag = &flag;
        let pong = s.spawn(move || -> Result<(), String> {
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
        let ping = s.spawn(move || -> Result<Vec<f64>, String> {
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
        let ping = ping
            .join()
            .map_err(|_| "the measuring thread panicked".to_string())?;
        if ping.is_err() {
            flag.0.store(ABORT, Ordering::Release);
        }
        let pong = pong
            .join()
            .map_err(|_| "the peer thread panicked".to_string())?;
        let v = ping.map_err(|e| format!("PU pair {p},{q}: {e}"))?;
        pong.map_err(|e| format!("PU pair {p},{q}: {e}"))?;
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
    pub fn new(name: &str, unit: &str, samples: Vec<f64>) -> Result<Metric, String> {
        let summary = crate::Summary::of(&samples)
            .ok_or_else(|| format!("metric {name}: no finite samples"))?;
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
pub fn select_pairs(m: &Machine, sel: &PairSelection) -> Result<Vec<(u32, u32)>, String> {
    let cm = ClassMatrix::new(m);
    let os = cm.pu_os_indexes();
    let n = cm.len();
    let rows: Vec<usize> = match sel {
        PairSelection::Pus(set) => {
            let mut v = Vec::new();
            for &p in set.indexes() {
                v.push(m.require_pu(p).map_err(|e| format!("--pus: {e}"))?);
            }
            v.sort_unstable();
            v
        }
        _ => (0..n).collect(),
    };
    if rows.len() < 2 {
        return Err("at least two PUs are needed to measure pairs".into());
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

/// The `topocomm bench-worker p2p` backend, run through `topocomm run`.
#[derive(Clone, Debug)]
pub struct TransportBackend {
    pub exe: std::path::PathBuf,
}

impl TransportBackend {
    /// Checks that this build has `topocomm run` and `topocomm bench-worker
    /// p2p`; the error says what is missing (reported as an omission).
    pub fn probe(exe: &std::path::Path) -> Result<TransportBackend, String> {
        for args in [
            &["run", "--help"][..],
            &["bench-worker", "p2p", "--help"][..],
        ] {
            let ok = Command::new(exe)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                return Err(format!(
                    "this build has no `topocomm {}` (the transport is not merged yet)",
                    args[..args.len() - 1].join(" ")
                ));
            }
        }
        Ok(TransportBackend {
            exe: exe.to_path_buf(),
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
    ) -> Result<Vec<SampleLine>, String> {
        let exe = self.exe.to_string_lossy().to_string();
        let mut child = Command::new(&self.exe)
            .args(["run", "-n", "2", "--bind", &format!("{p},{q}"), "--", &exe])
            .args(["bench-worker", "p2p", "--tests", "latency,bw,msgrate"])
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
            .map_err(|e| format!("cannot start the transport worker: {e}"))?;
        let start = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if start.elapsed() > limit => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "transport worker on PUs {p},{q} did not finish within {} s",
                        limit.as_secs()
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("waiting for the transport worker: {e}")),
            }
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("transport worker output: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "transport worker on PUs {p},{q} failed: {}",
                err.lines().last().unwrap_or("no message")
            ));
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
        assert!(e.contains("99"), "{e}");
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
        assert!(s.median > 0.0 && s.median < 10_000.0, "{s:?}");
    }
}
