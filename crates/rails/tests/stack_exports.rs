//! One test per export stack: the variables `topocomm rails --env --stack S`
//! writes are ones that the installed stack itself lists (Open MPI:
//! `ompi_info`, which also reads the MCA file back; MPICH: `mpivars`; UCX:
//! `ucx_info -c`, which parses the values; libfabric: `fi_info --env`);
//! Intel MPI, not installable here, against its documented list. A stack
//! whose tool is absent is skipped with a notice. The machines: the usNIC
//! and IB+GPU topologies of ../shared (skipped when absent) and a synthetic
//! one with two HCAs on different packages (uneven NUIOA weights).

use std::process::Command;
use topocomm_rails::{mca_file, EnvDoc, Setup, SetupOptions, SplitParams, Stack, INTEL_MPI_VARS};
use topocomm_topo::{Device, DeviceKind, Machine};

/// 2 packages x 2 NUMA x 2 PUs with mlx5_0 on NUMA 0 and mlx5_1 on NUMA 2.
fn two_hcas() -> Machine {
    let mut m = topocomm_topo::load_default(Some("synthetic:pack:2 numa:2 core:2 pu:1")).unwrap();
    for (name, pci, numa) in [("mlx5_0", "0000:04:00.0", 0), ("mlx5_1", "0000:84:00.0", 2)] {
        let n = m
            .numa_nodes
            .iter()
            .find(|n| n.os_index == numa)
            .unwrap()
            .clone();
        let pu = n.cpuset.indexes()[0];
        let package = m.pus[m.pu_position(pu).unwrap()].package;
        m.devices.push(Device {
            kind: DeviceKind::OpenFabrics,
            subtype: None,
            name: name.into(),
            pci_bus_id: Some(pci.into()),
            local_object: n.attached_to,
            cpuset: n.cpuset.clone(),
            numa_nodes: vec![numa],
            package,
        });
    }
    m
}

fn shared(file: &str) -> Option<Machine> {
    let p = topocomm_topo::testdata::shared_topology(file)?;
    Some(topocomm_topo::load_default(Some(p.to_str().unwrap())).unwrap())
}

/// The `--env` documents of `stack` on every test machine (location, ethernet).
fn docs(stack: Stack) -> Vec<EnvDoc> {
    let mut cases = vec![(Some(two_hcas()), "0", false)];
    cases.push((shared("intel-2x8c-usnic-vfs.xml"), "0", false));
    cases.push((shared("intel-2x8c-usnic-vfs.xml"), "8", false));
    cases.push((shared("intel-2xE5-2650-ib-gpu.xml"), "8", true));
    let mut out = Vec::new();
    for (m, pu, ethernet) in cases {
        let Some(m) = m else {
            eprintln!("notice: ../shared/topologies absent: synthetic machine only");
            continue;
        };
        let o = SetupOptions {
            ethernet,
            table: None,
            params: SplitParams::default(),
            stack: Some(stack),
        };
        let s = Setup::new(m, "test".into(), &o).unwrap();
        out.push(s.env(Some(pu), 0, "test".into()).unwrap());
    }
    out
}

/// Output of a tool, `None` (with a notice) when it is not installed.
fn tool(cmd: &str, args: &[&str], env: &[(String, String)]) -> Option<String> {
    match Command::new(cmd)
        .args(args)
        .envs(env.iter().cloned())
        .output()
    {
        Ok(o) => {
            assert!(
                o.status.success(),
                "{cmd} {args:?} failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            Some(
                String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr),
            )
        }
        Err(e) => {
            eprintln!("notice: {cmd} not runnable ({e}): test skipped");
            None
        }
    }
}

fn pairs(d: &EnvDoc) -> Vec<(String, String)> {
    d.env
        .iter()
        .map(|v| (v.name.clone(), v.value.clone()))
        .collect()
}

#[test]
fn openmpi_reads_every_mca_parameter_of_the_file() {
    let Some(params) = tool(
        "ompi_info",
        &["--param", "all", "all", "--level", "9", "--parsable"],
        &[],
    ) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("tc-stack-ompi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, d) in docs(Stack::OpenMpi).iter().enumerate() {
        let file = dir.join(format!("rails{i}.conf"));
        std::fs::write(&file, mca_file(&d.env, &d.notes)).unwrap();
        let mut expect: Vec<(String, String)> = d
            .env
            .iter()
            .filter_map(|v| {
                Some((
                    v.name.strip_prefix("OMPI_MCA_")?.to_string(),
                    v.value.clone(),
                ))
            })
            .collect();
        let list: Vec<String> = d
            .env
            .iter()
            .filter(|v| !v.name.starts_with("OMPI_MCA_"))
            .map(|v| format!("{}={}", v.name, v.value))
            .collect();
        if !list.is_empty() {
            expect.push(("mca_base_env_list".into(), list.join(";")));
        }
        assert!(!expect.is_empty(), "{d:?}");
        for (n, _) in &expect {
            assert!(
                params.contains(&format!(":param:{n}:")),
                "{n}: not an MCA parameter of this Open MPI"
            );
        }
        // The file as Open MPI reads it (`mpirun --tune FILE` sets this variable).
        let env = [(
            "OMPI_MCA_mca_base_envar_file_prefix".to_string(),
            file.display().to_string(),
        )];
        let all = tool("ompi_info", &["--all", "--parsable"], &env).unwrap();
        for (n, v) in &expect {
            // ompi_info quotes values with separators in them.
            let read = |v: &str| all.contains(&format!(":param:{n}:value:{v}\n"));
            let source = format!(":param:{n}:source:file ({}", file.display());
            assert!(
                (read(v) || read(&format!("\"{v}\""))) && all.contains(&source),
                "{n}={v} not read from {}",
                file.display()
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mpich_lists_every_cvar() {
    let Some(listing) = tool("mpivars", &[], &[]) else {
        return;
    };
    let mut seen = 0;
    for d in docs(Stack::Mpich) {
        for (n, _) in pairs(&d)
            .iter()
            .filter(|(n, _)| n.starts_with("MPIR_CVAR_"))
        {
            seen += 1;
            assert!(
                listing.contains(&format!("\t{n}")),
                "{n}: not a control variable of this MPICH"
            );
        }
        assert!(
            pairs(&d).iter().all(|(n, _)| n.starts_with("MPIR_CVAR_")
                || n.starts_with("UCX_")
                || n.starts_with("CUDA_")),
            "{d:?}"
        );
    }
    assert!(seen > 0);
}

/// `mlx5_0:12800.00MBps,...` as (device, MB/s).
fn bw_list(v: &str) -> Vec<(String, f64)> {
    v.split(',')
        .map(|x| {
            let (d, b) = x.split_once(':').unwrap();
            (d.to_string(), b.trim_end_matches("MBps").parse().unwrap())
        })
        .collect()
}

#[test]
fn ucx_parses_every_variable_and_weights_the_hcas() {
    let mut weighted = false;
    for d in docs(Stack::Ucx) {
        let mut env = pairs(&d);
        if env.iter().all(|(n, _)| !n.starts_with("UCX_")) {
            continue; // usNIC: nothing for UCX (a note says so)
        }
        env.push(("UCX_WARN_INVALID_CONFIG".into(), "y".into()));
        let Some(out) = tool("ucx_info", &["-c"], &env) else {
            return;
        };
        // UCX logs "UCX  ERROR Invalid value for ..." for a value it rejects.
        assert!(
            !out.contains("UCX  ERROR") && !out.contains("UCX  WARN"),
            "{out}"
        );
        for (n, v) in env.iter().filter(|(n, _)| n.starts_with("UCX_")) {
            let line = out
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{n}=")))
                .unwrap_or_else(|| panic!("{n} not listed by ucx_info -c"));
            if n == "UCX_IB_PCI_BW" {
                // UCX's own units (MB/s): the ratios are the NUIOA weights.
                let (ours, read) = (bw_list(&v.replace("GBps", "")), bw_list(line));
                assert_eq!(ours.len(), read.len());
                for (o, r) in ours.iter().zip(&read) {
                    assert_eq!(o.0, r.0);
                    assert!(
                        (r.1 / read[0].1 - o.1 / ours[0].1).abs() < 1e-3,
                        "{v} -> {line}"
                    );
                }
                weighted |= read.windows(2).any(|w| w[0].1 != w[1].1);
            } else {
                assert_eq!(line, v, "{n}");
            }
        }
    }
    assert!(
        weighted,
        "no export put uneven HCA weights in UCX_IB_PCI_BW"
    );
}

#[test]
fn libfabric_lists_every_variable() {
    let Some(listing) = tool("fi_info", &["--env"], &[]) else {
        return;
    };
    for d in docs(Stack::Libfabric) {
        for (n, _) in pairs(&d).iter().filter(|(n, _)| !n.starts_with("CUDA_")) {
            assert!(n.starts_with("FI_"), "{n}: not a libfabric variable");
            assert!(
                listing.contains(&format!("# {n}:")),
                "{n}: not listed by fi_info --env"
            );
        }
    }
}

#[test]
fn intel_mpi_variables_are_documented_ones() {
    let mut seen = 0;
    for d in docs(Stack::IntelMpi) {
        for (n, _) in pairs(&d) {
            if n.starts_with("I_MPI_") {
                seen += 1;
                assert!(INTEL_MPI_VARS.contains(&n.as_str()), "{n}");
            } else {
                assert!(n.starts_with("UCX_") || n.starts_with("CUDA_"), "{n}");
            }
        }
    }
    assert!(seen > 0);
}
