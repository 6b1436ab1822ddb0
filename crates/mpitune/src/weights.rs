//! One weight per locality class. An MPI takes one value for all pairs, so
//! when the machine has several classes the objective is a weighted mean:
//! bytes each class carries for this application (communication matrix +
//! placement), or equal weights over the classes present.

use std::collections::BTreeMap;
use std::path::Path;
use topocomm_map::output::parse_perm;
use topocomm_map::parse::read_inputs;
use topocomm_topo::{pair_class, ClassMatrix, Machine};

/// A class to measure: its name, representative pair and weight.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ClassWeight {
    pub class: String,
    pub pair: (u32, u32),
    pub weight: f64,
    /// Bytes of the matrix this class carries (when weighted by one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<f64>,
}

/// Equal weights over the representative pair of every class present.
pub fn equal(m: &Machine) -> Vec<ClassWeight> {
    ClassMatrix::new(m)
        .classes()
        .iter()
        .filter(|c| c.class.to_string() != "self")
        .map(|c| ClassWeight {
            class: c.class.to_string(),
            pair: c.representative,
            weight: 1.0,
            bytes: None,
        })
        .collect()
}

/// Weights from a communication matrix (any format `topocomm map` reads)
/// and a perm file (`<node> <pu>` per rank): bytes between ranks placed on
/// the same node, summed per class of their PU pair. Traffic between nodes
/// does not use shared memory and is left out; classes with no traffic are
/// dropped (not measured).
pub fn from_matrix(m: &Machine, matrix: &Path, map: &Path) -> Result<Vec<ClassWeight>, String> {
    let parsed = read_inputs(&[matrix.to_path_buf()], None).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(map).map_err(|e| format!("{}: {e}", map.display()))?;
    let slots = parse_perm(&map.display().to_string(), &text).map_err(|e| e.to_string())?;
    let mat = parsed.matrix;
    if slots.len() < mat.n {
        return Err(format!(
            "{}: {} ranks placed, but the matrix {} has {} ranks",
            map.display(),
            slots.len(),
            matrix.display(),
            mat.n
        ));
    }
    let mut bytes: BTreeMap<String, f64> = BTreeMap::new();
    for e in &mat.edges {
        let (a, b) = (slots[e.src as usize], slots[e.dst as usize]);
        if a.node != b.node || a.pu == b.pu {
            continue;
        }
        let c = pair_class(m, a.pu, b.pu).map_err(|err| {
            format!(
                "{}: ranks {} and {} on PUs {} and {}: {err}",
                map.display(),
                e.src,
                e.dst,
                a.pu,
                b.pu
            )
        })?;
        *bytes.entry(c.to_string()).or_default() += e.bytes;
    }
    let total: f64 = bytes.values().sum();
    if total <= 0.0 {
        return Err(format!(
            "{} with {}: no traffic between two PUs of one node; nothing for shared memory to tune",
            matrix.display(),
            map.display()
        ));
    }
    let mut out: Vec<ClassWeight> = equal(m)
        .into_iter()
        .filter_map(|mut c| {
            let b = *bytes.get(&c.class)?;
            c.weight = b / total;
            c.bytes = Some(b);
            Some(c)
        })
        .collect();
    out.sort_by(|a, b| b.weight.total_cmp(&a.weight));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use topocomm_topo::TopologySpec;

    #[test]
    fn matrix_bytes_become_class_weights() {
        // 2 packages x 2 cores: classes l3-ish within a package and
        // machine across.
        let spec: TopologySpec = "synthetic:pack:2 l3:1 core:2 pu:1".parse().unwrap();
        let m = topocomm_topo::load(&spec).unwrap();
        let dir = std::env::temp_dir().join(format!("tc-mpitune-w-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mat = dir.join("m.csv");
        let map = dir.join("m.perm");
        // rank0-rank1 same package (PUs 0,1): 300 B; rank0-rank2 across: 100 B.
        std::fs::write(&mat, "src,dst,bytes,msgs\n0,1,300,1\n0,2,100,1\n").unwrap();
        std::fs::write(&map, "0 0\n0 1\n0 2\n").unwrap();
        let w = from_matrix(&m, &mat, &map).unwrap();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!((w[0].weight - 0.75).abs() < 1e-9);
        assert!((w[1].weight - 0.25).abs() < 1e-9);
        assert_ne!(w[0].class, w[1].class);
        assert_eq!(equal(&m).len(), 2);
        // Too few ranks placed: one-line error naming the map file.
        std::fs::write(&map, "0 0\n").unwrap();
        let e = from_matrix(&m, &mat, &map).unwrap_err();
        assert!(e.contains("m.perm") && e.contains("ranks"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
