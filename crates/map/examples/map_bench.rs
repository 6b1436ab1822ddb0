//! Mapping quality benchmark: patterns x topologies, cost (estimated
//! communication time, default class costs) of topocomm vs each baseline vs
//! Scotch static mapping (Debian's `scotch_gmap`, tleaf target), and time.
//!
//! cargo run --release -p topocomm-map --example map_bench
//!
//! Topologies: two real machines from ../shared/topologies when present,
//! and synthetic clusters. Scotch runs only where the target tree is
//! symmetric (tleaf needs it) and `scotch_gmap` is installed.

use std::time::Instant;
use topocomm_map::{
    baseline_order, evaluate, gen, map, Baseline, Cluster, CommMatrix, Costs, MapOptions, Metric,
    Target,
};
use topocomm_topo::Machine;

fn load(spec: &str) -> Option<Machine> {
    topocomm_topo::load(&spec.parse().ok()?).ok()
}

/// Patterns with exactly `n` ranks (padded with silent ranks when a shape
/// does not fit exactly).
fn patterns(n: usize) -> Vec<(&'static str, CommMatrix)> {
    let pad = |m: CommMatrix| CommMatrix::from_edges(n, m.edges);
    let side2 = (n as f64).sqrt() as usize;
    let side3 = (n as f64).cbrt() as usize;
    let mut v = vec![
        ("stencil2d", pad(gen::stencil2d(side2, n / side2, 1e5))),
        (
            "stencil3d",
            pad(gen::stencil3d(side3, side3, n / (side3 * side3), 1e5)),
        ),
        ("rings8", pad(gen::rings(n / 8, 8, 1e6))),
        ("blocks16", pad(gen::blocks(n / 16, 16, 1e5))),
        ("random4", pad(gen::random_sparse(n, 4, 1e5, 11))),
    ];
    let cols = (1..=n)
        .map(|c| 1 << c)
        .take_while(|&c| c * c <= n)
        .last()
        .unwrap_or(1);
    v.push(("nas-cg", pad(gen::nas_cg(n / cols, cols, 1e6))));
    v
}

/// Scotch's mapping through the library's `scotch_gmap` runner, with link
/// costs = inverse bandwidth of the class of each level, scaled to integers
/// (None when the target is asymmetric or scotch_gmap fails, said on stderr).
fn scotch(t: &Target, m: &CommMatrix, costs: &Costs) -> Option<(Vec<u32>, f64, usize)> {
    let tl = topocomm_map::scotch::tleaf(t, &|_, _, class| {
        (1e3 / costs.get(class).bandwidth_gbs).round() as i64
    })?;
    topocomm_map::scotch::map(t, m, &tl, "example")
        .map_err(|e| eprintln!("{e}"))
        .ok()
}

fn main() {
    let costs = Costs::defaults();
    let mut targets: Vec<(String, Cluster)> = Vec::new();
    if let Some(dir) = topocomm_topo::testdata::shared_topologies() {
        for f in [
            "intel-2xE5-2650-sandybridge.xml",
            "amd-2xepyc-7763-milan.xml",
        ] {
            if let Some(m) = load(&dir.join(f).display().to_string()) {
                targets.push((
                    f.trim_end_matches(".xml").to_string(),
                    Cluster::uniform(m, 1),
                ));
            }
        }
    }
    let node = load("synthetic:pack:2 l3:2 core:4 pu:2").expect("synthetic");
    targets.push((
        "8 x (2pkg 2l3 4c 2t)".into(),
        Cluster::uniform(node.clone(), 8),
    ));
    let mut c = Cluster::uniform(
        load("synthetic:pack:2 l3:4 core:8 pu:1").expect("synthetic"),
        16,
    );
    c.network_levels = vec![4];
    targets.push(("16 x (2pkg 4l3 8c), 4/switch".into(), c));
    println!(
        "{:<30} {:<10} {:>5} {:>11} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8}",
        "topology",
        "pattern",
        "ranks",
        "topocomm_us",
        "packed",
        "rr",
        "scatter",
        "random",
        "scotch",
        "t_tc_s",
        "t_sc_s",
        "sc_fixed"
    );
    println!(
        "(baseline and scotch columns: their cost / topocomm's cost; > 1 means topocomm is better)"
    );
    for (tname, cluster) in &targets {
        let slots = cluster.default_slots(1, false).unwrap();
        let target = Target::new(cluster.clone(), &slots).unwrap();
        for (pname, m) in patterns(target.len()) {
            let t0 = Instant::now();
            let r = map(&target, &m, &MapOptions::default()).unwrap();
            let t_tc = t0.elapsed().as_secs_f64();
            let tc = evaluate(&target, &costs, Metric::Cost, &m, &r.leaf_of_rank).cost_us;
            let mut cols = Vec::new();
            for b in Baseline::ALL {
                let o = baseline_order(&target, b, 1);
                cols.push(evaluate(&target, &costs, Metric::Cost, &m, &o[..m.n]).cost_us / tc);
            }
            let (sc, t_sc, fixed) = match scotch(&target, &m, &costs) {
                Some((leaf, s, f)) => (
                    format!(
                        "{:.3}",
                        evaluate(&target, &costs, Metric::Cost, &m, &leaf).cost_us / tc
                    ),
                    format!("{s:.3}"),
                    f.to_string(),
                ),
                None => ("n/a".into(), "-".into(), "-".into()),
            };
            println!(
                "{:<30} {:<10} {:>5} {:>11.4e} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>7} {:>8.3} {:>8} {:>8}",
                tname, pname, m.n, tc, cols[0], cols[1], cols[2], cols[3], sc, t_tc, t_sc, fixed
            );
        }
    }
}
