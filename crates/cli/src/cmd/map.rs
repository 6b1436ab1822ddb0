//! `topocomm map`: place the ranks of a communication matrix on a node or a
//! cluster (docs/commands/map.md).

use crate::common::{text_table, GlobalOpts};
use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use topocomm_map::output::{self, Format};
use topocomm_map::parse::read_inputs;
use topocomm_map::{
    baseline_order, evaluate, map, Baseline, Cluster, Costs, MapOptions, Metric, Score, Slot,
    Strategy, Target,
};
use topocomm_topo::PuSet;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Communication matrix: a CSV edge list (src,dst,bytes,msgs), a TreeMatch
    /// .mat file, Open MPI monitoring .prof files or a directory of them
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Output: perm (`<node> <pu>` per rank; `run` is the same), rankfile
    /// (Open MPI), hydra (MPICH machinefile), slurm, json; each launcher file
    /// says in a `# run:` line how to launch it (docs/formats/mapping-outputs.md)
    #[arg(long, default_value = "perm")]
    pub format: String,
    /// What to minimize: bytes (bandwidth term), msgs (latency term) or cost (both)
    #[arg(long, default_value = "cost")]
    pub metric: String,
    /// auto, treematch, greedy, packed-refined, packed, round-robin, scatter, random
    #[arg(long, default_value = "auto")]
    pub strategy: String,
    /// Number of copies of the node topology forming a cluster
    #[arg(long, conflicts_with = "hostfile")]
    pub nodes: Option<usize>,
    /// Hostfile: `HOST [slots=LIST] [topology=SPEC]` per line
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// Network tree arities from the bottom (e.g. `16,8`: 16 nodes per leaf
    /// switch, 8 leaf switches per group); default: one flat level
    #[arg(long, value_name = "A,B,...")]
    pub network_levels: Option<String>,
    /// PUs (OS indexes) that may hold ranks on every node, e.g. `0-7,16-23`
    #[arg(long, value_name = "LIST")]
    pub slots: Option<String>,
    /// Allow several ranks per PU when there are more ranks than PUs
    #[arg(long)]
    pub oversubscribe: bool,
    /// Per-class latency/bandwidth JSON (docs/formats/costs-json.md)
    #[arg(long, value_name = "FILE")]
    pub costs: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Maximum refinement sweeps
    #[arg(long, default_value_t = 8)]
    pub passes: usize,
    /// Number of ranks (default: the largest rank named in the input + 1)
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Score this mapping (a perm file) instead of computing one
    #[arg(long, value_name = "FILE")]
    pub evaluate: Option<String>,
    /// Write the mapping here (the summary then goes to stdout)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// No summary
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(global: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let format: Format = a
        .format
        .parse()
        .map_err(anyhow::Error::msg)
        .context("--format")?;
    let metric: Metric = a
        .metric
        .parse()
        .map_err(anyhow::Error::msg)
        .context("--metric")?;
    let strategy: Strategy = a
        .strategy
        .parse()
        .map_err(anyhow::Error::msg)
        .context("--strategy")?;
    let costs = match &a.costs {
        Some(p) => Costs::from_file(p)?,
        None => Costs::defaults(),
    };
    let parsed = read_inputs(&a.inputs, a.ranks)?;
    let m = parsed.matrix;
    if m.n == 0 {
        bail!(
            "{}: no rank communicates (empty matrix)",
            a.inputs[0].display()
        );
    }
    let mut cluster = match &a.hostfile {
        Some(h) => {
            let text =
                std::fs::read_to_string(h).with_context(|| format!("hostfile {}", h.display()))?;
            let load = || -> Result<topocomm_topo::Machine, topocomm_map::MapError> {
                Ok(topocomm_topo::load_default(global.topology.as_deref())?)
            };
            Cluster::from_hostfile(&h.display().to_string(), &text, &load)?
        }
        None => {
            let n = a.nodes.unwrap_or(1);
            if n == 0 {
                bail!("--nodes must be at least 1");
            }
            Cluster::uniform(global.machine()?, n)
        }
    };
    if let Some(list) = &a.slots {
        let set = PuSet::parse_list(list).map_err(|e| anyhow::anyhow!("--slots: {e}"))?;
        for n in &mut cluster.nodes {
            n.usable = Some(set.clone());
        }
    }
    if let Some(levels) = &a.network_levels {
        cluster.network_levels = levels
            .split(',')
            .map(|x| x.trim().parse::<usize>().ok().filter(|&v| v >= 1))
            .collect::<Option<Vec<_>>>()
            .with_context(|| {
                format!("--network-levels '{levels}': expected positive arities like 16,8")
            })?;
    }
    let mut log: Vec<String> = parsed.notes.iter().map(|n| format!("note: {n}")).collect();

    // The mapping to score: given (--evaluate) or computed.
    let given: Option<Vec<Slot>> = match &a.evaluate {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("--evaluate {p}"))?;
            let s = output::parse_perm(p, &text)?;
            if s.len() != m.n {
                bail!(
                    "{p}: {} ranks in the mapping but {} in the matrix",
                    s.len(),
                    m.n
                );
            }
            Some(s)
        }
        None => None,
    };
    let slots = match &given {
        Some(g) => {
            let mut count: HashMap<Slot, usize> = HashMap::new();
            for s in g {
                *count.entry(*s).or_default() += 1;
            }
            let copies = count.values().copied().max().unwrap_or(1);
            let mut all = cluster.default_slots(m.n.min(1), true)?;
            all.dedup();
            let mut out = Vec::new();
            for s in all {
                out.extend(std::iter::repeat_n(s, copies));
            }
            out
        }
        None => cluster.default_slots(m.n, a.oversubscribe)?,
    };
    let target = Target::new(cluster, &slots)?;
    let opt = MapOptions {
        metric,
        costs: costs.clone(),
        strategy,
        seed: a.seed,
        passes: a.passes,
    };
    let (leaf_of_rank, chosen, tried) = match &given {
        Some(g) => {
            let mut free: HashMap<Slot, Vec<u32>> = HashMap::new();
            for l in (0..target.len() as u32).rev() {
                free.entry(target.slot_of_leaf(l)).or_default().push(l);
            }
            let mut leaves = Vec::with_capacity(g.len());
            for (r, s) in g.iter().enumerate() {
                match free.get_mut(s).and_then(|v| v.pop()) {
                    Some(l) => leaves.push(l),
                    None => bail!(
                        "{}: rank {r} is on node {} PU {}, which is not a usable slot of the target",
                        a.evaluate.as_deref().unwrap_or(""),
                        s.node,
                        s.pu
                    ),
                }
            }
            (leaves, "given".to_string(), Vec::new())
        }
        None => {
            let r = map(&target, &m, &opt)?;
            (r.leaf_of_rank, r.chosen, r.tried)
        }
    };
    let score = evaluate(&target, &costs, metric, &m, &leaf_of_rank);
    let mut baselines: Vec<(String, Score)> = Vec::new();
    for b in Baseline::ALL {
        let order = baseline_order(&target, b, a.seed);
        baselines.push((
            b.name().to_string(),
            evaluate(&target, &costs, metric, &m, &order[..m.n]),
        ));
    }
    let slots_of_rank = output::slots(&target, &leaf_of_rank);
    let text = match format {
        Format::Perm => output::perm(&slots_of_rank),
        Format::Rankfile => output::rankfile(&target, &slots_of_rank),
        Format::Hydra => output::hydra(&target, &slots_of_rank),
        Format::Slurm => output::slurm(&target, &slots_of_rank),
        Format::Json => {
            let ranks: Vec<serde_json::Value> = slots_of_rank
                .iter()
                .enumerate()
                .map(|(r, s)| {
                    serde_json::json!({"rank": r, "node": s.node, "host": target.cluster.nodes[s.node as usize].host, "pu": s.pu})
                })
                .collect();
            let v = serde_json::json!({
                "schema": "topocomm.mapping/1",
                "strategy": chosen,
                "metric": a.metric,
                "costs": costs.source,
                "ranks": ranks,
                "score": score,
                "baselines": baselines.iter().map(|(n, s)| serde_json::json!({"name": n, "score": s})).collect::<Vec<_>>(),
                "tried": tried,
            });
            serde_json::to_string_pretty(&v)? + "\n"
        }
    };
    log.push(format!(
        "{} ranks, {} directed pairs; {}",
        m.n,
        m.edges.len(),
        target.describe()
    ));
    log.push(format!(
        "metric {} (costs: {}); kept: {chosen}",
        a.metric, costs.source
    ));
    let mut rows = Vec::new();
    let time_of = |n: &str| {
        tried
            .iter()
            .find(|t| t.name == n)
            .map(|t| format!("{:.3}", t.seconds))
    };
    let mut line = |name: &str, s: &Score| {
        rows.push(vec![
            name.to_string(),
            format!("{:.4e}", s.objective),
            format!("{:.4e}", s.cost_us),
            format!("{:.3}", ratio(score.objective, s.objective)),
            format!("{:.4e}", s.hop_bytes),
            time_of(name).unwrap_or_else(|| "-".into()),
        ]);
    };
    line(&format!("{chosen} (result)"), &score);
    for (n, s) in &baselines {
        line(n, s);
    }
    log.push(
        text_table(
            &[
                "mapping",
                "objective_us",
                "cost_us",
                "result/this",
                "hop_bytes",
                "time_s",
            ],
            &rows,
        )
        .trim_end()
        .to_string(),
    );
    let classes: Vec<String> = score
        .by_class
        .iter()
        .map(|c| format!("{} {:.3e}B/{:.0}msg", c.class, c.bytes, c.msgs))
        .collect();
    log.push(format!("traffic by class: {}", classes.join(", ")));
    let loads: Vec<String> = score
        .max_load
        .iter()
        .map(|(l, v)| format!("{l} {v:.3e}B"))
        .collect();
    log.push(format!("max load per level: {}", loads.join(", ")));
    let summary = log.join("\n") + "\n";
    match &a.out {
        Some(p) => {
            std::fs::write(p, &text).with_context(|| format!("--out {}", p.display()))?;
            if !a.quiet {
                print!("{summary}");
            }
        }
        None => {
            print!("{text}");
            if !a.quiet {
                eprint!("{summary}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        if a == 0.0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        a / b
    }
}
