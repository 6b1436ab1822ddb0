//! Collective lanes: small collectives through flags in the segment instead
//! of messages (docs/collectives.md, "Lanes").
//!
//! Every rank owns, per lane, an arrival word with two inline slots and the
//! CPU of its last arrival on one cache line, a done word on another, and
//! two data blocks. Lane `l`
//! belongs to the communicator whose matching context is `l`, so a rank's
//! lane serves one communicator at a time and the members of that
//! communicator call its collectives in the same order (MPI's rule): the
//! k-th collective of the lane is epoch `e` on every member, counted on
//! from the members' largest epoch when the lane is given to a
//! communicator ([`Comm::lane_start`]).
//!
//! A member publishes epoch `e` by storing `e` in its arrival word once its
//! contribution is in slot `e % 2` (payloads up to `LANE_INLINE` bytes:
//! a reader gets word and data in one line transfer) or data block `e % 2`
//! (up to [`LANE_DATA`]), and stores `e` in its done word once it has
//! finished reading the others' (at once when it reads nothing). Readers
//! wait for arrival words `>= e`; words only grow, so a member already
//! further on still satisfies them. The done word has a line of its own:
//! nobody polls it on the fast path, so storing it stays in the owner's
//! cache (in the arrival line it would cost an invalidation per call).
//!
//! Memory orderings:
//! 1. Publication: the owner writes its slot, then `arrival.store(e,
//!    Release)`; a reader's `arrival.load(Acquire) >= e` makes the slot
//!    visible.
//! 2. Slot reuse: slot `e % 2` is written again at epoch `e + 2`. Before
//!    that the owner knows (Acquire) that every member finished epoch `e`:
//!    from its done word (stored with Release after its reads), or from
//!    its arrival word at `e + 1` (a member arrives only after finishing
//!    the previous collective). An allreduce sees the latter on the way;
//!    the others wait for it (`lane_arrive`).
//! 3. Early end ([`Awaited::AllByAll`]): in a collective every member waits
//!    out, a member's word past `e` (Acquire) shows that it saw every word
//!    at `e` (Acquire) before its Release store of the later one: every
//!    member's slot of `e` is visible through that chain.
//!
//! **Pairs.** A communicator of two members also has the pair line of its
//! lower transport rank's lane ([`Comm::pair_exchange`]): both members'
//! words and slots on one line, so a barrier (or an exchange of up to
//! [`PAIR_DATA`] bytes) costs the transfers of that one line. With a word each on lines of their own
//! both members' stores invalidate a line the other polls and each then
//! misses on the other's: two processes on the 2-vCPU Intel Xeon VM
//! storing an epoch and polling the other's took 0.13-0.21 us per round
//! on two lines and 0.07-0.10 on one (docs/collectives.md, "Two members:
//! one line"). The orderings are the lanes': a member writes its slot of
//! epoch `e % 2`, then stores `e` in its word with Release; the other's
//! Acquire load of that word `>= e` makes the slot visible (1). A member
//! writes slot `e % 2` again at `e + 2`, once the other has finished `e`:
//! known when the other's word reached `e + 1` (seen at the end of
//! collective `e + 1`), else from its done word, which pair collectives
//! store too (2).

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::segment::{LANES, LANE_DATA, LANE_INLINE, PAIR_DATA};
use crate::wait::Backoff;
use crate::waiting::PeerWatch;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Turns of a pair wait's short path ([`Comm::pair_quick`]): about as many
/// as the general wait's quiet turns, which follow when these run out.
const PAIR_QUICK_TURNS: u32 = 64;

/// Most members for which a lane collective reads every member's word
/// (each of n members reads n - 1 lines); larger communicators use
/// message trees.
pub const FLAT_MAX: usize = 16;

/// Turns of a lane wait that only poll the words (waiting.rs's peer
/// watching and the engine start after them).
const QUIET_TURNS: u32 = 64;
/// The same when CPUs may be shared (`Comm::watch_peers`): the member
/// waited for may be descheduled on this very CPU, and 64 turns of
/// `pause` (2.5 us on the Intel Xeon dev VM, whose `pause` takes about 40
/// ns) before the first look at its heartbeat were most of a crowded
/// barrier (4 ranks on 2 CPUs: a `sched_yield` hand-over takes 1 us there).
/// One: the first turn already looks (the look reads only the lines the
/// turn loads anyway, the members' arrival lines); two turns took 4-6 %
/// longer per 4-rank crowded barrier and allreduce (docs/collectives.md, session 46).
const QUIET_TURNS_SHARED: u32 = 1;
/// Turns of a crowded wait that every member waits out spent on
/// [`Comm::lane_wait_quick`]'s short path before the full wait takes over.
/// A 4-rank barrier on 2 CPUs needs one or two yields and the spins of a
/// hand-over on the other CPU (under a microsecond of `pause`); 32 turns
/// keep the engine's passes (every 16 turns of the full wait) at most 32
/// turns late.
const QUICK_TURNS: u32 = 32;
/// Turns between the short path's deep looks (heartbeats too, not only
/// the arrival lines): a member that moved to this CPU since it last
/// arrived is found within 16 turns, not only once the full wait looks.
const QUICK_DEEP_EVERY: u32 = 16;

/// Per-lane state of this rank.
#[derive(Clone, Debug, Default)]
pub(crate) struct LaneState {
    /// The epoch of the lane's current (or last) collective.
    epoch: u64,
    /// An epoch every member is known to have finished: the slots of it
    /// and earlier ones are free to reuse.
    finished: u64,
    /// The epoch the lane's communicator started from: the blocks of
    /// earlier collectives were freed by the previous owner's quiesce.
    start: u64,
    /// The communicator's members (transport ranks, in its rank order);
    /// empty while the lane serves none.
    members: Vec<usize>,
    /// Whether this rank arrived at the current collective and still waits
    /// in [`Comm::lane_exchange`] (a sliced wait that ran out of budget).
    pending: bool,
    /// Where this rank's pair collectives go, once a first one on the
    /// current communicator of 2 members found out ([`Comm::pair_exchange_fast`]).
    pair: Option<PairLine>,
}

/// A 2-member lane's pair line and this member's done word, found once
/// per communicator: the pair's fast path (`Comm::pair_exchange_fast`) then reads
/// no member list and computes no segment offset per collective.
#[derive(Clone, Copy, Debug)]
struct PairLine {
    /// The pair line (segment.rs: word[2] | slot[2][2]).
    line: *mut u8,
    /// This member's index on it (0: the owner, the lower transport rank).
    me: usize,
    /// This member's done word of the lane.
    done: *const AtomicU64,
}

impl PairLine {
    /// Member `i`'s word on the line.
    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: word i < 2 of a 64-byte aligned pair line in the segment
        // (segment.rs, LANE_BYTES), which outlives the lane state that
        // holds it (both belong to the Comm); only accessed atomically.
        unsafe { &*(self.line.add(8 * i) as *const AtomicU64) }
    }
}

impl LaneState {
    /// Every member arrived at epoch `e`, so each finished `e - 1`
    /// (ordering 2): the slots of `e - 1` and earlier are free.
    fn all_arrived_at(&mut self, e: u64) {
        self.finished = self.finished.max(e.saturating_sub(1));
    }

    /// The lanes of a rank of a job of `size` ranks: lane 0 serves the
    /// plain `tc_*` API's collectives over every rank, the others none yet.
    pub(crate) fn initial(size: usize) -> Vec<LaneState> {
        let mut v = vec![LaneState::default(); LANES];
        v[0].members = (0..size).collect();
        v
    }
}

/// Who waits on the words a lane wait reads, which decides when it yields
/// on shared CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiters {
    /// This rank alone (a reuse or quiesce wait, a member waiting for a
    /// reduce's or broadcast's root): it watches the awaited member's
    /// heartbeat, since that member may itself wait for a rank on this
    /// CPU that is not a member of the wait.
    Alone,
    /// The wait is for every member of the lane (a barrier, an allreduce,
    /// a reduce's root) or for the other member of a pair: with CPUs
    /// shared, only a missing member on this CPU makes the wait yield
    /// ([`Comm::missing_member_here`]).
    Everyone,
    /// `Everyone`, and the wait also ends at a member whose word is past
    /// the target (it saw every member's: ordering 3, [`Awaited::AllByAll`]).
    EveryoneByAll,
}

/// The words of a member's lane: its arrival and done words, or its word
/// on the pair line of `owner` (the pair's lower transport rank).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Word {
    Arrival,
    Done,
    Pair { owner: usize },
}

/// Whose arrival a lane collective waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Awaited {
    /// Every member's.
    All,
    /// Every member's, in a collective where every member waits for every
    /// member's (a barrier, an allreduce; not a reduce, whose other members
    /// leave without waiting): a member that already arrived at a later
    /// collective then shows that all arrived at this one, and the wait
    /// ends without reading the other members' lines.
    AllByAll,
    /// One member's (a transport rank: a broadcast's root).
    One(usize),
}

/// Member `m`'s word on the pair line at `line` owned by `owner`.
fn pair_word<'a>(line: *mut u8, owner: usize, m: usize) -> &'a std::sync::atomic::AtomicU64 {
    // SAFETY: word 0 (the owner's) or 1 of a 64-byte aligned pair line in
    // the segment (segment.rs, LANE_BYTES), which lives as long as the
    // communicator; only ever accessed atomically.
    unsafe { &*(line.add(8 * usize::from(m != owner)) as *const std::sync::atomic::AtomicU64) }
}

/// Where member `i` (0: the owner) puts its payload of epoch `e` on the
/// pair line at `line`.
fn pair_slot(line: *mut u8, i: usize, e: u64) -> *mut u8 {
    // SAFETY: 16 + 4 * PAIR_DATA <= 64 (segment.rs): inside the line.
    unsafe { line.add(16 + (2 * i + (e % 2) as usize) * PAIR_DATA) }
}

/// Copies `n` <= 16 bytes from `src` to `dst` in at most four loads and
/// stores, without a call: the pair's payloads are 0-12 bytes, and the two
/// calls into `memcpy` (its size dispatch included) were about 35 of a
/// 2-rank 8-byte allreduce's instructions (callgrind, 2026-12-03).
///
/// # Safety
///
/// `n` bytes readable at `src` and writable at `dst`, not overlapping.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, n: usize) {
    debug_assert!(n <= 16);
    // SAFETY: the caller's promise, passed on (each width's two words
    // lie in [0, n) when n is at least that width).
    unsafe {
        if n >= 8 {
            copy_ends::<u64>(src, dst, n);
        } else if n >= 4 {
            copy_ends::<u32>(src, dst, n);
        } else if n >= 2 {
            copy_ends::<u16>(src, dst, n);
        } else if n == 1 {
            *dst = *src;
        }
    }
}

/// Copies `n` bytes, `size_of::<T>() <= n <= 2 * size_of::<T>()`, as the
/// first and the last `T` (overlapping where `n` is not twice the width).
///
/// # Safety
///
/// As [`copy_small`], and `n` in that range.
#[inline(always)]
unsafe fn copy_ends<T: Copy>(src: *const u8, dst: *mut u8, n: usize) {
    let w = std::mem::size_of::<T>();
    // SAFETY: both words lie in [0, n) of both buffers (w <= n), which the
    // caller promised readable at src and writable at dst.
    unsafe {
        let (a, b) = (
            src.cast::<T>().read_unaligned(),
            src.add(n - w).cast::<T>().read_unaligned(),
        );
        dst.cast::<T>().write_unaligned(a);
        dst.add(n - w).cast::<T>().write_unaligned(b);
    }
}

/// Where a sliced wait on a lane stands (kept across slices, as
/// `WaitState` is for requests).
pub(crate) struct LaneWait {
    lane: usize,
    word: Word,
    target: u64,
    next: usize,
    b: Backoff,
    /// Whether the last look found a missing member on this CPU
    /// (`Comm::missing_member_here`).
    here: bool,
    i: u32,
    start: Option<Instant>,
    watch: PeerWatch,
}

/// Where epoch `e`'s payload of `len` bytes lies in the lane at `base`:
/// inline in the word's line when it fits, else in a data block.
fn slot(base: *mut u8, e: u64, len: usize) -> *mut u8 {
    let i = (e % 2) as usize;
    // SAFETY: both offsets stay inside the lane (segment.rs, LANE_BYTES:
    // the arrival line with the slots, the done line, the pair line, the
    // blocks).
    unsafe {
        if len <= LANE_INLINE {
            base.add(8 + i * LANE_INLINE)
        } else {
            base.add(192 + i * LANE_DATA)
        }
    }
}

/// Checks a lane number from a caller.
fn lane_arg(lane: usize) -> Result<usize> {
    if lane < LANES {
        Ok(lane)
    } else {
        Err(Error::Invalid(format!(
            "lane {lane} is out of range (0..{LANES})"
        )))
    }
}

impl Comm {
    /// The epoch of the last collective on `lane` here.
    pub fn lane_epoch(&self, lane: usize) -> Result<u64> {
        Ok(self.lanes[lane_arg(lane)?].epoch)
    }

    /// Hands `lane` to a communicator of `members` (transport ranks, this
    /// one included) whose members agreed (e.g. by a max-reduction of
    /// [`Comm::lane_epoch`]) that its collectives count on from `epoch`.
    /// Never goes back: the lane words only grow.
    pub fn lane_start(&mut self, lane: usize, epoch: u64, members: &[usize]) -> Result<()> {
        let lane = lane_arg(lane)?;
        members
            .iter()
            .try_for_each(|&m| self.check_peer(m, "lane member"))?;
        if !members.contains(&self.rank) {
            return Err(Error::Invalid(format!(
                "lane {lane}: rank {} is not among the members",
                self.rank
            )));
        }
        let s = &mut self.lanes[lane];
        if epoch < s.epoch {
            return Err(Error::Invalid(format!(
                "lane {lane}: epoch {epoch} is behind this rank's {}",
                s.epoch
            )));
        }
        s.epoch = epoch;
        s.start = epoch;
        // Both slots are free (ordering 2 held for the previous owner).
        s.finished = epoch;
        s.members = members.to_vec();
        s.pair = None;
        Ok(())
    }

    /// How many members the communicator of `lane` has (0: none).
    pub fn lane_size(&self, lane: usize) -> Result<usize> {
        Ok(self.lanes[lane_arg(lane)?].members.len())
    }

    /// The members of a lane in use, taken out of its state for the time
    /// of a call (no allocation per collective); [`Comm::lane_put`] puts
    /// them back.
    fn lane_members(&mut self, lane: usize) -> Result<Vec<usize>> {
        let s = &mut self.lanes[lane_arg(lane)?];
        if s.members.is_empty() {
            return Err(Error::Invalid(format!(
                "lane {lane} serves no communicator"
            )));
        }
        Ok(std::mem::take(&mut s.members))
    }

    fn lane_put<T>(&mut self, lane: usize, members: Vec<usize>, r: Result<T>) -> Result<T> {
        self.lanes[lane].members = members;
        r
    }

    /// Starts the next collective on `lane` and publishes this rank's
    /// contribution `data` (at most [`LANE_DATA`] bytes; empty for none).
    /// `reads`: whether this rank will read other members' blocks in this
    /// collective (it then calls [`Comm::lane_done`] after). Before writing
    /// the block used two collectives ago it waits until every member has
    /// finished reading it, for at most `budget` (`None`: no limit):
    /// `Ok(None)` when it ran out first (nothing published; call again),
    /// else the epoch.
    fn lane_arrive(
        &mut self,
        lane: usize,
        data: &[u8],
        reads: bool,
        budget: Option<Duration>,
    ) -> Result<Option<u64>> {
        let lane = lane_arg(lane)?;
        if data.len() > LANE_DATA {
            return Err(Error::Invalid(format!(
                "lane {lane}: {} bytes do not fit a block of {LANE_DATA}",
                data.len()
            )));
        }
        let members = self.lane_members(lane)?;
        let e = self.lanes[lane].epoch + 1;
        if !data.is_empty() && self.lanes[lane].finished + 2 < e {
            // Slot e % 2 last held epoch e - 2: wait for its readers.
            let r = self.lane_wait_until(lane, &members, Word::Done, e - 2, budget, Waiters::Alone);
            if !self.lane_put(lane, members, r)? {
                return Ok(None);
            }
            self.lanes[lane].finished = e - 2;
        } else {
            self.lanes[lane].members = members;
        }
        self.lanes[lane].epoch = e;
        if self.watch_peers {
            let cpu = self.beat_note_cpu();
            // Relaxed: a hint for the others' waiting policy, carried to
            // them by the line transfer of the arrival word below.
            let at = cpu.map_or(0, |c| c as u64 + 1);
            self.seg
                .lane_cpu(self.rank, lane)
                .store(at, Ordering::Relaxed);
        }
        let (arrival, done, base) = self.seg.lane(self.rank, lane);
        if !data.is_empty() {
            // SAFETY: this rank's own slot or block e % 2, large enough
            // (checked length); no member reads it until the arrival word
            // says e, and every reader of epoch e - 2 is done with it
            // (ordering 2).
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), slot(base, e, data.len()), data.len())
            };
        }
        if !reads {
            // Nothing to read: done at once (a store to a line only the
            // rare reuse and quiesce waits read).
            done.store(e, Ordering::Release);
        }
        // Release: the slot before the word (ordering 1).
        arrival.store(e, Ordering::Release);
        Ok(Some(e))
    }

    /// Waits until the current collective of `lane` is published by the
    /// members `awaited`; `None` budget: no limit. `Ok(false)` when
    /// `budget` ran out first (call again to go on waiting).
    fn lane_wait(
        &mut self,
        lane: usize,
        awaited: Awaited,
        budget: Option<Duration>,
    ) -> Result<bool> {
        let lane = lane_arg(lane)?;
        let all = self.lane_members(lane)?;
        let e = self.lanes[lane].epoch;
        let r = match awaited {
            Awaited::One(m) if !all.contains(&m) => Err(Error::Invalid(format!(
                "lane {lane}: rank {m} is not a member"
            ))),
            Awaited::One(m) => {
                self.lane_wait_until(lane, &[m], Word::Arrival, e, budget, Waiters::Alone)
            }
            Awaited::All | Awaited::AllByAll => {
                let waiters = if awaited == Awaited::AllByAll {
                    Waiters::EveryoneByAll
                } else {
                    Waiters::Everyone
                };
                self.lane_wait_until(lane, &all, Word::Arrival, e, budget, waiters)
            }
        };
        let arrived = self.lane_put(lane, all, r)?;
        if arrived && !matches!(awaited, Awaited::One(_)) {
            self.lanes[lane].all_arrived_at(e);
        }
        Ok(arrived)
    }

    /// Says that this rank has finished reading the blocks of the current
    /// collective of `lane`.
    pub fn lane_done(&mut self, lane: usize) -> Result<()> {
        let lane = lane_arg(lane)?;
        let e = self.lanes[lane].epoch;
        let (_, done, _) = self.seg.lane(self.rank, lane);
        // Release: this rank's reads of the slots before the word
        // (ordering 2).
        done.store(e, Ordering::Release);
        Ok(())
    }

    /// Waits until every member has finished reading this rank's blocks on
    /// `lane`, then frees the lane: called before the lane can go to
    /// another communicator, whose members may not include those readers.
    pub fn lane_quiesce(&mut self, lane: usize) -> Result<()> {
        let lane = lane_arg(lane)?;
        let members = self.lane_members(lane)?;
        let s = &self.lanes[lane];
        if s.epoch == s.start {
            // No collective ran on it: nothing to wait for.
            return Ok(());
        }
        let e = s.epoch;
        // On success the members stay taken: the lane serves none.
        let r = self.lane_wait_until(lane, &members, Word::Done, e, None, Waiters::Alone);
        if r.is_err() {
            self.lanes[lane].members = members;
        }
        r.map(|_| ())
    }

    /// The lane wait: every member's `word` at `target` or beyond,
    /// under the waiting policy of request waits (waiting.rs): spin, watch
    /// the awaited member's heartbeat, drive the point-to-point engine (a
    /// member may wait for this rank's messages before it arrives), run the
    /// health and deadline checks on the slow path; `waiters` says when it
    /// yields on shared CPUs and whether a member past `target` ends it.
    fn lane_wait_until(
        &mut self,
        lane: usize,
        members: &[usize],
        word: Word,
        target: u64,
        budget: Option<Duration>,
        waiters: Waiters,
    ) -> Result<bool> {
        let mut w = match self.lane_resume.take() {
            Some(w) if w.lane == lane && w.word == word && w.target == target => w,
            _ => LaneWait {
                lane,
                word,
                target,
                next: 0,
                b: if budget.is_some() {
                    Backoff::yielding()
                } else {
                    Backoff::new()
                },
                i: 0,
                here: false,
                start: None,
                watch: PeerWatch::new(members.first().copied().unwrap_or(0), self.watch_every()),
            },
        };
        let mut began: Option<Instant> = None;
        let quiet = if self.watch_peers {
            QUIET_TURNS_SHARED
        } else {
            QUIET_TURNS
        };
        loop {
            let by_all = waiters == Waiters::EveryoneByAll;
            self.lane_scan(lane, members, word, target, by_all, &mut w.next);
            let Some(&peer) = members.get(w.next) else {
                self.beat_leave();
                return Ok(true);
            };
            if w.watch.peer() != peer {
                w.watch = PeerWatch::new(peer, self.watch_every());
            }
            w.i = w.i.wrapping_add(1);
            if w.i < quiet {
                // Most lane waits end within a line transfer or two: no
                // heartbeat read (a cache miss on the peer's line), no
                // engine pass before these turns are over.
                std::hint::spin_loop();
                continue;
            }
            if w.i % 16 == 0 {
                let before = self.activity;
                self.progress()?;
                if self.activity != before {
                    w.b.reset();
                }
            }
            let mut stalled = false;
            if w.b.spinning() {
                if self.watch_peers && waiters != Waiters::Alone {
                    // Once a member needed this CPU, look on every turn
                    // (each one a yield): spin again as soon as none does.
                    let deep = w.i % self.watch_every() == 0;
                    if w.here || deep || w.i == quiet {
                        w.here =
                            self.missing_member_here(lane, &members[w.next..], word, target, deep);
                    }
                    stalled = w.here;
                } else {
                    stalled = w.watch.stalled(&self.seg, self.rank, w.i);
                    if !self.watch_peers && w.i % crate::waiting::WATCH_EVERY == 0 {
                        self.note_preemption();
                    }
                    stalled &= self.watch_peers || self.preempted;
                }
                if !stalled && w.i % crate::waiting::BEAT_EVERY == 0 {
                    self.beat_bump(Some(peer));
                }
            }
            if w.b.slow_check_due() {
                self.sweep()?;
                if let Some(b) = budget {
                    if began.get_or_insert_with(Instant::now).elapsed() >= b {
                        self.lane_resume = Some(w);
                        return Ok(false);
                    }
                }
                self.health(Some(peer))?;
                if w.start.get_or_insert_with(Instant::now).elapsed() > self.timeout {
                    self.beat_leave();
                    return Err(Error::Timeout(self.timeout));
                }
            }
            if stalled || !w.b.spinning() {
                self.beat_idle(Some(peer));
            }
            if stalled {
                w.b.snooze_yield();
            } else {
                w.b.snooze();
            }
        }
    }

    /// Moves `next` past the members of `members[next..]` whose `word` is
    /// at `target` or beyond, stopping at the first that is not; with
    /// `by_all` (a collective every member waits out), a member past
    /// `target` ends the scan: `next` is then `members.len()`, as when
    /// every member is there.
    #[inline(always)]
    fn lane_scan(
        &self,
        lane: usize,
        members: &[usize],
        word: Word,
        target: u64,
        by_all: bool,
        next: &mut usize,
    ) {
        // Acquire: the member's slot, or its reads, before its word
        // (orderings 1 and 2).
        while let Some(&m) = members.get(*next) {
            let v = self.lane_word(m, lane, word).load(Ordering::Acquire);
            if v < target {
                return;
            }
            if by_all && v > target {
                // `m` finished this collective, so saw every member's
                // word at `target` (Acquire) before its Release store of a
                // later one, which this Acquire load saw: every member's
                // slot is visible here too (happens-before is transitive,
                // ordering 3). Saves the lines of members on other CPUs on
                // a crowded barrier's critical path.
                *next = members.len();
                return;
            }
            *next += 1;
        }
    }

    /// Member `m`'s `word` of `lane`.
    fn lane_word(&self, m: usize, lane: usize, word: Word) -> &std::sync::atomic::AtomicU64 {
        if let Word::Pair { owner } = word {
            return pair_word(self.seg.lane_pair(owner, lane), owner, m);
        }
        let (arrival, done, _) = self.seg.lane(m, lane);
        match word {
            Word::Arrival => arrival,
            _ => done,
        }
    }

    /// Whether a member of `rest` that has not reached `target` last ran
    /// on the CPU this thread runs on now: it cannot run while this thread
    /// spins, so the wait gives the CPU away. Members elsewhere are not
    /// reasons to yield, even idle ones: every member of a lane collective
    /// waits for the same thing, and a member descheduled on another CPU
    /// runs as soon as its CPU's current rank arrives and yields there.
    /// Yielding for it instead (what the one-peer watch did) handed this
    /// CPU to a member with nothing to do yet, which handed it back: 3.5
    /// context switches per barrier of 4 ranks on 2 CPUs where one per
    /// CPU is the least. The spin phase still bounds the wait for a member
    /// that does not come (a CPU hog beside it).
    ///
    /// Where a member ran is read from its arrival line (the CPU of its
    /// last arrival, [`Segment::lane_cpu`]): that line is loaded anyway to
    /// see whether it arrived, where its heartbeat word is a line of its
    /// own that it rewrites at every yield, so a miss on the wait's path
    /// after every hand-over (and a read of it there makes the owner's
    /// next heartbeat store a miss too). `deep` (every `watch_every` turns)
    /// also reads the heartbeat: a member that moved to this CPU since its
    /// last arrival is found there.
    ///
    /// [`Segment::lane_cpu`]: crate::segment::Segment::lane_cpu
    fn missing_member_here(
        &self,
        lane: usize,
        rest: &[usize],
        word: Word,
        target: u64,
        deep: bool,
    ) -> bool {
        let Some(cpu) = crate::waiting::current_cpu() else {
            return false;
        };
        rest.iter().any(|&m| {
            // Relaxed: hints for the waiting policy; the Acquire loads of
            // the wait loop decide completion.
            self.lane_word(m, lane, word).load(Ordering::Relaxed) < target
                && (self.seg.lane_cpu(m, lane).load(Ordering::Relaxed) == cpu as u64 + 1
                    || deep && crate::waiting::beat_cpu(&self.seg, m) == Some(cpu))
        })
    }

    /// The first [`QUICK_TURNS`] turns of a crowded wait for every member's
    /// arrival at the current collective of `lane`, in a collective every
    /// member waits out (`Awaited::AllByAll`: a barrier, an allreduce):
    /// `Ok(true)` when it ended there, `Ok(false)` to go on in
    /// [`Comm::lane_wait`]. The same rule as the full wait (yield while a
    /// missing member last arrived on this CPU, spin otherwise; a deep look
    /// at the heartbeats every [`QUICK_DEEP_EVERY`] turns, for a member that
    /// moved here since; end at a member already past the collective)
    /// without its bookkeeping: no resumable state, no engine pass, no
    /// slow-path checks, which the full wait makes once this gives up. A
    /// crowded barrier's period is a `sched_yield` hand-over plus two
    /// passes of this code on cold caches right after a context switch, so
    /// its length is on the critical path: 4 ranks on the 2-vCPU Intel
    /// Xeon VM, 1.09-1.11 -> 1.03-1.05 us per `MPI_Barrier` under
    /// `topocomm accel`, 8-byte `MPI_Allreduce` 1.26 -> 1.22
    /// (docs/collectives.md, session 47).
    fn lane_wait_quick(&mut self, lane: usize) -> Result<bool> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let e = self.lanes[lane].epoch;
        let mut next = 0;
        for turn in 1..=QUICK_TURNS {
            let members = &self.lanes[lane].members;
            self.lane_scan(lane, members, Word::Arrival, e, true, &mut next);
            let Some(&peer) = members.get(next) else {
                self.lanes[lane].all_arrived_at(e);
                self.beat_leave();
                return Ok(true);
            };
            let deep = turn % QUICK_DEEP_EVERY == 0;
            if self.missing_member_here(lane, &members[next..], Word::Arrival, e, deep) {
                self.beat_idle(Some(peer));
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        Ok(false)
    }

    /// Publishes this rank's part and waits for the others in one call (one call
    /// across the C ABI per collective on the latency path): `Ok(false)`
    /// when `budget` ran out first; calling again with the same arguments
    /// goes on (it arrives only once). `data`: this rank's contribution
    /// (`None`: it publishes none, e.g. a broadcast's receiver). Once
    /// complete, `blocks` (if given) holds where each member's `len` bytes
    /// lie (members in the communicator's order; with `only`, that
    /// member's alone).
    #[allow(clippy::too_many_arguments)]
    pub fn lane_exchange(
        &mut self,
        lane: usize,
        data: Option<&[u8]>,
        len: usize,
        reads: bool,
        awaited: Awaited,
        budget: Option<Duration>,
        blocks: Option<&mut [*const u8]>,
    ) -> Result<bool> {
        let lane = lane_arg(lane)?;
        let mut quick = false;
        if !self.lanes[lane].pending {
            if self
                .lane_arrive(lane, data.unwrap_or(&[]), reads, budget)?
                .is_none()
            {
                return Ok(false);
            }
            self.lanes[lane].pending = true;
            quick = awaited == Awaited::AllByAll && self.watch_peers;
        }
        let arrived =
            (quick && self.lane_wait_quick(lane)?) || self.lane_wait(lane, awaited, budget)?;
        if !arrived {
            return Ok(false);
        }
        self.lanes[lane].pending = false;
        if let Some(out) = blocks {
            let e = self.lanes[lane].epoch;
            let one;
            let who: &[usize] = match awaited {
                Awaited::One(m) => {
                    one = [m];
                    &one
                }
                _ => &self.lanes[lane].members,
            };
            if out.len() < who.len() {
                return Err(Error::Invalid(format!(
                    "lane {lane}: room for {} block pointers, {} members",
                    out.len(),
                    who.len()
                )));
            }
            for (o, &m) in out.iter_mut().zip(who) {
                *o = slot(self.seg.lane(m, lane).2, e, len.min(LANE_DATA)) as *const u8;
            }
        }
        Ok(true)
    }

    /// The next collective of a 2-member `lane` on its pair line: publishes
    /// `data` (at most [`PAIR_DATA`] bytes, empty for a barrier) and waits
    /// for the other member's arrival, for at most `budget` (`None`: no
    /// limit); then copies the other's `data.len()` bytes into `out`.
    /// `Ok(false)` when the budget ran out first: call again with the same
    /// arguments (it publishes once).
    pub fn pair_exchange(
        &mut self,
        lane: usize,
        data: &[u8],
        out: &mut [u8],
        budget: Option<Duration>,
    ) -> Result<bool> {
        if self.pair_exchange_fast(lane, data, out) {
            return Ok(true);
        }
        let lane = lane_arg(lane)?;
        if data.len() > PAIR_DATA || out.len() < data.len() {
            return Err(Error::Invalid(format!(
                "lane {lane}: a pair collective takes at most {PAIR_DATA} bytes and room for \
                 them ({} bytes, room for {})",
                data.len(),
                out.len()
            )));
        }
        // The two members copied out (no borrow of the lane state across
        // the waits below, and no taking of its vector on this path).
        let (a, b) = match self.lanes[lane].members[..] {
            [a, b] => (a, b),
            [] => {
                return Err(Error::Invalid(format!(
                    "lane {lane} serves no communicator"
                )))
            }
            ref m => {
                return Err(Error::Invalid(format!(
                    "lane {lane} has {} members; a pair collective takes 2",
                    m.len()
                )))
            }
        };
        let (owner, peer) = (a.min(b), if a == self.rank { b } else { a });
        let line = self.seg.lane_pair(owner, lane);
        let done: *const AtomicU64 = self.seg.lane(self.rank, lane).1;
        self.lanes[lane].pair = Some(PairLine {
            line,
            me: usize::from(self.rank != owner),
            done,
        });
        if !self.lanes[lane].pending {
            let e = self.lanes[lane].epoch + 1;
            if self.lanes[lane].finished + 2 < e {
                // Slot e % 2 last held epoch e - 2, and the collective
                // before this one did not show the peer past it (a rooted
                // lane collective): wait for its done word (ordering 2).
                let r =
                    self.lane_wait_until(lane, &[peer], Word::Done, e - 2, budget, Waiters::Alone);
                if !r? {
                    return Ok(false);
                }
                self.lanes[lane].finished = e - 2;
                return self.pair_exchange(lane, data, out, budget);
            }
            self.lanes[lane].epoch = e;
            self.lanes[lane].pending = true;
            if self.watch_peers {
                self.beat_note_cpu();
            }
            if !data.is_empty() {
                let me = usize::from(self.rank != owner);
                // SAFETY: this member's slot e % 2 on the pair line,
                // PAIR_DATA bytes (checked length); the peer reads it only
                // once the word says e, and finished epoch e - 2 (ordering 2).
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), pair_slot(line, me, e), data.len())
                };
            }
            // Release: the slot before the word (ordering 1).
            pair_word(line, owner, self.rank).store(e, Ordering::Release);
        }
        let e = self.lanes[lane].epoch;
        if !self.pair_quick(line, owner, peer, e) {
            let r = self.lane_wait_until(
                lane,
                &[peer],
                Word::Pair { owner },
                e,
                budget,
                Waiters::Everyone,
            );
            if !r? {
                return Ok(false);
            }
        }
        let s = &mut self.lanes[lane];
        s.pending = false;
        // The peer, the pair's only other member, arrived at e.
        s.all_arrived_at(e);
        if !data.is_empty() {
            let theirs = pair_slot(line, usize::from(peer != owner), e);
            // SAFETY: the peer's slot e % 2, published (Acquire in the
            // wait); it writes it again only after this member arrives at
            // e + 1.
            unsafe { std::ptr::copy_nonoverlapping(theirs, out.as_mut_ptr(), data.len()) };
        }
        let (_, done, _) = self.seg.lane(self.rank, lane);
        // Release: the read above before the word, for lane collectives
        // and the quiesce that go by done words (ordering 2).
        done.store(e, Ordering::Release);
        Ok(true)
    }

    /// [`Comm::pair_exchange`] when nothing needs its general path (the C
    /// ABI tries it before it converts the budget):
    /// a CPU per rank (no peer watching), no sliced wait to resume, a
    /// known pair line, both of the line's slots free (the collective two
    /// back is known finished) and the peer arriving within
    /// [`PAIR_QUICK_TURNS`] polls. `true`: done. `false`: the general path
    /// goes on, either from the start (nothing published) or, with the
    /// lane pending, from the wait. The pair's collectives take tens of
    /// nanoseconds, and every instruction between seeing the peer's word
    /// and storing the next one is on both members' critical path: with
    /// this path (and the C ABI's budget conversion after it) a 2-rank
    /// `MPI_Barrier` went from about 300 to 170 instructions and from
    /// 0.085-0.09 to 0.066-0.075 us on the 2-vCPU AMD EPYC (Zen 5) VM.
    #[inline(always)]
    pub fn pair_exchange_fast(&mut self, lane: usize, data: &[u8], out: &mut [u8]) -> bool {
        if self.watch_peers
            || self.lane_resume.is_some()
            || self.broken.is_some()
            || data.len() > PAIR_DATA
            || out.len() < data.len()
        {
            return false;
        }
        let Some(s) = self.lanes.get_mut(lane) else {
            return false;
        };
        let Some(p) = s.pair else {
            return false;
        };
        let e = s.epoch + 1;
        if s.pending || s.finished + 2 < e {
            return false;
        }
        s.epoch = e;
        s.pending = true;
        if !data.is_empty() {
            // SAFETY: this member's slot e % 2 on the pair line, PAIR_DATA
            // bytes (checked length); the peer reads it only once the word
            // says e, and finished epoch e - 2 (ordering 2).
            unsafe { copy_small(data.as_ptr(), pair_slot(p.line, p.me, e), data.len()) };
        }
        // Release: the slot before the word (ordering 1).
        p.word(p.me).store(e, Ordering::Release);
        let theirs = p.word(1 - p.me);
        for _ in 0..PAIR_QUICK_TURNS {
            // Acquire: the peer's slot of e is visible (ordering 1).
            if theirs.load(Ordering::Acquire) >= e {
                s.pending = false;
                s.all_arrived_at(e);
                if !data.is_empty() {
                    // SAFETY: the peer's slot e % 2, published; it writes
                    // it again only after this member arrives at e + 1.
                    unsafe {
                        copy_small(pair_slot(p.line, 1 - p.me, e), out.as_mut_ptr(), data.len())
                    };
                }
                // SAFETY: this member's done word in the segment, which
                // outlives the lane state; only accessed atomically.
                // Release: the read above before the word (ordering 2).
                unsafe { &*p.done }.store(e, Ordering::Release);
                return true;
            }
            std::hint::spin_loop();
        }
        false
    }

    /// The short path of a pair wait: with a CPU per rank (no peer
    /// watching) and no sliced wait to resume, poll the peer's word on the
    /// pair line for [`PAIR_QUICK_TURNS`] turns before the general wait
    /// (`lane_wait_until`) sets up its state. The pair's collectives are
    /// tens of nanoseconds, so that setup (its watch and backoff state,
    /// the resume check) was a visible part of a 2-rank barrier: about
    /// 640 instructions per barrier through the C ABI before this path,
    /// by callgrind, against about 10 for the line's own store and poll.
    /// `true`: the peer arrived at `e` (Acquire: its slot is visible,
    /// ordering 1).
    #[inline(always)]
    fn pair_quick(&self, line: *mut u8, owner: usize, peer: usize, e: u64) -> bool {
        if self.watch_peers || self.lane_resume.is_some() {
            return false;
        }
        let word = pair_word(line, owner, peer);
        for _ in 0..PAIR_QUICK_TURNS {
            if word.load(Ordering::Acquire) >= e {
                return true;
            }
            std::hint::spin_loop();
        }
        false
    }

    /// A barrier of the members of `lane`: every member publishes its
    /// arrival and waits for all others'.
    pub fn lane_barrier(&mut self, lane: usize) -> Result<()> {
        self.lane_arrive(lane, &[], false, None)?;
        self.lane_wait(lane, Awaited::AllByAll, None).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::{pair_slot, slot, Awaited, Word};
    use crate::comm::Comm;
    use crate::segment::{LANE_BYTES, LANE_DATA, LANE_INLINE, PAIR_DATA};
    use std::sync::atomic::Ordering;

    #[test]
    fn slots_blocks_and_words_never_overlap() {
        let mut lane = vec![0u8; LANE_BYTES];
        let base = lane.as_mut_ptr();
        let range = |e: u64, len: usize| {
            let at = slot(base, e, len) as usize - base as usize;
            at..at + len
        };
        for len in [LANE_INLINE, LANE_DATA] {
            let (a, b) = (range(0, len), range(1, len));
            assert!(a.end <= b.start || b.end <= a.start, "{a:?} {b:?}");
            for r in [a, b] {
                assert!(r.end <= LANE_BYTES, "{r:?}");
                // Arrival word 0..8, done word 64..72, pair line 128..192.
                assert!(r.start >= 8 && !(r.start < 72 && r.end > 64), "{r:?}");
                assert!(!(r.start < 192 && r.end > 128), "{r:?}");
            }
        }
        // Inline slots share the arrival word's line; blocks do not; the
        // CPU word (56..64, `Segment::lane_cpu`) is clear of both slots.
        assert!(range(1, LANE_INLINE).end <= 56);
        assert!(range(0, LANE_INLINE + 1).start >= 192);
        // The pair line's words and slots: distinct, inside its line.
        let line = base.wrapping_add(128);
        let mut spans = vec![0..8, 8..16];
        for i in 0..2 {
            for e in 0..2 {
                let at = pair_slot(line, i, e) as usize - line as usize;
                spans.push(at..at + PAIR_DATA);
            }
        }
        for (k, a) in spans.iter().enumerate() {
            assert!(a.end <= 64, "{a:?}");
            for b in &spans[k + 1..] {
                assert!(a.end <= b.start || b.end <= a.start, "{a:?} {b:?}");
            }
        }
    }

    /// A member that has not arrived counts as "here" from the CPU of its
    /// last arrival, read from its arrival line; a deep look also finds it
    /// by its heartbeat (it moved here since); an arrived member never
    /// counts.
    #[test]
    fn a_missing_member_is_found_on_this_cpu_by_its_arrival_line() {
        std::env::remove_var("TOPOCOMM_SHM_FD");
        let mut c = Comm::init().unwrap();
        // Pinned, so that "this CPU" holds still during the test (the
        // test's own thread; it ends with the test).
        // SAFETY: a zeroed cpu_set_t with CPU 0 set, for this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
        }
        c.watch_peers = true;
        c.lane_barrier(0).unwrap();
        let e = c.lane_epoch(0).unwrap();
        let cpu = c.seg.lane_cpu(0, 0);
        assert_eq!(cpu.load(Ordering::Relaxed), 1, "CPU 0, stored as 1");
        assert!(c.missing_member_here(0, &[0], Word::Arrival, e + 1, false));
        assert!(
            !c.missing_member_here(0, &[0], Word::Arrival, e, true),
            "arrived"
        );
        // Its arrival line says elsewhere: only the heartbeat (deep) says
        // here.
        cpu.store(100, Ordering::Relaxed);
        assert!(!c.missing_member_here(0, &[0], Word::Arrival, e + 1, false));
        assert!(c.missing_member_here(0, &[0], Word::Arrival, e + 1, true));
    }

    /// A wait for every member of a collective that all members wait
    /// out (`AllByAll`) ends at a member already at a later collective
    /// (that one saw everyone arrive); a wait for every member alone
    /// (`All`: a reduce's root, whose members leave at once) does not: a
    /// member at a later collective says nothing about the others there.
    #[test]
    fn a_member_past_the_collective_ends_only_a_wait_that_all_members_wait_out() {
        crate::threads_job::job(3, None, |c| {
            if c.rank() != 0 {
                // Alive until rank 0 is done (a finalized member is a
                // dead peer to a wait).
                c.recv(&mut [], 0, 9).unwrap();
                return;
            }
            // Lane 5 for rank 0 alone; ranks 1 and 2 never touch it, so
            // their words say what this test stores.
            c.lane_start(5, 0, &[0, 1, 2]).unwrap();
            let slice = Some(std::time::Duration::from_millis(5));
            // Rank 1 past the collective, rank 2 behind it.
            let e = c.lane_arrive(5, &[], false, None).unwrap().unwrap();
            c.seg.lane(1, 5).0.store(e + 1, Ordering::Release);
            c.seg.lane(2, 5).0.store(e - 1, Ordering::Release);
            assert!(c.lane_wait(5, Awaited::AllByAll, slice).unwrap());
            // The same for a wait for all alone: rank 2 is missing.
            let e = c.lane_arrive(5, &[], false, None).unwrap().unwrap();
            c.seg.lane(1, 5).0.store(e + 1, Ordering::Release);
            assert!(
                !c.lane_wait(5, Awaited::All, slice).unwrap(),
                "rank 2 missing"
            );
            c.seg.lane(2, 5).0.store(e, Ordering::Release);
            assert!(c.lane_wait(5, Awaited::All, slice).unwrap());
            // Rank 1 exactly at the collective: no shortcut.
            let e = c.lane_arrive(5, &[], false, None).unwrap().unwrap();
            c.seg.lane(1, 5).0.store(e, Ordering::Release);
            assert!(!c.lane_wait(5, Awaited::AllByAll, slice).unwrap());
            c.seg.lane(2, 5).0.store(e, Ordering::Release);
            assert!(c.lane_wait(5, Awaited::AllByAll, slice).unwrap());
            c.send(&[], 1, 9).unwrap();
            c.send(&[], 2, 9).unwrap();
        });
    }

    /// The short path of a crowded barrier's wait ends as the full wait
    /// does (every member at the collective, or one past it), gives up
    /// after its turns when a member is missing, and ends a lane exchange
    /// that the full wait then completes.
    #[test]
    fn a_crowded_barrier_waits_on_the_short_path_then_the_full_one() {
        crate::threads_job::job(3, None, |c| {
            if c.rank() != 0 {
                c.recv(&mut [], 0, 9).unwrap();
                return;
            }
            c.watch_peers = true;
            c.lane_start(6, 0, &[0, 1, 2]).unwrap();
            // Ranks 1 and 2 at the collective: done on the short path.
            let e = c.lane_arrive(6, &[], false, None).unwrap().unwrap();
            c.seg.lane(1, 6).0.store(e, Ordering::Release);
            c.seg.lane(2, 6).0.store(e, Ordering::Release);
            assert!(c.lane_wait_quick(6).unwrap());
            // Every member arrived at e: the slots of e - 1 are free (the
            // next arrival with data need not wait for done words).
            assert_eq!(c.lanes[6].finished, e - 1);
            // Rank 1 past it: done, whatever rank 2's word says.
            let e = c.lane_arrive(6, &[], false, None).unwrap().unwrap();
            c.seg.lane(1, 6).0.store(e + 1, Ordering::Release);
            assert!(c.lane_wait_quick(6).unwrap());
            // Rank 1 at it, rank 2 behind on another CPU: the short path
            // gives up (bounded), the full wait ends once rank 2 arrives.
            let e = c.lane_arrive(6, &[], false, None).unwrap().unwrap();
            c.seg.lane(1, 6).0.store(e, Ordering::Release);
            c.seg.lane_cpu(2, 6).store(1000, Ordering::Relaxed);
            assert!(!c.lane_wait_quick(6).unwrap(), "rank 2 missing");
            let slice = Some(std::time::Duration::from_millis(5));
            assert!(!c.lane_wait(6, Awaited::AllByAll, slice).unwrap());
            c.seg.lane(2, 6).0.store(e, Ordering::Release);
            assert!(c.lane_wait(6, Awaited::AllByAll, slice).unwrap());
            // Through lane_exchange: a barrier with rank 2 behind returns
            // unfinished within its budget, and finishes once it arrives.
            let slice = Some(std::time::Duration::from_millis(5));
            let ex = |c: &mut Comm| {
                c.lane_exchange(6, None, 0, false, Awaited::AllByAll, slice, None)
                    .unwrap()
            };
            let e = c.lane_epoch(6).unwrap() + 1;
            c.seg.lane(1, 6).0.store(e, Ordering::Release);
            assert!(!ex(c));
            c.seg.lane(2, 6).0.store(e, Ordering::Release);
            assert!(ex(c));
            assert_eq!(c.lane_epoch(6).unwrap(), e, "arrived once");
            c.send(&[], 1, 9).unwrap();
            c.send(&[], 2, 9).unwrap();
        });
    }

    #[test]
    fn a_single_rank_runs_lane_collectives_and_refuses_bad_arguments() {
        std::env::remove_var("TOPOCOMM_SHM_FD");
        let mut c = Comm::init().unwrap();
        for _ in 0..5 {
            c.lane_barrier(0).unwrap();
        }
        assert_eq!(c.lane_epoch(0).unwrap(), 5);
        assert!(c
            .lane_barrier(3)
            .unwrap_err()
            .to_string()
            .contains("serves no"));
        c.lane_start(3, 0, &[0]).unwrap();
        // Inline slots and data blocks alternate and hold what was
        // published.
        for k in 0..8u8 {
            let len = if k % 4 < 2 { 16 } else { 600 };
            let e = c
                .lane_arrive(3, &vec![k; len], true, None)
                .unwrap()
                .unwrap();
            assert!(c.lane_wait(3, Awaited::All, None).unwrap());
            let p = slot(c.seg.lane(0, 3).2, e, len);
            // SAFETY: len bytes of this rank's own slot, just published.
            let got = unsafe { std::slice::from_raw_parts(p, len) };
            assert_eq!(got, &vec![k; len][..], "epoch {e}");
            c.lane_done(3).unwrap();
        }
        // The same in one call per collective.
        for k in 0..4u8 {
            let mut at = [std::ptr::null::<u8>(); 1];
            let data = vec![k; 40];
            assert!(c
                .lane_exchange(3, Some(&data), 40, true, Awaited::All, None, Some(&mut at))
                .unwrap());
            // SAFETY: 40 bytes of this rank's own block, just published.
            assert_eq!(unsafe { std::slice::from_raw_parts(at[0], 40) }, &data[..]);
            c.lane_done(3).unwrap();
        }
        c.lane_quiesce(3).unwrap();
        // A lane that ran nothing since it was handed on has nothing to
        // wait for (its members' words may all be behind its epoch).
        c.lane_start(3, 100, &[0]).unwrap();
        c.lane_quiesce(3).unwrap();
        // A lane handed on keeps counting forward, never back.
        c.lane_start(3, 110, &[0]).unwrap();
        assert!(c
            .lane_start(3, 109, &[0])
            .unwrap_err()
            .to_string()
            .contains("behind"));
        assert!(c
            .lane_barrier(64)
            .unwrap_err()
            .to_string()
            .contains("lane 64"));
        assert!(c
            .lane_start(2, 0, &[1])
            .unwrap_err()
            .to_string()
            .contains("out of range"));
        assert!(c.lane_wait(3, Awaited::One(1), None).is_err());
        let big = vec![0u8; LANE_DATA + 1];
        assert!(c.lane_arrive(3, &big, true, None).is_err());
    }
}
