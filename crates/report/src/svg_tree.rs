//! lstopo-style drawing of the machine tree as nested boxes in SVG.

use crate::esc;
use std::fmt::Write as _;
use topocomm_topo::{Machine, ObjectKind};

const PAD: f64 = 6.0;
const LABEL_H: f64 = 16.0;
const PU_W: f64 = 58.0;
const PU_H: f64 = 22.0;

struct Laid {
    w: f64,
    h: f64,
}

fn fill(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Machine => "#ffffff",
        ObjectKind::Package => "#dfe9f5",
        ObjectKind::Die => "#e8eef8",
        ObjectKind::Group => "#f3ecdf",
        ObjectKind::Cache => "#fdfdf0",
        ObjectKind::Core => "#d8d8d8",
        ObjectKind::Pu => "#ffffff",
    }
}

/// Size of an object's box: children side by side under a label line.
fn measure(m: &Machine, i: usize, memo: &mut Vec<Option<Laid>>) -> (f64, f64) {
    if let Some(l) = &memo[i] {
        return (l.w, l.h);
    }
    let o = &m.objects[i];
    let (w, h) = if o.kind == ObjectKind::Pu {
        (PU_W, PU_H)
    } else {
        let mut w = 0.0f64;
        let mut h = 0.0f64;
        for &c in &o.children {
            let (cw, ch) = measure(m, c, memo);
            w += cw + PAD;
            h = h.max(ch);
        }
        let label_w = 7.0 * label(m, i).len() as f64 + 2.0 * PAD;
        ((w + PAD).max(label_w), h + LABEL_H + 2.0 * PAD)
    };
    memo[i] = Some(Laid { w, h });
    (w, h)
}

fn label(m: &Machine, i: usize) -> String {
    let o = &m.objects[i];
    let mut s = o.label();
    if !o.numa_nodes.is_empty() {
        let nodes: Vec<String> = o.numa_nodes.iter().map(|n| format!("NUMA P#{n}")).collect();
        s.push_str(&format!(" [{}]", nodes.join(", ")));
    }
    s
}

fn draw(m: &Machine, i: usize, x: f64, y: f64, memo: &mut Vec<Option<Laid>>, out: &mut String) {
    let (w, h) = measure(m, i, memo);
    let o = &m.objects[i];
    let _ = write!(
        out,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{}\" stroke=\"#555\" stroke-width=\"0.8\"/>",
        fill(o.kind)
    );
    let text = if o.kind == ObjectKind::Pu {
        format!("P#{}", o.os_index.unwrap_or(o.logical_index))
    } else {
        label(m, i)
    };
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" font-family=\"monospace\">{}</text>",
        x + 4.0,
        y + if o.kind == ObjectKind::Pu { 15.0 } else { 13.0 },
        esc(&text)
    );
    let mut cx = x + PAD;
    for &c in &o.children {
        draw(m, c, cx, y + LABEL_H + PAD, memo, out);
        cx += measure(m, c, memo).0 + PAD;
    }
}

/// The machine tree as one `<svg>` element; devices are listed under it with
/// the object they are attached to.
pub fn svg_tree(m: &Machine) -> String {
    let mut memo: Vec<Option<Laid>> = (0..m.objects.len()).map(|_| None).collect();
    let (w, h) = measure(m, 0, &mut memo);
    let dev_h = 16.0 * m.devices.len() as f64 + if m.devices.is_empty() { 0.0 } else { 10.0 };
    let total_h = h + dev_h + 2.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{:.0}\" viewBox=\"0 0 {:.0} {:.0}\">",
        w + 2.0,
        total_h,
        w + 2.0,
        total_h
    );
    draw(m, 0, 1.0, 1.0, &mut memo, &mut out);
    for (k, d) in m.devices.iter().enumerate() {
        let anchor = m.objects[d.local_object].label();
        let _ = write!(
            out,
            "<text x=\"4\" y=\"{:.1}\" font-size=\"11\" font-family=\"monospace\">{} {} ({}) near {} [PUs {}]</text>",
            h + 18.0 + 16.0 * k as f64,
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
}
