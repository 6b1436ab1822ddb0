//! Blocking on the communicator: waiting for and testing requests, and the
//! blocking probe. Each loop spins, yields and sleeps by [`Backoff`] (the
//! waiting policy of `wait.rs`) and runs the slow-path checks (full sweep,
//! peer health, the `TOPOCOMM_TIMEOUT` deadline) when it says so.

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::request::{ReqKind, Request, Status, DONE_IDX};
use crate::wait::Backoff;
use std::time::{Duration, Instant};

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
        if r.idx == DONE_IDX {
            return self.take(r).map(Some);
        }
        // The budget's clock starts at the first slow check (a clock read
        // costs as much as a small message in a VM; most waits end before).
        let mut began: Option<Instant> = None;
        let direct = match self.reqs[r.idx as usize].kind {
            ReqKind::Recv { src, .. } if src >= 0 => Some(src as usize),
            _ => None,
        };
        // The stuck-exchange clock starts at the first slow check (no clock
        // read on the fast path).
        let mut start: Option<Instant> = None;
        let mut b = Backoff::new();
        let mut i = 0u32;
        let mut seen = self.activity;
        loop {
            if self.reqs[r.idx as usize].done {
                return self.take(r).map(Some);
            }
            if self.activity != seen {
                // Progress: spin again, and the stuck-exchange clock restarts.
                seen = self.activity;
                start = None;
                b.reset();
            }
            // A receive from one source polls that channel directly while
            // spinning (the latency path); the full engine runs every 16th turn.
            match direct {
                Some(s) if b.spinning() && i % 16 != 0 => {
                    self.drain(s)?;
                }
                _ => self.progress()?,
            }
            i = i.wrapping_add(1);
            if self.reqs[r.idx as usize].done {
                return self.take(r).map(Some);
            }
            if b.slow_check_due() {
                self.sweep()?;
                if self.reqs[r.idx as usize].done {
                    return self.take(r).map(Some);
                }
                if let Some(b) = budget {
                    if began.get_or_insert_with(Instant::now).elapsed() >= b {
                        return Ok(None);
                    }
                }
                self.health(direct)?;
                if start.get_or_insert_with(Instant::now).elapsed() > self.timeout {
                    return Err(Error::Timeout(self.timeout));
                }
            }
            b.snooze();
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
        for r in reqs {
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
