//! One candidate setting against the defaults, per locality class:
//! the bandwidth gain over the target sizes (an [`Objective`] range, 64 KiB
//! to 4 MiB unless the user picks the sizes their application sends) and
//! the sizes that got slower.
//!
//! The acceptance rule ([`judge`]), the same in the search, the final
//! verification and `--verify FILE`: at each (test, size) the slowdown
//! `default/tuned` (bw) or `tuned/default` (latency) of the medians gets a
//! conservative 95% interval from the two medians' 95% CIs
//! (`[d.ci_low / t.ci_high, d.ci_high / t.ci_low]` for bw). The size counts
//! as slower only when the whole interval lies above `1 + bound`, where
//! `bound` is the larger of [`TOLERANCE`] and the A/A noise at that size:
//! how far the medians of two jobs of the *defaults* measured in the same
//! run (interleaved with the candidates) drifted apart ([`NoiseFloor`]).
//! Within-job spread is in the CIs, between-job spread in the bound, so two
//! jobs of identical settings never count as slower (a pair that fed the
//! bound cannot exceed it). A size outside the setting's scope (sizes its
//! parameters cannot change, [`crate::space::Space::scope`]) is judged by
//! the same rule but does not veto in the search.
//!
//! Its parts, each re-exported here: `compare` (one setting vs the
//! defaults at each size: [`judge`], [`compare_with`], [`combine`]),
//! `noise` (the A/A noise of a run: [`NoiseFloor`]) and `verdicts` (over
//! several jobs: [`established`] for the verification's alternations,
//! [`job_level_shift`] for machine events).

use serde::Serialize;
use topocomm_measure::{SampleLine, Summary};

mod compare;
mod noise;
#[cfg(test)]
mod testdata;
mod verdicts;

pub use compare::{combine, compare, compare_with, evidence, judge, judged, Rule};
pub use noise::NoiseFloor;
pub use verdicts::{established, job_level_shift, slower_in_every, Alternations, Shift};

/// Default target range of the objective (inclusive).
pub const TARGET_MIN: u64 = 64 << 10;
pub const TARGET_MAX: u64 = 4 << 20;

/// The message sizes whose streaming bandwidth the tuner maximizes
/// (inclusive); every other measured size only has to stay no slower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Objective {
    pub min: u64,
    pub max: u64,
}

impl Default for Objective {
    fn default() -> Objective {
        Objective {
            min: TARGET_MIN,
            max: TARGET_MAX,
        }
    }
}

impl Objective {
    /// `MIN-MAX` with K/M/G suffixes (`4K-16K`), or one size (`64K`).
    pub fn parse(s: &str) -> Result<Objective, String> {
        let size = |t: &str| {
            topocomm_measure::p2p::parse_sizes(t.trim())
                .map_err(|e| e.to_string())
                .and_then(|v| match v.as_slice() {
                    [one] => Ok(*one),
                    _ => Err(format!("'{t}' is not one size")),
                })
        };
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (size(a)?, size(b)?),
            None => {
                let one = size(s)?;
                (one, one)
            }
        };
        if min > max {
            return Err(format!("'{s}': the range is empty (min > max)"));
        }
        Ok(Objective { min, max })
    }

    pub fn contains(&self, size: u64) -> bool {
        (self.min..=self.max).contains(&size)
    }

    /// `64K-4M` (or `4K` for a single size).
    pub fn label(&self) -> String {
        use topocomm_measure::p2p::size_label;
        if self.min == self.max {
            size_label(self.min)
        } else {
            format!("{}-{}", size_label(self.min), size_label(self.max))
        }
    }
}

/// "No size more than 5% slower than default."
pub const TOLERANCE: f64 = 0.05;

/// What one setting measured on one class's representative pair.
#[derive(Clone, Debug, Serialize)]
pub struct ClassMeasure {
    pub class: String,
    pub pair: (u32, u32),
    pub lines: Vec<SampleLine>,
}

/// One (test, size) of a comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SizeCompare {
    /// Slowdown tuned vs default (> 1: slower; `1 / gain`), conservative
    /// 95% interval from the two medians' CIs: `[low, high]`.
    pub slowdown_ci: (f64, f64),
    /// A/A noise bound at this size (relative: 0.2 = two default jobs'
    /// medians 20% apart); the rule uses `max(TOLERANCE, noise)`.
    pub noise: f64,
    /// Whether the setting's parameters can change this size; a size out
    /// of scope is judged but does not veto in the search.
    pub in_scope: bool,
    pub test: String,
    pub size: u64,
    pub unit: String,
    pub default: Summary,
    pub tuned: Summary,
    /// Speed-up: tuned / default for rates, default / tuned for times.
    pub gain: f64,
    /// Slower than default beyond the noise: the slowdown's whole interval
    /// lies above `1 + max(TOLERANCE, noise)` ([`judge`]).
    pub slower: bool,
}

/// A candidate against the defaults on one class.
#[derive(Clone, Debug, Serialize)]
pub struct ClassVerdict {
    pub class: String,
    pub sizes: Vec<SizeCompare>,
    /// Geometric mean of the bw gains over the target sizes (1 = no change).
    pub score: f64,
}

impl ClassVerdict {
    /// No size in scope is slower (every size is in scope unless a scope
    /// was given).
    pub fn feasible(&self) -> bool {
        !self.sizes.iter().any(|s| s.slower && s.in_scope)
    }

    /// Sizes slower beyond the noise but outside the setting's scope.
    pub fn out_of_scope_slower(&self) -> impl Iterator<Item = &SizeCompare> {
        self.sizes.iter().filter(|s| s.slower && !s.in_scope)
    }
}

#[cfg(test)]
mod tests {
    use super::testdata::line;
    use super::*;

    #[test]
    fn objective_ranges_parse_and_choose_the_scored_sizes() {
        assert_eq!(Objective::default().label(), "64K-4M");
        let o = Objective::parse("4K-16K").unwrap();
        assert_eq!((o.min, o.max), (4096, 16384));
        assert_eq!(Objective::parse("64K").unwrap().label(), "64K");
        for bad in ["16K-4K", "x", "4K-", "4K,8K"] {
            assert!(Objective::parse(bad).is_err(), "{bad}");
        }
        // 4K doubles, 1M halves: each range scores only its own sizes.
        let d = ClassMeasure {
            class: "l3".into(),
            pair: (0, 1),
            lines: vec![
                line("bw", 4096, vec![1.0; 9]),
                line("bw", 1 << 20, vec![10.0; 9]),
            ],
        };
        let t = ClassMeasure {
            lines: vec![
                line("bw", 4096, vec![2.0; 9]),
                line("bw", 1 << 20, vec![5.0; 9]),
            ],
            ..d.clone()
        };
        let small = compare(&d, &t, &Objective::parse("4K-16K").unwrap());
        assert!((small.score - 2.0).abs() < 1e-9, "{}", small.score);
        let large = compare(&d, &t, &Objective::default());
        assert!((large.score - 0.5).abs() < 1e-9, "{}", large.score);
        // The constraint does not depend on the range: 1M is slower either way.
        assert!(!small.feasible() && !large.feasible());
    }
}
