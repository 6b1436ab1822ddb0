//! tc_send_now_x through its extern "C" signature: a message that can go
//! without a rendezvous goes out at once (1); what it does not take, and
//! arguments the general path would refuse, leave nothing behind (0), so a
//! caller that falls back to tc_send_x keeps MPI order; no communicator is
//! an error. Two threads, each its own rank.

mod common;

use common::{last, two_rank_segment};
use std::ptr::null;
use topocomm::*;

const CTX: i32 = 4;
const MSGS: u32 = 300;

/// Receives one message from rank 1 with any tag in `CTX`; (tag, bytes).
fn recv_any(buf: &mut [u8]) -> (i32, Vec<u8>) {
    let mut flag = 0;
    let mut st = common::empty();
    assert_eq!(
        tc_recv_x(
            buf.as_mut_ptr().cast(),
            buf.len(),
            1,
            -1,
            CTX,
            0.0,
            &mut flag,
            &mut st
        ),
        TC_OK,
        "{}",
        last()
    );
    assert_eq!((flag, st.source), (1, 1));
    (st.tag, buf[..st.count].to_vec())
}

#[test]
fn small_messages_go_at_once_and_refused_ones_leave_nothing_behind() {
    let (fd, second) = two_rank_segment();
    let sender = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        let big = vec![7u8; 1 << 20];
        let send_now = |b: &[u8], dst: i32, tag: i32, ctx: i32| {
            tc_send_now_x(b.as_ptr().cast(), b.len(), dst, tag, ctx)
        };
        // Not taken, and nothing sent: a rendezvous size, a rank out of
        // range, a negative tag, the collectives' or no context, no buffer.
        assert_eq!(send_now(&big, 0, 1, CTX), 0);
        assert_eq!(send_now(b"x", 2, 1, CTX), 0);
        assert_eq!(send_now(b"x", -1, 1, CTX), 0);
        assert_eq!(send_now(b"x", 0, -5, CTX), 0);
        assert_eq!(send_now(b"x", 0, 1, 65535), 0);
        assert_eq!(send_now(b"x", 0, 1, 70000), 0);
        assert_eq!(tc_send_now_x(null(), 8, 0, 1, CTX), 0);
        // Taken: the first messages the receiver sees, inline and eager.
        assert_eq!(send_now(b"first", 0, 2, CTX), 1);
        assert_eq!(send_now(&[5u8; 1000], 0, 2, CTX), 1);
        // A stream that outruns the ring: what is not taken at once goes
        // through tc_send_x, and the receiver sees every message in order.
        let mut taken = 0;
        for i in 0..MSGS {
            let m = i.to_ne_bytes();
            if send_now(&m, 0, 3, CTX) == 1 {
                taken += 1;
            } else {
                assert_eq!(
                    tc_send_x(m.as_ptr().cast(), m.len(), 0, 3, CTX, 0),
                    TC_OK,
                    "{}",
                    last()
                );
            }
        }
        assert_eq!(
            tc_send_x(big.as_ptr().cast(), big.len(), 0, 4, CTX, 0),
            TC_OK
        );
        assert_eq!(tc_finalize(), TC_OK);
        taken
    });
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    let mut buf = vec![0u8; 1 << 20];
    assert_eq!(recv_any(&mut buf), (2, b"first".to_vec()));
    assert_eq!(recv_any(&mut buf), (2, vec![5u8; 1000]));
    for i in 0..MSGS {
        assert_eq!(
            recv_any(&mut buf),
            (3, i.to_ne_bytes().to_vec()),
            "message {i}"
        );
    }
    assert_eq!(recv_any(&mut buf), (4, vec![7u8; 1 << 20]));
    let taken = sender.join().unwrap();
    assert!(taken >= 1, "no message of the stream went at once");
    assert_eq!(tc_finalize(), TC_OK);
}

#[test]
fn without_a_communicator_it_is_an_error() {
    std::thread::spawn(|| {
        let rc = tc_send_now_x(b"x".as_ptr().cast(), 1, 0, 1, CTX);
        assert_eq!(rc, TC_ERR_NOT_INITIALIZED, "{}", last());
    })
    .join()
    .unwrap();
}
