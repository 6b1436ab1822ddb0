//! Per-message choice between the rendezvous protocols — the pipelined
//! two-copy stream through the fragment slots (copied out of the slots with
//! plain stores, or with streaming stores for large messages) and the
//! receiver's single copy with `process_vm_readv` (CMA) — from what the
//! receiver measured on the same channel, for messages of the same size
//! class.
//!
//! Why measure instead of trusting the plan's threshold: which protocol is
//! faster depends on the cache state the two cores are in, and on virtual
//! machines on where the host runs the vCPUs at the moment. On a 2-vCPU
//! Zen VM the host moves busy vCPUs between a near state (two-copy 21 GB/s
//! at 64 KiB, CMA 7) and a far one (two-copy 5 GB/s, CMA 7) within seconds
//! (docs/transport.md, "Job-level slow mode"): any fixed threshold loses
//! up to 3x in one of the states. Streaming stores win only once a message
//! and its copy no longer fit the last-level cache together (on the same
//! VM with a 32 MiB L3: 2.3x faster at 12-16 MiB, 0.75x at 8 MiB, where
//! plain stores ran 20-47 GB/s depending on the moment). The receiver makes
//! the choice because it is the side that acts first in both protocols (it
//! reads the sender's buffer, or it sends the CTS) and the one that copies
//! out of the slots, so the wire format does not change.
//!
//! The rule: per size class (power of two), keep an estimate of the cost
//! per byte of each protocol, use the cheapest, and now and then try
//! another (exploration, in turn among the others allowed for the
//! message: two messages on it, the second timed, so that the try measures
//! the state the protocol makes for itself), whose measurement then
//! replaces that protocol's estimate. An
//! exploration that confirms the loser doubles the interval to the next one
//! (up to 64 messages, so a stable machine pays at most two messages in 66
//! on a slower protocol, and further while those two cost over 1 % of the
//! time, as long as a try still comes every 20 ms: [`interval_cap`]), and
//! once every protocol allowed has been measured starts it where the tries
//! cost at most 5 % ([`EARLY_SHARE`]) rather than doubling up from two
//! messages, which in a short job of large messages made a try of every
//! few messages; one that finds the loser now faster resets it. Samples
//! of the protocol in use are averaged (weight 1/4) and
//! clamped to twice the current estimate so that one preempted transfer
//! cannot flip the choice on its own, while a real change of state (a few
//! times slower every message) still moves the estimate within a handful of
//! messages.

/// Size classes: `floor(log2(len))`, lengths of 2^31 bytes and above share
/// the last class.
const CLASSES: usize = 32;
/// Messages on the preferred protocol before the first try of another.
const FIRST_INTERVAL: u32 = 2;
/// Interval after an exploration that changed the preferred protocol.
const MIN_INTERVAL: u32 = 4;
/// Longest interval between two explorations of a size class while the
/// loser is close, or its messages long ([`interval_cap`]).
const BASE_MAX_INTERVAL: u32 = 64;
/// Longest interval between two explorations of a size class in any case.
const MAX_INTERVAL: u32 = 1024;
/// Share of a size class's time that confirming tries may cost before the
/// interval grows past [`BASE_MAX_INTERVAL`].
const TRY_SHARE: f32 = 0.01;
/// Time on the preferred protocol within which a try comes in any case
/// (beyond [`BASE_MAX_INTERVAL`] messages): the VMs' host moves the vCPUs
/// between states every second or so.
const REACT_NS: f32 = 20e6;
/// Share of a size class's time that tries may cost right after every
/// protocol allowed has been measured and the one tried confirmed a loser:
/// the interval starts there rather than doubling up from
/// [`FIRST_INTERVAL`], which in a short job of large messages put tries at
/// messages 3, 9 and 19: 2-rank 16 MiB allgathers on the 2-vCPU Intel
/// Xeon VM, timed in 5 samples of 3-5 calls, took 1.15x Open MPI's time
/// with them, 1.00x with this (docs/transport.md, "The first tries of a
/// short job").
const EARLY_SHARE: f32 = 0.05;

/// The longest interval after a try that found protocol cost `loser`
/// (nanoseconds per byte) against the best's `best`, for messages of `len`
/// bytes. A try is two messages on the loser in place of two on the best,
/// `2 (loser / best - 1)` messages' worth of time lost per interval: one
/// in 64 messages cost 3.7 % of a 256 KiB ping-pong where two-copy takes
/// 2.2x single copy's time (2-vCPU Intel Xeon VM, 2026-11-30), so the
/// interval grows until tries cost [`TRY_SHARE`], as long as a try still
/// comes within [`REACT_NS`] of messages, and never beyond
/// [`MAX_INTERVAL`]; where either bound is under [`BASE_MAX_INTERVAL`]
/// messages, that is the interval.
fn interval_cap(loser: f32, best: f32, len: usize) -> u32 {
    let by_share = interval_for_share(loser, best, TRY_SHARE);
    let by_time = REACT_NS / (best * len.max(1) as f32);
    let cap = by_share.min(by_time);
    if cap.is_nan() || cap <= BASE_MAX_INTERVAL as f32 {
        BASE_MAX_INTERVAL
    } else {
        cap.min(MAX_INTERVAL as f32) as u32
    }
}

/// Messages per try at which tries of a protocol that costs `loser`
/// against the best's `best` cost `share` of the time: a try is two
/// messages on the loser in place of two on the best.
fn interval_for_share(loser: f32, best: f32, share: f32) -> f32 {
    2.0 * (loser / best - 1.0) / share
}

/// The interval at which tries cost [`EARLY_SHARE`] of the time.
fn early_interval(loser: f32, best: f32) -> u32 {
    let n = interval_for_share(loser, best, EARLY_SHARE);
    if n.is_nan() || n < 0.0 {
        0
    } else {
        n.min(MAX_INTERVAL as f32) as u32
    }
}

/// Posted receives [`crate::comm::Comm::pair_choice`] looks through for
/// one from the peer: a hint needs no more, and a send must not pay for an
/// application's long list of posted receives.
const POSTED_SCAN: usize = 64;

/// The rendezvous protocols the receiver chooses between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rdv {
    /// Two-copy through the slots, copied out with plain stores.
    TwoCopy = 0,
    /// Single copy (`process_vm_readv`).
    Cma = 1,
    /// Two-copy through the slots, copied out with streaming stores.
    Stream = 2,
}

const PROTOS: [Rdv; 3] = [Rdv::TwoCopy, Rdv::Cma, Rdv::Stream];

/// Which protocols one message may use (two-copy always may).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Allowed {
    pub(crate) cma: bool,
    pub(crate) stream: bool,
}

impl Allowed {
    pub(crate) fn has(self, p: Rdv) -> bool {
        match p {
            Rdv::TwoCopy => true,
            Rdv::Cma => self.cma,
            Rdv::Stream => self.stream,
        }
    }
}

/// What one rendezvous message will use, whether it is a try of a
/// protocol not currently estimated the cheapest, and whether it was picked
/// from the estimates of exchanges (its cost is recorded there too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pick {
    pub(crate) proto: Rdv,
    pub(crate) explore: bool,
    pub(crate) exchange: bool,
    /// The first message of a try: it runs the protocol tried, untimed
    /// ([`Chooser::record`] ignores it).
    pub(crate) settle: bool,
}

#[derive(Clone, Copy)]
struct Class {
    /// Estimated nanoseconds per byte of each [`Rdv`]; NaN = not measured.
    cost: [f32; 3],
    /// Messages since the last exploration.
    since: u32,
    /// Messages between two explorations.
    interval: u32,
    /// The protocol index the last exploration started its turn from.
    turn: u8,
    /// A try begun: its first message ran (untimed), the next one is the
    /// timed try of this protocol index.
    trying: Option<u8>,
    /// The protocols the last message of the class was allowed.
    allowed: Allowed,
}

const FRESH: Class = Class {
    cost: [f32::NAN; 3],
    since: 0,
    interval: FIRST_INTERVAL,
    turn: 0,
    trying: None,
    allowed: Allowed {
        cma: false,
        stream: false,
    },
};

/// The estimates of one channel (sender -> this rank), allocated on the
/// channel's first rendezvous message so that jobs with many ranks pay only
/// for the pairs that exchange large messages.
///
/// Two sets: messages of an exchange (this rank sending large messages to
/// the channel's sender too) and the others (one-way streams, ping-pongs).
/// The protocols cost different things in the two: one way or in turns,
/// two-copy's copy-in and copy-out overlap on two otherwise idle CPUs, in
/// an exchange both copies take CPUs that also move the other direction.
/// With one set, what a ping-pong had measured was the estimate an
/// exchange started from and explored away from only slowly: `topocomm
/// bench-worker p2p --tests latency,bw,bibw` at 4 MiB on the 2-vCPU Intel
/// Xeon VM received 80 % of the bibw messages by two-copy at 8-11 GB/s,
/// where bibw alone read 94 % by single copy at 13-17 GB/s.
#[derive(Default)]
pub(crate) struct Chooser {
    classes: Option<Box<[[Class; CLASSES]; 2]>>,
}

fn class_of(len: usize) -> usize {
    (usize::BITS - 1 - len.max(1).leading_zeros()).min(CLASSES as u32 - 1) as usize
}

impl Class {
    /// The measured protocol among `allowed` with the lowest estimate.
    fn cheapest(&self, allowed: Allowed) -> Option<Rdv> {
        PROTOS
            .into_iter()
            .filter(|&p| allowed.has(p) && !self.cost[p as usize].is_nan())
            .min_by(|&a, &b| self.cost[a as usize].total_cmp(&self.cost[b as usize]))
    }
}

impl Chooser {
    /// The protocol for a message of `len` bytes among `allowed`;
    /// `planned` is what the plan's static thresholds say, used until one
    /// of the allowed protocols has been measured.
    /// `exchange`: the message is part of an exchange (the estimates of
    /// exchanges are used and the cost is recorded there).
    pub(crate) fn pick(
        &mut self,
        len: usize,
        planned: Rdv,
        allowed: Allowed,
        exchange: bool,
    ) -> Pick {
        let c = &mut self
            .classes
            .get_or_insert_with(|| Box::new([[FRESH; CLASSES]; 2]))[usize::from(exchange)]
            [class_of(len)];
        c.allowed = allowed;
        let best = c.cheapest(allowed).unwrap_or(planned);
        if let Some(t) = c.trying.take() {
            let p = PROTOS[t as usize];
            if allowed.has(p) && p != best {
                return Pick {
                    proto: p,
                    explore: true,
                    exchange,
                    settle: false,
                };
            }
        }
        if c.since >= c.interval {
            // The next allowed protocol after the last one tried, other
            // than the best: each loser is tried in turn.
            let next = (1..=3)
                .map(|k| PROTOS[(c.turn as usize + k) % 3])
                .find(|&p| p != best && allowed.has(p));
            if let Some(p) = next {
                c.since = 0;
                c.turn = p as u8;
                // A try is two messages on the protocol, the second timed:
                // the first meets the state the preferred protocol left
                // (after two-copy, the sender's buffer in its own cache
                // from its copies into the slots), which made single copy
                // look 1.3-1.6x slower than it runs when used (1 MiB
                // ping-pong, 2-vCPU Intel Xeon VM).
                c.trying = Some(p as u8);
                return Pick {
                    proto: p,
                    explore: false,
                    exchange,
                    settle: true,
                };
            }
        }
        c.since += 1;
        Pick {
            proto: best,
            explore: false,
            exchange,
            settle: false,
        }
    }

    /// Records that `pick` moved `len` bytes in `ns` nanoseconds.
    pub(crate) fn record(&mut self, len: usize, pick: Pick, ns: u64) {
        let Some(classes) = self.classes.as_mut() else {
            return;
        };
        if pick.settle {
            return;
        }
        let c = &mut classes[usize::from(pick.exchange)][class_of(len)];
        let i = pick.proto as usize;
        let sample = ns.max(1) as f32 / len.max(1) as f32;
        let old = c.cost[i];
        c.cost[i] = if old.is_nan() || pick.explore {
            // A try looks at a protocol whose estimate may be many messages
            // old (a machine state ago): it replaces it. A preempted try only
            // delays the next one; a clamped or averaged one would keep a
            // stale low estimate that wins again and again.
            sample
        } else {
            old + (sample.min(2.0 * old) - old) * 0.25
        };
        if pick.explore {
            // The best of the others (NaN when none is measured).
            let other = (0..3)
                .filter(|&k| k != i)
                .map(|k| c.cost[k])
                .fold(f32::NAN, f32::min);
            c.interval = if other.is_nan() || c.cost[i] < other {
                MIN_INTERVAL
            } else {
                let all_measured = PROTOS
                    .into_iter()
                    .all(|p| !c.allowed.has(p) || !c.cost[p as usize].is_nan());
                let early = if all_measured {
                    early_interval(c.cost[i], other)
                } else {
                    // A protocol not yet tried may be the best: the next
                    // try (of it, in turn) comes soon.
                    0
                };
                (c.interval * 2)
                    .max(early)
                    .min(interval_cap(c.cost[i], other, len))
            };
        }
    }

    /// The protocol the size class of `len` would use now among `allowed`
    /// in an exchange or not, or `None` before its first measurement.
    pub(crate) fn preferred(&self, len: usize, allowed: Allowed, exchange: bool) -> Option<Rdv> {
        self.classes.as_ref()?[usize::from(exchange)][class_of(len)].cheapest(allowed)
    }
}

/// The protocol a rendezvous request asks its receiver to use, in bits 8-9
/// of the request's third word (bit 0: single copy allowed; bit 10: the
/// message is an answer, `Comm::answers`); 0 asks for nothing. See
/// [`crate::comm::Comm::pair_choice`].
pub(crate) fn encode_request(cma: bool, ask: Option<Rdv>, answer: bool) -> u64 {
    u64::from(cma) | ask.map_or(0, |p| (p as u64 + 1) << 8) | u64::from(answer) << 10
}

/// The inverse of [`encode_request`]: (single copy allowed, protocol
/// asked, an answer).
pub(crate) fn decode_request(word: u64) -> (bool, Option<Rdv>, bool) {
    let ask = match (word >> 8) & 3 {
        1 => Some(Rdv::TwoCopy),
        2 => Some(Rdv::Cma),
        3 => Some(Rdv::Stream),
        _ => None,
    };
    (word & 1 != 0, ask, word & (1 << 10) != 0)
}

impl crate::comm::Comm {
    /// Whether this rank is sending large messages to `dst` now:
    /// rendezvous sends waiting for their CTS or FIN, or two-copy streams
    /// it is filling.
    pub(crate) fn sending_large_to(&self, dst: usize) -> bool {
        let o = &self.outs[dst];
        !o.rdv.is_empty() || !o.streams.is_empty()
    }

    /// Whether this rank is receiving from `src` now: a receive posted for
    /// it (among the first [`POSTED_SCAN`]), or a stream or a single copy
    /// read from it under way.
    pub(crate) fn receiving_from(&self, src: usize) -> bool {
        !self.ins[src].streams.is_empty()
            || self.deferred.iter().any(|d| d.src == src)
            || self.posted.iter().take(POSTED_SCAN).any(|&idx| {
                matches!(self.reqs[idx as usize].kind,
                    crate::request::ReqKind::Recv { src: s, .. }
                        if s == src as i32 || s == crate::comm::ANY_SOURCE)
            })
    }

    /// The protocol this rank asks `dst` to read a rendezvous message of
    /// `len` bytes with (`cma`: the message allows single copy), or `None`
    /// to leave the choice to `dst`.
    ///
    /// Two ranks exchanging large messages each choose how to receive, and
    /// each choice changes the other's costs: the sender of a two-copy
    /// stream copies into the slots with the CPU that also receives. Chosen
    /// apart, the two settled on opposite protocols (one reading by single
    /// copy and feeding the other's two-copy stream), each the cheaper for
    /// its side in that state, together slower than either protocol on both
    /// sides: 4 MiB bibw 8.1 GB/s against 14.3 single copy both ways and 9.7
    /// two-copy both ways on a 2-vCPU Intel Xeon VM. So the pair decides as
    /// one: the lower rank of an exchange asks the higher one to receive the
    /// way its own measurements (of the pair's copying, progress.rs,
    /// `stream_done`) found cheapest for the size class, and the higher rank
    /// follows without measuring, so the lower rank measures the state both
    /// are in (its tries of the other protocol are not followed).
    /// Asked only while this rank receives from `dst` (a receive posted for
    /// it, or its message being read): a one-way stream keeps the
    /// receiver's own choice.
    pub(crate) fn pair_choice(&self, dst: usize, len: usize, cma: bool) -> Option<Rdv> {
        let i = &self.ins[dst];
        if dst <= self.rank || i.plan.adaptive == 0 {
            return None;
        }
        let allowed = Allowed {
            cma: cma && !i.cma_failed,
            stream: len as u64 >= i.plan.stream_out_min,
        };
        // The estimate first: without one there is nothing to ask, and the
        // scan of the posted receives is skipped.
        // The estimates of exchanges (one set on a crowded node: recv.rs).
        i.chooser
            .preferred(len, allowed, !self.crowded)
            .filter(|_| self.receiving_from(dst))
    }

    /// Rendezvous messages this rank received so far: (two-copy, single
    /// copy, tries of the protocol then estimated slower).
    pub fn rendezvous_counts(&self) -> (u64, u64, u64) {
        let [two, one, tries] = self.rdv_counts;
        (two, one, tries)
    }

    /// One line for `TOPOCOMM_VERBOSE` at finalize.
    pub(crate) fn say_rendezvous(&self) {
        let [two, one, tries] = self.rdv_counts;
        if self.help_given > 0 {
            crate::say!(
                "topocomm: rank {}: wrote {} pieces of its messages into their receivers (helped single copy)",
                self.rank,
                self.help_given
            );
        }
        if two + one > 0 {
            crate::say!(
                "topocomm: rank {}: received {} rendezvous messages: {two} two-copy, {one} single copy ({tries} tries of the protocol then estimated slower){}{}{}{}{}",
                self.rank,
                two + one,
                if self.helped_reads > 0 {
                    format!("; {} single copy ones helped by the sender", self.helped_reads)
                } else {
                    String::new()
                },
                if self.rdv_streamed > 0 {
                    format!("; {} two-copy ones copied out with streaming stores", self.rdv_streamed)
                } else {
                    String::new()
                },
                if self.rdv_followed > 0 {
                    format!("; {} the way the sender asked (an exchange)", self.rdv_followed)
                } else {
                    String::new()
                },
                if self.rdv_answers > 0 {
                    format!("; {} answers within the eager limit", self.rdv_answers)
                } else {
                    String::new()
                },
                if self.rdv_weighed_pair > 0 {
                    format!(
                        "; {} timed two-copy ones weighed by both sides' copying (an exchange)",
                        self.rdv_weighed_pair
                    )
                } else {
                    String::new()
                }
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: Allowed = Allowed {
        cma: true,
        stream: false,
    };
    const ALL: Allowed = Allowed {
        cma: true,
        stream: true,
    };

    /// Sends `n` messages of `len` bytes through `ch`, with `cost(p)` the
    /// nanoseconds per byte of each protocol; returns how many used each.
    fn run(
        ch: &mut Chooser,
        n: usize,
        len: usize,
        planned: Rdv,
        allowed: Allowed,
        cost: impl Fn(Rdv) -> f32,
    ) -> [usize; 3] {
        let mut used = [0; 3];
        for _ in 0..n {
            let p = ch.pick(len, planned, allowed, false);
            assert!(allowed.has(p.proto), "{p:?} not allowed");
            used[p.proto as usize] += 1;
            ch.record(len, p, (cost(p.proto) * len as f32) as u64);
        }
        used
    }

    fn two_or_cma(cma: f32, two: f32) -> impl Fn(Rdv) -> f32 {
        move |p| if p == Rdv::Cma { cma } else { two }
    }

    #[test]
    fn a_request_word_carries_the_single_copy_flag_and_the_protocol_asked() {
        for cma in [false, true] {
            for ask in [None, Some(Rdv::TwoCopy), Some(Rdv::Cma), Some(Rdv::Stream)] {
                for answer in [false, true] {
                    assert_eq!(
                        decode_request(encode_request(cma, ask, answer)),
                        (cma, ask, answer)
                    );
                }
            }
        }
        // The word of a request that asks nothing is the old flag itself.
        assert_eq!(encode_request(true, None, false), 1);
        assert_eq!(encode_request(false, None, false), 0);
    }

    #[test]
    fn size_classes_are_powers_of_two() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(1), 0);
        assert_eq!(class_of(65535), 15);
        assert_eq!(class_of(65536), 16);
        assert_eq!(class_of(usize::MAX), CLASSES - 1);
    }

    #[test]
    fn the_plan_decides_until_measured_and_the_cheaper_protocol_wins() {
        let mut ch = Chooser::default();
        assert_eq!(ch.preferred(1 << 16, TWO, false), None);
        let first = ch.pick(1 << 16, Rdv::Cma, TWO, false);
        assert_eq!(
            first,
            Pick {
                proto: Rdv::Cma,
                explore: false,
                exchange: false,
                settle: false
            }
        );
        ch.record(1 << 16, first, 3 << 16);
        // Two-copy is 3x cheaper here: the plan's CMA loses quickly.
        let used = run(&mut ch, 1000, 1 << 16, Rdv::Cma, TWO, two_or_cma(3.0, 1.0));
        assert_eq!(ch.preferred(1 << 16, TWO, false), Some(Rdv::TwoCopy));
        // At most one try (two messages) in BASE_MAX_INTERVAL (plus the
        // first tries) on CMA.
        let cma = used[Rdv::Cma as usize];
        assert!(
            cma <= 2 * (1000 / BASE_MAX_INTERVAL as usize) + 12,
            "{cma} of 1000 on CMA"
        );
        assert_eq!(used[Rdv::Stream as usize], 0, "streaming not allowed");
        // Another size class is untouched.
        assert_eq!(ch.preferred(1 << 20, TWO, false), None);
    }

    /// Tries of the loser among `n` messages of `len` bytes where single
    /// copy costs `cma` ns per byte and two-copy `two`, once settled.
    fn tries_once_settled(len: usize, cma: f32, two: f32, n: usize) -> usize {
        let mut ch = Chooser::default();
        run(&mut ch, 2000, len, Rdv::Cma, TWO, two_or_cma(cma, two));
        assert_eq!(ch.preferred(len, TWO, false), Some(Rdv::Cma));
        run(&mut ch, n, len, Rdv::Cma, TWO, two_or_cma(cma, two))[Rdv::TwoCopy as usize] / 2
    }

    #[test]
    fn tries_thin_out_while_the_loser_loses_by_far_yet_come_every_20_ms() {
        // 256 KiB, two-copy 2.25x single copy's 10.5 us (the 2-vCPU Intel
        // Xeon VM's ping-pong): tries cost at most about 1 % of the time,
        // one in 250 messages, where one in 64 cost 3.9 %.
        let far = tries_once_settled(1 << 18, 0.04, 0.09, 10_000);
        assert!((36..=44).contains(&far), "{far} tries in 10000 messages");
        // A close loser (1.2x): one try in 64 messages, as before.
        let close = tries_once_settled(1 << 18, 0.04, 0.048, 10_000);
        assert!(
            (150..=160).contains(&close),
            "{close} tries in 10000 messages"
        );
        // 16 MiB messages of 1.7 ms: 64 messages take longer than 20 ms,
        // so one try in 64 however far the loser is.
        let long = tries_once_settled(16 << 20, 0.1, 0.3, 1000);
        assert!((15..=16).contains(&long), "{long} tries in 1000 messages");
        // Single copy 10x two-copy's time at 64 KiB: the longest interval.
        let farthest = tries_once_settled(1 << 16, 0.02, 0.2, 10_000);
        assert!(
            (9..=10).contains(&farthest),
            "{farthest} tries in 10000 messages"
        );
    }

    #[test]
    fn a_short_job_of_large_messages_tries_a_far_loser_once() {
        // 16 MiB, two-copy twice single copy's cost: one try in the first
        // 40 messages (doubling from two tried at messages 3, 9, 19, 39).
        let mut ch = Chooser::default();
        let used = run(&mut ch, 40, 16 << 20, Rdv::Cma, TWO, two_or_cma(0.1, 0.2));
        assert_eq!(used[Rdv::TwoCopy as usize], 2, "{used:?}");
        assert_eq!(ch.preferred(16 << 20, TWO, false), Some(Rdv::Cma));
        // A loser within 1.1x: tries as before, the interval doubling.
        let mut ch = Chooser::default();
        let used = run(&mut ch, 40, 16 << 20, Rdv::Cma, TWO, two_or_cma(0.1, 0.105));
        assert_eq!(used[Rdv::TwoCopy as usize], 8, "{used:?}");
        // With streaming allowed too, the far loser found first does not
        // delay the try of the other: streaming, the cheapest, wins within
        // a dozen messages.
        let mut ch = Chooser::default();
        let cost = [0.2, 0.1, 0.03];
        let mut stream_from = None;
        for i in 0..40 {
            let p = ch.pick(16 << 20, Rdv::Cma, ALL, false);
            ch.record(
                16 << 20,
                p,
                (cost[p.proto as usize] * (16 << 20) as f32) as u64,
            );
            if stream_from.is_none() && ch.preferred(16 << 20, ALL, false) == Some(Rdv::Stream) {
                stream_from = Some(i);
            }
        }
        let from = stream_from.expect("streaming never won");
        assert!(from < 12, "streaming won after {from} messages");
    }

    #[test]
    fn the_choice_follows_a_change_of_machine_state_within_a_few_messages() {
        let mut ch = Chooser::default();
        let len = 1 << 18;
        // Near: two-copy 3x cheaper. Far: CMA 1.4x cheaper (the Zen VM).
        run(&mut ch, 500, len, Rdv::Cma, TWO, two_or_cma(0.14, 0.05));
        assert_eq!(ch.preferred(len, TWO, false), Some(Rdv::TwoCopy));
        let mut switched_after = None;
        for i in 0..200 {
            let p = ch.pick(len, Rdv::Cma, TWO, false);
            ch.record(
                len,
                p,
                ((if p.proto == Rdv::Cma { 0.14 } else { 0.2 }) * len as f32) as u64,
            );
            if switched_after.is_none() && ch.preferred(len, TWO, false) == Some(Rdv::Cma) {
                switched_after = Some(i);
            }
        }
        let far = switched_after.expect("the far state never switched to CMA");
        assert!(far < 16, "took {far} messages to leave two-copy");
        // And back when the near state returns: found by an exploration.
        let back = run(&mut ch, 300, len, Rdv::Cma, TWO, two_or_cma(0.14, 0.05));
        assert_eq!(ch.preferred(len, TWO, false), Some(Rdv::TwoCopy));
        assert!(back[Rdv::Cma as usize] < 300, "stayed on CMA");
    }

    #[test]
    fn exchanges_keep_estimates_of_their_own() {
        let mut ch = Chooser::default();
        let len = 4 << 20;
        // A ping-pong: two-copy's copies overlap, it is twice as cheap.
        run(&mut ch, 300, len, Rdv::Cma, TWO, two_or_cma(0.14, 0.07));
        assert_eq!(ch.preferred(len, TWO, false), Some(Rdv::TwoCopy));
        // An exchange starts from the plan, not from the ping-pong.
        assert_eq!(ch.preferred(len, TWO, true), None);
        // There both of two-copy's copies count: single copy is cheaper,
        // and all but the tries go by it from the first message.
        let mut used = [0; 3];
        for _ in 0..300 {
            let p = ch.pick(len, Rdv::Cma, TWO, true);
            assert!(p.exchange);
            used[p.proto as usize] += 1;
            let cost = if p.proto == Rdv::Cma { 0.07 } else { 0.14 };
            ch.record(len, p, (cost * len as f32) as u64);
        }
        assert_eq!(ch.preferred(len, TWO, true), Some(Rdv::Cma));
        assert!(used[Rdv::TwoCopy as usize] <= 24, "{used:?}");
        // And the ping-pong's estimates are untouched.
        assert_eq!(ch.preferred(len, TWO, false), Some(Rdv::TwoCopy));
        let p = ch.pick(len, Rdv::Cma, TWO, false);
        assert!(!p.exchange);
    }

    #[test]
    fn a_try_is_timed_on_its_second_message() {
        // Single copy right after two-copy meets the state two-copy left
        // (3x its cost), after single copy its own (0.07 ns/B); two-copy
        // costs 0.1 either way. Timing each try's first message would
        // keep two-copy for good.
        let mut ch = Chooser::default();
        let len = 1 << 20;
        let mut last = Rdv::TwoCopy;
        let mut settled: Option<Rdv> = None;
        let mut used = [0; 3];
        for _ in 0..400 {
            let p = ch.pick(len, Rdv::TwoCopy, TWO, false);
            if let Some(t) = settled.take() {
                // The timed message of a try follows its untimed one.
                assert_eq!((p.proto, p.explore, p.settle), (t, true, false));
            }
            if p.settle {
                assert!(!p.explore);
                settled = Some(p.proto);
            }
            let cost = match (p.proto, last) {
                (Rdv::Cma, Rdv::Cma) => 0.07,
                (Rdv::Cma, _) => 0.21,
                _ => 0.1,
            };
            ch.record(len, p, (cost * len as f32) as u64);
            used[p.proto as usize] += 1;
            last = p.proto;
        }
        assert_eq!(ch.preferred(len, TWO, false), Some(Rdv::Cma), "{used:?}");
        assert!(used[Rdv::Cma as usize] > 300, "{used:?}");
    }

    #[test]
    fn one_slow_sample_does_not_flip_the_choice() {
        let mut ch = Chooser::default();
        let len = 1 << 16;
        run(&mut ch, 200, len, Rdv::TwoCopy, TWO, two_or_cma(1.5, 1.0));
        let p = loop {
            let p = ch.pick(len, Rdv::TwoCopy, TWO, false);
            if !p.explore {
                break p;
            }
            ch.record(len, p, (1.5 * len as f32) as u64);
        };
        assert_eq!(p.proto, Rdv::TwoCopy);
        // A transfer preempted for 1000x its time.
        ch.record(len, p, 1000 * len as u64);
        assert_eq!(ch.preferred(len, TWO, false), Some(Rdv::TwoCopy));
    }

    /// 1000 messages of `len` bytes whose protocols cost `cost` (ns per
    /// byte of two-copy, CMA, streaming): the protocol the chooser settles
    /// on and how many messages each protocol carried.
    fn settle(len: usize, cost: [f32; 3]) -> (Option<Rdv>, [usize; 3]) {
        let mut ch = Chooser::default();
        let used = run(&mut ch, 1000, len, Rdv::Cma, ALL, |p| cost[p as usize]);
        // Where streaming is not allowed, never streaming.
        assert!(ch.pick(len, Rdv::Cma, TWO, false).proto != Rdv::Stream);
        (ch.preferred(len, ALL, false), used)
    }

    #[test]
    fn streaming_wins_where_it_is_cheapest_and_both_losers_are_tried_in_turn() {
        // The Zen VM at 16 MiB: plain copy-out 2.3x the streaming cost,
        // CMA slower still.
        let (best, used) = settle(16 << 20, [0.075, 0.11, 0.032]);
        assert_eq!(best, Some(Rdv::Stream));
        assert!(used[Rdv::Stream as usize] >= 950, "{used:?}");
        // Each loser is measured again now and then, not only one of them.
        assert!(used[Rdv::TwoCopy as usize] >= 3, "{used:?}");
        assert!(used[Rdv::Cma as usize] >= 3, "{used:?}");
    }

    #[test]
    fn streaming_loses_where_plain_stores_are_cheaper() {
        // The same VM at 8 MiB.
        let (best, used) = settle(8 << 20, [0.021, 0.11, 0.029]);
        assert_eq!(best, Some(Rdv::TwoCopy));
        assert!(used[Rdv::TwoCopy as usize] >= 950, "{used:?}");
    }
}
