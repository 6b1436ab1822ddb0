//! The physical limits of `topocomm_measure::limits` measured on this machine
//! (quick mode), checked against what the module promises: the exact sample
//! line (implementation, test, unit, size, cache, sample count), samples that
//! fit in the time the call took, the `min_time` of every copy sample, rates
//! and times inside physical bounds, the orderings physics imposes (a 64-byte
//! payload is not faster than an 8-byte one, a cold copy is not faster than a
//! hot one), and the errors: a PU this machine does not have is an error
//! naming it (never a measurement on another PU), as are a PU paired with
//! itself and zero samples.
//!
//! Timings on a shared 2-core CI machine are noisy: the assertions are either
//! exact (counts, metadata, time accounting) or generous (physics bounds,
//! factor-of-2 orderings between the best of interleaved runs).

use std::time::{Duration, Instant};
use topocomm_measure::limits::{copy_rate, latency, LimitParams, IMPL, LATENCY_MAX_SIZE};
use topocomm_measure::pin::allowed_pus;
use topocomm_measure::{SampleLine, Summary};

/// The tests measure: run them one at a time, not against each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One-way cross-core latency can't be below this (us): the flag crosses
/// between two cores, which takes several cycles even between SMT siblings
/// (1 ns = 5 cycles at 5 GHz).
const MIN_LATENCY_US: f64 = 0.001;
/// The best cross-core latency of a test above this (us) means the ping-pong
/// is broken: a cache line between two cores of one machine takes well under
/// 1 us, 10 us leaves room for a loaded VM. (A single call can exceed it
/// when other processes hold the peer's core: both threads spin, and every
/// round trip then waits for a time slice, about 4 ms here.)
const MAX_LATENCY_US: f64 = 10.0;
/// A core copies at most ~2 loads + 1 store of 64 B per cycle: about
/// 400 GB/s at 6 GHz. Above 1000 GB/s the rate is wrong (unit, bytes counted).
const MAX_COPY_GBS: f64 = 1000.0;
/// Below this the copy (or the unit) is broken: DRAM alone does > 1 GB/s.
const MIN_COPY_GBS: f64 = 0.1;

fn pair() -> Option<(u32, u32)> {
    let pus = allowed_pus().unwrap();
    if pus.len() < 2 {
        eprintln!("notice: fewer than 2 usable PUs; skipping the limit tests");
        return None;
    }
    Some((pus[0], pus[1]))
}

/// The live machine's last-level cache (the cold pools must exceed it for a
/// cold copy to come from memory).
fn live_llc() -> u64 {
    topocomm_topo::load(&topocomm_topo::TopologySpec::Live)
        .ok()
        .and_then(|m| m.llc_size())
        .unwrap_or(32 << 20)
}

fn params(pair: (u32, u32), cold: bool, samples: usize, min_time: Duration) -> LimitParams {
    LimitParams {
        pair,
        cold,
        llc: 4 << 20,
        samples,
        min_time,
    }
}

fn cache_name(cold: bool) -> &'static str {
    if cold {
        "cold"
    } else {
        "hot"
    }
}

/// Runs `f` and returns its result with the wall time it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t0 = Instant::now();
    let r = f();
    (r, t0.elapsed())
}

fn median(l: &SampleLine) -> f64 {
    Summary::of(&l.samples)
        .unwrap_or_else(|| panic!("non-finite or no samples: {l:?}"))
        .median
}

/// The affinity list of the calling thread, as the kernel reports it.
fn own_affinity() -> String {
    std::fs::read_to_string("/proc/thread-self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list"))
        .unwrap()
        .to_string()
}

/// A latency line: exact metadata; every sample a physical one-way time;
/// each sample is the mean of n >= 1 timed round trips, all inside the call,
/// so 2 x sample summed over the samples cannot exceed the call's duration.
/// Returns the median.
fn check_latency_line(
    l: &SampleLine,
    size: u64,
    cold: bool,
    samples: usize,
    took: Duration,
) -> f64 {
    assert_eq!(l.implementation, IMPL, "{l:?}");
    assert_eq!(IMPL, "limit");
    assert_eq!(
        (l.test.as_str(), l.unit.as_str(), l.cache.as_str(), l.size),
        ("latency", "us", cache_name(cold), size),
        "{l:?}"
    );
    assert_eq!(l.samples.len(), samples, "{l:?}");
    for &s in &l.samples {
        assert!(
            s.is_finite() && s >= MIN_LATENCY_US,
            "one-way latency {s} us below {MIN_LATENCY_US} us: {l:?}"
        );
    }
    let round_trips_us: f64 = l.samples.iter().map(|s| 2.0 * s).sum();
    let took_us = took.as_secs_f64() * 1e6;
    assert!(
        round_trips_us <= took_us,
        "the samples claim {round_trips_us:.1} us of round trips, the call took {took_us:.1} us: {l:?}"
    );
    median(l)
}

/// A copy-rate line: exact metadata; every sample a physical rate; each
/// sample times at least `min_time` and at least one copy of `size` bytes,
/// so sum over samples of max(min_time, size / rate) fits in the call.
fn check_copy_line(
    l: &SampleLine,
    size: u64,
    cold: bool,
    samples: usize,
    min_time: Duration,
    took: Duration,
) {
    assert_eq!(
        (
            l.implementation.as_str(),
            l.test.as_str(),
            l.unit.as_str(),
            l.cache.as_str(),
            l.size
        ),
        (IMPL, "bw", "GB/s", cache_name(cold), size),
        "{l:?}"
    );
    assert_eq!(l.samples.len(), samples, "{l:?}");
    for &r in &l.samples {
        assert!(
            r.is_finite() && r > 0.0 && r < MAX_COPY_GBS,
            "copy rate {r} GB/s outside (0, {MAX_COPY_GBS}): {l:?}"
        );
    }
    let m = median(l);
    // Tiny copies are bound by the cross-core round trip, not bandwidth: 1
    // byte ran at 0.05-0.07 GB/s on the 2-vCPU Intel Xeon VM under the
    // test suite's load (CI red). Below 100 bytes the floor is one copy per
    // microsecond (size / 1000 GB/s).
    let floor = MIN_COPY_GBS.min(size as f64 / 1000.0);
    assert!(m > floor, "median {m} GB/s (floor {floor}): {l:?}");
    let busy: f64 = l
        .samples
        .iter()
        .map(|r| (size as f64 / (r * 1e9)).max(min_time.as_secs_f64()))
        .sum();
    assert!(
        busy <= took.as_secs_f64(),
        "the samples imply {busy:.6} s of timed copies, the call took {:.6} s: {l:?}",
        took.as_secs_f64()
    );
}

#[test]
fn latency_lines_are_exact_and_fit_in_the_time_taken() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = pair() else { return };
    let before = own_affinity();
    let mut best = f64::INFINITY;
    for cold in [false, true] {
        // Payload beside the flag (hot) or in rotating slots (cold), up to
        // LATENCY_MAX_SIZE, the largest size the latency bound holds for
        // (size 0: size_zero_behaves_as_documented).
        for size in [1, 8, 24, LATENCY_MAX_SIZE] {
            let p = params(pair, cold, 5, Duration::from_micros(500));
            let (l, took) = timed(|| latency(&p, size));
            let l = l.unwrap();
            eprintln!(
                "limit latency {} {size} B: median {:.4} us, call {:?}",
                l.cache,
                median(&l),
                took
            );
            best = best.min(check_latency_line(&l, size, cold, 5, took));
            // The calibration alone lasts min_time.
            assert!(took >= p.min_time, "{took:?}");
        }
    }
    // One round trip per sample (min_time below one round trip): the
    // accounting above is then tight, a wrong unit (ns) cannot hide.
    let p = params(pair, false, 9, Duration::from_nanos(1));
    let (l, took) = timed(|| latency(&p, 8));
    check_latency_line(&l.unwrap(), 8, false, 9, took);
    assert!(
        best <= MAX_LATENCY_US,
        "best median one-way latency {best} us"
    );
    assert_eq!(own_affinity(), before, "the caller's affinity changed");
}

#[test]
fn a_64_byte_payload_is_not_faster_than_8_bytes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = pair() else { return };
    // 64 B span the flag's line and the next one, 8 B ride in the flag's
    // line: 64 B cost at least as much. Best of interleaved runs, and a
    // factor 2 of slack for the noise of a shared machine. 9 rounds: on a
    // VM whose host moves the vCPUs between near and distant cores every
    // second or so (docs/transport.md, finding 5) the line round trip
    // changes 4-5x between runs, and both sizes must see the near state.
    let p = params(pair, false, 7, Duration::from_millis(1));
    let (mut best8, mut best64) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..9 {
        best8 = best8.min(median(&latency(&p, 8).unwrap()));
        best64 = best64.min(median(&latency(&p, 64).unwrap()));
    }
    eprintln!("limit latency best medians: 8 B {best8:.4} us, 64 B {best64:.4} us");
    assert!(
        best64 >= 0.5 * best8,
        "64 B one-way {best64} us vs 8 B {best8} us"
    );
}

#[test]
fn copy_rate_lines_are_exact_and_consistent_with_the_time_taken() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = pair() else { return };
    let before = own_affinity();
    for (cold, size) in [
        (false, 64),
        (false, 65536),
        (false, 1 << 20),
        (true, 65536),
        (true, 1 << 20),
    ] {
        for min_time in [Duration::from_millis(1), Duration::from_nanos(1)] {
            let p = params(pair, cold, 5, min_time);
            let (l, took) = timed(|| copy_rate(&p, size));
            let l = l.unwrap();
            eprintln!(
                "limit copy {} {size} B, min_time {min_time:?}: median {:.2} GB/s, call {took:?}",
                l.cache,
                median(&l)
            );
            check_copy_line(&l, size, cold, 5, min_time, took);
        }
    }
    assert_eq!(own_affinity(), before, "the caller's affinity changed");
}

#[test]
fn a_cold_copy_is_not_faster_than_a_hot_one() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = pair() else { return };
    // 256 KiB: within the writer's L2 on every machine we met (1-2 MiB), so
    // hot copies come from its caches while cold ones come from pools twice
    // the LLC, in memory. At 4 MiB a 2-vCPU Intel Xeon VM (its guest sees a
    // 300 MB L3 the host does not give it) served hot copies from memory
    // too: hot 7.8 GB/s, cold 7.1.
    let size = 256 << 10;
    let llc = live_llc();
    let mk = |cold| LimitParams {
        llc,
        ..params(pair, cold, 5, Duration::from_millis(1))
    };
    let (mut hot, mut cold) = (0f64, 0f64);
    for _ in 0..3 {
        hot = hot.max(median(&copy_rate(&mk(false), size).unwrap()));
        cold = cold.max(median(&copy_rate(&mk(true), size).unwrap()));
    }
    eprintln!(
        "limit copy 256 KiB best medians: hot {hot:.2} GB/s, cold {cold:.2} GB/s (LLC {llc} B)"
    );
    // A cold copy (destination slots rotating over pools past twice the
    // LLC: write-allocate and write-back in memory) is not faster than a hot
    // one. How much slower depends on the machine: 0.33-0.56 on the AMD dev
    // VMs at 4 MiB, 0.51-0.53 on the Intel Xeon VM at 256 KiB, but 0.94 on
    // the same VM type in CI (hot 9.41 GB/s, cold 8.87: the cross-core read,
    // the same in both modes, dominated). So the check is the direction,
    // with 10% for noise (best of 3 runs each); the pools' size is checked
    // exactly by the unit test in limits.rs.
    assert!(
        cold <= 1.1 * hot,
        "cold copies {cold} GB/s are faster than hot ones ({hot} GB/s)"
    );
}

/// The best rate (GB/s) of copying `size`-byte chunks of a 256 KiB (at
/// least `size`) buffer on the calling thread, source and destination hot in
/// its own caches: what no cross-core copy can beat.
fn local_copy_rate(size: usize) -> f64 {
    let len = size.max(256 * 1024);
    let src = vec![1u8; len];
    // Several destination offsets: glibc's `rep movsb` path can be many
    // times slower for one relative placement of source and destination
    // (measured here on a Zen 4 VM: 2 GB/s at 4 KiB with both buffers at
    // the same page offset), and the reference is the best the core can do.
    let mut dst_mem = vec![2u8; len + 4096];
    let mut best = 0f64;
    for off in [0usize, 64, 2048] {
        let dst = &mut dst_mem[off..off + len];
        for _ in 0..40 {
            let t0 = Instant::now();
            for (d, s) in dst.chunks_exact_mut(size).zip(src.chunks_exact(size)) {
                d.copy_from_slice(std::hint::black_box(s));
            }
            let t = t0.elapsed().as_secs_f64();
            std::hint::black_box(&dst);
            best = best.max(len as f64 / t.max(1e-9) / 1e9);
        }
    }
    best
}

#[test]
fn a_cross_core_copy_is_not_faster_than_a_local_one() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = pair() else { return };
    // Same kernel (copy_from_slice of `size`-byte chunks), same clock: the
    // limit reads lines another core just wrote, the reference reads its own
    // cache. A rate in the wrong unit (bits, MB) or counting bytes never
    // copied shows up here; factor 2 for the noise of a shared machine. A
    // unit error fails every attempt; a reference slowed by a busy machine
    // (CI's 2 cores, a VM whose host moves the vCPUs) passes a later one,
    // so each size gets up to 3 attempts, both sides measured afresh.
    for size in [4096usize, 65536, 1 << 20] {
        let mut seen = Vec::new();
        let ok = (0..3).any(|_| {
            let reference = local_copy_rate(size);
            let l = copy_rate(
                &params(pair, false, 5, Duration::from_millis(1)),
                size as u64,
            )
            .unwrap();
            let m = median(&l);
            eprintln!(
                "copy {size} B: cross-core median {m:.2} GB/s, local best {reference:.2} GB/s"
            );
            seen.push((m, reference));
            m <= 2.0 * reference
        });
        assert!(
            ok,
            "cross-core copy vs same-core copy (GB/s) at {size} B, 3 attempts: {seen:?}"
        );
    }
}

#[test]
fn size_zero_behaves_as_documented() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = pair() else { return };
    let p = params(pair, false, 3, Duration::from_micros(200));
    // A copy of nothing is measured as a copy of 1 byte, and says so.
    let (l, took) = timed(|| copy_rate(&p, 0));
    check_copy_line(&l.unwrap(), 1, false, 3, p.min_time, took);
    // A latency of 0 bytes is the flag alone.
    let (l, took) = timed(|| latency(&p, 0));
    check_latency_line(&l.unwrap(), 0, false, 3, took);
}

/// A cold 0-byte latency is the flag alone, as the hot one is (it used to
/// divide by zero in `Payload::slot`: zero-word slots to rotate over).
#[test]
fn cold_latency_of_zero_bytes_is_the_flag_alone() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = pair() else { return };
    let p = params(pair, true, 3, Duration::from_micros(200));
    let (l, took) = timed(|| latency(&p, 0));
    check_latency_line(&l.unwrap(), 0, true, 3, took);
}

#[test]
fn absent_pus_same_pu_and_no_samples_are_errors() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pus = allowed_pus().unwrap();
    let usable = topocomm_topo::PuSet::from_indexes(pus.clone()).to_string();
    let here = pus[0];
    let absent = 100_000;
    let before = own_affinity();
    for cold in [false, true] {
        for pair in [(here, absent), (absent, here)] {
            let p = params(pair, cold, 3, Duration::from_micros(100));
            for e in [
                latency(&p, 8).unwrap_err().to_string(),
                copy_rate(&p, 4096).unwrap_err().to_string(),
            ] {
                assert!(e.contains(&format!("PU {absent}")), "{e}");
                assert!(e.contains(&format!("usable PUs: {usable}")), "{e}");
            }
        }
        let p = params((here, here), cold, 3, Duration::from_micros(100));
        for e in [
            latency(&p, 8).unwrap_err().to_string(),
            copy_rate(&p, 4096).unwrap_err().to_string(),
        ] {
            assert!(e.contains(&format!("pair {here},{here}")), "{e}");
            assert!(e.contains("must differ"), "{e}");
        }
    }
    if let Some(pair) = pair() {
        let p = params(pair, false, 0, Duration::from_micros(100));
        for e in [
            latency(&p, 8).unwrap_err().to_string(),
            copy_rate(&p, 4096).unwrap_err().to_string(),
        ] {
            assert!(e.contains("samples must be at least 1"), "{e}");
        }
    }
    assert_eq!(own_affinity(), before, "the caller's affinity changed");
}
