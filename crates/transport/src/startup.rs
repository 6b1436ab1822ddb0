//! Start-up helpers of [`Comm::init`] and [`Comm::join`]: the channel
//! endpoints, the environment, the parameters of a job without the
//! launcher, the segment attach, the single-copy probe, the start-up barrier, and what a
//! communicator says of its mechanisms (per peer, and the verbose report).

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::recv::In;
use crate::rules::{CopyKind, Owner, Params};
use crate::segment::{
    prefault, Cell, DuplexHalf, HelpLine, PlanRaw, RecvCtrl, Segment, CELL, CHANNEL_HEAD,
    INLINE_BYTES, PREFAULT_MAX, RING,
};
use crate::send::Out;
use crate::wait::Backoff;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Environment variable naming a rules file: used by `topocomm run`, the
/// worker's launcher and `topocomm_mpi_init` when no rules file is given
/// otherwise (docs/transport.md).
pub const RULES_ENV: &str = "TOPOCOMM_RULES";

/// The rules file named by [`RULES_ENV`]; set but empty counts as unset
/// (`TOPOCOMM_RULES= cmd` runs `cmd` without it), as `topocomm_mpi_init`
/// reads it.
pub fn rules_from_env() -> Option<std::path::PathBuf> {
    std::env::var_os(RULES_ENV)
        .filter(|v| !v.is_empty())
        .map(Into::into)
}

/// The range of a wait bound, in seconds: below a millisecond every wait
/// would fail before a peer is scheduled once; above 10^6 s (11.6 days) a
/// bound is no bound, and `Instant + Duration` arithmetic may overflow.
pub const TIMEOUT_RANGE: (f64, f64) = (1e-3, 1e6);

/// A wait bound in seconds (`TOPOCOMM_TIMEOUT`, `--timeout`), checked
/// against [`TIMEOUT_RANGE`]; the error names `what` and the range.
pub fn parse_timeout(what: &str, text: &str) -> std::result::Result<Duration, String> {
    let (lo, hi) = TIMEOUT_RANGE;
    match text.trim().parse::<f64>() {
        Ok(s) if (lo..=hi).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "{what}='{text}': expected a number of seconds from {lo} to {hi:.0}"
        )),
    }
}

/// The bound of every wait (`TOPOCOMM_TIMEOUT`, seconds; 60 s by default).
pub(crate) fn timeout_from_env() -> Result<Duration> {
    match std::env::var("TOPOCOMM_TIMEOUT") {
        Ok(v) => parse_timeout("TOPOCOMM_TIMEOUT", &v).map_err(Error::Setup),
        Err(_) => Ok(Duration::from_secs(60)),
    }
}

/// A non-negative integer from the environment; `None` when unset.
pub(crate) fn env_usize(name: &str) -> Result<Option<usize>> {
    env_count(name)
        .map(|n| n.map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
        .map_err(Error::Setup)
}

/// A non-negative integer from the environment (`None` when unset);
/// anything else is an error that names the variable.
fn env_count(name: &str) -> std::result::Result<Option<u64>, String> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}='{v}': expected a non-negative integer")),
        Err(_) => Ok(None),
    }
}

/// Parameters of a job started without the launcher (one rank).
pub(crate) fn singleton_params() -> Params {
    Params {
        inline_max: INLINE_BYTES as u64,
        eager_max: 16 << 10,
        fragment: 64 << 10,
        depth: 4,
        cma: false,
        cma_threshold: u64::MAX,
        adaptive: true,
        cma_chunk: crate::rules::CMA_CHUNK,
        copy: CopyKind::Plain,
        nt_threshold: u64::MAX,
        stream_out_min: u64::MAX,
        buffer_owner: Owner::Sender,
        lone_rendezvous_min: None,
        help_min: crate::rules::HELP_NEVER,
    }
}

/// Maps the segment of descriptor `fd` (which this function owns) and
/// closes the descriptor, even on failure: the mapping keeps the memfd alive,
/// and the descriptor must not leak into programs this rank may exec.
pub(crate) fn attach_and_close(fd: i32, origin: &str) -> Result<Segment> {
    let r = Segment::attach(fd);
    // SAFETY: closing the descriptor we were handed; the segment below no
    // longer refers to it.
    unsafe { libc::close(fd) };
    r.map_err(|e| Error::Setup(format!("{origin}: {e}")))
}

/// The one PU this process is bound to, if its affinity has exactly one.
pub(crate) fn single_pu() -> Option<u32> {
    match crate::launch::allowed_cpus()[..] {
        [p] => Some(p),
        _ => None,
    }
}

impl Comm {
    /// Whether this rank's slot areas (its channels to and from every
    /// peer) are small enough to map in at start-up ([`PREFAULT_MAX`]).
    pub(crate) fn prefault_wanted(&self) -> bool {
        let total: u64 = (0..self.size)
            .filter(|&p| p != self.rank)
            .map(|p| self.outs[p].plan.ring_bytes() + self.ins[p].plan.ring_bytes())
            .sum();
        total <= PREFAULT_MAX
    }

    /// Before barrier 1 (`owned`): the slot areas this rank allocates (the
    /// sender's of sender-owned channels, the receiver's of receiver-owned
    /// ones). After it: the rest of this rank's channels, written or read.
    pub(crate) fn prefault_slots(&self, owned: bool) {
        for p in (0..self.size).filter(|&p| p != self.rank) {
            let (o, i) = (&self.outs[p], &self.ins[p]);
            let (out_mine, in_mine) = (o.plan.receiver_owned == 0, i.plan.receiver_owned != 0);
            let len = |plan: &PlanRaw| plan.ring_bytes() as usize;
            // SAFETY: each range is a channel's slot area inside the
            // mapping, and nothing is sent before start-up barrier 2.
            unsafe {
                if out_mine == owned {
                    prefault(o.slots, len(&o.plan), true);
                }
                if in_mine == owned {
                    prefault(i.slots, len(&i.plan), in_mine);
                }
            }
        }
    }

    /// Whether single copy passed the start-up probe on every rank.
    pub fn cma_available(&self) -> bool {
        self.cma_ok
    }

    /// One line on the single-copy probe result.
    pub fn cma_note(&self) -> &str {
        &self.cma_note
    }

    /// Class and parameters of the channel me -> peer.
    pub fn plan_to(&self, peer: usize) -> (String, Params) {
        let p = self.outs[peer].plan;
        (p.class_name(), p.params())
    }

    /// The smallest eager limit of any pair of the job: the same on every
    /// rank (the plans are in the shared segment), so ranks can agree on a
    /// choice that depends on it without a message.
    pub fn eager_floor(&self) -> u64 {
        let mut floor = u64::MAX;
        for s in 0..self.size {
            for r in (0..self.size).filter(|&r| r != s) {
                floor = floor.min(self.seg.plan(s, r).eager_max);
            }
        }
        floor
    }

    /// The smaller pipeline fragment of the two channels between ranks `a`
    /// and `b` (the same on both: the plans are in the shared segment), or
    /// `None` when either is not a rank of the job or they are the same.
    /// Callers that cut a long transfer into pieces use it as the piece
    /// size: the plans size fragments to stay in the pair's caches.
    pub fn pair_fragment(&self, a: usize, b: usize) -> Option<u64> {
        if a >= self.size || b >= self.size || a == b {
            return None;
        }
        Some(
            self.seg
                .plan(a, b)
                .fragment
                .min(self.seg.plan(b, a).fragment),
        )
    }

    /// Mechanism used for large messages to `peer`, in words.
    pub fn mechanism_to(&self, peer: usize) -> String {
        let p = self.outs[peer].plan.params();
        p.mechanism(self.cma_ok, &|b| format!("{b} B"))
    }

    /// One line per class used by the job: its mechanism for large messages.
    pub(crate) fn print_mechanisms(&self) {
        let mut seen = std::collections::BTreeMap::new();
        for s in 0..self.size {
            for r in 0..self.size {
                if s != r || self.size == 1 {
                    let p = self.seg.plan(s, r);
                    let mech = p.params().mechanism(self.cma_ok, &|b| format!("{b} B"));
                    seen.insert(p.class_name(), (mech, p.fragment, p.depth, p.eager_max));
                }
            }
        }
        for (class, (mech, frag, depth, eager)) in seen {
            crate::say!(
                "topocomm: class {class}: {mech} (fragment {frag} B x {depth}, eager up to {eager} B)"
            );
        }
    }

    pub(crate) fn probe_neighbour(&self) -> std::result::Result<(), String> {
        let n = (self.rank + 1) % self.size;
        let slot = self.seg.rank_slot(n);
        let (addr, want) = (
            slot.probe_addr.load(Ordering::Relaxed),
            slot.probe_val.load(Ordering::Relaxed),
        );
        let mut got = 0u64;
        // SAFETY: `got` provides 8 writable bytes.
        let r =
            unsafe { crate::cma::read(self.pids[n], (&mut got as *mut u64).cast(), addr, 8, 4096) };
        match r {
            Ok(()) if got == want => Ok(()),
            Ok(()) => Err("trial read returned wrong data".into()),
            Err(e) => Err(format!(
                "process_vm_readv: {e}{}",
                crate::cma::ptrace_scope()
                    .map(|s| format!(", Yama ptrace_scope = {s}"))
                    .unwrap_or_default()
            )),
        }
    }

    /// Start-up barrier on the header counter (phase `k` waits for k*n arrivals).
    pub(crate) fn startup_barrier(&mut self, k: u64) -> Result<()> {
        let h = self.seg.header();
        // AcqRel: our earlier stores (state, probe words, cma_ok) are
        // visible to whoever observes the count that includes us.
        h.arrived.fetch_add(1, Ordering::AcqRel);
        let target = k * self.size as u64;
        let start = Instant::now();
        let mut b = Backoff::new();
        while h.arrived.load(Ordering::Acquire) < target {
            if b.slow_check_due() {
                if h.abort.load(Ordering::Relaxed) != 0 {
                    return Err(Error::DeadPeer {
                        rank: -1,
                        detail: "the job was aborted during start-up".into(),
                    });
                }
                if start.elapsed() > self.timeout {
                    return Err(Error::Timeout(self.timeout));
                }
            }
            b.snooze();
        }
        Ok(())
    }
}

/// The endpoints of rank `rank` in every channel of `seg`: its sending
/// side towards each peer and its receiving side from each, with the
/// plans the creator resolved.
/// `TOPOCOMM_DUPLEX`: `0` sends every message through the rings (for
/// comparison), `1` or unset uses the pairs' duplex lines.
pub fn duplex_enabled() -> std::result::Result<bool, String> {
    env_switch("TOPOCOMM_DUPLEX", true)
}

/// `TOPOCOMM_SPREAD`: `0` leaves unbound ranks of a crowded node where
/// the kernel put them, `1` or unset spreads them at start-up
/// (`spread.rs`).
pub fn spread_enabled() -> std::result::Result<bool, String> {
    env_switch("TOPOCOMM_SPREAD", true)
}

/// An on/off switch from the environment: `0` off, `1` on, `default`
/// when unset; anything else is an error that names the variable.
pub(crate) fn env_switch(name: &str, default: bool) -> std::result::Result<bool, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => match v.trim() {
            "1" => Ok(true),
            "0" => Ok(false),
            _ => Err(format!("{name}='{v}': expected 0 (off) or 1 (on)")),
        },
    }
}

/// `TOPOCOMM_FAIL_PUTS`: `RANK:N` makes rank RANK's single-copy gets and
/// puts (put.rs) fail from its `N`-th on (counting from 0), as if the
/// kernel refused them mid-job: a test hook for the collectives' way back
/// to messages, which no healthy machine takes otherwise. Unset: `None`;
/// anything but two non-negative integers around a colon is an error
/// that names the variable.
pub fn put_faults(rank: usize) -> std::result::Result<Option<u64>, String> {
    match std::env::var("TOPOCOMM_FAIL_PUTS") {
        Err(_) => Ok(None),
        Ok(v) => parse_put_faults(&v, rank),
    }
}

/// [`put_faults`] of the value `v` for rank `rank`.
fn parse_put_faults(v: &str, rank: usize) -> std::result::Result<Option<u64>, String> {
    let parsed = v
        .trim()
        .split_once(':')
        .and_then(|(r, n)| Some((r.parse::<usize>().ok()?, n.parse::<u64>().ok()?)));
    match parsed {
        Some((r, n)) => Ok((r == rank).then_some(n)),
        None => Err(format!(
            "TOPOCOMM_FAIL_PUTS='{v}': expected RANK:N (rank RANK's gets and puts fail from its N-th on)"
        )),
    }
}

/// `TOPOCOMM_SPIN`: the spin phase of every rank, in turns before it
/// yields (unset: its waiting policy's); anything but a non-negative
/// integer is an error that names the variable.
pub fn spin_override() -> std::result::Result<Option<u32>, String> {
    env_count("TOPOCOMM_SPIN").map(|t| t.map(|t| u32::try_from(t).unwrap_or(u32::MAX)))
}

/// `TOPOCOMM_COPY`: checks the copy routine asked for (`auto`, `memcpy`
/// or `vector`); anything else is an error that names the variable.
pub fn copy_checked() -> std::result::Result<(), String> {
    crate::copy::CopyChoice::from_env().map(|_| ())
}

/// `TOPOCOMM_HELP`: `0` has receivers read single-copy messages alone,
/// `1` or unset lets them ask the sender for help (help.rs).
pub fn help_enabled() -> std::result::Result<bool, String> {
    env_switch("TOPOCOMM_HELP", true)
}

/// `TOPOCOMM_DEMOTE`: `0` leaves published lines in the sender's caches
/// (for comparison), `1` or unset demotes them to the shared cache where
/// the CPU has CLDEMOTE (`copy::demote_line`).
pub fn demote_enabled() -> std::result::Result<bool, String> {
    Ok(env_switch("TOPOCOMM_DEMOTE", true)? && crate::copy::demote_supported())
}

pub(crate) fn endpoints(
    seg: &Segment,
    rank: usize,
    started: Instant,
    duplex_on: bool,
) -> (Vec<Out>, Vec<In>) {
    let size = seg.nranks();
    let mut outs = Vec::with_capacity(size);
    let mut ins = Vec::with_capacity(size);
    let chan = |s: usize, r: usize| {
        let plan = seg.plan(s, r);
        // SAFETY: offsets come from the creator's layout and lie inside
        // the mapping (checked size at attach).
        let base = unsafe { seg.base.add(plan.offset as usize) };
        (plan, base)
    };
    for peer in 0..size {
        let (plan, base) = chan(rank, peer);
        // SAFETY: channel = RecvCtrl | HelpLine | Cell[RING] | slots,
        // inside the mapping.
        let (ctrl, help, cells, slots) = unsafe {
            (
                base as *const RecvCtrl,
                base.add(64) as *const HelpLine,
                base.add(CHANNEL_HEAD) as *mut Cell,
                base.add(CHANNEL_HEAD + RING as usize * CELL),
            )
        };
        let db = seg.doorbell(peer, rank / 64) as *const AtomicU64;
        // This rank's half of the pair's duplex line, and the peer's.
        let (dx_mine, dx_theirs): (*mut DuplexHalf, *const DuplexHalf) =
            if duplex_on && peer != rank {
                let d = seg.duplex(rank, peer);
                let me = usize::from(rank > peer);
                // SAFETY: d points to the pair's line in the mapping.
                unsafe {
                    (
                        std::ptr::addr_of_mut!((*d).half[me]),
                        std::ptr::addr_of!((*d).half[1 - me]),
                    )
                }
            } else {
                (std::ptr::null_mut(), std::ptr::null())
            };
        outs.push(Out {
            cells,
            ctrl,
            help,
            slots,
            plan,
            head: 0,
            tail_cache: 0,
            frags: 0,
            frags_done_cache: 0,
            queue: VecDeque::new(),
            ctrl_q: VecDeque::new(),
            streams: VecDeque::new(),
            rdv: Vec::new(),
            next_msg: 0,
            pending: false,
            doorbell: db,
            bit: 1u64 << (rank % 64),
            dx_mine,
            dx_sent: 0,
        });
        let (plan, base) = chan(peer, rank);
        // SAFETY: as above, for the channel peer -> me.
        let (ctrl, help, cells, slots) = unsafe {
            (
                base as *mut RecvCtrl,
                base.add(64) as *const HelpLine,
                base.add(CHANNEL_HEAD) as *const Cell,
                base.add(CHANNEL_HEAD + RING as usize * CELL) as *const u8,
            )
        };
        ins.push(In {
            cells,
            ctrl,
            help,
            help_seq: 0,
            slots,
            plan,
            tail: 0,
            published: 0,
            frags_done: 0,
            streams: Vec::new(),
            idle: 0,
            chooser: Default::default(),
            busy_until: started,
            rdv_in: 0,
            overlaps: 0,
            overlaps_mark: 0,
            overlaps_mark_next: 0,
            cma_failed: false,
            dx_theirs,
            dx_taken: 0,
            dx_count: 0,
            dup: (!dx_theirs.is_null()).then(In::dup_cell),
        });
    }
    (outs, ins)
}

#[cfg(test)]
mod tests {
    use super::parse_put_faults;

    #[test]
    fn put_faults_name_one_rank_and_a_count_or_are_refused_by_name() {
        assert_eq!(parse_put_faults("1:3", 1), Ok(Some(3)));
        assert_eq!(parse_put_faults(" 0:0 ", 0), Ok(Some(0)));
        assert_eq!(parse_put_faults("1:3", 2), Ok(None), "another rank's");
        for bad in ["", "3", "1:", ":3", "a:1", "1:-2", "1:2:3"] {
            let e = parse_put_faults(bad, 1).unwrap_err();
            assert!(
                e.contains("TOPOCOMM_FAIL_PUTS") && e.contains("RANK:N"),
                "{bad}: {e}"
            );
        }
    }
}
