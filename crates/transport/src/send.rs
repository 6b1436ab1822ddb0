//! The sending side of a channel: the protocol choice for a message
//! (inline in the cell, eager through one fragment slot, or rendezvous,
//! where the receiver picks a pipelined two-copy stream or its own single
//! copy), the
//! sender's queues, and the pushing of cells and fragments into the ring.
//! Orderings referred to by number are listed in the module documentation
//! of `comm.rs`.

use crate::choose::{encode_request, Rdv};
use crate::comm::Comm;
use crate::copy::{copy_nontemporal, copy_plain, copy_small};
use crate::error::{Error, Result};
use crate::recv::Key;
use crate::request::{ReqKind, Request, Status, DONE_IDX};
use crate::segment::{
    inline_cells, Cell, DuplexHalf, HelpLine, PlanRaw, RecvCtrl, DUPLEX_BYTES, INLINE_BYTES,
    INLINE_MAX_BYTES, K_EAGER, K_FRAG, K_HELP, K_INLINE, K_RTS, RING, WIDE_BYTES,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Smallest fragment whose copy into the slots the sender times.
pub(crate) const TIMED_FRAGMENT: usize = 32 << 10;

/// Cells ahead of the one being written whose line a send asks back from
/// the receiver ([`crate::copy::prefetch_for_write`]): 8-byte message rate
/// on a 2-vCPU Intel Xeon VM, `bench p2p --tests msgrate`, 12-17 Mmsg/s with
/// none against 17-20 with 2 or 3 ahead (1: 17-20, 4 and more: lower again,
/// the line asked for too early is read again by the receiver's polling).
const PREFETCH_CELLS: u64 = 3;
/// Lines of the fragment slot two messages ahead asked back the same way
/// by an eager send of at least [`PREFETCH_SLOT_MIN`] bytes (as many lines
/// as the message being sent takes, at most this many): 1 KiB message rate
/// 2.9-3.4 -> 5.4-6.7 Mmsg/s on the 2-vCPU Intel Xeon VM, 3.6-4.5 -> 4.6-6.8
/// on a 16-vCPU one (4 alternating rounds).
const PREFETCH_SLOT_LINES: usize = 16;
/// Smaller eager messages leave the slot alone: on the 16-vCPU VM 64 B and
/// 256 B message rates lost 5-8 % with the slot's line asked for (the
/// 2-vCPU VM: 64 B even, 256 B +26 %); from 512 B they came out even there.
const PREFETCH_SLOT_MIN: usize = 512;

/// How a message travels (chosen from the channel's plan by its length).
#[derive(Clone, Copy, PartialEq)]
enum Proto {
    Inline,
    Eager,
    /// Rendezvous; `cma`: the receiver may read the buffer itself;
    /// `answer`: an answer within the eager limit, sent by rendezvous to
    /// be read by single copy (`Comm::answers`).
    Rts {
        cma: bool,
        answer: bool,
    },
}

/// A send waiting for room in the ring (and in the slots, if eager).
pub(crate) struct Job {
    req: Option<u32>,
    ptr: *const u8,
    len: usize,
    key: Key,
    proto: Proto,
}

/// A rendezvous send cleared by the receiver (CTS): its fragments are
/// streamed through the slots.
pub(crate) struct Stream {
    pub(crate) req: u32,
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
    pub(crate) off: usize,
    pub(crate) msg_id: u64,
    /// The receiver asked for the copy times (`K_CTS_TIMED`).
    pub(crate) timed: bool,
}

/// A rendezvous send waiting for the receiver's CTS or FIN.
pub(crate) struct RdvSend {
    pub(crate) msg_id: u64,
    pub(crate) req: u32,
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
}

/// Sender side of the channel me -> peer.
pub(crate) struct Out {
    pub(crate) cells: *mut Cell,
    pub(crate) ctrl: *const RecvCtrl,
    /// The receiver's help line of this channel (help.rs).
    pub(crate) help: *const HelpLine,
    pub(crate) slots: *mut u8,
    pub(crate) plan: PlanRaw,
    pub(crate) head: u64,
    pub(crate) tail_cache: u64,
    pub(crate) frags: u64,
    pub(crate) frags_done_cache: u64,
    pub(crate) queue: VecDeque<Job>,
    /// Control cells to send: kind and words (the message id first; only
    /// `K_HELP` uses the other three).
    pub(crate) ctrl_q: VecDeque<(u16, [u64; 4])>,
    pub(crate) streams: VecDeque<Stream>,
    pub(crate) rdv: Vec<RdvSend>,
    pub(crate) next_msg: u64,
    pub(crate) pending: bool,
    pub(crate) doorbell: *const AtomicU64,
    pub(crate) bit: u64,
    /// This rank's half of the pair's duplex line (null: no duplex line,
    /// e.g. to itself); the peer's, whose ack frees ours, is
    /// `In::dx_theirs`.
    pub(crate) dx_mine: *mut DuplexHalf,
    /// How many messages were sent through the duplex half.
    pub(crate) dx_sent: u64,
}

/// The matching key of a send with `tag` (`>= 0`) in context `ctx`.
fn send_key(tag: i32, ctx: u16) -> Result<Key> {
    if tag < 0 {
        return Err(Error::Invalid(format!("tag {tag} must be >= 0")));
    }
    Ok(Key { tag, ctx })
}

impl Comm {
    /// Starts sending `len` bytes at `ptr` to `dst` with `tag`.
    ///
    /// # Safety
    /// `ptr` must stay valid and unmodified for `len` bytes until the
    /// request completes.
    pub unsafe fn isend_raw(
        &mut self,
        ptr: *const u8,
        len: usize,
        dst: usize,
        tag: i32,
    ) -> Result<Request> {
        // SAFETY: forwarded contract.
        unsafe { self.isend_ctx(ptr, len, dst, tag, 0, false) }
    }

    /// [`Comm::isend_raw`] in matching context `ctx`. A `sync` send
    /// completes only once a receive has matched it (MPI_Ssend): it always
    /// takes the rendezvous protocol, whose reply comes at match time.
    ///
    /// # Safety
    /// As [`Comm::isend_raw`].
    pub unsafe fn isend_ctx(
        &mut self,
        ptr: *const u8,
        len: usize,
        dst: usize,
        tag: i32,
        ctx: u16,
        sync: bool,
    ) -> Result<Request> {
        let key = send_key(tag, ctx)?;
        // SAFETY: forwarded contract.
        unsafe { self.isend_inner(ptr, len, dst, key, sync, false) }
    }

    /// [`Comm::isend_ctx`] (not synchronous) of a message its receiver is
    /// waiting for (a broadcast's or a reduction's member blocked in its
    /// receive): within the sizes where the plan answers a ping-pong by
    /// rendezvous (`lone_rendezvous_min` up to the eager limit: where the
    /// start-up measurement found the receiver's single copy faster than an
    /// eager message's two copies), it goes by rendezvous and the receiver
    /// reads it once, as an answer does ([`Comm::answers`]), without the
    /// answer's test of the message pattern. The request then completes
    /// once the receiver has read it (a sender that comes first waits for
    /// its receiver). Elsewhere as `isend_ctx`.
    ///
    /// # Safety
    /// As [`Comm::isend_raw`].
    pub unsafe fn isend_waited(
        &mut self,
        ptr: *const u8,
        len: usize,
        dst: usize,
        tag: i32,
        ctx: u16,
    ) -> Result<Request> {
        let key = send_key(tag, ctx)?;
        // SAFETY: forwarded contract.
        unsafe { self.isend_inner(ptr, len, dst, key, false, true) }
    }

    /// Sends `len` bytes to `dst` at once when they can go without a
    /// rendezvous and nothing stands in the way: inline in a cell, or eager
    /// through a free fragment slot, with no message queued ahead to `dst`
    /// and room in the ring. `true` when the message went out, complete,
    /// with no request; `false` when it did not (also for arguments
    /// [`Comm::isend_ctx`] would refuse), and then nothing happened: the
    /// caller takes the general path, which reports any error. The MPI
    /// accelerator's blocking and windowed sends: no request, no `Result`,
    /// none of the checks' error strings on the latency path.
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `len` bytes during the call.
    #[inline]
    pub unsafe fn send_now(
        &mut self,
        ptr: *const u8,
        len: usize,
        dst: usize,
        tag: i32,
        ctx: u16,
    ) -> bool {
        if dst >= self.size || tag < 0 || self.broken.is_some() {
            return false;
        }
        // SAFETY: forwarded contract.
        unsafe { self.push_now(ptr, len, dst, Key { tag, ctx }) }
    }

    /// The fast path of a send after the argument checks: pushes the
    /// message at once, inline or eager, when nothing is queued ahead and
    /// the ring (and for eager a slot) has room (`true`); else does nothing
    /// (`false`) and the caller queues it or takes the general path.
    #[inline(always)]
    unsafe fn push_now(&mut self, ptr: *const u8, len: usize, dst: usize, key: Key) -> bool {
        // SAFETY: forwarded contract.
        if unsafe { self.push_inline_now(ptr, len, dst, key) } {
            return true;
        }
        // An inline message of several cells whose cells the ring lacks
        // goes eagerly if a cell and a slot are free: the same order, and
        // no wait for the receiver.
        if !self.outs[dst].queue.is_empty() || !self.goes_eager(dst, len) {
            return false;
        }
        let job = Job {
            req: None,
            ptr,
            len,
            key,
            proto: Proto::Eager,
        };
        if !self.try_push(dst, &job) {
            return false;
        }
        self.taken_at_send = self.taken;
        self.ring(dst);
        true
    }

    /// Whether a message of `len` bytes (above the inline limit) to `dst`
    /// goes eagerly: up to the plan's eager limit, but above the exchange
    /// limit (below a crowded node's raised eager limit, or from where
    /// answers go by single copy: plan.rs) not to a peer this rank is
    /// receiving from, which gets a rendezvous whose receiver may read it
    /// by single copy (`Plan::exchange_eager_max`); nor, from
    /// `lone_rendezvous_min`, an answer (`Comm::answers`). The scans of the
    /// posted receives run only in those bands.
    #[inline(always)]
    fn goes_eager(&self, dst: usize, len: usize) -> bool {
        self.eager_unless_answer(dst, len) && !self.answer_at(dst, len)
    }

    /// [`Comm::goes_eager`] without its answer test: within the eager
    /// limit, and not an exchange's message above its limit.
    #[inline(always)]
    fn eager_unless_answer(&self, dst: usize, len: usize) -> bool {
        let plan = &self.outs[dst].plan;
        let len = len as u64;
        len <= plan.eager_max
            && (len <= plan.exchange_eager_max || !self.cma_ok || !self.receiving_from(dst))
    }

    /// Whether a message of `len` bytes to `dst` is an answer sent by
    /// rendezvous: within `lone_rendezvous_min..=eager_max` (never where the
    /// plan has no single copy: plan.rs) and [`Comm::answers`].
    #[inline(always)]
    fn answer_at(&self, dst: usize, len: usize) -> bool {
        self.answer_size(dst, len) && self.answers(dst)
    }

    /// Whether `len` bytes to `dst` lie where an answer goes by rendezvous
    /// (`lone_rendezvous_min..=eager_max`).
    #[inline(always)]
    fn answer_size(&self, dst: usize, len: usize) -> bool {
        let plan = &self.outs[dst].plan;
        (plan.lone_min..=plan.eager_max).contains(&(len as u64))
    }

    /// Whether a send to `dst` now answers it: since this rank's last send
    /// (above the inline limit, to anyone) it took exactly one message, from
    /// `dst`; no receive from `dst` is posted (not an exchange); and single
    /// copy works. A ping-pong's turn: eager would copy the message into a
    /// slot and the peer then out of it, two copies in a row on the critical
    /// path; a rendezvous whose receiver reads the buffer by single copy
    /// moves it once (16 KiB ping-pong on a 2-vCPU Intel Xeon VM: 1.6-2.1 us
    /// against 3.5-3.7 eager). The sender then waits for the peer's read,
    /// which a one-way stream or an exchange must not (they stay eager).
    /// Nor a rank that heard from several peers since it last sent: its
    /// send is one of many to a collector (a reduce's blocks going to the
    /// root), whose single copy reads would run one after the other on the
    /// collector's CPU where eager senders copy in parallel (8-rank reduce
    /// of 64 KiB on a 16-vCPU Intel Xeon VM: 31.6-32.4 us when a message
    /// from the peer since the last send to it was enough, 20.6-21.7 with
    /// no answers, 18.8-24.0 with this rule).
    #[inline]
    pub(crate) fn answers(&self, dst: usize) -> bool {
        self.cma_ok
            && self.taken == self.taken_at_send + 1
            && self.taken_from == dst
            && !self.ins[dst].cma_failed
            && !self.receiving_from(dst)
    }

    /// The inline fast path after the argument checks: pushes the message
    /// when it fits in a cell, nothing is queued ahead and the ring has
    /// room (`true`), else does nothing (`false`).
    #[inline(always)]
    unsafe fn push_inline_now(&mut self, ptr: *const u8, len: usize, dst: usize, key: Key) -> bool {
        let o = &self.outs[dst];
        if (len as u64) > o.plan.inline_max
            || !o.queue.is_empty()
            || !self.ring_space_for(dst, inline_cells(len))
        {
            return false;
        }
        // SAFETY: forwarded contract.
        unsafe { self.push_inline(dst, key, ptr, len) };
        self.ring(dst);
        true
    }

    pub(crate) unsafe fn isend_inner(
        &mut self,
        ptr: *const u8,
        len: usize,
        dst: usize,
        key: Key,
        sync: bool,
        waited: bool,
    ) -> Result<Request> {
        self.check_peer(dst, "destination")?;
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        // Nothing queued ahead and room: an inline or eager message goes
        // out here, with no request and none of the general path's job and
        // protocol bookkeeping (about half of a small send's instructions).
        // A waited-for message in the answers' sizes skips it: it may go by
        // rendezvous (below).
        let at_once = !(sync || waited && self.answer_size(dst, len));
        // SAFETY: forwarded contract.
        if at_once && unsafe { self.push_now(ptr, len, dst, key) } {
            return Ok(Request {
                idx: DONE_IDX,
                gen: 0,
            });
        }
        // Field reads, not a copy of the whole 144-byte plan.
        let plan = &self.outs[dst].plan;
        // A rendezvous only says whether the receiver may read this buffer
        // with single copy; the receiver chooses the protocol (choose.rs).
        let readable = len > 0 && plan.cma != 0 && self.cma_ok;
        // Tested once: the answer test scans the posted receives. A send
        // whose receiver waits for it needs no test of the pattern.
        let answer = !sync
            && readable
            && if waited {
                self.answer_size(dst, len) && !self.ins[dst].cma_failed
            } else {
                self.answer_at(dst, len)
            };
        let proto = if sync {
            Proto::Rts {
                cma: readable,
                answer: false,
            }
        } else if (len as u64) <= plan.inline_max {
            Proto::Inline
        } else if !answer && self.eager_unless_answer(dst, len) {
            Proto::Eager
        } else {
            // Within the eager limit only an answer is a rendezvous, or an
            // exchange's message above `exchange_eager_max`, whose receiver
            // chooses (or follows the pair's choice).
            Proto::Rts {
                cma: readable,
                answer,
            }
        };
        if (len as u64) > self.outs[dst].plan.inline_max {
            self.taken_at_send = self.taken;
        }
        // Queued behind earlier messages (or no room now, or a rendezvous):
        // pushed by progress in order, completed through its request.
        let idx = self.alloc(ReqKind::Send { dst });
        let job = Job {
            req: Some(idx),
            ptr,
            len,
            key,
            proto,
        };
        self.outs[dst].queue.push_back(job);
        self.mark_pending(dst);
        self.advance_out(dst);
        Ok(Request {
            idx,
            gen: self.reqs[idx as usize].gen,
        })
    }

    pub(crate) fn mark_pending(&mut self, dst: usize) {
        if !self.outs[dst].pending {
            self.outs[dst].pending = true;
            self.pending_outs.push(dst);
        }
    }

    /// A free cell in the ring to `dst` (re-reading the receiver's tail only
    /// when the cached value says full).
    #[inline]
    fn ring_space(&mut self, dst: usize) -> bool {
        self.ring_space_for(dst, 1)
    }

    /// [`Comm::ring_space`] for `cells` consecutive cells.
    #[inline]
    fn ring_space_for(&mut self, dst: usize, cells: u64) -> bool {
        let o = &mut self.outs[dst];
        if o.head + cells - o.tail_cache <= RING {
            return true;
        }
        // SAFETY: ctrl points into the mapping. Acquire pairs with the
        // receiver's Release of `tail` (ordering 2).
        o.tail_cache = unsafe { (*o.ctrl).tail.load(Ordering::Acquire) };
        o.head + cells - o.tail_cache <= RING
    }

    fn slot_free(&mut self, dst: usize) -> bool {
        let o = &mut self.outs[dst];
        if o.frags - o.frags_done_cache < o.plan.depth {
            return true;
        }
        // SAFETY: as above; pairs with the Release of `frags_done` (ordering 3).
        o.frags_done_cache = unsafe { (*o.ctrl).frags_done.load(Ordering::Acquire) };
        o.frags - o.frags_done_cache < o.plan.depth
    }

    /// Writes a cell's fields, then publishes it (ordering 1).
    #[inline(always)]
    fn push_cell(&mut self, dst: usize, kind: u16, key: Key, len: u64, body: &[u8]) {
        debug_assert!(body.len() <= INLINE_BYTES);
        let o = &mut self.outs[dst];
        let pos = o.head;
        // SAFETY: the cell at pos % RING is ours: ring_space() checked that
        // the receiver released it (tail > pos - RING).
        unsafe {
            let c = o.cells.add((pos % RING) as usize);
            // The cell a few messages on: its line comes back from the
            // receiver while this one and the next are written
            // (copy::prefetch_for_write); only a cell the receiver has
            // released by the cached tail, never one it may still read.
            if pos + PREFETCH_CELLS - o.tail_cache < RING {
                let ahead = o.cells.add(((pos + PREFETCH_CELLS) % RING) as usize);
                crate::copy::prefetch_for_write(ahead.cast());
            }
            (*c).kind = kind;
            (*c).ctx = key.ctx;
            (*c).tag = key.tag;
            (*c).len = len;
            copy_small((*c).body.as_mut_ptr(), body.as_ptr(), body.len());
            (*c).seq.store(pos + 1, Ordering::Release);
        }
        o.head += 1;
        self.activity += 1;
    }

    /// Publishes the `len` bytes at `ptr` as an inline message (the ring
    /// has room: `ring_space`): through the pair's duplex line when it fits
    /// and the peer has taken the last message sent there, else in the
    /// next cell.
    ///
    /// # Safety
    /// `ptr` must be valid for `len` bytes (unused when `len` is 0).
    #[inline(always)]
    unsafe fn push_inline(&mut self, dst: usize, key: Key, ptr: *const u8, len: usize) {
        // SAFETY: forwarded contract.
        if len <= DUPLEX_BYTES && unsafe { self.push_duplex(dst, key, ptr, len) } {
            return;
        }
        if len > INLINE_BYTES {
            // SAFETY: forwarded contract.
            unsafe { self.push_wide(dst, key, ptr, len) };
            return;
        }
        let body: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: forwarded contract; the copy into the cell is the
            // whole send.
            unsafe { std::slice::from_raw_parts(ptr, len) }
        };
        self.push_cell(dst, K_INLINE, key, len as u64, body);
    }

    /// Publishes an inline message longer than one cell's payload over
    /// [`inline_cells`]`(len)` consecutive cells (the ring has room for them:
    /// `ring_space_for`): the bytes after the first [`INLINE_BYTES`] go into
    /// the following cells, [`WIDE_BYTES`] each after their `seq` (which is
    /// left as it is), then the first cell is written and published as an
    /// inline message of `len` bytes. The receiver reads the following cells
    /// only after the first one's `seq` (Acquire, ordering 1), and moves its
    /// tail past all of them at once.
    ///
    /// # Safety
    /// `ptr` must be valid for `INLINE_BYTES < len <= INLINE_MAX_BYTES`
    /// bytes.
    unsafe fn push_wide(&mut self, dst: usize, key: Key, ptr: *const u8, len: usize) {
        debug_assert!(len > INLINE_BYTES && len <= INLINE_MAX_BYTES);
        let o = &mut self.outs[dst];
        let pos = o.head;
        let cells = inline_cells(len);
        // SAFETY: cells pos..pos + cells are ours (ring_space_for checked
        // that the receiver released them); every copy stays inside one
        // cell (n <= WIDE_BYTES after the 8-byte seq, INLINE_BYTES in the
        // body) and inside the caller's len bytes.
        unsafe {
            let mut off = INLINE_BYTES;
            for j in 1..cells {
                let c = o.cells.add(((pos + j) % RING) as usize).cast::<u8>();
                let n = (len - off).min(WIDE_BYTES);
                copy_small(c.add(8), ptr.add(off), n);
                off += n;
            }
            let c = o.cells.add((pos % RING) as usize);
            (*c).kind = K_INLINE;
            (*c).ctx = key.ctx;
            (*c).tag = key.tag;
            (*c).len = len as u64;
            copy_small((*c).body.as_mut_ptr(), ptr, INLINE_BYTES);
            // Release: the following cells' bytes too (ordering 1).
            (*c).seq.store(pos + 1, Ordering::Release);
        }
        o.head += cells;
        self.activity += 1;
    }

    /// Sends an inline message of at most [`DUPLEX_BYTES`] through the
    /// pair's duplex line, at the next position of the channel, if the
    /// peer has taken the last one sent there (its `ack`): `false` leaves
    /// it to the ring. The receiver looks for the message at its tail in
    /// the ring cell and in the duplex half, so the order of the channel's
    /// messages is kept whichever way each goes. The half also carries
    /// this rank's ack of the peer's duplex messages, written only here,
    /// together with the message: a separate ack store let the spinning
    /// peer take the line between it and the message's stores, and cost
    /// a transfer of the line more than the ring.
    ///
    /// # Safety
    /// `ptr` must be valid for `len <= DUPLEX_BYTES` bytes.
    #[inline(always)]
    unsafe fn push_duplex(&mut self, dst: usize, key: Key, ptr: *const u8, len: usize) -> bool {
        let (taken, theirs) = (self.ins[dst].dx_count, self.ins[dst].dx_theirs);
        let o = &mut self.outs[dst];
        if o.dx_mine.is_null() {
            return false;
        }
        // Acquire pairs with the peer's Release of its word (ordering 6):
        // its copy of our last duplex message happens before we write again.
        // At most one of ours is outstanding, so 8 bits of count tell.
        if o.dx_sent != 0 {
            // SAFETY: theirs points into the mapping (set with dx_mine).
            let theirs_word = unsafe { (*theirs).word.load(Ordering::Acquire) };
            if DuplexHalf::acked(theirs_word) != o.dx_sent as u8 {
                return false;
            }
        }
        let pos = o.head;
        // SAFETY: our half of the line: only this rank writes it, and the
        // peer reads it only after the Release of its word (ordering 6).
        unsafe {
            let h = o.dx_mine;
            (*h).tag = key.tag;
            (*h).ctx = key.ctx;
            copy_small((*h).body.as_mut_ptr(), ptr, len);
            // Release: the fields above, and our copies of the peer's half
            // (acked here), before the peer reads this word.
            (*h).word.store(
                DuplexHalf::word(pos, o.dx_sent + 1, taken, len),
                Ordering::Release,
            );
            if self.demote {
                crate::copy::demote_line(h.cast());
            }
        }
        o.dx_sent += 1;
        o.head += 1;
        self.activity += 1;
        true
    }

    /// Copies `len` bytes into the next fragment slot of `dst`.
    fn fill_slot(&mut self, dst: usize, src: *const u8, len: usize, total: usize) {
        self.before_long_copy(len);
        let o = &mut self.outs[dst];
        let slot = (o.frags % o.plan.depth) * o.plan.fragment;
        // SAFETY: slot_free() checked the receiver released this slot; the
        // slot holds `fragment` >= len bytes; `src` is valid per isend's contract.
        unsafe {
            let d = o.slots.add(slot as usize);
            // An eager message's slot (a whole message in one slot), two
            // messages on, if the receiver has released it (cached count).
            // The lines asked for lie inside that slot: at most 16 lines,
            // and a fragment is at least 4096 bytes.
            if total == len
                && len >= PREFETCH_SLOT_MIN
                && o.frags + 2 - o.frags_done_cache < o.plan.depth
            {
                let ahead = ((o.frags + 2) % o.plan.depth) * o.plan.fragment;
                let lines = len.div_ceil(64).min(PREFETCH_SLOT_LINES);
                for k in 0..lines {
                    crate::copy::prefetch_for_write(o.slots.add(ahead as usize + k * 64));
                }
            }
            if o.plan.nontemporal != 0 && total as u64 >= o.plan.nt_threshold {
                copy_nontemporal(d, src, len);
            } else {
                copy_plain(d, src, len);
            }
        }
        o.frags += 1;
    }

    fn try_push(&mut self, dst: usize, job: &Job) -> bool {
        match job.proto {
            Proto::Inline => {
                if !self.ring_space_for(dst, inline_cells(job.len)) {
                    return false;
                }
                // SAFETY: ptr is valid for len bytes per isend's contract
                // and stays untouched until the send completes, i.e. until
                // this very push.
                unsafe { self.push_inline(dst, job.key, job.ptr, job.len) };
            }
            Proto::Eager => {
                if !self.ring_space(dst) || !self.slot_free(dst) {
                    return false;
                }
                self.fill_slot(dst, job.ptr, job.len, job.len);
                self.push_cell(dst, K_EAGER, job.key, job.len as u64, &[]);
            }
            Proto::Rts { cma, answer } => {
                if !self.ring_space(dst) {
                    return false;
                }
                let ask = if answer {
                    Some(Rdv::Cma)
                } else {
                    self.pair_choice(dst, job.len, cma)
                };
                // A send while receiving from `dst`: the two directions
                // overlap (`In::overlaps`).
                if self.receiving_from(dst) {
                    self.ins[dst].overlaps += 1;
                }
                let o = &mut self.outs[dst];
                let msg_id = o.next_msg;
                o.next_msg += 1;
                let mut body = [0u8; 24];
                body[..8].copy_from_slice(&msg_id.to_ne_bytes());
                body[8..16].copy_from_slice(&(job.ptr as u64).to_ne_bytes());
                body[16..24].copy_from_slice(&encode_request(cma, ask, answer).to_ne_bytes());
                let req = job.req.expect("rendezvous sends have a request");
                o.rdv.push(RdvSend {
                    msg_id,
                    req,
                    ptr: job.ptr,
                    len: job.len,
                });
                self.push_cell(dst, K_RTS, job.key, job.len as u64, &body);
                return true;
            }
        }
        if let Some(r) = job.req {
            self.complete(r, Status::default(), None);
        }
        true
    }

    /// Sets our bit in `dst`'s doorbell unless it is already set (a relaxed
    /// load that hits in cache in steady state: no RMW on the hot path).
    #[inline]
    fn ring(&mut self, dst: usize) {
        let o = &self.outs[dst];
        // SAFETY: doorbell points into the mapping's doorbell table.
        let db = unsafe { &*o.doorbell };
        if db.load(Ordering::Relaxed) & o.bit == 0 {
            db.fetch_or(o.bit, Ordering::Relaxed);
        }
    }

    /// Pushes whatever the ring and the slots allow on the channel to `dst`.
    pub(crate) fn advance_out(&mut self, dst: usize) {
        let start = self.outs[dst].head;
        while let Some(&(kind, words)) = self.outs[dst].ctrl_q.front() {
            if !self.ring_space(dst) {
                break;
            }
            if kind == K_HELP {
                let mut body = [0u8; 32];
                for (b, w) in body.chunks_exact_mut(8).zip(words) {
                    b.copy_from_slice(&w.to_ne_bytes());
                }
                self.push_cell(dst, kind, Key::CONTROL, 0, &body);
            } else {
                self.push_cell(dst, kind, Key::CONTROL, 0, &words[0].to_ne_bytes());
            }
            self.outs[dst].ctrl_q.pop_front();
        }
        while let Some(job) = self.outs[dst].queue.pop_front() {
            if !self.try_push(dst, &job) {
                self.outs[dst].queue.push_front(job);
                break;
            }
        }
        while let Some(mut st) = self.outs[dst].streams.pop_front() {
            while st.off < st.len && self.ring_space(dst) && self.slot_free(dst) {
                let n = (st.len - st.off).min(self.outs[dst].plan.fragment as usize);
                // SAFETY: off + n <= len, inside the send buffer.
                let src = unsafe { st.ptr.add(st.off) };
                // The copy's time goes with the fragment: a receiver that
                // weighs two-copy by its copying counts this side's too
                // (progress.rs, `stream_done`). Two clock reads per
                // fragment of at least 32 KiB (a few percent of a smaller
                // copy in a VM), and only for a stream the receiver times;
                // 0 otherwise: not measured.
                let t = (st.timed && n >= TIMED_FRAGMENT).then(std::time::Instant::now);
                self.fill_slot(dst, src, n, st.len);
                let copy_ns = t.map_or(0, |t| t.elapsed().as_nanos() as u64);
                let mut body = [0u8; 24];
                body[..8].copy_from_slice(&st.msg_id.to_ne_bytes());
                body[8..16].copy_from_slice(&(st.off as u64).to_ne_bytes());
                body[16..].copy_from_slice(&copy_ns.to_ne_bytes());
                self.push_cell(dst, K_FRAG, Key::CONTROL, n as u64, &body);
                st.off += n;
            }
            if st.off == st.len {
                self.complete(st.req, Status::default(), None);
            } else {
                self.outs[dst].streams.push_front(st);
                break;
            }
        }
        if self.outs[dst].head != start {
            self.ring(dst);
        }
    }

    pub(crate) fn queue_ctrl(&mut self, dst: usize, kind: u16, msg_id: u64) {
        self.queue_ctrl_words(dst, kind, [msg_id, 0, 0, 0]);
    }

    /// [`Comm::queue_ctrl`] with the words of a `K_HELP` cell.
    pub(crate) fn queue_ctrl_words(&mut self, dst: usize, kind: u16, words: [u64; 4]) {
        self.outs[dst].ctrl_q.push_back((kind, words));
        self.mark_pending(dst);
        self.advance_out(dst);
    }

    /// Sends `buf` to `dst` and waits until the buffer may be reused.
    pub fn send(&mut self, buf: &[u8], dst: usize, tag: i32) -> Result<()> {
        // SAFETY: `buf` outlives the request, which is waited for here.
        let r = unsafe { self.isend_raw(buf.as_ptr(), buf.len(), dst, tag)? };
        self.wait(r).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f(rank's comm)` on `n` ranks, threads on one segment whose
    /// rules answer by single copy from 8 KiB.
    fn job(n: usize, f: fn(&mut Comm)) {
        let rules = "[default]\neager_max = 16384\nfragment = 65536\ncma = true\nlone_rendezvous_min = 8192\n";
        crate::threads_job::job(n, Some(rules), f)
    }

    /// A ping-pong of 16-byte messages goes through the duplex line (its
    /// counts wrap past 256 three times here), a 17-byte one through the
    /// ring; every byte and the order arrive.
    #[test]
    fn sixteen_bytes_ride_the_duplex_line_and_its_counts_wrap() {
        crate::threads_job::job(2, None, |c| {
            let peer = 1 - c.rank();
            let msg = |i: u32, n: usize| -> Vec<u8> {
                (0..n).map(|k| (i as usize * 31 + k * 7) as u8).collect()
            };
            let rounds = 800u32;
            for i in 0..rounds {
                let mut got = [0u8; 17];
                if c.rank() == 0 {
                    c.send(&msg(i, 16), peer, 5).unwrap();
                    let st = c.recv(&mut got, peer as i32, 5).unwrap();
                    assert_eq!(&got[..st.count], &msg(i + 1, 16)[..], "reply {i}");
                } else {
                    let st = c.recv(&mut got, peer as i32, 5).unwrap();
                    assert_eq!(&got[..st.count], &msg(i, 16)[..], "message {i}");
                    c.send(&msg(i + 1, 16), peer, 5).unwrap();
                }
            }
            // In a strict ping-pong every message finds its side's last
            // one acked: the peer's reply carries the ack.
            let by_line = c.outs[peer].dx_sent;
            assert_eq!(by_line, u64::from(rounds), "messages by the line");
            let mut got = [0u8; 17];
            if c.rank() == 0 {
                c.send(&msg(9, 17), peer, 6).unwrap();
            } else {
                c.recv(&mut got, peer as i32, 6).unwrap();
                assert_eq!(&got[..], &msg(9, 17)[..]);
            }
            assert_eq!(c.outs[peer].dx_sent, by_line, "17 bytes went by the line");
        });
    }

    /// Inline messages longer than one cell's payload take consecutive
    /// cells (up to 208 bytes: no eager slot), and arrive whole and in order
    /// while the ring wraps many times over, taken at once by a waiting
    /// receive or queued as unexpected (a burst received in reverse order).
    #[test]
    fn inline_messages_over_several_cells_keep_every_byte_and_their_order() {
        job(2, |c| {
            let data = |n: usize, seed: u32| -> Vec<u8> {
                (0..n).map(|i| (i as u32 * 7 + seed) as u8).collect()
            };
            let sizes = [41usize, 64, 96, 97, 152, 153, 208, 0, 17, 40];
            // 19 cells a round at least: the 128-cell ring wraps 6 times.
            let rounds = 40u32;
            let mut buf = vec![0u8; INLINE_MAX_BYTES];
            if c.rank() == 0 {
                let frags = c.outs[1].frags;
                for r in 0..rounds {
                    for (k, &n) in sizes.iter().enumerate() {
                        c.send(&data(n, r * 16 + k as u32), 1, k as i32).unwrap();
                    }
                    // A round takes at most 22 cells: with the peer's ack
                    // after each, the ring always has room for a message's
                    // cells (a full one sends it eagerly: `push_now`).
                    c.recv(&mut buf, 1, 98).unwrap();
                }
                assert_eq!(c.outs[1].frags, frags, "a message went through a slot");
                c.recv(&mut buf, 1, 99).unwrap();
                for (k, &n) in sizes.iter().enumerate() {
                    c.send(&data(n, 1000 + k as u32), 1, k as i32).unwrap();
                }
            } else {
                for r in 0..rounds {
                    for (k, &n) in sizes.iter().enumerate() {
                        let st = c.recv(&mut buf, 0, k as i32).unwrap();
                        let want = data(n, r * 16 + k as u32);
                        assert_eq!(&buf[..st.count], &want[..], "round {r}, {n} bytes");
                    }
                    c.send(&[0u8], 0, 98).unwrap();
                }
                c.send(&[1u8], 0, 99).unwrap();
                for (k, &n) in sizes.iter().enumerate().rev() {
                    let st = c.recv(&mut buf, 0, k as i32).unwrap();
                    let want = data(n, 1000 + k as u32);
                    assert_eq!(&buf[..st.count], &want[..], "burst, {n} bytes");
                }
            }
        });
    }

    /// A send whose receiver waits for it (`isend_waited`) goes by
    /// rendezvous within the answers' sizes (8-16 KiB here), however the
    /// messages ran before, and the receiver reads it by single copy; below
    /// them, and under rules with no answers, it goes eagerly. Every byte
    /// is checked.
    #[test]
    fn a_waited_for_send_is_read_once_within_the_answers_sizes() {
        fn run(c: &mut Comm, answers: bool) {
            let data = |n: usize, seed: u8| -> Vec<u8> {
                (0..n).map(|i| (i % 251) as u8 ^ seed).collect()
            };
            let sizes = [16384usize, 16384, 8192, 4096, 16384];
            if c.rank() == 0 {
                for (k, &n) in sizes.iter().enumerate() {
                    let d = data(n, k as u8);
                    // SAFETY: `d` outlives the request, waited for here.
                    let r = unsafe { c.isend_waited(d.as_ptr(), n, 1, 7, 0).unwrap() };
                    c.wait(r).unwrap();
                }
                // A plain send after hearing nothing: no answer, eager.
                c.send(&data(16384, 9), 1, 8).unwrap();
            } else {
                let mut buf = vec![0u8; 16384];
                for (k, &n) in sizes.iter().enumerate() {
                    let st = c.recv(&mut buf, 0, 7).unwrap();
                    assert_eq!(&buf[..st.count], &data(n, k as u8)[..], "message {k}");
                }
                let read_once = if answers { 4 } else { 0 };
                assert_eq!(c.rdv_answers, read_once, "waited-for sends read once");
                c.recv(&mut buf, 0, 8).unwrap();
                assert_eq!(buf, data(16384, 9));
                assert_eq!(c.rdv_answers, read_once, "a plain send went by rendezvous");
            }
        }
        job(2, |c| run(c, true));
        let no_answers = "[default]\neager_max = 16384\nfragment = 65536\ncma = true\nlone_rendezvous_min = 1073741824\n";
        crate::threads_job::job(2, Some(no_answers), |c| run(c, false));
    }

    /// Rank 0 hears from ranks 1 and 2, then sends 16 KiB to rank 1: not an
    /// answer (it heard from two peers), so rank 1 gets it eagerly; rank
    /// 1's reply, after exactly one message from rank 0, is an answer that
    /// rank 0 reads by single copy; so is rank 0's next send to rank 1.
    /// Every byte is checked.
    #[test]
    fn only_a_reply_to_the_one_peer_heard_is_an_answer() {
        job(3, |c| {
            let big =
                |seed: u8| -> Vec<u8> { (0..16384).map(|i| (i % 251) as u8 ^ seed).collect() };
            let mut buf = vec![0u8; 16384];
            match c.rank() {
                0 => {
                    let mut small = [0u8; 8];
                    // Rank 1 last: the peer of the last message taken.
                    c.recv(&mut small, 2, 1).unwrap();
                    c.recv(&mut small, 1, 1).unwrap();
                    c.send(&big(1), 1, 2).unwrap();
                    c.recv(&mut buf, 1, 3).unwrap();
                    assert_eq!(buf, big(2));
                    c.send(&big(3), 1, 4).unwrap();
                    assert_eq!(c.rdv_answers, 1, "rank 1's reply was not an answer");
                }
                1 => {
                    c.send(&[7u8; 8], 0, 1).unwrap();
                    c.recv(&mut buf, 0, 2).unwrap();
                    assert_eq!(buf, big(1));
                    assert_eq!(c.rdv_answers, 0, "a send after two peers was an answer");
                    c.send(&big(2), 0, 3).unwrap();
                    c.recv(&mut buf, 0, 4).unwrap();
                    assert_eq!(buf, big(3));
                    assert_eq!(c.rdv_answers, 1, "rank 0's second send was not an answer");
                }
                _ => c.send(&[9u8; 8], 0, 1).unwrap(),
            }
        });
    }
}
