//! Launcher formats: host naming and the shape of the rankfile and Hydra
//! machinefile (their behaviour under the real launchers is checked by
//! crates/cli/tests/launchers.rs).

use topocomm_map::output::{hydra, rankfile};
use topocomm_map::{Cluster, MapError, Slot, Target};
use topocomm_topo::Machine;

fn machine(desc: &str) -> Machine {
    topocomm_topo::load(&format!("synthetic:{desc}").parse().unwrap()).unwrap()
}

fn body(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

/// Target over a hostfile's nodes, every PU once.
fn hosts(text: &str) -> Target {
    let default = || -> Result<Machine, MapError> { Ok(machine("pack:1 core:2 pu:2")) };
    let c = Cluster::from_hostfile("hosts", text, &default).unwrap();
    let slots = c.default_slots(1, false).unwrap();
    Target::new(c, &slots).unwrap()
}

fn at(node: u32, pu: u32) -> Slot {
    Slot { node, pu }
}

#[test]
fn one_node_names_localhost_unless_live() {
    let c = Cluster::uniform(machine("pack:1 core:2 pu:1"), 1);
    assert_eq!(c.nodes[0].host, "localhost");
    let c = Cluster::uniform(machine("pack:1 core:2 pu:1"), 2);
    assert_eq!(c.nodes[1].host, "node1");
    // Live: the node's own host name, as Open MPI names its nodes.
    let live = topocomm_topo::load(&"live".parse().unwrap()).unwrap();
    let want = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(Cluster::uniform(live, 1).nodes[0].host, want.trim());
}

#[test]
fn rankfile_uses_pu_os_indexes_and_says_how_to_run_it() {
    let t = hosts("a\nb\n");
    // PU OS indexes of `pack:1 core:2 pu:2` are 0..3 with siblings 0,1.
    let text = rankfile(&t, &[at(0, 3), at(1, 0), at(0, 1)]);
    assert_eq!(
        body(&text),
        ["rank 0=a slot=3", "rank 1=b slot=0", "rank 2=a slot=1"]
    );
    assert!(text.contains(
        "# run: mpirun --mca rmaps_rank_file_physical 1 --use-hwthread-cpus --oversubscribe --rankfile FILE -np 3 PROGRAM"
    ));
}

#[test]
fn hydra_has_one_line_per_run_of_one_host() {
    let t = hosts("a\nb\n");
    let text = hydra(&t, &[at(0, 3), at(0, 2), at(1, 0), at(0, 1), at(0, 1)]);
    assert_eq!(
        body(&text),
        [
            "a:2 binding=user:3,2",
            "b:1 binding=user:0",
            "a:2 binding=user:1,1"
        ]
    );
    assert!(text.contains("# run: mpiexec.hydra -f FILE -n 5 PROGRAM"));
    // Two nodes with one host name: Hydra merges consecutive lines of a
    // host (and rejects a second binding=), so the run is one line.
    let t = hosts("a slots=0-1\na slots=2-3\n");
    assert_eq!(
        body(&hydra(&t, &[at(0, 1), at(1, 2), at(1, 3)])),
        ["a:3 binding=user:1,2,3"]
    );
}
