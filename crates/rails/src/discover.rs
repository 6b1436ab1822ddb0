//! Which I/O devices of a machine are rails, one per PCI function.
//!
//! hwloc reports one OS device per software handle, so one PCI function may
//! show up several times: an InfiniBand HCA is both `mlx5_0` (verbs) and
//! `ib0` (IPoIB netdev), a GPU is `cuda0`, `nvml0`, `card0` and `opencl0d0`.
//! Traffic competes for the PCI function, not for the handle, so a rail is a
//! PCI function and the other handles are its aliases.

use serde::Serialize;
use std::collections::BTreeMap;
use topocomm_topo::{Device, DeviceKind, Machine, PuSet};

/// What a rail is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RailKind {
    /// A network interface: large messages are split across these.
    Nic,
    /// A GPU: chosen per local rank (`CUDA_VISIBLE_DEVICES`).
    Gpu,
}

/// How MPI/UCX reach a network rail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NicTransport {
    /// An OpenFabrics (verbs) device: InfiniBand, RoCE, usNIC, ...
    Verbs,
    /// A plain IP interface (only with [`DiscoverOptions::ethernet`]).
    Tcp,
}

/// Whose runtime numbers a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuVendor {
    /// CUDA / NVML devices: `CUDA_VISIBLE_DEVICES`.
    Nvidia,
    /// ROCm SMI devices: `ROCR_VISIBLE_DEVICES`.
    Amd,
}

/// One rail: a PCI function with its locality.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rail {
    /// The handle MPI/UCX/CUDA know it by (`mlx5_0`, `cuda0`, `nvml3`).
    pub name: String,
    pub kind: RailKind,
    /// The hwloc kind of the device named `name`.
    pub device_kind: &'static str,
    /// The other OS devices of the same PCI function (`ib0`, `card0`, ...).
    pub aliases: Vec<String>,
    /// IP interfaces of the same PCI function (`ib0`, `eth2`).
    pub netdevs: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// PUs the rail is local to.
    pub cpuset: PuSet,
    /// NUMA nodes (OS indexes) nearest to the rail.
    pub numa_nodes: Vec<u32>,
    /// Logical index of the package it hangs off, if a single one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<NicTransport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<GpuVendor>,
    /// For GPUs: the index the vendor runtime gives it when devices are
    /// numbered in PCI bus order (`CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_index: Option<u32>,
}

impl Rail {
    /// The name in `UCX_NET_DEVICES` syntax: `mlx5_0:1` (device:port) for
    /// verbs devices, the interface name for TCP rails. The port is 1: the
    /// machine model does not keep hwloc's port attributes, and port 1 is
    /// the only or first port of every HCA.
    pub fn ucx_name(&self) -> String {
        match self.transport {
            Some(NicTransport::Verbs) => format!("{}:1", self.name),
            _ => self.name.clone(),
        }
    }

    /// Whether `name` is this rail's name or one of its aliases.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.iter().any(|a| a == name)
    }
}

/// A device that looks like a rail but is not used as one, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ignored {
    pub name: String,
    pub reason: String,
}

/// The rails of a machine, network rails and GPUs apart, each in PCI order.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rails {
    pub nics: Vec<Rail>,
    pub gpus: Vec<Rail>,
    pub ignored: Vec<Ignored>,
}

impl Rails {
    pub fn is_empty(&self) -> bool {
        self.nics.is_empty() && self.gpus.is_empty()
    }

    /// One line saying why there are no rails (for "no devices" notices).
    pub fn absence_reason(&self) -> String {
        let mut s = String::from(
            "hwloc reports no OpenFabrics device (InfiniBand/RoCE/usNIC HCA) and no CUDA/NVML/ROCm GPU",
        );
        if !self.ignored.is_empty() {
            let list: Vec<String> = self
                .ignored
                .iter()
                .map(|i| format!("{} ({})", i.name, i.reason))
                .collect();
            s.push_str(&format!("; ignored: {}", list.join(", ")));
        }
        s
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoverOptions {
    /// Use plain IP interfaces (Ethernet) as TCP rails too. Off by default:
    /// with no measured table they would get the same weight as an HCA.
    pub ethernet: bool,
}

fn gpu_vendor(d: &Device) -> Option<GpuVendor> {
    let sub = d.subtype.as_deref().unwrap_or("");
    let by_name = |p: &str| {
        d.name
            .strip_prefix(p)
            .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
    };
    if sub == "CUDA" || sub == "NVML" || by_name("cuda") || by_name("nvml") {
        Some(GpuVendor::Nvidia)
    } else if sub == "RSMI" || by_name("rsmi") {
        Some(GpuVendor::Amd)
    } else {
        None
    }
}

/// Preference among the handles of one GPU: the CUDA name first (what CUDA
/// programs print), then NVML/RSMI.
fn gpu_rank(d: &Device) -> u8 {
    match d.subtype.as_deref() {
        Some("CUDA") => 0,
        _ if d.name.starts_with("cuda") => 0,
        _ => 1,
    }
}

/// The rails of `m`.
pub fn discover(m: &Machine, opts: &DiscoverOptions) -> Rails {
    // Group by PCI function; a device without one is its own group.
    let mut groups: BTreeMap<String, Vec<&Device>> = BTreeMap::new();
    for d in &m.devices {
        let key = d
            .pci_bus_id
            .clone()
            .unwrap_or_else(|| format!("~{}", d.name));
        groups.entry(key).or_default().push(d);
    }
    let mut out = Rails::default();
    for devs in groups.values() {
        let mut devs = devs.clone();
        devs.sort_by(|a, b| a.name.cmp(&b.name));
        let netdevs: Vec<String> = devs
            .iter()
            .filter(|d| d.kind == DeviceKind::Network)
            .map(|d| d.name.clone())
            .collect();
        let fabric = devs.iter().find(|d| d.kind == DeviceKind::OpenFabrics);
        let gpu = devs
            .iter()
            .filter(|d| gpu_vendor(d).is_some())
            .min_by_key(|d| gpu_rank(d));
        if let Some(f) = fabric {
            out.nics.push(rail(f, &devs, &netdevs, RailKind::Nic));
            out.nics.last_mut().unwrap().transport = Some(NicTransport::Verbs);
        } else if let Some(n) = devs.iter().find(|d| d.kind == DeviceKind::Network) {
            if opts.ethernet {
                out.nics.push(rail(n, &devs, &netdevs, RailKind::Nic));
                out.nics.last_mut().unwrap().transport = Some(NicTransport::Tcp);
            } else {
                out.ignored.push(Ignored {
                    name: netdevs.join("/"),
                    reason: "plain IP interface, not an HCA; --ethernet uses it as a TCP rail"
                        .into(),
                });
            }
        }
        if let Some(g) = gpu {
            out.gpus.push(rail(g, &devs, &[], RailKind::Gpu));
            out.gpus.last_mut().unwrap().vendor = gpu_vendor(g);
        } else if let Some(g) = devs
            .iter()
            .find(|d| matches!(d.kind, DeviceKind::Gpu | DeviceKind::Coprocessor))
        {
            out.ignored.push(Ignored {
                name: g.name.clone(),
                reason: "accelerator without a CUDA/NVML/ROCm handle".into(),
            });
        }
    }
    // GPU indexes in PCI bus order per vendor: what CUDA numbers them with
    // CUDA_DEVICE_ORDER=PCI_BUS_ID (and ROCm always does).
    for vendor in [GpuVendor::Nvidia, GpuVendor::Amd] {
        let same = out.gpus.iter_mut().filter(|g| g.vendor == Some(vendor));
        for (i, g) in (0u32..).zip(same) {
            g.gpu_index = Some(i);
        }
    }
    out
}

fn rail(main: &Device, group: &[&Device], netdevs: &[String], kind: RailKind) -> Rail {
    Rail {
        name: main.name.clone(),
        kind,
        device_kind: main.kind.name(),
        aliases: group
            .iter()
            .filter(|d| d.name != main.name)
            .map(|d| d.name.clone())
            .collect(),
        netdevs: netdevs.to_vec(),
        pci_bus_id: main.pci_bus_id.clone(),
        cpuset: main.cpuset.clone(),
        numa_nodes: main.numa_nodes.clone(),
        package: main.package,
        transport: None,
        vendor: None,
        gpu_index: None,
    }
}
