//! Time predictions of the transport's protocols.

use crate::curve::Curve;
use serde::{Deserialize, Serialize};

/// The four throughputs of a pipelined two-copy transfer between one pair
/// of PUs (names from seed 001).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CopyRates {
    /// Sender loads its own recently written source: Load Hit Modified.
    pub lhm: Curve,
    /// Sender stores into shared-buffer lines the receiver read last: Store Hit Shared.
    pub shs: Curve,
    /// Receiver loads lines Modified in the sender's cache (at the pair's class): Load Miss Modified.
    pub lmm: Curve,
    /// Receiver stores into its own recently used destination: Store Hit Modified.
    pub shm: Curve,
}

impl CopyRates {
    /// Sender-side copy time of one chunk (equation 2), rates at message size `m`.
    pub fn send_chunk(&self, chunk: u64, m: u64) -> f64 {
        chunk as f64 / (self.lhm.at(m).min(self.shs.at(m)) * 1e9)
    }

    /// Receiver-side copy time of one chunk (equation 3), rates at message size `m`.
    pub fn recv_chunk(&self, chunk: u64, m: u64) -> f64 {
        chunk as f64 / (self.lmm.at(m).min(self.shm.at(m)) * 1e9)
    }
}

/// Sizes of the chunks of an `m`-byte message cut in chunks of at most
/// `chunk` bytes (the last one smaller when `m` is not a multiple).
pub fn chunk_sizes(m: u64, chunk: u64) -> Vec<u64> {
    assert!(chunk > 0, "chunk size must be positive");
    if m == 0 {
        return vec![0];
    }
    let full = m / chunk;
    let mut v = vec![chunk; full as usize];
    if m % chunk != 0 {
        v.push(m % chunk);
    }
    v
}

/// Predicted seconds of a pipelined two-copy transfer of `m` bytes with
/// chunks of `chunk` bytes (equation 1). `depth` bounds how many chunks the
/// sender may run ahead of the receiver: with depth 1 nothing overlaps.
/// `per_chunk` adds a fixed control cost (flag write + poll) per chunk.
pub fn pipelined_time(rates: &CopyRates, m: u64, chunk: u64, depth: u32, per_chunk: f64) -> f64 {
    let chunks = chunk_sizes(m, chunk);
    let s: Vec<f64> = chunks
        .iter()
        .map(|&c| rates.send_chunk(c, m) + per_chunk)
        .collect();
    let r: Vec<f64> = chunks.iter().map(|&c| rates.recv_chunk(c, m)).collect();
    if depth <= 1 {
        return s.iter().sum::<f64>() + r.iter().sum::<f64>();
    }
    // Event simulation of the bounded pipeline; with unbounded depth it
    // reduces exactly to equation 1 when S and R are constant per chunk.
    let n = chunks.len();
    let depth = depth as usize;
    let mut send_done = vec![0.0f64; n];
    let mut recv_done = vec![0.0f64; n];
    for i in 0..n {
        let prev_send = if i > 0 { send_done[i - 1] } else { 0.0 };
        // The sender reuses the buffer slot of chunk i - depth once it is read.
        let slot_free = if i >= depth {
            recv_done[i - depth]
        } else {
            0.0
        };
        send_done[i] = prev_send.max(slot_free) + s[i];
        let prev_recv = if i > 0 { recv_done[i - 1] } else { 0.0 };
        recv_done[i] = prev_recv.max(send_done[i]) + r[i];
    }
    recv_done[n - 1]
}

/// Rates of a single-copy (CMA) transfer: the receiver copies straight from
/// the sender's buffer, whose lines are Modified in the sender's cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SingleCopyRates {
    /// Load Miss Modified at the pair's class.
    pub lmm: Curve,
    /// Store Hit Modified (the receiver's destination).
    pub shm: Curve,
    /// Fixed cost of one `process_vm_readv` call (s): syscall, page pinning.
    pub per_call: f64,
    /// Extra cost per 4 KiB page (s): page-table walks in the kernel.
    pub per_page: f64,
}

/// Predicted seconds of a single-copy transfer of `m` bytes in chunks of
/// `chunk` bytes (one system call per chunk), plus `handshake` seconds for the
/// rendezvous that announces the buffer.
pub fn single_copy_time(rates: &SingleCopyRates, m: u64, chunk: u64, handshake: f64) -> f64 {
    let chunks = chunk_sizes(m, chunk);
    let bw = rates.lmm.at(m).min(rates.shm.at(m)) * 1e9;
    let pages = m.div_ceil(4096) as f64;
    handshake + chunks.len() as f64 * rates.per_call + pages * rates.per_page + m as f64 / bw
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(s_gbps: f64, r_gbps: f64) -> CopyRates {
        CopyRates {
            lhm: Curve::flat(s_gbps),
            shs: Curve::flat(s_gbps * 2.0),
            lmm: Curve::flat(r_gbps),
            shm: Curve::flat(r_gbps * 3.0),
        }
    }

    #[test]
    fn one_chunk_is_the_sum_of_both_copies() {
        let r = rates(10.0, 5.0);
        let m = 32 * 1024;
        let t = pipelined_time(&r, m, m, 8, 0.0);
        let expect = m as f64 / 10e9 + m as f64 / 5e9;
        assert!((t - expect).abs() < 1e-15, "{t} vs {expect}");
    }

    #[test]
    fn many_chunks_tend_to_the_slower_side() {
        let r = rates(10.0, 5.0);
        let m = 64 << 20;
        let t = pipelined_time(&r, m, 16 * 1024, 64, 0.0);
        let slow = m as f64 / 5e9;
        // Within one chunk of the slower side's total time.
        assert!(t >= slow && t <= slow * 1.001, "{t} vs {slow}");
        // Equation 1 exactly for constant S and R: S + (n-1) max(S,R) + R.
        let n = (m / (16 * 1024)) as f64;
        let s = 16.0 * 1024.0 / 10e9;
        let rr = 16.0 * 1024.0 / 5e9;
        assert!((t - (s + (n - 1.0) * rr + rr)).abs() < 1e-9);
    }

    #[test]
    fn depth_one_serializes_and_more_depth_never_hurts() {
        let r = rates(10.0, 8.0);
        let m = 1 << 20;
        let t1 = pipelined_time(&r, m, 64 * 1024, 1, 0.0);
        let t2 = pipelined_time(&r, m, 64 * 1024, 2, 0.0);
        let t8 = pipelined_time(&r, m, 64 * 1024, 8, 0.0);
        assert!((t1 - (m as f64 / 10e9 + m as f64 / 8e9)).abs() < 1e-12);
        assert!(t2 < t1 && t8 <= t2 + 1e-15);
    }

    #[test]
    fn chunking_and_single_copy() {
        assert_eq!(chunk_sizes(10, 4), vec![4, 4, 2]);
        assert_eq!(chunk_sizes(8, 4), vec![4, 4]);
        assert_eq!(chunk_sizes(0, 4), vec![0]);
        let sc = SingleCopyRates {
            lmm: Curve::flat(20.0),
            shm: Curve::flat(40.0),
            per_call: 1e-6,
            per_page: 0.0,
        };
        let t = single_copy_time(&sc, 1 << 20, 256 * 1024, 0.5e-6);
        let expect = 0.5e-6 + 4.0 * 1e-6 + (1u64 << 20) as f64 / 20e9;
        assert!((t - expect).abs() < 1e-15);
    }
}
