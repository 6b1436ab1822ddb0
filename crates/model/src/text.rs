//! Number and size formats shared by the model's and the tuner's tables
//! (measure's, the same as the characterization commands print).

pub(crate) use topocomm_measure::charact::{num, size_label};

/// Seconds as microseconds, [`num`]'s format.
pub(crate) fn us(s: f64) -> String {
    num(s * 1e6)
}
