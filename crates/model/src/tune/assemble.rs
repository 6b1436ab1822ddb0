//! From per-size measurements of candidate parameter sets to one rules
//! section: a section is one setting for all sizes of a class, so it is
//! built as thresholds (eager up to E, non-temporal copies from N, single
//! copy from T) over one two-copy base (fragment, depth, buffer owner) and
//! one single-copy chunk, choosing the combination whose per-size times
//! (looked up in the measurements) are closest to the per-size winners.

use super::runner::TimePoint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use topocomm_transport::{CopyKind, Owner, Params};

/// A measured (or predicted) candidate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entry {
    pub params: Params,
    pub points: Vec<TimePoint>,
}

impl Entry {
    pub fn at(&self, size: u64) -> Option<&TimePoint> {
        self.points.iter().find(|p| p.size == size)
    }
}

/// How a message of one size travels under a parameter set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    Inline,
    TwoCopy {
        fragment: u64,
        depth: u64,
        owner_receiver: bool,
        eager: bool,
        nt: bool,
    },
    Single {
        chunk: u64,
    },
}

/// The mode of an `s`-byte message under `p`.
pub fn mode_at(p: &Params, s: u64) -> Mode {
    if s <= p.inline_max {
        return Mode::Inline;
    }
    let eager = s <= p.eager_max;
    if !eager && p.cma && s >= p.cma_threshold {
        return Mode::Single { chunk: p.cma_chunk };
    }
    Mode::TwoCopy {
        fragment: p.fragment,
        depth: p.depth,
        owner_receiver: p.buffer_owner == Owner::Receiver,
        eager,
        nt: p.copy == CopyKind::Nontemporal && s >= p.nt_threshold,
    }
}

/// The assembled section and how it was chosen.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Assembled {
    pub params: Params,
    /// Mean of ln(time / best time at that size) over the sizes: 0 when the
    /// assembled section matches every per-size winner.
    pub log_gap: f64,
    /// Per size: the mode chosen and its looked-up median time (s).
    pub per_size: Vec<(u64, String, f64)>,
}

/// Median time of each (mode, size) in the entries (the mean of medians
/// when several entries give the same mode at a size).
fn table(entries: &[Entry]) -> BTreeMap<(Mode, u64), f64> {
    let mut acc: BTreeMap<(Mode, u64), (f64, usize)> = BTreeMap::new();
    for e in entries {
        for p in &e.points {
            let m = mode_at(&e.params, p.size);
            let a = acc.entry((m, p.size)).or_insert((0.0, 0));
            a.0 += p.median;
            a.1 += 1;
        }
    }
    acc.into_iter()
        .map(|(k, (s, n))| (k, s / n as f64))
        .collect()
}

/// The per-size winners: at each size, the mode (how the message travels)
/// with the least pooled median time, as (size, mode label, seconds).
pub fn winners(entries: &[Entry], sizes: &[u64]) -> Vec<(u64, Option<String>, f64)> {
    let t = table(entries);
    sizes
        .iter()
        .map(|&s| {
            let mut best: (Option<String>, f64) = (None, f64::INFINITY);
            for ((m, size), &v) in &t {
                if *size == s && v < best.1 {
                    best = (Some(mode_label(m)), v);
                }
            }
            (s, best.0, best.1)
        })
        .collect()
}

pub fn mode_label(m: &Mode) -> String {
    match m {
        Mode::Inline => "inline".into(),
        Mode::TwoCopy {
            fragment,
            depth,
            owner_receiver,
            eager,
            nt,
        } => format!(
            "{} {}K x{}{}{}",
            if *eager { "eager" } else { "two-copy" },
            fragment >> 10,
            depth,
            if *nt { " nt" } else { "" },
            if *owner_receiver { " rcv" } else { "" }
        ),
        Mode::Single { chunk } => format!("single-copy {}K", chunk >> 10),
    }
}

/// Chooses the thresholds and base over `entries` for `sizes`; `base`
/// supplies the values not searched (inline limit, unused thresholds).
/// `None` when no combination has a time at every size.
pub fn assemble(base: &Params, entries: &[Entry], sizes: &[u64]) -> Option<Assembled> {
    let t = table(entries);
    let sizes: Vec<u64> = sizes
        .iter()
        .copied()
        .filter(|&s| s > base.inline_max)
        .collect();
    let best: Vec<f64> = winners(entries, &sizes).iter().map(|w| w.2).collect();
    let mut bases: Vec<(u64, u64, bool)> = Vec::new();
    let mut chunks: Vec<Option<u64>> = vec![None];
    for (m, _) in t.keys() {
        match *m {
            Mode::TwoCopy {
                fragment,
                depth,
                owner_receiver,
                ..
            } => {
                if !bases.contains(&(fragment, depth, owner_receiver)) {
                    bases.push((fragment, depth, owner_receiver));
                }
            }
            Mode::Single { chunk } => {
                if !chunks.contains(&Some(chunk)) {
                    chunks.push(Some(chunk));
                }
            }
            Mode::Inline => {}
        }
    }
    let thresholds: Vec<Option<u64>> = std::iter::once(None)
        .chain(sizes.iter().map(|&s| Some(s)))
        .collect();
    type Found = (f64, Params, Vec<(u64, String, f64)>);
    let mut found: Option<Found> = None;
    for &(fragment, depth, rcv) in &bases {
        // Eager limit: none, or the largest size that still goes eager.
        let eagers: Vec<u64> = std::iter::once(base.inline_max)
            .chain(sizes.iter().copied().filter(|&s| s <= fragment))
            .collect();
        for &e in &eagers {
            for &nt in &thresholds {
                for &cma in &thresholds {
                    if matches!(cma, Some(c) if c <= e) {
                        continue;
                    }
                    for &chunk in &chunks {
                        if cma.is_some() != chunk.is_some() {
                            continue;
                        }
                        let mut score = 0.0;
                        let mut rows = Vec::with_capacity(sizes.len());
                        let mut ok = true;
                        for (i, &s) in sizes.iter().enumerate() {
                            let mode = match (cma, chunk) {
                                (Some(c), Some(k)) if s > e && s >= c => Mode::Single { chunk: k },
                                _ => Mode::TwoCopy {
                                    fragment,
                                    depth,
                                    owner_receiver: rcv,
                                    eager: s <= e,
                                    nt: matches!(nt, Some(v) if s >= v),
                                },
                            };
                            match t.get(&(mode, s)) {
                                Some(&v) => {
                                    score += (v / best[i]).ln();
                                    rows.push((s, mode_label(&mode), v));
                                }
                                None => {
                                    ok = false;
                                    break;
                                }
                            }
                        }
                        if !ok {
                            continue;
                        }
                        if found.as_ref().is_none_or(|f| score < f.0 - 1e-12) {
                            let p = Params {
                                inline_max: base.inline_max,
                                eager_max: e,
                                fragment,
                                depth,
                                cma: cma.is_some(),
                                cma_threshold: cma.unwrap_or(base.cma_threshold),
                                adaptive: true,
                                cma_chunk: chunk.unwrap_or(base.cma_chunk),
                                copy: if nt.is_some() {
                                    CopyKind::Nontemporal
                                } else {
                                    CopyKind::Plain
                                },
                                nt_threshold: nt.unwrap_or(base.nt_threshold),
                                stream_out_min: base.stream_out_min,
                                buffer_owner: if rcv { Owner::Receiver } else { Owner::Sender },
                                lone_rendezvous_min: base.lone_rendezvous_min,
                                help_min: base.help_min,
                            };
                            found = Some((score, p, rows));
                        }
                    }
                }
            }
        }
    }
    found.map(|(score, params, per_size)| Assembled {
        params,
        log_gap: score / sizes.len().max(1) as f64,
        per_size,
    })
}

#[cfg(test)]
mod tests {
    use super::super::space::{single_copy, two_copy};
    use super::*;

    fn base() -> Params {
        crate::test_params()
    }

    fn entry(p: Params, times: &[(u64, f64)]) -> Entry {
        Entry {
            params: p,
            points: times
                .iter()
                .map(|&(s, t)| TimePoint::of(s, vec![t]).unwrap())
                .collect(),
        }
    }

    #[test]
    fn thresholds_follow_the_per_size_winners() {
        let b = base();
        let sizes = [4096u64, 65536, 1 << 20, 16 << 20];
        let eager = two_copy(&b, 64 << 10, 8, CopyKind::Plain, Owner::Sender, true);
        let rdv = two_copy(&b, 64 << 10, 8, CopyKind::Plain, Owner::Sender, false);
        let cma = single_copy(&b, 1 << 20);
        // Eager wins small, two-copy the middle, single copy the largest.
        let es = vec![
            entry(
                eager,
                &[
                    (4096, 1.0),
                    (65536, 5.0),
                    (1 << 20, 50.0),
                    (16 << 20, 900.0),
                ],
            ),
            entry(
                rdv,
                &[
                    (4096, 2.0),
                    (65536, 6.0),
                    (1 << 20, 50.0),
                    (16 << 20, 900.0),
                ],
            ),
            entry(
                cma,
                &[
                    (4096, 9.0),
                    (65536, 9.0),
                    (1 << 20, 60.0),
                    (16 << 20, 500.0),
                ],
            ),
        ];
        let a = assemble(&b, &es, &sizes).unwrap();
        assert!(a.params.eager_max >= 65536, "{:?}", a.params);
        assert!(a.params.cma);
        assert_eq!(a.params.cma_threshold, 16 << 20);
        assert!(a.log_gap.abs() < 1e-12);
        a.params.validate().unwrap();
        assert_eq!(a.per_size.len(), 4);
        // Without single-copy data the section stays two-copy.
        let a = assemble(&b, &es[..2], &sizes).unwrap();
        assert!(!a.params.cma);
    }
}
