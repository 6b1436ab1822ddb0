//! The transport's collective lanes for the MPI accelerator's small
//! collectives (docs/collectives.md, "Lanes"): flags and data blocks in the
//! segment, one lane per communicator context below `TC_LANES`.

use crate::error::*;
use crate::transport::{rank_arg, with};
use crate::transport_x::budget_arg;
use std::ffi::{c_int, c_void};
use topocomm_transport::lanes::Awaited;
use topocomm_transport::Error;

/// `only` of [`tc_lane_exchange`]: every member's arrival, in a collective
/// where every member waits for every member's (include/topocomm.h).
pub const TC_LANE_ALL_BY_ALL: c_int = -2;

fn lane_arg(lane: c_int) -> Result<usize, Error> {
    usize::try_from(lane).map_err(|_| Error::Invalid(format!("lane {lane} is negative")))
}

/// The epoch of the last collective on `lane` at this rank.
#[no_mangle]
pub extern "C" fn tc_lane_epoch(lane: c_int, epoch: *mut u64) -> i32 {
    with(|c| {
        if epoch.is_null() {
            return Err(Error::Invalid("epoch is NULL".into()));
        }
        let e = c.lane_epoch(lane_arg(lane)?)?;
        // SAFETY: non-NULL (checked), a u64 the caller owns.
        unsafe { *epoch = e };
        Ok(TC_OK)
    })
}

/// Gives `lane` to a communicator of the `n` transport ranks `members`
/// (this one included), its collectives counted on from `epoch` (agreed by
/// the members: the largest of their `tc_lane_epoch`).
#[no_mangle]
pub extern "C" fn tc_lane_start(lane: c_int, epoch: u64, members: *const c_int, n: c_int) -> i32 {
    with(|c| {
        let n = usize::try_from(n).map_err(|_| Error::Invalid(format!("n {n} is negative")))?;
        if members.is_null() && n > 0 {
            return Err(Error::Invalid("members is NULL".into()));
        }
        let list: &[c_int] = if n == 0 {
            &[]
        } else {
            // SAFETY: non-NULL (checked), n ints (caller's contract).
            unsafe { std::slice::from_raw_parts(members, n) }
        };
        let list = list
            .iter()
            .map(|&m| rank_arg(m, "member"))
            .collect::<Result<Vec<_>, _>>()?;
        c.lane_start(lane_arg(lane)?, epoch, &list).map(|_| TC_OK)
    })
}

/// The next collective on `lane`, of `len` bytes per member (at most
/// `TC_LANE_DATA`): publishes `data` (NULL: nothing), then waits for every
/// member's arrival (`only` < 0) or transport rank `only`'s, for at most
/// `budget_s` seconds (<= 0: no limit). `only` = `TC_LANE_ALL_BY_ALL`
/// (-2): every member's, and every member of this collective waits for
/// every member's (a barrier, an allreduce), which lets the wait end at a
/// member already past it. `*flag` = 1 when complete, else 0: call again with the same
/// arguments (it publishes once). `reads` != 0: this rank reads others'
/// data, then calls `tc_lane_done`. Once complete, `blocks` (if not NULL,
/// room for every member, or one with `only`) holds where each member's
/// `len` bytes lie, in the communicator's rank order.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn tc_lane_exchange(
    lane: c_int,
    data: *const c_void,
    len: usize,
    reads: c_int,
    only: c_int,
    budget_s: f64,
    flag: *mut c_int,
    blocks: *mut *const c_void,
) -> i32 {
    with(|c| {
        if flag.is_null() {
            return Err(Error::Invalid("flag is NULL".into()));
        }
        let bytes: Option<&[u8]> = if data.is_null() {
            None
        } else if len == 0 {
            Some(&[])
        } else {
            // SAFETY: non-NULL (checked), len readable bytes (contract).
            Some(unsafe { std::slice::from_raw_parts(data.cast(), len) })
        };
        let lane = lane_arg(lane)?;
        let room = if only >= 0 { 1 } else { c.lane_size(lane)? };
        let out = if blocks.is_null() {
            None
        } else {
            // SAFETY: non-NULL, room for `room` pointers (the contract:
            // every member, or one with `only`).
            Some(unsafe { std::slice::from_raw_parts_mut(blocks.cast::<*const u8>(), room) })
        };
        let awaited = match usize::try_from(only) {
            Ok(m) => Awaited::One(m),
            Err(_) if only == TC_LANE_ALL_BY_ALL => Awaited::AllByAll,
            Err(_) => Awaited::All,
        };
        let done = c.lane_exchange(
            lane,
            bytes,
            len,
            reads != 0,
            awaited,
            budget_arg(budget_s),
            out,
        )?;
        // SAFETY: non-NULL (checked).
        unsafe { *flag = c_int::from(done) };
        Ok(TC_OK)
    })
}

/// The next collective of a 2-member `lane` on its pair line (one cache
/// line for both members' words and payloads): publishes `len` bytes of
/// `data` (at most `TC_PAIR_DATA`; `len` 0: a barrier), waits at most
/// `budget_s` seconds (<= 0: no limit) for the other member's, then copies
/// its `len` bytes into `out`. `*flag` = 1 when complete, else 0: call
/// again with the same arguments (it publishes once).
#[no_mangle]
pub extern "C" fn tc_pair_exchange(
    lane: c_int,
    data: *const c_void,
    len: usize,
    out: *mut c_void,
    budget_s: f64,
    flag: *mut c_int,
) -> i32 {
    with(|c| {
        if flag.is_null() || (len > 0 && (data.is_null() || out.is_null())) {
            return Err(Error::Invalid(format!(
                "flag, data or out is NULL ({len} bytes)"
            )));
        }
        if len > topocomm_transport::PAIR_DATA {
            return Err(Error::Invalid(format!(
                "lane {lane}: a pair collective takes at most {} bytes, not {len}",
                topocomm_transport::PAIR_DATA
            )));
        }
        let (bytes, room): (&[u8], &mut [u8]) = if len == 0 {
            (&[], &mut [])
        } else {
            // SAFETY: non-NULL (checked), len readable bytes in data and
            // len writable bytes in out (the contract), len <= PAIR_DATA.
            unsafe {
                (
                    std::slice::from_raw_parts(data.cast(), len),
                    std::slice::from_raw_parts_mut(out.cast(), len),
                )
            }
        };
        let lane = lane_arg(lane)?;
        // The whole collective when the peer is there at once, before the
        // budget's conversion (a quarter of a 2-rank barrier's
        // instructions on the C ABI side).
        let done = c.pair_exchange_fast(lane, bytes, room)
            || c.pair_exchange(lane, bytes, room, budget_arg(budget_s))?;
        // SAFETY: non-NULL (checked).
        unsafe { *flag = c_int::from(done) };
        Ok(TC_OK)
    })
}

/// This rank has finished reading the blocks of the current collective.
#[no_mangle]
pub extern "C" fn tc_lane_done(lane: c_int) -> i32 {
    with(|c| c.lane_done(lane_arg(lane)?).map(|_| TC_OK))
}

/// Waits until every member has finished reading this rank's blocks, then
/// frees `lane` (before its communicator is freed).
#[no_mangle]
pub extern "C" fn tc_lane_quiesce(lane: c_int) -> i32 {
    with(|c| c.lane_quiesce(lane_arg(lane)?).map(|_| TC_OK))
}

/// Transport rank `rank`'s staging area (crates/transport/src/stage.rs):
/// its address in this process into `*at`, its length into `*bytes`. Every
/// member of a collective may read and write the others' areas; the caller
/// orders those accesses (barriers around each use) and uses its own area
/// for one collective at a time.
#[no_mangle]
pub extern "C" fn tc_stage(rank: c_int, at: *mut *mut c_void, bytes: *mut usize) -> i32 {
    with(|c| {
        if at.is_null() || bytes.is_null() {
            return Err(Error::Invalid("at or bytes is NULL".into()));
        }
        let (p, len) = c.stage(rank_arg(rank, "stage")?)?;
        // SAFETY: both non-NULL (checked), each a value the caller owns.
        unsafe {
            *at = p.cast();
            *bytes = len;
        }
        Ok(TC_OK)
    })
}
