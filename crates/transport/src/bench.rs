//! Point-to-point benchmark kernels between ranks 0 and 1 (used by
//! `topocomm bench-worker p2p`, which `topocomm bench p2p` runs under
//! `topocomm run -n 2 --bind P,Q`).
//!
//! Every sample times one batch sized on rank 0 (doubling until it lasts
//! `min_time`); rank 0 tells rank 1 each batch's iteration count with a
//! small control message outside the timed region. One untimed batch warms
//! up each (test, size, cache) point.
//!
//! With `Spec::probe > 0`, every batch is followed by an untimed probe: that
//! many 8-byte ping-pongs, whose one-way time is recorded next to each
//! sample (`probe_us`). On a virtual machine the host moves the vCPUs
//! between near and distant physical cores every second or so, also in the
//! middle of a job (docs/transport.md, "Job-level slow mode"); the probe says
//! which state each sample ran in, so samples are compared state for state.

use crate::{Comm, Error, Request, Result};
use serde::Serialize;
use std::time::{Duration, Instant};

const TAG_CTRL: i32 = 1_000_001;
const TAG_DATA: i32 = 1_000_002;
const TAG_ACK: i32 = 1_000_003;

/// The four p2p tests, with the names and units every backend shares
/// (the worker, `tc_mpibench`, the limits).
pub use topocomm_measure::p2p::Test;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Spec {
    pub tests: Vec<Test>,
    pub sizes: Vec<usize>,
    /// `false` = hot (one buffer reused), `true` = cold (rotating buffers
    /// over a pool larger than twice the LLC).
    pub cold: Vec<bool>,
    pub llc: usize,
    pub samples: usize,
    pub min_time: Duration,
    pub window: usize,
    /// 8-byte ping-pongs after every batch (0: no probe).
    pub probe: u64,
}

/// One measured point; serialized in exactly the worker's JSON line format.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    #[serde(rename = "impl")]
    pub implementation: &'static str,
    pub test: &'static str,
    pub size: usize,
    pub cache: &'static str,
    pub unit: &'static str,
    pub samples: Vec<f64>,
    /// One-way 8-byte time (us) of the probe that followed each sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_us: Option<Vec<f64>>,
}

/// Message buffers: one (hot) or a rotating pool beyond 2x the LLC (cold),
/// each starting on a page boundary as `tc_mpibench`'s and OSU's do: the
/// kernel's and glibc's copies run up to 3x slower on some CPUs when source
/// and destination sit at nearby offsets within their pages (an AMD VM:
/// single copy at 64 KiB 2 GB/s against 7 GB/s page-aligned), so buffers
/// placed by malloc would compare the implementations at different
/// alignments.
struct Pool {
    mem: Vec<u8>,
    /// Offset of the first page boundary in `mem`.
    base: usize,
    stride: usize,
    count: usize,
    next: usize,
}

/// Send and receive buffers, apart as in OSU and `tc_mpibench`.
struct Pools {
    send: Pool,
    recv: Pool,
}

impl Pools {
    fn new(size: usize, cold: bool, llc: usize) -> Pools {
        Pools {
            send: Pool::new(size, cold, llc),
            recv: Pool::new(size, cold, llc),
        }
    }
}

impl Pool {
    fn new(size: usize, cold: bool, llc: usize) -> Pool {
        let stride = size.max(64).div_ceil(4096) * 4096;
        let count = if cold {
            (2 * llc).div_ceil(stride).max(1) + 1
        } else {
            1
        };
        // Written once so the pages exist before timing.
        let mem = vec![0xa5u8; stride * count + 4096];
        let base = mem.as_ptr().align_offset(4096);
        Pool {
            mem,
            base,
            stride,
            count,
            next: 0,
        }
    }
    fn next(&mut self) -> *mut u8 {
        let i = self.next;
        self.next = (self.next + 1) % self.count;
        // SAFETY: base < 4096 and i < count: inside `mem`.
        unsafe { self.mem.as_mut_ptr().add(self.base + i * self.stride) }
    }
}

fn peer_of(c: &Comm) -> Result<usize> {
    if c.size() != 2 {
        return Err(Error::Invalid(format!(
            "the p2p benchmark needs exactly 2 ranks, got {}",
            c.size()
        )));
    }
    Ok(1 - c.rank())
}

/// One batch of `k` iterations of `test`; returns its duration.
fn batch(
    c: &mut Comm,
    test: Test,
    size: usize,
    k: u64,
    w: usize,
    pools: &mut Pools,
) -> Result<f64> {
    let peer = peer_of(c)?;
    let me = c.rank();
    let mut ack = [0u8; 4];
    let mut reqs: Vec<Request> = Vec::with_capacity(2 * w);
    let t0 = Instant::now();
    for _ in 0..k {
        match test {
            Test::Latency => {
                // Blocking send/recv, as osu_latency does, from and into
                // buffers of their own: a buffer just received into is dirty
                // in this core's cache, and sending it back would measure
                // moving dirty lines, which neither OSU nor tc_mpibench does.
                // SAFETY: the pool blocks hold at least `size` bytes and no
                // other reference to them exists during this iteration.
                let (s, r) = unsafe {
                    (
                        std::slice::from_raw_parts(pools.send.next(), size),
                        std::slice::from_raw_parts_mut(pools.recv.next(), size),
                    )
                };
                if me == 0 {
                    c.send(s, peer, TAG_DATA)?;
                    c.recv(r, peer as i32, TAG_DATA)?;
                } else {
                    c.recv(r, peer as i32, TAG_DATA)?;
                    c.send(s, peer, TAG_DATA)?;
                }
            }
            Test::Bw | Test::Msgrate => {
                reqs.clear();
                // SAFETY: the raw calls' buffers come from `pool`, which
                // outlives the batch, and every request is waited for
                // before the batch returns.
                unsafe {
                    if me == 0 {
                        for _ in 0..w {
                            reqs.push(c.isend_raw(pools.send.next(), size, peer, TAG_DATA)?);
                        }
                        c.wait_all(&reqs)?;
                        c.recv(&mut ack, peer as i32, TAG_ACK)?;
                    } else {
                        for _ in 0..w {
                            reqs.push(c.irecv_raw(
                                pools.recv.next(),
                                size,
                                peer as i32,
                                TAG_DATA,
                            )?);
                        }
                        c.wait_all(&reqs)?;
                        c.send(&ack, peer, TAG_ACK)?;
                    }
                }
            }
            Test::Bibw => {
                reqs.clear();
                // SAFETY: as above; receive and send buffers differ.
                unsafe {
                    for _ in 0..w {
                        reqs.push(c.irecv_raw(pools.recv.next(), size, peer as i32, TAG_DATA)?);
                    }
                    for _ in 0..w {
                        reqs.push(c.isend_raw(pools.send.next(), size, peer, TAG_DATA)?);
                    }
                }
                c.wait_all(&reqs)?;
            }
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Converts one batch time into the test's unit.
fn value(test: Test, size: usize, k: u64, w: usize, secs: f64) -> f64 {
    let secs = secs.max(1e-12);
    match test {
        Test::Latency => secs / (2.0 * k as f64) * 1e6,
        Test::Bw => (size * w) as f64 * k as f64 / secs / 1e9,
        Test::Bibw => 2.0 * (size * w) as f64 * k as f64 / secs / 1e9,
        Test::Msgrate => w as f64 * k as f64 / secs / 1e6,
    }
}

/// Rank 0 decides `k` and tells rank 1; `k == 0` ends the point.
fn agree(c: &mut Comm, k: u64) -> Result<u64> {
    let peer = peer_of(c)?;
    let mut b = k.to_ne_bytes();
    if c.rank() == 0 {
        c.send(&b, peer, TAG_CTRL)?;
        Ok(k)
    } else {
        c.recv(&mut b, peer as i32, TAG_CTRL)?;
        Ok(u64::from_ne_bytes(b))
    }
}

/// Measures one (test, size, cache) point on both ranks; rank 0 returns it.
pub fn measure(
    c: &mut Comm,
    spec: &Spec,
    test: Test,
    size: usize,
    cold: bool,
) -> Result<Option<Point>> {
    let w = if test == Test::Latency {
        1
    } else {
        spec.window.max(1)
    };
    let mut pool = Pools::new(size, cold, spec.llc);
    let mut probe_pool = Pools::new(8, false, spec.llc);
    // Both ranks follow every batch with the probe, so rank 1 needs no
    // word on which batches are samples.
    let mut probe = |c: &mut Comm| -> Result<f64> {
        if spec.probe == 0 {
            return Ok(0.0);
        }
        let t = batch(c, Test::Latency, 8, spec.probe, 1, &mut probe_pool)?;
        Ok(value(Test::Latency, 8, spec.probe, 1, t))
    };
    // Calibrate on rank 0 (the calibration batches double as warm-up). The
    // first batch pays first touches and page faults, and on a busy machine
    // one preemption can stretch it past `min_time`: it never ends the
    // calibration, or a sample could hold a single iteration.
    let mut k = 1u64;
    let mut first = true;
    let mut samples = Vec::with_capacity(spec.samples);
    let mut probes = Vec::with_capacity(spec.samples);
    if c.rank() == 0 {
        loop {
            agree(c, k)?;
            let t = batch(c, test, size, k, w, &mut pool)?;
            probe(c)?;
            let long_enough = t >= spec.min_time.as_secs_f64();
            if std::mem::take(&mut first) && long_enough {
                continue; // warm-up only: the same count again
            }
            if long_enough || k >= 1 << 30 {
                break;
            }
            let grow = (spec.min_time.as_secs_f64() / t.max(1e-9) * 1.2).clamp(1.5, 16.0);
            k = ((k as f64) * grow).ceil() as u64;
        }
        for _ in 0..spec.samples {
            agree(c, k)?;
            let t = batch(c, test, size, k, w, &mut pool)?;
            samples.push(value(test, size, k, w, t));
            probes.push(probe(c)?);
        }
        agree(c, 0)?;
        Ok(Some(Point {
            implementation: "topocomm",
            test: test.name(),
            size,
            cache: if cold { "cold" } else { "hot" },
            unit: test.unit(),
            samples,
            probe_us: (spec.probe > 0).then_some(probes),
        }))
    } else {
        loop {
            let k = agree(c, 0)?;
            if k == 0 {
                return Ok(None);
            }
            batch(c, test, size, k, w, &mut pool)?;
            probe(c)?;
        }
    }
}

/// Runs every point of `spec`, calling `emit` on rank 0 for each.
pub fn run(c: &mut Comm, spec: &Spec, mut emit: impl FnMut(&Point)) -> Result<()> {
    peer_of(c)?;
    for &cold in &spec.cold {
        for &test in &spec.tests {
            for &size in &spec.sizes {
                if let Some(p) = measure(c, spec, test, size, cold)? {
                    emit(&p);
                }
            }
        }
    }
    c.barrier()
}

/// Where this process runs: `sched_getcpu()` and its affinity list as in
/// `/proc/self/status` (`Cpus_allowed_list`).
pub fn place() -> (i64, String) {
    // SAFETY: sched_getcpu has no arguments and no memory effects.
    let cpu = i64::from(unsafe { libc::sched_getcpu() });
    let aff = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    (cpu, aff)
}

/// The job's pinning meta line, `{"bench_meta":{"ranks":[{"rank":0,"cpu":..,"affinity":".."},..]}}`,
/// gathered on rank 0 (`None` on the other ranks). Every rank must call it.
pub fn meta_line(c: &mut Comm) -> Result<Option<String>> {
    let (cpu, aff) = place();
    let mine = serde_json::json!({"rank": c.rank(), "cpu": cpu, "affinity": aff}).to_string();
    if c.rank() != 0 {
        c.send(mine.as_bytes(), 0, TAG_CTRL)?;
        return Ok(None);
    }
    let mut ranks = vec![serde_json::from_str::<serde_json::Value>(&mine).expect("own json")];
    let mut buf = vec![0u8; 4096];
    for r in 1..c.size() {
        let st = c.recv(&mut buf, r as i32, TAG_CTRL)?;
        let v = serde_json::from_slice(&buf[..st.count])
            .map_err(|e| Error::Invalid(format!("meta from rank {r}: {e}")))?;
        ranks.push(v);
    }
    Ok(Some(
        serde_json::json!({"bench_meta": {"ranks": ranks}}).to_string(),
    ))
}
