//! Every numeric option that used to panic, hang, allocate without bound
//! or run on a meaningless value (issue 19, docs/testing.md "Numeric
//! inputs"): each case must exit 2 at once with one error line naming the
//! option and no panic. Table-driven: one `topocomm` run per row, each
//! bounded by `timeout 20`.

use std::process::Command;
use std::time::Instant;

const SYN: &str = "synthetic:pack:2 core:2 pu:2";
const P63: &str = "9223372036854775808";
const P64: &str = "18446744073709551617";

/// (arguments, environment, text the one error line must contain)
type Case = (
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
    &'static str,
);

const CASES: &[Case] = &[
    // bench p2p: --timeout 0 and 2^63 used to start the benchmark.
    (
        &["bench", "p2p", "--timeout", "0"],
        &[],
        "'--timeout <SECS>'",
    ),
    (
        &["bench", "p2p", "--timeout", P63],
        &[],
        "'--timeout <SECS>'",
    ),
    // bench cache: 2^31 samples or bytes ran on, 2^63 panicked.
    (
        &["bench", "cache", "--samples", P63],
        &[],
        "--samples: 9223372036854775808 is too large (at most 10000)",
    ),
    (
        &["bench", "cache", "--samples", "0"],
        &[],
        "--samples must be at least 1",
    ),
    (
        &["bench", "cache", "--sizes", P63],
        &[],
        "--sizes: 9223372036854775808 is too large (at most 4G)",
    ),
    // bench placement: --grid 2^31 and --triad-len 2^63 panicked.
    (
        &["bench", "placement", "--grid", "2147483648"],
        &[],
        "--grid: 2147483648 is too large (at most 200)",
    ),
    (
        &["bench", "placement", "--triad-len", P63],
        &[],
        "--triad-len: 9223372036854775808 is too large",
    ),
    (
        &["bench", "placement", "--samples", P63],
        &[],
        "--samples: 9223372036854775808 is too large (at most 1000)",
    ),
    (
        &["bench", "placement", "--max-iter", "0"],
        &[],
        "--max-iter >= 1",
    ),
    (
        &["bench", "placement", "--max-iter", P63],
        &[],
        "--max-iter: 9223372036854775808 is too large",
    ),
    (
        &["bench", "placement", "--tolerance", "1"],
        &[],
        "--tolerance in (0, 1)",
    ),
    (
        &["bench", "placement", "--tolerance", "inf"],
        &[],
        "--tolerance in (0, 1)",
    ),
    (
        &["bench", "placement", "--tolerance", "nan"],
        &[],
        "--tolerance in (0, 1)",
    ),
    // bench matrix: --size and --samples 2^63 panicked, --rounds 2^31 ran on.
    (
        &["bench", "matrix", "--size", P63],
        &[],
        "--size: 9223372036854775808 is too large (at most 1G)",
    ),
    (
        &["bench", "matrix", "--samples", P63],
        &[],
        "--samples: 9223372036854775808 is too large (at most 10000)",
    ),
    (
        &["bench", "matrix", "--rounds", "2147483648"],
        &[],
        "--rounds: 2147483648 is too large (at most 10000000)",
    ),
    // model: --samples 0 and --min-time-ms 0/NaN/inf/1e308 were measured.
    (&["model", "--samples", "0"], &[], "'--samples <SAMPLES>'"),
    (
        &["model", "--min-time-ms", "0"],
        &[],
        "expected a number of milliseconds in (0, 60000]",
    ),
    (
        &["model", "--min-time-ms", "nan"],
        &[],
        "'--min-time-ms <MIN_TIME_MS>'",
    ),
    (
        &["model", "--min-time-ms", "1e308"],
        &[],
        "'--min-time-ms <MIN_TIME_MS>'",
    ),
    // tune: --budget 2^64+1 and 1e308 panicked (Duration); zero counts ran.
    (
        &["tune", "--budget", P64],
        &[],
        "expected a number of seconds in (0, 604800]",
    ),
    (&["tune", "--budget", "1e308"], &[], "'--budget <SECS>'"),
    (&["tune", "--samples", "0"], &[], "'--samples <SAMPLES>'"),
    (&["tune", "--rounds", "0"], &[], "'--rounds <ROUNDS>'"),
    (
        &["tune", "--min-time-ms", "inf"],
        &[],
        "'--min-time-ms <MIN_TIME_MS>'",
    ),
    // tune --mpi: checked before the benchmark is looked for.
    (
        &["tune", "--mpi", "openmpi", "--samples", "2"],
        &[],
        "--samples 2: `tune --mpi` takes 3..=1000",
    ),
    (
        &["tune", "--mpi", "openmpi", "--rounds", "11"],
        &[],
        "--rounds 11: `tune --mpi` takes 1..=10",
    ),
    (
        &["tune", "--mpi", "openmpi", "--window", "0"],
        &[],
        "'--window <W>'",
    ),
    (
        &["tune", "--mpi", "openmpi", "--timeout", "0"],
        &[],
        "'--timeout <SECS>'",
    ),
    // selftest: --max-size 2^63 aborted on allocation.
    (
        &["selftest", "stress", "--max-size", P63],
        &[],
        "'--max-size <MAX_SIZE>'",
    ),
    (
        &["selftest", "stress", "--messages", "2147483648"],
        &[],
        "'--messages <MESSAGES>'",
    ),
    // accel --nodes: 0 was checked after the launcher, 2^31 reached the C side.
    (
        &["accel", "--nodes", "0", "--", "true"],
        &[],
        "'--nodes <N>'",
    ),
    (
        &["accel", "--nodes", "2147483648", "--", "true"],
        &[],
        "'--nodes <N>'",
    ),
    // Already right before this review; kept so that they stay so.
    (
        &["run", "-n", "1", "--timeout", "1e20", "--", "true"],
        &[],
        "--timeout='1e20'",
    ),
    (
        &["run", "-n", "1", "--", "true"],
        &[("TOPOCOMM_TIMEOUT", "nan")],
        "TOPOCOMM_TIMEOUT='nan'",
    ),
    (
        &["run", "-n", "0", "--", "true"],
        &[],
        "-n 0: expected 1..=4096 ranks",
    ),
    (
        &["map", "--nodes", "2147483648", "MATRIX"],
        &[],
        "--nodes 2147483648: at most 1048576 nodes",
    ),
    (
        &["map", "--ranks", P63, "MATRIX"],
        &[],
        "at most 16777216 ranks",
    ),
    (
        &["rails", "--min-share", "nan"],
        &[],
        "--min-share: expected a fraction in [0, 1)",
    ),
];

#[test]
fn every_bad_number_is_one_line_and_exit_2() {
    let matrix = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("numeric_inputs.csv");
    std::fs::write(&matrix, "0,1,100,1\n1,0,100,1\n").unwrap();
    let mut failures = Vec::new();
    for (args, env, needle) in CASES {
        let args: Vec<&str> = args
            .iter()
            .map(|&a| {
                if a == "MATRIX" {
                    matrix.to_str().unwrap()
                } else {
                    a
                }
            })
            .collect();
        let start = Instant::now();
        let out = Command::new("timeout")
            .arg("20")
            .arg(env!("CARGO_BIN_EXE_topocomm"))
            // The benchmarks measure this machine (the live topology).
            .args(match args[0] {
                "map" | "rails" => &["--topology", SYN][..],
                _ => &[],
            })
            .args(&args)
            .envs(env.iter().copied())
            .env("RUST_BACKTRACE", "1")
            .env("TOPOCOMM_AUTOTUNE", "0")
            .output()
            .expect("timeout runs topocomm");
        let err = String::from_utf8_lossy(&out.stderr);
        let errors = err.lines().filter(|l| l.contains("error")).count();
        let code = out.status.code();
        if code != Some(2) || !err.contains(needle) || errors != 1 || err.contains("panicked") {
            failures.push(format!(
                "topocomm {} (env {env:?}): exit {code:?} after {:.1} s, want 2 and one line with '{needle}'; stderr:\n{err}",
                args.join(" "),
                start.elapsed().as_secs_f64()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
