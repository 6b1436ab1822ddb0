//! Objectives on hand-computed cases; the multilevel mapper on non-dividing
//! trees, oversubscription, restricted slots, disconnected graphs and
//! isolated ranks; determinism; the portfolio never worse than packed or
//! round-robin under any objective.

use topocomm_map::{
    baseline_order, evaluate, gen, map, Baseline, Cluster, CommMatrix, Costs, Edge, MapOptions,
    Metric, Slot, Strategy, Target,
};
use topocomm_topo::{Machine, PuSet};

fn machine(desc: &str) -> Machine {
    topocomm_topo::load(&format!("synthetic:{desc}").parse().unwrap()).unwrap()
}

fn target_of(c: Cluster, ranks: usize, over: bool) -> Target {
    let slots = c.default_slots(ranks, over).unwrap();
    Target::new(c, &slots).unwrap()
}

fn edge(src: u32, dst: u32, bytes: f64, msgs: f64) -> Edge {
    Edge {
        src,
        dst,
        bytes,
        msgs,
    }
}

/// Every rank on its own leaf, every leaf a slot of the target.
fn check_valid(t: &Target, leaves: &[u32], ranks: usize) {
    assert_eq!(leaves.len(), ranks);
    let mut seen = vec![false; t.len()];
    for &l in leaves {
        assert!((l as usize) < t.len(), "leaf {l} out of range");
        assert!(!seen[l as usize], "leaf {l} given twice");
        seen[l as usize] = true;
    }
}

fn opts(strategy: Strategy, metric: Metric, seed: u64) -> MapOptions {
    MapOptions {
        strategy,
        metric,
        seed,
        ..MapOptions::default()
    }
}

#[test]
fn every_objective_on_a_hand_computed_case() {
    // One node, 2 packages (one NUMA node each: class numa inside, machine
    // across) x 2 cores: leaves 0,1 in package 0 and 2,3 in
    // package 1; two cores of a package are 2 links apart, of different
    // packages 4 (core - package - machine - package - core).
    let t = target_of(Cluster::uniform(machine("pack:2 core:2 pu:1"), 1), 4, false);
    let costs = Costs::from_json(
        "c.json",
        r#"{"classes":{"numa":{"latency_us":1,"bandwidth_gbs":1},
            "machine":{"latency_us":10,"bandwidth_gbs":0.5}}}"#,
    )
    .unwrap();
    costs.check_classes(t.class_names()).unwrap();
    // 0 -> 1: 1000 B in 2 messages; 0 -> 2: 100 B in 1 message; 3 silent.
    let m = CommMatrix::from_edges(4, vec![edge(0, 1, 1000.0, 2.0), edge(0, 2, 100.0, 1.0)]);
    let packed = [0u32, 1, 2, 3];
    let split = [0u32, 2, 1, 3]; // rank 1 in the other package, rank 2 beside rank 0
    let v = |metric, leaves: &[u32]| evaluate(&t, &costs, metric, &m, leaves).objective;
    // bytes / (GB/s * 1e3) is in us.
    let near = |bytes: f64| bytes / 1e3;
    let far = |bytes: f64| bytes / 0.5e3;
    assert_eq!(v(Metric::HopBytes, &packed), 1000.0 * 2.0 + 100.0 * 4.0);
    assert_eq!(v(Metric::HopBytes, &split), 1000.0 * 4.0 + 100.0 * 2.0);
    assert_eq!(v(Metric::MaxCongestion, &packed), 100.0);
    assert_eq!(v(Metric::MaxCongestion, &split), 1000.0);
    assert!((v(Metric::Msgs, &packed) - (2.0 * 1.0 + 10.0)).abs() < 1e-9);
    assert!((v(Metric::Msgs, &split) - (2.0 * 10.0 + 1.0)).abs() < 1e-9);
    assert!((v(Metric::Bytes, &packed) - (near(1000.0) + far(100.0))).abs() < 1e-9);
    assert!((v(Metric::Bytes, &split) - (far(1000.0) + near(100.0))).abs() < 1e-9);
    let cost = 2.0 + near(1000.0) + 10.0 + far(100.0);
    assert!((v(Metric::Cost, &packed) - cost).abs() < 1e-9);
    let s = evaluate(&t, &costs, Metric::Cost, &m, &packed);
    assert_eq!(s.hop_bytes, 2400.0);
    assert_eq!(s.max_congestion, 100.0);
    // The optimizers' objective is the same function: what the mapper
    // reports for the packed baseline equals evaluate's value.
    for metric in Metric::ALL {
        let o = MapOptions {
            costs: costs.clone(),
            ..opts(Strategy::Multilevel, metric, 1)
        };
        let r = map(&t, &m, &o).unwrap();
        let reported = r
            .tried
            .iter()
            .find(|x| x.name == "packed")
            .unwrap()
            .objective;
        let want = v(metric, &packed);
        assert!(
            (reported - want).abs() <= 1e-9 * want.max(1.0),
            "{metric:?}: {reported} vs {want}"
        );
        // and the multilevel result is optimal here: 0 and 1 share a package.
        let best = v(metric, &r.leaf_of_rank);
        assert!(best <= want, "{metric:?}: {best} > packed {want}");
    }
    for name in ["cost", "hop-bytes", "bytes", "msgs", "max-congestion"] {
        assert_eq!(name.parse::<Metric>().unwrap().name(), name);
    }
    let e = "hops".parse::<Metric>().unwrap_err();
    assert!(
        e.contains("hop-bytes") && e.contains("max-congestion"),
        "{e}"
    );
}

/// Multilevel and the auto portfolio on a target and matrix: a valid
/// mapping, never worse than packed or round-robin for auto.
fn check_case(what: &str, t: &Target, m: &CommMatrix) {
    let costs = Costs::defaults();
    for metric in Metric::ALL {
        let base = |b| evaluate(t, &costs, metric, m, &baseline_order(t, b, 1)[..m.n]).objective;
        let (packed, rr) = (base(Baseline::Packed), base(Baseline::RoundRobin));
        for strategy in [Strategy::Multilevel, Strategy::Auto] {
            let r = map(t, m, &opts(strategy, metric, 7)).unwrap();
            check_valid(t, &r.leaf_of_rank, m.n);
            let o = evaluate(t, &costs, metric, m, &r.leaf_of_rank).objective;
            if strategy == Strategy::Auto {
                let tol = 1e-9 * packed.max(rr);
                assert!(
                    o <= packed + tol && o <= rr + tol,
                    "{what} {metric:?} auto: {o} vs packed {packed}, rr {rr}"
                );
            }
        }
    }
}

#[test]
fn non_dividing_trees() {
    // 3 nodes of 3 packages x 5 cores: 45 slots; a 7 x 6 grid (42 ranks).
    let t = target_of(
        Cluster::uniform(machine("pack:3 core:5 pu:1"), 3),
        42,
        false,
    );
    let m = gen::stencil2d(7, 6, 1e5);
    check_case("7x6 on 3x(3x5)", &t, &m);
    // A three-level network over 5 nodes (arity 2 does not divide 5).
    let mut c = Cluster::uniform(machine("pack:2 core:3 pu:1"), 5);
    c.network_levels = vec![2];
    let t = target_of(c, 30, false);
    check_case(
        "stencil3d on 5 nodes, 2 per switch",
        &t,
        &gen::stencil3d(3, 5, 2, 1e5),
    );
}

#[test]
fn oversubscription_and_restricted_slots() {
    // 2 ranks per PU: 32 ranks on 16 PUs.
    let t = target_of(Cluster::uniform(machine("pack:2 core:4 pu:1"), 2), 32, true);
    assert_eq!(t.len(), 32);
    check_case("oversubscribed", &t, &gen::rings(4, 8, 1e6));
    // Only PUs 0-2 and 5 of each node (asymmetric once restricted).
    let mut c = Cluster::uniform(machine("pack:2 core:4 pu:1"), 3);
    for n in &mut c.nodes {
        n.usable = Some(PuSet::parse_list("0-2,5").unwrap());
    }
    let t = target_of(c, 12, false);
    let m = gen::stencil2d(4, 3, 1e5);
    check_case("slots 0-2,5", &t, &m);
    let r = map(&t, &m, &opts(Strategy::Multilevel, Metric::HopBytes, 1)).unwrap();
    for &l in &r.leaf_of_rank {
        let Slot { pu, .. } = t.slot_of_leaf(l);
        assert!([0, 1, 2, 5].contains(&pu), "rank on PU {pu}");
    }
}

#[test]
fn disconnected_graph_and_isolated_ranks() {
    // Two 8-rank rings, interleaved, plus 8 ranks that never communicate,
    // on 2 nodes of 12 PUs: each ring fits in one node and must stay there.
    let mut e = gen::rings(2, 8, 1e6).edges;
    e.push(edge(20, 21, 0.0, 0.0)); // dropped (no traffic): 20, 21 isolated
    let m = CommMatrix::from_edges(24, e);
    assert_eq!(m.n, 24);
    let t = target_of(
        Cluster::uniform(machine("pack:2 core:6 pu:1"), 2),
        24,
        false,
    );
    check_case("rings + isolated", &t, &m);
    for metric in [Metric::HopBytes, Metric::Cost] {
        let r = map(&t, &m, &opts(Strategy::Multilevel, metric, 3)).unwrap();
        for ring in 0..2 {
            let nodes: Vec<u32> = (0..8)
                .map(|i| t.slot_of_leaf(r.leaf_of_rank[ring + 2 * i]).node)
                .collect();
            assert!(
                nodes.iter().all(|&n| n == nodes[0]),
                "{metric:?}: ring {ring} split: {nodes:?}"
            );
        }
    }
}

#[test]
fn same_seed_same_mapping() {
    let mut c = Cluster::uniform(machine("pack:2 l3:2 core:4 pu:1"), 4);
    c.network_levels = vec![2];
    let t = target_of(c, 64, false);
    let m = gen::random_geometric(60, 0.2, 1e5, 5);
    for strategy in [Strategy::Multilevel, Strategy::Auto] {
        let a = map(&t, &m, &opts(strategy, Metric::HopBytes, 11)).unwrap();
        let b = map(&t, &m, &opts(strategy, Metric::HopBytes, 11)).unwrap();
        assert_eq!(a.leaf_of_rank, b.leaf_of_rank, "{strategy:?}");
        assert_eq!(a.chosen, b.chosen);
    }
}

#[test]
fn multilevel_beats_packed_on_a_strided_pattern() {
    // Strided all-to-all blocks: packed spreads every block over all nodes.
    let t = target_of(
        Cluster::uniform(machine("pack:2 core:4 pu:1"), 4),
        32,
        false,
    );
    let m = gen::blocks(4, 8, 1e5);
    let costs = Costs::defaults();
    for metric in [Metric::HopBytes, Metric::Cost, Metric::MaxCongestion] {
        let r = map(&t, &m, &opts(Strategy::Multilevel, metric, 1)).unwrap();
        let o = evaluate(&t, &costs, metric, &m, &r.leaf_of_rank).objective;
        let p = evaluate(
            &t,
            &costs,
            metric,
            &m,
            &baseline_order(&t, Baseline::Packed, 0)[..32],
        )
        .objective;
        assert!(o < 0.7 * p, "{metric:?}: {o} vs packed {p}");
    }
}
