//! # topocomm-map
//!
//! Process mapping for topocomm: where to put the ranks of a parallel program
//! so that the ranks that talk most are nearest in the machine tree.
//!
//! - [`CommMatrix`]: sparse communication matrix (bytes and messages per
//!   ordered pair), read from CSV edge lists, TreeMatch `.mat` files or Open
//!   MPI monitoring `.prof` files ([`parse`]).
//! - [`Target`]: the slots to map onto, as a tree: cluster network levels,
//!   nodes, and each node's hwloc tree, with the locality class of every pair
//!   of slots.
//! - [`Costs`]: per-class latency and bandwidth; [`evaluate`] scores a mapping.
//! - [`map`]: TreeMatch-style bottom-up grouping + swap refinement, the
//!   baselines (packed, round-robin, scatter, random) and the `auto` portfolio.
//! - [`request::Request`]: what `topocomm map` does, from its options to the
//!   mapping file and the summary.
//!
//! No structure is N x N: memory grows with ranks + edges.

mod anneal;
mod baseline;
pub mod bench;
mod cost;
mod csr;
mod error;
pub mod gen;
mod graph;
mod group;
mod matrix;
mod multilevel;
mod objective;
pub mod output;
pub mod parse;
mod refine;
pub mod request;
mod rng;
pub mod scotch;
mod strategy;
mod subtree;
mod target;

pub use baseline::{baseline_order, Baseline};
pub use cost::{evaluate, ClassCost, Costs, Metric, Objective, Score};
pub use error::MapError;
pub use graph::Graph;
pub use matrix::{CommMatrix, Edge};
pub use rng::Rng;
pub use strategy::{map, MapOptions, MapResult, Strategy, StrategyResult};
pub use target::{Cluster, NodeSpec, Slot, Target};

/// Peak resident memory of this process in KiB (VmHWM of /proc/self/status),
/// if the kernel reports it.
pub fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time (user + system) of this process so far, from /proc/self/stat in
/// clock ticks of 1/100 s (USER_HZ): a time that the other programs of a
/// loaded machine do not inflate.
pub fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
