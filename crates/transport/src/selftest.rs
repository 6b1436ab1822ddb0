//! Self-checks of the transport, run by `topocomm selftest` under
//! `topocomm run` (the integration tests, and `scripts/soak.py` for hours).
//!
//! [`stress`]: every rank sends a deterministic random plan of messages
//! (sizes log-uniform from 0 B to a maximum, four tags, random peers) and
//! receives what the plan says it gets with three styles in turn (any
//! source and tag; probe then an exact receive; any source with a tag),
//! checking every byte and MPI's non-overtaking order. A receive of a tag
//! never sent waits through the traffic and is then cancelled.
//!
//! [`pingpong`]: ranks 0 and 1 bounce messages of the same random sizes,
//! each filled anew, and check every byte as it arrives: the receiver is
//! waiting while the sender writes, which the stress plan (sends first,
//! receives after) seldom makes happen, so a protocol that let the receiver
//! read what the sender has not finished writing would be caught here.

use crate::{Comm, Error, Request, ANY_SOURCE, ANY_TAG};
use std::collections::{HashMap, VecDeque};

/// The parameters of a [`stress`] run; every rank must use the same.
#[derive(Clone, Copy, Debug)]
pub struct StressSpec {
    /// Seed of the random message plan.
    pub seed: u64,
    /// Messages sent by each rank.
    pub messages: usize,
    /// Largest message in bytes.
    pub max_size: usize,
}

/// What a successful [`stress`] moved, over all ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StressSummary {
    pub ranks: usize,
    pub messages: usize,
    pub bytes: u64,
}

/// Why a self-check failed.
#[derive(Debug, thiserror::Error)]
pub enum SelfTestError {
    /// A transport call failed (a dead peer, a timeout ...).
    #[error(transparent)]
    Transport(#[from] Error),
    /// The transport delivered something the plan does not allow.
    #[error("{0}")]
    Check(String),
}

macro_rules! fail {
    ($($t:tt)*) => { return Err(SelfTestError::Check(format!($($t)*))) };
}

/// splitmix64: a tiny deterministic generator every rank can replay.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Msg {
    dst: usize,
    tag: i32,
    size: usize,
}

/// Message `i` of rank `src`: destination, tag in 0..4 and a size
/// log-uniform in [0, max] (with exact 0 and max now and then).
fn message(seed: u64, n: usize, src: usize, i: usize, max: usize) -> Msg {
    let h = mix(seed ^ mix((src as u64) << 32 | i as u64));
    let dst = (h % n as u64) as usize;
    let tag = ((h >> 8) % 4) as i32;
    let r = (h >> 16) % 1000;
    let size = if r < 30 {
        0
    } else if r < 40 {
        max
    } else {
        let bits = (max.max(1) as f64).log2();
        let e = ((h >> 32) as f64 / u32::MAX as f64) * bits;
        (2f64.powf(e) as usize).min(max)
    };
    Msg { dst, tag, size }
}

fn fill(seed: u64, src: usize, i: usize, buf: &mut [u8]) {
    let base = mix(seed ^ (src as u64) << 40 ^ i as u64);
    for (k, chunk) in buf.chunks_mut(8).enumerate() {
        let v = mix(base.wrapping_add(k as u64)).to_ne_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

pub fn stress(c: &mut Comm, a: &StressSpec) -> Result<StressSummary, SelfTestError> {
    let (n, me, seed) = (c.size(), c.rank(), a.seed);
    // Expected arrivals per (source, tag), in send order (non-overtaking).
    let mut expect: HashMap<(usize, i32), VecDeque<(usize, usize)>> = HashMap::new();
    let mut total = 0;
    for src in 0..n {
        for i in 0..a.messages {
            let m = message(seed, n, src, i, a.max_size);
            if m.dst == me {
                expect
                    .entry((src, m.tag))
                    .or_default()
                    .push_back((i, m.size));
                total += 1;
            }
        }
    }
    let mut bufs: Vec<Vec<u8>> = Vec::with_capacity(a.messages);
    let mut reqs = Vec::new();
    let mut sent = Ok(());
    for i in 0..a.messages {
        let m = message(seed, n, me, i, a.max_size);
        let mut b = vec![0u8; m.size];
        fill(seed, me, i, &mut b);
        bufs.push(b);
        let b = &bufs[i];
        // SAFETY: `b`'s heap block is owned by `bufs` (it does not move when
        // `bufs` grows) and is freed only after the wait_all in
        // receive_all, or never when this rank fails (below).
        match unsafe { c.isend_raw(b.as_ptr(), b.len(), m.dst, m.tag) } {
            Ok(r) => reqs.push(r),
            Err(e) => {
                sent = Err(e.into());
                break;
            }
        }
    }
    let done = sent.and_then(|()| receive_all(c, a, expect, total, &reqs));
    if let Err(e) = done {
        // Peers may still read these buffers (single copy) until the job
        // is stopped: a rank that gives up must not hand them back to the
        // allocator, which would reuse them and make a peer's receive
        // complete with garbage instead of failing.
        std::mem::forget(bufs);
        return Err(e);
    }
    drop(bufs);
    c.barrier()?;
    let bytes = (0..n)
        .flat_map(|s| (0..a.messages).map(move |i| (s, i)))
        .map(|(s, i)| message(seed, n, s, i, a.max_size).size as u64)
        .sum();
    Ok(StressSummary {
        ranks: n,
        messages: n * a.messages,
        bytes,
    })
}

/// Receives and checks the `total` messages `expect`ed, then completes this
/// rank's sends `reqs`.
fn receive_all(
    c: &mut Comm,
    a: &StressSpec,
    mut expect: HashMap<(usize, i32), VecDeque<(usize, usize)>>,
    total: usize,
    reqs: &[Request],
) -> Result<(), SelfTestError> {
    let (n, me, seed) = (c.size(), c.rank(), a.seed);
    // A receive nobody matches (tag 77 is never sent) waits in the posted
    // queue through all the traffic, then is cancelled: matching must skip
    // it and the cancel must find it unmatched.
    let mut never = vec![0u8; 8];
    // SAFETY: `never` outlives the request, which is cancelled below before
    // `never` is dropped, and nothing touches it meanwhile.
    let parked = unsafe { c.irecv_raw(never.as_mut_ptr(), never.len(), ANY_SOURCE, 77)? };
    let mut rbuf = vec![0u8; a.max_size];
    let mut want = Vec::new();
    for k in 0..total {
        // Alternate receive styles: any/any, probe then exact, any source with a tag.
        let st = match (mix(seed ^ me as u64 ^ (k as u64) << 20)) % 3 {
            0 => c.recv(&mut rbuf, ANY_SOURCE, ANY_TAG)?,
            1 => {
                let p = c.probe(ANY_SOURCE, ANY_TAG)?;
                let mut exact = vec![0u8; p.count];
                let st = c.recv(&mut exact, p.source, p.tag)?;
                if st != p {
                    fail!("probe said {p:?}, receive got {st:?}");
                }
                rbuf[..st.count].copy_from_slice(&exact);
                st
            }
            _ => {
                let tag = (0..4)
                    .find(|t| (0..n).any(|s| expect.get(&(s, *t)).is_some_and(|q| !q.is_empty())))
                    .expect("a message is still expected");
                c.recv(&mut rbuf, ANY_SOURCE, tag)?
            }
        };
        let src = st.source as usize;
        let Some((i, size)) = expect.get_mut(&(src, st.tag)).and_then(|q| q.pop_front()) else {
            fail!("rank {me}: unexpected message {st:?}");
        };
        if size != st.count {
            fail!("rank {me}: message {i} from {src} tag {}: {} bytes, expected {size} (order or length broken)", st.tag, st.count);
        }
        want.resize(size, 0);
        fill(seed, src, i, &mut want);
        if rbuf[..size] != want[..] {
            let at = rbuf
                .iter()
                .zip(&want)
                .position(|(x, y)| x != y)
                .unwrap_or(0);
            fail!("rank {me}: message {i} from {src} ({size} bytes) corrupted at byte {at}");
        }
    }
    if !c.cancel_recv(parked)? {
        fail!("rank {me}: a receive of tag 77, never sent, matched something");
    }
    drop(never);
    c.wait_all(reqs)?;
    Ok(())
}

/// Ranks 0 and 1 send each other `a.messages` messages in turn (sizes as in
/// [`stress`], from rank 0's plan), each filled with fresh data; the
/// receiver checks every byte. Other ranks only take part in the final
/// barrier. Returns what moved (both directions).
pub fn pingpong(c: &mut Comm, a: &StressSpec) -> Result<StressSummary, SelfTestError> {
    let (me, seed) = (c.rank(), a.seed);
    let mut summary = StressSummary {
        ranks: c.size(),
        messages: 0,
        bytes: 0,
    };
    if c.size() < 2 {
        fail!(
            "the pingpong self-check needs 2 ranks or more, got {}",
            c.size()
        );
    }
    if me < 2 {
        let peer = 1 - me;
        let mut sbuf = vec![0u8; a.max_size];
        let mut rbuf = vec![0u8; a.max_size];
        let mut want = vec![0u8; a.max_size];
        for i in 0..a.messages {
            let size = message(seed, 2, 0, i, a.max_size).size;
            // Message i goes from rank i % 2 to the other.
            let sender = i % 2;
            if me == sender {
                fill(seed, me, i, &mut sbuf[..size]);
                c.send(&sbuf[..size], peer, 1)?;
            } else {
                // Stale bytes from the last message must not pass.
                rbuf[..size].fill(!0);
                let st = c.recv(&mut rbuf, peer as i32, 1)?;
                if st.count != size {
                    fail!(
                        "rank {me}: message {i} from rank {peer}: {} bytes, expected {size}",
                        st.count
                    );
                }
                fill(seed, peer, i, &mut want[..size]);
                if let Some(k) = (0..size).find(|&k| rbuf[k] != want[k]) {
                    fail!("rank {me}: message {i} from rank {peer} ({size} bytes) differs at byte {k}");
                }
            }
            summary.messages += 1;
            summary.bytes += size as u64;
        }
    }
    c.barrier()?;
    Ok(summary)
}
