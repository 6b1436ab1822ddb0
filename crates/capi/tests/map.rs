//! tc_map_to_slots through its extern "C" signature.

use std::ffi::CString;
use topocomm::{tc_map_to_slots, TC_ERR_INVALID_ARGUMENT, TC_OK};

fn call(
    spec: &str,
    nodes: i32,
    slots: &[(i32, i32)],
    edges: &[(i32, i32, f64, f64)],
) -> (i32, Vec<i32>) {
    let spec = CString::new(spec).unwrap();
    let sn: Vec<i32> = slots.iter().map(|s| s.0).collect();
    let sp: Vec<i32> = slots.iter().map(|s| s.1).collect();
    let src: Vec<i32> = edges.iter().map(|e| e.0).collect();
    let dst: Vec<i32> = edges.iter().map(|e| e.1).collect();
    let b: Vec<f64> = edges.iter().map(|e| e.2).collect();
    let m: Vec<f64> = edges.iter().map(|e| e.3).collect();
    let mut out = vec![-1i32; slots.len()];
    let rc = tc_map_to_slots(
        spec.as_ptr(),
        nodes,
        slots.len() as i32,
        sn.as_ptr(),
        sp.as_ptr(),
        edges.len() as std::ffi::c_long,
        src.as_ptr(),
        dst.as_ptr(),
        b.as_ptr(),
        m.as_ptr(),
        out.as_mut_ptr(),
    );
    (rc, out)
}

#[test]
fn pairs_land_on_the_same_node() {
    // 2 nodes x 2 PUs; vertices 0-2 and 1-3 talk: each pair must share a node.
    let slots = [(0, 0), (0, 1), (1, 0), (1, 1)];
    let edges = [
        (0, 2, 1e6, 10.0),
        (2, 0, 1e6, 10.0),
        (1, 3, 1e6, 10.0),
        (3, 1, 1e6, 10.0),
    ];
    let (rc, out) = call("synthetic:pack:1 core:2 pu:1", 2, &slots, &edges);
    assert_eq!(rc, TC_OK);
    let mut sorted = out.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, 1, 2, 3]);
    let node_of = |v: i32| slots[out.iter().position(|&x| x == v).unwrap()].0;
    assert_eq!(node_of(0), node_of(2));
    assert_eq!(node_of(1), node_of(3));
}

#[test]
fn oversubscribed_slots_and_bad_edges() {
    let slots = [(0, 0), (0, 0), (0, 1), (0, 1)];
    let (rc, out) = call(
        "synthetic:pack:1 core:2 pu:1",
        1,
        &slots,
        &[(0, 3, 5e5, 1.0)],
    );
    assert_eq!(rc, TC_OK);
    let pu_of = |v: i32| slots[out.iter().position(|&x| x == v).unwrap()].1;
    // Two ranks on one PU pay a context switch per message (class `self`),
    // so the two that talk run on different PUs.
    assert_ne!(pu_of(0), pu_of(3));
    let (rc, _) = call(
        "synthetic:pack:1 core:2 pu:1",
        1,
        &slots,
        &[(0, 9, 1.0, 1.0)],
    );
    assert_eq!(rc, TC_ERR_INVALID_ARGUMENT);
    let (rc, _) = call("synthetic:pack:1 core:2 pu:1", 1, &[(0, 0), (0, 7)], &[]);
    assert_eq!(rc, TC_ERR_INVALID_ARGUMENT);
    let (rc, _) = call(
        "synthetic:pack:1 core:2 pu:1",
        1,
        &slots,
        &[(0, 1, f64::NAN, 1.0)],
    );
    assert_eq!(rc, TC_ERR_INVALID_ARGUMENT);
}
