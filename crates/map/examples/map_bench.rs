//! Mapping quality benchmark: patterns x topologies, cost (estimated
//! communication time, default class costs) of topocomm vs each baseline vs
//! Scotch static mapping (Debian's `scotch_gmap`, tleaf target), and time.
//!
//! cargo run --release -p topocomm-map --example map_bench
//!
//! Topologies: two real machines from ../shared/topologies when present,
//! and synthetic clusters. Scotch runs only where the target tree is
//! symmetric (tleaf needs it) and `scotch_gmap` is installed.

use std::fmt::Write as _;
use std::process::Command;
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

/// tleaf description of a symmetric target (None when asymmetric), with
/// link costs = inverse bandwidth of the class of each level, scaled to integers.
fn tleaf(t: &Target, costs: &Costs) -> Option<String> {
    let levels = t.levels_if_symmetric()?;
    let mut s = format!("tleaf {}", levels.len());
    for (arity, class) in levels {
        let c = costs.get(&class);
        let _ = write!(
            s,
            " {} {}",
            arity,
            ((1e3 / c.bandwidth_gbs).round() as i64).max(1)
        );
    }
    Some(s)
}

fn scotch(t: &Target, m: &CommMatrix, costs: &Costs) -> Option<(Vec<u32>, f64, usize)> {
    let tl = tleaf(t, costs)?;
    let dir = std::env::temp_dir().join(format!("tc-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let g = topocomm_map::Graph::from_matrix(m, t.len());
    let wmax = g.bytes.iter().cloned().fold(0.0, f64::max).max(1.0);
    let mut grf = format!("0\n{} {}\n0 010\n", g.n, g.adj.len());
    for v in 0..g.n {
        let r = g.neighbours(v);
        let _ = write!(grf, "{}", r.len());
        for k in r {
            let w = ((g.bytes[k] / wmax) * 1e6).round().max(1.0) as i64;
            let _ = write!(grf, " {w} {}", g.adj[k]);
        }
        grf.push('\n');
    }
    std::fs::write(dir.join("g.grf"), grf).ok()?;
    std::fs::write(dir.join("t.tgt"), tl + "\n").ok()?;
    let t0 = Instant::now();
    let out = Command::new("scotch_gmap")
        .args([dir.join("g.grf"), dir.join("t.tgt"), dir.join("o.map")])
        .args(["-Cd", "-cb", "-b0"])
        .output()
        .ok()?;
    let secs = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        eprintln!(
            "scotch_gmap failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let text = std::fs::read_to_string(dir.join("o.map")).ok()?;
    let _ = std::fs::remove_dir_all(&dir);
    let mut part = vec![u32::MAX; g.n];
    for l in text.lines().skip(1) {
        let f: Vec<usize> = l
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() == 2 && f[0] < g.n {
            part[f[0]] = f[1] as u32;
        }
    }
    // Terminals are numbered in tleaf order = our depth-first leaf order.
    // Scotch may put two vertices on one terminal: move extras to the next
    // free leaf, and count them.
    let mut used = vec![false; t.len()];
    let mut leaf = vec![u32::MAX; m.n];
    let mut repaired = 0;
    let mut spill = Vec::new();
    for v in 0..m.n {
        let p = part[v] as usize;
        if p < t.len() && !used[p] {
            used[p] = true;
            leaf[v] = p as u32;
        } else {
            spill.push(v);
        }
    }
    let mut free = (0..t.len()).filter(|&l| !used[l]);
    for v in spill {
        leaf[v] = free.next()? as u32;
        repaired += 1;
    }
    Some((leaf, secs, repaired))
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
