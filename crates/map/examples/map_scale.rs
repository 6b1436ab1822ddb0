//! Scale run: 100,000 ranks, about 1,000,000 directed edges (3-D stencil
//! plus random long-range traffic), on a 1,000-node cluster of 128-PU nodes.
//! Prints the time of each phase and the peak memory (VmHWM).
//!
//! cargo run --release -p topocomm-map --example map_scale [-- RANKS NODES [STRATEGY]]

use std::time::Instant;
use topocomm_map::{gen, map, Cluster, CommMatrix, MapOptions, Strategy, Target};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ranks = args.first().copied().unwrap_or(100_000);
    let nodes = args.get(1).copied().unwrap_or(1_000);
    let t0 = Instant::now();
    // 3-D grid close to a cube with `ranks` points.
    let side = (ranks as f64).cbrt().floor() as usize;
    let nz = ranks / (side * side);
    let grid = gen::stencil3d(side, side, nz, 1e5);
    let n = side * side * nz;
    let extra = gen::random_sparse(n, 4, 1e3, 7);
    let mut edges = grid.edges;
    edges.extend(extra.edges);
    let m = CommMatrix::from_edges(n, edges);
    let t_gen = t0.elapsed().as_secs_f64();
    let machine = topocomm_topo::load(&"synthetic:pack:2 l3:8 core:8 pu:1".parse().unwrap())
        .expect("synthetic topology");
    let cluster = Cluster::uniform(machine, nodes);
    let t1 = Instant::now();
    let slots = cluster.default_slots(n, false).expect("enough slots");
    let target = Target::new(cluster, &slots).expect("target");
    let t_target = t1.elapsed().as_secs_f64();
    let strategy: Strategy = std::env::args()
        .nth(3)
        .map_or(Ok(Strategy::Auto), |s| s.parse())
        .expect("strategy");
    let opt = MapOptions {
        strategy,
        ..MapOptions::default()
    };
    let (t2, c2) = (Instant::now(), topocomm_map::cpu_seconds());
    let r = map(&target, &m, &opt).expect("mapping");
    let t_map = t2.elapsed().as_secs_f64();
    let cpu = c2
        .zip(topocomm_map::cpu_seconds())
        .map_or(f64::NAN, |(a, b)| b - a);
    println!(
        "ranks {n}, directed edges {}, nodes {nodes}, slots {}",
        m.edges.len(),
        target.len()
    );
    println!(
        "generate {t_gen:.2} s, target {t_target:.2} s, map {t_map:.2} s ({cpu:.2} s CPU; kept {})",
        r.chosen
    );
    for t in &r.tried {
        println!(
            "  {:<15} objective {:.4e} us  {:.2} s",
            t.name, t.objective, t.seconds
        );
    }
    println!(
        "peak memory (VmHWM): {} MiB",
        topocomm_map::peak_memory_kib().unwrap_or(0) / 1024
    );
}
