//! tc_send_now_x and tc_recv_now_x through their extern "C" signatures: a
//! message that fits in a cell goes out at once (1), a message already here
//! is received at once (1); what they do not take, and arguments the
//! general path would refuse, leave nothing behind (0), so a caller that
//! falls back to tc_send_x / tc_irecv_x keeps MPI order; no communicator is
//! an error. Two threads, each its own rank.

mod common;

use common::{last, two_rank_segment};
use std::ptr::{null, null_mut};
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

/// `tc_recv_now_x` from `src` with `tag` into `buf`: (result, status).
fn recv_now(buf: &mut [u8], src: i32, tag: i32, ctx: i32) -> (i32, TcStatus) {
    let mut st = common::empty();
    let rc = tc_recv_now_x(buf.as_mut_ptr().cast(), buf.len(), src, tag, ctx, &mut st);
    (rc, st)
}

#[test]
fn messages_already_here_are_received_at_once_in_mpi_order() {
    let (fd, second) = two_rank_segment();
    let sender = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        for (tag, msg) in [
            (1, &b"a"[..]),
            (2, b"bb"),
            (2, b"ccc"),
            (3, b"far too long"),
        ] {
            assert_eq!(
                tc_send_x(msg.as_ptr().cast(), msg.len(), 0, tag, CTX, 0),
                TC_OK
            );
        }
        assert_eq!(tc_send_x(b"!".as_ptr().cast(), 1, 0, 100, CTX, 0), TC_OK);
        assert_eq!(tc_finalize(), TC_OK);
    });
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    let mut buf = [0u8; 8];
    // The go-ahead's receive drains the earlier messages: unexpected now.
    let mut flag = 0;
    assert_eq!(
        tc_recv_x(
            buf.as_mut_ptr().cast(),
            8,
            1,
            100,
            CTX,
            0.0,
            &mut flag,
            null_mut()
        ),
        TC_OK
    );
    // Refused arguments and other contexts take nothing.
    assert_eq!(recv_now(&mut buf, 1, 2, 65535).0, 0);
    assert_eq!(recv_now(&mut buf, 1, 2, CTX + 1).0, 0);
    assert_eq!(recv_now(&mut buf, 5, 2, CTX).0, 0);
    assert_eq!(recv_now(&mut buf, 1, -7, CTX).0, 0);
    assert_eq!(tc_recv_now_x(null_mut(), 8, 1, 2, CTX, null_mut()), 0);
    // Tag 2 in order, then any tag gets the oldest left.
    let (rc, st) = recv_now(&mut buf, 1, 2, CTX);
    assert_eq!((rc, st.source, st.tag, st.count), (1, 1, 2, 2));
    assert_eq!(&buf[..2], b"bb");
    let (rc, st) = recv_now(&mut buf, -1, -1, CTX);
    assert_eq!((rc, st.tag, st.count), (1, 1, 1));
    assert_eq!(buf[0], b'a');
    let (rc, st) = recv_now(&mut buf, -1, 2, CTX);
    assert_eq!((rc, st.count), (1, 3));
    assert_eq!(&buf[..3], b"ccc");
    // Too long for the buffer: not taken; the posted receive reports it.
    assert_eq!(recv_now(&mut buf, 1, 3, CTX).0, 0);
    assert_eq!(
        tc_recv_x(
            buf.as_mut_ptr().cast(),
            8,
            1,
            3,
            CTX,
            0.0,
            &mut flag,
            null_mut()
        ),
        TC_ERR_TRUNCATED
    );
    // Nothing left.
    assert_eq!(recv_now(&mut buf, -1, -1, CTX).0, 0);
    sender.join().unwrap();
    assert_eq!(tc_finalize(), TC_OK);
}

#[test]
fn without_a_communicator_they_are_errors() {
    std::thread::spawn(|| {
        let rc = tc_send_now_x(b"x".as_ptr().cast(), 1, 0, 1, CTX);
        assert_eq!(rc, TC_ERR_NOT_INITIALIZED, "{}", last());
        let rc = recv_now(&mut [0u8; 4], 0, 1, CTX).0;
        assert_eq!(rc, TC_ERR_NOT_INITIALIZED, "{}", last());
    })
    .join()
    .unwrap();
}
