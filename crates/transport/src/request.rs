//! Requests: the public [`Request`] handle and [`Status`], and the
//! communicator's request table (allocation with generation counts,
//! completion, validation and release of handles).

use crate::comm::Comm;
use crate::error::{Error, Result};

/// Slot index of requests that completed at posting time.
pub(crate) const DONE_IDX: u32 = u32::MAX;

/// What a completed receive (or a probe) found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    pub count: usize,
}

/// Handle of a non-blocking operation; complete it with [`Comm::wait`] or
/// [`Comm::test`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub(crate) idx: u32,
    pub(crate) gen: u32,
}

impl Request {
    /// Packs the handle into 64 bits (for the C ABI).
    pub fn to_u64(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.idx)
    }
    pub fn from_u64(v: u64) -> Request {
        Request {
            idx: v as u32,
            gen: (v >> 32) as u32,
        }
    }
}

/// What a request does; a receive keeps its destination buffer.
pub(crate) enum ReqKind {
    Send {
        dst: usize,
    },
    Recv {
        src: i32,
        key: crate::recv::Key,
        buf: *mut u8,
        cap: usize,
    },
}

/// One slot of the request table.
pub(crate) struct Req {
    pub(crate) gen: u32,
    pub(crate) live: bool,
    pub(crate) done: bool,
    pub(crate) kind: ReqKind,
    pub(crate) status: Status,
    pub(crate) err: Option<Error>,
}

impl Comm {
    /// A slot for a new request of `kind` (a freed one, its generation
    /// bumped, or a new one).
    #[inline]
    pub(crate) fn alloc(&mut self, kind: ReqKind) -> u32 {
        match self.free.pop() {
            Some(i) => {
                // Field by field: a freed slot's status is rewritten by its
                // completion and its error was taken when it was released
                // (`take`; a cancelled receive never had one), so only what
                // a pending request is read for is written (a whole `Req`
                // written back was a fifth of a small receive's cost).
                let r = &mut self.reqs[i as usize];
                debug_assert!(r.err.is_none() && !r.live);
                r.gen = r.gen.wrapping_add(1);
                r.live = true;
                r.done = false;
                r.kind = kind;
                i
            }
            None => {
                self.reqs.push(Req {
                    gen: 1,
                    live: true,
                    done: false,
                    kind,
                    status: Status::default(),
                    err: None,
                });
                (self.reqs.len() - 1) as u32
            }
        }
    }

    /// Marks request `idx` done with its status and error.
    pub(crate) fn complete(&mut self, idx: u32, status: Status, err: Option<Error>) {
        let r = &mut self.reqs[idx as usize];
        r.done = true;
        r.status = status;
        r.err = err;
    }

    /// Whether `r` names a live request of this communicator.
    pub(crate) fn check_req(&self, r: &Request) -> Result<()> {
        if r.idx == DONE_IDX {
            return Ok(());
        }
        match self.reqs.get(r.idx as usize) {
            Some(q) if q.live && q.gen == r.gen => Ok(()),
            _ => Err(Error::Invalid(
                "request handle is unknown or already completed".into(),
            )),
        }
    }

    /// Releases a completed request and returns its outcome.
    #[inline]
    pub(crate) fn take(&mut self, r: Request) -> Result<Status> {
        if r.idx == DONE_IDX {
            return Ok(Status {
                source: self.rank as i32,
                tag: 0,
                count: 0,
            });
        }
        let q = &mut self.reqs[r.idx as usize];
        q.live = false;
        let (st, err) = (q.status, q.err.take());
        self.free.push(r.idx);
        match err {
            Some(e) => Err(e),
            None => Ok(st),
        }
    }

    /// The buffer and capacity of receive request `idx`.
    pub(crate) fn recv_buf(&self, idx: u32) -> (*mut u8, usize) {
        match self.reqs[idx as usize].kind {
            ReqKind::Recv { buf, cap, .. } => (buf, cap),
            ReqKind::Send { .. } => unreachable!("receive request expected"),
        }
    }
}
