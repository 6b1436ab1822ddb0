//! tc_segment_create + tc_init_fd through their extern "C" signatures: bad
//! arguments fail with a message, and two threads (each its own rank, the
//! communicator is per thread) exchange messages over one segment.

mod common;

use common::{last, two_rank_segment};
use std::ffi::CString;
use std::ptr::null;
use topocomm::*;

#[test]
fn bad_arguments_fail_with_a_message() {
    let mut fd = -1;
    assert_eq!(
        tc_segment_create(0, null(), null(), &mut fd),
        TC_ERR_INVALID_ARGUMENT
    );
    assert!(last().contains("nranks 0"), "{}", last());
    assert_eq!(
        tc_segment_create(2, null(), null(), std::ptr::null_mut()),
        TC_ERR_INVALID_ARGUMENT
    );
    let rules = CString::new("/nonexistent/rules.toml").unwrap();
    assert_eq!(
        tc_segment_create(1, null(), rules.as_ptr(), &mut fd),
        TC_ERR_TRANSPORT
    );
    assert!(last().contains("/nonexistent/rules.toml"), "{}", last());
    let pus = [0, 99_999];
    assert_ne!(tc_segment_create(2, pus.as_ptr(), null(), &mut fd), TC_OK);
    assert!(last().contains("99999"), "{}", last());
    assert_eq!(tc_init_fd(-1, 0), TC_ERR_INVALID_ARGUMENT);
    // A descriptor that is not open (already consumed by a join, say).
    assert_eq!(tc_init_fd(1 << 20, 0), TC_ERR_INVALID_ARGUMENT);
    assert!(last().contains("not an open descriptor"), "{}", last());
}

#[test]
fn two_threads_join_one_segment_and_exchange_messages() {
    let (fd, second) = two_rank_segment();
    let peer = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        let mut buf = vec![0u8; 100_000];
        let mut st = TcStatus {
            source: -1,
            tag: -1,
            count: 0,
        };
        assert_eq!(
            tc_recv(buf.as_mut_ptr().cast(), buf.len(), 0, 5, &mut st),
            TC_OK
        );
        assert_eq!((st.source, st.tag, st.count), (0, 5, 100_000));
        assert!(buf.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert_eq!(tc_send(b"pong".as_ptr().cast(), 4, 0, 6), TC_OK);
        assert_eq!(tc_finalize(), TC_OK);
    });
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    assert_eq!((tc_rank(), tc_size()), (0, 2));
    let mut other = -1;
    assert_eq!(tc_segment_create(1, null(), null(), &mut other), TC_OK);
    assert_eq!(tc_init_fd(other, 0), TC_ERR_INVALID_ARGUMENT);
    assert!(last().contains("twice"), "{}", last());
    let msg: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
    assert_eq!(
        tc_send(msg.as_ptr().cast(), msg.len(), 1, 5),
        TC_OK,
        "{}",
        last()
    );
    let mut b = [0u8; 4];
    assert_eq!(
        tc_recv(b.as_mut_ptr().cast(), 4, 1, 6, std::ptr::null_mut()),
        TC_OK
    );
    assert_eq!(&b, b"pong");
    peer.join().unwrap();
    assert_eq!(tc_finalize(), TC_OK);
}
