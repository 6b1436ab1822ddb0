//! `topocomm bench map`: mapping quality and time of topocomm's own
//! algorithm (`multilevel`, the portfolio off), Scotch (`scotch_gmap`, when
//! installed) and the packed / round-robin baselines, over patterns x
//! targets, under the hop-bytes and cost objectives (docs/commands/bench-map.md).

use crate::cost::{evaluate, Costs, Metric};
use crate::matrix::CommMatrix;
use crate::strategy::{map, MapOptions, Strategy};
use crate::target::{Cluster, Target};
use crate::{baseline_order, gen, scotch, Baseline, MapError};
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// Objectives every case is scored under.
pub const OBJECTIVES: [Metric; 2] = [Metric::HopBytes, Metric::Cost];

/// Real topologies of `../shared/topologies` used (read in place), with the
/// number of nodes of each cluster built from them.
pub const SHARED: [(&str, usize); 3] = [
    ("intel-2xE5-2650-sandybridge.xml", 4),
    ("amd-2xepyc-7763-milan.xml", 1),
    ("intel-2xX5650-westmere-ib.xml", 6),
];

/// One case's results under one objective (values in the objective's unit).
#[derive(Clone, Debug, Serialize)]
pub struct Scored {
    pub objective: String,
    pub topocomm: f64,
    pub scotch: Option<f64>,
    pub packed: f64,
    pub round_robin: f64,
    pub topocomm_s: f64,
    pub scotch_s: Option<f64>,
    /// Ranks moved off a terminal Scotch gave twice.
    pub scotch_repaired: Option<usize>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub target: String,
    pub pattern: String,
    pub ranks: usize,
    pub pairs: usize,
    pub scores: Vec<Scored>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub seed: u64,
    /// Ranks per PU of every target (1: one per PU; more: an
    /// overdecomposed job, several ranks sharing each PU).
    pub ranks_per_pu: usize,
    pub scotch: bool,
    pub notes: Vec<String>,
    pub cases: Vec<Case>,
    /// Per objective: geometric means of scotch/topocomm, packed/topocomm
    /// and round-robin/topocomm (> 1: topocomm better), and the worst
    /// scotch/topocomm.
    pub summary: Vec<serde_json::Value>,
}

fn load(path: &Path) -> Option<topocomm_topo::Machine> {
    topocomm_topo::load(&path.display().to_string().parse().ok()?).ok()
}

/// Most ranks per PU `bench map` takes (`--ranks-per-pu`).
pub const MAX_RANKS_PER_PU: usize = 64;

/// The targets: clusters of the shared topologies found in `shared`, and
/// synthetic clusters with network levels; `per_pu` slots on every PU
/// (an overdecomposed job: the setting of the multilevel mapping
/// literature, many tasks per processing element).
pub fn targets(
    shared: Option<&Path>,
    per_pu: usize,
    notes: &mut Vec<String>,
) -> Vec<(String, Target)> {
    let mut out = Vec::new();
    let mut add = |name: String, c: Cluster| {
        let pus = c.default_slots(1, false).ok()?.len();
        let slots = c.default_slots(pus * per_pu, per_pu > 1).ok()?;
        let name = if per_pu > 1 {
            format!("{name}, {per_pu}/PU")
        } else {
            name
        };
        out.push((name, Target::new(c, &slots).ok()?));
        Some(())
    };
    match shared {
        Some(dir) => {
            for (f, nodes) in SHARED {
                match load(&dir.join(f)) {
                    Some(m) => {
                        let name = format!("{}x{}", nodes, f.trim_end_matches(".xml"));
                        add(name, Cluster::uniform(m, nodes));
                    }
                    None => notes.push(format!("{}: not readable, skipped", dir.join(f).display())),
                }
            }
        }
        None => notes.push("no shared topologies directory: real machines skipped".into()),
    }
    if let Ok(m) = topocomm_topo::load(&"synthetic:pack:2 l3:3 core:4 pu:1".parse().expect("spec"))
    {
        let mut c = Cluster::uniform(m, 12);
        c.network_levels = vec![3, 2];
        add("12x(2pkg 3l3 4c), 3/switch, 2/group".into(), c);
    }
    // Larger clusters, where multilevel mappers are known to pull away
    // from Scotch (the literature reports its gains there): 960
    // ranks on nodes with NUMA levels, 2048 on three switch levels.
    let spec = "synthetic:pack:2 numa:2 l3:2 core:6 pu:1";
    if let Ok(m) = topocomm_topo::load(&spec.parse().expect("spec")) {
        let mut c = Cluster::uniform(m, 20);
        c.network_levels = vec![5, 2];
        add("20x(2pkg 2numa 2l3 6c), 5/switch, 2/group".into(), c);
    }
    if let Ok(m) = topocomm_topo::load(&"synthetic:pack:2 l3:4 core:8 pu:1".parse().expect("spec"))
    {
        let mut c = Cluster::uniform(m, 32);
        c.network_levels = vec![4, 2, 2];
        add("32x(2pkg 4l3 8c), 4/switch, 2/group, 2/pod".into(), c);
    }
    out
}

/// The patterns, padded with isolated ranks to exactly `n` ranks.
pub fn patterns(n: usize, seed: u64) -> Vec<(String, CommMatrix)> {
    let pad = |m: CommMatrix| CommMatrix::from_edges(n, m.edges);
    let w2 = ((n as f64).sqrt() * 0.75).max(1.0) as usize;
    let w3 = ((n as f64).cbrt() * 0.8).max(1.0) as usize;
    let z3 = (n / (w3 * (w3 + 1))).max(1);
    let gs = 6;
    let cols = (n as f64).sqrt().max(1.0) as usize;
    vec![
        (
            format!("stencil2d {w2}x{}", n / w2),
            pad(gen::stencil2d(w2, n / w2, 1e5)),
        ),
        (
            format!("stencil3d {w3}x{}x{z3}", w3 + 1),
            pad(gen::stencil3d(w3, w3 + 1, z3, 1e5)),
        ),
        (
            format!("a2a blocks {}x{gs}", n / gs),
            pad(gen::blocks(n / gs, gs, 1e5)),
        ),
        (
            "random-geometric".into(),
            pad(gen::random_geometric(
                n,
                (8.0 / (n as f64 * std::f64::consts::PI)).sqrt(),
                1e5,
                seed,
            )),
        ),
        (
            format!("nas-cg {}x{cols}", n / cols),
            pad(gen::nas_cg(n / cols, cols, 1e6)),
        ),
    ]
}

fn scotch_cost(obj: Metric, costs: &Costs) -> impl Fn(usize, usize, &str) -> i64 + '_ {
    move |i, levels, class| match obj {
        Metric::HopBytes | Metric::MaxCongestion => 2 * (levels - i) as i64,
        _ => {
            let c = costs.get(class);
            (1e3 / c.bandwidth_gbs + 10.0 * c.latency_us).round() as i64
        }
    }
}

/// Runs every case; `progress` gets one line per case as it completes.
pub fn run(
    shared: Option<&Path>,
    seed: u64,
    time_limit: f64,
    ranks_per_pu: usize,
    progress: &mut dyn FnMut(&Case),
) -> Result<Report, MapError> {
    if !(1..=MAX_RANKS_PER_PU).contains(&ranks_per_pu) {
        return Err(MapError::Invalid(format!(
            "--ranks-per-pu {ranks_per_pu}: expected 1 to {MAX_RANKS_PER_PU}"
        )));
    }
    let mut notes = Vec::new();
    let have_scotch = scotch::available();
    if !have_scotch {
        notes.push("scotch_gmap not found (Debian package scotch): Scotch skipped".into());
    }
    let costs = Costs::defaults();
    let mut cases = Vec::new();
    for (tname, t) in targets(shared, ranks_per_pu, &mut notes) {
        for (pname, m) in patterns(t.len(), seed) {
            let mut scores = Vec::new();
            for obj in OBJECTIVES {
                let score = |leaf: &[u32]| evaluate(&t, &costs, obj, &m, leaf).objective;
                let t0 = Instant::now();
                let opt = MapOptions {
                    metric: obj,
                    costs: costs.clone(),
                    strategy: Strategy::Multilevel,
                    seed,
                    time_limit,
                    ..MapOptions::default()
                };
                let r = map(&t, &m, &opt)?;
                let secs = t0.elapsed().as_secs_f64();
                let base = |b| score(&baseline_order(&t, b, seed)[..m.n]);
                let mut s = Scored {
                    objective: obj.name().into(),
                    topocomm: score(&r.leaf_of_rank),
                    scotch: None,
                    packed: base(Baseline::Packed),
                    round_robin: base(Baseline::RoundRobin),
                    topocomm_s: secs,
                    scotch_s: None,
                    scotch_repaired: None,
                };
                if have_scotch {
                    let cost = scotch_cost(obj, &costs);
                    match scotch::tleaf(&t, &cost) {
                        None => notes.push(format!(
                            "{tname}: asymmetric tree, no tleaf: Scotch skipped"
                        )),
                        Some(tl) => match scotch::map(&t, &m, &tl, obj.name()) {
                            Ok((leaf, secs, fixed)) => {
                                s.scotch = Some(score(&leaf));
                                s.scotch_s = Some(secs);
                                s.scotch_repaired = Some(fixed);
                            }
                            Err(e) => notes.push(format!("{tname} {pname}: {e}")),
                        },
                    }
                }
                scores.push(s);
            }
            let case = Case {
                target: tname.clone(),
                pattern: pname,
                ranks: m.n,
                pairs: m.edges.len(),
                scores,
            };
            progress(&case);
            cases.push(case);
        }
    }
    notes.dedup();
    let summary = OBJECTIVES
        .iter()
        .map(|o| {
            let of = |c: &Case| c.scores.iter().find(|s| s.objective == o.name()).cloned();
            let all: Vec<Scored> = cases.iter().filter_map(of).collect();
            let gm = |f: &dyn Fn(&Scored) -> Option<f64>| {
                let v: Vec<f64> = all.iter().filter_map(f).filter(|x| x.is_finite() && *x > 0.0).collect();
                (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
            };
            let r = |a: f64, b: f64| if b > 0.0 { Some(a / b) } else { None };
            serde_json::json!({
                "objective": o.name(),
                "scotch_over_topocomm": gm(&|s| s.scotch.and_then(|x| r(x, s.topocomm))),
                "worst_scotch_over_topocomm": all.iter().filter_map(|s| s.scotch.and_then(|x| r(x, s.topocomm))).reduce(f64::min),
                "packed_over_topocomm": gm(&|s| r(s.packed, s.topocomm)),
                "round_robin_over_topocomm": gm(&|s| r(s.round_robin, s.topocomm)),
                "topocomm_seconds": all.iter().map(|s| s.topocomm_s).sum::<f64>(),
                "scotch_seconds": all.iter().filter_map(|s| s.scotch_s).sum::<f64>(),
            })
        })
        .collect();
    Ok(Report {
        schema: "topocomm.bench-map/1",
        seed,
        ranks_per_pu,
        scotch: have_scotch,
        notes,
        cases,
        summary,
    })
}

/// `x / y` as text, `-` when absent.
fn ratio(x: Option<f64>, y: f64) -> String {
    match x {
        Some(x) if y > 0.0 => format!("{:.3}", x / y),
        Some(_) => "inf".into(),
        None => "-".into(),
    }
}

/// One table row per case and objective.
pub fn row(c: &Case) -> Vec<Vec<String>> {
    c.scores
        .iter()
        .map(|s| {
            vec![
                c.target.clone(),
                c.pattern.clone(),
                c.ranks.to_string(),
                s.objective.clone(),
                format!("{:.4e}", s.topocomm),
                ratio(s.scotch, s.topocomm),
                ratio(Some(s.packed), s.topocomm),
                ratio(Some(s.round_robin), s.topocomm),
                format!("{:.3}", s.topocomm_s),
                s.scotch_s.map_or("-".into(), |x| format!("{x:.3}")),
            ]
        })
        .collect()
}

pub const HEADER: [&str; 10] = [
    "target",
    "pattern",
    "ranks",
    "objective",
    "topocomm",
    "scotch/tc",
    "packed/tc",
    "rr/tc",
    "tc_s",
    "scotch_s",
];

/// A scale run: `ranks` ranks of a random geometric graph (about 10
/// neighbours each) on a cluster of 64-PU nodes, 16 per switch, mapped by
/// the multilevel mapper under `objective`.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRun {
    pub ranks: usize,
    pub pairs: usize,
    pub objective: String,
    pub seconds: f64,
    /// CPU time of the mapping, summed over its threads (the mapper uses
    /// every CPU, so this can exceed `seconds`).
    pub cpu_seconds: Option<f64>,
    pub packed_over_topocomm: f64,
    pub peak_memory_mib: Option<u64>,
}

pub fn scale(
    ranks: usize,
    objective: Metric,
    seed: u64,
    time_limit: f64,
) -> Result<ScaleRun, MapError> {
    let m = gen::random_geometric(
        ranks,
        (10.0 / (std::f64::consts::PI * ranks as f64)).sqrt(),
        1e5,
        seed,
    );
    let node = topocomm_topo::load(&"synthetic:pack:2 l3:2 core:16 pu:1".parse().expect("spec"))?;
    let mut c = Cluster::uniform(node, ranks.div_ceil(64));
    c.network_levels = vec![16];
    let slots = c.default_slots(ranks, false)?;
    let t = Target::new(c, &slots)?;
    let opt = MapOptions {
        metric: objective,
        strategy: Strategy::Multilevel,
        seed,
        time_limit,
        ..MapOptions::default()
    };
    let (t0, c0) = (Instant::now(), crate::cpu_seconds());
    let r = map(&t, &m, &opt)?;
    let seconds = t0.elapsed().as_secs_f64();
    let cpu_seconds = c0.zip(crate::cpu_seconds()).map(|(a, b)| b - a);
    let costs = Costs::defaults();
    let tc = evaluate(&t, &costs, objective, &m, &r.leaf_of_rank).objective;
    let packed = evaluate(
        &t,
        &costs,
        objective,
        &m,
        &baseline_order(&t, Baseline::Packed, 0)[..m.n],
    )
    .objective;
    Ok(ScaleRun {
        ranks,
        pairs: m.edges.len(),
        objective: objective.name().into(),
        seconds,
        cpu_seconds,
        packed_over_topocomm: packed / tc,
        peak_memory_mib: crate::peak_memory_kib().map(|k| k / 1024),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_per_pu_multiplies_every_targets_slots_and_names_it() {
        let mut notes = Vec::new();
        let one = targets(None, 1, &mut notes);
        let three = targets(None, 3, &mut notes);
        assert_eq!(one.len(), 3, "the three synthetic clusters");
        assert_eq!(one.len(), three.len());
        for ((n1, t1), (n3, t3)) in one.iter().zip(&three) {
            assert_eq!(t3.len(), 3 * t1.len(), "{n3}");
            assert_eq!(n3, &format!("{n1}, 3/PU"));
            // The slots of one PU sit together in the tree: Scotch's tleaf
            // gets a last level of arity 3.
            let l = t3.levels_if_symmetric().expect("symmetric");
            assert_eq!(l.last().unwrap().0, 3, "{n3}: {l:?}");
        }
    }

    #[test]
    fn ranks_per_pu_out_of_range_is_refused_by_name() {
        for k in [0, MAX_RANKS_PER_PU + 1] {
            let e = run(None, 1, 1.0, k, &mut |_| {}).expect_err("refused");
            assert!(e.to_string().contains("--ranks-per-pu"), "{e}");
        }
    }
}
