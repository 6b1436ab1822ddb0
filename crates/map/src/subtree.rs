//! Refinement by whole subtrees: the contents of two subtrees of the
//! machine tree with as many leaves each (two nodes, two sockets, two
//! cores) trade places, leaf by leaf in order, when that lowers the true
//! objective.
//!
//! This is the coarse-level step of the multilevel refinement: a group of
//! ranks that talk among themselves (a node's tile of a stencil, a core's
//! pair) moves as one. The single swaps of [`crate::refine`] and the
//! annealing cannot make such a move without first breaking the group up,
//! a loss they refuse (or, annealing, rarely take on large groups), so a
//! recursive multisection's choice of which tile goes to which node or
//! switch stays as it was cut. Levels are visited from the top down; the
//! gain of a trade is exact (every edge of the moved ranks is re-costed),
//! so it holds for every sum objective and for irregular trees.

use crate::graph::Graph;
use crate::objective::Obj;
use crate::refine::{is_gain, Placement};
use crate::rng::Rng;
use crate::target::Target;

/// Candidate subtrees tried per subtree and heavy neighbour group.
const SAMPLES: usize = 4;

/// Runs up to `passes` sweeps over every level of the tree (above the
/// leaves); stops early when a sweep gains less than 0.05 % of the
/// objective. Returns the new objective.
pub(crate) fn refine_subtrees(
    t: &Target,
    g: &Graph,
    ob: &Obj,
    p: &mut Placement,
    passes: usize,
    seed: u64,
) -> f64 {
    let mut rng = Rng::new(seed ^ 0x5ab7_4ee5);
    let mut total = ob.sum(t, g, &p.leaf_of);
    let levels = levels(t);
    let mut heavy: Vec<(u32, f64)> = Vec::new();
    let mut cands: Vec<u32> = Vec::new();
    for _ in 0..passes {
        let before = total;
        for (depth, nodes) in levels.iter().enumerate().filter(|(_, n)| n.len() >= 2) {
            for &x in nodes {
                let xn = &t.tree[x as usize];
                heavy_groups(t, g, ob, p, x, depth as u32, &mut heavy);
                candidates(t, nodes, xn.lo, &heavy, &mut rng, &mut cands);
                let size = xn.hi - xn.lo;
                let mut best = (0.0f64, u32::MAX);
                for &y in &cands {
                    let yn = &t.tree[y as usize];
                    if y == x || yn.hi - yn.lo != size {
                        continue;
                    }
                    let d = trade_delta(t, g, ob, p, xn.lo, yn.lo, size);
                    if d < best.0 {
                        best = (d, y);
                    }
                }
                if best.1 != u32::MAX && is_gain(best.0, total) {
                    trade(p, xn.lo, t.tree[best.1 as usize].lo, size);
                    total += best.0;
                }
            }
        }
        if before - total < 5e-4 * before {
            break;
        }
    }
    total
}

/// Into `heavy`: the two subtrees of `depth` (other than `x`) that the
/// ranks of `x` talk to most, by the cost of the edges that leave `x`.
fn heavy_groups(
    t: &Target,
    g: &Graph,
    ob: &Obj,
    p: &Placement,
    x: u32,
    depth: u32,
    heavy: &mut Vec<(u32, f64)>,
) {
    let xn = &t.tree[x as usize];
    heavy.clear();
    for l in xn.lo..xn.hi {
        let v = p.vertex_at_leaf[l as usize] as usize;
        if v >= g.n {
            continue;
        }
        for k in g.neighbours(v) {
            let lu = p.leaf_of[g.adj[k] as usize];
            if (xn.lo..xn.hi).contains(&lu) {
                continue;
            }
            let Some(z) = ancestor_at(t, lu, depth) else {
                continue;
            };
            let c = ob.pair(t, l, lu, g.bytes[k], g.msgs[k]);
            match heavy.iter_mut().find(|h| h.0 == z) {
                Some(h) => h.1 += c,
                None => heavy.push((z, c)),
            }
        }
    }
    heavy.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    heavy.truncate(2);
}

/// Into `cands` (sorted, no repeats): around each heavy group, the
/// subtrees of its depth (`nodes`) in the ever larger subtrees above it,
/// up to the one holding leaf `x_lo`; all of them up to [`SAMPLES`], else
/// [`SAMPLES`] drawn.
fn candidates(
    t: &Target,
    nodes: &[u32],
    x_lo: u32,
    heavy: &[(u32, f64)],
    rng: &mut Rng,
    cands: &mut Vec<u32>,
) {
    cands.clear();
    for &(z, _) in heavy {
        let mut n = t.tree[z as usize].parent;
        while n != u32::MAX {
            let nn = &t.tree[n as usize];
            if (nn.lo..nn.hi).contains(&x_lo) {
                break;
            }
            let inside = within(t, nodes, nn.lo, nn.hi);
            if inside.len() <= SAMPLES {
                cands.extend_from_slice(inside);
            } else {
                for _ in 0..SAMPLES {
                    cands.push(inside[rng.below(inside.len())]);
                }
            }
            n = nn.parent;
        }
    }
    cands.sort_unstable();
    cands.dedup();
}

/// The tree nodes of each depth with at least two leaves below them, in
/// leaf order (depth-first numbering: by `lo`).
fn levels(t: &Target) -> Vec<Vec<u32>> {
    let mut by_depth: Vec<Vec<u32>> = Vec::new();
    for (i, n) in t.tree.iter().enumerate() {
        if n.hi - n.lo < 2 || n.parent == u32::MAX {
            continue;
        }
        let d = n.depth as usize;
        if by_depth.len() <= d {
            by_depth.resize(d + 1, Vec::new());
        }
        by_depth[d].push(i as u32);
    }
    for v in &mut by_depth {
        v.sort_unstable_by_key(|&i| t.tree[i as usize].lo);
    }
    by_depth
}

/// The nodes of `nodes` (one depth, by `lo`) inside leaves `lo..hi`.
fn within<'a>(t: &Target, nodes: &'a [u32], lo: u32, hi: u32) -> &'a [u32] {
    let a = nodes.partition_point(|&i| t.tree[i as usize].lo < lo);
    let b = nodes.partition_point(|&i| t.tree[i as usize].lo < hi);
    &nodes[a..b]
}

/// The ancestor of `leaf` at `depth`, if its branch reaches that deep.
fn ancestor_at(t: &Target, leaf: u32, depth: u32) -> Option<u32> {
    let mut x = t.leaf_tnode[leaf as usize];
    while t.tree[x as usize].depth > depth {
        x = t.tree[x as usize].parent;
    }
    (t.tree[x as usize].depth == depth).then_some(x)
}

/// The leaf that leaf `l` trades with when the `size` leaves from `a`
/// trade with those from `b` (itself outside both).
#[inline]
fn image(l: u32, a: u32, b: u32, size: u32) -> u32 {
    if (a..a + size).contains(&l) {
        b + (l - a)
    } else if (b..b + size).contains(&l) {
        a + (l - b)
    } else {
        l
    }
}

/// Exact change of the objective if the ranks on leaves `a..a+size` and
/// `b..b+size` trade places (leaf `a + i` with `b + i`).
fn trade_delta(t: &Target, g: &Graph, ob: &Obj, p: &Placement, a: u32, b: u32, size: u32) -> f64 {
    let mut d = 0.0;
    for l in (a..a + size).chain(b..b + size) {
        let v = p.vertex_at_leaf[l as usize] as usize;
        if v >= g.n {
            continue;
        }
        let nl = image(l, a, b, size);
        for k in g.neighbours(v) {
            let lu = p.leaf_of[g.adj[k] as usize];
            let nu = image(lu, a, b, size);
            let change = ob.pair(t, nl, nu, g.bytes[k], g.msgs[k])
                - ob.pair(t, l, lu, g.bytes[k], g.msgs[k]);
            // An edge between two moved ranks is seen from both ends.
            d += if nu != lu { 0.5 * change } else { change };
        }
    }
    d
}

/// Trades the ranks on leaves `a..a+size` with those on `b..b+size`.
fn trade(p: &mut Placement, a: u32, b: u32, size: u32) {
    for i in 0..size {
        let (la, lb) = ((a + i) as usize, (b + i) as usize);
        p.vertex_at_leaf.swap(la, lb);
        p.leaf_of[p.vertex_at_leaf[la] as usize] = la as u32;
        p.leaf_of[p.vertex_at_leaf[lb] as usize] = lb as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{Costs, Metric};
    use crate::gen;
    use crate::matrix::{CommMatrix, Edge};
    use crate::refine::refine;
    use crate::target::Cluster;

    /// `nodes` nodes of `spec`, one slot per PU.
    fn target(spec: &str, nodes: usize, slots: usize) -> Target {
        let node = topocomm_topo::load(&spec.parse().unwrap()).unwrap();
        let c = Cluster::uniform(node, nodes);
        let slots = c.default_slots(slots, false).unwrap();
        Target::new(c, &slots).unwrap()
    }

    fn check(t: &Target, p: &Placement) {
        for (l, &v) in p.vertex_at_leaf.iter().enumerate() {
            assert_eq!(p.leaf_of[v as usize], l as u32, "leaf {l}");
        }
        let mut seen = p.vertex_at_leaf.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), t.len(), "two leaves hold one vertex");
    }

    #[test]
    fn never_raises_the_objective_and_returns_its_exact_value() {
        let t = target("synthetic:pack:2 core:8 pu:2", 4, 128);
        let cases = [
            gen::stencil2d(8, 16, 1e5),
            gen::random_sparse(100, 3, 1e5, 5),
            gen::blocks(20, 6, 1e5),
        ];
        for metric in [Metric::HopBytes, Metric::Cost, Metric::Bytes] {
            let ob = Obj::new(&t, &Costs::defaults(), metric);
            for m in &cases {
                let g = Graph::from_matrix(m, t.len());
                for seed in 1..4u64 {
                    let mut order: Vec<u32> = (0..t.len() as u32).collect();
                    Rng::new(seed).shuffle(&mut order);
                    let mut p = Placement::from_order(&order);
                    if seed > 1 {
                        refine(&t, &g, &ob, &mut p, 8, seed);
                    }
                    let before = ob.sum(&t, &g, &p.leaf_of);
                    let got = refine_subtrees(&t, &g, &ob, &mut p, 8, seed);
                    let exact = ob.sum(&t, &g, &p.leaf_of);
                    assert!(got <= before, "{metric:?} {seed}: {before} -> {got}");
                    assert!((got - exact).abs() <= 1e-9 * exact, "{got} vs {exact}");
                    check(&t, &p);
                }
            }
        }
    }

    /// Four tight pairs (100 bytes each way) on the four cores of two
    /// packages, each pair also talking (10 bytes) with one other pair:
    /// placed so that both talking couples straddle the packages. Every
    /// single swap splits two tight pairs, so the swap refinement stays;
    /// trading the contents of two cores puts each couple in a package.
    #[test]
    fn moves_tight_groups_that_single_swaps_cannot() {
        let t = target("synthetic:pack:2 core:2 pu:2", 1, 8);
        let mut edges = Vec::new();
        let mut talk = |a: u32, b: u32, bytes: f64| {
            for (src, dst) in [(a, b), (b, a)] {
                edges.push(Edge {
                    src,
                    dst,
                    bytes,
                    msgs: 1.0,
                });
            }
        };
        for (a, b) in [(0, 1), (2, 3), (4, 5), (6, 7)] {
            talk(a, b, 100.0);
        }
        for (a, b) in [(0, 4), (1, 5), (2, 6), (3, 7)] {
            talk(a, b, 10.0);
        }
        let g = Graph::from_matrix(&CommMatrix::from_edges(8, edges), t.len());
        let ob = Obj::new(&t, &Costs::defaults(), Metric::HopBytes);
        // Cores 0..3 hold {0,1}, {6,7}, {4,5}, {2,3}.
        let start = Placement::from_order(&[0, 1, 6, 7, 4, 5, 2, 3]);
        let mut swapped = start.clone();
        let by_swaps = refine(&t, &g, &ob, &mut swapped, 8, 1);
        assert_eq!(by_swaps, ob.sum(&t, &g, &start.leaf_of), "a swap helped");
        let mut traded = start.clone();
        let got = refine_subtrees(&t, &g, &ob, &mut traded, 8, 1);
        check(&t, &traded);
        assert!(got < by_swaps, "{by_swaps} -> {got}");
        // Each couple shares a package now.
        let pack = |r: usize| traded.leaf_of[r] / 4;
        for (a, b) in [(0, 4), (1, 5), (2, 6), (3, 7)] {
            assert_eq!(pack(a), pack(b), "ranks {a} and {b}: {:?}", traded.leaf_of);
        }
    }
}
