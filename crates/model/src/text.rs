//! Number and size formats shared by the model's and the tuner's tables
//! (the same as the CLI's characterization commands print).

/// Three significant digits or so, no exponent.
pub(crate) fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Seconds as microseconds, [`num`]'s format.
pub(crate) fn us(s: f64) -> String {
    num(s * 1e6)
}

/// Human size for tables: 1K, 64K, 1M.
pub(crate) fn size_label(n: u64) -> String {
    topocomm_report::bytes_label(n as f64)
}
