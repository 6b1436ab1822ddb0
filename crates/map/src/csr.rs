//! Weighted adjacency in compressed sparse rows, and its contraction (the
//! step shared by the tree grouping and the multilevel coarsening).

/// Neighbours of vertex v: `adj[xadj[v]..xadj[v + 1]]`, edge weights in `w`
/// alongside.
#[derive(Default)]
pub(crate) struct Csr {
    pub(crate) xadj: Vec<usize>,
    pub(crate) adj: Vec<u32>,
    pub(crate) w: Vec<f64>,
}

impl Csr {
    /// [`contract`] of this graph.
    pub(crate) fn contract<G, I>(&self, groups: G, of: &[u32], sorted: bool) -> Csr
    where
        G: IntoIterator<Item = I>,
        I: IntoIterator<Item = u32>,
    {
        contract((&self.xadj, &self.adj, &self.w), groups, of, sorted)
    }
}

/// The graph of `groups` over the CSR rows `(xadj, adj, w)`: new vertex i
/// stands for the old vertices of the i-th group (`of[old] == i`). Weights
/// between two groups are summed, edges inside a group dropped. Neighbours
/// come in increasing order when `sorted`, else in the order first met
/// (cheaper; the callers' results depend on the order, so each keeps its
/// own).
pub(crate) fn contract<G, I>(
    (xadj, adj, w): (&[usize], &[u32], &[f64]),
    groups: G,
    of: &[u32],
    sorted: bool,
) -> Csr
where
    G: IntoIterator<Item = I>,
    I: IntoIterator<Item = u32>,
{
    let groups = groups.into_iter();
    let mut next = Csr {
        xadj: Vec::with_capacity(groups.size_hint().0 + 1),
        ..Csr::default()
    };
    next.xadj.push(0);
    // Sparse accumulator: weight per neighbour group, and which are set.
    let mut acc: Vec<f64> = vec![0.0; groups.size_hint().0];
    let mut seen: Vec<u32> = Vec::new();
    for (i, members) in groups.enumerate() {
        for x in members {
            for k in xadj[x as usize]..xadj[x as usize + 1] {
                let y = of[adj[k] as usize] as usize;
                if y == i {
                    continue;
                }
                if y >= acc.len() {
                    acc.resize(y + 1, 0.0);
                }
                if acc[y] == 0.0 {
                    seen.push(y as u32);
                }
                acc[y] += w[k];
            }
        }
        if sorted {
            seen.sort_unstable();
        }
        for &y in &seen {
            next.adj.push(y);
            next.w.push(acc[y as usize]);
            acc[y as usize] = 0.0;
        }
        seen.clear();
        next.xadj.push(next.adj.len());
    }
    next
}

#[cfg(test)]
mod tests {
    use super::Csr;

    #[test]
    fn contraction_sums_weights_between_groups_and_drops_inner_edges() {
        // Path 0 -1.0- 1 -2.0- 2 -4.0- 3, groups {0, 1} and {2, 3}.
        let g = Csr {
            xadj: vec![0, 1, 3, 5, 6],
            adj: vec![1, 0, 2, 1, 3, 2],
            w: vec![1.0, 1.0, 2.0, 2.0, 4.0, 4.0],
        };
        let c = g.contract([vec![0, 1], vec![2, 3]], &[0, 0, 1, 1], true);
        assert_eq!(c.xadj, [0, 1, 2]);
        assert_eq!(c.adj, [1, 0]);
        assert_eq!(c.w, [2.0, 2.0]);
        // Groups {1} and {0, 2, 3}: 1 touches the other group twice (1.0 + 2.0).
        let c = g.contract([vec![1], vec![0, 2, 3]], &[1, 0, 1, 1], false);
        assert_eq!(c.xadj, [0, 1, 2]);
        assert_eq!((c.adj, c.w), (vec![1, 0], vec![3.0, 3.0]));
    }

    #[test]
    fn neighbours_are_sorted_only_when_asked() {
        // A star: 0 joined to 3, 2, 1 in that order in its row.
        let g = Csr {
            xadj: vec![0, 3, 4, 5, 6],
            adj: vec![3, 2, 1, 0, 0, 0],
            w: vec![1.0; 6],
        };
        let each = [vec![0], vec![1], vec![2], vec![3]];
        assert_eq!(
            g.contract(each.clone(), &[0, 1, 2, 3], false).adj[..3],
            [3, 2, 1]
        );
        assert_eq!(g.contract(each, &[0, 1, 2, 3], true).adj[..3], [1, 2, 3]);
    }
}
