//! Errors of the model and tuner runs: one line each, naming the option or
//! the input at fault, as the CLI prints them.

use thiserror::Error;
use topocomm_topo::TopoError;

/// Why a `topocomm model` or `topocomm tune` run could not be planned or
/// failed.
#[derive(Debug, Error)]
pub enum ModelError {
    /// A name of `--classes` (or `--class`) is not a locality class.
    #[error("{flag}: {reason}")]
    BadClass { flag: &'static str, reason: String },
    /// A wanted class has no pair on this machine.
    #[error("{flag}: class '{class}' is not present on this machine (present: {present})")]
    ClassAbsent {
        flag: &'static str,
        class: String,
        present: String,
    },
    /// `--classes` names no class.
    #[error("{flag}: empty list")]
    NoClass { flag: &'static str },
    /// `--sizes` does not parse or is out of range.
    #[error("--sizes: {reason}")]
    Sizes { reason: String },
    /// `--pair` does not parse or names a PU absent from the topology.
    #[error("--pair: {cause}")]
    Pair { cause: TopoError },
    /// `--pair` names one PU twice.
    #[error("--pair {text}: the two PUs must differ")]
    SamePu { text: String },
    /// The machine has one PU: no pair to model or tune (`what` says which).
    #[error("this machine has a single PU: {what}")]
    SinglePu { what: &'static str },
    /// `--mode` is not grid, model or both.
    #[error("--mode: {reason}")]
    Mode { reason: String },
    /// `--test` is not latency or bw.
    #[error("--test: unknown test '{name}' (expected latency or bw)")]
    Test { name: String },
    /// `--budget` is not a number of seconds in (0, 604800] (one week).
    #[error("--budget {value}: expected a number of seconds in (0, 604800]")]
    Budget { value: f64 },
    /// The bench cache points lack a curve the class's rates need.
    #[error("{origin}: class {class}: {reason}")]
    Rates {
        origin: String,
        class: String,
        reason: String,
    },
    /// A transport job of the model's measurement failed.
    #[error("measuring {protocol} on {class}: {reason}")]
    Measure {
        protocol: String,
        class: String,
        reason: String,
    },
    /// The tuner's searches or verification failed.
    #[error("tune: {reason}")]
    Tune { reason: String },
}
