//! `topocomm topo`: the machine model for people and scripts.

use crate::common::{text_table, GlobalOpts};
use anyhow::Result;
use std::fmt::Write as _;
use std::process::ExitCode;
use topocomm_topo::{human_bytes, ClassMatrix, Machine, ObjectKind, Origin, TreeView};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// List the classes present, one per line: `<class> <pair-count> <P>,<Q>` (OS indexes)
    #[arg(long, conflicts_with_all = ["pair", "matrix", "json"])]
    pub classes: bool,
    /// Print the locality class of two PUs given by OS index, e.g. `--pair 0,4`
    #[arg(long, value_name = "P,Q", conflicts_with_all = ["matrix", "json"])]
    pub pair: Option<String>,
    /// Print the class of every PU pair, rows and columns in topology order
    #[arg(long, conflicts_with = "json")]
    pub matrix: bool,
    /// Write the machine model as JSON (schema topocomm.machine/1) on stdout
    #[arg(long)]
    pub json: bool,
    /// Always print the full tree (by default only up to 64 PUs)
    #[arg(long)]
    pub tree: bool,
}

pub fn run(g: &GlobalOpts, a: &Args) -> Result<ExitCode> {
    let m = g.machine()?;
    if let Some(pair) = &a.pair {
        let (p, q) = topocomm_topo::parse_pair(pair)?;
        println!("{}", topocomm_topo::pair_class(&m, p, q)?);
        return Ok(ExitCode::SUCCESS);
    }
    if a.json {
        println!("{}", m.to_json());
        return Ok(ExitCode::SUCCESS);
    }
    let cm = ClassMatrix::new(&m);
    if a.classes {
        for c in cm.classes() {
            println!(
                "{} {} {},{}",
                c.class, c.pairs, c.representative.0, c.representative.1
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.matrix {
        print!("{}", matrix_text(&cm));
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", summary(&m, &cm, a.tree || m.pus.len() <= 64));
    Ok(ExitCode::SUCCESS)
}

/// Where the model came from, in a few words.
pub fn origin_text(m: &Machine) -> String {
    match &m.origin {
        Origin::Live { hostname } => format!("live machine {hostname}"),
        Origin::Xml { path } => format!("hwloc XML {path}"),
        Origin::Synthetic { description } => format!("synthetic '{description}'"),
        Origin::Json { path } => format!("machine JSON {path}"),
    }
}

/// One-line inventory: PUs, cores, packages, NUMA nodes, caches.
pub fn inventory(m: &Machine) -> String {
    let mut parts = vec![format!("{} PUs", m.pus.len())];
    for (kind, name) in [
        (ObjectKind::Core, "cores"),
        (ObjectKind::Die, "dies"),
        (ObjectKind::Package, "packages"),
    ] {
        let n = m.count(kind);
        if n > 0 {
            let name = if n == 1 {
                &name[..name.len() - 1]
            } else {
                name
            };
            parts.push(format!("{n} {name}"));
        }
    }
    match m.numa_nodes.len() {
        0 => {}
        1 => parts.push("1 NUMA node".into()),
        n => parts.push(format!("{n} NUMA nodes")),
    }
    for level in (1..=5u8).rev() {
        let caches: Vec<u64> = m
            .objects
            .iter()
            .filter_map(|o| o.cache.as_ref())
            .filter(|c| c.level == level && c.cache_type != topocomm_topo::CacheType::Instruction)
            .map(|c| c.size)
            .collect();
        if let Some(&size) = caches.first() {
            parts.push(format!("{}x L{level} {}", caches.len(), human_bytes(size)));
        }
    }
    parts.join(", ")
}

/// The level chain, e.g. `Machine > 2 Package > 1 L3 > 4 Core > 2 PU`.
pub fn level_chain(tree: &TreeView) -> String {
    let mut s = String::new();
    for (i, l) in tree.levels.iter().enumerate() {
        if i == 0 {
            s.push_str(&l.name);
            continue;
        }
        let parent = &tree.levels[i - 1];
        let per = match parent.arity() {
            Some(a) => a.to_string(),
            None => format!("{}-{}", parent.min_arity, parent.max_arity),
        };
        if per != "1" {
            let _ = write!(s, " > {per} {}", l.name);
        } else {
            let _ = write!(s, " + {}", l.name);
        }
    }
    s
}

fn tree_lines(m: &Machine, i: usize, indent: usize, out: &mut String) {
    // Collapse single-child chains on one line, as lstopo does.
    let mut line = Vec::new();
    let mut cur = i;
    loop {
        let o = &m.objects[cur];
        let mut label = o.label();
        if !o.numa_nodes.is_empty() {
            let nodes: Vec<String> = o
                .numa_nodes
                .iter()
                .map(|n| format!("NUMANode P#{n}"))
                .collect();
            label.push_str(&format!(" [{}]", nodes.join(", ")));
        }
        line.push(label);
        if o.children.len() == 1 && o.numa_nodes.is_empty() {
            cur = o.children[0];
        } else {
            break;
        }
    }
    let _ = writeln!(
        out,
        "{:indent$}{}",
        "",
        line.join(" + "),
        indent = indent * 2
    );
    for &c in &m.objects[cur].children {
        tree_lines(m, c, indent + 1, out);
    }
}

pub fn summary(m: &Machine, cm: &ClassMatrix, full_tree: bool) -> String {
    let mut out = String::new();
    let tree = TreeView::new(m);
    let _ = writeln!(out, "Machine: {}", origin_text(m));
    if let Some(cpu) = &m.cpu_model {
        let _ = writeln!(out, "CPU:     {cpu}");
    }
    let _ = writeln!(out, "Layout:  {}", inventory(m));
    let _ = writeln!(
        out,
        "Levels:  {}{}",
        level_chain(&tree),
        if tree.symmetric { "" } else { "  (asymmetric)" }
    );
    for why in &tree.asymmetry {
        let _ = writeln!(out, "         asymmetric: {why}");
    }
    let _ = writeln!(out, "Fingerprint: {}", m.fingerprint);
    out.push('\n');
    if full_tree {
        tree_lines(m, 0, 0, &mut out);
    } else {
        let _ = writeln!(
            out,
            "({} PUs: run with --tree for the full tree)",
            m.pus.len()
        );
    }
    out.push('\n');
    let _ = writeln!(out, "Locality classes (nearest first):");
    let rows = class_rows(cm);
    for l in text_table(&["class", "pairs", "example (OS P,Q)"], &rows).lines() {
        let _ = writeln!(out, "  {l}");
    }
    if !m.devices.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "Devices:");
        let rows: Vec<Vec<String>> = m.devices.iter().map(|d| device_row(m, d)).collect();
        for l in text_table(&["kind", "name", "PCI", "near", "NUMA", "PUs"], &rows).lines() {
            let _ = writeln!(out, "  {l}");
        }
    }
    if !m.distances.is_empty() {
        out.push('\n');
        for d in &m.distances {
            let _ = writeln!(
                out,
                "Distances: {} ({}, {} objects)",
                d.name,
                d.means,
                d.objects.len()
            );
        }
    }
    out
}

/// One row per class present: name, pair count, representative pair.
pub fn class_rows(cm: &ClassMatrix) -> Vec<Vec<String>> {
    cm.classes()
        .iter()
        .map(|c| {
            vec![
                c.class.to_string(),
                c.pairs.to_string(),
                format!("{},{}", c.representative.0, c.representative.1),
            ]
        })
        .collect()
}

pub fn device_row(m: &Machine, d: &topocomm_topo::Device) -> Vec<String> {
    let kind = match &d.subtype {
        Some(s) => format!("{}({s})", d.kind.name()),
        None => d.kind.name().to_string(),
    };
    let near = match d.package {
        Some(p) => format!("package {p}"),
        None => m.objects[d.local_object].label(),
    };
    let numa: Vec<String> = d.numa_nodes.iter().map(u32::to_string).collect();
    vec![
        kind,
        d.name.clone(),
        d.pci_bus_id.clone().unwrap_or_else(|| "-".into()),
        near,
        if numa.is_empty() {
            "-".into()
        } else {
            numa.join(",")
        },
        d.cpuset.to_string(),
    ]
}

/// Class matrix as text: a legend, then one row per PU in topology order,
/// each cell the class number from the legend (`.` for the PU itself).
pub fn matrix_text(cm: &ClassMatrix) -> String {
    let mut out = String::from("legend:");
    for (i, c) in cm.classes().iter().enumerate() {
        let _ = write!(out, " {i}={}", c.class);
    }
    out.push('\n');
    let os = cm.pu_os_indexes();
    let w = os
        .iter()
        .map(|p| p.to_string().len())
        .max()
        .unwrap_or(1)
        .max(cm.classes().len().to_string().len());
    let _ = write!(out, "{:>w$} |", "P#", w = w + 1);
    for p in os {
        let _ = write!(out, " {p:>w$}");
    }
    out.push('\n');
    for (a, row_pu) in os.iter().enumerate() {
        let _ = write!(out, "{:>w$} |", row_pu, w = w + 1);
        for b in 0..cm.len() {
            match cm.code_at(a, b) {
                Some(c) => {
                    let _ = write!(out, " {c:>w$}");
                }
                None => {
                    let _ = write!(out, " {:>w$}", ".");
                }
            }
        }
        out.push('\n');
    }
    out
}
