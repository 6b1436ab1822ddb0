//! Collectives of topocomm programs: `tc_bcast`, `tc_reduce`,
//! `tc_allreduce`, `tc_scan`, `tc_exscan`, `tc_reduce_scatter_block`,
//! `tc_allgather`, `tc_alltoall`, `tc_gather`, `tc_scatter` and the `v`
//! variants `tc_gatherv`, `tc_scatterv`, `tc_allgatherv`, `tc_alltoallv`
//! (topocomm_transport::coll; docs/capi.md). Every rank of the job calls
//! the same collectives in the same order with matching sizes.

use crate::transport::{rank_arg, with};
use crate::TC_OK;
use std::ffi::{c_int, c_void};
use topocomm_transport::coll::{self, Blocks, Dtype, Op};
use topocomm_transport::Error;

/// Element types of `tc_reduce`/`tc_allreduce` (topocomm.h).
pub const TC_INT32: c_int = 1;
pub const TC_INT64: c_int = 2;
pub const TC_UINT64: c_int = 3;
pub const TC_FLOAT: c_int = 4;
pub const TC_DOUBLE: c_int = 5;
/// Reduction operations.
pub const TC_SUM: c_int = 1;
pub const TC_PROD: c_int = 2;
pub const TC_MIN: c_int = 3;
pub const TC_MAX: c_int = 4;

fn dtype_arg(t: c_int) -> Result<Dtype, Error> {
    Ok(match t {
        TC_INT32 => Dtype::I32,
        TC_INT64 => Dtype::I64,
        TC_UINT64 => Dtype::U64,
        TC_FLOAT => Dtype::F32,
        TC_DOUBLE => Dtype::F64,
        _ => {
            return Err(Error::Invalid(format!(
                "datatype {t} is none of TC_INT32, TC_INT64, TC_UINT64, TC_FLOAT, TC_DOUBLE"
            )))
        }
    })
}

fn op_arg(o: c_int) -> Result<Op, Error> {
    Ok(match o {
        TC_SUM => Op::Sum,
        TC_PROD => Op::Prod,
        TC_MIN => Op::Min,
        TC_MAX => Op::Max,
        _ => {
            return Err(Error::Invalid(format!(
                "operation {o} is none of TC_SUM, TC_PROD, TC_MIN, TC_MAX"
            )))
        }
    })
}

/// `len` readable bytes at `p` (NULL only when empty).
fn bytes<'a>(p: *const c_void, len: usize, what: &str) -> Result<&'a [u8], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::Invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller provides `len` readable bytes at `p` for the call
    // (topocomm.h), not written meanwhile.
    Ok(unsafe { std::slice::from_raw_parts(p.cast(), len) })
}

/// `len` writable bytes at `p` (NULL only when empty).
fn bytes_mut<'a>(p: *mut c_void, len: usize, what: &str) -> Result<&'a mut [u8], Error> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::Invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller provides `len` writable bytes at `p` for the call,
    // not accessed otherwise meanwhile (topocomm.h).
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast(), len) })
}

/// Element count times size, or an error naming `count`.
fn count_bytes(count: usize, dt: Dtype) -> Result<usize, Error> {
    count
        .checked_mul(dt.size())
        .ok_or_else(|| Error::Invalid(format!("count {count} is too large")))
}

/// Broadcasts `len` bytes of `buf` from rank `root` to every rank.
#[no_mangle]
pub extern "C" fn tc_bcast(buf: *mut c_void, len: usize, root: c_int) -> i32 {
    with(|c| {
        let root = rank_arg(root, "root")?;
        coll::bcast(c, bytes_mut(buf, len, "buf")?, root).map(|_| TC_OK)
    })
}

/// `rbuf` := the element-wise reduction of every rank's `count` elements
/// of `sbuf` (NULL: in place, from `rbuf`), in rank order, on every rank.
#[no_mangle]
pub extern "C" fn tc_allreduce(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> i32 {
    reduction(coll::allreduce, sbuf, rbuf, count, dtype, op)
}

/// `tc_allreduce`'s result at rank `root` only (`rbuf` is ignored, and may
/// be NULL, elsewhere; `sbuf` NULL: in place, at the root only).
#[no_mangle]
pub extern "C" fn tc_reduce(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    root: c_int,
) -> i32 {
    with(|c| {
        let root = rank_arg(root, "root")?;
        let (dt, op, len, send) = red_in(sbuf, count, dtype, op)?;
        let rlen = if c.rank() == root { len } else { 0 };
        coll::reduce(c, dt, op, send, bytes_mut(rbuf, rlen, "rbuf")?, root).map(|_| TC_OK)
    })
}

/// A reduction's type, operation, bytes per rank and send buffer (`None`:
/// in place).
type RedIn<'a> = (Dtype, Op, usize, Option<&'a [u8]>);

/// The reduction arguments shared by the functions below (`sbuf` NULL:
/// in place).
fn red_in<'a>(
    sbuf: *const c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> Result<RedIn<'a>, Error> {
    let (dt, op) = (dtype_arg(dtype)?, op_arg(op)?);
    let len = count_bytes(count, dt)?;
    let send = if sbuf.is_null() {
        None
    } else {
        Some(bytes(sbuf, len, "sbuf")?)
    };
    Ok((dt, op, len, send))
}

/// The reductions whose every rank passes a send buffer (NULL: in place)
/// and a receive buffer of `count` elements.
type Reduction =
    fn(&mut topocomm_transport::Comm, Dtype, Op, Option<&[u8]>, &mut [u8]) -> Result<(), Error>;

fn reduction(
    f: Reduction,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> i32 {
    with(|c| {
        let (dt, op, len, send) = red_in(sbuf, count, dtype, op)?;
        f(c, dt, op, send, bytes_mut(rbuf, len, "rbuf")?).map(|_| TC_OK)
    })
}

/// Rank r's `rbuf` := the reduction of the `count` elements of ranks 0..=r
/// (`sbuf` NULL: in place, from `rbuf`), in rank order.
#[no_mangle]
pub extern "C" fn tc_scan(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> i32 {
    reduction(coll::scan, sbuf, rbuf, count, dtype, op)
}

/// Rank r's `rbuf` := the reduction of ranks 0..r-1's elements; rank 0's
/// `rbuf` is not written (`sbuf` NULL: in place).
#[no_mangle]
pub extern "C" fn tc_exscan(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> i32 {
    reduction(coll::exscan, sbuf, rbuf, count, dtype, op)
}

/// Rank r's `rbuf` (`count` elements) := block r of the reduction of every
/// rank's `sbuf` (size x count elements), in rank order. `sbuf` NULL: in
/// place, `rbuf` holds the size x count elements and its first block gets
/// the result.
#[no_mangle]
pub extern "C" fn tc_reduce_scatter_block(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> i32 {
    with(|c| {
        let (dt, op) = (dtype_arg(dtype)?, op_arg(op)?);
        let len = count_bytes(count, dt)?;
        let all = blocks_len(c.size(), len)?;
        if sbuf.is_null() {
            let r = bytes_mut(rbuf, all, "rbuf")?;
            return coll::reduce_scatter_block(c, dt, op, None, r).map(|_| TC_OK);
        }
        let (s, r) = (bytes(sbuf, all, "sbuf")?, bytes_mut(rbuf, len, "rbuf")?);
        coll::reduce_scatter_block(c, dt, op, Some(s), r).map(|_| TC_OK)
    })
}

fn blocks_len(c_size: usize, len: usize) -> Result<usize, Error> {
    len.checked_mul(c_size)
        .ok_or_else(|| Error::Invalid(format!("len {len} is too large")))
}

/// Every rank's `len` bytes of `sbuf` (NULL: in place, from block r of
/// `rbuf`) into block r of every rank's `rbuf` (size x len bytes).
#[no_mangle]
pub extern "C" fn tc_allgather(sbuf: *const c_void, len: usize, rbuf: *mut c_void) -> i32 {
    with(|c| {
        let all = blocks_len(c.size(), len)?;
        let send = if sbuf.is_null() {
            None
        } else {
            Some(bytes(sbuf, len, "sbuf")?)
        };
        coll::allgather(c, send, bytes_mut(rbuf, all, "rbuf")?).map(|_| TC_OK)
    })
}

/// Block d (`len` bytes) of every rank's `sbuf` into block r of rank d's
/// `rbuf` (both size x len bytes).
#[no_mangle]
pub extern "C" fn tc_alltoall(sbuf: *const c_void, len: usize, rbuf: *mut c_void) -> i32 {
    with(|c| {
        let all = blocks_len(c.size(), len)?;
        coll::alltoall(c, bytes(sbuf, all, "sbuf")?, bytes_mut(rbuf, all, "rbuf")?).map(|_| TC_OK)
    })
}

/// The root as an index, and the bytes of the root-only buffer here:
/// size x len at the root, none elsewhere.
fn rooted(c: &topocomm_transport::Comm, root: c_int, len: usize) -> Result<(usize, usize), Error> {
    let root = rank_arg(root, "root")?;
    let here = if c.rank() == root {
        blocks_len(c.size(), len)?
    } else {
        0
    };
    Ok((root, here))
}

/// Every rank's `len` bytes of `sbuf` into block r of the root's `rbuf`
/// (size x len bytes; ignored elsewhere).
#[no_mangle]
pub extern "C" fn tc_gather(
    sbuf: *const c_void,
    len: usize,
    rbuf: *mut c_void,
    root: c_int,
) -> i32 {
    with(|c| {
        let (root, all) = rooted(c, root, len)?;
        let (s, r) = (bytes(sbuf, len, "sbuf")?, bytes_mut(rbuf, all, "rbuf")?);
        coll::gather(c, s, r, root).map(|_| TC_OK)
    })
}

/// Block r (`len` bytes) of the root's `sbuf` (size x len bytes; ignored
/// elsewhere) into rank r's `rbuf`.
#[no_mangle]
pub extern "C" fn tc_scatter(
    sbuf: *const c_void,
    len: usize,
    rbuf: *mut c_void,
    root: c_int,
) -> i32 {
    with(|c| {
        let (root, all) = rooted(c, root, len)?;
        let (s, r) = (bytes(sbuf, all, "sbuf")?, bytes_mut(rbuf, len, "rbuf")?);
        coll::scatter(c, s, r, root).map(|_| TC_OK)
    })
}

/// A block table of `n` entries: `lens` and `displs` (bytes) as slices,
/// and the bytes of the buffer they span (the end of the furthest block).
fn table<'a>(
    lens: *const usize,
    displs: *const usize,
    n: usize,
    what: &str,
) -> Result<(Blocks<'a>, usize), Error> {
    if lens.is_null() || displs.is_null() {
        return Err(Error::Invalid(format!(
            "{what}: lengths or offsets are NULL"
        )));
    }
    // SAFETY: the caller provides n entries in each array (topocomm.h),
    // not written during the call.
    let (lens, displs) = unsafe {
        (
            std::slice::from_raw_parts(lens, n),
            std::slice::from_raw_parts(displs, n),
        )
    };
    let mut end = 0usize;
    for (j, (&l, &d)) in lens.iter().zip(displs).enumerate() {
        let e = d.checked_add(l).ok_or_else(|| {
            Error::Invalid(format!(
                "{what}: block {j} ({l} bytes from byte {d}) is too large"
            ))
        })?;
        end = end.max(e);
    }
    Ok((Blocks { lens, displs }, end))
}

/// Every rank's `len` bytes of `sbuf` into the root's `rbuf`, rank r's at
/// byte `displs[r]` (`lens[r]` bytes); `rbuf`, `lens` and `displs` are
/// ignored (may be NULL) except at the root.
#[no_mangle]
pub extern "C" fn tc_gatherv(
    sbuf: *const c_void,
    len: usize,
    rbuf: *mut c_void,
    lens: *const usize,
    displs: *const usize,
    root: c_int,
) -> i32 {
    with(|c| {
        let root = rank_arg(root, "root")?;
        let s = bytes(sbuf, len, "sbuf")?;
        if c.rank() != root {
            return coll::gatherv(c, s, &mut [], None, root).map(|_| TC_OK);
        }
        let (b, end) = table(lens, displs, c.size(), "the root's receive blocks")?;
        coll::gatherv(c, s, bytes_mut(rbuf, end, "rbuf")?, Some(b), root).map(|_| TC_OK)
    })
}

/// The root's `lens[r]` bytes of `sbuf` from byte `displs[r]` into rank
/// r's `rbuf` (`len` bytes); `sbuf`, `lens` and `displs` are ignored (may
/// be NULL) except at the root.
#[no_mangle]
pub extern "C" fn tc_scatterv(
    sbuf: *const c_void,
    lens: *const usize,
    displs: *const usize,
    rbuf: *mut c_void,
    len: usize,
    root: c_int,
) -> i32 {
    with(|c| {
        let root = rank_arg(root, "root")?;
        let r = bytes_mut(rbuf, len, "rbuf")?;
        if c.rank() != root {
            return coll::scatterv(c, &[], None, r, root).map(|_| TC_OK);
        }
        let (b, end) = table(lens, displs, c.size(), "the root's send blocks")?;
        coll::scatterv(c, bytes(sbuf, end, "sbuf")?, Some(b), r, root).map(|_| TC_OK)
    })
}

/// Every rank's `len` bytes of `sbuf` (NULL: in place, from its block of
/// `rbuf`) into every rank's `rbuf`, rank r's at byte `displs[r]`
/// (`lens[r]` bytes, the same table on every rank).
#[no_mangle]
pub extern "C" fn tc_allgatherv(
    sbuf: *const c_void,
    len: usize,
    rbuf: *mut c_void,
    lens: *const usize,
    displs: *const usize,
) -> i32 {
    with(|c| {
        let (b, end) = table(lens, displs, c.size(), "the receive blocks")?;
        let send = if sbuf.is_null() {
            None
        } else {
            Some(bytes(sbuf, len, "sbuf")?)
        };
        coll::allgatherv(c, send, bytes_mut(rbuf, end, "rbuf")?, b).map(|_| TC_OK)
    })
}

/// Block d of every rank's `sbuf` (`slens[d]` bytes from byte
/// `sdispls[d]`) into rank d's `rbuf` at byte `rdispls[r]` (`rlens[r]`
/// bytes).
#[no_mangle]
pub extern "C" fn tc_alltoallv(
    sbuf: *const c_void,
    slens: *const usize,
    sdispls: *const usize,
    rbuf: *mut c_void,
    rlens: *const usize,
    rdispls: *const usize,
) -> i32 {
    with(|c| {
        let (sb, send) = table(slens, sdispls, c.size(), "the send blocks")?;
        let (rb, recv) = table(rlens, rdispls, c.size(), "the receive blocks")?;
        let (s, r) = (bytes(sbuf, send, "sbuf")?, bytes_mut(rbuf, recv, "rbuf")?);
        coll::alltoallv(c, s, sb, r, rb).map(|_| TC_OK)
    })
}
