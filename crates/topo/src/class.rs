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

    /// Class and LCA depth of two PUs given by position in `machine.pus`.
    pub fn classify(&self, machine: &Machine, a: usize, b: usize) -> (LocalityClass, u32) {
        let mut lca = self.lca(a, b);
        // Instruction caches say nothing about data movement: look above them
        // (Bulldozer modules share an L1i under the shared L2).
        while machine.objects[lca].is_instruction_cache() {
            match machine.objects[lca].parent {
                Some(p) => lca = p,
                None => break,
            }
        }
        let obj = &machine.objects[lca];
        let same_numa = {
            let (na, nb) = (machine.pus[a].numa_node, machine.pus[b].numa_node);
            na.is_some() && na == nb
        };
        let class = match obj.kind {
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
        };
        (class, obj.depth)
    }
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

/// The class of every pair of PUs, one byte per ordered pair, rows and
/// columns in topology (logical) order. 384 PUs take 144 KiB.
#[derive(Clone, Debug)]
pub struct ClassMatrix {
    n: usize,
    codes: Vec<u8>,
    classes: Vec<ClassSummary>,
    pu_os: Vec<u32>,
}

/// Code of the diagonal (a PU with itself).
const SELF_CODE: u8 = u8::MAX;

impl ClassMatrix {
    pub fn new(machine: &Machine) -> Self {
        let index = ClassIndex::new(machine);
        let n = machine.pus.len();
        let mut codes = vec![SELF_CODE; n * n];
        let mut found: Vec<ClassSummary> = Vec::new();
        for a in 0..n {
            for b in (a + 1)..n {
                let (class, depth) = index.classify(machine, a, b);
                let code = match found.iter().position(|c| c.class == class) {
                    Some(i) => {
                        found[i].pairs += 1;
                        found[i].lca_depth = found[i].lca_depth.max(depth);
                        i
                    }
                    None => {
                        found.push(ClassSummary {
                            class,
                            pairs: 1,
                            representative: (machine.pus[a].os_index, machine.pus[b].os_index),
                            lca_depth: depth,
                        });
                        found.len() - 1
                    }
                };
                assert!(code < SELF_CODE as usize, "more than 254 locality classes");
                codes[a * n + b] = code as u8;
                codes[b * n + a] = code as u8;
            }
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
        for c in codes.iter_mut().filter(|c| **c != SELF_CODE) {
            *c = remap[*c as usize];
        }
        let classes = order.iter().map(|&i| found[i].clone()).collect();
        ClassMatrix {
            n,
            codes,
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
        match self.codes[a * self.n + b] {
            SELF_CODE => LocalityClass::SamePu,
            c => self.classes[c as usize].class.clone(),
        }
    }

    /// Class code (index into [`ClassMatrix::classes`]) of two PUs by position;
    /// `None` on the diagonal.
    pub fn code_at(&self, a: usize, b: usize) -> Option<u8> {
        match self.codes[a * self.n + b] {
            SELF_CODE => None,
            c => Some(c),
        }
    }

    /// OS indexes of the rows, in topology order.
    pub fn pu_os_indexes(&self) -> &[u32] {
        &self.pu_os
    }
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

    #[test]
    fn pair_parsing() {
        assert_eq!(parse_pair("0,4").unwrap(), (0, 4));
        assert!(parse_pair("0").is_err());
        assert!(parse_pair("a,1").is_err());
        assert!(parse_pair("1,-2").is_err());
    }
}
