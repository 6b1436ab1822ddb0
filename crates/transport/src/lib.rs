//! # topocomm-transport
//!
//! The multi-tuned shared-memory transport (docs/transport.md): one
//! single-producer/single-consumer channel per directed pair of ranks in an
//! anonymous shared segment, a per-pair [`Plan`] resolved from [`Rules`] by
//! locality class, MPI-like matching ([`Comm`]), and the launcher behind
//! `topocomm run` ([`launch`]).
//!
//! ```no_run
//! let mut c = topocomm_transport::Comm::init().unwrap();
//! if c.rank() == 0 {
//!     c.send(b"hello", 1, 7).unwrap();
//! } else if c.rank() == 1 {
//!     let mut buf = [0u8; 16];
//!     let st = c.recv(&mut buf, topocomm_transport::ANY_SOURCE, 7).unwrap();
//!     assert_eq!(&buf[..st.count], b"hello");
//! }
//! ```

pub mod autotune;
pub mod bench;
pub mod bootstrap;
mod choose;
pub mod cma;
pub mod coll;
mod comm;
mod copy;
mod error;
mod help;
pub mod lanes;
pub mod launch;
pub mod near;
pub mod plan;
mod progress;
mod put;
mod recv;
mod request;
pub mod rules;
mod segment;
pub mod selftest;
mod send;
mod spare;
mod spread;
pub mod stage;
mod startup;
#[cfg(test)]
mod threads_job;
mod wait;
mod waiting;
pub mod worker;

/// `eprintln!` as one write, so lines of concurrent ranks never interleave.
macro_rules! say {
    ($($t:tt)*) => {{
        let line = format!("{}\n", format_args!($($t)*));
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }};
}
pub(crate) use say;

pub use comm::{Comm, ANY_SOURCE, ANY_TAG};
pub use error::{Error, Result};
pub use plan::Plan;
pub use recv::{Posted, Take};
pub use request::{Request, Status};
pub use rules::{CopyKind, Owner, Params, Rules};
pub use segment::{LANES, LANE_DATA, PAIR_DATA};
pub use startup::{
    copy_checked, demote_enabled, duplex_enabled, help_enabled, parse_timeout, rules_from_env,
    spin_override, spread_enabled, RULES_ENV, TIMEOUT_RANGE,
};
