//! Placement study (seed 004): a memory-bound workload run by k pinned
//! worker threads under several mappings of workers to PUs.
//!
//! - CG in the style of HPCCG: 27-point stencil on a 3-D grid, `nx*ny*nz`
//!   points per worker, workers stacked along z, matrix stored in CSR (so the
//!   sparse matrix-vector product is memory-bound, as in HPCCG), diagonal 27
//!   and off-diagonal -1, right-hand side chosen so that the exact solution is
//!   all ones. Halo planes are exchanged through per-worker slots, dot
//!   products through per-worker partial sums added in a fixed order
//!   (deterministic result whatever the mapping).
//! - STREAM triad `a = b + s*c` on per-worker arrays.
//!
//! Every worker allocates and first-touches its own data after pinning, so
//! its pages land on its NUMA node, as an MPI process's would.

use crate::stats::Summary;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Instant;
use topocomm_topo::{Machine, ObjectKind};

/// Problem sizes and repetitions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Workload {
    /// Grid points per worker along each axis (HPCCG's nx = ny = nz).
    pub grid: usize,
    pub max_iter: usize,
    /// Relative residual at which CG stops.
    pub tolerance: f64,
    /// Elements per worker and per triad array.
    pub triad_len: usize,
    pub triad_reps: usize,
    pub samples: usize,
}

/// One named mapping of k workers to PUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// Strategy names that produced this PU list, e.g. `compact` or `scatter-package+scatter-l3`.
    pub name: String,
    pub pus: Vec<u32>,
}

/// Mappings of `k` workers over the PUs of `m` (topology order): compact,
/// reverse (the last k), and scatter over each level that has several
/// objects (package, NUMA node, L3, L2, core). Duplicates are merged.
pub fn mappings(m: &Machine, k: usize) -> Result<Vec<Mapping>> {
    let all: Vec<u32> = m.pus.iter().map(|p| p.os_index).collect();
    if k == 0 || k > all.len() {
        return Err(Error::WorkerCount {
            workers: k,
            pus: all.len(),
        });
    }
    let mut cands: Vec<(String, Vec<u32>)> = vec![
        ("compact".into(), all[..k].to_vec()),
        ("reverse".into(), all[all.len() - k..].to_vec()),
    ];
    let levels: Vec<(String, Vec<Option<usize>>)> = level_groups(m);
    for (name, groups) in levels {
        let mut ids: Vec<usize> = groups.iter().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() < 2 {
            continue;
        }
        // Round-robin over the groups, taking each group's PUs in order.
        let mut queues: Vec<Vec<u32>> = ids
            .iter()
            .map(|g| {
                all.iter()
                    .zip(&groups)
                    .filter(|(_, pg)| **pg == Some(*g))
                    .map(|(p, _)| *p)
                    .collect()
            })
            .collect();
        let mut pick = Vec::new();
        while pick.len() < k && queues.iter().any(|q| !q.is_empty()) {
            for q in queues.iter_mut() {
                if pick.len() < k && !q.is_empty() {
                    pick.push(q.remove(0));
                }
            }
        }
        cands.push((format!("scatter-{name}"), pick));
    }
    let mut out: Vec<Mapping> = Vec::new();
    for (name, mut pus) in cands {
        pus.sort_unstable();
        match out.iter_mut().find(|m| m.pus == pus) {
            Some(m) => {
                m.name.push('+');
                m.name.push_str(&name);
            }
            None => out.push(Mapping { name, pus }),
        }
    }
    Ok(out)
}

/// For each level kind, the group (object index) of every PU in topology order.
fn level_groups(m: &Machine) -> Vec<(String, Vec<Option<usize>>)> {
    let chains: Vec<Vec<usize>> = m.pus.iter().map(|p| m.ancestry(p.object)).collect();
    let find = |pred: &dyn Fn(&topocomm_topo::Object) -> bool| -> Vec<Option<usize>> {
        chains
            .iter()
            .map(|c| c.iter().copied().find(|&o| pred(&m.objects[o])))
            .collect()
    };
    let mut v = vec![(
        "package".to_string(),
        find(&|o| o.kind == ObjectKind::Package),
    )];
    v.push((
        "numa".into(),
        m.pus
            .iter()
            .map(|p| p.numa_node.map(|n| n as usize))
            .collect(),
    ));
    for level in [3u8, 2] {
        v.push((
            format!("l{level}"),
            find(&|o| {
                o.cache
                    .as_ref()
                    .is_some_and(|c| c.level == level && !o.is_instruction_cache())
            }),
        ));
    }
    v.push(("core".into(), find(&|o| o.kind == ObjectKind::Core)));
    v
}

/// Result of one (k, mapping).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlacementRun {
    pub workers: usize,
    pub mapping: Mapping,
    /// CG rate over all workers, MFLOPS (1e6 flop/s), one value per sample.
    pub cg_mflops: Vec<f64>,
    pub cg: Summary,
    /// Triad rate over all workers, GB/s (24 bytes per element, STREAM's convention).
    pub triad_gbs: Vec<f64>,
    pub triad: Summary,
    pub cg_iterations: usize,
    /// ||b - A x|| / ||b|| recomputed after the solve.
    pub cg_relative_residual: f64,
    /// max |x_i - 1| (the exact solution is all ones).
    pub cg_max_error: f64,
}

/// Each worker's CSR matrix and vectors (p with one ghost plane on each side).
struct Local {
    plane: usize,
    n: usize,
    row_start: Vec<u32>,
    cols: Vec<u32>,
    vals: Vec<f64>,
    b: Vec<f64>,
}

fn build_local(g: usize, w: usize, k: usize) -> Local {
    let (nx, ny, nz) = (g, g, g);
    let plane = nx * ny;
    let n = plane * nz;
    let mut row_start = Vec::with_capacity(n + 1);
    let mut cols = Vec::with_capacity(n * 27);
    let mut vals = Vec::with_capacity(n * 27);
    let mut b = Vec::with_capacity(n);
    row_start.push(0u32);
    for iz in 0..nz {
        let gz = (w * nz + iz) as isize;
        for iy in 0..ny {
            for ix in 0..nx {
                let mut off = 0usize;
                for dz in -1isize..=1 {
                    let z = gz + dz;
                    if z < 0 || z >= (k * nz) as isize {
                        continue;
                    }
                    for dy in -1isize..=1 {
                        let y = iy as isize + dy;
                        if y < 0 || y >= ny as isize {
                            continue;
                        }
                        for dx in -1isize..=1 {
                            let x = ix as isize + dx;
                            if x < 0 || x >= nx as isize {
                                continue;
                            }
                            // Column in the extended vector: layer 0 is the ghost below.
                            let layer = (iz as isize + dz + 1) as usize;
                            cols.push((layer * plane + y as usize * nx + x as usize) as u32);
                            if dx == 0 && dy == 0 && dz == 0 {
                                vals.push(27.0);
                            } else {
                                vals.push(-1.0);
                                off += 1;
                            }
                        }
                    }
                }
                b.push(27.0 - off as f64);
                row_start.push(cols.len() as u32);
            }
        }
    }
    Local {
        plane,
        n,
        row_start,
        cols,
        vals,
        b,
    }
}

impl Local {
    fn spmv(&self, xe: &[f64], y: &mut [f64]) {
        for (i, yi) in y.iter_mut().enumerate() {
            let (s, e) = (self.row_start[i] as usize, self.row_start[i + 1] as usize);
            let mut acc = 0.0;
            for j in s..e {
                acc += self.vals[j] * xe[self.cols[j] as usize];
            }
            *yi = acc;
        }
    }
}

/// Shared state of one team of workers.
struct Team {
    k: usize,
    barrier: Barrier,
    /// Boundary planes each worker publishes: [bottom, top].
    halos: Vec<[Mutex<Vec<f64>>; 2]>,
    /// Partial dot products, as f64 bits.
    partial: Vec<AtomicU64>,
}

impl Team {
    fn new(k: usize) -> Team {
        Team {
            k,
            barrier: Barrier::new(k),
            halos: (0..k)
                .map(|_| [Mutex::new(Vec::new()), Mutex::new(Vec::new())])
                .collect(),
            partial: (0..k).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Global sum in worker order. Two barriers: one before reading (all
    /// partials written) and one after (nobody overwrites a partial that
    /// another worker has not read yet).
    fn allreduce(&self, w: usize, v: f64) -> f64 {
        // Relaxed suffices: the barriers order these accesses.
        self.partial[w].store(v.to_bits(), Ordering::Relaxed);
        self.barrier.wait();
        let s = self
            .partial
            .iter()
            .map(|a| f64::from_bits(a.load(Ordering::Relaxed)))
            .sum();
        self.barrier.wait();
        s
    }

    /// Fills the ghost planes of `xe` from the neighbours' boundary planes.
    fn exchange(&self, w: usize, xe: &mut [f64], plane: usize, nz: usize) {
        *self.halos[w][0].lock().expect("halo lock") = xe[plane..2 * plane].to_vec();
        *self.halos[w][1].lock().expect("halo lock") = xe[nz * plane..(nz + 1) * plane].to_vec();
        self.barrier.wait();
        if w > 0 {
            let below = self.halos[w - 1][1].lock().expect("halo lock");
            xe[..plane].copy_from_slice(&below);
        }
        if w + 1 < self.k {
            let above = self.halos[w + 1][0].lock().expect("halo lock");
            xe[(nz + 1) * plane..].copy_from_slice(&above);
        }
        self.barrier.wait();
    }
}

struct CgOutcome {
    seconds: f64,
    flops: f64,
    iterations: usize,
    rel_residual: f64,
    max_error: f64,
}

fn cg_worker(team: &Team, w: usize, loc: &Local, wl: &Workload) -> CgOutcome {
    let (n, plane) = (loc.n, loc.plane);
    let nz = n / plane;
    let mut x = vec![0.0; n];
    let mut r = loc.b.clone();
    let mut pe = vec![0.0; n + 2 * plane];
    let mut ap = vec![0.0; n];
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let normb = team.allreduce(w, dot(&loc.b, &loc.b)).sqrt();
    team.barrier.wait();
    let start = Instant::now();
    let mut rtr = team.allreduce(w, dot(&r, &r));
    let mut old = rtr;
    let mut iters = 0;
    let mut flops = 2.0 * n as f64;
    while iters < wl.max_iter && rtr.sqrt() / normb > wl.tolerance {
        let beta = if iters == 0 { 0.0 } else { rtr / old };
        for (i, pi) in pe[plane..plane + n].iter_mut().enumerate() {
            *pi = r[i] + beta * *pi;
        }
        team.exchange(w, &mut pe, plane, nz);
        loc.spmv(&pe, &mut ap);
        let pap = team.allreduce(w, dot(&pe[plane..plane + n], &ap));
        let alpha = rtr / pap;
        for i in 0..n {
            x[i] += alpha * pe[plane + i];
            r[i] -= alpha * ap[i];
        }
        old = rtr;
        rtr = team.allreduce(w, dot(&r, &r));
        iters += 1;
        flops += 2.0 * loc.vals.len() as f64 + 4.0 * n as f64 + 6.0 * n as f64;
    }
    team.barrier.wait();
    let seconds = start.elapsed().as_secs_f64();
    // Verification, untimed: the true residual and the error against all ones.
    let mut xe = vec![0.0; n + 2 * plane];
    xe[plane..plane + n].copy_from_slice(&x);
    team.exchange(w, &mut xe, plane, nz);
    loc.spmv(&xe, &mut ap);
    let res: f64 = loc.b.iter().zip(&ap).map(|(b, a)| (b - a) * (b - a)).sum();
    let rel = team.allreduce(w, res).sqrt() / normb;
    let err = x.iter().map(|v| (v - 1.0).abs()).fold(0.0, f64::max);
    let max_error = f64::from_bits(team_max(team, w, err));
    CgOutcome {
        seconds,
        flops: team.allreduce(w, flops),
        iterations: iters,
        rel_residual: rel,
        max_error,
    }
}

fn team_max(team: &Team, w: usize, v: f64) -> u64 {
    team.partial[w].store(v.to_bits(), Ordering::Relaxed);
    team.barrier.wait();
    let m = team
        .partial
        .iter()
        .map(|a| f64::from_bits(a.load(Ordering::Relaxed)))
        .fold(0.0, f64::max);
    team.barrier.wait();
    m.to_bits()
}

fn triad_worker(team: &Team, wl: &Workload) -> f64 {
    let n = wl.triad_len;
    let mut a = vec![0.0f64; n];
    let b: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let c: Vec<f64> = (0..n).map(|i| 2.0 * i as f64).collect();
    // First touch of `a` by its owner.
    a.iter_mut().for_each(|v| *v = 1.0);
    team.barrier.wait();
    let start = Instant::now();
    for rep in 0..wl.triad_reps {
        let s = 3.0 + rep as f64;
        for ((ai, bi), ci) in a.iter_mut().zip(&b).zip(&c) {
            *ai = bi + s * ci;
        }
        std::hint::black_box(&a);
    }
    team.barrier.wait();
    start.elapsed().as_secs_f64()
}

/// Per worker: its CG outcomes and triad times, one per sample.
type WorkerResult = Result<(Vec<CgOutcome>, Vec<f64>)>;

/// Runs CG and triad with one worker per PU of `mapping`.
pub fn run_mapping(mapping: &Mapping, wl: &Workload) -> Result<PlacementRun> {
    let k = mapping.pus.len();
    if wl.samples == 0 || wl.grid < 2 {
        return Err(Error::BadWorkload {
            samples: wl.samples,
            grid: wl.grid,
        });
    }
    let team = Team::new(k);
    let results: Vec<WorkerResult> = std::thread::scope(|s| {
        let handles: Vec<_> = mapping
            .pus
            .iter()
            .enumerate()
            .map(|(w, &pu)| {
                let team = &team;
                s.spawn(move || -> WorkerResult {
                    // A pinning failure must not leave the others at a barrier:
                    // pin errors are known before any barrier, so check them all first.
                    let pinned = crate::pin::pin_current_thread(pu);
                    let ok = team.allreduce(w, if pinned.is_ok() { 0.0 } else { 1.0 });
                    pinned?;
                    if ok > 0.0 {
                        return Err(Error::PeerNotPinned);
                    }
                    let loc = build_local(wl.grid, w, k);
                    let mut cgs = Vec::new();
                    let mut triads = Vec::new();
                    for _ in 0..wl.samples {
                        cgs.push(cg_worker(team, w, &loc, wl));
                        triads.push(triad_worker(team, wl));
                    }
                    Ok((cgs, triads))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or(Err(Error::Panicked { thread: "a worker" }))
            })
            .collect()
    });
    let mut it = results.into_iter();
    let (cgs, triads) = it.next().expect("at least one worker")?;
    for r in it {
        r?;
    }
    let cg_mflops: Vec<f64> = cgs.iter().map(|c| c.flops / c.seconds / 1e6).collect();
    let bytes = 24.0 * wl.triad_len as f64 * wl.triad_reps as f64 * k as f64;
    let triad_gbs: Vec<f64> = triads.iter().map(|t| bytes / t / 1e9).collect();
    let last = cgs.last().expect("samples >= 1");
    Ok(PlacementRun {
        workers: k,
        mapping: mapping.clone(),
        cg: Summary::of(&cg_mflops).ok_or(Error::NonFiniteTiming { what: "CG" })?,
        triad: Summary::of(&triad_gbs).ok_or(Error::NonFiniteTiming { what: "triad" })?,
        cg_mflops,
        triad_gbs,
        cg_iterations: last.iterations,
        cg_relative_residual: cgs.iter().map(|c| c.rel_residual).fold(0.0, f64::max),
        cg_max_error: cgs.iter().map(|c| c.max_error).fold(0.0, f64::max),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_scatter_and_dedupe() {
        let m = topocomm_topo::load(&"synthetic:pack:2 l3:2 core:2 pu:1".parse().unwrap()).unwrap();
        let v = mappings(&m, 2).unwrap();
        let compact = v.iter().find(|x| x.name.starts_with("compact")).unwrap();
        assert_eq!(compact.pus, vec![0, 1]);
        let pkg = v
            .iter()
            .find(|x| x.name.contains("scatter-package"))
            .unwrap();
        assert_eq!(pkg.pus, vec![0, 4]);
        assert_eq!(
            mappings(&m, 9).unwrap_err().to_string(),
            "cannot place 9 workers on 8 PUs (expected 1..=8)"
        );
        // No two mappings share a PU list.
        for (i, a) in v.iter().enumerate() {
            assert!(v[i + 1..].iter().all(|b| b.pus != a.pus));
        }
    }

    #[test]
    fn cg_converges_with_two_workers() {
        let pus = crate::pin::allowed_pus().unwrap();
        let map = Mapping {
            name: "t".into(),
            pus: vec![pus[0], *pus.last().unwrap()],
        };
        let wl = Workload {
            grid: 8,
            max_iter: 200,
            tolerance: 1e-10,
            triad_len: 1 << 12,
            triad_reps: 2,
            samples: 1,
        };
        let r = run_mapping(&map, &wl).unwrap();
        assert!(r.cg_relative_residual < 1e-8, "{}", r.cg_relative_residual);
        assert!(r.cg_max_error < 1e-6, "{}", r.cg_max_error);
        assert!(r.cg_iterations > 1 && r.cg_iterations < 200);
        assert!(r.cg.median > 0.0 && r.triad.median > 0.0);
    }
}
