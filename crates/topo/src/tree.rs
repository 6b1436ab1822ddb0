//! Level-by-level view of the tree for the mapping engine: which levels
//! exist, how many children each object has, and whether the tree is
//! symmetric (TreeMatch-style algorithms need to know when it is not).

use crate::model::{Machine, ObjectKind};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Level {
    pub depth: u32,
    /// Label of the objects at this depth (`Package`, `L3`, `Core`, ...);
    /// several labels joined by `/` in asymmetric trees.
    pub name: String,
    /// Number of objects at this depth.
    pub objects: usize,
    /// Smallest and largest number of normal children of those objects.
    pub min_arity: usize,
    pub max_arity: usize,
}

impl Level {
    /// The arity when every object of the level has the same one.
    pub fn arity(&self) -> Option<usize> {
        (self.min_arity == self.max_arity).then_some(self.min_arity)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeView {
    pub levels: Vec<Level>,
    /// False when arities differ within a level or PUs sit at several depths.
    pub symmetric: bool,
    /// Human-readable reasons why the tree is asymmetric (empty otherwise).
    pub asymmetry: Vec<String>,
}

impl TreeView {
    pub fn new(machine: &Machine) -> Self {
        let max_depth = machine.objects.iter().map(|o| o.depth).max().unwrap_or(0);
        let mut levels = Vec::new();
        let mut asymmetry = Vec::new();
        for depth in 0..=max_depth {
            let objs: Vec<_> = machine
                .objects
                .iter()
                .filter(|o| o.depth == depth)
                .collect();
            if objs.is_empty() {
                continue;
            }
            let mut names: Vec<String> = objs.iter().map(|o| short_name(o)).collect();
            names.sort();
            names.dedup();
            let arities: Vec<usize> = objs.iter().map(|o| o.children.len()).collect();
            let min_arity = *arities.iter().min().unwrap_or(&0);
            let max_arity = *arities.iter().max().unwrap_or(&0);
            if min_arity != max_arity {
                asymmetry.push(format!(
                    "depth {depth} ({}): arity varies from {min_arity} to {max_arity}",
                    names.join("/")
                ));
            }
            if names.len() > 1 {
                asymmetry.push(format!("depth {depth} mixes {}", names.join(" and ")));
            }
            levels.push(Level {
                depth,
                name: names.join("/"),
                objects: objs.len(),
                min_arity,
                max_arity,
            });
        }
        let mut pu_depths: Vec<u32> = machine
            .objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Pu)
            .map(|o| o.depth)
            .collect();
        pu_depths.sort_unstable();
        pu_depths.dedup();
        if pu_depths.len() > 1 {
            asymmetry.push(format!("PUs sit at depths {pu_depths:?}"));
        }
        TreeView {
            symmetric: asymmetry.is_empty(),
            levels,
            asymmetry,
        }
    }

    /// Arities from the root down, skipping levels where every object has a
    /// single child (e.g. `L2 + L1d + L1i + Core` chains): the compact
    /// description a TreeMatch-style algorithm works on. `None` arities (the
    /// tree is asymmetric at that level) are reported as the maximum.
    pub fn significant_arities(&self) -> Vec<(String, usize)> {
        self.levels
            .iter()
            .filter(|l| l.max_arity > 1)
            .map(|l| (l.name.clone(), l.max_arity))
            .collect()
    }
}

fn short_name(o: &crate::model::Object) -> String {
    let label = o.label();
    label.split(" L#").next().unwrap_or(&label).to_string()
}
