//! Writing straight into a peer's memory (`process_vm_writev`): for a
//! collective whose members already know where the result goes in the
//! other's buffer, e.g. the two-member allreduce of the MPI accelerator,
//! which puts each reduced piece into the other member's result while the
//! piece is still in this core's cache instead of swapping the reduced
//! halves by messages afterwards (docs/collectives.md, "puts the reduced
//! pieces").

use crate::comm::Comm;
use crate::error::{Error, Result};

impl Comm {
    /// Whether [`Comm::put`] can work in this job: single copy works
    /// between every pair of ranks (the start-up probe). The same answer on
    /// every rank for the whole job, so the members of a collective can
    /// agree on an algorithm from it without a message; a put that fails
    /// later does not change it (it returns `Ok(false)`, and the caller
    /// moves those bytes by message).
    pub fn can_put(&self) -> bool {
        self.cma_ok
    }

    /// Writes `len` bytes at `local` to address `remote` in rank `dst`'s
    /// memory, complete when this returns. `Ok(true)`: written; `Ok(false)`:
    /// single copy is off in this job or failed (said once on stderr; every
    /// later put then returns `Ok(false)` at once): the caller moves the
    /// bytes by a message instead. The caller must order the write with
    /// the peer's use of that memory (a message after it, which the peer
    /// receives before reading).
    ///
    /// # Safety
    /// `local` must be valid for `len` readable bytes; `remote..remote+len`
    /// must be memory rank `dst` lets be written now (the kernel refuses
    /// unmapped addresses, not ones the peer is using).
    pub unsafe fn put(
        &mut self,
        dst: usize,
        local: *const u8,
        len: usize,
        remote: u64,
    ) -> Result<bool> {
        if dst >= self.size || dst == self.rank {
            return Err(Error::Invalid(format!(
                "put to rank {dst}: expected another rank in 0..{}",
                self.size
            )));
        }
        if !self.can_put() || self.put_failed {
            return Ok(false);
        }
        if len == 0 {
            return Ok(true);
        }
        let chunk = self.outs[dst].plan.cma_chunk as usize;
        self.before_long_copy(len);
        // SAFETY: the caller vouches for `local`; the kernel checks `remote`.
        match unsafe { crate::cma::write(self.pids[dst], local, remote, len, chunk) } {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                let e = Error::DeadPeer {
                    rank: dst as i32,
                    detail: "process vanished during a put".into(),
                };
                self.broken = Some(e.clone());
                Err(e)
            }
            Err(e) => {
                crate::say!(
                    "topocomm: rank {}: writing into rank {dst} failed ({e}); messages instead from now on",
                    self.rank
                );
                self.put_failed = true;
                Ok(false)
            }
        }
    }
}
