//! Unit tests on synthetic machines with hand-placed devices and on the
//! real-machine XML topologies of ../shared/topologies (skipped if absent).

use super::*;
use topocomm_topo::{Device, DeviceKind, Machine, PuSet};

/// 2 packages x 2 NUMA nodes x 2 PUs: NUMA n holds PUs 2n, 2n+1.
fn machine() -> Machine {
    topocomm_topo::load_default(Some("synthetic:pack:2 numa:2 core:2 pu:1")).unwrap()
}

/// A device local to NUMA node `numa` of `m`.
fn dev(
    m: &Machine,
    kind: DeviceKind,
    sub: Option<&str>,
    name: &str,
    pci: &str,
    numa: u32,
) -> Device {
    let n = m.numa_nodes.iter().find(|n| n.os_index == numa).unwrap();
    let pu = n.cpuset.indexes()[0];
    Device {
        kind,
        subtype: sub.map(Into::into),
        name: name.into(),
        pci_bus_id: Some(pci.into()),
        local_object: n.attached_to,
        cpuset: n.cpuset.clone(),
        numa_nodes: vec![numa],
        package: m.pus[m.pu_position(pu).unwrap()].package,
    }
}

/// IB HCA (+ its netdev) on NUMA 0, a second HCA on NUMA 3, Ethernet on
/// NUMA 1, GPUs on NUMA 0 (CUDA+NVML+DRM handles) and NUMA 2 (NVML), an
/// OpenCL-only accelerator on NUMA 1.
fn machine_with_devices() -> Machine {
    let mut m = machine();
    use DeviceKind::*;
    m.devices = vec![
        dev(&m, Network, None, "ib0", "0000:04:00.0", 0),
        dev(&m, OpenFabrics, None, "mlx5_0", "0000:04:00.0", 0),
        dev(&m, OpenFabrics, None, "mlx5_1", "0000:84:00.0", 3),
        dev(&m, Network, None, "eth0", "0000:02:00.0", 1),
        dev(&m, Coprocessor, Some("CUDA"), "cuda0", "0000:10:00.0", 0),
        dev(&m, Gpu, Some("NVML"), "nvml0", "0000:10:00.0", 0),
        dev(&m, Gpu, None, "card0", "0000:10:00.0", 0),
        dev(&m, Gpu, Some("NVML"), "nvml1", "0000:90:00.0", 2),
        dev(
            &m,
            Coprocessor,
            Some("OpenCL"),
            "opencl0d0",
            "0000:20:00.0",
            1,
        ),
    ];
    m
}

fn loc(m: &Machine, pus: &str) -> Location {
    Location::new(m, &PuSet::parse_list(pus).unwrap()).unwrap()
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn one_rail_per_pci_function() {
    let m = machine_with_devices();
    let r = discover(&m, &DiscoverOptions::default());
    let nics: Vec<&str> = r.nics.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(nics, ["mlx5_0", "mlx5_1"]);
    assert_eq!(r.nics[0].aliases, ["ib0"]);
    assert_eq!(r.nics[0].netdevs, ["ib0"]);
    assert_eq!(r.nics[0].ucx_name(), "mlx5_0:1");
    assert!(r.nics[0].answers_to("ib0"));
    let gpus: Vec<(&str, Option<u32>)> = r
        .gpus
        .iter()
        .map(|g| (g.name.as_str(), g.gpu_index))
        .collect();
    assert_eq!(gpus, [("cuda0", Some(0)), ("nvml1", Some(1))]);
    assert_eq!(r.gpus[0].aliases, ["card0", "nvml0"]);
    let ignored: Vec<&str> = r.ignored.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(ignored, ["eth0", "opencl0d0"]);
    // Ethernet becomes a TCP rail on request.
    let r = discover(&m, &DiscoverOptions { ethernet: true });
    let eth = r.nics.iter().find(|n| n.name == "eth0").unwrap();
    assert_eq!(eth.transport, Some(NicTransport::Tcp));
    assert_eq!(eth.ucx_name(), "eth0");
}

#[test]
fn no_devices_says_why() {
    let m = machine();
    let r = discover(&m, &DiscoverOptions::default());
    assert!(r.is_empty());
    assert!(r.absence_reason().contains("no OpenFabrics device"));
    let loc = loc(&m, "0");
    let w = weigh(&m, &loc, &r.nics, None);
    assert!(matches!(
        split(&w, 1 << 20, &SplitParams::default()),
        Err(RailsError::NoNetworkRails(_))
    ));
    let c = choose(&r, &loc, &w, &SplitParams::default(), 3).unwrap();
    assert!(c.gpu.is_none() && c.nics.is_none());
    assert!(
        device_env(&r, &loc, &c, None, &SplitParams::default(), false)
            .vars
            .is_empty()
    );
}

#[test]
fn locations_are_checked() {
    let m = machine();
    assert!(Location::new(&m, &PuSet::default()).is_err());
    let e = Location::new(&m, &PuSet::parse_list("3,99").unwrap()).unwrap_err();
    assert!(e.to_string().contains("99"), "{e}");
    let l = loc(&m, "2-5");
    assert_eq!(l.numa_nodes, [1, 2]);
    assert_eq!(l.packages, [0, 1]);
}

#[test]
fn distance_classes() {
    let m = machine_with_devices();
    let r = discover(&m, &DiscoverOptions::default());
    let mlx0 = &r.nics[0]; // NUMA 0, package 0
    assert_eq!(distance(&loc(&m, "0"), mlx0), Distance::Local);
    assert_eq!(distance(&loc(&m, "0-1"), mlx0), Distance::Local);
    assert_eq!(distance(&loc(&m, "2"), mlx0), Distance::Package);
    assert_eq!(distance(&loc(&m, "1-2"), mlx0), Distance::Package);
    assert_eq!(distance(&loc(&m, "4"), mlx0), Distance::Remote);
    // A location over both packages is not near anything package-local.
    assert_eq!(distance(&loc(&m, "0,4"), mlx0), Distance::Remote);
}

#[test]
fn split_follows_the_seed_ratios() {
    let m = machine_with_devices();
    let r = discover(&m, &DiscoverOptions::default());
    let p = SplitParams::default();
    // Near mlx5_0: 1 : 0.77, i.e. 56.5% (seed 002: 56.6% mono-rail ratio).
    let w = weigh(&m, &loc(&m, "0"), &r.nics, None);
    let plan = split(&w, 4 << 20, &p).unwrap();
    assert_eq!(plan.mode, SplitMode::Multirail);
    assert_eq!(plan.chunks[0].name, "mlx5_0");
    assert!(near(plan.chunks[0].share, 1.0 / 1.77));
    assert_eq!(plan.chunks.iter().map(|c| c.bytes).sum::<u64>(), 4 << 20);
    // Near mlx5_1 the other way round.
    let w3 = weigh(&m, &loc(&m, "7"), &r.nics, None);
    assert_eq!(split(&w3, 4 << 20, &p).unwrap().chunks[0].name, "mlx5_1");
    // Near neither (NUMA 1 is package-near mlx5_0 only, but both are
    // "not near": same factor): half and half.
    let w1 = weigh(&m, &loc(&m, "2"), &r.nics, None);
    let plan = split(&w1, 1000001, &p).unwrap();
    assert!(near(plan.chunks[0].share, 0.5) && near(plan.chunks[1].share, 0.5));
    assert_eq!(plan.chunks[0].bytes + plan.chunks[1].bytes, 1000001);
    // Contention: the near process uses its NIC only, the far one both.
    let pc = SplitParams {
        contention: true,
        ..p.clone()
    };
    let plan = split(&w, 4 << 20, &pc).unwrap();
    assert_eq!(plan.mode, SplitMode::Nearest);
    assert_eq!(plan.chunks.len(), 1);
    assert_eq!(plan.chunks[0].bytes, 4 << 20);
    assert_eq!(plan.dropped[0].0, "mlx5_1");
    let plan = split(&weigh(&m, &loc(&m, "5"), &r.nics, None), 4 << 20, &pc).unwrap();
    assert_eq!(plan.chunks.len(), 1, "NUMA 2 is package-near mlx5_1 only");
    assert_eq!(plan.chunks[0].name, "mlx5_1");
    // Small messages: one rail, the best one.
    let plan = split(&w, 4096, &p).unwrap();
    assert_eq!(plan.mode, SplitMode::SingleRail);
    assert_eq!(
        (plan.chunks.len(), plan.chunks[0].name.as_str()),
        (1, "mlx5_0")
    );
    // A high minimum share drops the far rail.
    let pm = SplitParams {
        min_share: 0.45,
        ..p
    };
    let plan = split(&w, 4 << 20, &pm).unwrap();
    assert_eq!(plan.chunks.len(), 1);
    assert!(plan.dropped[0].1.contains("below the minimum"));
    assert!(split(
        &w,
        1,
        &SplitParams {
            min_share: 1.5,
            ..SplitParams::default()
        }
    )
    .is_err());
}

#[test]
fn measured_table_replaces_the_model() {
    let m = machine_with_devices();
    let r = discover(&m, &DiscoverOptions::default());
    let t = RailTable::parse(
        "t.json",
        r#"{"schema":"topocomm.rails-table/1",
            "rails":{"ib0":{"local":12.0,"remote":6.0},"mlx5_1":{"local":3.0}}}"#,
    )
    .unwrap();
    t.check(&r.nics).unwrap();
    let w = weigh(&m, &loc(&m, "0"), &r.nics, Some(&t));
    assert_eq!(w[0].source, WeightSource::Table);
    assert!(near(w[0].weight, 12.0));
    assert!(
        near(w[1].weight, 3.0 * NIC_REMOTE_FACTOR),
        "unmeasured class scales local"
    );
    let w7 = weigh(&m, &loc(&m, "7"), &r.nics, Some(&t));
    assert!(near(w7[0].weight, 6.0) && near(w7[1].weight, 3.0));
    let plan = split(&w7, 1 << 30, &SplitParams::default()).unwrap();
    assert_eq!(plan.chunks[0].name, "mlx5_0");
    assert!(near(plan.chunks[0].share, 6.0 / 9.0));
}

#[test]
fn bad_tables_name_the_place() {
    let m = machine_with_devices();
    let r = discover(&m, &DiscoverOptions::default());
    let e = RailTable::parse(
        "t.json",
        "{\n \"schema\": \"topocomm.rails-table/1\",\n \"rails\": {\"mlx5_0\": {\"local\": 1,}}}",
    )
    .unwrap_err();
    assert!(matches!(e, RailsError::TableSyntax { line: 3, .. }), "{e}");
    assert!(e.to_string().starts_with("t.json:3:"), "{e}");
    let e = RailTable::parse("t.json", r#"{"schema":"x","rails":{}}"#).unwrap_err();
    assert!(e.to_string().contains("field 'schema'"), "{e}");
    let e = RailTable::parse(
        "t.json",
        r#"{"schema":"topocomm.rails-table/1","rails":{"mlx5_0":{"local":-2}}}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("'rails.mlx5_0.local'"), "{e}");
    let e = RailTable::parse(
        "t.json",
        r#"{"schema":"topocomm.rails-table/1","rails":{"mlx5_0":{"lokal":2}}}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("lokal"), "{e}");
    let t = RailTable::parse("t.json", r#"{"schema":"topocomm.rails-table/1","rails":{"mlx5_0":{"local":2},"hfi1_0":{"local":2}}}"#).unwrap();
    let e = t.check(&r.nics).unwrap_err();
    assert!(
        e.to_string().contains("'rails.hfi1_0'") && e.to_string().contains("mlx5_0, mlx5_1"),
        "{e}"
    );
    let t = RailTable::parse(
        "t.json",
        r#"{"schema":"topocomm.rails-table/1","rails":{"mlx5_0":{"local":2}}}"#,
    )
    .unwrap();
    assert!(t
        .check(&r.nics)
        .unwrap_err()
        .to_string()
        .contains("'rails.mlx5_1': missing"));
    assert!(matches!(
        RailTable::load("/nonexistent/t.json"),
        Err(RailsError::TableIo { .. })
    ));
}

#[test]
fn local_rank_variables_in_order() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(local_rank(env(&[])).unwrap(), None);
    assert_eq!(
        local_rank(env(&[("SLURM_LOCALID", "3"), ("MPI_LOCALRANKID", "1")])).unwrap(),
        Some((1, "MPI_LOCALRANKID"))
    );
    assert_eq!(
        local_rank(env(&[
            ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
            ("SLURM_LOCALID", "0")
        ]))
        .unwrap(),
        Some((2, "OMPI_COMM_WORLD_LOCAL_RANK"))
    );
    let e = local_rank(env(&[("SLURM_LOCALID", "x1")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "SLURM_LOCALID='x1': expected a local rank (a non-negative integer)"
    );
}

#[test]
fn ranks_share_equally_near_devices() {
    let mut m = machine_with_devices();
    // A second HCA and GPU on NUMA 0: two equally near of each.
    m.devices.push(dev(
        &m,
        DeviceKind::OpenFabrics,
        None,
        "mlx5_2",
        "0000:05:00.0",
        0,
    ));
    m.devices.push(dev(
        &m,
        DeviceKind::Gpu,
        Some("NVML"),
        "nvml2",
        "0000:11:00.0",
        0,
    ));
    let r = discover(&m, &DiscoverOptions::default());
    let l = loc(&m, "1");
    let w = weigh(&m, &l, &r.nics, None);
    let p = SplitParams::default();
    let pick = |rank| choose(&r, &l, &w, &p, rank).unwrap();
    let names = |c: &Choice| -> Vec<String> {
        c.nics
            .as_ref()
            .unwrap()
            .chunks
            .iter()
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(r.gpus[pick(0).gpu.unwrap()].name, "cuda0");
    assert_eq!(r.gpus[pick(1).gpu.unwrap()].name, "nvml2");
    assert_eq!(r.gpus[pick(2).gpu.unwrap()].name, "cuda0");
    assert_eq!(names(&pick(0)), ["mlx5_0", "mlx5_2", "mlx5_1"]);
    assert_eq!(names(&pick(1)), ["mlx5_2", "mlx5_0", "mlx5_1"]);
    let env = device_env(&r, &l, &pick(1), Some(Stack::OpenMpi), &p, false).vars;
    let get = |k: &str| env.iter().find(|v| v.name == k).map(|v| v.value.clone());
    assert_eq!(
        get("CUDA_VISIBLE_DEVICES").as_deref(),
        Some("1"),
        "nvml2 is 2nd in PCI order"
    );
    assert_eq!(get("CUDA_DEVICE_ORDER").as_deref(), Some("PCI_BUS_ID"));
    assert_eq!(
        get("UCX_NET_DEVICES").as_deref(),
        Some("mlx5_2:1,mlx5_0:1,mlx5_1:1")
    );
    assert_eq!(get("UCX_MAX_RNDV_RAILS").as_deref(), Some("3"));
    assert_eq!(
        get("OMPI_MCA_btl_openib_if_include").as_deref(),
        Some("mlx5_2,mlx5_0,mlx5_1")
    );
    assert!(env.iter().all(|v| !v.why.is_empty()));
    // The NUIOA weights reach UCX: 1.0 near (mlx5_2, mlx5_0), 0.77 far (mlx5_1).
    assert_eq!(
        get("UCX_IB_PCI_BW").as_deref(),
        Some("mlx5_2:12.50GBps,mlx5_0:12.50GBps,mlx5_1:9.62GBps")
    );
    // Contention mode: the two local HCAs only.
    let pc = SplitParams {
        contention: true,
        ..p
    };
    let c = choose(&r, &l, &w, &pc, 0).unwrap();
    assert_eq!(names(&c), ["mlx5_0", "mlx5_2"]);
}

mod shared {
    use super::*;

    fn load(file: &str) -> Option<Machine> {
        let p = topocomm_topo::testdata::shared_topology(file)?;
        Some(topocomm_topo::load_default(Some(p.to_str().unwrap())).unwrap())
    }

    #[test]
    fn ib_gpu_devices_are_on_package_1() {
        let Some(m) = load("intel-2xE5-2650-ib-gpu.xml") else {
            return;
        };
        let r = discover(&m, &DiscoverOptions::default());
        assert_eq!(r.nics.len(), 1);
        assert_eq!(r.nics[0].name, "mlx5_0");
        assert!(r.nics[0].aliases.contains(&"ib0".to_string()));
        assert_eq!(r.gpus.len(), 1);
        assert_eq!(r.gpus[0].name, "cuda0");
        let far = loc(&m, "0");
        let close = loc(&m, "8");
        assert_eq!(distance(&close, &r.nics[0]), Distance::Local);
        assert_eq!(distance(&far, &r.nics[0]), Distance::Remote);
        assert_eq!(distance(&far, &r.gpus[0]), Distance::Remote);
        // The SLIT matrix says how far, beside the class.
        let wf = weigh(&m, &far, &r.nics, None);
        let wc = weigh(&m, &close, &r.nics, None);
        assert!(wf[0].numa_latency > wc[0].numa_latency, "{wf:?} {wc:?}");
        assert!(wc[0].weight > wf[0].weight);
        let c = choose(&r, &far, &wf, &SplitParams::default(), 0).unwrap();
        assert_eq!(c.gpu, Some(0), "the only GPU, even if remote");
        assert_eq!(c.gpu_distance, Some(Distance::Remote));
    }

    #[test]
    fn dgx2_ranks_spread_over_the_nearest_gpus() {
        let Some(m) = load("nvidia-dgx2-16gpu.xml") else {
            return;
        };
        let r = discover(&m, &DiscoverOptions::default());
        assert_eq!(r.gpus.len(), 16);
        assert!(r.nics.is_empty());
        for (pu, first) in [("0", 0u32), ("24", 8)] {
            let l = loc(&m, pu);
            let (cands, d) = nearest(&l, &r.gpus);
            assert_eq!((cands.len(), d), (8, Some(Distance::Local)));
            let got: Vec<u32> = (0..8)
                .map(|rank| {
                    let c = choose(&r, &l, &[], &SplitParams::default(), rank).unwrap();
                    r.gpus[c.gpu.unwrap()].gpu_index.unwrap()
                })
                .collect();
            assert_eq!(got, (first..first + 8).collect::<Vec<_>>());
        }
    }

    #[test]
    fn usnic_two_near_rails_and_one_far() {
        let Some(m) = load("intel-2x8c-usnic-vfs.xml") else {
            return;
        };
        let r = discover(&m, &DiscoverOptions::default());
        let names: Vec<&str> = r.nics.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["usnic_0", "usnic_1", "usnic_2"]);
        let l = loc(&m, "0");
        let plan = split(
            &weigh(&m, &l, &r.nics, None),
            8 << 20,
            &SplitParams::default(),
        )
        .unwrap();
        let far = plan.chunks.iter().find(|c| c.name == "usnic_2").unwrap();
        assert!(near(far.share, 0.77 / 2.77));
        let pc = SplitParams {
            contention: true,
            ..SplitParams::default()
        };
        let plan = split(&weigh(&m, &l, &r.nics, None), 8 << 20, &pc).unwrap();
        assert_eq!(plan.chunks.len(), 2);
        let with_eth = discover(&m, &DiscoverOptions { ethernet: true });
        assert!(with_eth.nics.len() > 3);
    }

    #[test]
    fn westmere_and_power8() {
        if let Some(m) = load("intel-2xX5650-westmere-ib.xml") {
            let r = discover(&m, &DiscoverOptions::default());
            assert_eq!(r.nics.len(), 1);
            assert_eq!(r.nics[0].name, "mlx4_0");
            assert_eq!(r.nics[0].netdevs, ["eth2", "ib0"]);
            assert_eq!(distance(&loc(&m, "0"), &r.nics[0]), Distance::Local);
            assert_eq!(distance(&loc(&m, "1"), &r.nics[0]), Distance::Remote);
        }
        if let Some(m) = load("ibm-power8-4gpu-nvlink.xml") {
            let r = discover(&m, &DiscoverOptions::default());
            let names: Vec<&str> = r.gpus.iter().map(|g| g.name.as_str()).collect();
            assert_eq!(names, ["cuda0", "cuda1", "cuda2", "cuda3"]);
            let l = loc(&m, "80");
            let (cands, _) = nearest(&l, &r.gpus);
            assert_eq!(cands, [2, 3]);
        }
    }

    /// Issue 18: usNIC's export is libfabric's (no UCX or openib variable),
    /// and every stack names only its own variables.
    #[test]
    fn usnic_exports_the_stacks_own_variables() {
        let Some(m) = load("intel-2x8c-usnic-vfs.xml") else {
            return;
        };
        let r = discover(&m, &DiscoverOptions::default());
        assert_eq!(auto_stack(&r), Stack::Libfabric);
        let l = Location::new(&m, &PuSet::parse_list("0").unwrap()).unwrap();
        let w = weigh(&m, &l, &r.nics, None);
        let p = SplitParams::default();
        let c = choose(&r, &l, &w, &p, 0).unwrap();
        let names = |s: Option<Stack>| -> Vec<String> {
            let e = device_env(&r, &l, &c, s, &p, false);
            e.vars.into_iter().map(|v| v.name).collect()
        };
        let auto = names(None);
        assert!(auto.iter().all(|n| n.starts_with("FI_")), "{auto:?}");
        assert!(auto.contains(&"FI_OFI_MRAIL_ADDR".to_string()));
        let ompi = names(Some(Stack::OpenMpi));
        assert!(ompi.contains(&"OMPI_MCA_mtl_ofi_provider_include".to_string()));
        assert!(ompi
            .iter()
            .all(|n| !n.starts_with("UCX_") && !n.contains("openib")));
        // The uneven shares (36/36/28%) are not expressible: a note says so.
        let e = device_env(&r, &l, &c, None, &p, false);
        assert!(e.notes.iter().any(|n| n.contains("27.8%")), "{:?}", e.notes);
    }
}
