//! What the characterization benchmarks (`bench cache`, `bench matrix`,
//! `bench placement`; modules `cache_report`, `matrix_report`,
//! `placement_report`) share: their size syntax and how their tables print
//! numbers.

use crate::{Error, Result, Summary};

/// Parses a byte count: `4096`, `4K`, `4KiB`, `1M`, `2G` (binary units, not
/// 0; unlike [`crate::p2p::parse_size`], which takes 0 and no space before
/// the unit).
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::NotASize { text: text.into() })
}

/// Comma-separated list of sizes ([`parse_size`]); empty items are skipped.
pub fn parse_sizes(text: &str) -> Result<Vec<u64>> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_size)
        .collect()
}

/// Human size for tables: 1K, 64K, 1M.
pub fn size_label(n: u64) -> String {
    topocomm_report::bytes_label(n as f64)
}

/// `value [ci_low, ci_high]` with a precision fit for the magnitude.
pub fn fmt_ci(s: &Summary) -> String {
    format!("{} [{}, {}]", num(s.median), num(s.ci_low), num(s.ci_high))
}

/// A number with three or four significant digits (no exponent, unlike
/// [`crate::results::num`]).
pub fn num(v: f64) -> String {
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

/// A text table as the CLI prints it: title, header, rows.
pub type TextTable = (String, Vec<String>, Vec<Vec<String>>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert!(parse_size("x").is_err());
        assert_eq!(
            parse_size("0").unwrap_err().to_string(),
            "'0' is not a size (expected e.g. 4096, 64K, 1M, 2G)"
        );
        assert_eq!(parse_sizes("1K,2K").unwrap(), vec![1024, 2048]);
    }
}
