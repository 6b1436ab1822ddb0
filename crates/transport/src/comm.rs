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
//!    the full sweep of the slow wait path, so correctness never depends on it.
//! 5. Rank states and the start-up barrier use Release/Acquire so that a
//!    peer seen as up has published its pid and probe word.

use crate::copy::{copy_nontemporal, copy_plain};
use crate::rules::{CopyKind, Owner, Params};
use crate::segment::*;
use crate::wait::Backoff;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Receive from any rank.
pub const ANY_SOURCE: i32 = -1;
/// Match any (non-negative) tag.
pub const ANY_TAG: i32 = -1;
/// Internal tag of [`Comm::barrier`]; user tags are >= 0.
const TAG_BARRIER: i32 = -7;
/// Slot index of requests that completed at posting time.
const DONE_IDX: u32 = u32::MAX;

/// Transport errors.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("message of {len} bytes from rank {peer} (tag {tag}) is larger than the receive buffer of {cap} bytes")]
    Truncated {
        len: usize,
        cap: usize,
        peer: i32,
        tag: i32,
    },
    #[error("peer rank {rank} is dead: {detail}")]
    DeadPeer { rank: i32, detail: String },
    #[error("no completion within {0:?} (TOPOCOMM_TIMEOUT): stuck exchange")]
    Timeout(Duration),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("{0}")]
    Setup(String),
    #[error("single copy from rank {rank} failed: {detail}")]
    Cma { rank: i32, detail: String },
}

pub type Result<T> = std::result::Result<T, Error>;

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
    idx: u32,
    gen: u32,
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

enum ReqKind {
    Send,
    Recv {
        src: i32,
        tag: i32,
        buf: *mut u8,
        cap: usize,
    },
}

struct Req {
    gen: u32,
    live: bool,
    done: bool,
    kind: ReqKind,
    status: Status,
    err: Option<Error>,
}

#[derive(Clone, Copy, PartialEq)]
enum Proto {
    Inline,
    Eager,
    Rts { cma: bool },
}

struct Job {
    req: Option<u32>,
    ptr: *const u8,
    len: usize,
    tag: i32,
    proto: Proto,
}

struct Stream {
    req: u32,
    ptr: *const u8,
    len: usize,
    off: usize,
    msg_id: u64,
}

struct RdvSend {
    msg_id: u64,
    req: u32,
    ptr: *const u8,
    len: usize,
}

/// Sender side of the channel me -> peer.
struct Out {
    cells: *mut Cell,
    ctrl: *const RecvCtrl,
    slots: *mut u8,
    plan: PlanRaw,
    head: u64,
    tail_cache: u64,
    frags: u64,
    frags_done_cache: u64,
    queue: VecDeque<Job>,
    ctrl_q: VecDeque<(u32, u64)>,
    streams: VecDeque<Stream>,
    rdv: Vec<RdvSend>,
    next_msg: u64,
    pending: bool,
    doorbell: *const AtomicU64,
    bit: u64,
}

struct InStream {
    msg_id: u64,
    req: u32,
    got: usize,
    len: usize,
}

/// Receiver side of the channel peer -> me.
struct In {
    cells: *const Cell,
    ctrl: *mut RecvCtrl,
    slots: *const u8,
    plan: PlanRaw,
    tail: u64,
    published: u64,
    frags_done: u64,
    streams: Vec<InStream>,
    idle: u32,
}

enum Payload {
    /// An inline message, kept without a heap allocation.
    Small([u8; 40]),
    Data(Vec<u8>),
    Rts {
        msg_id: u64,
        cma: bool,
        addr: u64,
    },
}

struct Unexp {
    src: usize,
    tag: i32,
    len: usize,
    payload: Payload,
}

/// A rank's endpoint.
pub struct Comm {
    seg: Segment,
    rank: usize,
    size: usize,
    outs: Vec<Out>,
    ins: Vec<In>,
    reqs: Vec<Req>,
    free: Vec<u32>,
    posted: VecDeque<u32>,
    unexp: VecDeque<Unexp>,
    pending_outs: Vec<usize>,
    active: Vec<u64>,
    pids: Vec<i32>,
    cma_ok: bool,
    cma_note: String,
    timeout: Duration,
    broken: Option<Error>,
    finalized: bool,
    /// Cells pushed plus cells consumed: a waiter that sees it move resets
    /// its backoff.
    activity: u64,
    _probe: Box<AtomicU64>,
}

const IDLE_CLEAR: u32 = 4096;

fn timeout_from_env() -> Result<Duration> {
    match std::env::var("TOPOCOMM_TIMEOUT") {
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(s) if s > 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
            _ => Err(Error::Setup(format!(
                "TOPOCOMM_TIMEOUT='{v}': expected a positive number of seconds"
            ))),
        },
        Err(_) => Ok(Duration::from_secs(60)),
    }
}

fn env_usize(name: &str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Setup(format!("{name}='{v}': expected a non-negative integer"))),
        Err(_) => Ok(None),
    }
}

/// Parameters of a job started without the launcher (one rank).
fn singleton_params() -> Params {
    Params {
        inline_max: 40,
        eager_max: 16 << 10,
        fragment: 64 << 10,
        depth: 4,
        cma: false,
        cma_threshold: u64::MAX,
        cma_chunk: 1 << 20,
        copy: CopyKind::Plain,
        nt_threshold: u64::MAX,
        buffer_owner: Owner::Sender,
    }
}

/// Maps the segment of descriptor `fd` (which this function owns) and
/// closes the descriptor, even on failure: the mapping keeps the memfd alive,
/// and the descriptor must not leak into programs this rank may exec.
fn attach_and_close(fd: i32, origin: &str) -> Result<Segment> {
    let r = Segment::attach(fd);
    // SAFETY: closing the descriptor we were handed; the segment below no
    // longer refers to it.
    unsafe { libc::close(fd) };
    r.map_err(|e| Error::Setup(format!("{origin}: {e}")))
}

/// The one PU this process is bound to, if its affinity has exactly one.
fn single_pu() -> Option<u32> {
    match crate::launch::allowed_cpus()[..] {
        [p] => Some(p),
        _ => None,
    }
}

fn matches(want_src: i32, want_tag: i32, src: usize, tag: i32) -> bool {
    (want_src == ANY_SOURCE || want_src as usize == src)
        && (want_tag == tag || (want_tag == ANY_TAG && tag >= 0))
}

impl Comm {
    /// Joins the job the launcher started (`TOPOCOMM_SHM_FD`, `TOPOCOMM_RANK`,
    /// `TOPOCOMM_SIZE`); without them, a job of one rank.
    pub fn init() -> Result<Comm> {
        let timeout = timeout_from_env()?;
        let fd = env_usize("TOPOCOMM_SHM_FD")?;
        let (seg, rank) = match fd {
            None => {
                let seg = Segment::create(1, &[("self".into(), singleton_params())])
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
        let mut outs = Vec::with_capacity(size);
        let mut ins = Vec::with_capacity(size);
        let chan = |s: usize, r: usize| {
            let plan = seg.plan(s, r);
            // SAFETY: offsets come from the creator's layout and lie inside
            // the mapping (checked size at attach).
            let base = unsafe { seg.base.add(plan.offset as usize) };
            (plan, base)
        };
        for peer in 0..size {
            let (plan, base) = chan(rank, peer);
            // SAFETY: channel = RecvCtrl | Cell[RING] | slots, inside the mapping.
            let (ctrl, cells, slots) = unsafe {
                (
                    base as *const RecvCtrl,
                    base.add(64) as *mut Cell,
                    base.add(64 + RING as usize * CELL),
                )
            };
            let db = seg.doorbell(peer, rank / 64) as *const AtomicU64;
            outs.push(Out {
                cells,
                ctrl,
                slots,
                plan,
                head: 0,
                tail_cache: 0,
                frags: 0,
                frags_done_cache: 0,
                queue: VecDeque::new(),
                ctrl_q: VecDeque::new(),
                streams: VecDeque::new(),
                rdv: Vec::new(),
                next_msg: 0,
                pending: false,
                doorbell: db,
                bit: 1u64 << (rank % 64),
            });
            let (plan, base) = chan(peer, rank);
            // SAFETY: as above, for the channel peer -> me.
            let (ctrl, cells, slots) = unsafe {
                (
                    base as *mut RecvCtrl,
                    base.add(64) as *const Cell,
                    base.add(64 + RING as usize * CELL) as *const u8,
                )
            };
            if plan.receiver_owned != 0 && peer != rank {
                // First touch by the receiver places the slots on its NUMA node.
                let bytes = (plan.depth * plan.fragment) as usize;
                for off in (0..bytes).step_by(4096) {
                    // SAFETY: inside this channel's slot area, which no one
                    // uses before the start-up barrier below.
                    unsafe { (slots as *mut u8).add(off).write_volatile(0) };
                }
            }
            ins.push(In {
                cells,
                ctrl,
                slots,
                plan,
                tail: 0,
                published: 0,
                frags_done: 0,
                streams: Vec::new(),
                idle: 0,
            });
        }
        let probe = Box::new(AtomicU64::new(
            0x7c00_0000_0000_0000 ^ (u64::from(std::process::id()) << 16) ^ rank as u64,
        ));
        crate::cma::allow_peers();
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
            pending_outs: Vec::new(),
            active: vec![0; size.div_ceil(64)],
            pids: vec![0; size],
            cma_ok: false,
            cma_note: String::new(),
            timeout,
            broken: None,
            finalized: false,
            activity: 0,
            _probe: probe,
            seg,
        };
        comm.startup_barrier(1)?;
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
        crate::wait::set_spin(policy.spin_turns());
        if std::env::var_os("TOPOCOMM_VERBOSE").is_some() {
            crate::say!("topocomm: rank {rank}: {policy}");
        }
        let ok = if size == 1 {
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
            if !comm.cma_ok && wanted {
                crate::say!("topocomm: {}", comm.cma_note);
            }
            if std::env::var_os("TOPOCOMM_VERBOSE").is_some() {
                comm.print_mechanisms();
            }
        }
        Ok(comm)
    }

    /// One line per class used by the job: its mechanism for large messages.
    fn print_mechanisms(&self) {
        let mut seen = std::collections::BTreeMap::new();
        for s in 0..self.size {
            for r in 0..self.size {
                if s != r || self.size == 1 {
                    let p = self.seg.plan(s, r);
                    let mech = if p.cma != 0 && self.cma_ok {
                        format!("two-copy, single copy (CMA) from {} B", p.cma_threshold)
                    } else {
                        "two-copy".to_string()
                    };
                    seen.insert(p.class_name(), (mech, p.fragment, p.depth));
                }
            }
        }
        for (class, (mech, frag, depth)) in seen {
            crate::say!("topocomm: class {class}: {mech} (fragment {frag} B x {depth})");
        }
    }

    fn probe_neighbour(&self) -> std::result::Result<(), String> {
        let n = (self.rank + 1) % self.size;
        let slot = self.seg.rank_slot(n);
        let (addr, want) = (
            slot.probe_addr.load(Ordering::Relaxed),
            slot.probe_val.load(Ordering::Relaxed),
        );
        let mut got = 0u64;
        // SAFETY: `got` provides 8 writable bytes.
        let r =
            unsafe { crate::cma::read(self.pids[n], (&mut got as *mut u64).cast(), addr, 8, 4096) };
        match r {
            Ok(()) if got == want => Ok(()),
            Ok(()) => Err("trial read returned wrong data".into()),
            Err(e) => Err(format!(
                "process_vm_readv: {e}{}",
                crate::cma::ptrace_scope()
                    .map(|s| format!(", Yama ptrace_scope = {s}"))
                    .unwrap_or_default()
            )),
        }
    }

    /// Start-up barrier on the header counter (phase `k` waits for k*n arrivals).
    fn startup_barrier(&mut self, k: u64) -> Result<()> {
        let h = self.seg.header();
        // AcqRel: our earlier stores (state, probe words, cma_ok) are
        // visible to whoever observes the count that includes us.
        h.arrived.fetch_add(1, Ordering::AcqRel);
        let target = k * self.size as u64;
        let start = Instant::now();
        let mut b = Backoff::new();
        while h.arrived.load(Ordering::Acquire) < target {
            if b.slow_check_due() {
                if h.abort.load(Ordering::Relaxed) != 0 {
                    return Err(Error::DeadPeer {
                        rank: -1,
                        detail: "the job was aborted during start-up".into(),
                    });
                }
                if start.elapsed() > self.timeout {
                    return Err(Error::Timeout(self.timeout));
                }
            }
            b.snooze();
        }
        Ok(())
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether single copy passed the start-up probe on every rank.
    pub fn cma_available(&self) -> bool {
        self.cma_ok
    }

    /// One line on the single-copy probe result.
    pub fn cma_note(&self) -> &str {
        &self.cma_note
    }

    /// Class and parameters of the channel me -> peer.
    pub fn plan_to(&self, peer: usize) -> (String, Params) {
        let p = self.outs[peer].plan;
        (p.class_name(), p.params())
    }

    /// Mechanism used for large messages to `peer`, in words.
    pub fn mechanism_to(&self, peer: usize) -> String {
        let p = self.outs[peer].plan;
        if p.cma != 0 && self.cma_ok {
            format!(
                "two-copy below {} B, single copy (CMA) from there",
                p.cma_threshold
            )
        } else {
            "two-copy".into()
        }
    }

    // ---- requests ---------------------------------------------------------

    fn alloc(&mut self, kind: ReqKind) -> u32 {
        let req = |gen| Req {
            gen,
            live: true,
            done: false,
            kind,
            status: Status::default(),
            err: None,
        };
        match self.free.pop() {
            Some(i) => {
                let gen = self.reqs[i as usize].gen.wrapping_add(1);
                self.reqs[i as usize] = req(gen);
                i
            }
            None => {
                self.reqs.push(req(1));
                (self.reqs.len() - 1) as u32
            }
        }
    }

    fn complete(&mut self, idx: u32, status: Status, err: Option<Error>) {
        let r = &mut self.reqs[idx as usize];
        r.done = true;
        r.status = status;
        r.err = err;
    }

    fn check_req(&self, r: &Request) -> Result<()> {
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

    fn take(&mut self, r: Request) -> Result<Status> {
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

    fn check_peer(&self, peer: usize, what: &str) -> Result<()> {
        if peer >= self.size {
            return Err(Error::Invalid(format!(
                "{what} rank {peer} is out of range (job of {} ranks)",
                self.size
            )));
        }
        Ok(())
    }

    // ---- sending ----------------------------------------------------------

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
        if tag < 0 {
            return Err(Error::Invalid(format!("tag {tag} must be >= 0")));
        }
        // SAFETY: forwarded contract.
        unsafe { self.isend_inner(ptr, len, dst, tag) }
    }

    unsafe fn isend_inner(
        &mut self,
        ptr: *const u8,
        len: usize,
        dst: usize,
        tag: i32,
    ) -> Result<Request> {
        self.check_peer(dst, "destination")?;
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        // Field reads, not a copy of the whole 128-byte plan.
        let plan = &self.outs[dst].plan;
        let proto = if (len as u64) <= plan.inline_max {
            Proto::Inline
        } else if (len as u64) <= plan.eager_max {
            Proto::Eager
        } else {
            Proto::Rts {
                cma: plan.cma != 0 && self.cma_ok && len as u64 >= plan.cma_threshold,
            }
        };
        let mut job = Job {
            req: None,
            ptr,
            len,
            tag,
            proto,
        };
        if !matches!(proto, Proto::Rts { .. }) && self.outs[dst].queue.is_empty() {
            // Fast path: nothing queued ahead, push now, no request needed.
            if self.try_push(dst, &job) {
                self.ring(dst);
                return Ok(Request {
                    idx: DONE_IDX,
                    gen: 0,
                });
            }
        }
        let idx = self.alloc(ReqKind::Send);
        job.req = Some(idx);
        self.outs[dst].queue.push_back(job);
        self.mark_pending(dst);
        self.advance_out(dst);
        Ok(Request {
            idx,
            gen: self.reqs[idx as usize].gen,
        })
    }

    fn mark_pending(&mut self, dst: usize) {
        if !self.outs[dst].pending {
            self.outs[dst].pending = true;
            self.pending_outs.push(dst);
        }
    }

    /// Free cells in the ring to `dst` (re-reading the receiver's tail only
    /// when the cached value says full).
    fn ring_space(&mut self, dst: usize) -> bool {
        let o = &mut self.outs[dst];
        if o.head - o.tail_cache < RING {
            return true;
        }
        // SAFETY: ctrl points into the mapping. Acquire pairs with the
        // receiver's Release of `tail` (ordering 2).
        o.tail_cache = unsafe { (*o.ctrl).tail.load(Ordering::Acquire) };
        o.head - o.tail_cache < RING
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
    fn push_cell(&mut self, dst: usize, kind: u32, tag: i32, len: u64, body: &[u8]) {
        let o = &mut self.outs[dst];
        let pos = o.head;
        // SAFETY: the cell at pos % RING is ours: ring_space() checked that
        // the receiver released it (tail > pos - RING).
        unsafe {
            let c = o.cells.add((pos % RING) as usize);
            (*c).kind = kind;
            (*c).tag = tag;
            (*c).len = len;
            std::ptr::copy_nonoverlapping(body.as_ptr(), (*c).body.as_mut_ptr(), body.len());
            (*c).seq.store(pos + 1, Ordering::Release);
        }
        o.head += 1;
        self.activity += 1;
    }

    /// Copies `len` bytes into the next fragment slot of `dst`.
    fn fill_slot(&mut self, dst: usize, src: *const u8, len: usize, total: usize) {
        let o = &mut self.outs[dst];
        let slot = (o.frags % o.plan.depth) * o.plan.fragment;
        // SAFETY: slot_free() checked the receiver released this slot; the
        // slot holds `fragment` >= len bytes; `src` is valid per isend's contract.
        unsafe {
            let d = o.slots.add(slot as usize);
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
                if !self.ring_space(dst) {
                    return false;
                }
                let mut body = [0u8; 40];
                // SAFETY: len <= inline_max <= 40; ptr valid per contract.
                unsafe { copy_plain(body.as_mut_ptr(), job.ptr, job.len) };
                self.push_cell(dst, K_INLINE, job.tag, job.len as u64, &body[..job.len]);
            }
            Proto::Eager => {
                if !self.ring_space(dst) || !self.slot_free(dst) {
                    return false;
                }
                self.fill_slot(dst, job.ptr, job.len, job.len);
                self.push_cell(dst, K_EAGER, job.tag, job.len as u64, &[]);
            }
            Proto::Rts { cma } => {
                if !self.ring_space(dst) {
                    return false;
                }
                let o = &mut self.outs[dst];
                let msg_id = o.next_msg;
                o.next_msg += 1;
                let mut body = [0u8; 24];
                body[..8].copy_from_slice(&msg_id.to_ne_bytes());
                body[8..16].copy_from_slice(&(job.ptr as u64).to_ne_bytes());
                body[16..24].copy_from_slice(&u64::from(cma).to_ne_bytes());
                let req = job.req.expect("rendezvous sends have a request");
                o.rdv.push(RdvSend {
                    msg_id,
                    req,
                    ptr: job.ptr,
                    len: job.len,
                });
                self.push_cell(dst, K_RTS, job.tag, job.len as u64, &body);
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
    fn ring(&mut self, dst: usize) {
        let o = &self.outs[dst];
        // SAFETY: doorbell points into the mapping's doorbell table.
        let db = unsafe { &*o.doorbell };
        if db.load(Ordering::Relaxed) & o.bit == 0 {
            db.fetch_or(o.bit, Ordering::Relaxed);
        }
    }

    /// Pushes whatever the ring and the slots allow on the channel to `dst`.
    fn advance_out(&mut self, dst: usize) {
        let start = self.outs[dst].head;
        while let Some(&(kind, msg_id)) = self.outs[dst].ctrl_q.front() {
            if !self.ring_space(dst) {
                break;
            }
            self.push_cell(dst, kind, 0, 0, &msg_id.to_ne_bytes());
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
                self.fill_slot(dst, src, n, st.len);
                let mut body = [0u8; 16];
                body[..8].copy_from_slice(&st.msg_id.to_ne_bytes());
                body[8..].copy_from_slice(&(st.off as u64).to_ne_bytes());
                self.push_cell(dst, K_FRAG, 0, n as u64, &body);
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

    fn queue_ctrl(&mut self, dst: usize, kind: u32, msg_id: u64) {
        self.outs[dst].ctrl_q.push_back((kind, msg_id));
        self.mark_pending(dst);
        self.advance_out(dst);
    }

    // ---- receiving --------------------------------------------------------

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
        if tag < ANY_TAG {
            return Err(Error::Invalid(format!("tag {tag} must be >= 0 or ANY_TAG")));
        }
        // SAFETY: forwarded contract.
        unsafe { self.irecv_inner(ptr, cap, src, tag) }
    }

    unsafe fn irecv_inner(
        &mut self,
        ptr: *mut u8,
        cap: usize,
        src: i32,
        tag: i32,
    ) -> Result<Request> {
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
        let idx = self.alloc(ReqKind::Recv {
            src,
            tag,
            buf: ptr,
            cap,
        });
        let req = Request {
            idx,
            gen: self.reqs[idx as usize].gen,
        };
        let found = self
            .unexp
            .iter()
            .position(|u| matches(src, tag, u.src, u.tag));
        match found {
            Some(i) => {
                let u = self.unexp.remove(i).expect("index from position");
                match u.payload {
                    Payload::Small(b) => self.deliver(idx, u.src, u.tag, b.as_ptr(), u.len),
                    Payload::Data(v) => self.deliver(idx, u.src, u.tag, v.as_ptr(), v.len()),
                    Payload::Rts { msg_id, cma, addr } => {
                        self.start_rdv(idx, u.src, u.tag, u.len, msg_id, cma, addr)?
                    }
                }
            }
            None => self.posted.push_back(idx),
        }
        Ok(req)
    }

    fn recv_buf(&self, idx: u32) -> (*mut u8, usize) {
        match self.reqs[idx as usize].kind {
            ReqKind::Recv { buf, cap, .. } => (buf, cap),
            ReqKind::Send => unreachable!("receive request expected"),
        }
    }

    /// Copies a complete message into receive request `idx`.
    fn deliver(&mut self, idx: u32, src: usize, tag: i32, data: *const u8, len: usize) {
        let Some((buf, st)) = self.fit(idx, src, tag, len) else {
            return;
        };
        // SAFETY: buf holds cap >= len bytes (irecv contract, checked by fit); data holds len.
        unsafe { copy_plain(buf, data, len) };
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
    fn start_rdv(
        &mut self,
        idx: u32,
        src: usize,
        tag: i32,
        len: usize,
        msg_id: u64,
        cma: bool,
        addr: u64,
    ) -> Result<()> {
        let Some((buf, st)) = self.fit(idx, src, tag, len) else {
            // FIN releases the sender without data.
            self.queue_ctrl(src, K_FIN, msg_id);
            return Ok(());
        };
        if cma {
            let chunk = self.ins[src].plan.cma_chunk as usize;
            // SAFETY: buf holds cap >= len writable bytes (irecv contract).
            let r = unsafe { crate::cma::read(self.pids[src], buf, addr, len, chunk) };
            match r {
                Ok(()) => self.complete(idx, st, None),
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    let e = Error::DeadPeer {
                        rank: src as i32,
                        detail: "process vanished during single copy".into(),
                    };
                    self.broken = Some(e.clone());
                    return Err(e);
                }
                Err(e) => {
                    let e = Error::Cma {
                        rank: src as i32,
                        detail: e.to_string(),
                    };
                    self.complete(idx, st, Some(e));
                }
            }
            self.queue_ctrl(src, K_FIN, msg_id);
        } else {
            self.reqs[idx as usize].status = st;
            self.ins[src].streams.push(InStream {
                msg_id,
                req: idx,
                got: 0,
                len,
            });
            self.queue_ctrl(src, K_CTS, msg_id);
        }
        Ok(())
    }

    fn match_posted(&mut self, src: usize, tag: i32) -> Option<u32> {
        let i = self.posted.iter().position(|&idx| {
            matches!(self.reqs[idx as usize].kind,
                ReqKind::Recv { src: s, tag: t, .. } if matches(s, t, src, tag))
        })?;
        self.posted.remove(i)
    }

    /// Releases the receiver's current slot (ordering 3).
    fn release_slot(&mut self, src: usize) {
        let i = &mut self.ins[src];
        i.frags_done += 1;
        // SAFETY: ctrl points into the mapping; we are its only writer.
        unsafe { (*i.ctrl).frags_done.store(i.frags_done, Ordering::Release) };
    }

    fn cur_slot(&self, src: usize) -> *const u8 {
        let i = &self.ins[src];
        // SAFETY: slot index < depth, inside the slot area.
        unsafe {
            i.slots
                .add(((i.frags_done % i.plan.depth) * i.plan.fragment) as usize)
        }
    }

    /// Processes every published cell of the channel src -> me. Returns the
    /// number of cells consumed.
    fn drain(&mut self, src: usize) -> Result<usize> {
        let mut n = 0;
        loop {
            let pos = self.ins[src].tail;
            // SAFETY: cell index < RING inside the mapping.
            let c = unsafe { &*self.ins[src].cells.add((pos % RING) as usize) };
            // Acquire pairs with the sender's Release (ordering 1).
            if c.seq.load(Ordering::Acquire) != pos + 1 {
                break;
            }
            let (kind, tag, len, body) = (c.kind, c.tag, c.len as usize, c.body);
            let word = |k: usize| u64::from_ne_bytes(body[8 * k..8 * k + 8].try_into().unwrap());
            match kind {
                K_INLINE => match self.match_posted(src, tag) {
                    Some(idx) => self.deliver(idx, src, tag, body.as_ptr(), len),
                    None => self.unexp.push_back(Unexp {
                        src,
                        tag,
                        len,
                        payload: Payload::Small(body),
                    }),
                },
                K_EAGER => {
                    let data = self.cur_slot(src);
                    match self.match_posted(src, tag) {
                        Some(idx) => self.deliver(idx, src, tag, data, len),
                        None => {
                            // SAFETY: the slot holds len <= fragment bytes.
                            let v = unsafe { std::slice::from_raw_parts(data, len) }.to_vec();
                            self.unexp.push_back(Unexp {
                                src,
                                tag,
                                len,
                                payload: Payload::Data(v),
                            });
                        }
                    }
                    self.release_slot(src);
                }
                K_RTS => {
                    let (msg_id, addr, cma) = (word(0), word(1), word(2) != 0);
                    match self.match_posted(src, tag) {
                        Some(idx) => self.start_rdv(idx, src, tag, len, msg_id, cma, addr)?,
                        None => self.unexp.push_back(Unexp {
                            src,
                            tag,
                            len,
                            payload: Payload::Rts { msg_id, cma, addr },
                        }),
                    }
                }
                K_FRAG => {
                    let (msg_id, off) = (word(0), word(1) as usize);
                    let data = self.cur_slot(src);
                    let k = self.ins[src]
                        .streams
                        .iter()
                        .position(|s| s.msg_id == msg_id)
                        .ok_or_else(|| {
                            Error::Setup(format!(
                                "protocol error: fragment of unknown message {msg_id} from rank {src}"
                            ))
                        })?;
                    let req = self.ins[src].streams[k].req;
                    let (buf, _) = self.recv_buf(req);
                    // SAFETY: the sender never sends past the length the
                    // receiver accepted (off + len <= cap); slot holds len bytes.
                    unsafe { copy_plain(buf.add(off), data, len) };
                    self.release_slot(src);
                    let s = &mut self.ins[src].streams[k];
                    s.got += len;
                    if s.got == s.len {
                        self.ins[src].streams.swap_remove(k);
                        let st = self.reqs[req as usize].status;
                        self.complete(req, st, None);
                    }
                }
                K_CTS | K_FIN => {
                    let msg_id = word(0);
                    let o = &mut self.outs[src];
                    let k = o
                        .rdv
                        .iter()
                        .position(|r| r.msg_id == msg_id)
                        .ok_or_else(|| {
                            Error::Setup(format!(
                            "protocol error: reply for unknown message {msg_id} from rank {src}"
                        ))
                        })?;
                    let r = o.rdv.swap_remove(k);
                    if kind == K_FIN {
                        self.complete(r.req, Status::default(), None);
                    } else {
                        o.streams.push_back(Stream {
                            req: r.req,
                            ptr: r.ptr,
                            len: r.len,
                            off: 0,
                            msg_id,
                        });
                        self.mark_pending(src);
                        self.advance_out(src);
                    }
                }
                _ => {
                    return Err(Error::Setup(format!(
                        "protocol error: cell kind {kind} from rank {src}"
                    )))
                }
            }
            self.ins[src].tail = pos + 1;
            n += 1;
        }
        self.activity += n as u64;
        let i = &mut self.ins[src];
        if i.tail != i.published {
            i.published = i.tail;
            // SAFETY: ctrl points into the mapping; we are its only writer.
            // Release: our reads of the cells happen-before the sender's
            // reuse of them (ordering 2).
            unsafe { (*i.ctrl).tail.store(i.tail, Ordering::Release) };
        }
        Ok(n)
    }

    /// One pass of the progress engine: pending sends, then the channels in
    /// the poll set (doorbells), never all channels.
    pub fn progress(&mut self) -> Result<()> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let mut k = 0;
        while k < self.pending_outs.len() {
            let d = self.pending_outs[k];
            self.advance_out(d);
            let o = &self.outs[d];
            if o.queue.is_empty() && o.ctrl_q.is_empty() && o.streams.is_empty() {
                self.outs[d].pending = false;
                self.pending_outs.swap_remove(k);
            } else {
                k += 1;
            }
        }
        for w in 0..self.active.len() {
            self.active[w] |= self.seg.doorbell(self.rank, w).load(Ordering::Relaxed);
            let mut bits = self.active[w];
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let s = w * 64 + b;
                if self.drain(s)? > 0 {
                    self.ins[s].idle = 0;
                } else {
                    self.ins[s].idle += 1;
                    if self.ins[s].idle > IDLE_CLEAR && self.ins[s].streams.is_empty() {
                        // Idle channel leaves the poll set; re-check after
                        // the clear so a cell published just before is seen.
                        self.ins[s].idle = 0;
                        self.active[w] &= !(1u64 << b);
                        self.seg
                            .doorbell(self.rank, w)
                            .fetch_and(!(1u64 << b), Ordering::Relaxed);
                        self.drain(s)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Drains every channel (slow path: recovers doorbells lost in the
    /// set/clear race).
    fn sweep(&mut self) -> Result<()> {
        for s in 0..self.size {
            self.drain(s)?;
        }
        self.progress()
    }

    /// Slow-path checks: job abort, dead peers, peers gone that we wait for.
    fn health(&mut self, waiting_for: Option<usize>) -> Result<()> {
        let abort = self.seg.header().abort.load(Ordering::Relaxed);
        let mut err = None;
        if abort != 0 {
            let rank = if abort == u64::MAX {
                -1
            } else {
                abort as i32 - 1
            };
            err = Some(Error::DeadPeer {
                rank,
                detail: "the launcher saw it exit abnormally".into(),
            });
        }
        for p in 0..self.size {
            if p == self.rank || err.is_some() {
                continue;
            }
            let st = self.seg.rank_slot(p).state.load(Ordering::Acquire);
            // SAFETY: signal 0 only checks for existence.
            let gone = unsafe { libc::kill(self.pids[p], 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if st == ST_UP && gone {
                err = Some(Error::DeadPeer {
                    rank: p as i32,
                    detail: format!("process {} exited without finalizing", self.pids[p]),
                });
            } else if st == ST_FINALIZED && waiting_for == Some(p) {
                err = Some(Error::DeadPeer {
                    rank: p as i32,
                    detail: "it finalized while a message from it was awaited".into(),
                });
            }
        }
        if let Some(e) = err {
            self.broken = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// Waits for a request; the waiting policy and fault checks are in
    /// docs/transport.md.
    pub fn wait(&mut self, r: Request) -> Result<Status> {
        self.check_req(&r)?;
        if r.idx == DONE_IDX {
            return self.take(r);
        }
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
                return self.take(r);
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
                return self.take(r);
            }
            if b.slow_check_due() {
                self.sweep()?;
                if self.reqs[r.idx as usize].done {
                    return self.take(r);
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

    /// Sends `buf` to `dst` and waits until the buffer may be reused.
    pub fn send(&mut self, buf: &[u8], dst: usize, tag: i32) -> Result<()> {
        // SAFETY: `buf` outlives the request, which is waited for here.
        let r = unsafe { self.isend_raw(buf.as_ptr(), buf.len(), dst, tag)? };
        self.wait(r).map(|_| ())
    }

    /// Receives into `buf`; a longer message is a `Truncated` error.
    pub fn recv(&mut self, buf: &mut [u8], src: i32, tag: i32) -> Result<Status> {
        let direct = src >= 0 && (src as usize) < self.size && tag >= 0;
        if direct
            && self.posted.is_empty()
            && self.broken.is_none()
            && !self.unexp.iter().any(|u| matches(src, tag, u.src, u.tag))
        {
            if let Some(st) = self.recv_fast(buf, src as usize, tag) {
                return Ok(st);
            }
        }
        // SAFETY: `buf` is exclusively borrowed until the wait returns.
        let r = unsafe { self.irecv_raw(buf.as_mut_ptr(), buf.len(), src, tag)? };
        self.wait(r)
    }

    /// Latency path of a blocking receive: spins on the next cell of one
    /// channel and takes an inline or eager message with the wanted tag
    /// straight into `buf`, with no request. Nothing is posted and nothing
    /// matching is queued (checked by the caller), and only the channel's
    /// next cell is taken, so MPI order holds. Anything else (another kind
    /// or tag, sends to push, a long wait) returns `None` and the general
    /// engine takes over.
    fn recv_fast(&mut self, buf: &mut [u8], s: usize, tag: i32) -> Option<Status> {
        // Within the waiting policy's spin phase (short when a peer shares
        // our PU: spinning would only keep it from running).
        for _ in 0..crate::wait::spin().min(2000) {
            let pos = self.ins[s].tail;
            // SAFETY: cell index < RING inside the mapping.
            let c = unsafe { &*self.ins[s].cells.add((pos % RING) as usize) };
            // Acquire pairs with the sender's Release (ordering 1).
            if c.seq.load(Ordering::Acquire) == pos + 1 {
                let len = c.len as usize;
                if (c.kind != K_INLINE && c.kind != K_EAGER) || c.tag != tag || len > buf.len() {
                    return None;
                }
                if c.kind == K_INLINE {
                    buf[..len].copy_from_slice(&c.body[..len]);
                } else {
                    let data = self.cur_slot(s);
                    // SAFETY: the slot holds len <= fragment published bytes.
                    unsafe { copy_plain(buf.as_mut_ptr(), data, len) };
                    self.release_slot(s);
                }
                let i = &mut self.ins[s];
                i.tail = pos + 1;
                i.published = i.tail;
                // SAFETY: ctrl points into the mapping; we are its only
                // writer. Release: ordering 2.
                unsafe { (*i.ctrl).tail.store(i.tail, Ordering::Release) };
                self.activity += 1;
                return Some(Status {
                    source: s as i32,
                    tag,
                    count: len,
                });
            }
            if !self.pending_outs.is_empty() {
                return None;
            }
            std::hint::spin_loop();
        }
        None
    }

    /// Non-blocking probe: the status of the first matching message that has
    /// arrived and is not yet received.
    pub fn iprobe(&mut self, src: i32, tag: i32) -> Result<Option<Status>> {
        self.progress()?;
        Ok(self
            .unexp
            .iter()
            .find(|u| matches(src, tag, u.src, u.tag))
            .map(|u| Status {
                source: u.src as i32,
                tag: u.tag,
                count: u.len,
            }))
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

    /// Blocks until every rank has entered the barrier.
    pub fn barrier(&mut self) -> Result<()> {
        let mut z = [0u8; 0];
        if self.rank == 0 {
            for _ in 1..self.size {
                // SAFETY: zero-byte buffer, waited for immediately.
                let r = unsafe { self.irecv_inner(z.as_mut_ptr(), 0, ANY_SOURCE, TAG_BARRIER)? };
                self.wait(r)?;
            }
            for d in 1..self.size {
                // SAFETY: zero-byte buffer, waited for immediately.
                let r = unsafe { self.isend_inner(z.as_ptr(), 0, d, TAG_BARRIER)? };
                self.wait(r)?;
            }
        } else {
            // SAFETY: as above.
            let r = unsafe { self.isend_inner(z.as_ptr(), 0, 0, TAG_BARRIER)? };
            self.wait(r)?;
            // SAFETY: as above.
            let r = unsafe { self.irecv_inner(z.as_mut_ptr(), 0, 0, TAG_BARRIER)? };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn solo() -> Comm {
        std::env::remove_var("TOPOCOMM_SHM_FD");
        Comm::init().expect("job of one rank")
    }

    #[test]
    fn self_messages_keep_order_per_tag_and_match_any_tag() {
        let mut c = solo();
        assert_eq!((c.rank(), c.size()), (0, 1));
        // Inline, eager and rendezvous sizes, queued as unexpected messages.
        let sizes = [0usize, 5, 40, 41, 5000, 16384, 200_000];
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
            let rq = unsafe { c.irecv_raw(r.as_mut_ptr(), r.len(), 0, 1).unwrap() };
            let st = c.wait(rq).unwrap();
            assert_eq!(st.count, sizes[i]);
            assert_eq!(&r[..st.count], &bufs[i][..]);
        }
        // Then ANY_TAG gets the rest in order: 0, 2, 4, 6.
        for i in [0usize, 2, 4, 6] {
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
    fn truncation_is_an_error_and_consumes_the_message() {
        let mut c = solo();
        let big = vec![1u8; 100_000];
        for n in [30usize, 1000, 100_000] {
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
        let ra = unsafe { c.irecv_raw(a.as_mut_ptr(), 4, ANY_SOURCE, ANY_TAG).unwrap() };
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
}
