//! Copy routines: plain copies that do not depend on the relative alignment
//! of source and destination, and non-temporal stores (x86_64 SSE2 streaming
//! stores, which bypass the cache and avoid the read-for-ownership of
//! destination lines; plain copy elsewhere).
//!
//! Why not always `memcpy`: on x86_64, glibc copies from about 2 KiB up to
//! the L2 size with `rep movsb` on CPUs that announce fast string moves
//! (ERMS/FSRM: AMD Zen 3 and later, Intel Ice Lake and later), and `rep
//! movsb` can slow down when source and destination are not aligned alike
//! (`(src ^ dst) % 64 != 0`): by 1.3x in cache on the Zen 5 dev VM, by up to
//! 20x on Zen 3 by public reports (docs/transport.md, "Job-level slow mode").
//! The transport's slots are 64-byte aligned and user buffers are wherever
//! the allocator put them (a `malloc`'d block is 16-byte aligned, its offset
//! modulo 64 depends on what the program allocated before), so with such a
//! CPU a plain `memcpy` makes a whole job fast or slow depending on its heap
//! layout. Each process therefore measures once, at its first copy in that
//! range, how much slower a mutually misaligned `memcpy` is than an aligned
//! one ([`MisalignedCost`]); where it is more than [`PATHOLOGICAL`] times
//! slower, mutually misaligned copies go through a vector loop (unaligned
//! loads, aligned stores) whose speed does not depend on the alignment.
//! Where it is not (Zen 5: the vector loop measured 15% slower than `rep
//! movsb` across cores), `memcpy` keeps them.

use std::sync::OnceLock;
use std::time::Instant;

/// Below this glibc copies with vector moves whatever the alignment.
pub const REP_MOVSB_FROM: usize = 2048;
/// A misaligned `memcpy` this many times slower than an aligned one is
/// routed around.
pub const PATHOLOGICAL: f64 = 2.0;

/// How [`copy_plain`] moves `len` bytes from `src` to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The C library's `memcpy`.
    Memcpy,
    /// The alignment-insensitive vector loop.
    Vector,
}

/// The route of a copy: the vector loop for mutually misaligned copies of
/// at least [`REP_MOVSB_FROM`] bytes when `avoid_misaligned_memcpy` (the
/// measured verdict of [`MisalignedCost`]), `memcpy` otherwise.
pub fn route(dst: *const u8, src: *const u8, len: usize, avoid_misaligned_memcpy: bool) -> Route {
    let misaligned = (dst as usize ^ src as usize) % 64 != 0;
    if avoid_misaligned_memcpy && len >= REP_MOVSB_FROM && misaligned {
        Route::Vector
    } else {
        Route::Memcpy
    }
}

/// `TOPOCOMM_COPY`: how mutually misaligned copies are routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyChoice {
    /// Measured at start-up (the default).
    Auto,
    /// Always `memcpy`.
    Memcpy,
    /// Always the vector loop (x86_64; `memcpy` elsewhere).
    Vector,
}

impl CopyChoice {
    /// Reads `TOPOCOMM_COPY`; an unknown value is an error naming it.
    pub fn from_env() -> Result<CopyChoice, String> {
        match std::env::var("TOPOCOMM_COPY") {
            Err(_) => Ok(CopyChoice::Auto),
            Ok(v) => match v.trim() {
                "auto" | "" => Ok(CopyChoice::Auto),
                "memcpy" => Ok(CopyChoice::Memcpy),
                "vector" => Ok(CopyChoice::Vector),
                _ => Err(format!(
                    "TOPOCOMM_COPY='{v}': expected auto, memcpy or vector"
                )),
            },
        }
    }
}

/// This process's measurement of `memcpy` on mutually misaligned buffers.
#[derive(Clone, Copy, Debug)]
pub struct MisalignedCost {
    /// Time of a misaligned copy over the time of an aligned one (64 KiB,
    /// in cache, best of several tries; the slower of the destination 16
    /// bytes ahead of the source within their pages and 16 bytes behind).
    pub ratio: f64,
    /// Whether mutually misaligned copies take the vector loop.
    pub avoid: bool,
    /// What decided `avoid`.
    pub choice: CopyChoice,
}

impl MisalignedCost {
    fn measure() -> MisalignedCost {
        // An invalid value was reported by Comm::start; fall back to auto.
        let choice = CopyChoice::from_env().unwrap_or(CopyChoice::Auto);
        if !cfg!(target_arch = "x86_64") {
            return MisalignedCost {
                ratio: 1.0,
                avoid: false,
                choice,
            };
        }
        const N: usize = 64 << 10;
        const PAGE: usize = 4096;
        // One allocation holds both buffers at the same offset within their
        // pages, then the destination 16 bytes ahead of the source, and the
        // source 16 bytes ahead of the destination: on Zen 3 `rep movsb` is
        // slowest where (dst - src) mod 4096 is 1 to 63 (a slot at a page
        // start copied into a malloc'd buffer 16 bytes into its page: 3
        // against 32 GB/s for 64 KiB in cache on a 2-vCPU Zen 3 VM), a
        // layout two separate allocations hit only by chance (the probe
        // read 1.07-1.19x there when it copied between two vectors).
        let mut buf = vec![0x5au8; 2 * (N + PAGE) + PAGE];
        let base = buf.as_mut_ptr();
        let s = base.wrapping_add(base.align_offset(PAGE));
        let d = s.wrapping_add(N + PAGE);
        let time = |soff: usize, doff: usize| {
            (0..7)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..4 {
                        // SAFETY: s and d lie in `buf`, page-aligned, N + PAGE
                        // apart, with N + PAGE bytes from d to the end of `buf`
                        // (its extra PAGE covers the alignment); the offsets
                        // are at most 16, so both ranges lie in `buf` and
                        // the source ends before the destination starts.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                s.wrapping_add(soff),
                                d.wrapping_add(doff),
                                N,
                            )
                        };
                    }
                    std::hint::black_box(d);
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        time(0, 0); // warm both buffers
        let aligned = time(0, 0).max(1e-9);
        let ratio = time(0, 16).max(time(16, 0)) / aligned;
        let avoid = match choice {
            CopyChoice::Auto => ratio > PATHOLOGICAL,
            CopyChoice::Memcpy => false,
            CopyChoice::Vector => true,
        };
        MisalignedCost {
            ratio,
            avoid,
            choice,
        }
    }

    /// The process-wide measurement, taken at the first call.
    pub fn get() -> MisalignedCost {
        static COST: OnceLock<MisalignedCost> = OnceLock::new();
        *COST.get_or_init(MisalignedCost::measure)
    }

    /// One line for `TOPOCOMM_VERBOSE`.
    pub fn describe(&self) -> String {
        let how = if self.avoid {
            "a vector loop"
        } else {
            "memcpy"
        };
        let why = if self.choice == CopyChoice::Auto {
            ""
        } else {
            ", set by TOPOCOMM_COPY"
        };
        format!(
            "copies between buffers aligned differently take {how} (a misaligned memcpy measured {:.2}x the time of an aligned one{why})",
            self.ratio
        )
    }
}

/// Copies `len` bytes; see the module documentation for the route taken.
///
/// # Safety
/// `src` and `dst` must be valid for `len` bytes and not overlap.
#[inline]
pub unsafe fn copy_plain(dst: *mut u8, src: *const u8, len: usize) {
    // Short copies never measure: the verdict matters from REP_MOVSB_FROM on.
    let avoid = len >= REP_MOVSB_FROM && MisalignedCost::get().avoid;
    match route(dst, src, len, avoid) {
        // SAFETY: forwarded contract.
        Route::Memcpy => unsafe { std::ptr::copy_nonoverlapping(src, dst, len) },
        // SAFETY: forwarded contract.
        Route::Vector => unsafe { copy_vector(dst, src, len) },
    }
}

/// Copies a few bytes (a cell's inline payload: at most a cache line)
/// with plain loads and stores, no call: `memcpy` through the PLT costs
/// as much as the rest of an 8-byte push. Overlapping 8-byte words cover
/// 8 bytes and up; shorter copies go byte by byte.
///
/// # Safety
/// `src` and `dst` must be valid for `len` bytes and not overlap.
#[inline]
pub unsafe fn copy_small(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: every access lies in [0, len) of both buffers (words start at
    // most at len - 8), which the caller guarantees valid and disjoint.
    unsafe {
        if len >= 8 {
            let mut off = 0;
            while off + 8 < len {
                let w = src.add(off).cast::<u64>().read_unaligned();
                dst.add(off).cast::<u64>().write_unaligned(w);
                off += 8;
            }
            let w = src.add(len - 8).cast::<u64>().read_unaligned();
            dst.add(len - 8).cast::<u64>().write_unaligned(w);
        } else {
            for i in 0..len {
                *dst.add(i) = *src.add(i);
            }
        }
    }
}

/// The vector loop: the destination is aligned first (a short `memcpy` of
/// the head), then 128 bytes per turn with unaligned loads and aligned
/// stores (AVX2 when the CPU has it, SSE2 otherwise), then the tail.
///
/// # Safety
/// `src` and `dst` must be valid for `len` bytes and not overlap.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_vector(dst: *mut u8, src: *const u8, len: usize) {
    let head = dst.align_offset(64).min(len);
    // SAFETY: head <= len, inside both buffers.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    let body = (len - head) / 128 * 128;
    // SAFETY: [head, head + body) lies inside both buffers and dst + head is
    // 64-byte aligned; AVX2 is used only where the CPU reports it.
    unsafe {
        let (d, s) = (dst.add(head), src.add(head));
        if std::is_x86_feature_detected!("avx2") {
            loop_avx2(d, s, body);
        } else {
            loop_sse2(d, s, body);
        }
        let done = head + body;
        std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), len - done);
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_vector(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

/// `len` (a multiple of 128) bytes, `dst` 32-byte aligned.
///
/// # Safety
/// Both ranges valid for `len` bytes, not overlapping; the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn loop_avx2(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_store_si256};
    let mut i = 0;
    while i < len {
        // SAFETY: i + 128 <= len; the stores are 32-byte aligned because
        // dst is and i is a multiple of 128.
        unsafe {
            let s = src.add(i) as *const __m256i;
            let d = dst.add(i) as *mut __m256i;
            let (a, b, c, e) = (
                _mm256_loadu_si256(s),
                _mm256_loadu_si256(s.add(1)),
                _mm256_loadu_si256(s.add(2)),
                _mm256_loadu_si256(s.add(3)),
            );
            _mm256_store_si256(d, a);
            _mm256_store_si256(d.add(1), b);
            _mm256_store_si256(d.add(2), c);
            _mm256_store_si256(d.add(3), e);
        }
        i += 128;
    }
}

/// `len` (a multiple of 128) bytes, `dst` 16-byte aligned.
///
/// # Safety
/// Both ranges valid for `len` bytes, not overlapping.
#[cfg(target_arch = "x86_64")]
unsafe fn loop_sse2(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_store_si128};
    let mut i = 0;
    while i < len {
        // SAFETY: i + 128 <= len; the stores are 16-byte aligned because
        // dst is and i is a multiple of 128; SSE2 is part of x86_64.
        unsafe {
            let s = src.add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            for k in 0..8 {
                _mm_store_si128(d.add(k), _mm_loadu_si128(s.add(k)));
            }
        }
        i += 128;
    }
}

/// Copies `len` bytes with streaming stores and ends with a store fence, so
/// that a following release store (which on x86 orders only ordinary
/// stores) cannot become visible before the data.
///
/// # Safety
/// `src` and `dst` must be valid for `len` bytes and not overlap.
#[cfg(target_arch = "x86_64")]
pub unsafe fn copy_nontemporal(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    if len < 256 {
        // SAFETY: forwarded contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        return;
    }
    let head = dst.align_offset(16).min(len);
    // SAFETY: all offsets stay below `len`; the streamed destination is
    // 16-byte aligned by construction; SSE2 is part of x86_64.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + 64 <= len {
            let s = src.add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            let (a, b, c, e) = (
                _mm_loadu_si128(s),
                _mm_loadu_si128(s.add(1)),
                _mm_loadu_si128(s.add(2)),
                _mm_loadu_si128(s.add(3)),
            );
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
            i += 64;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
        _mm_sfence();
    }
}

/// Fallback: plain copy on targets without streaming stores.
///
/// # Safety
/// `src` and `dst` must be valid for `len` bytes and not overlap.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn copy_nontemporal(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

/// Asks the CPU to start fetching the cache line at `p` for reading (a
/// hint: no fault, no effect on what any load returns). A receiver that
/// takes one cell of a ring per call does enough work between two cells
/// that their cache misses would not overlap on their own.
#[inline(always)]
pub fn prefetch_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults, whatever the address; it reads
    // nothing the program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above (PRFM is a hint and never faults).
    unsafe {
        std::arch::asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, readonly, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}

/// Whether this CPU has CLDEMOTE (CPUID leaf 7, ECX bit 25): a hint that
/// moves a cache line from this core's private caches to the shared one.
pub fn demote_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // CPUID is safe to call on x86_64; leaf 7 is read only where the
        // CPU reports it (max >= 7).
        let max = std::arch::x86_64::__cpuid(0).eax;
        max >= 7 && std::arch::x86_64::__cpuid_count(7, 0).ecx & (1 << 25) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Pushes the cache line at `p`, just written to publish a message, out of
/// this core's private caches into the shared cache (CLDEMOTE; a hint: no
/// fault, no effect on what any load returns, a no-op encoding on x86 CPUs
/// without it). Used on the duplex line, which both ranks of a ping-pong
/// write and spin on: the peer then reads it from the shared cache, and
/// the writer holds no copy its own spinning pulls back while the peer is
/// still between its receive and its reply (our reading of the numbers:
/// two processes ping-ponging one line on a 2-vCPU Intel Xeon VM with
/// 28-66 ns of work between a receive and the reply took 100-165 ns
/// one-way with the demote against 150-210 without; `bench p2p` 8-byte
/// latency, medians of 6 alternating runs, 0.137 against 0.186 us).
/// Demoting the ring's cells too gained nothing measurable there (each
/// cell is written once per lap, and the peer polls the next one).
#[inline(always)]
pub fn demote_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: CLDEMOTE never faults and changes no architectural state
    // (a hint, like a prefetch); it reads or writes no memory the program
    // can observe.
    unsafe {
        std::arch::asm!("cldemote [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the cache line at `p` in a writable state ahead of a store
/// (PREFETCHW on x86_64, `prfm pstl1keep` on aarch64; a hint: no fault, no
/// effect on what any load returns). The ring's cells are written once per
/// lap, each last read by the receiving core, so every store to a cell
/// first has to take the line back from it; without the hint a stream of
/// small messages waits for those transfers one after the other. Written
/// as `asm!`: `_mm_prefetch` with `_MM_HINT_ET0` becomes a read prefetch
/// unless the whole build enables the `prfchw` target feature, and CPUs
/// without PREFETCHW execute its encoding as a no-op.
#[inline(always)]
pub fn prefetch_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHW never faults (also on an unmapped address) and
    // changes no architectural state; it reads or writes no memory the
    // program can observe.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above, PRFM is a hint that never faults.
    unsafe {
        std::arch::asm!("prfm pstl1keep, [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_copies_every_length_and_nothing_past_it() {
        for len in 0..=64usize {
            for off in [0usize, 1, 7] {
                let src: Vec<u8> = (0..len + off).map(|i| (i * 37 + 5) as u8).collect();
                let mut dst = vec![0xEEu8; len + off + 16];
                // SAFETY: both buffers hold at least `len` bytes past `off`.
                unsafe { copy_small(dst.as_mut_ptr().add(off), src.as_ptr().add(off), len) };
                assert_eq!(&dst[off..off + len], &src[off..], "len {len} +{off}");
                assert!(dst[..off].iter().all(|&b| b == 0xEE), "before, len {len}");
                assert!(
                    dst[off + len..].iter().all(|&b| b == 0xEE),
                    "after, len {len}"
                );
            }
        }
    }

    #[test]
    fn plain_copies_exactly_at_every_relative_alignment() {
        for len in [0usize, 1, 63, 2047, 2048, 2049, 4096, 65_536 + 77, 300_001] {
            for soff in [0usize, 1, 16, 48, 64] {
                for doff in [0usize, 3, 16, 32, 64] {
                    let src: Vec<u8> = (0..len + soff).map(|i| (i * 131 + 17) as u8).collect();
                    let mut dst = vec![0u8; len + doff + 8];
                    // SAFETY: both buffers hold at least `len` bytes past the offsets.
                    unsafe { copy_plain(dst.as_mut_ptr().add(doff), src.as_ptr().add(soff), len) };
                    assert_eq!(
                        &dst[doff..doff + len],
                        &src[soff..],
                        "len {len} +{soff} -> +{doff}"
                    );
                    assert!(dst[..doff].iter().all(|&b| b == 0));
                    assert!(dst[doff + len..].iter().all(|&b| b == 0));
                }
            }
        }
    }

    /// The state behind the job-level slow mode must never be reached on a
    /// CPU where it is slow: a mutually misaligned copy in `rep movsb`'s
    /// range handed to `memcpy`.
    #[test]
    fn misaligned_copies_avoid_memcpy_where_it_is_slow() {
        let a = vec![0u8; 1 << 20];
        let base = a.as_ptr().wrapping_add(a.as_ptr().align_offset(64));
        let at = |k: usize| base.wrapping_add(k);
        // A slot (64-byte aligned) and a malloc'd buffer at 16 mod 64.
        assert_eq!(route(at(0), at(4096 + 16), 65_536, true), Route::Vector);
        assert_eq!(route(at(4096 + 16), at(0), 131_072, true), Route::Vector);
        assert_eq!(route(at(1), at(4096), REP_MOVSB_FROM, true), Route::Vector);
        // Aligned alike, or too short for rep movsb: memcpy's best path.
        assert_eq!(route(at(16), at(4096 + 16), 65_536, true), Route::Memcpy);
        assert_eq!(route(at(0), at(4096), 1 << 19, true), Route::Memcpy);
        assert_eq!(
            route(at(0), at(4096 + 16), REP_MOVSB_FROM - 1, true),
            Route::Memcpy
        );
        // Where the CPU does not mind (measured), memcpy keeps them.
        assert_eq!(route(at(0), at(4096 + 16), 65_536, false), Route::Memcpy);
    }

    #[test]
    fn the_vector_loop_copies_exactly() {
        for len in [2048usize, 2049, 4096 + 77, 300_001] {
            for (soff, doff) in [(0usize, 16usize), (16, 0), (3, 64), (64, 1)] {
                let src: Vec<u8> = (0..len + soff).map(|i| (i * 7 + 3) as u8).collect();
                let mut dst = vec![0u8; len + doff + 8];
                // SAFETY: both buffers hold at least `len` bytes past the offsets.
                unsafe { copy_vector(dst.as_mut_ptr().add(doff), src.as_ptr().add(soff), len) };
                assert_eq!(&dst[doff..doff + len], &src[soff..]);
                assert!(dst[doff + len..].iter().all(|&b| b == 0));
            }
        }
    }

    #[test]
    fn the_misaligned_cost_is_measured_and_explained() {
        let c = MisalignedCost::get();
        assert!(c.ratio.is_finite() && c.ratio > 0.0, "{c:?}");
        if c.choice == CopyChoice::Auto {
            assert_eq!(c.avoid, c.ratio > PATHOLOGICAL);
        }
        assert!(c.describe().contains("misaligned memcpy measured"));
    }

    #[test]
    fn nontemporal_copies_exactly() {
        for len in [0usize, 1, 255, 256, 1000, 4097, 100_003] {
            for off in [0usize, 1, 7, 16] {
                let src: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
                let mut dst = vec![0u8; len + off + 8];
                // SAFETY: both buffers hold at least `len` bytes past the offsets.
                unsafe { super::copy_nontemporal(dst.as_mut_ptr().add(off), src.as_ptr(), len) };
                assert_eq!(&dst[off..off + len], &src[..]);
                assert!(dst[off + len..].iter().all(|&b| b == 0));
            }
        }
    }
}
