//! The process-wide communicator's overlap check (`tc_init_fd_shared`) and
//! the promise that skips it (`tc_set_serialized`): a call made while
//! another thread's call is still inside the transport fails with
//! TC_ERR_INVALID_ARGUMENT and a message naming the overlap; under the
//! promise, calls handed between threads by joins run; once it is
//! withdrawn, the check is back. Rank 0 is the process-wide communicator,
//! rank 1 a thread with its own.

mod common;

use common::{last, two_rank_segment};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use topocomm::*;

/// Whether a call failed because another thread's call was inside.
fn overlapped(rc: i32, msg: &str) -> bool {
    rc == TC_ERR_INVALID_ARGUMENT && msg.contains("overlapping calls")
}

/// Blocks in `tc_recv` on a spawned thread until rank 1 sends tag `tag`,
/// while this thread calls `tc_rank` until a call meets the receive inside
/// the transport (no sleep to guess when it is there: a call that runs
/// before the receive started succeeds, and the receive that meets one of
/// those calls is tried again). Returns that call's code and message.
fn call_during_a_blocked_recv(go: &mpsc::Sender<i32>, tag: i32) -> (i32, String) {
    let receiver = std::thread::spawn(move || {
        let mut b = [0u8; 4];
        let mut st = common::empty();
        loop {
            let rc = tc_recv(b.as_mut_ptr().cast(), b.len(), 1, tag, &mut st);
            if !overlapped(rc, &last()) {
                return (rc, u32::from_ne_bytes(b));
            }
        }
    });
    let end = Instant::now() + Duration::from_secs(30);
    let (rc, msg) = loop {
        let rc = tc_rank();
        let msg = last();
        if rc != 0 || Instant::now() > end {
            break (rc, msg);
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    go.send(tag).unwrap();
    let (recv_rc, got) = receiver.join().unwrap();
    assert_eq!(recv_rc, TC_OK, "the blocked receive");
    assert_eq!(got, tag as u32);
    (rc, msg)
}

#[test]
fn overlapping_calls_are_refused_unless_the_caller_promised_serialized_calls() {
    let (fd, second) = two_rank_segment();
    let (go, sends) = mpsc::channel::<i32>();
    let peer = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        // Sends each tag it is told to, then the stream of the promise
        // part, then waits for the end.
        while let Ok(tag) = sends.recv() {
            if tag < 0 {
                break;
            }
            let m = (tag as u32).to_ne_bytes();
            assert_eq!(
                tc_send(m.as_ptr().cast(), m.len(), 0, tag),
                TC_OK,
                "{}",
                last()
            );
        }
        assert_eq!(tc_barrier(), TC_OK, "{}", last());
        assert_eq!(tc_finalize(), TC_OK, "{}", last());
    });
    assert_eq!(tc_init_fd_shared(fd, 0), TC_OK, "{}", last());

    // Checked: the call made during another thread's receive is refused.
    let (rc, msg) = call_during_a_blocked_recv(&go, 1);
    assert!(overlapped(rc, &msg), "{rc}: {msg}");

    // Promised: calls from several threads, one at a time (each thread
    // joined before the next starts), all run.
    // SAFETY: the calls below never overlap; joins order them.
    assert_eq!(unsafe { tc_set_serialized(1) }, 0);
    for tag in 2..6 {
        go.send(tag).unwrap();
        let t = std::thread::spawn(move || {
            let mut b = [0u8; 4];
            let mut st = common::empty();
            let rc = tc_recv(b.as_mut_ptr().cast(), b.len(), 1, tag, &mut st);
            (rc, u32::from_ne_bytes(b), last())
        });
        let (rc, got, msg) = t.join().unwrap();
        assert_eq!(rc, TC_OK, "tag {tag}: {msg}");
        assert_eq!(got, tag as u32);
        assert_eq!(tc_rank(), 0, "{}", last());
    }

    // Withdrawn: the check is back.
    // SAFETY: withdrawing the promise never makes a call unsafe.
    assert_eq!(unsafe { tc_set_serialized(0) }, 0);
    let (rc, msg) = call_during_a_blocked_recv(&go, 6);
    assert!(overlapped(rc, &msg), "{rc}: {msg}");

    go.send(-1).unwrap();
    assert_eq!(tc_barrier(), TC_OK, "{}", last());
    assert_eq!(tc_finalize(), TC_OK, "{}", last());
    peer.join().unwrap();
}
