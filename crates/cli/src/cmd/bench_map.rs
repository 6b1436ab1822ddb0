//! `topocomm bench map`: mapping quality of topocomm's own algorithm vs
//! Scotch and the baselines (docs/commands/bench-map.md). The work is
//! `topocomm_map::bench`'s; this module prints the table and writes JSON.

use crate::common::GlobalOpts;
use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_map::bench;
use topocomm_topo::text::text_table;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Directory of real topologies (default: ../shared/topologies of the
    /// source tree, or $TOPOCOMM_SHARED_TOPOLOGIES)
    #[arg(long, value_name = "DIR")]
    pub topologies: Option<PathBuf>,
    /// Seed of the mapper and the random patterns
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds after which the multilevel mapper tries no further seed
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub time_limit: f64,
    /// Ranks on every PU of every target (1 to 64): more than 1 maps an
    /// overdecomposed job, several ranks per PU, as the multilevel mapping
    /// literature does
    #[arg(long, value_name = "K", default_value_t = 1, conflicts_with = "scale")]
    pub ranks_per_pu: usize,
    /// Instead of the cases: time the mapper on RANKS ranks of a random
    /// geometric graph (about 10 neighbours each) on 64-PU nodes
    #[arg(long, value_name = "RANKS")]
    pub scale: Option<usize>,
    /// Also write every case as JSON (schema topocomm.bench-map/1)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    if let Some(n) = a.scale {
        if n < 2 {
            anyhow::bail!("--scale {n}: expected at least 2 ranks");
        }
        let mut runs = Vec::new();
        for o in bench::OBJECTIVES {
            let r = bench::scale(n, o, a.seed, a.time_limit).map_err(crate::common::usage)?;
            println!(
                "{} ranks, {} directed pairs, {}: {:.2} s ({} s CPU), packed/tc {:.3}, peak memory {} MiB",
                r.ranks,
                r.pairs,
                r.objective,
                r.seconds,
                r.cpu_seconds.map_or("?".into(), |c| format!("{c:.2}")),
                r.packed_over_topocomm,
                r.peak_memory_mib.map_or("?".into(), |m| m.to_string())
            );
            runs.push(r);
        }
        if let Some(p) = &a.json {
            let text = serde_json::to_string_pretty(&runs)? + "\n";
            std::fs::write(p, text).with_context(|| format!("--json {}", p.display()))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let shared = match &a.topologies {
        Some(d) if !d.is_dir() => anyhow::bail!("--topologies {}: not a directory", d.display()),
        Some(d) => Some(d.clone()),
        None => topocomm_topo::testdata::shared_topologies(),
    };
    let quiet = g.quiet;
    let mut progress = |c: &bench::Case| {
        if !quiet {
            eprintln!("done: {} / {} ({} ranks)", c.target, c.pattern, c.ranks);
        }
    };
    let r = bench::run(
        shared.as_deref(),
        a.seed,
        a.time_limit,
        a.ranks_per_pu,
        &mut progress,
    )
    .map_err(crate::common::usage)?;
    for n in &r.notes {
        println!("note: {n}");
    }
    println!("objective values: topocomm (multilevel, portfolio off); other columns: their value / topocomm's (> 1: topocomm better)");
    let rows: Vec<Vec<String>> = r.cases.iter().flat_map(bench::row).collect();
    print!("{}", text_table(&bench::HEADER, &rows));
    for s in &r.summary {
        let f = |k: &str| s[k].as_f64().map_or("-".to_string(), |x| format!("{x:.3}"));
        println!(
            "{}: geometric mean scotch/tc {}, worst {}; packed/tc {}, rr/tc {}; time tc {} s, scotch {} s",
            s["objective"].as_str().unwrap_or(""),
            f("scotch_over_topocomm"),
            f("worst_scotch_over_topocomm"),
            f("packed_over_topocomm"),
            f("round_robin_over_topocomm"),
            f("topocomm_seconds"),
            f("scotch_seconds"),
        );
    }
    if let Some(p) = &a.json {
        let text = serde_json::to_string_pretty(&r)? + "\n";
        std::fs::write(p, text).with_context(|| format!("--json {}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
