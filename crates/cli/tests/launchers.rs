//! Launcher files of `topocomm map` under the real launchers: the Open MPI
//! rankfile under `mpirun.openmpi`, the Hydra machinefile under
//! `mpirun.mpich`. The map target is this machine (live topology); each file
//! is run with the command its own `# run:` header gives, on
//! mpi/bench/whereami.c, which reports every rank's host and kernel CPU
//! affinity; each rank must be bound to exactly the PU (and be on the host)
//! that `--format json` of the same mapping names. Ranks outnumber PUs in
//! some cases (oversubscribed). An MPI that is not installed is skipped with
//! a notice.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Bound on every launcher run, seconds.
const TIMEOUT_S: &str = "30";

fn dir(imp: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tc-launch-{imp}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(d: &Path, name: &str, text: &str) -> String {
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("hostname")
        .trim()
        .to_string()
}

/// `(host, PU OS index)` of each rank, from `topocomm map ARGS --format json`.
fn expected(args: &[&str]) -> Vec<(String, u32)> {
    let mut a = args.to_vec();
    a.extend(["--format", "json", "-q"]);
    let v: serde_json::Value = serde_json::from_slice(&common::ok(&a).stdout).unwrap();
    v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["host"].as_str().unwrap().to_string(),
                r["pu"].as_u64().unwrap() as u32,
            )
        })
        .collect()
}

/// Writes the launcher file of `topocomm map ARGS --format FORMAT`, runs it
/// with the command of its `# run:` line (launcher renamed to the Debian
/// one) and returns whereami's `(host, affinity)` per rank.
fn launch(
    imp: &str,
    format: &str,
    args: &[&str],
    file: &str,
    prog: &Path,
) -> Vec<(String, String)> {
    let mut a = args.to_vec();
    a.extend(["--format", format, "--out", file, "-q"]);
    common::ok(&a);
    let text = std::fs::read_to_string(file).unwrap();
    let run = text
        .lines()
        .find_map(|l| l.strip_prefix("# run: "))
        .unwrap_or_else(|| panic!("{file} has no '# run:' line:\n{text}"));
    let argv: Vec<String> = run
        .split_whitespace()
        .map(|w| match w {
            "mpirun" | "mpiexec.hydra" => format!("mpirun.{imp}"),
            "FILE" => file.to_string(),
            "PROGRAM" => prog.to_str().unwrap().to_string(),
            _ => w.to_string(),
        })
        .collect();
    let out = common::output_isolated(
        Command::new("timeout")
            .args(["-k", "5", TIMEOUT_S])
            .args(&argv)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
    )
    .expect("timeout runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} failed ({}):\n{text}\n{stdout}{}",
        argv.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // "rank R host H affinity LIST", in rank order.
    stdout
        .lines()
        .filter(|l| l.starts_with("rank "))
        .enumerate()
        .map(|(i, l)| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(
                f.len() == 6 && f[1] == i.to_string(),
                "bad line {l:?} in:\n{stdout}"
            );
            (f[3].to_string(), f[5].to_string())
        })
        .collect()
}

fn check(imp: &str, format: &str, name: &str, args: &[&str], d: &Path, prog: &Path) {
    let want = expected(args);
    let file = d.join(format!("{name}.{format}"));
    let got = launch(imp, format, args, file.to_str().unwrap(), prog);
    let me = hostname();
    assert_eq!(got.len(), want.len(), "{imp} {name}: {got:?}");
    for (r, ((host, pu), (ghost, aff))) in want.iter().zip(&got).enumerate() {
        // Every host of these targets is this machine (`localhost` included).
        let host = if host == "localhost" { &me } else { host };
        assert_eq!(
            (ghost, aff),
            (host, &pu.to_string()),
            "{imp} {name}: rank {r} should be bound to PU {pu} only on {host}; the map said {want:?}, the ranks are at {got:?}; file:\n{}",
            std::fs::read_to_string(&file).unwrap()
        );
    }
    eprintln!(
        "{imp} {name}: {} ranks bound as mapped: {want:?}",
        want.len()
    );
}

fn end_to_end(imp: &str, format: &str) {
    if !common::mpi_impls().contains(&imp) {
        return;
    }
    let prog = common::build_mpi(imp, &["whereami"]).join("whereami");
    let d = dir(imp);
    let two = write(
        &d,
        "two.csv",
        "src,dst,bytes,msgs\n0,1,1000000,10\n1,0,1000000,10\n",
    );
    // (0,2) and (1,3) talk: 4 ranks on 2 PUs, two per PU.
    let four = write(
        &d,
        "four.csv",
        "src,dst,bytes,msgs\n0,2,1000000,10\n2,0,1000000,10\n1,3,1000000,10\n3,1,1000000,10\n",
    );
    // A one-node live target is named by the node's host name.
    let me = hostname();
    let base = expected(&["map", &two, "--oversubscribe"]);
    assert!(base.iter().all(|(h, _)| *h == me), "{base:?} vs {me}");
    check(
        imp,
        format,
        "two",
        &["map", &two, "--oversubscribe"],
        &d,
        &prog,
    );
    check(
        imp,
        format,
        "nodes1",
        &["map", &two, "--oversubscribe", "--nodes", "1"],
        &d,
        &prog,
    );
    check(
        imp,
        format,
        "four",
        &["map", &four, "--oversubscribe"],
        &d,
        &prog,
    );
    // Not the launcher's default placement: rank 0 on the last PU.
    let (a, b) = (base[0].1, base[1].1);
    let rev = write(&d, "rev.perm", &format!("0 {b}\n0 {a}\n"));
    check(
        imp,
        format,
        "reversed",
        &["map", &two, "--evaluate", &rev],
        &d,
        &prog,
    );
    // Two names of this machine, ranks alternating between them: several
    // runs of hosts (Hydra: several machinefile lines, one binding each).
    let hosts = write(&d, "hosts", &format!("{me}\nlocalhost\n"));
    let inter = write(&d, "inter.perm", &format!("0 {b}\n1 {a}\n1 {b}\n0 {a}\n"));
    check(
        imp,
        format,
        "interleaved",
        &["map", &four, "--hostfile", &hosts, "--evaluate", &inter],
        &d,
        &prog,
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn openmpi_rankfile_binds_each_rank_to_its_mapped_pu() {
    end_to_end("openmpi", "rankfile");
}

#[test]
fn mpich_hydra_machinefile_binds_each_rank_to_its_mapped_pu() {
    end_to_end("mpich", "hydra");
}
