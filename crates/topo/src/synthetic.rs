//! A native builder for plain hwloc synthetic descriptions
//! (`pack:16 l3:2 core:8 pu:2`), giving the same [`Machine`] as hwloc's own
//! synthetic backend followed by our conversion, in time and memory linear
//! in the number of objects.
//!
//! Why: hwloc gives every object full bitmaps (cpuset, complete cpuset,
//! nodesets), each as wide as the machine, so its synthetic backend is
//! quadratic: 65,536 PUs take about a minute and a gigabyte, a million PUs
//! do not finish. Models of that size are what the mapper and the class
//! index must be checked at (issue 19).
//!
//! Only the plain grammar is built here: levels `TYPE:COUNT` from the root
//! down, TYPE among `pack`/`package`/`socket`, `die`, `l1`..`l5` (optional
//! `u`/`d` suffix), `core`, `pu` (last), and at most one NUMA level
//! (`numa`/`node`/`numanode`), in that order, each type once, no attribute
//! blocks. Anything else (groups, attributes, instruction caches, bare
//! counts) is left to hwloc, which is fast enough at the sizes people write
//! by hand. The test `native_matches_hwloc` compares the two builders on
//! random descriptions of the grammar.
//!
//! hwloc's rules reproduced: os indexes numbered per type in depth-first
//! order (caches and groups have none); default cache sizes 32 KiB for L1
//! and `256 KiB << 2*level` above, 64-byte lines; 1 GiB per NUMA node; a
//! NUMA node is attached to the highest object other than the root and the
//! PUs with its PU set (the root when it is the only one), and when there is
//! none, to a Group object of its own inserted at the NUMA level; no NUMA
//! level means one node, on the root's only child or else on the root.

use crate::model::*;
use crate::puset::PuSet;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Level {
    Package,
    Die,
    Cache(u8, CacheType),
    Numa,
    Core,
    Pu,
}

impl Level {
    fn parse(name: &str) -> Option<Level> {
        Some(match name.to_ascii_lowercase().as_str() {
            "pack" | "package" | "socket" => Level::Package,
            "die" => Level::Die,
            "numa" | "node" | "numanode" => Level::Numa,
            "core" => Level::Core,
            "pu" => Level::Pu,
            l => {
                let rest = l.strip_prefix('l')?;
                let (digit, suffix) = rest.split_at(1.min(rest.len()));
                let level: u8 = digit.parse().ok().filter(|d| (1..=5).contains(d))?;
                let ty = match suffix {
                    "" | "u" => CacheType::Unified,
                    "d" => CacheType::Data,
                    _ => return None,
                };
                Level::Cache(level, ty)
            }
        })
    }

    /// Position in the order levels must come in (NUMA excepted).
    fn rank(self) -> u32 {
        match self {
            Level::Package => 1,
            Level::Die => 2,
            Level::Cache(l, _) => 10 - u32::from(l),
            Level::Numa => 0,
            Level::Core => 20,
            Level::Pu => 21,
        }
    }
}

/// The levels and counts of `desc` when it is in the plain grammar.
fn parse(desc: &str) -> Option<Vec<(Level, u32)>> {
    if desc.contains(['(', ')', '[', ']']) {
        return None;
    }
    let mut levels = Vec::new();
    let mut last_rank = 0;
    let mut numa_seen = false;
    for token in desc.split_whitespace() {
        let (ty, count) = token.split_once(':')?;
        let level = Level::parse(ty)?;
        let count: u32 = count.parse().ok().filter(|&c| c > 0)?;
        if level == Level::Numa {
            if numa_seen {
                return None;
            }
            numa_seen = true;
        } else {
            if level.rank() <= last_rank {
                return None;
            }
            last_rank = level.rank();
        }
        levels.push((level, count));
    }
    (levels.last()?.0 == Level::Pu).then_some(levels)
}

/// A node of the tree while it is built (before groups are resolved).
struct Node {
    level: Option<Level>, // None: the root
    children: Vec<usize>,
    /// First PU and number of PUs below.
    first: u32,
    pus: u32,
}

/// Builds the model of `desc`, or `None` when `desc` is outside the plain
/// grammar (the caller then asks hwloc). `desc` must already have passed
/// the size check (at most 2^20 PUs).
pub(crate) fn build(desc: &str) -> Option<Machine> {
    let levels = parse(desc)?;
    let total: u64 = levels.iter().map(|&(_, c)| u64::from(c)).product();
    if total > PuSet::MAX_LEN as u64 {
        return None;
    }
    // 1. The full tree, depth first, a NUMA level as nodes of its own.
    let mut nodes = vec![Node {
        level: None,
        children: Vec::new(),
        first: 0,
        pus: total as u32,
    }];
    let mut frontier = vec![0usize];
    for &(level, count) in &levels {
        let mut next = Vec::with_capacity(frontier.len() * count as usize);
        for &parent in &frontier {
            let (first, width) = (nodes[parent].first, nodes[parent].pus / count);
            for k in 0..count {
                nodes.push(Node {
                    level: Some(level),
                    children: Vec::new(),
                    first: first + k * width,
                    pus: width,
                });
                let id = nodes.len() - 1;
                nodes[parent].children.push(id);
                next.push(id);
            }
        }
        frontier = next;
    }
    // 2. Where each NUMA node goes: the highest non-PU object with the
    // same PU set (an ancestor when the levels above hold one child each,
    // else the first level below when the NUMA level has one child), else
    // a Group of its own.
    let numa_at = levels.iter().position(|&(l, _)| l == Level::Numa);
    let home = numa_at.map(|i| {
        let (count, below) = (levels[i].1, levels[i + 1]);
        let single_above = levels[..i]
            .iter()
            .rev()
            .take_while(|&&(_, c)| c == 1)
            .count();
        if count == 1 && i > 0 {
            // Levels `i - single_above .. i` (and the root when that is 0)
            // have the NUMA node's set: the highest that is not the root.
            Home::Above(single_above.min(i - 1) + 1)
        } else if below.1 == 1 && below.0 != Level::Pu {
            Home::Below
        } else if count == 1 {
            Home::Above(1) // the root, the only object with the whole set
        } else {
            Home::Group
        }
    });
    // 3. Emit in depth-first order.
    let mut out = Emit {
        numa_home: home,
        ..Emit::default()
    };
    out.visit(&nodes, 0, None, 0, None);
    let Emit {
        objects,
        mut numa,
        pus,
        ..
    } = out;
    numa.sort_by_key(|n| n.logical_index);
    let mut machine = Machine {
        schema: MACHINE_SCHEMA.to_string(),
        origin: Origin::Synthetic {
            description: desc.to_string(),
        },
        fingerprint: String::new(),
        cpu_model: None,
        objects,
        pus,
        numa_nodes: numa,
        distances: Vec::new(),
        devices: Vec::new(),
        pu_index: Default::default(),
    };
    if numa_at.is_none() {
        // hwloc's one node goes to the root's only child when there is one.
        let to = match levels[0] {
            (level, 1) if level != Level::Pu => 1,
            _ => 0,
        };
        attach_numa(&mut machine.objects, &mut machine.numa_nodes, to, 0);
        for p in &mut machine.pus {
            p.numa_node = Some(0);
        }
    }
    machine.fingerprint = crate::fingerprint(&machine);
    Some(machine)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Home {
    /// On the ancestor this many levels above the NUMA level's nodes.
    Above(usize),
    /// On the NUMA level's only child.
    Below,
    /// On a Group made at the NUMA level.
    Group,
}

#[derive(Default)]
struct Emit {
    objects: Vec<Object>,
    numa: Vec<NumaNode>,
    pus: Vec<Pu>,
    numa_home: Option<Home>,
    /// Next logical index per level, next os index per kind.
    logical: Vec<(Option<Level>, u32)>,
    os: [u32; 4],
    group_logical: u32,
}

impl Emit {
    fn next_logical(&mut self, level: Option<Level>) -> u32 {
        match self.logical.iter_mut().find(|(l, _)| *l == level) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                self.logical.push((level, 1));
                0
            }
        }
    }

    fn next_os(&mut self, slot: usize) -> u32 {
        self.os[slot] += 1;
        self.os[slot] - 1
    }

    fn push(&mut self, mut o: Object, parent: Option<usize>) -> usize {
        let idx = self.objects.len();
        o.depth = parent.map_or(0, |p| self.objects[p].depth + 1);
        o.parent = parent;
        if let Some(p) = parent {
            self.objects[p].children.push(idx);
        }
        self.objects.push(o);
        idx
    }

    /// Emits node `n` below object `parent`; `package` and `core` are the
    /// logical indexes of the enclosing ones for the PUs below.
    fn visit(
        &mut self,
        nodes: &[Node],
        n: usize,
        parent: Option<usize>,
        package_core: u64,
        numa_of_pus: Option<u32>,
    ) {
        let node = &nodes[n];
        let cpuset = PuSet::from_range(node.first..node.first + node.pus);
        let blank = |kind, cpuset| Object {
            kind,
            depth: 0,
            logical_index: 0,
            os_index: None,
            subtype: None,
            group_depth: None,
            cache: None,
            parent: None,
            children: Vec::new(),
            cpuset,
            numa_nodes: Vec::new(),
        };
        let (mut package, mut core) = ((package_core >> 32) as u32, package_core as u32);
        let mut numa_below = numa_of_pus;
        let me = match node.level {
            None => {
                let mut o = blank(ObjectKind::Machine, cpuset);
                o.os_index = Some(0);
                self.push(o, None)
            }
            Some(Level::Numa) => {
                let numa_os = self.next_os(3);
                numa_below = Some(numa_os);
                let target = match self.numa_home {
                    Some(Home::Above(k)) => {
                        let mut t = parent.expect("the NUMA level is below the root");
                        for _ in 1..k {
                            t = self.objects[t].parent.unwrap_or(t);
                        }
                        Some(t)
                    }
                    Some(Home::Below) => None,
                    _ => {
                        let mut o = blank(ObjectKind::Group, cpuset.clone());
                        o.logical_index = self.group_logical;
                        o.group_depth = Some(0);
                        self.group_logical += 1;
                        Some(self.push(o, parent))
                    }
                };
                match target {
                    Some(t) => {
                        attach_numa(&mut self.objects, &mut self.numa, t, numa_os);
                        let host = if self.numa_home == Some(Home::Group) {
                            t
                        } else {
                            parent.expect("below the root")
                        };
                        for &c in &node.children {
                            self.visit(nodes, c, Some(host), pack(package, core), numa_below);
                        }
                    }
                    None => {
                        // Attached to the only child, once it exists.
                        let before = self.objects.len();
                        for &c in &node.children {
                            self.visit(nodes, c, parent, pack(package, core), numa_below);
                        }
                        attach_numa(&mut self.objects, &mut self.numa, before, numa_os);
                    }
                }
                return;
            }
            Some(level) => {
                let kind = match level {
                    Level::Package => ObjectKind::Package,
                    Level::Die => ObjectKind::Die,
                    Level::Cache(..) => ObjectKind::Cache,
                    Level::Core => ObjectKind::Core,
                    _ => ObjectKind::Pu,
                };
                let mut o = blank(kind, cpuset);
                o.logical_index = self.next_logical(Some(level));
                o.os_index = match level {
                    Level::Package => Some(self.next_os(0)),
                    Level::Die => Some(self.next_os(1)),
                    Level::Core => Some(self.next_os(2)),
                    Level::Pu => Some(node.first),
                    _ => None,
                };
                if let Level::Cache(l, ty) = level {
                    o.cache = Some(CacheInfo {
                        level: l,
                        cache_type: ty,
                        size: if l == 1 {
                            32 << 10
                        } else {
                            (256 << 10) << (2 * l)
                        },
                        line_size: 64,
                    });
                }
                match level {
                    Level::Package => package = o.logical_index,
                    Level::Core => core = o.logical_index,
                    _ => {}
                }
                let logical = o.logical_index;
                let idx = self.push(o, parent);
                if level == Level::Pu {
                    let has = |l| self.logical.iter().any(|(x, _)| *x == Some(l));
                    self.pus.push(Pu {
                        os_index: node.first,
                        logical_index: logical,
                        object: idx,
                        numa_node: numa_below,
                        package: has(Level::Package).then_some(package),
                        core: has(Level::Core).then_some(core),
                    });
                }
                idx
            }
        };
        for &c in &node.children {
            self.visit(nodes, c, Some(me), pack(package, core), numa_below);
        }
    }
}

fn pack(package: u32, core: u32) -> u64 {
    (u64::from(package) << 32) | u64::from(core)
}

fn attach_numa(objects: &mut [Object], numa: &mut Vec<NumaNode>, to: usize, os: u32) {
    objects[to].numa_nodes.push(os);
    numa.push(NumaNode {
        os_index: os,
        logical_index: os,
        memory: 1 << 30,
        attached_to: to,
        cpuset: objects[to].cpuset.clone(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64, for reproducible random descriptions.
    fn mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn same_as_hwloc(desc: &str) {
        let native = build(desc).unwrap_or_else(|| panic!("'{desc}' is in the plain grammar"));
        let hwloc = crate::load::synthetic_by_hwloc(desc).unwrap();
        for (i, (a, b)) in native.objects.iter().zip(&hwloc.objects).enumerate() {
            assert_eq!(a, b, "'{desc}': objects[{i}] differ");
        }
        assert_eq!(native.objects.len(), hwloc.objects.len(), "'{desc}'");
        assert_eq!(native.numa_nodes, hwloc.numa_nodes, "'{desc}': NUMA nodes");
        assert_eq!(native.pus, hwloc.pus, "'{desc}': PUs");
        assert_eq!(native, hwloc, "'{desc}'");
    }

    #[test]
    fn native_matches_hwloc_on_hand_picked_descriptions() {
        for d in [
            "pu:1",
            "core:2 pu:2",
            "pack:2 numa:2 l3:2 core:4 pu:2",
            "pack:2 numa:2 l3:1 core:2 pu:1",
            "pack:2 numa:1 core:2 pu:1",
            "numa:1 pack:2 pu:1",
            "pack:1 numa:2 pu:1",
            "pack:2 core:1 numa:1 pu:2",
            "numa:2 pu:2",
            "pack:2 numa:2 core:1 pu:1",
            "pack:2 numa:2 l3:1 core:1 pu:1",
            "pack:1 numa:2 l2:1 pu:2",
            "pack:2 die:1 numa:1 core:1 pu:1",
            "socket:2 die:2 l3:2 l2d:2 l1:1 core:1 pu:2",
            "package:1 l5:1 l4:2 l3u:2 core:2 pu:1",
        ] {
            same_as_hwloc(d);
        }
    }

    #[test]
    fn native_matches_hwloc_on_random_descriptions() {
        let pool = ["pack", "die", "l4", "l3", "l2", "l2d", "l1", "l1d", "core"];
        for case in 0..400u64 {
            let mut h = mix(case);
            let mut next = |m: u64| {
                h = mix(h);
                h % m
            };
            let mut levels: Vec<String> = Vec::new();
            let mut total = 1u64;
            let mut last = None;
            for (i, ty) in pool.iter().enumerate() {
                // l2 and l2d (l1 and l1d) are the same level: one of each pair.
                if next(2) == 0 || last == Some(ty.trim_end_matches('d')) {
                    continue;
                }
                last = Some(ty.trim_end_matches('d'));
                let c = 1 + next(3);
                total *= c;
                levels.push(format!("{ty}:{c}"));
                let _ = i;
            }
            let c = 1 + next(3);
            total *= c;
            levels.push(format!("pu:{c}"));
            if next(3) > 0 {
                let at = next(levels.len() as u64) as usize;
                let c = 1 + next(3);
                total *= c;
                levels.insert(at, format!("numa:{c}"));
            }
            assert!(total <= 4096);
            same_as_hwloc(&levels.join(" "));
        }
    }

    #[test]
    fn outside_the_plain_grammar_is_left_to_hwloc() {
        for d in [
            "pack:2 group:2 pu:1",
            "pack:2(memory=1GB) pu:2",
            "l1i:2 pu:1",
            "core:2 pack:2 pu:1",
            "pack:2 core:2",
            "numa:2 numa:2 pu:1",
            "2 2",
            "pack:0 pu:1",
        ] {
            assert!(build(d).is_none(), "'{d}'");
        }
    }

    #[test]
    fn a_million_pus_is_linear() {
        let t = std::time::Instant::now();
        let m = build("pack:16 core:256 pu:256").unwrap();
        assert_eq!(
            (m.pus.len(), m.objects.len()),
            (1 << 20, 1 + 16 + 4096 + (1 << 20))
        );
        assert_eq!(m.pus[70000].core, Some(273));
        assert_eq!(m.pus[70000].package, Some(1));
        // Not a timing claim (scripts/bench-topo-scale.sh measures it); a
        // quadratic builder would take minutes here.
        assert!(t.elapsed().as_secs() < 60);
    }
}
