//! End-to-end tests of the MPI pieces under the real Open MPI and MPICH:
//! tracer counts checked exactly against each example's known pattern,
//! trace -> `topocomm map` onto a synthetic 4-node cluster, and the reorder
//! shim. Everything runs oversubscribed (CI machines have 2 cores).
//!
//! Prerequisites: `mpicc.<impl>`/`mpirun.<impl>` (an MPI that is missing is
//! skipped with a notice). The tests run `make -C mpi` for what they use;
//! the reorder shim also needs `target/release/libtopocomm.so` (`cargo build
//! --release`, or `make build` at the top, which does both).

mod common;

use common::{build_mpi, mpi_impls, mpirun_argv, run_ok, topocomm_bounded, MPI_TIMEOUT_S};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

type Matrix = BTreeMap<(usize, usize), (u64, u64)>;

/// Runs argv bounded by `timeout`.
fn run_argv(argv: &[String]) -> Output {
    run_ok(
        Command::new("timeout")
            .args(["-k", "5", MPI_TIMEOUT_S])
            .args(argv),
    )
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("topocomm-e2e-{}-{name}", std::process::id()));
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

/// Runs `topocomm trace` and returns the matrix it wrote and the stdout.
fn trace(
    imp: &str,
    np: usize,
    prog: Vec<String>,
    collectives: bool,
    tag: &str,
) -> (Matrix, String) {
    let dir = tmpdir(tag);
    let out = dir.join("trace.csv");
    let mut c = topocomm_bounded();
    c.arg("trace").arg("--out").arg(&out);
    if collectives {
        c.arg("--collectives");
    }
    c.arg("--");
    c.args(mpirun_argv(imp, np, &[], &prog));
    let o = run_ok(&mut c);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(stdout.contains("trace: "), "summary missing: {stdout}");
    let m = read_csv(&out);
    let _ = std::fs::remove_dir_all(&dir);
    (m, stdout)
}

fn add(m: &mut Matrix, src: usize, dst: usize, bytes: u64, msgs: u64) {
    if src == dst || msgs == 0 {
        return;
    }
    let e = m.entry((src, dst)).or_insert((0, 0));
    e.0 += bytes * msgs;
    e.1 += msgs;
}

/// Ring pattern: each member sends `sends` messages of `s` bytes to the next.
fn ring_p2p(k: usize, m: usize, sends: u64, s: u64) -> Matrix {
    let mut x = Matrix::new();
    for r in 0..k * m {
        let first = r / m * m;
        add(&mut x, r, first + (r - first + 1) % m, s, sends);
    }
    x
}

// The documented decompositions (docs/mpi.md), rewritten independently of
// the C code, on a communicator whose rank i is world rank `w[i]`.
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

fn binomial_reduce(x: &mut Matrix, w: &[usize], s: u64) {
    // root 0: rank r sends to r with its lowest set bit cleared
    for (r, &wr) in w.iter().enumerate().skip(1) {
        add(x, wr, w[r & (r - 1)], s, 1);
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
            add(
                x,
                w[r],
                w[if nd < rem { nd * 2 + 1 } else { nd + rem }],
                s,
                1,
            );
            mask <<= 1;
        }
        if r < 2 * rem {
            add(x, w[r], w[r - 1], s, 1);
        }
    }
}

fn merge(a: &mut Matrix, b: &Matrix) {
    for (&(s, d), &(by, ms)) in b {
        let e = a.entry((s, d)).or_insert((0, 0));
        e.0 += by;
        e.1 += ms;
    }
}

#[test]
fn tracer_counts_ring_exactly_in_every_send_mode() {
    for imp in mpi_impls() {
        let b = build_mpi(imp, &["ring", "libtopocomm-trace.so"]);
        let ring = b.join("ring").display().to_string();
        for mode in ["send", "ssend", "isend", "persistent"] {
            let prog = args(&[
                &ring, "-k", "2", "-m", "4", "-l", "3", "-w", "1", "-s", "100", "--mode", mode,
            ]);
            let (got, _) = trace(imp, 8, prog, false, &format!("ring-{imp}-{mode}"));
            assert_eq!(got, ring_p2p(2, 4, 4, 100), "{imp} ring --mode {mode}");
        }
    }
}

#[test]
fn tracer_decomposes_ring_collectives_exactly() {
    for imp in mpi_impls() {
        let b = build_mpi(imp, &["ring", "libtopocomm-trace.so"]);
        let ring = b.join("ring").display().to_string();
        let (k, m, s) = (3, 2, 64u64);
        let prog = args(&[&ring, "-k", "3", "-m", "2", "-l", "2", "-s", "64"]);
        let (got, _) = trace(imp, 6, prog, true, &format!("ringcoll-{imp}"));
        let world: Vec<usize> = (0..k * m).collect();
        let leaders: Vec<usize> = (0..k).map(|r| r * m).collect();
        let mut want = ring_p2p(k, m, 2, s);
        let mut c = Matrix::new();
        dissemination_barrier(&mut c, &world);
        ring_allgather(&mut c, &leaders, s);
        binomial_reduce(&mut c, &world, 16);
        recursive_doubling_allreduce(&mut c, &world, 4);
        merge(&mut want, &c);
        assert_eq!(got, want, "{imp}: ring with collectives");
    }
}

/// Expected halo3d traffic for a grid (row-major ranks, as MPI's).
fn halo_expected(dims: [usize; 3], periodic: bool, n: u64, iters: u64) -> Matrix {
    let p = dims[0] * dims[1] * dims[2];
    let mut x = Matrix::new();
    for r in 0..p {
        let c = [r / (dims[1] * dims[2]), r / dims[2] % dims[1], r % dims[2]];
        for d in 0..3 {
            for step in [-1i64, 1] {
                let mut v = c[d] as i64 + step;
                if v < 0 || v >= dims[d] as i64 {
                    if !periodic {
                        continue;
                    }
                    v = v.rem_euclid(dims[d] as i64);
                }
                let mut cc = c;
                cc[d] = v as usize;
                let nb = (cc[0] * dims[1] + cc[1]) * dims[2] + cc[2];
                add(&mut x, r, nb, n * n * 8, iters);
                add(&mut x, r, nb, 4, 1); // the neighbour check
            }
        }
    }
    x
}

fn grid_of(stdout: &str) -> [usize; 3] {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("halo3d: grid "))
        .unwrap_or_else(|| panic!("no grid line in {stdout}"));
    let g: Vec<usize> = line["halo3d: grid ".len()..]
        .split([' ', ','])
        .next()
        .unwrap()
        .split('x')
        .map(|x| x.parse().unwrap())
        .collect();
    [g[0], g[1], g[2]]
}

#[test]
fn tracer_counts_halo3d_exactly() {
    for imp in mpi_impls() {
        let b = build_mpi(imp, &["halo3d", "libtopocomm-trace.so"]);
        let halo = b.join("halo3d").display().to_string();
        for (np, periodic, mode) in [
            (8, "1", "isend"),
            (12, "0", "persistent"),
            (6, "1", "sendrecv"),
        ] {
            let prog = args(&[
                &halo,
                "-n",
                "4",
                "-i",
                "3",
                "--periodic",
                periodic,
                "--mode",
                mode,
            ]);
            let (got, stdout) = trace(imp, np, prog, false, &format!("halo-{imp}-{mode}"));
            assert!(stdout.contains("cartesian neighbours ok"), "{stdout}");
            let want = halo_expected(grid_of(&stdout), periodic == "1", 4, 3);
            assert_eq!(got, want, "{imp} halo3d np {np} --mode {mode}");
        }
    }
}

/// Parses `rank W new N ring R pos P` lines: world rank -> (new rank, ring).
fn ring_roles(stdout: &str, np: usize) -> BTreeMap<usize, (usize, usize)> {
    let mut roles = BTreeMap::new();
    for l in stdout.lines().filter(|l| l.starts_with("rank ")) {
        let t: Vec<&str> = l.split_whitespace().collect();
        let w: usize = t[1].parse().unwrap();
        roles.insert(w, (t[3].parse().unwrap(), t[5].parse().unwrap()));
    }
    assert_eq!(roles.len(), np, "one line per rank expected:\n{stdout}");
    let news: BTreeSet<usize> = roles.values().map(|v| v.0).collect();
    assert_eq!(news, (0..np).collect(), "new ranks are not a permutation");
    roles
}

#[test]
fn reorder_shim_keeps_neighbours_under_forced_permutations() {
    for imp in mpi_impls() {
        let b = build_mpi(imp, &["ring", "halo3d", "libtopocomm-reorder.so"]);
        let shim = b.join("libtopocomm-reorder.so").display().to_string();
        let ring = b.join("ring").display().to_string();
        let halo = b.join("halo3d").display().to_string();
        for force in ["reverse", "shift:3"] {
            let env = [
                ("LD_PRELOAD", shim.as_str()),
                ("TOPOCOMM_REORDER_FORCE", force),
            ];
            let prog = args(&[&ring, "-k", "2", "-m", "4", "-l", "2", "--graph", "--print"]);
            let o = run_argv(&mpirun_argv(imp, 8, &env, &prog));
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert!(
                stdout.contains("graph neighbours ok"),
                "{imp} {force}: {stdout}"
            );
            for (w, (new, _)) in ring_roles(&stdout, 8) {
                let want = if force == "reverse" {
                    7 - w
                } else {
                    (w + 3) % 8
                };
                assert_eq!(new, want, "{imp} {force}: world rank {w}");
            }
            let prog = args(&[
                &halo,
                "-n",
                "2",
                "-i",
                "1",
                "--periodic",
                "0",
                "--reorder",
                "1",
                "--print",
            ]);
            let o = run_argv(&mpirun_argv(imp, 6, &env, &prog));
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert!(
                stdout.contains("cartesian neighbours ok"),
                "{imp} {force}: {stdout}"
            );
            let news: BTreeSet<usize> = stdout
                .lines()
                .filter(|l| l.starts_with("rank "))
                .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
                .collect();
            assert_eq!(news, (0..6).collect(), "{imp} {force}: {stdout}");
        }
    }
}

/// The simulated cluster: 4 nodes of 4 PUs, round-robin placement (world
/// rank w on node w % NODES), so that every ring starts spread over all nodes.
const NODES: usize = 4;
const NODE_TOPO: &str = "synthetic:core:4 pu:1";

#[test]
fn trace_then_map_puts_each_ring_on_one_node() {
    for imp in mpi_impls() {
        let b = build_mpi(imp, &["ring", "libtopocomm-trace.so"]);
        let ring = b.join("ring").display().to_string();
        let dir = tmpdir(&format!("map-{imp}"));
        let csv = dir.join("ring.csv");
        let prog = args(&[&ring, "-k", "4", "-m", "4", "-l", "3", "-s", "4096"]);
        run_ok(
            topocomm_bounded()
                .arg("trace")
                .arg("--out")
                .arg(&csv)
                .arg("--")
                .args(mpirun_argv(imp, 16, &[], &prog)),
        );
        assert_eq!(read_csv(&csv), ring_p2p(4, 4, 3, 4096), "{imp} trace");
        let o = run_ok(topocomm_bounded().arg("map").arg(&csv).args([
            "--nodes",
            &NODES.to_string(),
            "--format",
            "perm",
            "--topology",
            NODE_TOPO,
        ]));
        let perm = String::from_utf8_lossy(&o.stdout);
        let nodes: Vec<usize> = perm
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(nodes.len(), 16, "one perm line per rank:\n{perm}");
        for r in 0..4 {
            let set: BTreeSet<usize> = nodes[r * 4..r * 4 + 4].iter().copied().collect();
            assert_eq!(
                set.len(),
                1,
                "{imp}: ring {r} spread over nodes {set:?}:\n{perm}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn reorder_shim_puts_each_ring_on_one_node() {
    for imp in mpi_impls() {
        let b = build_mpi(imp, &["ring", "libtopocomm-reorder.so"]);
        let shim = b.join("libtopocomm-reorder.so").display().to_string();
        let ring = b.join("ring").display().to_string();
        let nodes = NODES.to_string();
        let env = [
            ("LD_PRELOAD", shim.as_str()),
            ("TOPOCOMM_NODES", nodes.as_str()),
            ("TOPOCOMM_PLACEMENT", "round-robin"),
            ("TOPOCOMM_TOPOLOGY", NODE_TOPO),
        ];
        let prog = args(&[
            &ring,
            "-k",
            "4",
            "-m",
            "4",
            "-l",
            "2",
            "--graph",
            "--reorder",
            "1",
            "--print",
        ]);
        let o = run_argv(&mpirun_argv(imp, 16, &env, &prog));
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !stderr.contains("mapping engine not built in"),
            "target/release/libtopocomm.so has no mapping engine: run `cargo build --release`"
        );
        assert!(
            !stderr.contains("warning"),
            "{imp}: shim fell back:\n{stderr}"
        );
        assert!(stdout.contains("graph neighbours ok"), "{imp}: {stdout}");
        let roles = ring_roles(&stdout, 16);
        // Before reordering ring r = world ranks 4r..4r+3, on 4 different
        // nodes (round-robin); after, each ring's processes share a node.
        for r in 0..4 {
            let set: BTreeSet<usize> = roles
                .iter()
                .filter(|(_, v)| v.1 == r)
                .map(|(w, _)| w % NODES)
                .collect();
            assert_eq!(set.len(), 1, "{imp}: ring {r} on nodes {set:?}:\n{stdout}");
        }
    }
}
