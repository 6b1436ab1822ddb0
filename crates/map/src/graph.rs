//! Undirected CSR view of a [`CommMatrix`] (both directions summed), the
//! structure every algorithm walks.

use crate::matrix::CommMatrix;

#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub n: usize,
    pub xadj: Vec<usize>,
    pub adj: Vec<u32>,
    /// Bytes and messages of the undirected edge (sum of both directions).
    pub bytes: Vec<f64>,
    pub msgs: Vec<f64>,
}

impl Graph {
    /// Symmetrizes `m` into CSR over `n >= m.n` vertices (extra vertices
    /// have no edges: padding for empty slots).
    pub fn from_matrix(m: &CommMatrix, n: usize) -> Self {
        let n = n.max(m.n);
        let mut deg = vec![0usize; n + 1];
        for e in &m.edges {
            deg[e.src as usize] += 1;
            deg[e.dst as usize] += 1;
        }
        let mut xadj = vec![0usize; n + 1];
        for v in 0..n {
            xadj[v + 1] = xadj[v] + deg[v];
        }
        let total = xadj[n];
        let mut adj = vec![0u32; total];
        let mut bytes = vec![0f64; total];
        let mut msgs = vec![0f64; total];
        let mut fill = xadj.clone();
        for e in &m.edges {
            for (a, b) in [(e.src, e.dst), (e.dst, e.src)] {
                let k = fill[a as usize];
                adj[k] = b;
                bytes[k] = e.bytes;
                msgs[k] = e.msgs;
                fill[a as usize] += 1;
            }
        }
        // Merge the two directions of a pair into one entry per neighbour.
        let mut out = Graph {
            n,
            xadj: vec![0; n + 1],
            adj: Vec::with_capacity(total),
            bytes: Vec::with_capacity(total),
            msgs: Vec::with_capacity(total),
        };
        let mut order: Vec<usize> = Vec::new();
        for v in 0..n {
            order.clear();
            order.extend(xadj[v]..xadj[v + 1]);
            order.sort_unstable_by_key(|&k| adj[k]);
            for &k in &order {
                if out.adj.len() > out.xadj[v] && *out.adj.last().unwrap() == adj[k] {
                    *out.bytes.last_mut().unwrap() += bytes[k];
                    *out.msgs.last_mut().unwrap() += msgs[k];
                } else {
                    out.adj.push(adj[k]);
                    out.bytes.push(bytes[k]);
                    out.msgs.push(msgs[k]);
                }
            }
            out.xadj[v + 1] = out.adj.len();
        }
        out
    }

    pub fn neighbours(&self, v: usize) -> std::ops::Range<usize> {
        self.xadj[v]..self.xadj[v + 1]
    }
}
