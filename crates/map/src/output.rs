//! Launcher formats of a mapping (docs/formats/mapping-outputs.md).

use crate::error::MapError;
use crate::target::{Slot, Target};
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `<node-index> <pu-os-index>` per rank (also what `topocomm run --map` reads).
    Perm,
    /// Open MPI 5 rankfile.
    Rankfile,
    /// MPICH Hydra `-bind-to user:` list (+ machinefile for several nodes).
    Hydra,
    /// Slurm `--cpu-bind=map_cpu:` list (+ `SLURM_HOSTFILE` for several nodes).
    Slurm,
    /// JSON with the cost breakdown.
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "perm" | "run" => Format::Perm,
            "rankfile" => Format::Rankfile,
            "hydra" => Format::Hydra,
            "slurm" => Format::Slurm,
            "json" => Format::Json,
            _ => {
                return Err(format!(
                    "unknown format '{s}' (expected perm, rankfile, hydra, slurm, run or json)"
                ))
            }
        })
    }
}

/// Slots of the ranks.
pub fn slots(target: &Target, leaf_of_rank: &[u32]) -> Vec<Slot> {
    leaf_of_rank
        .iter()
        .map(|&l| target.slot_of_leaf(l))
        .collect()
}

pub fn perm(slots: &[Slot]) -> String {
    let mut s = String::with_capacity(slots.len() * 8);
    for sl in slots {
        let _ = writeln!(s, "{} {}", sl.node, sl.pu);
    }
    s
}

/// Reads a perm file back: one `<node-index> <pu-os-index>` line per rank.
pub fn parse_perm(path: &str, text: &str) -> Result<Vec<Slot>, MapError> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let content = l.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let f: Vec<&str> = content.split_whitespace().collect();
        if f.len() != 2 {
            return Err(MapError::syntax(
                path,
                i + 1,
                1,
                format!("{} fields, expected '<node-index> <pu-os-index>'", f.len()),
            ));
        }
        let num = |k: usize| -> Result<u32, MapError> {
            let col = l.find(f[k]).map_or(1, |p| p + 1);
            f[k].parse().map_err(|_| {
                MapError::syntax(
                    path,
                    i + 1,
                    col,
                    format!("'{}' is not a non-negative integer", f[k]),
                )
            })
        };
        out.push(Slot {
            node: num(0)?,
            pu: num(1)?,
        });
    }
    Ok(out)
}

/// `slot=<package>:<core>` (logical package, core index within it), the
/// form every Open MPI since 1.x accepts; binds to the whole core.
pub fn rankfile(target: &Target, slots: &[Slot]) -> String {
    let mut core_base: Vec<BTreeMap<u32, u32>> = Vec::new();
    for m in &target.cluster.topologies {
        let mut base: BTreeMap<u32, u32> = BTreeMap::new();
        for p in &m.pus {
            if let (Some(pk), Some(c)) = (p.package, p.core) {
                let e = base.entry(pk).or_insert(c);
                *e = (*e).min(c);
            }
        }
        core_base.push(base);
    }
    let mut s = String::new();
    for (r, sl) in slots.iter().enumerate() {
        let node = &target.cluster.nodes[sl.node as usize];
        let m = &target.cluster.topologies[node.topo];
        let pu = m.pu_position(sl.pu).map(|i| &m.pus[i]);
        let spec = match pu.map(|p| (p.package, p.core)) {
            Some((Some(pk), Some(c))) => format!("{pk}:{}", c - core_base[node.topo][&pk]),
            Some((None, Some(c))) => format!("0:{c}"),
            _ => format!("0:{}", pu.map_or(sl.pu, |p| p.logical_index)),
        };
        let _ = writeln!(s, "rank {r}={} slot={spec}", node.host);
    }
    s
}

/// Per node, the PU list of its ranks in rank (= local rank) order; and the
/// host of each rank.
fn per_node(target: &Target, slots: &[Slot]) -> BTreeMap<u32, Vec<u32>> {
    let _ = target;
    let mut m: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for sl in slots {
        m.entry(sl.node).or_default().push(sl.pu);
    }
    m
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// Hydra: one node -> the `-bind-to user:` option; several -> a machinefile
/// (`host:count` runs, rank order) then the binding list per host.
pub fn hydra(target: &Target, slots: &[Slot]) -> String {
    launcher(target, slots, "-bind-to user:", true)
}

/// Slurm: `--cpu-bind=map_cpu:` list; several nodes add the
/// `SLURM_HOSTFILE` lines (one host per rank, `--distribution=arbitrary`).
pub fn slurm(target: &Target, slots: &[Slot]) -> String {
    launcher(target, slots, "--cpu-bind=map_cpu:", false)
}

fn launcher(target: &Target, slots: &[Slot], opt: &str, hydra: bool) -> String {
    let nodes = per_node(target, slots);
    let mut s = String::new();
    if nodes.len() > 1 {
        if hydra {
            let _ = writeln!(
                s,
                "# machinefile for mpiexec.hydra -f FILE (lines host:count, in rank order):"
            );
            let mut i = 0;
            while i < slots.len() {
                let mut j = i;
                while j < slots.len() && slots[j].node == slots[i].node {
                    j += 1;
                }
                let _ = writeln!(
                    s,
                    "{}:{}",
                    target.cluster.nodes[slots[i].node as usize].host,
                    j - i
                );
                i = j;
            }
        } else {
            let _ = writeln!(
                s,
                "# SLURM_HOSTFILE (one host per rank; srun --distribution=arbitrary):"
            );
            for sl in slots {
                let _ = writeln!(s, "{}", target.cluster.nodes[sl.node as usize].host);
            }
        }
        let lists: Vec<&Vec<u32>> = nodes.values().collect();
        if lists.iter().all(|l| *l == lists[0]) {
            let _ = writeln!(s, "# binding (the same local list on every host):");
            let _ = writeln!(s, "{opt}{}", join(lists[0]));
        } else {
            let _ = writeln!(
                s,
                "# binding lists differ per host: launch one command per host with its list"
            );
            for (n, l) in &nodes {
                let _ = writeln!(s, "# {}", target.cluster.nodes[*n as usize].host);
                let _ = writeln!(s, "{opt}{}", join(l));
            }
        }
    } else if let Some(l) = nodes.values().next() {
        let _ = writeln!(s, "{opt}{}", join(l));
    }
    s
}
