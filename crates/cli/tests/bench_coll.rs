//! `topocomm bench coll` on this machine, tiny (2 ranks, 2 sizes, 2 jobs,
//! one MPI): the JSON document's structure, the summary recomputed from the
//! raw per-job values, and one error line with exit status 2 for bad input.

mod common;

use common::{build_mpi, mpi_impls};
use serde_json::Value;
use std::process::{Command, Output};

fn topocomm(args: &[&str]) -> Output {
    Command::new("timeout")
        .args(["-k", "5", "300", env!("CARGO_BIN_EXE_topocomm")])
        .args(args)
        .env(
            "TOPOCOMM_MPI_BUILD",
            topocomm_topo::testdata::repo_root().join("mpi/build"),
        )
        .env("TOPOCOMM_AUTOTUNE", "0")
        .env_remove("TOPOCOMM_TOPOLOGY")
        .output()
        .expect("topocomm runs")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The values of `mpi`/`config` at (collective, size), one per job, in job order.
fn raw(doc: &Value, mpi: &str, config: &str, coll: &str, size: u64) -> Vec<f64> {
    let mut v: Vec<(u64, f64)> = doc["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["mpi"] == mpi && j["config"] == config && j["status"] == "ok")
        .filter_map(|j| {
            let p = j["results"]
                .as_array()?
                .iter()
                .find(|p| p["collective"] == coll && p["size"] == size)?;
            Some((j["job"].as_u64()?, p["value_us"].as_f64()?))
        })
        .collect();
    v.sort_by_key(|x| x.0);
    v.into_iter().map(|x| x.1).collect()
}

#[test]
fn tiny_run_json_and_ratios_from_the_raw_samples() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("notice: fewer than 2 CPUs; skipping");
        return;
    }
    let Some(imp) = mpi_impls().first().copied() else {
        return;
    };
    build_mpi(
        imp,
        &["std_coll", "libtopocomm-accel.so", "libtopocomm-fortran.so"],
    );
    let dir = std::env::temp_dir().join(format!("tc-bench-coll-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("coll.json");
    let out = topocomm(&[
        "bench",
        "coll",
        "--np",
        "2",
        "--collectives",
        "barrier,allreduce,alltoall",
        "--sizes",
        "8,4K",
        "--jobs",
        "2",
        "--vs",
        imp,
        "--time-ms",
        "2",
        "--reps",
        "3",
        "--json",
        json.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("# allreduce") && stdout.contains("# barrier"),
        "{stdout}"
    );
    assert!(stderr.contains("bench coll: job 2"), "progress: {stderr}");
    assert!(dir.join("coll-allreduce.svg").is_file());
    assert!(dir.join("bench-coll.json").is_file());

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "topocomm.bench.coll/1");
    assert_eq!(doc["meta"]["plan"]["np"], 2);
    let accel_argv = doc["meta"]["commands"][imp]["accel"].as_array().unwrap();
    assert_eq!(accel_argv[1], "accel", "{accel_argv:?}");
    // 2 jobs x plain and accel, interleaved: job 0 plain first, job 1 accel first.
    let jobs = doc["jobs"].as_array().unwrap();
    let order: Vec<(u64, &str)> = jobs
        .iter()
        .map(|j| (j["job"].as_u64().unwrap(), j["config"].as_str().unwrap()))
        .collect();
    assert_eq!(
        order,
        [(0, "plain"), (0, "accel"), (1, "accel"), (1, "plain")]
    );
    // Bound ranks: each job's own probes, one per point (8-byte
    // ping-pongs between ranks 0 and 1 after it, real measurements in us).
    for j in jobs.iter() {
        let probes = j["probe_us"].as_array().expect("probe_us");
        assert_eq!(probes.len(), 5, "{j}");
        assert!(probes.iter().all(|v| v.as_f64().unwrap() > 0.0), "{j}");
    }
    let pl = &doc["meta"]["placement"];
    for cfg in ["plain", "accel"] {
        let cut = &pl["cuts_us"][format!("{imp} {cfg}")];
        assert!(cut.as_f64().unwrap() > 0.0, "{pl}");
    }
    let classed = pl["near_jobs"].as_u64().unwrap() + pl["distant_jobs"].as_u64().unwrap();
    assert_eq!(classed, jobs.len() as u64, "{pl}");
    // And every point of every run by the probe after it.
    let points = pl["near_points"].as_u64().unwrap() + pl["distant_points"].as_u64().unwrap();
    assert_eq!(points, 5 * jobs.len() as u64, "{pl}");
    assert!(stdout.contains("placement: 8-byte ping-pongs"), "{stdout}");
    for j in jobs {
        assert_eq!(j["status"], "ok", "{j}");
        assert_eq!(j["meta"]["np"], 2, "{j}");
        // barrier + 2 sizes of allreduce and alltoall, 3 batches each.
        let pts = j["results"].as_array().unwrap();
        assert_eq!(pts.len(), 5, "{j}");
        for p in pts {
            assert_eq!(p["samples_us"].as_array().unwrap().len(), 3, "{p}");
            assert!(p["value_us"].as_f64().unwrap() > 0.0, "{p}");
        }
    }
    let rows = doc["rows"].as_array().unwrap();
    let keys: Vec<(&str, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["collective"].as_str().unwrap(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("barrier", 0),
            ("allreduce", 8),
            ("allreduce", 4096),
            ("alltoall", 8),
            ("alltoall", 4096)
        ]
    );
    for r in rows {
        let (c, z) = (
            r["collective"].as_str().unwrap(),
            r["size"].as_u64().unwrap(),
        );
        let mut plain = raw(&doc, imp, "plain", c, z);
        let mut accel = raw(&doc, imp, "accel", c, z);
        assert_eq!((plain.len(), accel.len()), (2, 2), "{r}");
        let (pmin, pmax) = (plain[0].min(plain[1]), plain[0].max(plain[1]));
        let (amin, amax) = (accel[0].min(accel[1]), accel[0].max(accel[1]));
        let (pm, am) = (median(&mut plain), median(&mut accel));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-12);
        assert_eq!(r["better"], imp);
        assert_eq!(r["compared"], serde_json::json!([imp]));
        assert_eq!(r["paired_jobs"], 2);
        assert!(close(r["better_us"].as_f64().unwrap(), pm), "{r}");
        assert!(close(r["topocomm_us"].as_f64().unwrap(), am), "{r}");
        let cell = &r["mpis"][0];
        assert!(close(cell["plain"]["median"].as_f64().unwrap(), pm), "{r}");
        assert!(close(cell["accel"]["median"].as_f64().unwrap(), am), "{r}");
        let ratio = r["ratio"].as_f64().unwrap();
        assert!(close(ratio, am / pm), "{r}: ratio vs {}", am / pm);
        let (lo, hi) = (
            r["ci95"][0].as_f64().unwrap(),
            r["ci95"][1].as_f64().unwrap(),
        );
        // Every resample's ratio lies between these.
        assert!(lo <= hi && lo >= amin / pmax * (1.0 - 1e-12), "{r}");
        assert!(hi <= amax / pmin * (1.0 + 1e-12), "{r}");
        assert_eq!(r["slower"].as_bool().unwrap(), hi > 1.05, "{r}");
        // The table line says the same.
        for part in [format!("{ratio:.3}"), format!("[{lo:.3}, {hi:.3}]")] {
            assert!(stdout.contains(&part), "'{part}' not in:\n{stdout}");
        }
    }
    // The report's section from the file.
    let rep = dir.join("report");
    let out = topocomm(&[
        "report",
        "--no-bench",
        "--coll",
        json.to_str().unwrap(),
        "--out",
        rep.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(rep.join("index.html")).unwrap();
    assert!(
        html.contains("Collectives: topocomm accel vs"),
        "no section"
    );
    assert!(
        html.contains("<h3>alltoall</h3>") && html.contains("<svg"),
        "no table/plot"
    );
    assert!(
        html.contains("placement: 8-byte ping-pongs"),
        "no placement"
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(rep.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["coll"]["schema"], "topocomm.bench.coll/1");
    // A file of another kind: one line, exit 2.
    let out = topocomm(&[
        "report",
        "--no-bench",
        "--coll",
        rep.join("index.html").to_str().unwrap(),
        "--out",
        rep.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--coll "), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, needle) in [
        (
            &["--collectives", "bcast,scan"][..],
            "--collectives: unknown collective 'scan'",
        ),
        (&["--sizes", "8,4X"][..], "--sizes: "),
        (&["--np", "0"][..], "--np 0: expected a number of ranks"),
        (&["--vs", "lam"][..], "--vs: "),
        (&["--jobs", "0"][..], "--jobs 0"),
    ] {
        let out = topocomm(&[&["bench", "coll"][..], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: '{needle}' not in {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
