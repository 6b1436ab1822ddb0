//! Collective lanes: small collectives through flags in the segment instead
//! of messages (docs/collectives.md, "Lanes").
//!
//! Every rank owns, per lane, one sequence word on a cache line of its own
//! and two data blocks. Lane `l` belongs to the communicator whose matching
//! context is `l`, so a rank's lane serves one communicator at a time and
//! the members of that communicator call its collectives in the same order
//! (MPI's rule): the k-th collective of the lane is epoch `e` on every
//! member, counted on from the members' largest epoch when the lane is
//! given to a communicator ([`Comm::lane_start`]).
//!
//! A member publishes epoch `e` by storing `2e` in its sequence word once
//! its contribution is in data block `e % 2`, and `2e + 1` once it has
//! finished reading the others' blocks of `e` (or at once, when it reads
//! nothing). A reader waits for `seq >= 2e` of the members it needs. The
//! word only grows, so a member already further on still satisfies it.
//!
//! Memory orderings:
//! 1. Publication: the owner writes its block, then `seq.store(2e,
//!    Release)`; a reader's `seq.load(Acquire) >= 2e` makes the block
//!    visible.
//! 2. Block reuse: block `e % 2` is written again at epoch `e + 2`. Before
//!    that the owner has seen (Acquire) every member's `seq >= 2e + 1`,
//!    stored (Release) after its last read of the block, so the reads
//!    happen-before the overwrite. Most collectives see it on the way
//!    (an allreduce waits for every member's `2(e+1)`, published after
//!    its reads of `e`); the others wait for it ([`Comm::lane_arrive`]).

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::segment::{LANES, LANE_DATA};
use crate::wait::Backoff;
use crate::waiting::PeerWatch;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Most members for which a lane collective reads every member's word
/// (each of n members reads n - 1 lines); larger communicators use
/// message trees.
pub const FLAT_MAX: usize = 16;

/// Per-lane state of this rank.
#[derive(Clone, Debug, Default)]
pub(crate) struct LaneState {
    /// The epoch of the lane's current (or last) collective.
    epoch: u64,
    /// A value every member's sequence word was seen to reach: the blocks
    /// of epochs whose `2e + 1` it covers are free to reuse.
    seen: u64,
    /// The epoch the lane's communicator started from: the blocks of
    /// earlier collectives were freed by the previous owner's quiesce.
    start: u64,
    /// The communicator's members (transport ranks, in its rank order);
    /// empty while the lane serves none.
    members: Vec<usize>,
}

impl LaneState {
    /// The lanes of a rank of a job of `size` ranks: lane 0 serves the
    /// plain `tc_*` API's collectives over every rank, the others none yet.
    pub(crate) fn initial(size: usize) -> Vec<LaneState> {
        let mut v = vec![LaneState::default(); LANES];
        v[0].members = (0..size).collect();
        v
    }
}

/// Where a sliced wait on a lane stands (kept across slices, as
/// `WaitState` is for requests).
pub(crate) struct LaneWait {
    lane: usize,
    target: u64,
    next: usize,
    b: Backoff,
    i: u32,
    start: Option<Instant>,
    watch: PeerWatch,
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
    /// Never goes back: sequence words only grow.
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
        // Both blocks are free (ordering 2 held for the previous owner).
        s.seen = 2 * epoch + 1;
        s.members = members.to_vec();
        Ok(())
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
    pub fn lane_arrive(
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
        if !data.is_empty() && e >= 2 && self.lanes[lane].seen < 2 * e - 3 {
            // Block e % 2 last held epoch e - 2: wait for its readers.
            let r = self.lane_wait_until(lane, &members, 2 * e - 3, budget);
            if !self.lane_put(lane, members, r)? {
                return Ok(None);
            }
            self.lanes[lane].seen = 2 * e - 3;
        } else {
            self.lanes[lane].members = members;
        }
        self.lanes[lane].epoch = e;
        let (seq, blocks) = self.seg.lane(self.rank, lane);
        if !data.is_empty() {
            // SAFETY: this rank's own block e % 2 (LANE_DATA bytes, checked
            // length); no member reads it until seq says 2e (ordering 2).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    blocks.add((e % 2) as usize * LANE_DATA),
                    data.len(),
                );
            }
        }
        // Release: the block before the word (ordering 1). Arriving also
        // says this rank is done with every earlier collective.
        seq.store(2 * e + u64::from(!reads), Ordering::Release);
        Ok(Some(e))
    }

    /// Waits until the current collective of `lane` is published by every
    /// member, or by member `only` (a transport rank: a broadcast's root);
    /// `None` budget: no limit. `Ok(false)` when `budget` ran out first
    /// (call again to go on waiting).
    pub fn lane_wait(
        &mut self,
        lane: usize,
        only: Option<usize>,
        budget: Option<Duration>,
    ) -> Result<bool> {
        let lane = lane_arg(lane)?;
        let all = self.lane_members(lane)?;
        let one = [only.unwrap_or(0)];
        let target = 2 * self.lanes[lane].epoch;
        let r = match only {
            Some(m) if !all.contains(&m) => Err(Error::Invalid(format!(
                "lane {lane}: rank {m} is not a member"
            ))),
            Some(_) => self.lane_wait_until(lane, &one, target, budget),
            None => self.lane_wait_until(lane, &all, target, budget),
        };
        let done = self.lane_put(lane, all, r)?;
        if done && only.is_none() {
            let s = &mut self.lanes[lane];
            s.seen = s.seen.max(target);
        }
        Ok(done)
    }

    /// Member `member`'s data block of the current collective of `lane`.
    /// Valid to read once [`Comm::lane_wait`] covered that member, until
    /// this rank calls [`Comm::lane_done`] or arrives at its next
    /// collective on the lane.
    pub fn lane_block(&self, lane: usize, member: usize) -> Result<*const u8> {
        let lane = lane_arg(lane)?;
        self.check_peer(member, "lane member")?;
        let e = self.lanes[lane].epoch;
        let (_, blocks) = self.seg.lane(member, lane);
        // SAFETY: offset within the member's lane (two blocks).
        Ok(unsafe { blocks.add((e % 2) as usize * LANE_DATA) } as *const u8)
    }

    /// Says that this rank has finished reading the blocks of the current
    /// collective of `lane`.
    pub fn lane_done(&mut self, lane: usize) -> Result<()> {
        let lane = lane_arg(lane)?;
        let e = self.lanes[lane].epoch;
        let (seq, _) = self.seg.lane(self.rank, lane);
        // Release: this rank's reads of the blocks before the word
        // (ordering 2).
        seq.store(2 * e + 1, Ordering::Release);
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
        let target = 2 * s.epoch + 1;
        // On success the members stay taken: the lane serves none.
        let r = self.lane_wait_until(lane, &members, target, None);
        if r.is_err() {
            self.lanes[lane].members = members;
        }
        r.map(|_| ())
    }

    /// The lane wait: every member's sequence word at `target` or beyond,
    /// under the waiting policy of request waits (waiting.rs): spin, watch
    /// the awaited member's heartbeat, drive the point-to-point engine (a
    /// member may wait for this rank's messages before it arrives), run the
    /// health and deadline checks on the slow path.
    fn lane_wait_until(
        &mut self,
        lane: usize,
        members: &[usize],
        target: u64,
        budget: Option<Duration>,
    ) -> Result<bool> {
        let mut w = match self.lane_resume.take() {
            Some(w) if w.lane == lane && w.target == target => w,
            _ => LaneWait {
                lane,
                target,
                next: 0,
                b: if budget.is_some() {
                    Backoff::yielding()
                } else {
                    Backoff::new()
                },
                i: 0,
                start: None,
                watch: PeerWatch::new(members.first().copied().unwrap_or(0)),
            },
        };
        let mut began: Option<Instant> = None;
        loop {
            // Acquire: the member's block and reads before its word
            // (orderings 1 and 2).
            while w.next < members.len()
                && self.seg.lane(members[w.next], lane).0.load(Ordering::Acquire) >= target
            {
                w.next += 1;
            }
            let Some(&peer) = members.get(w.next) else {
                self.beat_leave();
                return Ok(true);
            };
            if w.watch.peer() != peer {
                w.watch = PeerWatch::new(peer);
            }
            w.i = w.i.wrapping_add(1);
            if w.i % 16 == 0 {
                let before = self.activity;
                self.progress()?;
                if self.activity != before {
                    w.b.reset();
                }
            }
            let mut stalled = false;
            if w.b.spinning() {
                stalled = w.watch.stalled(&self.seg, self.rank, w.i);
                if !self.watch_peers && w.i % crate::waiting::WATCH_EVERY == 0 {
                    self.note_preemption();
                }
                stalled &= self.watch_peers || self.preempted;
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

    /// A barrier of the members of `lane`: every member publishes its
    /// arrival and waits for all others'.
    pub fn lane_barrier(&mut self, lane: usize) -> Result<()> {
        self.lane_arrive(lane, &[], false, None)?;
        self.lane_wait(lane, None, None).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use crate::comm::Comm;
    use crate::segment::LANE_DATA;

    #[test]
    fn a_single_rank_runs_lane_collectives_and_refuses_bad_arguments() {
        std::env::remove_var("TOPOCOMM_SHM_FD");
        let mut c = Comm::init().unwrap();
        for _ in 0..5 {
            c.lane_barrier(0).unwrap();
        }
        assert_eq!(c.lane_epoch(0).unwrap(), 5);
        assert!(c.lane_barrier(3).unwrap_err().to_string().contains("serves no"));
        c.lane_start(3, 0, &[0]).unwrap();
        // Data blocks alternate and hold what was published.
        for k in 0..4u8 {
            let e = c.lane_arrive(3, &[k; 16], true, None).unwrap().unwrap();
            assert!(c.lane_wait(3, None, None).unwrap());
            let p = c.lane_block(3, 0).unwrap();
            // SAFETY: 16 bytes of this rank's own block, just published.
            let got = unsafe { std::slice::from_raw_parts(p, 16) };
            assert_eq!(got, &[k; 16], "epoch {e}");
            c.lane_done(3).unwrap();
        }
        c.lane_quiesce(3).unwrap();
        // A lane that ran nothing since it was handed on has nothing to
        // wait for (its members' words may all be behind its epoch).
        c.lane_start(3, 100, &[0]).unwrap();
        c.lane_quiesce(3).unwrap();
        // A lane handed on keeps counting forward, never back.
        c.lane_start(3, 110, &[0]).unwrap();
        assert!(c.lane_start(3, 109, &[0]).unwrap_err().to_string().contains("behind"));
        assert!(c.lane_barrier(64).unwrap_err().to_string().contains("lane 64"));
        assert!(c.lane_start(2, 0, &[1]).unwrap_err().to_string().contains("out of range"));
        assert!(c.lane_wait(3, Some(1), None).is_err());
        let big = vec![0u8; LANE_DATA + 1];
        assert!(c.lane_arrive(3, &big, true, None).is_err());
    }
}
