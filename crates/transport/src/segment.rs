//! The shared segment: an anonymous `memfd` created by the launcher and
//! inherited by the ranks, so nothing ever appears in `/dev/shm` and the
//! memory disappears with the last process that maps it, even after
//! `kill -9`.
//!
//! Layout (all offsets 64-byte aligned, channels 4096-byte aligned):
//! ```text
//! Header | RankSlot[n] | doorbell[n] (one padded bitmap per receiver)
//!        | PlanRaw[n*n] | lane(0, 0) ... lane(0, LANES-1) | lane(1, 0) ...
//!        | channel(0->0) | channel(0->1) | ... | channel(n-1->n-1)
//! channel = RecvCtrl (64 B) | HelpLine (64 B) | Cell[RING]
//!           | slots[depth * fragment]
//! lane    = arrival word + inline slot[2] (64 B) | done word (64 B)
//!           | pair line (64 B) | data block[2]
//! pair    = word[2] | slot[2 members][2 epochs] of PAIR_DATA bytes
//! ```

use crate::plan::Plan;
use crate::rules::{CopyKind, Owner, Params};
use std::sync::atomic::{AtomicU64, Ordering};

pub const MAGIC: u64 = 0x3331_766f_636f_706f; // "opocov13" (v2: cells carry a context; v3: plans carry `adaptive`; v4: collective lanes; v5: rank slots of two lines, the second counting single copies; v6: rendezvous requests may ask for a protocol, timed CTS, plans of 136 bytes with an exchange eager limit; v7: a duplex line per pair of ranks; v8: plans of 144 bytes with a lone-answer rendezvous limit; v9: duplex halves of 16 payload bytes, counted; v10: a pair line per lane; v11: a help line per channel, plans of 152 bytes with a help limit; v12: inline messages over up to INLINE_CELLS cells; v13: a staging area per rank)
/// Cells per channel ring.
pub const RING: u64 = 128;
pub const MAX_RANKS: usize = 4096;
/// Bytes of one cell: one cache line.
pub const CELL: usize = 64;
/// Bytes of a cell's header: `seq`, `kind`, `ctx`, `tag` and `len`.
const CELL_HEADER: usize = 8 + 2 + 2 + 4 + 8;
/// Bytes of payload carried inside one cell (`Cell::body`): the cell minus
/// its header. Inline messages and the words of control cells live here.
pub const INLINE_BYTES: usize = CELL - CELL_HEADER;
/// Payload bytes of each further cell of a longer inline message: all but
/// its `seq`, which keeps the value of the cell's last use (lower than any
/// position the receiver may wait for there, so never read as published).
pub const WIDE_BYTES: usize = CELL - 8;
/// Cells one inline message may take: its first (header and
/// [`INLINE_BYTES`]) and up to three more of [`WIDE_BYTES`].
///
/// Why more than one: a message one byte over the first cell went through
/// an eager slot, whose data line, ring cell and slot release each cross
/// between the cores; 48-byte messages took twice the time of 40-byte ones
/// (ping-pong 0.21 against 0.11 us, message rate 7.1 against 14.3 Mmsg/s,
/// 2-vCPU AMD EPYC Zen 1 VM, 2026-12-02) and, while the host ran the vCPUs
/// apart, 64-byte messages went at 0.57x Open MPI's rate, whose fast boxes
/// carry them with their header in consecutive lines. Consecutive cells are
/// what the sender writes and the receiver reads next anyway.
pub const INLINE_CELLS: usize = 4;
/// The longest inline message: 208 bytes.
pub const INLINE_MAX_BYTES: usize = INLINE_BYTES + (INLINE_CELLS - 1) * WIDE_BYTES;

/// Cells an inline message of `len` bytes takes (`len` <=
/// [`INLINE_MAX_BYTES`]).
#[inline(always)]
pub fn inline_cells(len: usize) -> u64 {
    if len <= INLINE_BYTES {
        1
    } else {
        1 + (len - INLINE_BYTES).div_ceil(WIDE_BYTES) as u64
    }
}

/// Collective lanes per rank (lanes.rs): lane `l` serves the collectives of
/// the communicator whose matching context is `l` (0: the plain `tc_*` API).
pub const LANES: usize = 64;
/// Bytes of one data block of a lane: the largest collective payload per
/// rank that travels through the lanes (two blocks, used alternately).
pub const LANE_DATA: usize = 1024;
/// Bytes of one inline slot of a lane: payloads this small travel in the
/// sequence word's own cache line (one line transfer per reader).
pub const LANE_INLINE: usize = 24;
/// Payload bytes per member of a pair collective (lanes.rs,
/// `Comm::pair_exchange`): both members' words and slots share one line.
pub const PAIR_DATA: usize = 12;
/// Bytes of one lane: its arrival line (word, two inline slots and the CPU
/// of the last arrival), its done line, its pair line and two data blocks.
pub const LANE_BYTES: usize = 192 + 2 * LANE_DATA;
const _: () = assert!(8 + 2 * LANE_INLINE <= 64);
const _: () = assert!(16 + 4 * PAIR_DATA <= 64);
const _: () = assert!(LANE_BYTES % 64 == 0);

/// Bytes of a rank's staging area (stage.rs): where the accelerator's
/// large collectives copy a rank's contribution for the other members to
/// read with plain loads. The segment is a sparse memfd: a page of it costs
/// memory only once a collective has written it.
pub const STAGE_BYTES: usize = 2 << 20;
const _: () = assert!(STAGE_BYTES % 4096 == 0);

/// Segment header, written once by the creator before any rank starts.
#[repr(C, align(64))]
pub struct Header {
    pub magic: u64,
    pub nranks: u64,
    pub size: u64,
    /// Set non-zero (1 + rank, or u64::MAX for the launcher) when the job is
    /// being torn down; ranks poll it in their slow wait path. Relaxed: a
    /// hint that only makes waits fail sooner.
    pub abort: AtomicU64,
    /// Start-up barrier counter (the only multi-writer atomic; start-up only).
    pub arrived: AtomicU64,
}

/// Rank states published in `RankSlot::state` (0 = not started yet).
pub const ST_UP: u64 = 1;
pub const ST_FINALIZED: u64 = 2;

/// Per-rank identity, start-up probe words and waiting heartbeat on one
/// cache line, and the single-copy count on a second one.
#[repr(C, align(64))]
pub struct RankSlot {
    pub pid: AtomicU64,
    pub state: AtomicU64,
    /// Address and expected value of a word the peers read with CMA.
    pub probe_addr: AtomicU64,
    pub probe_val: AtomicU64,
    /// 1 when this rank could read its neighbour's probe word, 2 when not.
    pub cma_ok: AtomicU64,
    /// 1 + the PU this rank is bound to; 0 when its affinity has several.
    pub bound_pu: AtomicU64,
    /// Waiting heartbeat (`Comm::beat`): odd while the rank is inside a
    /// wait, and moving while it spins on a CPU. A waiter reads it to tell
    /// a peer that will answer soon from one that is descheduled or blocked
    /// itself (then spinning only takes the CPU it may need). Relaxed: a
    /// scheduling hint, never a correctness condition.
    pub beat: AtomicU64,
    /// Single-copy reads this rank has finished: bumped after each one.
    /// A receiver that sends a CTS and finds, when the first fragment
    /// comes, that the sender finished single copies in between was kept
    /// waiting by the sender's own copy, not by the protocol: it times the
    /// stream from that fragment (progress.rs, `first_fragment`). On a line
    /// of its own: receivers read it twice per rendezvous message, and on
    /// `beat`'s line, which a waiting rank rewrites all the time, each read
    /// would be a miss. Relaxed: a measurement hint, never a correctness
    /// condition.
    pub cma_reads: OwnLine,
}

/// An atomic word alone on its cache line.
#[repr(C, align(64))]
pub struct OwnLine(pub AtomicU64);

/// Receiver-owned control line of a channel: the sender only reads it when
/// its cached copy says the ring or the slots are full.
#[repr(C, align(64))]
pub struct RecvCtrl {
    /// Cells consumed so far.
    pub tail: AtomicU64,
    /// Fragment slots released so far.
    pub frags_done: AtomicU64,
}

/// Receiver-owned line of a channel through which the sender helps with
/// a single-copy read (docs/transport.md, "Helped single copy"): the
/// receiver splits the message into pieces, and both sides claim pieces
/// until none is left, the receiver reading its pieces, the sender writing
/// its own into the receiver's buffer. Every word carries the help's
/// sequence number in its upper 32 bits, so a late or repeated request
/// from the receiver can never claim or count a piece of a later help.
#[repr(C, align(64))]
pub struct HelpLine {
    /// `seq << 32 | next piece`: a piece is claimed by a compare-exchange
    /// that moves `next` on while `seq` is the help's own.
    pub claim: AtomicU64,
    /// `seq << 32 | pieces copied`, by either side.
    pub done: AtomicU64,
    /// `seq << 32 | piece + 1` of a piece the sender claimed and could not
    /// write (the receiver reads it itself).
    pub lost: AtomicU64,
}

/// One 64-byte cell: header and up to [`INLINE_BYTES`] (40) bytes of
/// payload in a single cache line. `seq == position + 1` publishes the cell
/// (lap-safe: a stale cell from the previous lap holds
/// `position + 1 - RING`).
#[repr(C, align(64))]
pub struct Cell {
    pub seq: AtomicU64,
    pub kind: u16,
    /// Matching context of a message's first cell (a communicator of the
    /// MPI accelerator; 0 for the plain `tc_*` API): a receive matches only
    /// messages of its own context.
    pub ctx: u16,
    pub tag: i32,
    pub len: u64,
    pub body: [u8; INLINE_BYTES],
}

// The layout every rank of a job relies on (the segment is shared memory
// between processes, so these are the format, checked at compile time).
// Cells fill the ring back to back, one cache line each, with the payload
// after the header.
const _: () = assert!(std::mem::size_of::<Cell>() == CELL);
const _: () = assert!(std::mem::align_of::<Cell>() == CELL);
const _: () = assert!(std::mem::offset_of!(Cell, body) == CELL_HEADER);
const _: () = assert!(std::mem::offset_of!(Cell, tag) == 12);
// A rendezvous request carries three 64-bit words in the body.
const _: () = assert!(INLINE_BYTES >= 3 * 8);

/// Bytes of payload a message may carry through a [`Duplex`] line.
pub const DUPLEX_BYTES: usize = 16;

/// One direction's half of a [`Duplex`] line, written by the rank that
/// sends in that direction, and only when it sends through it.
///
/// `word` is stored last, in one `Release` store (`DuplexHalf::word`):
/// bits 0-31 position + 1 of the message in its direction's sequence (the
/// ring's numbering) modulo 2^32, bits 32-39 the count of messages sent
/// through this half modulo 256, bits 40-47 the count of the other half's
/// messages this rank had taken when it wrote this one (its ack), bits
/// 48-55 the payload length. At most one message of a half is ever
/// outstanding (the sender writes again only once the ack covers its last
/// one), so a count of 8 bits tells a new message from the one taken
/// before, and 32 bits of position tell the message at the receiver's
/// tail from one further on (at most a ring of messages apart).
#[repr(C)]
pub struct DuplexHalf {
    pub word: AtomicU64,
    pub tag: i32,
    pub ctx: u16,
    pub _pad: u16,
    pub body: [u8; DUPLEX_BYTES],
}

impl DuplexHalf {
    /// The `word` of a message at position `pos`, the half's `count`-th
    /// (from 1), acking `acked` of the other half's, of `len` bytes.
    #[inline(always)]
    pub fn word(pos: u64, count: u64, acked: u64, len: usize) -> u64 {
        u64::from((pos + 1) as u32)
            | u64::from(count as u8) << 32
            | u64::from(acked as u8) << 40
            | (len as u64 & 0xff) << 48
    }

    /// Whether `word` holds the message at position `pos` that is the
    /// `count`-th of its half (modulo the field widths).
    #[inline(always)]
    pub fn holds(word: u64, pos: u64, count: u64) -> bool {
        word as u32 == (pos + 1) as u32 && (word >> 32) as u8 == count as u8
    }

    /// The ack in `word`: how many of the other half's messages its writer
    /// had taken, modulo 256.
    #[inline(always)]
    pub fn acked(word: u64) -> u8 {
        (word >> 40) as u8
    }

    /// The payload length in `word`.
    #[inline(always)]
    pub fn len(word: u64) -> usize {
        usize::from((word >> 48) as u8)
    }
}

/// A line shared by the two directions of a pair of ranks: each direction
/// may carry one small message at a time in its half instead of the next
/// cell of its ring. Half 0 is the lower rank's (its messages to the
/// higher), half 1 the higher's.
#[repr(C, align(64))]
pub struct Duplex {
    pub half: [DuplexHalf; 2],
}

const _: () = assert!(std::mem::size_of::<DuplexHalf>() == CELL / 2);
const _: () = assert!(std::mem::size_of::<Duplex>() == CELL);
// `Layout::new` steps RANK_SLOT_BYTES per rank slot, and a channel starts
// with a 64-byte `RecvCtrl` line and a 64-byte `HelpLine` before its cells (`Layout::channel_bytes`,
// `Comm::start`).
const RANK_SLOT_BYTES: u64 = 128;
const _: () = assert!(std::mem::size_of::<RankSlot>() as u64 == RANK_SLOT_BYTES);
const _: () = assert!(std::mem::size_of::<RecvCtrl>() == 64);
const _: () = assert!(std::mem::size_of::<HelpLine>() == 64);
/// Bytes before a channel's cells: its `RecvCtrl` and `HelpLine` lines.
pub const CHANNEL_HEAD: usize = 128;
// The rank table follows the header's 64-byte-aligned end; the header
// fits in one line.
const _: () = assert!(std::mem::size_of::<Header>() <= 64);
// The plan table: `n * n` plain records of 160 bytes.
const _: () = assert!(std::mem::size_of::<PlanRaw>() == 160);

pub const K_INLINE: u16 = 1;
pub const K_EAGER: u16 = 2;
pub const K_RTS: u16 = 3;
pub const K_FRAG: u16 = 4;
pub const K_CTS: u16 = 5;
pub const K_FIN: u16 = 6;
/// A CTS whose receiver weighs the stream by its copying: the sender times
/// its copy of each fragment into the slots and reports it in the cell.
pub const K_CTS_TIMED: u16 = 7;
/// The receiver of a single-copy message asks the sender to help
/// (`HelpLine`): words message id, receive buffer address, help sequence
/// number, pieces.
pub const K_HELP: u16 = 8;

/// A directed pair's plan as stored in the segment (plain old data).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PlanRaw {
    pub offset: u64,
    pub inline_max: u64,
    pub eager_max: u64,
    pub fragment: u64,
    pub depth: u64,
    pub cma: u64,
    pub cma_threshold: u64,
    pub cma_chunk: u64,
    pub nontemporal: u64,
    pub nt_threshold: u64,
    pub stream_out_min: u64,
    pub receiver_owned: u64,
    pub adaptive: u64,
    /// `Plan::exchange_eager_max`.
    pub exchange_eager_max: u64,
    /// `Params::lone_rendezvous_min`, `u64::MAX` for never.
    pub lone_min: u64,
    /// `Params::help_min`.
    pub help_min: u64,
    /// `Plan::lca_depth`, `u64::MAX` for unknown.
    pub lca_depth: u64,
    /// The class's name, NUL-terminated (names are at most a few bytes).
    pub class: [u8; 24],
}

impl PlanRaw {
    /// Bytes of the channel's slot ring (`depth` slots of `fragment`).
    pub fn ring_bytes(&self) -> u64 {
        self.depth * self.fragment
    }

    pub fn from_plan(plan: &Plan, offset: u64) -> PlanRaw {
        let p = &plan.params;
        let mut name = [0u8; 24];
        let b = plan.class.as_bytes();
        name[..b.len().min(23)].copy_from_slice(&b[..b.len().min(23)]);
        PlanRaw {
            exchange_eager_max: plan.exchange_eager_max,
            offset,
            inline_max: p.inline_max,
            eager_max: p.eager_max,
            fragment: p.fragment,
            depth: p.depth,
            cma: u64::from(p.cma),
            cma_threshold: p.cma_threshold,
            cma_chunk: p.cma_chunk,
            nontemporal: u64::from(p.copy == CopyKind::Nontemporal),
            nt_threshold: p.nt_threshold,
            stream_out_min: p.stream_out_min,
            receiver_owned: u64::from(p.buffer_owner == Owner::Receiver),
            adaptive: u64::from(p.adaptive),
            lone_min: p.lone_rendezvous_min.unwrap_or(u64::MAX),
            help_min: p.help_min,
            lca_depth: plan.lca_depth.map_or(u64::MAX, u64::from),
            class: name,
        }
    }

    /// `Plan::lca_depth` back.
    pub fn lca_depth(&self) -> Option<u32> {
        u32::try_from(self.lca_depth).ok()
    }

    pub fn class_name(&self) -> String {
        let end = self.class.iter().position(|&c| c == 0).unwrap_or(24);
        String::from_utf8_lossy(&self.class[..end]).into_owned()
    }

    pub fn params(&self) -> Params {
        Params {
            inline_max: self.inline_max,
            eager_max: self.eager_max,
            fragment: self.fragment,
            depth: self.depth,
            cma: self.cma != 0,
            cma_threshold: self.cma_threshold,
            adaptive: self.adaptive != 0,
            cma_chunk: self.cma_chunk,
            copy: if self.nontemporal != 0 {
                CopyKind::Nontemporal
            } else {
                CopyKind::Plain
            },
            nt_threshold: self.nt_threshold,
            stream_out_min: self.stream_out_min,
            buffer_owner: if self.receiver_owned != 0 {
                Owner::Receiver
            } else {
                Owner::Sender
            },
            lone_rendezvous_min: (self.lone_min != u64::MAX).then_some(self.lone_min),
            help_min: self.help_min,
        }
    }
}

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Offsets of the fixed tables for `n` ranks.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub ranks: u64,
    pub doorbells: u64,
    pub doorbell_stride: u64,
    pub plans: u64,
    pub lanes: u64,
    /// One [`Duplex`] line per pair of distinct ranks.
    pub duplex: u64,
    /// One staging area of [`STAGE_BYTES`] per rank, page-aligned.
    pub stages: u64,
    pub channels: u64,
}

impl Layout {
    pub fn new(n: usize) -> Layout {
        let ranks = align(std::mem::size_of::<Header>() as u64, 64);
        let doorbells = ranks + RANK_SLOT_BYTES * n as u64;
        let doorbell_stride = align(8 * n.div_ceil(64) as u64, 64);
        let plans = doorbells + doorbell_stride * n as u64;
        let lanes = align(plans + (std::mem::size_of::<PlanRaw>() * n * n) as u64, 64);
        let duplex = align(lanes + (n * LANES * LANE_BYTES) as u64, 64);
        let pairs = (n * n.saturating_sub(1) / 2) as u64;
        let stages = align(duplex + pairs * CELL as u64, 4096);
        let channels = stages + (n * STAGE_BYTES) as u64;
        Layout {
            ranks,
            doorbells,
            doorbell_stride,
            plans,
            lanes,
            duplex,
            stages,
            channels,
        }
    }

    pub fn channel_bytes(p: &Params) -> u64 {
        align(
            CHANNEL_HEAD as u64 + RING * CELL as u64 + p.depth * p.fragment,
            4096,
        )
    }
}

/// Largest slot area, summed over a rank's outgoing and incoming channels,
/// that the rank maps in at start-up ([`prefault`]); beyond it slot pages
/// stay sparse and are faulted in at their first use.
pub const PREFAULT_MAX: u64 = 64 << 20;

/// Maps in `len` bytes at `ptr` of this process's segment mapping now, for
/// writing (allocating the pages, so that they are placed on this rank's
/// NUMA node) or for reading (pages another rank allocated). A slot page
/// first touched in the middle of a transfer costs a page fault, 3-4 us on
/// the dev VM: 16 of them per 64 KiB message, 1024 per 4 MiB slot ring,
/// which made the first large messages of every job 20-40x slower
/// (docs/transport.md, "Job-level slow mode"). `madvise(MADV_POPULATE_*)`
/// (Linux 5.14) does it in one call; older kernels touch a byte per page.
///
/// # Safety
/// `[ptr, ptr + len)` lies inside a live mapping of the segment and no other
/// process uses these bytes yet (start-up, before the last barrier): the
/// fallback writes zeros.
pub unsafe fn prefault(ptr: *const u8, len: usize, write: bool) {
    const PAGE: usize = 4096;
    let start = ptr as usize / PAGE * PAGE;
    let end = (ptr as usize + len).div_ceil(PAGE) * PAGE;
    let advice = if write {
        libc::MADV_POPULATE_WRITE
    } else {
        libc::MADV_POPULATE_READ
    };
    // SAFETY: page-aligned range covering `[ptr, ptr + len)`, inside the
    // mapping (the segment is page-aligned and a whole number of pages).
    if unsafe { libc::madvise(start as *mut libc::c_void, end - start, advice) } == 0 {
        return;
    }
    for page in (start..end).step_by(PAGE) {
        let at = page.max(ptr as usize) as *mut u8;
        // SAFETY: inside the range the caller vouches for; nobody else
        // uses it yet, so a zero written here is never data.
        unsafe {
            if write {
                at.write_volatile(0);
            } else {
                at.read_volatile();
            }
        }
    }
}

/// A mapped segment. Dropping it unmaps and closes the descriptor.
pub struct Segment {
    pub fd: i32,
    pub base: *mut u8,
    pub size: usize,
    /// The header's rank count and the table offsets that follow from it,
    /// kept here once the header is known: the lane, rank-slot and
    /// doorbell lookups of the latency paths would otherwise recompute the
    /// layout on every call.
    n: usize,
    lay: Layout,
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

impl Segment {
    /// Creates an anonymous segment for `n` ranks with the given per-pair
    /// params (`plans[s * n + r]` for the channel s -> r, with its class).
    pub fn create(n: usize, plans: &[Plan]) -> Result<Segment, String> {
        if n == 0 || n > MAX_RANKS {
            return Err(format!("number of ranks must be 1..={MAX_RANKS}, got {n}"));
        }
        assert_eq!(plans.len(), n * n);
        let lay = Layout::new(n);
        let mut off = lay.channels;
        let mut raws = Vec::with_capacity(n * n);
        for plan in plans {
            raws.push(PlanRaw::from_plan(plan, off));
            off += Layout::channel_bytes(&plan.params);
        }
        let size = off as usize;
        // SAFETY: memfd_create with a static NUL-terminated name; result checked.
        let fd = unsafe { libc::memfd_create(c"topocomm".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(os_err("memfd_create"));
        }
        // SAFETY: fd is a fresh memfd we own.
        if unsafe { libc::ftruncate(fd, size as libc::off_t) } != 0 {
            let e = os_err("ftruncate of the shared segment");
            // SAFETY: closing our own fd.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let seg = Segment::map(fd, size, n)?;
        // SAFETY: the mapping is `size` bytes, freshly zeroed by the kernel,
        // and no other process has it yet, so plain writes cannot race.
        unsafe {
            let h = seg.base as *mut Header;
            (*h).magic = MAGIC;
            (*h).nranks = n as u64;
            (*h).size = size as u64;
            let pl = seg.base.add(lay.plans as usize) as *mut PlanRaw;
            for (i, r) in raws.iter().enumerate() {
                pl.add(i).write(*r);
            }
        }
        Ok(seg)
    }

    fn map(fd: i32, size: usize, n: usize) -> Result<Segment, String> {
        // SAFETY: mapping `size` bytes of a file we hold open; result checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(os_err("mmap of the shared segment"));
        }
        Ok(Segment {
            fd,
            base: base as *mut u8,
            size,
            n,
            lay: Layout::new(n),
        })
    }

    /// Maps an inherited segment descriptor and checks its header. `fd` is
    /// only borrowed: the returned segment does not close it (its `fd` is
    /// -1), and neither does a failure.
    pub fn attach(fd: i32) -> Result<Segment, String> {
        let what = format!("segment descriptor {fd}");
        // SAFETY: fstat into a zeroed struct; result checked.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a live, writable `stat` for fstat to fill; a bad
        // `fd` only makes the call fail (checked).
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(os_err(&what));
        }
        let size = st.st_size as usize;
        if size < std::mem::size_of::<Header>() {
            return Err(format!("{what} is not a topocomm segment (size {size})"));
        }
        let mut seg = Segment::map(fd, size, 0)?;
        seg.fd = -1;
        let h = seg.header();
        if h.magic != MAGIC || h.size as usize != size {
            return Err(format!("{what} is not a topocomm segment"));
        }
        let n = h.nranks as usize;
        if n == 0 || n > MAX_RANKS {
            return Err(format!("{what}: a header of {n} ranks (1..={MAX_RANKS})"));
        }
        seg.n = n;
        seg.lay = Layout::new(n);
        Ok(seg)
    }

    pub fn header(&self) -> &Header {
        // SAFETY: base is a live mapping at least size_of::<Header>() long;
        // the plain fields are immutable after creation, the rest atomic.
        unsafe { &*(self.base as *const Header) }
    }

    #[inline]
    pub fn nranks(&self) -> usize {
        self.n
    }

    #[inline]
    pub fn layout(&self) -> Layout {
        self.lay
    }

    pub fn rank_slot(&self, r: usize) -> &RankSlot {
        assert!(r < self.nranks());
        // SAFETY: in bounds of the rank table; all fields are atomics.
        unsafe {
            let at = self.layout().ranks + RANK_SLOT_BYTES * r as u64;
            &*(self.base.add(at as usize) as *const RankSlot)
        }
    }

    /// Doorbell word `w` of receiver `r`.
    pub fn doorbell(&self, r: usize, w: usize) -> &AtomicU64 {
        let l = self.layout();
        // SAFETY: r < n and w < ceil(n/64) keep this inside the doorbell table.
        unsafe {
            &*(self
                .base
                .add((l.doorbells + l.doorbell_stride * r as u64) as usize + 8 * w)
                as *const AtomicU64)
        }
    }

    pub fn plan(&self, s: usize, r: usize) -> PlanRaw {
        let n = self.nranks();
        assert!(s < n && r < n);
        // SAFETY: in bounds of the plan table, immutable after creation.
        unsafe {
            (self.base.add(self.layout().plans as usize) as *const PlanRaw)
                .add(s * n + r)
                .read()
        }
    }

    /// The duplex line of ranks `a` and `b` (distinct).
    pub fn duplex(&self, a: usize, b: usize) -> *mut Duplex {
        let (lo, hi) = (a.min(b), a.max(b));
        assert!(lo < hi && hi < self.nranks());
        let off = self.layout().duplex as usize + (hi * (hi - 1) / 2 + lo) * CELL;
        // SAFETY: in bounds of the duplex table (lo < hi < n), 64-byte
        // aligned; accessed as the duplex protocol says (send.rs, recv.rs).
        unsafe { self.base.add(off).cast::<Duplex>() }
    }

    /// Lane `l` of rank `r`: its arrival word (the first 8 bytes of the
    /// lane's first cache line), its done word (first of the second line)
    /// and the lane's start.
    #[inline]
    pub fn lane(&self, r: usize, l: usize) -> (&AtomicU64, &AtomicU64, *mut u8) {
        assert!(r < self.nranks() && l < LANES);
        let off = self.layout().lanes as usize + (r * LANES + l) * LANE_BYTES;
        // SAFETY: in bounds of the lane table (r < n, l < LANES), 64-byte
        // aligned; the two words are only accessed atomically, the slots
        // and blocks as the lane protocol (lanes.rs) hands them out.
        unsafe {
            let base = self.base.add(off);
            (
                &*(base as *const AtomicU64),
                &*(base.add(64) as *const AtomicU64),
                base,
            )
        }
    }

    /// Where rank `r` ran when it last arrived on lane `l`: a word in the
    /// spare last 8 bytes of the arrival line (after the word and the two
    /// inline slots), so a member that reads another's arrival word has
    /// its CPU in the same line transfer (lanes.rs, `missing_member_here`).
    pub fn lane_cpu(&self, r: usize, l: usize) -> &AtomicU64 {
        const _: () = assert!(8 + 2 * LANE_INLINE <= 56);
        let base = self.lane(r, l).2;
        // SAFETY: bytes 56..64 of the 64-byte aligned arrival line, inside
        // the lane (LANE_BYTES >= 64), used by nothing else; only ever
        // accessed atomically.
        unsafe { &*(base.add(56) as *const AtomicU64) }
    }

    /// The pair line of rank `r`'s lane `l` (its third line): used by the
    /// 2-member communicators whose lower transport rank is `r`.
    pub fn lane_pair(&self, r: usize, l: usize) -> *mut u8 {
        self.lane(r, l).2.wrapping_add(128)
    }

    /// The start of rank `r`'s staging area ([`STAGE_BYTES`], page-aligned).
    pub fn stage(&self, r: usize) -> *mut u8 {
        assert!(r < self.nranks());
        let off = self.layout().stages as usize + r * STAGE_BYTES;
        // SAFETY: in bounds of the staging table (r < n); what is read and
        // written there is the collectives' business (stage.rs).
        unsafe { self.base.add(off) }
    }

    /// Marks the job as aborted (launcher side).
    pub fn set_abort(&self, why: u64) {
        self.header().abort.store(why, Ordering::Relaxed);
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping and closing our own descriptor.
        unsafe {
            libc::munmap(self.base.cast(), self.size);
            if self.fd >= 0 {
                libc::close(self.fd);
            }
        }
    }
}
