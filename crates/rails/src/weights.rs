//! Throughput weight of each network rail from a location.
//!
//! Default model (no measured table), from seed 002:
//! - a NIC keeps its full throughput from its own NUMA node (weight 1.0) and
//!   loses 23% anywhere else: "the InfiniBand throughput decreases by 23%
//!   when the process is not bound near the network interface" and
//!   "increasing the NUMA distance further does not further decrease" it
//!   (§4.2). Two such rails then split 1 : 0.77, i.e. 56.5% on the near
//!   one, the seed's mono-rail ratio (56.6%) and close to its measured
//!   optimum (58%, §4.3); a process near neither splits 50/50 (§4.3).
//! - a GPU loses up to 42% DMA throughput from the distant NUMA node (§2.2,
//!   dual Xeon 5550): factor 0.58, used to rank GPUs only.
//!
//! All rails are assumed to have the same nominal throughput; a measured
//! table ([`crate::RailTable`]) replaces the model.

use crate::discover::{Rail, RailKind};
use crate::locality::{distance, numa_latency, Distance, Location};
use crate::table::RailTable;
use serde::Serialize;
use topocomm_topo::Machine;

/// Throughput kept by a NIC away from its NUMA node (seed 002 §4.2: -23%).
pub const NIC_REMOTE_FACTOR: f64 = 0.77;
/// DMA throughput kept by a GPU from the distant NUMA node (seed 002 §2.2: -42%).
pub const GPU_REMOTE_FACTOR: f64 = 0.58;

/// The default model's weight factor of a rail kind at a distance.
pub fn default_factor(kind: RailKind, d: Distance) -> f64 {
    match (kind, d) {
        (_, Distance::Local) => 1.0,
        (RailKind::Nic, _) => NIC_REMOTE_FACTOR,
        (RailKind::Gpu, _) => GPU_REMOTE_FACTOR,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightSource {
    /// The default model above (relative units).
    Model,
    /// A measured table (GB/s).
    Table,
}

/// One rail as seen from a location.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RailWeight {
    /// Index in the rail list that was weighed.
    pub rail: usize,
    pub name: String,
    pub distance: Distance,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_latency: Option<u64>,
    /// Expected throughput: relative (model) or GB/s (table).
    pub weight: f64,
    pub source: WeightSource,
}

/// Weighs each rail of `rails` from `loc`, with the table when given (the
/// table must cover the rails: see [`RailTable::check`]).
pub fn weigh(
    m: &Machine,
    loc: &Location,
    rails: &[Rail],
    table: Option<&RailTable>,
) -> Vec<RailWeight> {
    rails
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let d = distance(loc, r);
            let measured = table.and_then(|t| t.rate(r, d));
            RailWeight {
                rail: i,
                name: r.name.clone(),
                distance: d,
                numa_latency: numa_latency(m, loc, r),
                weight: measured.unwrap_or_else(|| default_factor(r.kind, d)),
                source: if measured.is_some() {
                    WeightSource::Table
                } else {
                    WeightSource::Model
                },
            }
        })
        .collect()
}
