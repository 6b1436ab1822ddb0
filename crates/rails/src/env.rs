//! The environment a local rank runs with: which variable, which value,
//! and one line saying why.

use crate::assign::Choice;
use crate::discover::{GpuVendor, Rails};
use crate::error::RailsError;
use crate::locality::Location;
use crate::split::SplitParams;
use crate::stacks::{auto_stack, stack_env, Stack, StackEnv, StackInput};
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

/// The GPU variables of `choice` and the network-rail variables of `stack`
/// (see [`crate::stacks`]; `None`: [`crate::auto_stack`]), with the notes
/// on what the stack cannot express. Empty when the machine has no rails.
pub fn device_env(
    rails: &Rails,
    loc: &Location,
    choice: &Choice,
    stack: Option<Stack>,
    params: &SplitParams,
    measured: bool,
) -> StackEnv {
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
    let input = StackInput {
        rails,
        choice,
        single_below: params.single_rail_below,
        measured,
    };
    let mut nic = stack_env(stack.unwrap_or_else(|| auto_stack(rails)), &input);
    if let (Some(plan), Some(first)) = (&choice.nics, nic.vars.first_mut()) {
        let mode = if plan.mode == crate::SplitMode::Nearest {
            "contention mode, nearest rails only"
        } else {
            "large messages, split by NUIOA weight"
        };
        first.why = format!("from PUs {} ({mode}); {}", loc.pus, first.why);
    }
    out.append(&mut nic.vars);
    StackEnv {
        vars: out,
        notes: nic.notes,
    }
}
