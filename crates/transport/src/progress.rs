//! The progress engine: draining a channel's published cells (every cell
//! kind of the protocol), one pass over the pending sends and the poll set,
//! the full sweep of the slow path, and the health checks (job abort, dead
//! or finalized peers). Orderings referred to by number are listed in the
//! module documentation of `comm.rs`.

use crate::choose::decode_request;
use crate::comm::Comm;
use crate::copy::{copy_nontemporal, copy_plain};
use crate::error::{Error, Result};
use crate::recv::{InStream, Key, Payload, Unexp};
use crate::request::Status;
use crate::segment::{
    inline_cells, INLINE_BYTES, INLINE_MAX_BYTES, K_CTS, K_CTS_TIMED, K_EAGER, K_FIN, K_FRAG,
    K_HELP, K_INLINE, K_RTS, ST_FINALIZED, ST_UP,
};
use crate::send::{Stream, TIMED_FRAGMENT};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Empty drains after which a channel leaves the poll set.
const IDLE_CLEAR: u32 = 4096;

/// Every `IDLE_LOOK_EVERY` progress passes, the next `IDLE_LOOK_SPAN`
/// channels outside the poll set are drained once (`look_idle`). A sender
/// sets its doorbell bit only when its load sees the bit clear, and that
/// load may pass its own cell's store (x86 reorders a store before a later
/// load; no fence on the latency path): when the receiver clears the bit
/// in that window, the cell is published, the bit stays clear and the
/// channel is out of the poll set. Only the slow path of blocking waits
/// swept every channel, so a program polling with MPI_Iprobe, MPI_Test or
/// MPI_Testsome never saw that message: `pfuzz` under MPICH hung with 5 and
/// 7 crowded ranks (2026-12-03), one rank looping in MPI_Iprobe for a
/// message its sender had completed. With n channels a lost bit is found
/// within `IDLE_LOOK_EVERY * ceil(n / IDLE_LOOK_SPAN)` passes; a pass pays
/// `IDLE_LOOK_SPAN / IDLE_LOOK_EVERY` drains of an idle channel (one load
/// of a line that stays cached while nothing is sent) on average.
const IDLE_LOOK_EVERY: u32 = 64;
const IDLE_LOOK_SPAN: usize = 8;

impl Comm {
    /// Processes every published cell of the channel src -> me. Returns the
    /// number of cells consumed.
    pub(crate) fn drain(&mut self, src: usize) -> Result<usize> {
        if !self.deferred.is_empty() {
            self.run_deferred_reads()?;
        }
        self.drain_cells(src, false)
    }

    /// [`Comm::drain`] that stops at the first cell when no receive is
    /// posted any more: what a new receive from `src` does before it may
    /// take the channel's next message itself (`irecv_inner`), instead of
    /// turning every cell behind into an unexpected message.
    pub(crate) fn drain_to_posted(&mut self, src: usize) -> Result<usize> {
        self.drain_cells(src, true)
    }

    #[inline(always)]
    fn drain_cells(&mut self, src: usize, while_posted: bool) -> Result<usize> {
        let mut n = 0;
        loop {
            if while_posted && self.posted.is_empty() {
                break;
            }
            let pos = self.ins[src].tail;
            let Some(c) = self.ins[src].head_cell() else {
                break;
            };
            // SAFETY: a published cell of the ring, or this channel's copy
            // of a duplex message; either stays as it is until the tail
            // moves past it, below.
            let c = unsafe { &*c };
            let (kind, tag, len) = (c.kind, c.tag, c.len as usize);
            let key = Key { tag, ctx: c.ctx };
            // The body is read where it is used: copying all of it out of
            // every cell first cost an inline message a tenth of its drain.
            let body = &c.body;
            let word = |k: usize| u64::from_ne_bytes(body[8 * k..8 * k + 8].try_into().unwrap());
            let mut cells = 1;
            match kind {
                K_INLINE if len > INLINE_BYTES => {
                    if len > INLINE_MAX_BYTES {
                        return Err(Error::Setup(format!(
                            "protocol error: inline message of {len} bytes from rank {src}"
                        )));
                    }
                    cells = inline_cells(len);
                    let mut wide = [0u8; INLINE_MAX_BYTES];
                    // SAFETY: c is the published cell at pos, len <=
                    // INLINE_MAX_BYTES = wide's size, which then holds the
                    // len bytes.
                    unsafe {
                        self.ins[src].copy_inline(c, pos, len, wide.as_mut_ptr());
                        self.deliver_or_keep(src, key, wide.as_ptr(), len);
                    }
                }
                K_INLINE => match self.match_posted(src, key) {
                    Some(idx) => self.deliver(idx, src, tag, body.as_ptr(), len),
                    None => self.unexp.push_back(Unexp {
                        src,
                        tag,
                        ctx: key.ctx,
                        len,
                        payload: Payload::Small(*body),
                    }),
                },
                K_EAGER => {
                    let data = self.cur_slot(src);
                    // SAFETY: the slot holds len <= fragment bytes.
                    unsafe { self.deliver_or_keep(src, key, data, len) };
                    self.release_slot(src);
                }
                K_RTS => {
                    let (msg_id, addr) = (word(0), word(1));
                    let (cma, ask, answer) = decode_request(word(2));
                    match self.match_posted(src, key) {
                        Some(idx) => {
                            self.start_rdv(idx, src, tag, len, msg_id, cma, addr, ask, answer)?
                        }
                        None => self.unexp.push_back(Unexp {
                            src,
                            tag,
                            ctx: key.ctx,
                            len,
                            payload: Payload::Rts {
                                msg_id,
                                cma,
                                addr,
                                ask,
                                answer,
                            },
                        }),
                    }
                }
                K_FRAG => {
                    let (msg_id, off, sender_ns) = (word(0), word(1) as usize, word(2));
                    let data = self.cur_slot(src);
                    let k = self.ins[src]
                        .streams
                        .iter()
                        .position(|s| s.msg_id == msg_id)
                        .ok_or_else(|| {
                            Error::Setup(format!(
                                "protocol error: fragment of unknown message {msg_id} from rank {src}"
                            ))
                        })?;
                    let req = self.ins[src].streams[k].req;
                    if self.ins[src].streams[k].got == 0 {
                        self.first_fragment(src, k);
                    }
                    let (buf, _) = self.recv_buf(req);
                    self.before_long_copy(len);
                    // Two clock reads per fragment, only where the cost of
                    // the copy itself is what the chooser weighs.
                    let timed = {
                        let st = &self.ins[src].streams[k];
                        ((self.crowded || st.exchange || len >= TIMED_FRAGMENT)
                            && st.pick.is_some())
                        .then(Instant::now)
                    };
                    // SAFETY: the sender never sends past the length the
                    // receiver accepted (off + len <= cap); slot holds len bytes.
                    if self.ins[src].streams[k].stream {
                        // SAFETY: as above.
                        unsafe { copy_nontemporal(buf.add(off), data, len) };
                    } else {
                        // SAFETY: as above.
                        unsafe { copy_plain(buf.add(off), data, len) };
                    }
                    self.release_slot(src);
                    let s = &mut self.ins[src].streams[k];
                    if let Some(t) = timed {
                        s.copy_ns += t.elapsed().as_nanos() as u64;
                    }
                    s.copy_in_ns += sender_ns;
                    s.got += len;
                    if s.got == s.len {
                        let s = self.ins[src].streams.swap_remove(k);
                        self.stream_done(src, &s);
                        let st = self.reqs[req as usize].status;
                        self.complete(req, st, None);
                    }
                }
                K_CTS | K_CTS_TIMED | K_FIN => {
                    let msg_id = word(0);
                    let o = &mut self.outs[src];
                    let k = o
                        .rdv
                        .iter()
                        .position(|r| r.msg_id == msg_id)
                        .ok_or_else(|| {
                            Error::Setup(format!(
                            "protocol error: reply for unknown message {msg_id} from rank {src}"
                        ))
                        })?;
                    let r = o.rdv.swap_remove(k);
                    if kind == K_FIN {
                        self.complete(r.req, Status::default(), None);
                    } else {
                        o.streams.push_back(Stream {
                            req: r.req,
                            ptr: r.ptr,
                            len: r.len,
                            off: 0,
                            msg_id,
                            timed: kind == K_CTS_TIMED,
                        });
                        self.mark_pending(src);
                        self.advance_out(src);
                    }
                }
                K_HELP => {
                    let (msg_id, dst, seq, pieces) = (word(0), word(1), word(2), word(3));
                    self.give_help(src, msg_id, dst, seq, pieces as usize)?;
                }
                _ => {
                    return Err(Error::Setup(format!(
                        "protocol error: cell kind {kind} from rank {src}"
                    )))
                }
            }
            self.ins[src].tail = pos + cells;
            // Messages, not replies (the kinds are ordered so, checked
            // at compile time below).
            if kind <= K_RTS {
                self.taken += 1;
                self.taken_from = src;
            }
            n += 1;
            if kind == K_RTS || kind == K_FRAG || kind == K_HELP {
                // A rendezvous cell may have cost a long copy (a single copy
                // read, a fragment): hand the cells back now rather than at
                // the end of the drain, which a window of such cells makes
                // long (64 single copy reads in bibw), so the sender can go
                // on pushing meanwhile. Added with the bidirectional fix
                // (run_deferred_reads), not measured on its own.
                self.publish_tail(src);
            }
        }
        self.activity += n as u64;
        self.publish_tail(src);
        Ok(n)
    }

    /// Delivers the `len` bytes at `data`, a message from `src` with `key`,
    /// to the posted receive that matches it, or keeps a copy of them as
    /// an unexpected message.
    ///
    /// # Safety
    /// `data` must be valid for `len` bytes.
    unsafe fn deliver_or_keep(&mut self, src: usize, key: Key, data: *const u8, len: usize) {
        match self.match_posted(src, key) {
            Some(idx) => self.deliver(idx, src, key.tag, data, len),
            None => {
                // SAFETY: the caller's contract.
                let v = self
                    .spare
                    .copy_of(unsafe { std::slice::from_raw_parts(data, len) });
                self.unexp.push_back(Unexp {
                    src,
                    tag: key.tag,
                    ctx: key.ctx,
                    len,
                    payload: Payload::Data(v),
                });
            }
        }
    }

    /// Hands the cells drained so far on channel src -> me back to the
    /// sender (ordering 2).
    #[inline(always)]
    fn publish_tail(&mut self, src: usize) {
        let i = &mut self.ins[src];
        if i.tail != i.published {
            i.published = i.tail;
            // SAFETY: ctrl points into the mapping; we are its only writer.
            // Release: our reads of the cells happen-before the sender's
            // reuse of them (ordering 2).
            unsafe { (*i.ctrl).tail.store(i.tail, Ordering::Release) };
        }
    }

    /// At a stream's first fragment: if the sender finished single copies
    /// since the CTS, it answered late because it was copying (in an
    /// exchange, most likely this rank's message to it), and the stream is
    /// timed from now. Without this, two members exchanging large messages
    /// could settle on single copy for good: one reads by single copy,
    /// which delays its answer to the other's CTS, so the other measures
    /// two-copy as slow and moves to single copy too, and each later try
    /// of two-copy by one of them meets the other's single copy again
    /// (2-rank 1 MiB allgather over the transport on the dev VM: 2 runs of
    /// 8 stuck at 83 us against 46-47 us for the others). A sender that is
    /// late because it was not running finishes no single copy meanwhile,
    /// so that delay still counts against two-copy, as it should: single
    /// copy does not need the sender to run.
    ///
    /// It also notes whether this rank is sending large messages of its own
    /// to the stream's sender (rendezvous sends waiting for their CTS or
    /// FIN, or two-copy streams it is filling), or the two directions
    /// overlapped within the last one or two blocks of messages it received
    /// from it (`In::overlaps_mark`): then the two ranks exchange data, and
    /// the stream is weighed by its copying ([`Self::stream_done`]).
    fn first_fragment(&mut self, src: usize, k: usize) {
        let exchange = self.sending_large_to(src) || self.ins[src].overlapped_lately();
        let s = &mut self.ins[src].streams[k];
        s.exchange = exchange;
        if s.pick.is_some()
            && self.seg.rank_slot(src).cma_reads.0.load(Ordering::Relaxed) != s.sender_cma_reads
        {
            s.t0 = Instant::now();
        }
    }

    /// Reports a finished two-copy stream's cost to the channel's chooser,
    /// counted from its CTS or from the end of the stream ahead of it on
    /// the channel, whichever is later (streams of one channel run one
    /// after the other: a window of them must not look slower each).
    ///
    /// On a crowded node (more ranks than CPUs) the cost is the copying
    /// instead: twice this rank's copy-out time, the sender's copy into the
    /// slots being the same bytes. There the elapsed time is mostly the
    /// sender waiting for a CPU, which other ranks' work fills, so it
    /// weighed two-copy against a single copy that only needs the receiver
    /// and picked the single copy for up to two thirds of the messages,
    /// although it costs more CPU (4 ranks on the dev VM's 2 vCPUs,
    /// `MPI_Allreduce` by blocks: 1 MiB 241-344 us adaptive, 432-454 us
    /// single copy only, 207-254 us two-copy only).
    ///
    /// In an exchange (this rank sending to the stream's sender too) the
    /// cost is the copying as well, both sides': the sender's copy into the
    /// slots takes the CPU that also reads or copies out this rank's
    /// messages, which the elapsed time of one direction does not show.
    /// Timed by elapsed time, each receiver of a bidirectional stream
    /// picked the protocol cheapest for itself: one rank read by single
    /// copy and fed the other's two-copy stream, doing two copies per pair
    /// of messages while the other did one, and 64 KiB-16 MiB bibw stayed
    /// at the one-way rate (0.52-0.66 of the MPIs' on a 2-vCPU Intel Xeon
    /// VM). The sender reports its copy of each fragment in the fragment's
    /// cell: twice the copy-out, as on a crowded node, undercounts it
    /// there from 4 MiB (the copy-out reads slots in the cache, the copy-in
    /// a user buffer beyond L2). Weighing alone did not make the two agree
    /// (each measured the other protocol in the state its own choice made):
    /// the lower rank now chooses for both (`Comm::pair_choice`).
    fn stream_done(&mut self, src: usize, s: &InStream) {
        let now = Instant::now();
        let crowded = self.crowded;
        let o = &self.outs[src];
        // An exchange if this rank had sends to the sender in flight at the
        // first fragment, or started one during the stream (a window of
        // receives posted before its sends: at the first fragment of a
        // late stream of the window, all its sends may be done).
        let exchange = (s.exchange || o.next_msg != s.sends_at_start) && s.copy_ns > 0;
        self.rdv_weighed_pair += u64::from(s.pick.is_some() && exchange && !crowded);
        let i = &mut self.ins[src];
        if let Some(p) = s.pick {
            let ns = if crowded {
                2 * s.copy_ns
            } else if exchange {
                // The sender times fragments of 32 KiB or more; for smaller
                // ones its copy is taken as long as this rank's.
                s.copy_ns
                    + if s.copy_in_ns > 0 {
                        s.copy_in_ns
                    } else {
                        s.copy_ns
                    }
            } else {
                now.duration_since(s.t0.max(i.busy_until)).as_nanos() as u64
            };
            i.chooser.record(s.len, p, ns);
        }
        i.busy_until = now;
    }

    /// One pass of the progress engine: pending sends, then the channels in
    /// the poll set (doorbells), never all channels.
    pub fn progress(&mut self) -> Result<()> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        if !self.deferred.is_empty() {
            self.run_deferred_reads()?;
        }
        let mut k = 0;
        while k < self.pending_outs.len() {
            let d = self.pending_outs[k];
            self.advance_out(d);
            let o = &self.outs[d];
            if o.queue.is_empty() && o.ctrl_q.is_empty() && o.streams.is_empty() {
                self.outs[d].pending = false;
                self.pending_outs.swap_remove(k);
            } else {
                k += 1;
            }
        }
        for w in 0..self.active.len() {
            self.active[w] |= self.seg.doorbell(self.rank, w).load(Ordering::Relaxed);
            let mut bits = self.active[w];
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let s = w * 64 + b;
                if self.drain(s)? > 0 {
                    self.ins[s].idle = 0;
                } else {
                    self.ins[s].idle += 1;
                    if self.ins[s].idle > IDLE_CLEAR && self.ins[s].streams.is_empty() {
                        // Idle channel leaves the poll set; re-check after
                        // the clear so a cell published just before is seen.
                        self.ins[s].idle = 0;
                        self.active[w] &= !(1u64 << b);
                        self.seg
                            .doorbell(self.rank, w)
                            .fetch_and(!(1u64 << b), Ordering::Relaxed);
                        self.drain(s)?;
                    }
                }
            }
        }
        self.idle_turn = self.idle_turn.wrapping_add(1);
        if self.idle_turn % IDLE_LOOK_EVERY == 0 {
            self.look_idle()?;
        }
        Ok(())
    }

    /// Drains the next `IDLE_LOOK_SPAN` channels outside the poll set once
    /// (see `IDLE_LOOK_EVERY`); one that had cells joins the poll set again.
    fn look_idle(&mut self) -> Result<()> {
        for _ in 0..IDLE_LOOK_SPAN.min(self.size) {
            let s = self.idle_next;
            self.idle_next = if s + 1 == self.size { 0 } else { s + 1 };
            let (w, bit) = (s / 64, 1u64 << (s % 64));
            if self.active[w] & bit == 0 && self.drain(s)? > 0 {
                self.active[w] |= bit;
                self.ins[s].idle = 0;
            }
        }
        Ok(())
    }

    /// Drains every channel (slow path: recovers doorbells lost in the
    /// set/clear race).
    pub(crate) fn sweep(&mut self) -> Result<()> {
        for s in 0..self.size {
            self.drain(s)?;
        }
        self.progress()
    }

    /// Slow-path checks: job abort, dead peers, peers gone that we wait for.
    pub(crate) fn health(&mut self, waiting_for: Option<usize>) -> Result<()> {
        let abort = self.seg.header().abort.load(Ordering::Relaxed);
        let mut err = None;
        if abort != 0 {
            let rank = if abort == u64::MAX {
                -1
            } else {
                abort as i32 - 1
            };
            err = Some(Error::DeadPeer {
                rank,
                detail: "the launcher saw it exit abnormally".into(),
            });
        }
        for p in 0..self.size {
            if p == self.rank || err.is_some() {
                continue;
            }
            let st = self.seg.rank_slot(p).state.load(Ordering::Acquire);
            // SAFETY: signal 0 only checks for existence.
            let gone = unsafe { libc::kill(self.pids[p], 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if st == ST_UP && gone {
                err = Some(Error::DeadPeer {
                    rank: p as i32,
                    detail: format!("process {} exited without finalizing", self.pids[p]),
                });
            } else if st == ST_FINALIZED && waiting_for == Some(p) {
                // A peer may publish its last message and finalize between
                // the caller's drain and this load. The Acquire above makes
                // everything it published before visible, so the caller
                // gets one more turn to take it; a peer still finalized at
                // the next check with the wait unfinished is gone for good.
                // (Without this, tuning jobs on a loaded 2-core machine
                // sometimes failed: the receiver of the benchmark's last
                // message reported its sender dead.)
                if self.finalized_seen == Some(p) {
                    err = Some(Error::DeadPeer {
                        rank: p as i32,
                        detail: "it finalized while a message from it was awaited".into(),
                    });
                } else {
                    self.finalized_seen = Some(p);
                }
            }
        }
        if let Some(e) = err {
            self.broken = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }
}

// `drain_cells` counts the kinds up to `K_RTS` as messages (`Comm::taken`).
const _: () = assert!(
    K_INLINE < K_RTS
        && K_EAGER < K_RTS
        && K_FRAG > K_RTS
        && K_CTS > K_RTS
        && K_FIN > K_RTS
        && K_CTS_TIMED > K_RTS
        && K_HELP > K_RTS
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_whose_doorbell_was_lost_is_found_by_polling_alone() {
        std::env::remove_var("TOPOCOMM_SHM_FD");
        let mut c = Comm::init().expect("job of one rank");
        c.send(b"lost bell", 0, 5).unwrap();
        // What the clear/set race leaves: the cell published, the bit
        // clear, the channel out of the poll set. Blocking waits found it
        // by their slow-path sweep; polls (iprobe, test) never did.
        c.seg.doorbell(0, 0).store(0, Ordering::Relaxed);
        c.active[0] = 0;
        let polls = (0..2 * IDLE_LOOK_EVERY).position(|_| c.iprobe(0, 5).unwrap().is_some());
        assert!(
            polls.is_some_and(|p| p < IDLE_LOOK_EVERY as usize),
            "found after {polls:?} polls"
        );
        let mut got = [0u8; 9];
        c.recv(&mut got, 0, 5).unwrap();
        assert_eq!(&got, b"lost bell");
    }
}
