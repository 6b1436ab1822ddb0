//! tc_irecv_now_x through its extern "C" signature: a message already in
//! the channel completes the receive at posting (flag 1, status, no
//! request); one not there yet, or one that does not fit, leaves a pending
//! request whose wait says what happened; bad arguments are refused with a
//! message. Two threads, each its own rank.

mod common;

use common::{empty, last, two_rank_segment, TC_REQUEST_NULL};
use std::ptr::null_mut;
use topocomm::*;

const CTX: i32 = 9;

/// `tc_irecv_now_x` from rank 1 in `CTX` into `buf`.
fn now(buf: &mut [u8], tag: i32, req: *mut u64, flag: *mut i32, st: &mut TcStatus) -> i32 {
    tc_irecv_now_x(
        buf.as_mut_ptr().cast(),
        buf.len(),
        1,
        tag,
        CTX,
        req,
        flag,
        st,
    )
}

/// Waits (no budget) for the one-byte go-ahead with `tag` from `src`.
fn go_from(src: i32, tag: i32) {
    let mut b = [0u8; 1];
    assert_eq!(
        tc_recv_x(
            b.as_mut_ptr().cast(),
            1,
            src,
            tag,
            CTX,
            0.0,
            &mut 0,
            null_mut()
        ),
        TC_OK,
        "{}",
        last()
    );
}

#[test]
fn a_message_already_there_completes_the_receive_at_posting() {
    let (fd, second) = two_rank_segment();
    let sender = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        for (tag, msg) in [(1, &b"ready"[..]), (3, b"far too long")] {
            assert_eq!(
                tc_send_x(msg.as_ptr().cast(), msg.len(), 0, tag, CTX, 0),
                TC_OK
            );
        }
        assert_eq!(tc_send_x(b"!".as_ptr().cast(), 1, 0, 100, CTX, 0), TC_OK);
        // The late message goes only once the receiver has posted for it.
        go_from(0, 101);
        assert_eq!(tc_send_x(b"late".as_ptr().cast(), 4, 0, 2, CTX, 0), TC_OK);
        assert_eq!(tc_finalize(), TC_OK);
    });
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    // The sender's first two messages are in the channel once this arrives.
    go_from(1, 100);

    let mut buf = [0u8; 8];
    let (mut req, mut flag, mut st) = (12345u64, -1, empty());
    assert_eq!(
        now(&mut buf, 1, &mut req, &mut flag, &mut st),
        TC_OK,
        "{}",
        last()
    );
    assert_eq!((flag, req), (1, TC_REQUEST_NULL), "taken at posting");
    assert_eq!((st.source, st.tag, st.count), (1, 1, 5));
    assert_eq!(&buf[..5], b"ready");

    // Too long for the buffer: not taken at posting; the wait reports it.
    let mut small = [0u8; 4];
    assert_eq!(now(&mut small, 3, &mut req, &mut flag, &mut st), TC_OK);
    assert_eq!(flag, 0);
    assert_ne!(req, TC_REQUEST_NULL);
    let mut done = 0;
    assert_eq!(
        tc_wait_for(&mut req, 0.0, &mut done, &mut st),
        TC_ERR_TRUNCATED
    );
    assert_eq!((st.tag, st.count), (3, 12), "the status gives its length");

    // Not there yet: pending until it comes.
    assert_eq!(now(&mut buf, 2, &mut req, &mut flag, &mut st), TC_OK);
    assert_eq!(flag, 0);
    assert_ne!(req, TC_REQUEST_NULL);
    assert_eq!(tc_send_x(b"g".as_ptr().cast(), 1, 1, 101, CTX, 0), TC_OK);
    assert_eq!(tc_wait_for(&mut req, 0.0, &mut done, &mut st), TC_OK);
    assert_eq!((done, req, st.tag, st.count), (1, TC_REQUEST_NULL, 2, 4));
    assert_eq!(&buf[..4], b"late");

    // Bad arguments: refused with a message, nothing posted.
    assert_eq!(
        now(&mut buf, 4, null_mut(), &mut flag, &mut st),
        TC_ERR_INVALID_ARGUMENT
    );
    assert!(last().contains("NULL"), "{}", last());
    assert_eq!(
        now(&mut buf, 4, &mut req, null_mut(), &mut st),
        TC_ERR_INVALID_ARGUMENT
    );
    assert!(last().contains("flag"), "{}", last());
    sender.join().unwrap();
    assert_eq!(tc_finalize(), TC_OK);
}
