//! `topocomm tune`: per locality class, the transport parameters that
//! minimize the time per message, by exhaustive grid and/or model-guided
//! search; writes a rules file (docs/commands/tune.md).

use super::charact::{self, num, size_label};
use super::model::{cache_points, parse_sizes, targets};
use crate::common::{text_table, GlobalOpts};
use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use topocomm_measure::meta::RunMeta;
use topocomm_measure::p2p::Test;
use topocomm_model::class_rates;
use topocomm_model::tune::runner::{Budget, Runner};
use topocomm_model::tune::space::{label, Space};
use topocomm_model::tune::{self, ClassTune, SearchMode, Settings, Target};
use topocomm_topo::Machine;
use topocomm_transport::Rules;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Tune the installed MPI's shared-memory settings instead of topocomm's
    /// transport, and export them (MCA file / environment file): openmpi or
    /// mpich. See docs/commands/tune-mpi.md
    #[arg(long, value_name = "openmpi|mpich")]
    pub mpi: Option<String>,
    /// With --mpi: tune on this PU pair only (OS indexes); default: one
    /// representative pair per class, equally weighted
    #[arg(long, value_name = "P,Q", requires = "mpi", conflicts_with_all = ["matrix", "map"])]
    pub pair: Option<String>,
    /// With --mpi: weight the classes by this communication matrix (CSV
    /// src,dst,bytes,msgs) placed by --map
    #[arg(long, value_name = "FILE", requires = "mpi", requires = "map")]
    pub matrix: Option<PathBuf>,
    /// With --mpi: the placement of the matrix's ranks (perm file: `<node> <pu>` per rank)
    #[arg(long, value_name = "FILE", requires = "mpi", requires = "matrix")]
    pub map: Option<PathBuf>,
    /// With --mpi: outstanding messages per bandwidth window
    #[arg(long, value_name = "W", requires = "mpi")]
    pub window: Option<u32>,
    /// With --mpi: time bound of one MPI job, seconds
    #[arg(long, value_name = "SECS", requires = "mpi")]
    pub timeout: Option<u64>,
    /// With --mpi: no search; measure the defaults against this exported
    /// file and read its values back (exit status 1 if a size is slower)
    #[arg(long, value_name = "FILE", requires = "mpi", conflicts_with_all = ["out", "budget", "rounds", "quick"])]
    pub verify: Option<PathBuf>,
    /// With --mpi: message sizes whose bandwidth is maximized, MIN-MAX
    /// (default 64K-4M); the other sizes must only not get slower
    #[arg(long, value_name = "MIN-MAX", requires = "mpi")]
    pub objective: Option<String>,
    /// grid (measure every candidate), model (measure around the model's optimum), or both
    #[arg(long, default_value = "both")]
    pub mode: String,
    /// Locality classes to tune (default: every class present)
    #[arg(long, value_name = "LIST")]
    pub classes: Option<String>,
    /// Message sizes (default 1K,4K,16K,64K,256K,1M,4M,16M; quick: 4K,64K,512K,4M)
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Small grid, few samples: for tests and a first look (well under a minute on 2 cores)
    #[arg(long)]
    pub quick: bool,
    /// Rules file to write
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write the full results as JSON (docs/formats/tune-json.md)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// bench cache JSON for the model (default: a quick bench cache run)
    #[arg(long, value_name = "FILE")]
    pub cache: Option<PathBuf>,
    /// Seconds after which the searches start no new candidate (verification still runs);
    /// default 600, quick 60
    #[arg(long, value_name = "SECS")]
    pub budget: Option<f64>,
    /// Objective: latency (ping-pong one-way time) or bw (streaming, time per message)
    #[arg(long, default_value = "latency")]
    pub test: String,
    /// Samples per point (default 7; quick 3)
    #[arg(long)]
    pub samples: Option<usize>,
    /// Minimum duration of one sample's batch, ms (default 2; quick 1)
    #[arg(long)]
    pub min_time_ms: Option<f64>,
    /// Verification rounds, interleaving the rule sets (default 3; quick 2)
    #[arg(long)]
    pub rounds: Option<usize>,
}

#[derive(Serialize)]
pub struct TuneReport {
    pub schema: String,
    pub meta: RunMeta,
    pub mode: SearchMode,
    pub test: String,
    pub quick: bool,
    pub sizes: Vec<u64>,
    pub samples: usize,
    pub min_time_ms: f64,
    pub rounds: usize,
    pub budget_s: f64,
    pub grid_size: usize,
    pub cache_source: Option<String>,
    pub rules_file: String,
    pub classes: Vec<ClassTune>,
    pub seconds: f64,
}

fn us(s: f64) -> String {
    num(s * 1e6)
}

/// Terminal summary.
pub fn tables(r: &TuneReport) -> String {
    let mut out = format!(
        "tune: {} test, hot buffers, sizes {}; median of {} samples per point{}\n",
        r.test,
        r.sizes
            .iter()
            .map(|&s| size_label(s))
            .collect::<Vec<_>>()
            .join(","),
        r.samples,
        if r.quick { " (quick)" } else { "" }
    );
    for c in &r.classes {
        out.push_str(&format!(
            "\nclass {} (pair {},{})\n",
            c.class, c.pair.0, c.pair.1
        ));
        let searches: Vec<_> = [&c.grid, &c.model].into_iter().flatten().collect();
        let rows: Vec<Vec<String>> = searches
            .iter()
            .map(|s| {
                vec![
                    s.mode.clone(),
                    s.jobs.to_string(),
                    s.points.to_string(),
                    format!("{:.1} s", s.seconds),
                    s.skipped.to_string(),
                    label(&s.assembled.params),
                ]
            })
            .collect();
        out.push_str(&text_table(
            &[
                "search",
                "jobs",
                "points",
                "time",
                "skipped",
                "assembled section",
            ],
            &rows,
        ));
        if let Some(m) = &c.model {
            if let (Some(f), Some(p)) = (&m.fit, &m.predicted) {
                let o = &f.overheads;
                out.push_str(&format!(
                    "model: fitted message {} us, rendezvous {} us, per CMA call {} us, per page {} ns; predicted optimum: {}\n",
                    us(o.message), us(o.rendezvous), us(o.per_call), num(o.per_page * 1e9), label(&p.params)
                ));
            }
        }
        if let Some(g) = &c.grid {
            out.push_str("per-size winners (grid):\n");
            let rows: Vec<Vec<String>> = g
                .winners
                .iter()
                .map(|w| vec![size_label(w.size), w.candidate.clone(), us(w.seconds)])
                .collect();
            out.push_str(&text_table(&["size", "candidate", "us"], &rows));
        }
        let names: Vec<&str> = c.verified.iter().map(|v| v.name.as_str()).collect();
        out.push_str(&format!(
            "verification (us, median [95% CI], {} rounds pooled); written: {}\n",
            r.rounds, c.chosen
        ));
        let mut header = vec!["size".to_string()];
        header.extend(names.iter().map(|n| n.to_string()));
        header.push("tuned/defaults".into());
        header.push("tuned/global".into());
        let rows: Vec<Vec<String>> = r
            .sizes
            .iter()
            .map(|&s| {
                let mut row = vec![size_label(s)];
                for v in &c.verified {
                    row.push(
                        v.points
                            .iter()
                            .find(|p| p.size == s)
                            .map(|p| {
                                format!("{} [{}-{}]", us(p.median), us(p.ci_low), us(p.ci_high))
                            })
                            .unwrap_or("-".into()),
                    );
                }
                for den in ["defaults", "global"] {
                    row.push(
                        c.ratios
                            .iter()
                            .find(|x| x.size == s && x.den == den)
                            .map(|x| format!("{:.2} [{:.2},{:.2}]", x.median, x.ci_low, x.ci_high))
                            .unwrap_or("-".into()),
                    );
                }
                row
            })
            .collect();
        let h: Vec<&str> = header.iter().map(String::as_str).collect();
        out.push_str(&text_table(&h, &rows));
        if let (Some(g), Some(m), Some(x)) = (&c.grid, &c.model, c.model_vs_grid) {
            out.push_str(&format!(
                "model vs grid: {} vs {} jobs; verified time ratio model/grid (geometric mean over sizes) {:.2}\n",
                m.jobs, g.jobs, x
            ));
        }
    }
    out.push_str(&format!(
        "\nratios < 1: tuned faster. Rules written to {} ({:.0} s in all)\n",
        r.rules_file, r.seconds
    ));
    out
}

/// HTML for `topocomm report --tune FILE`.
pub fn html_from_json(v: &serde_json::Value) -> String {
    let mut s = String::from("<p>From <code>topocomm tune --json</code> (docs/commands/tune.md). Time ratios &lt; 1: the tuned rules are faster.</p>");
    let Some(classes) = v.get("classes").and_then(|c| c.as_array()) else {
        return s + "<p>no classes in the file</p>";
    };
    for c in classes {
        let class = c.get("class").and_then(|x| x.as_str()).unwrap_or("?");
        let mut rows = Vec::new();
        for m in ["grid", "model"] {
            if let Some(sr) = c.get(m).filter(|x| !x.is_null()) {
                rows.push(vec![
                    class.to_string(),
                    m.to_string(),
                    sr.get("jobs").map(|x| x.to_string()).unwrap_or_default(),
                    sr.get("seconds")
                        .and_then(|x| x.as_f64())
                        .map(|x| format!("{x:.1} s"))
                        .unwrap_or_default(),
                ]);
            }
        }
        s.push_str(&topocomm_report::html_table(
            &["class", "search", "jobs", "time"],
            &rows,
        ));
        let rows: Vec<Vec<String>> = c
            .get("ratios")
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .map(|x| {
                        let f = |k: &str| x.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
                        vec![
                            size_label(x.get("size").and_then(|v| v.as_u64()).unwrap_or(0)),
                            format!(
                                "tuned / {}",
                                x.get("den").and_then(|v| v.as_str()).unwrap_or("?")
                            ),
                            format!(
                                "{:.2} [{:.2}, {:.2}]",
                                f("median"),
                                f("ci_low"),
                                f("ci_high")
                            ),
                        ]
                    })
                    .collect()
            })
            .unwrap_or_default();
        s.push_str(&topocomm_report::html_table(
            &["size", "ratio", "median [95% CI]"],
            &rows,
        ));
    }
    s
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    if let Some(mpi) = &a.mpi {
        return crate::cmd::tune_mpi::run_mpi(g, &mpi_args(mpi, a)?);
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("tuned-rules.toml"));
    let start = Instant::now();
    let m: Machine = g.machine()?;
    let mode: SearchMode = a.mode.parse().map_err(|e: String| anyhow!("--mode: {e}"))?;
    let test = match a.test.as_str() {
        "latency" => Test::Latency,
        "bw" => Test::Bw,
        o => bail!("--test: unknown test '{o}' (expected latency or bw)"),
    };
    let wanted: Option<Vec<String>> = a.classes.as_deref().map(|c| {
        c.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    });
    let tg = targets(&m, wanted.as_deref())?;
    if tg.is_empty() {
        bail!("this machine has a single PU: nothing to tune");
    }
    let sizes = parse_sizes(a.sizes.as_deref().unwrap_or(if a.quick {
        "4K,64K,512K,4M"
    } else {
        super::model::DEFAULT_SIZES
    }))?;
    let budget = a.budget.unwrap_or(if a.quick { 60.0 } else { 600.0 });
    if !(budget > 0.0 && budget.is_finite()) {
        bail!("--budget {budget}: expected a positive number of seconds");
    }
    if let Some(p) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !p.is_dir() {
            bail!(
                "--out {}: folder '{}' does not exist",
                out.display(),
                p.display()
            );
        }
    }
    charact::require_live(&m)?;
    let samples = a.samples.unwrap_or(if a.quick { 3 } else { 7 }).max(1);
    let min_time_ms = a.min_time_ms.unwrap_or(if a.quick { 1.0 } else { 2.0 });
    let rounds = a.rounds.unwrap_or(if a.quick { 2 } else { 3 }).max(1);
    let space = Space::new(a.quick);
    let plan = SearchPlan {
        mode,
        test,
        sizes: sizes.clone(),
        space: space.clone(),
        samples,
        min_time_ms,
        rounds,
        budget: Duration::from_secs_f64(budget),
        cache: a.cache.clone(),
    };
    let mut bar = charact::Progress::new("tune", 1);
    let mut n = 0;
    let mut progress = |msg: &str| {
        n += 1;
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprint!("\r\x1b[K{msg}");
        } else if n % 10 == 1 {
            eprintln!("{msg}");
        }
        let _ = &mut bar;
    };
    let (rules, classes, cache_source) = search(&m, &tg, &plan, &mut progress)?;
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!();
    }
    let text = format!(
        "# topocomm rules written by `topocomm tune` ({} test, sizes {}).\n# Tuned classes: {}. Other sections: the built-in model. Read by `topocomm run --rules` and `topocomm plan --rules`.\n{}",
        a.test,
        sizes.iter().map(|&s| size_label(s)).collect::<Vec<_>>().join(","),
        classes.iter().map(|c| format!("{} ({} section)", c.class, c.chosen)).collect::<Vec<_>>().join(", "),
        rules.to_toml()
    );
    charact::write_file(&out, text.as_bytes())?;
    // What we wrote must load.
    Rules::load(&out, &m).map_err(|e| anyhow!("the written rules do not load: {e}"))?;
    let report = TuneReport {
        schema: "topocomm.tune/1".into(),
        meta: RunMeta::new(&m, topocomm_measure::timer::check()),
        mode,
        test: a.test.clone(),
        quick: a.quick,
        sizes,
        samples,
        min_time_ms,
        rounds,
        budget_s: budget,
        grid_size: space.size(),
        cache_source,
        rules_file: out.display().to_string(),
        classes,
        seconds: start.elapsed().as_secs_f64(),
    };
    print!("{}", tables(&report));
    if let Some(f) = &a.json {
        charact::write_json(f, &report)?;
        eprintln!("json written to {}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// What [`search`] measures and how long it may take.
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
    /// bench cache JSON for the model (None: a quick bench cache run).
    pub cache: Option<PathBuf>,
}

/// A runner of transport benchmark jobs on this machine (this executable,
/// the built-in rules as the base of every candidate file, window 64).
pub fn runner(
    m: &Machine,
    test: Test,
    sizes: &[u64],
    samples: usize,
    min_time_ms: f64,
) -> Result<Runner> {
    Ok(Runner {
        worker: topocomm_transport::worker::locate()?,
        builtin: Rules::builtin(m),
        test,
        sizes: sizes.to_vec(),
        samples,
        min_time_ms,
        window: 64,
        llc: m.llc_size().unwrap_or(32 << 20),
        jobs: 0,
        tmp: std::env::temp_dir(),
    })
}

/// Tunes the classes of `tg` (class, representative pair) on this live
/// machine: the built-in rules with each tuned class's section, the tuned
/// classes, and where the model's cache points came from.
pub fn search(
    m: &Machine,
    tg: &[(String, (u32, u32))],
    plan: &SearchPlan,
    progress: &mut dyn FnMut(&str),
) -> Result<(Rules, Vec<ClassTune>, Option<String>)> {
    let builtin = Rules::builtin(m);
    let (cache_source, points) = if plan.mode != SearchMode::Grid {
        let (c, src) = cache_points(m, plan.cache.as_deref(), tg[0].1 .0)?;
        (Some(src), Some(c.points))
    } else {
        (None, None)
    };
    let mut targets_v = Vec::new();
    for (class, pair) in tg {
        let rates = match &points {
            Some(p) => Some(class_rates(p, class).map_err(|e| {
                anyhow!(
                    "{}: class {class}: {e}",
                    cache_source.as_deref().unwrap_or("")
                )
            })?),
            None => None,
        };
        targets_v.push(Target {
            class: class.clone(),
            pair: *pair,
            builtin: builtin.params_for(Some(class)).clone(),
            rates,
        });
    }
    let mut runner = runner(m, plan.test, &plan.sizes, plan.samples, plan.min_time_ms)?;
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
    let classes = tune::tune(&mut runner, &targets_v, &settings, &mut |msg: &str| {
        progress(msg)
    })
    .map_err(|e| anyhow!("tune: {e}"))?;
    // Built-in rules with the tuned class sections.
    let mut rules = builtin;
    for c in &classes {
        rules.classes.insert(c.class.clone(), c.tuned.clone());
    }
    Ok((rules, classes, cache_source))
}

/// The options of `tune --mpi` (implemented in `tune_mpi`), from `tune`'s.
fn mpi_args(mpi: &str, a: &Args) -> Result<crate::cmd::tune_mpi::MpiArgs> {
    // Options that only mean something for the transport tuner.
    for (given, name) in [
        (a.mode != "both", "--mode"),
        (a.classes.is_some(), "--classes"),
        (a.cache.is_some(), "--cache"),
        (a.test != "latency", "--test"),
        (a.min_time_ms.is_some(), "--min-time-ms"),
    ] {
        if given {
            anyhow::bail!("{name} applies to the transport tuner, not to `tune --mpi`");
        }
    }
    let to_u32 = |v: Option<usize>, name: &str| -> Result<Option<u32>> {
        v.map(|x| u32::try_from(x).map_err(|_| anyhow!("{name}: {x} is too large")))
            .transpose()
    };
    Ok(crate::cmd::tune_mpi::MpiArgs {
        mpi: mpi.to_string(),
        pair: a.pair.clone(),
        sizes: a.sizes.clone(),
        quick: a.quick,
        matrix: a.matrix.clone(),
        map: a.map.clone(),
        out: a.out.clone(),
        budget: match a.budget {
            Some(b) if !(b.is_finite() && b > 0.0) => {
                anyhow::bail!("--budget: expected a positive number of seconds, got {b}")
            }
            Some(b) => Some(b.ceil() as u64),
            None => None,
        },
        rounds: to_u32(a.rounds, "--rounds")?,
        samples: to_u32(a.samples, "--samples")?,
        window: a.window,
        timeout: a.timeout,
        json: a.json.clone(),
        verify: a.verify.clone(),
        objective: a.objective.clone(),
    })
}
