//! Timer checks: benchmarks report the clock's resolution and refuse batch
//! durations too short to be measured.

use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerInfo {
    /// Smallest non-zero difference seen between two successive readings (ns).
    pub resolution_ns: f64,
    /// Median cost of one reading (ns).
    pub overhead_ns: f64,
}

/// Measures the resolution and overhead of `Instant::now()`.
pub fn check() -> TimerInfo {
    let mut min_step = f64::INFINITY;
    let mut costs = Vec::with_capacity(64);
    for _ in 0..64 {
        let start = Instant::now();
        let mut prev = start;
        let mut reads = 0u32;
        loop {
            let now = Instant::now();
            reads += 1;
            let d = now.duration_since(prev).as_nanos() as f64;
            if d > 0.0 {
                min_step = min_step.min(d);
            }
            prev = now;
            if reads >= 1000 {
                break;
            }
        }
        costs.push(prev.duration_since(start).as_nanos() as f64 / f64::from(reads));
    }
    costs.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    TimerInfo {
        resolution_ns: if min_step.is_finite() { min_step } else { 0.0 },
        overhead_ns: costs[costs.len() / 2],
    }
}

/// Shortest batch (ns) whose timing error from the clock stays under 0.1%.
pub fn min_batch_ns(info: &TimerInfo) -> f64 {
    (info.resolution_ns.max(info.overhead_ns) * 1000.0).max(10_000.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn resolution_is_plausible() {
        let t = super::check();
        assert!(
            t.resolution_ns > 0.0 && t.resolution_ns < 1_000_000.0,
            "{t:?}"
        );
        assert!(t.overhead_ns > 0.0 && t.overhead_ns < 100_000.0, "{t:?}");
    }
}
