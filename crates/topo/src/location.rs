//! hwloc's location syntax (`core:3`, `pu:0-3`, `numa:1.core:2`,
//! `package:0`, `0x3`), parsed without a machine and resolved against a
//! [`Machine`] to PU OS indexes, with hwloc-calc's semantics: indexes are
//! logical (topology order) unless written `P#N`, and an index in a chained
//! tuple is relative to its parent. Bare numbers and ranges (`3`, `0-3`) keep
//! meaning PU OS indexes, as every option taking PUs did before.
//! docs/concepts/locations.md is the user's page.

use crate::model::{CacheType, Machine, ObjectKind};
use crate::puset::PuSet;
use crate::TopoError;

/// Type of object a tuple names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Machine,
    Package,
    Die,
    Numa,
    Group,
    /// Cache level; `true` for instruction caches.
    Cache(u8, bool),
    Core,
    Pu,
}

impl Kind {
    fn parse(word: &str) -> Option<Kind> {
        let w = word.to_ascii_lowercase();
        Some(match w.as_str() {
            "machine" => Kind::Machine,
            "package" | "pack" | "socket" => Kind::Package,
            "die" => Kind::Die,
            "numa" | "numanode" | "node" => Kind::Numa,
            "group" => Kind::Group,
            "core" => Kind::Core,
            "pu" | "thread" => Kind::Pu,
            _ => {
                let rest = w.strip_prefix('l')?;
                let level = rest.chars().next()?.to_digit(10)?;
                if !(1..=5).contains(&level) {
                    return None;
                }
                match &rest[1..] {
                    "" | "cache" | "d" | "dcache" | "u" | "ucache" => {
                        Kind::Cache(level as u8, false)
                    }
                    "i" | "icache" if level <= 3 => Kind::Cache(level as u8, true),
                    _ => return None,
                }
            }
        })
    }

    /// Name as written in locations (`core`, `l3`, `numa`).
    fn name(self) -> String {
        match self {
            Kind::Machine => "machine".into(),
            Kind::Package => "package".into(),
            Kind::Die => "die".into(),
            Kind::Numa => "numa".into(),
            Kind::Group => "group".into(),
            Kind::Cache(l, false) => format!("l{l}"),
            Kind::Cache(l, true) => format!("l{l}i"),
            Kind::Core => "core".into(),
            Kind::Pu => "pu".into(),
        }
    }

    /// Plural as in messages (`cores`, `NUMA nodes`, `L3 caches`).
    fn plural(self) -> String {
        match self {
            Kind::Numa => "NUMA nodes".into(),
            Kind::Cache(l, false) => format!("L{l} caches"),
            Kind::Cache(l, true) => format!("L{l}i caches"),
            Kind::Pu => "PUs".into(),
            k => format!("{}s", k.name()),
        }
    }
}

/// Which objects of a scope a tuple takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Index {
    /// `N`, `N-M` or `N-` (open end): logical indexes.
    Range(u32, Option<u32>, bool),
    /// `N:K`: K objects from N, wrapping around the end.
    Count(u32, u32),
    All,
    Even,
    Odd,
    /// `P#N`, `P#N-M`, `P#N-`: OS (physical) indexes.
    Os(u32, Option<u32>, bool),
}

/// One tuple `type:index` of a chain.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Tuple {
    kind: Kind,
    index: Index,
    /// As written, for messages.
    raw: String,
}

/// One location (an item of a comma-separated list).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    /// A bare number or range: PU OS indexes, in the order written.
    OsPus(Vec<u32>),
    /// `0x...`: a CPU mask (bit N = PU OS index N).
    Mask(PuSet),
    /// `all`, `root`.
    Root,
    /// `type:index[.type:index...]`.
    Chain(Vec<Tuple>),
}

/// A parsed comma-separated list of locations; [`Locations::parse`] needs no
/// machine, [`Locations::resolve`] checks it against one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locations {
    text: String,
    items: Vec<(String, Item)>,
}

/// The PUs (OS indexes, logical order) of every object one location names.
pub type Objects = Vec<Vec<u32>>;

fn syntax(location: &str, problem: impl Into<String>) -> TopoError {
    let location = location.trim();
    TopoError::Location {
        location: if location.is_empty() {
            "''".into()
        } else {
            location.to_string()
        },
        problem: problem.into(),
    }
}

fn number(location: &str, s: &str) -> Result<u32, TopoError> {
    s.parse().map_err(|_| {
        syntax(
            location,
            format!("is not a location: '{s}' is not an index (expected N, N-M, N-, N:K, all, even, odd or P#N)"),
        )
    })
}

fn parse_index(location: &str, s: &str) -> Result<Index, TopoError> {
    let range = |s: &str| -> Result<(u32, Option<u32>, bool), TopoError> {
        match s.split_once('-') {
            None => Ok((number(location, s)?, None, false)),
            Some((a, "")) => Ok((number(location, a)?, None, true)),
            Some((a, b)) => {
                let (a, b) = (number(location, a)?, number(location, b)?);
                if b < a {
                    return Err(syntax(
                        location,
                        format!("is not a location: range {a}-{b} goes backwards"),
                    ));
                }
                Ok((a, Some(b), false))
            }
        }
    };
    Ok(match s.to_ascii_lowercase().as_str() {
        "all" => Index::All,
        "even" => Index::Even,
        "odd" => Index::Odd,
        _ => {
            if let Some(os) = s.strip_prefix("P#").or_else(|| s.strip_prefix("p#")) {
                let (a, b, open) = range(os)?;
                Index::Os(a, b, open)
            } else if let Some((a, k)) = s.split_once(':') {
                let (a, k) = (number(location, a)?, number(location, k)?);
                if k == 0 {
                    return Err(syntax(location, "is not a location: N:K needs K >= 1"));
                }
                Index::Count(a, k)
            } else {
                let (a, b, open) = range(s)?;
                Index::Range(a, b, open)
            }
        }
    })
}

fn parse_mask(location: &str, hex: &str) -> Result<PuSet, TopoError> {
    if hex.is_empty() || hex.len() > PuSet::MAX_LEN / 4 {
        return Err(syntax(
            location,
            "is not a location: expected hex digits after 0x",
        ));
    }
    let mut pus = Vec::new();
    for (pos, c) in hex.chars().rev().enumerate() {
        let d = c.to_digit(16).ok_or_else(|| {
            syntax(location, format!("is not a location: '{c}' is not a hex digit (a mask is one 0x word here: commas separate locations)"))
        })?;
        pus.extend(
            (0..4)
                .filter(|b| d & (1 << b) != 0)
                .map(|b| pos as u32 * 4 + b),
        );
    }
    Ok(PuSet::from_indexes(pus))
}

fn parse_item(location: &str) -> Result<Item, TopoError> {
    let t = location.trim();
    if t.is_empty() {
        return Err(syntax(location, "is not a location: it is empty"));
    }
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return Ok(Item::Mask(parse_mask(location, hex)?));
    }
    if t.starts_with(|c: char| c.is_ascii_digit()) {
        let set = PuSet::parse_list(t)
            .map_err(|e| syntax(location, format!("is not a location: {e}")))?;
        // Keep the written order (a range is increasing).
        return Ok(Item::OsPus(set.indexes().to_vec()));
    }
    if t.eq_ignore_ascii_case("all") || t.eq_ignore_ascii_case("root") {
        return Ok(Item::Root);
    }
    let mut chain: Vec<Tuple> = Vec::new();
    for part in t.split('.') {
        let (ty, idx) = part.split_once(':').ok_or_else(|| {
            syntax(location, format!("is not a location: '{part}' is not type:index (e.g. core:0, pu:0-3, numa:1.core:2, 0x3, or a PU OS index)"))
        })?;
        let kind = Kind::parse(ty.trim()).ok_or_else(|| {
            syntax(location, format!("is not a location: unknown type '{ty}' (expected machine, package, die, numa, group, l1..l5, l1i..l3i, core or pu)"))
        })?;
        if let Some(prev) = chain.last() {
            if depth_rank(prev.kind) >= depth_rank(kind)
                && !(prev.kind == Kind::Group && kind == Kind::Group)
            {
                return Err(syntax(location, format!("is not a location: {} cannot be inside {} (each tuple must be deeper than the one before)", kind.name(), prev.kind.name())));
            }
        }
        chain.push(Tuple {
            kind,
            index: parse_index(location, idx.trim())?,
            raw: part.trim().to_string(),
        });
    }
    Ok(Item::Chain(chain))
}

/// Rough top-down order of types, to refuse chains like `core:0.package:0`.
fn depth_rank(k: Kind) -> u32 {
    match k {
        Kind::Machine => 0,
        Kind::Package => 1,
        Kind::Die => 2,
        Kind::Numa | Kind::Group => 3,
        Kind::Cache(l, _) => 10 - u32::from(l.min(5)),
        Kind::Core => 20,
        Kind::Pu => 21,
    }
}

/// An object as the resolver sees it.
struct Obj<'a> {
    logical: u32,
    os: Option<u32>,
    cpuset: &'a PuSet,
}

fn objects_of(m: &Machine, kind: Kind) -> Vec<Obj<'_>> {
    let mut v: Vec<Obj> = if kind == Kind::Numa {
        m.numa_nodes
            .iter()
            .map(|n| Obj {
                logical: n.logical_index,
                os: Some(n.os_index),
                cpuset: &n.cpuset,
            })
            .collect()
    } else {
        m.objects
            .iter()
            .filter(|o| match (kind, o.kind) {
                (Kind::Machine, ObjectKind::Machine)
                | (Kind::Package, ObjectKind::Package)
                | (Kind::Die, ObjectKind::Die)
                | (Kind::Group, ObjectKind::Group)
                | (Kind::Core, ObjectKind::Core)
                | (Kind::Pu, ObjectKind::Pu) => true,
                (Kind::Cache(l, instr), ObjectKind::Cache) => o.cache.as_ref().is_some_and(|c| {
                    c.level == l && (c.cache_type == CacheType::Instruction) == instr
                }),
                _ => false,
            })
            .map(|o| Obj {
                logical: o.logical_index,
                os: o.os_index,
                cpuset: &o.cpuset,
            })
            .collect()
    };
    v.sort_by_key(|o| o.logical);
    v
}

/// `0-3` or `0,2,5` for messages.
fn list(v: impl IntoIterator<Item = u32>) -> String {
    PuSet::from_indexes(v).to_string()
}

impl Locations {
    /// Parses a comma-separated list of locations (syntax only).
    pub fn parse(text: &str) -> Result<Locations, TopoError> {
        let items = text
            .split(',')
            .map(|s| parse_item(s).map(|i| (s.trim().to_string(), i)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Locations {
            text: text.to_string(),
            items,
        })
    }

    /// The text it was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How many comma-separated locations it holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Never true for a parsed list (an empty location is an error).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Resolves every location: for each, the objects it names in order,
    /// each as its PUs (OS indexes) in logical order.
    pub fn resolve(&self, m: &Machine) -> Result<Vec<Objects>, TopoError> {
        self.items
            .iter()
            .map(|(s, i)| resolve_item(m, s, i))
            .collect()
    }

    /// Every PU named, as a set.
    pub fn pu_set(&self, m: &Machine) -> Result<PuSet, TopoError> {
        Ok(PuSet::from_indexes(
            self.resolve(m)?.into_iter().flatten().flatten(),
        ))
    }

    /// One PU per rank for a binding: each location gives the first PU of
    /// each object it names; a single location naming a single object gives
    /// all of that object's PUs (logical order) so that ranks spread over it.
    pub fn per_rank(&self, m: &Machine) -> Result<Vec<u32>, TopoError> {
        let all = self.resolve(m)?;
        if let [one] = all.as_slice() {
            if let [obj] = one.as_slice() {
                return Ok(obj.clone());
            }
        }
        Ok(all
            .iter()
            .flatten()
            .filter_map(|o| o.first().copied())
            .collect())
    }
}

fn resolve_item(m: &Machine, text: &str, item: &Item) -> Result<Objects, TopoError> {
    let logical: Vec<u32> = m.pus.iter().map(|p| p.os_index).collect();
    let ordered = |set: &PuSet| -> Vec<u32> {
        let mut v = set.indexes().to_vec();
        v.sort_by_key(|&p| m.pu_position(p).unwrap_or(usize::MAX));
        v
    };
    let exists = PuSet::from_indexes(logical.iter().copied());
    match item {
        Item::OsPus(v) => {
            for &p in v {
                m.require_pu(p)?;
            }
            Ok(v.iter().map(|&p| vec![p]).collect())
        }
        Item::Mask(set) => {
            if let Some(p) = set.indexes().iter().find(|p| !exists.contains(**p)) {
                return Err(syntax(
                    text,
                    format!("names PU P#{p}, which does not exist here (PUs: {exists})"),
                ));
            }
            if set.is_empty() {
                return Err(syntax(text, "names no PU"));
            }
            Ok(ordered(set).into_iter().map(|p| vec![p]).collect())
        }
        Item::Root => Ok(vec![logical.clone()]),
        Item::Chain(chain) => {
            // The first tuple looks at the whole machine (no inclusion test).
            let mut scopes: Vec<(String, Option<PuSet>)> = vec![("this machine".into(), None)];
            for (n, t) in chain.iter().enumerate() {
                let cands = objects_of(m, t.kind);
                let mut next = Vec::new();
                for (scope_name, scope) in &scopes {
                    let inside: Vec<&Obj> = cands
                        .iter()
                        .filter(|o| {
                            !o.cpuset.is_empty()
                                && scope.as_ref().is_none_or(|s| {
                                    o.cpuset.indexes().iter().all(|p| s.contains(*p))
                                })
                        })
                        .collect();
                    let picked = select(&inside, t.index).map_err(|why| {
                        let have = match why {
                            Missing::Logical if inside.is_empty() => {
                                format!("{scope_name} has no {}", t.kind.plural())
                            }
                            Missing::Logical => format!(
                                "{scope_name} has {} {}",
                                t.kind.plural(),
                                list(0..inside.len() as u32)
                            ),
                            Missing::Os => format!(
                                "the {} of {scope_name} have OS indexes {}",
                                t.kind.plural(),
                                list(inside.iter().filter_map(|o| o.os))
                            ),
                        };
                        let prefix = if n == 0 { "here" } else { "there" };
                        let which = if chain.len() > 1 {
                            format!(" (no {})", t.raw)
                        } else {
                            String::new()
                        };
                        syntax(text, format!("does not exist {prefix}: {have}{which}"))
                    })?;
                    for (rel, o) in picked {
                        let name = if n == 0 {
                            format!("{}:{rel}", t.kind.name())
                        } else {
                            format!("{scope_name}.{}:{rel}", t.kind.name())
                        };
                        next.push((name, Some(o.cpuset.clone())));
                    }
                }
                scopes = next;
            }
            Ok(scopes
                .iter()
                .filter_map(|(_, s)| s.as_ref())
                .map(ordered)
                .collect())
        }
    }
}

enum Missing {
    Logical,
    Os,
}

/// The objects (with their index relative to the scope) an index takes.
fn select<'a, 'b>(
    inside: &'b [&'a Obj<'a>],
    index: Index,
) -> Result<Vec<(usize, &'b Obj<'a>)>, Missing> {
    let n = inside.len();
    let pick = |ix: Vec<usize>| ix.into_iter().map(|i| (i, inside[i])).collect::<Vec<_>>();
    let out = match index {
        Index::Range(a, b, open) => {
            let a = a as usize;
            let b = if open {
                n.saturating_sub(1)
            } else {
                b.map_or(a, |b| b as usize)
            };
            if a >= n || b >= n {
                return Err(Missing::Logical);
            }
            pick((a..=b).collect())
        }
        Index::Count(a, k) => {
            if a as usize >= n {
                return Err(Missing::Logical);
            }
            pick(
                (0..(k as usize).min(n))
                    .map(|i| (a as usize + i) % n)
                    .collect(),
            )
        }
        Index::All => pick((0..n).collect()),
        Index::Even => pick((0..n).step_by(2).collect()),
        Index::Odd => pick((1..n).step_by(2).collect()),
        Index::Os(a, b, open) => {
            let hit = |os: u32| os >= a && (open || os <= b.unwrap_or(a));
            let v: Vec<usize> = (0..n).filter(|&i| inside[i].os.is_some_and(hit)).collect();
            // One object per OS index, the first in topology order, as hwloc.
            let mut seen = Vec::new();
            let v: Vec<usize> = v
                .into_iter()
                .filter(|&i| {
                    let os = inside[i].os;
                    if seen.contains(&os) {
                        false
                    } else {
                        seen.push(os);
                        true
                    }
                })
                .collect();
            let want = if open {
                None
            } else {
                Some(u64::from(b.unwrap_or(a)) - u64::from(a) + 1)
            };
            if v.is_empty() || want.is_some_and(|w| (v.len() as u64) < w) {
                return Err(Missing::Os);
            }
            pick(v)
        }
    };
    if out.is_empty() {
        return Err(Missing::Logical);
    }
    Ok(out)
}

/// One PU: the first PU (logical order) of the first object `text` names,
/// like `hwloc-bind --single`.
pub fn resolve_pu(m: &Machine, text: &str) -> Result<u32, TopoError> {
    let l = Locations::parse(text)?;
    if l.len() != 1 {
        return Err(syntax(
            text,
            "is not one location (a comma separates locations)",
        ));
    }
    first_of(&l.resolve(m)?[0])
}

fn first_of(objs: &Objects) -> Result<u32, TopoError> {
    Ok(objs[0][0])
}

/// A pair `A,B` of locations, each side its first PU (see [`resolve_pu`]).
pub fn resolve_pair(m: &Machine, text: &str) -> Result<(u32, u32), TopoError> {
    if text.split(',').count() != 2 {
        return Err(TopoError::BadPair {
            text: text.to_string(),
            reason: "expected two locations as A,B (e.g. 0,4 for PU OS indexes, or core:0,core:1)"
                .into(),
        });
    }
    let r = Locations::parse(text)?.resolve(m)?;
    Ok((first_of(&r[0])?, first_of(&r[1])?))
}

/// The set of PUs a comma-separated list of locations names.
pub fn resolve_set(m: &Machine, text: &str) -> Result<PuSet, TopoError> {
    Locations::parse(text)?.pu_set(m)
}
