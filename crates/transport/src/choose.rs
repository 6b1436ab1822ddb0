//! Per-message choice between the two rendezvous protocols — the pipelined
//! two-copy stream through the fragment slots and the receiver's single copy
//! with `process_vm_readv` (CMA) — from what the receiver measured on the
//! same channel, for messages of the same size class.
//!
//! Why measure instead of trusting the plan's threshold: which protocol is
//! faster depends on the cache state the two cores are in, and on virtual
//! machines on where the host runs the vCPUs at the moment. On a 2-vCPU
//! Zen VM the host moves busy vCPUs between a near state (two-copy 21 GB/s
//! at 64 KiB, CMA 7) and a far one (two-copy 5 GB/s, CMA 7) within seconds
//! (docs/transport.md, "Job-level slow mode"): any fixed threshold loses
//! up to 3x in one of the states. The receiver makes the choice because it
//! is the side that acts first in both protocols (it reads the sender's
//! buffer, or it sends the CTS), so the wire format does not change.
//!
//! The rule: per size class (power of two), keep an estimate of the cost
//! per byte of each protocol, use the cheaper one, and now and then try the
//! other (exploration), whose measurement then replaces that protocol's
//! estimate. An exploration that confirms the loser doubles the interval to
//! the next one (up to [`MAX_INTERVAL`] messages, so a stable machine pays
//! at most one message in 64 on the slower protocol); one that finds the
//! loser now faster resets it. Samples of the protocol in use are averaged
//! (weight 1/4) and clamped to twice the current estimate so that one
//! preempted transfer cannot flip the choice on its own, while a real
//! change of state (a few times slower every message) still moves the
//! estimate within a handful of messages.

/// Size classes: `floor(log2(len))`, lengths of 2^31 bytes and above share
/// the last class.
const CLASSES: usize = 32;
/// Messages on the preferred protocol before the first try of the other.
const FIRST_INTERVAL: u32 = 2;
/// Interval after an exploration that changed the preferred protocol.
const MIN_INTERVAL: u32 = 4;
/// Longest interval between two explorations of a size class.
pub(crate) const MAX_INTERVAL: u32 = 64;

/// The two rendezvous protocols, as indexes into the estimates.
const TWO_COPY: usize = 0;
const CMA: usize = 1;

/// What one rendezvous message will use, and whether it is a try of the
/// protocol currently estimated slower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pick {
    pub(crate) cma: bool,
    pub(crate) explore: bool,
}

#[derive(Clone, Copy)]
struct Class {
    /// Estimated nanoseconds per byte of [two-copy, CMA]; NaN = not measured.
    cost: [f32; 2],
    /// Messages since the last exploration.
    since: u32,
    /// Messages between two explorations.
    interval: u32,
}

const FRESH: Class = Class {
    cost: [f32::NAN; 2],
    since: 0,
    interval: FIRST_INTERVAL,
};

/// The estimates of one channel (sender -> this rank), allocated on the
/// channel's first rendezvous message so that jobs with many ranks pay only
/// for the pairs that exchange large messages.
#[derive(Default)]
pub(crate) struct Chooser {
    classes: Option<Box<[Class; CLASSES]>>,
}

fn class_of(len: usize) -> usize {
    (usize::BITS - 1 - len.max(1).leading_zeros()).min(CLASSES as u32 - 1) as usize
}

impl Chooser {
    /// The protocol for a message of `len` bytes; `planned_cma` is what the
    /// plan's static threshold says, used until both have been measured.
    pub(crate) fn pick(&mut self, len: usize, planned_cma: bool) -> Pick {
        let c = &mut self
            .classes
            .get_or_insert_with(|| Box::new([FRESH; CLASSES]))[class_of(len)];
        let best = match (c.cost[TWO_COPY].is_nan(), c.cost[CMA].is_nan()) {
            (false, false) => usize::from(c.cost[CMA] < c.cost[TWO_COPY]),
            (false, true) => TWO_COPY,
            (true, false) => CMA,
            (true, true) => usize::from(planned_cma),
        };
        if c.since >= c.interval {
            c.since = 0;
            return Pick {
                cma: best == TWO_COPY,
                explore: true,
            };
        }
        c.since += 1;
        Pick {
            cma: best == CMA,
            explore: false,
        }
    }

    /// Records that `pick` moved `len` bytes in `ns` nanoseconds.
    pub(crate) fn record(&mut self, len: usize, pick: Pick, ns: u64) {
        let Some(classes) = self.classes.as_mut() else {
            return;
        };
        let c = &mut classes[class_of(len)];
        let i = usize::from(pick.cma);
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
            let other = c.cost[1 - i];
            c.interval = if other.is_nan() || c.cost[i] < other {
                MIN_INTERVAL
            } else {
                (c.interval * 2).min(MAX_INTERVAL)
            };
        }
    }

    /// The protocol the size class of `len` would use now, or `None`
    /// before its first message.
    #[cfg(test)]
    fn preferred(&self, len: usize) -> Option<bool> {
        let c = self.classes.as_ref()?[class_of(len)];
        match (c.cost[TWO_COPY].is_nan(), c.cost[CMA].is_nan()) {
            (false, false) => Some(c.cost[CMA] < c.cost[TWO_COPY]),
            (false, true) => Some(false),
            (true, false) => Some(true),
            (true, true) => None,
        }
    }
}

impl crate::comm::Comm {
    /// Rendezvous messages this rank received so far: (two-copy, single
    /// copy, tries of the protocol then estimated slower).
    pub fn rendezvous_counts(&self) -> (u64, u64, u64) {
        let [two, one, tries] = self.rdv_counts;
        (two, one, tries)
    }

    /// One line for `TOPOCOMM_VERBOSE` at finalize.
    pub(crate) fn say_rendezvous(&self) {
        let [two, one, tries] = self.rdv_counts;
        if two + one > 0 {
            crate::say!(
                "topocomm: rank {}: received {} rendezvous messages: {two} two-copy, {one} single copy ({tries} tries of the protocol then estimated slower)",
                self.rank,
                two + one
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `n` messages of `len` bytes through `ch`, with `cost(cma)` the
    /// nanoseconds per byte of each protocol; returns how many used CMA.
    fn run(
        ch: &mut Chooser,
        n: usize,
        len: usize,
        planned: bool,
        cost: impl Fn(bool) -> f32,
    ) -> usize {
        let mut cma = 0;
        for _ in 0..n {
            let p = ch.pick(len, planned);
            cma += usize::from(p.cma);
            ch.record(len, p, (cost(p.cma) * len as f32) as u64);
        }
        cma
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
        assert_eq!(ch.preferred(1 << 16), None);
        let first = ch.pick(1 << 16, true);
        assert_eq!(
            first,
            Pick {
                cma: true,
                explore: false
            }
        );
        ch.record(1 << 16, first, 3 << 16);
        // Two-copy is 3x cheaper here: the plan's CMA loses quickly.
        let cma = run(&mut ch, 1000, 1 << 16, true, |c| if c { 3.0 } else { 1.0 });
        assert_eq!(ch.preferred(1 << 16), Some(false));
        // At most one message in MAX_INTERVAL (plus the first tries) on CMA.
        assert!(
            cma <= 1000 / MAX_INTERVAL as usize + 6,
            "{cma} of 1000 on CMA"
        );
        // Another size class is untouched.
        assert_eq!(ch.preferred(1 << 20), None);
    }

    #[test]
    fn the_choice_follows_a_change_of_machine_state_within_a_few_messages() {
        let mut ch = Chooser::default();
        let len = 1 << 18;
        // Near: two-copy 3x cheaper. Far: CMA 1.4x cheaper (the Zen VM).
        run(&mut ch, 500, len, true, |c| if c { 0.14 } else { 0.05 });
        assert_eq!(ch.preferred(len), Some(false));
        let mut switched_after = None;
        for i in 0..200 {
            let p = ch.pick(len, true);
            ch.record(
                len,
                p,
                ((if p.cma { 0.14 } else { 0.2 }) * len as f32) as u64,
            );
            if switched_after.is_none() && ch.preferred(len) == Some(true) {
                switched_after = Some(i);
            }
        }
        let far = switched_after.expect("the far state never switched to CMA");
        assert!(far < 16, "took {far} messages to leave two-copy");
        // And back when the near state returns: found by an exploration.
        let back = run(&mut ch, 300, len, true, |c| if c { 0.14 } else { 0.05 });
        assert_eq!(ch.preferred(len), Some(false));
        assert!(back < 300, "stayed on CMA");
    }

    #[test]
    fn one_slow_sample_does_not_flip_the_choice() {
        let mut ch = Chooser::default();
        let len = 1 << 16;
        run(&mut ch, 200, len, false, |c| if c { 1.5 } else { 1.0 });
        let p = loop {
            let p = ch.pick(len, false);
            if !p.explore {
                break p;
            }
            ch.record(len, p, (1.5 * len as f32) as u64);
        };
        assert!(!p.cma);
        // A transfer preempted for 1000x its time.
        ch.record(len, p, 1000 * len as u64);
        assert_eq!(ch.preferred(len), Some(false));
    }
}
