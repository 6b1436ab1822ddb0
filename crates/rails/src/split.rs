//! Split plan of one message across the network rails (seed 002 §3.2):
//! one chunk per rail, each proportional to the rail's weight from the
//! sending process's location.

use crate::error::RailsError;
use crate::locality::Distance;
use crate::weights::RailWeight;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitParams {
    /// Rails whose share would be below this fraction are dropped and the
    /// rest renormalized: a tiny chunk costs a rail's latency for nothing.
    pub min_share: f64,
    /// Messages below this size go over one rail: seed 002 (§4.2) sees
    /// NUIOA effects "whenever messages contain dozens of kilobytes";
    /// below that, one rail's latency is all that matters.
    pub single_rail_below: u64,
    /// All-to-all / contention mode (seed 002 §4.5): use only the nearest
    /// rails ("processes close to one NIC should only use this NIC"; those
    /// close to none still split over all).
    pub contention: bool,
}

impl Default for SplitParams {
    fn default() -> Self {
        SplitParams {
            min_share: 0.10,
            single_rail_below: 64 << 10,
            contention: false,
        }
    }
}

impl SplitParams {
    pub fn validate(&self) -> Result<(), RailsError> {
        if !(0.0..1.0).contains(&self.min_share) {
            return Err(RailsError::BadParameter {
                what: "--min-share".into(),
                reason: format!("expected a fraction in [0, 1), got {}", self.min_share),
            });
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SplitMode {
    /// Proportional split over all useful rails.
    Multirail,
    /// Proportional split over the nearest rails only (contention mode).
    Nearest,
    /// Below the size threshold: the best rail only.
    SingleRail,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Chunk {
    /// Index in the rail list that was weighed.
    pub rail: usize,
    pub name: String,
    pub distance: Distance,
    pub weight: f64,
    /// Fraction of the message, summing to 1 over the chunks.
    pub share: f64,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitPlan {
    pub size: u64,
    pub mode: SplitMode,
    /// Largest share first.
    pub chunks: Vec<Chunk>,
    /// Rails left out and why.
    pub dropped: Vec<(String, String)>,
}

/// Plans one message of `size` bytes over the weighed rails.
pub fn split(weights: &[RailWeight], size: u64, p: &SplitParams) -> Result<SplitPlan, RailsError> {
    p.validate()?;
    if weights.is_empty() {
        return Err(RailsError::NoNetworkRails(String::new()));
    }
    let mut dropped = Vec::new();
    let nearest = weights.iter().map(|w| w.distance).min().unwrap();
    // Candidates by mode.
    let (mode, mut cand): (SplitMode, Vec<&RailWeight>) = if size < p.single_rail_below {
        // Best weight; ties go to the nearer rail, then to list order.
        let best = weights
            .iter()
            .min_by(|a, b| {
                b.weight
                    .total_cmp(&a.weight)
                    .then(a.distance.cmp(&b.distance))
                    .then(a.rail.cmp(&b.rail))
            })
            .unwrap();
        for w in weights.iter().filter(|w| w.rail != best.rail) {
            dropped.push((
                w.name.clone(),
                format!(
                    "message below the single-rail threshold ({} B)",
                    p.single_rail_below
                ),
            ));
        }
        (SplitMode::SingleRail, vec![best])
    } else if p.contention {
        for w in weights.iter().filter(|w| w.distance != nearest) {
            dropped.push((
                w.name.clone(),
                format!(
                    "contention mode: {} while a {nearest} rail exists",
                    w.distance
                ),
            ));
        }
        (
            SplitMode::Nearest,
            weights.iter().filter(|w| w.distance == nearest).collect(),
        )
    } else {
        (SplitMode::Multirail, weights.iter().collect())
    };
    // Drop the smallest share below min_share until all pass (one at a time:
    // dropping one raises the others' shares).
    loop {
        let total: f64 = cand.iter().map(|w| w.weight).sum();
        let smallest = cand
            .iter()
            .enumerate()
            .min_by(|a, b| {
                a.1.weight
                    .total_cmp(&b.1.weight)
                    .then(b.1.rail.cmp(&a.1.rail))
            })
            .map(|(i, w)| (i, w.weight / total));
        match smallest {
            Some((i, share)) if cand.len() > 1 && share < p.min_share => {
                let w = cand.remove(i);
                dropped.push((
                    w.name.clone(),
                    format!(
                        "share {:.1}% below the minimum {:.1}%",
                        share * 100.0,
                        p.min_share * 100.0
                    ),
                ));
            }
            _ => break,
        }
    }
    let total: f64 = cand.iter().map(|w| w.weight).sum();
    let mut chunks: Vec<Chunk> = cand
        .iter()
        .map(|w| {
            let share = w.weight / total;
            Chunk {
                rail: w.rail,
                name: w.name.clone(),
                distance: w.distance,
                weight: w.weight,
                share,
                bytes: (share * size as f64).floor() as u64,
            }
        })
        .collect();
    chunks.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.rail.cmp(&b.rail)));
    // Rounding remainder to the largest chunk, so the bytes add up to size.
    let others: u64 = chunks[1..].iter().map(|c| c.bytes).sum();
    chunks[0].bytes = size.saturating_sub(others);
    Ok(SplitPlan {
        size,
        mode,
        chunks,
        dropped,
    })
}
