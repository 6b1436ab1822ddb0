//! Refinement on the true objective: pairwise swaps (Kernighan-Lin moves
//! with positive gain only), across all levels at once. For each rank, its
//! most expensive neighbours are found; the rank is tried at slots in the
//! subtrees around each such neighbour, from the smallest subtree up to the
//! one it already shares, swapping with whoever sits there (a dummy when the
//! slot is empty, i.e. a plain move). The best improving swap is applied.

use crate::graph::Graph;
use crate::objective::Obj;
use crate::rng::Rng;
use crate::target::Target;

#[derive(Clone)]
pub(crate) struct Placement {
    /// Vertex on each leaf (vertices >= the rank count are dummies).
    pub vertex_at_leaf: Vec<u32>,
    /// Leaf of each vertex.
    pub leaf_of: Vec<u32>,
}

impl Placement {
    pub fn from_vertex_at_leaf(vertex_at_leaf: Vec<u32>) -> Self {
        let mut leaf_of = vec![0u32; vertex_at_leaf.len()];
        for (l, &v) in vertex_at_leaf.iter().enumerate() {
            leaf_of[v as usize] = l as u32;
        }
        Placement {
            vertex_at_leaf,
            leaf_of,
        }
    }

    /// Rank `r` on `leaf[r]` (distinct leaves), dummies on the free leaves.
    pub fn from_rank_leaves(leaf: &[u32], leaves: usize) -> Self {
        let mut at = vec![u32::MAX; leaves];
        for (r, &l) in leaf.iter().enumerate() {
            at[l as usize] = r as u32;
        }
        let mut next = leaf.len() as u32;
        for x in &mut at {
            if *x == u32::MAX {
                *x = next;
                next += 1;
            }
        }
        Self::from_vertex_at_leaf(at)
    }

    /// Rank `i` on `order[i]`, dummies on the remaining leaves.
    pub fn from_order(order: &[u32]) -> Self {
        Self::from_vertex_at_leaf(order_to_vertex_at_leaf(order))
    }
}

pub(crate) fn order_to_vertex_at_leaf(order: &[u32]) -> Vec<u32> {
    let mut v = vec![0u32; order.len()];
    for (i, &l) in order.iter().enumerate() {
        v[l as usize] = i as u32;
    }
    v
}

/// Cost of rank `v`'s edges with `v` on `leaf` and the other ranks where
/// `leaf_of` puts them, leaving out the edge to `skip` (the rank it swaps
/// with: that edge's length does not change). Shared by the swap
/// refinement and the annealing.
#[inline]
pub(crate) fn cost_at(
    t: &Target,
    g: &Graph,
    ob: &Obj,
    leaf_of: &[u32],
    v: usize,
    leaf: u32,
    skip: usize,
) -> f64 {
    if v >= g.n {
        return 0.0;
    }
    let mut s = 0.0;
    for k in g.neighbours(v) {
        let u = g.adj[k] as usize;
        if u != skip {
            s += ob.pair(t, leaf, leaf_of[u], g.bytes[k], g.msgs[k]);
        }
    }
    s
}

/// Whether changing an objective of `total` by `delta` is a gain worth
/// making, not rounding noise. Shared by the swap and subtree refinements.
#[inline]
pub(crate) fn is_gain(delta: f64, total: f64) -> bool {
    delta < -1e-12 * total.max(1e-300)
}

/// Runs up to `passes` sweeps; stops early when a sweep gains less than
/// 0.1 % of the objective. Returns the new objective.
pub(crate) fn refine(
    t: &Target,
    g: &Graph,
    ob: &Obj,
    p: &mut Placement,
    passes: usize,
    seed: u64,
) -> f64 {
    let mut rng = Rng::new(seed ^ 0x005e_ed0f_5a1a);
    let mut total = ob.sum(t, g, &p.leaf_of);
    let mut heavy: Vec<(f64, u32)> = Vec::new();
    let mut cands: Vec<u32> = Vec::new();
    for _ in 0..passes {
        let before = total;
        for v in 0..g.n {
            let a = p.leaf_of[v];
            heavy.clear();
            for k in g.neighbours(v) {
                let u = g.adj[k];
                let c = ob.pair(t, a, p.leaf_of[u as usize], g.bytes[k], g.msgs[k]);
                if c > 0.0 {
                    heavy.push((c, u));
                }
            }
            if heavy.is_empty() {
                continue;
            }
            // Two most expensive neighbours (ties: lower rank).
            heavy.sort_unstable_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
            heavy.truncate(2);
            cands.clear();
            for &(_, u) in &heavy {
                let tl = p.leaf_of[u as usize];
                let mut node = t.tree[t.leaf_tnode[tl as usize] as usize].parent;
                while node != u32::MAX {
                    let n = &t.tree[node as usize];
                    if (n.lo..n.hi).contains(&a) {
                        break; // already share this subtree
                    }
                    let size = (n.hi - n.lo) as usize;
                    if size <= 4 {
                        cands.extend(n.lo..n.hi);
                    } else {
                        for _ in 0..4 {
                            cands.push(n.lo + rng.below(size) as u32);
                        }
                    }
                    node = n.parent;
                }
            }
            cands.sort_unstable();
            cands.dedup();
            let base_v = cost_at(t, g, ob, &p.leaf_of, v, a, usize::MAX);
            let mut best = (0.0f64, u32::MAX);
            for &b in &cands {
                let w = p.vertex_at_leaf[b as usize] as usize;
                if b == a || w == v {
                    continue;
                }
                // Screen on v's own gain (counting the v-w edge as if w
                // stayed): a swap is worth an exact look only when moving v
                // alone would help (w gets its own turn as v).
                let dv_approx = cost_at(t, g, ob, &p.leaf_of, v, b, usize::MAX) - base_v;
                if dv_approx >= 0.0 {
                    continue;
                }
                let dv = if w < g.n {
                    cost_at(t, g, ob, &p.leaf_of, v, b, w) - cost_at(t, g, ob, &p.leaf_of, v, a, w)
                } else {
                    dv_approx
                };
                let dw =
                    cost_at(t, g, ob, &p.leaf_of, w, a, v) - cost_at(t, g, ob, &p.leaf_of, w, b, v);
                let d = dv + dw;
                if d < best.0 {
                    best = (d, b);
                }
            }
            if best.1 != u32::MAX && is_gain(best.0, total) {
                let b = best.1;
                let w = p.vertex_at_leaf[b as usize];
                p.vertex_at_leaf[a as usize] = w;
                p.vertex_at_leaf[b as usize] = v as u32;
                p.leaf_of[v] = b;
                p.leaf_of[w as usize] = a;
                total += best.0;
            }
        }
        if before - total < 1e-3 * before {
            break;
        }
    }
    total
}
