//! The verdict rules of `scripts/mpich-suite.py compare`, the script that
//! decides whether MPICH's test suite passes under `topocomm accel` in the
//! test command: tests/mpich-suite/test_compare.py feeds it made-up plain
//! and wrapped results (no MPI run) and checks what counts as a difference.

use std::path::Path;
use std::process::Command;

#[test]
fn compare_counts_wrapped_failures_and_excuses_only_listed_timeouts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("tests/mpich-suite/test_compare.py");
    let out = match Command::new("python3")
        .arg(&script)
        .current_dir(&root)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("notice: python3 not runnable ({e}; scripts/setup.sh installs it), skipped");
            return;
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("5 of 5 cases as expected"), "{text}");
}
