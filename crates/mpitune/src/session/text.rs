//! The words of a run: the header of the exported file (what it is, how to
//! use it, the verified numbers, what the search tried) and the report
//! printed at the end (side-by-side tables, summary, evidence of slower
//! sizes, read-back). Every function returns text; tables are drawn by the
//! caller's [`TableFn`], so that they look like the rest of its output.

use super::{Outcome, Setup, MIN_GAIN};
use crate::host::Load;
use crate::objective::{ClassVerdict, NoiseFloor, Objective, SizeCompare, TOLERANCE};
use crate::search::SearchResult;
use crate::space::{describe, Layer};
use crate::verify::ReadBack;
use std::fmt::Write as _;
use topocomm_measure::backends::MpiImpl;
use topocomm_measure::meta::RunMeta;
use topocomm_measure::p2p::size_label;

/// Draws a plain-text table: a header and rows of formatted cells, one
/// line each, every line ending in a newline.
pub type TableFn = fn(&[&str], &[Vec<String>]) -> String;

/// Why the verification did not confirm a setting.
pub fn rejection(feasible: bool, clean: bool, score: f64) -> String {
    if !feasible || !clean {
        "some size is slower than default beyond the A/A noise".into()
    } else {
        format!("gain x{score:.2} is not above x{:.2}", 1.0 + MIN_GAIN)
    }
}

/// The bw gains over the objective's sizes: `64K x1.20, 1M x1.35`.
pub fn gains(v: &ClassVerdict, obj: &Objective) -> String {
    v.sizes
        .iter()
        .filter(|s| s.test == "bw" && obj.contains(s.size))
        .map(|s| format!("{} x{:.2}", size_label(s.size), s.gain))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The gain's 95% interval: the inverse of the slowdown's.
fn gain_interval(c: &SizeCompare) -> (f64, f64) {
    (1.0 / c.slowdown_ci.1, 1.0 / c.slowdown_ci.0)
}

/// `median [ci_low, ci_high]`, 3 decimals below 1.
fn ci(s: &topocomm_measure::Summary) -> String {
    let digits = if s.median < 1.0 { 3 } else { 2 };
    format!(
        "{:.*} [{:.*}, {:.*}]",
        digits, s.median, digits, s.ci_low, digits, s.ci_high
    )
}

/// The machine load line.
pub fn load_line(l: &Load) -> String {
    let f = |x: Option<f64>| x.map_or_else(|| "?".to_string(), |v| format!("{v:.2}"));
    format!(
        "machine load (1-min load average) {} at the start, {} at the end, on {} usable PUs{}",
        f(l.start),
        f(l.end),
        l.pus,
        if l.overloaded() {
            ": other processes competed for the PUs, medians are unreliable"
        } else {
            ""
        }
    )
}

/// The header of the exported file: what it is, where it was measured, how
/// to use it and, once `verified` (classes, score, feasible), the numbers.
pub fn header_lines(
    meta: &RunMeta,
    version: &str,
    layer: Layer,
    s: &Setup,
    verified: Option<(&[ClassVerdict], f64, bool)>,
    load: Option<&Load>,
) -> Vec<String> {
    let f = s.out.display().to_string();
    let mut h = vec![
        format!("Tuned shared-memory settings for {version}, written by topocomm {} (topocomm tune --mpi {}).", meta.version, s.which.name()),
        format!(
            "Machine: {} ({}), topology {}; measured on {}.",
            meta.hostname.clone().unwrap_or_default(),
            meta.cpu_model.clone().unwrap_or_else(|| "unknown CPU".into()),
            meta.fingerprint,
            s.classes
                .iter()
                .map(|c| format!("{} pair {},{} weight {:.2}", c.class, c.pair.0, c.pair.1, c.weight))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        format!("Command: {}", meta.command.join(" ")),
    ];
    h.push(match layer {
        Layer::Vader => format!(
            "Use: mpirun --tune {f} ...   or   export OMPI_MCA_mca_base_envar_file_prefix={f} (Open MPI 4.1; pml ob1, btl vader).\nNot OMPI_MCA_mca_base_param_files={f} alone: it replaces the default files (Debian's /etc/openmpi/openmpi-mca-params.conf excludes pml ucx, btl uct/ofi; without it Open MPI picks pml cm, ~40x slower here)."
        ),
        Layer::OmpiUcx => format!(
            "Use: mpirun --tune {f} ...   or   export OMPI_MCA_mca_base_envar_file_prefix={f} (pml ucx: mca_base_env_list exports the UCX variables to every rank)."
        ),
        Layer::MpichUcx => format!(
            "Use: source {f} (or . {f}) before mpiexec/mpirun.mpich; Hydra passes the environment to every rank."
        ),
    });
    match verified {
        None => h.push("Verification pending.".into()),
        Some((vs, score, _)) => {
            h.push(String::new());
            h.push(format!(
                "Verified (defaults vs this file, same run, bw gain over {}): {}.",
                s.objective.label(),
                verdict(slower_sizes(vs), score)
            ));
            if let Some(l) = load {
                h.push(load_line(l));
            }
            for v in vs {
                h.push(format!(
                    "{} (median GB/s or us, default -> tuned, gain [95% interval], A/A noise):",
                    v.class
                ));
                for c in &v.sizes {
                    let (lo, hi) = gain_interval(c);
                    h.push(format!(
                        "  {:<7} {:>5}  {:>9.3} -> {:>9.3}  x{:.2} [{:.2}, {:.2}]  {:.0}%{}",
                        c.test,
                        size_label(c.size),
                        c.default.median,
                        c.tuned.median,
                        c.gain,
                        lo,
                        hi,
                        c.noise * 100.0,
                        if c.slower { "  SLOWER" } else { "" }
                    ));
                }
            }
        }
    }
    h
}

/// What the search tried, so that "nothing to set" is explained too.
pub fn tried_lines(r: &SearchResult, obj: &Objective) -> Vec<String> {
    let mut h = vec![
        String::new(),
        format!(
            "Search: {} jobs in {} round(s){}; each candidate vs defaults measured just before it (x = weighted bw gain over {}):",
            r.steps.len(),
            r.rounds,
            if r.budget_exhausted { ", stopped by the time budget" } else { "" },
            obj.label()
        ),
    ];
    for st in r.steps.iter().filter(|s| s.role != "defaults") {
        h.push(format!(
            "  round {} {:<12} {:<60} x{:.2}{}",
            st.round,
            st.role,
            describe(&st.setting),
            st.score,
            match (&st.error, st.feasible) {
                (Some(_), _) => " failed",
                (None, false) => " rejected (a size slower beyond the A/A noise)",
                _ => "",
            }
        ));
        for e in &st.slower {
            h.push(format!("      slower: {e}"));
        }
        for e in &st.out_of_scope {
            h.push(format!("      out of scope (not vetoing): {e}"));
        }
    }
    h
}

/// The report printed at the end of a run, every line ending in a newline.
pub fn report(o: &Outcome, table: TableFn) -> String {
    let s = &o.setup;
    let v = &o.verification;
    let mut out = verdicts(s.which, &v.verdicts, table);
    match &o.search {
        Some(se) => {
            let r = &se.result;
            if r.best.is_empty() {
                out.push_str("\n(no setting beat the defaults: both columns are the defaults, an A/A test; their differences are the machine's noise)\n");
            }
            out.push_str(&summary(&v.verdicts, o.score, &s.objective));
            let _ = writeln!(
                out,
                "search: {} measurements, {} round(s){}; settings: {}",
                r.steps.len(),
                r.rounds,
                if r.budget_exhausted {
                    " (time budget reached)"
                } else {
                    ""
                },
                describe(&r.best)
            );
            for r in &se.rejected_before {
                let _ = writeln!(
                    out,
                    "the verification rejected {}; then verified {}",
                    describe(r),
                    describe(&se.exported)
                );
            }
            let _ = writeln!(out, "wrote {}", s.out.display());
            out.push_str(&readback(&o.readback, &o.sources, table));
            out.push_str(&evidence(&v.slower, &v.once, &v.noise));
            if se.rejected {
                let _ = writeln!(
                    out,
                    "the verification rejected {} ({}): {} keeps the MPI's defaults (the read-back above checked the rejected values)",
                    describe(&se.exported),
                    rejection(o.feasible, v.clean, o.score),
                    s.out.display()
                );
            }
        }
        None => {
            if o.values.is_empty() {
                let _ = writeln!(
                    out,
                    "\n({} sets nothing: an A/A test; the differences are the machine's noise)",
                    o.file.display()
                );
            }
            out.push_str(&summary(&v.verdicts, o.score, &s.objective));
            out.push_str(&evidence(&v.slower, &v.once, &v.noise));
            out.push_str(&readback(&o.readback, &o.sources, table));
        }
    }
    out.push_str(&load_line(&o.load));
    out.push('\n');
    out
}

/// `--verify`: the line that says a file with values passed the rule but not
/// the gain a search asks for; `None` otherwise.
pub fn not_confirmed(o: &Outcome) -> Option<String> {
    let v = &o.verification;
    (o.search.is_none() && v.clean && o.score <= 1.0 + MIN_GAIN && !o.values.is_empty())
        .then(|| format!("not confirmed: {}", rejection(o.feasible, v.clean, o.score)))
}

/// The side-by-side table of each class.
pub fn verdicts(which: MpiImpl, verdicts: &[ClassVerdict], table: TableFn) -> String {
    let mut out = String::new();
    for v in verdicts {
        let _ = writeln!(
            out,
            "\n{} — class {} (median [95% CI]; bw in GB/s, latency in us)",
            which.name(),
            v.class
        );
        let rows: Vec<Vec<String>> = v
            .sizes
            .iter()
            .map(|c| {
                let (lo, hi) = gain_interval(c);
                vec![
                    c.test.clone(),
                    size_label(c.size),
                    ci(&c.default),
                    ci(&c.tuned),
                    format!("x{:.2} [{lo:.2}, {hi:.2}]", c.gain),
                    format!("{:.0}%", c.noise * 100.0),
                    if c.slower {
                        "slower".into()
                    } else if c.gain < 1.0 - TOLERANCE {
                        "within noise".into()
                    } else {
                        String::new()
                    },
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "test",
                "size",
                "default",
                "tuned",
                "gain [95%]",
                "A/A noise",
                "note",
            ],
            &rows,
        ));
    }
    out
}

/// The verdict of a comparison, worded from its own figures: `slower`
/// sizes (the table's "slower" marks) and the weighted bw gain `score`.
/// Slower sizes make it "slower" whatever the gain; otherwise the gain
/// decides: above x(1 + MIN_GAIN) "faster", below x(1 - MIN_GAIN) "slower
/// overall" (every size within the noise, but the objective's bandwidth
/// lower), else "no difference".
pub fn verdict(slower: usize, score: f64) -> String {
    let gain = format!("weighted bw gain x{score:.2}");
    if slower > 0 {
        format!("SLOWER than default: {slower} size(s) slower beyond the A/A noise; {gain}")
    } else if score > 1.0 + MIN_GAIN {
        format!("faster than default: {gain}, no size slower beyond the A/A noise")
    } else if score < 1.0 - MIN_GAIN {
        format!(
            "slower overall: {gain} (below x{:.2}), though no single size is slower beyond the A/A noise",
            1.0 - MIN_GAIN
        )
    } else {
        format!(
            "no difference beyond the noise: {gain} (within x{:.2}-x{:.2}), no size slower",
            1.0 - MIN_GAIN,
            1.0 + MIN_GAIN
        )
    }
}

/// Sizes the table marks slower, over every class.
pub fn slower_sizes(verdicts: &[ClassVerdict]) -> usize {
    verdicts
        .iter()
        .map(|v| v.sizes.iter().filter(|c| c.slower).count())
        .sum()
}

/// The weighted gain, the verdict and the noise floor.
pub fn summary(verdicts: &[ClassVerdict], score: f64, obj: &Objective) -> String {
    let mut out = format!(
        "\nweighted bw gain over {}: x{score:.2} (geometric mean)\nverdict: {}\n",
        obj.label(),
        verdict(slower_sizes(verdicts), score)
    );
    let noise: Vec<f64> = verdicts
        .iter()
        .flat_map(|v| v.sizes.iter().map(|c| c.default.relative_ci()))
        .collect();
    if let Some(max) = noise.iter().copied().reduce(f64::max) {
        let mut sorted = noise.clone();
        sorted.sort_by(f64::total_cmp);
        let _ = writeln!(
            out,
            "noise: CI half-width of the default medians {:.0}% median, {:.0}% worst",
            sorted[sorted.len() / 2] * 100.0,
            max * 100.0
        );
    }
    out
}

/// The rule, and the evidence of every size it found slower (or slower in
/// one alternation only).
pub fn evidence(slower: &[String], once: &[String], noise: &NoiseFloor) -> String {
    let mut out = format!(
        "rule: a size is slower when the whole 95% interval of its slowdown lies above 1 + max({:.0}%, the A/A noise at that size); A/A noise from {} pair(s) of default jobs in this run\n",
        TOLERANCE * 100.0,
        noise.pairs
    );
    for e in slower {
        let _ = writeln!(out, "slower: {e}");
    }
    for e in once {
        let _ = writeln!(out, "slower in one alternation only (not established): {e}");
    }
    out
}

/// What the MPI read back from the file.
pub fn readback(readback: &[ReadBack], sources: &[(String, String)], table: TableFn) -> String {
    let mut out = String::new();
    if !readback.is_empty() {
        let rows: Vec<Vec<String>> = readback
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.expected.clone(),
                    r.read.clone().unwrap_or_else(|| "-".into()),
                    r.how.clone(),
                    if r.ok { "ok" } else { "NOT APPLIED" }.into(),
                ]
            })
            .collect();
        out.push_str("read-back under the file:\n");
        out.push_str(&table(&["name", "file", "read", "how", "status"], &rows));
    }
    for (v, src) in sources {
        let _ = writeln!(out, "ompi_info: {v} (source: {src})");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_follows_the_figures() {
        // A slower size makes it slower even with a large gain elsewhere.
        let v = verdict(1, 1.40);
        assert!(v.starts_with("SLOWER") && v.contains("x1.40"), "{v}");
        // No size slower: the gain decides, in both directions.
        assert!(
            verdict(0, 1.20).starts_with("faster"),
            "{}",
            verdict(0, 1.20)
        );
        let v = verdict(0, 0.80);
        assert!(
            v.starts_with("slower overall") && !v.contains("faster"),
            "{v}"
        );
        assert!(verdict(0, 1.01).starts_with("no difference"));
        assert!(verdict(0, 0.98).starts_with("no difference"));
        // At the edges: MIN_GAIN is the line.
        assert!(verdict(0, 1.0 + MIN_GAIN + 1e-6).starts_with("faster"));
        assert!(verdict(0, 1.0 - MIN_GAIN - 1e-6).starts_with("slower overall"));
    }
}
