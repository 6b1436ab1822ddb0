//! Copy routines: plain `memcpy` and non-temporal stores (x86_64 SSE2
//! streaming stores, which bypass the cache and avoid the read-for-ownership
//! of destination lines; plain copy elsewhere).

/// Copies `len` bytes with ordinary loads and stores.
///
/// # Safety
/// `src` and `dst` must be valid for `len` bytes and not overlap.
#[inline]
pub unsafe fn copy_plain(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
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
        unsafe { copy_plain(dst, src, len) };
        return;
    }
    let head = dst.align_offset(16).min(len);
    // SAFETY: all offsets stay below `len`; the streamed destination is
    // 16-byte aligned by construction; SSE2 is part of x86_64.
    unsafe {
        copy_plain(dst, src, head);
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
        copy_plain(dst.add(i), src.add(i), len - i);
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
    unsafe { copy_plain(dst, src, len) }
}

#[cfg(test)]
mod tests {
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
