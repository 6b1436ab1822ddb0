//! Errors of the mapping engine: every one names the file/line/column or the
//! argument at fault and what was expected.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum MapError {
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    /// Bad content at a position of an input file (1-based line and column).
    #[error("{path}:{line}:{column}: {reason}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        reason: String,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Topology(#[from] topocomm_topo::TopoError),
}

impl MapError {
    pub(crate) fn syntax(
        path: &str,
        line: usize,
        column: usize,
        reason: impl Into<String>,
    ) -> Self {
        MapError::Syntax {
            path: path.to_string(),
            line,
            column,
            reason: reason.into(),
        }
    }
}
