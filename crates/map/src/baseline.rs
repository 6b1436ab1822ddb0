//! Baseline placements, as orders of the leaves: rank `i` goes to the
//! `i`-th leaf of the order.

use crate::rng::Rng;
use crate::target::Target;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// Fill the slots in topology order (node by node, core by core).
    Packed,
    /// Deal ranks in turn to the children of the first level with several
    /// children (nodes on a cluster, packages on one node), packed inside.
    RoundRobin,
    /// Deal ranks in turn at every level: as far apart as possible.
    Scatter,
    /// A seeded random permutation of the slots.
    Random,
}

impl Baseline {
    pub const ALL: [Baseline; 4] = [
        Baseline::Packed,
        Baseline::RoundRobin,
        Baseline::Scatter,
        Baseline::Random,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Baseline::Packed => "packed",
            Baseline::RoundRobin => "round-robin",
            Baseline::Scatter => "scatter",
            Baseline::Random => "random",
        }
    }
}

/// Leaves in the order the baseline fills them.
pub fn baseline_order(target: &Target, b: Baseline, seed: u64) -> Vec<u32> {
    match b {
        Baseline::Packed => (0..target.len() as u32).collect(),
        Baseline::Random => {
            let mut v: Vec<u32> = (0..target.len() as u32).collect();
            Rng::new(seed).shuffle(&mut v);
            v
        }
        Baseline::RoundRobin => deal(target, target.root, false),
        Baseline::Scatter => deal(target, target.root, true),
    }
}

fn deal(t: &Target, v: u32, recurse: bool) -> Vec<u32> {
    let node = &t.tree[v as usize];
    if node.children.is_empty() {
        return vec![node.lo];
    }
    let parts: Vec<Vec<u32>> = node
        .children
        .iter()
        .map(|&c| {
            if recurse {
                deal(t, c, true)
            } else {
                let n = &t.tree[c as usize];
                (n.lo..n.hi).collect()
            }
        })
        .collect();
    let mut out = Vec::with_capacity((node.hi - node.lo) as usize);
    let longest = parts.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..longest {
        for p in &parts {
            if let Some(&x) = p.get(i) {
                out.push(x);
            }
        }
    }
    out
}
