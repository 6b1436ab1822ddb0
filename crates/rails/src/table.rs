//! Measured rail throughput table (docs/formats/rails-table.md):
//!
//! ```json
//! { "schema": "topocomm.rails-table/1",
//!   "rails": { "mlx5_0": { "local": 11.8, "package": 9.2, "remote": 9.1 } } }
//! ```
//!
//! GB/s per rail (name or alias) and distance class; `package` and `remote`
//! default to `local` times the model's factor.

use crate::discover::Rail;
use crate::error::RailsError;
use crate::locality::Distance;
use crate::weights::default_factor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use topocomm_topo::text::one_line;

pub const TABLE_SCHEMA: &str = "topocomm.rails-table/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassRates {
    pub local: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    schema: String,
    #[serde(default)]
    note: Option<String>,
    rails: BTreeMap<String, ClassRates>,
}

/// A parsed, validated table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RailTable {
    pub path: String,
    pub rails: BTreeMap<String, ClassRates>,
}

impl RailTable {
    /// Reads and validates a table file.
    pub fn load(path: &str) -> Result<Self, RailsError> {
        let text = std::fs::read_to_string(path).map_err(|e| RailsError::TableIo {
            path: path.into(),
            reason: e.to_string(),
        })?;
        Self::parse(path, &text)
    }

    /// Parses table text; `path` only names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<Self, RailsError> {
        let f: TableFile = serde_json::from_str(text).map_err(|e| RailsError::TableSyntax {
            path: path.into(),
            line: e.line(),
            column: e.column(),
            // serde_json appends " at line L column C": already in front.
            // One line even when it quotes a key holding "\n".
            reason: one_line(
                e.to_string()
                    .rsplit_once(" at line ")
                    .map_or_else(|| e.to_string(), |(r, _)| r.to_string())
                    .as_str(),
            ),
        })?;
        // Names and values come from the file: escaped to keep one line.
        let field = |field: String, reason: String| RailsError::TableField {
            path: path.into(),
            field: one_line(&field),
            reason: one_line(&reason),
        };
        if f.schema != TABLE_SCHEMA {
            return Err(field(
                "schema".into(),
                format!("expected \"{TABLE_SCHEMA}\", got \"{}\"", f.schema),
            ));
        }
        if f.rails.is_empty() {
            return Err(field("rails".into(), "expected at least one rail".into()));
        }
        for (name, r) in &f.rails {
            for (class, v) in [
                ("local", Some(r.local)),
                ("package", r.package),
                ("remote", r.remote),
            ] {
                if let Some(v) = v {
                    if !(v.is_finite() && v > 0.0) {
                        return Err(field(
                            format!("rails.{name}.{class}"),
                            format!("expected a throughput in GB/s > 0, got {v}"),
                        ));
                    }
                }
            }
        }
        Ok(RailTable {
            path: path.into(),
            rails: f.rails,
        })
    }

    /// Checks the table against the network rails of a machine: every rail
    /// measured, every entry a rail (by name or alias) of this machine.
    pub fn check(&self, nics: &[Rail]) -> Result<(), RailsError> {
        let names: Vec<&str> = nics.iter().map(|r| r.name.as_str()).collect();
        for key in self.rails.keys() {
            if !nics.iter().any(|r| r.answers_to(key)) {
                return Err(RailsError::TableField {
                    path: self.path.clone(),
                    field: format!("rails.{}", one_line(key)),
                    reason: format!(
                        "not a network rail of this machine (rails: {})",
                        if names.is_empty() {
                            "none".into()
                        } else {
                            names.join(", ")
                        }
                    ),
                });
            }
        }
        for r in nics {
            if self.entry(r).is_none() {
                return Err(RailsError::TableField {
                    path: self.path.clone(),
                    field: format!("rails.{}", r.name),
                    reason: "missing: a table must measure every network rail of the machine"
                        .into(),
                });
            }
        }
        Ok(())
    }

    fn entry(&self, r: &Rail) -> Option<&ClassRates> {
        self.rails
            .get(&r.name)
            .or_else(|| r.aliases.iter().find_map(|a| self.rails.get(a)))
    }

    /// Measured GB/s of `r` at distance `d` (`None` if `r` is not in the table).
    pub fn rate(&self, r: &Rail, d: Distance) -> Option<f64> {
        let e = self.entry(r)?;
        let scaled = e.local * default_factor(r.kind, d);
        Some(match d {
            Distance::Local => e.local,
            Distance::Package => e.package.unwrap_or(scaled),
            Distance::Remote => e.remote.unwrap_or(scaled),
        })
    }
}
