//! The sparse communication matrix: one entry per ordered pair that
//! communicates, with both metrics. Never N x N.

use serde::Serialize;

/// Traffic from `src` to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Edge {
    pub src: u32,
    pub dst: u32,
    pub bytes: f64,
    pub msgs: f64,
}

/// Directed, sparse communication matrix over ranks `0..n`. Edges are sorted
/// by `(src, dst)`, duplicates merged, self-traffic dropped (a rank talking
/// to itself costs the same wherever it runs).
#[derive(Clone, Debug, Default)]
pub struct CommMatrix {
    pub n: usize,
    pub edges: Vec<Edge>,
}

impl CommMatrix {
    /// Builds the matrix from raw edges (any order, duplicates summed).
    /// `n` is raised to cover every rank named by an edge.
    pub fn from_edges(n: usize, mut edges: Vec<Edge>) -> Self {
        edges.retain(|e| e.src != e.dst && (e.bytes > 0.0 || e.msgs > 0.0));
        edges.sort_unstable_by_key(|e| (e.src, e.dst));
        let mut merged: Vec<Edge> = Vec::with_capacity(edges.len());
        for e in edges {
            match merged.last_mut() {
                Some(l) if l.src == e.src && l.dst == e.dst => {
                    l.bytes += e.bytes;
                    l.msgs += e.msgs;
                }
                _ => merged.push(e),
            }
        }
        let max = merged
            .iter()
            .map(|e| e.src.max(e.dst) as usize + 1)
            .max()
            .unwrap_or(0);
        CommMatrix {
            n: n.max(max),
            edges: merged,
        }
    }

    pub fn total_bytes(&self) -> f64 {
        self.edges.iter().map(|e| e.bytes).sum()
    }

    pub fn total_msgs(&self) -> f64 {
        self.edges.iter().map(|e| e.msgs).sum()
    }

    /// Number of ordered pairs whose reverse pair carries different traffic
    /// (0 for a symmetric matrix). Mapping costs are symmetric in the two
    /// directions, so asymmetric input is used as `A + A^T`.
    pub fn asymmetric_pairs(&self) -> usize {
        let find = |s: u32, d: u32| {
            self.edges
                .binary_search_by_key(&(s, d), |e| (e.src, e.dst))
                .ok()
                .map(|i| self.edges[i])
        };
        self.edges
            .iter()
            .filter(|e| match find(e.dst, e.src) {
                Some(r) => r.bytes != e.bytes || r.msgs != e.msgs,
                None => true,
            })
            .count()
    }
}
