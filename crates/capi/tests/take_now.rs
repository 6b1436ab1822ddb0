//! tc_take_now_x through its extern "C" signature: a receiver that has not
//! posted its receives takes a stream of small messages one by one as they
//! arrive (1), is told to try again while the next one is not there (0),
//! and to post instead (-1) for what it must not take: a rendezvous, a
//! message of another tag, arguments posting rejects. Nothing it declines
//! is consumed. Two threads, each its own rank.

mod common;

use common::{last, two_rank_segment};
use std::ptr::null_mut;
use std::time::{Duration, Instant};
use topocomm::*;

const CTX: i32 = 5;
const MSGS: u32 = 500;

/// tc_take_now_x from rank 1 into `buf`: (flag, status).
fn take(buf: &mut [u8], tag: i32, ctx: i32) -> (i32, TcStatus) {
    let mut flag = 9;
    let mut st = common::empty();
    let rc = tc_take_now_x(
        buf.as_mut_ptr().cast(),
        buf.len(),
        1,
        tag,
        ctx,
        &mut flag,
        &mut st,
    );
    assert_eq!(rc, TC_OK, "{}", last());
    (flag, st)
}

/// Takes the next message with `tag`, trying again while it is not there
/// (for at most 30 s: a failing test must not hang).
fn take_next(buf: &mut [u8], tag: i32) -> TcStatus {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match take(buf, tag, CTX) {
            (1, st) => return st,
            (0, _) => assert!(Instant::now() < end, "no message with tag {tag} in 30 s"),
            (f, _) => panic!("flag {f} for tag {tag}: expected the message or 'not yet'"),
        }
    }
}

#[test]
fn a_stream_is_taken_as_it_arrives_and_what_must_be_posted_is_left() {
    let (fd, second) = two_rank_segment();
    let sender = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        for i in 0..MSGS {
            let m = i.to_ne_bytes();
            assert_eq!(
                tc_send_x(m.as_ptr().cast(), m.len(), 0, 3, CTX, 0),
                TC_OK,
                "{}",
                last()
            );
        }
        assert_eq!(tc_send_x(b"other".as_ptr().cast(), 5, 0, 6, CTX, 0), TC_OK);
        let big = vec![7u8; 1 << 20];
        assert_eq!(
            tc_send_x(big.as_ptr().cast(), big.len(), 0, 4, CTX, 0),
            TC_OK
        );
        assert_eq!(tc_finalize(), TC_OK);
    });
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    let mut buf = vec![0u8; 1 << 20];
    for i in 0..MSGS {
        let st = take_next(&mut buf[..8], 3);
        assert_eq!((st.source, st.tag, st.count), (1, 3, 4), "message {i}");
        assert_eq!(buf[..4], i.to_ne_bytes(), "message {i}: MPI order");
    }
    // Next is tag 6: a receive for tag 4 must be posted (it would match
    // after "other" stays unexpected); any tag, a bad context: post.
    let end = Instant::now() + Duration::from_secs(30);
    while take(&mut buf, 4, CTX).0 == 0 {
        assert!(Instant::now() < end, "the tag-6 message never came");
    }
    assert_eq!(take(&mut buf, 4, CTX).0, -1);
    assert_eq!(take(&mut buf, -1, CTX).0, -1);
    assert_eq!(take(&mut buf, 6, 70_000).0, -1);
    assert_eq!(take(&mut buf, 6, 65_535).0, -1);
    // Declined messages were not consumed: "other", then the rendezvous.
    assert_eq!(take_next(&mut buf[..8], 6).count, 5);
    assert_eq!(&buf[..5], b"other");
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match take(&mut buf, 4, CTX).0 {
            0 => assert!(Instant::now() < end, "the rendezvous never came"),
            -1 => break,
            f => panic!("a 1 MiB rendezvous taken without posting (flag {f})"),
        }
    }
    let (mut flag, mut st) = (0, common::empty());
    let rc = tc_recv_x(
        buf.as_mut_ptr().cast(),
        buf.len(),
        1,
        4,
        CTX,
        0.0,
        &mut flag,
        &mut st,
    );
    assert_eq!((rc, flag, st.count), (TC_OK, 1, 1 << 20), "{}", last());
    assert!(buf.iter().all(|&b| b == 7));
    sender.join().unwrap();
    // A NULL flag is an error.
    let rc = tc_take_now_x(buf.as_mut_ptr().cast(), 8, 1, 3, CTX, null_mut(), &mut st);
    assert_eq!(rc, TC_ERR_INVALID_ARGUMENT, "{}", last());
    assert_eq!(tc_finalize(), TC_OK);
}

#[test]
fn without_a_communicator_it_is_an_error() {
    std::thread::spawn(|| {
        let mut b = [0u8; 8];
        let (mut flag, mut st) = (0, common::empty());
        let rc = tc_take_now_x(b.as_mut_ptr().cast(), 8, 0, 1, CTX, &mut flag, &mut st);
        assert_eq!(rc, TC_ERR_NOT_INITIALIZED, "{}", last());
    })
    .join()
    .unwrap();
}
