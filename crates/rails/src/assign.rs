//! Devices of one local rank: the nearest GPU and the network rails its
//! large messages use, balanced across the ranks that share a location.

use crate::discover::Rails;
use crate::error::RailsError;
use crate::locality::{distance, Distance, Location};
use crate::split::{split, SplitParams, SplitPlan};
use crate::weights::RailWeight;
use serde::Serialize;

/// What one local rank gets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Choice {
    pub local_rank: u32,
    /// Index in [`Rails::gpus`] of the chosen GPU, if the machine has GPUs.
    pub gpu: Option<usize>,
    /// The equally nearest GPUs it was chosen among (round-robin by local rank).
    pub gpu_candidates: Vec<usize>,
    pub gpu_distance: Option<Distance>,
    /// The plan of a large message (network rails in use, in order; the
    /// first of equally weighted rails rotates with the local rank).
    pub nics: Option<SplitPlan>,
}

/// Indexes of the rails of `list` nearest to `loc`, in list order.
pub fn nearest(loc: &Location, list: &[crate::Rail]) -> (Vec<usize>, Option<Distance>) {
    let best = list.iter().map(|r| distance(loc, r)).min();
    let idx = list
        .iter()
        .enumerate()
        .filter(|(_, r)| Some(distance(loc, r)) == best)
        .map(|(i, _)| i)
        .collect();
    (idx, best)
}

/// Device choice of `local_rank` at `loc`. `weights` are the network
/// rails weighed from `loc` ([`crate::weigh`]); `params` pick the mode (a
/// large message is planned: the size threshold does not apply).
pub fn choose(
    rails: &Rails,
    loc: &Location,
    weights: &[RailWeight],
    params: &SplitParams,
    local_rank: u32,
) -> Result<Choice, RailsError> {
    let (cands, d) = nearest(loc, &rails.gpus);
    // Ranks sharing a location take the equally near GPUs in turn.
    let gpu = (!cands.is_empty()).then(|| cands[local_rank as usize % cands.len()]);
    let nics = if weights.is_empty() {
        None
    } else {
        let size = params.single_rail_below.max(1 << 30);
        let mut plan = split(weights, size, params)?;
        // Rotate the leading run of equal shares so ranks do not all list
        // (and, with one rail per rank, use) the same rail first.
        let lead = plan
            .chunks
            .iter()
            .take_while(|c| (c.share - plan.chunks[0].share).abs() < 1e-9)
            .count();
        plan.chunks[..lead].rotate_left(local_rank as usize % lead);
        Some(plan)
    };
    Ok(Choice {
        local_rank,
        gpu,
        gpu_candidates: cands,
        gpu_distance: d,
        nics,
    })
}
