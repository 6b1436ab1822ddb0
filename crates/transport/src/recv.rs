//! The receiving side: posted receives and unexpected messages, matching
//! (MPI order per source and tag), delivery into the user's buffer,
//! truncation, the receiver's half of the rendezvous, and the latency path
//! of a blocking receive. Orderings referred to by number are listed in the
//! module documentation of `comm.rs`.

use crate::choose::{Allowed, Chooser, Pick, Rdv};
use crate::comm::{Comm, ANY_SOURCE, ANY_TAG};
use crate::copy::{copy_plain, copy_small, prefetch_read};
use crate::error::{Error, Result};
use crate::request::{ReqKind, Request, Status, DONE_IDX};
use crate::segment::{
    inline_cells, Cell, DuplexHalf, HelpLine, PlanRaw, RecvCtrl, DUPLEX_BYTES, INLINE_BYTES,
    INLINE_MAX_BYTES, K_CTS, K_CTS_TIMED, K_EAGER, K_FIN, K_INLINE, RING, WIDE_BYTES,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Cells fetched ahead when a receive takes one at posting (`take_next`).
const PREFETCH_CELLS: u64 = 2;

/// A receive's or a message's matching key: tag and context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) tag: i32,
    pub(crate) ctx: u16,
}

/// Whether a message from `src` with key `got` matches a receive for
/// `want_src` and `want` (source and tag wildcards included; [`ANY_TAG`]
/// never matches the internal negative tags; contexts never mix).
pub(crate) fn matches(want_src: i32, want: Key, src: usize, got: Key) -> bool {
    want.ctx == got.ctx
        && (want_src == ANY_SOURCE || want_src as usize == src)
        && (want.tag == got.tag || (want.tag == ANY_TAG && got.tag >= 0))
}

/// A rendezvous receive cleared with CTS: its fragments arrive on the
/// channel from the sender.
pub(crate) struct InStream {
    pub(crate) msg_id: u64,
    pub(crate) req: u32,
    pub(crate) got: usize,
    pub(crate) len: usize,
    /// When the CTS went out, and the choice to report the cost to.
    pub(crate) t0: Instant,
    pub(crate) pick: Option<Pick>,
    /// The sender's count of finished single copies when the CTS went out
    /// (`RankSlot::cma_reads`): if it moved by the first fragment, the
    /// stream is timed from that fragment.
    pub(crate) sender_cma_reads: u64,
    /// Copied out of the slots with streaming stores (choose.rs).
    pub(crate) stream: bool,
    /// Nanoseconds this rank spent copying the stream out of the slots,
    /// counted for a stream the chooser times on a crowded node
    /// (`Comm::crowded`), in an exchange (`exchange`), or in fragments of
    /// 32 KiB or more (an exchange may show only at the stream's end).
    pub(crate) copy_ns: u64,
    /// Nanoseconds the sender spent copying the stream into the slots, as
    /// its fragments report them.
    pub(crate) copy_in_ns: u64,
    /// This rank had sends of its own to the stream's sender in flight when
    /// the first fragment came, or the two directions overlapped within the
    /// last one or two blocks of messages it received from it (`In::
    /// overlaps`; progress.rs, `first_fragment`): the sender's CPU also
    /// works for this rank's messages, so the stream is weighed by its
    /// copying, as on a crowded node.
    pub(crate) exchange: bool,
    /// This rank's count of rendezvous sends to the stream's sender when
    /// the stream began: if it moved by the end, the two exchanged data.
    pub(crate) sends_at_start: u64,
}

/// A single copy read that a receive matched while it was being posted,
/// done at the next progress instead ([`Comm::run_deferred_reads`]).
pub(crate) struct DeferredRead {
    idx: u32,
    pub(crate) src: usize,
    len: usize,
    msg_id: u64,
    addr: u64,
    pick: Option<Pick>,
    st: Status,
}

/// Receiver side of the channel peer -> me.
pub(crate) struct In {
    pub(crate) cells: *const Cell,
    pub(crate) ctrl: *mut RecvCtrl,
    /// This channel's help line (help.rs), written by this rank.
    pub(crate) help: *const HelpLine,
    /// Helps started on this channel (the sequence number of the last).
    pub(crate) help_seq: u64,
    pub(crate) slots: *const u8,
    pub(crate) plan: PlanRaw,
    pub(crate) tail: u64,
    pub(crate) published: u64,
    pub(crate) frags_done: u64,
    pub(crate) streams: Vec<InStream>,
    pub(crate) idle: u32,
    /// Protocol costs measured on this channel (choose.rs).
    pub(crate) chooser: Chooser,
    /// When the last stream of this channel completed: a stream queued
    /// behind another starts costing only then.
    pub(crate) busy_until: Instant,
    /// Set after a single copy from this peer failed: two-copy from then on.
    pub(crate) cma_failed: bool,
    /// Rendezvous messages matched on this channel so far.
    pub(crate) rdv_in: u64,
    /// Times the two directions of this pair overlapped: this rank started
    /// a rendezvous send to the peer while receiving from it (`Comm::
    /// receiving_from`), or matched a rendezvous message from the peer
    /// while sends of its own to it were under way. A ping-pong never
    /// overlaps; an exchange (windows both ways, a ring's sendrecv) does.
    pub(crate) overlaps: u64,
    /// [`Self::overlaps`] when the previous block of [`EXCHANGE_BLOCK`]
    /// rendezvous messages from the peer began, and when the current one
    /// did: overlaps since the first mark make the two an exchange
    /// (progress.rs, `first_fragment`).
    pub(crate) overlaps_mark: u64,
    pub(crate) overlaps_mark_next: u64,
    /// The peer's half of the pair's duplex line (null: none).
    pub(crate) dx_theirs: *const DuplexHalf,
    /// Position + 1 of the last duplex message taken from the peer (0:
    /// none yet).
    pub(crate) dx_taken: u64,
    /// How many duplex messages this rank has taken from the peer: the ack
    /// it writes with its next duplex message to it (modulo 256).
    pub(crate) dx_count: u64,
    /// That message as a cell (heap, this channel's own: the engine reads
    /// it where it reads ring cells), served until the tail moves past it;
    /// `None` with no duplex line.
    pub(crate) dup: Option<Box<Cell>>,
}

impl In {
    /// Whether the two directions overlapped within the last block or two
    /// of rendezvous messages from the peer ([`Self::overlaps_mark`]).
    pub(crate) fn overlapped_lately(&self) -> bool {
        self.overlaps != self.overlaps_mark
    }

    /// A cell for [`Self::dup`].
    pub(crate) fn dup_cell() -> Box<Cell> {
        Box::new(Cell {
            seq: AtomicU64::new(0),
            kind: 0,
            ctx: 0,
            tag: 0,
            len: 0,
            body: [0; INLINE_BYTES],
        })
    }

    /// Copies the `len` bytes of the inline message whose first cell `c` is
    /// at position `pos` (published: its `seq` was read with Acquire) to
    /// `out`: the first cell's body, then the following cells' bytes after
    /// their `seq` (`Comm::push_wide`).
    ///
    /// # Safety
    /// `c` must be that published cell (of the ring, or the duplex copy when
    /// `len <= INLINE_BYTES`), `len <= INLINE_MAX_BYTES`, and `out` valid
    /// for `len` writable bytes.
    #[inline]
    pub(crate) unsafe fn copy_inline(&self, c: &Cell, pos: u64, len: usize, out: *mut u8) {
        // SAFETY: the caller's contract; the following cells lie in the
        // ring (index modulo RING) and were written before the first
        // cell's Release, which our Acquire of its seq saw.
        unsafe {
            copy_small(out, c.body.as_ptr(), len.min(INLINE_BYTES));
            let mut off = INLINE_BYTES;
            let mut j = 1;
            while off < len {
                let cj = self.cells.add(((pos + j) % RING) as usize).cast::<u8>();
                let n = (len - off).min(WIDE_BYTES);
                copy_small(out.add(off), cj.add(8), n);
                off += n;
                j += 1;
            }
        }
    }

    /// The cell of the message at this channel's tail if it has been
    /// published: the ring's, or the duplex half's, copied into
    /// [`Self::dup`] (the peer may write its half again once this rank
    /// acks the copy with its own next duplex message).
    #[inline(always)]
    pub(crate) fn head_cell(&mut self) -> Option<*const Cell> {
        let pos = self.tail;
        // SAFETY: cell index < RING inside the mapping.
        let c = unsafe { self.cells.add((pos % RING) as usize) };
        // Acquire pairs with the sender's Release (ordering 1).
        // SAFETY: c is a cell of the ring, inside the mapping.
        if unsafe { (*c).seq.load(Ordering::Acquire) } == pos + 1 {
            return Some(c);
        }
        let d = self.dup.as_deref_mut()?;
        if self.dx_taken == pos + 1 {
            return Some(d);
        }
        let h = self.dx_theirs;
        // SAFETY: the peer's half in the mapping (set with `dup`); its fields
        // are read only after the Acquire of its word (ordering 6), and the
        // peer does not write them again before our ack of this message.
        unsafe {
            let w = (*h).word.load(Ordering::Acquire);
            if !DuplexHalf::holds(w, pos, self.dx_count + 1) {
                return None;
            }
            d.kind = K_INLINE;
            d.ctx = (*h).ctx;
            d.tag = (*h).tag;
            d.len = DuplexHalf::len(w) as u64;
            d.body[..DUPLEX_BYTES].copy_from_slice(&(*h).body);
        }
        d.seq.store(pos + 1, Ordering::Relaxed);
        self.dx_taken = pos + 1;
        self.dx_count += 1;
        Some(d)
    }
}

/// Rendezvous messages per block of [`In::overlaps_mark`]: two ranks whose
/// directions overlapped within the last one to two blocks of messages one
/// received from the other are exchanging. Whether this rank has sends in
/// flight at a given moment says less: two ranks exchanging windows of
/// messages finish their sends at different times, and a rank whose sends
/// are done still receives the end of the peer's window in an exchange
/// whose copying it shared (4 MiB bibw on a 2-vCPU Intel Xeon VM: most
/// streams of a window of 64 began after the receiver's own sends were all
/// done, and were weighed as one-way streams, by this side's copy alone).
/// Merely having sent to the peer says too much: a ping-pong sends between
/// every two messages it receives, and weighed by both sides' copying its
/// pipelined two-copy (whose two copies overlap on two idle CPUs) looked
/// twice as dear as it is; 16 MiB latency then went by single copy, 2190
/// us against 1490 two-copy on a 16-vCPU Intel Xeon VM, where Open MPI
/// took 1620.
pub(crate) const EXCHANGE_BLOCK: u64 = 64;

/// What an unexpected message holds until a receive matches it.
pub(crate) enum Payload {
    /// An inline message, kept without a heap allocation.
    Small([u8; INLINE_BYTES]),
    Data(Vec<u8>),
    Rts {
        msg_id: u64,
        /// The sender allows single copy from `addr`.
        cma: bool,
        addr: u64,
        /// The protocol the sender asks for (`Comm::pair_choice`).
        ask: Option<Rdv>,
        /// An answer (`Comm::answers`): the ask is followed at any size.
        answer: bool,
    },
}

/// What posting a receive did: took its message at once (no request was
/// made) or left a pending request.
#[derive(Debug)]
pub enum Posted {
    Taken(Status),
    Pending(Request),
}

/// What [`Comm::take_now_ctx`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Take {
    /// Took the message (no request).
    Taken(Status),
    /// The message is not there yet: try again, or post.
    NotYet,
    /// Cannot take without breaking MPI order: post the receive.
    Post,
}

/// A message that arrived before a matching receive was posted.
pub(crate) struct Unexp {
    pub(crate) src: usize,
    pub(crate) tag: i32,
    pub(crate) ctx: u16,
    pub(crate) len: usize,
    pub(crate) payload: Payload,
}

impl Key {
    /// The key of control cells (never matched).
    pub(crate) const CONTROL: Key = Key { tag: 0, ctx: 0 };
}

impl Unexp {
    pub(crate) fn key(&self) -> Key {
        Key {
            tag: self.tag,
            ctx: self.ctx,
        }
    }
}

impl Comm {
    /// Starts receiving into `cap` bytes at `ptr` from `src` (or
    /// [`ANY_SOURCE`]) with `tag` (or [`ANY_TAG`]).
    ///
    /// # Safety
    /// `ptr` must stay valid for `cap` writable bytes until the request
    /// completes, and not be accessed meanwhile.
    pub unsafe fn irecv_raw(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        tag: i32,
    ) -> Result<Request> {
        // SAFETY: forwarded contract.
        unsafe { self.irecv_ctx(ptr, cap, src, tag, 0) }
    }

    /// [`Comm::irecv_raw`] in matching context `ctx` (only messages sent
    /// in the same context match).
    ///
    /// # Safety
    /// As [`Comm::irecv_raw`].
    pub unsafe fn irecv_ctx(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        tag: i32,
        ctx: u16,
    ) -> Result<Request> {
        // SAFETY: forwarded contract.
        let posted = unsafe { self.irecv_or_take_ctx(ptr, cap, src, tag, ctx)? };
        Ok(self.request_for(posted, ptr, cap, src, Key { tag, ctx }))
    }

    pub(crate) unsafe fn irecv_inner(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        key: Key,
    ) -> Result<Request> {
        // SAFETY: forwarded contract.
        let posted = unsafe { self.irecv_or_take(ptr, cap, src, key)? };
        Ok(self.request_for(posted, ptr, cap, src, key))
    }

    /// The request of a posted receive: its own when pending, else one
    /// completed with the status of the message taken at posting (for
    /// callers that want a request either way).
    fn request_for(&mut self, p: Posted, ptr: *mut u8, cap: usize, src: i32, key: Key) -> Request {
        match p {
            Posted::Pending(r) => r,
            Posted::Taken(st) => {
                let idx = self.alloc(ReqKind::Recv {
                    src,
                    key,
                    buf: ptr,
                    cap,
                });
                self.complete(idx, st, None);
                Request {
                    idx,
                    gen: self.reqs[idx as usize].gen,
                }
            }
        }
    }

    /// Posts a receive, or takes its message at once when it is already
    /// here (then no request is made): the work of `irecv_ctx`, once.
    ///
    /// # Safety
    /// As [`Comm::irecv_raw`].
    pub unsafe fn irecv_or_take_ctx(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        tag: i32,
        ctx: u16,
    ) -> Result<Posted> {
        if tag < ANY_TAG {
            return Err(Error::Invalid(format!("tag {tag} must be >= 0 or ANY_TAG")));
        }
        // SAFETY: forwarded contract.
        unsafe { self.irecv_or_take(ptr, cap, src, Key { tag, ctx }) }
    }

    /// Takes the next message of channel `src` into `ptr` when it is
    /// already there and would be this receive's match in MPI order: no
    /// receive is posted and nothing is unexpected, so the channel's next
    /// cell is the oldest message nothing else can claim. Never posts,
    /// drains or waits: [`Take::NotYet`] when the channel's next cell is
    /// not written yet, [`Take::Post`] when the receive must be posted
    /// instead (posted or unexpected receives ahead, any source or tag,
    /// a next cell that is another receive's, a rendezvous or too long,
    /// a broken communicator, or arguments posting will reject). Lets a
    /// caller that waits for a window of receives take each message as it
    /// arrives without a request (the MPI accelerator's lazily posted
    /// receives).
    ///
    /// # Safety
    /// `ptr` must be valid for `cap` writable bytes during the call.
    #[inline]
    pub unsafe fn take_now_ctx(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        tag: i32,
        ctx: u16,
    ) -> Take {
        if src < 0
            || src as usize >= self.size
            || tag < 0
            || !self.posted.is_empty()
            || !self.unexp.is_empty()
            || self.broken.is_some()
        {
            return Take::Post;
        }
        let s = src as usize;
        // take_next looks again, at the line this look brought in.
        if self.ins[s].head_cell().is_none() {
            return Take::NotYet;
        }
        // SAFETY: forwarded contract.
        match unsafe { self.take_next(ptr, cap, s, Key { tag, ctx }) } {
            Some(st) => {
                self.prefetch_next_cells(s);
                Take::Taken(st)
            }
            // Another receive's message, a rendezvous or a truncation: the
            // posted receive's matching handles each.
            None => Take::Post,
        }
    }

    pub(crate) unsafe fn irecv_or_take(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        key: Key,
    ) -> Result<Posted> {
        // Posting does no single copy read: those it matches wait for the
        // next progress (run_deferred_reads).
        self.defer_reads = true;
        // SAFETY: forwarded contract.
        let r = unsafe { self.irecv_or_take_posting(ptr, cap, src, key) };
        self.defer_reads = false;
        r
    }

    unsafe fn irecv_or_take_posting(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        key: Key,
    ) -> Result<Posted> {
        if src != ANY_SOURCE {
            if src < 0 {
                return Err(Error::Invalid(format!(
                    "source {src} must be a rank or ANY_SOURCE"
                )));
            }
            self.check_peer(src as usize, "source")?;
        }
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        // A receive from one source may take that channel's next message
        // at once when it is already there (a window of receives behind a
        // faster sender: no posting, matching and draining later).
        // Receives posted before this one come first: the channel's
        // published cells go to them until none is left waiting (the rest
        // stays in the channel); what they did not match is unexpected,
        // and is looked at below before the channel's next cell, which is
        // then the oldest message from `src` that nothing matched (MPI
        // order).
        if src >= 0 && !self.posted.is_empty() {
            self.drain_to_posted(src as usize)?;
        }
        // No scan (nor its iterator's set-up) while nothing is unexpected:
        // the common case of a window of receives.
        let found = if self.unexp.is_empty() {
            None
        } else {
            self.unexp
                .iter()
                .position(|u| matches(src, key, u.src, u.key()))
        };
        if let Some(i) = found {
            let u = &self.unexp[i];
            if u.len <= cap && !matches!(u.payload, Payload::Rts { .. }) {
                let u = self.unexp.remove(i).expect("index from position");
                let data = match &u.payload {
                    Payload::Small(b) => b.as_ptr(),
                    Payload::Data(v) => v.as_ptr(),
                    Payload::Rts { .. } => unreachable!("checked above"),
                };
                if u.len <= INLINE_BYTES {
                    // SAFETY: ptr holds cap >= len bytes (contract, checked);
                    // data holds len.
                    unsafe { copy_small(ptr, data, u.len) };
                } else {
                    self.before_long_copy(u.len);
                    // SAFETY: as above.
                    unsafe { copy_plain(ptr, data, u.len) };
                }
                if let Payload::Data(v) = u.payload {
                    self.spare.give_back(v);
                }
                return Ok(Posted::Taken(Status {
                    source: u.src as i32,
                    tag: u.tag,
                    count: u.len,
                }));
            }
        }
        if found.is_none() && src >= 0 && self.posted.is_empty() {
            // SAFETY: forwarded contract (cap writable bytes at ptr).
            if let Some(st) = unsafe { self.take_next(ptr, cap, src as usize, key) } {
                self.prefetch_next_cells(src as usize);
                return Ok(Posted::Taken(st));
            }
        }
        let idx = self.alloc(ReqKind::Recv {
            src,
            key,
            buf: ptr,
            cap,
        });
        let req = Request {
            idx,
            gen: self.reqs[idx as usize].gen,
        };
        match found {
            None => self.posted.push_back(idx),
            // A rendezvous, or a message that does not fit (truncation).
            Some(i) => {
                let u = self.unexp.remove(i).expect("index from position");
                match u.payload {
                    Payload::Small(b) => self.deliver(idx, u.src, u.tag, b.as_ptr(), u.len),
                    Payload::Data(v) => {
                        self.deliver(idx, u.src, u.tag, v.as_ptr(), v.len());
                        self.spare.give_back(v);
                    }
                    Payload::Rts {
                        msg_id,
                        cma,
                        addr,
                        ask,
                        answer,
                    } => {
                        self.start_rdv(idx, u.src, u.tag, u.len, msg_id, cma, addr, ask, answer)?
                    }
                }
            }
        }
        Ok(Posted::Pending(req))
    }

    /// Copies a complete message into receive request `idx`.
    pub(crate) fn deliver(&mut self, idx: u32, src: usize, tag: i32, data: *const u8, len: usize) {
        let Some((buf, st)) = self.fit(idx, src, tag, len) else {
            return;
        };
        if len <= INLINE_BYTES {
            // SAFETY: buf holds cap >= len bytes (irecv contract, checked by
            // fit); data holds len.
            unsafe { copy_small(buf, data, len) };
        } else {
            self.before_long_copy(len);
            // SAFETY: as above.
            unsafe { copy_plain(buf, data, len) };
        }
        self.complete(idx, st, None);
    }

    /// The buffer of receive request `idx` and the status of a `len`-byte
    /// message from `src` with `tag`. A message longer than the buffer
    /// completes the request with a truncation error (the message counts as
    /// received) and gives `None`.
    fn fit(&mut self, idx: u32, src: usize, tag: i32, len: usize) -> Option<(*mut u8, Status)> {
        let (buf, cap) = self.recv_buf(idx);
        let st = Status {
            source: src as i32,
            tag,
            count: len,
        };
        if len > cap {
            let e = Error::Truncated {
                len,
                cap,
                peer: src as i32,
                tag,
            };
            self.complete(idx, st, Some(e));
            return None;
        }
        Some((buf, st))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_rdv(
        &mut self,
        idx: u32,
        src: usize,
        tag: i32,
        len: usize,
        msg_id: u64,
        cma: bool,
        addr: u64,
        ask: Option<Rdv>,
        answer: bool,
    ) -> Result<()> {
        let Some((buf, st)) = self.fit(idx, src, tag, len) else {
            // FIN releases the sender without data.
            self.queue_ctrl(src, K_FIN, msg_id);
            return Ok(());
        };
        if len == 0 {
            // A synchronous empty message: nothing to copy, FIN releases
            // the sender now that the receive has matched.
            self.complete(idx, st, None);
            self.queue_ctrl(src, K_FIN, msg_id);
        } else {
            let sending = self.sending_large_to(src);
            let ch = &mut self.ins[src];
            ch.overlaps += u64::from(sending);
            ch.rdv_in += 1;
            if ch.rdv_in % EXCHANGE_BLOCK == 0 {
                ch.overlaps_mark = ch.overlaps_mark_next;
                ch.overlaps_mark_next = ch.overlaps;
            }
            let allowed = Allowed {
                cma: cma && !ch.cma_failed,
                stream: len as u64 >= ch.plan.stream_out_min,
            };
            // On a crowded node a message of an exchange (this rank sends
            // to `src` too, or did within the last block or two of
            // messages) longer than the channel's slot ring goes by single
            // copy, unmeasured: by two-copy each rank must refill its
            // peer's ring while the peer empties it, both directions on
            // CPUs that more ranks share, a hand-over per ring that the
            // chooser's copy times (`stream_done`) do not see. Not one-way
            // streams (a bcast's), where the measured choice was the
            // faster, nor two ranks bound to one PU (single copy: 4 MiB
            // bibw faster, 16 MiB slower). docs/transport.md, "Choosing
            // the rendezvous protocol per message".
            let exchanging = sending || ch.overlapped_lately();
            let past_ring = self.crowded
                && allowed.cma
                && ch.plan.adaptive != 0
                && len as u64 > ch.plan.ring_bytes()
                && exchanging;
            let planned = if past_ring || (allowed.cma && len as u64 >= ch.plan.cma_threshold) {
                Rdv::Cma
            } else if allowed.stream {
                Rdv::Stream
            } else {
                Rdv::TwoCopy
            };
            let choice = allowed.cma || allowed.stream;
            let adaptive = choice
                && ch.plan.adaptive != 0
                && !past_ring
                && len as u64 > ch.plan.exchange_eager_max;
            // The lower rank of an exchange chooses for the pair
            // (`Comm::pair_choice`): this rank follows, without timing.
            // An answer (`Comm::answers`) asks for single copy: followed,
            // also within the eager limit, where nothing is adaptive.
            let asked = ask.filter(|&p| (adaptive || answer) && allowed.has(p));
            // An exchange as `first_fragment` (progress.rs) sees one: sends
            // of its own to the sender under way, or the two directions
            // overlapped within the last block or two of messages. Not on a
            // crowded node: there every two-copy stream is weighed by its
            // copying (`stream_done`), exchange or not, so one set of
            // estimates measures one thing; split, each set learned from
            // half the messages and explored on its own (4 ranks on the
            // 2-vCPU Intel Xeon VM, 1 MiB allreduce and bcast: 1.08-1.12x
            // the time of one set).
            let exchange = !self.crowded && exchanging;
            let pick = (adaptive && asked.is_none())
                .then(|| ch.chooser.pick(len, planned, allowed, exchange));
            self.rdv_counts[2] += u64::from(pick.is_some_and(|p| p.explore));
            let answered = asked.is_some() && answer;
            self.rdv_followed += u64::from(asked.is_some() && !answered);
            self.rdv_answers += u64::from(answered);
            let proto = asked.or(pick.map(|p| p.proto)).unwrap_or(planned);
            if proto == Rdv::Cma && self.defer_reads {
                self.deferred.push_back(DeferredRead {
                    idx,
                    src,
                    len,
                    msg_id,
                    addr,
                    pick,
                    st,
                });
                return Ok(());
            }
            if proto == Rdv::Cma && self.read_single_copy(src, buf, addr, len, msg_id, pick)? {
                self.rdv_counts[1] += 1;
                self.complete(idx, st, None);
                self.queue_ctrl(src, K_FIN, msg_id);
                return Ok(());
            }
            self.start_two_copy(idx, src, st, len, msg_id, pick, proto == Rdv::Stream);
        }
        Ok(())
    }

    /// Single copy reads matched while receives were being posted: done
    /// now, in order. A receive that matches a message already announced
    /// (a window of receives behind a faster sender) used to read it inside
    /// the posting call; a rank posting its receives and then its sends, as
    /// a bidirectional exchange does, then read the peer's whole window
    /// before its own sends were announced, while the peer waited for them:
    /// the two ranks took turns instead of reading at once (bibw at the
    /// one-way rate, 0.52-0.66 of the MPIs' on a 2-vCPU Intel Xeon VM).
    pub(crate) fn run_deferred_reads(&mut self) -> Result<()> {
        while let Some(d) = self.deferred.pop_front() {
            let (buf, _) = self.recv_buf(d.idx);
            if self.read_single_copy(d.src, buf, d.addr, d.len, d.msg_id, d.pick)? {
                self.rdv_counts[1] += 1;
                self.complete(d.idx, d.st, None);
                self.queue_ctrl(d.src, K_FIN, d.msg_id);
            } else {
                self.start_two_copy(d.idx, d.src, d.st, d.len, d.msg_id, d.pick, false);
            }
            self.activity += 1;
        }
        Ok(())
    }

    /// Starts receiving rendezvous message `msg_id` into request `idx` by
    /// two-copy (streaming stores out of the slots with `stream`): a CTS
    /// to the sender, which then fills the slots.
    #[allow(clippy::too_many_arguments)]
    fn start_two_copy(
        &mut self,
        idx: u32,
        src: usize,
        st: Status,
        len: usize,
        msg_id: u64,
        pick: Option<Pick>,
        stream: bool,
    ) {
        self.rdv_counts[0] += 1;
        self.rdv_streamed += u64::from(stream);
        self.reqs[idx as usize].status = st;
        self.ins[src].streams.push(InStream {
            msg_id,
            req: idx,
            got: 0,
            len,
            t0: Instant::now(),
            // Read only for a timed stream (first_fragment looks at no other).
            sender_cma_reads: if pick.is_some() {
                self.seg.rank_slot(src).cma_reads.0.load(Ordering::Relaxed)
            } else {
                0
            },
            // A failed single copy falls back to (and is timed as) two-copy.
            pick: pick.map(|p| Pick {
                proto: if stream { Rdv::Stream } else { Rdv::TwoCopy },
                ..p
            }),
            stream,
            copy_ns: 0,
            copy_in_ns: 0,
            exchange: false,
            sends_at_start: self.outs[src].next_msg,
        });
        // Only a stream whose cost goes to the chooser needs the sender's
        // copy times (two clock reads per fragment on its side).
        self.queue_ctrl(
            src,
            if pick.is_some() { K_CTS_TIMED } else { K_CTS },
            msg_id,
        );
    }

    /// Reads `len` bytes of `src`'s message `msg_id` at `addr` into `buf`
    /// with single copy (helped by the sender from the plan's `help_min`,
    /// `Comm::help_wanted`), reporting the time to the channel's chooser. `Ok(false)`: the read
    /// failed (other than by the peer's death), which is said once; the
    /// channel falls back to two-copy, which rewrites the whole buffer.
    fn read_single_copy(
        &mut self,
        src: usize,
        buf: *mut u8,
        addr: u64,
        len: usize,
        msg_id: u64,
        pick: Option<Pick>,
    ) -> Result<bool> {
        let chunk = self.ins[src].plan.cma_chunk as usize;
        self.before_long_copy(len);
        let t0 = Instant::now();
        let r = if self.help_wanted(src, len) {
            self.read_helped(src, buf, addr, len, msg_id)?
        } else {
            // SAFETY: buf holds cap >= len writable bytes (irecv contract).
            unsafe { crate::cma::read(self.pids[src], buf, addr, len, chunk) }
        };
        match r {
            Ok(()) => {
                if let Some(p) = pick {
                    let ns = t0.elapsed().as_nanos() as u64;
                    self.ins[src].chooser.record(len, p, ns);
                }
                // Only this rank writes its count (see RankSlot::cma_reads).
                let count = &self.seg.rank_slot(self.rank).cma_reads.0;
                count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                Ok(true)
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                Err(self.vanished(src, "process vanished during single copy"))
            }
            Err(e) => {
                crate::say!(
                    "topocomm: rank {}: single copy from rank {src} failed ({e}); two-copy from this rank from now on",
                    self.rank
                );
                self.ins[src].cma_failed = true;
                Ok(false)
            }
        }
    }

    pub(crate) fn match_posted(&mut self, src: usize, got: Key) -> Option<u32> {
        let i = self.posted.iter().position(|&idx| {
            matches!(self.reqs[idx as usize].kind,
                ReqKind::Recv { src: s, key, .. } if matches(s, key, src, got))
        })?;
        // The head in the common case (receives matched in posting order):
        // pop_front skips remove's general shifting.
        if i == 0 {
            self.posted.pop_front()
        } else {
            self.posted.remove(i)
        }
    }

    /// Cancels receive `r` if no message has matched it yet: returns true
    /// when it was cancelled (the handle is then released), false when it
    /// matched (complete it with a wait or test as usual).
    pub fn cancel_recv(&mut self, r: Request) -> Result<bool> {
        self.check_req(&r)?;
        if r.idx == DONE_IDX || !matches!(self.reqs[r.idx as usize].kind, ReqKind::Recv { .. }) {
            return Ok(false);
        }
        match self.posted.iter().position(|&i| i == r.idx) {
            Some(k) => {
                self.posted.remove(k);
                let q = &mut self.reqs[r.idx as usize];
                q.live = false;
                self.free.push(r.idx);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Releases the receiver's current slot (ordering 3).
    pub(crate) fn release_slot(&mut self, src: usize) {
        let i = &mut self.ins[src];
        i.frags_done += 1;
        // SAFETY: ctrl points into the mapping; we are its only writer.
        unsafe { (*i.ctrl).frags_done.store(i.frags_done, Ordering::Release) };
    }

    pub(crate) fn cur_slot(&self, src: usize) -> *const u8 {
        let i = &self.ins[src];
        // SAFETY: slot index < depth, inside the slot area.
        unsafe {
            i.slots
                .add(((i.frags_done % i.plan.depth) * i.plan.fragment) as usize)
        }
    }

    /// Receives into `buf`; a longer message is a `Truncated` error.
    pub fn recv(&mut self, buf: &mut [u8], src: i32, tag: i32) -> Result<Status> {
        // SAFETY: `buf` is exclusively borrowed for the whole call.
        unsafe { self.recv_ctx(buf.as_mut_ptr(), buf.len(), src, tag, 0, None) }
            .map(|s| s.expect("no time limit"))
    }

    /// Blocking receive in context `ctx`, waiting at most `budget` (then
    /// `Ok(None)`, nothing received and nothing left posted) or, with no
    /// budget, until the message arrives.
    ///
    /// # Safety
    /// `ptr` must be valid for `cap` writable bytes during the call.
    pub unsafe fn recv_ctx(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        tag: i32,
        ctx: u16,
        budget: Option<std::time::Duration>,
    ) -> Result<Option<Status>> {
        // SAFETY: forwarded contract.
        if let Some(st) = unsafe { self.recv_now_ctx(ptr, cap, src, tag, ctx) } {
            return Ok(Some(st));
        }
        // SAFETY: forwarded contract.
        unsafe { self.recv_posted_ctx(ptr, cap, src, tag, ctx, budget) }
    }

    /// The latency path of [`Comm::recv_ctx`] alone: a receive from one
    /// source with a tag, when nothing posted or unexpected comes before
    /// it, spins a bounded time on the channel's next cell and takes an
    /// inline or eager message straight into `ptr`; `None` when it did
    /// not (nothing was received: [`Comm::recv_posted_ctx`] then does the
    /// rest). Split out so that a caller converts its time budget only
    /// when the message did not come at once (the C API's `tc_recv_x`).
    ///
    /// # Safety
    /// `ptr` must be valid for `cap` writable bytes during the call.
    #[inline]
    pub unsafe fn recv_now_ctx(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        tag: i32,
        ctx: u16,
    ) -> Option<Status> {
        let key = Key { tag, ctx };
        let direct = src >= 0 && (src as usize) < self.size && tag >= 0;
        if direct
            && self.posted.is_empty()
            && self.broken.is_none()
            && (self.unexp.is_empty()
                || !self.unexp.iter().any(|u| matches(src, key, u.src, u.key())))
        {
            // SAFETY: forwarded contract.
            return unsafe { self.recv_fast(ptr, cap, src as usize, key) };
        }
        None
    }

    /// [`Comm::recv_ctx`] without its latency path: posts the receive and
    /// waits for it (at most `budget`, then `Ok(None)` with nothing
    /// received and nothing left posted).
    ///
    /// # Safety
    /// `ptr` must be valid for `cap` writable bytes during the call.
    pub unsafe fn recv_posted_ctx(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        tag: i32,
        ctx: u16,
        budget: Option<std::time::Duration>,
    ) -> Result<Option<Status>> {
        // SAFETY: forwarded contract; the request is waited for, or
        // cancelled when the budget runs out, before returning.
        let r = unsafe { self.irecv_ctx(ptr, cap, src, tag, ctx)? };
        match budget {
            None => self.wait(r).map(Some),
            Some(b) => match self.wait_for(r, b)? {
                Some(st) => Ok(Some(st)),
                None if self.cancel_recv(r)? => Ok(None),
                // Matched meanwhile: the data is on its way.
                None => self.wait(r).map(Some),
            },
        }
    }

    /// Latency path of a blocking receive: spins on the next cell of one
    /// channel and takes an inline or eager message with the wanted tag
    /// straight into `buf`, with no request. Nothing is posted and nothing
    /// matching is queued (checked by the caller), and only the channel's
    /// next cell is taken, so MPI order holds. Anything else (another kind
    /// or tag, sends to push, a long wait) returns `None` and the general
    /// engine takes over.
    ///
    /// # Safety
    /// `ptr` must be valid for `cap` writable bytes.
    unsafe fn recv_fast(&mut self, ptr: *mut u8, cap: usize, s: usize, key: Key) -> Option<Status> {
        // Within the waiting policy's spin phase (short when a peer shares
        // our PU: spinning would only keep it from running), and no longer
        // than a heartbeat look when CPUs may be shared: the general wait
        // then watches whether the sender runs at all.
        if self.peer_stalled(s) {
            return None;
        }
        let turns = if self.watch_peers { 128 } else { 2000 };
        for _ in 0..crate::wait::spin().min(turns) {
            if self.ins[s].head_cell().is_some() {
                // SAFETY: forwarded contract.
                return unsafe { self.take_next(ptr, cap, s, key) };
            }
            if !self.pending_outs.is_empty() {
                return None;
            }
            std::hint::spin_loop();
        }
        None
    }

    /// Takes the next cell of the channel from `s` straight into `ptr`
    /// when it is a published inline or eager message with key `key` that
    /// fits in `cap` bytes; anything else (no cell yet, another kind or
    /// key, truncation) is left for the engine and gives `None`. The
    /// caller makes sure that no posted receive or unexpected message
    /// comes before (MPI order).
    ///
    /// # Safety
    /// `ptr` must be valid for `cap` writable bytes.
    #[inline(always)]
    pub(crate) unsafe fn take_next(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        s: usize,
        key: Key,
    ) -> Option<Status> {
        let pos = self.ins[s].tail;
        let c = self.ins[s].head_cell()?;
        // SAFETY: a published cell of the ring, or this channel's copy of a
        // duplex message; either stays as it is until the tail moves on.
        let c = unsafe { &*c };
        let len = c.len as usize;
        if (c.kind != K_INLINE && c.kind != K_EAGER)
            || c.tag != key.tag
            || c.ctx != key.ctx
            || len > cap
        {
            return None;
        }
        let mut cells = 1;
        if c.kind == K_INLINE {
            if len > INLINE_MAX_BYTES {
                return None; // the engine reports it (drain_cells)
            }
            cells = inline_cells(len);
            // SAFETY: c is the published cell at pos; len <= cap (checked)
            // and <= INLINE_MAX_BYTES.
            unsafe { self.ins[s].copy_inline(c, pos, len, ptr) };
        } else {
            self.before_long_copy(len);
            let data = self.cur_slot(s);
            // SAFETY: the slot holds len <= fragment published bytes; ptr
            // holds cap >= len.
            unsafe { copy_plain(ptr, data, len) };
            self.release_slot(s);
        }
        self.taken += 1;
        self.taken_from = s;
        let i = &mut self.ins[s];
        i.tail = pos + cells;
        // A duplex message used no cell: the tail goes back to the sender
        // with the next cell taken, or after half a ring of duplex ones.
        if i.dx_taken != pos + 1 || i.tail - i.published >= RING / 2 {
            i.published = i.tail;
            // SAFETY: ctrl points into the mapping; we are its only writer.
            // Release: ordering 2.
            unsafe { (*i.ctrl).tail.store(i.tail, Ordering::Release) };
        }
        self.activity += 1;
        Some(Status {
            source: s as i32,
            tag: key.tag,
            count: len,
        })
    }

    /// Starts fetching the cells after the one a receive just took at
    /// posting from channel `s`: a window of receives behind a faster
    /// sender finds them written, and their cache misses then overlap with
    /// the work of this call and the next instead of coming one per call
    /// (8-byte message rate under the accelerator, near state: 19.9 ->
    /// 22.3 Mmsg/s). Not on the blocking receive's latency path: there the
    /// next cell is not written yet, and the extra requests slowed the
    /// reply (8-byte ping-pong 0.074 -> 0.081 us).
    #[inline(always)]
    fn prefetch_next_cells(&self, s: usize) {
        let i = &self.ins[s];
        for k in 0..PREFETCH_CELLS {
            // SAFETY: the index is taken modulo RING: inside the ring.
            prefetch_read(unsafe { i.cells.add(((i.tail + k) % RING) as usize) }.cast());
        }
    }

    /// Non-blocking probe: the status of the first matching message that has
    /// arrived and is not yet received.
    pub fn iprobe(&mut self, src: i32, tag: i32) -> Result<Option<Status>> {
        self.iprobe_ctx(src, tag, 0)
    }

    /// [`Comm::iprobe`] in matching context `ctx`.
    pub fn iprobe_ctx(&mut self, src: i32, tag: i32, ctx: u16) -> Result<Option<Status>> {
        self.progress()?;
        let key = Key { tag, ctx };
        Ok(self
            .unexp
            .iter()
            .find(|u| matches(src, key, u.src, u.key()))
            .map(|u| Status {
                source: u.src as i32,
                tag: u.tag,
                count: u.len,
            }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solo() -> Comm {
        std::env::remove_var("TOPOCOMM_SHM_FD");
        Comm::init().expect("job of one rank")
    }

    #[test]
    fn a_single_copy_matched_at_posting_is_read_at_the_next_progress() {
        let mut c = solo();
        // A job of one rank sends to itself by two-copy; here its channel
        // reads by single copy, as between two ranks.
        if let Err(e) = crate::cma::probe_fork() {
            eprintln!("notice: single copy unavailable here ({e}); test skipped");
            return;
        }
        c.cma_ok = true;
        for plan in [&mut c.outs[0].plan, &mut c.ins[0].plan] {
            (plan.cma, plan.cma_threshold, plan.adaptive) = (1, 32 << 10, 0);
        }
        let n = 1 << 20;
        let data: Vec<u8> = (0..n).map(|k| (k % 251) as u8).collect();
        // SAFETY: `data` outlives the wait below.
        let s = unsafe { c.isend_raw(data.as_ptr(), n, 0, 7).unwrap() };
        // The announcement becomes unexpected: no receive is posted yet.
        c.progress().unwrap();
        let mut got = vec![0u8; n];
        // SAFETY: `got` outlives the wait below.
        let r = unsafe { c.irecv_raw(got.as_mut_ptr(), n, 0, 7).unwrap() };
        let deferred_at_posting = c.deferred.len();
        let single_before = c.rdv_counts[1];
        c.wait(r).unwrap();
        c.wait(s).unwrap();
        assert_eq!(got, data);
        assert!(c.deferred.is_empty());
        // Posting matched the message, and its single copy read waited for
        // the wait.
        assert_eq!(deferred_at_posting, 1);
        assert_eq!(c.rdv_counts[1] - single_before, 1, "{:?}", c.rdv_counts);
    }

    /// On a crowded node an exchange's messages longer than the slot ring
    /// (4 x 64 KiB here) go by single copy though these rules start with
    /// two-copy; a one-way stream of the same size keeps the measured
    /// choice (its first message two-copy), and so does an exchange that
    /// fits in the ring. Every byte is checked.
    #[test]
    fn a_crowded_exchange_past_the_ring_is_read_by_single_copy() {
        if let Err(e) = crate::cma::probe_fork() {
            eprintln!("notice: single copy unavailable here ({e}); test skipped");
            return;
        }
        let rules = "[default]\neager_max = 16384\nfragment = 65536\ndepth = 4\ncma = true\ncma_threshold = 1125899906842624\n";
        crate::threads_job::job(2, Some(rules), |c| {
            // Whatever the machine's CPU count: the rule itself is tested.
            c.crowded = true;
            let peer = 1 - c.rank();
            let data = |n: usize, i: usize, r: usize| -> Vec<u8> {
                (0..n).map(|k| (k % 253 + i * 7 + r * 3) as u8).collect()
            };
            // (two-copy, single copy) received while `f` ran.
            let counted = |c: &mut Comm, f: &dyn Fn(&mut Comm)| {
                let [two, one, _] = c.rdv_counts;
                f(c);
                (c.rdv_counts[0] - two, c.rdv_counts[1] - one)
            };
            let exchange = |n: usize| {
                move |c: &mut Comm| {
                    for i in 0..6 {
                        let out = data(n, i, c.rank());
                        let mut got = vec![0u8; n];
                        // SAFETY: both buffers outlive the waits below.
                        let r = unsafe { c.irecv_raw(got.as_mut_ptr(), n, peer as i32, 1) };
                        // SAFETY: as above.
                        let s = unsafe { c.isend_raw(out.as_ptr(), n, peer, 1) };
                        c.wait(s.unwrap()).unwrap();
                        c.wait(r.unwrap()).unwrap();
                        assert!(got == data(n, i, peer), "exchange {i} of {n} bytes");
                    }
                }
            };
            let (two, one) = counted(c, &|c: &mut Comm| {
                for i in 0..4 {
                    let n = 1 << 20;
                    if c.rank() == 0 {
                        c.send(&data(n, i, 0), 1, 2).unwrap();
                    } else {
                        let mut got = vec![0u8; n];
                        c.recv(&mut got, 0, 2).unwrap();
                        assert!(got == data(n, i, 0), "one-way message {i}");
                    }
                }
            });
            // First: the two directions have not overlapped yet.
            if c.rank() == 1 {
                assert!(two >= 1, "one way: {two} two-copy, {one} single");
            }
            let (two, one) = counted(c, &exchange(1 << 20));
            // The first message may match before this rank's own send is
            // under way: not an exchange yet.
            assert!(
                two <= 1 && one >= 5,
                "past the ring: {two} two-copy, {one} single"
            );
            let (two, _) = counted(c, &exchange(128 << 10));
            assert!(two >= 1, "within the ring: no two-copy");
        });
    }

    #[test]
    fn self_messages_keep_order_per_tag_and_match_any_tag() {
        let mut c = solo();
        assert_eq!((c.rank(), c.size()), (0, 1));
        // Inline, eager and rendezvous sizes, queued as unexpected messages.
        let inline = INLINE_BYTES;
        let sizes = [0usize, 5, inline, inline + 1, 5000, 16384, 200_000];
        let mut bufs = Vec::new();
        let mut reqs = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let b: Vec<u8> = (0..n).map(|k| (k + i) as u8).collect();
            // SAFETY: `b` is kept alive in `bufs` until the wait_all below.
            reqs.push(unsafe { c.isend_raw(b.as_ptr(), n, 0, (i % 2) as i32).unwrap() });
            bufs.push(b);
        }
        let st = c
            .iprobe(0, 1)
            .unwrap()
            .expect("a tag-1 message has arrived");
        assert_eq!((st.tag, st.count), (1, 5));
        let mut out = vec![0u8; 300_000];
        // Tag 1 first: messages 1, 3, 5 in order.
        for i in [1usize, 3, 5] {
            let mut r = out.clone();
            // SAFETY: `r` is alive and untouched until the wait on the next line.
            let rq = unsafe { c.irecv_raw(r.as_mut_ptr(), r.len(), 0, 1).unwrap() };
            let st = c.wait(rq).unwrap();
            assert_eq!(st.count, sizes[i]);
            assert_eq!(&r[..st.count], &bufs[i][..]);
        }
        // Then ANY_TAG gets the rest in order: 0, 2, 4, 6.
        for i in [0usize, 2, 4, 6] {
            // SAFETY: `out` is alive and untouched until the wait below.
            let rq = unsafe {
                c.irecv_raw(out.as_mut_ptr(), out.len(), ANY_SOURCE, ANY_TAG)
                    .unwrap()
            };
            let st = c.wait(rq).unwrap();
            assert_eq!((st.source, st.tag, st.count), (0, 0, sizes[i]));
            assert_eq!(&out[..st.count], &bufs[i][..]);
        }
        c.wait_all(&reqs).unwrap();
        assert!(c.iprobe(ANY_SOURCE, ANY_TAG).unwrap().is_none());
    }

    #[test]
    fn a_receive_takes_the_next_message_only_after_earlier_receives_and_unexpected_ones() {
        let mut c = solo();
        let buf = |c: &mut Comm, tag: i32| -> (Request, Box<[u8; 8]>) {
            let mut b = Box::new([0u8; 8]);
            // SAFETY: the box is returned to the caller, which keeps it
            // until the request is waited for.
            let r = unsafe { c.irecv_raw(b.as_mut_ptr(), 8, 0, tag).unwrap() };
            (r, b)
        };
        // Nothing posted, nothing unexpected: a message already in the
        // channel is taken at posting (the receive is never queued).
        c.send(b"first", 0, 2).unwrap();
        let (r, b) = buf(&mut c, 2);
        assert!(c.posted.is_empty(), "taken from the channel at posting");
        assert_eq!(c.wait(r).unwrap().count, 5);
        assert_eq!(&b[..5], b"first");
        // A receive posted earlier (tag 9) waits; tag-1 messages arrive
        // behind it. The next tag-1 receive must still get them in order,
        // through the unexpected queue its posting fills.
        let (old, old_b) = buf(&mut c, 9);
        c.send(b"a", 0, 1).unwrap();
        c.send(b"b", 0, 1).unwrap();
        let (ra, ba) = buf(&mut c, 1);
        let (rb, bb) = buf(&mut c, 1);
        assert_eq!(c.wait(ra).unwrap().count, 1);
        assert_eq!(c.wait(rb).unwrap().count, 1);
        assert_eq!((ba[0], bb[0]), (b'a', b'b'));
        c.send(b"nine", 0, 9).unwrap();
        assert_eq!(c.wait(old).unwrap().count, 4);
        assert_eq!(&old_b[..4], b"nine");
        // The channel's next message has another tag: the receive is
        // posted and matched later; the other message waits for its own.
        c.send(b"three", 0, 3).unwrap();
        let (r4, b4) = buf(&mut c, 4);
        assert_eq!(c.posted.len(), 1, "tag 3 is not for a tag-4 receive");
        c.send(b"four", 0, 4).unwrap();
        assert_eq!(c.wait(r4).unwrap().count, 4);
        assert_eq!(&b4[..4], b"four");
        let (r3, b3) = buf(&mut c, 3);
        assert_eq!(c.wait(r3).unwrap().count, 5);
        assert_eq!(&b3[..5], b"three");
        // A message too long for the buffer is not taken at posting: the
        // receive fails with truncation as always.
        c.send(b"much too long", 0, 5).unwrap();
        let (r5, _b5) = buf(&mut c, 5);
        assert!(matches!(
            c.wait(r5),
            Err(Error::Truncated {
                len: 13,
                cap: 8,
                ..
            })
        ));
        assert!(c.iprobe(ANY_SOURCE, ANY_TAG).unwrap().is_none());
    }

    #[test]
    fn irecv_or_take_takes_at_posting_what_a_posted_receive_would_complete_with() {
        let mut c = solo();
        // Taken at posting: its status; else the posted receive is
        // cancelled again (nothing received) and None.
        let now = |c: &mut Comm, src: i32, tag: i32, b: &mut [u8]| -> Option<Status> {
            // SAFETY: b is writable for its length during the call, and a
            // receive left pending is cancelled before returning.
            match unsafe { c.irecv_or_take_ctx(b.as_mut_ptr(), b.len(), src, tag, 0) } {
                Ok(Posted::Taken(st)) => Some(st),
                Ok(Posted::Pending(r)) => {
                    assert!(c.cancel_recv(r).unwrap(), "not matched meanwhile");
                    None
                }
                Err(_) => None,
            }
        };
        let mut b = [0u8; 8];
        // Nothing there: nothing taken, nothing posted.
        assert!(now(&mut c, 0, 1, &mut b).is_none());
        assert!(c.posted.is_empty());
        // The channel's next message, when it matches.
        c.send(b"first", 0, 1).unwrap();
        let st = now(&mut c, 0, 1, &mut b).expect("the next message");
        assert_eq!((st.source, st.tag, st.count), (0, 1, 5));
        assert_eq!(&b[..5], b"first");
        // Another tag is next: not taken, and it stays the next message.
        c.send(b"two", 0, 2).unwrap();
        assert!(now(&mut c, 0, 3, &mut b).is_none());
        c.send(b"much too long", 0, 4).unwrap();
        let mut small = [0u8; 4];
        // SAFETY: `small` outlives the wait below.
        let rt = unsafe { c.irecv_raw(small.as_mut_ptr(), 2, 0, 2).unwrap() };
        assert!(c.wait(rt).is_err(), "tag 2 truncated into 2 bytes");
        // Too long for the buffer: posted, and its wait reports it.
        // SAFETY: `small` outlives the wait below.
        match unsafe { c.irecv_or_take_ctx(small.as_mut_ptr(), 4, 0, 4, 0) }.unwrap() {
            Posted::Pending(r) => assert!(matches!(
                c.wait(r),
                Err(Error::Truncated {
                    len: 13,
                    cap: 4,
                    ..
                })
            )),
            Posted::Taken(_) => panic!("a message longer than the buffer was taken"),
        }
        // A receive posted before comes first: messages go to it, and
        // only what it left is taken (from the unexpected queue).
        let mut old_b = Box::new([0u8; 8]);
        // SAFETY: the box lives until the wait below.
        let old = unsafe { c.irecv_raw(old_b.as_mut_ptr(), 8, 0, 9).unwrap() };
        c.send(b"a", 0, 5).unwrap();
        c.send(b"nine", 0, 9).unwrap();
        c.send(b"b", 0, 5).unwrap();
        // From any source, with a receive posted: the channel stays for
        // the posted receive's progress, nothing is taken.
        assert!(now(&mut c, ANY_SOURCE, 5, &mut b).is_none());
        // From rank 0: the drain gives "nine" to the old receive, "a"
        // becomes unexpected and is taken, "b" stays in the channel.
        assert_eq!(now(&mut c, 0, 5, &mut b).unwrap().count, 1);
        assert_eq!(b[0], b'a', "oldest first");
        assert_eq!(c.wait(old).unwrap().count, 4);
        assert_eq!(&old_b[..4], b"nine");
        // Any tag is never taken from the channel itself (as irecv).
        assert!(now(&mut c, 0, ANY_TAG, &mut b).is_none());
        // SAFETY: `b` outlives the wait below.
        let rb = unsafe { c.irecv_raw(b.as_mut_ptr(), 8, 0, ANY_TAG).unwrap() };
        assert_eq!(c.wait(rb).unwrap().tag, 5);
        assert_eq!(b[0], b'b');
        // Arguments irecv refuses: errors, nothing taken.
        c.send(b"x", 0, 6).unwrap();
        assert!(now(&mut c, 7, 6, &mut b).is_none());
        assert!(now(&mut c, -3, 6, &mut b).is_none());
        assert!(now(&mut c, 0, -2, &mut b).is_none());
        assert_eq!(now(&mut c, 0, 6, &mut b).unwrap().count, 1);
        assert!(c.iprobe(ANY_SOURCE, ANY_TAG).unwrap().is_none());
    }

    #[test]
    fn take_now_takes_only_the_message_a_receive_posted_now_would_take_at_once() {
        let mut c = solo();
        let take = |c: &mut Comm, src: i32, tag: i32, b: &mut [u8]| -> Take {
            // SAFETY: b is writable for its length during the call.
            unsafe { c.take_now_ctx(b.as_mut_ptr(), b.len(), src, tag, 0) }
        };
        let mut b = [0u8; 8];
        // Nothing there yet: try again; nothing posted or consumed.
        assert_eq!(take(&mut c, 0, 1, &mut b), Take::NotYet);
        assert!(c.posted.is_empty());
        c.send(b"first", 0, 1).unwrap();
        let Take::Taken(st) = take(&mut c, 0, 1, &mut b) else {
            panic!("the channel's next message matches");
        };
        assert_eq!((st.source, st.tag, st.count), (0, 1, 5));
        assert_eq!(&b[..5], b"first");
        // The next cell is another receive's, or too long: post instead,
        // and the message stays the channel's next.
        c.send(b"two", 0, 2).unwrap();
        assert_eq!(take(&mut c, 0, 3, &mut b), Take::Post);
        let mut small = [0u8; 2];
        assert_eq!(take(&mut c, 0, 2, &mut small), Take::Post);
        assert_eq!(c.recv(&mut b, 0, 2).unwrap().count, 3);
        // Any source, any tag, bad arguments: post (posting reports them).
        c.send(b"x", 0, 6).unwrap();
        assert_eq!(take(&mut c, ANY_SOURCE, 6, &mut b), Take::Post);
        assert_eq!(take(&mut c, 0, ANY_TAG, &mut b), Take::Post);
        assert_eq!(take(&mut c, 7, 6, &mut b), Take::Post);
        assert_eq!(take(&mut c, -3, 6, &mut b), Take::Post);
        // A posted receive comes first: post, even for a message that
        // would match this one.
        let mut old_b = Box::new([0u8; 8]);
        // SAFETY: the box lives until the wait below.
        let old = unsafe { c.irecv_raw(old_b.as_mut_ptr(), 8, 0, 9).unwrap() };
        assert_eq!(take(&mut c, 0, 6, &mut b), Take::Post);
        c.send(b"nine", 0, 9).unwrap();
        assert_eq!(c.wait(old).unwrap().count, 4);
        // The drain for the old receive left "x" unexpected: post, so the
        // unexpected queue is looked at (MPI order).
        assert!(!c.unexp.is_empty());
        assert_eq!(take(&mut c, 0, 6, &mut b), Take::Post);
        assert_eq!(c.recv(&mut b, 0, 6).unwrap().count, 1);
        assert_eq!(take(&mut c, 0, 6, &mut b), Take::NotYet);
        assert!(c.iprobe(ANY_SOURCE, ANY_TAG).unwrap().is_none());
    }

    #[test]
    fn truncation_is_an_error_and_consumes_the_message() {
        let mut c = solo();
        let big = vec![1u8; 100_000];
        for n in [30usize, 1000, 100_000] {
            // SAFETY: n <= big.len(); `big` is neither freed nor modified
            // before the wait for `s` below.
            let s = unsafe { c.isend_raw(big.as_ptr(), n, 0, 3).unwrap() };
            let mut small = [0u8; 8];
            let e = c.recv(&mut small, 0, 3).unwrap_err();
            assert!(
                matches!(e, Error::Truncated { len, cap: 8, .. } if len == n),
                "{e}"
            );
            c.wait(s).unwrap();
        }
        c.send(b"ok", 0, 4).unwrap();
        let mut b = [0u8; 2];
        assert_eq!(c.recv(&mut b, 0, 4).unwrap().count, 2);
    }

    #[test]
    fn posted_receives_match_in_posting_order_and_bad_arguments_fail() {
        let mut c = solo();
        let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
        // SAFETY: `a` and `b` hold 4 bytes each, outlive their requests and
        // are not accessed before the waits below.
        let ra = unsafe { c.irecv_raw(a.as_mut_ptr(), 4, ANY_SOURCE, ANY_TAG).unwrap() };
        // SAFETY: as above.
        let rb = unsafe { c.irecv_raw(b.as_mut_ptr(), 4, 0, 9).unwrap() };
        c.send(b"one", 0, 9).unwrap();
        c.send(b"two", 0, 9).unwrap();
        assert_eq!(c.wait(ra).unwrap().count, 3);
        assert_eq!(c.wait(rb).unwrap().count, 3);
        assert_eq!((&a[..3], &b[..3]), (&b"one"[..], &b"two"[..]));
        assert!(c.wait(ra).is_err(), "a completed request is gone");
        assert!(matches!(c.send(b"x", 3, 0), Err(Error::Invalid(_))));
        assert!(matches!(c.send(b"x", 0, -5), Err(Error::Invalid(_))));
        let mut z = [0u8; 1];
        assert!(matches!(c.recv(&mut z, 7, 0), Err(Error::Invalid(_))));
    }

    #[test]
    fn contexts_never_mix_and_sync_sends_wait_for_a_match() {
        let mut c = solo();
        let (a, b) = (*b"ctx five", *b"ctx six!");
        // SAFETY: `a` and `b` outlive the requests, waited for below.
        let sa = unsafe { c.isend_ctx(a.as_ptr(), 8, 0, 1, 5, false).unwrap() };
        // SAFETY: as above.
        let sb = unsafe { c.isend_ctx(b.as_ptr(), 8, 0, 1, 6, false).unwrap() };
        assert!(c.iprobe_ctx(ANY_SOURCE, ANY_TAG, 7).unwrap().is_none());
        assert!(c.iprobe(ANY_SOURCE, ANY_TAG).unwrap().is_none());
        let mut out = [0u8; 8];
        // SAFETY: `out` holds 8 bytes for the whole call.
        let st = unsafe { c.recv_ctx(out.as_mut_ptr(), 8, ANY_SOURCE, ANY_TAG, 6, None) };
        assert_eq!(st.unwrap().unwrap().count, 8);
        assert_eq!(&out, b"ctx six!");
        // SAFETY: as above.
        let st = unsafe { c.recv_ctx(out.as_mut_ptr(), 8, 0, 1, 5, None) };
        assert_eq!(st.unwrap().unwrap().tag, 1);
        assert_eq!(&out, b"ctx five");
        c.wait_all(&[sa, sb]).unwrap();
        // A synchronous send (any size, 0 included) stays pending until a
        // receive matches it.
        for n in [0usize, 3, 100_000] {
            let data = vec![7u8; n];
            // SAFETY: `data` outlives the request, waited for below.
            let s = unsafe { c.isend_ctx(data.as_ptr(), n, 0, 2, 9, true).unwrap() };
            for _ in 0..100 {
                c.progress().unwrap();
            }
            assert!(
                c.test(&s).unwrap().is_none(),
                "{n} B: complete before a match"
            );
            let mut got = vec![0u8; n];
            // SAFETY: `got` holds n bytes for the whole call.
            let st = unsafe { c.recv_ctx(got.as_mut_ptr(), n, 0, 2, 9, None) };
            assert_eq!(st.unwrap().unwrap().count, n);
            assert_eq!(got, data);
            c.wait(s).unwrap();
        }
    }

    #[test]
    fn receives_cancel_until_matched_and_bounded_waits_return() {
        let mut c = solo();
        let mut buf = [0u8; 4];
        // SAFETY: `buf` outlives the request (cancelled below).
        let r = unsafe { c.irecv_ctx(buf.as_mut_ptr(), 4, 0, 3, 2).unwrap() };
        let t = std::time::Instant::now();
        assert!(c
            .wait_for(r, std::time::Duration::from_millis(5))
            .unwrap()
            .is_none());
        assert!(t.elapsed() >= std::time::Duration::from_millis(5));
        assert!(c.cancel_recv(r).unwrap(), "nothing matched it");
        assert!(c.wait(r).is_err(), "a cancelled request is gone");
        // The message goes to the next receive, not to the cancelled one.
        c.send(b"abc", 0, 3).unwrap();
        // SAFETY: `buf` holds 4 bytes for the whole call.
        assert!(unsafe {
            c.recv_ctx(
                buf.as_mut_ptr(),
                4,
                0,
                3,
                0,
                Some(std::time::Duration::from_millis(1)),
            )
        }
        .unwrap()
        .is_some());
        // SAFETY: as above.
        let r = unsafe { c.irecv_ctx(buf.as_mut_ptr(), 4, 0, 4, 0).unwrap() };
        c.send(b"xyz", 0, 4).unwrap();
        c.progress().unwrap();
        assert!(!c.cancel_recv(r).unwrap(), "already matched");
        assert_eq!(c.wait(r).unwrap().count, 3);
        // A bounded blocking receive with nothing to take leaves nothing posted.
        // SAFETY: as above.
        let none = unsafe {
            c.recv_ctx(
                buf.as_mut_ptr(),
                4,
                0,
                5,
                0,
                Some(std::time::Duration::from_millis(2)),
            )
        };
        assert!(none.unwrap().is_none());
        assert!(c.posted.is_empty());
    }
}
