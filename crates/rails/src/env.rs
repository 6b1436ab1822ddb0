//! The environment a local rank runs with: which variable, which value,
//! and one line saying why.

use crate::assign::Choice;
use crate::discover::{GpuVendor, NicTransport, Rails};
use crate::error::RailsError;
use crate::locality::Location;
use serde::Serialize;

/// Local rank variables of the launchers, in the order they are read:
/// Open MPI's mpirun, MPICH's Hydra, Slurm's srun.
pub const LOCAL_RANK_VARS: [&str; 3] = [
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "SLURM_LOCALID",
];

/// The local rank from the first launcher variable that is set, with its
/// name; `None` when none is set.
pub fn local_rank(
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<(u32, &'static str)>, RailsError> {
    for var in LOCAL_RANK_VARS {
        if let Some(v) = get(var) {
            return v.trim().parse().map(|r| Some((r, var))).map_err(|_| {
                RailsError::BadLocalRank {
                    var: var.into(),
                    value: v,
                }
            });
        }
    }
    Ok(None)
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
    /// One line: why this value.
    pub why: String,
}

fn var(name: &str, value: String, why: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value,
        why,
    }
}

/// The variables of `choice` (empty when the machine has no rails).
pub fn device_env(rails: &Rails, loc: &Location, choice: &Choice) -> Vec<EnvVar> {
    let mut out = Vec::new();
    if let Some(g) = choice.gpu.map(|i| &rails.gpus[i]) {
        let idx = g.gpu_index.unwrap_or(0);
        let d = choice.gpu_distance.map_or("", |d| d.name());
        let why = format!(
            "{} ({}) is {d} to PUs {}; local rank {} takes it among {} equally near GPU(s)",
            g.name,
            g.pci_bus_id.as_deref().unwrap_or("no PCI id"),
            loc.pus,
            choice.local_rank,
            choice.gpu_candidates.len()
        );
        match g.vendor {
            Some(GpuVendor::Amd) => out.push(var("ROCR_VISIBLE_DEVICES", idx.to_string(), why)),
            _ => {
                out.push(var(
                    "CUDA_DEVICE_ORDER",
                    "PCI_BUS_ID".into(),
                    "GPU indexes below count GPUs in PCI bus order, as hwloc and NVML do".into(),
                ));
                out.push(var("CUDA_VISIBLE_DEVICES", idx.to_string(), why));
            }
        }
    }
    if let Some(plan) = &choice.nics {
        let nics: Vec<&crate::Rail> = plan.chunks.iter().map(|c| &rails.nics[c.rail]).collect();
        let shares: Vec<String> = plan
            .chunks
            .iter()
            .map(|c| format!("{} {} {:.1}%", c.name, c.distance, c.share * 100.0))
            .collect();
        let mode = if plan.mode == crate::SplitMode::Nearest {
            "contention mode, nearest rails only"
        } else {
            "large messages, split by NUIOA weight"
        };
        out.push(var(
            "UCX_NET_DEVICES",
            nics.iter()
                .map(|r| r.ucx_name())
                .collect::<Vec<_>>()
                .join(","),
            format!("rails from PUs {} ({mode}): {}", loc.pus, shares.join(", ")),
        ));
        out.push(var(
            "UCX_MAX_RNDV_RAILS",
            nics.len().to_string(),
            format!(
                "UCX splits rendezvous messages over these {} rail(s)",
                nics.len()
            ),
        ));
        let verbs: Vec<&str> = nics
            .iter()
            .filter(|r| r.transport == Some(NicTransport::Verbs))
            .map(|r| r.name.as_str())
            .collect();
        if !verbs.is_empty() {
            out.push(var(
                "OMPI_MCA_btl_openib_if_include",
                verbs.join(","),
                "the same HCAs for Open MPI's openib BTL (Open MPI < 5)".into(),
            ));
        }
        let tcp: Vec<&str> = nics
            .iter()
            .filter(|r| r.transport == Some(NicTransport::Tcp))
            .map(|r| r.name.as_str())
            .collect();
        if !tcp.is_empty() {
            out.push(var(
                "OMPI_MCA_btl_tcp_if_include",
                tcp.join(","),
                "the same IP interfaces for Open MPI's tcp BTL".into(),
            ));
        }
    }
    out
}
