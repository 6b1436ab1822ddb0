//! Launcher formats of a mapping (docs/formats/mapping-outputs.md).

use crate::error::MapError;
use crate::target::{Slot, Target};
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `<node-index> <pu-os-index>` per rank (also what `topocomm run --map` reads).
    Perm,
    /// Open MPI rankfile (physical PU indexes).
    Rankfile,
    /// MPICH Hydra machinefile with per-host `binding=user:` lists.
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

/// Open MPI rankfile, one `rank R=HOST slot=P` line per rank where P is the
/// OS (physical) index of the rank's PU: the numbers every other format
/// uses. Open MPI 4.1 reads rankfile slots as logical core indexes unless
/// `rmaps_rank_file_physical` is set, and binds to the whole core unless
/// `--use-hwthread-cpus`; the header says so and gives the command (checked
/// under the real `mpirun` by crates/cli/tests/launchers.rs). The command
/// has `--oversubscribe` because the rankfile already fixes every rank's PU:
/// the slot count Open MPI derives from the allocation must not veto it.
pub fn rankfile(target: &Target, slots: &[Slot]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Open MPI rankfile from topocomm map: {} ranks; slot= is the OS (physical) index of the rank's PU",
        slots.len()
    );
    let _ = writeln!(
        s,
        "# run: mpirun --mca rmaps_rank_file_physical 1 --use-hwthread-cpus --oversubscribe --rankfile FILE -np {} PROGRAM",
        slots.len()
    );
    for (r, sl) in slots.iter().enumerate() {
        let host = &target.cluster.nodes[sl.node as usize].host;
        let _ = writeln!(s, "rank {r}={host} slot={}", sl.pu);
    }
    s
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// MPICH Hydra machinefile (`mpiexec.hydra -f FILE -n N`): one
/// `HOST:COUNT binding=user:P,...` line per run of consecutive ranks on one
/// host, in rank order, so Hydra's fill-each-line-in-turn placement gives
/// every rank its host; the list holds the OS index of each rank's PU in
/// local order (Hydra binds the k-th process of a line to the k-th entry).
/// Runs are cut by host name, not node index: Hydra merges consecutive
/// lines of one host and then rejects a second `binding=`.
pub fn hydra(target: &Target, slots: &[Slot]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# MPICH Hydra machinefile from topocomm map: {} ranks; binding=user: lists the OS index of each rank's PU",
        slots.len()
    );
    let _ = writeln!(s, "# run: mpiexec.hydra -f FILE -n {} PROGRAM", slots.len());
    let host = |sl: &Slot| &target.cluster.nodes[sl.node as usize].host;
    let mut i = 0;
    while i < slots.len() {
        let mut j = i;
        while j < slots.len() && host(&slots[j]) == host(&slots[i]) {
            j += 1;
        }
        let pus: Vec<u32> = slots[i..j].iter().map(|sl| sl.pu).collect();
        let _ = writeln!(
            s,
            "{}:{} binding=user:{}",
            host(&slots[i]),
            j - i,
            join(&pus)
        );
        i = j;
    }
    s
}

/// Slurm: `--cpu-bind=map_cpu:` list (OS CPU indexes, local rank order);
/// several nodes add the `SLURM_HOSTFILE` lines (one host per rank,
/// `--distribution=arbitrary`). Not run under a real Slurm here.
pub fn slurm(target: &Target, slots: &[Slot]) -> String {
    let opt = "--cpu-bind=map_cpu:";
    // Per node, the PU list of its ranks in rank (= local rank) order.
    let mut nodes: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for sl in slots {
        nodes.entry(sl.node).or_default().push(sl.pu);
    }
    let mut s = String::new();
    if nodes.len() > 1 {
        let _ = writeln!(
            s,
            "# SLURM_HOSTFILE (one host per rank; srun --distribution=arbitrary):"
        );
        for sl in slots {
            let _ = writeln!(s, "{}", target.cluster.nodes[sl.node as usize].host);
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
