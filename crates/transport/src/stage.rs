//! Staging areas: one per rank in the segment ([`STAGE_BYTES`]), where a
//! large collective of the MPI accelerator copies a rank's contribution
//! once so that every other member reads it with plain loads
//! (docs/collectives.md, "Large collectives through the staging areas").
//! Between processes whose CPUs are shared the alternatives need both
//! ends scheduled (messages through slot rings) or the kernel's single
//! copy, which is several times slower than a user-space copy on some
//! virtual machines.
//!
//! The transport only hands out the addresses. Who writes and reads a
//! stage when is the caller's protocol: the accelerator brackets every use
//! with barriers of the communicator (their Release and Acquire order the
//! copies), and a rank's collectives never overlap (blocking collectives
//! of a single-threaded caller), so a rank's area serves one collective at
//! a time.

use crate::comm::Comm;
use crate::error::Result;
pub use crate::segment::STAGE_BYTES;

impl Comm {
    /// Rank `r`'s staging area in this process's mapping of the segment
    /// and its length ([`STAGE_BYTES`]).
    pub fn stage(&self, r: usize) -> Result<(*mut u8, usize)> {
        self.check_peer(r, "stage")?;
        Ok((self.seg.stage(r), STAGE_BYTES))
    }
}
