//! The transport's collective lanes for the MPI accelerator's small
//! collectives (docs/collectives.md, "Lanes"): flags and data blocks in the
//! segment, one lane per communicator context below `TC_LANES`.

use crate::error::*;
use crate::transport::{rank_arg, with};
use crate::transport_x::budget_arg;
use std::ffi::{c_int, c_void};
use topocomm_transport::Error;

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

/// Starts the next collective on `lane`, publishing `len` bytes of `data`
/// (at most `TC_LANE_DATA`; `len` 0: none). `reads` != 0: this rank will
/// read the others' blocks (then `tc_lane_done`). Waits at most `budget_s`
/// seconds (`<= 0`: no limit) for its block to be free: `*flag` = 1 when
/// published, 0 when the budget ran out first (call again).
#[no_mangle]
pub extern "C" fn tc_lane_arrive(
    lane: c_int,
    data: *const c_void,
    len: usize,
    reads: c_int,
    budget_s: f64,
    flag: *mut c_int,
) -> i32 {
    with(|c| {
        if flag.is_null() || (data.is_null() && len > 0) {
            return Err(Error::Invalid("data or flag is NULL".into()));
        }
        let bytes: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: non-NULL (checked), len readable bytes (contract).
            unsafe { std::slice::from_raw_parts(data.cast(), len) }
        };
        let e = c.lane_arrive(lane_arg(lane)?, bytes, reads != 0, budget_arg(budget_s))?;
        // SAFETY: non-NULL (checked).
        unsafe { *flag = c_int::from(e.is_some()) };
        Ok(TC_OK)
    })
}

/// Waits at most `budget_s` seconds (`<= 0`: no limit) until the current
/// collective of `lane` is published by every member (`only` < 0) or by
/// transport rank `only`: `*flag` = 1 then, else 0.
#[no_mangle]
pub extern "C" fn tc_lane_wait(lane: c_int, only: c_int, budget_s: f64, flag: *mut c_int) -> i32 {
    with(|c| {
        if flag.is_null() {
            return Err(Error::Invalid("flag is NULL".into()));
        }
        let only = usize::try_from(only).ok();
        let done = c.lane_wait(lane_arg(lane)?, only, budget_arg(budget_s))?;
        // SAFETY: non-NULL (checked).
        unsafe { *flag = c_int::from(done) };
        Ok(TC_OK)
    })
}

/// `*block`: where transport rank `member`'s `len` bytes of the current
/// collective of `lane` lie, readable once `tc_lane_wait` covered that
/// member and until `tc_lane_done` or the next `tc_lane_arrive` on the lane.
#[no_mangle]
pub extern "C" fn tc_lane_block(
    lane: c_int,
    member: c_int,
    len: usize,
    block: *mut *const c_void,
) -> i32 {
    with(|c| {
        if block.is_null() {
            return Err(Error::Invalid("block is NULL".into()));
        }
        let p = c.lane_block(lane_arg(lane)?, rank_arg(member, "member")?, len)?;
        // SAFETY: non-NULL (checked).
        unsafe { *block = p.cast() };
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
