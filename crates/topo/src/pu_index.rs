//! OS index -> position in [`crate::Machine::pus`], built once per machine
//! (on the first look-up: a machine read from JSON or built by hand gets it
//! too) so that every PU look-up is O(1), whatever the numbering.

use std::collections::HashMap;

/// The positions of the PUs by OS index: a table indexed by OS index when
/// the indexes are dense enough (the largest below 4x the PU count plus
/// 1024), else a hash map, so that sparse indexes (P#2^31) cost no memory
/// beyond the PUs themselves.
#[derive(Clone, Debug)]
pub(crate) enum PuIndex {
    /// `table[os]` = position, `u32::MAX` where no PU has that index.
    Dense(Vec<u32>),
    Sparse(HashMap<u32, u32>),
}

impl PuIndex {
    pub(crate) fn build(
        os_indexes: impl ExactSizeIterator<Item = u32> + DoubleEndedIterator + Clone,
    ) -> PuIndex {
        let n = os_indexes.len();
        let max = os_indexes.clone().max().map_or(0, |m| m as usize);
        if max < 4 * n + 1024 {
            let mut table = vec![u32::MAX; max + 1];
            // The first PU of a duplicated index wins, as a scan would find it.
            for (pos, os) in os_indexes.enumerate().rev() {
                table[os as usize] = pos as u32;
            }
            PuIndex::Dense(table)
        } else {
            let mut map = HashMap::with_capacity(n);
            for (pos, os) in os_indexes.enumerate().rev() {
                map.insert(os, pos as u32);
            }
            PuIndex::Sparse(map)
        }
    }

    pub(crate) fn get(&self, os_index: u32) -> Option<usize> {
        let pos = match self {
            PuIndex::Dense(t) => *t.get(os_index as usize)?,
            PuIndex::Sparse(m) => *m.get(&os_index)?,
        };
        (pos != u32::MAX).then_some(pos as usize)
    }
}

/// The lazily built index a [`crate::Machine`] carries: not serialized, and
/// equal to any other (it is derived from the PUs, which are compared).
#[derive(Clone, Debug, Default)]
pub struct PuIndexCell(std::sync::OnceLock<PuIndex>);

impl PartialEq for PuIndexCell {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl PuIndexCell {
    pub(crate) fn get_or_build(&self, pus: &[crate::Pu]) -> &PuIndex {
        self.0
            .get_or_init(|| PuIndex::build(pus.iter().map(|p| p.os_index)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_sparse_find_every_index_and_nothing_else() {
        let dense = PuIndex::build([3u32, 0, 2, 1, 7].into_iter());
        assert!(matches!(dense, PuIndex::Dense(_)));
        let sparse = PuIndex::build([5u32, 1 << 31, u32::MAX - 1].into_iter());
        assert!(matches!(sparse, PuIndex::Sparse(_)));
        for (os, pos) in [(3, 0), (0, 1), (2, 2), (1, 3), (7, 4)] {
            assert_eq!(dense.get(os), Some(pos));
        }
        for os in [4, 5, 6, 8, 1 << 20, u32::MAX] {
            assert_eq!(dense.get(os), None);
        }
        assert_eq!(sparse.get(1 << 31), Some(1));
        assert_eq!(sparse.get(u32::MAX - 1), Some(2));
        assert_eq!(sparse.get(6), None);
        if let PuIndex::Sparse(m) = &sparse {
            assert_eq!(m.len(), 3);
        }
    }
}
