//! The Fortran bridge (mpi/lib/fortran, docs/mpi.md "Fortran") under the
//! real Open MPI and MPICH, with the Fortran example mpi/examples/fring.f90:
//! `topocomm trace` counts it exactly and identically under both MPIs, the
//! reorder shim reorders its MPI_Cart_create under both, and C programs are
//! traced as before with the bridge preloaded. Everything runs
//! oversubscribed (CI machines have 2 cores).
//!
//! Prerequisites: `mpicc.<impl>`, `mpirun.<impl>` and `mpif90.<impl>` (an
//! MPI, or its Fortran compiler, that is missing is skipped with a notice);
//! the reorder shim also needs `target/release/libtopocomm.so` (`make build`
//! at the top). The tests run `make -C mpi` for what they use.

mod common;

use common::{build_mpi, have, mpi_impls, mpirun_argv, run_ok, topocomm_bounded, MPI_TIMEOUT_S};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

type Matrix = BTreeMap<(usize, usize), (u64, u64)>;

/// Ranks of the fring runs: a 3 x 2 grid.
const NP: usize = 6;

/// The MPIs with a Fortran compiler too.
fn fortran_impls() -> Vec<&'static str> {
    mpi_impls()
        .into_iter()
        .filter(|i| {
            let ok = have(&format!("mpif90.{i}"));
            if !ok {
                eprintln!("notice: mpif90.{i} not found, skipping the Fortran tests under {i}");
            }
            ok
        })
        .collect()
}

fn run_argv(argv: &[String]) -> Output {
    run_ok(
        Command::new("timeout")
            .args(["-k", "5", MPI_TIMEOUT_S])
            .args(argv),
    )
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("topocomm-f90-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn read_csv(path: &Path) -> Matrix {
    let text = std::fs::read_to_string(path).expect("trace file");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("src,dst,bytes,msgs"),
        "header of {path:?}"
    );
    let mut m = Matrix::new();
    for l in lines {
        let f: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
        assert_eq!(f.len(), 4, "{l}");
        let old = m.insert((f[0] as usize, f[1] as usize), (f[2], f[3]));
        assert!(old.is_none(), "duplicate pair in {l}");
    }
    m
}

fn add(m: &mut Matrix, src: usize, dst: usize, bytes: u64, msgs: u64) {
    if src == dst || msgs == 0 {
        return;
    }
    let e = m.entry((src, dst)).or_insert((0, 0));
    e.0 += bytes * msgs;
    e.1 += msgs;
}

/// One `rank W new C coords X Y` line of fring.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Role {
    cart: usize,
    coords: [usize; 2],
}

/// Parses fring's output (world rank -> role), checking its own verdicts and
/// that the grid numbering is row-major, as MPI's.
fn fring_roles(stdout: &str, np: usize) -> BTreeMap<usize, Role> {
    assert!(stdout.contains("fring: ring ok"), "{stdout}");
    assert!(stdout.contains("fring: cart neighbours ok"), "{stdout}");
    let mut roles = BTreeMap::new();
    for l in stdout.lines().filter(|l| l.starts_with("rank ")) {
        let t: Vec<usize> = l
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        assert_eq!(t.len(), 4, "{l}");
        roles.insert(
            t[0],
            Role {
                cart: t[1],
                coords: [t[2], t[3]],
            },
        );
    }
    assert_eq!(roles.len(), np, "one line per rank expected:\n{stdout}");
    let dims = grid_dims(&roles);
    assert_eq!(dims[0] * dims[1], np, "{stdout}");
    for r in roles.values() {
        assert_eq!(r.cart, r.coords[0] * dims[1] + r.coords[1], "{stdout}");
    }
    let mut carts: Vec<usize> = roles.values().map(|r| r.cart).collect();
    carts.sort();
    assert_eq!(carts, (0..np).collect::<Vec<_>>(), "not a permutation");
    roles
}

fn grid_dims(roles: &BTreeMap<usize, Role>) -> [usize; 2] {
    let d = |k: usize| roles.values().map(|r| r.coords[k]).max().unwrap() + 1;
    [d(0), d(1)]
}

/// fring's traffic (see the header of mpi/examples/fring.f90), in world
/// ranks, given where each world rank sits in the grid.
fn fring_expected(roles: &BTreeMap<usize, Role>) -> Matrix {
    let n = roles.len();
    let dims = grid_dims(roles);
    let world_of: BTreeMap<usize, usize> = roles.iter().map(|(&w, r)| (r.cart, w)).collect();
    let mut x = Matrix::new();
    for (&w, r) in roles {
        add(&mut x, w, (w + 1) % n, 40, 3);
        add(&mut x, w, (w + n - 1) % n, 200, 2);
        let [i, j] = r.coords;
        add(
            &mut x,
            w,
            world_of[&(((i + 1) % dims[0]) * dims[1] + j)],
            4,
            1,
        );
        if j + 1 < dims[1] {
            add(&mut x, w, world_of[&(i * dims[1] + j + 1)], 8, 1);
        }
    }
    x
}

#[test]
fn trace_counts_fortran_fring_exactly_under_both_mpis() {
    let mut seen: Vec<(&str, Matrix)> = Vec::new();
    for imp in fortran_impls() {
        let b = build_mpi(
            imp,
            &["fring", "libtopocomm-trace.so", "libtopocomm-fortran.so"],
        );
        let dir = tmpdir(&format!("trace-{imp}"));
        let csv = dir.join("fring.csv");
        let prog = vec![b.join("fring").display().to_string()];
        let o = run_ok(
            topocomm_bounded()
                .arg("trace")
                .arg("--out")
                .arg(&csv)
                .arg("--")
                .args(mpirun_argv(imp, NP, &[], &prog)),
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("libtopocomm-fortran.so:"),
            "{imp}: bridge not preloaded first:\n{stderr}"
        );
        let roles = fring_roles(&stdout, NP);
        let got = read_csv(&csv);
        assert_eq!(got, fring_expected(&roles), "{imp}: trace of fring");
        seen.push((imp, got));
        let _ = std::fs::remove_dir_all(&dir);
    }
    if let [(a, x), (b, y)] = &seen[..] {
        assert_eq!(x, y, "fring traced differently under {a} and {b}");
    }
}

// The documented decompositions of the collectives (docs/mpi.md), as in
// mpi_e2e.rs, on a communicator whose rank i is world rank `w[i]`.
fn dissemination_barrier(x: &mut Matrix, w: &[usize]) {
    let n = w.len();
    for (r, &wr) in w.iter().enumerate() {
        let mut k = 1;
        while k < n {
            add(x, wr, w[(r + k) % n], 0, 1);
            k <<= 1;
        }
    }
}

fn ring_allgather(x: &mut Matrix, w: &[usize], s: u64) {
    let n = w.len();
    for (r, &wr) in w.iter().enumerate() {
        add(x, wr, w[(r + 1) % n], s, n as u64 - 1);
    }
}

fn recursive_doubling_allreduce(x: &mut Matrix, w: &[usize], s: u64) {
    let n = w.len();
    let p2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - p2;
    for r in 0..n {
        let newrank = if r < 2 * rem {
            if r % 2 == 0 {
                add(x, w[r], w[r + 1], s, 1);
                continue;
            }
            r / 2
        } else {
            r - rem
        };
        let mut mask = 1;
        while mask < p2 {
            let nd = newrank ^ mask;
            let dst = if nd < rem { nd * 2 + 1 } else { nd + rem };
            add(x, w[r], w[dst], s, 1);
            mask <<= 1;
        }
        if r < 2 * rem {
            add(x, w[r], w[r - 1], s, 1);
        }
    }
}

/// With `--collectives`: the collectives of fring come on top, the in-place
/// allgather counted with its receive count (so the bridge must have turned
/// Fortran's MPI_IN_PLACE into C's: the send count given is 0).
#[test]
fn trace_counts_fortran_collectives_with_in_place() {
    let mut seen: Vec<(&str, Matrix)> = Vec::new();
    for imp in fortran_impls() {
        let b = build_mpi(
            imp,
            &["fring", "libtopocomm-trace.so", "libtopocomm-fortran.so"],
        );
        let dir = tmpdir(&format!("coll-{imp}"));
        let csv = dir.join("fring.csv");
        let prog = vec![b.join("fring").display().to_string()];
        let o = run_ok(
            topocomm_bounded()
                .arg("trace")
                .arg("--collectives")
                .arg("--out")
                .arg(&csv)
                .arg("--")
                .args(mpirun_argv(imp, NP, &[], &prog)),
        );
        let roles = fring_roles(&String::from_utf8_lossy(&o.stdout), NP);
        let mut want = fring_expected(&roles);
        let world: Vec<usize> = (0..NP).collect();
        ring_allgather(&mut want, &world, 4);
        recursive_doubling_allreduce(&mut want, &world, 4);
        recursive_doubling_allreduce(&mut want, &world, 4);
        let mut grid = vec![0; NP];
        for (&w, r) in &roles {
            grid[r.cart] = w;
        }
        dissemination_barrier(&mut want, &grid);
        let got = read_csv(&csv);
        assert_eq!(got, want, "{imp}: trace of fring with collectives");
        seen.push((imp, got));
        let _ = std::fs::remove_dir_all(&dir);
    }
    if let [(a, x), (b, y)] = &seen[..] {
        assert_eq!(x, y, "fring traced differently under {a} and {b}");
    }
}

#[test]
fn reorder_shim_reorders_fortran_cart_create_with_the_bridge() {
    let mut seen: Vec<(&str, String, BTreeMap<usize, Role>)> = Vec::new();
    for imp in fortran_impls() {
        let b = build_mpi(
            imp,
            &["fring", "libtopocomm-reorder.so", "libtopocomm-fortran.so"],
        );
        let shim = b.join("libtopocomm-reorder.so").display().to_string();
        let bridge = b.join("libtopocomm-fortran.so").display().to_string();
        let preload = format!("{bridge}:{shim}");
        let prog = vec![b.join("fring").display().to_string()];
        for force in ["reverse", "shift:2"] {
            let env = [
                ("LD_PRELOAD", preload.as_str()),
                ("TOPOCOMM_REORDER_FORCE", force),
            ];
            let o = run_argv(&mpirun_argv(imp, NP, &env, &prog));
            let roles = fring_roles(&String::from_utf8_lossy(&o.stdout), NP);
            for (&w, r) in &roles {
                let want = if force == "reverse" {
                    NP - 1 - w
                } else {
                    (w + 2) % NP
                };
                assert_eq!(r.cart, want, "{imp} {force}: world rank {w}");
            }
            seen.push((imp, force.to_string(), roles));
        }
        if imp == "openmpi" {
            // Without the bridge, Open MPI's Fortran MPI_Cart_create calls
            // PMPI_Cart_create: the shim never sees it (the problem the
            // bridge solves).
            let env = [
                ("LD_PRELOAD", shim.as_str()),
                ("TOPOCOMM_REORDER_FORCE", "reverse"),
            ];
            let o = run_argv(&mpirun_argv(imp, NP, &env, &prog));
            let roles = fring_roles(&String::from_utf8_lossy(&o.stdout), NP);
            assert!(
                roles.iter().all(|(&w, r)| r.cart == w),
                "openmpi without the bridge: expected no reordering, got {roles:?}"
            );
        }
    }
    for (imp, force, roles) in &seen {
        for (imp2, force2, roles2) in &seen {
            if force == force2 && imp != imp2 {
                assert_eq!(roles, roles2, "{force}: {imp} and {imp2} differ");
            }
        }
    }
}

/// Ring pattern of mpi/examples/ring.c: each member of k rings of m sends
/// `sends` messages of `s` bytes to the next.
fn ring_p2p(k: usize, m: usize, sends: u64, s: u64) -> Matrix {
    let mut x = Matrix::new();
    for r in 0..k * m {
        let first = r / m * m;
        add(&mut x, r, first + (r - first + 1) % m, s, sends);
    }
    x
}

#[test]
fn c_programs_trace_the_same_with_the_bridge() {
    for imp in mpi_impls() {
        let b = build_mpi(
            imp,
            &["ring", "libtopocomm-trace.so", "libtopocomm-fortran.so"],
        );
        let tracer = b.join("libtopocomm-trace.so").display().to_string();
        let dir = tmpdir(&format!("cring-{imp}"));
        let (with, without) = (dir.join("with.csv"), dir.join("without.csv"));
        let prog: Vec<String> = [
            b.join("ring").display().to_string(),
            "-k".into(),
            "2".into(),
            "-m".into(),
            "3".into(),
            "-l".into(),
            "2".into(),
            "-s".into(),
            "64".into(),
            "--mode".into(),
            "isend".into(),
        ]
        .into();
        // `topocomm trace` preloads the bridge, then the tracer.
        run_ok(
            topocomm_bounded()
                .arg("trace")
                .arg("--out")
                .arg(&with)
                .arg("--")
                .args(mpirun_argv(imp, 6, &[], &prog)),
        );
        // The tracer alone.
        let out = without.display().to_string();
        let env = [
            ("LD_PRELOAD", tracer.as_str()),
            ("TOPOCOMM_TRACE_OUT", out.as_str()),
        ];
        run_argv(&mpirun_argv(imp, 6, &env, &prog));
        let (a, c) = (read_csv(&with), read_csv(&without));
        assert_eq!(a, c, "{imp}: ring traced differently with the bridge");
        assert_eq!(a, ring_p2p(2, 3, 2, 64), "{imp}: ring trace");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
