//! Errors of the rails layer: one line each, naming the input (file and
//! line/field, argument, environment variable) and what was expected.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum RailsError {
    #[error(transparent)]
    Topo(#[from] topocomm_topo::TopoError),
    #[error("location: {0}")]
    BadLocation(String),
    #[error("cannot read rails table '{path}': {reason}")]
    TableIo { path: String, reason: String },
    #[error("{path}:{line}:{column}: {reason}")]
    TableSyntax {
        path: String,
        line: usize,
        column: usize,
        reason: String,
    },
    #[error("{path}: field '{field}': {reason}")]
    TableField {
        path: String,
        field: String,
        reason: String,
    },
    #[error("{var}='{value}': expected a local rank (a non-negative integer)")]
    BadLocalRank { var: String, value: String },
    #[error("no network rail on this machine{0}")]
    NoNetworkRails(String),
    #[error("{what}: {reason}")]
    BadParameter { what: String, reason: String },
    /// A `--pu` list that does not parse.
    #[error("--pu '{text}': {reason}")]
    BadPuList { text: String, reason: String },
    /// `cause` for the location described by `what` (`--pu 8`, this process's binding ...).
    #[error("{what}: {cause}")]
    AtLocation {
        what: String,
        cause: Box<RailsError>,
    },
    /// /proc/self/status could not be read.
    #[error("reading /proc/self/status for this process's binding: {reason}")]
    BindingUnreadable { reason: String },
    /// /proc/self/status has no `Cpus_allowed_list` line.
    #[error("/proc/self/status has no Cpus_allowed_list: pass --pu")]
    NoBindingList,
    /// The `Cpus_allowed_list` of /proc/self/status does not parse.
    #[error("/proc/self/status Cpus_allowed_list: {reason}")]
    BadBindingList { reason: String },
    /// A split plan asked (`--pu PUS --size`) on a machine without network rails.
    #[error("--pu {pu} --size: no network rail on this machine: {reason}")]
    NoRailToPlan { pu: String, reason: String },
}
