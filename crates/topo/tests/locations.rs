//! hwloc location syntax (issue 18): parsing and resolution on a synthetic
//! machine, on the shared real-machine topologies (non-trivial OS
//! numbering), against hwloc-calc itself where it is installed, and the
//! one-line errors.

use std::path::Path;
use std::process::Command;
use topocomm_topo::testdata::{shared_topologies, shared_topology};
use topocomm_topo::{
    load, resolve_pair, resolve_pu, resolve_set, CacheType, Locations, Machine, ObjectKind,
};

fn synth() -> Machine {
    load(&"synthetic:pack:2 numa:2 l3:2 core:4 pu:2".parse().unwrap()).unwrap()
}

fn load_file(p: &Path) -> Machine {
    load(&p.to_str().unwrap().parse().unwrap()).unwrap()
}

/// The objects one location names, each as its PUs.
fn objs(m: &Machine, text: &str) -> Vec<Vec<u32>> {
    let mut r = Locations::parse(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .resolve(m)
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(r.len(), 1, "{text}");
    r.remove(0)
}

fn set(m: &Machine, text: &str) -> String {
    resolve_set(m, text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .to_string()
}

fn err(m: &Machine, text: &str) -> String {
    let e = match Locations::parse(text) {
        Err(e) => e,
        Ok(l) => l.resolve(m).expect_err(text),
    }
    .to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    e
}

#[test]
fn synthetic_forms() {
    let m = synth();
    assert_eq!(objs(&m, "core:1"), vec![vec![2, 3]]);
    assert_eq!(objs(&m, "Core:1"), vec![vec![2, 3]]);
    assert_eq!(set(&m, "numa:1.core:2"), "20-21");
    assert_eq!(set(&m, "package:1.core:2-3"), "36-39");
    assert_eq!(set(&m, "socket:1"), "32-63");
    assert_eq!(set(&m, "node:1"), "16-31");
    assert_eq!(set(&m, "l3:1"), "8-15");
    assert_eq!(set(&m, "l3cache:1"), "8-15");
    assert_eq!(set(&m, "core:14:4"), "28-35");
    assert_eq!(objs(&m, "core:31:2"), vec![vec![62, 63], vec![0, 1]]);
    assert_eq!(set(&m, "core:30-"), "60-63");
    assert_eq!(objs(&m, "pu:0-1"), vec![vec![0], vec![1]]);
    assert_eq!(objs(&m, "core:all.pu:0").len(), 32);
    assert_eq!(objs(&m, "pu:even").len(), 32);
    assert_eq!(objs(&m, "pu:odd")[0], vec![1]);
    assert_eq!(set(&m, "core:1.pu:1"), "3");
    assert_eq!(set(&m, "pu:P#5"), "5");
    assert_eq!(set(&m, "all"), "0-63");
    assert_eq!(set(&m, "machine:0"), "0-63");
    assert_eq!(objs(&m, "0x3"), vec![vec![0], vec![1]]);
    assert_eq!(objs(&m, "0-2"), vec![vec![0], vec![1], vec![2]]);
    assert_eq!(set(&m, "0-3,8,core:5"), "0-3,8,10-11");
    assert_eq!(resolve_pu(&m, "core:3").unwrap(), 6);
    assert_eq!(resolve_pu(&m, "7").unwrap(), 7);
    assert_eq!(resolve_pair(&m, "core:0,core:1").unwrap(), (0, 2));
    assert_eq!(resolve_pair(&m, "0, 4").unwrap(), (0, 4));
    assert_eq!(resolve_pair(&m, "pu:0-1,package:1").unwrap(), (0, 32));
}

#[test]
fn per_rank_spreads_a_single_object_and_takes_firsts_otherwise() {
    let m = synth();
    let pr = |t: &str| Locations::parse(t).unwrap().per_rank(&m).unwrap();
    assert_eq!(pr("pu:0-1"), vec![0, 1]);
    assert_eq!(pr("core:0-2"), vec![0, 2, 4]);
    assert_eq!(pr("core:0,core:1"), vec![0, 2]);
    assert_eq!(pr("core:1"), vec![2, 3]);
    assert_eq!(pr("numa:0,numa:1"), vec![0, 16]);
    assert_eq!(pr("4,0"), vec![4, 0]);
}

#[test]
fn errors_are_one_line_naming_the_location() {
    let m = synth();
    for (text, want) in [
        (
            "core:32",
            "core:32 does not exist here: this machine has cores 0-31",
        ),
        (
            "core:30-32",
            "core:30-32 does not exist here: this machine has cores 0-31",
        ),
        (
            "numa:1.core:8",
            "numa:1.core:8 does not exist there: numa:1 has cores 0-7 (no core:8)",
        ),
        (
            "l2:0",
            "l2:0 does not exist here: this machine has no L2 caches",
        ),
        (
            "pu:P#64",
            "pu:P#64 does not exist here: the PUs of this machine have OS indexes 0-63",
        ),
        ("foo:1", "foo:1 is not a location: unknown type 'foo'"),
        ("", "'' is not a location: it is empty"),
        ("core:", "core: is not a location: '' is not an index"),
        ("core:x", "core:x is not a location: 'x' is not an index"),
        (
            "core:3-1",
            "core:3-1 is not a location: range 3-1 goes backwards",
        ),
        ("core:1:0", "core:1:0 is not a location: N:K needs K >= 1"),
        ("core:0.package:0", "package cannot be inside core"),
        ("0xg", "0xg is not a location: 'g' is not a hex digit"),
        ("0x", "0x is not a location: expected hex digits"),
        (
            "0x10000000000000000",
            "names PU P#64, which does not exist here (PUs: 0-63)",
        ),
        ("core", "core is not a location: 'core' is not type:index"),
        ("1-x", "1-x is not a location"),
        (
            "64",
            "PU with OS index 64 does not exist on this topology (PUs: 0-63)",
        ),
    ] {
        let e = err(&m, text);
        assert!(e.contains(want), "{text}: {e}");
    }
    assert!(resolve_pair(&m, "core:0")
        .unwrap_err()
        .to_string()
        .contains("expected two locations"));
    assert!(resolve_pu(&m, "core:0,core:1")
        .unwrap_err()
        .to_string()
        .contains("not one location"));
}

/// `<type>:<i>` for every object of every type resolves to that object's
/// PUs, and `P#<os>` to the object with that OS index.
fn every_object_resolves(m: &Machine, what: &str) {
    let mut checked = 0;
    for o in &m.objects {
        let ty = match (o.kind, &o.cache) {
            (ObjectKind::Package, _) => "package".to_string(),
            (ObjectKind::Core, _) => "core".into(),
            (ObjectKind::Pu, _) => "pu".into(),
            (ObjectKind::Die, _) => "die".into(),
            (ObjectKind::Machine, _) => "machine".into(),
            (ObjectKind::Cache, Some(c)) if c.cache_type == CacheType::Instruction => {
                format!("l{}i", c.level)
            }
            (ObjectKind::Cache, Some(c)) => format!("l{}", c.level),
            _ => continue,
        };
        if o.cpuset.is_empty() {
            // hwloc-calc refuses them too (`object #2 ... does not exist`).
            assert!(resolve_set(m, &format!("{ty}:{}", o.logical_index)).is_err());
            continue;
        }
        let text = format!("{ty}:{}", o.logical_index);
        let got = resolve_set(m, &text).unwrap_or_else(|e| panic!("{what} {text}: {e}"));
        assert_eq!(got, o.cpuset, "{what} {text}");
        checked += 1;
        if o.kind == ObjectKind::Pu {
            let os = o.os_index.unwrap();
            assert_eq!(resolve_pu(m, &format!("pu:P#{os}")).unwrap(), os, "{what}");
            let logical = m.pus.iter().position(|p| p.os_index == os).unwrap();
            assert_eq!(logical as u32, o.logical_index, "{what}");
        }
    }
    for n in &m.numa_nodes {
        if n.cpuset.is_empty() {
            continue;
        }
        let text = format!("numa:{}", n.logical_index);
        assert_eq!(resolve_set(m, &text).unwrap(), n.cpuset, "{what} {text}");
        checked += 1;
    }
    assert!(checked >= m.pus.len(), "{what}: {checked} objects checked");
}

#[test]
fn every_object_of_the_synthetic_machine() {
    every_object_resolves(&synth(), "synthetic");
}

/// Sandy Bridge with hyper-threading: siblings are numbered N and N+16, so
/// logical `core:1` is PUs P#2 and P#18 (hwloc-calc -I pu --po core:1).
#[test]
fn sandybridge_logical_is_not_os_order() {
    let Some(f) = shared_topology("intel-2xE5-2650-sandybridge.xml") else {
        return;
    };
    let m = load_file(&f);
    assert_eq!(objs(&m, "core:1"), vec![vec![2, 18]]);
    assert_eq!(resolve_pu(&m, "core:1").unwrap(), 2);
    assert_eq!(set(&m, "pu:1"), "16");
    assert_eq!(set(&m, "pu:P#1"), "1");
    assert_eq!(set(&m, "1"), "1");
    assert_eq!(resolve_pair(&m, "pu:0,pu:1").unwrap(), (0, 16));
    assert_eq!(set(&m, "package:1.core:0"), "1,17");
}

#[test]
fn every_object_of_every_shared_topology() {
    let Some(dir) = shared_topologies() else {
        return;
    };
    for f in xml_files(&dir) {
        every_object_resolves(&load_file(&f), &f.display().to_string());
    }
}

fn xml_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    v
}

/// The same PUs as hwloc-calc (`-I pu --po`) for a handful of locations on
/// every shared topology; skipped with a notice where hwloc-calc is absent
/// (scripts/setup.sh installs it with hwloc-nox).
#[test]
fn agrees_with_hwloc_calc() {
    let Some(dir) = shared_topologies() else {
        return;
    };
    if Command::new("hwloc-calc")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("notice: hwloc-calc is absent; skipping the comparison with it");
        return;
    }
    let locations = [
        "core:1",
        "pu:3",
        "package:1",
        "numa:1.core:2",
        "core:even",
        "core:2:3",
        "package:0.core:1.pu:1",
        "l3:0",
        "l2:1-2",
        "pu:1-",
    ];
    let mut compared = 0;
    for f in xml_files(&dir) {
        let m = load_file(&f);
        for loc in locations {
            let out = Command::new("hwloc-calc")
                .args(["-i", f.to_str().unwrap(), "-q", "-I", "pu", "--po", loc])
                .output()
                .unwrap();
            let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let ours = Locations::parse(loc).unwrap().pu_set(&m);
            match ours {
                Ok(s) => {
                    let theirs = topocomm_topo::PuSet::parse_list(&theirs).unwrap();
                    assert_eq!(s, theirs, "{} {loc}", f.display());
                    compared += 1;
                }
                // Where we refuse, hwloc-calc finds nothing either.
                Err(e) => assert!(
                    theirs.is_empty(),
                    "{} {loc}: {e} but hwloc-calc says {theirs}",
                    f.display()
                ),
            }
        }
    }
    assert!(compared > 50, "only {compared} comparisons");
}

proptest::proptest! {
    /// Arbitrary location-like text never panics: it resolves (to PUs that
    /// exist) or gives one line.
    #[test]
    fn arbitrary_text_resolves_or_gives_one_line(
        text in "((core|pu|numa|package|l3|l2|foo|all|0x|P#|[0-9]{1,10}|:|-|\\.|,| |even|odd)){0,8}"
    ) {
        let m = synth();
        match Locations::parse(&text).and_then(|l| {
            let per_rank = l.per_rank(&m)?;
            Ok((l.pu_set(&m)?, per_rank))
        }) {
            Ok((set, per_rank)) => {
                proptest::prop_assert!(!set.is_empty() && set.indexes().iter().all(|&p| p < 64));
                proptest::prop_assert!(per_rank.iter().all(|&p| set.contains(p)));
            }
            Err(e) => proptest::prop_assert_eq!(e.to_string().lines().count(), 1, "{}", e),
        }
        let _ = resolve_pair(&m, &text);
        let _ = resolve_pu(&m, &text);
    }
}
