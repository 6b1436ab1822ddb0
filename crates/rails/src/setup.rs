//! What `topocomm rails` works from and what it shows: the rails of a
//! machine loaded and checked once ([`Setup`]), a process's location, the
//! table rows and JSON documents of its three modes (machine, plan, device
//! environment), and the environment `rails exec` sets.
//!
//! Reading this process's binding (`/proc/self/status`) is the one place
//! where this module looks at the running process; the caller passes the
//! launcher's variables in.

use crate::assign::{choose, nearest};
use crate::discover::{discover, DiscoverOptions, Rail, Rails};
use crate::env::{device_env, local_rank, EnvVar, LOCAL_RANK_VARS};
use crate::error::RailsError;
use crate::locality::{Distance, Location};
use crate::split::{split, SplitParams, SplitPlan};
use crate::stacks::{auto_stack, Stack};
use crate::table::RailTable;
use crate::weights::{weigh, RailWeight};
use serde::Serialize;
use serde_json::Value;
use topocomm_topo::{Machine, PuSet};

/// How to build a [`Setup`]: the `topocomm rails` options.
#[derive(Clone, Debug, Default)]
pub struct SetupOptions {
    /// Use plain IP interfaces as TCP rails too.
    pub ethernet: bool,
    /// Path of a measured throughput table ([`RailTable`]).
    pub table: Option<String>,
    /// Split parameters (checked by [`Setup::new`]).
    pub params: SplitParams,
    /// The stack whose variables `--env` and `exec` write (`None`: auto).
    pub stack: Option<Stack>,
}

/// A machine's rails with the table and parameters, loaded and checked once.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The machine model.
    pub machine: Machine,
    /// Where the model came from, in a few words (`hwloc XML FILE`, ...).
    pub origin: String,
    /// The rails discovered on it.
    pub rails: Rails,
    /// The measured table, if one was given.
    pub table: Option<RailTable>,
    /// The split parameters.
    pub params: SplitParams,
    /// The stack of the device environment (`None`: [`crate::auto_stack`]).
    pub stack: Option<Stack>,
}

/// The split of a large message from each NUMA node.
#[derive(Clone, Debug, PartialEq)]
pub struct NumaSplit {
    /// Table header: from, package, PUs, one column per network rail, nearest GPUs.
    pub head: Vec<String>,
    /// Table rows, one per NUMA node.
    pub rows: Vec<Vec<String>>,
    /// The same, as the `from_numa` entries of `topocomm.rails/1`.
    pub from_numa: Vec<FromNuma>,
}

/// One `from_numa` entry of `topocomm.rails/1`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FromNuma {
    /// `NUMA n` (or `machine` on a model without NUMA nodes).
    pub from: String,
    /// The NUMA node's PUs as a location.
    pub location: Location,
    /// The network rails weighed from there.
    pub weights: Vec<RailWeight>,
    /// The plan of a large message (none without network rails).
    pub plan: Option<SplitPlan>,
    /// The nearest GPUs' names.
    pub nearest_gpus: Vec<String>,
    /// Their distance.
    pub gpu_distance: Option<Distance>,
}

/// `topocomm.rails/1`: the rails of a machine (docs/formats/rails-json.md).
#[derive(Clone, Debug, Serialize)]
pub struct RailsDoc<'a> {
    /// `topocomm.rails/1`.
    pub schema: &'static str,
    /// Where the model came from.
    pub origin: &'a str,
    /// Where the weights come from ([`Setup::source`]).
    pub weights: String,
    /// Contention mode.
    pub contention: bool,
    /// The rails.
    pub rails: &'a Rails,
    /// The split from each NUMA node.
    pub from_numa: Vec<FromNuma>,
    /// Why there are no rails, if there are none.
    pub notice: Option<String>,
}

/// `topocomm.rails-plan/1`: the split plan of one message.
#[derive(Clone, Debug, Serialize)]
pub struct PlanDoc<'a> {
    /// `topocomm.rails-plan/1`.
    pub schema: &'static str,
    /// Where the model came from.
    pub origin: &'a str,
    /// Where the weights come from.
    pub weights_from: String,
    /// The sending location.
    pub location: Location,
    /// The network rails weighed from it.
    pub weights: Vec<RailWeight>,
    /// The plan.
    pub plan: SplitPlan,
}

/// `topocomm.rails-env/1`: the device environment of one local rank.
#[derive(Clone, Debug, Serialize)]
pub struct EnvDoc {
    /// `topocomm.rails-env/1`.
    pub schema: &'static str,
    /// The local rank.
    pub local_rank: u32,
    /// Where the local rank came from (`--local-rank`, a variable, default).
    pub local_rank_from: String,
    /// The location.
    pub location: Location,
    /// Where the location came from.
    pub location_from: String,
    /// Where the weights come from.
    pub weights_from: String,
    /// The stack the network variables are written for.
    pub stack: Stack,
    /// The variables.
    pub env: Vec<EnvVar>,
    /// What the stack cannot express (uneven shares, rails it cannot drive).
    pub notes: Vec<String>,
}

/// The environment document of a machine without rails.
#[derive(Clone, Debug, Serialize)]
pub struct NoRailsEnvDoc {
    /// The local rank.
    pub local_rank: u32,
    /// Always empty.
    pub env: Vec<EnvVar>,
    /// Why there are no rails.
    pub notice: String,
}

/// A document as a JSON value, keys in alphabetical order (as topocomm
/// writes every rails document).
pub fn to_json<T: Serialize>(doc: &T) -> Value {
    serde_json::to_value(doc).unwrap_or(Value::Null)
}

impl Setup {
    /// Discovers the rails of `m`, loads and checks the table, checks the parameters.
    pub fn new(m: Machine, origin: String, o: &SetupOptions) -> Result<Self, RailsError> {
        let rails = discover(
            &m,
            &DiscoverOptions {
                ethernet: o.ethernet,
            },
        );
        let table = match &o.table {
            Some(p) => {
                let t = RailTable::load(p)?;
                t.check(&rails.nics)?;
                Some(t)
            }
            None => None,
        };
        o.params.validate()?;
        Ok(Setup {
            machine: m,
            origin,
            rails,
            table,
            params: o.params.clone(),
            stack: o.stack,
        })
    }

    /// Where the weights come from, in words.
    pub fn source(&self) -> String {
        match &self.table {
            Some(t) => format!("measured table {} (GB/s)", t.path),
            None => "default model of seed 002 (1.0 near the rail, 0.77 elsewhere)".into(),
        }
    }

    /// The location of PU list `pu` (`--pu`), else of this process's
    /// binding, with a description of where it came from.
    pub fn location(&self, pu: Option<&str>) -> Result<(Location, String), RailsError> {
        let (set, what) = match pu {
            Some(t) => (
                // Bare OS indexes as before; else hwloc locations (core:2, numa:0).
                match PuSet::parse_list(t) {
                    Ok(s) => s,
                    Err(_) => topocomm_topo::resolve_set(&self.machine, t).map_err(|e| {
                        RailsError::BadPuList {
                            text: t.into(),
                            reason: e.to_string(),
                        }
                    })?,
                },
                format!("--pu {t}"),
            ),
            None => {
                let b = bound_pus()?;
                let what = format!("this process's binding (PUs {b})");
                (b, what)
            }
        };
        let loc = Location::new(&self.machine, &set).map_err(|e| RailsError::AtLocation {
            what: what.clone(),
            cause: Box::new(e),
        })?;
        Ok((loc, what))
    }

    /// The network rails weighed from `loc`.
    pub fn weigh(&self, loc: &Location) -> Vec<RailWeight> {
        weigh(&self.machine, loc, &self.rails.nics, self.table.as_ref())
    }

    /// The split of a large message from each NUMA node.
    pub fn numa_split(&self) -> Result<NumaSplit, RailsError> {
        let (m, rails) = (&self.machine, &self.rails);
        let large = self.params.single_rail_below.max(1 << 30);
        let mut rows = Vec::new();
        let mut from_numa = Vec::new();
        for (label, loc) in numa_locations(m) {
            let w = self.weigh(&loc);
            let plan = (!w.is_empty())
                .then(|| split(&w, large, &self.params))
                .transpose()?;
            let (gpus, gd) = nearest(&loc, &rails.gpus);
            let gpu_names: Vec<String> = gpus.iter().map(|&i| rails.gpus[i].name.clone()).collect();
            let packages: Vec<String> = loc.packages.iter().map(u32::to_string).collect();
            let mut row = vec![label.clone(), packages.join(","), loc.pus.to_string()];
            for x in &w {
                let share = plan
                    .as_ref()
                    .and_then(|p| p.chunks.iter().find(|c| c.rail == x.rail))
                    .map_or(0.0, |c| c.share);
                row.push(format!(
                    "{} {:.2} {:.1}%",
                    x.distance,
                    x.weight,
                    share * 100.0
                ));
            }
            row.push(match gd {
                Some(d) => format!("{} ({d})", gpu_names.join(",")),
                None => "-".into(),
            });
            rows.push(row);
            from_numa.push(FromNuma {
                from: label,
                location: loc,
                weights: w,
                plan,
                nearest_gpus: gpu_names,
                gpu_distance: gd,
            });
        }
        let mut head: Vec<String> = vec!["from".into(), "package".into(), "PUs".into()];
        head.extend(rails.nics.iter().map(|r| r.name.clone()));
        head.push("nearest GPUs".into());
        Ok(NumaSplit {
            head,
            rows,
            from_numa,
        })
    }

    /// The `topocomm.rails/1` document of the machine.
    pub fn machine_doc(&self) -> Result<RailsDoc<'_>, RailsError> {
        Ok(RailsDoc {
            schema: "topocomm.rails/1",
            origin: &self.origin,
            weights: self.source(),
            contention: self.params.contention,
            rails: &self.rails,
            from_numa: self.numa_split()?.from_numa,
            notice: self.rails.is_empty().then(|| self.rails.absence_reason()),
        })
    }

    /// The split plan of one message of `size` bytes from PU list `pu`.
    pub fn plan(&self, pu: &str, size: u64) -> Result<PlanDoc<'_>, RailsError> {
        let (loc, _) = self.location(Some(pu))?;
        if self.rails.nics.is_empty() {
            return Err(RailsError::NoRailToPlan {
                pu: pu.into(),
                reason: self.rails.absence_reason(),
            });
        }
        let w = self.weigh(&loc);
        let plan = split(&w, size, &self.params)?;
        Ok(PlanDoc {
            schema: "topocomm.rails-plan/1",
            origin: &self.origin,
            weights_from: self.source(),
            location: loc,
            weights: w,
            plan,
        })
    }

    /// The device variables of local rank `rank` (found as `rank_from`) at
    /// `pu` (else this process's binding), with the location and where it
    /// came from.
    pub fn env(
        &self,
        pu: Option<&str>,
        rank: u32,
        rank_from: String,
    ) -> Result<EnvDoc, RailsError> {
        let (loc, what) = self.location(pu)?;
        let w = self.weigh(&loc);
        let choice = choose(&self.rails, &loc, &w, &self.params, rank)?;
        let stack = self.stack.unwrap_or_else(|| auto_stack(&self.rails));
        let measured = self.table.is_some();
        let e = device_env(
            &self.rails,
            &loc,
            &choice,
            Some(stack),
            &self.params,
            measured,
        );
        Ok(EnvDoc {
            schema: "topocomm.rails-env/1",
            local_rank: rank,
            local_rank_from: rank_from,
            stack,
            env: e.vars,
            notes: e.notes,
            location: loc,
            location_from: what,
            weights_from: self.source(),
        })
    }

    /// The environment document of a machine without rails.
    pub fn no_rails_env(&self, rank: u32) -> NoRailsEnvDoc {
        NoRailsEnvDoc {
            local_rank: rank,
            env: Vec::new(),
            notice: self.rails.absence_reason(),
        }
    }

    /// What `rails exec PROG` sets for the local rank found in the
    /// launcher's variables (`rank`, see [`crate::local_rank`]): nothing on
    /// a machine without rails. `note` receives the lines to show on stderr
    /// as they arise (`verbose`: the variables too).
    pub fn exec_env(
        &self,
        pu: Option<&str>,
        rank: Option<(u32, &str)>,
        prog: &str,
        verbose: bool,
        note: &mut dyn FnMut(&str),
    ) -> Result<Vec<EnvVar>, RailsError> {
        if self.rails.is_empty() {
            // Never fail the job for missing devices: say so once, run unchanged.
            note(&format!(
                "no rails on {}: {}; running {prog} unchanged",
                self.origin,
                self.rails.absence_reason(),
            ));
            return Ok(Vec::new());
        }
        let r = rank.map_or(0, |(r, _)| r);
        if rank.is_none() {
            note(&format!(
                "none of {} is set: local rank 0",
                LOCAL_RANK_VARS.join(", ")
            ));
        }
        let doc = self.env(pu, r, String::new())?;
        if verbose {
            note(&format!(
                "local rank {r} at {}:\n{}",
                doc.location_from,
                exports(&doc.env).trim_end()
            ));
            for n in &doc.notes {
                note(&format!("note: {n}"));
            }
        }
        Ok(doc.env)
    }
}

/// The local rank for `--env`: `explicit` (`--local-rank`), else the first
/// launcher variable that `get` finds (see [`crate::local_rank`]), else 0;
/// with where it came from.
pub fn resolve_rank(
    explicit: Option<u32>,
    get: impl Fn(&str) -> Option<String>,
) -> Result<(u32, String), RailsError> {
    Ok(match explicit {
        Some(r) => (r, "--local-rank".to_string()),
        None => match local_rank(get)? {
            Some((r, var)) => (r, var.to_string()),
            None => (
                0,
                format!("default: none of {} is set", LOCAL_RANK_VARS.join(", ")),
            ),
        },
    })
}

/// PUs this process may run on (`Cpus_allowed_list` of /proc/self/status).
pub fn bound_pus() -> Result<PuSet, RailsError> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| {
        RailsError::BindingUnreadable {
            reason: e.to_string(),
        }
    })?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or(RailsError::NoBindingList)?;
    PuSet::parse_list(list.trim()).map_err(|reason| RailsError::BadBindingList { reason })
}

/// One location per NUMA node with PUs (or the whole machine without them).
pub fn numa_locations(m: &Machine) -> Vec<(String, Location)> {
    let mut out: Vec<(String, Location)> = m
        .numa_nodes
        .iter()
        .filter(|n| !n.cpuset.is_empty())
        .filter_map(|n| {
            let l = Location::new(m, &n.cpuset).ok()?;
            Some((format!("NUMA {}", n.os_index), l))
        })
        .collect();
    if out.is_empty() {
        let all = PuSet::from_indexes(m.pus.iter().map(|p| p.os_index));
        out.extend(
            Location::new(m, &all)
                .ok()
                .map(|l| ("machine".to_string(), l)),
        );
    }
    out
}

/// `a,b,c`, or `-` for an empty list.
pub fn list_or_dash(n: &[u32]) -> String {
    if n.is_empty() {
        "-".into()
    } else {
        n.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
    }
}

/// Table rows of rails: name, transport (NICs) or index (`gpu`), aliases,
/// PCI bus id, package, NUMA nodes, PUs.
pub fn rail_rows(rails: &[Rail], gpu: bool) -> Vec<Vec<String>> {
    rails
        .iter()
        .map(|r| {
            let what = if gpu {
                r.gpu_index.map_or("-".into(), |i| i.to_string())
            } else {
                r.transport
                    .map_or("-".into(), |t| format!("{t:?}").to_lowercase())
            };
            vec![
                r.name.clone(),
                what,
                if r.aliases.is_empty() {
                    "-".into()
                } else {
                    r.aliases.join(",")
                },
                r.pci_bus_id.clone().unwrap_or_else(|| "-".into()),
                r.package.map_or("-".into(), |p| format!("package {p}")),
                list_or_dash(&r.numa_nodes),
                r.cpuset.to_string(),
            ]
        })
        .collect()
}

/// A rail table: title, header, rows.
pub type RailTableView = (&'static str, [&'static str; 7], Vec<Vec<String>>);

/// The tables of the network rails and of the GPUs, those not empty; the
/// first column is `rail` or `gpu`.
pub fn rail_tables(rails: &Rails) -> Vec<RailTableView> {
    let head = |first, what| [first, what, "aliases", "PCI", "near", "NUMA", "PUs"];
    let mut out = Vec::new();
    if !rails.nics.is_empty() {
        let rows = rail_rows(&rails.nics, false);
        out.push(("Network rails", head("rail", "transport"), rows));
    }
    if !rails.gpus.is_empty() {
        let rows = rail_rows(&rails.gpus, true);
        out.push(("GPUs (index in PCI bus order)", head("gpu", "index"), rows));
    }
    out
}

/// Table rows of weights: rail, distance, NUMA latency, weight.
pub fn weight_rows(w: &[RailWeight]) -> Vec<Vec<String>> {
    w.iter()
        .map(|x| {
            vec![
                x.name.clone(),
                x.distance.to_string(),
                x.numa_latency.map_or("-".into(), |l| l.to_string()),
                format!("{:.2}", x.weight),
            ]
        })
        .collect()
}

/// Table rows of a plan's chunks: rail, distance, share, bytes.
pub fn chunk_rows(plan: &SplitPlan) -> Vec<Vec<String>> {
    plan.chunks
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.distance.to_string(),
                format!("{:.1}%", c.share * 100.0),
                c.bytes.to_string(),
            ]
        })
        .collect()
}

/// `# why` + `export NAME=VALUE` per variable (values shell-quoted).
pub fn exports(vars: &[EnvVar]) -> String {
    vars.iter()
        .map(|v| format!("# {}\nexport {}={}\n", v.why, v.name, shell_quote(&v.value)))
        .collect()
}

/// `s` as one shell word: unquoted when safe, else in single quotes.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.,:/-=".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_sources_and_exports() {
        let none = |_: &str| None;
        assert_eq!(
            resolve_rank(Some(3), |_| Some("x".into())).unwrap().1,
            "--local-rank"
        );
        assert_eq!(resolve_rank(None, none).unwrap().0, 0);
        let slurm = |k: &str| (k == "SLURM_LOCALID").then(|| "2".to_string());
        assert_eq!(
            resolve_rank(None, slurm).unwrap(),
            (2, "SLURM_LOCALID".into())
        );
        let v = |value: &str| EnvVar {
            name: "A".into(),
            value: value.into(),
            why: "w".into(),
        };
        assert_eq!(exports(&[v("mlx5_0:1")]), "# w\nexport A=mlx5_0:1\n");
        assert_eq!(exports(&[v("it's")]), "# w\nexport A='it'\\''s'\n");
    }
}
