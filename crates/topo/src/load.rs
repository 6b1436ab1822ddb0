//! Building a [`Machine`] from hwloc: the live machine, an hwloc XML file, an
//! hwloc synthetic description, or a topocomm machine JSON file.

use crate::model::*;
use crate::puset::PuSet;
use crate::xmlcheck::check_hwloc_xml;
use crate::TopoError;
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::{CacheType as HwCacheType, OSDeviceType, ObjectType};
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::TypeFilter;
use hwlocality::topology::Topology;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Name of the environment variable that selects the topology when no
/// `--topology` option is given.
pub const TOPOLOGY_ENV: &str = "TOPOCOMM_TOPOLOGY";

/// What to load a machine model from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologySpec {
    /// The machine this process runs on.
    Live,
    /// An hwloc XML file (v1 or v2 format).
    Xml(PathBuf),
    /// An hwloc synthetic description such as `pack:2 numa:2 l3:2 core:4 pu:2`.
    Synthetic(String),
    /// A topocomm machine JSON file (as written by `topocomm topo --json`).
    Json(PathBuf),
}

impl FromStr for TopologySpec {
    type Err = TopoError;

    /// `live` (or empty), `synthetic:DESC`, or a file path; `.json` files are
    /// read as topocomm machine models, anything else as hwloc XML.
    fn from_str(s: &str) -> Result<Self, TopoError> {
        let s = s.trim();
        if s.is_empty() || s == "live" {
            return Ok(TopologySpec::Live);
        }
        if let Some(desc) = s.strip_prefix("synthetic:") {
            return Ok(TopologySpec::Synthetic(desc.trim().to_string()));
        }
        let path = PathBuf::from(s);
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Ok(TopologySpec::Json(path))
        } else {
            Ok(TopologySpec::Xml(path))
        }
    }
}

impl std::fmt::Display for TopologySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TopologySpec::Live => f.write_str("live"),
            TopologySpec::Xml(p) | TopologySpec::Json(p) => write!(f, "{}", p.display()),
            TopologySpec::Synthetic(d) => write!(f, "synthetic:{d}"),
        }
    }
}

/// Loads a machine model.
pub fn load(spec: &TopologySpec) -> Result<Machine, TopoError> {
    match spec {
        TopologySpec::Live => {
            let topo = builder("the live machine")?
                .build()
                .map_err(|e| hwloc_err("the live machine", e))?;
            let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "localhost".into());
            Ok(convert(&topo, Origin::Live { hostname }))
        }
        TopologySpec::Xml(path) => {
            let text = read_file(path)?;
            let shown = path.display().to_string();
            let described = check_hwloc_xml(&shown, &text)?;
            let input = format!("topology file '{shown}'");
            let topo = builder(&input)?
                .from_xml(&text)
                .map_err(|e| TopoError::BadXml {
                    path: shown.clone(),
                    reason: format!("hwloc rejected it ({})", errno_text(&e.to_string())),
                })?
                .build()
                .map_err(|e| TopoError::BadXml {
                    path: shown.clone(),
                    reason: format!(
                        "hwloc rejected its content ({}); `lstopo --input {shown}` prints hwloc's own diagnostic",
                        errno_text(&e.to_string())
                    ),
                })?;
            let m = convert(
                &topo,
                Origin::Xml {
                    path: shown.clone(),
                },
            );
            // hwloc checks these invariants only in debug builds, where a
            // violation abort()s the process; a release build loads the
            // file as it is and the model would silently be wrong.
            let bad = |reason: String| TopoError::BadXml {
                path: shown.clone(),
                reason,
            };
            check_sets(&m).map_err(bad)?;
            if m.pus.len() != described {
                return Err(bad(format!(
                    "it describes {described} PU objects but hwloc kept {}: the cpusets of the others contradict their ancestors' (hwloc drops such PUs without a word)",
                    m.pus.len()
                )));
            }
            Ok(m)
        }
        TopologySpec::Synthetic(desc) => {
            check_synthetic(desc)?;
            if let Some(m) = crate::synthetic::build(desc) {
                return Ok(m);
            }
            synthetic_by_hwloc(desc)
        }
        TopologySpec::Json(path) => {
            let text = read_file(path)?;
            let shown = path.display().to_string();
            let m: Machine = serde_json::from_str(&text).map_err(|e| TopoError::BadJson {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            if m.schema != MACHINE_SCHEMA {
                return Err(TopoError::BadJson {
                    path: shown,
                    reason: format!("schema is '{}', expected '{MACHINE_SCHEMA}'", m.schema),
                });
            }
            validate(&m).map_err(|reason| TopoError::BadJson {
                path: shown.clone(),
                reason,
            })?;
            Ok(Machine {
                origin: Origin::Json { path: shown },
                ..m
            })
        }
    }
}

/// A synthetic description built by hwloc (the native builder in
/// `synthetic.rs` covers the plain grammar; this covers the rest).
pub(crate) fn synthetic_by_hwloc(desc: &str) -> Result<Machine, TopoError> {
    let desc = &desc.to_string();
    let topo = builder("a synthetic topology")?
                .from_synthetic(desc)
                .map_err(|_| TopoError::Synthetic {
                    description: desc.clone(),
                    reason: "hwloc rejected it; levels are TYPE:COUNT from the root down, with TYPE among pack, numa, die, group, l1..l5, core, pu (e.g. 'pack:2 numa:2 l3:2 core:4 pu:2')".into(),
                })?
                .build()
                .map_err(|e| TopoError::Synthetic {
                    description: desc.clone(),
                    reason: e.to_string(),
                })?;
    Ok(convert(
        &topo,
        Origin::Synthetic {
            description: desc.clone(),
        },
    ))
}

/// Loads the topology named by `spec`, or by `$TOPOCOMM_TOPOLOGY`, or the live machine.
pub fn load_default(spec: Option<&str>) -> Result<Machine, TopoError> {
    let from_env = std::env::var(TOPOLOGY_ENV).ok();
    let text = spec.or(from_env.as_deref()).unwrap_or("live");
    load(&text.parse()?)
}

/// The one-line warning for a configuration file (a topology, a rules
/// file) that users other than its owner may write: whoever can change it
/// changes what the jobs that read it do. `None` when only its owner (and
/// group) may write it, or when it cannot be read.
pub fn others_can_write(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o002 != 0).then(|| {
        format!(
            "topocomm: warning: {} is writable by every user (mode {:04o}); anyone may change what this job does",
            path.display(),
            mode & 0o7777
        )
    })
}

fn read_file(path: &Path) -> Result<String, TopoError> {
    if let Some(w) = others_can_write(path) {
        eprintln!("{w}");
    }
    let bytes = std::fs::read(path).map_err(|e| TopoError::Io {
        path: path.display().to_string(),
        reason: match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        },
    })?;
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    String::from_utf8(bytes).map_err(|_| {
        let (path, reason) = (
            path.display().to_string(),
            "the file is not UTF-8 text".into(),
        );
        // Named as what it was read as: a machine JSON is not "hwloc XML".
        if json {
            TopoError::BadJson { path, reason }
        } else {
            TopoError::BadXml { path, reason }
        }
    })
}

fn hwloc_err(input: &str, e: impl std::fmt::Display) -> TopoError {
    TopoError::Hwloc {
        input: input.to_string(),
        reason: errno_text(&e.to_string()),
    }
}

/// hwlocality's `... failed with errno Some(Errno { code: 22, description:
/// Some("Invalid argument") })` as `errno 22, Invalid argument`; any other
/// text on one line.
fn errno_text(s: &str) -> String {
    let code = s
        .split_once("code: ")
        .and_then(|(_, r)| r.split(|c: char| !c.is_ascii_digit()).next())
        .filter(|c| !c.is_empty());
    let desc = s
        .split_once("description: Some(\"")
        .and_then(|(_, r)| r.split_once('"'))
        .map(|(d, _)| d);
    if s.contains("errno None") {
        return "hwloc gave no reason".into();
    }
    match (code, desc) {
        (Some(c), Some(d)) => format!("errno {c}, {d}"),
        (Some(c), None) => format!("errno {c}"),
        _ => s.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

fn builder(input: &str) -> Result<hwlocality::topology::builder::TopologyBuilder, TopoError> {
    Topology::builder()
        .with_io_type_filter(TypeFilter::KeepImportant)
        .map_err(|e| hwloc_err(input, e))
}

/// Syntax check of a synthetic description, so that the common mistakes get
/// a precise message (hwloc only says "invalid").
fn check_synthetic(desc: &str) -> Result<(), TopoError> {
    let err = |reason: String| TopoError::Synthetic {
        description: desc.to_string(),
        reason,
    };
    if desc.trim().is_empty() {
        return Err(err(
            "it is empty; expected levels like 'pack:2 core:4 pu:2'".into(),
        ));
    }
    // Strip attribute blocks `(...)` before splitting into levels.
    let mut plain = String::new();
    let mut paren = 0i32;
    for c in desc.chars() {
        match c {
            '(' => paren += 1,
            ')' => paren -= 1,
            _ if paren == 0 => plain.push(c),
            _ => {}
        }
        if paren < 0 {
            return Err(err("unbalanced ')'".into()));
        }
    }
    if paren != 0 {
        return Err(err("unbalanced '('".into()));
    }
    let mut total: u64 = 1;
    for token in plain.split_whitespace() {
        let count = match token.split_once(':') {
            Some((ty, count)) => {
                if ty.is_empty() {
                    return Err(err(format!("level '{token}' has no type before ':'")));
                }
                count
            }
            None => token,
        };
        let n: u64 = count.parse().map_err(|_| {
            err(format!(
                "level '{token}' does not end with a positive count"
            ))
        })?;
        if n == 0 {
            return Err(err(format!("level '{token}' has a count of 0")));
        }
        total = total.saturating_mul(n);
    }
    if total > 1 << 20 {
        return Err(err(format!(
            "it describes {total} leaves; at most 1048576 are supported"
        )));
    }
    Ok(())
}

/// Structural checks of a deserialized model (indexes in range, parents
/// before children), so that a hand-edited JSON cannot cause a panic later.
fn validate(m: &Machine) -> Result<(), String> {
    let n = m.objects.len();
    if n == 0 {
        return Err("it has no objects".into());
    }
    for (i, o) in m.objects.iter().enumerate() {
        if let Some(p) = o.parent {
            if p >= i {
                return Err(format!("objects[{i}].parent = {p} does not come before it"));
            }
        } else if i != 0 {
            return Err(format!("objects[{i}] has no parent but is not the root"));
        }
        if let Some(&c) = o.children.iter().find(|&&c| c >= n || c <= i) {
            return Err(format!("objects[{i}] has an invalid child index {c}"));
        }
    }
    for (i, p) in m.pus.iter().enumerate() {
        if p.object >= n || m.objects[p.object].kind != ObjectKind::Pu {
            return Err(format!("pus[{i}].object does not point to a PU object"));
        }
    }
    check_sets(m)?;
    for (i, d) in m.devices.iter().enumerate() {
        if d.local_object >= n {
            return Err(format!("devices[{i}].local_object is out of range"));
        }
    }
    for (i, nn) in m.numa_nodes.iter().enumerate() {
        if nn.attached_to >= n {
            return Err(format!("numa_nodes[{i}].attached_to is out of range"));
        }
    }
    Ok(())
}

/// The tree's PU sets are consistent: at least one PU, every PU object
/// holds exactly its own PU, once, and every object's PUs are among its
/// parent's. The first violation, in words naming the objects.
fn check_sets(m: &Machine) -> Result<(), String> {
    if m.pus.is_empty() {
        return Err("it has no PU objects".into());
    }
    let mut seen = std::collections::HashSet::new();
    for (i, o) in m.objects.iter().enumerate() {
        if o.kind == ObjectKind::Pu {
            let own = o
                .os_index
                .and_then(|x| (o.cpuset.indexes() == [x]).then_some(x));
            let Some(x) = own else {
                return Err(format!(
                    "PU object {} has cpuset {{{}}}, expected its own index only",
                    o.label(),
                    o.cpuset
                ));
            };
            if !seen.insert(x) {
                return Err(format!("PU P#{x} appears twice"));
            }
        }
        if let Some(p) = o.parent {
            let parent = &m.objects[p];
            if let Some(&x) = o
                .cpuset
                .indexes()
                .iter()
                .find(|&&x| !parent.cpuset.contains(x))
            {
                return Err(format!(
                    "object {} (objects[{i}]) holds PU P#{x}, which its parent {} does not hold",
                    o.label(),
                    parent.label()
                ));
            }
        }
    }
    Ok(())
}

fn puset_of(obj: &TopologyObject) -> PuSet {
    match obj.cpuset() {
        Some(set) => PuSet::from_indexes(set.iter_set().map(|i| usize::from(i) as u32)),
        None => PuSet::default(),
    }
}

fn kind_of(obj: &TopologyObject) -> Option<ObjectKind> {
    Some(match obj.object_type() {
        ObjectType::Machine => ObjectKind::Machine,
        ObjectType::Package => ObjectKind::Package,
        ObjectType::Die => ObjectKind::Die,
        ObjectType::Group => ObjectKind::Group,
        ObjectType::Core => ObjectKind::Core,
        ObjectType::PU => ObjectKind::Pu,
        t if t.is_cpu_cache() => ObjectKind::Cache,
        _ => return None,
    })
}

fn cache_info(obj: &TopologyObject) -> Option<CacheInfo> {
    match obj.attributes() {
        Some(ObjectAttributes::Cache(c)) => Some(CacheInfo {
            level: c.depth() as u8,
            cache_type: match c.cache_type() {
                HwCacheType::Data => CacheType::Data,
                HwCacheType::Instruction => CacheType::Instruction,
                _ => CacheType::Unified,
            },
            size: c.size().map_or(0, |s| s.get()),
            line_size: c.line_size().map_or(0, |s| s.get() as u32),
        }),
        _ => None,
    }
}

struct Converter {
    objects: Vec<Object>,
    numa: Vec<NumaNode>,
    /// hwloc global persistent index -> index in `objects`.
    by_gp: HashMap<u64, usize>,
}

impl Converter {
    fn visit(&mut self, obj: &TopologyObject, parent: Option<usize>) {
        let Some(kind) = kind_of(obj) else { return };
        let idx = self.objects.len();
        self.by_gp.insert(obj.global_persistent_index(), idx);
        let group_depth = match obj.attributes() {
            Some(ObjectAttributes::Group(g)) => Some(g.depth() as u32),
            _ => None,
        };
        self.objects.push(Object {
            kind,
            depth: parent.map_or(0, |p| self.objects[p].depth + 1),
            logical_index: obj.logical_index() as u32,
            os_index: obj.os_index().map(|i| i as u32),
            subtype: obj.subtype().map(|s| s.to_string_lossy().into_owned()),
            group_depth,
            cache: cache_info(obj),
            parent,
            children: Vec::new(),
            cpuset: puset_of(obj),
            numa_nodes: Vec::new(),
        });
        if let Some(p) = parent {
            self.objects[p].children.push(idx);
        }
        // NUMA nodes are memory children, possibly behind memory-side caches.
        let mut pending: Vec<&TopologyObject> = obj.memory_children().collect();
        while let Some(m) = pending.pop() {
            if m.object_type() == ObjectType::NUMANode {
                let os = m.os_index().unwrap_or(0) as u32;
                let memory = match m.attributes() {
                    Some(ObjectAttributes::NUMANode(n)) => n.local_memory().map_or(0, |v| v.get()),
                    _ => 0,
                };
                self.objects[idx].numa_nodes.push(os);
                self.numa.push(NumaNode {
                    os_index: os,
                    logical_index: m.logical_index() as u32,
                    memory,
                    attached_to: idx,
                    cpuset: puset_of(m),
                });
            } else {
                pending.extend(m.memory_children());
            }
        }
        for child in obj.normal_children() {
            self.visit(child, Some(idx));
        }
    }
}

fn convert(topo: &Topology, origin: Origin) -> Machine {
    let mut conv = Converter {
        objects: Vec::new(),
        numa: Vec::new(),
        by_gp: HashMap::new(),
    };
    conv.visit(topo.root_object(), None);
    let Converter {
        objects,
        mut numa,
        by_gp,
    } = conv;
    numa.sort_by_key(|n| n.logical_index);

    let mut pus: Vec<Pu> = objects
        .iter()
        .enumerate()
        .filter(|(_, o)| o.kind == ObjectKind::Pu)
        .map(|(i, o)| Pu {
            os_index: o.os_index.unwrap_or(o.logical_index),
            logical_index: o.logical_index,
            object: i,
            numa_node: None,
            package: None,
            core: None,
        })
        .collect();
    pus.sort_by_key(|p| p.logical_index);
    for pu in &mut pus {
        let mut cur = Some(pu.object);
        while let Some(i) = cur {
            let o = &objects[i];
            match o.kind {
                ObjectKind::Package if pu.package.is_none() => pu.package = Some(o.logical_index),
                ObjectKind::Core if pu.core.is_none() => pu.core = Some(o.logical_index),
                _ => {}
            }
            if pu.numa_node.is_none() {
                // The deepest attached NUMA node whose cpuset holds this PU.
                pu.numa_node = o.numa_nodes.iter().copied().find(|n| {
                    numa.iter()
                        .any(|x| x.os_index == *n && x.cpuset.contains(pu.os_index))
                });
            }
            cur = o.parent;
        }
    }

    let devices = topo
        .objects_with_type(ObjectType::OSDevice)
        .filter_map(|dev| device_of(dev, &objects, &numa, &by_gp))
        .collect();

    let distances = topo
        .distances(None)
        .map(|list| {
            list.iter()
                .map(|d| DistanceMatrix {
                    name: d
                        .name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "unnamed".into()),
                    objects: d
                        .objects()
                        .map(|o| match o {
                            Some(o) => format!("{}:{}", o.object_type(), o.os_index().unwrap_or(0)),
                            None => "removed".into(),
                        })
                        .collect(),
                    values: d.distances().to_vec(),
                    means: {
                        use hwlocality::object::distance::DistancesKind as K;
                        let k = d.kind();
                        if k.contains(K::MEANS_LATENCY) {
                            "latency".into()
                        } else if k.contains(K::MEANS_BANDWIDTH) {
                            "bandwidth".into()
                        } else {
                            "other".into()
                        }
                    },
                })
                .collect()
        })
        .unwrap_or_default();

    let cpu_model = topo
        .objects_with_type(ObjectType::Package)
        .chain(std::iter::once(topo.root_object()))
        .find_map(|o| {
            o.info("CPUModel")
                .map(|v| v.to_string_lossy().trim().to_string())
        });

    let mut machine = Machine {
        schema: MACHINE_SCHEMA.to_string(),
        origin,
        fingerprint: String::new(),
        cpu_model,
        objects,
        pus,
        numa_nodes: numa,
        distances,
        devices,
        pu_index: Default::default(),
    };
    machine.fingerprint = crate::fingerprint(&machine);
    machine
}

fn device_of(
    dev: &TopologyObject,
    objects: &[Object],
    numa: &[NumaNode],
    by_gp: &HashMap<u64, usize>,
) -> Option<Device> {
    let kind = match dev.attributes() {
        Some(ObjectAttributes::OSDevice(a)) => match a.device_type() {
            OSDeviceType::Network => DeviceKind::Network,
            OSDeviceType::OpenFabrics => DeviceKind::OpenFabrics,
            OSDeviceType::GPU => DeviceKind::Gpu,
            OSDeviceType::CoProcessor => DeviceKind::Coprocessor,
            OSDeviceType::Storage => DeviceKind::Storage,
            OSDeviceType::DMA => DeviceKind::Dma,
            _ => DeviceKind::Other,
        },
        _ => DeviceKind::Other,
    };
    let name = dev.name()?.to_string_lossy().into_owned();
    let pci_bus_id = dev.ancestors().find_map(|a| match a.attributes() {
        Some(ObjectAttributes::PCIDevice(p)) => Some(format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            p.domain(),
            p.bus_id(),
            p.bus_device(),
            p.function()
        )),
        _ => None,
    });
    let anchor = dev.first_non_io_ancestor()?;
    let local_object = *by_gp.get(&anchor.global_persistent_index())?;
    let local = &objects[local_object];
    let mut numa_nodes: Vec<u32> = numa
        .iter()
        .filter(|n| {
            !n.cpuset.is_empty() && n.cpuset.indexes().iter().all(|p| local.cpuset.contains(*p))
        })
        .map(|n| n.os_index)
        .collect();
    if numa_nodes.is_empty() {
        // The device hangs below a NUMA node's share (e.g. a cache): take the
        // nodes whose cpuset covers the device's.
        numa_nodes = numa
            .iter()
            .filter(|n| local.cpuset.indexes().iter().all(|p| n.cpuset.contains(*p)))
            .map(|n| n.os_index)
            .collect();
    }
    let mut package = None;
    let mut cur = Some(local_object);
    while let Some(i) = cur {
        if objects[i].kind == ObjectKind::Package {
            package = Some(objects[i].logical_index);
            break;
        }
        cur = objects[i].parent;
    }
    Some(Device {
        kind,
        subtype: dev.subtype().map(|s| s.to_string_lossy().into_owned()),
        name,
        pci_bus_id,
        local_object,
        cpuset: local.cpuset.clone(),
        numa_nodes,
        package,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parsing() {
        assert_eq!("live".parse::<TopologySpec>().unwrap(), TopologySpec::Live);
        assert_eq!(
            "synthetic:pack:2 pu:2".parse::<TopologySpec>().unwrap(),
            TopologySpec::Synthetic("pack:2 pu:2".into())
        );
        assert!(matches!(
            "m.json".parse::<TopologySpec>().unwrap(),
            TopologySpec::Json(_)
        ));
        assert!(matches!(
            "m.xml".parse::<TopologySpec>().unwrap(),
            TopologySpec::Xml(_)
        ));
    }

    #[test]
    fn synthetic_syntax_errors_are_precise() {
        let e = |d: &str| check_synthetic(d).unwrap_err().to_string();
        assert!(e("").contains("empty"));
        assert!(e("pack:x").contains("'pack:x'"));
        assert!(e("pack:0").contains("count of 0"));
        assert!(e("pack:2 (").contains("unbalanced"));
        assert!(e(":4").contains("no type"));
        check_synthetic("pack:2 numa:2 l3:2 core:4 pu:2").unwrap();
    }
}
