//! One run of `topocomm tune --mpi openmpi|mpich` (docs/commands/tune-mpi.md):
//! resolve the [`Options`] ([`Setup`]), find the layer that carries the
//! MPI's intra-node messages, search the [`Space`] with tc_mpibench, write
//! the file, measure the defaults against the file alternately
//! ([`Verification`]), keep its values only when that verification pays,
//! and read them back inside the MPI ([`crate::verify`]). With
//! [`Options::verify`], no search: an existing file is verified and read
//! back, and only read.
//!
//! [`run`] returns the [`Outcome`]; [`text`] words it, [`Outcome::json`]
//! is the `--json` document (docs/formats/tune-mpi-json.md). Progress goes
//! to a callback, one line per call.

mod setup;
pub mod text;
mod verification;

pub use setup::{parse_mpi, Options, Setup};
pub use verification::Verification;

use crate::export::{read_export, render, Entry, Export, OPENMPI_FILE_VAR};
use crate::host::{loadavg, mpi_build, mpi_version, which_exists, Load};
use crate::objective::{combine, ClassVerdict, Objective};
use crate::runner::{layer_of_pml, openmpi_pml, Runner};
use crate::search::{coordinate_descent, Adoption, SearchOptions, SearchResult};
use crate::space::{describe, Layer, Setting, Space};
use crate::verify::{ompi_info_sources, verify_file, ReadBack};
use std::path::{Path, PathBuf};
use std::time::Duration;
use topocomm_measure::backends::MpiImpl;
use topocomm_measure::meta::RunMeta;
use topocomm_topo::Machine;
use verification::{verification_runner, verify_alternating, Alternation};

/// A setting must beat the defaults by this fraction, in the search and in
/// the verification, to be exported.
pub const MIN_GAIN: f64 = 0.03;

/// Smaller settings verified after the verification rejects the search's
/// best (each costs one more verification).
pub const MAX_FALLBACKS: usize = 2;

/// An error and its sources, joined by ": " (as the CLI prints errors).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The search of a tuning run.
#[derive(Clone, Debug)]
pub struct Searched {
    pub space: Space,
    pub result: SearchResult,
    /// The verification rejected the last setting it verified: the file
    /// keeps the MPI's defaults.
    pub rejected: bool,
    /// The setting the file was verified with: the search's best, or a
    /// smaller one after the verification rejected the best ([`fallback`]).
    pub exported: Setting,
    /// The settings the verification rejected before `exported`, in order.
    pub rejected_before: Vec<Setting>,
}

/// What a run measured and wrote.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub setup: Setup,
    pub meta: RunMeta,
    /// The MPI's version line.
    pub version: String,
    pub layer: Layer,
    /// `None` under `--verify`.
    pub search: Option<Searched>,
    /// The file verified: the one written, or the `--verify` file.
    pub file: PathBuf,
    /// Its values (a rejected file's: the search's, which were read back).
    pub values: Vec<(String, String)>,
    pub verification: Verification,
    /// Weighted gain and feasibility of the verification ([`combine`]).
    pub score: f64,
    pub feasible: bool,
    pub readback: Vec<ReadBack>,
    /// `ompi_info`'s source of each value (Open MPI, btl vader).
    pub sources: Vec<(String, String)>,
    pub load: Load,
}

impl Outcome {
    /// The error when some value did not take effect in the MPI.
    pub fn not_applied(&self) -> Option<String> {
        self.readback.iter().any(|r| !r.ok).then(|| {
            format!(
                "{}: some values did not take effect in {} (see the read-back table)",
                self.file.display(),
                self.setup.which.name()
            )
        })
    }

    /// Exit status 0: always after a search; under `--verify`, when no size
    /// is slower than default, or when the file sets nothing (an A/A test
    /// cannot make anything slower).
    pub fn passed(&self) -> bool {
        self.search.is_some() || self.verification.clean || self.values.is_empty()
    }

    /// The `--json` document (docs/formats/tune-mpi-json.md).
    pub fn json(&self) -> serde_json::Value {
        let s = &self.setup;
        let v = &self.verification;
        let verification = serde_json::json!({
            "score": self.score,
            "feasible": self.feasible,
            "classes": v.verdicts,
            "defaults": v.defaults,
            "tuned": v.tuned,
            "readback": self.readback,
        });
        let file = self.file.display().to_string();
        match &self.search {
            Some(se) => serde_json::json!({
                "schema": "topocomm.tune-mpi/1",
                "meta": self.meta,
                "mpi": s.which.name(),
                "mpi_version": self.version,
                "layer": self.layer,
                "space": se.space,
                "classes": s.classes,
                "objective": s.objective,
                "search": se.result,
                "exported": se.exported,
                "rejected_before": se.rejected_before,
                "file": file,
                "load": self.load,
                "verification": verification,
            }),
            None => serde_json::json!({
                "schema": "topocomm.tune-mpi/1",
                "meta": self.meta,
                "mpi": s.which.name(),
                "mpi_version": self.version,
                "layer": self.layer,
                "classes": s.classes,
                "objective": s.objective,
                "file": file,
                "load": self.load,
                "verification": verification,
            }),
        }
    }
}

/// What both kinds of run start from.
struct Prepared {
    s: Setup,
    layer: Layer,
    build: PathBuf,
    space: Space,
    runner: Runner,
    weights: Vec<f64>,
    load_start: Option<f64>,
}

/// Runs `tune --mpi` with `opts` on the live machine modelled by `m`.
/// Bad input fails before any MPI job starts.
pub fn run(m: &Machine, opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Outcome, String> {
    let s = Setup::new(m, opts)?;
    let to_verify = match &opts.verify {
        Some(f) => Some(read_export(s.which, f).map_err(|e| format!("--verify: {e}"))?),
        None => None,
    };
    let p = prepare(s, opts, progress)?;
    match (&opts.verify, to_verify) {
        (Some(file), Some(export)) => verify_only(m, p, file, export, progress),
        _ => tune(m, p, opts.quick, progress),
    }
}

fn prepare(s: Setup, opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Prepared, String> {
    if which_exists(s.which.mpirun()).is_none() {
        return Err(format!(
            "{} not found: install the {} package (scripts/setup.sh)",
            s.which.mpirun(),
            s.which.name()
        ));
    }
    let build = mpi_build(s.which, opts.exe.as_deref())?;
    let layer = match s.which {
        MpiImpl::OpenMpi => {
            let pml = openmpi_pml(&build)?;
            progress(&format!("openmpi: pml {pml} carries intra-node messages"));
            layer_of_pml(&pml)
        }
        MpiImpl::Mpich => Layer::MpichUcx,
    };
    let space = if opts.quick {
        Space::quick(s.which, layer)
    } else {
        Space::full(s.which, layer)
    };
    // The defaults must be the MPI's defaults, not the caller's environment.
    let mut preset = space.env_names();
    if s.which == MpiImpl::OpenMpi {
        preset.push("OMPI_MCA_mca_base_param_files".into());
        preset.push(OPENMPI_FILE_VAR.into());
    }
    if let Some(v) = preset.iter().find(|v| std::env::var_os(v).is_some()) {
        return Err(format!("${v} is set in the environment: unset it, so that the defaults measured are the MPI's own"));
    }
    let (bw, latency) = Runner::params(&s.params);
    let runner = Runner {
        which: s.which,
        build: build.clone(),
        layer,
        pairs: s
            .classes
            .iter()
            .map(|c| (c.class.clone(), c.pair))
            .collect(),
        bw,
        latency,
        timeout: opts.timeout.map(Duration::from_secs),
    };
    let weights = s.classes.iter().map(|c| c.weight).collect();
    Ok(Prepared {
        s,
        layer,
        build,
        space,
        runner,
        weights,
        load_start: loadavg(),
    })
}

/// The search, the file, its verification and read-back.
fn tune(
    m: &Machine,
    p: Prepared,
    quick: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome, String> {
    let Prepared {
        s,
        layer,
        build,
        space,
        runner,
        weights,
        load_start,
    } = p;
    progress(&format!(
        "tuning {} ({} presets, {} parameters, {} candidate values) on {} over {} sizes; budget {} s",
        s.which.name(),
        space.presets.len(),
        space.params.len(),
        space
            .params
            .iter()
            .map(|p| p.candidates.len())
            .sum::<usize>(),
        s.classes
            .iter()
            .map(|c| format!(
                "{} {},{} (weight {:.2})",
                c.class, c.pair.0, c.pair.1, c.weight
            ))
            .collect::<Vec<_>>()
            .join(", "),
        s.params.sizes.len(),
        s.budget.as_secs()
    ));
    let opts = SearchOptions {
        budget: s.budget,
        max_rounds: s.rounds,
        min_gain: MIN_GAIN,
        confirm: !quick,
        paired: !quick,
        objective: s.objective,
    };
    let result = coordinate_descent(
        &space,
        &weights,
        &opts,
        &mut |set| runner.measure(set, &mut |_| {}),
        &mut |msg| progress(&format!("  {msg}")),
    )
    .map_err(|e| format!("{}: {e}", s.which.name()))?;
    progress(&format!(
        "search: {} measurements in {} round(s){}; best: {} (x{:.2} over the defaults while searching)",
        result.steps.len(),
        result.rounds,
        if result.budget_exhausted { ", stopped by the time budget" } else { "" },
        describe(&result.best),
        result.best_score
    ));

    // Write the file, then measure defaults vs the file itself.
    let meta = RunMeta::new(m, topocomm_measure::timer::check());
    let version = mpi_version(s.which);
    let header = |verified, load| {
        let mut h = text::header_lines(&meta, &version, layer, &s, verified, load);
        h.extend(text::tried_lines(&result, &s.objective));
        h
    };
    // The verification judges every size with fresh jobs; when it rejects
    // the search's setting, a smaller one the search also found good may
    // still pay (the refinements of a strong first move are the usual
    // culprits at sizes the first move cannot touch): at most
    // MAX_FALLBACKS of them are verified in turn, never a setting that was
    // not verified itself.
    let mut exported = result.best.clone();
    let mut rejected_settings: Vec<Setting> = Vec::new();
    let (entries, v, score, feasible, keep) = loop {
        let entries = entries_for(&space, &result, &exported, &s.objective);
        write_file(&s.out, &render(layer, &header(None, None), &entries))?;
        let file_env = read_export(s.which, &s.out)?.env;
        let v = verify_alternating(
            &verification_runner(&runner, &s.params),
            &Alternation {
                file_env: &file_env,
                reps: if quick { 1 } else { 2 },
                file: &s.out,
                objective: &s.objective,
                weights: &weights,
                prior: Some(&result.noise),
            },
            progress,
        )?;
        let (score, feasible) = combine(&v.verdicts, &weights);
        // The file changes a value only when the verification shows that it
        // pays: no size slower (pooled or in any alternation), and the same
        // gain the search asked for. A setting adopted on noisy search
        // measurements, or one that is slower only some of the time, is
        // otherwise dropped.
        let keep = v.clean && score > 1.0 + MIN_GAIN;
        let next = (!keep && rejected_settings.len() < MAX_FALLBACKS)
            .then(|| fallback(&space, &result, &exported, &v.verdicts, &rejected_settings))
            .flatten();
        match next {
            Some((setting, why)) if !entries.is_empty() => {
                progress(&format!(
                    "the verification rejected {} ({}); verifying {} instead: {why}",
                    describe(&exported),
                    text::rejection(feasible, v.clean, score),
                    describe(&setting)
                ));
                rejected_settings.push(std::mem::replace(&mut exported, setting));
            }
            _ => break (entries, v, score, feasible, keep),
        }
    };
    let load = Load::since(load_start);

    // Rewrite the file with the verified numbers in its header (same values).
    let mut header = header(Some((&v.verdicts, score, feasible)), Some(&load));
    if !rejected_settings.is_empty() {
        // After the title line: what the verification turned down first.
        let mut note: Vec<String> = rejected_settings
            .iter()
            .map(|r| {
                format!(
                    "The verification rejected {} (a size slower, or no gain).",
                    describe(r)
                )
            })
            .collect();
        note.push(format!(
            "It then verified {}{}",
            describe(&exported),
            if keep { ", the setting below." } else { "." }
        ));
        note.push(String::new());
        header.splice(1..1, note);
    }
    write_file(&s.out, &render(layer, &header, &entries))?;
    let values: Vec<(String, String)> = entries
        .iter()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
    let readback = verify_file(s.which, layer, &build, &s.out, &values)?;
    let sources = sources(s.which, layer, &s.out, &values);

    let rejected = !keep && !entries.is_empty();
    if rejected {
        let mut note = vec![format!(
            "REJECTED by the verification ({}): this file keeps the MPI's defaults. The setting verified last was:",
            text::rejection(feasible, v.clean, score)
        )];
        note.extend(
            entries
                .iter()
                .map(|e| format!("  {} = {}", e.name, e.value)),
        );
        note.push(String::new());
        // After the title line, before everything else.
        header.splice(1..1, note);
        write_file(&s.out, &render(layer, &header, &[]))?;
    }
    Ok(Outcome {
        file: s.out.clone(),
        setup: s,
        meta,
        version,
        layer,
        search: Some(Searched {
            space,
            result,
            rejected,
            exported,
            rejected_before: rejected_settings,
        }),
        values,
        verification: v,
        score,
        feasible,
        readback,
        sources,
        load,
    })
}

/// `--verify FILE`: the verification and read-back of an existing export,
/// without a search. The file is only read.
fn verify_only(
    m: &Machine,
    p: Prepared,
    file: &Path,
    Export { values, env }: Export,
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome, String> {
    let Prepared {
        s,
        layer,
        build,
        runner,
        weights,
        load_start,
        ..
    } = p;
    progress(&format!(
        "verifying {} ({} value(s)) against the defaults of {}",
        file.display(),
        values.len(),
        s.which.name()
    ));
    let v = verify_alternating(
        &verification_runner(&runner, &s.params),
        &Alternation {
            file_env: &env,
            reps: 2,
            file,
            objective: &s.objective,
            weights: &weights,
            prior: None,
        },
        progress,
    )?;
    let (score, feasible) = combine(&v.verdicts, &weights);
    let load = Load::since(load_start);
    let readback = verify_file(s.which, layer, &build, file, &values)?;
    let sources = sources(s.which, layer, file, &values);
    Ok(Outcome {
        meta: RunMeta::new(m, topocomm_measure::timer::check()),
        version: mpi_version(s.which),
        setup: s,
        layer,
        search: None,
        file: file.to_path_buf(),
        values,
        verification: v,
        score,
        feasible,
        readback,
        sources,
        load,
    })
}

/// Where Open MPI says each value of `file` came from (btl vader only).
fn sources(
    which: MpiImpl,
    layer: Layer,
    file: &Path,
    values: &[(String, String)],
) -> Vec<(String, String)> {
    if which == MpiImpl::OpenMpi && layer == Layer::Vader && !values.is_empty() {
        let names: Vec<String> = values.iter().map(|(k, _)| k.clone()).collect();
        ompi_info_sources(file, &names).unwrap_or_default()
    } else {
        Vec::new()
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    topocomm_report::write_atomic(path, text.as_bytes())
        .map_err(|e| format!("--out {}: {e}", path.display()))
}

/// The next setting to verify after the verification rejected `cur`
/// (judged in `verdicts`), and why; `None` when there is none left that was
/// not verified already. First `cur` without the parameters that can change
/// a size found slower; then the search's first adopted move (the presets
/// come first: the strongest single move it measured).
fn fallback(
    space: &Space,
    r: &SearchResult,
    cur: &Setting,
    verdicts: &[ClassVerdict],
    tried: &[Setting],
) -> Option<(Setting, String)> {
    let slower: Vec<u64> = verdicts
        .iter()
        .flat_map(|v| v.sizes.iter().filter(|c| c.slower).map(|c| c.size))
        .collect();
    let fresh = |s: &Setting| !s.is_empty() && s != cur && !tried.contains(s);
    let trimmed = space.without_reaching(cur, &slower);
    if fresh(&trimmed) {
        let sizes: Vec<String> = slower
            .iter()
            .map(|&x| topocomm_measure::p2p::size_label(x))
            .collect();
        return Some((
            trimmed,
            format!(
                "the parameters that can change the slower size(s) {} dropped",
                sizes.join(", ")
            ),
        ));
    }
    // The first move starts from the defaults: every value it moved is set.
    let first = r.adoptions.first().map(|a| {
        let s: Setting = a
            .moved
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect();
        (s, a)
    });
    match first {
        Some((s, a)) if fresh(&s) => {
            let why = match &a.preset {
                Some(p) => format!("the search's first move, the preset \"{p}\""),
                None => format!("the search's first move ({})", a.param),
            };
            Some((s, why))
        }
        _ => None,
    }
}

/// One entry per parameter the search moved, with why (from the step that
/// adopted its final value).
fn entries_for(space: &Space, r: &SearchResult, set: &Setting, obj: &Objective) -> Vec<Entry> {
    let mut out = Vec::new();
    for (name, value) in set {
        let prm = space.param(name);
        let mut why = Vec::new();
        if let Some(p) = prm {
            why.push(format!("{name}: {} (default {}).", p.what, p.default));
        }
        let adopted = |a: &&Adoption| a.moved.iter().any(|(k, _)| k == name);
        if let Some(ad) = r.adoptions.iter().rev().find(adopted) {
            if let Some(p) = &ad.preset {
                why.push(format!("Set with the preset \"{p}\"."));
            }
            why.push(format!(
                "Chosen in round {}: weighted bw gain over {} vs the defaults went x{:.2} -> x{:.2}",
                ad.round,
                obj.label(),
                ad.score_before,
                ad.score_after
            ));
            for v in &ad.verdicts {
                why.push(format!("  {}: {}", v.class, text::gains(v, obj)));
            }
            why.push(format!(
                "  and no measured size it can change (bw, latency <= 4K) slower beyond the A/A noise (the whole 95% interval of the slowdown above 1 + max({:.0}%, noise)).",
                crate::objective::TOLERANCE * 100.0
            ));
        }
        out.push(Entry {
            name: name.clone(),
            value: value.clone(),
            why,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objective::{NoiseFloor, SizeCompare};
    use crate::space::{set, Layer};
    use topocomm_measure::Summary;

    fn verdict(slower: &[u64]) -> Vec<ClassVerdict> {
        let s = Summary::of(&[1.0, 1.0, 1.0]).unwrap();
        vec![ClassVerdict {
            class: "l3".into(),
            score: 3.0,
            sizes: [8u64, 1024, 65536]
                .iter()
                .map(|&size| SizeCompare {
                    slowdown_ci: (1.0, 1.0),
                    noise: 0.1,
                    in_scope: true,
                    test: "bw".into(),
                    size,
                    unit: "GB/s".into(),
                    default: s.clone(),
                    tuned: s.clone(),
                    gain: 1.0,
                    slower: slower.contains(&size),
                })
                .collect(),
        }]
    }

    /// After a rejection the verification tries the best setting without
    /// the parameters that reach the slower sizes, then the search's first
    /// move, and never a setting it verified already or an empty one.
    #[test]
    fn a_rejected_setting_falls_back_to_what_cannot_touch_the_slower_sizes() {
        let space = Space::full(MpiImpl::OpenMpi, Layer::Vader);
        let preset = set(&[
            ("btl_vader_single_copy_mechanism", "none"),
            ("pml_ob1_send_pipeline_depth", "8"),
        ]);
        let best = set(&[
            ("btl_vader_fbox_size", "16384"),
            ("btl_vader_single_copy_mechanism", "none"),
            ("pml_ob1_send_pipeline_depth", "16"),
        ]);
        let r = SearchResult {
            best: best.clone(),
            best_score: 3.0,
            steps: Vec::new(),
            adoptions: vec![Adoption {
                round: 1,
                param: "presets".into(),
                preset: Some("pipeline".into()),
                moved: preset
                    .iter()
                    .map(|(k, v)| (k.clone(), Some(v.clone())))
                    .collect(),
                score_before: 1.0,
                score_after: 2.5,
                verdicts: Vec::new(),
            }],
            budget_exhausted: false,
            rounds: 1,
            noise: NoiseFloor::default(),
        };
        let small = verdict(&[8, 1024]);
        let (first, why) = fallback(&space, &r, &best, &small, &[]).expect("a fallback");
        assert_eq!(
            first,
            set(&[
                ("btl_vader_single_copy_mechanism", "none"),
                ("pml_ob1_send_pipeline_depth", "16"),
            ])
        );
        assert!(why.contains("8, 1K"), "{why}");
        // That one rejected too (a large size now): the preset.
        let large = verdict(&[65536]);
        let (second, why) =
            fallback(&space, &r, &first, &large, std::slice::from_ref(&best)).expect("the preset");
        assert_eq!(second, preset);
        assert!(why.contains("preset \"pipeline\""), "{why}");
        // The preset rejected as well: nothing left to verify.
        assert!(fallback(&space, &r, &second, &large, &[best, first]).is_none());
    }
}
