//! Buffers for unexpected eager messages, kept for reuse.
//!
//! An eager message that arrives before its receive is copied out of the
//! sender's slot into a heap buffer, so the slot can be released at once.
//! A fresh `Vec` per message made a windowed bidirectional exchange of
//! 64 KiB messages ten times slower: freeing a buffer at the top of the heap
//! lets glibc trim it (`brk` shrinks, or `munmap` for allocations past its
//! mmap threshold), and the next message page-faults every page back in,
//! about a microsecond a page in a virtual machine, against 1.3 us for the
//! whole copy. Buffers handed back after their message was delivered stay
//! resident here instead, up to a bound on the bytes kept.

/// Bytes of buffers kept at most: a window of 64 unexpected messages of
/// 128 KiB (a large eager limit) is reused without an allocation; beyond
/// that the heap's own behaviour is fine (such jobs are not eager-bound).
const KEEP_BYTES: usize = 8 << 20;

/// Spare buffers, most recently returned last.
#[derive(Default)]
pub(crate) struct Spare {
    bufs: Vec<Vec<u8>>,
    /// Sum of the kept buffers' capacities.
    kept: usize,
}

impl Spare {
    /// A buffer holding a copy of `data`: a kept one that is large enough
    /// (the most recently returned first, whose lines are the likeliest to
    /// be in cache), else a new one.
    pub(crate) fn copy_of(&mut self, data: &[u8]) -> Vec<u8> {
        let fit = self.bufs.iter().rposition(|b| b.capacity() >= data.len());
        let mut v = match fit {
            Some(i) => {
                let v = self.bufs.swap_remove(i);
                self.kept -= v.capacity();
                v
            }
            None => Vec::with_capacity(data.len()),
        };
        v.clear();
        v.extend_from_slice(data);
        v
    }

    /// Takes back a buffer whose message was delivered; frees it instead
    /// when keeping it would pass [`KEEP_BYTES`].
    pub(crate) fn give_back(&mut self, v: Vec<u8>) {
        let cap = v.capacity();
        if cap == 0 || self.kept + cap > KEEP_BYTES {
            return;
        }
        self.kept += cap;
        self.bufs.push(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_only_when_large_enough_and_the_bound_holds() {
        let mut s = Spare::default();
        let a = s.copy_of(&[1u8; 1000]);
        let a_ptr = a.as_ptr();
        s.give_back(a);
        // A smaller message reuses the same allocation, with only its bytes.
        let b = s.copy_of(&[2u8; 10]);
        assert_eq!(b.as_ptr(), a_ptr);
        assert_eq!(b, vec![2u8; 10]);
        s.give_back(b);
        // A larger one cannot: a new buffer, the kept one stays.
        let c = s.copy_of(&[3u8; 5000]);
        assert_ne!(c.as_ptr(), a_ptr);
        assert_eq!(s.bufs.len(), 1);
        s.give_back(c);
        assert_eq!(s.kept, s.bufs.iter().map(Vec::capacity).sum::<usize>());
        // Past the bound, buffers are freed, not kept.
        for _ in 0..3 {
            s.give_back(Vec::with_capacity(KEEP_BYTES / 2));
        }
        assert!(s.kept <= KEEP_BYTES);
        assert_eq!(s.kept, s.bufs.iter().map(Vec::capacity).sum::<usize>());
    }
}
