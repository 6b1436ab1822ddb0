//! Helpers shared by the C ABI tests that run two ranks as two threads.

use std::ffi::CStr;
use std::os::fd::{BorrowedFd, IntoRawFd};
use std::ptr::null;
use topocomm::*;

/// The message of the last failed call on this thread.
pub fn last() -> String {
    // SAFETY: tc_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(tc_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// A segment for two ranks: its descriptor for rank 0 and a second one for
/// rank 1 (each `tc_init_fd` consumes the descriptor it is given).
#[allow(dead_code)]
pub fn two_rank_segment() -> (i32, i32) {
    let mut fd = -1;
    assert_eq!(
        tc_segment_create(2, null(), null(), &mut fd),
        TC_OK,
        "{}",
        last()
    );
    (fd, second_descriptor(fd))
}

/// Runs `member(0)` on this thread and `member(1)` on another, each its
/// own rank of a fresh two-rank segment, and finalizes both.
#[allow(dead_code)]
pub fn run_two_ranks(member: fn(u32)) {
    let (fd, second) = two_rank_segment();
    let other = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        member(1);
        assert_eq!(tc_finalize(), TC_OK);
    });
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    member(0);
    other.join().unwrap();
    assert_eq!(tc_finalize(), TC_OK);
}

/// [`two_rank_segment`] with ranks bound to `pus` (-1: unbound) and the
/// rules file `rules`.
#[allow(dead_code)]
pub fn two_rank_segment_with(pus: [i32; 2], rules: &std::path::Path) -> (i32, i32) {
    let path = std::ffi::CString::new(rules.to_str().unwrap()).unwrap();
    let mut fd = -1;
    let rc = tc_segment_create(2, pus.as_ptr(), path.as_ptr(), &mut fd);
    assert_eq!(rc, TC_OK, "{}", last());
    (fd, second_descriptor(fd))
}

fn second_descriptor(fd: i32) -> i32 {
    // SAFETY: fd is the open descriptor tc_segment_create returned.
    unsafe { BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .unwrap()
        .into_raw_fd()
}

/// `TC_REQUEST_NULL` of topocomm.h.
#[allow(dead_code)]
pub const TC_REQUEST_NULL: u64 = 0;

/// A status no call has written yet.
#[allow(dead_code)]
pub fn empty() -> TcStatus {
    TcStatus {
        source: -1,
        tag: -1,
        count: 0,
    }
}
