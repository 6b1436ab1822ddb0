//! # topocomm-measure
//!
//! What every topocomm benchmark shares: robust statistics (median with a
//! non-parametric 95% confidence interval, min, p99), a timer-resolution
//! check, thread pinning to a PU, and the JSON sample-line format that the
//! topocomm p2p worker and the MPI benchmark (`mpi/bench`) both print.

pub mod backends;
pub mod limits;
pub mod p2p;
pub mod pin;
pub mod procrun;
pub mod record;
pub mod results;
pub mod stats;
pub mod timer;

pub use record::SampleLine;
pub use stats::Summary;
