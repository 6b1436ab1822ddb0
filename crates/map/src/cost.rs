//! The objective: `sum over pairs of msgs * latency(class) + bytes /
//! bandwidth(class)`, with per-class latency and bandwidth from a costs file
//! (docs/formats/costs-json.md) or documented defaults; plus hop-bytes and
//! the largest traffic crossing any object of each tree level.

use crate::error::MapError;
use crate::matrix::CommMatrix;
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use topocomm_topo::text::one_line;

/// Latency and bandwidth of one locality class.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassCost {
    pub latency_us: f64,
    pub bandwidth_gbs: f64,
}

/// What the optimizer minimizes (`--objective`, alias `--metric`;
/// docs/mapping.md "Objectives").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Only the bandwidth term: `bytes / bw(class)`.
    Bytes,
    /// Only the latency term: `msgs * lat(class)`.
    Msgs,
    /// Both terms: the estimated communication time.
    Cost,
    /// Sum over pairs of bytes x tree hops (links on the tree path).
    HopBytes,
    /// The largest traffic (bytes) crossing the boundary of one tree object.
    MaxCongestion,
}

/// The objective a mapping minimizes: the same type as [`Metric`].
pub type Objective = Metric;

impl Metric {
    pub const ALL: [Metric; 5] = [
        Metric::Cost,
        Metric::HopBytes,
        Metric::Bytes,
        Metric::Msgs,
        Metric::MaxCongestion,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Bytes => "bytes",
            Metric::Msgs => "msgs",
            Metric::Cost => "cost",
            Metric::HopBytes => "hop-bytes",
            Metric::MaxCongestion => "max-congestion",
        }
    }

    /// Unit of the objective's values.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Bytes | Metric::Msgs | Metric::Cost => "us",
            Metric::HopBytes => "B.hops",
            Metric::MaxCongestion => "B",
        }
    }
}

impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bytes" => Ok(Metric::Bytes),
            "msgs" => Ok(Metric::Msgs),
            "cost" => Ok(Metric::Cost),
            "hop-bytes" | "hopbytes" => Ok(Metric::HopBytes),
            "max-congestion" | "congestion" => Ok(Metric::MaxCongestion),
            _ => Err(format!(
                "unknown objective '{s}' (expected cost, hop-bytes, bytes, msgs or max-congestion)"
            )),
        }
    }
}

/// Per-class costs. Classes missing from a file fall back to the defaults.
#[derive(Clone, Debug, Default)]
pub struct Costs {
    pub classes: BTreeMap<String, ClassCost>,
    /// Where they came from (`defaults` or the file path).
    pub source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // informative fields written by `bench matrix`, checked for type only
struct CostsFile {
    classes: BTreeMap<String, ClassCostFile>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    schema: Option<String>,
    #[serde(default)]
    fingerprint: Option<String>,
    #[serde(default)]
    size: Option<u64>,
}

/// One class as written in a file: a misspelled key (`"latency": 1`
/// beside `latency_us`) is an error rather than silently ignored; the
/// `*_source` notes `bench matrix` writes are informative.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // the sources are checked for type only
struct ClassCostFile {
    latency_us: f64,
    bandwidth_gbs: f64,
    #[serde(default)]
    latency_source: Option<String>,
    #[serde(default)]
    bandwidth_source: Option<String>,
}

/// Documented defaults (docs/formats/costs-json.md): rough orders of
/// magnitude of a current two-socket server and a 100 Gb/s network shared by
/// the ranks of a node. Used only where no measurement is given.
pub fn default_cost(class: &str) -> ClassCost {
    let (l, b) = match class {
        // Two ranks time-sharing one PU: every message waits for a context
        // switch (1.6 us with topocomm, 1.7 us with Open MPI's yield; a
        // busy-polling MPI pays a 4 ms time slice; docs/transport.md).
        "self" => (2.0, 10.0),
        "smt" | "l1" => (0.15, 20.0),
        "l2" => (0.20, 18.0),
        "l3" | "l4" | "l5" => (0.30, 15.0),
        "numa" => (0.45, 12.0),
        "die" => (0.60, 10.0),
        "package" => (0.70, 9.0),
        "machine" => (1.20, 6.0),
        "network" => (2.50, 3.0),
        c if c.starts_with("switch") => {
            let k: f64 = c[6..].parse().unwrap_or(1.0);
            (1.5 + 0.25 * (k - 1.0), 3.0)
        }
        // Groups (clusters of cores, sub-NUMA groups, ...) sit between the
        // L3 and the NUMA node.
        _ => (0.40, 13.0),
    };
    ClassCost {
        latency_us: l,
        bandwidth_gbs: b,
    }
}

impl Costs {
    pub fn defaults() -> Self {
        Costs {
            classes: BTreeMap::new(),
            source: "defaults".into(),
        }
    }

    /// Reads `{"classes": {"l3": {"latency_us": .., "bandwidth_gbs": ..}, ..}}`.
    pub fn from_file(path: &str) -> Result<Self, MapError> {
        let text = std::fs::read_to_string(path).map_err(|e| MapError::Io {
            path: path.into(),
            reason: e.to_string(),
        })?;
        Self::from_json(path, &text)
    }

    pub fn from_json(path: &str, text: &str) -> Result<Self, MapError> {
        // Names from the file are escaped (`one_line`): a key holding "\n"
        // must not split the error line.
        let f: CostsFile = serde_json::from_str(text)
            .map_err(|e| MapError::syntax(path, e.line(), e.column(), format!("{} (expected {{\"classes\": {{\"l3\": {{\"latency_us\": 0.3, \"bandwidth_gbs\": 15}}, ...}}}})", one_line(&e.to_string()))))?;
        for (name, c) in &f.classes {
            let name = one_line(name);
            // Bounded so that a cost (msgs x latency + bytes / bandwidth,
            // summed over up to 2^24 ranks) stays finite: 1e308 gave inf.
            if !(0.0..=1e9).contains(&c.latency_us) {
                return Err(MapError::Invalid(format!(
                    "{path}: classes.{name}.latency_us must be a number of microseconds from 0 to 1e9"
                )));
            }
            if !(1e-9..=1e6).contains(&c.bandwidth_gbs) {
                return Err(MapError::Invalid(format!(
                    "{path}: classes.{name}.bandwidth_gbs must be a number of GB/s from 1e-9 to 1e6"
                )));
            }
        }
        Ok(Costs {
            classes: f
                .classes
                .into_iter()
                .map(|(k, c)| {
                    let cost = ClassCost {
                        latency_us: c.latency_us,
                        bandwidth_gbs: c.bandwidth_gbs,
                    };
                    (k, cost)
                })
                .collect(),
            source: path.to_string(),
        })
    }

    /// Refuses a class of a costs file that is neither one of `present`
    /// (the target's classes) nor a class any machine may have
    /// ([`topocomm_topo::is_known_class_name`], `switchK` network levels):
    /// a misspelled class would otherwise silently keep its default cost.
    /// The rules TOML applies the same rule.
    pub fn check_classes(&self, present: &[String]) -> Result<(), MapError> {
        let switch = |n: &str| {
            n.strip_prefix("switch")
                .is_some_and(|k| k.parse::<u32>().is_ok())
        };
        for name in self.classes.keys() {
            if !(present.contains(name) || topocomm_topo::is_known_class_name(name) || switch(name))
            {
                return Err(MapError::Invalid(format!(
                    "{}: classes.{}: no such locality class on this target (its classes: {})",
                    self.source,
                    one_line(name),
                    present.join(", ")
                )));
            }
        }
        Ok(())
    }

    pub fn get(&self, class: &str) -> ClassCost {
        self.classes
            .get(class)
            .copied()
            .unwrap_or_else(|| default_cost(class))
    }
}

/// Per-class latency (us) and inverse bandwidth (us per byte) of a target's
/// classes, each multiplied by the metric's weight (0 or 1).
#[derive(Clone, Debug)]
pub(crate) struct CostTable {
    pub lat: Vec<f64>,
    pub ibw: Vec<f64>,
}

impl CostTable {
    pub fn new(target: &Target, costs: &Costs, metric: Metric) -> Self {
        let (wl, wb) = match metric {
            Metric::Bytes => (0.0, 1.0),
            Metric::Msgs => (1.0, 0.0),
            // hop-bytes and congestion do not use the class table.
            Metric::Cost | Metric::HopBytes | Metric::MaxCongestion => (1.0, 1.0),
        };
        let cc: Vec<ClassCost> = target.class_names().iter().map(|c| costs.get(c)).collect();
        CostTable {
            lat: cc.iter().map(|c| wl * c.latency_us).collect(),
            ibw: cc.iter().map(|c| wb / (c.bandwidth_gbs * 1e3)).collect(),
        }
    }

    #[inline]
    pub fn edge(&self, class: u16, bytes: f64, msgs: f64) -> f64 {
        msgs * self.lat[class as usize] + bytes * self.ibw[class as usize]
    }
}

/// Traffic of one class under a mapping.
#[derive(Clone, Debug, Serialize)]
pub struct ClassTraffic {
    pub class: String,
    pub bytes: f64,
    pub msgs: f64,
    pub cost_us: f64,
}

/// Score of a mapping.
#[derive(Clone, Debug, Serialize)]
pub struct Score {
    /// The value of the chosen objective (us for cost, bytes and msgs;
    /// bytes x hops for hop-bytes; bytes for max-congestion).
    pub objective: f64,
    /// Estimated communication time, both terms (us).
    pub cost_us: f64,
    pub latency_us: f64,
    pub transfer_us: f64,
    /// Sum of bytes x tree hops between the two slots.
    pub hop_bytes: f64,
    /// The largest traffic (bytes, both directions) crossing the boundary
    /// of one tree object (leaves and the root excluded).
    pub max_congestion: f64,
    pub by_class: Vec<ClassTraffic>,
    /// For each tree level: the largest traffic (bytes, both directions)
    /// crossing the boundary of one object of that level.
    pub max_load: Vec<(String, f64)>,
}

/// Scores `leaf_of_rank` (the leaf of each rank of `m`) on `target`.
pub fn evaluate(
    target: &Target,
    costs: &Costs,
    metric: Metric,
    m: &CommMatrix,
    leaf_of_rank: &[u32],
) -> Score {
    let full = CostTable::new(target, costs, Metric::Cost);
    let obj = CostTable::new(target, costs, metric);
    let nc = target.class_names().len();
    let mut by = vec![(0.0f64, 0.0f64, 0.0f64); nc];
    let mut load = vec![0.0f64; target.tree.len()];
    let (mut objective, mut lat, mut tr, mut hop) = (0.0, 0.0, 0.0, 0.0);
    for e in &m.edges {
        let (a, b) = (leaf_of_rank[e.src as usize], leaf_of_rank[e.dst as usize]);
        let c = target.class(a, b);
        objective += obj.edge(c, e.bytes, e.msgs); // replaced below for hop objectives
        let l = e.msgs * full.lat[c as usize];
        let t = e.bytes * full.ibw[c as usize];
        lat += l;
        tr += t;
        let s = &mut by[c as usize];
        s.0 += e.bytes;
        s.1 += e.msgs;
        s.2 += l + t;
        // Walk both leaves up to their lowest common ancestor.
        let (mut x, mut y) = (target.leaf_tnode[a as usize], target.leaf_tnode[b as usize]);
        let mut hops = 0u32;
        while x != y {
            let (dx, dy) = (target.tree[x as usize].depth, target.tree[y as usize].depth);
            let z = if dx >= dy { &mut x } else { &mut y };
            load[*z as usize] += e.bytes;
            *z = target.tree[*z as usize].parent;
            hops += 1;
        }
        hop += e.bytes * f64::from(hops);
    }
    let max_congestion = (0..target.tree.len())
        .filter(|&i| i as u32 != target.root && !target.tree[i].children.is_empty())
        .map(|i| load[i])
        .fold(0.0, f64::max);
    match metric {
        Metric::HopBytes => objective = hop,
        Metric::MaxCongestion => objective = max_congestion,
        _ => {}
    }
    let mut max_load: Vec<(u32, String, f64)> = Vec::new();
    for (i, t) in target.tree.iter().enumerate() {
        if i as u32 == target.root
            || target.tree[i].children.is_empty() && target.labels[t.label as usize] == "Slot"
        {
            continue;
        }
        let name = &target.labels[t.label as usize];
        match max_load.iter_mut().find(|x| x.1 == *name) {
            Some(x) => {
                x.0 = x.0.min(t.depth);
                x.2 = x.2.max(load[i]);
            }
            None => max_load.push((t.depth, name.clone(), load[i])),
        }
    }
    max_load.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    Score {
        objective,
        cost_us: lat + tr,
        latency_us: lat,
        transfer_us: tr,
        hop_bytes: hop,
        max_congestion,
        by_class: by
            .iter()
            .enumerate()
            .filter(|(_, s)| s.0 > 0.0 || s.1 > 0.0)
            .map(|(c, s)| ClassTraffic {
                class: target.class_names()[c].clone(),
                bytes: s.0,
                msgs: s.1,
                cost_us: s.2,
            })
            .collect(),
        max_load: max_load.into_iter().map(|x| (x.1, x.2)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_beyond_the_bounds_are_refused_naming_the_field() {
        let err = |lat: &str, bw: &str| {
            let text =
                format!(r#"{{"classes":{{"l3":{{"latency_us":{lat},"bandwidth_gbs":{bw}}}}}}}"#);
            Costs::from_json("c.json", &text)
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(err("0", "1e-9"), None);
        assert_eq!(err("1e9", "1e6"), None);
        let lat = "c.json: classes.l3.latency_us must be a number of microseconds from 0 to 1e9";
        let bw = "c.json: classes.l3.bandwidth_gbs must be a number of GB/s from 1e-9 to 1e6";
        assert_eq!(err("1e308", "1").as_deref(), Some(lat));
        assert_eq!(err("-0.5", "1").as_deref(), Some(lat));
        assert_eq!(err("1", "1e-300").as_deref(), Some(bw));
        assert_eq!(err("1", "1e7").as_deref(), Some(bw));
    }

    #[test]
    fn a_class_no_target_has_is_refused_naming_file_and_key() {
        let c = Costs::from_json(
            "c.json",
            r#"{"classes":{"nosuch":{"latency_us":1,"bandwidth_gbs":1}}}"#,
        )
        .unwrap();
        let present = ["self".to_string(), "l3".to_string(), "network".to_string()];
        let e = c.check_classes(&present).unwrap_err().to_string();
        assert!(
            e.contains("c.json: classes.nosuch") && e.contains("self, l3, network"),
            "{e}"
        );
        // Present here, a class any machine may have, a switch level: fine.
        let c = Costs::from_json(
            "c.json",
            r#"{"classes":{"l3":{"latency_us":1,"bandwidth_gbs":1},"numa":{"latency_us":1,"bandwidth_gbs":1},"switch2":{"latency_us":1,"bandwidth_gbs":1},"group1":{"latency_us":1,"bandwidth_gbs":1}}}"#,
        )
        .unwrap();
        c.check_classes(&present).unwrap();
    }

    #[test]
    fn reads_the_file_bench_matrix_writes() {
        let text = r#"{"schema":"topocomm.costs/1","fingerprint":"fnv1a64:0","size":1048576,
            "classes":{"l3":{"latency_us":0.033,"bandwidth_gbs":69.5,
            "latency_source":"cacheline","bandwidth_source":"coherence-read"}}}"#;
        let c = Costs::from_json("m.json", text).unwrap();
        assert_eq!(c.classes["l3"].latency_us, 0.033);
        assert_eq!(c.classes["l3"].bandwidth_gbs, 69.5);
        let typo = r#"{"clases":{}}"#;
        assert!(Costs::from_json("m.json", typo).is_err());
    }
}
