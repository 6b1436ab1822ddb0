//! The transport's error type and `Result` alias.

use std::time::Duration;

/// Transport errors.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("message of {len} bytes from rank {peer} (tag {tag}) is larger than the receive buffer of {cap} bytes")]
    Truncated {
        len: usize,
        cap: usize,
        peer: i32,
        tag: i32,
    },
    #[error("peer rank {rank} is dead: {detail}")]
    DeadPeer { rank: i32, detail: String },
    #[error("no completion within {0:?} (TOPOCOMM_TIMEOUT): stuck exchange")]
    Timeout(Duration),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("{0}")]
    Setup(String),
}

pub type Result<T> = std::result::Result<T, Error>;
