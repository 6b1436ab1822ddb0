//! Synthetic measurements for the tests of the objective.

use super::ClassMeasure;
use topocomm_measure::SampleLine;

pub(super) fn line(test: &str, size: u64, samples: Vec<f64>) -> SampleLine {
    SampleLine {
        implementation: "openmpi".into(),
        test: test.into(),
        size,
        cache: "hot".into(),
        unit: if test == "latency" { "us" } else { "GB/s" }.into(),
        samples,
        probe_us: None,
    }
}

pub(super) fn around(x: f64, spread: f64) -> Vec<f64> {
    (0..9)
        .map(|i| x * (1.0 + spread * (i as f64 - 4.0) / 4.0))
        .collect()
}

pub(super) fn cm(lines: Vec<SampleLine>) -> ClassMeasure {
    ClassMeasure {
        class: "l3".into(),
        pair: (0, 1),
        lines,
    }
}

/// Deterministic pseudo-random samples: `n` values around `x` with
/// multiplicative noise up to `spread` (uniform).
pub(super) fn noisy(seed: &mut u64, x: f64, spread: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (*seed >> 11) as f64 / (1u64 << 53) as f64;
            x * (1.0 + spread * (2.0 * u - 1.0))
        })
        .collect()
}

/// One job of a noisy machine: every point of a job shares a job-level
/// speed factor in [1 - drift, 1 + drift], plus sample noise (+-15% on a
/// noisy machine, +-4% on a quiet one). `speed` < 1 is a slower setting (bw lower, latency higher).
pub(super) fn job(
    seed: &mut u64,
    points: &[(&str, u64, f64)],
    drift: f64,
    speed: f64,
) -> ClassMeasure {
    let spread = if drift > 0.1 { 0.15 } else { 0.04 };
    let f = noisy(seed, 1.0, drift, 1)[0] * speed;
    cm(points
        .iter()
        .map(|(t, size, x)| {
            let base = if *t == "latency" { x / f } else { x * f };
            line(t, *size, noisy(seed, base, spread, 9))
        })
        .collect())
}

pub(super) const POINTS: [(&str, u64, f64); 6] = [
    ("bw", 1, 0.006),
    ("bw", 1024, 2.0),
    ("bw", 65536, 10.0),
    ("bw", 1 << 20, 13.0),
    ("latency", 1, 0.36),
    ("latency", 4096, 3.0),
];
