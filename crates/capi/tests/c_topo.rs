//! The C API as a C program uses it: compiled with -Wall -Wextra -Werror
//! against include/topocomm.h and linked with the freshly built libtopocomm.

use std::process::Command;
use topocomm_topo::testdata::{fixture, libtopocomm_dir, repo_root};

#[test]
fn c_program_reads_classes() {
    let dir = libtopocomm_dir();
    assert!(
        dir.join("libtopocomm.so").exists(),
        "libtopocomm.so not built in {}",
        dir.display()
    );
    let root = repo_root();
    let exe = std::env::temp_dir().join(format!("tc-topo-classes-{}", std::process::id()));
    let cc = Command::new("cc")
        .args(["-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(root.join("examples/c/topo_classes.c"))
        .arg(format!("-I{}", root.join("include").display()))
        .arg(format!("-L{}", dir.display()))
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .arg("-ltopocomm")
        .output()
        .expect("cc runs");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe)
        .arg(fixture("two-socket-nic.xml"))
        .args(["0", "2", "0", "4", "0", "1", "0", "42"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("8 PUs"), "{text}");
    assert!(text.contains("0,2 smt\n0,4 l3\n0,1 machine\n"), "{text}");
    assert!(
        text.contains("0,42 error -3: PU with OS index 42 does not exist"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1));
    let bad = Command::new(&exe)
        .args(["/no/such.xml", "0", "1"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/no/such.xml"));
    let _ = std::fs::remove_file(&exe);
}
