//! The search space: candidate parameter sets of one class. A two-copy
//! candidate fixes fragment, depth, copy routine, buffer owner and whether
//! messages up to one fragment go eager; a single-copy candidate forces
//! every message above the inline limit through `process_vm_readv` in
//! chunks of a given size. Per-size winners among them are later assembled
//! into thresholds ([`super::assemble`]).

use topocomm_transport::{CopyKind, Owner, Params};

/// The values each dimension takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    pub fragments: Vec<u64>,
    pub depths: Vec<u64>,
    pub copies: Vec<CopyKind>,
    pub owners: Vec<Owner>,
    /// Eager up to one fragment (`true`) or rendezvous above the inline limit (`false`).
    pub eager: Vec<bool>,
    pub cma_chunks: Vec<u64>,
}

impl Space {
    /// The full grid (240 two-copy + 4 single-copy sets) or the quick one (16 + 2).
    pub fn new(quick: bool) -> Space {
        if quick {
            Space {
                fragments: vec![32 << 10, 128 << 10],
                depths: vec![4, 16],
                copies: vec![CopyKind::Plain, CopyKind::Nontemporal],
                owners: vec![Owner::Sender],
                eager: vec![true, false],
                cma_chunks: vec![1 << 20, 16 << 20],
            }
        } else {
            Space {
                fragments: (0..6).map(|i| (16 << 10) << i).collect(),
                depths: vec![2, 4, 8, 16, 32],
                copies: vec![CopyKind::Plain, CopyKind::Nontemporal],
                owners: vec![Owner::Sender, Owner::Receiver],
                eager: vec![true, false],
                cma_chunks: vec![256 << 10, 1 << 20, 4 << 20, 16 << 20],
            }
        }
    }

    pub fn size(&self) -> usize {
        self.fragments.len()
            * self.depths.len()
            * self.copies.len()
            * self.owners.len()
            * self.eager.len()
            + self.cma_chunks.len()
    }
}

/// A two-copy candidate over `base` (which supplies inline_max).
pub fn two_copy(
    base: &Params,
    fragment: u64,
    depth: u64,
    copy: CopyKind,
    owner: Owner,
    eager: bool,
) -> Params {
    Params {
        inline_max: base.inline_max,
        eager_max: if eager { fragment } else { base.inline_max },
        fragment,
        depth,
        cma: false,
        cma_threshold: base.cma_threshold,
        adaptive: false,
        cma_chunk: base.cma_chunk,
        copy,
        nt_threshold: if copy == CopyKind::Nontemporal {
            0
        } else {
            base.nt_threshold
        },
        stream_out_min: base.stream_out_min,
        buffer_owner: owner,
        lone_rendezvous_min: base.lone_rendezvous_min,
        help_min: base.help_min,
    }
}

/// A single-copy candidate: everything above the inline limit by CMA.
pub fn single_copy(base: &Params, chunk: u64) -> Params {
    Params {
        eager_max: base.inline_max,
        cma: true,
        cma_threshold: 0,
        // A candidate is measured as it is, not as the receiver would mix it.
        adaptive: false,
        cma_chunk: chunk,
        ..base.clone()
    }
}

/// Every candidate of the space, two-copy first.
pub fn grid(base: &Params, s: &Space) -> Vec<Params> {
    let mut v = Vec::with_capacity(s.size());
    for &f in &s.fragments {
        for &d in &s.depths {
            for &c in &s.copies {
                for &o in &s.owners {
                    for &e in &s.eager {
                        v.push(two_copy(base, f, d, c, o, e));
                    }
                }
            }
        }
    }
    for &k in &s.cma_chunks {
        v.push(single_copy(base, k));
    }
    v
}

/// The order in which the grid search measures the candidates: a stride
/// through the list coprime with its length (about 0.618 of it), so that a
/// search cut short by its budget has still sampled every region of the
/// space instead of only the first fragment sizes.
pub fn spread_order(n: usize) -> Vec<usize> {
    if n <= 2 {
        return (0..n).collect();
    }
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut step = ((n as f64) * 0.618).round() as usize;
    while gcd(step, n) != 1 {
        step += 1;
    }
    (0..n).map(|i| i * step % n).collect()
}

/// Neighbours of `x` in a sorted list of values: the value itself and the
/// ones just below and above it (or the nearest value when absent).
pub fn around(list: &[u64], x: u64) -> Vec<u64> {
    let i = list
        .iter()
        .enumerate()
        .min_by_key(|(_, v)| (**v as i128 - x as i128).unsigned_abs())
        .map(|(i, _)| i)
        .unwrap_or(0);
    let lo = i.saturating_sub(1);
    let hi = (i + 1).min(list.len().saturating_sub(1));
    let mut v: Vec<u64> = list[lo..=hi].to_vec();
    v.dedup();
    v
}

/// Short description of a candidate for tables.
pub fn label(p: &Params) -> String {
    let kib = |b: u64| format!("{}K", b >> 10);
    if p.cma && p.cma_threshold <= p.eager_max.max(p.inline_max) + 1 {
        return format!("single-copy chunk {}", kib(p.cma_chunk));
    }
    let mut s = format!(
        "{} x{} {} {}{}",
        kib(p.fragment),
        p.depth,
        match p.copy {
            CopyKind::Plain => "plain",
            CopyKind::Nontemporal => "nt",
        },
        match p.buffer_owner {
            Owner::Sender => "snd",
            Owner::Receiver => "rcv",
        },
        if p.eager_max > p.inline_max {
            format!(" eager<={}", kib(p.eager_max))
        } else {
            " no-eager".into()
        }
    );
    if p.cma {
        s.push_str(&format!(
            " cma>={} chunk {}",
            kib(p.cma_threshold),
            kib(p.cma_chunk)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Params {
        crate::test_params()
    }

    #[test]
    fn grid_is_valid_and_complete() {
        for quick in [true, false] {
            let s = Space::new(quick);
            let g = grid(&base(), &s);
            assert_eq!(g.len(), s.size());
            for p in &g {
                p.validate().unwrap();
            }
            let mut d = g.clone();
            d.dedup();
            assert_eq!(d.len(), g.len());
        }
        assert_eq!(Space::new(false).size(), 244);
        for n in [0, 1, 2, 18, 244] {
            let mut o = spread_order(n);
            o.sort_unstable();
            assert_eq!(o, (0..n).collect::<Vec<_>>());
        }
        assert_eq!(around(&[1, 2, 4, 8], 4), vec![2, 4, 8]);
        assert_eq!(around(&[1, 2, 4, 8], 1), vec![1, 2]);
        assert_eq!(around(&[1, 2, 4, 8], 100), vec![4, 8]);
    }
}
