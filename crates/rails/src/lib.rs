//! # topocomm-rails
//!
//! Locality-aware multirail after seed 002 (Moreaud, Goglin, Namyst, "NUIOA
//! multirail"): the network devices and GPUs of a machine as *rails*, the
//! distance of each rail from a process's location, a throughput weight per
//! rail (measured table or the seed's default model), the split plan of one
//! message across the rails, and the device environment of one local rank.
//!
//! Everything here is a pure function of a [`topocomm_topo::Machine`] and
//! plain arguments, except [`bound_pus`] (this process's binding, read by
//! [`Setup::location`] when no PU list is given); reading the environment
//! is the caller's job. [`Setup`] gathers what `topocomm rails` computes
//! and shows: tables, plans, the JSON documents, `rails exec`'s variables.
//!
//! ```no_run
//! use topocomm_rails::*;
//! let m = topocomm_topo::load_default(Some("../shared/topologies/intel-2xE5-2650-ib-gpu.xml")).unwrap();
//! let rails = discover(&m, &DiscoverOptions::default());
//! let loc = Location::new(&m, &topocomm_topo::PuSet::parse_list("8").unwrap()).unwrap();
//! let w = weigh(&m, &loc, &rails.nics, None);
//! let plan = split(&w, 4 << 20, &SplitParams::default()).unwrap();
//! println!("{:?}", plan.chunks);
//! ```

mod assign;
mod discover;
mod env;
mod error;
mod locality;
mod setup;
mod split;
mod stacks;
mod table;
mod weights;

pub use assign::{choose, nearest, Choice};
pub use discover::{
    discover, DiscoverOptions, GpuVendor, Ignored, NicTransport, Rail, RailKind, Rails,
};
pub use env::{device_env, local_rank, EnvVar, LOCAL_RANK_VARS};
pub use error::RailsError;
pub use locality::{distance, numa_latency, Distance, Location};
pub use setup::{
    bound_pus, chunk_rows, exports, list_or_dash, numa_locations, rail_rows, rail_tables,
    resolve_rank, to_json, weight_rows, EnvDoc, FromNuma, NoRailsEnvDoc, NumaSplit, PlanDoc,
    RailTableView, RailsDoc, Setup, SetupOptions,
};
pub use split::{split, Chunk, SplitMode, SplitParams, SplitPlan};
pub use stacks::{
    auto_stack, env_text, is_usnic, mca_file, stack_env, Stack, StackEnv, StackInput,
    INTEL_MPI_VARS, UCX_REF_GBPS,
};
pub use table::{ClassRates, RailTable, TABLE_SCHEMA};
pub use weights::{
    default_factor, weigh, RailWeight, WeightSource, GPU_REMOTE_FACTOR, NIC_REMOTE_FACTOR,
};

#[cfg(test)]
mod tests;
