//! # topocomm-topo
//!
//! The machine model of topocomm: what hwloc knows about a node, as owned
//! plain data, plus the locality class of every pair of PUs and a level view
//! of the tree for the mapping engine.
//!
//! ```no_run
//! let m = topocomm_topo::load(&"synthetic:pack:2 l3:1 core:4 pu:2".parse().unwrap()).unwrap();
//! let classes = topocomm_topo::ClassMatrix::new(&m);
//! for c in classes.classes() {
//!     println!("{} {} {:?}", c.class, c.pairs, c.representative);
//! }
//! ```

mod class;
mod error;
mod load;
pub mod location;
pub use load::others_can_write;
mod model;
mod pu_index;
mod puset;
mod synthetic;
pub mod text;
mod tree;
mod xmlcheck;

pub use class::{
    is_known_class_name, pair_class, parse_pair, ClassIndex, ClassMatrix, ClassSummary,
    LocalityClass,
};
pub use error::TopoError;
pub use load::{load, load_default, TopologySpec, TOPOLOGY_ENV};
pub use location::{resolve_pair, resolve_pu, resolve_set, Locations};
pub use model::*;
pub use pu_index::PuIndexCell;
pub use puset::PuSet;
pub use tree::{Level, TreeView};
pub use xmlcheck::check_hwloc_xml;

/// Stable 64-bit FNV-1a hash of the machine's structure (object kinds,
/// depths, OS indexes, cache sizes, cpusets, NUMA nodes): two models with the
/// same fingerprint describe the same hardware layout.
pub fn fingerprint(m: &Machine) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |s: &str| {
        for b in s.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for o in &m.objects {
        let cache = o
            .cache
            .as_ref()
            .map(|c| (c.level, c.size, c.cache_type as u8));
        feed(&format!(
            "{:?}|{}|{:?}|{:?}|{}",
            o.kind, o.depth, o.os_index, cache, o.cpuset
        ));
    }
    for n in &m.numa_nodes {
        feed(&format!(
            "numa|{}|{}|{}",
            n.os_index, n.attached_to, n.cpuset
        ));
    }
    format!("fnv1a64:{h:016x}")
}

/// Formats a byte count the way lstopo does (`32KB`, `20MB`, `1.5GB`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if (v - v.round()).abs() < 1e-9 {
        format!("{}{}", v.round() as u64, UNITS[u])
    } else {
        format!("{v:.1}{}", UNITS[u])
    }
}

/// Locating test data shared by all crates' tests.
pub mod testdata {
    use std::path::PathBuf;

    /// Root of the repository (two levels above any crate's manifest dir).
    pub fn repo_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .expect("repository root exists")
    }

    /// The project's own fixtures (`tests/fixtures` at the repository root).
    pub fn fixture(name: &str) -> PathBuf {
        repo_root().join("tests/fixtures").join(name)
    }

    /// `../shared/topologies` beside the checkout (or `$TOPOCOMM_SHARED_TOPOLOGIES`),
    /// if present; prints a skip notice and returns `None` otherwise.
    pub fn shared_topologies() -> Option<PathBuf> {
        let dir = std::env::var_os("TOPOCOMM_SHARED_TOPOLOGIES")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo_root().join("../shared/topologies"));
        if dir.is_dir() {
            Some(dir)
        } else {
            eprintln!(
                "notice: {} is absent; skipping tests on real-machine topologies",
                dir.display()
            );
            None
        }
    }

    /// Builds the C ABI library (`libtopocomm.so` / `.a`, debug profile) with
    /// the cargo that runs the tests, and returns the folder holding it.
    /// `cargo test` builds only the rlib of a crate, not its cdylib, so C
    /// tests ask for it explicitly; the build reuses the compiled deps.
    pub fn libtopocomm_dir() -> PathBuf {
        use std::sync::OnceLock;
        static DIR: OnceLock<PathBuf> = OnceLock::new();
        DIR.get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args(["build", "--quiet", "-p", "topocomm-capi"])
                .current_dir(repo_root())
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building libtopocomm failed");
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo_root().join("target"));
            target.join("debug")
        })
        .clone()
    }

    /// One real-machine topology from the shared folder, if present.
    pub fn shared_topology(file: &str) -> Option<PathBuf> {
        shared_topologies().map(|d| d.join(file))
    }
}
