//! Which classes and message sizes a `topocomm model` or `topocomm tune` run
//! covers: the `--classes`/`--class` and `--sizes` options resolved against
//! the machine.

use crate::ModelError;
use topocomm_topo::{ClassMatrix, LocalityClass, Machine};

/// A locality class's name and the PU pair (OS indexes) measured for it.
pub type ClassPair = (String, (u32, u32));

/// Message sizes when none are given.
pub const DEFAULT_SIZES: &str = "1K,4K,16K,64K,256K,1M,4M,16M";

/// The classes present with their representative pairs, restricted to
/// `wanted` (an unknown or absent class is an error naming it).
pub fn targets(m: &Machine, wanted: Option<&[String]>) -> Result<Vec<ClassPair>, ModelError> {
    select(m, wanted, "--classes")
}

/// [`targets`], errors naming `flag`.
pub(crate) fn select(
    m: &Machine,
    wanted: Option<&[String]>,
    flag: &'static str,
) -> Result<Vec<ClassPair>, ModelError> {
    let all: Vec<ClassPair> = ClassMatrix::new(m)
        .classes()
        .iter()
        .map(|c| (c.class.to_string(), c.representative))
        .collect();
    let Some(w) = wanted else { return Ok(all) };
    let mut out = Vec::new();
    for c in w {
        c.parse::<LocalityClass>()
            .map_err(|reason| ModelError::BadClass { flag, reason })?;
        let t = all
            .iter()
            .find(|(n, _)| n == c)
            .ok_or_else(|| ModelError::ClassAbsent {
                flag,
                class: c.clone(),
                present: all
                    .iter()
                    .map(|a| a.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    if out.is_empty() {
        return Err(ModelError::NoClass { flag });
    }
    Ok(out)
}

/// A comma-separated list of message sizes (`4096`, `64K`, `1M`; 1 B to
/// 1 GiB), sorted, without duplicates.
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, ModelError> {
    let mut v: Vec<u64> = text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_size)
        .collect::<Result<_, _>>()
        .map_err(|reason| ModelError::Sizes { reason })?;
    if v.is_empty() || v.iter().any(|&s| s == 0 || s > 1 << 30) {
        return Err(ModelError::Sizes {
            reason: "expected sizes from 1 B to 1 GiB".into(),
        });
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// A byte count ([`topocomm_measure::charact::parse_size`]: `4096`, `4K`,
/// `4KiB`, `1M`, `2G`), its error as text.
fn parse_size(text: &str) -> Result<u64, String> {
    topocomm_measure::charact::parse_size(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_sorted_deduplicated_and_bounded() {
        assert_eq!(parse_sizes("64K,1K,1KiB").unwrap(), vec![1024, 65536]);
        assert_eq!(
            parse_sizes("4Q").unwrap_err().to_string(),
            "--sizes: '4Q' is not a size (expected e.g. 4096, 64K, 1M, 2G)"
        );
        assert_eq!(
            parse_sizes("2G").unwrap_err().to_string(),
            "--sizes: expected sizes from 1 B to 1 GiB"
        );
        assert!(parse_sizes(",").is_err());
    }

    #[test]
    fn classes_are_checked_against_the_machine() {
        let m = topocomm_topo::load(&"synthetic:pack:2 core:2 pu:2".parse().unwrap()).unwrap();
        let all = targets(&m, None).unwrap();
        assert_eq!(all.len(), 3, "{all:?}");
        let one = targets(&m, Some(&["smt".into(), "smt".into()])).unwrap();
        assert_eq!(one, vec![all[0].clone()]);
        let e = select(&m, Some(&["l2".into()]), "--class").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--class: class 'l2' is not present on this machine (present: smt, "),
            "{e}"
        );
        assert!(targets(&m, Some(&["L#".into()]))
            .unwrap_err()
            .to_string()
            .starts_with("--classes: unknown locality class"));
        assert_eq!(
            targets(&m, Some(&[])).unwrap_err().to_string(),
            "--classes: empty list"
        );
    }
}
