//! Plans: the parameters of every directed pair of a job, resolved once at
//! start-up from the rules and the locality class of the two ranks' PUs.

use crate::rules::{Params, Rules};
use serde::Serialize;
use topocomm_topo::{ClassIndex, Machine, ObjectKind};

/// The plan of one directed pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// Locality class name, or `default` when a rank is not bound.
    pub class: String,
    pub params: Params,
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
            let class = match (a, b) {
                (Some(a), Some(b)) => Some(index.classify(m, *a, *b).0.to_string()),
                _ => None,
            };
            let mut params = rules.params_for(class.as_deref()).clone();
            if crowded {
                // A receiver is often descheduled when its message comes:
                // up to a whole slot the sender copies at once and goes on,
                // instead of a rendezvous that waits for the receiver to run
                // (the CTS, or its single copy) before the sender can return.
                params.eager_max = params.eager_max.max(params.fragment);
            }
            let class = match class {
                Some(c) if rules.classes.contains_key(&c) => c,
                Some(c) => format!("{c} (default)"),
                None => "default".into(),
            };
            plans.push(Plan { class, params });
        }
    }
    Ok(plans)
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
        // Nothing else moves.
        let mut q = crowded[1].params.clone();
        q.eager_max = p.eager_max;
        assert_eq!(&q, p);
    }
}
