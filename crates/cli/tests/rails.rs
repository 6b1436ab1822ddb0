//! `topocomm rails` end to end: rails and split weights of the real-machine
//! topologies with devices, the per-local-rank environment, `rails exec`
//! alone and under a real `mpirun`, and machines without devices.

mod common;

use common::{fails_with, have, ok, output_isolated, topocomm_env};
use std::process::Command;
use topocomm_topo::testdata::shared_topology;

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn xml(file: &str) -> Option<String> {
    shared_topology(file).map(|p| p.to_str().unwrap().to_string())
}

/// `export NAME=VALUE` lines of `--env` output as (name, value).
fn exports(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|l| l.strip_prefix("export "))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn get<'a>(e: &'a [(String, String)], k: &str) -> Option<&'a str> {
    e.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

#[test]
fn ib_gpu_rails_and_weights_depend_on_the_package() {
    let Some(t) = xml("intel-2xE5-2650-ib-gpu.xml") else {
        return;
    };
    let out = text(&ok(&["rails", "--topology", &t]));
    assert!(out.contains("mlx5_0  verbs      ib0"), "{out}");
    assert!(out.contains("cuda0"), "{out}");
    let row = |n: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(n))
            .unwrap()
            .to_string()
    };
    assert!(row("NUMA 0").contains("remote 0.77"), "{out}");
    assert!(row("NUMA 1").contains("local 1.00"), "{out}");
    assert!(row("NUMA 1").contains("cuda0 (local)"), "{out}");
    // JSON: the same from the per-NUMA weights.
    let v: serde_json::Value =
        serde_json::from_slice(&ok(&["rails", "--topology", &t, "--json"]).stdout).unwrap();
    let from = v["from_numa"].as_array().unwrap();
    let w = |i: usize| from[i]["weights"][0]["weight"].as_f64().unwrap();
    assert!(w(1) > w(0));
    assert_eq!(v["rails"]["nics"][0]["aliases"][0], "ib0");
    // Plans from each package.
    for (pu, dist) in [("0", "remote"), ("24", "local")] {
        let v: serde_json::Value = serde_json::from_slice(
            &ok(&[
                "rails",
                "--topology",
                &t,
                "--pu",
                pu,
                "--size",
                "1M",
                "--json",
            ])
            .stdout,
        )
        .unwrap();
        assert_eq!(v["plan"]["chunks"][0]["distance"], dist, "{v}");
        assert_eq!(v["plan"]["chunks"][0]["bytes"], 1 << 20);
    }
}

#[test]
fn usnic_split_and_contention() {
    let Some(t) = xml("intel-2x8c-usnic-vfs.xml") else {
        return;
    };
    let plan = |extra: &[&str]| -> serde_json::Value {
        let mut a = vec!["rails", "--topology", &t, "--pu", "9", "--json"];
        a.extend(extra);
        if !extra.contains(&"--size") {
            a.extend(["--size", "4M"]);
        }
        serde_json::from_slice(&ok(&a).stdout).unwrap()
    };
    let v = plan(&[]);
    let chunks = v["plan"]["chunks"].as_array().unwrap();
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks[0]["name"], "usnic_2");
    let share = chunks[0]["share"].as_f64().unwrap();
    assert!((share - 1.0 / (1.0 + 2.0 * 0.77)).abs() < 1e-9, "{share}");
    let total: u64 = chunks.iter().map(|c| c["bytes"].as_u64().unwrap()).sum();
    assert_eq!(total, 4 << 20);
    let v = plan(&["--contention"]);
    assert_eq!(v["plan"]["mode"], "nearest");
    assert_eq!(v["plan"]["chunks"].as_array().unwrap().len(), 1);
    let v = plan(&["--size", "4K"]);
    assert_eq!(v["plan"]["mode"], "single-rail");
}

#[test]
fn env_per_local_rank() {
    let Some(t) = xml("intel-2xE5-2650-ib-gpu.xml") else {
        return;
    };
    let out = text(&ok(&[
        "rails",
        "--topology",
        &t,
        "--env",
        "--local-rank",
        "1",
        "--pu",
        "8",
    ]));
    let e = exports(&out);
    assert_eq!(get(&e, "CUDA_VISIBLE_DEVICES"), Some("0"));
    assert_eq!(get(&e, "UCX_NET_DEVICES"), Some("mlx5_0:1"));
    assert_eq!(get(&e, "UCX_MAX_RNDV_RAILS"), Some("1"));
    // Every export has its reason on the line above.
    let lines: Vec<&str> = out.lines().collect();
    for (i, _) in lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("export "))
    {
        assert!(lines[i - 1].starts_with("# "), "{out}");
    }
    assert!(out.contains("local to PUs 8"), "{out}");
    let out = text(&ok(&[
        "rails",
        "--topology",
        &t,
        "--env",
        "--local-rank",
        "0",
        "--pu",
        "0",
    ]));
    assert!(out.contains("remote to PUs 0"), "{out}");
    // The launcher's variable, when no --local-rank.
    let o = topocomm_env(
        &["rails", "--topology", &t, "--env", "--pu", "8"],
        &[("SLURM_LOCALID", "5")],
    );
    assert!(
        text(&o).contains("local rank 5 (SLURM_LOCALID)"),
        "{}",
        text(&o)
    );
}

#[test]
fn dgx2_local_ranks_spread_over_the_nearest_gpus() {
    let Some(t) = xml("nvidia-dgx2-16gpu.xml") else {
        return;
    };
    for (pu, base) in [("0", 0), ("24", 8)] {
        let got: Vec<String> = (0..10)
            .map(|r| {
                let out = text(&ok(&[
                    "rails",
                    "--topology",
                    &t,
                    "--env",
                    "--pu",
                    pu,
                    "--local-rank",
                    &r.to_string(),
                ]));
                get(&exports(&out), "CUDA_VISIBLE_DEVICES")
                    .unwrap()
                    .to_string()
            })
            .collect();
        let want: Vec<String> = (0..10).map(|r| (base + r % 8).to_string()).collect();
        assert_eq!(got, want, "PU {pu}");
    }
}

#[test]
fn no_devices_is_said_and_exec_runs_unchanged() {
    let synth = "synthetic:pack:2 core:2 pu:1";
    let out = text(&ok(&["rails", "--topology", synth]));
    assert!(
        out.contains("No rails: hwloc reports no OpenFabrics device"),
        "{out}"
    );
    let out = text(&ok(&[
        "rails",
        "--topology",
        synth,
        "--env",
        "--local-rank",
        "0",
    ]));
    assert!(
        out.starts_with("# no rails") && exports(&out).is_empty(),
        "{out}"
    );
    // The live machine too (this dev VM has no HCA/GPU; a machine with
    // some lists them instead).
    let live = text(&ok(&["rails"]));
    assert!(live.contains("No rails") || live.contains("rail"), "{live}");
    let o = topocomm_env(
        &[
            "rails",
            "exec",
            "--",
            "sh",
            "-c",
            "echo \"cvd=[$CUDA_VISIBLE_DEVICES] $0\"",
            "arg0",
        ],
        &[
            ("TOPOCOMM_TOPOLOGY", synth),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("CUDA_VISIBLE_DEVICES", "7"),
        ],
    );
    assert!(o.status.success());
    assert_eq!(text(&o), "cvd=[7] arg0\n", "inherited value untouched");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no rails") && err.contains("running sh unchanged"),
        "{err}"
    );
    // The program's exit status is the job's.
    let o = topocomm_env(
        &["rails", "exec", "--", "sh", "-c", "exit 3"],
        &[("TOPOCOMM_TOPOLOGY", synth)],
    );
    assert_eq!(o.status.code(), Some(3));
}

#[test]
fn exec_sets_the_variables() {
    let Some(t) = xml("intel-2xE5-2650-ib-gpu.xml") else {
        return;
    };
    let o = topocomm_env(
        &[
            "rails",
            "exec",
            "--",
            "sh",
            "-c",
            "echo $CUDA_VISIBLE_DEVICES $UCX_NET_DEVICES",
        ],
        &[
            ("TOPOCOMM_TOPOLOGY", &t),
            ("MPI_LOCALRANKID", "0"),
            ("TOPOCOMM_RAILS_PU", "9"),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(text(&o), "0 mlx5_0:1\n");
    let o = topocomm_env(
        &["rails", "exec", "--", "/nonexistent/prog"],
        &[("TOPOCOMM_TOPOLOGY", &t), ("TOPOCOMM_RAILS_PU", "9")],
    );
    assert_eq!(o.status.code(), Some(127));
}

#[test]
fn errors_name_the_argument() {
    let synth = "synthetic:pack:2 core:2 pu:1";
    fails_with(
        &["rails", "--topology", synth, "--pu", "99", "--size", "1M"],
        "--pu 99: PU with OS index 99",
    );
    fails_with(&["rails", "--topology", synth, "--pu", "1-x"], "--pu '1-x'");
    fails_with(
        &["rails", "--topology", synth, "--pu", "0", "--size", "4Q"],
        "'--size <BYTES>'",
    );
    fails_with(
        &["rails", "--topology", synth, "--min-share", "2"],
        "--min-share",
    );
    let o = topocomm_env(
        &["rails", "exec", "--", "true"],
        &[
            ("TOPOCOMM_TOPOLOGY", synth),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "-1"),
        ],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("OMPI_COMM_WORLD_LOCAL_RANK='-1': expected a local rank"));
    let Some(t) = xml("intel-2xE5-2650-ib-gpu.xml") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("topocomm-rails-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        "{\"schema\": \"topocomm.rails-table/1\",\n \"rails\": {\"mlx5_0\": {\"local\": \"x\"}}}",
    )
    .unwrap();
    fails_with(
        &["rails", "--topology", &t, "--table", bad.to_str().unwrap()],
        "bad.json:2:",
    );
    std::fs::write(
        &bad,
        r#"{"schema": "topocomm.rails-table/1", "rails": {"mlx4_0": {"local": 5}}}"#,
    )
    .unwrap();
    fails_with(
        &["rails", "--topology", &t, "--table", bad.to_str().unwrap()],
        "field 'rails.mlx4_0': not a network rail",
    );
    // A good table changes the weights to GB/s.
    std::fs::write(&bad, r#"{"schema": "topocomm.rails-table/1", "rails": {"ib0": {"local": 11.5, "remote": 8.25}}}"#).unwrap();
    let out = text(&ok(&[
        "rails",
        "--topology",
        &t,
        "--table",
        bad.to_str().unwrap(),
        "--pu",
        "0",
    ]));
    assert!(
        out.contains("mlx5_0  remote    20            8.25"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A real Open MPI job: each rank gets its variables from `rails exec`.
#[test]
fn mpirun_openmpi_ranks_get_their_variables() {
    if !have("mpirun.openmpi") {
        eprintln!("notice: mpirun.openmpi not found, skipping (scripts/setup.sh installs it)");
        return;
    }
    let Some(t) = xml("intel-2xE5-2650-ib-gpu.xml") else {
        return;
    };
    let Some(dgx) = xml("nvidia-dgx2-16gpu.xml") else {
        return;
    };
    let run = |topo: &str, pu: &str| -> String {
        let o = output_isolated(
            Command::new("timeout")
                .args(["-k", "5", "120", "mpirun.openmpi", "-np", "2"])
                .args([
                    "-x",
                    &format!("TOPOCOMM_TOPOLOGY={topo}"),
                    "-x",
                    &format!("TOPOCOMM_RAILS_PU={pu}"),
                ])
                .args([env!("CARGO_BIN_EXE_topocomm"), "rails", "exec"])
                .args(["--stack", "openmpi", "--", "env"])
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        )
        .expect("mpirun runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        text(&o)
    };
    // PU 8 is on package 1 of the ib-gpu machine (this VM's PUs 0,1 are on
    // its package 0), forced with TOPOCOMM_RAILS_PU.
    let out = run(&t, "8");
    assert_eq!(out.matches("CUDA_VISIBLE_DEVICES=0\n").count(), 2, "{out}");
    assert_eq!(
        out.matches("UCX_NET_DEVICES=mlx5_0:1\n").count(),
        2,
        "{out}"
    );
    assert_eq!(
        out.matches("OMPI_MCA_btl_openib_if_include=mlx5_0\n")
            .count(),
        2,
        "{out}"
    );
    // Two local ranks at the same place take different equally near GPUs.
    let out = run(&dgx, "0");
    let mut cvd: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("CUDA_VISIBLE_DEVICES="))
        .collect();
    cvd.sort();
    assert_eq!(cvd, ["0", "1"], "{out}");
}
