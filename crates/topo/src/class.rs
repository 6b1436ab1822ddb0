//! Locality classes of PU pairs.
//!
//! The class of two PUs is derived from their lowest common ancestor (LCA) in
//! the hwloc tree, generically, with no vendor tables (docs/concepts/locality-classes.md):
//!
//! | LCA                                   | class                         |
//! |---------------------------------------|-------------------------------|
//! | the PU itself                         | `self`                        |
//! | Core                                  | `smt`                         |
//! | data/unified cache of level N         | `lN` (instruction caches are skipped upwards) |
//! | Group holding the NUMA node of both PUs | `numa`                       |
//! | Group                                 | its subtype lowercased (`cluster`), else `groupN` (hwloc group depth N) |
//! | Die, Package, or the Machine holding at most one package, both PUs in the same NUMA node | `numa` |
//! | Die / Package                         | `die` / `package`             |
//! | Machine                               | `machine`                     |
//! | different nodes of a cluster          | `network`                     |

use crate::model::{Machine, ObjectKind};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Locality class of a pair of PUs; the order of the variants goes from the
/// nearest to the farthest (used only to break ties between classes whose
/// LCAs sit at the same depth).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LocalityClass {
    SamePu,
    Smt,
    Cache(u8),
    Group(String),
    Numa,
    Die,
    Package,
    Machine,
    Network,
}

impl LocalityClass {
    /// The stable name used in every file and on the command line.
    pub fn name(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for LocalityClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocalityClass::SamePu => f.write_str("self"),
            LocalityClass::Smt => f.write_str("smt"),
            LocalityClass::Cache(l) => write!(f, "l{l}"),
            LocalityClass::Group(g) => f.write_str(g),
            LocalityClass::Numa => f.write_str("numa"),
            LocalityClass::Die => f.write_str("die"),
            LocalityClass::Package => f.write_str("package"),
            LocalityClass::Machine => f.write_str("machine"),
            LocalityClass::Network => f.write_str("network"),
        }
    }
}

impl FromStr for LocalityClass {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        Ok(match s {
            "self" => LocalityClass::SamePu,
            "smt" => LocalityClass::Smt,
            "numa" => LocalityClass::Numa,
            "die" => LocalityClass::Die,
            "package" => LocalityClass::Package,
            "machine" => LocalityClass::Machine,
            "network" => LocalityClass::Network,
            _ => {
                if let Some(level) = s.strip_prefix('l').and_then(|l| l.parse::<u8>().ok()) {
                    if (1..=5).contains(&level) {
                        return Ok(LocalityClass::Cache(level));
                    }
                }
                let valid_group = s.starts_with(|c: char| c.is_ascii_lowercase())
                    && s.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
                    })
                    && !s.starts_with('l');
                if valid_group {
                    LocalityClass::Group(s.to_string())
                } else {
                    return Err(format!(
                        "unknown locality class '{s}' (expected self, smt, l1..l5, numa, die, package, machine, network, or a group name such as group0 or cluster)"
                    ));
                }
            }
        })
    }
}

impl Serialize for LocalityClass {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for LocalityClass {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Per-machine tables that make class lookups cheap: the root-to-PU object
/// chain of every PU and the number of packages below every object.
#[derive(Clone, Debug)]
pub struct ClassIndex {
    chains: Vec<Vec<usize>>,
    packages_below: Vec<u32>,
}

impl ClassIndex {
    pub fn new(machine: &Machine) -> Self {
        let chains = machine
            .pus
            .iter()
            .map(|p| machine.ancestry(p.object))
            .collect();
        let mut packages_below = vec![0u32; machine.objects.len()];
        // Objects are stored parents-first, so a reverse sweep sees children first.
        for i in (0..machine.objects.len()).rev() {
            let own = u32::from(machine.objects[i].kind == ObjectKind::Package);
            let kids: u32 = machine.objects[i]
                .children
                .iter()
                .map(|&c| packages_below[c])
                .sum();
            packages_below[i] = own + kids;
        }
        ClassIndex {
            chains,
            packages_below,
        }
    }

    /// Lowest common ancestor of two PUs given by position in `machine.pus`.
    pub fn lca(&self, a: usize, b: usize) -> usize {
        let (ca, cb) = (&self.chains[a], &self.chains[b]);
        let mut lca = ca[0];
        for (x, y) in ca.iter().zip(cb.iter()) {
            if x != y {
                break;
            }
            lca = *x;
        }
        lca
    }

    /// The class of two distinct PUs whose lowest common ancestor is object
    /// `lca`, in the same NUMA node or not: lets a caller tabulate
    /// classes per object (linear) instead of per pair (quadratic).
    pub fn class_at_lca(&self, machine: &Machine, lca: usize, same_numa: bool) -> LocalityClass {
        self.class_of(machine, data_ancestor(machine, lca), same_numa)
    }

    /// Class and LCA depth of two PUs given by position in `machine.pus`.
    pub fn classify(&self, machine: &Machine, a: usize, b: usize) -> (LocalityClass, u32) {
        let lca = data_ancestor(machine, self.lca(a, b));
        let same_numa = {
            let (na, nb) = (machine.pus[a].numa_node, machine.pus[b].numa_node);
            na.is_some() && na == nb
        };
        (
            self.class_of(machine, lca, same_numa),
            machine.objects[lca].depth,
        )
    }

    /// The class of the pairs whose (data) LCA is object `lca`, for PUs in
    /// the same NUMA node or not.
    fn class_of(&self, machine: &Machine, lca: usize, same_numa: bool) -> LocalityClass {
        let obj = &machine.objects[lca];
        match obj.kind {
            ObjectKind::Pu => LocalityClass::SamePu,
            ObjectKind::Core => LocalityClass::Smt,
            ObjectKind::Cache => LocalityClass::Cache(obj.cache.as_ref().map_or(0, |c| c.level)),
            // hwloc inserts Groups just to hold a NUMA node (synthetic `numa:N`
            // below a package, SNC modes): for the PUs of that node it is `numa`.
            ObjectKind::Group if same_numa && !obj.numa_nodes.is_empty() => LocalityClass::Numa,
            ObjectKind::Group => LocalityClass::Group(group_class_name(obj)),
            ObjectKind::Die | ObjectKind::Package if same_numa => LocalityClass::Numa,
            ObjectKind::Machine if same_numa && self.packages_below[lca] <= 1 => {
                LocalityClass::Numa
            }
            ObjectKind::Die => LocalityClass::Die,
            ObjectKind::Package => LocalityClass::Package,
            ObjectKind::Machine => LocalityClass::Machine,
        }
    }
}

/// `object`, or its first ancestor that is not an instruction cache:
/// instruction caches say nothing about data movement (Bulldozer modules
/// share an L1i under the shared L2).
fn data_ancestor(machine: &Machine, mut object: usize) -> usize {
    while machine.objects[object].is_instruction_cache() {
        match machine.objects[object].parent {
            Some(p) => object = p,
            None => break,
        }
    }
    object
}

fn group_class_name(obj: &crate::model::Object) -> String {
    match &obj.subtype {
        Some(sub) => {
            let name: String = sub
                .to_ascii_lowercase()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            // A subtype could collide with a fixed class name ("l3", "numa"):
            // keep the group prefix then.
            match name.parse::<LocalityClass>() {
                Ok(LocalityClass::Group(_)) => name,
                _ => format!("group-{name}"),
            }
        }
        None => format!("group{}", obj.group_depth.unwrap_or(0)),
    }
}

/// Whether `name` is a class a file may name without it being present on
/// the machine at hand: the fixed classes (`self`, `smt`, `l1`..`l5`,
/// `numa`, `die`, `package`, `machine`, `network`), hwloc's numbered groups
/// (`group0`, ...) and the group subtypes hwloc reports on common machines
/// (`cluster`, `module`, `tile`, `compute_unit`). Any other group name must
/// be one of the machine's classes (a misspelling is an error, not a
/// class that never matches).
pub fn is_known_class_name(name: &str) -> bool {
    match name.parse::<LocalityClass>() {
        Ok(LocalityClass::Group(g)) => {
            g.strip_prefix("group")
                .is_some_and(|k| k.parse::<u32>().is_ok())
                || matches!(g.as_str(), "cluster" | "module" | "tile" | "compute_unit")
        }
        Ok(_) => true,
        Err(_) => false,
    }
}

/// Summary of one class present on a machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassSummary {
    pub class: LocalityClass,
    /// Number of unordered pairs of distinct PUs in this class.
    pub pairs: u64,
    /// The first pair in topology order, as OS indexes.
    pub representative: (u32, u32),
    /// Depth of the deepest LCA among its pairs (larger = nearer).
    pub lca_depth: u32,
}

/// The class of every pair of PUs, rows and columns in topology (logical)
/// order. Nothing per pair is stored: a pair's class is looked up from its
/// lowest common ancestor (a walk down two root-to-PU chains) and whether
/// both PUs share a NUMA node, and the per-class pair counts come from
/// per-object sums, so a machine of a million PUs costs memory and time in
/// proportion to its PUs times the tree depth, not to their square.
#[derive(Clone, Debug)]
pub struct ClassMatrix {
    n: usize,
    index: ClassIndex,
    numa: Vec<Option<u32>>,
    /// Per object, the class code of the pairs whose LCA it is, for PUs in
    /// different NUMA nodes (`[0]`) and in the same one (`[1]`); [`NO_CODE`]
    /// where no such pair exists.
    object_codes: Vec<[u8; 2]>,
    classes: Vec<ClassSummary>,
    pu_os: Vec<u32>,
}

/// Code of a (object, NUMA sharing) that is the LCA of no pair.
const NO_CODE: u8 = u8::MAX;

/// Pairs whose LCA is one object, of one NUMA sharing: how many and the
/// first in topology order (positions in `machine.pus`).
#[derive(Clone, Copy, Debug)]
struct LcaPairs {
    count: u64,
    first: (usize, usize),
}

impl ClassMatrix {
    pub fn new(machine: &Machine) -> Self {
        let index = ClassIndex::new(machine);
        let n = machine.pus.len();
        let numa: Vec<Option<u32>> = machine.pus.iter().map(|p| p.numa_node).collect();
        let per_object = lca_pairs(machine, &index, &numa);
        let mut found: Vec<ClassSummary> = Vec::new();
        let mut first: Vec<(usize, usize)> = Vec::new();
        let mut raw_codes = vec![[NO_CODE; 2]; machine.objects.len()];
        for (x, sides) in per_object.iter().enumerate() {
            for (same, p) in sides.iter().enumerate() {
                let Some(p) = p else { continue };
                let lca = data_ancestor(machine, x);
                let class = index.class_of(machine, lca, same == 1);
                let depth = machine.objects[lca].depth;
                let code = match found.iter().position(|c| c.class == class) {
                    Some(i) => {
                        found[i].pairs += p.count;
                        found[i].lca_depth = found[i].lca_depth.max(depth);
                        first[i] = first[i].min(p.first);
                        i
                    }
                    None => {
                        found.push(ClassSummary {
                            class,
                            pairs: p.count,
                            representative: (0, 0),
                            lca_depth: depth,
                        });
                        first.push(p.first);
                        found.len() - 1
                    }
                };
                assert!(code < NO_CODE as usize, "more than 254 locality classes");
                raw_codes[x][same] = code as u8;
            }
        }
        for (c, &(a, b)) in found.iter_mut().zip(&first) {
            c.representative = (machine.pus[a].os_index, machine.pus[b].os_index);
        }
        // Nearest first: deeper LCA first, ties broken by the class order.
        let mut order: Vec<usize> = (0..found.len()).collect();
        order.sort_by(|&x, &y| {
            found[y]
                .lca_depth
                .cmp(&found[x].lca_depth)
                .then_with(|| found[x].class.cmp(&found[y].class))
        });
        let mut remap = vec![0u8; found.len()];
        for (new, &old) in order.iter().enumerate() {
            remap[old] = new as u8;
        }
        let object_codes = raw_codes
            .into_iter()
            .map(|sides| sides.map(|c| if c == NO_CODE { c } else { remap[c as usize] }))
            .collect();
        let classes = order.iter().map(|&i| found[i].clone()).collect();
        ClassMatrix {
            n,
            index,
            numa,
            object_codes,
            classes,
            pu_os: machine.pus.iter().map(|p| p.os_index).collect(),
        }
    }

    /// Number of PUs (rows).
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Classes present, nearest first, with pair counts and a representative pair.
    pub fn classes(&self) -> &[ClassSummary] {
        &self.classes
    }

    /// Class of two PUs given by position in topology order.
    pub fn class_at(&self, a: usize, b: usize) -> LocalityClass {
        match self.code_at(a, b) {
            None => LocalityClass::SamePu,
            Some(c) => self.classes[c as usize].class.clone(),
        }
    }

    /// Class code (index into [`ClassMatrix::classes`]) of two PUs by position;
    /// `None` on the diagonal.
    pub fn code_at(&self, a: usize, b: usize) -> Option<u8> {
        assert!(a < self.n && b < self.n, "PU position out of range");
        if a == b {
            return None;
        }
        let same = self.numa[a].is_some() && self.numa[a] == self.numa[b];
        let code = self.object_codes[self.index.lca(a, b)][usize::from(same)];
        debug_assert_ne!(code, NO_CODE, "every pair has a class");
        Some(code)
    }

    /// OS indexes of the rows, in topology order.
    pub fn pu_os_indexes(&self) -> &[u32] {
        &self.pu_os
    }
}

/// For every object, the pairs of distinct PUs whose LCA it is, split by
/// NUMA sharing (`[different, same]`), or `None` where there are none.
///
/// A pair's LCA is `x` when its PUs lie below two different children of
/// `x`; with `l_i` PUs below child `i`, `x` holds `((Σ l_i)² - Σ l_i²) / 2`
/// pairs, and the same sum over the PUs of one NUMA node gives those that
/// share it. The first pair in topology order is the first PU `a` (in
/// order) with a partner in a later child, and its first such partner; PUs
/// below one child are consecutive in topology order (hwloc's logical
/// order is depth-first), which the scan checks: a tree where they are not
/// is counted pair by pair instead.
fn lca_pairs(
    machine: &Machine,
    index: &ClassIndex,
    numa: &[Option<u32>],
) -> Vec<[Option<LcaPairs>; 2]> {
    let mut out = vec![[None; 2]; machine.objects.len()];
    // Below each object: (child, PU position) in topology order.
    let mut below: Vec<Vec<(usize, usize)>> = vec![Vec::new(); machine.objects.len()];
    for (p, chain) in index.chains.iter().enumerate() {
        for w in chain.windows(2) {
            below[w[0]].push((w[1], p));
        }
    }
    for (x, pus) in below.iter().enumerate() {
        match blocks(pus) {
            Some(blocks) if blocks.len() >= 2 => out[x] = sums(&blocks, pus, numa),
            Some(_) => {}
            None => out[x] = pair_by_pair(pus, numa),
        }
    }
    out
}

/// The runs of one child in `pus`: (start, end) into `pus`; `None` when a
/// child's PUs are not consecutive.
fn blocks(pus: &[(usize, usize)]) -> Option<Vec<(usize, usize)>> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, &(child, _)) in pus.iter().enumerate() {
        if i > 0 && pus[i - 1].0 == child {
            continue;
        }
        if !seen.insert(child) {
            return None;
        }
        if let Some(last) = out.last_mut() {
            last.1 = i;
        }
        out.push((i, pus.len()));
    }
    Some(out)
}

fn sums(
    blocks: &[(usize, usize)],
    pus: &[(usize, usize)],
    numa: &[Option<u32>],
) -> [Option<LcaPairs>; 2] {
    use std::collections::BTreeMap;
    let pairs = |counts: &mut dyn Iterator<Item = u64>| {
        let (sum, squares) = counts.fold((0u64, 0u64), |(s, q), l| (s + l, q + l * l));
        (sum * sum - squares) / 2
    };
    let total = pairs(&mut blocks.iter().map(|&(s, e)| (e - s) as u64));
    // Per NUMA node, the PUs below each child.
    let mut per_node: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (bi, &(s, e)) in blocks.iter().enumerate() {
        for &(_, p) in &pus[s..e] {
            if let Some(u) = numa[p] {
                let v = per_node.entry(u).or_insert_with(|| vec![0; blocks.len()]);
                v[bi] += 1;
            }
        }
    }
    let same: u64 = per_node
        .values()
        .map(|v| pairs(&mut v.iter().copied()))
        .sum();
    // After child i: the first PU of each NUMA node (None: no node) below
    // the later children.
    let mut after: Vec<BTreeMap<Option<u32>, usize>> = vec![BTreeMap::new(); blocks.len()];
    for i in (0..blocks.len().saturating_sub(1)).rev() {
        let mut m = after[i + 1].clone();
        let (s, e) = blocks[i + 1];
        for &(_, p) in pus[s..e].iter().rev() {
            m.insert(numa[p], p);
        }
        after[i] = m;
    }
    let first = |want_same: bool| -> Option<(usize, usize)> {
        for (bi, &(s, e)) in blocks.iter().enumerate() {
            for &(_, a) in &pus[s..e] {
                let shares = |k: &Option<u32>| k.is_some() && *k == numa[a];
                let b = after[bi]
                    .iter()
                    .filter(|(k, _)| shares(k) == want_same)
                    .map(|(_, &b)| b)
                    .min();
                if let Some(b) = b {
                    return Some((a, b));
                }
            }
        }
        None
    };
    let side = |count: u64, want_same: bool| {
        (count > 0).then(|| LcaPairs {
            count,
            first: first(want_same).expect("a counted pair exists"),
        })
    };
    [side(total - same, false), side(same, true)]
}

/// The fallback of [`lca_pairs`] for one object whose children's PUs are
/// not consecutive: every pair of PUs below different children.
fn pair_by_pair(pus: &[(usize, usize)], numa: &[Option<u32>]) -> [Option<LcaPairs>; 2] {
    let mut out: [Option<LcaPairs>; 2] = [None; 2];
    let mut sorted = pus.to_vec();
    sorted.sort_by_key(|&(_, p)| p);
    for (i, &(ca, a)) in sorted.iter().enumerate() {
        for &(cb, b) in &sorted[i + 1..] {
            if ca == cb {
                continue;
            }
            let same = numa[a].is_some() && numa[a] == numa[b];
            let e = out[usize::from(same)].get_or_insert(LcaPairs {
                count: 0,
                first: (a, b),
            });
            e.count += 1;
        }
    }
    out
}

/// Class of the pair of PUs with these OS indexes.
pub fn pair_class(machine: &Machine, p: u32, q: u32) -> Result<LocalityClass, crate::TopoError> {
    let a = machine.require_pu(p)?;
    let b = machine.require_pu(q)?;
    Ok(ClassIndex::new(machine).classify(machine, a, b).0)
}

/// Parses `P,Q` (two PU OS indexes).
pub fn parse_pair(text: &str) -> Result<(u32, u32), crate::TopoError> {
    let bad = |reason: &str| crate::TopoError::BadPair {
        text: text.to_string(),
        reason: reason.to_string(),
    };
    let (a, b) = text
        .split_once(',')
        .ok_or_else(|| bad("expected two PU OS indexes as P,Q (e.g. 0,4)"))?;
    let a = a
        .trim()
        .parse()
        .map_err(|_| bad("first PU is not a non-negative integer"))?;
    let b = b
        .trim()
        .parse()
        .map_err(|_| bad("second PU is not a non-negative integer"))?;
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in [
            "self", "smt", "l1", "l2", "l3", "numa", "die", "package", "machine", "network",
            "group0", "cluster",
        ] {
            assert_eq!(n.parse::<LocalityClass>().unwrap().to_string(), n);
        }
        assert!("l9".parse::<LocalityClass>().is_err());
        assert!("L2".parse::<LocalityClass>().is_err());
        assert!("".parse::<LocalityClass>().is_err());
    }

    /// The sums and the pair-by-pair fallback agree on random children
    /// (consecutive runs) and NUMA nodes, counts and first pairs.
    #[test]
    fn sums_agree_with_pair_by_pair() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..300 {
            let children = 2 + next(5) as usize;
            let mut pus = Vec::new();
            let mut numa = Vec::new();
            for c in 0..children {
                for _ in 0..1 + next(4) {
                    pus.push((100 + c, numa.len()));
                    numa.push(match next(4) {
                        0 => None,
                        k => Some(k as u32),
                    });
                }
            }
            let blocks = blocks(&pus).unwrap();
            let fast = sums(&blocks, &pus, &numa);
            let slow = pair_by_pair(&pus, &numa);
            for side in 0..2 {
                let f = fast[side].map(|p| (p.count, p.first));
                let s = slow[side].map(|p| (p.count, p.first));
                assert_eq!(f, s, "{pus:?} {numa:?} side {side}");
            }
        }
        // A child whose PUs are not consecutive is left to the fallback.
        assert!(blocks(&[(1, 0), (2, 1), (1, 2)]).is_none());
    }

    #[test]
    fn pair_parsing() {
        assert_eq!(parse_pair("0,4").unwrap(), (0, 4));
        assert!(parse_pair("0").is_err());
        assert!(parse_pair("a,1").is_err());
        assert!(parse_pair("1,-2").is_err());
    }
}
