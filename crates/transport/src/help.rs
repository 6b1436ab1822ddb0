//! Helped single copy: the sender of a single-copy message copies part of
//! it too. A receiver reading a message by single copy splits it into 2-4
//! pieces, publishes them on the channel's help line and asks the sender
//! (`K_HELP`); both then claim pieces until none is left, the receiver
//! reading its pieces (`process_vm_readv`), the sender writing its own into
//! the receiver's buffer (`process_vm_writev`). A sender that waits for the
//! message to be read (a blocking send, a wait on the request) had nothing
//! to do: two cores copy at once, and a 64 KiB-4 MiB message is read in
//! 0.5-0.6 of the time (docs/transport.md, "Helped single copy"). A sender
//! that does not come (computing, or reading the receiver's message at the
//! same moment) leaves its pieces to the receiver, which then made one or
//! three more system calls than one read would have.
//!
//! Orderings: the receiver writes the help line's words with its sequence
//! number before it sends `K_HELP`; the channel's Release publication of
//! the cell and the sender's Acquire take of it order them for the sender.
//! A piece is claimed by a compare-exchange on `claim` that succeeds only
//! while the word still holds the help's sequence number, so a `K_HELP`
//! taken late, after the receiver finished that help (or started the
//! next), claims nothing. The kernel has written a piece into the
//! receiver's pages when `process_vm_writev` returns; the sender's Release
//! increment of `done` after it, and the receiver's Acquire load that sees
//! every piece counted, order those bytes before the receiver completes
//! the receive.

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::segment::{HelpLine, K_HELP};
use crate::wait::Backoff;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Smallest single-copy message the receiver splits with the sender. One
/// more `process_vm_readv` call costs about a microsecond where the
/// sender does not help; 64 KiB took 8-9 us by one read and 4.6 by two
/// cores on the 2-vCPU Intel Xeon VM (a throwaway C program timing the
/// two ways, 300 rounds).
pub(crate) const HELP_MIN: usize = 64 << 10;

/// Bytes per piece at least: 2 pieces up to twice this, then more, at most
/// [`MAX_PIECES`].
const PIECE_MIN: usize = 64 << 10;
/// Pieces of one help at most: 4 balanced two cores where one started a
/// little late (1 MiB in 44 us with 2-8 pieces, 93 us by one read, the
/// same program); each piece is one system call where the sender does not
/// come.
const MAX_PIECES: usize = 4;

/// How many pieces a message of `len` bytes is split into.
pub(crate) fn pieces_for(len: usize) -> usize {
    (len / PIECE_MIN).clamp(2, MAX_PIECES)
}

/// Where piece `i` of `pieces` of a `len`-byte message starts and how long
/// it is: equal pieces of whole cache lines, the last one shorter.
pub(crate) fn piece(len: usize, pieces: usize, i: usize) -> (usize, usize) {
    let step = len.div_ceil(pieces).div_ceil(64) * 64;
    let off = (i * step).min(len);
    (off, step.min(len - off))
}

/// Claims the next piece of help `seq` (`pieces` in all) on `line`:
/// `Some(piece)`, or `None` when every piece is claimed or the line holds
/// another help.
fn claim(line: &HelpLine, seq: u64, pieces: usize) -> Option<usize> {
    // Relaxed first look: the compare-exchange decides.
    let mut w = line.claim.load(Ordering::Relaxed);
    loop {
        let next = (w & 0xffff_ffff) as usize;
        if w >> 32 != seq || next >= pieces {
            return None;
        }
        // AcqRel: a claim is an exchange of ownership between the two
        // sides; nothing else rides on it (the bytes go by `done`).
        match line
            .claim
            .compare_exchange_weak(w, w + 1, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => return Some(next),
            Err(now) => w = now,
        }
    }
}

impl Comm {
    /// Whether the receiver asks the sender of a `len`-byte single-copy
    /// message from `src` to help: not in an exchange (this rank sending
    /// large messages to `src` too, now or lately), where the sender's core
    /// is busy reading this rank's messages: there the pieces only added
    /// system calls and waits (bibw of 64 KiB-4 MiB 0.81-0.98 of Open
    /// MPI's with help, 0.99-1.10 without, the 2-vCPU Intel Xeon VM).
    pub(crate) fn help_wanted(&self, src: usize, len: usize) -> bool {
        self.help_on
            && len >= HELP_MIN
            && len as u64 >= self.ins[src].plan.help_min
            && !self.sending_large_to(src)
            && !self.ins[src].overlapped_lately()
    }

    /// Reads `len` bytes of `src`'s message `msg_id` at `addr` into `buf`
    /// with the sender's help. `Ok(Err(e))`: a read of this rank failed
    /// (other than by the peer's death; the caller says it and falls back
    /// to two-copy, which rewrites the whole buffer); every piece the
    /// sender claimed is written by then.
    pub(crate) fn read_helped(
        &mut self,
        src: usize,
        buf: *mut u8,
        addr: u64,
        len: usize,
        msg_id: u64,
    ) -> Result<std::io::Result<()>> {
        let pieces = pieces_for(len);
        let ch = &mut self.ins[src];
        ch.help_seq = ch.help_seq % 0xffff_ffff + 1;
        let seq = ch.help_seq;
        let chunk = ch.plan.cma_chunk as usize;
        // SAFETY: the channel's help line inside the mapping, for the
        // segment's lifetime; its words are only accessed atomically.
        let line = unsafe { &*ch.help };
        // Relaxed: the K_HELP cell publishes these (module docs); the
        // previous help's pieces were all counted before it completed, so
        // no claim of it is in flight.
        line.done.store(seq << 32, Ordering::Relaxed);
        line.claim.store(seq << 32, Ordering::Relaxed);
        self.queue_ctrl_words(src, K_HELP, [msg_id, buf as u64, seq, pieces as u64]);
        #[cfg(test)]
        if self.help_wait_sender {
            // Tests: claim nothing before the sender has (at most 10 s),
            // so that a loaded machine cannot starve the help they check.
            let t = Instant::now();
            while line.claim.load(Ordering::Relaxed) == seq << 32 && t.elapsed().as_secs() < 10 {
                std::thread::yield_now();
            }
        }
        let mut failed: Option<std::io::Error> = None;
        let mut mine = 0u64;
        while let Some(i) = claim(line, seq, pieces) {
            if failed.is_none() {
                // SAFETY: the receive buffer holds len bytes (the caller's).
                failed = unsafe { self.read_piece(src, buf, addr, (len, pieces, i), chunk)? };
            }
            mine += 1;
            // Relaxed: this rank's own count needs no publication.
            line.done.fetch_add(1, Ordering::Relaxed);
        }
        self.help_wait(src, line, seq, pieces)?;
        // Acquire in help_wait: the sender's `lost` store came before its
        // count.
        let lost = line.lost.load(Ordering::Relaxed);
        if failed.is_none() && lost >> 32 == seq {
            let i = (lost & 0xffff_ffff) as usize - 1;
            // SAFETY: as above.
            failed = unsafe { self.read_piece(src, buf, addr, (len, pieces, i), chunk)? };
        }
        if mine < pieces as u64 {
            self.helped_reads += 1;
        }
        Ok(failed.map_or(Ok(()), Err))
    }

    /// Reads piece `i` of `pieces` of `src`'s `len`-byte message at `addr`
    /// into the same place of `buf`: `Ok(Some(e))` when the read failed
    /// (other than by the peer's death, an error of the communicator).
    ///
    /// # Safety
    /// `buf` must hold `len` writable bytes.
    unsafe fn read_piece(
        &mut self,
        src: usize,
        buf: *mut u8,
        addr: u64,
        (len, pieces, i): (usize, usize, usize),
        chunk: usize,
    ) -> Result<Option<std::io::Error>> {
        let (off, n) = piece(len, pieces, i);
        // SAFETY: off + n <= len, inside `buf` (the caller's promise).
        let r =
            unsafe { crate::cma::read(self.pids[src], buf.add(off), addr + off as u64, n, chunk) };
        match r {
            Ok(()) => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                Err(self.vanished(src, "process vanished during single copy"))
            }
            Err(e) => Ok(Some(e)),
        }
    }

    /// Waits until every piece of help `seq` is copied: the sender is
    /// copying the ones this rank could not claim. Bounded like every wait:
    /// the peer's death or the job's timeout end it. The wait never sleeps
    /// ([`Backoff::yielding`]): the sender is copying right now, and a
    /// piece takes tens of microseconds, less than one sleep would add.
    fn help_wait(&mut self, src: usize, line: &HelpLine, seq: u64, pieces: usize) -> Result<()> {
        let all = seq << 32 | pieces as u64;
        let start = Instant::now();
        let mut b = Backoff::yielding();
        // Acquire: the sender's pieces (and `lost`) before its count.
        while line.done.load(Ordering::Acquire) != all {
            if b.slow_check_due() {
                self.health(Some(src))?;
                if start.elapsed() > self.timeout {
                    return Err(Error::Timeout(self.timeout));
                }
            }
            b.snooze();
        }
        Ok(())
    }

    /// Writes one piece into `src`'s memory (tests: fails unwritten where
    /// `help_fail_writes` says so).
    ///
    /// # Safety
    /// As [`crate::cma::write`].
    unsafe fn write_piece(
        &self,
        src: usize,
        local: *const u8,
        remote: u64,
        n: usize,
        chunk: usize,
    ) -> std::io::Result<()> {
        #[cfg(test)]
        if self.help_fail_writes {
            return Err(std::io::Error::from_raw_os_error(libc::EFAULT));
        }
        // SAFETY: the caller's promise.
        unsafe { crate::cma::write(self.pids[src], local, remote, n, chunk) }
    }

    /// The sender's side of `K_HELP` from `src`: copies pieces of help
    /// `seq` of its message `msg_id` into the receiver's buffer at `dst`
    /// until none is left to claim.
    pub(crate) fn give_help(
        &mut self,
        src: usize,
        msg_id: u64,
        dst: u64,
        seq: u64,
        pieces: usize,
    ) -> Result<()> {
        let o = &self.outs[src];
        // The send is still here: the receiver answers FIN only once every
        // piece is counted. (Not found: nothing to do; the receiver copies
        // every piece it can claim.)
        let Some(r) = o.rdv.iter().find(|r| r.msg_id == msg_id) else {
            return Ok(());
        };
        let (ptr, len) = (r.ptr, r.len);
        if self.help_failed || pieces == 0 || pieces > MAX_PIECES {
            return Ok(());
        }
        let chunk = o.plan.cma_chunk as usize;
        // SAFETY: the receiver's help line of this channel, inside the
        // mapping; only accessed atomically.
        let line = unsafe { &*o.help };
        while let Some(i) = claim(line, seq, pieces) {
            let (off, n) = piece(len, pieces, i);
            self.before_long_copy(n);
            // SAFETY: off + n <= len bytes of the send buffer, valid until
            // the send completes (after the receiver's FIN); the receiver
            // keeps `dst..dst + len` for this message until every piece is
            // counted.
            let r = unsafe { self.write_piece(src, ptr.add(off), dst + off as u64, n, chunk) };
            match r {
                Ok(()) => self.help_given += 1,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    return Err(self.vanished(src, "process vanished during single copy"));
                }
                Err(e) => {
                    crate::say!(
                        "topocomm: rank {}: writing a piece of a message into rank {src} failed ({e}); the receivers read alone from now on",
                        self.rank
                    );
                    self.help_failed = true;
                    // Relaxed: published by the Release count below.
                    line.lost
                        .store(seq << 32 | (i as u64 + 1), Ordering::Relaxed);
                }
            }
            // Release: the piece's bytes (and `lost`) before the count.
            line.done.fetch_add(1, Ordering::Release);
            if self.help_failed {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::comm::Comm;
    use std::sync::atomic::AtomicBool;

    /// Single copy from 32 KiB, always (no choice per message).
    const RULES: &str = "[default]\neager_max = 16384\nfragment = 65536\ncma = true\ncma_threshold = 32768\nadaptive = false\nhelp_min = 65536\n";

    fn job(f: fn(&mut Comm)) {
        crate::threads_job::job(2, Some(RULES), f)
    }

    fn pattern(i: usize, len: usize) -> Vec<u8> {
        (0..len)
            .map(|k| (k * 131 + i * 7 + (k >> 12)) as u8)
            .collect()
    }

    /// Messages of 64 KiB-4 MiB and odd lengths arrive whole and in
    /// order, and a sender waiting on its blocking send writes pieces of
    /// them (the receiver lets it claim first, `help_wait_sender`, else a
    /// loaded machine may leave the sender's thread unscheduled for a whole
    /// read), while the receiver copies the rest.
    #[test]
    fn a_sender_waiting_on_its_send_writes_pieces_of_it() {
        job(|c| {
            // Whatever the machine's CPU count: these tests are about the
            // help itself.
            c.help_on = true;
            let lens = [HELP_MIN, HELP_MIN + 13, 300_001, (1 << 20) + 5, 3 << 20];
            let big = 4 << 20;
            let len_of = |i: usize| lens.get(i).copied().unwrap_or(big);
            let mut more = [1u8];
            let mut buf = vec![0u8; big + 64];
            c.help_wait_sender = c.rank() == 1;
            for i in 0..lens.len() + 20 {
                let n = len_of(i);
                if c.rank() == 0 {
                    c.send(&pattern(i, n), 1, 3).unwrap();
                    c.recv(&mut more, 1, 4).unwrap();
                } else {
                    let st = c.recv(&mut buf, 0, 3).unwrap();
                    assert_eq!(st.count, n, "message {i}");
                    assert!(
                        buf[..n] == pattern(i, n)[..],
                        "message {i} of {n} bytes differs"
                    );
                    more[0] = u8::from(i < lens.len() || c.helped_reads == 0);
                    c.send(&more, 0, 4).unwrap();
                }
                if more[0] == 0 {
                    if c.rank() == 0 {
                        assert!(c.help_given > 0, "the receiver saw a piece written");
                    }
                    return;
                }
            }
            panic!("no read was helped in 20 messages of 4 MiB");
        });
    }

    static READ_DONE: AtomicBool = AtomicBool::new(false);

    /// A sender that does not come (busy elsewhere until the receive is
    /// over) leaves every piece to the receiver, which completes without
    /// it; the sender's late look at the request claims nothing.
    #[test]
    fn a_sender_that_does_not_come_leaves_every_piece_to_the_receiver() {
        job(|c| {
            // Whatever the machine's CPU count: these tests are about the
            // help itself.
            c.help_on = true;
            let n = (1 << 20) + 64;
            if c.rank() == 0 {
                let msg = pattern(1, n);
                // SAFETY: msg outlives the request, waited for below.
                let r = unsafe { c.isend_raw(msg.as_ptr(), n, 1, 4).unwrap() };
                let t = Instant::now();
                while !READ_DONE.load(Ordering::Acquire) {
                    assert!(
                        t.elapsed().as_secs() < 20,
                        "the receiver waited for the sender"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                c.wait(r).unwrap();
                assert_eq!(c.help_given, 0);
            } else {
                let mut buf = vec![0u8; n];
                c.recv(&mut buf, 0, 4).unwrap();
                READ_DONE.store(true, Ordering::Release);
                assert!(buf == pattern(1, n), "the message differs");
                assert_eq!(c.helped_reads, 0);
            }
        });
    }

    /// A piece the sender claimed and could not write is read by the
    /// receiver; the sender helps no more after it.
    #[test]
    fn a_piece_the_sender_could_not_write_is_read_by_the_receiver() {
        job(|c| {
            // Whatever the machine's CPU count: these tests are about the
            // help itself.
            c.help_on = true;
            let n = 4 << 20;
            let mut more = [1u8];
            c.help_wait_sender = c.rank() == 1;
            for i in 0..20 {
                if c.rank() == 0 {
                    c.help_fail_writes = true;
                    c.send(&pattern(i, n), 1, 5).unwrap();
                    more[0] = u8::from(!c.help_failed);
                    c.send(&more, 1, 6).unwrap();
                } else {
                    let mut buf = vec![0u8; n];
                    c.recv(&mut buf, 0, 5).unwrap();
                    assert!(buf == pattern(i, n), "message {i} differs");
                    c.recv(&mut more, 0, 6).unwrap();
                }
                if more[0] == 0 {
                    return;
                }
            }
            panic!("the sender never claimed a piece in 20 messages of 4 MiB");
        });
    }

    #[test]
    fn pieces_cover_the_message_once_in_whole_lines() {
        for len in [
            HELP_MIN,
            HELP_MIN + 1,
            100_000,
            262_144,
            1 << 20,
            (16 << 20) + 7,
        ] {
            let p = pieces_for(len);
            assert!((2..=MAX_PIECES).contains(&p), "{len}: {p} pieces");
            let mut at = 0;
            for i in 0..p {
                let (off, n) = piece(len, p, i);
                assert_eq!(off, at, "{len}: piece {i} starts where the last ended");
                assert!(
                    i + 1 == p || off % 64 == 0 && n % 64 == 0,
                    "{len}: piece {i}"
                );
                at += n;
            }
            assert_eq!(at, len, "{len}: the pieces cover the message");
        }
    }

    #[test]
    fn a_claim_of_another_help_or_past_the_last_piece_gets_nothing() {
        let line = HelpLine {
            claim: (7u64 << 32).into(),
            done: 0.into(),
            lost: 0.into(),
        };
        assert_eq!(claim(&line, 6, 4), None, "an earlier help");
        assert_eq!(claim(&line, 7, 2), Some(0));
        assert_eq!(claim(&line, 7, 2), Some(1));
        assert_eq!(claim(&line, 7, 2), None, "every piece claimed");
        assert_eq!(line.claim.load(Ordering::Relaxed), 7 << 32 | 2);
    }
}
