//! The network-rail variables of one local rank in the words of each
//! communication stack: the variables that stack really reads to pick and
//! weight several NICs, with the split weights applied where the stack can
//! express them and a note saying so where it cannot (never dropped
//! silently). Where each name comes from (docs/commands/rails.md):
//!
//! - UCX 1.13 (`ucx_info -c`): `UCX_NET_DEVICES`, `UCX_MAX_RNDV_RAILS`,
//!   `UCX_MAX_EAGER_RAILS`, `UCX_IB_PCI_BW` (per-device bandwidth; UCX
//!   splits a rendezvous message over its lanes in proportion to their
//!   bandwidth, so this is where the NUIOA weights go). UCX has no usNIC
//!   transport.
//! - Open MPI 4.1 (`ompi_info --param all all --level 9`): MCA parameters
//!   `btl_openib_if_include`, `btl_tcp_if_include`, `mtl_ofi_provider_include`,
//!   `btl_ofi_provider_include`, and `mca_base_env_list` to hand the UCX /
//!   libfabric / CUDA variables to every rank (pml ucx reads UCX's own).
//! - MPICH 4 (`mpivars`): `MPIR_CVAR_OFI_USE_PROVIDER`,
//!   `MPIR_CVAR_CH4_OFI_MAX_NICS`, `MPIR_CVAR_CH4_OFI_ENABLE_MULTI_NIC_STRIPING`,
//!   `MPIR_CVAR_CH4_OFI_MULTI_NIC_STRIPING_THRESHOLD` (ch4:ofi builds), and
//!   UCX's variables (ch4:ucx builds, as Debian's).
//! - libfabric 1.17 (`fi_info --env`): `FI_PROVIDER`, `FI_VERBS_DEVICE_NAME`,
//!   `FI_TCP_IFACE`, `FI_OFI_MRAIL_ADDR`, `FI_OFI_MRAIL_CONFIG` (the
//!   multi-rail utility provider, fi_mrail(7)).
//! - Intel MPI 2021: [`INTEL_MPI_VARS`].

use crate::assign::Choice;
use crate::discover::{NicTransport, Rail, Rails};
use crate::env::EnvVar;
use crate::error::RailsError;
use crate::split::SplitPlan;
use serde::Serialize;

/// A communication stack that reads rail variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stack {
    Ucx,
    OpenMpi,
    Mpich,
    Libfabric,
    IntelMpi,
}

impl Stack {
    pub const ALL: [Stack; 5] = [
        Stack::Ucx,
        Stack::OpenMpi,
        Stack::Mpich,
        Stack::Libfabric,
        Stack::IntelMpi,
    ];

    /// The name on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Stack::Ucx => "ucx",
            Stack::OpenMpi => "openmpi",
            Stack::Mpich => "mpich",
            Stack::Libfabric => "libfabric",
            Stack::IntelMpi => "intelmpi",
        }
    }

    /// Parses `auto` (`None`) or a stack name; `what` names the argument.
    pub fn parse(what: &str, s: &str) -> Result<Option<Stack>, RailsError> {
        if s == "auto" {
            return Ok(None);
        }
        Stack::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .map(Some)
            .ok_or_else(|| RailsError::BadParameter {
                what: format!("{what} '{s}'"),
                reason: "expected auto, ucx, openmpi, mpich, libfabric or intelmpi".into(),
            })
    }
}

/// The Intel MPI variables this module writes, all documented in the
/// Intel MPI Library Developer Reference for Linux OS 2021.13-2021.15
/// ("OFI-capable Network Fabrics Control": I_MPI_FABRICS,
/// I_MPI_OFI_PROVIDER; "NIC Pinning": I_MPI_MULTIRAIL). Intel MPI cannot be
/// installed here, so the stack test checks the export against this list.
pub const INTEL_MPI_VARS: [&str; 3] = ["I_MPI_FABRICS", "I_MPI_OFI_PROVIDER", "I_MPI_MULTIRAIL"];

/// Whether `r` is a Cisco usNIC VF (`usnic_N`): reached through libfabric's
/// usnic provider, never through UCX.
pub fn is_usnic(r: &Rail) -> bool {
    r.name.starts_with("usnic_")
}

/// The stack used when none is named: libfabric when every network rail is
/// a usNIC, else UCX.
pub fn auto_stack(rails: &Rails) -> Stack {
    if !rails.nics.is_empty() && rails.nics.iter().all(is_usnic) {
        Stack::Libfabric
    } else {
        Stack::Ucx
    }
}

/// The variables of one stack and the notes on what it cannot express.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StackEnv {
    pub vars: Vec<EnvVar>,
    pub notes: Vec<String>,
}

/// What the stack variables are computed from.
pub struct StackInput<'a> {
    pub rails: &'a Rails,
    pub choice: &'a Choice,
    /// Messages below this size use one rail (`--single-below`).
    pub single_below: u64,
    /// Weights are measured GB/s (a table), not the model's relative units.
    pub measured: bool,
}

/// Reference bandwidth of a model weight of 1.0 in `UCX_IB_PCI_BW`: 100
/// Gb/s (EDR). The model's weights are relative; UCX needs GB/s.
pub const UCX_REF_GBPS: f64 = 12.5;

fn var(name: &str, value: String, why: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value,
        why,
    }
}

/// The rails of the plan, largest share first, with their shares.
fn planned<'a>(rails: &'a Rails, plan: &SplitPlan) -> Vec<(&'a Rail, f64, f64)> {
    plan.chunks
        .iter()
        .map(|c| (&rails.nics[c.rail], c.share, c.weight))
        .collect()
}

fn shares(p: &[(&Rail, f64, f64)]) -> String {
    p.iter()
        .map(|(r, s, _)| format!("{} {:.1}%", r.name, s * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `name1,name2` of the rails of `p` that `keep` selects.
fn names(p: &[(&Rail, f64, f64)], keep: impl Fn(&Rail) -> bool, f: fn(&Rail) -> String) -> String {
    p.iter()
        .filter(|(r, _, _)| keep(r))
        .map(|(r, _, _)| f(r))
        .collect::<Vec<_>>()
        .join(",")
}

fn uneven(p: &[(&Rail, f64, f64)]) -> bool {
    p.windows(2).any(|w| (w[0].1 - w[1].1).abs() > 1e-9)
}

fn cannot_weigh(stack: &str, how: &str, p: &[(&Rail, f64, f64)]) -> Option<String> {
    uneven(p).then(|| {
        format!(
            "{stack} {how}: the NUIOA shares ({}) cannot be expressed, only the rails and their order",
            shares(p)
        )
    })
}

/// The UCX variables of the plan's rails that UCX can drive (verbs, TCP).
fn ucx(p: &[(&Rail, f64, f64)], inp: &StackInput, out: &mut StackEnv) {
    let usable: Vec<(&Rail, f64, f64)> =
        p.iter().filter(|(r, _, _)| !is_usnic(r)).copied().collect();
    if usable.len() < p.len() {
        out.notes.push(format!(
            "UCX has no usNIC transport: {} left out of UCX_NET_DEVICES (use --stack libfabric or openmpi)",
            names(p, is_usnic, |r| r.name.clone())
        ));
    }
    if usable.is_empty() {
        return;
    }
    out.vars.push(var(
        "UCX_NET_DEVICES",
        names(&usable, |_| true, Rail::ucx_name),
        format!(
            "rails of the split plan, largest share first: {}",
            shares(&usable)
        ),
    ));
    let n = usable.len();
    out.vars.push(var(
        "UCX_MAX_RNDV_RAILS",
        n.to_string(),
        format!("UCX splits rendezvous messages over these {n} rail(s)"),
    ));
    out.vars.push(var(
        "UCX_MAX_EAGER_RAILS",
        "1".into(),
        format!(
            "eager (small) messages over one rail, as the plan does below {} bytes",
            inp.single_below
        ),
    ));
    let verbs: Vec<(&Rail, f64, f64)> = usable
        .iter()
        .filter(|(r, _, _)| r.transport == Some(NicTransport::Verbs))
        .copied()
        .collect();
    if verbs.len() > 1 {
        let scale = if inp.measured { 1.0 } else { UCX_REF_GBPS };
        let bw: Vec<String> = verbs
            .iter()
            .map(|(r, _, w)| format!("{}:{:.2}GBps", r.name, w * scale))
            .collect();
        out.vars.push(var(
            "UCX_IB_PCI_BW",
            bw.join(","),
            if inp.measured {
                "measured throughput of each HCA from here (rails table): UCX splits rendezvous data in proportion to lane bandwidth".to_string()
            } else {
                format!(
                    "NUIOA weight of each HCA x {UCX_REF_GBPS} GB/s (100 Gb/s reference): UCX splits rendezvous data in proportion to lane bandwidth"
                )
            },
        ));
    }
    if n > 1 && verbs.len() < n {
        out.notes.push(format!(
            "UCX has no per-device bandwidth for TCP interfaces: the shares of {} are not expressed",
            names(&usable, |r| r.transport == Some(NicTransport::Tcp), |r| r.name.clone())
        ));
    }
}

/// libfabric's provider name for a rail.
fn provider(r: &Rail) -> &'static str {
    if is_usnic(r) {
        "usnic"
    } else if r.transport == Some(NicTransport::Tcp) {
        "tcp"
    } else {
        "verbs"
    }
}

/// The libfabric variables: the provider, the device of a single rail, or
/// the multi-rail provider over the rails' interfaces.
fn libfabric(p: &[(&Rail, f64, f64)], inp: &StackInput, out: &mut StackEnv) {
    let prov = provider(p[0].0);
    let one: Vec<(&Rail, f64, f64)> = p
        .iter()
        .filter(|(r, _, _)| provider(r) == prov)
        .copied()
        .collect();
    if one.len() < p.len() {
        out.notes.push(format!(
            "libfabric uses one provider per process: {prov} rails only",
        ));
    }
    if one.len() == 1 {
        out.vars.push(var(
            "FI_PROVIDER",
            prov.into(),
            format!("libfabric provider of {}", one[0].0.name),
        ));
        let r = one[0].0;
        match prov {
            "verbs" => out.vars.push(var(
                "FI_VERBS_DEVICE_NAME",
                r.name.clone(),
                "the rail of the plan".into(),
            )),
            "tcp" => out.vars.push(var("FI_TCP_IFACE", r.name.clone(), "the rail of the plan".into())),
            _ => out.notes.push(format!(
                "the usnic provider has no device variable: it uses every usNIC VF; {} is the one to prefer",
                r.name
            )),
        }
        return;
    }
    out.vars.push(var(
        "FI_PROVIDER",
        format!("{prov},ofi_mrail"),
        format!("{prov} rails under libfabric's multi-rail provider (fi_mrail(7), experimental)"),
    ));
    let addr: Vec<String> = one
        .iter()
        .map(|(r, _, _)| r.netdevs.first().cloned().unwrap_or_else(|| r.name.clone()))
        .collect();
    out.vars.push(var(
        "FI_OFI_MRAIL_ADDR",
        addr.join(","),
        format!(
            "the interfaces of the rails, largest share first: {}",
            shares(&one)
        ),
    ));
    out.vars.push(var(
        "FI_OFI_MRAIL_CONFIG",
        format!(
            "{}:fixed,{}:striping",
            inp.single_below.saturating_sub(1),
            u64::MAX
        ),
        format!(
            "one rail below {} bytes, striped over the rails above",
            inp.single_below
        ),
    ));
    out.notes
        .extend(cannot_weigh("libfabric's mrail", "stripes evenly", &one));
}

fn openmpi(p: &[(&Rail, f64, f64)], inp: &StackInput, out: &mut StackEnv) {
    let mca = |n: &str| format!("OMPI_MCA_{n}");
    let verbs = names(
        p,
        |r| r.transport == Some(NicTransport::Verbs) && !is_usnic(r),
        |r| r.name.clone(),
    );
    if !verbs.is_empty() {
        out.vars.push(var(
            &mca("btl_openib_if_include"),
            verbs.clone(),
            "the HCAs for the openib BTL (pml ob1); pml ucx reads UCX_NET_DEVICES below".into(),
        ));
        out.notes.extend(cannot_weigh(
            "Open MPI's ob1",
            "weighs HCAs by btl_openib_bandwidth, one value for every HCA",
            p,
        ));
    }
    let tcp = names(
        p,
        |r| r.transport == Some(NicTransport::Tcp),
        |r| r.name.clone(),
    );
    if !tcp.is_empty() {
        out.vars.push(var(
            &mca("btl_tcp_if_include"),
            tcp,
            "the IP interfaces for the tcp BTL".into(),
        ));
    }
    let usnic = names(p, is_usnic, |r| r.name.clone());
    if !usnic.is_empty() {
        for n in ["mtl_ofi_provider_include", "btl_ofi_provider_include"] {
            out.vars.push(var(
                &mca(n),
                "usnic".into(),
                "usNIC through libfabric's usnic provider (ofi MTL and BTL)".into(),
            ));
        }
        out.notes.push(format!(
            "Open MPI built with the usnic BTL (Cisco's packages) also reads btl_usnic_if_include={usnic}; this Open MPI's ompi_info does not list it, so it is not set"
        ));
    }
    let (u, rest): (Vec<(&Rail, f64, f64)>, Vec<_>) = p.iter().partition(|(r, _, _)| is_usnic(r));
    if !rest.is_empty() {
        ucx(&rest, inp, out);
    }
    if !u.is_empty() {
        libfabric(&u, inp, out);
    }
}

fn mpich(p: &[(&Rail, f64, f64)], inp: &StackInput, out: &mut StackEnv) {
    let prov = provider(p[0].0);
    out.vars.push(var(
        "MPIR_CVAR_OFI_USE_PROVIDER",
        prov.into(),
        "libfabric provider of the rails (ch4:ofi builds; Debian's MPICH is ch4:ucx and reads the UCX variables)".into(),
    ));
    let n = p.len();
    out.vars.push(var(
        "MPIR_CVAR_CH4_OFI_MAX_NICS",
        n.to_string(),
        format!("the {n} rail(s) of the plan (MPICH picks the NICs nearest to the process)"),
    ));
    if n > 1 {
        out.vars.push(var(
            "MPIR_CVAR_CH4_OFI_ENABLE_MULTI_NIC_STRIPING",
            "1".into(),
            "large messages striped over the NICs".into(),
        ));
        out.vars.push(var(
            "MPIR_CVAR_CH4_OFI_MULTI_NIC_STRIPING_THRESHOLD",
            inp.single_below.to_string(),
            "one NIC below this size, as the plan does".into(),
        ));
        out.notes
            .extend(cannot_weigh("MPICH's OFI netmod", "stripes evenly", p));
    }
    ucx(p, inp, out);
}

fn intelmpi(p: &[(&Rail, f64, f64)], inp: &StackInput, out: &mut StackEnv) {
    out.vars.push(var(
        "I_MPI_FABRICS",
        "shm:ofi".into(),
        "shared memory on the node, libfabric between nodes".into(),
    ));
    let prov = match provider(p[0].0) {
        "verbs" => "mlx",
        other => other,
    };
    out.vars.push(var(
        "I_MPI_OFI_PROVIDER",
        prov.into(),
        format!(
            "libfabric provider of {} (mlx: Intel's provider over UCX for verbs HCAs)",
            p[0].0.name
        ),
    ));
    if p.len() > 1 {
        out.vars.push(var(
            "I_MPI_MULTIRAIL",
            "1".into(),
            "use several NICs (NIC pinning)".into(),
        ));
        out.notes.extend(cannot_weigh(
            "Intel MPI",
            "spreads ranks over NICs evenly",
            p,
        ));
    }
    if prov == "mlx" {
        ucx(p, inp, out);
    }
}

/// The network-rail variables of `stack` for the plan of `inp.choice`
/// (nothing without network rails).
pub fn stack_env(stack: Stack, inp: &StackInput) -> StackEnv {
    let mut out = StackEnv::default();
    let Some(plan) = &inp.choice.nics else {
        return out;
    };
    let p = planned(inp.rails, plan);
    if p.is_empty() {
        return out;
    }
    match stack {
        Stack::Ucx => ucx(&p, inp, &mut out),
        Stack::OpenMpi => openmpi(&p, inp, &mut out),
        Stack::Mpich => mpich(&p, inp, &mut out),
        Stack::Libfabric => libfabric(&p, inp, &mut out),
        Stack::IntelMpi => intelmpi(&p, inp, &mut out),
    }
    out
}

/// Open MPI's MCA parameter file of `vars` (docs/commands/rails.md):
/// `OMPI_MCA_x` as `x = value`, every other variable in one
/// `mca_base_env_list` line (Open MPI exports it to every rank), the
/// `mpirun --mca` line and the notes as comments on top.
pub fn mca_file(vars: &[EnvVar], notes: &[String]) -> String {
    let mut s = String::new();
    let (mca, env): (Vec<&EnvVar>, Vec<&EnvVar>) =
        vars.iter().partition(|v| v.name.starts_with("OMPI_MCA_"));
    let list: Vec<String> = env
        .iter()
        .map(|v| format!("{}={}", v.name, v.value))
        .collect();
    let mut line = String::from("# mpirun");
    for v in &mca {
        line.push_str(&format!(" --mca {} {}", &v.name[9..], v.value));
    }
    if !list.is_empty() {
        line.push_str(&format!(" --mca mca_base_env_list '{}'", list.join(";")));
    }
    s.push_str("# Use: mpirun --tune FILE ..., or the same on the command line:\n");
    s.push_str(&line);
    s.push('\n');
    for n in notes {
        s.push_str(&format!("# note: {n}\n"));
    }
    for v in &mca {
        s.push_str(&format!("# {}\n{} = {}\n", v.why, &v.name[9..], v.value));
    }
    if !env.is_empty() {
        for v in &env {
            s.push_str(&format!("# {}={}: {}\n", v.name, v.value, v.why));
        }
        s.push_str(&format!("mca_base_env_list = {}\n", list.join(";")));
    }
    s
}

/// The text of `--env`: for Open MPI its MCA parameter file ([`mca_file`]),
/// for the other stacks `export` lines; notes as `# note:` comments.
pub fn env_text(stack: Stack, vars: &[EnvVar], notes: &[String]) -> String {
    if stack == Stack::OpenMpi {
        return mca_file(vars, notes);
    }
    let mut s: String = notes.iter().map(|n| format!("# note: {n}\n")).collect();
    s.push_str(&crate::setup::exports(vars));
    s
}
