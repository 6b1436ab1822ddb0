//! Grouping on known cases, baselines, determinism, oversubscription.

use topocomm_map::{
    evaluate, gen, map, Cluster, CommMatrix, Costs, MapOptions, Metric, Rng, Slot, Strategy, Target,
};
use topocomm_topo::Machine;

fn machine(desc: &str) -> Machine {
    topocomm_topo::load(&format!("synthetic:{desc}").parse().unwrap()).unwrap()
}

fn target(desc: &str, nodes: usize, ranks: usize, over: bool) -> Target {
    let c = Cluster::uniform(machine(desc), nodes);
    let slots = c.default_slots(ranks, over).unwrap();
    Target::new(c, &slots).unwrap()
}

fn slots_of(t: &Target, leaves: &[u32]) -> Vec<Slot> {
    leaves.iter().map(|&l| t.slot_of_leaf(l)).collect()
}

#[test]
fn four_rings_of_four_each_on_one_node() {
    let m = gen::rings(4, 4, 1e6);
    let t = target("pack:1 core:4 pu:1", 4, 16, false);
    for strategy in [Strategy::Greedy, Strategy::TreeMatch, Strategy::Auto] {
        let r = map(
            &t,
            &m,
            &MapOptions {
                strategy,
                ..Default::default()
            },
        )
        .unwrap();
        let s = slots_of(&t, &r.leaf_of_rank);
        for j in 0..4 {
            let node = s[j].node;
            for i in 0..4 {
                assert_eq!(
                    s[j + 4 * i].node,
                    node,
                    "{strategy:?}: ring {j} split across nodes: {s:?}"
                );
            }
        }
        // Rings are interleaved in rank order: packed splits every ring.
        let packed: Vec<u32> = (0..16).collect();
        let sc = evaluate(&t, &Costs::defaults(), Metric::Cost, &m, &r.leaf_of_rank);
        let sp = evaluate(&t, &Costs::defaults(), Metric::Cost, &m, &packed);
        assert!(
            sc.cost_us < sp.cost_us * 0.5,
            "{} vs packed {}",
            sc.cost_us,
            sp.cost_us
        );
        assert!(sc.by_class.iter().all(|c| c.class != "network"));
    }
}

#[test]
fn stencil_on_two_packages_keeps_halves_together() {
    // 8 x 4 grid on 2 packages x 16 cores, ranks shuffled so that rank
    // order carries no locality: the mapping must still cut the grid into
    // two connected halves (at most 8 of the 52 edges cross packages; the
    // optimum is 4, a row split gives 8).
    let g = gen::stencil2d(8, 4, 1e5);
    let mut perm: Vec<u32> = (0..32).collect();
    Rng::new(3).shuffle(&mut perm);
    let edges = g
        .edges
        .iter()
        .map(|e| topocomm_map::Edge {
            src: perm[e.src as usize],
            dst: perm[e.dst as usize],
            ..*e
        })
        .collect();
    let m = CommMatrix::from_edges(32, edges);
    let t = target("pack:2 l3:1 core:16 pu:1", 1, 32, false);
    let r = map(&t, &m, &MapOptions::default()).unwrap();
    let s = evaluate(&t, &Costs::defaults(), Metric::Cost, &m, &r.leaf_of_rank);
    let cross: f64 = s
        .by_class
        .iter()
        .filter(|c| c.class == "machine")
        .map(|c| c.bytes)
        .sum();
    assert!(cross <= 16.0 * 1e5 + 1.0, "cross-package bytes {cross}");
    let packed: Vec<u32> = (0..32).collect();
    let p = evaluate(&t, &Costs::defaults(), Metric::Cost, &m, &packed);
    assert!(
        s.cost_us < 0.8 * p.cost_us,
        "{} vs packed {}",
        s.cost_us,
        p.cost_us
    );
}

#[test]
fn asymmetric_tree_and_nondividing_arities() {
    // 3 PUs usable out of 4 per package: asymmetric once restricted, and
    // blocks of 3 do not divide the 8 slots.
    let mut c = Cluster::uniform(machine("pack:2 core:4 pu:1"), 1);
    c.nodes[0].usable = Some(topocomm_topo::PuSet::from_indexes([0, 1, 2, 4, 5, 6, 7]));
    let slots = c.default_slots(6, false).unwrap();
    let t = Target::new(c, &slots).unwrap();
    let m = gen::blocks(2, 3, 1e6); // groups {0,2,4} and {1,3,5}
    let r = map(&t, &m, &MapOptions::default()).unwrap();
    let s = slots_of(&t, &r.leaf_of_rank);
    let pkg = |p: u32| p / 4;
    assert_eq!(pkg(s[0].pu), pkg(s[2].pu));
    assert_eq!(pkg(s[0].pu), pkg(s[4].pu));
    assert_eq!(pkg(s[1].pu), pkg(s[3].pu));
    assert!(s.iter().all(|x| x.pu != 3), "PU 3 is not usable: {s:?}");
}

#[test]
fn never_worse_than_packed_and_round_robin() {
    let mut rng = Rng::new(42);
    let shapes = [
        "pack:2 l3:2 core:4 pu:2",
        "pack:2 core:3 pu:1",
        "pack:1 l2:3 core:2 pu:1",
    ];
    for case in 0..12 {
        let desc = shapes[case % shapes.len()];
        let nodes = 1 + rng.below(3);
        let t0 = target(desc, nodes, 1, false);
        let n = 2 + rng.below(t0.len() - 1);
        let m = gen::random_sparse(n, 1 + rng.below(4), 1e4, case as u64);
        let t = target(desc, nodes, n, false);
        for metric in [Metric::Bytes, Metric::Msgs, Metric::Cost] {
            let opt = MapOptions {
                metric,
                seed: case as u64,
                ..Default::default()
            };
            let r = map(&t, &m, &opt).unwrap();
            let best = r
                .tried
                .iter()
                .find(|x| x.name == r.chosen)
                .unwrap()
                .objective;
            for b in ["packed", "round-robin"] {
                let o = r.tried.iter().find(|x| x.name == b).unwrap().objective;
                assert!(
                    best <= o * (1.0 + 1e-12),
                    "case {case} {metric:?}: {best} > {b} {o}"
                );
            }
            let s = evaluate(&t, &opt.costs, metric, &m, &r.leaf_of_rank);
            assert!(
                (s.objective - best).abs() <= 1e-9 * best.max(1.0),
                "{} vs {best}",
                s.objective
            );
        }
    }
}

#[test]
fn deterministic_with_a_seed() {
    let m = gen::random_sparse(60, 3, 1e4, 5);
    let t = target("pack:2 l3:2 core:4 pu:2", 2, 60, false);
    let a = map(
        &t,
        &m,
        &MapOptions {
            seed: 9,
            ..Default::default()
        },
    )
    .unwrap();
    let b = map(
        &t,
        &m,
        &MapOptions {
            seed: 9,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(a.leaf_of_rank, b.leaf_of_rank);
    let mut seen = a.leaf_of_rank.clone();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 60, "two ranks on one slot");
}

/// 8 ranks on 4 PUs (2 per PU) where rank j talks only with rank j + 4,
/// `msgs` messages of `bytes` in total each way.
fn oversubscribed_pairs(msgs: f64, bytes: f64, costs: Costs) -> Vec<Slot> {
    let mut edges = Vec::new();
    for j in 0..4u32 {
        for (a, b) in [(j, j + 4), (j + 4, j)] {
            edges.push(topocomm_map::Edge {
                src: a,
                dst: b,
                bytes,
                msgs,
            });
        }
    }
    let m = CommMatrix::from_edges(8, edges);
    assert!(Cluster::uniform(machine("pack:2 core:2 pu:1"), 1)
        .default_slots(8, false)
        .is_err());
    let t = target("pack:2 core:2 pu:1", 1, 8, true);
    assert_eq!(t.len(), 8);
    let opts = MapOptions {
        costs,
        ..Default::default()
    };
    let s = slots_of(&t, &map(&t, &m, &opts).unwrap().leaf_of_rank);
    let mut per_pu = [0; 4];
    for x in &s {
        per_pu[x.pu as usize] += 1;
    }
    assert_eq!(per_pu, [2, 2, 2, 2]);
    s
}

#[test]
fn oversubscription_keeps_latency_bound_talkers_on_different_pus() {
    // By default two ranks time-sharing a PU pay a context switch per
    // message (2 us against 0.7 us across cores of a package).
    let s = oversubscribed_pairs(1e4, 8e4, Costs::defaults());
    for j in 0..4 {
        assert_ne!(s[j].pu, s[j + 4].pu, "{s:?}");
    }
}

#[test]
fn oversubscription_follows_measured_costs_that_favour_sharing_a_pu() {
    // A costs file saying a shared PU is the cheapest place (as for ranks
    // that block in the kernel) puts each pair on one PU.
    let mut costs = Costs::defaults();
    costs.classes.insert(
        "self".into(),
        topocomm_map::ClassCost {
            latency_us: 0.05,
            bandwidth_gbs: 40.0,
        },
    );
    let s = oversubscribed_pairs(1e4, 1e8, costs);
    for j in 0..4 {
        assert_eq!(s[j].pu, s[j + 4].pu, "{s:?}");
    }
}

#[test]
fn network_levels_make_switch_classes() {
    let mut c = Cluster::uniform(machine("pack:1 core:2 pu:1"), 4);
    c.network_levels = vec![2];
    let slots = c.default_slots(8, false).unwrap();
    let t = Target::new(c, &slots).unwrap();
    assert!(t.class_names().iter().any(|x| x == "switch1"));
    // Ranks 0..3 all-to-all: must stay under one switch (nodes 0-1 or 2-3).
    let m = gen::blocks(1, 4, 1e6);
    let m = CommMatrix::from_edges(8, m.edges);
    let r = map(&t, &m, &MapOptions::default()).unwrap();
    let s = slots_of(&t, &r.leaf_of_rank[..4]);
    assert!(s.iter().all(|x| x.node / 2 == s[0].node / 2), "{s:?}");
}
