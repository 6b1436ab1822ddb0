//! tc_wait_all_x through its extern "C" signature: a window of receives
//! completed in one call, with per-request statuses and outcomes
//! (truncation included), a budget that leaves a late one pending, and bad
//! arguments refused with a message. Two threads, each its own rank.

mod common;

use common::{empty, last, two_rank_segment, TC_REQUEST_NULL};
use std::ptr::null_mut;
use topocomm::*;

const CTX: i32 = 7;

#[test]
fn a_window_completes_in_one_call_and_a_late_receive_stays_pending() {
    let (fd, second) = two_rank_segment();
    let sender = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        for (tag, msg) in [(1, &b"first"[..]), (2, b"second!!"), (3, b"truncated")] {
            assert_eq!(
                tc_send_x(msg.as_ptr().cast(), msg.len(), 0, tag, CTX, 0),
                TC_OK
            );
        }
        // The late message goes only once the receiver says so.
        let mut go = [0u8; 2];
        assert_eq!(
            tc_recv_x(
                go.as_mut_ptr().cast(),
                2,
                0,
                10,
                CTX,
                0.0,
                &mut 0,
                null_mut()
            ),
            TC_OK
        );
        assert_eq!(tc_send_x(b"late".as_ptr().cast(), 4, 0, 9, CTX, 0), TC_OK);
        assert_eq!(tc_finalize(), TC_OK);
    });
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());

    let mut bufs = [[0u8; 8]; 4];
    let caps = [8, 8, 2, 8];
    let tags = [1, 2, 3, 9];
    let mut reqs = [TC_REQUEST_NULL; 5]; // the last stays NULL: skipped
    for i in 0..4 {
        assert_eq!(
            tc_irecv_x(
                bufs[i].as_mut_ptr().cast(),
                caps[i],
                1,
                tags[i],
                CTX,
                &mut reqs[i]
            ),
            TC_OK
        );
    }
    let mut sts = [0; 5].map(|_| empty());
    let mut rcs = [12345; 5];
    let mut left = 99;
    // Each request gets at most 0.2 s: the late one runs out and stays.
    assert_eq!(
        tc_wait_all_x(
            5,
            reqs.as_mut_ptr(),
            sts.as_mut_ptr(),
            rcs.as_mut_ptr(),
            0.2,
            &mut left
        ),
        TC_OK,
        "{}",
        last()
    );
    assert_eq!(left, 1);
    assert_eq!(&reqs[..3], &[TC_REQUEST_NULL; 3]);
    assert_ne!(
        reqs[3], TC_REQUEST_NULL,
        "the late receive keeps its handle"
    );
    assert_eq!(&rcs[..3], &[TC_OK, TC_OK, TC_ERR_TRUNCATED]);
    assert_eq!(rcs[3], 12345, "a pending request's outcome is not written");
    assert_eq!(&bufs[0][..5], b"first");
    assert_eq!(&bufs[1], b"second!!");
    let got: Vec<_> = sts[..3]
        .iter()
        .map(|s| (s.source, s.tag, s.count))
        .collect();
    // A truncated message reports its own length, as MPI's status does.
    assert_eq!(got, [(1, 1, 5), (1, 2, 8), (1, 3, 9)]);

    assert_eq!(tc_send_x(b"go".as_ptr().cast(), 2, 1, 10, CTX, 0), TC_OK);
    // No budget: waits for the late one; the NULL entries are skipped.
    assert_eq!(
        tc_wait_all_x(
            5,
            reqs.as_mut_ptr(),
            sts.as_mut_ptr(),
            rcs.as_mut_ptr(),
            0.0,
            &mut left
        ),
        TC_OK
    );
    assert_eq!((left, reqs[3], rcs[3]), (0, TC_REQUEST_NULL, TC_OK));
    assert_eq!(
        (sts[3].tag, sts[3].count, &bufs[3][..4]),
        (9, 4, &b"late"[..])
    );

    // Bad arguments: refused with a message, nothing touched.
    assert_eq!(
        tc_wait_all_x(
            1,
            null_mut(),
            sts.as_mut_ptr(),
            rcs.as_mut_ptr(),
            0.0,
            &mut left
        ),
        TC_ERR_INVALID_ARGUMENT
    );
    assert!(last().contains("NULL"), "{}", last());
    assert_eq!(
        tc_wait_all_x(0, null_mut(), null_mut(), null_mut(), 0.0, &mut left),
        TC_OK,
        "an empty window needs no arrays"
    );
    assert_eq!(left, 0);
    sender.join().unwrap();
    assert_eq!(tc_finalize(), TC_OK);
}
