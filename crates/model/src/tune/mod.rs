//! `topocomm tune`: per locality class, the transport parameters that
//! minimize the time per message over a range of sizes (seed 000's rule
//! discovery). Two searches over the same [`space::Space`]:
//!
//! * grid: measure every candidate (like OTPO/OPTO), bounded by a budget;
//! * model: measure two calibration sets, fit the model's fixed costs,
//!   predict every candidate, and measure only around the predicted optimum.
//!
//! Both assemble their measurements into one rules section per class
//! ([`assemble`]); a verification step then measures the assembled
//! sections against the single best global setting and the built-in
//! defaults in interleaved rounds.

pub mod assemble;
pub mod plan;
pub mod report;
pub mod runner;
pub mod space;

use crate::fit::{fit, Fit, Observation};
use crate::predict::predict;
use crate::rates::ClassRates;
use assemble::{assemble, winners, Assembled, Entry};
use runner::{pool, Budget, Runner, TimePoint};
use serde::{Deserialize, Serialize};
use space::{around, grid, label, single_copy, two_copy, Space};
use std::collections::BTreeMap;
use std::time::Instant;
use topocomm_transport::{CopyKind, Owner, Params};

/// Which searches to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    Grid,
    Model,
    Both,
}

impl std::str::FromStr for SearchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "grid" => Ok(SearchMode::Grid),
            "model" => Ok(SearchMode::Model),
            "both" => Ok(SearchMode::Both),
            o => Err(format!("unknown mode '{o}' (expected grid, model or both)")),
        }
    }
}

/// One class to tune: its name, representative pair and built-in parameters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    pub class: String,
    pub pair: (u32, u32),
    pub builtin: Params,
    /// Copy rates for the model-guided search (from bench cache).
    #[serde(skip)]
    pub rates: Option<ClassRates>,
}

/// The per-size winner of a search.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Winner {
    pub size: u64,
    pub candidate: String,
    pub seconds: f64,
}

/// What one search found for one class.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Search {
    pub mode: String,
    /// Jobs (one parameter set at every size) and points (jobs x sizes).
    pub jobs: usize,
    pub points: usize,
    pub seconds: f64,
    /// Candidates of the space not measured because the budget ran out.
    pub skipped: usize,
    pub winners: Vec<Winner>,
    pub assembled: Assembled,
    /// Model search: the fitted fixed costs and the predicted optimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Assembled>,
    pub entries: Vec<Entry>,
}

/// One verified rule set of a class.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Verified {
    /// `defaults`, `global`, `grid`, `model`.
    pub name: String,
    pub params: Params,
    pub points: Vec<TimePoint>,
}

/// `num / den` time ratio at one size; < 1 means `num` is faster. The
/// interval is the conservative one of the two medians' CIs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimeRatio {
    pub size: u64,
    pub num: String,
    pub den: String,
    pub median: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

pub fn ratio(size: u64, num: (&str, &TimePoint), den: (&str, &TimePoint)) -> TimeRatio {
    TimeRatio {
        size,
        num: num.0.into(),
        den: den.0.into(),
        median: num.1.median / den.1.median,
        ci_low: num.1.ci_low / den.1.ci_high,
        ci_high: num.1.ci_high / den.1.ci_low,
    }
}

/// Geometric mean of `num / den` medians over sizes.
pub fn geomean_ratio(num: &[TimePoint], den: &[TimePoint]) -> f64 {
    let v: Vec<f64> = num
        .iter()
        .filter_map(|a| {
            den.iter()
                .find(|b| b.size == a.size)
                .map(|b| (a.median / b.median).ln())
        })
        .collect();
    if v.is_empty() {
        return f64::NAN;
    }
    (v.iter().sum::<f64>() / v.len() as f64).exp()
}

/// The result for one class.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClassTune {
    pub class: String,
    pub pair: (u32, u32),
    pub builtin: Params,
    pub grid: Option<Search>,
    pub model: Option<Search>,
    /// The section written to the rules file and which search it came from.
    pub chosen: String,
    pub tuned: Params,
    pub verified: Vec<Verified>,
    pub ratios: Vec<TimeRatio>,
    /// Geometric-mean time ratio of the model's section over the grid's
    /// (both verified in the same rounds); > 1 means the model lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_vs_grid: Option<f64>,
}

/// Settings of one tuning run.
#[derive(Clone, Debug)]
pub struct Settings {
    pub mode: SearchMode,
    pub space: Space,
    pub budget: Budget,
    /// Verification rounds (each set measured once per round, interleaved).
    pub rounds: usize,
    pub cma_ok: bool,
}

fn to_winners(entries: &[Entry], sizes: &[u64]) -> Vec<Winner> {
    winners(entries, sizes)
        .into_iter()
        .filter_map(|(s, m, t)| {
            m.map(|m| Winner {
                size: s,
                candidate: m,
                seconds: t,
            })
        })
        .collect()
}

/// Measures one candidate section, naming it on the progress line
/// (`tune CLASS STAGE i/total: LABEL`).
fn measure_entry(
    r: &mut Runner,
    t: &Target,
    progress: &mut dyn FnMut(&str),
    stage: &str,
    (i, total): (usize, usize),
    params: Params,
) -> Result<Entry, String> {
    progress(&format!(
        "tune {} {stage} {}/{}: {}",
        t.class,
        i + 1,
        total,
        label(&params)
    ));
    let points = r.measure(t.pair, &t.class, &params)?;
    Ok(Entry { params, points })
}

fn search_grid(
    r: &mut Runner,
    t: &Target,
    set: &Settings,
    progress: &mut dyn FnMut(&str),
) -> Result<Search, String> {
    let start = Instant::now();
    let jobs0 = r.jobs;
    let all = grid(&t.builtin, &set.space);
    let total = all.len();
    let cands: Vec<Params> = space::spread_order(total)
        .into_iter()
        .map(|i| all[i].clone())
        .collect();
    let mut entries = Vec::new();
    let mut skipped = 0;
    for (i, p) in cands.into_iter().enumerate() {
        if set.budget.exhausted() && !entries.is_empty() {
            skipped = total - i;
            break;
        }
        entries.push(measure_entry(r, t, progress, "grid", (i, total), p)?);
    }
    finish("grid", r, t, entries, jobs0, start, skipped, None, None)
}

#[allow(clippy::too_many_arguments)]
fn finish(
    mode: &str,
    r: &Runner,
    t: &Target,
    entries: Vec<Entry>,
    jobs0: usize,
    start: Instant,
    skipped: usize,
    fit: Option<Fit>,
    predicted: Option<Assembled>,
) -> Result<Search, String> {
    let assembled = assemble(&t.builtin, &entries, &r.sizes).ok_or_else(|| {
        format!(
            "{}: the {mode} search has no candidate measured at every size",
            t.class
        )
    })?;
    let jobs = r.jobs - jobs0;
    Ok(Search {
        mode: mode.into(),
        jobs,
        points: jobs * r.sizes.len(),
        seconds: start.elapsed().as_secs_f64(),
        skipped,
        winners: to_winners(&entries, &r.sizes),
        assembled,
        fit,
        predicted,
        entries,
    })
}

/// Predicted times of `p` at every size as an entry (one "sample").
fn predicted_entry(rates: &ClassRates, p: &Params, fit: &Fit, sizes: &[u64], cma: bool) -> Entry {
    Entry {
        params: p.clone(),
        points: sizes
            .iter()
            .filter_map(|&s| TimePoint::of(s, vec![predict(rates, p, s, &fit.overheads, cma)]))
            .collect(),
    }
}

fn search_model(
    r: &mut Runner,
    t: &Target,
    set: &Settings,
    progress: &mut dyn FnMut(&str),
) -> Result<Search, String> {
    let rates = t.rates.as_ref().ok_or_else(|| {
        format!(
            "{}: no copy rates for the model-guided search (bench cache results missing)",
            t.class
        )
    })?;
    let start = Instant::now();
    let jobs0 = r.jobs;
    let sp = &set.space;
    // 1. Calibration: the built-in two-copy section and forced single copy.
    let calib = [
        Params {
            cma: false,
            ..t.builtin.clone()
        },
        single_copy(&t.builtin, t.builtin.cma_chunk),
    ];
    let mut entries: Vec<Entry> = Vec::new();
    for (i, p) in calib.into_iter().enumerate() {
        entries.push(measure_entry(
            r,
            t,
            progress,
            "model calibration",
            (i, 2),
            p,
        )?);
    }
    let obs: Vec<Observation> = entries
        .iter()
        .flat_map(|e| {
            e.points.iter().map(|pt| Observation {
                params: &e.params,
                size: pt.size,
                seconds: pt.median,
            })
        })
        .collect();
    let f = fit(rates, &obs, set.cma_ok);
    // 2. Predict the model-covered part of the space (copy routine and
    //    buffer owner are not in the model: plain, sender).
    let covered = Space {
        copies: vec![CopyKind::Plain],
        owners: vec![Owner::Sender],
        ..sp.clone()
    };
    let predicted: Vec<Entry> = grid(&t.builtin, &covered)
        .iter()
        .map(|p| predicted_entry(rates, p, &f, &r.sizes, set.cma_ok))
        .collect();
    let best = assemble(&t.builtin, &predicted, &r.sizes)
        .ok_or_else(|| format!("{}: the model predicts no candidate", t.class))?;
    // 3. Measure around the predicted optimum.
    let b = &best.params;
    let mut probes = vec![
        two_copy(
            &t.builtin,
            b.fragment,
            b.depth,
            CopyKind::Plain,
            Owner::Sender,
            true,
        ),
        two_copy(
            &t.builtin,
            b.fragment,
            b.depth,
            CopyKind::Plain,
            Owner::Sender,
            false,
        ),
    ];
    for f2 in around(&sp.fragments, b.fragment) {
        probes.push(two_copy(
            &t.builtin,
            f2,
            b.depth,
            CopyKind::Plain,
            Owner::Sender,
            true,
        ));
    }
    for d in around(&sp.depths, b.depth) {
        probes.push(two_copy(
            &t.builtin,
            b.fragment,
            d,
            CopyKind::Plain,
            Owner::Sender,
            true,
        ));
    }
    if sp.copies.contains(&CopyKind::Nontemporal) {
        probes.push(two_copy(
            &t.builtin,
            b.fragment,
            b.depth,
            CopyKind::Nontemporal,
            Owner::Sender,
            true,
        ));
    }
    if sp.owners.contains(&Owner::Receiver) {
        probes.push(two_copy(
            &t.builtin,
            b.fragment,
            b.depth,
            CopyKind::Plain,
            Owner::Receiver,
            true,
        ));
    }
    if b.cma {
        for k in around(&sp.cma_chunks, b.cma_chunk) {
            probes.push(single_copy(&t.builtin, k));
        }
    }
    let mut seen: Vec<String> = entries.iter().map(|e| label(&e.params)).collect();
    probes.retain(|p| {
        let l = label(p);
        if seen.contains(&l) {
            false
        } else {
            seen.push(l);
            true
        }
    });
    let total = probes.len();
    let mut skipped = 0;
    for (i, p) in probes.into_iter().enumerate() {
        if set.budget.exhausted() {
            skipped = total - i;
            break;
        }
        entries.push(measure_entry(r, t, progress, "model probe", (i, total), p)?);
    }
    finish(
        "model",
        r,
        t,
        entries,
        jobs0,
        start,
        skipped,
        Some(f),
        Some(best),
    )
}

/// The single best global setting: the candidate measured for every class
/// (by its label) with the least total log-gap to the per-size winners.
fn global_best(classes: &[(Target, Vec<Entry>)], sizes: &[u64]) -> Option<String> {
    let mut score: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for (_, entries) in classes {
        let best = winners(entries, sizes);
        for e in entries {
            let mut s = 0.0;
            let mut n = 0;
            for (size, _, b) in &best {
                if let Some(p) = e.at(*size) {
                    s += (p.median / b).ln();
                    n += 1;
                }
            }
            if n == sizes.len() {
                let a = score.entry(label(&e.params)).or_insert((0.0, 0));
                a.0 += s;
                a.1 += 1;
            }
        }
    }
    score
        .into_iter()
        .filter(|(_, (_, n))| *n == classes.len())
        .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
        .map(|(l, _)| l)
}

/// Runs the searches and the verification for every target.
pub fn tune(
    r: &mut Runner,
    targets: &[Target],
    set: &Settings,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<ClassTune>, String> {
    let mut searched: Vec<(Target, Option<Search>, Option<Search>)> = Vec::new();
    // Each class gets an equal share of the budget, from its own start.
    let share = set.budget.limit / targets.len().max(1) as u32;
    for t in targets {
        let set = &Settings {
            budget: Budget {
                start: Instant::now(),
                limit: share,
            },
            ..set.clone()
        };
        let g = match set.mode {
            SearchMode::Grid | SearchMode::Both => Some(search_grid(r, t, set, progress)?),
            SearchMode::Model => None,
        };
        let m = match set.mode {
            SearchMode::Model | SearchMode::Both => Some(search_model(r, t, set, progress)?),
            SearchMode::Grid => None,
        };
        searched.push((t.clone(), g, m));
    }
    // Global setting over every measured entry of every class.
    let pooled: Vec<(Target, Vec<Entry>)> = searched
        .iter()
        .map(|(t, g, m)| {
            let mut v: Vec<Entry> = Vec::new();
            for s in [g, m].into_iter().flatten() {
                v.extend(s.entries.iter().cloned());
            }
            (t.clone(), v)
        })
        .collect();
    let global = global_best(&pooled, &r.sizes);
    let mut out = Vec::new();
    for ((t, g, m), (_, entries)) in searched.into_iter().zip(&pooled) {
        let mut sets: Vec<(String, Params)> = vec![("defaults".into(), t.builtin.clone())];
        if let Some(gl) = &global {
            if let Some(e) = entries.iter().find(|e| &label(&e.params) == gl) {
                sets.push(("global".into(), e.params.clone()));
            }
        }
        if let Some(s) = &g {
            sets.push(("grid".into(), s.assembled.params.clone()));
        }
        if let Some(s) = &m {
            sets.push(("model".into(), s.assembled.params.clone()));
        }
        // Identical sections are measured once.
        let mut uniq: Vec<Params> = Vec::new();
        for (_, p) in &sets {
            if !uniq.contains(p) {
                uniq.push(p.clone());
            }
        }
        let mut runs: Vec<Vec<Vec<TimePoint>>> = vec![Vec::new(); uniq.len()];
        for round in 0..set.rounds.max(1) {
            for (i, p) in uniq.iter().enumerate() {
                progress(&format!(
                    "tune {} verify round {}/{}: {}",
                    t.class,
                    round + 1,
                    set.rounds.max(1),
                    label(p)
                ));
                runs[i].push(r.measure(t.pair, &t.class, p)?);
            }
        }
        let pooled_runs: Vec<Vec<TimePoint>> = runs.iter().map(|v| pool(v)).collect();
        let verified: Vec<Verified> = sets
            .iter()
            .map(|(n, p)| Verified {
                name: n.clone(),
                params: p.clone(),
                points: pooled_runs[uniq.iter().position(|u| u == p).expect("in uniq")].clone(),
            })
            .collect();
        let get = |n: &str| verified.iter().find(|v| v.name == n);
        // The section written: the best verified set (geometric mean of
        // the time over sizes against the defaults), so that a search
        // misled by noise never writes a section slower than what it
        // replaces; searches win ties.
        let base_pts = &get("defaults").expect("defaults are verified").points;
        let score = |v: &Verified| geomean_ratio(&v.points, base_pts);
        let tuned = ["grid", "model", "global", "defaults"]
            .into_iter()
            .filter_map(&get)
            .min_by(|a, b| score(a).total_cmp(&score(b)))
            .expect("defaults are verified");
        let chosen = tuned.name.as_str();
        let mut ratios = Vec::new();
        for den in ["defaults", "global"] {
            let Some(d) = get(den) else { continue };
            for p in &tuned.points {
                if let Some(q) = d.points.iter().find(|q| q.size == p.size) {
                    ratios.push(ratio(p.size, ("tuned", p), (den, q)));
                }
            }
        }
        let model_vs_grid = match (get("grid"), get("model")) {
            (Some(a), Some(b)) => Some(geomean_ratio(&b.points, &a.points)),
            _ => None,
        };
        out.push(ClassTune {
            class: t.class.clone(),
            pair: t.pair,
            builtin: t.builtin.clone(),
            chosen: chosen.into(),
            tuned: tuned.params.clone(),
            grid: g,
            model: m,
            verified,
            ratios,
            model_vs_grid,
        });
    }
    Ok(out)
}
