//! The near order of a collective's members: the order in which every
//! group of members that share a locality level (a cache, a NUMA node, a
//! package) is contiguous, nested the way the machine nests them.
//!
//! A tree over the members in this order (a binomial broadcast or
//! reduction) crosses a boundary only where a subtree spans it: with n
//! ranks dealt round-robin over k packages (Open MPI's `--map-by socket`),
//! n - n/k of a binomial broadcast's n - 1 edges cross between packages in
//! rank order, k - 1 along the near order, so far fewer messages and bytes
//! cross the link between them.
//!
//! The levels are not a fixed list: they are the depths of the lowest
//! common ancestors of the members' PUs (the pair's locality class, as the
//! plans resolve it from the machine model), so a machine with L3 groups
//! inside NUMA nodes inside packages gets three levels and a flat one
//! none.

use crate::Comm;
use std::sync::Arc;

/// A near order of job ranks: `ranks[k]` at position `k`, `split` as
/// [`near_order`] gives it, and each rank's position; the order rooted at
/// the last root asked for is kept ([`Near::rooted_at`]).
#[derive(Clone, Debug)]
pub struct Near {
    pub ranks: Arc<[usize]>,
    pub split: Vec<u32>,
    pub pos: Vec<usize>,
    last_rooted: Option<(usize, Arc<[usize]>)>,
}

impl Near {
    /// The job ranks in the order a tree rooted at job rank `root` takes
    /// them ([`rooted`]), the root first: computed when the root changes,
    /// so a loop of calls with one root pays it once.
    pub fn rooted_at(&mut self, root: usize) -> Arc<[usize]> {
        match &self.last_rooted {
            Some((r, order)) if *r == root => order.clone(),
            _ => {
                let order: Arc<[usize]> = rooted(&self.split, self.pos[root])
                    .into_iter()
                    .map(|q| self.ranks[q])
                    .collect();
                self.last_rooted = Some((root, order.clone()));
                order
            }
        }
    }
}

impl Comm {
    /// The near order of the whole job (every rank, for the `tc_*`
    /// collectives), computed once: `None` when there is none.
    pub fn job_near(&mut self) -> Option<&mut Near> {
        if self.job_near.is_none() {
            let all: Vec<usize> = (0..self.size()).collect();
            self.job_near = Some(self.near_order(&all).map(|(order, split)| {
                let mut pos = vec![0; order.len()];
                for (k, &r) in order.iter().enumerate() {
                    pos[r] = k;
                }
                Near {
                    ranks: order.into(),
                    split,
                    pos,
                    last_rooted: None,
                }
            }));
        }
        self.job_near.as_mut().and_then(|n| n.as_mut())
    }

    /// The near order ([`near_order`]) of the job ranks `ranks` (a
    /// communicator's members in its rank order), from the plans' depths:
    /// the same answer on every rank. `None` also for a rank out of range.
    pub fn near_order(&self, ranks: &[usize]) -> Option<(Vec<usize>, Vec<u32>)> {
        let n = self.size();
        if ranks.iter().any(|&r| r >= n) {
            return None;
        }
        near_order(ranks.len(), |i, j| {
            self.seg.plan(ranks[i], ranks[j]).lca_depth()
        })
    }
}

/// Members beyond which no near order is computed (the grouping looks at
/// every pair of a group at each level).
pub const NEAR_MAX: usize = 4096;

/// The near order of `n` members whose pairs' lowest common ancestors
/// sit at depth `depth(i, j)` (larger: nearer; `None`: a member's PU is
/// unknown). `Some((order, split))`: `order[k]` is the member at position
/// `k`, and `split[k]` (k >= 1) the depth of the lowest common ancestor of
/// the members at positions `k - 1` and `k` (`split[0]` = 0): a group of
/// level `d` is a maximal run of positions whose inner splits are all
/// `>= d`. `None` when a depth is unknown, every pair sits at the same
/// depth (nothing to order by), or `n` is 1 or beyond [`NEAR_MAX`].
///
/// Groups at one level are ordered by their lowest member, members of a
/// group that no deeper level splits by their index: the order depends on
/// the placement only, so every member computes the same one, and a
/// reduction along it combines in the same order on every run.
pub fn near_order(
    n: usize,
    depth: impl Fn(usize, usize) -> Option<u32>,
) -> Option<(Vec<usize>, Vec<u32>)> {
    if !(2..=NEAR_MAX).contains(&n) {
        return None;
    }
    let mut d = vec![0u32; n * n];
    let (mut lo, mut hi) = (u32::MAX, 0);
    for i in 0..n {
        for j in i + 1..n {
            // The nearer of the two directions' answers (they agree
            // unless a plan was built otherwise).
            let x = depth(i, j)?.max(depth(j, i)?);
            d[i * n + j] = x;
            d[j * n + i] = x;
            lo = lo.min(x);
            hi = hi.max(x);
        }
    }
    if lo == hi {
        return None;
    }
    let mut order = Vec::with_capacity(n);
    place((0..n).collect(), &d, n, &mut order);
    let mut split = vec![0u32; n];
    for k in 1..n {
        split[k] = d[order[k - 1] * n + order[k]];
    }
    Some((order, split))
}

/// Appends `set` (ascending) to `out` in the near order: split at its
/// farthest level into the groups nearer than it (connected by nearer
/// pairs), ordered by their lowest member, each placed the same way.
fn place(set: Vec<usize>, d: &[u32], n: usize, out: &mut Vec<usize>) {
    let far = set
        .iter()
        .enumerate()
        .flat_map(|(a, &i)| set[a + 1..].iter().map(move |&j| d[i * n + j]))
        .min();
    let Some(far) = far else {
        out.extend(set);
        return;
    };
    // Groups: members joined by a pair nearer than `far`, found by a walk
    // from each not yet grouped member in ascending order, so the groups
    // come out ordered by their lowest member.
    let mut group = vec![usize::MAX; set.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for start in 0..set.len() {
        if group[start] != usize::MAX {
            continue;
        }
        let g = groups.len();
        group[start] = g;
        let mut members = vec![start];
        let mut next = 0;
        while next < members.len() {
            let a = members[next];
            next += 1;
            for b in 0..set.len() {
                if group[b] == usize::MAX && d[set[a] * n + set[b]] > far {
                    group[b] = g;
                    members.push(b);
                }
            }
        }
        members.sort_unstable();
        groups.push(members.into_iter().map(|k| set[k]).collect());
    }
    if groups.len() == 1 {
        // Every pair at `far` cannot join all of them: only a set of one.
        out.extend(groups.pop().unwrap_or_default());
        return;
    }
    if groups.iter().all(|g| g.len() == 1) {
        // One level, no nearer pair: the members in index order.
        out.extend(set);
        return;
    }
    for g in groups {
        place(g, d, n, out);
    }
}

/// The near order rooted at position `p` of a near order's `split`s: the
/// positions in the order a tree from the member at `p` should take them,
/// `p` first, then the rest of its deepest group, then the rest of each
/// enclosing group, level by level outwards (each run in near order). A
/// binomial tree from the root then keeps every group's subtree within
/// the group, wherever the root sits.
pub fn rooted(split: &[u32], p: usize) -> Vec<usize> {
    let n = split.len();
    let mut out = Vec::with_capacity(n);
    out.push(p);
    let (mut s, mut e) = (p, p + 1);
    while s > 0 || e < n {
        // The smallest group around [s, e): the nearer of the two
        // boundaries next to it.
        let mut level = 0;
        if s > 0 {
            level = level.max(split[s]);
        }
        if e < n {
            level = level.max(split[e]);
        }
        while e < n && split[e] >= level {
            out.push(e);
            e += 1;
        }
        let s0 = s;
        while s > 0 && split[s] >= level {
            s -= 1;
        }
        out.extend(s..s0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use topocomm_topo::{load, ClassIndex, Machine};

    fn synthetic(desc: &str) -> Machine {
        load(&format!("synthetic:{desc}").parse().unwrap()).unwrap()
    }

    /// Depths of the lowest common ancestors of PUs (positions in
    /// `m.pus`).
    fn depths(m: &Machine, pus: &[usize]) -> impl Fn(usize, usize) -> Option<u32> {
        let index = ClassIndex::new(m);
        let d: Vec<u32> = pus
            .iter()
            .flat_map(|&a| pus.iter().map(move |&b| (a, b)))
            .map(|(a, b)| index.classify(m, a, b).1)
            .collect();
        let n = pus.len();
        move |i, j| Some(d[i * n + j])
    }

    /// Whether every group of every level is one run of positions.
    fn runs_are_groups(
        order: &[usize],
        split: &[u32],
        depth: &dyn Fn(usize, usize) -> Option<u32>,
    ) {
        for a in 0..order.len() {
            for b in a + 1..order.len() {
                let inner = split[a + 1..=b].iter().min().copied().unwrap();
                assert_eq!(
                    inner,
                    depth(order[a], order[b]).unwrap(),
                    "positions {a} and {b} of {order:?}"
                );
            }
        }
    }

    #[test]
    fn members_dealt_round_robin_over_two_packages_come_out_package_by_package() {
        // 2 packages x 2 L3 x 2 cores: rank r on core r % 2 of package
        // (r / 2) % 2 ... dealt round-robin over the packages first.
        let m = synthetic("package:2 l3:2 core:2 pu:1");
        let pus: Vec<usize> = (0..8).map(|r| (r % 2) * 4 + (r / 2) % 4).collect();
        let depth = depths(&m, &pus);
        let (order, split) = near_order(8, &depth).unwrap();
        // Package 0 holds ranks 0, 2, 4, 6 (PUs 0-3), its L3s {0, 2} and {4, 6}.
        assert_eq!(order, vec![0, 2, 4, 6, 1, 3, 5, 7]);
        runs_are_groups(&order, &split, &depth);
        assert!(split[4] < split[2] && split[2] < split[1], "{split:?}");
    }

    #[test]
    fn no_order_without_levels_or_with_an_unknown_pu() {
        let m = synthetic("package:1 core:4 pu:1");
        assert_eq!(near_order(4, depths(&m, &[0, 1, 2, 3])), None);
        assert_eq!(
            near_order(3, |i, j| (i + j != 3).then_some(1 + (i == j) as u32)),
            None
        );
        assert_eq!(near_order(1, |_, _| Some(1)), None);
    }

    #[test]
    fn a_rooted_order_keeps_every_group_of_the_root_first_and_whole() {
        let m = synthetic("package:2 l3:2 core:3 pu:1");
        // 12 ranks, PUs dealt round-robin over the 4 L3s.
        let pus: Vec<usize> = (0..12).map(|r| (r % 4) * 3 + r / 4).collect();
        let depth = depths(&m, &pus);
        let (order, split) = near_order(12, &depth).unwrap();
        runs_are_groups(&order, &split, &depth);
        for p in 0..12 {
            let r = rooted(&split, p);
            let mut sorted = r.clone();
            sorted.sort_unstable();
            assert_eq!(
                sorted,
                (0..12).collect::<Vec<_>>(),
                "root {p}: a permutation"
            );
            assert_eq!(r[0], p);
            // The root's L3 (3 positions), then the rest of its package
            // (6): each a prefix of the rooted order.
            let near = |q: usize| depth(order[p], order[q]).unwrap();
            for len in [3, 6] {
                let mut prefix = r[..len].to_vec();
                prefix.sort_unstable();
                let group: Vec<usize> = (0..12).filter(|&q| near(q) >= near(r[len - 1])).collect();
                assert_eq!(prefix, group, "root {p}: its group of {len} first");
            }
        }
    }

    /// The edges of the accelerator's binomial tree over `n` members
    /// (coll.c's bcast_bytes and reduce_to_first): member v > 0 hangs
    /// under v minus its lowest set bit.
    fn binomial_edges(n: usize) -> impl Iterator<Item = (usize, usize)> {
        (1..n).map(|v| (v - (v & v.wrapping_neg()), v))
    }

    #[test]
    fn a_binomial_tree_along_the_rooted_order_crosses_each_boundary_once_per_group() {
        // 16 ranks dealt round-robin over 2 packages x 2 L3s x 4 cores
        // (rank r on L3 r % 4), as `--map-by l3cache` deals them.
        let m = synthetic("package:2 l3:2 core:4 pu:1");
        let pus: Vec<usize> = (0..16).map(|r| (r % 4) * 4 + r / 4).collect();
        let depth = depths(&m, &pus);
        let (order, split) = near_order(16, &depth).unwrap();
        let package = |r: usize| pus[r] / 8;
        let l3 = |r: usize| pus[r] / 4;
        let crossings = |members: &[usize], of: &dyn Fn(usize) -> usize| {
            binomial_edges(16)
                .filter(|&(a, b)| of(members[a]) != of(members[b]))
                .count()
        };
        for root in 0..16 {
            let p = order.iter().position(|&r| r == root).unwrap();
            let members: Vec<usize> = rooted(&split, p).into_iter().map(|q| order[q]).collect();
            assert_eq!(members[0], root);
            // One edge into the other package, one into each other L3.
            assert_eq!(crossings(&members, &package), 1, "root {root}: {members:?}");
            assert_eq!(crossings(&members, &l3), 3, "root {root}: {members:?}");
        }
        // In rank order from rank 0, 4 of the 15 edges cross the packages
        // and 12 the L3s.
        let by_rank: Vec<usize> = (0..16).collect();
        assert_eq!(crossings(&by_rank, &package), 4);
        assert_eq!(crossings(&by_rank, &l3), 12);
    }

    #[test]
    fn ranks_bound_to_packages_group_by_package() {
        // Open MPI's default binding above two ranks (a whole package
        // each), ranks dealt round-robin (`--map-by socket`). Rank 4 is bound to PUs of both
        // packages, rank 5 to a PU this machine lacks (unknown).
        let m = synthetic("package:2 core:2 pu:1");
        let rules = crate::rules::Rules::builtin(&m);
        let depth_of = |pus: &[Option<u32>], sets: &[Vec<u32>]| {
            let mut plans = crate::plan::resolve(&m, &rules, pus).unwrap();
            crate::plan::fill_set_depths(&mut plans, &m, pus, sets);
            let n = pus.len();
            move |i: usize, j: usize| plans[i * n + j].lca_depth
        };
        let sets = vec![vec![0, 1], vec![2, 3], vec![0, 1], vec![2, 3]];
        let (order, split) = near_order(4, depth_of(&[None; 4], &sets)).unwrap();
        assert_eq!(order, vec![0, 2, 1, 3]);
        assert!(split[2] < split[1], "{split:?}");
        // A rank bound to one PU sits in its package's group.
        let pus = [None, None, Some(1), None];
        let (order, _) = near_order(4, depth_of(&pus, &sets)).unwrap();
        assert_eq!(order, vec![0, 2, 1, 3]);
        // Both packages: a group of its own at the top; a PU the machine
        // lacks: no order.
        let mut wide = sets.clone();
        wide.push(vec![1, 2]);
        let (order, _) = near_order(5, depth_of(&[None; 5], &wide)).unwrap();
        assert_eq!(order, vec![0, 2, 1, 3, 4]);
        wide.push(vec![9]);
        assert_eq!(
            near_order(6, depth_of(&[None; 6], &wide)).map(|o| o.0),
            None
        );
    }

    #[test]
    fn the_shared_topologies_give_contiguous_groups() {
        let Some(dir) = topocomm_topo::testdata::shared_topologies() else {
            return;
        };
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("xml") {
                continue;
            }
            let Ok(m) = load(&format!("{}", path.display()).parse().unwrap()) else {
                continue;
            };
            let npu = m.pus.len();
            if npu < 4 {
                continue;
            }
            // Up to 64 ranks dealt round-robin over the machine's halves.
            let n = npu.min(64);
            let pus: Vec<usize> = (0..n)
                .map(|r| (r % 2) * (npu / 2) + (r / 2) % (npu / 2))
                .collect();
            let depth = depths(&m, &pus);
            if let Some((order, split)) = near_order(n, &depth) {
                runs_are_groups(&order, &split, &depth);
                seen += 1;
            }
        }
        assert!(
            seen > 0,
            "no topology of {} gave a near order",
            dir.display()
        );
    }
}
