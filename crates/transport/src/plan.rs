//! Plans: the parameters of every directed pair of a job, resolved once at
//! start-up from the rules and the locality class of the two ranks' PUs.

use crate::rules::{Params, Rules};
use crate::segment::PREFAULT_MAX;
use serde::Serialize;
use topocomm_topo::{ClassIndex, Machine, ObjectKind};

/// The plan of one directed pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// Locality class name, or `default` when a rank is not bound.
    pub class: String,
    /// Depth of the lowest common ancestor of the two ranks' PUs in the
    /// machine model (larger: nearer), `None` when a rank is not bound:
    /// what the collectives' near order (near.rs) groups members by.
    pub lca_depth: Option<u32>,
    pub params: Params,
    /// The eager limit for a message to a peer the sender is receiving
    /// from at the time (an exchange), where single copy is allowed: where
    /// a crowded node raised `params.eager_max` to a whole slot, the larger
    /// of the rules' `eager_max` and `cma_threshold` (the start of the
    /// protocol choice); else `params.eager_max`. The raise spares a sender
    /// the wait for a descheduled receiver; in an exchange both sides are
    /// in the communication, and eager copies every message twice where
    /// single copy moves it once, on CPUs that are the bottleneck: 4 ranks
    /// on the 2 vCPUs of an Intel Xeon VM, 64 KiB allgather and alltoall
    /// blocks took 92-117 us eager against 63-98 by rendezvous and 65-121
    /// under Open MPI, while the 16 KiB blocks of a 64 KiB allreduce were
    /// faster eager (docs/transport.md, "Crowded nodes: eager up to a
    /// slot"). Below `lone_rendezvous_min` when the rules set it (where a
    /// ping-pong's answer pays by single copy, an exchange's message does:
    /// docs/transport.md, "Answers by single copy").
    pub exchange_eager_max: u64,
}

impl Plan {
    /// A plan of `class` with `params` as they are (no crowded raise).
    pub fn alone(class: &str, params: Params) -> Plan {
        Plan {
            class: class.into(),
            lca_depth: None,
            exchange_eager_max: params.eager_max,
            params,
        }
    }
}

/// Resolves the `n * n` plans (`[s * n + r]` for s -> r) of ranks bound to
/// `pus` (OS indexes; `None` = not bound). Fails on a PU the machine lacks.
pub fn resolve(m: &Machine, rules: &Rules, pus: &[Option<u32>]) -> Result<Vec<Plan>, String> {
    let index = ClassIndex::new(m);
    let mut pos = Vec::with_capacity(pus.len());
    for p in pus {
        pos.push(match p {
            Some(os) => Some(m.require_pu(*os).map_err(|e| e.to_string())?),
            None => None,
        });
    }
    let crowded = crowded(m, pus);
    let mut plans = Vec::with_capacity(pus.len() * pus.len());
    for a in &pos {
        for b in &pos {
            let (class, lca_depth) = match (a, b) {
                (Some(a), Some(b)) => {
                    let (class, depth) = index.classify(m, *a, *b);
                    (Some(class.to_string()), Some(depth))
                }
                _ => (None, None),
            };
            let mut params = rules.params_for(class.as_deref()).clone();
            let rules_eager_max = params.eager_max;
            if crowded {
                // A receiver is often descheduled when its message comes:
                // up to a whole slot the sender copies at once and goes on,
                // instead of a rendezvous that waits for the receiver to run
                // (the CTS, or its single copy) before the sender can return.
                params.eager_max = params.eager_max.max(params.fragment);
                // For the same reason an answer is not held for a receiver
                // that may not run.
                params.lone_rendezvous_min = None;
            }
            if !params.cma {
                // The answer's rendezvous pays only by single copy.
                params.lone_rendezvous_min = None;
            }
            // Raised, an exchange still sends eagerly up to where single
            // copy may start to pay (the plan's start of the choice).
            let exchange_eager_max = if params.cma {
                let limit = params
                    .eager_max
                    .min(rules_eager_max.max(params.cma_threshold));
                // Where a ping-pong's answer pays by single copy, an
                // exchange's message does too: each side then reads the
                // other's once instead of copying both ways.
                match params.lone_rendezvous_min {
                    Some(from) => limit.min(from - 1),
                    None => limit,
                }
            } else {
                params.eager_max
            };
            let class = match class {
                Some(c) if rules.classes.contains_key(&c) => c,
                Some(c) => format!("{c} (default)"),
                None => "default".into(),
            };
            plans.push(Plan {
                class,
                lca_depth,
                params,
                exchange_eager_max,
            });
        }
    }
    fit_rings(&mut plans, pus.len(), PREFAULT_MAX);
    Ok(plans)
}

/// Fills the plans' `lca_depth` of the pairs whose ranks are bound to
/// sets of PUs rather than one (`sets[r]`: OS indexes of rank r's
/// binding; empty or missing = unknown): the depth of the lowest common
/// ancestor of both sets together, so that ranks bound to a package, a NUMA
/// node or an L3 each (Open MPI's `--bind-to socket`, its default above two
/// ranks) still group by it in the collectives' near order (near.rs). A
/// rank bound to one PU counts as the set of that PU; a set naming a PU the
/// machine lacks leaves the rank unknown. Pairs already known are kept.
pub fn fill_set_depths(plans: &mut [Plan], m: &Machine, pus: &[Option<u32>], sets: &[Vec<u32>]) {
    let n = pus.len();
    let index = ClassIndex::new(m);
    // Per rank: a PU of its set (position) and the depth of its set's own
    // lowest common ancestor. The ancestors of that PU nest, so the
    // common ancestor of a set is the shallowest of those it shares with
    // each member, and that of two sets the shallowest of theirs and of
    // their two PUs' (the two sets' ancestors are on the PUs' chains).
    let bound: Vec<Option<(usize, u32)>> = (0..n)
        .map(|r| {
            let set: Vec<u32> = match pus[r] {
                Some(p) => vec![p],
                None => sets.get(r).cloned().unwrap_or_default(),
            };
            let pos: Option<Vec<usize>> = set.iter().map(|&os| m.pu_position(os)).collect();
            let pos = pos.filter(|p| !p.is_empty())?;
            let depth = pos.iter().map(|&q| index.classify(m, pos[0], q).1).min()?;
            Some((pos[0], depth))
        })
        .collect();
    for a in 0..n {
        for b in 0..n {
            let plan = &mut plans[a * n + b];
            if plan.lca_depth.is_some() {
                continue;
            }
            if let (Some((pa, da)), Some((pb, db))) = (bound[a], bound[b]) {
                plan.lca_depth = Some(da.min(db).min(index.classify(m, pa, pb).1));
            }
        }
    }
}

/// Fewest slots per channel the budget leaves before fragments shrink: the
/// two-copy pipeline needs a few in flight to overlap the two copies.
const MIN_DEPTH: u64 = 4;
/// Smallest fragment the budget leaves (the smallest the model picks).
const MIN_FRAGMENT: u64 = 16 << 10;

/// Bytes of a rank's slot rings, its outgoing and incoming channels
/// together, at its largest over the job.
fn largest_rank_rings(plans: &[Plan], n: usize) -> u64 {
    let ring = |i: usize| plans[i].params.depth * plans[i].params.fragment;
    (0..n)
        .map(|r| {
            (0..n)
                .filter(|&q| q != r)
                .map(|q| ring(r * n + q) + ring(q * n + r))
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

/// Shrinks every channel's slot ring, depth first down to [`MIN_DEPTH`],
/// then the fragment down to [`MIN_FRAGMENT`], until each rank's rings
/// together fit `budget` (or nothing can shrink further).
///
/// Why: the rules size one channel's ring for one stream (larger than the
/// receiver's private cache, rules.rs), which a rank has n - 1 times in
/// each direction. At 16 ranks on a 16-core Intel Xeon VM the 4 MiB rings
/// made 120 MiB per rank, above what a rank maps in at start-up
/// ([`PREFAULT_MAX`]), so slot pages were faulted in during the first
/// collectives: with 10 ms benchmark batches the transport took 1.3-1.9x
/// Open MPI's time at 1 MiB (bcast, reduce, allreduce) and 1.24x for a
/// 64 KiB allgather; with 8 slots per channel (30 MiB per rank, mapped in
/// at start-up) 0.89-1.05x and 0.90x, the same as fifty-millisecond
/// batches with the large rings once warm (docs/transport.md, "Slot rings
/// and the number of ranks"). Up to 8 ranks of that machine, and every job
/// of the 2-vCPU dev VM, keep the rules' rings. Every rank resolves the
/// same plans, so the channels agree.
fn fit_rings(plans: &mut [Plan], n: usize, budget: u64) {
    while largest_rank_rings(plans, n) > budget {
        let mut shrunk = false;
        for plan in plans.iter_mut() {
            let p = &mut plan.params;
            if p.depth > MIN_DEPTH {
                p.depth = (p.depth / 2).max(MIN_DEPTH);
            } else if p.fragment > MIN_FRAGMENT {
                p.fragment = (p.fragment / 2).max(MIN_FRAGMENT);
                p.eager_max = p.eager_max.min(p.fragment);
                p.inline_max = p.inline_max.min(p.eager_max);
                plan.exchange_eager_max = plan.exchange_eager_max.min(p.eager_max);
            } else {
                continue;
            }
            shrunk = true;
        }
        if !shrunk {
            return;
        }
    }
}

/// Whether the job's ranks outnumber the machine's PUs, or two of them are
/// bound to one PU: then ranks take turns on the CPUs.
pub fn crowded(m: &Machine, pus: &[Option<u32>]) -> bool {
    let mut bound: Vec<u32> = pus.iter().flatten().copied().collect();
    bound.sort_unstable();
    let shared = bound.windows(2).any(|w| w[0] == w[1]);
    shared || pus.len() > m.count(ObjectKind::Pu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        topocomm_topo::load(&"synthetic:pack:1 l3:1 core:2 pu:1".parse().unwrap()).unwrap()
    }

    #[test]
    fn crowded_means_more_ranks_than_pus_or_a_shared_pu() {
        let m = machine();
        assert!(!crowded(&m, &[Some(0), Some(1)]));
        assert!(!crowded(&m, &[None, None]));
        assert!(crowded(&m, &[Some(0), Some(0)]));
        assert!(crowded(&m, &[None, None, None]));
        assert!(crowded(&m, &[Some(0), Some(1), None]));
    }

    #[test]
    fn answers_only_with_single_copy_and_never_on_a_crowded_node() {
        let m = machine();
        let mut rules = Rules::builtin(&m);
        for p in rules.classes.values_mut() {
            p.lone_rendezvous_min = Some(8192);
        }
        let spread = resolve(&m, &rules, &[Some(0), Some(1)]).unwrap();
        assert_eq!(spread[1].params.lone_rendezvous_min, Some(8192));
        // An exchange's messages go by single copy from there too.
        assert_eq!(spread[1].exchange_eager_max, 8191);
        let crowded = resolve(&m, &rules, &[Some(0), Some(1), Some(1)]).unwrap();
        assert!(crowded
            .iter()
            .all(|p| p.params.lone_rendezvous_min.is_none()));
        for p in rules.classes.values_mut() {
            p.cma = false;
        }
        let two_copy = resolve(&m, &rules, &[Some(0), Some(1)]).unwrap();
        assert_eq!(two_copy[1].params.lone_rendezvous_min, None);
    }

    #[test]
    fn a_crowded_job_sends_up_to_a_slot_eagerly_and_others_keep_the_rules() {
        let m = machine();
        let rules = Rules::builtin(&m);
        let spread = resolve(&m, &rules, &[Some(0), Some(1)]).unwrap();
        let p = &spread[1].params;
        assert!(
            p.eager_max < p.fragment,
            "the built-in rules changed: {p:?}"
        );
        let crowded = resolve(&m, &rules, &[Some(0), Some(1), Some(1)]).unwrap();
        for (i, plan) in crowded.iter().enumerate() {
            assert_eq!(plan.params.eager_max, plan.params.fragment, "pair {i}");
        }
        // The answers stop (their sender would wait for a receiver that
        // may not run); nothing else moves.
        assert_eq!(crowded[1].params.lone_rendezvous_min, None);
        let mut q = crowded[1].params.clone();
        q.eager_max = p.eager_max;
        q.lone_rendezvous_min = p.lone_rendezvous_min;
        assert_eq!(&q, p);
        // Uncrowded, an exchange goes by rendezvous from where answers do.
        let answers_from = p.lone_rendezvous_min.expect("built-in answers");
        assert_eq!(
            spread[1].exchange_eager_max,
            p.eager_max.min(answers_from - 1)
        );
        let x = crowded[1].exchange_eager_max;
        if p.cma {
            assert_eq!(x, p.eager_max.max(p.cma_threshold).min(p.fragment));
        } else {
            assert_eq!(x, p.fragment);
        }
    }

    fn rings_of(plans: &[Plan]) -> Vec<(u64, u64)> {
        plans
            .iter()
            .map(|p| (p.params.depth, p.params.fragment))
            .collect()
    }

    #[test]
    fn few_ranks_keep_the_rules_rings() {
        let m = topocomm_topo::load(&"synthetic:pack:1 l3:1 core:8 pu:1".parse().unwrap()).unwrap();
        let rules = Rules::builtin(&m);
        let pus: Vec<_> = (0..8).map(Some).collect();
        let plans = resolve(&m, &rules, &pus).unwrap();
        let want = rules.params_for(Some("l3"));
        assert!(largest_rank_rings(&plans, 8) <= PREFAULT_MAX);
        assert_eq!(plans[1].params.depth, want.depth);
        assert_eq!(plans[1].params.fragment, want.fragment);
    }

    #[test]
    fn many_ranks_shrink_the_rings_to_the_budget_depth_first() {
        let m =
            topocomm_topo::load(&"synthetic:pack:1 l3:1 core:256 pu:1".parse().unwrap()).unwrap();
        let rules = Rules::builtin(&m);
        let want = rules.params_for(Some("l3")).clone();
        let ring = want.depth * want.fragment;
        for n in [16usize, 64, 256] {
            let pus: Vec<_> = (0..n as u32).map(Some).collect();
            let plans = resolve(&m, &rules, &pus).unwrap();
            let total = largest_rank_rings(&plans, n);
            let p = &plans[1].params;
            if 2 * (n as u64 - 1) * ring <= PREFAULT_MAX {
                assert_eq!((p.depth, p.fragment), (want.depth, want.fragment), "{n}");
                continue;
            }
            assert!(
                total <= PREFAULT_MAX,
                "{n} ranks: {total} B of rings per rank"
            );
            // Not shrunk further than needed: twice the rings would not fit.
            assert!(
                2 * total > PREFAULT_MAX,
                "{n} ranks: {total} B, shrunk too far"
            );
            assert!(p.depth >= MIN_DEPTH && p.depth < want.depth, "{n}: {p:?}");
            assert!(
                p.fragment == want.fragment || p.depth == MIN_DEPTH,
                "{n}: {p:?}"
            );
            assert!(p.eager_max <= p.fragment && p.inline_max <= p.eager_max);
            assert!(plans
                .iter()
                .all(|q| q.exchange_eager_max <= q.params.eager_max));
            // The same ring on every channel between two ranks.
            assert!(rings_of(&plans)
                .iter()
                .enumerate()
                .all(|(i, r)| i % (n + 1) == 0 || *r == (p.depth, p.fragment)));
        }
    }

    #[test]
    fn rings_stop_at_the_smallest_depth_and_fragment() {
        let m = machine();
        let rules = Rules::builtin(&m);
        let mut plans = resolve(&m, &rules, &[Some(0), Some(1)]).unwrap();
        fit_rings(&mut plans, 2, 1);
        for p in &plans {
            assert_eq!(
                (p.params.depth, p.params.fragment),
                (MIN_DEPTH, MIN_FRAGMENT)
            );
            assert!(p.params.eager_max <= MIN_FRAGMENT);
        }
    }
}
