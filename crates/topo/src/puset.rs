//! Sets of PU OS indexes, written in the compact list syntax that Linux and
//! hwloc use for CPU lists (`0-3,8,10-11`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A sorted, duplicate-free set of PU OS indexes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PuSet(Vec<u32>);

impl PuSet {
    /// The most indexes a parsed list may hold (as many leaves as the
    /// largest synthetic topology accepted).
    pub const MAX_LEN: usize = 1 << 20;

    /// Builds a set from any iterator of indexes (sorted and deduplicated here).
    pub fn from_indexes(indexes: impl IntoIterator<Item = u32>) -> Self {
        let mut v: Vec<u32> = indexes.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        PuSet(v)
    }

    /// The set of every index in `range` (no sorting needed).
    pub fn from_range(range: std::ops::Range<u32>) -> Self {
        PuSet(range.collect())
    }

    /// The indexes in increasing order.
    pub fn indexes(&self) -> &[u32] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, os_index: u32) -> bool {
        self.0.binary_search(&os_index).is_ok()
    }

    /// Parses the list syntax (`0-3,8`); whitespace around items is allowed.
    /// At most [`PuSet::MAX_LEN`] indexes: the set is a vector of every index,
    /// so `0-4294967295` would otherwise allocate 16 GiB before anything
    /// could look at it.
    pub fn parse_list(text: &str) -> Result<Self, String> {
        let mut out: Vec<u32> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('-') {
                Some((a, b)) => {
                    let a: u32 = a
                        .trim()
                        .parse()
                        .map_err(|_| format!("'{item}' is not a range like 0-3"))?;
                    let b: u32 = b
                        .trim()
                        .parse()
                        .map_err(|_| format!("'{item}' is not a range like 0-3"))?;
                    if b < a {
                        return Err(format!("range '{item}' goes backwards"));
                    }
                    let width = u64::from(b) - u64::from(a) + 1;
                    if out.len() as u64 + width > Self::MAX_LEN as u64 {
                        return Err(format!(
                            "range '{item}' makes the list longer than {} PUs",
                            Self::MAX_LEN
                        ));
                    }
                    out.extend(a..=b);
                }
                None => out.push(
                    item.parse()
                        .map_err(|_| format!("'{item}' is not a PU index"))?,
                ),
            }
        }
        Ok(PuSet::from_indexes(out))
    }
}

impl fmt::Display for PuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl Serialize for PuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for PuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        PuSet::parse_list(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_compact_lists() {
        let s = PuSet::from_indexes([8, 0, 1, 2, 3, 10, 11, 3]);
        assert_eq!(s.to_string(), "0-3,8,10-11");
        assert_eq!(PuSet::parse_list("0-3, 8,10-11").unwrap(), s);
        assert_eq!(PuSet::parse_list("").unwrap().len(), 0);
    }

    #[test]
    fn rejects_garbage() {
        assert!(PuSet::parse_list("3-1").is_err());
        assert!(PuSet::parse_list("a").is_err());
        assert!(PuSet::parse_list("1-x").is_err());
    }
}
