//! Strategies and the `auto` portfolio.

use crate::anneal::anneal;
use crate::baseline::{baseline_order, Baseline};
use crate::cost::{Costs, Metric};
use crate::error::MapError;
use crate::graph::Graph;
use crate::group::group;
use crate::matrix::CommMatrix;
use crate::multilevel::multisection;
use crate::objective::Obj;
use crate::refine::{order_to_vertex_at_leaf, refine, Placement};
use crate::subtree::refine_subtrees;
use crate::target::Target;
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Every strategy below; keeps the one with the lowest objective.
    Auto,
    /// Bottom-up hierarchical grouping followed by swap refinement.
    TreeMatch,
    /// Bottom-up hierarchical grouping alone (TreeMatch as Open MPI ships it).
    Greedy,
    /// Swap refinement started from the packed placement.
    PackedRefined,
    /// Recursive multisection by multilevel bisection + swap refinement.
    Multilevel,
    Baseline(Baseline),
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Strategy::Auto,
            "treematch" => Strategy::TreeMatch,
            "greedy" => Strategy::Greedy,
            "packed-refined" => Strategy::PackedRefined,
            "multilevel" => Strategy::Multilevel,
            "packed" => Strategy::Baseline(Baseline::Packed),
            "round-robin" | "rr" => Strategy::Baseline(Baseline::RoundRobin),
            "scatter" => Strategy::Baseline(Baseline::Scatter),
            "random" => Strategy::Baseline(Baseline::Random),
            _ => {
                return Err(format!(
                    "unknown strategy '{s}' (expected auto, multilevel, treematch, greedy, packed-refined, packed, round-robin, scatter or random)"
                ))
            }
        })
    }
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Auto => "auto",
            Strategy::TreeMatch => "treematch",
            Strategy::Greedy => "greedy",
            Strategy::PackedRefined => "packed-refined",
            Strategy::Multilevel => "multilevel",
            Strategy::Baseline(b) => b.name(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct MapOptions {
    pub metric: Metric,
    pub costs: Costs,
    pub strategy: Strategy,
    pub seed: u64,
    /// Maximum refinement sweeps.
    pub passes: usize,
    /// Seconds after which the multilevel mapper starts no further try.
    pub time_limit: f64,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions {
            metric: Metric::Cost,
            costs: Costs::defaults(),
            strategy: Strategy::Auto,
            seed: 1,
            passes: 8,
            time_limit: 3.0,
        }
    }
}

/// One strategy's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct StrategyResult {
    pub name: String,
    pub objective: f64,
    pub seconds: f64,
}

#[derive(Clone, Debug)]
pub struct MapResult {
    /// Leaf (see [`Target::slot_of_leaf`]) of every rank.
    pub leaf_of_rank: Vec<u32>,
    /// Name of the strategy whose placement was kept.
    pub chosen: String,
    /// Every strategy tried, including all baselines, in order of trial.
    pub tried: Vec<StrategyResult>,
}

/// Maps the ranks of `m` onto `target`.
pub fn map(target: &Target, m: &CommMatrix, opt: &MapOptions) -> Result<MapResult, MapError> {
    if m.n > target.len() {
        return Err(MapError::Invalid(format!(
            "{} ranks but only {} slots; pass --oversubscribe or give more nodes/slots",
            m.n,
            target.len()
        )));
    }
    let g = Graph::from_matrix(m, target.len());
    let ob = Obj::new(target, &opt.costs, opt.metric);
    let weights: Vec<f64> = (0..g.adj.len())
        .map(|k| ob.weight(target, g.bytes[k], g.msgs[k]))
        .collect();
    let objective = |p: &Placement| ob.total(target, &g, &p.leaf_of);

    let mut tried: Vec<StrategyResult> = Vec::new();
    let mut best: Option<(f64, String, Placement)> = None;
    let mut consider = |name: &str, p: Placement, obj: f64, t0: Instant, keep: bool| {
        tried.push(StrategyResult {
            name: name.into(),
            objective: obj,
            seconds: t0.elapsed().as_secs_f64(),
        });
        // Strict improvement only: ties keep the earlier (simpler) candidate.
        if keep && best.as_ref().is_none_or(|b| obj < b.0) {
            best = Some((obj, name.to_string(), p));
        }
    };
    let debug = std::env::var_os("TOPOCOMM_MAP_DEBUG").is_some();
    let run_grouping = |refined: bool| -> Placement {
        let t0 = Instant::now();
        let p = match group(target, &g, &weights) {
            Some(v) => Placement::from_vertex_at_leaf(v),
            None => Placement::from_order(&baseline_order(target, Baseline::Packed, 0)),
        };
        let mut p = p;
        if debug {
            let o = objective(&p);
            eprintln!(
                "debug: grouping {:.2} s, objective {o:.4e}",
                t0.elapsed().as_secs_f64()
            );
        }
        if refined {
            let t1 = Instant::now();
            let o = refine(target, &g, &ob, &mut p, opt.passes, opt.seed);
            if debug {
                eprintln!(
                    "debug: refinement {:.2} s, objective {o:.4e}",
                    t1.elapsed().as_secs_f64()
                );
            }
        }
        p
    };
    let want = |s: Strategy| opt.strategy == Strategy::Auto || opt.strategy == s;
    // Baselines are always scored (the summary compares with them); only
    // the requested strategy (or, for auto, every one) can be kept.
    for b in Baseline::ALL {
        let t0 = Instant::now();
        let p = Placement::from_vertex_at_leaf(order_to_vertex_at_leaf(&baseline_order(
            target, b, opt.seed,
        )));
        let obj = objective(&p);
        consider(b.name(), p, obj, t0, want(Strategy::Baseline(b)));
    }
    if want(Strategy::Greedy) && opt.strategy != Strategy::Auto {
        let t0 = Instant::now();
        let p = run_grouping(false);
        let obj = objective(&p);
        consider("greedy", p, obj, t0, true);
    }
    if want(Strategy::TreeMatch) {
        let t0 = Instant::now();
        let p = run_grouping(true);
        let obj = objective(&p);
        consider("treematch", p, obj, t0, true);
    }
    if want(Strategy::PackedRefined) {
        let t0 = Instant::now();
        let mut p = Placement::from_order(&baseline_order(target, Baseline::Packed, 0));
        refine(target, &g, &ob, &mut p, opt.passes, opt.seed);
        let obj = objective(&p);
        consider("packed-refined", p, obj, t0, true);
    }
    if want(Strategy::Multilevel) {
        let t0 = Instant::now();
        let tries = multilevel_tries(g.n, g.adj.len());
        // The last start is the ranks' own order (packed): applications
        // often number ranks meaningfully (rows of a process grid).
        let seeded = if tries > 1 { tries - 1 } else { 1 } as usize;
        let starts = seeded_starts(seeded, |i| {
            // The time limit skips seeds, never the first one and never the
            // packed start below.
            if i > 0 && i + 1 < tries as usize && t0.elapsed().as_secs_f64() > opt.time_limit {
                return None;
            }
            let s = opt.seed.wrapping_add(i as u64);
            let ts = Instant::now();
            let leaf = multisection(target, &g, &ob, m.n, s, inner_threads(seeded))?;
            let mut p = Placement::from_rank_leaves(&leaf, target.len());
            let t1 = Instant::now();
            refine(target, &g, &ob, &mut p, opt.passes, s);
            Some(Start {
                objective: objective(&p),
                placement: p,
                sectioning_s: t1.duration_since(ts).as_secs_f64(),
                refinement_s: t1.elapsed().as_secs_f64(),
            })
        });
        let mut kept: Option<(f64, Placement)> = None;
        for (i, r) in starts.into_iter().enumerate() {
            let Some(st) = r else { continue };
            if debug {
                eprintln!(
                    "debug: multilevel start {i}: multisection {:.2} s, refinement {:.2} s, objective {:.4e}",
                    st.sectioning_s, st.refinement_s, st.objective
                );
            }
            if kept.as_ref().is_none_or(|k| st.objective < k.0) {
                kept = Some((st.objective, st.placement));
            }
        }
        if tries > 1 {
            let mut p = Placement::from_order(&baseline_order(target, Baseline::Packed, 0));
            // Refined only when within 20 % of the best start: the
            // refinement gains less than that (saves it at scale).
            if kept.as_ref().is_none_or(|k| objective(&p) <= 1.2 * k.0) {
                let t1 = Instant::now();
                refine(
                    target,
                    &g,
                    &ob,
                    &mut p,
                    opt.passes,
                    opt.seed.wrapping_add(tries - 1),
                );
                let obj = objective(&p);
                if debug {
                    eprintln!(
                        "debug: multilevel packed start: refinement {:.2} s, objective {obj:.4e}",
                        t1.elapsed().as_secs_f64()
                    );
                }
                if kept.as_ref().is_none_or(|k| obj < k.0) {
                    kept = Some((obj, p));
                }
            }
        }
        // The kept start's groups trade places whole (subtree.rs), then
        // its ranks get another swap pass if that moved anything. Once, on
        // the best start only: on the benchmark it gained as much there as
        // on every start (hop-bytes against Scotch, geometric mean over 30
        // cases: 1.0253 -> 1.0261 at 1 rank per PU, 1.0462 -> 1.0477 at 8,
        // the worst case 0.998 -> 1.000), for a third of the time. Like
        // the annealing, only up to ANNEAL_MAX_ENTRIES edge entries (at
        // 100k ranks and 1M edges it took 1.8-2.1 s for 0.1-0.2 %) and
        // within the time limit.
        let trades = opt.metric != Metric::MaxCongestion
            && g.adj.len() <= ANNEAL_MAX_ENTRIES
            && t0.elapsed().as_secs_f64() <= opt.time_limit;
        if let Some((obj, p)) = kept.as_mut().filter(|_| trades) {
            let t1 = Instant::now();
            let traded = refine_subtrees(target, &g, &ob, p, opt.passes, opt.seed);
            if traded < *obj {
                refine(target, &g, &ob, p, opt.passes, opt.seed);
                *obj = objective(p);
            }
            if debug {
                eprintln!(
                    "debug: multilevel subtree trades {:.2} s, objective {obj:.4e}",
                    t1.elapsed().as_secs_f64()
                );
            }
        }
        // Like a seed, the annealing is skipped past the time limit.
        let steps = anneal_steps(g.adj.len());
        let in_time = t0.elapsed().as_secs_f64() <= opt.time_limit;
        if let Some((obj, p)) = kept.as_mut().filter(|_| steps > 0 && in_time) {
            let t1 = Instant::now();
            // A sum objective never rises, so it anneals in place;
            // max-congestion anneals its hop-bytes, which need not lower
            // the maximum: on a copy, kept only if the maximum drops.
            let sum = opt.metric != Metric::MaxCongestion;
            let mut copy = (!sum).then(|| p.clone());
            let q = copy.as_mut().unwrap_or(p);
            anneal(target, &g, &ob, q, steps, opt.seed);
            let o = objective(q);
            if debug {
                eprintln!(
                    "debug: multilevel annealing {steps} steps {:.2} s, objective {o:.4e}",
                    t1.elapsed().as_secs_f64()
                );
            }
            if o < *obj || sum {
                *obj = o;
                if let Some(q) = copy {
                    *p = q;
                }
            }
        }
        if let Some((obj, p)) = kept {
            consider("multilevel", p, obj, t0, true);
        }
    }
    let (_, chosen, p) = best.expect("at least one strategy ran");
    Ok(MapResult {
        leaf_of_rank: p.leaf_of[..m.n].to_vec(),
        chosen,
        tried,
    })
}

/// One seeded start of the multilevel mapper, refined.
struct Start {
    objective: f64,
    placement: Placement,
    sectioning_s: f64,
    refinement_s: f64,
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Threads each of `seeded` concurrent starts gives its cuts.
fn inner_threads(seeded: usize) -> usize {
    let all = threads();
    (all / all.min(seeded).max(1)).max(1)
}

/// Runs `start(0..seeded)` side by side on up to one thread per CPU, each
/// thread taking the next start in seed order; the results come back in
/// seed order. Each start's result depends on its seed alone, so what the
/// caller keeps does not depend on the number of threads.
fn seeded_starts<F>(seeded: usize, start: F) -> Vec<Option<Start>>
where
    F: Fn(usize) -> Option<Start> + Sync,
{
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<Start>>> = Mutex::new((0..seeded).map(|_| None).collect());
    std::thread::scope(|sc| {
        for _ in 0..threads().min(seeded) {
            sc.spawn(|| loop {
                // Relaxed: the counter only hands out indexes; the results
                // travel through the mutex and the scope's join.
                let i = next.fetch_add(1, AtomicOrdering::Relaxed);
                if i >= seeded {
                    break;
                }
                let r = start(i);
                if let Ok(mut d) = done.lock() {
                    d[i] = r;
                }
            });
        }
    });
    done.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// Starts the multilevel mapper tries (seeds, then the packed order): a
/// function of the graph's size only (the same seed gives the same
/// mapping); `--time-limit` skips the remaining seeds on a slow machine
/// (never the packed start).
///
/// About 2 M ranks + edge entries in all: at 100k ranks and 1M edges that
/// is one seeded start, which then gets every CPU for its cuts, where two
/// seeded starts side by side took 2.9-4.1 s on the 2-vCPU Xeon VM for
/// objectives 0.00-0.06 % lower (1.7-2.3 s with one).
fn multilevel_tries(n: usize, adj: usize) -> u64 {
    (2_000_000 / (n + adj).max(1)).clamp(2, 8) as u64
}

/// Annealing steps after the multilevel starts (a function of the
/// graph's size, like the number of starts): 50 per edge entry, at most
/// [`ANNEAL_MAX_STEPS`], on graphs of up to [`ANNEAL_MAX_ENTRIES`]; none
/// above, where the starts already take the time.
///
/// 50 per entry up to 25 000 entries: 0.15-0.25 s on the 2-vCPU dev VM at
/// 1000 ranks, 0.2-0.35 s at 2048 ranks, where it took Scotch's lead on
/// strided all-to-all blocks from 0.8 % to 0.1 %. The capped steps on
/// 25 000-100 000 entries: a bounded number barely moves a stencil or a
/// geometric graph there (4900 ranks, 47 000 entries: 0.2 % better), but
/// they take back the all-to-all blocks of 7680-16384 ranks (8 per PU)
/// where Scotch had been 1.0-1.3 % better (0.990 -> 0.998 and 0.987 ->
/// 1.000 of Scotch), each case then mapped in 0.5-1.3 s in all (was
/// 0.2-0.6 s).
fn anneal_steps(adj: usize) -> usize {
    if adj <= ANNEAL_MAX_ENTRIES {
        (50 * adj).min(ANNEAL_MAX_STEPS)
    } else {
        0
    }
}

const ANNEAL_MAX_ENTRIES: usize = 100_000;
const ANNEAL_MAX_STEPS: usize = 1_250_000;
