//! Error codes and the per-thread last-error message.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

pub const TC_OK: i32 = 0;
pub const TC_ERR_INVALID_ARGUMENT: i32 = -1;
pub const TC_ERR_TOPOLOGY: i32 = -2;
pub const TC_ERR_NOT_FOUND: i32 = -3;
pub const TC_ERR_TRUNCATED: i32 = -4;
pub const TC_ERR_DEAD_PEER: i32 = -5;
pub const TC_ERR_TIMEOUT: i32 = -6;
pub const TC_ERR_NOT_INITIALIZED: i32 = -7;
pub const TC_ERR_TRANSPORT: i32 = -8;
pub const TC_ERR_INTERNAL: i32 = -99;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `msg` as this thread's last error and returns `code`.
pub(crate) fn fail(code: i32, msg: impl Into<String>) -> i32 {
    let msg = msg.into().replace('\0', " ");
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(msg).unwrap_or_default());
    code
}

/// Runs `f`, turning a panic into `TC_ERR_INTERNAL` (unwinding across an
/// `extern "C"` boundary would abort the caller).
#[inline(always)]
pub(crate) fn guard(f: impl FnOnce() -> i32) -> i32 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(code) => code,
        Err(_) => fail(TC_ERR_INTERNAL, "internal error (panic) in libtopocomm"),
    }
}

/// Message of the last failed call on this thread ("" if none). The pointer
/// stays valid until the next failing call on the same thread.
#[no_mangle]
pub extern "C" fn tc_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Version string of the library, e.g. "0.1.0".
#[no_mangle]
pub extern "C" fn tc_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
