//! tc_pair_fragment_x through its extern "C" signature: both ranks read
//! the pair's fragment from the shared segment (the rules' value), and bad
//! ranks, a NULL pointer or a missing communicator are errors.

mod common;

use common::{last, two_rank_segment_with};
use std::ptr::null_mut;
use topocomm::*;

#[test]
fn both_ranks_read_the_rules_fragment_and_bad_arguments_are_errors() {
    let dir = std::env::temp_dir().join(format!("tc-pair-fragment-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.toml");
    std::fs::write(&rules, "[default]\neager_max = 8192\nfragment = 49152\n").unwrap();
    let (fd, second) = two_rank_segment_with([-1, -1], &rules);
    let other = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        let mut f = 0u64;
        // SAFETY: a valid pointer to one u64.
        let rc = unsafe { tc_pair_fragment_x(1, 0, &mut f) };
        assert_eq!(rc, TC_OK, "{}", last());
        assert_eq!(tc_finalize(), TC_OK);
        f
    });
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    let mut f = 0u64;
    // SAFETY: a valid pointer to one u64.
    let rc = unsafe { tc_pair_fragment_x(0, 1, &mut f) };
    assert_eq!(rc, TC_OK, "{}", last());
    assert_eq!(f, 49152);
    for (a, b) in [(0, 0), (0, 2), (-1, 1)] {
        let mut g = 7u64;
        // SAFETY: a valid pointer to one u64.
        let rc = unsafe { tc_pair_fragment_x(a, b, &mut g) };
        assert_eq!(rc, TC_ERR_INVALID_ARGUMENT, "ranks {a},{b}");
        assert!(
            last().contains("expected two different ranks in 0..2"),
            "{}",
            last()
        );
        assert_eq!(g, 7, "untouched on error");
    }
    // SAFETY: NULL is what is checked.
    let rc = unsafe { tc_pair_fragment_x(0, 1, null_mut()) };
    assert_eq!(rc, TC_ERR_INVALID_ARGUMENT, "{}", last());
    assert_eq!(other.join().unwrap(), 49152);
    assert_eq!(tc_finalize(), TC_OK);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_communicator_it_is_an_error() {
    std::thread::spawn(|| {
        let mut f = 0u64;
        // SAFETY: a valid pointer to one u64.
        let rc = unsafe { tc_pair_fragment_x(0, 1, &mut f) };
        assert_eq!(rc, TC_ERR_NOT_INITIALIZED, "{}", last());
    })
    .join()
    .unwrap();
}
