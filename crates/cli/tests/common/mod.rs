//! Helpers shared by the CLI integration tests: run the freshly built
//! `topocomm` as a user would (without a topology inherited from the
//! environment) and check its outcome.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `topocomm ARGS` and returns its output.
pub fn topocomm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topocomm"))
        .args(args)
        .env_remove("TOPOCOMM_TOPOLOGY")
        .output()
        .expect("topocomm runs")
}

/// Runs `topocomm ARGS`, which must succeed.
pub fn ok(args: &[&str]) -> Output {
    let out = topocomm(args);
    assert!(
        out.status.success(),
        "topocomm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `topocomm ARGS`, which must fail with exactly one error line
/// containing `needle`.
pub fn fails_with(args: &[&str], needle: &str) {
    let out = topocomm(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(err.contains(needle), "{args:?}: '{needle}' not in: {err}");
    assert_eq!(
        err.trim().lines().filter(|l| l.contains("error")).count(),
        1,
        "{err}"
    );
}
