//! The mapping target: a set of slots (a node index and a PU OS index each;
//! several slots may share a PU when oversubscribed) arranged as one tree:
//! cluster root, optional network switch levels, nodes, then each node's
//! hwloc tree pruned to the PUs that hold slots, with single-child chains
//! (`L2 - L1d - Core` above one PU) collapsed. Leaves are numbered in
//! depth-first order, so every subtree covers a contiguous range of leaves.

use crate::error::MapError;
use std::collections::HashMap;
use topocomm_topo::{ClassIndex, Machine, ObjectKind, Origin, PuSet};

/// One node of a cluster.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    /// Host name used in rankfiles/hostfiles.
    pub host: String,
    /// Index into [`Cluster::topologies`].
    pub topo: usize,
    /// PUs (OS indexes) that may hold ranks; `None` = all.
    pub usable: Option<PuSet>,
}

/// Nodes and their topologies, plus the network above them.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub topologies: Vec<Machine>,
    pub nodes: Vec<NodeSpec>,
    /// Arities of the network tree from the bottom (nodes per leaf switch,
    /// leaf switches per next level, ...); empty = one flat network level.
    pub network_levels: Vec<usize>,
}

/// A place for one rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    pub node: u32,
    /// OS index of the PU.
    pub pu: u32,
}

/// Host name of a one-node target: the node's own name when its topology
/// was discovered live (Open MPI matches rankfile hosts against its node
/// names, which are host names), else `localhost` (a description of some
/// machine, to be run on whichever machine reads the file).
pub fn single_host(machine: &Machine) -> String {
    match &machine.origin {
        Origin::Live { hostname } if !hostname.is_empty() => hostname.clone(),
        _ => "localhost".into(),
    }
}

impl Cluster {
    /// `nodes` copies of one machine, named `node0`, `node1`, ...; a single
    /// node is named by [`single_host`], so that launcher files for the
    /// machine topocomm runs on name a host the launcher knows as local.
    pub fn uniform(machine: Machine, nodes: usize) -> Self {
        let single = single_host(&machine);
        let nodes = (0..nodes.max(1))
            .map(|i| NodeSpec {
                host: if nodes <= 1 {
                    single.clone()
                } else {
                    format!("node{i}")
                },
                topo: 0,
                usable: None,
            })
            .collect();
        Cluster {
            topologies: vec![machine],
            nodes,
            network_levels: Vec::new(),
        }
    }

    /// Reads a hostfile (docs/commands/map.md): one node per line,
    /// `HOST [slots=LIST] [topology=SPEC]` where SPEC (live, synthetic:DESC,
    /// an XML or JSON path) runs to the end of the line; nodes without
    /// `topology=` use `default`.
    pub fn from_hostfile(
        path: &str,
        text: &str,
        default: &dyn Fn() -> Result<Machine, MapError>,
    ) -> Result<Self, MapError> {
        let mut topologies: Vec<Machine> = Vec::new();
        let mut specs: HashMap<String, usize> = HashMap::new();
        let mut nodes = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let (head, topo_spec) = match content.find("topology=") {
                Some(p) => (&content[..p], Some(content[p + 9..].trim())),
                None => (content, None),
            };
            let mut words = head.split_whitespace();
            let host = words.next().unwrap_or("").to_string();
            if host.contains('=') || host.is_empty() {
                return Err(MapError::syntax(
                    path,
                    line,
                    1,
                    "expected a host name first: HOST [slots=LIST] [topology=SPEC]",
                ));
            }
            let mut usable = None;
            for w in words {
                let col = raw.find(w).map_or(1, |p| p + 1);
                match w.strip_prefix("slots=") {
                    Some(list) => {
                        usable = Some(
                            PuSet::parse_list(list)
                                .map_err(|e| MapError::syntax(path, line, col, e))?,
                        )
                    }
                    None => {
                        return Err(MapError::syntax(
                            path,
                            line,
                            col,
                            format!("unknown field '{w}' (expected slots=LIST or topology=SPEC)"),
                        ))
                    }
                }
            }
            let topo = match topo_spec {
                Some(spec) => match specs.get(spec) {
                    Some(&t) => t,
                    None => {
                        let col = raw.find("topology=").map_or(1, |p| p + 10);
                        let m = topocomm_topo::load(&spec.parse()?)
                            .map_err(|e| MapError::syntax(path, line, col, e.to_string()))?;
                        topologies.push(m);
                        specs.insert(spec.to_string(), topologies.len() - 1);
                        topologies.len() - 1
                    }
                },
                None => match specs.get("") {
                    Some(&t) => t,
                    None => {
                        topologies.push(default()?);
                        specs.insert(String::new(), topologies.len() - 1);
                        topologies.len() - 1
                    }
                },
            };
            nodes.push(NodeSpec { host, topo, usable });
        }
        if nodes.is_empty() {
            return Err(MapError::syntax(path, 1, 1, "the hostfile names no host"));
        }
        Ok(Cluster {
            topologies,
            nodes,
            network_levels: Vec::new(),
        })
    }

    /// Usable PUs of a node, in topology (logical) order.
    pub fn usable_pus(&self, node: usize) -> Result<Vec<u32>, MapError> {
        let spec = &self.nodes[node];
        let m = &self.topologies[spec.topo];
        match &spec.usable {
            None => Ok(m.pus.iter().map(|p| p.os_index).collect()),
            Some(set) => {
                for &p in set.indexes() {
                    if m.pu_position(p).is_none() {
                        return Err(MapError::Invalid(format!(
                            "slot PU {p} of {} does not exist (its PUs are {})",
                            spec.host,
                            PuSet::from_indexes(m.pus.iter().map(|p| p.os_index))
                        )));
                    }
                }
                Ok(m.pus
                    .iter()
                    .map(|p| p.os_index)
                    .filter(|p| set.contains(*p))
                    .collect())
            }
        }
    }

    /// Slots for `ranks` ranks: every usable PU of every node once, or
    /// `ceil(ranks / PUs)` times each when oversubscribing; packed order.
    pub fn default_slots(&self, ranks: usize, oversubscribe: bool) -> Result<Vec<Slot>, MapError> {
        let mut pus = Vec::new();
        for n in 0..self.nodes.len() {
            for p in self.usable_pus(n)? {
                pus.push(Slot {
                    node: n as u32,
                    pu: p,
                });
            }
        }
        if pus.is_empty() {
            return Err(MapError::Invalid("no usable PU (check --slots)".into()));
        }
        if ranks > pus.len() && !oversubscribe {
            return Err(MapError::Invalid(format!(
                "{ranks} ranks but only {} slots ({} node(s)); pass --oversubscribe to put several ranks on a PU, or give more nodes",
                pus.len(),
                self.nodes.len()
            )));
        }
        let copies = ranks.div_ceil(pus.len()).max(1);
        Ok(pus
            .iter()
            .flat_map(|s| std::iter::repeat_n(*s, copies))
            .collect())
    }
}

#[derive(Clone, Debug)]
pub(crate) struct TNode {
    pub parent: u32,
    pub children: Vec<u32>,
    /// Leaves `lo..hi` are below this node.
    pub lo: u32,
    pub hi: u32,
    pub depth: u32,
    pub label: u16,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Leaf {
    pub node: u32,
    pub pu_pos: u32,
    pub pu_os: u32,
}

/// Node topologies with at most this many PUs get a table of every pair's
/// class (2 bytes a pair: 32 MiB at 4096 PUs), the fastest lookup; larger
/// ones look the class up through the pair's common ancestor, in memory
/// linear in the PUs (a million-PU node would need 2 TB of table).
const DENSE_MAX_PUS: usize = 4096;

/// The class ids of the PU pairs of one node topology.
#[derive(Clone, Debug)]
enum PairClasses {
    /// No node uses this topology.
    Unused,
    /// Row-major by PU position.
    Dense { npu: usize, ids: Vec<u16> },
    /// Per object that may be a common ancestor, the id for PUs in different
    /// / the same NUMA node; `numa` is each PU's node.
    Tree {
        index: ClassIndex,
        by_object: Vec<[u16; 2]>,
        numa: Vec<Option<u32>>,
    },
}

/// Slots as a tree, with the locality class of any two slots.
#[derive(Clone, Debug)]
pub struct Target {
    pub cluster: Cluster,
    pub(crate) leaves: Vec<Leaf>,
    /// Input slot index -> leaf index, and back.
    pub(crate) leaf_of_input: Vec<u32>,
    pub(crate) input_of_leaf: Vec<u32>,
    pub(crate) tree: Vec<TNode>,
    pub(crate) root: u32,
    pub(crate) leaf_tnode: Vec<u32>,
    pub(crate) labels: Vec<String>,
    pub(crate) class_names: Vec<String>,
    /// Per node topology, the class id of its PU pairs.
    topo_class: Vec<PairClasses>,
    self_class: u16,
    /// Class of two nodes whose lowest common network group is at level k
    /// (0 = the root = `network`, k >= 1 = `switchK`).
    net_class: Vec<u16>,
    /// Nodes per group at each network level from the bottom (prefix products).
    net_span: Vec<usize>,
}

struct Builder<'a> {
    cluster: &'a Cluster,
    /// Slots sorted by (node, PU OS index), input order within a PU, so the
    /// slots of one PU are one run found by binary search (a map of vectors
    /// costs an allocation per PU: seconds at millions of slots).
    by_pu: Vec<((u32, u32), u32)>,
    /// Per topology, per object: its short name (`Package`, `L3`, `Core`),
    /// formatted once instead of once per node.
    names: Vec<Vec<String>>,
    tree: Vec<TNode>,
    leaves: Vec<Leaf>,
    leaf_tnode: Vec<u32>,
    input_of_leaf: Vec<u32>,
    labels: Vec<String>,
    pu_pos: Vec<HashMap<u32, u32>>,
}

impl Builder<'_> {
    fn label(&mut self, s: &str) -> u16 {
        match self.labels.iter().position(|l| l == s) {
            Some(i) => i as u16,
            None => {
                self.labels.push(s.to_string());
                (self.labels.len() - 1) as u16
            }
        }
    }

    fn push(&mut self, children: Vec<u32>, label: u16) -> u32 {
        let id = self.tree.len() as u32;
        let lo = children
            .iter()
            .map(|&c| self.tree[c as usize].lo)
            .min()
            .unwrap_or(0);
        let hi = children
            .iter()
            .map(|&c| self.tree[c as usize].hi)
            .max()
            .unwrap_or(0);
        for &c in &children {
            self.tree[c as usize].parent = id;
        }
        self.tree.push(TNode {
            parent: u32::MAX,
            children,
            lo,
            hi,
            depth: 0,
            label,
        });
        id
    }

    fn leaf(&mut self, node: u32, pu_os: u32, input: u32, label: u16) -> u32 {
        let li = self.leaves.len() as u32;
        let pu_pos = self.pu_pos[self.cluster.nodes[node as usize].topo][&pu_os];
        self.leaves.push(Leaf {
            node,
            pu_pos,
            pu_os,
        });
        self.input_of_leaf.push(input);
        let id = self.tree.len() as u32;
        self.tree.push(TNode {
            parent: u32::MAX,
            children: Vec::new(),
            lo: li,
            hi: li + 1,
            depth: 0,
            label,
        });
        self.leaf_tnode.push(id);
        id
    }

    /// Collapses a single child into its parent's place (keeping the upper
    /// label: same leaves, so the same boundary traffic).
    fn group(&mut self, kids: Vec<u32>, label: &str) -> Option<u32> {
        let l = self.label(label);
        match kids.len() {
            0 => None,
            1 => {
                self.tree[kids[0] as usize].label = l;
                Some(kids[0])
            }
            _ => Some(self.push(kids, l)),
        }
    }

    fn object(&mut self, node: u32, m: &Machine, obj: usize, top: bool) -> Option<u32> {
        let o = &m.objects[obj];
        let topo = self.cluster.nodes[node as usize].topo;
        let name = if top {
            "Node".to_string()
        } else {
            self.names[topo][obj].clone()
        };
        if o.kind == ObjectKind::Pu {
            let os = o.os_index?;
            let start = self.by_pu.partition_point(|&(k, _)| k < (node, os));
            let len = self.by_pu[start..].partition_point(|&(k, _)| k == (node, os));
            if len == 0 {
                return None;
            }
            let kids: Vec<u32> = if len == 1 {
                let l = self.label(&name);
                vec![self.leaf(node, os, self.by_pu[start].1, l)]
            } else {
                let l = self.label("Slot");
                (start..start + len)
                    .map(|k| self.leaf(node, os, self.by_pu[k].1, l))
                    .collect()
            };
            return self.group(kids, &name);
        }
        let kids: Vec<u32> = o
            .children
            .iter()
            .filter_map(|&c| self.object(node, m, c, false))
            .collect();
        self.group(kids, &name)
    }

    fn network(&mut self, level: usize, first: usize, span: &[usize], nodes: usize) -> Option<u32> {
        if level == 0 {
            let m = &self.cluster.topologies[self.cluster.nodes[first].topo];
            return self.object(first as u32, m, 0, true);
        }
        let step = span[level - 1];
        let end = (first + span[level]).min(nodes);
        let kids: Vec<u32> = (first..end)
            .step_by(step)
            .filter_map(|f| self.network(level - 1, f, span, nodes))
            .collect();
        if kids.len() == 1 {
            return Some(kids[0]); // a lone node keeps its own label
        }
        let name = if level == span.len() - 1 {
            "Cluster".to_string()
        } else {
            format!("Switch{level}")
        };
        self.group(kids, &name)
    }
}

impl Target {
    /// Builds the tree over `slots` (given in any order; several may share a PU).
    pub fn new(cluster: Cluster, slots: &[Slot]) -> Result<Self, MapError> {
        if slots.is_empty() {
            return Err(MapError::Invalid("no slot to map onto".into()));
        }
        let pu_pos: Vec<HashMap<u32, u32>> = cluster
            .topologies
            .iter()
            .map(|m| {
                m.pus
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (p.os_index, i as u32))
                    .collect()
            })
            .collect();
        let mut by_pu: Vec<((u32, u32), u32)> = Vec::with_capacity(slots.len());
        for (i, s) in slots.iter().enumerate() {
            let node = cluster.nodes.get(s.node as usize).ok_or_else(|| {
                MapError::Invalid(format!(
                    "slot {i}: node {} does not exist ({} node(s))",
                    s.node,
                    cluster.nodes.len()
                ))
            })?;
            if !pu_pos[node.topo].contains_key(&s.pu) {
                return Err(MapError::Invalid(format!(
                    "slot {i}: PU {} does not exist on node {} ({})",
                    s.pu, s.node, node.host
                )));
            }
            by_pu.push(((s.node, s.pu), i as u32));
        }
        by_pu.sort_unstable(); // (key, input index): input order within a PU
        let names = cluster
            .topologies
            .iter()
            .map(|m| {
                m.objects
                    .iter()
                    .map(|o| {
                        let l = o.label();
                        l.split(" L#").next().unwrap_or(&l).to_string()
                    })
                    .collect()
            })
            .collect();
        // Network spans: nodes below one group at each level, root last.
        let mut span = vec![1usize];
        for &a in &cluster.network_levels {
            span.push(span.last().unwrap().saturating_mul(a.max(1)));
        }
        let nodes = cluster.nodes.len();
        if *span.last().unwrap() < nodes || span.len() == 1 {
            span.push(nodes.max(*span.last().unwrap()));
        }
        let mut b = Builder {
            cluster: &cluster,
            by_pu,
            names,
            tree: Vec::new(),
            leaves: Vec::new(),
            leaf_tnode: Vec::new(),
            input_of_leaf: Vec::new(),
            labels: Vec::new(),
            pu_pos,
        };
        let root = b
            .network(span.len() - 1, 0, &span, nodes)
            .expect("slots exist");
        let Builder {
            tree,
            leaves,
            leaf_tnode,
            input_of_leaf,
            labels,
            ..
        } = b;
        let mut t = Target {
            leaf_of_input: vec![0; input_of_leaf.len()],
            input_of_leaf,
            cluster,
            leaves,
            tree,
            root,
            leaf_tnode,
            labels,
            class_names: Vec::new(),
            topo_class: Vec::new(),
            self_class: 0,
            net_class: Vec::new(),
            net_span: span[1..span.len() - 1].to_vec(),
        };
        for (leaf, &input) in t.input_of_leaf.iter().enumerate() {
            t.leaf_of_input[input as usize] = leaf as u32;
        }
        // Depths, top-down (children were pushed before parents).
        let mut stack = vec![(t.root, 0u32)];
        while let Some((v, d)) = stack.pop() {
            t.tree[v as usize].depth = d;
            stack.extend(t.tree[v as usize].children.iter().map(|&c| (c, d + 1)));
        }
        t.build_classes();
        Ok(t)
    }

    fn intern(&mut self, name: String) -> u16 {
        intern_in(&mut self.class_names, name)
    }

    /// The class tables of the node topologies, read in place (borrowed
    /// from `cluster`, not cloned: a million-PU machine is large); a
    /// topology no node uses gets no [`ClassIndex`] and no table.
    fn build_classes(&mut self) {
        self.self_class = self.intern("self".into());
        let self_class = self.self_class;
        let mut used = vec![false; self.cluster.topologies.len()];
        for n in &self.cluster.nodes {
            used[n.topo] = true;
        }
        let names = &mut self.class_names;
        for (m, &in_use) in self.cluster.topologies.iter().zip(&used) {
            let npu = m.pus.len();
            let table = if !in_use {
                PairClasses::Unused
            } else if npu <= DENSE_MAX_PUS {
                let index = ClassIndex::new(m);
                let mut ids = vec![self_class; npu * npu];
                for a in 0..npu {
                    for b in (a + 1)..npu {
                        let c = intern_in(names, index.classify(m, a, b).0.to_string());
                        ids[a * npu + b] = c;
                        ids[b * npu + a] = c;
                    }
                }
                PairClasses::Dense { npu, ids }
            } else {
                let index = ClassIndex::new(m);
                let mut by_object = vec![[self_class; 2]; m.objects.len()];
                for (o, obj) in m.objects.iter().enumerate() {
                    if obj.kind == ObjectKind::Pu {
                        continue; // never the common ancestor of two distinct PUs
                    }
                    for same in [false, true] {
                        let c = intern_in(names, index.class_at_lca(m, o, same).to_string());
                        by_object[o][usize::from(same)] = c;
                    }
                }
                let numa = m.pus.iter().map(|p| p.numa_node).collect();
                PairClasses::Tree {
                    index,
                    by_object,
                    numa,
                }
            };
            self.topo_class.push(table);
        }
        let net = self.intern("network".into());
        self.net_class = vec![net];
        for k in 1..=self.net_span.len() {
            let c = self.intern(format!("switch{k}"));
            self.net_class.push(c);
        }
    }

    /// Number of slots (leaves).
    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    /// Names of the locality classes, indexed by class id.
    pub fn class_names(&self) -> &[String] {
        &self.class_names
    }

    /// Class id of two leaves.
    #[inline]
    pub(crate) fn class(&self, a: u32, b: u32) -> u16 {
        let (la, lb) = (&self.leaves[a as usize], &self.leaves[b as usize]);
        if la.node != lb.node {
            // Lowest network level whose group holds both nodes.
            for (k, &s) in self.net_span.iter().enumerate() {
                if la.node as usize / s == lb.node as usize / s {
                    return self.net_class[k + 1];
                }
            }
            return self.net_class[0];
        }
        if la.pu_pos == lb.pu_pos {
            return self.self_class;
        }
        let t = self.cluster.nodes[la.node as usize].topo;
        let (a, b) = (la.pu_pos as usize, lb.pu_pos as usize);
        match &self.topo_class[t] {
            PairClasses::Dense { npu, ids } => ids[a * npu + b],
            PairClasses::Tree {
                index,
                by_object,
                numa,
            } => {
                let same = numa[a].is_some() && numa[a] == numa[b];
                by_object[index.lca(a, b)][usize::from(same)]
            }
            PairClasses::Unused => self.self_class, // no leaf lies on it
        }
    }

    /// Number of tree links between two leaves (0 for the same leaf).
    #[inline]
    pub(crate) fn hops(&self, a: u32, b: u32) -> u32 {
        let mut h = 0;
        self.walk(a, b, |_| h += 1);
        h
    }

    /// Calls `f` with every tree node on the path between two leaves whose
    /// link to its parent the path crosses (the lowest common ancestor
    /// excluded). Leaves are depth-first numbered: an ancestor of `a` holds
    /// `b` when `b` is in its leaf range.
    #[inline]
    pub(crate) fn walk(&self, a: u32, b: u32, mut f: impl FnMut(u32)) {
        if a == b {
            return;
        }
        let mut x = self.leaf_tnode[a as usize];
        while !(self.tree[x as usize].lo..self.tree[x as usize].hi).contains(&b) {
            f(x);
            x = self.tree[x as usize].parent;
        }
        let lca_depth = self.tree[x as usize].depth;
        let mut y = self.leaf_tnode[b as usize];
        while self.tree[y as usize].depth > lca_depth {
            f(y);
            y = self.tree[y as usize].parent;
        }
    }

    /// The slot (node, PU OS index) of a leaf.
    pub fn slot_of_leaf(&self, leaf: u32) -> Slot {
        let l = &self.leaves[leaf as usize];
        Slot {
            node: l.node,
            pu: l.pu_os,
        }
    }

    /// Leaf of the `i`-th slot given to [`Target::new`].
    pub fn leaf_of_slot(&self, i: usize) -> u32 {
        self.leaf_of_input[i]
    }

    pub fn slot_index_of_leaf(&self, leaf: u32) -> usize {
        self.input_of_leaf[leaf as usize] as usize
    }

    /// Class id of the farthest pair (LCA = root): the reference weight of
    /// the grouping phase.
    pub(crate) fn top_class(&self) -> u16 {
        let r = &self.tree[self.root as usize];
        if r.children.len() < 2 {
            return self.self_class;
        }
        let a = self.tree[r.children[0] as usize].lo;
        let b = self.tree[r.children[1] as usize].lo;
        self.class(a, b)
    }

    /// For a symmetric tree (every object of a depth has the same arity and
    /// the leaves are all at one depth): `(arity, class of two leaves that
    /// split at that level)` from the root down. Used to build Scotch tleaf
    /// targets.
    pub fn levels_if_symmetric(&self) -> Option<Vec<(usize, String)>> {
        let mut out = Vec::new();
        let mut frontier = vec![self.root];
        loop {
            let first = &self.tree[frontier[0] as usize];
            if first.children.is_empty() {
                return frontier
                    .iter()
                    .all(|&v| self.tree[v as usize].children.is_empty())
                    .then_some(out);
            }
            let arity = first.children.len();
            if frontier
                .iter()
                .any(|&v| self.tree[v as usize].children.len() != arity)
            {
                return None;
            }
            let (a, b) = (
                self.tree[first.children[0] as usize].lo,
                self.tree[first.children[1] as usize].lo,
            );
            out.push((arity, self.class_names[self.class(a, b) as usize].clone()));
            frontier = frontier
                .iter()
                .flat_map(|&v| self.tree[v as usize].children.clone())
                .collect();
        }
    }

    /// Short description: `2 node(s) x 16 PUs, 32 slots, levels Cluster:2 Package:2 ...`.
    pub fn describe(&self) -> String {
        let mut levels: Vec<(u32, u16, usize)> = Vec::new();
        for t in &self.tree {
            if !t.children.is_empty() {
                match levels.iter_mut().find(|l| l.0 == t.depth && l.1 == t.label) {
                    Some(l) => l.2 = l.2.max(t.children.len()),
                    None => levels.push((t.depth, t.label, t.children.len())),
                }
            }
        }
        levels.sort();
        let lv: Vec<String> = levels
            .iter()
            .map(|l| format!("{}:{}", self.labels[l.1 as usize], l.2))
            .collect();
        format!(
            "{} node(s), {} slots; tree {}",
            self.cluster.nodes.len(),
            self.len(),
            lv.join(" ")
        )
    }
}

/// The id of class `name` in `names`, added at the end if new.
fn intern_in(names: &mut Vec<String>, name: String) -> u16 {
    match names.iter().position(|c| *c == name) {
        Some(i) => i as u16,
        None => {
            names.push(name);
            (names.len() - 1) as u16
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Above DENSE_MAX_PUS the class comes from the common ancestor: it
    /// must name the same class as the topology's own pair classification.
    #[test]
    fn large_nodes_classify_through_the_tree_like_the_topology() {
        let desc = "pack:2 numa:2 l3:2 core:320 pu:2"; // 5120 PUs
        let m = topocomm_topo::load(&format!("synthetic:{desc}").parse().unwrap()).unwrap();
        assert!(m.pus.len() > DENSE_MAX_PUS);
        let index = ClassIndex::new(&m);
        let c = Cluster::uniform(m.clone(), 1);
        let slots = c.default_slots(m.pus.len(), false).unwrap();
        let t = Target::new(c, &slots).unwrap();
        assert!(matches!(t.topo_class[0], PairClasses::Tree { .. }));
        let mut h = 12345u64;
        for _ in 0..20_000 {
            h = h
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (a, b) = (
                (h >> 20) as u32 % t.len() as u32,
                (h >> 40) as u32 % t.len() as u32,
            );
            let (pa, pb) = (t.leaves[a as usize].pu_pos, t.leaves[b as usize].pu_pos);
            let want = if pa == pb {
                "self".to_string()
            } else {
                index.classify(&m, pa as usize, pb as usize).0.to_string()
            };
            assert_eq!(
                t.class_names()[t.class(a, b) as usize],
                want,
                "PUs {pa},{pb}"
            );
        }
    }
}
