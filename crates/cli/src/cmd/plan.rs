//! `topocomm plan`: the transport plan per locality class present, after the
//! single-copy probe (docs/commands/plan.md).

use crate::common::{text_table, usage, GlobalOpts};
use anyhow::{anyhow, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_topo::{human_bytes, ClassMatrix};
use topocomm_transport::{Params, Rules};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rules file (TOML) to resolve instead of this machine's measured rules
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Measure this machine's rules again now and refresh the cache
    /// (what the first job does; about 10 s)
    #[arg(long, conflicts_with = "rules")]
    pub measure: bool,
    /// JSON on stdout: {"source", "cma": {"available", "note"}, "classes": [...]}
    #[arg(long)]
    pub json: bool,
    /// Print the resolved rules as a TOML rules file (a starting point for --rules)
    #[arg(long, conflicts_with = "json")]
    pub toml: bool,
    /// Show what a job of N ranks gets, bound as `topocomm run -n N` binds them
    /// (one per core, or unbound beyond the cores): its slot rings are fitted
    /// to what a rank maps in at start-up
    #[arg(long, value_name = "N", conflicts_with = "toml",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub ranks: Option<u32>,
}

fn mechanism(p: &Params, cma: bool) -> String {
    p.mechanism(cma, &human_bytes)
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    let file = match &a.rules {
        Some(f) => Some(f.clone()),
        None if a.measure => None,
        None => super::run::rules_from_env(),
    };
    let (rules, measured) = match &file {
        Some(f) => (Rules::load(f, &m).map_err(|e| usage(anyhow!(e)))?, None),
        None => {
            let r = crate::autotune::job_rules(&m, a.measure)?;
            (r.rules, Some(r.measured))
        }
    };
    // Where each class's parameters come from.
    let origin = |class: &str| match &measured {
        None => "rules file",
        Some(list) if list.iter().any(|c| c == class) => "measured",
        Some(_) => "built-in",
    };
    if a.toml {
        print!("{}", rules.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let probe = topocomm_transport::cma::probe_fork();
    let cma = probe.is_ok();
    let note = match &probe {
        Ok(()) => "single copy (process_vm_readv) available".to_string(),
        Err(e) => format!("single copy unavailable ({e}); every class falls back to two-copy"),
    };
    let mut rows = Vec::new();
    let present: Vec<(String, u64)> = ClassMatrix::new(&m)
        .classes()
        .iter()
        .map(|c| (c.class.to_string(), c.pairs))
        .collect();
    let mut entries: Vec<(String, Option<u64>, Params)> = present
        .iter()
        .map(|(c, n)| (c.clone(), Some(*n), rules.params_for(Some(c)).clone()))
        .collect();
    entries.push(("default".into(), None, rules.default.clone()));
    let (job, crowded) = match a.ranks {
        Some(n) => {
            let (line, crowded) = job_plans(&m, &rules, n as usize, &mut entries)?;
            (Some(line), crowded)
        }
        None => (None, false),
    };
    if a.json {
        let classes: Vec<_> = entries
            .iter()
            .map(|(c, pairs, p)| {
                serde_json::json!({"class": c, "pairs": pairs, "params": p, "mechanism": mechanism(p, cma), "origin": origin(c)})
            })
            .collect();
        let mut v = serde_json::json!({
            "source": rules.source,
            "cma": {"available": cma, "note": note},
            "classes": classes,
        });
        if let Some(j) = &job {
            v["ranks"] = serde_json::json!(a.ranks);
            v["job"] = serde_json::json!(j);
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (c, pairs, p) in &entries {
        rows.push(vec![
            c.clone(),
            pairs.map_or("-".into(), |n| n.to_string()),
            p.inline_max.to_string(),
            human_bytes(p.eager_max),
            answers(p, cma),
            helped(p, cma, crowded),
            format!("{} x {}", human_bytes(p.fragment), p.depth),
            format!("{:?}", p.copy).to_lowercase()
                + &if p.copy == topocomm_transport::CopyKind::Nontemporal {
                    format!(" from {}", human_bytes(p.nt_threshold))
                } else {
                    String::new()
                },
            match (p.stream_out_min, p.adaptive) {
                (u64::MAX, _) => "plain".into(),
                // Measured per message against plain stores (choose.rs).
                (from, true) => format!("plain/streaming from {}", human_bytes(from)),
                (from, false) => format!("streaming from {}", human_bytes(from)),
            },
            format!("{:?}", p.buffer_owner).to_lowercase(),
            mechanism(p, cma),
            origin(c).to_string(),
        ]);
    }
    println!("rules: {}", rules.source);
    println!("{note}");
    if let Some(j) = &job {
        println!("{j}");
    }
    print!(
        "{}",
        text_table(
            &[
                "class",
                "pairs",
                "inline",
                "eager",
                "answers",
                "helped",
                "fragment",
                "copy",
                "copy out",
                "owner",
                "mechanism",
                "from"
            ],
            &rows
        )
    );
    Ok(ExitCode::SUCCESS)
}

/// How a ping-pong's answers within the eager limit travel
/// (`lone_rendezvous_min`, docs/transport.md "Answers by single copy").
fn answers(p: &Params, cma: bool) -> String {
    match p.lone_rendezvous_min {
        Some(from) if from <= p.eager_max && p.cma && cma => {
            format!("CMA from {}", human_bytes(from))
        }
        Some(from) if from <= p.eager_max => "eager (no CMA)".into(),
        _ => "eager".into(),
    }
}

/// From which size a single-copy read is helped by its sender
/// (`help_min`, docs/transport.md "Helped single copy"): never without
/// single copy, on a crowded node, or with `help_min` at
/// `HELP_NEVER`.
fn helped(p: &Params, cma: bool, crowded: bool) -> String {
    if !(p.cma && cma) || p.help_min >= topocomm_transport::rules::HELP_NEVER {
        "never".into()
    } else if crowded {
        "never (crowded)".into()
    } else {
        format!("from {}", human_bytes(p.help_min))
    }
}

/// Replaces each class's parameters in `entries` by those a job of `n`
/// ranks resolves (plan::resolve: the rings fitted to the job), and says
/// in one line what the job is and whether it is crowded (more ranks than
/// CPUs).
fn job_plans(
    m: &topocomm_topo::Machine,
    rules: &Rules,
    n: usize,
    entries: &mut [(String, Option<u64>, Params)],
) -> Result<(String, bool)> {
    // As `topocomm run -n N` binds, over every core of the topology shown,
    // which need not be this machine's.
    let pus = topocomm_transport::launch::default_pus(m, n, &[]).map_err(|e| anyhow!(e))?;
    let plans = topocomm_transport::plan::resolve(m, rules, &pus).map_err(|e| anyhow!(e))?;
    let mut changed = false;
    for (class, _, params) in entries.iter_mut() {
        // The first channel between two ranks of this class (a resolved
        // class not in the rules reads "<class> (default)").
        let found = plans
            .iter()
            .enumerate()
            .find(|(i, p)| i / n != i % n && p.class.split(' ').next() == Some(class.as_str()));
        if let Some((_, p)) = found {
            changed |= (p.params.depth, p.params.fragment) != (params.depth, params.fragment);
            *params = p.params.clone();
        }
    }
    let bound = if pus.iter().all(Option::is_some) {
        "bound one per core"
    } else {
        "unbound (more ranks than cores)"
    };
    // A crowded job sends up to a slot eagerly, but less to a peer it is
    // receiving from (plan::Plan::exchange_eager_max; uncrowded, that limit
    // is where answers start, shown in the table).
    let crowded = topocomm_transport::plan::crowded(m, &pus);
    let exchange = crowded
        .then(|| {
            plans
                .iter()
                .filter(|p| p.exchange_eager_max < p.params.eager_max)
                .map(|p| p.exchange_eager_max)
                .min()
        })
        .flatten();
    let line = format!(
        "job of {n} ranks, {bound}: {}{}",
        if changed {
            "slot rings made smaller to fit what a rank maps in at start-up (64 MiB in and out)"
        } else {
            "the rules' slot rings fit what a rank maps in at start-up"
        },
        match exchange {
            Some(x) => format!(
                "; more ranks than CPUs: eager up to a slot, up to {} to a peer the rank receives from (an exchange)",
                topocomm_topo::human_bytes(x)
            ),
            None => String::new(),
        }
    );
    Ok((line, crowded))
}
