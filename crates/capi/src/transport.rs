//! The shared-memory transport from C: one communicator per process, used
//! from the thread that called `tc_init` (like MPI_THREAD_SINGLE/FUNNELED),
//! or, when joined with `tc_init_fd_shared`, from any thread one call at a
//! time (like MPI_THREAD_SERIALIZED; `shared.rs`).

use crate::error::*;
use crate::topo::c_str;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use topocomm_transport::{Comm, Error, Request, Status};

/// `tc_status` in C.
#[repr(C)]
pub struct TcStatus {
    pub source: c_int,
    pub tag: c_int,
    pub count: usize,
}

pub const TC_ANY_SOURCE: c_int = topocomm_transport::ANY_SOURCE;
pub const TC_ANY_TAG: c_int = topocomm_transport::ANY_TAG;

thread_local! {
    static COMM: RefCell<Option<Comm>> = const { RefCell::new(None) };
}

/// Threads that hold a communicator of their own (`tc_init`, `tc_init_fd`).
/// While there are none, calls go straight to the process-wide one: the
/// thread-local lookup (`__tls_get_addr` in a shared library, plus the
/// `RefCell`) cost 30 of the ~350 instructions of an accelerated 8-byte
/// send. A thread sees its own increment (program order), so a thread with
/// a communicator never skips the lookup; a thread that exits without
/// `tc_finalize` leaves the count up, which only costs the lookup.
static THREAD_COMMS: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn code_of(e: &Error) -> i32 {
    let code = match e {
        Error::Truncated { .. } => TC_ERR_TRUNCATED,
        Error::DeadPeer { .. } => TC_ERR_DEAD_PEER,
        Error::Timeout(_) => TC_ERR_TIMEOUT,
        Error::Invalid(_) => TC_ERR_INVALID_ARGUMENT,
        Error::Setup(_) => TC_ERR_TRANSPORT,
    };
    fail(code, e.to_string())
}

/// Runs `f` on this thread's communicator, or on the process-wide one
/// joined by `tc_init_fd_shared`.
#[inline(always)]
pub(crate) fn with(f: impl FnOnce(&mut Comm) -> Result<i32, Error>) -> i32 {
    guard(|| {
        let run = |comm: &mut Comm| f(comm).unwrap_or_else(|e| code_of(&e));
        // Relaxed: only this thread's own increment matters (see THREAD_COMMS).
        if THREAD_COMMS.load(Ordering::Relaxed) == 0 {
            return on_shared(run);
        }
        COMM.with(|c| match c.borrow_mut().as_mut() {
            Some(comm) => run(comm),
            None => on_shared(run),
        })
    })
}

/// Runs `f` on the process-wide communicator of `tc_init_fd_shared`.
#[inline(always)]
fn on_shared(f: impl FnOnce(&mut Comm) -> i32) -> i32 {
    crate::shared::with_shared(|comm| match comm {
        Some(comm) => f(comm),
        None => fail(
            TC_ERR_NOT_INITIALIZED,
            "tc_init was not called on this thread",
        ),
    })
    .unwrap_or_else(|code| code)
}

pub(crate) fn put_status(out: *mut TcStatus, s: Status) {
    if !out.is_null() {
        // SAFETY: non-NULL status pointers point to a writable tc_status.
        unsafe {
            *out = TcStatus {
                source: s.source,
                tag: s.tag,
                count: s.count,
            }
        };
    }
}

pub(crate) fn take_req(req: *mut u64) -> Result<Request, Error> {
    if req.is_null() {
        return Err(Error::Invalid("request pointer is NULL".into()));
    }
    // SAFETY: non-NULL, points to a tc_request (documented).
    let v = unsafe { *req };
    if v == 0 {
        return Err(Error::Invalid("request is TC_REQUEST_NULL".into()));
    }
    Ok(Request::from_u64(v))
}

/// Joins the job started by `topocomm run` (or a job of one rank).
#[no_mangle]
pub extern "C" fn tc_init() -> i32 {
    guard(|| {
        COMM.with(|c| {
            if c.borrow().is_some() {
                return fail(TC_ERR_INVALID_ARGUMENT, "tc_init called twice");
            }
            match Comm::init() {
                Ok(comm) => {
                    *c.borrow_mut() = Some(comm);
                    THREAD_COMMS.fetch_add(1, Ordering::Relaxed);
                    TC_OK
                }
                Err(e) => code_of(&e),
            }
        })
    })
}

/// Completes queued sends and leaves the job.
#[no_mangle]
pub extern "C" fn tc_finalize() -> i32 {
    guard(|| {
        let comm = match COMM.with(|c| c.borrow_mut().take()) {
            Some(c) => {
                THREAD_COMMS.fetch_sub(1, Ordering::Relaxed);
                Some(c)
            }
            None => match crate::shared::with_shared(Option::take) {
                Ok(c) => c,
                Err(code) => return code,
            },
        };
        match comm {
            Some(mut comm) => match comm.finalize() {
                Ok(()) => TC_OK,
                Err(e) => code_of(&e),
            },
            None => fail(TC_ERR_NOT_INITIALIZED, "tc_init was not called"),
        }
    })
}

/// This process's rank, or a negative error code.
#[no_mangle]
pub extern "C" fn tc_rank() -> i32 {
    with(|c| Ok(c.rank() as i32))
}

/// Number of ranks, or a negative error code.
#[no_mangle]
pub extern "C" fn tc_size() -> i32 {
    with(|c| Ok(c.size() as i32))
}

pub(crate) fn rank_arg(r: c_int, what: &str) -> Result<usize, Error> {
    usize::try_from(r).map_err(|_| Error::Invalid(format!("{what} rank {r} is negative")))
}

/// Blocking send.
#[no_mangle]
pub extern "C" fn tc_send(buf: *const c_void, len: usize, dst: c_int, tag: c_int) -> i32 {
    with(|c| {
        if buf.is_null() && len > 0 {
            return Err(Error::Invalid("buf is NULL".into()));
        }
        let dst = rank_arg(dst, "destination")?;
        // SAFETY: the caller provides len readable bytes, kept until the
        // wait below returns.
        let r = unsafe { c.isend_raw(buf.cast(), len, dst, tag)? };
        c.wait(r).map(|_| TC_OK)
    })
}

/// Blocking receive; `status` may be NULL.
#[no_mangle]
pub extern "C" fn tc_recv(
    buf: *mut c_void,
    cap: usize,
    src: c_int,
    tag: c_int,
    status: *mut TcStatus,
) -> i32 {
    with(|c| {
        if buf.is_null() && cap > 0 {
            return Err(Error::Invalid("buf is NULL".into()));
        }
        // SAFETY: the caller provides cap writable bytes until the wait returns.
        let r = unsafe { c.irecv_raw(buf.cast(), cap, src, tag)? };
        let s = c.wait(r)?;
        put_status(status, s);
        Ok(TC_OK)
    })
}

/// Non-blocking send; `buf` must stay untouched until completion.
#[no_mangle]
pub extern "C" fn tc_isend(
    buf: *const c_void,
    len: usize,
    dst: c_int,
    tag: c_int,
    req: *mut u64,
) -> i32 {
    with(|c| {
        if req.is_null() || (buf.is_null() && len > 0) {
            return Err(Error::Invalid("buf or req is NULL".into()));
        }
        let dst = rank_arg(dst, "destination")?;
        // SAFETY: the caller keeps buf valid until tc_wait/tc_test completes it.
        let r = unsafe { c.isend_raw(buf.cast(), len, dst, tag)? };
        // SAFETY: req is non-NULL and writable.
        unsafe { *req = r.to_u64() };
        Ok(TC_OK)
    })
}

/// Non-blocking receive; `buf` must stay untouched until completion.
#[no_mangle]
pub extern "C" fn tc_irecv(
    buf: *mut c_void,
    cap: usize,
    src: c_int,
    tag: c_int,
    req: *mut u64,
) -> i32 {
    with(|c| {
        if req.is_null() || (buf.is_null() && cap > 0) {
            return Err(Error::Invalid("buf or req is NULL".into()));
        }
        // SAFETY: the caller keeps buf valid until tc_wait/tc_test completes it.
        let r = unsafe { c.irecv_raw(buf.cast(), cap, src, tag)? };
        // SAFETY: req is non-NULL and writable.
        unsafe { *req = r.to_u64() };
        Ok(TC_OK)
    })
}

/// Waits for a request and sets it to TC_REQUEST_NULL.
#[no_mangle]
pub extern "C" fn tc_wait(req: *mut u64, status: *mut TcStatus) -> i32 {
    with(|c| {
        let r = take_req(req)?;
        // SAFETY: take_req checked req is non-NULL.
        unsafe { *req = 0 };
        let s = c.wait(r)?;
        put_status(status, s);
        Ok(TC_OK)
    })
}

/// Sets *flag to 1 (and the request to TC_REQUEST_NULL) if complete, else 0.
#[no_mangle]
pub extern "C" fn tc_test(req: *mut u64, flag: *mut c_int, status: *mut TcStatus) -> i32 {
    with(|c| {
        if flag.is_null() {
            return Err(Error::Invalid("flag is NULL".into()));
        }
        let r = take_req(req)?;
        let done = c.test(&r);
        // SAFETY: flag non-NULL (checked), req non-NULL (take_req).
        unsafe {
            *flag = 0;
            match &done {
                Ok(Some(_)) | Err(_) => *req = 0,
                Ok(None) => {}
            }
        }
        if let Some(s) = done? {
            put_status(status, s);
            // SAFETY: as above.
            unsafe { *flag = 1 };
        }
        Ok(TC_OK)
    })
}

/// Blocks until a matching message has arrived; fills status.
#[no_mangle]
pub extern "C" fn tc_probe(src: c_int, tag: c_int, status: *mut TcStatus) -> i32 {
    with(|c| {
        let s = c.probe(src, tag)?;
        put_status(status, s);
        Ok(TC_OK)
    })
}

/// Sets *flag to 1 and fills status if a matching message has arrived.
#[no_mangle]
pub extern "C" fn tc_iprobe(
    src: c_int,
    tag: c_int,
    flag: *mut c_int,
    status: *mut TcStatus,
) -> i32 {
    with(|c| {
        if flag.is_null() {
            return Err(Error::Invalid("flag is NULL".into()));
        }
        let s = c.iprobe(src, tag)?;
        // SAFETY: flag is non-NULL (checked).
        unsafe { *flag = c_int::from(s.is_some()) };
        if let Some(s) = s {
            put_status(status, s);
        }
        Ok(TC_OK)
    })
}

/// Blocks until every rank has called tc_barrier.
#[no_mangle]
pub extern "C" fn tc_barrier() -> i32 {
    with(|c| c.barrier().map(|_| TC_OK))
}

/// Creates the shared segment of a job of `nranks` ranks whose rank `r` is
/// bound to PU `pus[r]` (OS index, -1 = not bound to a single PU; `pus` may
/// be NULL: nobody bound), with plans from the live machine (or
/// `$TOPOCOMM_TOPOLOGY`) and the built-in rules, or the rules file
/// `rules_path`. On success `*fd_out` is the segment's descriptor
/// (close-on-exec), to be handed to every rank for `tc_init_fd`.
#[no_mangle]
pub extern "C" fn tc_segment_create(
    nranks: c_int,
    pus: *const c_int,
    rules_path: *const c_char,
    fd_out: *mut c_int,
) -> i32 {
    // SAFETY: no sets (NULL, 0 words).
    unsafe { tc_segment_create_sets(nranks, pus, std::ptr::null(), 0, rules_path, fd_out) }
}

/// [`tc_segment_create`] with each rank's binding: `sets[r * words ..
/// (r + 1) * words]` is rank r's CPU mask (bit k of word w: PU of OS index
/// 64 w + k; all zero: unknown), for the ranks not bound to one PU, so the
/// collectives' near order can group ranks bound to a package, NUMA node or
/// cache each (`sets` NULL or `words` 0: none given).
///
/// # Safety
/// Non-NULL `sets` must hold `nranks * words` readable words.
#[no_mangle]
pub unsafe extern "C" fn tc_segment_create_sets(
    nranks: c_int,
    pus: *const c_int,
    sets: *const u64,
    words: c_int,
    rules_path: *const c_char,
    fd_out: *mut c_int,
) -> i32 {
    guard(|| {
        if fd_out.is_null() {
            return fail(TC_ERR_INVALID_ARGUMENT, "fd_out is NULL");
        }
        let n = match usize::try_from(nranks) {
            Ok(n) if n >= 1 => n,
            _ => {
                return fail(
                    TC_ERR_INVALID_ARGUMENT,
                    format!("nranks {nranks}: expected at least 1"),
                )
            }
        };
        let pus: Vec<Option<u32>> = if pus.is_null() {
            vec![None; n]
        } else {
            // SAFETY: non-NULL `pus` points to `nranks` ints (documented).
            let s = unsafe { std::slice::from_raw_parts(pus, n) };
            s.iter().map(|&p| u32::try_from(p).ok()).collect()
        };
        let Ok(words) = usize::try_from(words) else {
            return fail(
                TC_ERR_INVALID_ARGUMENT,
                format!("words {words}: expected 0 or more"),
            );
        };
        let sets: Vec<Vec<u32>> = if sets.is_null() || words == 0 {
            Vec::new()
        } else {
            // SAFETY: non-NULL `sets` holds nranks * words words (documented).
            let all = unsafe { std::slice::from_raw_parts(sets, n * words) };
            all.chunks_exact(words)
                .map(|mask| {
                    (0..words * 64)
                        .filter(|&b| mask[b / 64] >> (b % 64) & 1 == 1)
                        .map(|b| b as u32)
                        .collect()
                })
                .collect()
        };
        let rules = if rules_path.is_null() {
            None
        } else {
            match c_str(rules_path, "rules_path") {
                Ok(s) => Some(std::path::PathBuf::from(s)),
                Err(code) => return code,
            }
        };
        let m = match topocomm_topo::load_default(None) {
            Ok(m) => m,
            Err(e) => return fail(TC_ERR_TOPOLOGY, format!("machine model: {e}")),
        };
        match topocomm_transport::bootstrap::create_segment_bound(&m, &pus, &sets, rules.as_deref())
        {
            Ok(fd) => {
                // SAFETY: fd_out is non-NULL (checked) and writable.
                unsafe { *fd_out = fd.into_raw_fd() };
                TC_OK
            }
            Err(e) => fail(
                TC_ERR_TRANSPORT,
                format!("creating the shared segment: {e}"),
            ),
        }
    })
}

/// Joins, as `rank`, the job whose segment descriptor `fd` came from
/// `tc_segment_create` (in this or another process). The descriptor is
/// closed in every case. Waits (at most TOPOCOMM_TIMEOUT) for all ranks.
#[no_mangle]
pub extern "C" fn tc_init_fd(fd: c_int, rank: c_int) -> i32 {
    guard(|| {
        let (owned, rank) = match join_args(fd, rank) {
            Ok(a) => a,
            Err(code) => return code,
        };
        COMM.with(|c| {
            if c.borrow().is_some() {
                return fail(
                    TC_ERR_INVALID_ARGUMENT,
                    "tc_init or tc_init_fd called twice",
                );
            }
            match Comm::join(owned, rank) {
                Ok(comm) => {
                    *c.borrow_mut() = Some(comm);
                    THREAD_COMMS.fetch_add(1, Ordering::Relaxed);
                    TC_OK
                }
                Err(e) => code_of(&e),
            }
        })
    })
}

/// The descriptor (taken over: closed in every case from here on) and the
/// rank of `tc_init_fd` / `tc_init_fd_shared`, or the error code.
pub(crate) fn join_args(fd: c_int, rank: c_int) -> Result<(OwnedFd, usize), i32> {
    // SAFETY: fcntl(F_GETFD) only queries the descriptor table.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return Err(fail(
            TC_ERR_INVALID_ARGUMENT,
            format!("fd {fd} is not an open descriptor"),
        ));
    }
    // SAFETY: `fd` is open (checked above) and the caller hands over its
    // ownership (documented: it is closed in every case).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    match usize::try_from(rank) {
        Ok(rank) => Ok((owned, rank)),
        Err(_) => Err(fail(
            TC_ERR_INVALID_ARGUMENT,
            format!("rank {rank} is negative"),
        )),
    }
}
