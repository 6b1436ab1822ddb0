//! `topocomm accel` (mpi/lib/accel, docs/commands/accel.md) under the real
//! Open MPI and MPICH: unmodified programs built with plain mpicc / mpicxx /
//! mpif90
//! (never linked with topocomm) run accelerated, the per-path counts prove
//! it, the semantics check program (tests/accel/checks.c) passes plain and
//! accelerated with 1, 2 and 3 pretend nodes, and the job falls back to
//! plain MPI together, with one line, for MPI_THREAD_MULTIPLE and for a
//! failing bootstrap. Everything runs oversubscribed (CI machines have 2
//! cores). MPICH's own test suite runs under the accelerator in
//! `make test-conformance` (docs/conformance.md).

mod common;

use common::{build_mpi, have, mpi_impls, output_isolated, MPI_TIMEOUT_S as TIMEOUT_S};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn mpirun(imp: &str, np: usize, prog: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![format!("mpirun.{imp}")];
    if imp == "openmpi" {
        v.push("--oversubscribe".into());
    }
    v.extend(["-n".into(), np.to_string()]);
    v.extend(prog.iter().map(|s| s.to_string()));
    v
}

/// `topocomm accel ARGS -- LAUNCH`, bounded; returns the output whatever
/// the exit status.
fn accel(args: &[&str], launch: &[String], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("timeout");
    c.args([
        "-k",
        "5",
        TIMEOUT_S,
        env!("CARGO_BIN_EXE_topocomm"),
        "accel",
    ])
    .args(args)
    .arg("--")
    .args(launch)
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .env("TOPOCOMM_AUTOTUNE", "0");
    for (k, v) in env {
        c.env(k, v);
    }
    output_isolated(&mut c).expect("spawn topocomm accel")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn assert_ok(o: &Output, what: &str) -> String {
    let t = text(o);
    assert!(o.status.success(), "{what} failed ({}):\n{t}", o.status);
    t
}

/// (transport msgs sent, transport received, plain msgs sent, plain received)
/// per rank, from the `--verbose` lines.
fn counts(t: &str) -> Vec<(usize, [u64; 4])> {
    let mut v: Vec<(usize, [u64; 4])> = t
        .lines()
        .filter_map(|l| l.strip_prefix("topocomm accel: rank "))
        .filter(|l| l.contains("transport"))
        .map(|l| {
            let n: Vec<u64> = l
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            // rank, node, tc msgs, tc bytes, tc recv, plain msgs, plain bytes, plain recv
            (n[0] as usize, [n[2], n[4], n[5], n[7]])
        })
        .collect();
    v.sort();
    v
}

/// The check program built with plain mpicc.<imp> into a temporary folder
/// of the calling test's own (`test`): tests run in parallel threads of one
/// process, and one must never run a binary another is still writing.
fn checks(imp: &str, test: &str) -> PathBuf {
    check_program(imp, test, "checks")
}

/// tests/accel/`name`.c built with plain mpicc.<imp> (as `checks`).
fn check_program(imp: &str, test: &str, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/accel/{name}.c"));
    let dir = std::env::temp_dir().join(format!(
        "topocomm-accel-{}-{test}-{imp}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(name);
    let out = Command::new(format!("mpicc.{imp}"))
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-lm")
        .output()
        .expect("mpicc runs");
    assert!(
        out.status.success(),
        "mpicc.{imp} {name}.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

#[test]
fn unmodified_c_and_fortran_programs_run_accelerated_under_both_mpis() {
    for imp in mpi_impls() {
        let mut targets = vec![
            "ring",
            "halo2d",
            "libtopocomm-accel.so",
            "libtopocomm-fortran.so",
        ];
        let fortran = have(&format!("mpif90.{imp}"));
        if fortran {
            targets.push("fring");
        } else {
            eprintln!("notice: mpif90.{imp} not found, skipping the Fortran program under {imp}");
        }
        let dir = build_mpi(imp, &targets);
        let ring = dir.join("ring").display().to_string();
        // One node: every one of the 4 x 100 ring messages through the transport.
        let t = assert_ok(
            &accel(&["-v"], &mpirun(imp, 4, &[&ring]), &[]),
            &format!("{imp} ring"),
        );
        let c = counts(&t);
        assert_eq!(c.len(), 4, "{imp}: one count line per rank:\n{t}");
        for (r, [tc, tc_in, plain, plain_in]) in &c {
            assert_eq!(
                (*tc, *tc_in, *plain, *plain_in),
                (100, 100, 0, 0),
                "{imp} rank {r}:\n{t}"
            );
        }
        // Two pretend nodes {0,1} {2,3}: 0->1 and 2->3 local, 1->2 and 3->0 plain.
        let t = assert_ok(
            &accel(&["-v", "--nodes", "2"], &mpirun(imp, 4, &[&ring]), &[]),
            &format!("{imp} ring, 2 nodes"),
        );
        let want = [
            (0, [100, 0, 0, 100]),
            (1, [0, 100, 100, 0]),
            (2, [100, 0, 0, 100]),
            (3, [0, 100, 100, 0]),
        ];
        assert_eq!(counts(&t), want, "{imp}:\n{t}");
        // A C++ program (std::vector, a strided column datatype), one node
        // and two pretend nodes: halos checked by the program itself.
        let halo = dir.join("halo2d").display().to_string();
        for nodes in ["1", "2"] {
            let t = assert_ok(
                &accel(&["-v", "--nodes", nodes], &mpirun(imp, 4, &[&halo]), &[]),
                &format!("{imp} halo2d, {nodes} nodes"),
            );
            assert!(t.contains("halo2d: ok"), "{imp}:\n{t}");
            let c = counts(&t);
            assert_eq!(c.len(), 4, "{imp}:\n{t}");
            // 50 exchanges x 4 halos, all local on one node.
            let tc: u64 = c.iter().map(|(_, v)| v[0]).sum();
            let plain: u64 = c.iter().map(|(_, v)| v[2]).sum();
            assert_eq!(tc + plain, 4 * 200, "{imp} {nodes} nodes:\n{t}");
            assert_eq!(plain == 0, nodes == "1", "{imp} {nodes} nodes:\n{t}");
        }
        if fortran {
            let fring = dir.join("fring").display().to_string();
            let t = assert_ok(
                &accel(&["-v"], &mpirun(imp, 4, &[&fring]), &[]),
                &format!("{imp} fring"),
            );
            assert!(t.contains("fring: cart neighbours ok"), "{imp}:\n{t}");
            let c = counts(&t);
            assert_eq!(c.len(), 4, "{imp}:\n{t}");
            assert!(
                c.iter()
                    .all(|(_, [tc, tc_in, plain, _])| *tc > 0 && *tc_in > 0 && *plain == 0),
                "{imp}: a Fortran program's messages go through the transport:\n{t}"
            );
        }
    }
}

#[test]
fn semantics_hold_plain_and_accelerated_with_pretend_nodes() {
    for imp in mpi_impls() {
        build_mpi(imp, &["libtopocomm-accel.so", "libtopocomm-fortran.so"]);
        let exe = checks(imp, "semantics").display().to_string();
        // The program's own verdict under plain MPI first: it must be right.
        let launch = mpirun(imp, 4, &[&exe]);
        plain_verdict(&launch, "accel_checks: ok", &format!("{imp} checks, plain"));
        for nodes in ["1", "2", "3"] {
            let o = accel(&["-v", "--nodes", nodes], &launch, &[]);
            let t = assert_ok(&o, &format!("{imp} checks, {nodes} pretend nodes"));
            assert!(t.contains("accel_checks: ok"), "{imp} {nodes} nodes:\n{t}");
            let c = counts(&t);
            assert_eq!(c.len(), 4, "{imp}:\n{t}");
            let tc: u64 = c.iter().map(|(_, v)| v[0]).sum();
            let plain: u64 = c.iter().map(|(_, v)| v[2]).sum();
            assert!(tc > 0, "{imp} {nodes} nodes: transport used:\n{t}");
            if nodes == "1" {
                assert_eq!(plain, 0, "{imp}: one node, no plain sends:\n{t}");
            } else {
                assert!(plain > 0, "{imp} {nodes} nodes: remote path used:\n{t}");
            }
        }
        let _ = std::fs::remove_dir_all(Path::new(&exe).parent().unwrap());
    }
}

/// A fuzz program's run: its seed, what the setting is, its environment.
type FuzzSetting = (u64, &'static str, &'static [(&'static str, &'static str)]);

/// Random collective sequences (tests/accel/fuzz.c: the communicators,
/// calls, roots, types, operations, MPI_IN_PLACE and byte counts from 0 to
/// 1 MiB drawn from a seed, every result checked) on 4 crowded ranks,
/// under the accelerator's defaults and the settings that route calls
/// elsewhere. The lanes off sent zero-count allreduces to the one-hop
/// algorithm, which refused them with MPI_ERR_NO_MEM when they came first
/// (its slot area was never allocated for slots of 0 bytes), as
/// scripts/coll-fuzz.py's first campaign found; fuzz.c now starts with
/// zero-count reductions on every communicator. Longer campaigns:
/// scripts/coll-fuzz.py.
#[test]
fn random_collective_sequences_give_exact_results() {
    for imp in mpi_impls() {
        build_mpi(imp, &["libtopocomm-accel.so"]);
        let exe = check_program(imp, "fuzz", "fuzz").display().to_string();
        let settings: [FuzzSetting; 4] = [
            (1, "defaults", &[]),
            (4, "lanes off", &[("TOPOCOMM_ACCEL_COLL_LANES", "0")]),
            (
                2,
                "no staging, no gets",
                &[("TOPOCOMM_ACCEL_STAGE", "0"), ("TOPOCOMM_ACCEL_GETS", "0")],
            ),
            (
                3,
                "two pretend nodes, hierarchical",
                &[
                    ("TOPOCOMM_ACCEL_NODES", "2"),
                    ("TOPOCOMM_ACCEL_COLL_HIER", "1"),
                ],
            ),
        ];
        for (i, (seed, what, env)) in settings.iter().enumerate() {
            let seed = seed.to_string();
            let launch = mpirun(imp, 4, &[&exe, &seed, "300", "1048576"]);
            if i == 0 {
                plain_verdict(
                    &launch,
                    "fuzz: ok, 300 calls",
                    &format!("{imp} fuzz, plain"),
                );
            }
            let o = accel(&[], &launch, env);
            let t = assert_ok(&o, &format!("{imp} fuzz seed {seed}, {what}"));
            assert!(
                t.contains("fuzz: ok, 300 calls"),
                "{imp} fuzz seed {seed}, {what}:\n{t}"
            );
        }
        let _ = std::fs::remove_dir_all(Path::new(&exe).parent().unwrap());
    }
}

/// Random point-to-point traffic (tests/accel/pfuzz.c: rounds of up to 24
/// messages of 0 to 1 MiB between random ranks, self included, on three
/// communicators, by every send and receive call the accelerator takes
/// over, wildcards, probes, matched probes, persistent requests, cancels
/// and every completion call; each message checked for its status, its
/// bytes and MPI's non-overtaking order) on 4 crowded ranks, on one node
/// and on two pretend nodes (the plain-MPI path between them).
#[test]
fn random_point_to_point_traffic_arrives_whole_and_in_order() {
    for imp in mpi_impls() {
        build_mpi(imp, &["libtopocomm-accel.so"]);
        let exe = check_program(imp, "pfuzz", "pfuzz").display().to_string();
        let settings: [FuzzSetting; 2] = [
            (1, "one node", &[]),
            (2, "two pretend nodes", &[("TOPOCOMM_ACCEL_NODES", "2")]),
        ];
        for (i, (seed, what, env)) in settings.iter().enumerate() {
            let seed = seed.to_string();
            let launch = mpirun(imp, 4, &[&exe, &seed, "100", "1048576"]);
            if i == 0 {
                plain_verdict(
                    &launch,
                    "pfuzz: ok, 100 rounds",
                    &format!("{imp} pfuzz, plain"),
                );
            }
            let o = accel(&["-v"], &launch, env);
            let t = assert_ok(&o, &format!("{imp} pfuzz seed {seed}, {what}"));
            assert!(
                t.contains("pfuzz: ok, 100 rounds"),
                "{imp} pfuzz seed {seed}, {what}:\n{t}"
            );
            // The messages went through the transport (and between the
            // pretend nodes through the MPI).
            let c = counts(&t);
            assert_eq!(c.len(), 4, "{imp} {what}:\n{t}");
            assert!(
                c.iter().map(|(_, v)| v[0]).sum::<u64>() > 0,
                "{imp} {what}: transport:\n{t}"
            );
            if *what == "two pretend nodes" {
                assert!(
                    c.iter().map(|(_, v)| v[2]).sum::<u64>() > 0,
                    "{imp}: plain path:\n{t}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(Path::new(&exe).parent().unwrap());
    }
}

/// Runs a check program's `launch` under plain MPI (bounded) and asserts
/// its own verdict line: the program must be right before it can judge the
/// accelerator.
/// Whether single copy (`process_vm_readv`, which puts need too) works
/// here, by `topocomm plan`'s probe.
fn single_copy_works() -> bool {
    let o = Command::new(env!("CARGO_BIN_EXE_topocomm"))
        .arg("plan")
        .output()
        .expect("spawn topocomm plan");
    String::from_utf8_lossy(&o.stdout).contains("single copy (process_vm_readv) available")
}

fn plain_verdict(launch: &[String], ok_line: &str, what: &str) {
    let plain = output_isolated(
        Command::new("timeout")
            .args(["-k", "5", TIMEOUT_S])
            .args(launch)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
    )
    .unwrap();
    let t = assert_ok(&plain, what);
    assert!(t.contains(ok_line), "{what}:\n{t}");
}

/// Per rank of `accel -v`'s report: bytes copied into its staging area.
fn staged_bytes(t: &str) -> Vec<u64> {
    t.lines()
        .filter_map(|l| l.split_once("; collectives "))
        .filter_map(|(_, rest)| rest.split_once("trees in near order; "))
        .map(|(_, rest)| rest.split(' ').next().unwrap().parse().unwrap())
        .collect()
}

/// (collectives through the transport, of them through the lanes, through
/// plain MPI) per rank, from the `--verbose` lines.
/// Per rank of `accel -v`'s report: collectives through the transport, of
/// them by lanes, through plain MPI, and bytes put into members' results.
fn coll_counts(t: &str) -> Vec<(u64, u64, u64, u64)> {
    t.lines()
        .filter_map(|l| l.split_once("; collectives "))
        .map(|(_, rest)| {
            let n: Vec<u64> = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            (n[0], n[1], n[2], n[3])
        })
        .collect()
}

#[test]
fn collectives_run_over_the_transport_in_rank_order() {
    for imp in mpi_impls() {
        build_mpi(imp, &["libtopocomm-accel.so"]);
        let exe = check_program(imp, "coll", "coll").display().to_string();
        // 2 ranks (one per CPU on the 2-CPU CI machine), 3 (the reduce +
        // broadcast path) and 4 (recursive doubling).
        for np in [2, 3, 4] {
            let launch = mpirun(imp, np, &[&exe]);
            plain_verdict(&launch, "accel_coll: ok", &format!("{imp} coll, plain"));
            // The two-member allreduce's ways (picked per size from the
            // first calls, so a run otherwise meets each only on some
            // calls) are also forced one at a time at 2 ranks
            // (TOPOCOMM_ACCEL_ALLREDUCE), the halves by pieces with pieces
            // of 1 KiB: coll.c's large allreduces then take dozens to
            // hundreds of pieces, the last one shorter and one element
            // shorter on member 1 (odd counts), in place and not, the
            // matrices' product through PMPI_Reduce_local (the 1 MiB-and-up
            // halves take the pair's fragment by default).
            // The reduced pieces (2 members) and blocks (3 and 4) are put
            // into the receivers' results where single copy works
            // (TOPOCOMM_ACCEL_PUT, on by default), else sent by message:
            // both ways run. The staging areas' way (any number of
            // members) is forced too, with the lanes' barriers (3 and 4
            // members on the lanes) and with messages' barriers. With the
            // lanes' default (crowded nodes only) two members with a CPU
            // each pick the pair line or messages for barriers and small
            // allreduces by trials on the pairs' first calls
            // (TOPOCOMM_ACCEL_PAIR forces either).
            let runs = [
                ("1", "0", "1", "", "", "", ""),
                ("1", "0", "0", "", "", "", ""),
                ("1", "0", "", "", "", "", ""),
                ("1", "0", "", "", "", "", "line"),
                ("1", "0", "", "", "", "", "messages"),
                ("1", "0", "0", "", "", "0", ""),
                ("1", "0", "0", "whole", "", "", ""),
                ("1", "0", "0", "halves", "", "", ""),
                ("1", "0", "0", "pieces", "1024", "", ""),
                ("1", "0", "0", "pieces", "1024", "0", ""),
                ("1", "0", "0", "gets", "", "", ""),
                ("1", "0", "1", "staged", "", "", ""),
                ("1", "0", "0", "staged", "", "", ""),
                ("2", "0", "1", "", "", "", ""),
                ("2", "1", "1", "", "", "", ""),
                ("3", "1", "1", "", "", "", ""),
            ];
            let puts_work = single_copy_works();
            for (nodes, hier, lanes, pick2, piece, put, pair) in runs {
                let two_only = (!pick2.is_empty() && pick2 != "staged") || lanes.is_empty();
                if nodes.parse::<usize>().unwrap() > np || (two_only && np != 2) {
                    continue;
                }
                let env = [
                    ("TOPOCOMM_ACCEL_COLL_HIER", hier),
                    ("TOPOCOMM_ACCEL_COLL_LANES", lanes),
                    ("TOPOCOMM_ACCEL_ALLREDUCE", pick2),
                    ("TOPOCOMM_ACCEL_PAIR_PIECE", piece),
                    ("TOPOCOMM_ACCEL_PUT", put),
                    ("TOPOCOMM_ACCEL_PAIR", pair),
                ];
                let o = accel(&["-v", "--nodes", nodes], &launch, &env);
                let what = format!(
                    "{imp} coll, {np} ranks, {nodes} nodes, hierarchical {hier}, lanes '{lanes}', \
                     two-member allreduce '{pick2}', pieces of '{piece}' bytes, puts '{put}', \
                     pair way '{pair}'"
                );
                let t = assert_ok(&o, &what);
                assert!(t.contains("accel_coll: ok"), "{what}:\n{t}");
                if lanes.is_empty() {
                    // 2 ranks, a CPU each (on 2 CPUs or more): the
                    // pairs' 200 barriers and 800 small allreduces pick
                    // their way once (the world's too few calls), unless
                    // forced.
                    for kind in ["barriers", "allreduces of up to 12 bytes"] {
                        let picks = t
                            .lines()
                            .filter(|l| l.contains(&format!("two-member {kind}: ")))
                            .count();
                        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
                        let want = usize::from(pair.is_empty() && cpus >= 2);
                        assert_eq!(picks, want, "{what}: picks of the {kind}:\n{t}");
                    }
                }
                if np == 2 && nodes == "1" && pick2.is_empty() {
                    // The 101 allreduces of 1000 doubles (on the world
                    // and its duplicate): picked once per communicator.
                    let picks = t
                        .lines()
                        .filter(|l| l.contains("allreduce of 4096-8191 bytes over 2 members: "))
                        .count();
                    assert_eq!(
                        picks, 2,
                        "{what}: the pick of the 8000-byte allreduce:\n{t}"
                    );
                }
                let c = coll_counts(&t);
                assert_eq!(c.len(), np, "{what}:\n{t}");
                if pick2 == "staged" {
                    // Every large allreduce through the staging areas:
                    // every member copies in all but its own block.
                    let s = staged_bytes(&t);
                    assert!(
                        s.len() == np && s.iter().all(|&b| b > 1 << 20),
                        "{what}: bytes staged {s:?}:\n{t}"
                    );
                }
                if nodes == "1" && np >= 3 {
                    // The allreduces and reduces of 140001 doubles go by
                    // blocks, whose reduced blocks are put into the
                    // receivers' results where single copy works.
                    let want = put != "0" && puts_work;
                    assert!(
                        c.iter().all(|v| (v.3 > 0) == want),
                        "{what}: bytes put by the blocks (want some: {want}):\n{t}"
                    );
                }
                if !piece.is_empty() || pick2 == "gets" {
                    // The halves' allreduces by 1 KiB pieces: put into
                    // each other's result (as many bytes each way: the
                    // count of each call is even or the halves differ by
                    // one element, so compare only that both put) unless
                    // switched off or single copy does not work here; by
                    // gets, each member's reduced pieces too.
                    let want = put != "0" && puts_work;
                    assert!(
                        c.iter().all(|v| (v.3 > 0) == want),
                        "{what}: bytes put (want some: {want}):\n{t}"
                    );
                }
                if nodes == "1" {
                    // Every collective of the program on every rank; the
                    // small ones through the lanes when turned on (the
                    // 1000-double ones and the 70 communicators beyond the
                    // 63 lanes through messages). Under Open MPI with more
                    // ranks than CPUs some are left to Open MPI: the
                    // trials' calls and the ways they pick (broadcasts,
                    // allgathers and alltoalls of large blocks) and the
                    // reduces coll.c's reduce_to_mpi gives it.
                    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
                    let left = imp == "openmpi" && np > cpus;
                    assert!(
                        c.iter().all(|v| v.0 > 300 && (v.2 == 0 || left)),
                        "{what}: all through the transport:\n{t}"
                    );
                    if left {
                        assert!(
                            c.iter().all(|v| v.2 > 0),
                            "{what}: blocks to Open MPI:\n{t}"
                        );
                        // The 64 KiB broadcasts: picked by trials, once
                        // per communicator that runs them (so are the
                        // 32 KiB reduces, under both MPIs: below).
                        let picked =
                            format!("crowded broadcast of 65536-131071 bytes over {np} members: ");
                        assert!(t.contains(&picked), "{what}: no pick:\n{t}");
                        // So are the allgathers and alltoalls of 8 KiB
                        // blocks, once per communicator that runs them.
                        for call in ["allgather", "alltoall"] {
                            let picked = format!(
                                "crowded {call} of 8192-16383-byte blocks over {np} members: "
                            );
                            assert!(t.contains(&picked), "{what}: no {call} pick:\n{t}");
                        }
                        // The world's 13 alltoalls of 4 MiB blocks: long
                        // calls, so picked after 6 + 3 calls by the
                        // transport and 1 + 3 by Open MPI.
                        let picked = format!(
                            "crowded alltoall of 4194304-8388607-byte blocks over {np} members: "
                        );
                        let line = t.lines().find(|l| l.contains(&picked));
                        assert!(
                            line.is_some_and(|l| l.ends_with("every member's 3 timed calls)")),
                            "{what}: no short pick of the long alltoalls:\n{t}"
                        );
                    }
                    if np > cpus {
                        let picked =
                            format!("crowded reduce of 32768-65535 bytes over {np} members: ");
                        assert!(t.contains(&picked), "{what}: no reduce pick:\n{t}");
                    }
                    // The 2 MiB reduces: their way picked by trials where gets
                    // apply (three or more members, single copy working;
                    // under Open MPI only with two or more ranks per CPU,
                    // else they are left to its own), once per communicator.
                    let gets =
                        np >= 3 && put != "0" && puts_work && (imp == "mpich" || np >= 2 * cpus);
                    let picked = format!("reduce of 2097152-4194303 bytes over {np} members: ");
                    assert_eq!(
                        t.contains(&picked),
                        gets,
                        "{what}: the 2 MiB reduces' pick (want one: {gets}):\n{t}"
                    );
                    // By the lanes: with the lanes' default the pairs'
                    // calls on the pair line (200 barriers and 800
                    // allreduces when forced; the trials' 40 of each way
                    // and kind at least when picked), none by messages.
                    let small = |v: &(u64, u64, u64, u64)| match (lanes, pair) {
                        ("1", _) => v.1 > 200 && v.1 + 100 < v.0,
                        ("", "line") => v.1 >= 1000,
                        ("", "") => v.1 >= 80,
                        _ => v.1 == 0,
                    };
                    assert!(c.iter().all(small), "{what}: lanes {lanes}:\n{t}");
                } else if hier == "1" {
                    // Spanning the pretend nodes: hierarchical (node phase
                    // over the transport) except the non-commutative user
                    // operation's reductions, which go to the MPI's own.
                    assert!(
                        c.iter().all(|v| v.0 > 300 && v.2 > 0),
                        "{what}: hierarchical and plain:\n{t}"
                    );
                } else {
                    // By default communicators spanning nodes use the MPI's
                    // own collectives (world and its duplicate: over 200
                    // calls per rank); a split half all on one node does not.
                    assert!(
                        c.iter().all(|v| v.2 > 200),
                        "{what}: plain MPI for mixed communicators:\n{t}"
                    );
                }
            }
            // Rules with answers by single copy from 8 KiB (as this
            // machine's measured rules may have; the suite runs with the
            // built-in ones, which have none): the two members' 12 KiB
            // broadcasts and scatters go by TC_SEND_WAITED's rendezvous and
            // are read once, counted at finalize as answers (12 KiB reduces
            // go by the small reductions' tree, not waited-for).
            if np == 2 && puts_work {
                let what = format!("{imp} coll, 2 ranks, rules with answers by single copy");
                let rules = std::env::temp_dir().join(format!(
                    "topocomm-accel-answers-{}-{imp}.toml",
                    std::process::id()
                ));
                std::fs::write(
                    &rules,
                    "[default]\ncma = true\neager_max = 16384\nfragment = 65536\nlone_rendezvous_min = 8192\n",
                )
                .unwrap();
                let env = [
                    ("TOPOCOMM_RULES", rules.to_str().unwrap()),
                    ("TOPOCOMM_VERBOSE", "1"),
                ];
                let o = accel(&[], &launch, &env);
                let _ = std::fs::remove_file(&rules);
                let t = assert_ok(&o, &what);
                assert!(t.contains("accel_coll: ok"), "{what}:\n{t}");
                let answers: Vec<u64> = t
                    .lines()
                    .filter_map(|l| {
                        l.split("; ")
                            .find(|p| p.ends_with(" answers within the eager limit"))
                    })
                    .filter_map(|p| p.split(' ').next()?.parse().ok())
                    .collect();
                // Per rank and two-member communicator (world, its
                // duplicate): the other root's broadcast and scatter, 4 at
                // least (without TC_SEND_WAITED 1-2 here, answers of
                // ping-pong turns elsewhere in the program).
                assert!(
                    answers.len() == 2 && answers.iter().all(|&a| a >= 4),
                    "{what}: answers read once per rank {answers:?}:\n{t}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(Path::new(&exe).parent().unwrap());
    }
}

/// Per rank of `accel -v`'s report: the trees run along a near order.
fn near_counts(t: &str) -> Vec<u64> {
    t.lines()
        .filter_map(|l| l.split_once(" trees in near order").map(|(head, _)| head))
        .filter_map(|l| l.rsplit_once("; "))
        .map(|(_, n)| n.parse().unwrap())
        .collect()
}

#[test]
fn small_collectives_follow_the_members_locality_when_their_pus_differ_in_it() {
    // Ranks bound round-robin to the 2 CPUs of the CI machine, which a
    // synthetic topology puts in two packages: ranks 0, 2 in one, 1, 3 in
    // the other. The node is taken for one with a CPU per rank (the trees'
    // paths, not the crowded node's one hop) and the lanes are off, so the
    // barriers, broadcasts, small reductions and their non-blocking forms
    // run their trees along the near order (0, 2, 1, 3 from rank 0); coll.c
    // checks every result, the rank-ordered product of matrices (a
    // non-commutative operation: rank order kept) and the determinism.
    for imp in mpi_impls() {
        build_mpi(imp, &["libtopocomm-accel.so"]);
        let exe = check_program(imp, "near", "coll").display().to_string();
        for (np, near) in [(3, "1"), (4, "1"), (4, "0")] {
            let mut launch = mpirun(imp, np, &[&exe]);
            let bind: &[&str] = if imp == "openmpi" {
                &["--bind-to", "core:overload-allowed", "--map-by", "core"]
            } else {
                &["-bind-to", "core"]
            };
            for (i, b) in bind.iter().enumerate() {
                launch.insert(1 + i, b.to_string());
            }
            let env = [
                ("TOPOCOMM_TOPOLOGY", "synthetic:package:2 core:1 pu:1"),
                ("TOPOCOMM_ACCEL_CPUS", "4"),
                ("TOPOCOMM_ACCEL_COLL_LANES", "0"),
                ("TOPOCOMM_ACCEL_NEAR", near),
            ];
            let o = accel(&["-v"], &launch, &env);
            let what = format!("{imp} coll, {np} ranks bound over two packages, near order {near}");
            let t = assert_ok(&o, &what);
            assert!(t.contains("accel_coll: ok"), "{what}:\n{t}");
            let c = near_counts(&t);
            assert_eq!(c.len(), np, "{what}:\n{t}");
            // Rank 0 says the world's near order: the packages apart.
            let said = format!(
                "MPI_COMM_WORLD's trees along the near order {}\n",
                if np == 3 { "0 2 | 1" } else { "0 2 | 1 3" }
            );
            assert_eq!(t.contains(&said), near == "1", "{what}: {said}\n{t}");
            assert!(
                c.iter().all(|&k| (k > 100) == (near == "1")),
                "{what}: trees along the near order:\n{t}"
            );
        }
    }
}

/// Bytes each rank put into members' results, from the `--verbose` lines.
fn put_bytes(t: &str) -> Vec<u64> {
    coll_counts(t).iter().map(|v| v.3).collect()
}

#[test]
fn large_reductions_by_gets_finish_by_messages_after_a_refused_get_or_put() {
    // tests/accel/gets.c: 3 MiB allreduces, reduces and a reduce-scatter, in place first or
    // not. With TOPOCOMM_FAIL_PUTS=1:K rank 1's K-th get or put fails as
    // refused: at 2 ranks (a get, then a put of each piece) K = 0 fails the
    // first get, 1 the first put; at 3 (two gets, then two puts) 1 fails a
    // get after one landed, 3 a put after another member's went in, which
    // in place has overwritten that member's contribution to the piece
    // (so the piece must not be folded again); at 4, 2 the third get, 4
    // the second put, 7 a get of the second piece. The first call meets
    // the failure; rank 1 then goes by messages for the rest of the job.
    // The allreduces are forced by gets (TOPOCOMM_ACCEL_ALLREDUCE), so the
    // K-th single copy falls where these cases expect it, whatever way the
    // trials of a large allreduce would pick on this machine.
    let puts_work = single_copy_works();
    for imp in mpi_impls() {
        build_mpi(imp, &["libtopocomm-accel.so"]);
        let exe = check_program(imp, "gets", "gets").display().to_string();
        let cases: [(usize, &[&str]); 3] = [
            (2, &["", "0", "1"]),
            (3, &["", "1", "3"]),
            (4, &["", "2", "4", "7"]),
        ];
        for (np, ks) in cases {
            for ip in ["0", "1"] {
                let launch = mpirun(imp, np, &[&exe, ip]);
                for &k in ks {
                    let spec = format!("1:{k}");
                    let mut env = vec![("TOPOCOMM_ACCEL_ALLREDUCE", "gets")];
                    if !k.is_empty() {
                        env.push(("TOPOCOMM_FAIL_PUTS", spec.as_str()));
                    }
                    let what = format!("{imp} gets, {np} ranks, in place first {ip}, fault '{k}'");
                    let t = assert_ok(&accel(&["-v"], &launch, &env), &what);
                    assert!(t.contains("accel_gets: ok"), "{what}:\n{t}");
                    let refused = t.contains("rank 1: reading from rank")
                        || t.contains("rank 1: writing into rank");
                    assert_eq!(refused, puts_work && !k.is_empty(), "{what}:\n{t}");
                    let put = put_bytes(&t);
                    assert_eq!(put.len(), np, "{what}:\n{t}");
                    if puts_work && k.is_empty() {
                        assert!(put.iter().all(|&b| b > 0), "{what}: bytes put:\n{t}");
                    }
                }
            }
        }
        // Switched off: the blocks by message (and their puts at 3-4 ranks).
        let launch = mpirun(imp, 4, &[&exe, "1"]);
        let what = format!("{imp} gets, 4 ranks, TOPOCOMM_ACCEL_GETS=0");
        let t = assert_ok(
            &accel(&["-v"], &launch, &[("TOPOCOMM_ACCEL_GETS", "0")]),
            &what,
        );
        assert!(t.contains("accel_gets: ok"), "{what}:\n{t}");
        let _ = std::fs::remove_dir_all(Path::new(&exe).parent().unwrap());
    }
}

#[test]
fn the_job_falls_back_to_plain_mpi_together_with_one_line() {
    for imp in mpi_impls() {
        build_mpi(imp, &["libtopocomm-accel.so", "libtopocomm-fortran.so"]);
        let exe = checks(imp, "fallback").display().to_string();
        // MPI_THREAD_MULTIPLE: plain MPI for the whole job.
        let o = accel(&["-v"], &mpirun(imp, 3, &[&exe, "thread"]), &[]);
        let t = assert_ok(&o, &format!("{imp} thread"));
        assert!(t.contains("accel_checks: ok"), "{imp}:\n{t}");
        let lines: Vec<&str> = t
            .lines()
            .filter(|l| {
                l.contains("running plain MPI: the application asked for MPI_THREAD_MULTIPLE")
            })
            .collect();
        assert_eq!(lines.len(), 1, "{imp}: one line, from rank 0:\n{t}");
        assert_eq!(t.matches("off (plain MPI)").count(), 3, "{imp}:\n{t}");
        // A bootstrap that fails (bad TOPOCOMM_TIMEOUT, read by every rank):
        // every rank goes plain, rank 0 says why, the program still succeeds.
        let o = accel(
            &["-v"],
            &mpirun(imp, 2, &[&exe]),
            &[("TOPOCOMM_TIMEOUT", "abc")],
        );
        let t = assert_ok(&o, &format!("{imp} failed bootstrap"));
        assert!(t.contains("accel_checks: ok"), "{imp}:\n{t}");
        assert_eq!(
            t.matches("running plain MPI: topocomm_mpi_init").count(),
            1,
            "{imp}:\n{t}"
        );
        assert!(t.contains("TOPOCOMM_TIMEOUT='abc'"), "{imp}:\n{t}");
        let _ = std::fs::remove_dir_all(Path::new(&exe).parent().unwrap());
    }
}

/// The accelerator sets glibc's malloc thresholds where its own adaptation
/// ends (mpi/lib/accel/state.c, settle_malloc): a 24 MiB block then comes
/// from the heap, where plain MPI, `TOPOCOMM_ACCEL_MALLOC=0` and a user's
/// own `MALLOC_MMAP_THRESHOLD_` leave glibc's mmap for it.
#[test]
fn the_accelerator_settles_the_malloc_thresholds_unless_told_otherwise() {
    for imp in mpi_impls() {
        build_mpi(imp, &["libtopocomm-accel.so"]);
        let exe = check_program(imp, "malloc", "malloc_state")
            .display()
            .to_string();
        let launch = mpirun(imp, 2, &[&exe]);
        plain_verdict(&launch, "malloc_state: mmap", &format!("{imp} plain"));
        let runs: [(&[(&str, &str)], &str); 3] = [
            (&[], "malloc_state: heap"),
            (&[("TOPOCOMM_ACCEL_MALLOC", "0")], "malloc_state: mmap"),
            (
                &[("MALLOC_MMAP_THRESHOLD_", "131072")],
                "malloc_state: mmap",
            ),
        ];
        for (env, want) in runs {
            let o = accel(&[], &launch, env);
            let t = assert_ok(&o, &format!("{imp} {env:?}"));
            assert!(t.contains(want), "{imp} {env:?}: want {want}:\n{t}");
        }
        let _ = std::fs::remove_dir_all(Path::new(&exe).parent().unwrap());
    }
}

#[test]
fn bad_arguments_are_refused_with_the_reason() {
    let o = accel(
        &["--nodes", "0"],
        &["mpirun.openmpi".into(), "true".into()],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("invalid value '0' for '--nodes <N>': 0 is not in 1..=1048576"),
        "{}",
        text(&o)
    );
    let o = accel(&["--mpi", "lam"], &["mpirun".into(), "true".into()], &[]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("expected openmpi or mpich"),
        "{}",
        text(&o)
    );
    let o = accel(
        &["--mpi", "mpich", "--lib", "/nonexistent/lib.so"],
        &["mpirun.mpich".into(), "true".into()],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("/nonexistent/lib.so: no such file"),
        "{}",
        text(&o)
    );
}
