//! # topocomm-mpitune
//!
//! `topocomm tune --mpi openmpi|mpich`: finds the installed MPI's
//! shared-memory settings (Open MPI `btl vader` MCA parameters, MPICH CVARs
//! and the UCX variables its `ch4:ucx` device reads, UCX variables when Open
//! MPI runs `pml ucx`) that maximize streaming bandwidth from 64 KiB to
//! 4 MiB without making any size slower than the defaults beyond the noise
//! measured between two runs of the defaults (A/A, same run), and
//! writes them as a file the MPI's own tools read (docs/formats/mpi-exports.md).
//!
//! - [`space`]: the parameters and the candidate values per MPI;
//! - [`objective`]: one candidate against the defaults (gain, regressions
//!   judged against the A/A noise, with each parameter's scope);
//! - [`search`]: bounded coordinate descent over the candidates;
//! - [`weights`]: one weight per locality class (communication matrix and
//!   placement, or equal);
//! - [`export`]: the MCA parameter file / environment file, and their readers;
//! - [`verify`]: proof that the file's values take effect (MPI_T read-back);
//! - [`runner`]: measures one setting with tc_mpibench on each class's pair;
//! - [`host`]: the installed MPI, the build of its programs, the machine load;
//! - [`session`]: one run of the command, from its options to the file, the
//!   verification and the read-back, and the report ([`session::text`]).

pub mod export;
pub mod host;
pub mod objective;
pub mod runner;
pub mod search;
pub mod session;
pub mod space;
pub mod verify;
pub mod weights;

pub use space::{Param, Setting, Space};
