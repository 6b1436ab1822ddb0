//! Rank reordering from C: `tc_map_to_slots`, used by the MPI reorder shim.

use crate::error::*;
use crate::topo::c_str;
use std::ffi::c_char;
use topocomm_map::{map, Cluster, CommMatrix, Edge, MapOptions, Slot, Target};

/// Reads `len` elements from a caller array (NULL only allowed when empty).
fn slice<'a, T>(p: *const T, len: usize, name: &str) -> Result<&'a [T], i32> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(fail(TC_ERR_INVALID_ARGUMENT, format!("{name} is NULL")));
    }
    // SAFETY: non-NULL, and the caller guarantees `len` readable elements
    // that stay valid during the call (documented in topocomm.h).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// Maps the `n` vertices of a directed weighted graph onto `n` slots; see
/// include/topocomm.h for the contract.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn tc_map_to_slots(
    topology_spec: *const c_char,
    nodes: i32,
    n: i32,
    slot_node: *const i32,
    slot_pu: *const i32,
    m: std::ffi::c_long,
    src: *const i32,
    dst: *const i32,
    bytes: *const f64,
    msgs: *const f64,
    vertex_of_slot: *mut i32,
) -> i32 {
    guard(|| {
        match map_to_slots(
            topology_spec,
            nodes,
            n,
            slot_node,
            slot_pu,
            m,
            src,
            dst,
            bytes,
            msgs,
        ) {
            Ok(perm) => {
                if vertex_of_slot.is_null() {
                    return fail(TC_ERR_INVALID_ARGUMENT, "vertex_of_slot is NULL");
                }
                // SAFETY: non-NULL, and the caller provides n writable ints;
                // perm.len() == n.
                unsafe { std::ptr::copy_nonoverlapping(perm.as_ptr(), vertex_of_slot, perm.len()) };
                TC_OK
            }
            Err(code) => code,
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn map_to_slots(
    spec: *const c_char,
    nodes: i32,
    n: i32,
    slot_node: *const i32,
    slot_pu: *const i32,
    m: std::ffi::c_long,
    src: *const i32,
    dst: *const i32,
    bytes: *const f64,
    msgs: *const f64,
) -> Result<Vec<i32>, i32> {
    if n < 1 {
        return Err(fail(
            TC_ERR_INVALID_ARGUMENT,
            format!("n is {n}, expected at least 1"),
        ));
    }
    if nodes < 1 {
        return Err(fail(
            TC_ERR_INVALID_ARGUMENT,
            format!("nodes is {nodes}, expected at least 1"),
        ));
    }
    if m < 0 {
        return Err(fail(
            TC_ERR_INVALID_ARGUMENT,
            format!("m is {m}, expected >= 0"),
        ));
    }
    let (nu, mu) = (n as usize, m as usize);
    let spec = if spec.is_null() {
        None
    } else {
        match c_str(spec, "topology_spec")? {
            "" => None,
            s => Some(s),
        }
    };
    let sn = slice(slot_node, nu, "slot_node")?;
    let sp = slice(slot_pu, nu, "slot_pu")?;
    let (s, d) = (slice(src, mu, "src")?, slice(dst, mu, "dst")?);
    let (b, c) = (slice(bytes, mu, "bytes")?, slice(msgs, mu, "msgs")?);
    let mut slots = Vec::with_capacity(nu);
    for i in 0..nu {
        if sn[i] < 0 || sn[i] >= nodes || sp[i] < 0 {
            return Err(fail(
                TC_ERR_INVALID_ARGUMENT,
                format!(
                    "slot {i}: node {} / PU {} out of range (nodes 0..{})",
                    sn[i],
                    sp[i],
                    nodes - 1
                ),
            ));
        }
        slots.push(Slot {
            node: sn[i] as u32,
            pu: sp[i] as u32,
        });
    }
    let mut edges = Vec::with_capacity(mu);
    for k in 0..mu {
        if s[k] < 0 || s[k] >= n || d[k] < 0 || d[k] >= n {
            return Err(fail(
                TC_ERR_INVALID_ARGUMENT,
                format!(
                    "edge {k}: {} -> {} is out of range (vertices 0..{})",
                    s[k],
                    d[k],
                    n - 1
                ),
            ));
        }
        for (what, v) in [("bytes", b[k]), ("msgs", c[k])] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(fail(
                    TC_ERR_INVALID_ARGUMENT,
                    format!("edge {k}: {what} is {v}, expected a finite non-negative number"),
                ));
            }
        }
        edges.push(Edge {
            src: s[k] as u32,
            dst: d[k] as u32,
            bytes: b[k],
            msgs: c[k],
        });
    }
    let machine =
        topocomm_topo::load_default(spec).map_err(|e| fail(TC_ERR_TOPOLOGY, e.to_string()))?;
    let target = Target::new(Cluster::uniform(machine, nodes as usize), &slots)
        .map_err(|e| fail(TC_ERR_INVALID_ARGUMENT, e.to_string()))?;
    let matrix = CommMatrix::from_edges(nu, edges);
    let r = map(&target, &matrix, &MapOptions::default())
        .map_err(|e| fail(TC_ERR_INVALID_ARGUMENT, e.to_string()))?;
    let mut perm = vec![-1i32; nu];
    for (v, &leaf) in r.leaf_of_rank.iter().enumerate() {
        perm[target.slot_index_of_leaf(leaf)] = v as i32;
    }
    if perm.iter().any(|&v| v < 0) {
        return Err(fail(TC_ERR_INTERNAL, "mapping is not a permutation"));
    }
    Ok(perm)
}
