//! Waiting policy: spin briefly (the peer is probably running on another
//! core), then `sched_yield` (the peer may need our core), then sleep with a
//! growing period (many more processes than cores). The phase also tells
//! the caller when to run its slow-path checks (full channel sweep, peer
//! liveness, deadline).

use std::time::{Duration, Instant};

/// Spin turns before yielding when this rank is bound to a PU that another
/// rank of the job is bound to as well: the peer we wait for may be the one
/// that needs our PU, so every turn spent spinning only delays it. Measured
/// on two ranks bound to one PU (docs/transport.md): 8-byte latency 4 ms
/// with the dedicated spin phase (a whole scheduler time slice), 4.4 us
/// with 50 turns, 1.6 us with 1.
pub const SPIN_COLOCATED: u32 = 1;
/// Spin turns before yielding when the job has more ranks than CPUs.
pub const SPIN_SHARED: u32 = 4000;
/// Spin turns before yielding when every rank can have its own CPU: keep
/// the core, as MPI libraries do, instead of handing it to other programs
/// (a pipelined copy needs both ranks running at once).
pub const SPIN_DEDICATED: u32 = 400_000;
const YIELD: u32 = 2000;

static SPIN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(SPIN_SHARED);

/// How a rank waits, chosen at start-up from every rank's binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Its PU is its own: spin long, as an MPI rank does.
    Dedicated,
    /// Bound to this PU together with another rank: yield at once.
    Colocated(u32),
    /// CPUs may be shared (more ranks than CPUs, or unbound ranks).
    Shared,
}

impl Policy {
    /// `my_pu` is the one PU this rank is bound to (None when its affinity
    /// has several), `bound` the single-PU bindings of all ranks (None for
    /// ranks not bound to one PU), `cpus` the online CPUs.
    ///
    /// A rank spins long only when it surely has a CPU of its own: bound to
    /// a PU no other rank is bound to, with every rank bound (an unbound
    /// rank may run anywhere), or an unbound job with no more ranks than
    /// CPUs.
    pub fn choose(my_pu: Option<u32>, bound: &[Option<u32>], cpus: usize) -> Policy {
        match my_pu {
            Some(p) if bound.iter().filter(|b| **b == Some(p)).count() > 1 => Policy::Colocated(p),
            Some(_) if bound.iter().all(Option::is_some) => Policy::Dedicated,
            _ if bound.len() <= cpus && !has_colocated(bound) => Policy::Dedicated,
            _ => Policy::Shared,
        }
    }

    /// Spin turns before yielding.
    pub fn spin_turns(self) -> u32 {
        match self {
            Policy::Dedicated => SPIN_DEDICATED,
            Policy::Colocated(_) => SPIN_COLOCATED,
            Policy::Shared => SPIN_SHARED,
        }
    }
}

/// One line on a rank's waiting policy, for `TOPOCOMM_VERBOSE`.
impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let turns = self.spin_turns();
        match self {
            Policy::Colocated(p) => {
                write!(
                    f,
                    "waits by yielding at once (PU {p} is shared with another rank)"
                )
            }
            Policy::Dedicated => write!(f, "waits by spinning ({turns} turns) on a CPU of its own"),
            Policy::Shared => write!(
                f,
                "waits by spinning {turns} turns, then yielding (CPUs may be shared)"
            ),
        }
    }
}

fn has_colocated(bound: &[Option<u32>]) -> bool {
    let mut seen: Vec<u32> = bound.iter().flatten().copied().collect();
    seen.sort_unstable();
    seen.windows(2).any(|w| w[0] == w[1])
}

/// Sets the spin phase length for this process (see the constants).
pub fn set_spin(turns: u32) {
    SPIN.store(turns, std::sync::atomic::Ordering::Relaxed);
}

/// The spin phase length of this process.
pub fn spin() -> u32 {
    SPIN.load(std::sync::atomic::Ordering::Relaxed)
}

pub struct Backoff {
    iter: u32,
    sleep_us: u64,
    /// Whether the last phase sleeps (else it keeps yielding).
    sleeps: bool,
    /// Read lazily: a clock read costs tens of ns in a VM, as much as a
    /// whole small message, so the fast path never reads it.
    last_check: Option<Instant>,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    pub fn new() -> Backoff {
        Backoff {
            iter: 0,
            sleep_us: 20,
            sleeps: true,
            last_check: None,
        }
    }

    /// A backoff that never sleeps: after its spin phase it yields on every
    /// turn. For waits whose caller also polls another progress engine
    /// between slices (the MPI accelerator): a message may arrive on either
    /// at any moment, and a sleep of up to a millisecond would be added to
    /// its latency (a 4-rank ring crossing two pretend nodes took 1 ms per
    /// hop instead of microseconds). MPI libraries wait the same way.
    pub fn yielding() -> Backoff {
        Backoff {
            sleeps: false,
            ..Backoff::new()
        }
    }

    /// Back to spinning: called when the engine made progress, so a long
    /// transfer never sleeps between fragments.
    pub fn reset(&mut self) {
        self.iter = 0;
        self.sleep_us = 20;
    }

    /// Whether the waiter is still in its spinning phase.
    pub fn spinning(&self) -> bool {
        self.iter < spin()
    }

    /// Waits a little, longer each time.
    pub fn snooze(&mut self) {
        self.iter = self.iter.saturating_add(1);
        if self.iter < spin() {
            std::hint::spin_loop();
        } else if self.iter < spin() + YIELD || !self.sleeps {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(self.sleep_us));
            self.sleep_us = (self.sleep_us * 2).min(1000);
        }
    }

    /// [`Backoff::snooze`] that yields even in the spinning phase (the
    /// caller knows spinning cannot help this turn).
    pub fn snooze_yield(&mut self) {
        if self.iter < spin() {
            self.iter += 1;
            std::thread::yield_now();
        } else {
            self.snooze();
        }
    }

    /// True at most every 2 ms once spinning is over (and every 1024 spins
    /// before that, to bound a spin phase that never sees progress).
    pub fn slow_check_due(&mut self) -> bool {
        if self.iter < spin() {
            return self.iter % 1024 == 1023;
        }
        let now = Instant::now();
        match self.last_check {
            Some(t) if now.duration_since(t) < Duration::from_millis(2) => false,
            _ => {
                self.last_check = Some(now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_follows_the_bindings() {
        use Policy::*;
        // Two ranks on one PU: never spin long, whatever the CPU count.
        assert_eq!(
            Policy::choose(Some(0), &[Some(0), Some(0)], 2),
            Colocated(0)
        );
        // Own PU, everyone bound: the core is ours.
        assert_eq!(
            Policy::choose(Some(1), &[Some(0), Some(0), Some(1)], 2),
            Dedicated
        );
        assert_eq!(Policy::choose(Some(1), &[Some(0), Some(1)], 2), Dedicated);
        // Own PU, but an unbound rank may be scheduled on it.
        assert_eq!(Policy::choose(Some(1), &[None, Some(1), None], 2), Shared);
        // Unbound job: dedicated only with a CPU per rank and no co-bound pair.
        assert_eq!(Policy::choose(None, &[None, None], 2), Dedicated);
        assert_eq!(Policy::choose(None, &[None, None, None], 2), Shared);
        assert_eq!(Policy::choose(None, &[None, Some(0), Some(0)], 4), Shared);
        assert_eq!(Colocated(3).spin_turns(), SPIN_COLOCATED);
        assert_eq!(
            Colocated(3).to_string(),
            "waits by yielding at once (PU 3 is shared with another rank)"
        );
    }
}
