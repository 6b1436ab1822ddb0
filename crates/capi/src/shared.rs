//! The process-wide communicator of `tc_init_fd_shared`: any thread may
//! use it, one call at a time (MPI_THREAD_SERIALIZED). A flag taken for the
//! length of each call turns an overlapping call into an error instead of
//! a data race, unless the caller promised with `tc_set_serialized` that
//! its calls never overlap (the MPI accelerator, whose hand-over between
//! its threads orders them): taking the flag is a locked instruction,
//! about 15 ns a call on the 2-vCPU Xeon VM, and a two-rank barrier makes
//! two calls (0.235 -> 0.207 us with the check skipped).

use crate::error::{fail, TC_ERR_INVALID_ARGUMENT};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use topocomm_transport::Comm;

struct Shared {
    busy: AtomicBool,
    comm: UnsafeCell<Option<Comm>>,
}

// SAFETY: `comm` is only reached through `with_shared`, which holds `busy`
// for the whole access, or, after `tc_set_serialized(1)`, relies on the
// caller's promise that calls never overlap and that its hand-overs between
// threads order them; so no two threads ever touch it at once. `Comm`
// holds raw pointers into the shared mapping and plain heap data; none of
// it is tied to the thread that created it.
unsafe impl Sync for Shared {}

static SHARED: Shared = Shared {
    busy: AtomicBool::new(false),
    comm: UnsafeCell::new(None),
};

/// Whether the caller promised serialized calls (`tc_set_serialized`).
static SERIALIZED: AtomicBool = AtomicBool::new(false);

/// Clears `busy` when the call ends, also when it unwinds from a panic
/// (which `guard` then reports), so one failed call does not lock the
/// communicator for good.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        // Release: this call's writes to the communicator happen-before the
        // next caller's Acquire swap, whichever thread it runs on.
        SHARED.busy.store(false, Ordering::Release);
    }
}

/// Runs `f` on the process-wide communicator slot; an overlapping call
/// from another thread fails with `TC_ERR_INVALID_ARGUMENT` (the `Err`).
#[inline(always)]
pub(crate) fn with_shared<R>(f: impl FnOnce(&mut Option<Comm>) -> R) -> Result<R, i32> {
    // Relaxed: the promise is made before the calls it covers, on the
    // thread that makes them or ordered before them by the caller.
    let checked = !SERIALIZED.load(Ordering::Relaxed);
    // Acquire pairs with `Release::drop` of the previous call.
    if checked && SHARED.busy.swap(true, Ordering::Acquire) {
        return Err(fail(
            TC_ERR_INVALID_ARGUMENT,
            "overlapping calls on the process-wide communicator (calls must be serialized)",
        ));
    }
    let _release = checked.then_some(Release);
    // One call of `f` for both cases: two would leave it out of line (a
    // call and its arguments through the stack on every transport call).
    // SAFETY: `busy` is ours until `_release` drops (see `Shared`), or,
    // unchecked, no other call runs now and every earlier one
    // happens-before this one: the caller's promise (tc_set_serialized).
    Ok(f(unsafe { &mut *SHARED.comm.get() }))
}

/// Makes (`promise != 0`) or withdraws the promise that no two calls on
/// the process-wide communicator ever overlap and that whatever hands the
/// calls from one thread to another orders them (a mutex, a release store
/// read with acquire, a thread join): the overlap check, a locked
/// instruction per call, is then skipped. Returns 0.
///
/// # Safety
///
/// With the promise made, two overlapping calls are a data race on the
/// communicator (undefined behaviour), not an error: only for callers that
/// serialize by construction, such as the MPI accelerator (which turns
/// itself off under `MPI_THREAD_MULTIPLE`).
#[no_mangle]
pub unsafe extern "C" fn tc_set_serialized(promise: std::os::raw::c_int) -> i32 {
    // Relaxed: see `with_shared`.
    SERIALIZED.store(promise != 0, Ordering::Relaxed);
    0
}
