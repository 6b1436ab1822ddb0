//! The communicator: MPI-like point-to-point messaging over the segment's
//! single-producer/single-consumer channels (protocols in docs/transport.md).
//!
//! Memory orderings used on the shared segment (every other access is a
//! plain access to memory the protocol gives to one side at a time):
//! 1. Cell publication: the sender writes the cell fields, the inline
//!    payload and/or the fragment slot, then `seq.store(pos + 1, Release)`;
//!    the receiver's `seq.load(Acquire) == pos + 1` makes all of them
//!    visible. Non-temporal copies end with `sfence` before that store.
//! 2. Cell reuse: the receiver reads a cell, then `tail.store(Release)`;
//!    the sender `tail.load(Acquire)`s before overwriting the cell one lap
//!    later, so the receiver's reads happen-before the overwrite.
//! 3. Slot reuse: the same pairing with `frags_done`.
//! 4. Doorbells are hints (Relaxed): a set bit puts the channel in the
//!    receiver's poll set; a bit lost in the clear/set race is recovered by
//!    the progress pass's rotating look at the channels outside the poll set
//!    (and the full sweep of the slow wait path), so correctness never
//!    depends on it.
//! 5. Rank states and the start-up barrier use Release/Acquire so that a
//!    peer seen as up has published its pid and probe word.
//! 6. Duplex halves (segment.rs, `Duplex`): the sender writes its half's
//!    tag, context and payload, then one `word` (position, count, its ack
//!    of the peer's duplex messages, length) with `Release`; the
//!    receiver's `word.load(Acquire)` makes the fields visible; the sender
//!    rewrites its half only after an `Acquire` load of the peer's word
//!    whose ack covers its last message there (the `Release` of that word
//!    also orders the peer's copy of the message before it).
//!
//! The communicator's parts: `send.rs` (protocols, sender queues, cell and
//! fragment pushing), `recv.rs` (posted and unexpected queues, matching,
//! delivery), `progress.rs` (draining channels, the progress engine, health
//! checks), `waiting.rs` (wait, test, probe), `request.rs` (the request
//! table) and `startup.rs` (start-up helpers).

use crate::error::{Error, Result};
use crate::recv::{In, Key, Unexp};
use crate::request::Req;
use crate::segment::{Segment, ST_FINALIZED, ST_UP};
use crate::send::Out;
use crate::startup::{
    attach_and_close, endpoints, env_usize, single_pu, singleton_params, timeout_from_env,
};
use crate::wait::Backoff;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Receive from any rank.
pub const ANY_SOURCE: i32 = -1;
/// Match any (non-negative) tag.
pub const ANY_TAG: i32 = -1;
/// Internal key of [`Comm::barrier`]: user tags are >= 0.
const BARRIER: Key = Key { tag: -7, ctx: 0 };

/// A rank's endpoint.
pub struct Comm {
    pub(crate) seg: Segment,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) outs: Vec<Out>,
    pub(crate) ins: Vec<In>,
    pub(crate) reqs: Vec<Req>,
    pub(crate) free: Vec<u32>,
    pub(crate) posted: VecDeque<u32>,
    pub(crate) unexp: VecDeque<Unexp>,
    /// Buffers of delivered unexpected eager messages (spare.rs).
    pub(crate) spare: crate::spare::Spare,
    pub(crate) pending_outs: Vec<usize>,
    pub(crate) active: Vec<u64>,
    /// Progress passes since the last look at channels outside the poll
    /// set, and the next channel to look at (progress.rs, `look_idle`).
    pub(crate) idle_turn: u32,
    pub(crate) idle_next: usize,
    pub(crate) pids: Vec<i32>,
    pub(crate) cma_ok: bool,
    pub(crate) cma_note: String,
    /// A `put` failed (not for a dead peer): later ones are refused at
    /// once, the caller sending instead (put.rs).
    pub(crate) put_failed: bool,
    /// Gets and puts this rank may still make before they fail as if
    /// refused (`TOPOCOMM_FAIL_PUTS`, a test hook); `None`: no limit.
    pub(crate) puts_left: Option<u64>,
    /// Whether a receiver asks the sender to help with a single-copy read
    /// (help.rs): unless `TOPOCOMM_HELP=0`, on nodes with a CPU per rank.
    pub(crate) help_on: bool,
    /// Writing a piece into a receiver failed (not for a dead peer): this
    /// rank helps no more.
    pub(crate) help_failed: bool,
    /// Pieces this rank wrote into its receivers, and its single-copy reads
    /// in which the sender wrote some.
    pub(crate) help_given: u64,
    pub(crate) helped_reads: u64,
    /// Tests: every piece this rank tries to write fails.
    #[cfg(test)]
    pub(crate) help_fail_writes: bool,
    /// Tests: a receiver asking for help claims no piece before the sender.
    #[cfg(test)]
    pub(crate) help_wait_sender: bool,
    pub(crate) timeout: Duration,
    /// The job's near order (near.rs), computed by the first collective
    /// that asks (`None` until then; `Some(None)`: there is none).
    pub(crate) job_near: Option<Option<crate::near::Near>>,
    pub(crate) broken: Option<Error>,
    /// The awaited peer a health check last found finalized: the next
    /// check reports it (see `Comm::health`).
    pub(crate) finalized_seen: Option<usize>,
    finalized: bool,
    /// Cells pushed plus cells consumed: a waiter that sees it move resets
    /// its backoff.
    pub(crate) activity: u64,
    /// This rank's waiting heartbeat, mirrored in its `RankSlot::beat`
    /// (waiting.rs).
    pub(crate) beat: u64,
    /// The waiting state of a sliced wait that ran out of budget.
    pub(crate) resume: Option<crate::waiting::WaitState>,
    /// Whether this job's own bindings may put two ranks on one CPU: the
    /// latency path then spins only briefly and looks at the sender's
    /// heartbeat first. (The general wait watches the awaited peer in any
    /// case: another job may be bound to our CPUs, which no binding shows.)
    pub(crate) watch_peers: bool,
    /// Whether some rank of the node watches its peers' heartbeats (its
    /// policy is not `Dedicated`); when none does, a heartbeat nobody
    /// reads need not be written by [`Comm::note_blocked`].
    pub(crate) beats_watched: bool,
    /// Whether the segment holds more ranks than the machine has online
    /// CPUs: then every wait of a busy rank lends its CPU to another rank's
    /// work, and the chooser weighs a two-copy stream by the copying it
    /// costs instead of its elapsed time (progress.rs, `stream_done`).
    pub(crate) crowded: bool,
    /// Whether a duplex half is demoted to the shared cache right after
    /// its word's store (`copy::demote_line`): where the CPU has CLDEMOTE,
    /// unless `TOPOCOMM_DEMOTE=0`.
    pub(crate) demote: bool,
    /// This thread's involuntary context switches at the last look, and
    /// whether they had moved (waiting.rs, `note_preemption`).
    pub(crate) preemptions: u64,
    pub(crate) preempted: bool,
    /// Collective lanes (lanes.rs), one state per lane.
    pub(crate) lanes: Vec<crate::lanes::LaneState>,
    /// The waiting state of a sliced lane wait that ran out of budget.
    pub(crate) lane_resume: Option<crate::lanes::LaneWait>,
    /// Rendezvous messages received by two-copy, by single copy, and how
    /// many of them were tries of the protocol then estimated slower.
    pub(crate) rdv_counts: [u64; 3],
    /// Of the two-copy ones, those copied out with streaming stores.
    pub(crate) rdv_streamed: u64,
    /// Of all, those received the way the sender asked (`pair_choice`).
    pub(crate) rdv_followed: u64,
    /// Answers received (`Comm::answers`): rendezvous requests within the
    /// eager limit, read as asked.
    pub(crate) rdv_answers: u64,
    /// Messages taken from every peer (inline, eager, rendezvous requests;
    /// not the replies to this rank's own rendezvous sends), the peer of
    /// the last one, and the count at this rank's last send above the
    /// inline limit: what tells an answer (`Comm::answers`).
    pub(crate) taken: u64,
    pub(crate) taken_from: usize,
    pub(crate) taken_at_send: u64,
    /// Timed two-copy streams weighed by both sides' copying, as part of an
    /// exchange (progress.rs, `stream_done`): `TOPOCOMM_VERBOSE` says how
    /// many, so a test can tell a ping-pong from an exchange.
    pub(crate) rdv_weighed_pair: u64,
    /// Set while a receive is being posted: single copy reads it matches
    /// wait in `deferred` for the next progress (recv.rs, `start_rdv`).
    pub(crate) defer_reads: bool,
    /// Single copy reads matched while posting receives, in order.
    pub(crate) deferred: std::collections::VecDeque<crate::recv::DeferredRead>,
    _probe: Box<AtomicU64>,
}

impl Comm {
    /// Joins the job the launcher started (`TOPOCOMM_SHM_FD`, `TOPOCOMM_RANK`,
    /// `TOPOCOMM_SIZE`); without them, a job of one rank.
    pub fn init() -> Result<Comm> {
        let timeout = timeout_from_env()?;
        let fd = env_usize("TOPOCOMM_SHM_FD")?;
        let (seg, rank) = match fd {
            None => {
                let seg =
                    Segment::create(1, &[crate::plan::Plan::alone("self", singleton_params())])
                        .map_err(Error::Setup)?;
                (seg, 0)
            }
            Some(fd) => {
                let seg = attach_and_close(fd as i32, "TOPOCOMM_SHM_FD")?;
                let rank = env_usize("TOPOCOMM_RANK")?
                    .ok_or_else(|| Error::Setup("TOPOCOMM_RANK is not set".into()))?;
                (seg, rank)
            }
        };
        let size = seg.nranks();
        if let Some(s) = env_usize("TOPOCOMM_SIZE")? {
            if s != size {
                return Err(Error::Setup(format!(
                    "TOPOCOMM_SIZE={s} but the segment holds {size} ranks"
                )));
            }
        }
        if rank >= size {
            return Err(Error::Setup(format!(
                "TOPOCOMM_RANK={rank} is out of range for {size} ranks"
            )));
        }
        Comm::start(seg, rank, timeout)
    }

    /// Joins as `rank` the job whose segment descriptor `fd` was created
    /// by [`crate::bootstrap::create_segment`] and passed to this process
    /// (e.g. over a Unix socket). The descriptor is consumed (closed) in all
    /// cases; the wait for the other ranks is bounded by `TOPOCOMM_TIMEOUT`.
    pub fn join(fd: std::os::fd::OwnedFd, rank: usize) -> Result<Comm> {
        let timeout = timeout_from_env()?;
        let seg = attach_and_close(std::os::fd::IntoRawFd::into_raw_fd(fd), "bootstrap")?;
        let size = seg.nranks();
        if rank >= size {
            return Err(Error::Setup(format!(
                "rank {rank} is out of range for the {size} ranks of the segment"
            )));
        }
        Comm::start(seg, rank, timeout)
    }

    fn start(seg: Segment, rank: usize, timeout: Duration) -> Result<Comm> {
        let size = seg.nranks();
        let started = std::time::Instant::now();
        let duplex = crate::startup::duplex_enabled().map_err(Error::Setup)?;
        let demote = crate::startup::demote_enabled().map_err(Error::Setup)?;
        let (outs, ins) = endpoints(&seg, rank, started, duplex);
        let probe = Box::new(AtomicU64::new(
            0x7c00_0000_0000_0000 ^ (u64::from(std::process::id()) << 16) ^ rank as u64,
        ));
        let single_copy = crate::cma::enabled().map_err(Error::Setup)?;
        if single_copy {
            crate::cma::allow_peers();
        }
        let me = seg.rank_slot(rank);
        me.pid
            .store(u64::from(std::process::id()), Ordering::Relaxed);
        me.probe_addr
            .store(probe.as_ptr() as u64, Ordering::Relaxed);
        me.probe_val
            .store(probe.load(Ordering::Relaxed), Ordering::Relaxed);
        me.bound_pu.store(
            single_pu().map_or(0, |p| u64::from(p) + 1),
            Ordering::Relaxed,
        );
        // Release: publishes pid, probe word and binding with the state.
        me.state.store(ST_UP, Ordering::Release);
        let mut comm = Comm {
            rank,
            size,
            outs,
            ins,
            reqs: Vec::new(),
            free: Vec::new(),
            posted: VecDeque::new(),
            unexp: VecDeque::new(),
            spare: Default::default(),
            pending_outs: Vec::new(),
            active: vec![0; size.div_ceil(64)],
            idle_turn: 0,
            idle_next: 0,
            pids: vec![0; size],
            cma_ok: false,
            cma_note: String::new(),
            put_failed: false,
            puts_left: None,
            help_on: false,
            help_failed: false,
            help_given: 0,
            helped_reads: 0,
            #[cfg(test)]
            help_fail_writes: false,
            #[cfg(test)]
            help_wait_sender: false,
            job_near: None,
            rdv_counts: [0; 3],
            rdv_streamed: 0,
            rdv_followed: 0,
            rdv_answers: 0,
            taken: 0,
            taken_from: usize::MAX,
            taken_at_send: 0,
            rdv_weighed_pair: 0,
            defer_reads: false,
            deferred: Default::default(),
            preemptions: 0,
            preempted: false,
            timeout,
            broken: None,
            finalized_seen: None,
            finalized: false,
            activity: 0,
            beat: 0,
            resume: None,
            lanes: crate::lanes::LaneState::initial(size),
            lane_resume: None,
            watch_peers: false,
            beats_watched: false,
            crowded: false,
            demote,
            _probe: probe,
            seg,
        };
        // Slot pages are mapped in now rather than by the first messages
        // (a page fault each): the owner allocates them before barrier 1,
        // so first touch places them on its NUMA node; after it, every rank
        // maps the pages the others allocated. Nothing is sent before
        // barrier 2, so the fallback's zeros are never data.
        let prefault = comm.prefault_wanted();
        if prefault {
            comm.prefault_slots(true);
        }
        comm.startup_barrier(1)?;
        if prefault {
            comm.prefault_slots(false);
        }
        let mut bound = Vec::with_capacity(size);
        for r in 0..size {
            let slot = comm.seg.rank_slot(r);
            comm.pids[r] = slot.pid.load(Ordering::Relaxed) as i32;
            bound.push(
                slot.bound_pu
                    .load(Ordering::Relaxed)
                    .checked_sub(1)
                    .map(|p| p as u32),
            );
        }
        // SAFETY: sysconf with a constant name.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
        let policy = crate::wait::Policy::choose(bound[rank], &bound, cpus);
        comm.watch_peers = policy != crate::wait::Policy::Dedicated;
        comm.crowded = size > cpus;
        // Crowded: a sender descheduled in the middle of its piece would
        // keep the receiver waiting.
        comm.help_on = crate::startup::help_enabled().map_err(Error::Setup)? && !comm.crowded;
        // TOPOCOMM_SPREAD=0: leave an unbound rank where the kernel put it.
        let spread = crate::startup::spread_enabled().map_err(Error::Setup)?;
        if comm.crowded && bound[rank].is_none() && spread {
            crate::spread::nudge(rank).map_err(Error::Setup)?;
        }
        // Every rank of the node chooses from the same bindings, so each
        // knows whether any of them reads heartbeats at all.
        comm.beats_watched = (0..size).any(|r| {
            crate::wait::Policy::choose(bound[r], &bound, cpus) != crate::wait::Policy::Dedicated
        });
        // TOPOCOMM_SPIN overrides the policy's spin phase (turns before
        // yielding): e.g. 1 for jobs with many more busy ranks than CPUs
        // (docs/transport.md, "Waiting").
        crate::wait::set_spin(
            crate::startup::spin_override()
                .map_err(Error::Setup)?
                .unwrap_or_else(|| policy.spin_turns()),
        );
        crate::copy::CopyChoice::from_env().map_err(Error::Setup)?;
        comm.puts_left = crate::startup::put_faults(rank).map_err(Error::Setup)?;
        // Measured here, once, rather than inside the first large copy.
        let copies = crate::copy::MisalignedCost::get();
        if std::env::var_os("TOPOCOMM_VERBOSE").is_some() {
            crate::say!("topocomm: rank {rank}: {policy}");
            crate::say!("topocomm: rank {rank}: {}", copies.describe());
        }
        let ok = if !single_copy {
            Err("switched off by TOPOCOMM_SINGLE_COPY=0".to_string())
        } else if size == 1 {
            crate::cma::probe_fork().map_err(|e| e.to_string())
        } else {
            comm.probe_neighbour()
        };
        let mine = comm.seg.rank_slot(rank);
        mine.cma_ok
            .store(if ok.is_ok() { 1 } else { 2 }, Ordering::Release);
        comm.startup_barrier(2)?;
        comm.cma_ok = (0..size).all(|r| comm.seg.rank_slot(r).cma_ok.load(Ordering::Acquire) == 1);
        comm.cma_note = match ok {
            Ok(()) if comm.cma_ok => "single copy (process_vm_readv) available".into(),
            Ok(()) => "single copy unavailable on some rank; two-copy only".into(),
            Err(e) => format!("single copy unavailable ({e}); two-copy only"),
        };
        if rank == 0 && std::env::var_os("TOPOCOMM_QUIET").is_none() {
            let wanted = (0..size).any(|r| comm.ins[r].plan.cma != 0);
            // Said when it was not asked for: switched off, it is no news.
            if !comm.cma_ok && wanted && single_copy {
                crate::say!("topocomm: {}", comm.cma_note);
            }
            if std::env::var_os("TOPOCOMM_VERBOSE").is_some() {
                comm.print_mechanisms();
            }
        }
        Ok(comm)
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn check_peer(&self, peer: usize, what: &str) -> Result<()> {
        if peer >= self.size {
            return Err(Error::Invalid(format!(
                "{what} rank {peer} is out of range (job of {} ranks)",
                self.size
            )));
        }
        Ok(())
    }

    /// Blocks until every rank has entered the barrier: lane 0's pair line
    /// with two ranks (one cache line for both words), its flags up to
    /// [`crate::lanes::FLAT_MAX`] ranks (lanes.rs), else messages through
    /// rank 0.
    pub fn barrier(&mut self) -> Result<()> {
        if self.lane_size(0)? == 2 {
            return self.pair_exchange(0, &[], &mut [], None).map(|_| ());
        }
        if self.size <= crate::lanes::FLAT_MAX {
            return self.lane_barrier(0);
        }
        let mut z = [0u8; 0];
        if self.rank == 0 {
            for _ in 1..self.size {
                // SAFETY: zero-byte buffer, waited for immediately.
                let r = unsafe { self.irecv_inner(z.as_mut_ptr(), 0, ANY_SOURCE, BARRIER)? };
                self.wait(r)?;
            }
            for d in 1..self.size {
                // SAFETY: zero-byte buffer, waited for immediately.
                let r = unsafe { self.isend_inner(z.as_ptr(), 0, d, BARRIER, false, false)? };
                self.wait(r)?;
            }
        } else {
            // SAFETY: as above.
            let r = unsafe { self.isend_inner(z.as_ptr(), 0, 0, BARRIER, false, false)? };
            self.wait(r)?;
            // SAFETY: as above.
            let r = unsafe { self.irecv_inner(z.as_mut_ptr(), 0, 0, BARRIER)? };
            self.wait(r)?;
        }
        Ok(())
    }

    /// Pushes out queued sends and marks this rank finalized. Called by drop.
    pub fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let start = Instant::now();
        let mut b = Backoff::new();
        let mut res = Ok(());
        while !self.pending_outs.is_empty() && self.broken.is_none() {
            if let Err(e) = self.progress() {
                res = Err(e);
                break;
            }
            if b.slow_check_due() {
                if let Err(e) = self.health(None) {
                    res = Err(e);
                    break;
                }
                if start.elapsed() > self.timeout {
                    res = Err(Error::Timeout(self.timeout));
                    break;
                }
            }
            b.snooze();
        }
        if std::env::var_os("TOPOCOMM_VERBOSE").is_some() {
            self.say_rendezvous();
        }
        // Release: everything we published precedes the state change.
        self.seg
            .rank_slot(self.rank)
            .state
            .store(ST_FINALIZED, Ordering::Release);
        res
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        let _ = self.finalize();
    }
}
