//! lstopo-style drawing of the machine tree as nested boxes in SVG.
//!
//! Two things keep big machines readable: chains of single-child objects
//! (`L2 + L1d + Core`) are drawn as one box with a joined label, and the
//! children of a box are wrapped into a grid of about sqrt(n) columns.

use crate::esc;
use std::fmt::Write as _;
use topocomm_topo::{Machine, Object, ObjectKind};

const PAD: f64 = 5.0;
const LINE_H: f64 = 14.0;
const CHAR_W: f64 = 6.2;
const PU_W: f64 = 44.0;
const PU_H: f64 = 18.0;

/// One box to draw: a chain of objects collapsed together, its children.
struct Node {
    label: String,
    kind: ObjectKind,
    /// The PU ending the chain, if the chain reaches one.
    pu: Option<u32>,
    children: Vec<Node>,
    cols: usize,
    w: f64,
    h: f64,
}

fn short_label(o: &Object) -> String {
    let mut s = o.label();
    // Drop logical indexes of caches and cores inside chains: sizes say more.
    if matches!(o.kind, ObjectKind::Cache | ObjectKind::Core) {
        if let Some(i) = s.find(" L#") {
            let rest = s[i + 3..].find(' ').map(|j| &s[i + 3 + j..]).unwrap_or("");
            s = format!("{}{}", &s[..i], rest);
        }
    }
    s
}

fn build(m: &Machine, start: usize) -> Node {
    let mut labels = Vec::new();
    let mut cur = start;
    let mut pu = None;
    let first_kind = m.objects[start].kind;
    loop {
        let o = &m.objects[cur];
        if o.kind == ObjectKind::Pu {
            pu = Some(o.os_index.unwrap_or(o.logical_index));
            break;
        }
        let mut l = short_label(o);
        if !o.numa_nodes.is_empty() {
            let nodes: Vec<String> = o.numa_nodes.iter().map(|n| format!("NUMA P#{n}")).collect();
            l.push_str(&format!(" [{}]", nodes.join(", ")));
        }
        labels.push(l);
        if o.children.len() == 1 && o.numa_nodes.is_empty() {
            cur = o.children[0];
        } else {
            break;
        }
    }
    let children: Vec<Node> = if pu.is_some() {
        Vec::new()
    } else {
        m.objects[cur]
            .children
            .iter()
            .map(|&c| build(m, c))
            .collect()
    };
    let mut node = Node {
        label: labels.join(" + "),
        kind: first_kind,
        pu,
        children,
        cols: 1,
        w: 0.0,
        h: 0.0,
    };
    measure(&mut node);
    node
}

fn measure(n: &mut Node) {
    let label_w = if n.label.is_empty() {
        0.0
    } else {
        CHAR_W * n.label.chars().count() as f64 + 2.0 * PAD
    };
    let label_h = if n.label.is_empty() { 0.0 } else { LINE_H };
    if let Some(_pu) = n.pu {
        n.w = label_w.max(PU_W + 2.0 * PAD);
        n.h = label_h + PU_H + if n.label.is_empty() { 0.0 } else { PAD * 2.0 };
        if n.label.is_empty() {
            n.w = PU_W;
            n.h = PU_H;
        }
        return;
    }
    let k = n.children.len().max(1);
    n.cols = if k <= 3 {
        k
    } else {
        (k as f64).sqrt().ceil() as usize
    };
    let mut grid_w: f64 = 0.0;
    let mut grid_h = 0.0;
    for row in n.children.chunks(n.cols) {
        let w: f64 = row.iter().map(|c| c.w + PAD).sum::<f64>() + PAD;
        let h = row.iter().map(|c| c.h).fold(0.0, f64::max);
        grid_w = grid_w.max(w);
        grid_h += h + PAD;
    }
    n.w = grid_w.max(label_w);
    n.h = label_h + grid_h + PAD;
}

fn fill(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Machine => "#ffffff",
        ObjectKind::Package => "#dfe9f5",
        ObjectKind::Die => "#e8eef8",
        ObjectKind::Group => "#f3ecdf",
        ObjectKind::Cache => "#fbfbe8",
        ObjectKind::Core => "#d8d8d8",
        ObjectKind::Pu => "#ffffff",
    }
}

fn draw(n: &Node, x: f64, y: f64, out: &mut String) {
    let _ = write!(
        out,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" stroke=\"#555\" stroke-width=\"0.7\"/>",
        n.w,
        n.h,
        fill(n.kind)
    );
    let mut top = y;
    if !n.label.is_empty() {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" font-family=\"monospace\">{}</text>",
            x + PAD,
            y + 11.0,
            esc(&n.label)
        );
        top += LINE_H;
    }
    if let Some(pu) = n.pu {
        let (px, py) = if n.label.is_empty() {
            (x, y)
        } else {
            (x + PAD, top + PAD)
        };
        let _ = write!(
            out,
            "<rect x=\"{px:.1}\" y=\"{py:.1}\" width=\"{PU_W:.1}\" height=\"{PU_H:.1}\" fill=\"#ffffff\" stroke=\"#555\" stroke-width=\"0.7\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" font-family=\"monospace\">P#{pu}</text>",
            px + 4.0,
            py + 13.0
        );
        return;
    }
    let mut cy = top + PAD;
    for row in n.children.chunks(n.cols.max(1)) {
        let mut cx = x + PAD;
        let h = row.iter().map(|c| c.h).fold(0.0, f64::max);
        for c in row {
            draw(c, cx, cy, out);
            cx += c.w + PAD;
        }
        cy += h + PAD;
    }
}

/// The machine tree as one `<svg>` element; devices are listed under it with
/// the object they are attached to.
pub fn svg_tree(m: &Machine) -> String {
    let root = build(m, 0);
    let dev_h = 14.0 * m.devices.len() as f64 + if m.devices.is_empty() { 0.0 } else { 10.0 };
    let (w, h) = (root.w + 2.0, root.h + dev_h + 2.0);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\">"
    );
    draw(&root, 1.0, 1.0, &mut out);
    for (k, d) in m.devices.iter().enumerate() {
        let anchor = m.objects[d.local_object].label();
        let _ = write!(
            out,
            "<text x=\"4\" y=\"{:.1}\" font-size=\"10\" font-family=\"monospace\">{} {} ({}) near {} [PUs {}]</text>",
            root.h + 16.0 + 14.0 * k as f64,
            esc(d.kind.name()),
            esc(&d.name),
            esc(d.pci_bus_id.as_deref().unwrap_or("no PCI")),
            esc(&anchor),
            esc(&d.cpuset.to_string())
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_pu_once() {
        let m = topocomm_topo::load(&"synthetic:pack:2 core:3 pu:2".parse().unwrap()).unwrap();
        let svg = svg_tree(&m);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        for p in 0..12 {
            assert_eq!(svg.matches(&format!(">P#{p}<")).count(), 1, "P#{p}");
        }
        assert_eq!(svg.matches("Package L#").count(), 2);
    }

    #[test]
    fn big_machines_wrap_into_a_grid() {
        let m = topocomm_topo::load(&"synthetic:pack:4 l3:2 core:8 pu:1".parse().unwrap()).unwrap();
        let svg = svg_tree(&m);
        let dims: Vec<f64> = svg
            .split("viewBox=\"0 0 ")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .split(' ')
            .map(|v| v.parse().unwrap())
            .collect();
        // 64 PUs in one row would be > 3000 px wide; the grid keeps it compact.
        assert!(dims[0] < 1200.0, "width {}", dims[0]);
        assert!(dims[0] / dims[1] < 4.0, "aspect {dims:?}");
        for p in 0..64 {
            assert_eq!(svg.matches(&format!(">P#{p}<")).count(), 1, "P#{p}");
        }
    }
}
