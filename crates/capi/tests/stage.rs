//! tc_stage through its extern "C" signature: every rank's staging area
//! has the same length, the areas do not overlap, what one rank writes in
//! its area the other reads through its own mapping after a barrier (and
//! the other way round, after the first rank's reads: the areas are
//! reused call after call), and bad arguments are refused with a message.
//! Two threads, each its own rank.

mod common;

use common::{last, run_two_ranks};
use std::ffi::c_void;
use std::ptr::null_mut;
use topocomm::*;

/// Rank `r`'s area in this thread's mapping and its length.
fn area(r: i32) -> (*mut u8, usize) {
    let (mut at, mut len) = (null_mut::<c_void>(), 0usize);
    assert_eq!(tc_stage(r, &mut at, &mut len), TC_OK, "{}", last());
    assert!(!at.is_null());
    (at.cast(), len)
}

/// Byte `k` of what rank `r` writes in round `i`.
fn byte(r: usize, i: usize, k: usize) -> u8 {
    (r * 97 + i * 31 + k * 7 + k / 4096) as u8
}

fn member(me: u32) {
    let me = me as usize;
    let (a0, len) = area(0);
    let (a1, len1) = area(1);
    assert_eq!(len, len1, "every area is as long");
    assert!(len >= 1 << 20, "an area of {len} bytes");
    assert!(
        (a0 as usize).abs_diff(a1 as usize) >= len,
        "the areas overlap"
    );
    let mine = if me == 0 { a0 } else { a1 };
    let theirs = if me == 0 { a1 } else { a0 };
    for i in 0..4 {
        // SAFETY: `len` bytes of this rank's own area, which no other
        // rank touches until the barrier below.
        let w = unsafe { std::slice::from_raw_parts_mut(mine, len) };
        for (k, b) in w.iter_mut().enumerate() {
            *b = byte(me, i, k);
        }
        assert_eq!(tc_barrier(), TC_OK, "{}", last());
        // SAFETY: the other rank's area, written before its barrier and
        // not written again before the next barrier.
        let r = unsafe { std::slice::from_raw_parts(theirs, len) };
        let bad = r
            .iter()
            .enumerate()
            .position(|(k, &b)| b != byte(1 - me, i, k));
        assert_eq!(bad, None, "round {i}: rank {me} read a wrong byte");
        assert_eq!(tc_barrier(), TC_OK, "{}", last());
    }
}

#[test]
fn each_rank_reads_what_the_other_wrote_in_its_area() {
    run_two_ranks(member);
}

#[test]
fn bad_stage_calls_are_refused_with_a_reason() {
    let (mut at, mut len) = (null_mut::<c_void>(), 0usize);
    assert_ne!(tc_stage(0, &mut at, &mut len), TC_OK, "no transport yet");
    let mut fd = -1;
    assert_eq!(
        tc_segment_create(1, std::ptr::null(), std::ptr::null(), &mut fd),
        TC_OK,
        "{}",
        last()
    );
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    assert_ne!(tc_stage(1, &mut at, &mut len), TC_OK);
    assert!(last().contains("out of range"), "{}", last());
    assert_ne!(tc_stage(-1, &mut at, &mut len), TC_OK);
    assert!(last().contains("negative"), "{}", last());
    assert_ne!(tc_stage(0, null_mut(), &mut len), TC_OK);
    assert!(last().contains("NULL"), "{}", last());
    assert_ne!(tc_stage(0, &mut at, null_mut()), TC_OK);
    assert_eq!(tc_stage(0, &mut at, &mut len), TC_OK, "{}", last());
    assert!(!at.is_null() && len > 0);
    assert_eq!(tc_finalize(), TC_OK);
}
