//! tc_pair_exchange through its extern "C" signature: two members trade
//! payloads of 0 to TC_PAIR_DATA bytes on a lane's pair line, call after
//! call, each getting exactly the other's bytes of that call (a slot
//! reused too early would show the payload of two calls later); rooted
//! lane collectives in between make the next pair call wait for the
//! other's done word; a call with a budget returns "not yet" while the
//! other member is away and completes once it comes; bad arguments are
//! refused with a message. Two threads, each its own rank.

mod common;

use common::{last, run_two_ranks};
use std::ffi::c_int;
use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};
use topocomm::*;

const LANE: c_int = 7;
const CALLS: u32 = 3000;

/// Rank `r`'s payload of call `i`: `len` bytes that differ by rank and call.
fn payload(r: u32, i: u32, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|k| (r * 131 + i * 7 + k * 3) as u8)
        .collect()
}

fn length(i: u32) -> usize {
    (i % 13) as usize
}

/// One pair exchange with no budget: the other member's bytes.
fn exchange(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; data.len()];
    let mut flag = 9;
    let rc = tc_pair_exchange(
        LANE,
        data.as_ptr().cast(),
        data.len(),
        out.as_mut_ptr().cast(),
        0.0,
        &mut flag,
    );
    assert_eq!((rc, flag), (TC_OK, 1), "{}", last());
    out
}

/// A broadcast on the lane's flat words from rank 0 (rooted: rank 0
/// returns without waiting for rank 1, so its next pair call must wait
/// for rank 1's done word before reusing a slot).
fn lane_bcast(me: u32) {
    let mut flag = 0;
    let byte = [42u8];
    let mut blocks = [null::<std::ffi::c_void>(); 1];
    let (data, reads) = if me == 0 {
        (byte.as_ptr().cast(), 0)
    } else {
        (null(), 1)
    };
    let rc = tc_lane_exchange(LANE, data, 1, reads, 0, 0.0, &mut flag, blocks.as_mut_ptr());
    assert_eq!((rc, flag), (TC_OK, 1), "{}", last());
    if me == 1 {
        // SAFETY: the root's one published byte (complete above).
        assert_eq!(unsafe { *blocks[0].cast::<u8>() }, 42);
        assert_eq!(tc_lane_done(LANE), TC_OK);
    }
}

fn member(me: u32) {
    let members = [0, 1];
    assert_eq!(
        tc_lane_start(LANE, 0, members.as_ptr(), 2),
        TC_OK,
        "{}",
        last()
    );
    for i in 0..CALLS {
        if i % 11 == 5 {
            lane_bcast(me);
        }
        let got = exchange(&payload(me, i, length(i)));
        assert_eq!(got, payload(1 - me, i, length(i)), "call {i} on rank {me}");
    }
    // Sliced: rank 1 comes 50 ms late; rank 0's 1 ms slices say "not yet"
    // meanwhile and complete once it is there, publishing only once.
    let mine = payload(me, CALLS, 8);
    if me == 1 {
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(exchange(&mine), payload(0, CALLS, 8));
    } else {
        let (mut out, mut flag, mut slices) = (vec![0u8; 8], 0, 0);
        let end = Instant::now() + Duration::from_secs(30);
        while flag == 0 {
            let rc = tc_pair_exchange(
                LANE,
                mine.as_ptr().cast(),
                8,
                out.as_mut_ptr().cast(),
                0.001,
                &mut flag,
            );
            assert_eq!(rc, TC_OK, "{}", last());
            slices += 1;
            assert!(Instant::now() < end, "the late member never came");
        }
        assert!(slices > 1, "completed before the late member came");
        assert_eq!(out, payload(1, CALLS, 8));
    }
    // One more: both in step after the sliced call.
    assert_eq!(exchange(&payload(me, 1, 4)), payload(1 - me, 1, 4));
    assert_eq!(tc_lane_quiesce(LANE), TC_OK, "{}", last());
}

#[test]
fn two_members_get_each_others_bytes_call_after_call() {
    run_two_ranks(member);
}

#[test]
fn bad_pair_calls_are_refused_with_a_reason() {
    let mut fd = -1;
    assert_eq!(
        tc_segment_create(1, null(), null(), &mut fd),
        TC_OK,
        "{}",
        last()
    );
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    let (mut out, mut flag) = ([0u8; 16], 0);
    let data = [1u8; 16];
    let call = |lane: c_int, len: usize, out: *mut u8, flag: *mut c_int| {
        tc_pair_exchange(lane, data.as_ptr().cast(), len, out.cast(), 0.0, flag)
    };
    assert_ne!(call(LANE, 13, out.as_mut_ptr(), &mut flag), TC_OK);
    assert!(last().contains("at most 12 bytes"), "{}", last());
    assert_ne!(call(LANE, 4, null_mut(), &mut flag), TC_OK);
    assert!(last().contains("NULL"), "{}", last());
    assert_ne!(call(LANE, 4, out.as_mut_ptr(), null_mut()), TC_OK);
    assert_ne!(call(LANE, 4, out.as_mut_ptr(), &mut flag), TC_OK);
    assert!(last().contains("serves no"), "{}", last());
    assert_ne!(call(-1, 4, out.as_mut_ptr(), &mut flag), TC_OK);
    assert!(last().contains("negative"), "{}", last());
    // A lane of one member is no pair.
    let me = [0];
    assert_eq!(tc_lane_start(LANE, 0, me.as_ptr(), 1), TC_OK, "{}", last());
    assert_ne!(call(LANE, 4, out.as_mut_ptr(), &mut flag), TC_OK);
    assert!(last().contains("takes 2"), "{}", last());
    // The lane is still usable after the refusal.
    let mut f2 = 0;
    assert_eq!(
        tc_lane_exchange(LANE, null(), 0, 0, -1, 0.0, &mut f2, null_mut()),
        TC_OK,
        "{}",
        last()
    );
    assert_eq!(f2, 1);
    assert_eq!(tc_finalize(), TC_OK);
}
