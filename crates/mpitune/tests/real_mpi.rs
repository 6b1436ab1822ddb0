//! The exported files are accepted by the real tools and their values take
//! effect: Open MPI (`mpirun --tune FILE`, `ompi_info` with
//! `OMPI_MCA_mca_base_param_files`) and MPICH (`source FILE; mpirun.mpich`),
//! read back through MPI_T by tc_mpit_cvars. Runs oversubscribed; an MPI
//! that is not installed is skipped with a notice.

use std::path::PathBuf;
use std::process::Command;
use topocomm_measure::backends::MpiImpl;
use topocomm_mpitune::export::{openmpi_file_env, parse_env_file, parse_mca_file, render, Entry};
use topocomm_mpitune::runner::openmpi_pml_env;
use topocomm_mpitune::space::Layer;
use topocomm_mpitune::verify::{ompi_info_sources, verify_file};

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// mpi/build with the two programs used here for `which` (make is incremental).
fn build(which: MpiImpl) -> PathBuf {
    let root = topocomm_topo::testdata::repo_root();
    let targets: Vec<String> = ["tc_mpit_cvars", "tc_mpibench"]
        .iter()
        .map(|p| format!("build/{}/{p}", which.name()))
        .collect();
    let ok = Command::new("make")
        .args(["-s", "-C"])
        .arg(root.join("mpi"))
        .args(&targets)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "make -C mpi {targets:?} failed");
    root.join("mpi/build")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tc-mpitune-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn entry(n: &str, v: &str) -> Entry {
    Entry {
        name: n.into(),
        value: v.into(),
        why: vec!["test value".into()],
    }
}

#[test]
fn openmpi_reads_the_mca_file() {
    if !have("mpirun.openmpi") || !have("ompi_info") {
        eprintln!("notice: Open MPI absent; skipping");
        return;
    }
    let b = build(MpiImpl::OpenMpi);
    let f = tmp("ompi.conf");
    // Non-default values, so that reading them back proves the file applied.
    let entries = [
        entry("btl_vader_single_copy_mechanism", "none"),
        entry("btl_vader_eager_limit", "16384"),
    ];
    std::fs::write(&f, render(Layer::Vader, &["test".into()], &entries)).unwrap();
    let values = parse_mca_file("ompi.conf", &std::fs::read_to_string(&f).unwrap()).unwrap();
    let rb = verify_file(MpiImpl::OpenMpi, Layer::Vader, &b, &f, &values).unwrap();
    assert_eq!(rb.len(), 2);
    assert!(rb.iter().all(|r| r.ok && r.how == "MPI_T"), "{rb:?}");
    // The check can fail: expecting another value than the file's.
    let wrong = vec![("btl_vader_eager_limit".to_string(), "8192".to_string())];
    let rb = verify_file(MpiImpl::OpenMpi, Layer::Vader, &b, &f, &wrong).unwrap();
    assert!(
        !rb[0].ok && rb[0].read.as_deref() == Some("16384"),
        "{rb:?}"
    );
    // ompi_info sees the values as coming from the file.
    let names: Vec<String> = values.iter().map(|(k, _)| k.clone()).collect();
    let src = ompi_info_sources(&f, &names).unwrap();
    assert_eq!(src.len(), 2, "{src:?}");
    assert!(src.iter().all(|(_, s)| s.starts_with("file (")), "{src:?}");
    assert!(
        src.iter().any(|(v, _)| v == "btl_vader_eager_limit=16384"),
        "{src:?}"
    );
    // Using the file keeps the default files (and the pml they select):
    // `mca_base_param_files=FILE` alone would drop Debian's system file and
    // silently switch to pml cm.
    let abs = f.canonicalize().unwrap();
    let plain = openmpi_pml_env(&b, &[]).unwrap();
    let with_file = openmpi_pml_env(&b, &openmpi_file_env(&abs)).unwrap();
    assert_eq!(plain, with_file);
}

#[test]
fn mpich_reads_the_env_file() {
    if !have("mpirun.mpich") {
        eprintln!("notice: MPICH absent; skipping");
        return;
    }
    let b = build(MpiImpl::Mpich);
    let f = tmp("mpich.env");
    let entries = [
        entry("MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE", "16384"),
        entry("UCX_RNDV_SCHEME", "put_zcopy"),
        // The FIFO-only preset's value: UCX must parse "inf".
        entry("UCX_RNDV_THRESH", "inf"),
    ];
    std::fs::write(&f, render(Layer::MpichUcx, &["test".into()], &entries)).unwrap();
    let values = parse_env_file("mpich.env", &std::fs::read_to_string(&f).unwrap()).unwrap();
    let rb = verify_file(MpiImpl::Mpich, Layer::MpichUcx, &b, &f, &values).unwrap();
    assert_eq!(rb.len(), 3, "{rb:?}");
    assert!(rb.iter().all(|r| r.ok), "{rb:?}");
    assert_eq!(rb[0].read.as_deref(), Some("16384"));
    assert_eq!(rb[1].how, "UCX parser");
    assert_eq!(rb[2].how, "UCX parser");
    // A misspelled UCX variable is caught (UCX warns it is unused).
    let f2 = tmp("mpich-bad.env");
    std::fs::write(
        &f2,
        render(
            Layer::MpichUcx,
            &[],
            &[entry("UCX_RNDV_SCHEMA", "put_zcopy")],
        ),
    )
    .unwrap();
    let bad = vec![("UCX_RNDV_SCHEMA".to_string(), "put_zcopy".to_string())];
    let rb = verify_file(MpiImpl::Mpich, Layer::MpichUcx, &b, &f2, &bad).unwrap();
    assert!(!rb[0].ok, "{rb:?}");
}
