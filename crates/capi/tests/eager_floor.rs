//! tc_eager_floor_x through its extern "C" signature: every rank reads the
//! same floor from the shared segment, the crowded-node rule (two ranks
//! bound to one PU) raises it to the slot size, and a NULL pointer or a
//! missing communicator are errors.

mod common;

use common::{last, two_rank_segment_with};
use std::ptr::null_mut;
use topocomm::*;

/// A two-rank segment with ranks bound to `pus` and rules with an 8 KiB
/// eager limit and 32 KiB slots; both ranks' floors.
fn floors(pus: [i32; 2]) -> [u64; 2] {
    let dir = std::env::temp_dir().join(format!("tc-eager-floor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join(format!("rules-{}-{}.toml", pus[0], pus[1]));
    std::fs::write(&rules, "[default]\neager_max = 8192\nfragment = 32768\n").unwrap();
    let (fd, second) = two_rank_segment_with(pus, &rules);
    let other = std::thread::spawn(move || {
        assert_eq!(tc_init_fd(second, 1), TC_OK, "{}", last());
        let mut f = 0u64;
        // SAFETY: a valid pointer to one u64.
        assert_eq!(unsafe { tc_eager_floor_x(&mut f) }, TC_OK, "{}", last());
        assert_eq!(tc_finalize(), TC_OK);
        f
    });
    assert_eq!(tc_init_fd(fd, 0), TC_OK, "{}", last());
    let mut f = 0u64;
    // SAFETY: a valid pointer to one u64.
    assert_eq!(unsafe { tc_eager_floor_x(&mut f) }, TC_OK, "{}", last());
    // SAFETY: NULL is what is checked.
    let rc = unsafe { tc_eager_floor_x(null_mut()) };
    assert_eq!(rc, TC_ERR_INVALID_ARGUMENT, "{}", last());
    let g = other.join().unwrap();
    assert_eq!(tc_finalize(), TC_OK);
    let _ = std::fs::remove_file(&rules);
    [f, g]
}

#[test]
fn every_rank_reads_the_same_floor_and_a_crowded_node_raises_it_to_the_slot() {
    // Unbound ranks of the default class: its eager limit, unless this
    // machine has a single PU (then two ranks crowd it).
    let single = std::thread::available_parallelism().map_or(1, |n| n.get()) < 2;
    let spread = floors([-1, -1]);
    assert_eq!(spread[0], spread[1]);
    if !single {
        assert_eq!(spread[0], 8192);
    }
    // Both bound to PU 0: crowded whatever the machine.
    assert_eq!(floors([0, 0]), [32768, 32768]);
}

#[test]
fn without_a_communicator_it_is_an_error() {
    std::thread::spawn(|| {
        let mut f = 0u64;
        // SAFETY: a valid pointer to one u64.
        let rc = unsafe { tc_eager_floor_x(&mut f) };
        assert_eq!(rc, TC_ERR_NOT_INITIALIZED, "{}", last());
    })
    .join()
    .unwrap();
}
