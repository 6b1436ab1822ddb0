//! Plans: the parameters of every directed pair of a job, resolved once at
//! start-up from the rules and the locality class of the two ranks' PUs.

use crate::rules::{Params, Rules};
use serde::Serialize;
use topocomm_topo::{ClassIndex, Machine};

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
    let mut plans = Vec::with_capacity(pus.len() * pus.len());
    for a in &pos {
        for b in &pos {
            let class = match (a, b) {
                (Some(a), Some(b)) => Some(index.classify(m, *a, *b).0.to_string()),
                _ => None,
            };
            let params = rules.params_for(class.as_deref()).clone();
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
