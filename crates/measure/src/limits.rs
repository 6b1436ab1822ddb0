//! Physical limits of a PU pair, measured with two pinned threads (safe Rust):
//!
//! - **latency**: one-way time for `size` bytes just written on PU P to be
//!   seen and read on PU Q. The two threads ping-pong a flag in one cache
//!   line (Release store / Acquire load); payloads up to 64 bytes ride in the
//!   flag's 128-byte block (as a transport's inline messages do). One-way =
//!   round trip / 2. Only sizes up to [`LATENCY_MAX_SIZE`] are a bound: larger
//!   payloads are moved word by word through atomics, slower than a real
//!   copy, so the bw limit is the bound there.
//! - **bw**: cross-core copy rate. Thread A (on P) dirties a buffer, thread B
//!   (on Q) copies it into its own destination with `copy_from_slice`, timed
//!   on B. GB/s = 1e9 B/s.
//!
//! Cache modes: `hot` reuses the same buffers; `cold` rotates over pools
//! larger than 2 x LLC so that every transfer uses memory last touched long
//! ago (A re-dirties a slice only after B has consumed it).
//!
//! Both threads are pinned with [`crate::pin`]; a PU this machine does not
//! have is an error, never a measurement on the wrong PU.

use crate::record::SampleLine;
use crate::{Error, PinError, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// Implementation name of the limits in result files.
pub const IMPL: &str = "limit";

/// A wait on the other thread longer than this is an error (a PU that never
/// runs our thread), not a hang.
const WAIT_LIMIT: Duration = Duration::from_secs(5);
/// Words of payload that fit beside the flag in its 128-byte block.
const INLINE_WORDS: usize = 8;
/// Largest message size whose latency limit is meaningful (one line of payload).
pub const LATENCY_MAX_SIZE: u64 = 64;
/// Hot copy batches cover at least this many bytes, so that a batch of small
/// copies is long against the clock's resolution and stays in L2.
const HOT_BATCH_BYTES: usize = 256 * 1024;
/// Flag value that ends the ping-pong.
const STOP: u64 = u64::MAX;

/// Parameters shared by both limits.
#[derive(Clone, Debug)]
pub struct LimitParams {
    pub pair: (u32, u32),
    pub cold: bool,
    /// Last-level cache size in bytes (sizes the cold pools).
    pub llc: u64,
    pub samples: usize,
    /// Each sample lasts at least this long.
    pub min_time: Duration,
}

impl LimitParams {
    fn cache(&self) -> &'static str {
        if self.cold {
            "cold"
        } else {
            "hot"
        }
    }

    fn check(&self) -> Result<()> {
        let (p, q) = self.pair;
        if p == q {
            return Err(Error::LimitSamePu { pu: p });
        }
        let allowed = crate::pin::allowed_pus()?;
        for pu in [p, q] {
            if !allowed.contains(&pu) {
                return Err(PinError::NotUsable {
                    pu,
                    usable: topocomm_topo::PuSet::from_indexes(allowed),
                }
                .into());
            }
        }
        if self.samples == 0 {
            return Err(Error::AtLeastOne { what: "samples" });
        }
        Ok(())
    }
}

/// The flag and inline payload: a 128-byte block of its own (the alignment
/// also keeps the adjacent-line prefetcher from pulling in a neighbour); the
/// flag and up to 56 bytes of payload share the first line.
#[repr(align(128))]
struct Line([AtomicU64; 16]);

impl Line {
    fn new() -> Self {
        Line(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// Where the payload of one direction lives: hot = the first words of the
/// buffer (or of the flag line), cold = rotating slots over a large pool.
struct Payload {
    words: Vec<AtomicU64>,
    slot_words: usize,
    cold: bool,
}

impl Payload {
    fn new(size: u64, cold: bool, llc: u64) -> Self {
        let need = (size as usize).div_ceil(8);
        // Slots start on a line boundary.
        let slot_words = need.div_ceil(8) * 8;
        let len = if cold {
            (2 * llc as usize / 8).max(2 * slot_words) + slot_words
        } else if need <= INLINE_WORDS {
            0
        } else {
            slot_words
        };
        Payload {
            words: (0..len).map(|_| AtomicU64::new(0)).collect(),
            slot_words,
            cold,
        }
    }

    /// The words of message number `seq`.
    fn slot<'a>(&'a self, line: &'a Line, seq: u64, need: usize) -> &'a [AtomicU64] {
        // A message of 0 bytes is the flag alone (and has no slot to rotate).
        if need == 0 {
            return &[];
        }
        if self.words.is_empty() {
            return &line.0[1..1 + need];
        }
        if !self.cold {
            return &self.words[..need];
        }
        let slots = (self.words.len() / self.slot_words).max(1) as u64;
        let start = (seq % slots) as usize * self.slot_words;
        &self.words[start..start + need]
    }
}

fn write_payload(words: &[AtomicU64], v: u64) {
    for w in words {
        // Relaxed: published by the Release store of the flag that follows.
        w.store(v, Ordering::Relaxed);
    }
}

fn read_payload(words: &[AtomicU64]) -> u64 {
    // Relaxed: ordered after the Acquire load of the flag that preceded.
    words
        .iter()
        .fold(0u64, |a, w| a.wrapping_add(w.load(Ordering::Relaxed)))
}

/// Spins until `flag` differs from `last`; bounded by [`WAIT_LIMIT`] and by
/// the other side giving up.
fn wait_change(flag: &AtomicU64, last: u64, abort: &AtomicBool) -> Result<u64> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        // Acquire: pairs with the peer's Release store so that its payload
        // writes are visible once the new flag value is.
        let v = flag.load(Ordering::Acquire);
        if v != last {
            return Ok(v);
        }
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins % 4096 == 0 {
            if abort.load(Ordering::Relaxed) {
                return Err(Error::OtherStopped);
            }
            if start.elapsed() > WAIT_LIMIT {
                abort.store(true, Ordering::Relaxed);
                return Err(Error::OtherTimeout { limit: WAIT_LIMIT });
            }
            if spins % (4096 * 64) == 0 {
                // Descheduled peer on a busy machine: let it run.
                std::thread::yield_now();
            }
        }
    }
}

/// One-way transfer time of `size` bytes between the pair's PUs, in us; one
/// sample = mean over a batch of round trips lasting about `min_time`.
pub fn latency(p: &LimitParams, size: u64) -> Result<SampleLine> {
    p.check()?;
    let need = (size as usize).div_ceil(8);
    let line = Line::new();
    let there = Payload::new(size, p.cold, p.llc);
    let back = Payload::new(size, p.cold, p.llc);
    let abort = AtomicBool::new(false);
    let ready = Barrier::new(2);
    let pin_error: Mutex<Option<PinError>> = Mutex::new(None);

    let samples = std::thread::scope(|s| -> Result<Vec<f64>> {
        let echo = s.spawn(|| -> Result<()> {
            if let Err(e) = crate::pin::pin_current_thread(p.pair.1) {
                *pin_error.lock().expect("not poisoned") = Some(e);
            }
            ready.wait();
            if pin_error.lock().expect("not poisoned").is_some() {
                return Ok(());
            }
            let mut last = 0u64;
            let mut sink = 0u64;
            loop {
                let v = wait_change(&line.0[0], last, &abort)?;
                if v == STOP {
                    break;
                }
                let seq = v / 2;
                sink = sink.wrapping_add(read_payload(there.slot(&line, seq, need)));
                write_payload(back.slot(&line, seq, need), v);
                // Release: the reply payload is visible before the flag.
                line.0[0].store(v + 1, Ordering::Release);
                last = v + 1;
            }
            std::hint::black_box(sink);
            Ok(())
        });

        let run = || -> Result<Vec<f64>> {
            if let Err(e) = crate::pin::pin_current_thread(p.pair.0) {
                *pin_error.lock().expect("not poisoned") = Some(e);
            }
            ready.wait();
            if let Some(e) = pin_error.lock().expect("not poisoned").clone() {
                return Err(e.into());
            }
            let mut seq = 0u64;
            let mut sink = 0u64;
            let mut round_trips = |n: u64| -> Result<Duration> {
                let t0 = Instant::now();
                for _ in 0..n {
                    let v = 2 * seq + 1;
                    write_payload(there.slot(&line, seq, need), v);
                    // Release: the payload is visible before the flag.
                    line.0[0].store(v, Ordering::Release);
                    wait_change(&line.0[0], v, &abort)?;
                    sink = sink.wrapping_add(read_payload(back.slot(&line, seq, need)));
                    seq += 1;
                }
                Ok(t0.elapsed())
            };
            let n = calibrate(p.min_time, &mut round_trips)?;
            let mut out = Vec::with_capacity(p.samples);
            for _ in 0..p.samples {
                let t = round_trips(n)?;
                out.push(t.as_secs_f64() / n as f64 / 2.0 * 1e6);
            }
            std::hint::black_box(sink);
            Ok(out)
        };
        // On a thread of its own: pinning the caller would leave it (and
        // every process it starts later, mpirun included) on one PU.
        let result = s.spawn(run).join().unwrap_or(Err(Error::Panicked {
            thread: "timing thread",
        }));
        line.0[0].store(STOP, Ordering::Release);
        let echoed = echo.join().map_err(|_| Error::Panicked {
            thread: "echo thread",
        })?;
        let samples = result?;
        echoed?;
        Ok(samples)
    })?;
    Ok(line_of("latency", size, p.cache(), "us", samples))
}

/// Grows a batch until it lasts `min_time` (at least one repetition); the
/// growing batches double as the warm-up.
fn calibrate(min_time: Duration, f: &mut impl FnMut(u64) -> Result<Duration>) -> Result<u64> {
    let mut n = 1u64;
    for _ in 0..40 {
        let t = f(n)?;
        if t >= min_time {
            break;
        }
        let grow = if t.is_zero() {
            16.0
        } else {
            (min_time.as_secs_f64() / t.as_secs_f64() * 1.1).clamp(1.5, 16.0)
        };
        n = (n as f64 * grow) as u64 + 1;
    }
    f(n)?;
    Ok(n)
}

/// Bytes of each copy pool: hot copies reuse one batch; cold ones rotate
/// batch-sized slots over more than 2 x LLC, so that a slot comes back only
/// after the caches held everything else.
fn copy_pool_bytes(cold: bool, llc: u64, batch: usize) -> usize {
    if cold {
        (2 * llc as usize).max(2 * batch) + batch
    } else {
        batch
    }
}

/// 8-byte ping-pongs between the copy's two threads after each of its
/// samples: the placement the sample ran in ([`crate::p2p_placement`]).
const COPY_PROBE_ROUNDS: u64 = 100;

/// A value of the copy's `turn` with this bit set asks the writer for a
/// probe (the rest counts the probes, so each value is new).
const PROBE_BIT: u64 = 1 << 62;

/// Cross-core copy rate at `size` bytes, GB/s (see the module docs), with
/// the one-way time (us) of [`COPY_PROBE_ROUNDS`] 8-byte ping-pongs between
/// the two threads after each sample as the line's `probe_us`.
///
/// The two threads hand the buffer over by spinning on one word (`turn`:
/// `2 rep` the writer's, `2 rep + 1` the copier's), never sleeping: a
/// thread that sleeps lets its vCPU idle, and a VM's host moves idle vCPUs
/// between near and distant cores (a std `Barrier` here made the slowest
/// copy samples 0.06x their median on a Zen 5 VM, 2026-12-02).
pub fn copy_rate(p: &LimitParams, size: u64) -> Result<SampleLine> {
    p.check()?;
    let size = size.max(1) as usize;
    // Bytes copied per repetition: k messages of `size`.
    let k = if p.cold {
        1
    } else {
        HOT_BATCH_BYTES.div_ceil(size)
    };
    let batch = k * size;
    let pool = copy_pool_bytes(p.cold, p.llc, batch);
    let slots = pool / batch;
    // Uncontended: the turn lets one thread at a time take it.
    let src = Mutex::new(vec![1u8; pool]);
    let ready = Barrier::new(2);
    let pin_error: Mutex<Option<PinError>> = Mutex::new(None);
    let turn = AtomicU64::new(0);
    let ball = AtomicU64::new(0);
    let abort = AtomicBool::new(false);

    let (samples, probes) = std::thread::scope(|s| -> Result<(Vec<f64>, Vec<f64>)> {
        // A: dirties the slice B will copy next (hot: the same one every
        // time), and in cold mode re-dirties the slice just consumed;
        // answers B's probes.
        let writer = s.spawn(|| -> Result<()> {
            if let Err(e) = crate::pin::pin_current_thread(p.pair.0) {
                *pin_error.lock().expect("not poisoned") = Some(e);
            }
            ready.wait();
            if pin_error.lock().expect("not poisoned").is_some() {
                return Ok(());
            }
            let (mut rep, mut last_ball) = (0u64, 0u64);
            // Acquire: B's copy of the previous slice is done.
            let mut t = turn.load(Ordering::Acquire);
            loop {
                if t == STOP {
                    return Ok(());
                }
                if t & PROBE_BIT != 0 {
                    for _ in 0..COPY_PROBE_ROUNDS {
                        let v = wait_change(&ball, last_ball, &abort)?;
                        // Release: nothing to publish but the answer.
                        ball.store(v + 1, Ordering::Release);
                        last_ball = v + 1;
                    }
                    t = wait_change(&turn, t, &abort)?;
                    continue;
                }
                {
                    let mut b = src.lock().expect("not poisoned");
                    let slot = rep as usize % slots;
                    b[slot * batch..(slot + 1) * batch].fill((rep % 251) as u8);
                }
                // Release: the slice is written before B may copy it.
                turn.store(2 * rep + 1, Ordering::Release);
                rep += 1;
                t = wait_change(&turn, 2 * rep - 1, &abort)?;
            }
        });

        let run = || -> Result<(Vec<f64>, Vec<f64>)> {
            if let Err(e) = crate::pin::pin_current_thread(p.pair.1) {
                *pin_error.lock().expect("not poisoned") = Some(e);
            }
            ready.wait();
            if let Some(e) = pin_error.lock().expect("not poisoned").clone() {
                return Err(e.into());
            }
            // Written once so that no page fault falls in a timed copy
            // (vec![0; n] maps zero pages lazily).
            let mut dst = vec![0u8; pool];
            dst.fill(2);
            let (mut rep, mut last_ball, mut asked) = (0u64, 0u64, 0u64);
            let mut out = Vec::with_capacity(p.samples);
            let mut probes = Vec::with_capacity(p.samples);
            // One untimed repetition per slot at most 4 as a warm-up
            // (faults in dst pages, steady state of the caches).
            let warm = slots.min(4);
            let total = warm + p.samples;
            for sample in 0..total {
                let mut busy = Duration::ZERO;
                let mut bytes = 0usize;
                loop {
                    wait_change(&turn, 2 * rep, &abort)?;
                    let slot = rep as usize % slots;
                    let range = slot * batch..(slot + 1) * batch;
                    {
                        let b = src.lock().expect("not poisoned");
                        let from = &b[range.clone()];
                        let to = &mut dst[range];
                        let t0 = Instant::now();
                        for (d, s) in to.chunks_exact_mut(size).zip(from.chunks_exact(size)) {
                            // black_box: keeps the compiler from fusing the
                            // small copies into one large one.
                            d.copy_from_slice(std::hint::black_box(s));
                        }
                        busy += t0.elapsed();
                    }
                    std::hint::black_box(&dst);
                    bytes += batch;
                    rep += 1;
                    let done = busy >= p.min_time || sample < warm;
                    if done {
                        break;
                    }
                    // Release: our copy is done before A writes again.
                    turn.store(2 * rep, Ordering::Release);
                }
                if sample >= warm {
                    out.push(bytes as f64 / busy.as_secs_f64().max(1e-9) / 1e9);
                    asked += 1;
                    turn.store(PROBE_BIT | asked, Ordering::Release);
                    let t0 = Instant::now();
                    for _ in 0..COPY_PROBE_ROUNDS {
                        // Release: pairs with A's Acquire in wait_change.
                        ball.store(last_ball + 1, Ordering::Release);
                        last_ball = wait_change(&ball, last_ball + 1, &abort)?;
                    }
                    let secs = t0.elapsed().as_secs_f64();
                    probes.push(secs / COPY_PROBE_ROUNDS as f64 / 2.0 * 1e6);
                }
                let next = if sample + 1 == total { STOP } else { 2 * rep };
                turn.store(next, Ordering::Release);
            }
            Ok((out, probes))
        };
        // On a thread of its own: the caller's affinity stays untouched.
        let result = s.spawn(run).join().unwrap_or(Err(Error::Panicked {
            thread: "copy thread",
        }));
        if result.is_err() {
            abort.store(true, Ordering::Relaxed);
            turn.store(STOP, Ordering::Release);
        }
        let written = writer.join().map_err(|_| Error::Panicked {
            thread: "writer thread",
        })?;
        let out = result?;
        written?;
        Ok(out)
    })?;
    let mut line = line_of("bw", size as u64, p.cache(), "GB/s", samples);
    line.probe_us = Some(probes);
    Ok(line)
}

fn line_of(test: &str, size: u64, cache: &str, unit: &str, samples: Vec<f64>) -> SampleLine {
    SampleLine {
        implementation: IMPL.into(),
        test: test.into(),
        size,
        cache: cache.into(),
        unit: unit.into(),
        samples,
        probe_us: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pair: (u32, u32)) -> LimitParams {
        LimitParams {
            pair,
            cold: false,
            llc: 1 << 20,
            samples: 5,
            min_time: Duration::from_micros(200),
        }
    }

    #[test]
    fn cold_copy_pools_reach_past_twice_the_llc_and_hot_ones_reuse_one_batch() {
        let (llc, batch) = (480usize << 20, 256usize << 10);
        let cold = copy_pool_bytes(true, llc as u64, batch);
        assert!(cold > 2 * llc, "{cold}");
        // Whole slots, at least three of them, even for a batch beyond the LLC.
        assert!(cold / batch >= 3);
        let big = copy_pool_bytes(true, 1 << 20, 64 << 20);
        assert!(big / (64 << 20) >= 3, "{big}");
        assert_eq!(copy_pool_bytes(false, llc as u64, batch), batch);
    }

    #[test]
    fn the_callers_affinity_is_left_alone() {
        let pus = crate::pin::allowed_pus().unwrap();
        if pus.len() < 2 {
            return;
        }
        let p = params((pus[0], pus[1]));
        latency(&p, 8).unwrap();
        copy_rate(&p, 4096).unwrap();
        assert_eq!(crate::pin::allowed_pus().unwrap(), pus);
        let own = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = own
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .unwrap()
            .to_string();
        assert!(
            line.ends_with(&topocomm_topo::PuSet::from_indexes(pus.clone()).to_string()),
            "{line}"
        );
    }

    #[test]
    fn missing_pu_and_same_pu_are_errors() {
        let e = latency(&params((0, 100_000)), 8).unwrap_err().to_string();
        assert!(e.starts_with("PU 100000 does not exist"), "{e}");
        let e = copy_rate(&params((100_000, 0)), 64)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("PU 100000 does not exist"), "{e}");
        let e = latency(&params((0, 0)), 8).unwrap_err().to_string();
        assert_eq!(
            e,
            "pair 0,0: the two PUs must differ (a limit between a PU and itself is not a transfer)"
        );
    }

    #[test]
    fn payload_slots_rotate_in_cold_mode_only() {
        let line = Line::new();
        let hot = Payload::new(8, false, 1 << 16);
        assert!(hot.words.is_empty(), "8 bytes ride in the flag line");
        assert_eq!(hot.slot(&line, 5, 1).len(), 1);
        let cold = Payload::new(100, true, 1 << 16);
        let a = cold.slot(&line, 0, 13).as_ptr();
        let b = cold.slot(&line, 1, 13).as_ptr();
        assert_ne!(a, b);
        assert!(cold.words.len() * 8 >= 2 << 16);
    }
}
