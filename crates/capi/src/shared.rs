//! The process-wide communicator of `tc_init_fd_shared`: any thread may
//! use it, one call at a time (MPI_THREAD_SERIALIZED). A flag taken for the
//! length of each call turns an overlapping call into an error instead of
//! a data race.

use crate::error::{fail, TC_ERR_INVALID_ARGUMENT};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use topocomm_transport::Comm;

struct Shared {
    busy: AtomicBool,
    comm: UnsafeCell<Option<Comm>>,
}

// SAFETY: `comm` is only reached through `with_shared`, which holds `busy`
// for the whole access, so no two threads ever touch it at once. `Comm`
// holds raw pointers into the shared mapping and plain heap data; none of
// it is tied to the thread that created it.
unsafe impl Sync for Shared {}

static SHARED: Shared = Shared {
    busy: AtomicBool::new(false),
    comm: UnsafeCell::new(None),
};

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
    // Acquire pairs with `Release::drop` of the previous call.
    if SHARED.busy.swap(true, Ordering::Acquire) {
        return Err(fail(
            TC_ERR_INVALID_ARGUMENT,
            "overlapping calls on the process-wide communicator (calls must be serialized)",
        ));
    }
    let _release = Release;
    // SAFETY: `busy` is ours until `_release` drops (see `Shared`).
    Ok(f(unsafe { &mut *SHARED.comm.get() }))
}
