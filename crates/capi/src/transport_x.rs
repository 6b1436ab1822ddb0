//! The transport's extended C API for the MPI accelerator
//! (`mpi/lib/accel`): matching contexts (one per MPI communicator),
//! synchronous sends, bounded waits, cancellation of receives, and a
//! communicator that any thread may use one call at a time.

use crate::error::*;
use crate::transport::{code_of, join_args, put_status, rank_arg, take_req, with, TcStatus};
use std::ffi::{c_int, c_void};
use std::time::Duration;
use topocomm_transport::coll::COLL_CTX;
use topocomm_transport::{Comm, Error, Posted, Request, Status, Take};

/// `flags` bit of `tc_isend_x`/`tc_send_x`: complete only once matched.
pub const TC_SEND_SYNC: c_int = 1;
/// `tc_isend_x`/`tc_send_x` flag: the receiver is waiting for this message
/// ([`Comm::isend_waited`](topocomm_transport::Comm::isend_waited)).
pub const TC_SEND_WAITED: c_int = 2;
/// `TC_REQUEST_DONE` of topocomm.h: the handle of a send that completed
/// when it was posted.
pub const TC_REQUEST_DONE: u64 = 0xFFFF_FFFF;

fn ctx_arg(ctx: c_int) -> Result<u16, Error> {
    match u16::try_from(ctx) {
        Ok(c) if c != COLL_CTX => Ok(c),
        Ok(_) => Err(Error::Invalid(format!(
            "context {ctx} is reserved for the collectives (tc_bcast, tc_allreduce, ...)"
        ))),
        Err(_) => Err(Error::Invalid(format!("context {ctx} is not in 0..=65534"))),
    }
}

/// Starts a send of `len` bytes at `buf` with the `tc_isend_x` flags
/// (`TC_SEND_SYNC` wins over `TC_SEND_WAITED`: a synchronous send is a
/// rendezvous anyway); other bits are refused.
///
/// # Safety
/// As [`Comm::isend_raw`]: `buf` stays valid and unmodified for `len`
/// bytes until the request completes.
unsafe fn isend_flagged(
    c: &mut Comm,
    buf: *const c_void,
    len: usize,
    dst: usize,
    tag: c_int,
    ctx: u16,
    flags: c_int,
) -> Result<Request, Error> {
    if flags & !(TC_SEND_SYNC | TC_SEND_WAITED) != 0 {
        return Err(Error::Invalid(format!(
            "flags {flags}: expected 0, TC_SEND_SYNC (1) or TC_SEND_WAITED (2)"
        )));
    }
    // SAFETY: forwarded contract.
    unsafe {
        if flags & TC_SEND_SYNC == 0 && flags & TC_SEND_WAITED != 0 {
            c.isend_waited(buf.cast(), len, dst, tag, ctx)
        } else {
            c.isend_ctx(buf.cast(), len, dst, tag, ctx, flags & TC_SEND_SYNC != 0)
        }
    }
}

/// A budget in seconds; `<= 0` or not finite: none.
pub(crate) fn budget_arg(secs: f64) -> Option<Duration> {
    // Whole seconds and nanoseconds, truncated (`as` saturates): no 64-bit
    // division (`Duration::from_nanos` divides by 10^9, about 40
    // instructions and a division's latency on every accelerated receive),
    // and not `from_secs_f64`'s exact rounding, which showed at 3% of an
    // accelerated barrier (two calls per collective on the latency path).
    if !(secs > 0.0 && secs.is_finite()) {
        return None;
    }
    // `as` truncates toward zero (and saturates); not `f64::trunc`, which
    // without SSE4.1 in the target's baseline is a call into a software
    // routine of about 20 instructions per call (callgrind, 2026-12-03).
    let whole = secs as u64;
    // 0 <= secs - whole < 1 below 2^64 s (whole is exact: below 2^53 every
    // integer is, above it secs is one); beyond, and where the product
    // rounds up to 10^9, the casts saturate and the min clamps.
    let nanos = (((secs - whole as f64) * 1e9) as u32).min(999_999_999);
    Some(Duration::new(whole, nanos))
}

/// A truncated receive still reports who sent what (MPI fills the status
/// of a truncated receive), then fails with `TC_ERR_TRUNCATED`.
fn status_or_truncation(
    r: Result<Option<Status>, Error>,
    status: *mut TcStatus,
) -> Result<Option<Status>, Error> {
    if let Err(Error::Truncated { len, peer, tag, .. }) = &r {
        put_status(
            status,
            Status {
                source: *peer,
                tag: *tag,
                count: *len,
            },
        );
    }
    r
}

fn set_flag(flag: *mut c_int, v: bool) -> Result<(), Error> {
    if flag.is_null() {
        return Err(Error::Invalid("flag is NULL".into()));
    }
    // SAFETY: non-NULL (checked); the caller passes a valid int pointer.
    unsafe { *flag = c_int::from(v) };
    Ok(())
}

/// `tc_init_fd`, but the communicator belongs to the process: any thread
/// may call the `tc_*` functions, one call at a time.
#[no_mangle]
pub extern "C" fn tc_init_fd_shared(fd: c_int, rank: c_int) -> i32 {
    guard(|| {
        let (owned, rank) = match join_args(fd, rank) {
            Ok(a) => a,
            Err(code) => return code,
        };
        if with(|_| Ok(TC_OK)) == TC_OK {
            return fail(
                TC_ERR_INVALID_ARGUMENT,
                "tc_init or tc_init_fd called twice",
            );
        }
        crate::shared::with_shared(|slot| match Comm::join(owned, rank) {
            Ok(comm) => {
                *slot = Some(comm);
                TC_OK
            }
            Err(e) => code_of(&e),
        })
        .unwrap_or_else(|code| code)
    })
}

/// How long a wait may see no progress before failing with
/// `TC_ERR_TIMEOUT`; `seconds <= 0`: never (dead peers are still detected).
#[no_mangle]
pub extern "C" fn tc_set_timeout(seconds: f64) -> i32 {
    with(|c| {
        c.set_timeout(budget_arg(seconds));
        Ok(TC_OK)
    })
}

/// `tc_isend` in matching context `ctx` (0..=65534; 0 is the plain API's,
/// 65535 the collectives'),
/// with `flags` (`TC_SEND_SYNC`, `TC_SEND_WAITED`).
#[no_mangle]
pub extern "C" fn tc_isend_x(
    buf: *const c_void,
    len: usize,
    dst: c_int,
    tag: c_int,
    ctx: c_int,
    flags: c_int,
    req: *mut u64,
) -> i32 {
    with(|c| {
        if req.is_null() || (buf.is_null() && len > 0) {
            return Err(Error::Invalid("buf or req is NULL".into()));
        }
        let (dst, ctx) = (rank_arg(dst, "destination")?, ctx_arg(ctx)?);
        // SAFETY: the caller keeps `buf` (len bytes) valid and unmodified
        // until the request completes (documented in topocomm.h).
        let r = unsafe { isend_flagged(c, buf, len, dst, tag, ctx, flags)? };
        // SAFETY: req is non-NULL (checked).
        unsafe { *req = r.to_u64() };
        Ok(TC_OK)
    })
}

/// Sends `len` bytes to `dst` in context `ctx` at once when they can go
/// without a rendezvous (inline in a cell of the ring, or eager through a
/// free fragment slot) and nothing is queued ahead to `dst`: returns 1 when
/// the message went out (complete: `buf` may be reused, no request), 0 when
/// it did not and nothing happened (above the eager size, messages queued,
/// ring or slots full, or arguments `tc_isend_x` would refuse: the caller
/// takes `tc_isend_x`/`tc_send_x`, which send it or report the error), a
/// negative code only when there is no communicator. The accelerator's
/// blocking and windowed sends: one call, no request handle, no wait.
#[no_mangle]
pub extern "C" fn tc_send_now_x(
    buf: *const c_void,
    len: usize,
    dst: c_int,
    tag: c_int,
    ctx: c_int,
) -> i32 {
    with(|c| {
        let (Ok(dst), Ok(ctx)) = (usize::try_from(dst), u16::try_from(ctx)) else {
            return Ok(0);
        };
        if (buf.is_null() && len > 0) || ctx == COLL_CTX {
            return Ok(0);
        }
        // SAFETY: `buf` is valid for len bytes during the call (contract);
        // the copy into the cell is the whole send.
        Ok(i32::from(unsafe {
            c.send_now(buf.cast(), len, dst, tag, ctx)
        }))
    })
}

/// Blocking `tc_isend_x` + wait.
#[no_mangle]
pub extern "C" fn tc_send_x(
    buf: *const c_void,
    len: usize,
    dst: c_int,
    tag: c_int,
    ctx: c_int,
    flags: c_int,
) -> i32 {
    with(|c| {
        if buf.is_null() && len > 0 {
            return Err(Error::Invalid("buf is NULL".into()));
        }
        let (dst, ctx) = (rank_arg(dst, "destination")?, ctx_arg(ctx)?);
        // SAFETY: `buf` is valid for len bytes during the call (contract),
        // and the request is waited for before returning.
        let r = unsafe { isend_flagged(c, buf, len, dst, tag, ctx, flags)? };
        c.wait(r).map(|_| TC_OK)
    })
}

/// `tc_irecv` in matching context `ctx`.
#[no_mangle]
pub extern "C" fn tc_irecv_x(
    buf: *mut c_void,
    cap: usize,
    src: c_int,
    tag: c_int,
    ctx: c_int,
    req: *mut u64,
) -> i32 {
    with(|c| {
        let ctx = recv_args(buf, cap, ctx, req)?;
        // SAFETY: the caller keeps `buf` (cap bytes) valid and untouched
        // until the request completes (documented in topocomm.h).
        let r = unsafe { c.irecv_ctx(buf.cast(), cap, src, tag, ctx)? };
        // SAFETY: req is non-NULL (recv_args checked).
        unsafe { *req = r.to_u64() };
        Ok(TC_OK)
    })
}

/// The argument checks of `tc_irecv_x` and `tc_irecv_now_x`: the buffer
/// and handle pointers, and the context.
fn recv_args(buf: *mut c_void, cap: usize, ctx: c_int, req: *mut u64) -> Result<u16, Error> {
    if req.is_null() || (buf.is_null() && cap > 0) {
        return Err(Error::Invalid("buf or req is NULL".into()));
    }
    ctx_arg(ctx)
}

/// `tc_irecv_x` that says whether the receive completed at posting (its
/// message was already there): then `*flag` = 1, the status is filled and
/// `*req` = `TC_REQUEST_NULL`, nothing to wait for; else `*flag` = 0 and
/// `*req` is the pending request (a receive that failed at posting, e.g.
/// truncated, is pending too: its wait reports the error). Saves the
/// accelerator a wait per message of a window of receives behind a
/// faster sender.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn tc_irecv_now_x(
    buf: *mut c_void,
    cap: usize,
    src: c_int,
    tag: c_int,
    ctx: c_int,
    req: *mut u64,
    flag: *mut c_int,
    status: *mut TcStatus,
) -> i32 {
    with(|c| {
        set_flag(flag, false)?;
        let ctx = recv_args(buf, cap, ctx, req)?;
        // SAFETY: the caller keeps `buf` (cap bytes) valid and untouched
        // until the request completes (documented in topocomm.h).
        let posted = unsafe { c.irecv_or_take_ctx(buf.cast(), cap, src, tag, ctx)? };
        match posted {
            Posted::Taken(s) => {
                // SAFETY: req is non-NULL (recv_args checked).
                unsafe { *req = 0 };
                put_status(status, s);
                set_flag(flag, true)?;
            }
            // SAFETY: req is non-NULL (recv_args checked).
            Posted::Pending(r) => unsafe { *req = r.to_u64() },
        }
        Ok(TC_OK)
    })
}

/// Takes the next message from `src` with `tag` in context `ctx` into
/// `buf` when it is already there and nothing posted or unexpected comes
/// before it in MPI order; never posts, drains or waits. `*flag` = 1: taken
/// (status filled); 0: not there yet (try again later); -1: post the
/// receive instead (something comes before it, its cell is another
/// receive's, a rendezvous or too long, or an argument posting rejects).
/// For a caller that waits for a window of receives it has not posted yet.
#[no_mangle]
pub extern "C" fn tc_take_now_x(
    buf: *mut c_void,
    cap: usize,
    src: c_int,
    tag: c_int,
    ctx: c_int,
    flag: *mut c_int,
    status: *mut TcStatus,
) -> i32 {
    with(|c| {
        if flag.is_null() || (buf.is_null() && cap > 0) {
            return Err(Error::Invalid("buf or flag is NULL".into()));
        }
        let Ok(ctx) = ctx_arg(ctx) else {
            // SAFETY: non-NULL (checked).
            unsafe { *flag = -1 };
            return Ok(TC_OK);
        };
        // SAFETY: the caller passes `cap` writable bytes at `buf`.
        let v = match unsafe { c.take_now_ctx(buf.cast(), cap, src, tag, ctx) } {
            Take::Taken(s) => {
                put_status(status, s);
                1
            }
            Take::NotYet => 0,
            Take::Post => -1,
        };
        // SAFETY: non-NULL (checked).
        unsafe { *flag = v };
        Ok(TC_OK)
    })
}

/// Blocking receive in context `ctx` for at most `budget_s` seconds
/// (`<= 0`: no limit). `*flag` = 1 when a message was received (status
/// filled), 0 when the budget ran out (nothing received, nothing posted).
/// A truncated message fills the status and fails with `TC_ERR_TRUNCATED`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn tc_recv_x(
    buf: *mut c_void,
    cap: usize,
    src: c_int,
    tag: c_int,
    ctx: c_int,
    budget_s: f64,
    flag: *mut c_int,
    status: *mut TcStatus,
) -> i32 {
    with(|c| {
        if buf.is_null() && cap > 0 {
            return Err(Error::Invalid("buf is NULL".into()));
        }
        set_flag(flag, false)?;
        let ctx = ctx_arg(ctx)?;
        // The latency path first: the budget is converted only for a
        // receive that has to wait (a float conversion per call otherwise).
        // SAFETY: `buf` is valid for cap writable bytes during the call.
        if let Some(s) = unsafe { c.recv_now_ctx(buf.cast(), cap, src, tag, ctx) } {
            put_status(status, s);
            set_flag(flag, true)?;
            return Ok(TC_OK);
        }
        // SAFETY: as above.
        let r = unsafe { c.recv_posted_ctx(buf.cast(), cap, src, tag, ctx, budget_arg(budget_s)) };
        if let Some(s) = status_or_truncation(r, status)? {
            put_status(status, s);
            set_flag(flag, true)?;
        }
        Ok(TC_OK)
    })
}

/// Waits for `*req` at most `budget_s` seconds (`<= 0`: no limit). On
/// completion `*flag` = 1, the status is filled and `*req` becomes
/// `TC_REQUEST_NULL`; else `*flag` = 0 and `*req` stays valid.
#[no_mangle]
pub extern "C" fn tc_wait_for(
    req: *mut u64,
    budget_s: f64,
    flag: *mut c_int,
    status: *mut TcStatus,
) -> i32 {
    with(|c| {
        set_flag(flag, false)?;
        let r = take_req(req)?;
        let res = match budget_arg(budget_s) {
            Some(b) => c.wait_for(r, b),
            None => c.wait(r).map(Some),
        };
        if !matches!(res, Ok(None)) {
            // SAFETY: req is non-NULL (take_req checked).
            unsafe { *req = 0 };
        }
        if let Some(s) = status_or_truncation(res, status)? {
            put_status(status, s);
            set_flag(flag, true)?;
        }
        Ok(TC_OK)
    })
}

/// Waits for the `n` requests of `reqs` in turn, each at most `budget_s`
/// seconds (`<= 0`: no limit), and returns at the first one not complete
/// in its budget. Each request that completed (or failed) becomes
/// `TC_REQUEST_NULL`, with `sts[i]` filled (also for a truncated message)
/// and `rcs[i]` its outcome (`TC_OK` or an error code); the others keep
/// their handle. `TC_REQUEST_NULL` entries are skipped. `*left`: how many
/// are still pending. One call for a whole `MPI_Waitall` window instead of
/// one per request (docs/mpi.md).
#[no_mangle]
pub extern "C" fn tc_wait_all_x(
    n: usize,
    reqs: *mut u64,
    sts: *mut TcStatus,
    rcs: *mut c_int,
    budget_s: f64,
    left: *mut usize,
) -> i32 {
    with(|c| {
        if left.is_null() || (n > 0 && (reqs.is_null() || sts.is_null() || rcs.is_null())) {
            return Err(Error::Invalid("reqs, sts, rcs or left is NULL".into()));
        }
        let budget = budget_arg(budget_s);
        let mut pending = 0;
        for i in 0..n {
            // SAFETY: the caller passes arrays of n elements (checked non-NULL).
            let (h, st, rc) = unsafe { (&mut *reqs.add(i), sts.add(i), &mut *rcs.add(i)) };
            if *h == 0 {
                continue;
            }
            if pending > 0 {
                pending += 1;
                continue;
            }
            let r = Request::from_u64(*h);
            let res = match budget {
                Some(b) => c.wait_for(r, b),
                None => c.wait(r).map(Some),
            };
            if matches!(res, Ok(None)) {
                pending += 1;
                continue;
            }
            *h = 0;
            *rc = match status_or_truncation(res, st) {
                Ok(s) => {
                    put_status(st, s.unwrap_or_default());
                    TC_OK
                }
                Err(e) => code_of(&e),
            };
        }
        // SAFETY: non-NULL (checked).
        unsafe { *left = pending };
        Ok(TC_OK)
    })
}

/// `tc_iprobe` in matching context `ctx`.
#[no_mangle]
pub extern "C" fn tc_iprobe_x(
    src: c_int,
    tag: c_int,
    ctx: c_int,
    flag: *mut c_int,
    status: *mut TcStatus,
) -> i32 {
    with(|c| {
        set_flag(flag, false)?;
        let s = c.iprobe_ctx(src, tag, ctx_arg(ctx)?)?;
        if let Some(s) = s {
            put_status(status, s);
            set_flag(flag, true)?;
        }
        Ok(TC_OK)
    })
}

/// Cancels receive `*req` if no message matched it yet: `*cancelled` = 1
/// and `*req` = `TC_REQUEST_NULL`; else `*cancelled` = 0 and the request
/// completes as usual. Sends are never cancelled.
#[no_mangle]
pub extern "C" fn tc_cancel(req: *mut u64, cancelled: *mut c_int) -> i32 {
    with(|c| {
        set_flag(cancelled, false)?;
        let r = take_req(req)?;
        if c.cancel_recv(r)? {
            // SAFETY: req is non-NULL (take_req checked).
            unsafe { *req = 0 };
            set_flag(cancelled, true)?;
        }
        Ok(TC_OK)
    })
}

/// One pass of the progress engine (pushes queued sends, takes arrived
/// messages), for callers that poll several engines.
#[no_mangle]
pub extern "C" fn tc_progress() -> i32 {
    with(|c| c.progress().map(|_| TC_OK))
}

/// Tells the peers that this rank is blocked in another library's call
/// (`blocked` != 0) or back (0): their waits for it then yield their CPU
/// instead of spinning (the MPI accelerator around blocking PMPI calls).
#[no_mangle]
pub extern "C" fn tc_note_blocked(blocked: c_int) -> i32 {
    with(|c| {
        c.note_blocked(blocked != 0);
        Ok(TC_OK)
    })
}

/// 1 when some rank of this node reads heartbeats (a rank that may share
/// its CPU), so `tc_note_blocked` has an effect; 0 when none does and a
/// caller may skip it on every blocking call (the accelerator's plain-MPI
/// path, where each call costs latency).
#[no_mangle]
pub extern "C" fn tc_beats_watched_x() -> i32 {
    with(|c| Ok(i32::from(c.beats_watched())))
}

/// The smallest eager limit of any pair of this node's ranks (the same
/// on every rank), in `*bytes`; `u64::MAX` with a single rank.
///
/// # Safety
/// `bytes` must be NULL (an error) or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn tc_eager_floor_x(bytes: *mut u64) -> i32 {
    with(|c| {
        if bytes.is_null() {
            return Err(Error::Invalid("bytes is NULL".into()));
        }
        // SAFETY: non-NULL (checked); the caller vouches for one write.
        unsafe { *bytes = c.eager_floor() };
        Ok(0)
    })
}

/// The smaller pipeline fragment of the channels between transport ranks
/// `a` and `b` (the same on every rank), in `*bytes`: the piece size for
/// collectives that cut a long transfer between the two.
///
/// # Safety
/// `bytes` must be NULL (an error) or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn tc_pair_fragment_x(a: c_int, b: c_int, bytes: *mut u64) -> i32 {
    with(|c| {
        if bytes.is_null() {
            return Err(Error::Invalid("bytes is NULL".into()));
        }
        let rank = |r: c_int| usize::try_from(r).ok();
        let f = match (rank(a), rank(b)) {
            (Some(a), Some(b)) => c.pair_fragment(a, b),
            _ => None,
        }
        .ok_or_else(|| {
            Error::Invalid(format!(
                "ranks {a} and {b}: expected two different ranks in 0..{}",
                c.size()
            ))
        })?;
        // SAFETY: non-NULL (checked); the caller vouches for one write.
        unsafe { *bytes = f };
        Ok(0)
    })
}

/// The near order of `n` members (job ranks `ranks[i]`, a communicator's
/// members in its rank order) for the collectives' trees: 1 when there is
/// one, with `order[k]` the member (an index into `ranks`) at position `k`
/// and `split[k]` (k >= 1) the depth of the lowest common ancestor of the
/// PUs of the members at positions `k - 1` and `k` (larger: nearer;
/// `split[0]` = 0); 0 when there is none (a member not bound to one PU,
/// every pair at one level, one member: keep the rank order); a negative
/// code for a bad argument. The same answer on every rank (docs/collectives.md,
/// "Trees from the locality classes").
///
/// # Safety
/// `ranks` must hold `n` readable ints, `order` and `split` room for `n`
/// each.
#[no_mangle]
pub unsafe extern "C" fn tc_near_order(
    ranks: *const c_int,
    n: c_int,
    order: *mut c_int,
    split: *mut c_int,
) -> i32 {
    with(|c| {
        let n = usize::try_from(n)
            .map_err(|_| Error::Invalid(format!("n {n}: expected 0 or more members")))?;
        if n > 0 && (ranks.is_null() || order.is_null() || split.is_null()) {
            return Err(Error::Invalid("ranks, order or split is NULL".into()));
        }
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: non-NULL (checked), n ints (the caller's contract).
        let given = unsafe { std::slice::from_raw_parts(ranks, n) };
        let mut job = Vec::with_capacity(n);
        for &r in given {
            let r = rank_arg(r, "member")?;
            if r >= c.size() {
                return Err(Error::Invalid(format!(
                    "member rank {r}: the job has {} ranks",
                    c.size()
                )));
            }
            job.push(r);
        }
        let Some((o, d)) = c.near_order(&job) else {
            return Ok(0);
        };
        // SAFETY: room for n ints each (the caller's contract); positions
        // and depths fit an int (n <= NEAR_MAX, depths of a machine tree).
        unsafe {
            for k in 0..n {
                *order.add(k) = o[k] as c_int;
                *split.add(k) = d[k].min(c_int::MAX as u32) as c_int;
            }
        }
        Ok(1)
    })
}

/// The positions of a near order (`split`, `n` entries, from
/// [`tc_near_order`]) in the order a tree rooted at position `p` takes
/// them, into `out` (`n` ints): `p` first, then the rest of its deepest
/// group, then the rest of each enclosing group outwards. 0, or a negative
/// code for a bad argument. Needs no communicator.
///
/// # Safety
/// `split` must hold `n` readable ints, `out` room for `n`.
#[no_mangle]
pub unsafe extern "C" fn tc_near_rooted(
    split: *const c_int,
    n: c_int,
    p: c_int,
    out: *mut c_int,
) -> i32 {
    use crate::error::{fail, guard, TC_ERR_INVALID_ARGUMENT};
    guard(|| {
        let Ok(len) = usize::try_from(n) else {
            return fail(
                TC_ERR_INVALID_ARGUMENT,
                format!("n {n}: expected 1 or more positions"),
            );
        };
        let Some(p) = usize::try_from(p).ok().filter(|&p| p < len) else {
            return fail(
                TC_ERR_INVALID_ARGUMENT,
                format!("root position {p}: expected 0..{n}"),
            );
        };
        if split.is_null() || out.is_null() {
            return fail(TC_ERR_INVALID_ARGUMENT, "split or out is NULL");
        }
        // SAFETY: n readable ints (the caller's contract).
        let split: Vec<u32> = unsafe { std::slice::from_raw_parts(split, len) }
            .iter()
            .map(|&d| d.max(0) as u32)
            .collect();
        for (k, q) in topocomm_transport::near::rooted(&split, p)
            .into_iter()
            .enumerate()
        {
            // SAFETY: room for n ints (the caller's contract); q < n.
            unsafe { *out.add(k) = q as c_int };
        }
        0
    })
}

/// 1 when `tc_put_x` can write into the other ranks' memory (single copy
/// works between every pair: the same answer on every rank), 0 when not.
#[no_mangle]
pub extern "C" fn tc_can_put_x() -> i32 {
    with(|c| Ok(i32::from(c.can_put())))
}

/// Writes `len` bytes at `buf` to address `remote` in rank `dst`'s memory
/// (`process_vm_writev`), complete on return: 1 written, 0 not (single
/// copy off or failed here: send the bytes instead), a negative code for a
/// bad argument or a dead peer.
///
/// # Safety
/// `buf` must be valid for `len` readable bytes, and `remote..remote+len`
/// memory that rank `dst` expects to be written now.
#[no_mangle]
pub unsafe extern "C" fn tc_put_x(dst: c_int, buf: *const c_void, len: usize, remote: u64) -> i32 {
    with(|c| {
        if buf.is_null() && len > 0 {
            return Err(Error::Invalid("buf is NULL".into()));
        }
        let dst = rank_arg(dst, "destination")?;
        // SAFETY: the caller vouches for buf and for the remote range.
        unsafe { c.put(dst, buf.cast(), len, remote) }.map(i32::from)
    })
}

/// Reads `len` bytes at address `remote` in rank `src`'s memory into `buf`
/// (`process_vm_readv`), complete on return: 1 read, 0 not (single copy
/// off or failed here: the bytes must come by message), a negative code for
/// a bad argument or a dead peer.
///
/// # Safety
/// `buf` must be valid for `len` writable bytes, and `remote..remote+len`
/// memory that rank `src` keeps unchanged until told the read is done.
#[no_mangle]
pub unsafe extern "C" fn tc_get_x(src: c_int, buf: *mut c_void, len: usize, remote: u64) -> i32 {
    with(|c| {
        if buf.is_null() && len > 0 {
            return Err(Error::Invalid("buf is NULL".into()));
        }
        let src = rank_arg(src, "source")?;
        // SAFETY: the caller vouches for buf and for the remote range.
        unsafe { c.get(src, buf.cast(), len, remote) }.map(i32::from)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_truncated_to_nanoseconds_and_bad_ones_are_none() {
        assert_eq!(budget_arg(50e-6), Some(Duration::from_micros(50)));
        assert_eq!(budget_arg(2.5), Some(Duration::from_millis(2500)));
        assert_eq!(budget_arg(1e-9), Some(Duration::from_nanos(1)));
        let big = budget_arg(1e300).expect("saturates");
        assert!(big >= Duration::from_secs(u64::MAX));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(budget_arg(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_send_pushed_at_posting_has_the_done_handle() {
        // A job of one rank (no launcher variables): a message to oneself.
        std::env::remove_var("TOPOCOMM_SHM_FD");
        let mut c = Comm::init().unwrap();
        let b = [1u8; 8];
        // SAFETY: `b` outlives the request, waited for below.
        let r = unsafe { c.isend_ctx(b.as_ptr(), 8, 0, 1, 3, false).unwrap() };
        assert_eq!(r.to_u64(), TC_REQUEST_DONE);
        c.wait(r).unwrap();
        // A synchronous send never is.
        // SAFETY: as above.
        let s = unsafe { c.isend_ctx(b.as_ptr(), 8, 0, 2, 3, true).unwrap() };
        assert_ne!(s.to_u64(), TC_REQUEST_DONE);
        let mut out = [0u8; 8];
        for tag in [1, 2] {
            // SAFETY: `out` holds 8 bytes for the whole call.
            unsafe { c.recv_ctx(out.as_mut_ptr(), 8, 0, tag, 3, None) }.unwrap();
        }
        c.wait(s).unwrap();
        // Unknown flag bits are refused; TC_SEND_WAITED below the answers'
        // sizes is an ordinary send; TC_SEND_SYNC wins over it.
        // SAFETY: `b` outlives every request, each waited for here.
        unsafe {
            match isend_flagged(&mut c, b.as_ptr().cast(), 8, 0, 1, 3, 4) {
                Err(Error::Invalid(m)) => assert!(m.contains("flags 4"), "{m}"),
                other => panic!("flags 4 accepted: {:?}", other.map(|r| r.to_u64())),
            }
            let r = isend_flagged(&mut c, b.as_ptr().cast(), 8, 0, 1, 3, TC_SEND_WAITED).unwrap();
            assert_eq!(r.to_u64(), TC_REQUEST_DONE);
            c.wait(r).unwrap();
            let s = isend_flagged(&mut c, b.as_ptr().cast(), 8, 0, 2, 3, 3).unwrap();
            assert_ne!(
                s.to_u64(),
                TC_REQUEST_DONE,
                "TC_SEND_SYNC lost to TC_SEND_WAITED"
            );
            for tag in [1, 2] {
                c.recv_ctx(out.as_mut_ptr(), 8, 0, tag, 3, None).unwrap();
            }
            c.wait(s).unwrap();
        }
    }
}
