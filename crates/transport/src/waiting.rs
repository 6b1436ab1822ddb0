//! Blocking on the communicator: waiting for and testing requests, and the
//! blocking probe. Each loop spins, yields and sleeps by [`Backoff`] (the
//! waiting policy of `wait.rs`) and runs the slow-path checks (full sweep,
//! peer health, the `TOPOCOMM_TIMEOUT` deadline) when it says so.

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::request::{ReqKind, Request, Status, DONE_IDX};
use crate::segment::Segment;
use crate::wait::Backoff;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Spin turns between two moves of this rank's heartbeat.
pub(crate) const BEAT_EVERY: u32 = 8;
/// Spin turns between two scheduled reads of the awaited peer's heartbeat
/// (tens of microseconds): longer than the peer's longest stretch without
/// a move while it runs (a 64 KiB single copy takes several microseconds
/// inside one turn), far shorter than a scheduler time slice. A wrong
/// verdict costs `sched_yield`s until the peer moves again.
pub(crate) const WATCH_EVERY: u32 = 1024;
/// The same when CPUs may be shared (more ranks than CPUs, or unbound
/// ranks): a few microseconds. A peer descheduled inside its wait is then
/// seen within two looks instead of after tens of microseconds of spinning,
/// which every hop of a collective and every message of a ping-pong whose
/// two ranks share a CPU paid (4 ranks on 2 CPUs: 8-byte barrier 55-61 us,
/// allreduce 64 us, ping-pong 45 us in some jobs; docs/transport.md). A
/// peer busy in one long turn (a large copy) looks stalled too; the waiter
/// then yields until its word moves, which on a shared CPU is what lets
/// a descheduled rank run.
pub(crate) const WATCH_EVERY_SHARED: u32 = 32;
/// Bytes from which a copy inside a wait leaves the wait while it runs
/// (`Comm::before_long_copy`).
pub(crate) const LONG_COPY: usize = 16 << 10;
/// Scheduled looks in a row that find the awaited peer out of any wait,
/// its word unmoved, before the waiter takes it for busy elsewhere
/// (computing, or inside another library's call) and gives its CPU away
/// (`PeerWatch::stalled`): a few microseconds when CPUs may be shared.
pub(crate) const QUIET_LOOKS: u32 = 2;

/// Where a wait stands in the waiting policy. Kept across the slices of a
/// sliced wait ([`Comm::wait_for`] called again on the same request), so
/// that a caller waiting in slices backs off as one long wait does instead
/// of spinning afresh every slice.
pub(crate) struct WaitState {
    req: Request,
    b: Backoff,
    i: u32,
    /// `Comm::activity` when last looked at.
    seen: u64,
    /// The stuck-exchange clock, started at the first slow check (no clock
    /// read on the fast path).
    start: Option<Instant>,
    watch: Option<PeerWatch>,
}

impl WaitState {
    fn new(
        req: Request,
        peer: Option<usize>,
        watch_every: u32,
        activity: u64,
        sliced: bool,
    ) -> WaitState {
        WaitState {
            req,
            b: if sliced {
                Backoff::yielding()
            } else {
                Backoff::new()
            },
            i: 0,
            seen: activity,
            start: None,
            watch: peer.map(|p| PeerWatch::new(p, watch_every)),
        }
    }
}

/// What a waiter knows of the peer it waits for: its last heartbeat.
pub(crate) struct PeerWatch {
    peer: usize,
    last: u64,
    stalled: bool,
    /// Turns between scheduled looks (`Comm::watch_every`).
    every: u32,
    /// Scheduled looks in a row that found the peer away (out of any
    /// wait), its word unmoved.
    away_looks: u32,
    /// Whether the peer's word was read yet: the first call looks whatever
    /// the turn, so a wait that moves on to another peer (a lane wait,
    /// member by member) sees at once that the new one is descheduled.
    looked: bool,
}

/// The heartbeat word (`RankSlot::beat`): bit 0 set while the rank is in a
/// wait, bit 1 while that wait yields or sleeps instead of spinning, bits
/// 2..16 one plus the rank it waits for (0: any or unknown), bits 17..28
/// one plus the CPU it ran on when it last wrote the word (0: unknown), bit
/// 29 while it left its wait for a long copy (it answers when the copy
/// ends), the rest a counter that moves while it spins.
mod beat {
    pub const WAITING: u64 = 1;
    pub const IDLE: u64 = 2;
    const AWAITS_SHIFT: u32 = 2;
    const AWAITS_MASK: u64 = 0x7fff << AWAITS_SHIFT;
    const CPU_SHIFT: u32 = 17;
    const CPU_MASK: u64 = 0xfff << CPU_SHIFT;
    pub const BUSY: u64 = 1 << 29;
    const COUNT: u64 = 1 << 30;
    const _: () = assert!(crate::segment::MAX_RANKS < 0x7fff);

    /// `w` saying that its rank runs on `cpu` (CPUs from 4095 up: unknown).
    pub fn on_cpu(w: u64, cpu: Option<usize>) -> u64 {
        let c = cpu.filter(|&c| c < 0xfff).map_or(0, |c| c as u64 + 1);
        (w & !CPU_MASK) | (c << CPU_SHIFT)
    }

    /// The CPU the word's rank ran on when it wrote the word, if known.
    pub fn cpu(w: u64) -> Option<usize> {
        match (w & CPU_MASK) >> CPU_SHIFT {
            0 => None,
            c => Some(c as usize - 1),
        }
    }

    /// The word of a rank spinning in a wait for `awaits`, one count on
    /// from `prev`.
    pub fn spinning(prev: u64, awaits: Option<usize>) -> u64 {
        let a = awaits.map_or(0, |r| r as u64 + 1);
        ((prev & !(COUNT - 1)) + COUNT) | (a << AWAITS_SHIFT) | WAITING
    }

    /// The word of a rank out of any wait.
    pub fn out(prev: u64) -> u64 {
        prev & !(COUNT - 1)
    }

    /// The word of a rank that left its wait for a long copy, after which
    /// it goes on with the transfer.
    pub fn busy(prev: u64) -> u64 {
        out(prev) | BUSY
    }

    /// Whether the word's rank is out of any wait and not in a long copy
    /// of one: busy with something else, or about to start a wait.
    pub fn away(v: u64) -> bool {
        v & (WAITING | BUSY) == 0
    }

    /// Whether the word's rank, waiting, will not send `me` anything soon:
    /// it waits for a rank other than `me`, or it yields or sleeps in a
    /// wait for anyone. A rank yielding in a wait for `me` is not stalled
    /// by its word: it gave its CPU away because `me` did not run, and it
    /// looks again on every turn, so `me` spinning (and making progress)
    /// brings it back. Whether it is itself descheduled meanwhile shows in
    /// its counter, which moves on every turn of its yield loop.
    pub fn stalled(v: u64, me: usize) -> bool {
        let a = (v & AWAITS_MASK) >> AWAITS_SHIFT;
        v & WAITING != 0 && ((a != 0 && a != me as u64 + 1) || (a == 0 && v & IDLE != 0))
    }
}

/// The CPU this thread runs on now (`sched_getcpu`: a read of the rseq
/// area the kernel keeps current, no system call with glibc 2.35 and up).
pub(crate) fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and only reads.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// The CPU rank `r` last said it ran on (its heartbeat word), if known.
pub(crate) fn beat_cpu(seg: &Segment, r: usize) -> Option<usize> {
    beat::cpu(seg.rank_slot(r).beat.load(Ordering::Relaxed))
}

/// Whether the word's rank last said it runs on the CPU this thread runs
/// on now: then it cannot be running at this moment (we are), so a rank
/// in a wait there is descheduled, whatever its counter says. Decides at
/// the first look what the counter would show only a look later: two
/// ranks of a ping-pong that the scheduler put on one CPU hand it over at
/// every message instead of spinning first.
fn on_my_cpu(v: u64) -> bool {
    beat::cpu(v).is_some_and(|c| current_cpu() == Some(c))
}

/// What one look at a peer's word tells rank `me` without history: the
/// peer will not answer soon (`beat::stalled`), or it is in a wait on this
/// very CPU (`on_my_cpu`).
fn stalled_at_sight(v: u64, me: usize) -> bool {
    beat::stalled(v, me) || (v & beat::WAITING != 0 && on_my_cpu(v))
}

impl PeerWatch {
    pub(crate) fn new(peer: usize, every: u32) -> PeerWatch {
        PeerWatch {
            peer,
            last: 0,
            stalled: false,
            every,
            away_looks: 0,
            looked: false,
        }
    }

    /// Whether the peer will not answer soon: it is in a wait, and either
    /// idle (yielding or sleeping), or waiting for a rank other than `me`
    /// (it must hear from that one first), or its heartbeat has not moved
    /// since the previous scheduled look (descheduled), or it waits on the
    /// CPU this thread runs on (descheduled too: `on_my_cpu`); or it has
    /// been out of any wait (and not in a long copy of one) for
    /// [`QUIET_LOOKS`] looks in a row. Looked at on the first call and
    /// every `every` turns; once stalled, every turn, so the waiter spins
    /// again as soon as the peer's word moves and says nothing against it.
    ///
    /// Why the last: a rank out of any wait is computing, or inside a call
    /// of another library that the accelerator does not wrap (a program's
    /// own `PMPI_Barrier`), so its message is not about to come, and when
    /// CPUs are shared it may be the very process that needs this CPU.
    /// Spinning the whole phase for it (4000 turns, about 100 us on the
    /// 2-vCPU AMD EPYC VM, where a `pause` takes 26 ns) made an 8-byte
    /// reduce after `PMPI_Barrier` take 42 us with 4 ranks on 2 vCPUs,
    /// against 2 us for plain Open MPI (docs/transport.md).
    pub(crate) fn stalled(&mut self, seg: &Segment, me: usize, turn: u32) -> bool {
        let scheduled = !self.looked || turn % self.every == 0;
        if !scheduled && !self.stalled {
            return false;
        }
        let v = seg.rank_slot(self.peer).beat.load(Ordering::Relaxed);
        if scheduled {
            self.away_looks = if beat::away(v) && v == self.last && self.looked {
                self.away_looks + 1
            } else {
                0
            };
            self.stalled = stalled_at_sight(v, me)
                || (v & beat::WAITING != 0 && v == self.last)
                || self.away_looks >= QUIET_LOOKS;
            self.last = v;
            self.looked = true;
        } else if v != self.last {
            self.away_looks = 0;
            self.stalled = stalled_at_sight(v, me);
            self.last = v;
        }
        self.stalled
    }

    /// The rank watched.
    pub(crate) fn peer(&self) -> usize {
        self.peer
    }
}

impl Comm {
    /// Waits for a request; the waiting policy and fault checks are in
    /// docs/transport.md.
    pub fn wait(&mut self, r: Request) -> Result<Status> {
        self.wait_inner(r, None)
            .map(|s| s.expect("a wait with no budget completes"))
    }

    /// [`Comm::wait`] for at most `budget`: `Ok(None)` when the request is
    /// still pending then (the handle stays valid). Lets a caller that also
    /// drives another progress engine (the MPI accelerator's plain-MPI
    /// path) wait in slices.
    pub fn wait_for(&mut self, r: Request, budget: Duration) -> Result<Option<Status>> {
        self.wait_inner(r, Some(budget))
    }

    /// Sets how long a wait may go without any progress before it fails
    /// with [`Error::Timeout`]; `None`: no limit (dead and finalized peers
    /// are still detected). The MPI accelerator uses `None`, as an MPI
    /// receive may legitimately wait for hours.
    pub fn set_timeout(&mut self, t: Option<Duration>) {
        self.timeout = t.unwrap_or(Duration::MAX);
    }

    fn wait_inner(&mut self, r: Request, budget: Option<Duration>) -> Result<Option<Status>> {
        self.check_req(&r)?;
        if r.idx == DONE_IDX || self.reqs[r.idx as usize].done {
            // Done before the wait (a window's later requests, completed
            // by an earlier one's progress): no wait state to set up, which
            // cost more than the rest of the call.
            self.beat_leave();
            return self.take(r).map(Some);
        }
        let out = self.wait_loop(r, budget);
        // A sliced wait that ran out of budget is still a wait: its caller
        // comes back after a look at its other progress engine.
        if !matches!(out, Ok(None)) {
            self.beat_leave();
        }
        out
    }

    fn wait_loop(&mut self, r: Request, budget: Option<Duration>) -> Result<Option<Status>> {
        // The budget's clock starts at the first slow check (a clock read
        // costs as much as a small message in a VM; most waits end before).
        let mut began: Option<Instant> = None;
        let direct = match self.reqs[r.idx as usize].kind {
            ReqKind::Recv { src, .. } if src >= 0 => Some(src as usize),
            _ => None,
        };
        // The one rank this wait depends on: the source of a receive, the
        // destination of a send (its consuming cells or answering a
        // rendezvous); none for a receive from any source.
        let peer = match self.reqs[r.idx as usize].kind {
            ReqKind::Send { dst } => Some(dst),
            _ => direct,
        };
        let mut w = match self.resume.take() {
            Some(w) if w.req == r => w,
            _ => WaitState::new(r, peer, self.watch_every(), self.activity, budget.is_some()),
        };
        loop {
            if self.reqs[r.idx as usize].done {
                return self.take(r).map(Some);
            }
            if self.activity != w.seen {
                // Progress: spin again, and the stuck-exchange clock restarts.
                w.seen = self.activity;
                w.start = None;
                w.b.reset();
            }
            // A receive from one source polls that channel directly while
            // spinning (the latency path); the full engine runs every 16th turn.
            match direct {
                Some(s) if w.b.spinning() && w.i % 16 != 0 => {
                    self.drain(s)?;
                }
                _ => self.progress()?,
            }
            w.i = w.i.wrapping_add(1);
            if self.reqs[r.idx as usize].done {
                return self.take(r).map(Some);
            }
            // While spinning: keep the heartbeat moving, and give the CPU
            // away on a turn where the awaited peer is stalled (waiting and
            // not spinning: descheduled, or blocked on someone else), as it
            // may be the very process that needs this CPU. Also with a CPU
            // per rank by the bindings: a second job bound to the same CPUs
            // shares them all the same (two concurrent 2-rank jobs on two
            // PUs: 8-byte and 4 MiB bandwidth about 2x with this).
            let mut stalled = false;
            if w.b.spinning() {
                if let Some(p) = w.watch.as_mut() {
                    stalled = p.stalled(&self.seg, self.rank, w.i);
                }
                // With a CPU per rank by the bindings, give the CPU away
                // only when something else wants it, i.e. this thread has
                // been preempted lately: on an uncontended CPU a yield
                // returns at once and only slows this rank's progress (a
                // CPU hog beside the peer: 4 MiB bandwidth 0.6x).
                if !self.watch_peers && w.i % WATCH_EVERY == 0 {
                    self.note_preemption();
                }
                stalled &= self.watch_peers || self.preempted;
                if !stalled && w.i % BEAT_EVERY == BEAT_EVERY - 1 {
                    self.beat_bump(peer);
                }
            }
            if w.b.slow_check_due() {
                self.sweep()?;
                if self.reqs[r.idx as usize].done {
                    return self.take(r).map(Some);
                }
                if let Some(b) = budget {
                    if began.get_or_insert_with(Instant::now).elapsed() >= b {
                        self.resume = Some(w);
                        return Ok(None);
                    }
                }
                self.health(direct)?;
                if w.start.get_or_insert_with(Instant::now).elapsed() > self.timeout {
                    return Err(Error::Timeout(self.timeout));
                }
            }
            if stalled || !w.b.spinning() {
                self.beat_idle(peer);
            }
            if stalled {
                w.b.snooze_yield();
            } else {
                w.b.snooze();
            }
        }
    }

    /// Updates `preempted`: whether the scheduler took this thread off its
    /// CPU for another task since the previous look (involuntary context
    /// switches, one `getrusage` every `WATCH_EVERY` turns of a long wait).
    pub(crate) fn note_preemption(&mut self) {
        // SAFETY: getrusage fills the struct we own; zeroed is a valid rusage.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_THREAD is a valid `who`.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
            let n = ru.ru_nivcsw as u64;
            self.preempted = n != self.preemptions;
            self.preemptions = n;
        }
    }

    /// Turns between two scheduled looks at an awaited peer's heartbeat.
    pub(crate) fn watch_every(&self) -> u32 {
        if self.watch_peers {
            WATCH_EVERY_SHARED
        } else {
            WATCH_EVERY
        }
    }

    /// Whether spinning for a message from `peer` is pointless now: CPUs
    /// may be shared and `peer` is itself waiting, idle or for another rank.
    pub(crate) fn peer_stalled(&self, peer: usize) -> bool {
        if !self.watch_peers {
            return false;
        }
        stalled_at_sight(
            self.seg.rank_slot(peer).beat.load(Ordering::Relaxed),
            self.rank,
        )
    }

    /// Tells the peers that this rank is blocked elsewhere (`true`: e.g.
    /// inside a blocking call of another library, such as the MPI under the
    /// accelerator) and will not answer through the transport until it
    /// says `false`: their waits for it yield instead of spinning.
    pub fn note_blocked(&mut self, blocked: bool) {
        if !self.beats_watched {
            return;
        }
        if blocked {
            self.beat_idle(None);
        } else {
            self.beat_leave();
        }
    }

    /// Publishes that this rank's wait gave up spinning (yields or sleeps).
    /// Whether some rank of this node reads heartbeats (a rank that may
    /// share its CPU). When none does, [`Comm::note_blocked`] does nothing,
    /// and a caller may skip it altogether.
    pub fn beats_watched(&self) -> bool {
        self.beats_watched
    }

    pub(crate) fn beat_idle(&mut self, awaits: Option<usize>) {
        // The counter moves on every call: a peer tells a rank that yields
        // on a CPU of its own (and so answers at once) from one that is
        // descheduled by that alone. One store per yield or sleep, next to
        // a system call.
        self.beat = beat::on_cpu(
            beat::spinning(self.beat, awaits) | beat::IDLE,
            current_cpu(),
        );
        self.seg
            .rank_slot(self.rank)
            .beat
            .store(self.beat, Ordering::Relaxed);
    }

    /// Keeps the CPU in this rank's heartbeat current without entering a
    /// wait: a rank that arrives at lane collectives and never waits in
    /// one (a reduction's non-root member) would otherwise show the CPU of
    /// its last wait, or none, to members deciding whether it needs their
    /// CPU (`Comm::missing_member_here`). A store only when it moved.
    pub(crate) fn beat_note_cpu(&mut self) -> Option<usize> {
        let cpu = current_cpu();
        let now = beat::on_cpu(self.beat, cpu);
        if now != self.beat {
            self.beat = now;
            self.seg
                .rank_slot(self.rank)
                .beat
                .store(self.beat, Ordering::Relaxed);
        }
        cpu
    }

    /// Publishes that this rank spins in a wait for `awaits`. Short waits
    /// never get here and never touch the line (a peer's read of it makes
    /// the next store a cache miss).
    pub(crate) fn beat_bump(&mut self, awaits: Option<usize>) {
        self.beat = beat::on_cpu(beat::spinning(self.beat, awaits), current_cpu());
        self.seg
            .rank_slot(self.rank)
            .beat
            .store(self.beat, Ordering::Relaxed);
    }

    /// Called before a copy of `len` bytes made within one turn of a wait.
    /// A long one (`LONG_COPY` and up: a microsecond or more; a 64 KiB
    /// single copy takes several) leaves the wait first: the heartbeat's
    /// counter cannot move during the copy, and a peer watching it would
    /// take this rank for a descheduled one and give its CPU away (with
    /// looks every `WATCH_EVERY_SHARED` turns, 64 KiB ping-pong on 4 ranks
    /// over 2 CPUs: median 8.7-10.3 us without this, 5.5-6.9 with it). The
    /// wait's next spin turn says it waits again.
    pub(crate) fn before_long_copy(&mut self, len: usize) {
        if len >= LONG_COPY && self.beat & beat::WAITING != 0 {
            // Marked busy, not away: a watcher keeps spinning for it.
            self.beat = beat::busy(self.beat);
            self.seg
                .rank_slot(self.rank)
                .beat
                .store(self.beat, Ordering::Relaxed);
        }
    }

    /// Publishes that this rank left its wait (even), if it had said it
    /// was in one or in a long copy of one.
    pub(crate) fn beat_leave(&mut self) {
        if self.beat & (beat::WAITING | beat::BUSY) != 0 {
            self.beat = beat::out(self.beat);
            self.seg
                .rank_slot(self.rank)
                .beat
                .store(self.beat, Ordering::Relaxed);
        }
    }

    /// Completes a request if it is done (it is then released).
    pub fn test(&mut self, r: &Request) -> Result<Option<Status>> {
        self.check_req(r)?;
        if r.idx != DONE_IDX {
            self.progress()?;
            if !self.reqs[r.idx as usize].done {
                return Ok(None);
            }
        }
        self.take(*r).map(Some)
    }

    /// Waits for all requests, returning the first error after all finished
    /// or failed.
    pub fn wait_all(&mut self, reqs: &[Request]) -> Result<Vec<Status>> {
        let mut out = Vec::with_capacity(reqs.len());
        let mut first = None;
        // Out of any wait, as every wait ends (the loop below may not wait).
        self.beat_leave();
        for r in reqs {
            // Requests that completed at posting (most of a window of small
            // messages) are released here, not through a whole wait.
            if r.idx == DONE_IDX {
                out.push(self.take(*r)?);
                continue;
            }
            match self.wait(*r) {
                Ok(s) => out.push(s),
                Err(e) => {
                    if matches!(e, Error::DeadPeer { .. } | Error::Timeout(_)) {
                        return Err(e);
                    }
                    out.push(Status::default());
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Blocking probe.
    pub fn probe(&mut self, src: i32, tag: i32) -> Result<Status> {
        let start = Instant::now();
        let mut b = Backoff::new();
        loop {
            if let Some(s) = self.iprobe(src, tag)? {
                return Ok(s);
            }
            if b.slow_check_due() {
                self.sweep()?;
                self.health((src >= 0).then_some(src as usize))?;
                if start.elapsed() > self.timeout {
                    return Err(Error::Timeout(self.timeout));
                }
            }
            b.snooze();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::Segment;

    #[test]
    fn heartbeat_word_says_who_waits_for_whom() {
        // Rank 3 spins in a wait for rank 5: not stalled for rank 5, which
        // it waits for, nor for a rank asking about a wait for any source.
        let w = beat::spinning(0, Some(5));
        assert!(!beat::stalled(w, 5));
        // For rank 7 it is stalled: it must hear from rank 5 first.
        assert!(beat::stalled(w, 7));
        // A wait for any source can be answered by anyone.
        let any = beat::spinning(w, None);
        assert!(!beat::stalled(any, 7));
        // Each spin moves the word (a waiter tells spinning from
        // descheduled by that), keeping what it says.
        let next = beat::spinning(w, Some(5));
        assert_ne!(next, w);
        assert!(!beat::stalled(next, 5));
        // Yielding or sleeping in a wait for rank 5: not stalled for rank
        // 5 by the word (it looks again every turn; whether it runs shows
        // in its counter), stalled for everyone else.
        assert!(!beat::stalled(next | beat::IDLE, 5));
        assert!(beat::stalled(next | beat::IDLE, 7));
        // Yielding in a wait for any source: stalled for everyone.
        assert!(beat::stalled(any | beat::IDLE, 5));
        // Out of the wait: never stalled (the rank may be computing), and
        // the counter keeps moving across waits.
        let out = beat::out(next | beat::IDLE);
        assert!(!beat::stalled(out, 5) && !beat::stalled(out, 7));
        assert_eq!(out & (beat::WAITING | beat::IDLE), 0);
        assert_ne!(beat::spinning(out, Some(5)), next);
        // The largest rank fits.
        let far = beat::spinning(0, Some(crate::segment::MAX_RANKS - 1));
        assert!(!beat::stalled(far, crate::segment::MAX_RANKS - 1));
        assert!(beat::stalled(far, 0));
    }

    #[test]
    fn a_peer_descheduled_in_its_wait_is_seen_at_the_next_look() {
        let plan = crate::plan::Plan::alone("self", crate::startup::singleton_params());
        let seg = Segment::create(2, &vec![plan; 4]).expect("segment");
        let word = &seg.rank_slot(1).beat;
        // Rank 1 spins in a wait for rank 0, then stops moving (descheduled).
        word.store(beat::spinning(0, Some(0)), Ordering::Relaxed);
        let mut shared = PeerWatch::new(1, WATCH_EVERY_SHARED);
        let mut dedicated = PeerWatch::new(1, WATCH_EVERY);
        assert!(!shared.stalled(&seg, 0, 1) && !dedicated.stalled(&seg, 0, 1));
        // Between looks nothing is concluded.
        assert!(!shared.stalled(&seg, 0, WATCH_EVERY_SHARED - 1));
        // CPUs that may be shared: the unmoved counter is seen at the next
        // look, a few microseconds later; a CPU per rank: not before 1024.
        assert!(shared.stalled(&seg, 0, WATCH_EVERY_SHARED));
        assert!(!dedicated.stalled(&seg, 0, WATCH_EVERY_SHARED));
        assert!(dedicated.stalled(&seg, 0, WATCH_EVERY));
        // It runs again: the very next turn says so.
        word.store(
            beat::spinning(word.load(Ordering::Relaxed), Some(0)),
            Ordering::Relaxed,
        );
        assert!(!shared.stalled(&seg, 0, WATCH_EVERY_SHARED + 1));
    }

    #[test]
    fn a_long_copy_leaves_the_wait_and_a_short_one_does_not() {
        // A job of one rank (no launcher in the environment of unit tests).
        let mut comm = Comm::init().expect("singleton communicator");
        let word = |c: &Comm| c.seg.rank_slot(c.rank).beat.load(Ordering::Relaxed);
        comm.beat_bump(Some(0));
        comm.before_long_copy(LONG_COPY - 1);
        assert_ne!(
            word(&comm) & beat::WAITING,
            0,
            "a short copy stays in the wait"
        );
        comm.before_long_copy(LONG_COPY);
        assert_eq!(word(&comm) & beat::WAITING, 0, "a long copy leaves it");
        assert_ne!(word(&comm) & beat::BUSY, 0, "marked busy, not away");
        // Watching the rank then never concludes it is descheduled or away,
        // however long the copy.
        let mut w = PeerWatch::new(comm.rank, WATCH_EVERY_SHARED);
        for look in 0..=QUIET_LOOKS + 1 {
            assert!(!w.stalled(&comm.seg, comm.rank + 1, 1 + look * WATCH_EVERY_SHARED));
        }
        // Leaving the wait clears the mark.
        comm.beat_leave();
        assert_eq!(word(&comm) & (beat::WAITING | beat::BUSY), 0);
    }

    #[test]
    fn a_peer_away_from_any_wait_is_stalled_after_a_few_looks() {
        let plan = crate::plan::Plan::alone("self", crate::startup::singleton_params());
        let seg = Segment::create(2, &vec![plan; 4]).expect("segment");
        let word = &seg.rank_slot(1).beat;
        // Rank 1 left its last wait and does something else (computes, or
        // sits in another library's call): its word stops moving.
        word.store(beat::out(beat::spinning(0, Some(0))), Ordering::Relaxed);
        let mut w = PeerWatch::new(1, WATCH_EVERY_SHARED);
        assert!(!w.stalled(&seg, 0, 1), "not at the first look");
        for look in 1..QUIET_LOOKS {
            assert!(!w.stalled(&seg, 0, look * WATCH_EVERY_SHARED));
        }
        assert!(w.stalled(&seg, 0, QUIET_LOOKS * WATCH_EVERY_SHARED));
        // It enters a wait for rank 0 and spins: the very next turn says so.
        word.store(
            beat::spinning(word.load(Ordering::Relaxed), Some(0)),
            Ordering::Relaxed,
        );
        assert!(!w.stalled(&seg, 0, QUIET_LOOKS * WATCH_EVERY_SHARED + 1));
        // Away again, but its word moved in between: the count starts over.
        word.store(beat::out(word.load(Ordering::Relaxed)), Ordering::Relaxed);
        assert!(!w.stalled(&seg, 0, (QUIET_LOOKS + 1) * WATCH_EVERY_SHARED));
        assert!(!w.stalled(&seg, 0, (QUIET_LOOKS + 2) * WATCH_EVERY_SHARED));
        assert!(w.stalled(&seg, 0, (QUIET_LOOKS + 3) * WATCH_EVERY_SHARED));
    }

    #[test]
    fn a_peer_in_a_wait_on_this_cpu_is_stalled_at_the_first_look() {
        // Pin this thread, so that "the CPU it runs on" stays one CPU.
        let here = current_cpu().expect("sched_getcpu");
        // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity
        // get valid pointers to it and its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(here, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
        }
        let here = current_cpu().expect("sched_getcpu");
        let plan = crate::plan::Plan::alone("self", crate::startup::singleton_params());
        let seg = Segment::create(2, &vec![plan; 4]).expect("segment");
        let word = &seg.rank_slot(1).beat;
        // In a wait for rank 0 on this very CPU: it cannot be running now.
        let w = beat::on_cpu(beat::spinning(0, Some(0)), Some(here));
        assert_eq!(beat::cpu(w), Some(here));
        word.store(w, Ordering::Relaxed);
        assert!(PeerWatch::new(1, WATCH_EVERY).stalled(&seg, 0, 1));
        // On another CPU: nothing concluded before its counter stops.
        word.store(beat::on_cpu(w, Some(here + 1)), Ordering::Relaxed);
        assert!(!PeerWatch::new(1, WATCH_EVERY).stalled(&seg, 0, 1));
        // Out of any wait, on this CPU: it may be computing; not stalled.
        word.store(beat::on_cpu(beat::out(w), Some(here)), Ordering::Relaxed);
        assert!(!PeerWatch::new(1, WATCH_EVERY).stalled(&seg, 0, 1));
        // CPUs the word cannot hold are unknown.
        assert_eq!(beat::cpu(beat::on_cpu(w, Some(5000))), None);
        assert_eq!(beat::cpu(beat::on_cpu(w, None)), None);
        // A watch made in the middle of a wait (a lane wait moving on to
        // its next missing member) looks at its first call, whatever the
        // turn, and not again before its next scheduled look.
        word.store(w, Ordering::Relaxed);
        let mut late = PeerWatch::new(1, WATCH_EVERY_SHARED);
        assert!(late.stalled(&seg, 0, WATCH_EVERY_SHARED + 5));
        word.store(beat::on_cpu(w, Some(here + 1)), Ordering::Relaxed);
        let mut late = PeerWatch::new(1, WATCH_EVERY_SHARED);
        assert!(!late.stalled(&seg, 0, WATCH_EVERY_SHARED + 5));
        word.store(w, Ordering::Relaxed);
        assert!(!late.stalled(&seg, 0, WATCH_EVERY_SHARED + 6));
        assert!(late.stalled(&seg, 0, 2 * WATCH_EVERY_SHARED));
    }
}
