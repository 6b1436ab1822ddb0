//! Machine model and locality classes on the project's fixtures, synthetic
//! topologies and (when present) the real-machine topologies in ../shared.

use topocomm_topo::testdata::{fixture, shared_topologies, shared_topology};
use topocomm_topo::*;

fn load_str(s: &str) -> Machine {
    load(&s.parse().unwrap()).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn class(m: &Machine, p: u32, q: u32) -> String {
    pair_class(m, p, q).unwrap().to_string()
}

#[test]
fn fixture_classes_devices_and_distances() {
    let m = load_str(fixture("two-socket-nic.xml").to_str().unwrap());
    assert_eq!(m.pus.len(), 8);
    assert_eq!(m.count(ObjectKind::Package), 2);
    assert_eq!(m.numa_nodes.len(), 2);
    // OS numbering interleaves packages: P#0 and P#2 share a core.
    assert_eq!(class(&m, 0, 2), "smt");
    assert_eq!(class(&m, 0, 4), "l3");
    assert_eq!(class(&m, 0, 1), "machine");
    assert_eq!(class(&m, 3, 3), "self");
    assert_eq!(m.cpu_model.as_deref(), Some("topocomm fixture CPU"));
    let nic = m
        .devices
        .iter()
        .find(|d| d.name == "mlx5_0")
        .expect("mlx5_0 found");
    assert_eq!(nic.kind, DeviceKind::OpenFabrics);
    assert_eq!(nic.package, Some(1));
    assert_eq!(nic.numa_nodes, vec![1]);
    assert_eq!(nic.pci_bus_id.as_deref(), Some("0000:81:00.0"));
    assert_eq!(nic.cpuset.to_string(), "1,3,5,7");
    let ib0 = m.devices.iter().find(|d| d.name == "ib0").unwrap();
    assert_eq!(ib0.kind, DeviceKind::Network);
    let lat = m
        .distances
        .iter()
        .find(|d| d.name == "NUMALatency")
        .expect("NUMA distances");
    assert_eq!(lat.values, vec![10, 21, 21, 10]);
    assert_eq!(lat.means, "latency");
    let cm = ClassMatrix::new(&m);
    let names: Vec<String> = cm.classes().iter().map(|c| c.class.to_string()).collect();
    assert_eq!(names, ["smt", "l3", "machine"]);
    let total: u64 = cm.classes().iter().map(|c| c.pairs).sum();
    assert_eq!(total, 8 * 7 / 2);
    assert_eq!(cm.classes()[0].pairs, 4);
    assert_eq!(cm.classes()[0].representative, (0, 2));
}

#[test]
fn synthetic_classes_follow_the_tree() {
    let m = load_str("synthetic:pack:2 l3:2 l2:2 core:2 pu:2");
    assert_eq!(m.pus.len(), 32);
    let cm = ClassMatrix::new(&m);
    let names: Vec<String> = cm.classes().iter().map(|c| c.class.to_string()).collect();
    assert_eq!(names, ["smt", "l2", "l3", "numa", "machine"]);
    let pairs: Vec<u64> = cm.classes().iter().map(|c| c.pairs).collect();
    // smt: 16 cores x 1; l2: 8 L2s x (4*3/2 - 2); l3: 4 x (8*7/2 - 4*6)...
    assert_eq!(pairs.iter().sum::<u64>(), 32 * 31 / 2);
    assert_eq!(pairs[0], 16);
    assert_eq!(pairs[4], 16 * 16);
    let tree = TreeView::new(&m);
    assert!(tree.symmetric);
    let arities: Vec<usize> = tree.significant_arities().iter().map(|a| a.1).collect();
    assert_eq!(arities, [2, 2, 2, 2, 2]);
}

#[test]
fn synthetic_numa_levels_give_package_class() {
    let m = load_str("synthetic:pack:2 numa:2 l3:2 core:4 pu:2");
    assert_eq!(m.pus.len(), 64);
    assert_eq!(m.numa_nodes.len(), 4);
    let cm = ClassMatrix::new(&m);
    let names: Vec<String> = cm.classes().iter().map(|c| c.class.to_string()).collect();
    assert_eq!(names, ["smt", "l3", "numa", "package", "machine"]);
    let pairs: Vec<u64> = cm.classes().iter().map(|c| c.pairs).collect();
    // Per NUMA node (16 PUs): 8 smt pairs, 2 L3s x (8*7/2 - 4) = 48 l3 pairs,
    // 8 x 8 numa pairs across its two L3s; 4 nodes. Packages: 16 x 16 x 2.
    assert_eq!(pairs, [32, 192, 256, 512, 1024]);
}

#[test]
fn json_round_trip_preserves_the_model() {
    let m = load_str(fixture("two-socket-nic.xml").to_str().unwrap());
    let dir = std::env::temp_dir().join(format!("topocomm-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.json");
    std::fs::write(&path, m.to_json()).unwrap();
    let back = load_str(path.to_str().unwrap());
    assert_eq!(back.objects, m.objects);
    assert_eq!(back.devices, m.devices);
    assert_eq!(back.fingerprint, m.fingerprint);
    assert_eq!(fingerprint(&back), m.fingerprint);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn clovertown_interleaved_numbering() {
    let Some(f) = shared_topology("intel-2xE5345-clovertown.xml") else {
        return;
    };
    let m = load_str(f.to_str().unwrap());
    let p0 = &m.pus[m.pu_position(0).unwrap()];
    let p1 = &m.pus[m.pu_position(1).unwrap()];
    assert_ne!(
        p0.package, p1.package,
        "P#0 and P#1 are on different packages"
    );
    assert_eq!(class(&m, 0, 1), "machine");
    assert_eq!(class(&m, 0, 4), "l2");
    let cm = ClassMatrix::new(&m);
    let l2 = cm
        .classes()
        .iter()
        .find(|c| c.class == LocalityClass::Cache(2))
        .unwrap();
    assert_eq!(l2.pairs, 4);
    assert_eq!(l2.representative, (0, 4));
}

#[test]
fn bulldozer_numa_per_half_package_and_l2_modules() {
    let Some(f) = shared_topology("amd-4xopteron-6272-bulldozer.xml") else {
        return;
    };
    let m = load_str(f.to_str().unwrap());
    assert_eq!(m.count(ObjectKind::Package), 4);
    assert_eq!(m.numa_nodes.len(), 8);
    for pkg in 0..4u32 {
        let mut nodes: Vec<u32> = m
            .pus
            .iter()
            .filter(|p| p.package == Some(pkg))
            .filter_map(|p| p.numa_node)
            .collect();
        nodes.sort();
        nodes.dedup();
        assert_eq!(nodes.len(), 2, "package {pkg} has two NUMA nodes");
    }
    let cm = ClassMatrix::new(&m);
    let l2 = cm
        .classes()
        .iter()
        .find(|c| c.class == LocalityClass::Cache(2))
        .expect("l2 class");
    assert_eq!(l2.pairs, 32, "32 modules of two cores share an L2");
    let names: Vec<String> = cm.classes().iter().map(|c| c.class.to_string()).collect();
    assert_eq!(names, ["l2", "l3", "package", "machine"]);
}

#[test]
fn ib_gpu_devices_are_local_to_package_1() {
    let Some(f) = shared_topology("intel-2xE5-2650-ib-gpu.xml") else {
        return;
    };
    let m = load_str(f.to_str().unwrap());
    for name in ["mlx5_0", "ib0", "cuda0"] {
        let d = m
            .devices
            .iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(d.package, Some(1), "{name} is on package 1");
        assert_eq!(d.numa_nodes, vec![1], "{name} is near NUMA node 1");
    }
    let cuda = m.devices.iter().find(|d| d.name == "cuda0").unwrap();
    assert_eq!(cuda.kind, DeviceKind::Coprocessor);
    assert_eq!(cuda.subtype.as_deref(), Some("CUDA"));
}

#[test]
fn every_shared_topology_loads_and_classifies() {
    let Some(dir) = shared_topologies() else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 10,
        "expected the shared topologies, found {}",
        files.len()
    );
    for f in files {
        let m = load_str(f.to_str().unwrap());
        assert!(!m.pus.is_empty(), "{}", f.display());
        let cm = ClassMatrix::new(&m);
        let n = m.pus.len() as u64;
        let total: u64 = cm.classes().iter().map(|c| c.pairs).sum();
        assert_eq!(total, n * (n - 1) / 2, "{}", f.display());
        // Classes are symmetric and the representative really is in its class.
        for c in cm.classes() {
            let (p, q) = c.representative;
            assert_eq!(pair_class(&m, p, q).unwrap(), c.class);
            assert_eq!(pair_class(&m, q, p).unwrap(), c.class);
        }
        let tree = TreeView::new(&m);
        assert_eq!(tree.levels[0].objects, 1);
    }
}

/// The per-object sums of `ClassMatrix` against the definition, pair by
/// pair: every pair's class, each class's pair count, first pair in
/// topology order and deepest LCA, on every machine at hand.
#[test]
fn class_matrix_equals_the_pair_by_pair_definition() {
    let mut specs: Vec<String> = [
        "synthetic:pack:2 l3:2 l2:2 core:2 pu:2",
        "synthetic:pack:2 numa:2 core:3 pu:2",
        "synthetic:numa:2 pack:2 core:2 pu:1",
        "synthetic:pack:3 group:2 l3:1 core:3 pu:1",
    ]
    .map(String::from)
    .to_vec();
    specs.push(fixture("two-socket-nic.xml").to_string_lossy().into_owned());
    if let Some(dir) = shared_topologies() {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "xml"))
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        files.sort();
        specs.extend(files);
    }
    for spec in specs {
        let m = load_str(&spec);
        let cm = ClassMatrix::new(&m);
        let index = ClassIndex::new(&m);
        let n = m.pus.len();
        // class -> (pairs, first pair, deepest LCA), by the definition.
        let mut want: std::collections::BTreeMap<LocalityClass, (u64, (u32, u32), u32)> =
            Default::default();
        for a in 0..n {
            assert_eq!(cm.code_at(a, a), None);
            for b in a + 1..n {
                let (class, depth) = index.classify(&m, a, b);
                assert_eq!(cm.class_at(a, b), class, "{spec}: {a},{b}");
                assert_eq!(cm.class_at(b, a), class, "{spec}: {b},{a}");
                let first = (m.pus[a].os_index, m.pus[b].os_index);
                let e = want.entry(class).or_insert((0, first, depth));
                e.0 += 1;
                e.2 = e.2.max(depth);
            }
        }
        assert_eq!(cm.classes().len(), want.len(), "{spec}");
        for c in cm.classes() {
            let (pairs, first, depth) = want[&c.class];
            assert_eq!(
                (c.pairs, c.representative, c.lca_depth),
                (pairs, first, depth),
                "{spec}: {}",
                c.class
            );
        }
    }
}

#[test]
fn big_machine_class_matrix() {
    let Some(f) = shared_topology("intel-24xE5-4640-sgi-uv-groups.xml") else {
        return;
    };
    let m = load_str(f.to_str().unwrap());
    assert_eq!(m.pus.len(), 384);
    let cm = ClassMatrix::new(&m);
    assert_eq!(cm.len(), 384);
    let names: Vec<String> = cm.classes().iter().map(|c| c.class.to_string()).collect();
    assert!(names.iter().any(|n| n.starts_with("group")), "{names:?}");
    assert_eq!(names.last().map(String::as_str), Some("machine"));
}

#[test]
fn irregular_groups_are_flagged_asymmetric() {
    let Some(f) = shared_topology("intel-sgi-uv2000-irregular-groups.xml") else {
        return;
    };
    let m = load_str(f.to_str().unwrap());
    let tree = TreeView::new(&m);
    assert!(!tree.symmetric, "{:?}", tree.levels);
    assert!(!tree.asymmetry.is_empty());
}

#[test]
fn kunpeng_clusters_are_nearer_than_l3() {
    let Some(f) = shared_topology("arm-2xkunpeng920.xml") else {
        return;
    };
    let m = load_str(f.to_str().unwrap());
    let cm = ClassMatrix::new(&m);
    let names: Vec<String> = cm.classes().iter().map(|c| c.class.to_string()).collect();
    let pos = |n: &str| {
        names
            .iter()
            .position(|x| x == n)
            .unwrap_or_else(|| panic!("{n} in {names:?}"))
    };
    assert!(pos("cluster") < pos("l3"));
    assert!(pos("l3") < pos("package"));
    assert_eq!(m.numa_nodes.len(), 4);
}

fn temp_file(name: &str, content: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("topocomm-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

/// Content hwloc refuses (a second root object) is one line naming the
/// file and hwloc's errno in words, not hwlocality's Debug; a malformed
/// attribute value (a cpuset broken over two lines) is named before hwloc
/// sees it.
#[test]
fn content_hwloc_rejects_is_one_readable_line() {
    let bad_cpuset = temp_file(
        "bad-cpuset.xml",
        "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=\"Machine\" os_index=\"0\" cpuset=\"zz\n0x1\">\n<object type=\"NUMANode\" os_index=\"0\"/>\n<object type=\"PU\" os_index=\"0\" cpuset=\"0x1\"/>\n</object>\n</topology>\n",
    );
    let e = load(&bad_cpuset.to_str().unwrap().parse().unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        !e.contains('\n') && e.contains("is not an hwloc bitmap"),
        "{e}"
    );
    let f = temp_file(
        "two-roots.xml",
        "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\">\n<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\"/>\n<object type=\"PU\" os_index=\"0\" cpuset=\"0x1\"/>\n</object>\n<object type=\"Machine\" os_index=\"1\" cpuset=\"0x2\"/>\n</topology>\n",
    );
    let spec = f.to_str().unwrap().to_string();
    let e = load(&spec.parse().unwrap()).unwrap_err().to_string();
    assert!(!e.contains('\n') && e.contains(&spec), "{e}");
    assert!(!e.contains("Some(") && e.contains("errno"), "{e}");
}

/// A configuration file others may write is named in one warning line.
#[test]
fn files_writable_by_everyone_are_named() {
    use std::os::unix::fs::PermissionsExt;
    let f = temp_file("writable.xml", "<topology/>");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
    let w = others_can_write(&f).expect("a warning");
    assert!(
        w.contains(f.to_str().unwrap()) && w.contains("0666") && !w.contains('\n'),
        "{w}"
    );
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o664)).unwrap();
    assert_eq!(others_can_write(&f), None);
}

#[test]
fn bad_inputs_give_one_line_errors_naming_the_input() {
    let err = |s: &str| load(&s.parse().unwrap()).unwrap_err().to_string();
    let e = err("/nonexistent/topo.xml");
    assert!(
        e.contains("/nonexistent/topo.xml") && e.contains("no such file"),
        "{e}"
    );
    let p = temp_file("notxml.xml", "hello world\n");
    assert!(err(p.to_str().unwrap()).contains("not XML"));
    let good = std::fs::read_to_string(fixture("two-socket-nic.xml")).unwrap();
    let p = temp_file("trunc.xml", &good[..good.len() / 2]);
    let e = err(p.to_str().unwrap());
    assert!(
        e.contains("trunc.xml") && (e.contains("truncated") || e.contains("malformed")),
        "{e}"
    );
    let p = temp_file(
        "v3.xml",
        &good.replace("topology version=\"2.0\"", "topology version=\"3.0\""),
    );
    let e = err(p.to_str().unwrap());
    assert!(e.contains("version 3.0") && e.contains("v3.xml"), "{e}");
    let p = temp_file("empty.xml", "");
    assert!(err(p.to_str().unwrap()).contains("empty"));
    assert!(err("synthetic:").contains("empty"));
    assert!(err("synthetic:pack:2 bogus:3").contains("hwloc rejected"));
    assert!(err("synthetic:pack:two").contains("'pack:two'"));
    let p = temp_file("bad.json", "{\"schema\": 3}");
    assert!(err(p.to_str().unwrap()).contains("bad.json"));
    for e in [
        err("/nonexistent/topo.xml"),
        err("synthetic:pack:2 bogus:3"),
    ] {
        assert!(!e.contains('\n'), "one line: {e}");
    }
    let m = load_str("synthetic:pack:1 core:2 pu:1");
    let e = pair_class(&m, 0, 7).unwrap_err().to_string();
    assert!(e.contains("OS index 7") && e.contains("0-1"), "{e}");
}

/// Every PU's position through the OS index -> position index, against a
/// scan, on topologies whose OS numbering is out of topology order
/// (interleaved hyperthreads and packages), and on a sparse renumbering.
#[test]
fn pu_position_finds_every_pu_whatever_the_numbering() {
    let check = |name: &str, m: &Machine| {
        for (i, p) in m.pus.iter().enumerate() {
            assert_eq!(
                m.pu_position(p.os_index),
                Some(i),
                "{name}: P#{}",
                p.os_index
            );
            assert_eq!(m.require_pu(p.os_index).unwrap(), i);
        }
        let max = m.pus.iter().map(|p| p.os_index).max().unwrap();
        for absent in [max + 1, max.saturating_mul(3), u32::MAX] {
            assert_eq!(m.pu_position(absent), None, "{name}: P#{absent}");
        }
    };
    let mut out_of_order = 0;
    let mut machines = vec![(
        "two-socket-nic.xml".to_string(),
        load_str(fixture("two-socket-nic.xml").to_str().unwrap()),
    )];
    if let Some(dir) = shared_topologies() {
        for f in std::fs::read_dir(dir).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "xml") {
                machines.push((p.display().to_string(), load_str(p.to_str().unwrap())));
            }
        }
    }
    for (name, m) in &machines {
        out_of_order += m
            .pus
            .iter()
            .enumerate()
            .any(|(i, p)| p.os_index as usize != i) as usize;
        check(name, m);
        // A copy read back from machine JSON (index not carried) agrees.
        let back: Machine = serde_json::from_str(&serde_json::to_string(m).unwrap()).unwrap();
        check(name, &back);
        assert_eq!(&back, m);
    }
    // The fixture alone interleaves packages (P#0 and P#2 share a core).
    assert!(out_of_order >= 1);
    // Sparse: OS indexes 2^24 apart, in reverse (a hash map, not a table
    // of 2^27 entries).
    let (_, mut m) = machines.swap_remove(0);
    for (i, p) in m.pus.iter_mut().enumerate() {
        p.os_index = ((7 - i as u32) << 24) | 5;
    }
    m.reindex();
    check("sparse", &m);
}
