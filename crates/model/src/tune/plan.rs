//! `topocomm tune` (the transport tuner) without its command line: the
//! options resolved against the machine ([`plan`]), the searches over the
//! classes with the rules they produce ([`search`]), and the rules file's
//! text ([`rules_text`]).
//!
//! The caller reads the bench cache results for the model and builds the
//! [`Runner`] (it starts the `topocomm` executable).

use super::runner::{Budget, Runner};
use super::space::Space;
use super::{tune, ClassTune, SearchMode, Settings, Target};
use crate::choice::{parse_sizes, targets, ClassPair, DEFAULT_SIZES};
use crate::text::size_label;
use crate::{class_rates, ModelError};
use std::time::{Duration, Instant};
use topocomm_measure::cache::CachePoint;
use topocomm_measure::p2p::Test;
use topocomm_topo::Machine;
use topocomm_transport::Rules;

/// The transport tuner's options, as given (None: the default, which
/// depends on `quick`); see docs/commands/tune.md.
#[derive(Clone, Debug)]
pub struct Options {
    /// grid, model or both.
    pub mode: String,
    /// latency or bw.
    pub test: String,
    /// Comma-separated locality classes (default: every class present).
    pub classes: Option<String>,
    /// Message sizes (default [`DEFAULT_SIZES`]; quick: 4K,64K,512K,4M).
    pub sizes: Option<String>,
    /// Small grid, few samples.
    pub quick: bool,
    /// Seconds after which the searches start no new candidate (default 600; quick 60).
    pub budget: Option<f64>,
    /// Samples per point (default 7; quick 3).
    pub samples: Option<usize>,
    /// Minimum duration of one sample's batch, ms (default 2; quick 1).
    pub min_time_ms: Option<f64>,
    /// Verification rounds (default 3; quick 2).
    pub rounds: Option<usize>,
}

/// A tuning run resolved against the machine.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Class name and representative pair, at least one.
    pub targets: Vec<ClassPair>,
    pub search: SearchPlan,
    /// The test's name as given (`latency` or `bw`).
    pub test: String,
    pub quick: bool,
    /// The budget, seconds.
    pub budget_s: f64,
}

/// Resolves `o` against `m`, checking mode, test, classes, sizes and budget
/// in this order.
pub fn plan(m: &Machine, o: &Options) -> Result<Plan, ModelError> {
    let mode: SearchMode = o
        .mode
        .parse()
        .map_err(|reason| ModelError::Mode { reason })?;
    let test = match o.test.as_str() {
        "latency" => Test::Latency,
        "bw" => Test::Bw,
        other => {
            return Err(ModelError::Test {
                name: other.to_string(),
            })
        }
    };
    let wanted: Option<Vec<String>> = o.classes.as_deref().map(|c| {
        c.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    });
    let tg = targets(m, wanted.as_deref())?;
    if tg.is_empty() {
        return Err(ModelError::SinglePu {
            what: "nothing to tune",
        });
    }
    let quick = o.quick;
    let sizes = parse_sizes(o.sizes.as_deref().unwrap_or(if quick {
        "4K,64K,512K,4M"
    } else {
        DEFAULT_SIZES
    }))?;
    let budget = o.budget.unwrap_or(if quick { 60.0 } else { 600.0 });
    // At most a week: Duration::from_secs_f64 panics beyond u64 seconds.
    if !(budget > 0.0 && budget <= 604_800.0) {
        return Err(ModelError::Budget { value: budget });
    }
    Ok(Plan {
        targets: tg,
        search: SearchPlan {
            mode,
            test,
            sizes,
            space: Space::new(quick),
            samples: o.samples.unwrap_or(if quick { 3 } else { 7 }).max(1),
            min_time_ms: o.min_time_ms.unwrap_or(if quick { 1.0 } else { 2.0 }),
            rounds: o.rounds.unwrap_or(if quick { 2 } else { 3 }).max(1),
            budget: Duration::from_secs_f64(budget),
        },
        test: o.test.clone(),
        quick,
        budget_s: budget,
    })
}

/// What [`search`] measures and how long it may take.
#[derive(Clone, Debug)]
pub struct SearchPlan {
    pub mode: SearchMode,
    pub test: Test,
    pub sizes: Vec<u64>,
    pub space: Space,
    pub samples: usize,
    pub min_time_ms: f64,
    pub rounds: usize,
    /// After this, the searches start no new candidate.
    pub budget: Duration,
}

/// Tunes the classes of `tg` (class, representative pair) on this live
/// machine with `runner` (its test, sizes, samples and batch time are set
/// from `plan`): the built-in rules with each tuned class's section, and
/// the tuned classes. `cache` (points, where they came from) feeds the
/// model-guided search; a grid search needs none.
pub fn search(
    m: &Machine,
    tg: &[ClassPair],
    plan: &SearchPlan,
    cache: Option<(&[CachePoint], &str)>,
    runner: &mut Runner,
    progress: &mut dyn FnMut(&str),
) -> Result<(Rules, Vec<ClassTune>), ModelError> {
    let builtin = Rules::builtin(m);
    let mut targets_v = Vec::new();
    for (class, pair) in tg {
        let rates = match cache {
            Some((points, origin)) => {
                Some(
                    class_rates(points, class).map_err(|reason| ModelError::Rates {
                        origin: origin.to_string(),
                        class: class.clone(),
                        reason,
                    })?,
                )
            }
            None => None,
        };
        targets_v.push(Target {
            class: class.clone(),
            pair: *pair,
            builtin: builtin.params_for(Some(class)).clone(),
            rates,
        });
    }
    runner.test = plan.test;
    runner.sizes = plan.sizes.clone();
    runner.samples = plan.samples;
    runner.min_time_ms = plan.min_time_ms;
    let settings = Settings {
        mode: plan.mode,
        space: plan.space.clone(),
        budget: Budget {
            start: Instant::now(),
            limit: plan.budget,
        },
        rounds: plan.rounds,
        cma_ok: topocomm_transport::cma::probe_fork().is_ok(),
    };
    let classes = tune(runner, &targets_v, &settings, progress)
        .map_err(|reason| ModelError::Tune { reason })?;
    // Built-in rules with the tuned class sections.
    let mut rules = builtin;
    for c in &classes {
        rules.classes.insert(c.class.clone(), c.tuned.clone());
    }
    Ok((rules, classes))
}

/// The rules file `topocomm tune` writes: a comment saying what was tuned,
/// then `rules` as TOML.
pub fn rules_text(plan: &Plan, classes: &[ClassTune], rules: &Rules) -> String {
    format!(
        "# topocomm rules written by `topocomm tune` ({} test, sizes {}).\n# Tuned classes: {}. Other sections: the built-in model. Read by `topocomm run --rules` and `topocomm plan --rules`.\n{}",
        plan.test,
        plan.search.sizes.iter().map(|&s| size_label(s)).collect::<Vec<_>>().join(","),
        classes.iter().map(|c| format!("{} ({} section)", c.class, c.chosen)).collect::<Vec<_>>().join(", "),
        rules.to_toml()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            mode: "both".into(),
            test: "latency".into(),
            classes: None,
            sizes: None,
            quick: true,
            budget: None,
            samples: None,
            min_time_ms: None,
            rounds: None,
        }
    }

    #[test]
    fn quick_defaults_and_errors_in_order() {
        let m = topocomm_topo::load(&"synthetic:pack:2 core:2 pu:2".parse().unwrap()).unwrap();
        let p = plan(&m, &options()).unwrap();
        assert_eq!(p.targets.len(), 3);
        assert_eq!(p.search.sizes, vec![4 << 10, 64 << 10, 512 << 10, 4 << 20]);
        assert_eq!((p.search.samples, p.search.rounds), (3, 2));
        assert_eq!(p.budget_s, 60.0);
        let err = |f: fn(&mut Options)| {
            let mut o = options();
            f(&mut o);
            plan(&m, &o).unwrap_err().to_string()
        };
        assert_eq!(
            err(|o| {
                o.mode = "x".into();
                o.test = "y".into();
            }),
            "--mode: unknown mode 'x' (expected grid, model or both)"
        );
        assert_eq!(
            err(|o| o.test = "y".into()),
            "--test: unknown test 'y' (expected latency or bw)"
        );
        assert_eq!(
            err(|o| o.classes = Some(",".into())),
            "--classes: empty list"
        );
        assert_eq!(
            err(|o| o.budget = Some(f64::NAN)),
            "--budget NaN: expected a number of seconds in (0, 604800]"
        );
        // 1e308 s used to panic in Duration::from_secs_f64.
        assert_eq!(
            err(|o| o.budget = Some(1e308)),
            format!(
                "--budget {}: expected a number of seconds in (0, 604800]",
                1e308
            )
        );
        let single = topocomm_topo::load(&"synthetic:pack:1 core:1 pu:1".parse().unwrap()).unwrap();
        assert_eq!(
            plan(&single, &options()).unwrap_err().to_string(),
            "this machine has a single PU: nothing to tune"
        );
    }
}
