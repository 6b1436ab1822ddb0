//! The objective every optimizer uses (strategies, refinement, the
//! multilevel mapper): the cost of one pair of leaves and the total of a
//! placement, evaluated sparsely (O(edges x tree depth)).
//!
//! - `cost`, `bytes`, `msgs`: per-class `msgs * lat + bytes / bw` (either
//!   term alone for bytes / msgs) from [`CostTable`].
//! - `hop-bytes`: bytes x the number of tree links between the two leaves
//!   (up from each to their lowest common ancestor).
//! - `max-congestion`: not a sum over pairs; optimizers minimize hop-bytes
//!   (the sum of all link loads) and the total is the largest load on one
//!   object's boundary, which is what candidates are compared on.

use crate::cost::{CostTable, Costs, Metric};
use crate::graph::Graph;
use crate::target::Target;

#[derive(Clone, Debug)]
pub(crate) struct Obj {
    pub metric: Metric,
    pub ct: CostTable,
    hops: bool,
}

impl Obj {
    pub fn new(target: &Target, costs: &Costs, metric: Metric) -> Self {
        Obj {
            metric,
            ct: CostTable::new(target, costs, metric),
            hops: matches!(metric, Metric::HopBytes | Metric::MaxCongestion),
        }
    }

    /// Cost of `bytes` / `msgs` between leaves `a` and `b` (0 when `a == b`).
    #[inline]
    pub fn pair(&self, t: &Target, a: u32, b: u32, bytes: f64, msgs: f64) -> f64 {
        if self.hops {
            bytes * f64::from(t.hops(a, b))
        } else {
            self.ct.edge(t.class(a, b), bytes, msgs)
        }
    }

    /// Weight of an edge for graph algorithms that do not know where it
    /// will land (grouping, coarsening): its cost at the top of the tree.
    pub fn weight(&self, t: &Target, bytes: f64, msgs: f64) -> f64 {
        if self.hops {
            bytes
        } else {
            self.ct.edge(t.top_class(), bytes, msgs)
        }
    }

    /// The sum of [`Obj::pair`] over the undirected edges of `g`.
    pub fn sum(&self, t: &Target, g: &Graph, leaf_of: &[u32]) -> f64 {
        let mut s = 0.0;
        for v in 0..g.n {
            for k in g.neighbours(v) {
                let u = g.adj[k] as usize;
                if u > v {
                    s += self.pair(t, leaf_of[v], leaf_of[u], g.bytes[k], g.msgs[k]);
                }
            }
        }
        s
    }

    /// The objective of a placement: [`Obj::sum`], or the largest load of
    /// a tree object's boundary for max-congestion.
    pub fn total(&self, t: &Target, g: &Graph, leaf_of: &[u32]) -> f64 {
        if self.metric != Metric::MaxCongestion {
            return self.sum(t, g, leaf_of);
        }
        let mut load = vec![0.0f64; t.tree.len()];
        for v in 0..g.n {
            for k in g.neighbours(v) {
                let u = g.adj[k] as usize;
                if u > v {
                    t.walk(leaf_of[v], leaf_of[u], |node| {
                        load[node as usize] += g.bytes[k]
                    });
                }
            }
        }
        (0..t.tree.len())
            .filter(|&i| i as u32 != t.root && !t.tree[i].children.is_empty())
            .map(|i| load[i])
            .fold(0.0, f64::max)
    }
}
