//! Where a process is and how far each rail is from it.
//!
//! Seed 002 (§4.2) found that the throughput of a rail depends on whether
//! the process is *near* the card, and that "increasing the NUMA distance
//! further does not further decrease the InfiniBand throughput". So the
//! classes are few: local (the rail's NUMA node), package (another NUMA
//! node of the rail's package) and remote (another package). hwloc's NUMA
//! latency matrix, when the model has one, is reported beside the class.

use crate::discover::Rail;
use crate::error::RailsError;
use serde::Serialize;
use topocomm_topo::{Machine, PuSet};

/// Distance class of a rail from a location, nearest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distance {
    /// Every PU of the location is in the rail's cpuset (its NUMA node, or
    /// the whole machine when the rail hangs off the root).
    Local,
    /// Same package as the rail, other NUMA node.
    Package,
    /// Another package (or a rail with no known package).
    Remote,
}

impl Distance {
    pub const ALL: [Distance; 3] = [Distance::Local, Distance::Package, Distance::Remote];

    pub fn name(self) -> &'static str {
        match self {
            Distance::Local => "local",
            Distance::Package => "package",
            Distance::Remote => "remote",
        }
    }
}

impl std::fmt::Display for Distance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A process location: the PUs it may run on, with their NUMA nodes and
/// packages.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Location {
    pub pus: PuSet,
    pub numa_nodes: Vec<u32>,
    pub packages: Vec<u32>,
}

impl Location {
    /// Checks that the PUs exist on `m` (OS indexes) and collects their
    /// NUMA nodes and packages.
    pub fn new(m: &Machine, pus: &PuSet) -> Result<Self, RailsError> {
        if pus.is_empty() {
            return Err(RailsError::BadLocation(
                "empty PU set (expected OS indexes such as 8 or 8-15)".into(),
            ));
        }
        let mut numa = Vec::new();
        let mut packages = Vec::new();
        for &p in pus.indexes() {
            let pu = &m.pus[m.require_pu(p)?];
            numa.extend(pu.numa_node);
            packages.extend(pu.package);
        }
        numa.sort_unstable();
        numa.dedup();
        packages.sort_unstable();
        packages.dedup();
        Ok(Location {
            pus: pus.clone(),
            numa_nodes: numa,
            packages,
        })
    }
}

/// Distance class of `rail` from `loc`.
pub fn distance(loc: &Location, rail: &Rail) -> Distance {
    if loc.pus.indexes().iter().all(|&p| rail.cpuset.contains(p)) {
        Distance::Local
    } else if rail.package.is_some() && loc.packages == [rail.package.unwrap()] {
        Distance::Package
    } else {
        Distance::Remote
    }
}

/// hwloc's NUMA latency (ACPI SLIT style, 10 = local) between the
/// location's NUMA node and the rail's, when the model has such a matrix
/// and both sides have a single NUMA node.
pub fn numa_latency(m: &Machine, loc: &Location, rail: &Rail) -> Option<u64> {
    let (&[a], &[b]) = (loc.numa_nodes.as_slice(), rail.numa_nodes.as_slice()) else {
        return None;
    };
    let d = m
        .distances
        .iter()
        .find(|d| d.means == "latency" && d.objects.iter().all(|o| o.starts_with("NUMANode:")))?;
    let pos = |n: u32| d.objects.iter().position(|o| *o == format!("NUMANode:{n}"));
    let (i, j) = (pos(a)?, pos(b)?);
    d.values.get(i * d.objects.len() + j).copied()
}
