//! Guards that keep measurements honest: a benchmark runs on the live
//! machine, so the topology it labels results with must be that machine.
//! A synthetic or foreign topology would name classes (e.g. `machine`) that
//! the measured PU pairs do not have; we refuse instead of mislabelling.

use crate::{Error, Result};
use topocomm_topo::{Machine, Origin, PuSet};

/// Checks that `m` describes the machine we run on: every PU must exist and
/// be usable here, and a non-live model must have the live fingerprint.
pub fn require_live(m: &Machine) -> Result<()> {
    let allowed = crate::pin::allowed_pus()?;
    let missing: Vec<u32> = m
        .pus
        .iter()
        .map(|p| p.os_index)
        .filter(|p| !allowed.contains(p))
        .collect();
    if !missing.is_empty() {
        return Err(Error::NotLive {
            missing: PuSet::from_indexes(missing),
            usable: PuSet::from_indexes(allowed),
        });
    }
    if matches!(m.origin, Origin::Live { .. }) {
        return Ok(());
    }
    let live = topocomm_topo::load(&topocomm_topo::TopologySpec::Live)
        .map_err(|cause| Error::LiveUnreadable { cause })?;
    if live.fingerprint != m.fingerprint {
        return Err(Error::ForeignTopology {
            given: m.fingerprint.clone(),
            live: live.fingerprint,
        });
    }
    Ok(())
}

/// Checks that every PU is in the model (and so, after [`require_live`], usable).
pub fn require_pus(m: &Machine, pus: &[u32]) -> Result<()> {
    for &p in pus {
        m.require_pu(p)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_passes_and_a_bigger_synthetic_fails() {
        let live = topocomm_topo::load(&topocomm_topo::TopologySpec::Live).unwrap();
        require_live(&live).unwrap();
        let n = live.pus.len();
        let big = topocomm_topo::load(
            &format!("synthetic:pack:2 core:{} pu:1", n.max(2))
                .parse()
                .unwrap(),
        )
        .unwrap();
        let e = require_live(&big).unwrap_err().to_string();
        assert!(
            e.contains("does not have") || e.contains("fingerprint"),
            "{e}"
        );
    }
}
