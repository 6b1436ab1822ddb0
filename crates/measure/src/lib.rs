//! # topocomm-measure
//!
//! What every topocomm benchmark shares: robust statistics (median with a
//! non-parametric 95% confidence interval, min, p99), a timer-resolution
//! check, thread pinning to a PU, and the JSON sample-line format that the
//! topocomm p2p worker and the MPI benchmark (`mpi/bench`) both print.
//! The characterization kernels (issue 4) live in `cache` (coherence
//! states), `matrix` (per-pair latency) and `placement` (CG + triad); the
//! commands over them, with their result files, in `cache_report`,
//! `matrix_report` and `placement_report` (shared parts in `charact`).
//! `bench_p2p` plans and runs `topocomm bench p2p` (jobs classed by
//! the host's placement in `p2p_placement`); `bench_coll` and
//! `coll_summary` run and summarize `topocomm bench coll`.

pub mod backends;
pub mod bench_coll;
pub mod bench_p2p;
pub mod cache;
pub mod cache_report;
pub mod charact;
pub mod coll_summary;
pub mod error;
pub mod limits;
pub mod matrix;
pub mod matrix_report;
pub mod meta;
pub mod ompi_session;
pub mod p2p;
pub mod p2p_placement;
pub mod pin;
pub mod placement;
pub mod placement_report;
pub mod procrun;
pub mod record;
pub mod results;
pub mod stats;
pub mod target;
pub mod timer;
pub mod verdict;

pub use error::{Error, PinError, Result};
pub use record::SampleLine;
pub use stats::Summary;
