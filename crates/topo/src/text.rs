//! The machine model as text for people: the summary of `topocomm topo`
//! (origin, layout, levels, tree, classes, devices), the class matrix, and
//! the pieces `topocomm report` shows in HTML. Plain functions of the model;
//! printing is the caller's.

use crate::{human_bytes, CacheType, ClassMatrix, Device, Machine, ObjectKind, Origin, TreeView};
use std::fmt::Write as _;

/// Left-aligned plain-text table with a header line; columns two spaces
/// apart, trailing spaces trimmed, widths in characters.
pub fn text_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{:<w$}  ", c, w = widths[i]));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = String::new();
    out.push_str(&line(header.to_vec()));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
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
            .filter(|c| c.level == level && c.cache_type != CacheType::Instruction)
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

/// The summary `topocomm topo` prints: origin, CPU, layout, levels,
/// fingerprint, the tree (or a note when `full_tree` is false), the
/// locality classes, the devices and the distance matrices.
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
        for l in text_table(&DEVICE_HEADER, &rows).lines() {
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

/// The columns of [`device_row`].
pub const DEVICE_HEADER: [&str; 6] = ["kind", "name", "PCI", "near", "NUMA", "PUs"];

/// One I/O device as a table row: kind(subtype), name, PCI bus id, what it
/// is near (package or object), NUMA nodes, PUs ([`DEVICE_HEADER`]).
pub fn device_row(m: &Machine, d: &Device) -> Vec<String> {
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

/// `topocomm topo --classes`: one line per class present,
/// `<class> <pair-count> <P>,<Q>`.
pub fn classes_lines(cm: &ClassMatrix) -> String {
    let mut out = String::new();
    for c in cm.classes() {
        let _ = writeln!(
            out,
            "{} {} {},{}",
            c.class, c.pairs, c.representative.0, c.representative.1
        );
    }
    out
}

/// The most PUs [`matrix_text`] is asked to print: 4096 PUs are 16.7 M
/// cells (about 100 MB of text); beyond, `--classes` and `--pair` say the
/// same in a few lines.
pub const MATRIX_MAX_PUS: usize = 4096;

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

/// `text` with its control characters escaped (`\n`, `\t`, `\u{0}`), for a
/// value quoted inside a one-line error: names and strings read from files
/// (a JSON key `"a\nb"`, a quoted TOML key) must not split the line.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{load, testdata::fixture, TopologySpec};

    #[test]
    fn table_pads_columns_and_trims_the_last() {
        let t = text_table(
            &["a", "long header"],
            &[vec!["xyz".into(), "1".into()], vec!["é".into(), "".into()]],
        );
        assert_eq!(t, "a    long header\nxyz  1\né\n");
    }

    #[test]
    fn fixture_summary_and_lists() {
        let spec = TopologySpec::Xml(fixture("two-socket-nic.xml"));
        let m = load(&spec).unwrap();
        let cm = ClassMatrix::new(&m);
        assert_eq!(classes_lines(&cm), "smt 4 0,2\nl3 8 0,4\nmachine 16 0,1\n");
        let s = summary(&m, &cm, true);
        assert!(s.starts_with("Machine: hwloc XML "), "{s}");
        assert!(s.contains("PU L#7 (P#7)") && s.contains("mlx5_0"), "{s}");
        assert!(summary(&m, &cm, false).contains("run with --tree"));
        assert!(matrix_text(&cm).starts_with("legend: 0=smt 1=l3 2=machine\n"));
    }
}
