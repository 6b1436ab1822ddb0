//! Collectives over the transport for topocomm programs (the `tc_*` C API,
//! docs/capi.md): every rank of the job takes part, in the same order.
//!
//! Messages travel in a matching context of their own ([`COLL_CTX`]), so
//! they never match the program's point-to-point messages, and each pair's
//! FIFO order pairs the k-th collective message from a to b with b's k-th
//! collective receive from a. The algorithms are those of the MPI
//! accelerator (docs/collectives.md): binomial trees and recursive doubling
//! for small vectors, blocks (a reduce-scatter, then an allgather or a
//! gather) from [`SPLIT_MIN`] bytes, direct exchanges for the block
//! collectives.
//!
//! Reductions combine partial results only as (lower members) op (higher
//! members) along a tree fixed by the job's size and placement (the trees
//! of the small ones run over the job's near order where its ranks' PUs
//! differ in locality, near.rs, rooted at the root for a rooted call), so
//! a floating-point result is the same bits on every run and, for an
//! allreduce, on every rank.
//! The prefix reductions ([`scan`], [`exscan`]) and
//! [`reduce_scatter_block`] keep the same rule.
//!
//! The `v` variants ([`gatherv`], [`scatterv`], [`allgatherv`],
//! [`alltoallv`]) place block j at its own offset and length
//! ([`Blocks`]); every pair that exchanges a block exchanges exactly one
//! message, a zero-length one for an empty block, so a receiver that
//! expects another length than its sender sends says so.

use crate::{Comm, Error, Request, Result};
use std::sync::Arc;

/// The matching context of collective messages, reserved (the C API
/// refuses it for point-to-point messages).
pub const COLL_CTX: u16 = u16::MAX;

/// From this many bytes per rank, reductions run by blocks.
pub const SPLIT_MIN: usize = 16 << 10;

const T_BCAST: i32 = 1;
const T_REDUCE: i32 = 2;
const T_RESULT: i32 = 3;
const T_ALLREDUCE: i32 = 4;
const T_BLOCKS: i32 = 5;
const T_GATHER: i32 = 6;
const T_SCATTER: i32 = 7;
const T_ALLGATHER: i32 = 8;
const T_ALLTOALL: i32 = 9;
const T_SCAN: i32 = 10;
const T_GATHERV: i32 = 11;
const T_SCATTERV: i32 = 12;
const T_ALLGATHERV: i32 = 13;
const T_ALLTOALLV: i32 = 14;

/// Element types of reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    I32,
    I64,
    U64,
    F32,
    F64,
}

impl Dtype {
    pub fn size(self) -> usize {
        match self {
            Dtype::I32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }
}

/// Reduction operations (integers wrap on overflow).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Sum,
    Prod,
    Min,
    Max,
}

fn min<T: PartialOrd>(l: T, r: T) -> T {
    if r < l {
        r
    } else {
        l
    }
}

fn max<T: PartialOrd>(l: T, r: T) -> T {
    if r > l {
        r
    } else {
        l
    }
}

/// `inout := x (op) inout`, element by element; `x` holds the lower
/// ranks' partial result. Both are whole elements of `dt`.
///
/// One loop per (type, operation), the operation chosen outside it: with
/// the `match` inside, the loop stayed scalar (one element per cycle);
/// this way the compiler vectorizes it. Element-wise, so the bits are the
/// same either way.
pub fn combine(dt: Dtype, op: Op, x: &[u8], inout: &mut [u8]) {
    fn each<T, const S: usize>(
        x: &[u8],
        inout: &mut [u8],
        from: fn([u8; S]) -> T,
        to: fn(T) -> [u8; S],
        f: impl Fn(T, T) -> T,
    ) {
        for (a, b) in x.chunks_exact(S).zip(inout.chunks_exact_mut(S)) {
            let l = from(a.try_into().expect("S bytes"));
            let r = from((&*b).try_into().expect("S bytes"));
            b.copy_from_slice(&to(f(l, r)));
        }
    }
    macro_rules! run {
        ($t:ty, $add:expr, $mul:expr) => {{
            const S: usize = std::mem::size_of::<$t>();
            let (from, to) = (<$t>::from_ne_bytes, <$t>::to_ne_bytes);
            match op {
                Op::Sum => each::<$t, S>(x, inout, from, to, $add),
                Op::Prod => each::<$t, S>(x, inout, from, to, $mul),
                Op::Min => each::<$t, S>(x, inout, from, to, min),
                Op::Max => each::<$t, S>(x, inout, from, to, max),
            }
        }};
    }
    match dt {
        Dtype::I32 => run!(i32, i32::wrapping_add, i32::wrapping_mul),
        Dtype::I64 => run!(i64, i64::wrapping_add, i64::wrapping_mul),
        Dtype::U64 => run!(u64, u64::wrapping_add, u64::wrapping_mul),
        Dtype::F32 => run!(f32, |l: f32, r| l + r, |l: f32, r| l * r),
        Dtype::F64 => run!(f64, |l: f64, r| l + r, |l: f64, r| l * r),
    }
}

/// Requests of one step, each receive with the byte count it must get
/// (every rank passes the same sizes; a different count is the caller's
/// error, reported rather than left as garbage).
#[derive(Default)]
struct Posted(Vec<(Request, Option<usize>)>);

impl Posted {
    /// Sends `len` bytes at `p` to `dst`.
    ///
    /// # Safety
    /// The bytes stay valid and unmodified until [`Posted::wait`].
    unsafe fn send(
        &mut self,
        c: &mut Comm,
        p: *const u8,
        len: usize,
        dst: usize,
        tag: i32,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        let r = unsafe { c.isend_ctx(p, len, dst, tag, COLL_CTX, false)? };
        self.0.push((r, None));
        Ok(())
    }

    /// Receives exactly `len` bytes at `p` from `src`.
    ///
    /// # Safety
    /// The bytes stay valid, writable and untouched until [`Posted::wait`].
    unsafe fn recv(
        &mut self,
        c: &mut Comm,
        p: *mut u8,
        len: usize,
        src: usize,
        tag: i32,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        let r = unsafe { c.irecv_ctx(p, len, src as i32, tag, COLL_CTX)? };
        self.0.push((r, Some(len)));
        Ok(())
    }

    /// Waits for every request (all of them, also after a failure, so
    /// none is left writing into or reading from a caller's buffer).
    fn wait(self, c: &mut Comm) -> Result<()> {
        let mut first = Ok(());
        for (r, want) in self.0 {
            let res = c.wait(r).and_then(|st| match want {
                Some(w) if st.count != w => Err(mismatch(st.source, st.count, w)),
                _ => Ok(()),
            });
            if first.is_ok() {
                first = res;
            }
        }
        first
    }
}

fn mismatch(src: i32, got: usize, want: usize) -> Error {
    Error::Invalid(format!(
        "collective message of {got} bytes from rank {src} where {want} were expected: the ranks \
         passed different sizes"
    ))
}

/// Runs one step: `post` posts its requests into a [`Posted`], which is
/// waited for whatever `post` returned.
fn step(c: &mut Comm, post: impl FnOnce(&mut Comm, &mut Posted) -> Result<()>) -> Result<()> {
    let mut q = Posted::default();
    let posted = post(c, &mut q);
    let waited = q.wait(c);
    posted.and(waited)
}

/// A block of a step: where its bytes lie and how many.
type Blk<P> = Option<(P, usize)>;

/// One message per pair, all posted at once: from each other rank `src`,
/// `recv_at(src)` (if any), then to each other rank `dst`, `send_at(dst)`
/// (if any); receives first, so that every rendezvous can start at once.
///
/// # Safety
/// Every block given stays valid (receive blocks writable, disjoint and
/// untouched, send blocks unmodified) until the call returns.
unsafe fn exchange(
    c: &mut Comm,
    tag: i32,
    recv_at: impl Fn(usize) -> Blk<*mut u8>,
    send_at: impl Fn(usize) -> Blk<*const u8>,
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    step(c, |c, q| {
        for src in (1..n).map(|k| (me + n - k) % n) {
            if let Some((p, len)) = recv_at(src) {
                // SAFETY: the caller's contract.
                unsafe { q.recv(c, p, len, src, tag)? };
            }
        }
        for dst in (1..n).map(|k| (me + k) % n) {
            if let Some((p, len)) = send_at(dst) {
                // SAFETY: the caller's contract.
                unsafe { q.send(c, p, len, dst, tag)? };
            }
        }
        Ok(())
    })
}

fn check_root(c: &Comm, root: usize) -> Result<()> {
    if root >= c.size() {
        return Err(Error::Invalid(format!(
            "root rank {root} is out of range (job of {} ranks)",
            c.size()
        )));
    }
    Ok(())
}

fn check_len(what: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(Error::Invalid(format!(
            "{what} holds {got} bytes where {want} are needed"
        )));
    }
    Ok(())
}

fn check_elems(dt: Dtype, bytes: usize, what: &str) -> Result<()> {
    if bytes % dt.size() != 0 {
        return Err(Error::Invalid(format!(
            "{what} holds {bytes} bytes, not a whole number of {}-byte elements",
            dt.size()
        )));
    }
    Ok(())
}

// ---- Broadcast ------------------------------------------------------------

/// Binomial tree from the root: each rank receives from its parent, then
/// sends to its children (all posted at once, larger subtrees first),
/// over the job's near order rooted at the root where it has one
/// ([`tree_from`]).
pub fn bcast(c: &mut Comm, buf: &mut [u8], root: usize) -> Result<()> {
    check_root(c, root)?;
    let members = tree_from(c, root);
    bcast_over(c, buf, &members)
}

/// The members a tree runs over, member 0 first, as job ranks.
enum Members {
    /// The ranks from `root` on, wrapping around (no near order: nothing
    /// to compute or allocate per call).
    From { root: usize, n: usize },
    /// A near order, rooted or not (kept by [`crate::near::Near`]).
    Listed(Arc<[usize]>),
}

impl Members {
    fn len(&self) -> usize {
        match self {
            Members::From { n, .. } => *n,
            Members::Listed(l) => l.len(),
        }
    }

    /// The job rank of member `v`.
    fn at(&self, v: usize) -> usize {
        match self {
            Members::From { root, n } => (v + root) % n,
            Members::Listed(l) => l[v],
        }
    }

    /// The member index of job rank `rank`.
    fn index_of(&self, rank: usize) -> usize {
        match self {
            Members::From { root, n } => (rank + n - root) % n,
            Members::Listed(l) => l.iter().position(|&r| r == rank).unwrap_or(0),
        }
    }
}

/// The members of a tree rooted at `root`: the job's near order rooted
/// there (near.rs: every group of ranks sharing a locality level keeps its
/// subtree), else the ranks from the root on.
fn tree_from(c: &mut Comm, root: usize) -> Members {
    let n = c.size();
    match c.job_near() {
        Some(near) => Members::Listed(near.rooted_at(root)),
        None => Members::From { root, n },
    }
}

/// The members of a tree with no root: the job's near order where it has
/// one, else rank order.
fn tree_order(c: &mut Comm) -> Members {
    let n = c.size();
    match c.job_near() {
        Some(near) => Members::Listed(near.ranks.clone()),
        None => Members::From { root: 0, n },
    }
}

/// [`bcast`] from member 0 along the binomial tree over `members`.
fn bcast_over(c: &mut Comm, buf: &mut [u8], members: &Members) -> Result<()> {
    let (n, vr) = (members.len(), members.index_of(c.rank()));
    let len = buf.len();
    let p = buf.as_mut_ptr();
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            let parent = members.at(vr - mask);
            // SAFETY: `buf` is borrowed for the whole step.
            step(c, |c, q| unsafe { q.recv(c, p, len, parent, T_BCAST) })?;
            break;
        }
        mask <<= 1;
    }
    step(c, |c, q| {
        let mut m = mask >> 1;
        while m > 0 {
            if vr + m < n {
                // SAFETY: as above; only read while the sends are out.
                unsafe { q.send(c, p, len, members.at(vr + m), T_BCAST)? };
            }
            m >>= 1;
        }
        Ok(())
    })
}

// ---- Reductions ------------------------------------------------------------

/// Exchanges `send` with `peer`'s into `recv` (both posted before either
/// is waited for).
fn swap_with(c: &mut Comm, send: &[u8], recv: &mut [u8], peer: usize, tag: i32) -> Result<()> {
    step(c, |c, q| {
        // SAFETY: both buffers are borrowed for the whole step.
        unsafe {
            q.recv(c, recv.as_mut_ptr(), recv.len(), peer, tag)?;
            q.send(c, send.as_ptr(), send.len(), peer, tag)
        }
    })
}

/// Binomial reduction along `members` to `members[0]`: at step `mask`,
/// member r (a multiple of 2 mask) holds members [r, r+mask) in `acc` and
/// combines [r+mask, r+2 mask) from member r+mask on its right. Member 0
/// ends with the result in `acc`. (Every [`Op`] is commutative, so any
/// order of the members gives the reduction; a fixed one, the same bits.)
fn reduce_to_first(
    c: &mut Comm,
    dt: Dtype,
    op: Op,
    acc: &mut Vec<u8>,
    members: &Members,
) -> Result<()> {
    let (n, r) = (members.len(), members.index_of(c.rank()));
    let mut tmp = Vec::new(); // only ranks that receive need it
    let mut mask = 1;
    while mask < n {
        if r & mask != 0 {
            let (p, len) = (acc.as_ptr(), acc.len());
            let parent = members.at(r - mask);
            // SAFETY: `acc` is borrowed for the whole step.
            return step(c, |c, q| unsafe { q.send(c, p, len, parent, T_REDUCE) });
        }
        if r + mask < n {
            tmp.resize(acc.len(), 0);
            let (p, len) = (tmp.as_mut_ptr(), tmp.len());
            let child = members.at(r + mask);
            // SAFETY: `tmp` is borrowed for the whole step.
            step(c, |c, q| unsafe { q.recv(c, p, len, child, T_REDUCE) })?;
            combine(dt, op, acc, &mut tmp);
            std::mem::swap(acc, &mut tmp);
        }
        mask <<= 1;
    }
    Ok(())
}

/// Whole-vector allreduce over the job's tree order ([`tree_order`]):
/// recursive doubling for power-of-two sizes (both partners combine lower
/// (op) upper member), else the reduction to member 0 and the broadcast.
fn allreduce_tree(c: &mut Comm, dt: Dtype, op: Op, acc: &mut Vec<u8>) -> Result<()> {
    let members = tree_order(c);
    let (n, r) = (members.len(), members.index_of(c.rank()));
    if !n.is_power_of_two() {
        reduce_to_first(c, dt, op, acc, &members)?;
        return bcast_over(c, acc, &members);
    }
    let mut tmp = vec![0u8; acc.len()];
    let mut mask = 1;
    while mask < n {
        let partner = r ^ mask;
        swap_with(c, acc, &mut tmp, members.at(partner), T_ALLREDUCE)?;
        if partner > r {
            combine(dt, op, acc, &mut tmp);
            std::mem::swap(acc, &mut tmp);
        } else {
            combine(dt, op, &tmp, acc);
        }
        mask <<= 1;
    }
    Ok(())
}

/// Block j of `count` elements cut `n` ways: (first element, elements).
fn block(count: usize, n: usize, j: usize) -> (usize, usize) {
    let (q, r) = (count / n, count % n);
    (j * q + j.min(r), q + usize::from(j < r))
}

/// Block j of a vector of `count` elements of `es` bytes at `p`.
fn blocks_at(p: *mut u8, count: usize, n: usize, es: usize, j: usize) -> Blk<*mut u8> {
    let (f, m) = block(count, n, j);
    Some((p.wrapping_add(f * es), m * es))
}

/// The reduce-scatter of the large reductions: every rank sends block j of
/// `input` (data at `inp`, `count` elements) to rank j, which returns its
/// block reduced in rank order, x_0 (op) (x_1 (op) (... (op) x_{n-1})).
///
/// # Safety
/// `inp` points to `count` readable elements that stay valid during the
/// call; the caller may write to this rank's own block of them only after
/// the call.
unsafe fn reduce_blocks(
    c: &mut Comm,
    dt: Dtype,
    op: Op,
    inp: *const u8,
    count: usize,
) -> Result<Vec<u8>> {
    let (n, me, es) = (c.size(), c.rank(), dt.size());
    let (first, cnt) = block(count, n, me);
    let len = cnt * es;
    let mut slots = vec![0u8; len * n];
    let sp = slots.as_mut_ptr();
    // SAFETY: slot j of `slots` (disjoint, borrowed for the call) from
    // rank j; block j of the input (the caller's contract) to rank j.
    unsafe {
        exchange(
            c,
            T_BLOCKS,
            |j| Some((sp.add(j * len), len)),
            |j| {
                let (f, m) = block(count, n, j);
                Some((inp.add(f * es), m * es))
            },
        )?
    };
    // SAFETY: my block of the input: readable (the caller's contract).
    let own = unsafe { std::slice::from_raw_parts(inp.add(first * es), len) };
    let copy = |j: usize| {
        if j == me {
            own
        } else {
            &slots[j * len..(j + 1) * len]
        }
    };
    let mut out = copy(n - 1).to_vec();
    for j in (0..n - 1).rev() {
        combine(dt, op, copy(j), &mut out);
    }
    Ok(out)
}

/// This rank's block of a reduction by blocks ([`reduce_blocks`] of
/// `send`, or of `recv` in place), also copied into its place in `recv`
/// when `into_recv`.
fn my_block(
    c: &mut Comm,
    dt: Dtype,
    op: Op,
    send: Option<&[u8]>,
    recv: &mut [u8],
    count: usize,
    into_recv: bool,
) -> Result<Vec<u8>> {
    let inp = send.map_or(recv.as_ptr(), |s| s.as_ptr());
    // SAFETY: `inp` is `send` or `recv`, `count` elements (red_args),
    // borrowed for the call; `recv` is written only after the
    // reduce-scatter.
    let mine = unsafe { reduce_blocks(c, dt, op, inp, count)? };
    if into_recv {
        let ((first, _), es) = (block(count, c.size(), c.rank()), dt.size());
        recv[first * es..first * es + mine.len()].copy_from_slice(&mine);
    }
    Ok(mine)
}

/// The shared front of [`reduce`] and [`allreduce`]: element count, and
/// the input (the send buffer, or `recv` in place).
fn red_args(dt: Dtype, send: Option<&[u8]>, recv_len: usize, significant: bool) -> Result<usize> {
    let bytes = match send {
        Some(s) => {
            if significant {
                check_len("the receive buffer", recv_len, s.len())?;
            }
            s.len()
        }
        None => recv_len,
    };
    check_elems(dt, bytes, "the send buffer")?;
    Ok(bytes / dt.size())
}

/// `recv := x_0 (op) x_1 (op) ... (op) x_{n-1}` on every rank, x_r rank
/// r's `send` (`None`: in place, from `recv`).
pub fn allreduce(
    c: &mut Comm,
    dt: Dtype,
    op: Op,
    send: Option<&[u8]>,
    recv: &mut [u8],
) -> Result<()> {
    let count = red_args(dt, send, recv.len(), true)?;
    let (n, es) = (c.size(), dt.size());
    if count * es >= SPLIT_MIN && count >= n {
        let mine = my_block(c, dt, op, send, recv, count, true)?;
        let rp = recv.as_mut_ptr();
        // SAFETY: block j of `recv` (disjoint from the others and from
        // `mine`) from rank j; `mine` to every rank; both live for the call.
        return unsafe {
            exchange(
                c,
                T_RESULT,
                |j| blocks_at(rp, count, n, es, j),
                |_| Some((mine.as_ptr(), mine.len())),
            )
        };
    }
    let mut acc = send.map_or_else(|| recv.to_vec(), <[u8]>::to_vec);
    allreduce_tree(c, dt, op, &mut acc)?;
    recv.copy_from_slice(&acc);
    Ok(())
}

/// [`allreduce`]'s result on `root` only (`recv` is significant there
/// only: other ranks may pass an empty one).
pub fn reduce(
    c: &mut Comm,
    dt: Dtype,
    op: Op,
    send: Option<&[u8]>,
    recv: &mut [u8],
    root: usize,
) -> Result<()> {
    check_root(c, root)?;
    let (n, me, es) = (c.size(), c.rank(), dt.size());
    if send.is_none() && me != root {
        return Err(Error::Invalid(
            "in place (no send buffer) only at the root".into(),
        ));
    }
    let count = red_args(dt, send, recv.len(), me == root)?;
    if count * es >= SPLIT_MIN && count >= n {
        let mine = my_block(c, dt, op, send, recv, count, me == root)?;
        let rp = recv.as_mut_ptr();
        // SAFETY: at the root, block j of `recv` from rank j; elsewhere
        // `mine` to the root; both live for the call.
        return unsafe {
            exchange(
                c,
                T_RESULT,
                |j| {
                    (me == root)
                        .then(|| blocks_at(rp, count, n, es, j))
                        .flatten()
                },
                |j| (j == root).then_some((mine.as_ptr(), mine.len())),
            )
        };
    }
    let mut acc = send.map_or_else(|| recv.to_vec(), <[u8]>::to_vec);
    // The tree rooted at the root ends there.
    let members = tree_from(c, root);
    reduce_to_first(c, dt, op, &mut acc, &members)?;
    if me == root {
        recv.copy_from_slice(&acc);
    }
    Ok(())
}

// ---- Prefix reductions and the reduce-scatter -------------------------------

/// Doubling prefix reduction (Hillis-Steele): at distance d = 1, 2, 4, ...
/// rank r sends its partial result (ranks [r-d+1, r], clipped at 0) to
/// rank r+d and combines the one of ranks [r-2d+1, r-d] from rank r-d on
/// its left, ceil(log2 n) rounds. `incl` ends as x_0 (op) ... (op) x_r;
/// `excl`, when given, as x_0 (op) ... (op) x_{r-1} (untouched on rank 0).
/// The partial results combined depend only on the job size and the rank,
/// so the bits are the same on every run.
fn prefix(
    c: &mut Comm,
    dt: Dtype,
    op: Op,
    incl: &mut [u8],
    mut excl: Option<&mut [u8]>,
) -> Result<()> {
    let (n, r, len) = (c.size(), c.rank(), incl.len());
    let mut tmp = vec![0u8; if r > 0 { len } else { 0 }];
    let mut excl_set = false;
    let mut d = 1;
    while d < n {
        let from = r.checked_sub(d);
        let to = (r + d < n).then_some(r + d);
        let (tp, ip) = (tmp.as_mut_ptr(), incl.as_ptr());
        step(c, |c, q| {
            // SAFETY: `tmp` (len bytes on every rank that receives) and
            // `incl` are borrowed for the whole step; `incl` is only read.
            unsafe {
                if let Some(f) = from {
                    q.recv(c, tp, len, f, T_SCAN)?;
                }
                if let Some(t) = to {
                    q.send(c, ip, len, t, T_SCAN)?;
                }
            }
            Ok(())
        })?;
        if from.is_some() {
            if let Some(e) = excl.as_deref_mut() {
                if excl_set {
                    combine(dt, op, &tmp, e);
                } else {
                    e.copy_from_slice(&tmp);
                    excl_set = true;
                }
            }
            combine(dt, op, &tmp, incl);
        }
        d <<= 1;
    }
    Ok(())
}

/// Inclusive prefix reduction: rank r's `recv` := x_0 (op) x_1 (op) ...
/// (op) x_r, x_i rank i's `send` (`None`: in place, from `recv`).
pub fn scan(c: &mut Comm, dt: Dtype, op: Op, send: Option<&[u8]>, recv: &mut [u8]) -> Result<()> {
    red_args(dt, send, recv.len(), true)?;
    if let Some(s) = send {
        recv.copy_from_slice(s);
    }
    prefix(c, dt, op, recv, None)
}

/// Exclusive prefix reduction: rank r's `recv` := x_0 (op) ... (op)
/// x_{r-1}; rank 0's `recv` is left as it was (MPI_Exscan's rule). `send`
/// `None`: in place, from `recv`.
pub fn exscan(c: &mut Comm, dt: Dtype, op: Op, send: Option<&[u8]>, recv: &mut [u8]) -> Result<()> {
    red_args(dt, send, recv.len(), true)?;
    let mut incl = send.map_or_else(|| recv.to_vec(), <[u8]>::to_vec);
    // Rank 0 only sends: its result buffer is not written.
    let excl = (c.rank() > 0).then_some(recv);
    prefix(c, dt, op, &mut incl, excl)
}

/// Block r of the element-wise reduction of every rank's `send` (n
/// blocks of `recv`'s size; block j for rank j) into rank r's `recv`, in
/// rank order, x_0 (op) (x_1 (op) (... (op) x_{n-1})): each rank sends
/// block j straight to rank j, which folds the n blocks (the reduce-scatter
/// of the large reductions). `send` `None`: in place, `recv` holds the n
/// blocks and its first block gets the result.
pub fn reduce_scatter_block(
    c: &mut Comm,
    dt: Dtype,
    op: Op,
    send: Option<&[u8]>,
    recv: &mut [u8],
) -> Result<()> {
    let n = c.size();
    let blk = match send {
        Some(s) => {
            check_len("the send buffer", s.len(), n * recv.len())?;
            recv.len()
        }
        None if recv.len() % n != 0 => {
            return Err(Error::Invalid(format!(
                "in place, the receive buffer's {} bytes are not {n} equal blocks",
                recv.len()
            )))
        }
        None => recv.len() / n,
    };
    check_elems(dt, blk, "a block")?;
    let inp = send.map_or(recv.as_ptr(), <[u8]>::as_ptr);
    // SAFETY: `inp` is `send` or `recv`, n blocks of `blk` bytes, borrowed
    // for the call; `recv` is written only after the reduce-scatter.
    let mine = unsafe { reduce_blocks(c, dt, op, inp, n * blk / dt.size())? };
    recv[..blk].copy_from_slice(&mine);
    Ok(())
}

// ---- Block collectives: one message per pair, all posted at once ---------

/// Every rank's `send` (`None`: in place, its block of `recv`) into block
/// r of every rank's `recv` (n blocks of the send size).
pub fn allgather(c: &mut Comm, send: Option<&[u8]>, recv: &mut [u8]) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    if recv.len() % n != 0 {
        return Err(Error::Invalid(format!(
            "the receive buffer's {} bytes are not {n} equal blocks",
            recv.len()
        )));
    }
    let blk = recv.len() / n;
    if let Some(s) = send {
        check_len("the send buffer", s.len(), blk)?;
        recv[me * blk..(me + 1) * blk].copy_from_slice(s);
    }
    let rp = recv.as_mut_ptr();
    // Others read the send buffer, not the copy just written (docs/collectives.md).
    let sp = send.map_or(rp.cast_const().wrapping_add(me * blk), |s| s.as_ptr());
    // SAFETY: block j of `recv` from rank j; `send` (or my block of
    // `recv`, not written meanwhile) to every rank; all live for the call.
    unsafe {
        exchange(
            c,
            T_ALLGATHER,
            |j| Some((rp.wrapping_add(j * blk), blk)),
            |_| Some((sp, blk)),
        )
    }
}

/// Block d of each rank's `send` into block r of rank d's `recv`.
pub fn alltoall(c: &mut Comm, send: &[u8], recv: &mut [u8]) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    check_len("the send buffer", send.len(), recv.len())?;
    if recv.len() % n != 0 {
        return Err(Error::Invalid(format!(
            "the buffers' {} bytes are not {n} equal blocks",
            recv.len()
        )));
    }
    let blk = recv.len() / n;
    recv[me * blk..(me + 1) * blk].copy_from_slice(&send[me * blk..(me + 1) * blk]);
    let (rp, sp) = (recv.as_mut_ptr(), send.as_ptr());
    // SAFETY: block j of `recv` from rank j, block j of `send` to rank j;
    // both borrowed for the call.
    unsafe {
        exchange(
            c,
            T_ALLTOALL,
            |j| Some((rp.wrapping_add(j * blk), blk)),
            |j| Some((sp.wrapping_add(j * blk), blk)),
        )
    }
}

/// Every rank's `send` into block r of the root's `recv` (significant at
/// the root only).
pub fn gather(c: &mut Comm, send: &[u8], recv: &mut [u8], root: usize) -> Result<()> {
    check_root(c, root)?;
    let (n, me, blk) = (c.size(), c.rank(), send.len());
    if me == root {
        check_len("the root's receive buffer", recv.len(), n * blk)?;
        recv[me * blk..(me + 1) * blk].copy_from_slice(send);
    }
    let (rp, sp) = (recv.as_mut_ptr(), send.as_ptr());
    // SAFETY: at the root, block j of `recv` from rank j; elsewhere `send`
    // to the root; both borrowed for the call.
    unsafe {
        exchange(
            c,
            T_GATHER,
            |j| (me == root).then(|| (rp.wrapping_add(j * blk), blk)),
            |j| (j == root).then_some((sp, blk)),
        )
    }
}

/// Block r of the root's `send` (significant at the root only) into rank
/// r's `recv`.
pub fn scatter(c: &mut Comm, send: &[u8], recv: &mut [u8], root: usize) -> Result<()> {
    check_root(c, root)?;
    let (n, me, blk) = (c.size(), c.rank(), recv.len());
    if me == root {
        check_len("the root's send buffer", send.len(), n * blk)?;
        recv.copy_from_slice(&send[me * blk..(me + 1) * blk]);
    }
    let (rp, sp) = (recv.as_mut_ptr(), send.as_ptr());
    // SAFETY: elsewhere, `recv` from the root; at the root, block j of
    // `send` to rank j; both borrowed for the call.
    unsafe {
        exchange(
            c,
            T_SCATTER,
            |j| (j == root).then_some((rp, blk)),
            |j| (me == root).then(|| (sp.wrapping_add(j * blk), blk)),
        )
    }
}

// ---- The v variants: a length and an offset per block ---------------------

/// Where the n blocks of a `v` collective lie in one buffer: block j is
/// `lens[j]` bytes from byte `displs[j]`.
#[derive(Clone, Copy, Debug)]
pub struct Blocks<'a> {
    pub lens: &'a [usize],
    pub displs: &'a [usize],
}

impl Blocks<'_> {
    /// Checks the table against a buffer of `buf` bytes and `n` ranks:
    /// n entries each, every block inside the buffer and, for blocks
    /// written (`disjoint`), no two overlapping.
    fn check(&self, what: &str, buf: usize, n: usize, disjoint: bool) -> Result<()> {
        if self.lens.len() != n || self.displs.len() != n {
            return Err(Error::Invalid(format!(
                "{what}: {} lengths and {} offsets for {n} ranks",
                self.lens.len(),
                self.displs.len()
            )));
        }
        let mut spans = Vec::with_capacity(n);
        for j in 0..n {
            let (d, l) = (self.displs[j], self.lens[j]);
            let end = d.checked_add(l).filter(|&e| e <= buf).ok_or_else(|| {
                Error::Invalid(format!(
                    "{what}: block {j} ({l} bytes from byte {d}) ends beyond the buffer's {buf} bytes"
                ))
            })?;
            if l > 0 {
                spans.push((d, end, j));
            }
        }
        if disjoint {
            spans.sort_unstable();
            for w in spans.windows(2) {
                if w[1].0 < w[0].1 {
                    return Err(Error::Invalid(format!(
                        "{what}: blocks {} and {} overlap (both are written)",
                        w[0].2, w[1].2
                    )));
                }
            }
        }
        Ok(())
    }

    /// Block j of the buffer at `p`.
    fn at<P: Copy>(&self, p: P, j: usize, add: fn(P, usize) -> P) -> Blk<P> {
        Some((add(p, self.displs[j]), self.lens[j]))
    }
}

/// The root's block table of a rooted `v` collective, checked.
fn root_blocks<'a>(
    blocks: Option<Blocks<'a>>,
    what: &str,
    buf: usize,
    n: usize,
    written: bool,
) -> Result<Blocks<'a>> {
    let b = blocks.ok_or_else(|| Error::Invalid("the root has no block table".into()))?;
    b.check(what, buf, n, written)?;
    Ok(b)
}

fn add_mut(p: *mut u8, k: usize) -> *mut u8 {
    p.wrapping_add(k)
}

fn add_const(p: *const u8, k: usize) -> *const u8 {
    p.wrapping_add(k)
}

/// Every rank's `send` into block r of the root's `recv` (`blocks` and
/// `recv` significant at the root only; elsewhere `blocks` may be `None`).
pub fn gatherv(
    c: &mut Comm,
    send: &[u8],
    recv: &mut [u8],
    blocks: Option<Blocks>,
    root: usize,
) -> Result<()> {
    check_root(c, root)?;
    let (n, me) = (c.size(), c.rank());
    let mut at_root = None;
    if me == root {
        let b = root_blocks(blocks, "the root's receive blocks", recv.len(), n, true)?;
        check_len("the root's own block", send.len(), b.lens[me])?;
        recv[b.displs[me]..b.displs[me] + send.len()].copy_from_slice(send);
        at_root = Some(b);
    }
    let (rp, sp, len) = (recv.as_mut_ptr(), send.as_ptr(), send.len());
    // SAFETY: at the root, block j of `recv` (checked inside it, disjoint)
    // from rank j; elsewhere `send` to the root; both borrowed for the call.
    unsafe {
        exchange(
            c,
            T_GATHERV,
            |j| at_root.and_then(|b| b.at(rp, j, add_mut)),
            |j| (j == root).then_some((sp, len)),
        )
    }
}

/// Block r of the root's `send` (with `blocks`, both significant at the
/// root only) into rank r's `recv`.
pub fn scatterv(
    c: &mut Comm,
    send: &[u8],
    blocks: Option<Blocks>,
    recv: &mut [u8],
    root: usize,
) -> Result<()> {
    check_root(c, root)?;
    let (n, me) = (c.size(), c.rank());
    let mut at_root = None;
    if me == root {
        let b = root_blocks(blocks, "the root's send blocks", send.len(), n, false)?;
        check_len("the root's receive buffer", recv.len(), b.lens[me])?;
        recv.copy_from_slice(&send[b.displs[me]..b.displs[me] + recv.len()]);
        at_root = Some(b);
    }
    let (rp, sp, len) = (recv.as_mut_ptr(), send.as_ptr(), recv.len());
    // SAFETY: elsewhere, `recv` from the root; at the root, block j of
    // `send` (checked inside it) to rank j; both borrowed for the call.
    unsafe {
        exchange(
            c,
            T_SCATTERV,
            |j| (j == root).then_some((rp, len)),
            |j| at_root.and_then(|b| b.at(sp, j, add_const)),
        )
    }
}

/// Every rank's `send` (`None`: in place, its block of `recv`) into block
/// r of every rank's `recv`, placed by `blocks` (the same table on every
/// rank).
pub fn allgatherv(
    c: &mut Comm,
    send: Option<&[u8]>,
    recv: &mut [u8],
    blocks: Blocks,
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    blocks.check("the receive blocks", recv.len(), n, true)?;
    let (d, len) = (blocks.displs[me], blocks.lens[me]);
    if let Some(s) = send {
        check_len("the send buffer", s.len(), len)?;
        recv[d..d + len].copy_from_slice(s);
    }
    let rp = recv.as_mut_ptr();
    // Others read the send buffer, not the copy just written.
    let sp = send.map_or(rp.cast_const().wrapping_add(d), <[u8]>::as_ptr);
    // SAFETY: block j of `recv` (checked inside it, disjoint from the others
    // and from my own block, which is only read) from rank j; `send` (or my
    // block of `recv`) to every rank; all live for the call.
    unsafe {
        exchange(
            c,
            T_ALLGATHERV,
            |j| blocks.at(rp, j, add_mut),
            |_| Some((sp, len)),
        )
    }
}

/// Block d of each rank's `send` (placed by `sblocks`) into block r of
/// rank d's `recv` (placed by `rblocks`).
pub fn alltoallv(
    c: &mut Comm,
    send: &[u8],
    sblocks: Blocks,
    recv: &mut [u8],
    rblocks: Blocks,
) -> Result<()> {
    let (n, me) = (c.size(), c.rank());
    sblocks.check("the send blocks", send.len(), n, false)?;
    rblocks.check("the receive blocks", recv.len(), n, true)?;
    check_len(
        "this rank's block to itself",
        sblocks.lens[me],
        rblocks.lens[me],
    )?;
    let (sd, rd, len) = (sblocks.displs[me], rblocks.displs[me], rblocks.lens[me]);
    recv[rd..rd + len].copy_from_slice(&send[sd..sd + len]);
    let (rp, sp) = (recv.as_mut_ptr(), send.as_ptr());
    // SAFETY: block j of `recv` (checked, disjoint) from rank j, block j of
    // `send` (checked) to rank j; both borrowed for the call.
    unsafe {
        exchange(
            c,
            T_ALLTOALLV,
            |j| rblocks.at(rp, j, add_mut),
            |j| sblocks.at(sp, j, add_const),
        )
    }
}

#[cfg(test)]
mod tests;
