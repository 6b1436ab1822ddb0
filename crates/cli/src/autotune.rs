//! The rules a job runs with when no rules file is given: measured once per
//! machine by the quick tuner and cached (`topocomm_transport::autotune`,
//! docs/transport.md "Rules from measurement").

use crate::cmd::tune::runner;
use anyhow::Result;
use std::time::{Duration, Instant};
use topocomm_measure::p2p::Test;
use topocomm_model::choice::targets;
use topocomm_model::tune::plan::{search, SearchPlan};
use topocomm_model::tune::space::Space;
use topocomm_model::tune::SearchMode;
use topocomm_topo::Machine;
use topocomm_transport::autotune::{self, Entry, Key};
use topocomm_transport::rules::{ANSWERS_NEVER, CMA_NEVER_FIRST};
use topocomm_transport::{Params, Rules};

/// Searches start no new candidate after this (shared by the classes).
pub const BUDGET: Duration = Duration::from_secs(4);
/// No class's acceptance check starts after this (from the start of the
/// measurement); a class left unchecked keeps the built-in parameters. With
/// one check (about 2 s on 2 cores) the whole stays near 10 s.
pub const CHECKS_UNTIL: Duration = Duration::from_secs(8);
/// No measurement of an acceptance check starts after this (from the start
/// of the measurement): a check still running then is abandoned and its
/// class keeps the built-in parameters. One measurement of a check (7 sizes
/// of one test) took 0.1-0.3 s, so the whole stays within 10 s: without it,
/// a check started just before [`CHECKS_UNTIL`] on a 16-core Intel Xeon VM
/// ended the measurement at 10.0-10.1 s, and with this at 9.5 s a first use
/// on the 2-vCPU Intel Xeon VM took 9.8 s.
pub const CHECK_DEADLINE: Duration = Duration::from_millis(9_200);
/// No class's measurement of answers ([`measure_answers`]) starts after
/// this; what it takes comes out of the search's [`BUDGET`], so the whole
/// stays within its bound.
pub const ANSWERS_UNTIL: Duration = Duration::from_millis(2_500);
/// Sizes at which answers by single copy are weighed against eager ones
/// (those between the class's inline and eager limits): the band where a
/// ping-pong's two eager copies cost more than one single copy can.
const ANSWER_SIZES: [u64; 3] = [4 << 10, 8 << 10, 16 << 10];
/// Interleaved rounds of that measurement (eager, single copy, single
/// copy, eager, ...).
const ANSWER_ROUNDS: usize = 3;
/// How long a job waits for another job that is measuring the same machine.
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// Sizes of the acceptance check of a measured class, both tests: wider
/// than the search's, so that a section tuned on four sizes cannot lose
/// elsewhere unseen.
const CHECK_SIZES: [u64; 7] = [8, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20];
/// Interleaved rounds of the check (built-in, measured, measured, built-in, ...).
const CHECK_ROUNDS: usize = 3;
/// A measured section is kept only if no size of either test is slower than
/// this times the built-in one (medians over the rounds) ...
const KEEP_IF_NOT_SLOWER: f64 = 1.05;
/// ... and some size is faster than this times the built-in one.
const KEEP_IF_FASTER: f64 = 0.95;

/// Where a job's rules come from, for `topocomm plan`.
pub struct Resolved {
    pub rules: Rules,
    /// Classes whose section was measured (empty for built-in rules).
    pub measured: Vec<String>,
}

impl Resolved {
    fn builtin(m: &Machine, why: &str) -> Resolved {
        let mut rules = Rules::builtin(m);
        rules.source = format!("built-in model ({why})");
        Resolved {
            rules,
            measured: Vec::new(),
        }
    }
}

/// The rules of a job on `m` without a rules file: the cached measurement
/// of this machine, measured now if there is none (or if `refresh`), or the
/// built-in model when measuring is off (`TOPOCOMM_AUTOTUNE=0`), impossible
/// (a topology that is not this machine's, no cache folder) or failed. Says
/// in one line on stderr when it measures, and why it falls back.
pub fn job_rules(m: &Machine, refresh: bool) -> Result<Resolved> {
    let mode = autotune::mode().map_err(anyhow::Error::msg)?;
    if mode == autotune::Mode::Off {
        return Ok(Resolved::builtin(m, "TOPOCOMM_AUTOTUNE=0"));
    }
    if topocomm_measure::target::require_live(m).is_err() {
        return Ok(Resolved::builtin(m, "the topology is not this machine's"));
    }
    let Some(dir) = autotune::cache_dir() else {
        return Ok(Resolved::builtin(
            m,
            "no cache folder: neither XDG_CACHE_HOME nor HOME is set",
        ));
    };
    let key = Key::of(m);
    let cached = |quiet: bool| match autotune::load(&dir, &key, m) {
        Ok(c) => c,
        Err(e) => {
            if !quiet {
                eprintln!("topocomm: ignoring the rules cache: {e}; measuring again");
            }
            None
        }
    };
    if !refresh {
        if let Some(c) = cached(false) {
            return Ok(found(c));
        }
    }
    // Asked for (`plan --measure`, TOPOCOMM_AUTOTUNE=force): measure anyway.
    let asked = refresh || mode == autotune::Mode::Force;
    if let Some(others) = if asked { None } else { busy() } {
        eprintln!(
            "topocomm: {others} other tasks are running on this machine: this job uses the built-in rules, and a later one will measure"
        );
        return Ok(Resolved::builtin(
            m,
            "the machine was busy; measuring later",
        ));
    }
    let lock = match autotune::lock(&dir, &key, LOCK_WAIT).map_err(anyhow::Error::msg)? {
        Some(l) => l,
        None => {
            eprintln!(
                "topocomm: another job has been measuring this machine for {} s; this job uses the built-in rules",
                LOCK_WAIT.as_secs()
            );
            return Ok(Resolved::builtin(m, "another job is measuring"));
        }
    };
    // A job that waited for the lock finds what the measuring job stored.
    if !refresh {
        if let Some(c) = cached(true) {
            return Ok(found(c));
        }
    }
    eprintln!(
        "topocomm: measuring this machine's transport rules once (at most about 10 s; TOPOCOMM_AUTOTUNE=0 for the built-in rules)"
    );
    let start = Instant::now();
    let (rules, measured) = match measure(m) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("topocomm: measuring failed ({e:#}); this job uses the built-in rules");
            return Ok(Resolved::builtin(m, "the measurement failed"));
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    let entry = Entry::new(key.clone(), seconds, measured, rules.to_toml());
    let path = autotune::store(&dir, &entry).map_err(anyhow::Error::msg)?;
    drop(lock);
    eprintln!(
        "topocomm: measured in {seconds:.1} s; cached in {}",
        path.display()
    );
    let c = autotune::load(&dir, &key, m)
        .map_err(anyhow::Error::msg)?
        .ok_or_else(|| {
            anyhow::anyhow!("{}: vanished right after it was written", path.display())
        })?;
    Ok(found(c))
}

/// Commands that run benchmark jobs of the transport (`report`, `bench`)
/// resolve the measured rules first, so that a first-use measurement is
/// announced to the user and done before any timed job (whose time bound
/// does not include it) instead of inside one. Failures are left to the
/// command itself, which reports them in context.
pub fn before_benchmarks(g: &crate::common::GlobalOpts) {
    if let Ok(m) = g.machine() {
        before_benchmarks_on(&m);
    }
}

/// [`before_benchmarks`] on a machine model already loaded.
pub fn before_benchmarks_on(m: &topocomm_topo::Machine) {
    if let Err(e) = job_rules(m, false) {
        eprintln!("topocomm: {e:#}");
    }
}

/// Other runnable tasks (`procs_running` of /proc/stat less this process,
/// median of 5 readings over 100 ms), when there are any: measurements
/// taken while other programs compete for the CPUs would describe the load,
/// not the machine, and once cached they would stay.
fn busy() -> Option<u32> {
    let read = || -> Option<u32> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let line = stat.lines().find(|l| l.starts_with("procs_running "))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let mut v = Vec::new();
    for _ in 0..5 {
        v.push(read()?);
        std::thread::sleep(Duration::from_millis(20));
    }
    v.sort_unstable();
    let others = v[2].saturating_sub(1);
    (others > 0).then_some(others)
}

fn found(c: autotune::Cached) -> Resolved {
    Resolved {
        rules: c.rules,
        measured: c.entry.measured_classes,
    }
}

/// The quick latency search of `topocomm tune` over every class present,
/// bounded by [`BUDGET`], then each class's acceptance check ([`check`]):
/// the built-in rules with the section of every class whose measured
/// parameters passed, and those classes (none on a machine of one PU).
fn measure(m: &Machine) -> Result<(Rules, Vec<String>)> {
    let tg = targets(m, None)?;
    if tg.is_empty() {
        return Ok((Rules::builtin(m), Vec::new()));
    }
    let start = Instant::now();
    // The built-in rules with each class's measured answers: the base that
    // the searched parameters must beat, and what a class keeps otherwise.
    let mut builtin = Rules::builtin(m);
    let mut kept = Vec::new();
    for (class, pair) in &tg {
        if start.elapsed() > ANSWERS_UNTIL {
            break;
        }
        let base = builtin.params_for(Some(class)).clone();
        let answers = measure_answers(m, class, *pair, &base)?;
        eprintln!("topocomm: class {class}: {}", answers.describe());
        if let Some(from) = answers.rule() {
            builtin.classes.insert(
                class.clone(),
                Params {
                    lone_rendezvous_min: Some(from),
                    ..base
                },
            );
            kept.push(class.clone());
        }
    }
    let plan = SearchPlan {
        mode: SearchMode::Grid,
        test: Test::Latency,
        sizes: vec![4 << 10, 64 << 10, 512 << 10, 4 << 20],
        space: Space::new(true),
        samples: 3,
        min_time_ms: 1.0,
        rounds: 2,
        budget: BUDGET.saturating_sub(start.elapsed()),
    };
    let mut r = runner(m, plan.test, &plan.sizes, plan.samples, plan.min_time_ms)?;
    let (mut rules, classes) = search(m, &tg, &plan, None, &mut r, &mut |_msg: &str| {})?;
    for c in classes {
        if start.elapsed() > CHECKS_UNTIL {
            eprintln!(
                "topocomm: class {}: built-in parameters kept (no time left to check the measured ones)",
                c.class
            );
            rules
                .classes
                .insert(c.class.clone(), builtin.params_for(Some(&c.class)).clone());
            continue;
        }
        let pair = tg
            .iter()
            .find(|(name, _)| *name == c.class)
            .map(|(_, p)| *p)
            .expect("a tuned class is a target");
        let base = builtin.params_for(Some(&c.class)).clone();
        // The whole measured section first; if it loses somewhere, the
        // built-in one with only the measured start of the receiver's
        // choice (time allowing).
        let whole = as_run(&base, &c.tuned);
        let start_only = Params {
            cma_threshold: whole.cma_threshold,
            cma_chunk: whole.cma_chunk,
            ..base.clone()
        };
        let mut chosen = None;
        for (i, cand) in [whole, start_only].into_iter().enumerate() {
            if cand == base || (i > 0 && start.elapsed() > CHECKS_UNTIL) {
                continue;
            }
            let v = check(m, &c.class, pair, &base, &cand, start + CHECK_DEADLINE)?;
            let what = if i == 0 {
                ""
            } else {
                " (start of the choice only)"
            };
            eprintln!("topocomm: class {}{what}: {}", c.class, v.describe());
            if v.keep {
                chosen = Some(cand);
                break;
            }
        }
        match chosen {
            Some(cand) => {
                rules.classes.insert(c.class.clone(), cand);
                if !kept.contains(&c.class) {
                    kept.push(c.class);
                }
            }
            None => {
                rules.classes.insert(c.class, base);
            }
        }
    }
    Ok((rules, kept))
}

/// Where a class answers by single copy, as measured.
struct Answers {
    /// The smallest size from which answers go by rendezvous (`None`: never).
    from: Option<u64>,
    /// Single-copy/eager time ratio of the ping-pong at each size measured.
    ratios: Vec<(u64, f64)>,
    /// Why nothing was measured, if so.
    skipped: Option<&'static str>,
}

impl Answers {
    /// The class's `lone_rendezvous_min` as measured: from the size found,
    /// or never where answers did not pay (the built-in rules answer from
    /// 8 KiB); `None` where nothing could be measured (the built-in rules
    /// stay).
    fn rule(&self) -> Option<u64> {
        match (self.from, self.skipped) {
            (Some(from), _) => Some(from),
            (None, None) => Some(ANSWERS_NEVER),
            (None, Some(_)) => None,
        }
    }

    fn describe(&self) -> String {
        let ratios = self
            .ratios
            .iter()
            .map(|(s, r)| format!("{:.2}x at {}", r, topocomm_topo::human_bytes(*s)))
            .collect::<Vec<_>>()
            .join(", ");
        match (self.from, self.skipped) {
            (_, Some(why)) => format!("answers stay eager ({why})"),
            (Some(f), _) => format!(
                "answers from {} by single copy (time against eager: {ratios})",
                topocomm_topo::human_bytes(f)
            ),
            (None, _) => format!("answers stay eager (single copy took {ratios} of their time)"),
        }
    }
}

/// Weighs a ping-pong's answers by single copy against eager ones at
/// [`ANSWER_SIZES`] within `base`'s eager band, interleaved over
/// [`ANSWER_ROUNDS`] rounds: answers go by single copy from the smallest
/// measured size from which every larger measured one was faster by
/// single copy ([`KEEP_IF_FASTER`] times the eager time or less).
///
/// Why measured: the two eager copies in a row cost against one single
/// copy plus a system call and a reply, and the call's price differs by
/// machine and kernel (on a 2-vCPU Intel Xeon VM a 16 KiB ping-pong took
/// 1.6-2.1 us by single copy, 3.5-3.7 eager; 4 KiB the same either way).
/// Only the latency test: a one-way stream or an exchange never answers
/// (`Comm::answers`), and a window of the bandwidth test answers at most
/// once.
fn measure_answers(m: &Machine, class: &str, pair: (u32, u32), base: &Params) -> Result<Answers> {
    let sizes: Vec<u64> = ANSWER_SIZES
        .iter()
        .copied()
        .filter(|&s| s > base.inline_max && s <= base.eager_max)
        .collect();
    let skipped = |why| Answers {
        from: None,
        ratios: Vec::new(),
        skipped: Some(why),
    };
    if !base.cma {
        return Ok(skipped("the class has no single copy"));
    }
    if sizes.is_empty() {
        return Ok(skipped("no measured size is within the eager limit"));
    }
    let (eager, on) = answer_sets(base, sizes[0]);
    let mut runner = runner(m, Test::Latency, &sizes, 3, 1.0)?;
    // times[set][size]: job medians (0: eager, 1: single copy).
    let mut times = vec![vec![Vec::new(); sizes.len()]; 2];
    for round in 0..ANSWER_ROUNDS {
        for k in 0..2 {
            let set = (k + round) % 2;
            let params = if set == 0 { &eager } else { &on };
            let meds = medians(&mut runner, pair, class, params, &sizes)?;
            for (si, t) in meds.into_iter().enumerate() {
                times[set][si].push(t);
            }
        }
    }
    let med = |v: &[f64]| topocomm_measure::Summary::of(v).map_or(f64::NAN, |s| s.median);
    let ratios: Vec<(u64, f64)> = sizes
        .iter()
        .enumerate()
        .map(|(si, &s)| (s, med(&times[1][si]) / med(&times[0][si]).max(1e-12)))
        .collect();
    Ok(Answers {
        from: answers_from(&ratios),
        ratios,
        skipped: None,
    })
}

/// The two rule sets [`measure_answers`] weighs: `base` with eager answers
/// and with answers by single copy from `from`. The base may answer
/// already (the built-in rules do from 8 KiB): the eager set turns that off.
fn answer_sets(base: &Params, from: u64) -> (Params, Params) {
    let with = |lone| Params {
        lone_rendezvous_min: lone,
        ..base.clone()
    };
    (with(None), with(Some(from)))
}

/// One job of `runner`'s test with `params` for `class` on `pair`: the
/// median time at each of `sizes`, in their order.
fn medians(
    runner: &mut topocomm_model::tune::runner::Runner,
    pair: (u32, u32),
    class: &str,
    params: &Params,
    sizes: &[u64],
) -> Result<Vec<f64>> {
    let pts = runner
        .measure_sizes(pair, class, params, sizes)
        .map_err(anyhow::Error::msg)?;
    sizes
        .iter()
        .map(|&size| {
            pts.iter()
                .find(|p| p.size == size)
                .map(|p| p.median)
                .ok_or_else(|| anyhow::anyhow!("no result for {size} B"))
        })
        .collect()
}

/// The smallest size of `ratios` (ascending sizes, single-copy/eager time)
/// from which every ratio is below [`KEEP_IF_FASTER`].
fn answers_from(ratios: &[(u64, f64)]) -> Option<u64> {
    let mut from = None;
    for &(size, r) in ratios.iter().rev() {
        if r < KEEP_IF_FASTER {
            from = Some(size);
        } else {
            break;
        }
    }
    from
}

/// A measured section as jobs run it. The search measures each candidate
/// with the receiver's per-message choice off (a protocol as it is) and may
/// find single copy slower at every size it tried; a section that then left
/// single copy out would lock a machine whose best protocol changes with its
/// state (a VM whose host moves its vCPUs) or with the buffers (a re-sent
/// buffer read twice by single copy is in cache) to what won during the few
/// seconds of the measurement. So where the built-in rules let the receiver
/// choose, the measured section does too, and the measurement only says
/// where it starts: single copy from the measured threshold, or two-copy
/// at every size ([`CMA_NEVER_FIRST`]) when single copy never won.
fn as_run(base: &Params, tuned: &Params) -> Params {
    // Answers were measured on their own (`measure_answers`).
    let tuned = &Params {
        lone_rendezvous_min: base.lone_rendezvous_min,
        ..tuned.clone()
    };
    if !(base.adaptive && base.cma) {
        return tuned.clone();
    }
    Params {
        adaptive: true,
        cma: true,
        cma_threshold: if tuned.cma {
            tuned.cma_threshold
        } else {
            CMA_NEVER_FIRST
        },
        cma_chunk: if tuned.cma {
            tuned.cma_chunk
        } else {
            base.cma_chunk
        },
        ..tuned.clone()
    }
}

/// The outcome of the acceptance check of one class.
struct Verdict {
    keep: bool,
    /// The deadline came before the check ended (then `keep` is false).
    unfinished: bool,
    /// Largest and smallest measured/built-in time ratio, and where.
    worst: (f64, String),
    best: (f64, String),
}

impl Verdict {
    fn describe(&self) -> String {
        if self.unfinished {
            "built-in parameters kept (no time left to finish checking the measured ones)".into()
        } else if self.keep {
            format!(
                "measured parameters kept (up to {:.2}x the built-in time, at {}; {:.2}x at {})",
                self.best.0, self.best.1, self.worst.0, self.worst.1
            )
        } else {
            format!(
                "built-in parameters kept (the measured ones took {:.2}x the time at {}, {:.2}x at {})",
                self.worst.0, self.worst.1, self.best.0, self.best.1
            )
        }
    }
}

/// Measures the built-in and the measured parameters of `class` against each
/// other, interleaved, at [`CHECK_SIZES`] in both tests; starts no
/// measurement after `deadline` (the verdict is then `unfinished`).
fn check(
    m: &Machine,
    class: &str,
    pair: (u32, u32),
    base: &Params,
    cand: &Params,
    deadline: Instant,
) -> Result<Verdict> {
    let unfinished = || Verdict {
        keep: false,
        unfinished: true,
        worst: (f64::NAN, String::new()),
        best: (f64::NAN, String::new()),
    };
    if Instant::now() >= deadline {
        return Ok(unfinished());
    }
    let mut runner = runner(m, Test::Latency, &CHECK_SIZES, 3, 1.0)?;
    // times[test][set][size]: the job medians, seconds per message.
    let mut times = vec![vec![vec![Vec::new(); CHECK_SIZES.len()]; 2]; 2];
    for round in 0..CHECK_ROUNDS {
        for k in 0..2 {
            let set = (k + round) % 2;
            let params = if set == 0 { base } else { cand };
            for (ti, test) in [Test::Latency, Test::Bw].into_iter().enumerate() {
                if Instant::now() >= deadline {
                    return Ok(unfinished());
                }
                runner.test = test;
                let meds = medians(&mut runner, pair, class, params, &CHECK_SIZES)?;
                for (si, t) in meds.into_iter().enumerate() {
                    times[ti][set][si].push(t);
                }
            }
        }
    }
    let mut worst = (0.0, String::new());
    let mut best = (f64::INFINITY, String::new());
    for (ti, test) in ["latency", "bw"].into_iter().enumerate() {
        for (si, &size) in CHECK_SIZES.iter().enumerate() {
            let med = |v: &[f64]| topocomm_measure::Summary::of(v).map_or(f64::NAN, |s| s.median);
            let b = med(&times[ti][0][si]);
            let t = med(&times[ti][1][si]);
            let ratio = t / b.max(1e-12);
            let at = format!("{test} {}", topocomm_topo::human_bytes(size));
            if ratio > worst.0 {
                worst = (ratio, at.clone());
            }
            if ratio < best.0 {
                best = (ratio, at);
            }
        }
    }
    Ok(Verdict {
        keep: worst.0 <= KEEP_IF_NOT_SLOWER && best.0 < KEEP_IF_FASTER,
        unfinished: false,
        worst,
        best,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use topocomm_transport::{CopyKind, Owner};

    fn base() -> Params {
        Params {
            inline_max: 40,
            eager_max: 16 << 10,
            fragment: 128 << 10,
            depth: 32,
            cma: true,
            cma_threshold: 32 << 10,
            adaptive: true,
            cma_chunk: 1 << 20,
            copy: CopyKind::Plain,
            nt_threshold: 1 << 27,
            stream_out_min: 8 << 20,
            buffer_owner: Owner::Sender,
            lone_rendezvous_min: None,
            help_min: topocomm_transport::rules::HELP_NEVER,
        }
    }

    #[test]
    fn answers_that_did_not_pay_are_recorded_as_never() {
        let a = |from, skipped| Answers {
            from,
            ratios: vec![(8192, 1.3)],
            skipped,
        };
        assert_eq!(a(Some(8192), None).rule(), Some(8192));
        // Measured not to pay: never, above any eager limit, so that the
        // built-in answers from 8 KiB do not come back on load.
        let never = a(None, None).rule().expect("measured");
        assert!(never > (64 << 20) && never > base().eager_max);
        assert!(a(None, None).describe().contains("answers stay eager"));
        // Nothing measured (no single copy): the built-in rules stay.
        assert_eq!(a(None, Some("the class has no single copy")).rule(), None);
    }

    #[test]
    fn answers_are_weighed_against_eager_ones_even_where_the_base_answers() {
        let base = Params {
            lone_rendezvous_min: Some(8192),
            ..base()
        };
        let (eager, on) = answer_sets(&base, 4096);
        assert_eq!(eager.lone_rendezvous_min, None);
        assert_eq!(on.lone_rendezvous_min, Some(4096));
        // Written for the measuring jobs, "none" stays none (a missing key
        // would load the built-in answers).
        let m = topocomm_topo::load(&"synthetic:pack:1 l3:1 core:2 pu:1".parse().unwrap()).unwrap();
        let mut r = Rules::builtin(&m);
        r.classes.insert("l3".into(), eager.clone());
        let back = Rules::from_toml(std::path::Path::new("x"), &r.to_toml(), &m).unwrap();
        let lone = back.classes["l3"].lone_rendezvous_min;
        assert!(lone.is_some_and(|v| v > eager.eager_max), "{lone:?}");
        assert_eq!(
            Params {
                lone_rendezvous_min: None,
                ..back.classes["l3"].clone()
            },
            eager
        );
    }

    #[test]
    fn a_check_past_its_deadline_measures_nothing_and_keeps_the_built_in_parameters() {
        let m = topocomm_topo::load(&"synthetic:pack:1 l3:1 core:2 pu:1".parse().unwrap()).unwrap();
        let t = Instant::now();
        let v = check(&m, "l3", (0, 1), &base(), &base(), t).unwrap();
        assert!(v.unfinished && !v.keep);
        assert!(v.describe().contains("no time left"), "{}", v.describe());
        assert!(t.elapsed() < Duration::from_millis(100));
        assert!(CHECKS_UNTIL < CHECK_DEADLINE && CHECK_DEADLINE < Duration::from_secs(10));
    }

    #[test]
    fn answers_start_where_every_larger_size_was_faster_by_single_copy() {
        let k = 4 << 10;
        assert_eq!(
            answers_from(&[(k, 1.25), (2 * k, 0.87), (4 * k, 0.70)]),
            Some(2 * k)
        );
        assert_eq!(
            answers_from(&[(k, 0.9), (2 * k, 0.87), (4 * k, 0.70)]),
            Some(k)
        );
        // A size in between that did not gain: only above it.
        assert_eq!(
            answers_from(&[(k, 0.9), (2 * k, 1.0), (4 * k, 0.70)]),
            Some(4 * k)
        );
        assert_eq!(answers_from(&[(k, 0.9), (2 * k, 0.8), (4 * k, 0.96)]), None);
        assert_eq!(answers_from(&[]), None);
        let a = Answers {
            from: Some(2 * k),
            ratios: vec![(k, 1.25), (2 * k, 0.87)],
            skipped: None,
        };
        assert!(
            a.describe().contains("answers from 8KB by single copy"),
            "{}",
            a.describe()
        );
        // A section without single copy measures nothing.
        let m = topocomm_topo::load(&"synthetic:pack:1 l3:1 core:2 pu:1".parse().unwrap()).unwrap();
        let no_cma = Params {
            cma: false,
            ..base()
        };
        let t = Instant::now();
        let a = measure_answers(&m, "l3", (0, 1), &no_cma).unwrap();
        assert!(a.from.is_none() && a.skipped.is_some());
        assert!(t.elapsed() < Duration::from_millis(100));
    }

    #[test]
    fn a_measured_section_keeps_the_receivers_choice_and_starts_where_it_measured() {
        // A two-copy winner (single copy never won): two-copy first, CMA
        // still allowed, the measured fragment and eager limit kept.
        let two = Params {
            eager_max: 32 << 10,
            fragment: 32 << 10,
            depth: 16,
            cma: false,
            adaptive: false,
            ..base()
        };
        let r = as_run(&base(), &two);
        assert!(r.adaptive && r.cma);
        assert_eq!(r.cma_threshold, CMA_NEVER_FIRST);
        assert_eq!((r.fragment, r.depth, r.eager_max), (32 << 10, 16, 32 << 10));
        r.validate().unwrap();
        // Single copy won from 256 KiB in chunks of 256 KiB: it starts there.
        let single = Params {
            cma_threshold: 256 << 10,
            cma_chunk: 256 << 10,
            adaptive: false,
            ..base()
        };
        let r = as_run(&base(), &single);
        assert!(r.adaptive);
        assert_eq!((r.cma_threshold, r.cma_chunk), (256 << 10, 256 << 10));
        // Built-in rules without the choice (no single copy): as measured.
        let fixed = Params {
            cma: false,
            adaptive: false,
            ..base()
        };
        assert_eq!(as_run(&fixed, &two), two);
    }
}
