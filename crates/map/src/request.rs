//! What `topocomm map` does, without its command line: read the matrix,
//! build the cluster and its slots, compute a mapping (or take the given
//! one), score it against the baselines, and write it in the requested
//! format together with a summary for people ([`Request::run`]).

use crate::output::{self, Format};
use crate::parse::read_inputs;
use crate::{
    baseline_order, evaluate, map, Baseline, Cluster, Costs, MapError, MapOptions, Metric, Score,
    Slot, Strategy, StrategyResult, Target,
};
use std::collections::HashMap;
use std::path::PathBuf;
use topocomm_topo::text::text_table;
use topocomm_topo::PuSet;

/// Most nodes of a cluster (`--nodes`, and each `--network-levels` arity):
/// a node entry is kept per node, and spans of network levels multiply.
pub const MAX_NODES: usize = 1 << 20;

/// The options of one mapping request, as given on the command line
/// (docs/commands/map.md); every error names the option at fault.
#[derive(Clone, Debug)]
pub struct Request {
    /// Communication matrix files (CSV, .mat, .prof or directories of them).
    pub inputs: Vec<PathBuf>,
    /// Output format ([`Format`]).
    pub format: String,
    /// Objective ([`Metric`]: cost, hop-bytes, bytes, msgs, max-congestion;
    /// `--objective`, alias `--metric`), written as given into the JSON output.
    pub metric: String,
    /// Strategy ([`Strategy`]).
    pub strategy: String,
    /// Copies of the node topology forming a cluster (default 1).
    pub nodes: Option<usize>,
    /// Hostfile: `HOST [slots=LIST] [topology=SPEC]` per line.
    pub hostfile: Option<PathBuf>,
    /// Network tree arities from the bottom, e.g. `16,8`.
    pub network_levels: Option<String>,
    /// PUs that may hold ranks on every node.
    pub slots: Option<String>,
    /// Several ranks per PU when there are more ranks than PUs.
    pub oversubscribe: bool,
    /// Per-class costs JSON (default: [`Costs::defaults`]).
    pub costs: Option<String>,
    /// Seed of the random strategies and baselines.
    pub seed: u64,
    /// Maximum refinement sweeps.
    pub passes: usize,
    /// Seconds after which the multilevel mapper starts no further seed.
    pub time_limit: f64,
    /// Number of ranks (default: from the input).
    pub ranks: Option<usize>,
    /// Score this perm file instead of computing a mapping.
    pub evaluate: Option<String>,
    /// The node topology (`topocomm_topo::load_default`'s argument).
    pub topology: Option<String>,
}

/// A mapping with its score, the baselines' and the file to write.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The mapping in the requested format (perm, launcher file or JSON).
    pub mapping: String,
    /// The summary for people: notes, sizes, scores table, traffic, loads.
    pub summary: String,
    /// The strategy kept (`given` with `evaluate`).
    pub chosen: String,
    /// The mapping's score.
    pub score: Score,
    /// Each baseline's score, by name.
    pub baselines: Vec<(String, Score)>,
    /// Every strategy tried.
    pub tried: Vec<StrategyResult>,
    /// Node and PU of every rank.
    pub slots: Vec<Slot>,
}

fn invalid(msg: String) -> MapError {
    MapError::Invalid(msg)
}

impl Request {
    /// Computes (or scores) the mapping; see the module documentation.
    pub fn run(&self) -> Result<Outcome, MapError> {
        let format: Format = self
            .format
            .parse()
            .map_err(|e| invalid(format!("--format: {e}")))?;
        let metric: Metric = self
            .metric
            .parse()
            .map_err(|e| invalid(format!("--objective: {e}")))?;
        if !(self.time_limit.is_finite() && self.time_limit >= 0.0) {
            return Err(invalid(format!(
                "--time-limit {}: expected a number of seconds >= 0",
                self.time_limit
            )));
        }
        let strategy: Strategy = self
            .strategy
            .parse()
            .map_err(|e| invalid(format!("--strategy: {e}")))?;
        let costs = match &self.costs {
            Some(p) => Costs::from_file(p)?,
            None => Costs::defaults(),
        };
        let parsed = read_inputs(&self.inputs, self.ranks)?;
        let m = parsed.matrix;
        if m.n == 0 {
            return Err(invalid(format!(
                "{}: no rank communicates (empty matrix)",
                self.inputs[0].display()
            )));
        }
        let cluster = self.cluster()?;
        let mut log: Vec<String> = parsed.notes.iter().map(|n| format!("note: {n}")).collect();

        // The mapping to score: given (--evaluate) or computed.
        let given = self.given(m.n)?;
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
            None => cluster.default_slots(m.n, self.oversubscribe)?,
        };
        let target = Target::new(cluster, &slots)?;
        costs.check_classes(target.class_names())?;
        let (leaf_of_rank, chosen, tried) = match &given {
            Some(g) => (self.given_leaves(&target, g)?, "given".into(), Vec::new()),
            None => {
                let opt = MapOptions {
                    metric,
                    costs: costs.clone(),
                    strategy,
                    seed: self.seed,
                    passes: self.passes,
                    time_limit: self.time_limit,
                };
                let r = map(&target, &m, &opt)?;
                (r.leaf_of_rank, r.chosen, r.tried)
            }
        };
        let score = evaluate(&target, &costs, metric, &m, &leaf_of_rank);
        let mut baselines: Vec<(String, Score)> = Vec::new();
        for b in Baseline::ALL {
            let order = baseline_order(&target, b, self.seed);
            baselines.push((
                b.name().to_string(),
                evaluate(&target, &costs, metric, &m, &order[..m.n]),
            ));
        }
        let slots_of_rank = output::slots(&target, &leaf_of_rank);
        let mut o = Outcome {
            mapping: String::new(),
            summary: String::new(),
            chosen,
            score,
            baselines,
            tried,
            slots: slots_of_rank,
        };
        o.mapping = match format {
            Format::Perm => output::perm(&o.slots),
            Format::Rankfile => output::rankfile(&target, &o.slots),
            Format::Hydra => output::hydra(&target, &o.slots),
            Format::Slurm => output::slurm(&target, &o.slots),
            Format::Json => self.document(&o, &target, &costs)?,
        };
        log.push(format!(
            "{} ranks, {} directed pairs; {}",
            m.n,
            m.edges.len(),
            target.describe()
        ));
        log.extend(self.summary_lines(&o, &costs));
        o.summary = log.join("\n") + "\n";
        Ok(o)
    }

    /// The cluster: from the hostfile or `nodes` copies of the topology,
    /// with the usable slots and network levels applied.
    fn cluster(&self) -> Result<Cluster, MapError> {
        let load = || -> Result<topocomm_topo::Machine, MapError> {
            Ok(topocomm_topo::load_default(self.topology.as_deref())?)
        };
        let mut cluster = match &self.hostfile {
            Some(h) => {
                let text = std::fs::read_to_string(h).map_err(|e| MapError::Io {
                    path: format!("hostfile {}", h.display()),
                    reason: e.to_string(),
                })?;
                Cluster::from_hostfile(&h.display().to_string(), &text, &load)?
            }
            None => {
                let n = self.nodes.unwrap_or(1);
                if n == 0 {
                    return Err(invalid("--nodes must be at least 1".into()));
                }
                if n > MAX_NODES {
                    return Err(invalid(format!(
                        "--nodes {n}: at most {MAX_NODES} nodes are supported"
                    )));
                }
                Cluster::uniform(load()?, n)
            }
        };
        if let Some(list) = &self.slots {
            // Bare OS indexes as before; else hwloc locations, resolved
            // on each node's topology (core:0-3, package:0).
            let plain = PuSet::parse_list(list);
            for n in &mut cluster.nodes {
                let set = match &plain {
                    Ok(s) => s.clone(),
                    Err(_) => topocomm_topo::resolve_set(&cluster.topologies[n.topo], list)
                        .map_err(|e| invalid(format!("--slots: {e}")))?,
                };
                n.usable = Some(set);
            }
        }
        if let Some(levels) = &self.network_levels {
            cluster.network_levels = levels
                .split(',')
                .map(|x| {
                    x.trim()
                        .parse::<usize>()
                        .ok()
                        .filter(|&v| (1..=MAX_NODES).contains(&v))
                })
                .collect::<Option<Vec<_>>>()
                .filter(|v| v.len() <= 16)
                .ok_or_else(|| {
                    invalid(format!(
                        "--network-levels '{levels}': expected up to 16 arities from 1 to {MAX_NODES}, like 16,8"
                    ))
                })?;
        }
        Ok(cluster)
    }

    /// The mapping of `evaluate`, checked against the matrix's `ranks`.
    fn given(&self, ranks: usize) -> Result<Option<Vec<Slot>>, MapError> {
        let Some(p) = &self.evaluate else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(p).map_err(|e| MapError::Io {
            path: format!("--evaluate {p}"),
            reason: e.to_string(),
        })?;
        let s = output::parse_perm(p, &text)?;
        if s.len() != ranks {
            return Err(invalid(format!(
                "{p}: {} ranks in the mapping but {ranks} in the matrix",
                s.len()
            )));
        }
        Ok(Some(s))
    }

    /// The leaves of the given slots (each slot's leaves used in turn).
    fn given_leaves(&self, target: &Target, g: &[Slot]) -> Result<Vec<u32>, MapError> {
        let mut free: HashMap<Slot, Vec<u32>> = HashMap::new();
        for l in (0..target.len() as u32).rev() {
            free.entry(target.slot_of_leaf(l)).or_default().push(l);
        }
        let mut leaves = Vec::with_capacity(g.len());
        for (r, s) in g.iter().enumerate() {
            match free.get_mut(s).and_then(|v| v.pop()) {
                Some(l) => leaves.push(l),
                None => {
                    return Err(invalid(format!(
                    "{}: rank {r} is on node {} PU {}, which is not a usable slot of the target",
                    self.evaluate.as_deref().unwrap_or(""),
                    s.node,
                    s.pu
                )))
                }
            }
        }
        Ok(leaves)
    }

    /// `topocomm.mapping/1` (docs/formats/mapping-outputs.md), pretty, with
    /// a final newline.
    fn document(&self, o: &Outcome, target: &Target, costs: &Costs) -> Result<String, MapError> {
        let ranks: Vec<serde_json::Value> = o
            .slots
            .iter()
            .enumerate()
            .map(|(r, s)| {
                serde_json::json!({"rank": r, "node": s.node, "host": target.cluster.nodes[s.node as usize].host, "pu": s.pu})
            })
            .collect();
        let v = serde_json::json!({
            "schema": "topocomm.mapping/1",
            "strategy": o.chosen,
            "metric": self.metric,
            "objective": self.metric,
            "costs": costs.source,
            "ranks": ranks,
            "score": o.score,
            "baselines": o.baselines.iter().map(|(n, s)| serde_json::json!({"name": n, "score": s})).collect::<Vec<_>>(),
            "tried": o.tried,
        });
        serde_json::to_string_pretty(&v)
            .map(|s| s + "\n")
            .map_err(|e| invalid(e.to_string()))
    }

    /// The summary after the sizes line: metric, the scores of the result
    /// and the baselines, traffic by class and the largest loads.
    fn summary_lines(&self, o: &Outcome, costs: &Costs) -> Vec<String> {
        let unit = self.metric.parse::<Metric>().map_or("", |m| m.unit());
        let mut log = vec![format!(
            "objective {} ({unit}; costs: {}); kept: {}",
            self.metric, costs.source, o.chosen
        )];
        let mut rows = Vec::new();
        let time_of = |n: &str| {
            o.tried
                .iter()
                .find(|t| t.name == n)
                .map(|t| format!("{:.3}", t.seconds))
        };
        let mut line = |name: &str, s: &Score| {
            rows.push(vec![
                name.to_string(),
                format!("{:.4e}", s.objective),
                format!("{:.4e}", s.cost_us),
                format!("{:.3}", ratio(o.score.objective, s.objective)),
                format!("{:.4e}", s.hop_bytes),
                time_of(name).unwrap_or_else(|| "-".into()),
            ]);
        };
        line(&format!("{} (result)", o.chosen), &o.score);
        for (n, s) in &o.baselines {
            line(n, s);
        }
        let header = [
            "mapping",
            "objective",
            "cost_us",
            "result/this",
            "hop_bytes",
            "time_s",
        ];
        log.push(text_table(&header, &rows).trim_end().to_string());
        let classes: Vec<String> = o
            .score
            .by_class
            .iter()
            .map(|c| format!("{} {:.3e}B/{:.0}msg", c.class, c.bytes, c.msgs))
            .collect();
        log.push(format!("traffic by class: {}", classes.join(", ")));
        let loads: Vec<String> = o
            .score
            .max_load
            .iter()
            .map(|(l, v)| format!("{l} {v:.3e}B"))
            .collect();
        log.push(format!("max load per level: {}", loads.join(", ")));
        log
    }
}

/// `a / b`, 1 for 0/0 and infinite for x/0.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(dir: &std::path::Path) -> Request {
        let input = dir.join("pairs.csv");
        std::fs::write(
            &input,
            "src,dst,bytes,msgs\n0,2,1000000,10\n2,0,1000000,10\n1,3,1000000,10\n3,1,1000000,10\n",
        )
        .unwrap();
        Request {
            inputs: vec![input],
            format: "perm".into(),
            metric: "cost".into(),
            strategy: "auto".into(),
            nodes: None,
            hostfile: None,
            network_levels: None,
            slots: None,
            oversubscribe: false,
            costs: None,
            seed: 1,
            passes: 8,
            time_limit: 3.0,
            ranks: None,
            evaluate: None,
            topology: Some("synthetic:pack:2 core:2 pu:1".into()),
        }
    }

    #[test]
    fn maps_talkers_together_and_scores_a_given_mapping() {
        let dir = std::env::temp_dir().join(format!("tc-map-request-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let r = request(&dir);
        let o = r.run().unwrap();
        // Ranks 0 and 2 talk: same package.
        assert_eq!(o.slots[0].pu / 2, o.slots[2].pu / 2, "{:?}", o.slots);
        assert!(o.summary.contains("kept: "), "{}", o.summary);
        assert_eq!(o.baselines.len(), Baseline::ALL.len());
        let perm = dir.join("perm");
        std::fs::write(&perm, &o.mapping).unwrap();
        let given = Request {
            evaluate: Some(perm.display().to_string()),
            format: "json".into(),
            ..r.clone()
        }
        .run()
        .unwrap();
        assert_eq!(given.chosen, "given");
        assert_eq!(given.score.objective, o.score.objective);
        let v: serde_json::Value = serde_json::from_str(&given.mapping).unwrap();
        assert_eq!(v["schema"], "topocomm.mapping/1");
        let e = Request {
            nodes: Some(0),
            ..r.clone()
        }
        .run()
        .unwrap_err();
        assert_eq!(e.to_string(), "--nodes must be at least 1");
        let e = Request {
            nodes: Some(MAX_NODES + 1),
            ..r.clone()
        }
        .run()
        .unwrap_err();
        assert!(e.to_string().starts_with("--nodes 1048577: at most"), "{e}");
        for levels in ["0", "1048577", "2,x", &["2"; 17].join(",")] {
            let e = Request {
                network_levels: Some(levels.to_string()),
                ..r.clone()
            }
            .run()
            .unwrap_err();
            assert!(
                e.to_string().contains("expected up to 16 arities"),
                "{levels}: {e}"
            );
        }
        let e = Request {
            format: "x".into(),
            ..r
        }
        .run()
        .unwrap_err();
        assert!(e.to_string().starts_with("--format: "), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
