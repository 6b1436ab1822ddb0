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
}
