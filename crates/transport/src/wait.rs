//! Waiting policy: spin briefly (the peer is probably running on another
//! core), then `sched_yield` (the peer may need our core), then sleep with a
//! growing period (many more processes than cores). The phase also tells
//! the caller when to run its slow-path checks (full channel sweep, peer
//! liveness, deadline).

use std::time::{Duration, Instant};

/// Spin turns before yielding when the job has more ranks than CPUs.
pub const SPIN_SHARED: u32 = 4000;
/// Spin turns before yielding when every rank can have its own CPU: keep
/// the core, as MPI libraries do, instead of handing it to other programs
/// (a pipelined copy needs both ranks running at once).
pub const SPIN_DEDICATED: u32 = 400_000;
const YIELD: u32 = 2000;

static SPIN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(SPIN_SHARED);

/// Sets the spin phase length for this process (see the constants).
pub fn set_spin(turns: u32) {
    SPIN.store(turns, std::sync::atomic::Ordering::Relaxed);
}

fn spin() -> u32 {
    SPIN.load(std::sync::atomic::Ordering::Relaxed)
}

pub struct Backoff {
    iter: u32,
    sleep_us: u64,
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
            last_check: None,
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
        } else if self.iter < spin() + YIELD {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(self.sleep_us));
            self.sleep_us = (self.sleep_us * 2).min(1000);
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
