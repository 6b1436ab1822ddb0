//! Writing straight into a peer's memory (`process_vm_writev`): for a
//! collective whose members already know where the result goes in the
//! other's buffer, e.g. the two-member allreduce of the MPI accelerator,
//! which puts each reduced piece into the other member's result while the
//! piece is still in this core's cache instead of swapping the reduced
//! halves by messages afterwards (docs/collectives.md, "Two-member
//! allreduce: the reduced pieces put into the other result").
//!
//! Ordering: the kernel has written the bytes into the peer's pages when
//! the system call returns, before this thread's next store; a message sent
//! after the put publishes with the channel's Release store, so a peer that
//! takes it (Acquire) sees the bytes (the same as for the single-copy
//! reads, docs/transport.md "Memory orderings").

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
        self.single_copy(dst, len, ["put", "to", "writing into"], |pid, chunk| {
            // SAFETY: the caller vouches for `local`; the kernel checks `remote`.
            unsafe { crate::cma::write(pid, local, remote, len, chunk) }
        })
    }

    /// Reads `len` bytes at address `remote` in rank `src`'s memory into
    /// `local`, complete when this returns: the mirror of [`Comm::put`],
    /// for a collective whose members lent each other their buffers'
    /// addresses. `Ok(true)`: read; `Ok(false)`: single copy is off in
    /// this job or failed (said once on stderr; every later get or put
    /// then returns `Ok(false)` at once): the caller moves the bytes by a
    /// message instead.
    ///
    /// # Safety
    /// `local` must be valid for `len` writable bytes; `remote..remote+len`
    /// must be memory rank `src` does not change until the caller tells it
    /// (by a message) that the read is done.
    pub unsafe fn get(
        &mut self,
        src: usize,
        local: *mut u8,
        len: usize,
        remote: u64,
    ) -> Result<bool> {
        self.single_copy(src, len, ["get", "from", "reading from"], |pid, chunk| {
            // SAFETY: the caller vouches for `local`; the kernel checks `remote`.
            unsafe { crate::cma::read(pid, local, remote, len, chunk) }
        })
    }

    /// A get or put of `len` bytes with `peer` (`words`: the noun, its
    /// preposition, and how a failure is told: `["put", "to", "writing
    /// into"]`), `copy` making it with the
    /// peer's pid and the channel's chunk: a bad rank is refused by name;
    /// with single copy off or failed, `Ok(false)` at once; a vanished peer
    /// breaks the communicator; any other failure is said once and turns
    /// every later get and put into `Ok(false)` (the caller moves bytes by
    /// message). Counts against `TOPOCOMM_FAIL_PUTS`.
    fn single_copy(
        &mut self,
        peer: usize,
        len: usize,
        words: [&str; 3],
        copy: impl FnOnce(i32, usize) -> std::io::Result<()>,
    ) -> Result<bool> {
        let [noun, prep, verb] = words;
        if peer >= self.size || peer == self.rank {
            return Err(Error::Invalid(format!(
                "{noun} {prep} rank {peer}: expected another rank in 0..{}",
                self.size
            )));
        }
        if !self.can_put() || self.put_failed {
            return Ok(false);
        }
        if len == 0 {
            return Ok(true);
        }
        let injected = match self.puts_left.as_mut() {
            Some(0) => true,
            Some(n) => {
                *n -= 1;
                false
            }
            None => false,
        };
        let done = if injected {
            Err(std::io::Error::from_raw_os_error(libc::EPERM))
        } else {
            copy(self.pids[peer], self.outs[peer].plan.cma_chunk as usize)
        };
        match done {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                Err(self.vanished(peer, &format!("process vanished during a {noun}")))
            }
            Err(e) => {
                crate::say!(
                    "topocomm: rank {}: {verb} rank {peer} failed ({e}); messages instead from now on",
                    self.rank
                );
                self.put_failed = true;
                Ok(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Rank 0 lends a buffer's address; rank 1 puts 3 MiB + 5 bytes into
    /// it (four calls of the 1 MiB chunk), then sends a message: when rank 0
    /// has the message, every byte is there. A put to an unmapped address
    /// is not written, nor is any later one; a put to itself or past the
    /// job is refused, naming the rank.
    #[test]
    fn a_put_is_in_the_peer_buffer_when_the_message_after_it_arrives() {
        let rules = "[default]\ncma = true\ncma_chunk = 1048576\n";
        crate::threads_job::job(2, Some(rules), |c| {
            let len = 3 * (1 << 20) + 5;
            let pat = |i: usize| (i % 253) as u8 ^ 0x5a;
            let mut word = [0u8; 8];
            if c.rank() == 0 {
                let mut buf = vec![0u8; len];
                c.send(&(buf.as_mut_ptr() as u64).to_le_bytes(), 1, 1)
                    .unwrap();
                c.recv(&mut word, 1, 2).unwrap();
                // The kernel wrote the bytes behind the compiler's back.
                let buf = std::hint::black_box(buf);
                let bad = buf.iter().enumerate().find(|&(i, &b)| b != pat(i));
                assert_eq!(bad, None, "first wrong byte");
            } else {
                let src: Vec<u8> = (0..len).map(pat).collect();
                c.recv(&mut word, 0, 1).unwrap();
                let at = u64::from_le_bytes(word);
                assert!(c.can_put(), "single copy works between threads");
                // SAFETY: src holds len bytes; rank 0 lent len bytes at `at`
                // and reads them only after the message below.
                assert!(unsafe { c.put(0, src.as_ptr(), len, at) }.unwrap());
                // An address the peer has not mapped: refused by the
                // kernel, so not written, and every later put is refused
                // at once (the caller sends instead).
                // SAFETY: src holds 8 bytes; the kernel checks address 8.
                assert!(!unsafe { c.put(0, src.as_ptr(), 8, 8) }.unwrap());
                // SAFETY: as the first put (and refused before writing).
                assert!(!unsafe { c.put(0, src.as_ptr(), len, at) }.unwrap());
                assert!(c.can_put(), "still the job's answer");
                for dst in [1, 2] {
                    // SAFETY: refused before any write.
                    let e = unsafe { c.put(dst, src.as_ptr(), 1, at) }.unwrap_err();
                    assert!(e.to_string().contains(&format!("rank {dst}")), "{e}");
                }
                c.send(&[1u8; 8], 0, 2).unwrap();
            }
        });
    }

    /// Rank 0 lends a buffer's address; rank 1 reads 3 MiB + 5 bytes of it
    /// (four calls of the 1 MiB chunk) and tells it so. Under a fault limit
    /// of 1 (`TOPOCOMM_FAIL_PUTS`), the next get fails as refused, and so
    /// does every later get and put; a get from itself or past the job is
    /// refused, naming the rank.
    #[test]
    fn a_get_reads_the_peer_buffer_until_one_is_refused() {
        let rules = "[default]\ncma = true\ncma_chunk = 1048576\n";
        crate::threads_job::job(2, Some(rules), |c| {
            let len = 3 * (1 << 20) + 5;
            let pat = |i: usize| (i % 251) as u8 ^ 0xa5;
            let mut word = [0u8; 8];
            if c.rank() == 0 {
                let buf: Vec<u8> = (0..len).map(pat).collect();
                c.send(&(buf.as_ptr() as u64).to_le_bytes(), 1, 1).unwrap();
                // Kept unchanged until rank 1 is done reading.
                c.recv(&mut word, 1, 2).unwrap();
                drop(std::hint::black_box(buf));
            } else {
                c.recv(&mut word, 0, 1).unwrap();
                let at = u64::from_le_bytes(word);
                c.puts_left = Some(1);
                let mut got = vec![0u8; len];
                // SAFETY: got holds len bytes; rank 0 keeps len bytes at
                // `at` unchanged until the message below.
                assert!(unsafe { c.get(0, got.as_mut_ptr(), len, at) }.unwrap());
                let bad = got.iter().enumerate().find(|&(i, &b)| b != pat(i));
                assert_eq!(bad, None, "first wrong byte");
                // SAFETY: as above; refused before any copy.
                assert!(!unsafe { c.get(0, got.as_mut_ptr(), len, at) }.unwrap());
                // SAFETY: refused at once (every later get and put).
                assert!(!unsafe { c.put(0, got.as_ptr(), 8, at) }.unwrap());
                for src in [1, 2] {
                    // SAFETY: refused before any copy.
                    let e = unsafe { c.get(src, got.as_mut_ptr(), 1, at) }.unwrap_err();
                    assert!(e.to_string().contains(&format!("rank {src}")), "{e}");
                }
                c.send(&[1u8; 8], 0, 2).unwrap();
            }
        });
    }
}
