//! TreeMatch-style bottom-up grouping on any tree.
//!
//! Vertices (ranks, padded with edge-less dummies up to the number of slots)
//! are grouped level by level from the leaves up. Every object of the tree
//! gets one group built for it: the group has exactly the object's children
//! *shapes* (a shape is the canonical structure of a subtree, so asymmetric
//! trees, non-dividing arities, restricted slots and oversubscription are all
//! the same case). A group is grown greedily: start from the first free unit
//! in rank order, then repeatedly add the free unit of a still-needed shape
//! connected to the group that leaves the least traffic leaving it (largest
//! `2 conn(x) - total(x)`, the Fiduccia-Mattheyses gain of the move). After each level the graph is contracted (sparse,
//! O(edges)). Finally the groups are unfolded top-down onto the tree.

use crate::csr::Csr;
use crate::graph::Graph;
use crate::target::Target;
use std::collections::HashMap;

struct Unit {
    shape: u32,
    kids: Vec<u32>,
}

/// Returns `vertex_at_leaf` (length `target.len()`; vertices >= `g.n` are
/// the dummies), or `None` if the tree could not be matched (a bug guard:
/// callers fall back to a baseline).
pub(crate) fn group(target: &Target, g: &Graph, w: &[f64]) -> Option<Vec<u32>> {
    let nleaves = target.len();
    let tree = &target.tree;
    // Shapes and heights, children before parents (tree ids are post-order).
    let mut shape = vec![0u32; tree.len()];
    let mut height = vec![0u32; tree.len()];
    let mut intern: HashMap<Vec<u32>, u32> = HashMap::new();
    intern.insert(Vec::new(), 0);
    let mut child_shapes: Vec<Vec<u32>> = vec![Vec::new(); tree.len()];
    for (i, t) in tree.iter().enumerate() {
        if t.children.is_empty() {
            continue;
        }
        let mut s: Vec<u32> = t.children.iter().map(|&c| shape[c as usize]).collect();
        s.sort_unstable();
        height[i] = 1 + t
            .children
            .iter()
            .map(|&c| height[c as usize])
            .max()
            .unwrap_or(0);
        let next = intern.len() as u32;
        shape[i] = *intern.entry(s.clone()).or_insert(next);
        child_shapes[i] = s;
    }
    let nshapes = intern.len();
    let maxh = height[target.root as usize];
    let mut by_height: Vec<Vec<u32>> = vec![Vec::new(); maxh as usize + 1];
    for (i, t) in tree.iter().enumerate() {
        if !t.children.is_empty() {
            by_height[height[i] as usize].push(i as u32);
        }
    }
    for objs in &mut by_height {
        objs.sort_unstable_by_key(|&o| tree[o as usize].lo);
    }

    let mut arena: Vec<Unit> = (0..nleaves)
        .map(|_| Unit {
            shape: 0,
            kids: Vec::new(),
        })
        .collect();
    // Current units in key (first rank) order, and their graph.
    let mut cur: Vec<u32> = (0..nleaves as u32).collect();
    let mut csr = Csr {
        xadj: Vec::with_capacity(nleaves + 1),
        adj: g.adj.clone(),
        w: w.to_vec(),
    };
    csr.xadj.extend_from_slice(&g.xadj[..=g.n]);
    let last = *csr.xadj.last().unwrap();
    csr.xadj.resize(nleaves + 1, last);

    let mut conn: Vec<f64> = Vec::new();
    for objs in by_height.iter().skip(1) {
        if objs.is_empty() {
            continue;
        }
        let n = cur.len();
        let mut avail = vec![true; n];
        let mut pools: Vec<Vec<u32>> = vec![Vec::new(); nshapes];
        for (li, &u) in cur.iter().enumerate() {
            pools[arena[u as usize].shape as usize].push(li as u32);
        }
        let mut cursor = vec![0usize; nshapes];
        // Total traffic of each unit: adding x to a group changes the
        // traffic leaving the group by tot(x) - 2 conn(x).
        let tot: Vec<f64> = (0..n)
            .map(|x| csr.w[csr.xadj[x]..csr.xadj[x + 1]].iter().sum())
            .collect();
        conn.clear();
        conn.resize(n, 0.0);
        let mut touched: Vec<u32> = Vec::new();
        let mut need = vec![0u32; nshapes];
        let mut groups: Vec<(u32, Vec<u32>)> = Vec::with_capacity(objs.len());
        for &o in objs {
            let cs = &child_shapes[o as usize];
            for &s in cs {
                need[s as usize] += 1;
            }
            // The distinct shapes needed (cs is sorted): an object with many
            // children of one shape (a node of 3M slots) is then scanned
            // once per member, not once per child per member.
            let mut distinct = cs.clone();
            distinct.dedup();
            let mut members: Vec<u32> = Vec::with_capacity(cs.len());
            while members.len() < cs.len() {
                let mut best: Option<u32> = None;
                for &x in &touched {
                    let xs = arena[cur[x as usize] as usize].shape as usize;
                    if !avail[x as usize] || need[xs] == 0 || conn[x as usize] <= 0.0 {
                        continue;
                    }
                    let gain = |y: u32| 2.0 * conn[y as usize] - tot[y as usize];
                    best = match best {
                        Some(b) if gain(b) > gain(x) || (gain(b) == gain(x) && b < x) => Some(b),
                        _ => Some(x),
                    };
                }
                if best.is_none() {
                    // Nothing connected: the first free unit of a needed shape.
                    for &s in distinct.iter().filter(|&&s| need[s as usize] > 0) {
                        let p = &pools[s as usize];
                        let c = &mut cursor[s as usize];
                        while *c < p.len() && !avail[p[*c] as usize] {
                            *c += 1;
                        }
                        if *c < p.len() && best.is_none_or(|b| p[*c] < b) {
                            best = Some(p[*c]);
                        }
                    }
                }
                let x = best?;
                avail[x as usize] = false;
                need[arena[cur[x as usize] as usize].shape as usize] -= 1;
                members.push(x);
                for k in csr.xadj[x as usize]..csr.xadj[x as usize + 1] {
                    let y = csr.adj[k];
                    if avail[y as usize] {
                        if conn[y as usize] == 0.0 {
                            touched.push(y);
                        }
                        conn[y as usize] += csr.w[k];
                    }
                }
            }
            for &x in &touched {
                conn[x as usize] = 0.0;
            }
            touched.clear();
            groups.push((shape[o as usize], members));
        }
        // New unit list: groups and untouched units, in first-rank order.
        let mut new_units: Vec<(u32, Vec<u32>)> = Vec::with_capacity(n);
        for (s, members) in groups {
            let id = arena.len() as u32;
            let kids = members.iter().map(|&m| cur[m as usize]).collect();
            arena.push(Unit { shape: s, kids });
            new_units.push((id, members));
        }
        for (li, &a) in avail.iter().enumerate() {
            if a {
                new_units.push((cur[li], vec![li as u32]));
            }
        }
        new_units.sort_unstable_by_key(|(_, m)| *m.iter().min().unwrap());
        let mut new_of_old = vec![0u32; n];
        for (ni, (_, m)) in new_units.iter().enumerate() {
            for &x in m {
                new_of_old[x as usize] = ni as u32;
            }
        }
        // Contract the graph.
        let next = csr.contract(
            new_units.iter().map(|(_, m)| m.iter().copied()),
            &new_of_old,
            true,
        );
        cur = new_units.into_iter().map(|(id, _)| id).collect();
        csr = next;
    }
    if cur.len() != 1 {
        return None;
    }
    // Unfold top-down: match each group's parts to the object's children by shape.
    let mut vertex_at_leaf = vec![u32::MAX; nleaves];
    let mut stack = vec![(cur[0], target.root)];
    while let Some((u, t)) = stack.pop() {
        let node = &tree[t as usize];
        if node.children.is_empty() {
            if !arena[u as usize].kids.is_empty() || u as usize >= nleaves {
                return None;
            }
            vertex_at_leaf[node.lo as usize] = u;
            continue;
        }
        let mut kids = arena[u as usize].kids.clone();
        for &c in &node.children {
            let pos = kids
                .iter()
                .position(|&k| arena[k as usize].shape == shape[c as usize])?;
            stack.push((kids.swap_remove(pos), c));
        }
    }
    Some(vertex_at_leaf)
}
