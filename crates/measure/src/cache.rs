//! mbench-style cache-state micro-benchmarks (seed 001).
//!
//! A buffer is put in a coherence state (M, E, S, O, F or I) in the cache of
//! a *holder* core by untimed accesses from pinned threads, then one pass of
//! loads, stores or a pointer chase over it is timed on the *measuring* PU.
//! Every sample is prepared afresh, because the timed pass changes the state.
//! How each state is produced and checked: docs/cache-states.md.
//!
//! No unsafe here: buffers are plain boxed slices of cache-line-aligned
//! [`Line`]s moved between threads through channels (the channel gives the
//! happens-before edge), and caches are emptied by sweeping a buffer several
//! times the LLC instead of `clflush`.

use crate::stats::Summary;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::hint::black_box;
use std::str::FromStr;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};
use topocomm_topo::{ClassMatrix, Machine};

/// One cache line. `align(64)` keeps every line on its own line.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct Line(pub [u64; 8]);

pub const LINE: u64 = 64;

/// Coherence state of the buffer's lines in the holder's cache before the timed pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum State {
    M,
    E,
    S,
    O,
    F,
    I,
}

impl State {
    pub const ALL: [State; 6] = [State::M, State::E, State::S, State::O, State::F, State::I];

    /// Default states for a CPU: M, E, S, I, plus O on AMD (MOESI) and F on Intel (MESIF).
    pub fn defaults_for(cpu_model: Option<&str>) -> Vec<State> {
        let mut v = vec![State::M, State::E, State::S];
        let model = cpu_model.unwrap_or("").to_ascii_lowercase();
        if model.contains("amd") {
            v.push(State::O);
        }
        if model.contains("intel") {
            v.push(State::F);
        }
        v.push(State::I);
        v
    }

    /// Whether preparing it needs a second core besides the holder.
    pub fn needs_second(self) -> bool {
        matches!(self, State::S | State::O | State::F)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl FromStr for State {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "M" => Ok(State::M),
            "E" => Ok(State::E),
            "S" => Ok(State::S),
            "O" => Ok(State::O),
            "F" => Ok(State::F),
            "I" => Ok(State::I),
            _ => Err(Error::UnknownState { text: s.into() }),
        }
    }
}

/// What the timed pass does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Read every word (GB/s).
    Load,
    /// Write every word (GB/s).
    Store,
    /// Dependent loads along a random cyclic permutation of the lines (ns per load).
    Chase,
}

impl Op {
    pub const ALL: [Op; 3] = [Op::Load, Op::Store, Op::Chase];

    pub fn unit(self) -> &'static str {
        match self {
            Op::Load | Op::Store => "GB/s",
            Op::Chase => "ns",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Load => "load",
            Op::Store => "store",
            Op::Chase => "chase",
        })
    }
}

impl FromStr for Op {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "load" => Ok(Op::Load),
            "store" => Ok(Op::Store),
            "chase" => Ok(Op::Chase),
            _ => Err(Error::UnknownOp { text: s.into() }),
        }
    }
}

/// Who holds the lines: the holder PU `q` at locality class `class` from the
/// measuring PU, and the second core `r` that states S, O and F need.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub class: String,
    pub q: u32,
    pub r: Option<u32>,
}

/// One measured curve point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CachePoint {
    pub class: String,
    pub state: State,
    pub op: Op,
    pub size: u64,
    pub holder: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second: Option<u32>,
    pub unit: String,
    /// Passes timed together per sample (>1 only where a pass keeps the state).
    pub passes: usize,
    /// False when the median timed span is under 10x the timer resolution:
    /// the value is then dominated by clock granularity.
    pub resolved: bool,
    pub samples: Vec<f64>,
    pub summary: Summary,
}

/// A timed span below this many timer ticks is flagged as unresolved.
pub const RESOLVED_FACTOR: f64 = 10.0;

/// How many passes one sample may time back to back: several only when the
/// holder is the measuring core and the pass leaves the state as it was
/// (loads keep M/E/S/O/F lines in their state; stores keep M lines M),
/// enough to span about 64 KiB.
pub fn passes(state: State, op: Op, holder_is_measurer: bool, size: u64) -> usize {
    let keeps = holder_is_measurer
        && match op {
            Op::Load | Op::Chase => state != State::I,
            Op::Store => state == State::M,
        };
    if keeps {
        (65536 / size.max(1)).max(1) as usize
    } else {
        1
    }
}

/// A (class, state) the configuration asked for but that cannot be produced here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Omission {
    pub class: String,
    pub state: State,
    pub reason: String,
}

#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// PU whose accesses are timed.
    pub measurer: u32,
    pub holders: Vec<Holder>,
    pub states: Vec<State>,
    pub ops: Vec<Op>,
    pub sizes: Vec<u64>,
    pub samples: usize,
    /// Most dependent loads of one chase (a random cycle samples the whole buffer).
    pub chase_cap: usize,
    /// Bytes each involved core sweeps to empty its caches.
    pub evict_bytes: u64,
    /// Timer overhead subtracted from each timed span (ns).
    pub timer_overhead_ns: f64,
    /// Timer resolution (ns), to flag spans too short to trust.
    pub timer_resolution_ns: f64,
}

/// Sizes from 1 KiB to `4 * llc` by factors of 2 (4 when `quick`); the last is exactly 4x LLC.
pub fn default_sizes(llc: u64, quick: bool) -> Vec<u64> {
    let top = (4 * llc.max(64 * 1024)) / LINE * LINE;
    let step = if quick { 4 } else { 2 };
    let mut v = Vec::new();
    let mut s = 1024u64;
    while s < top {
        v.push(s);
        s *= step;
    }
    v.push(top);
    v
}

/// Bytes to sweep so that nothing of a buffer survives in any cache of one
/// core: twice its LLC plus twice its L2 (victim and non-inclusive caches
/// keep lines that a sweep of just the LLC size would leave).
pub fn evict_bytes(m: &Machine) -> u64 {
    let llc = m.llc_size().unwrap_or(32 << 20).max(1 << 20);
    let l2 = m.cache_size(2).unwrap_or(0);
    2 * (llc + l2)
}

/// Chooses one holder per locality class seen from `p` (plus `self`), and a
/// second core for S/O/F: the PU nearest to the holder that is neither the
/// holder nor the measuring PU (for `self`, the PU nearest to `p`).
/// `wanted` restricts the classes; asking for one absent here is an error.
pub fn plan_holders(m: &Machine, p: u32, wanted: Option<&[String]>) -> Result<Vec<Holder>> {
    let a = m.require_pu(p)?;
    let cm = ClassMatrix::new(m);
    let os = cm.pu_os_indexes();
    let n = cm.len();
    let nearest = |from: usize, skip: &[usize]| -> Option<u32> {
        (0..n)
            .filter(|x| *x != from && !skip.contains(x))
            .min_by_key(|&x| (cm.code_at(from, x).unwrap_or(0), x))
            .map(|x| os[x])
    };
    let mut holders = vec![Holder {
        class: "self".into(),
        q: p,
        r: nearest(a, &[a]),
    }];
    let mut by_code: Vec<(u8, usize)> = Vec::new();
    for b in 0..n {
        if let Some(code) = cm.code_at(a, b) {
            if !by_code.iter().any(|(c, _)| *c == code) {
                by_code.push((code, b));
            }
        }
    }
    by_code.sort();
    for (code, b) in by_code {
        holders.push(Holder {
            class: cm.classes()[code as usize].class.to_string(),
            q: os[b],
            r: nearest(b, &[a, b]),
        });
    }
    if let Some(w) = wanted {
        let present: Vec<String> = holders.iter().map(|h| h.class.clone()).collect();
        for c in w {
            if !present.contains(c) && c != "none" {
                return Err(Error::ClassNotPresent {
                    class: c.clone(),
                    pu: p,
                    present,
                });
            }
        }
        holders.retain(|h| w.contains(&h.class));
    }
    Ok(holders)
}

/// Untimed accesses that prepare a state.
#[derive(Clone, Copy, Debug)]
enum Action {
    /// Dirty every line (all words, or only the last word of chase buffers so
    /// that the permutation in word 0 survives).
    Write,
    /// Read one word of every line.
    Read,
}

enum Job {
    Access(Box<[Line]>, Action, bool),
    Sweep,
}

enum Reply {
    Buf(Box<[Line]>),
    Done,
}

struct Worker {
    pu: u32,
    tx: Sender<Job>,
    rx: Receiver<Result<Reply>>,
}

const WORKER_TIMEOUT: Duration = Duration::from_secs(120);

fn access(buf: &mut [Line], action: Action, chase: bool, token: u64) {
    match action {
        Action::Write => {
            if chase {
                for l in buf.iter_mut() {
                    l.0[7] = token;
                }
            } else {
                for (i, l) in buf.iter_mut().enumerate() {
                    let v = token ^ i as u64;
                    l.0 = [v, v + 1, v + 2, v + 3, v + 4, v + 5, v + 6, v + 7];
                }
            }
            black_box(&buf);
        }
        Action::Read => {
            let mut acc = 0u64;
            for l in buf.iter() {
                acc = acc.wrapping_add(l.0[7]);
            }
            black_box(acc);
        }
    }
}

/// A core's private sweep buffer, written (first-touched) by that core so
/// that its pages are real memory and not the shared zero page.
struct Sweeper(Vec<Line>);

impl Sweeper {
    fn new(bytes: u64) -> Self {
        let n = (bytes / LINE) as usize;
        let mut v = vec![Line([0; 8]); n];
        for (i, l) in v.iter_mut().enumerate() {
            l.0[0] = i as u64 | 1;
        }
        Sweeper(v)
    }
    fn sweep(&self) {
        let mut acc = 0u64;
        for l in &self.0 {
            acc = acc.wrapping_add(l.0[0]);
        }
        black_box(acc);
    }
}

fn spawn_worker<'s>(scope: &'s std::thread::Scope<'s, '_>, pu: u32, evict: u64) -> Worker {
    let (tx, jobs) = channel::<Job>();
    let (done, rx) = channel::<Result<Reply>>();
    scope.spawn(move || {
        if let Err(e) = crate::pin::pin_current_thread(pu) {
            let _ = done.send(Err(e.into()));
            return;
        }
        let mut sweeper: Option<Sweeper> = None;
        let mut token = 0u64;
        // Ends when the measuring thread drops its sender.
        while let Ok(job) = jobs.recv() {
            token += 1;
            let reply = match job {
                Job::Access(mut b, a, chase) => {
                    access(&mut b, a, chase, token);
                    Reply::Buf(b)
                }
                Job::Sweep => {
                    sweeper.get_or_insert_with(|| Sweeper::new(evict)).sweep();
                    Reply::Done
                }
            };
            if done.send(Ok(reply)).is_err() {
                return;
            }
        }
    });
    Worker { pu, tx, rx }
}

struct Bench<'a> {
    p: u32,
    workers: Vec<Worker>,
    /// Created on the first flush (states M and O never need one).
    sweeper: Option<Sweeper>,
    token: u64,
    cfg: &'a CacheConfig,
}

impl Bench<'_> {
    fn recv(&self, w: usize) -> Result<Reply> {
        self.workers[w]
            .rx
            .recv_timeout(WORKER_TIMEOUT)
            .map_err(|_| Error::HelperSilent {
                pu: self.workers[w].pu,
            })?
    }

    fn act(&mut self, pu: u32, buf: Box<[Line]>, a: Action, chase: bool) -> Result<Box<[Line]>> {
        if pu == self.p {
            let mut buf = buf;
            self.token += 1;
            access(&mut buf, a, chase, self.token);
            return Ok(buf);
        }
        let w = self
            .workers
            .iter()
            .position(|w| w.pu == pu)
            .ok_or(Error::NoHelper { pu })?;
        self.workers[w]
            .tx
            .send(Job::Access(buf, a, chase))
            .map_err(|_| Error::HelperGone { pu })?;
        match self.recv(w)? {
            Reply::Buf(b) => Ok(b),
            Reply::Done => Err(Error::HelperProtocol),
        }
    }

    /// Every involved core sweeps its caches empty (in parallel).
    fn flush_all(&mut self) -> Result<()> {
        for w in &self.workers {
            w.tx.send(Job::Sweep)
                .map_err(|_| Error::HelperGone { pu: w.pu })?;
        }
        let bytes = self.cfg.evict_bytes;
        self.sweeper
            .get_or_insert_with(|| Sweeper::new(bytes))
            .sweep();
        for w in 0..self.workers.len() {
            self.recv(w)?;
        }
        Ok(())
    }

    fn prepare(
        &mut self,
        buf: Box<[Line]>,
        chase: bool,
        state: State,
        h: &Holder,
    ) -> Result<Box<[Line]>> {
        let r = h.r.unwrap_or(h.q);
        Ok(match state {
            State::M => self.act(h.q, buf, Action::Write, chase)?,
            State::E => {
                self.flush_all()?;
                self.act(h.q, buf, Action::Read, chase)?
            }
            State::S => {
                self.flush_all()?;
                let b = self.act(h.q, buf, Action::Read, chase)?;
                self.act(r, b, Action::Read, chase)?
            }
            State::O => {
                let b = self.act(h.q, buf, Action::Write, chase)?;
                self.act(r, b, Action::Read, chase)?
            }
            State::F => {
                self.flush_all()?;
                let b = self.act(r, buf, Action::Read, chase)?;
                self.act(h.q, b, Action::Read, chase)?
            }
            State::I => {
                self.flush_all()?;
                buf
            }
        })
    }

    /// `reps` timed passes; returns (GB/s or ns per load, elapsed ns).
    /// The loop code and the clock are warmed on a separate one-line buffer
    /// first: a flush also evicts them, and their misses are not the data's.
    fn timed(&mut self, buf: &mut [Line], op: Op, reps: usize) -> (f64, f64) {
        let mut warm = [Line([0; 8])];
        self.pass(&mut warm, op);
        let _ = Instant::now();
        let start = Instant::now();
        let mut work = 0.0;
        for _ in 0..reps {
            work += self.pass(buf, op);
        }
        let elapsed = start.elapsed().as_nanos() as f64;
        let ns = (elapsed - self.cfg.timer_overhead_ns).max(1.0);
        let v = match op {
            Op::Load | Op::Store => work / ns,
            Op::Chase => ns / work,
        };
        (v, elapsed)
    }

    /// One pass; returns bytes moved (load/store) or loads done (chase).
    fn pass(&mut self, buf: &mut [Line], op: Op) -> f64 {
        self.token += 1;
        let t = self.token;
        match op {
            Op::Load => {
                let mut acc = [0u64; 8];
                for l in buf.iter() {
                    for (a, w) in acc.iter_mut().zip(l.0) {
                        *a = a.wrapping_add(w);
                    }
                }
                black_box(acc);
                buf.len() as f64 * LINE as f64
            }
            Op::Store => {
                for (i, l) in buf.iter_mut().enumerate() {
                    let v = t ^ i as u64;
                    l.0 = [v, v + 1, v + 2, v + 3, v + 4, v + 5, v + 6, v + 7];
                }
                black_box(&buf);
                buf.len() as f64 * LINE as f64
            }
            Op::Chase => {
                let steps = buf.len().min(self.cfg.chase_cap);
                let mut i = 0usize;
                for _ in 0..steps {
                    i = buf[i].0[0] as usize;
                }
                black_box(i);
                steps as f64
            }
        }
    }
}

/// A buffer of `bytes` whose word 0 of line `i` holds the next line of one
/// random cycle through all lines (Sattolo's algorithm), so that a chase
/// visits every line in an order the prefetchers cannot guess.
fn chase_buffer(bytes: u64, seed: u64) -> Box<[Line]> {
    let n = (bytes / LINE).max(1) as usize;
    let mut next: Vec<u64> = (0..n as u64).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let j = (x % i as u64) as usize;
        next.swap(i, j);
    }
    next.into_iter()
        .map(|v| Line([v, 0, 0, 0, 0, 0, 0, 0]))
        .collect()
}

fn data_buffer(bytes: u64) -> Box<[Line]> {
    let n = (bytes / LINE).max(1) as usize;
    (0..n).map(|i| Line([i as u64; 8])).collect()
}

/// Runs the whole benchmark. `progress(done, total)` is called after each
/// curve point. Returns the points and the (class, state) pairs that could
/// not be prepared here (with the reason).
pub fn run(
    cfg: &CacheConfig,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<(Vec<CachePoint>, Vec<Omission>)> {
    if cfg.samples == 0 {
        return Err(Error::AtLeastOne { what: "--samples" });
    }
    if cfg.sizes.iter().any(|&s| s < LINE) {
        return Err(Error::BufferTooSmall { min: LINE });
    }
    let mut omitted = Vec::new();
    // (holder, state) combinations, I once under class "none".
    let mut combos: Vec<(Holder, State)> = Vec::new();
    for h in &cfg.holders {
        for &s in &cfg.states {
            if s == State::I {
                continue;
            }
            if s.needs_second() && h.r.is_none() {
                omitted.push(Omission {
                    class: h.class.clone(),
                    state: s,
                    reason: "needs a second core besides the holder and the measuring PU; this machine has none".into(),
                });
                continue;
            }
            combos.push((h.clone(), s));
        }
    }
    if cfg.states.contains(&State::I) {
        combos.push((
            Holder {
                class: "none".into(),
                q: cfg.measurer,
                r: None,
            },
            State::I,
        ));
    }
    let mut pus: Vec<u32> = combos
        .iter()
        .flat_map(|(h, _)| [Some(h.q), h.r])
        .flatten()
        .filter(|&x| x != cfg.measurer)
        .collect();
    pus.sort_unstable();
    pus.dedup();
    let total = cfg.sizes.len() * combos.len() * cfg.ops.len();

    std::thread::scope(|scope| {
        let workers: Vec<Worker> = pus
            .iter()
            .map(|&pu| spawn_worker(scope, pu, cfg.evict_bytes))
            .collect();
        let measurer = scope.spawn(move || -> Result<Vec<CachePoint>> {
            crate::pin::pin_current_thread(cfg.measurer)?;
            let mut b = Bench {
                p: cfg.measurer,
                workers,
                sweeper: None,
                token: 0,
                cfg,
            };
            let mut points = Vec::new();
            let mut done = 0;
            for &size in &cfg.sizes {
                let mut data = Some(data_buffer(size));
                let mut chase = Some(chase_buffer(size, 0x9e37_79b9_7f4a_7c15 ^ size));
                for (h, state) in &combos {
                    for &op in &cfg.ops {
                        let is_chase = op == Op::Chase;
                        let slot = if is_chase { &mut chase } else { &mut data };
                        let mut samples = Vec::with_capacity(cfg.samples);
                        let mut elapsed = Vec::with_capacity(cfg.samples);
                        let reps = passes(*state, op, h.q == cfg.measurer, size);
                        for _ in 0..cfg.samples {
                            let buf = slot.take().expect("buffer present between samples");
                            let mut buf = b.prepare(buf, is_chase, *state, h)?;
                            let (v, ns) = b.timed(&mut buf, op, reps);
                            samples.push(v);
                            elapsed.push(ns);
                            *slot = Some(buf);
                        }
                        elapsed.sort_by(f64::total_cmp);
                        let resolved = elapsed[elapsed.len() / 2]
                            >= RESOLVED_FACTOR * cfg.timer_resolution_ns.max(1.0);
                        let summary = Summary::of(&samples).ok_or(Error::NonFinitePass)?;
                        points.push(CachePoint {
                            class: h.class.clone(),
                            state: *state,
                            op,
                            size,
                            holder: h.q,
                            second: if state.needs_second() { h.r } else { None },
                            unit: op.unit().into(),
                            passes: reps,
                            resolved,
                            samples,
                            summary,
                        });
                        done += 1;
                        progress(done, total);
                    }
                }
            }
            Ok(points)
        });
        let points = measurer.join().map_err(|_| Error::Panicked {
            thread: "the measuring thread",
        })??;
        Ok((points, omitted))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chase_buffer_is_one_cycle() {
        let b = chase_buffer(64 * 1000, 7);
        let mut seen = vec![false; b.len()];
        let mut i = 0usize;
        for _ in 0..b.len() {
            assert!(!seen[i]);
            seen[i] = true;
            i = b[i].0[0] as usize;
        }
        assert_eq!(i, 0);
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn sizes_span_1k_to_4x_llc() {
        let s = default_sizes(32 << 20, true);
        assert_eq!(s[0], 1024);
        assert_eq!(*s.last().unwrap(), 128 << 20);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn an_absent_class_is_named_with_the_present_ones() {
        let m = topocomm_topo::load(&"synthetic:pack:1 core:2 pu:1".parse().unwrap()).unwrap();
        let e = plan_holders(&m, 0, Some(&["bogus".to_string()])).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "locality class 'bogus' is not present on this machine as seen from PU 0 (present: self, "
            ),
            "{e}"
        );
        assert!(matches!(plan_holders(&m, 9, None), Err(Error::Topo(_))));
    }

    #[test]
    fn states_parse_and_defaults_follow_the_vendor() {
        assert_eq!("m".parse::<State>().unwrap(), State::M);
        assert_eq!(
            "X".parse::<State>().unwrap_err().to_string(),
            "unknown cache state 'X' (expected M, E, S, O, F or I)"
        );
        assert_eq!(
            "copy".parse::<Op>().unwrap_err().to_string(),
            "unknown operation 'copy' (expected load, store or chase)"
        );
        assert!(State::defaults_for(Some("AMD EPYC")).contains(&State::O));
        assert!(State::defaults_for(Some("Intel(R) Xeon(R)")).contains(&State::F));
        assert!(!State::defaults_for(None).contains(&State::O));
    }
}
