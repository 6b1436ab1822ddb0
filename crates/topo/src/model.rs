//! The owned, serializable machine model.
//!
//! A [`Machine`] is a plain-data copy of what hwloc reports: the tree of
//! normal objects (machine, packages, dies, groups, caches, cores, PUs), the
//! NUMA nodes attached to it, NUMA distance matrices and I/O devices with
//! their locality. It owns no hwloc handle, so it can be sent between threads,
//! written to JSON and read back on another machine.

use crate::puset::PuSet;
use serde::{Deserialize, Serialize};

/// Version tag of the JSON schema written by [`Machine`]; bumped on any
/// incompatible change (documented in docs/formats/machine-json.md).
pub const MACHINE_SCHEMA: &str = "topocomm.machine/1";

/// Where a machine model came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Origin {
    /// Discovered on the running machine.
    Live { hostname: String },
    /// Loaded from an hwloc XML file.
    Xml { path: String },
    /// Built from an hwloc synthetic description.
    Synthetic { description: String },
    /// Read back from a topocomm machine JSON file.
    Json { path: String },
}

/// Type of a normal (non-memory, non-I/O) object of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectKind {
    Machine,
    Package,
    Die,
    Group,
    /// A CPU cache; see [`CacheInfo`] for its level and type.
    Cache,
    Core,
    Pu,
}

/// What a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheType {
    Unified,
    Data,
    Instruction,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheInfo {
    pub level: u8,
    #[serde(rename = "type")]
    pub cache_type: CacheType,
    /// Size in bytes (0 when hwloc does not know it).
    pub size: u64,
    /// Line size in bytes (0 when unknown).
    pub line_size: u32,
}

/// One normal object of the tree. Objects are stored in depth-first order,
/// so a parent always comes before its children.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    pub kind: ObjectKind,
    /// Depth in the hwloc tree (root = 0).
    pub depth: u32,
    /// hwloc logical index among the objects of the same hwloc level.
    pub logical_index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_index: Option<u32>,
    /// hwloc subtype (e.g. `Cluster` for a Group, `Module` ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    /// For groups: hwloc's group depth (the `N` of lstopo's `GroupN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheInfo>,
    /// Index of the parent in [`Machine::objects`] (None for the root).
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// PUs (OS indexes) below this object.
    pub cpuset: PuSet,
    /// OS indexes of the NUMA nodes attached to this object as memory children.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub numa_nodes: Vec<u32>,
}

impl Object {
    /// Short human label in lstopo's style: `Package L#1`, `L2 L#4 (256KB)`.
    pub fn label(&self) -> String {
        let base = match (self.kind, &self.cache) {
            (ObjectKind::Cache, Some(c)) => match c.cache_type {
                CacheType::Instruction => format!("L{}i", c.level),
                CacheType::Data => format!("L{}d", c.level),
                CacheType::Unified => format!("L{}", c.level),
            },
            (ObjectKind::Group, _) => match &self.subtype {
                Some(s) => format!("Group{}({s})", self.group_depth.unwrap_or(0)),
                None => format!("Group{}", self.group_depth.unwrap_or(0)),
            },
            (ObjectKind::Machine, _) => "Machine".into(),
            (ObjectKind::Package, _) => "Package".into(),
            (ObjectKind::Die, _) => "Die".into(),
            (ObjectKind::Core, _) => "Core".into(),
            (ObjectKind::Pu, _) => "PU".into(),
            (ObjectKind::Cache, None) => "Cache".into(),
        };
        let mut s = format!("{base} L#{}", self.logical_index);
        if self.kind == ObjectKind::Pu {
            if let Some(os) = self.os_index {
                s.push_str(&format!(" (P#{os})"));
            }
        }
        if let Some(c) = &self.cache {
            if c.size > 0 {
                s.push_str(&format!(" ({})", crate::human_bytes(c.size)));
            }
        }
        s
    }

    pub fn is_instruction_cache(&self) -> bool {
        matches!(&self.cache, Some(c) if c.cache_type == CacheType::Instruction)
    }
}

/// A processing unit (hardware thread).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pu {
    pub os_index: u32,
    pub logical_index: u32,
    /// Index of this PU's object in [`Machine::objects`].
    pub object: usize,
    /// OS index of the nearest NUMA node (the one whose cpuset contains this
    /// PU and that is attached deepest in the tree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Logical index of the package holding this PU, if packages are reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<u32>,
    /// Logical index of the core holding this PU, if cores are reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub os_index: u32,
    pub logical_index: u32,
    /// Local memory in bytes (0 when unknown).
    pub memory: u64,
    /// Object (index in [`Machine::objects`]) this node is attached to.
    pub attached_to: usize,
    pub cpuset: PuSet,
}

/// A distance matrix between NUMA nodes (or other objects) as hwloc reports
/// it, e.g. the ACPI SLIT `NUMALatency` matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DistanceMatrix {
    pub name: String,
    /// Objects in row/column order, as `Type:os_index` (e.g. `NUMANode:1`).
    pub objects: Vec<String>,
    /// Row-major `objects.len()^2` values.
    pub values: Vec<u64>,
    /// `latency`, `bandwidth` or `other` as hwloc's kind says.
    pub means: String,
}

/// Kind of an I/O device, from hwloc's OS device types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Network,
    OpenFabrics,
    Gpu,
    Coprocessor,
    Storage,
    Dma,
    Memory,
    Other,
}

impl DeviceKind {
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Network => "network",
            DeviceKind::OpenFabrics => "openfabrics",
            DeviceKind::Gpu => "gpu",
            DeviceKind::Coprocessor => "coprocessor",
            DeviceKind::Storage => "storage",
            DeviceKind::Dma => "dma",
            DeviceKind::Memory => "memory",
            DeviceKind::Other => "other",
        }
    }
}

/// An I/O (OS) device such as `eth0`, `mlx5_0` or `cuda0`, with its locality.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub kind: DeviceKind,
    /// hwloc subtype, e.g. `CUDA`, `OpenCL`, `Disk`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    pub name: String,
    /// PCI address `dddd:bb:dd.f` of the PCI device it belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// Index in [`Machine::objects`] of the first non-I/O ancestor.
    pub local_object: usize,
    /// PUs the device is local to.
    pub cpuset: PuSet,
    /// NUMA nodes (OS indexes) nearest to the device.
    pub numa_nodes: Vec<u32>,
    /// Logical index of the package the device hangs off, if a single one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<u32>,
}

/// The whole machine model. Build one with [`crate::load`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub schema: String,
    pub origin: Origin,
    /// Stable hash of the structure (see [`crate::fingerprint`]).
    pub fingerprint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    pub objects: Vec<Object>,
    /// PUs in logical (topology) order.
    pub pus: Vec<Pu>,
    pub numa_nodes: Vec<NumaNode>,
    #[serde(default)]
    pub distances: Vec<DistanceMatrix>,
    #[serde(default)]
    pub devices: Vec<Device>,
    /// OS index -> position in `pus`, built on the first look-up
    /// ([`Machine::pu_position`]); not serialized.
    #[serde(skip)]
    pub pu_index: crate::pu_index::PuIndexCell,
}

impl Machine {
    /// The root object (index 0 by construction).
    pub fn root(&self) -> &Object {
        &self.objects[0]
    }

    /// Position in [`Machine::pus`] (logical order) of the PU with this OS index.
    /// O(1): an index built once per machine (dense table or hash map;
    /// `pu_index.rs`), on the first look-up. Code that edits `pus`
    /// afterwards calls [`Machine::reindex`]; a position that no longer
    /// holds the PU asked for falls back to a scan rather than lie.
    pub fn pu_position(&self, os_index: u32) -> Option<usize> {
        let i = self.pu_index.get_or_build(&self.pus).get(os_index)?;
        if self.pus.get(i).is_some_and(|p| p.os_index == os_index) {
            Some(i)
        } else {
            self.pus.iter().position(|p| p.os_index == os_index)
        }
    }

    /// Drops the OS index -> position index after `pus` was edited (the
    /// next look-up builds it again).
    pub fn reindex(&mut self) {
        self.pu_index = Default::default();
    }

    /// Same as [`Machine::pu_position`] but with an error naming the PU and
    /// the PUs that do exist.
    pub fn require_pu(&self, os_index: u32) -> Result<usize, crate::TopoError> {
        self.pu_position(os_index)
            .ok_or_else(|| crate::TopoError::NoSuchPu {
                os_index,
                available: PuSet::from_indexes(self.pus.iter().map(|p| p.os_index)).to_string(),
            })
    }

    /// Ancestors of an object from the root down to the object itself.
    pub fn ancestry(&self, object: usize) -> Vec<usize> {
        let mut chain = vec![object];
        let mut cur = object;
        while let Some(p) = self.objects[cur].parent {
            chain.push(p);
            cur = p;
        }
        chain.reverse();
        chain
    }

    /// Number of objects of a given kind.
    pub fn count(&self, kind: ObjectKind) -> usize {
        self.objects.iter().filter(|o| o.kind == kind).count()
    }

    /// Largest unified or data cache size at a level, if any cache of that
    /// level is reported.
    pub fn cache_size(&self, level: u8) -> Option<u64> {
        self.objects
            .iter()
            .filter_map(|o| o.cache.as_ref())
            .filter(|c| c.level == level && c.cache_type != CacheType::Instruction)
            .map(|c| c.size)
            .max()
    }

    /// Size of the last-level cache (largest level present), if any.
    pub fn llc_size(&self) -> Option<u64> {
        (1..=5).rev().find_map(|l| self.cache_size(l))
    }

    /// Cache line size (largest reported, 64 if unknown).
    pub fn cache_line(&self) -> u32 {
        self.objects
            .iter()
            .filter_map(|o| o.cache.as_ref())
            .map(|c| c.line_size)
            .max()
            .filter(|&l| l > 0)
            .unwrap_or(64)
    }

    /// Writes the model as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("machine model is always serializable")
    }
}
