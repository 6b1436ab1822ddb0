//! Synthetic communication patterns for tests and benchmarks. Rank order is
//! the natural order of the pattern (row-major grids), which is what an
//! application without reordering would get.

use crate::matrix::{CommMatrix, Edge};
use crate::rng::Rng;

fn e(src: usize, dst: usize, bytes: f64, msgs: f64) -> Edge {
    Edge {
        src: src as u32,
        dst: dst as u32,
        bytes,
        msgs,
    }
}

/// 2-D 5-point stencil on an `nx` x `ny` grid (non-periodic).
pub fn stencil2d(nx: usize, ny: usize, bytes: f64) -> CommMatrix {
    let mut v = Vec::new();
    for y in 0..ny {
        for x in 0..nx {
            let r = y * nx + x;
            if x + 1 < nx {
                v.push(e(r, r + 1, bytes, 1.0));
                v.push(e(r + 1, r, bytes, 1.0));
            }
            if y + 1 < ny {
                v.push(e(r, r + nx, bytes, 1.0));
                v.push(e(r + nx, r, bytes, 1.0));
            }
        }
    }
    CommMatrix::from_edges(nx * ny, v)
}

/// 3-D 7-point stencil on an `nx` x `ny` x `nz` grid (non-periodic).
pub fn stencil3d(nx: usize, ny: usize, nz: usize, bytes: f64) -> CommMatrix {
    let mut v = Vec::new();
    let id = |x: usize, y: usize, z: usize| (z * ny + y) * nx + x;
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let r = id(x, y, z);
                let mut link = |o: usize| {
                    v.push(e(r, o, bytes, 1.0));
                    v.push(e(o, r, bytes, 1.0));
                };
                if x + 1 < nx {
                    link(id(x + 1, y, z));
                }
                if y + 1 < ny {
                    link(id(x, y + 1, z));
                }
                if z + 1 < nz {
                    link(id(x, y, z + 1));
                }
            }
        }
    }
    CommMatrix::from_edges(nx * ny * nz, v)
}

/// `k` rings of `len` ranks each, interleaved: ring `j` holds ranks
/// `j, j + k, j + 2k, ...` (the worst case for packed placement).
pub fn rings(k: usize, len: usize, bytes: f64) -> CommMatrix {
    let mut v = Vec::new();
    for j in 0..k {
        for i in 0..len {
            let (a, b) = (j + k * i, j + k * ((i + 1) % len));
            v.push(e(a, b, bytes, 1.0));
            v.push(e(b, a, bytes, 1.0));
        }
    }
    CommMatrix::from_edges(k * len, v)
}

/// Groups of `size` ranks doing all-to-all; group `j` holds ranks with
/// `r % groups == j` (strided, like sub-communicators of a 2-D grid's columns).
pub fn blocks(groups: usize, size: usize, bytes: f64) -> CommMatrix {
    let mut v = Vec::new();
    for j in 0..groups {
        for a in 0..size {
            for b in 0..size {
                if a != b {
                    v.push(e(j + groups * a, j + groups * b, bytes, 1.0));
                }
            }
        }
    }
    CommMatrix::from_edges(groups * size, v)
}

/// Random sparse graph: each rank sends to `deg` random peers, with random
/// volumes in `[bytes/2, 3*bytes/2)`.
pub fn random_sparse(n: usize, deg: usize, bytes: f64, seed: u64) -> CommMatrix {
    let mut rng = Rng::new(seed);
    let mut v = Vec::with_capacity(n * deg);
    for a in 0..n {
        for _ in 0..deg {
            let b = rng.below(n);
            let w = bytes * (0.5 + (rng.below(1000) as f64) / 1000.0);
            v.push(e(a, b, w, 1.0 + rng.below(8) as f64));
        }
    }
    CommMatrix::from_edges(n, v)
}

/// NAS-CG-like pattern on a `rows` x `cols` process grid: recursive-doubling
/// exchanges inside each row (partners at distance 1, 2, 4, ...) with
/// halving volumes, plus one exchange with the transposed position.
pub fn nas_cg(rows: usize, cols: usize, bytes: f64) -> CommMatrix {
    let mut v = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            let me = r * cols + c;
            let mut d = 1;
            let mut w = bytes;
            while d < cols {
                let p = r * cols + (c ^ d);
                if (c ^ d) < cols {
                    v.push(e(me, p, w, 1.0));
                }
                d <<= 1;
                w /= 2.0;
            }
            let t = (c % rows) * cols + (r % cols);
            v.push(e(me, t, bytes / 4.0, 1.0));
        }
    }
    CommMatrix::from_edges(rows * cols, v)
}

/// Random geometric graph: `n` points uniform in the unit square, each
/// linked to every point within `radius` with bytes decreasing with the
/// distance; rank order is the (random) order of the points, so it says
/// nothing about the geometry. Grid buckets: O(n + edges).
pub fn random_geometric(n: usize, radius: f64, bytes: f64, seed: u64) -> CommMatrix {
    let mut rng = Rng::new(seed);
    let pts: Vec<(f64, f64)> = (0..n)
        .map(|_| {
            let x = rng.below(1 << 30) as f64 / (1u64 << 30) as f64;
            let y = rng.below(1 << 30) as f64 / (1u64 << 30) as f64;
            (x, y)
        })
        .collect();
    let cells = ((1.0 / radius.max(1e-9)) as usize).clamp(1, 4096);
    let cell = |p: f64| ((p * cells as f64) as usize).min(cells - 1);
    let mut grid: Vec<Vec<u32>> = vec![Vec::new(); cells * cells];
    for (i, p) in pts.iter().enumerate() {
        grid[cell(p.1) * cells + cell(p.0)].push(i as u32);
    }
    let mut v = Vec::new();
    for (i, p) in pts.iter().enumerate() {
        let (cx, cy) = (cell(p.0), cell(p.1));
        for gy in cy.saturating_sub(1)..=(cy + 1).min(cells - 1) {
            for gx in cx.saturating_sub(1)..=(cx + 1).min(cells - 1) {
                for &j in &grid[gy * cells + gx] {
                    let q = pts[j as usize];
                    let d = ((p.0 - q.0).powi(2) + (p.1 - q.1).powi(2)).sqrt();
                    if (j as usize) != i && d <= radius {
                        v.push(e(i, j as usize, bytes * (1.0 - 0.5 * d / radius), 1.0));
                    }
                }
            }
        }
    }
    CommMatrix::from_edges(n, v)
}
