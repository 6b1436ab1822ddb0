//! Multi-process tests of the transport through `topocomm run` (2 to 16
//! processes on whatever cores there are), bad input, faults and cleanup.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_topocomm")
}

fn topocomm(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("TOPOCOMM_TOPOLOGY")
        .output()
        .expect("topocomm runs")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn tmp(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("topocomm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

/// Entries of /dev/shm that look like ours (other programs may come and go).
fn shm_entries() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("topocomm"))
                .collect()
        })
        .unwrap_or_default()
}

fn run_ok(args: &[&str]) -> String {
    let o = topocomm(args);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn stress_2_ranks_up_to_64_mib() {
    let before = shm_entries();
    let out = run_ok(&[
        "run",
        "-n",
        "2",
        "--",
        bin(),
        "selftest",
        "stress",
        "--messages",
        "8",
        "--max-size",
        "67108864",
        "--seed",
        "3",
    ]);
    assert!(out.contains("stress ok: 2 ranks"), "{out}");
    assert_eq!(shm_entries(), before, "nothing left in /dev/shm");
}

/// Every size up to a slot eager (each rank on a CPU of its own): received
/// by matched receives, as unexpected messages, after a probe and with
/// ANY_SOURCE (stress), and by a receiver waiting while the sender writes
/// (pingpong, each message filled anew so stale slot bytes cannot pass);
/// every byte and the order are checked.
/// `topocomm run -n 2 [--rules RULES] -- topocomm selftest SCENARIO
/// --messages M --max-size S [EXTRA...]` with `env`; its output.
fn selftest_2_ranks(
    rules: Option<&Path>,
    scenario: &str,
    messages: &str,
    max_size: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut args = vec!["run", "-n", "2"];
    if let Some(r) = rules {
        args.extend(["--rules", r.to_str().unwrap()]);
    }
    args.extend(["--", bin(), "selftest", scenario, "--messages", messages]);
    args.extend(["--max-size", max_size]);
    args.extend_from_slice(extra);
    topocomm_with(&args, env)
}

/// Whether `topocomm plan` finds single copy (`process_vm_readv`) working.
fn single_copy_here() -> bool {
    run_ok(&["plan"]).contains("single copy (process_vm_readv) available")
}

/// `topocomm ARGS` with `env` set (and no `TOPOCOMM_TOPOLOGY`); its output.
fn topocomm_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin());
    c.args(args).env_remove("TOPOCOMM_TOPOLOGY");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("topocomm runs")
}

#[test]
fn stress_and_pingpong_2_ranks_eager_up_to_a_slot() {
    let rules = tmp(
        "eager-to-a-slot.toml",
        "[default]\neager_max = 131072\nfragment = 131072\n",
    );
    let runs = [
        ("stress", "300", &["--seed", "5"][..], "stress ok: 2 ranks"),
        ("stress", "300", &["--seed", "6"][..], "stress ok: 2 ranks"),
        // A ping-pong: the receiver waits while the sender writes.
        ("pingpong", "3000", &[][..], "pingpong ok: 3000 messages"),
    ];
    for (scenario, messages, extra, ok) in runs {
        let o = selftest_2_ranks(Some(&rules), scenario, messages, "131072", extra, &[]);
        let out = text(&o);
        assert!(o.status.success() && out.contains(ok), "{out}");
    }
}

/// Messages of at most 8 bytes go through the pair's duplex line when the
/// peer has taken the last one sent there, the others (and those) through
/// the ring: a ping-pong of 0-16 bytes (mostly duplex) and a stress plan of
/// 0-16 bytes with windows of sends (duplex and ring mixed within a
/// channel) check every byte and the order, with the duplex lines and
/// without (`TOPOCOMM_DUPLEX=0`), and with the duplex line demoted after
/// each message and not (`TOPOCOMM_DEMOTE`: a hint that must change no
/// byte; on a CPU without CLDEMOTE both runs are the same).
#[test]
fn small_messages_keep_their_order_through_the_duplex_line_and_the_ring() {
    for (duplex, demote) in [("1", "1"), ("1", "0"), ("0", "1")] {
        for (scenario, messages, ok) in [
            ("pingpong", "20000", "pingpong ok: 20000 messages"),
            ("stress", "3000", "stress ok: 2 ranks"),
        ] {
            let env = [("TOPOCOMM_DUPLEX", duplex), ("TOPOCOMM_DEMOTE", demote)];
            let o = selftest_2_ranks(None, scenario, messages, "16", &[], &env);
            let out = text(&o);
            assert!(
                o.status.success() && out.contains(ok),
                "{scenario}, TOPOCOMM_DUPLEX={duplex} TOPOCOMM_DEMOTE={demote}:\n{out}"
            );
        }
    }
    // A bad value: one line from the launcher, naming it.
    for var in [
        "TOPOCOMM_DUPLEX",
        "TOPOCOMM_DEMOTE",
        "TOPOCOMM_HELP",
        "TOPOCOMM_SPIN",
        "TOPOCOMM_COPY",
    ] {
        let o = selftest_2_ranks(None, "pingpong", "10", "8", &[], &[(var, "yes")]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains(&format!("{var}='yes'")), "{e}");
    }
}

#[test]
fn stress_16_ranks_oversubscribed_any_source() {
    let out = run_ok(&[
        "run",
        "-n",
        "16",
        "--",
        bin(),
        "selftest",
        "stress",
        "--messages",
        "20",
        "--max-size",
        "300000",
        "--seed",
        "11",
    ]);
    assert!(out.contains("stress ok: 16 ranks"), "{out}");
}

#[test]
fn stress_with_single_copy_and_small_fragments() {
    // Force every protocol: CMA from 64 KiB (if the probe allows it),
    // pipelining with 16 KiB fragments, non-temporal copies.
    let rules = tmp(
        "cma.toml",
        "[default]\nfragment = 16384\ndepth = 2\neager_max = 4096\ncma_threshold = 65536\ncma_chunk = 65536\ncopy = \"nontemporal\"\nnt_threshold = 8192\n",
    );
    let r = rules.to_str().unwrap();
    for bind in ["none", "0,0,0,0"] {
        let out = run_ok(&stress_argv(["4", bind, r], ["12", "4000000", "5"]));
        assert!(out.contains("stress ok: 4 ranks"), "{out}");
    }
}

/// `topocomm run -n N --bind B --rules R -- topocomm selftest stress
/// --messages M --max-size S --seed K`, from `[N, B, R]` and `[M, S, K]`.
fn stress_argv<'a>(job: [&'a str; 3], stress: [&'a str; 3]) -> Vec<&'a str> {
    let [n, bind, rules] = job;
    let [messages, max, seed] = stress;
    vec![
        "run",
        "-n",
        n,
        "--bind",
        bind,
        "--rules",
        rules,
        "--",
        bin(),
        "selftest",
        "stress",
        "--messages",
        messages,
        "--max-size",
        max,
        "--seed",
        seed,
    ]
}

/// Messages from `stream_out_min` on are copied out of the slots with
/// streaming stores (fixed threshold: `adaptive = false`, no single copy),
/// at every offset and length the stress test draws, and arrive intact.
#[test]
fn stress_with_streaming_copy_out() {
    let rules = tmp(
        "stream.toml",
        "[default]\nfragment = 16384\ndepth = 2\neager_max = 4096\ncma = false\nadaptive = false\nstream_out_min = 65536\n",
    );
    let r = rules.to_str().unwrap();
    let o = Command::new(bin())
        .args(stress_argv(["3", "none", r], ["40", "3000000", "9"]))
        .env("TOPOCOMM_VERBOSE", "1")
        .output()
        .expect("topocomm runs");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("stress ok: 3 ranks"),
        "{}",
        text(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let streamed: u64 = err
        .lines()
        .filter_map(|l| l.split_once("; ")?.1.split(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(
        streamed > 0,
        "no message copied out with streaming stores:\n{err}"
    );
}

/// With the built-in rules the receiver chooses the rendezvous protocol per
/// message (docs/transport.md, "Choosing the rendezvous protocol per
/// message"): in a job with many messages per size class both protocols
/// carry messages (the chooser tries the one the plan did not pick on the
/// third message of a class), every byte arrives intact, and a rules file
/// with `adaptive = false` keeps the static threshold (no tries).
#[test]
fn the_receiver_mixes_both_rendezvous_protocols_and_every_byte_arrives() {
    let cma = single_copy_here();
    let counts = |extra: &[&str], n: &str| -> Vec<[u64; 3]> {
        let mut args = vec!["run", "-n", n];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[
            "--",
            bin(),
            "selftest",
            "stress",
            "--messages",
            "200",
            "--max-size",
            "300000",
            "--seed",
            "7",
        ]);
        let o = Command::new(bin())
            .args(&args)
            .env("TOPOCOMM_VERBOSE", "1")
            .output()
            .expect("topocomm runs");
        assert!(o.status.success(), "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("stress ok"));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let lines: Vec<[u64; 3]> = err
            .lines()
            .filter_map(|l| l.split_once(" rendezvous messages: "))
            .map(|(_, rest)| {
                let nums: Vec<u64> = rest
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|w| w.parse().ok())
                    .collect();
                [nums[0], nums[1], nums[2]]
            })
            .collect();
        assert!(!lines.is_empty(), "no rendezvous line:\n{err}");
        lines
    };
    for (n, extra) in [("2", &[][..]), ("4", &["--bind", "none"][..])] {
        let all = counts(extra, n);
        let sum = |i: usize| all.iter().map(|c| c[i]).sum::<u64>();
        assert!(sum(0) > 0, "{n} ranks: no two-copy message: {all:?}");
        if cma {
            assert!(sum(1) > 0, "{n} ranks: no single-copy message: {all:?}");
            assert!(
                sum(2) > 0,
                "{n} ranks: no try of the other protocol: {all:?}"
            );
        } else {
            assert_eq!(sum(1), 0, "{all:?}");
        }
    }
    let fixed = tmp("fixed.toml", "[default]\nadaptive = false\n");
    let all = counts(&["--rules", fixed.to_str().unwrap()], "2");
    assert!(
        all.iter().all(|c| c[2] == 0),
        "tries under adaptive = false: {all:?}"
    );
}

#[test]
fn ranks_sharing_a_pu_yield_instead_of_spinning() {
    // Ranks 0 and 1 share PU 0, rank 2 has PU 1 to itself (PU 0 only when
    // the machine has one CPU: then all three share it).
    let two = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let bind = if two { "0,0,1" } else { "0,0,0" };
    let o = Command::new(bin())
        .args([
            "run",
            "-n",
            "3",
            "--bind",
            bind,
            "--",
            bin(),
            "selftest",
            "stress",
            "--messages",
            "40",
        ])
        .env("TOPOCOMM_VERBOSE", "1")
        .output()
        .expect("topocomm runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}", text(&o));
    for r in [0, 1] {
        let line = format!("rank {r}: waits by yielding at once (PU 0 is shared");
        assert!(err.contains(&line), "{err}");
    }
    if two {
        assert!(err.contains("rank 2: waits by spinning"), "{err}");
    }
    for r in 0..if two { 3 } else { 2 } {
        let line = format!("rank {r}: copies between buffers aligned differently take");
        assert!(err.contains(&line), "{err}");
    }
}

/// Both copy routes move every byte through the transport (the stress test
/// checks each message; its sizes cross the 2 KiB vector-loop threshold and
/// its buffers sit at several offsets), and a bad `TOPOCOMM_COPY` is a
/// clear error naming the variable.
#[test]
fn both_copy_routes_carry_the_stress_test_and_a_bad_choice_is_refused() {
    let stress = |choice: &str, messages: &str| {
        Command::new(bin())
            .args([
                "run",
                "-n",
                "2",
                "--",
                bin(),
                "selftest",
                "stress",
                "--messages",
                messages,
            ])
            .env("TOPOCOMM_COPY", choice)
            .env("TOPOCOMM_VERBOSE", "1")
            .output()
            .expect("topocomm runs")
    };
    for choice in ["vector", "memcpy"] {
        let o = stress(choice, "60");
        assert!(o.status.success(), "TOPOCOMM_COPY={choice}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        let how = if choice == "vector" && cfg!(target_arch = "x86_64") {
            "take a vector loop"
        } else {
            "take memcpy"
        };
        assert!(err.contains(how), "TOPOCOMM_COPY={choice}: {err}");
    }
    let o = stress("fast", "4");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("TOPOCOMM_COPY='fast': expected auto, memcpy or vector"),
        "{}",
        text(&o)
    );
}

#[test]
fn truncation_is_reported_and_the_channel_survives() {
    let out = run_ok(&["run", "-n", "2", "--", bin(), "selftest", "truncate"]);
    assert_eq!(out.matches("truncation detected").count(), 3, "{out}");
    assert!(out.contains("channel ok after truncation"), "{out}");
}

#[test]
fn dead_rank_fails_the_others_in_bounded_time() {
    let before = shm_entries();
    let t = Instant::now();
    let o = topocomm(&["run", "-n", "3", "--", bin(), "selftest", "die"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(137), "{}", text(&o));
    assert!(err.contains("rank 0") && err.contains("signal 9"), "{err}");
    assert_eq!(err.matches("peer rank 0 is dead").count(), 2, "{err}");
    assert!(t.elapsed() < Duration::from_secs(20));
    assert_eq!(shm_entries(), before);
}

/// Starts `hang` ranks, returns the launcher and the ranks' pids.
fn start_hang(n: usize, extra: &[&str]) -> (std::process::Child, Vec<u32>) {
    let nn = n.to_string();
    let mut args = vec!["run", "-n", &nn];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", bin(), "selftest", "hang"]);
    let mut child = Command::new(bin())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pids = vec![0u32; n];
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = 0;
    while seen < n {
        let l = lines.next().expect("rank announces its pid").unwrap();
        let w: Vec<&str> = l.split_whitespace().collect();
        if let ["rank", r, "pid", p] = w.as_slice() {
            pids[r.parse::<usize>().unwrap()] = p.parse().unwrap();
            seen += 1;
        }
    }
    // Keep draining stderr so the ranks never block on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, pids)
}

fn wait_bounded(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            t.elapsed() < limit,
            "launcher still running after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn gone(pid: u32) -> bool {
    // A reaped process has no /proc entry; a zombie shows state Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')),
    }
}

#[test]
fn kill_9_of_any_rank_stops_the_job_and_leaves_nothing() {
    let before = shm_entries();
    for victim in [0usize, 2] {
        let (mut child, pids) = start_hang(3, &[]);
        Command::new("kill")
            .args(["-9", &pids[victim].to_string()])
            .status()
            .unwrap();
        let st = wait_bounded(&mut child, Duration::from_secs(20));
        assert!(!st.success());
        for p in pids {
            assert!(gone(p), "rank pid {p} survived");
        }
    }
    assert_eq!(
        shm_entries(),
        before,
        "nothing left in /dev/shm after kill -9"
    );
}

#[test]
fn sigint_to_the_launcher_stops_the_ranks() {
    let (mut child, pids) = start_hang(2, &[]);
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let st = wait_bounded(&mut child, Duration::from_secs(20));
    assert_eq!(st.code(), Some(130));
    for p in pids {
        assert!(gone(p), "rank pid {p} survived");
    }
}

/// While its ranks run, the launcher sleeps until one exits (or a signal):
/// on a node with no spare CPU, polling woke it (and preempted the rank on
/// its CPU) about 330 times a second.
#[test]
fn the_launcher_sleeps_while_its_ranks_run() {
    let mut child = Command::new(bin())
        .args(["run", "-n", "1", "--", "sleep", "1.5"])
        .env("TOPOCOMM_AUTOTUNE", "0")
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let switches: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no voluntary_ctxt_switches in {status}"));
    let st = wait_bounded(&mut child, Duration::from_secs(20));
    assert!(st.success());
    // Start-up (spawning, reading the topology) takes a few; a 3 ms poll
    // would have taken about 300 by now.
    assert!(
        switches < 100,
        "{switches} voluntary context switches in 1 s"
    );
}

#[test]
fn stuck_exchange_times_out() {
    let t = Instant::now();
    let o = topocomm(&[
        "run",
        "-n",
        "2",
        "--timeout",
        "1",
        "--",
        bin(),
        "selftest",
        "hang",
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("stuck exchange"),
        "{}",
        text(&o)
    );
    assert!(t.elapsed() < Duration::from_secs(15));
}

#[test]
fn exit_codes_propagate() {
    let sh = |n: &str, script: &str| topocomm(&["run", "-n", n, "--", "sh", "-c", script]);
    let o = sh("2", "test $TOPOCOMM_RANK = 1 && exit 5; exit 0");
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    // Both ranks fail at once: which exit the launcher sees first is a race,
    // so the rule checked is "the code of the rank the launcher names".
    let o = sh("2", "exit $((3 + TOPOCOMM_RANK))");
    let err = String::from_utf8_lossy(&o.stderr);
    let named = if err.contains("rank 0 ") { 3 } else { 4 };
    assert!(
        err.contains("rank 0 ") || err.contains("rank 1 "),
        "{}",
        text(&o)
    );
    assert_eq!(o.status.code(), Some(named), "{}", text(&o));
    let o = sh("3", "test $TOPOCOMM_SIZE = 3");
    assert!(o.status.success(), "{}", text(&o));
    // A program that cannot be started is a failure of the job (1), not a
    // usage error (2): the command line itself was valid.
    let o = topocomm(&["run", "-n", "1", "--", "/nonexistent/prog"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/prog"));
}

fn one_line_error(args: &[&str], needles: &[&str]) {
    let o = topocomm(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    for n in needles {
        assert!(err.contains(n), "'{n}' missing in: {err}");
    }
}

#[test]
fn bad_input_gives_one_line_errors() {
    let bad = tmp("bad.toml", "[l3]\nfragment = \"big\"\n");
    let b = bad.to_str().unwrap();
    one_line_error(&["plan", "--rules", b], &[b, "line 2", "fragment"]);
    one_line_error(
        &["run", "-n", "2", "--rules", b, "--", "true"],
        &[b, "line 2"],
    );
    let syntax = tmp("syntax.toml", "[default]\ndepth = = 3\n");
    one_line_error(&["plan", "--rules", syntax.to_str().unwrap()], &["line 2"]);
    let unknown = tmp("unknown.toml", "[default]\ndepth = 4\n\n[L3]\ndepth = 2\n");
    one_line_error(
        &["plan", "--rules", unknown.to_str().unwrap()],
        &["line 4", "unknown locality class"],
    );
    let value = tmp("value.toml", "[default]\ndepth = 0\n");
    one_line_error(
        &["plan", "--rules", value.to_str().unwrap()],
        &["line 2", "depth"],
    );
    one_line_error(
        &["run", "-n", "2", "--bind", "0,4096", "--", "true"],
        &["--bind", "4096"],
    );
    one_line_error(
        &["run", "-n", "2", "--bind", "every", "--", "true"],
        &["--bind"],
    );
    let map = tmp("map.txt", "0 0\n1 0\n");
    one_line_error(
        &[
            "run",
            "-n",
            "2",
            "--map",
            map.to_str().unwrap(),
            "--",
            "true",
        ],
        &["line 2", "node 1"],
    );
    one_line_error(
        &[
            "run",
            "-n",
            "3",
            "--map",
            map.to_str().unwrap(),
            "--",
            "true",
        ],
        &["map.txt"],
    );
    one_line_error(&["run", "-n", "0", "--", "true"], &["-n"]);
}

#[test]
fn map_file_pins_ranks() {
    let map = tmp("perm.txt", "# rank -> node pu\n0 0\n0 0\n");
    let out = run_ok(&[
        "run",
        "-n",
        "2",
        "--map",
        map.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo pu=$TOPOCOMM_PU; grep Cpus_allowed_list /proc/self/status",
    ]);
    assert_eq!(out.matches("pu=0").count(), 2, "{out}");
    assert_eq!(out.matches("Cpus_allowed_list:\t0\n").count(), 2, "{out}");
}

#[test]
fn plan_json_lists_classes_and_mechanism() {
    let out = run_ok(&["plan", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let classes = v["classes"].as_array().unwrap();
    assert!(classes.iter().any(|c| c["class"] == "default"));
    assert!(v["cma"]["available"].is_boolean());
    for c in classes {
        assert!(c["params"]["fragment"].as_u64().unwrap() >= 4096);
        assert!(c["mechanism"].as_str().unwrap().contains("two-copy"));
    }
    // --toml output is a valid rules file.
    let toml = run_ok(&["plan", "--toml"]);
    let f = tmp("roundtrip.toml", &toml);
    run_ok(&["plan", "--rules", f.to_str().unwrap()]);
}

/// `plan --ranks N` shows the job's plans: a 16-core L3 keeps the rules'
/// 4 MiB rings for 8 ranks and halves them for 16 (120 MiB of rings per
/// rank would exceed the 64 MiB a rank maps in at start-up).
#[test]
fn plan_ranks_shows_the_rings_a_job_gets() {
    let topo = "synthetic:pack:1 l3:1(size=300MB) l2:16(size=2MB) core:1 pu:1";
    let l3 = |n: &str| {
        let out = run_ok(&["plan", "--json", "--topology", topo, "--ranks", n]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["ranks"].as_u64().unwrap().to_string(), n);
        assert!(
            v["job"].as_str().unwrap().contains("bound one per core"),
            "{v}"
        );
        let c = v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["class"] == "l3")
            .cloned()
            .unwrap();
        let p = &c["params"];
        (
            p["depth"].as_u64().unwrap(),
            p["fragment"].as_u64().unwrap(),
        )
    };
    let (d8, f8) = l3("8");
    let (d16, f16) = l3("16");
    assert_eq!(d8 * f8, 4 << 20, "8 ranks: the rules' ring");
    assert!(15 * 2 * d16 * f16 <= 64 << 20, "16 ranks: {d16} x {f16}");
    assert!(d16 < d8);
    let text = run_ok(&["plan", "--topology", topo, "--ranks", "16"]);
    assert!(
        text.contains("job of 16 ranks, bound one per core: slot rings made smaller"),
        "{text}"
    );
    assert!(!text.contains("more ranks than CPUs"), "{text}");
    // Helped single copy from half the 2 MB (2 000 000 bytes) L2, where
    // single copy works; never on a crowded node.
    let cma = single_copy_here();
    assert_eq!(text.contains("from 976.6KB"), cma, "{text}");
    // More ranks than cores: eager up to a slot, less in an exchange (the
    // built-in rules of this topology allow single copy from 32 KiB).
    let text = run_ok(&["plan", "--topology", topo, "--ranks", "20"]);
    assert!(
        text.contains("unbound (more ranks than cores)")
            && text.contains("more ranks than CPUs: eager up to a slot, up to 32KB to a peer the rank receives from"),
        "{text}"
    );
    assert_eq!(text.contains("never (crowded)"), cma, "{text}");
    let o = topocomm(&["plan", "--ranks", "0"]);
    assert!(!o.status.success());
}

/// Two ranks exchanging windows of 1 MiB messages (bibw) receive them the
/// same way: the lower rank chooses for the pair and the higher one does
/// what each request asks (`Comm::pair_choice`). Chosen apart, the two
/// settled on opposite protocols, slower than either on both sides.
#[test]
fn both_ranks_of_an_exchange_receive_the_same_way() {
    if !single_copy_here() {
        eprintln!(
            "notice: single copy unavailable here: one protocol, nothing to agree on; skipped"
        );
        return;
    }
    let (got, err) = verbose_rendezvous_1mib("bibw");
    let (Some(&(two0, one0, asked0, ..)), Some(&(two1, one1, asked1, ..))) =
        (got.get(&0), got.get(&1))
    else {
        panic!("a rendezvous line per rank expected:\n{err}");
    };
    assert_eq!(asked0, 0, "the lower rank chooses for itself:\n{err}");
    let n1 = two1 + one1;
    assert!(
        asked1 * 2 >= n1,
        "rank 1 received {asked1} of {n1} messages as asked:\n{err}"
    );
    let single = |two: u64, one: u64| one as f64 / (two + one).max(1) as f64;
    let (s0, s1) = (single(two0, one0), single(two1, one1));
    assert!(
        (s0 - s1).abs() <= 0.25,
        "the two ranks received differently: single copy {s0:.2} against {s1:.2}:\n{err}"
    );
}

/// Per rank of a `TOPOCOMM_VERBOSE` run's rendezvous line: (two-copy,
/// single copy, received the way the sender asked, timed two-copy streams
/// weighed by both sides' copying, answers within the eager limit).
type RendezvousLines = std::collections::BTreeMap<u32, (u64, u64, u64, u64, u64)>;

/// The [`RendezvousLines`] of a `TOPOCOMM_VERBOSE` run's stderr.
fn rendezvous_lines(err: &str) -> RendezvousLines {
    let mut got = std::collections::BTreeMap::new();
    for l in err.lines() {
        let Some((head, rest)) = l.split_once(" rendezvous messages: ") else {
            continue;
        };
        let rank: u32 = head
            .split("rank ")
            .nth(1)
            .and_then(|r| r.split(':').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("no rank in {l}"));
        let nums: Vec<u64> = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect();
        let part = |what: &str| {
            rest.split("; ")
                .find(|p| p.contains(what))
                .and_then(|p| p.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0u64)
        };
        got.insert(
            rank,
            (
                nums[0],
                nums[1],
                part("the way the sender asked"),
                part("weighed by both sides' copying"),
                part("answers within the eager limit"),
            ),
        );
    }
    got
}

/// Runs the 2-rank p2p `test` at 1 MiB under `TOPOCOMM_VERBOSE=1`: each
/// rank's rendezvous line ([`rendezvous_lines`]) and the whole stderr.
fn verbose_rendezvous_1mib(test: &str) -> (RendezvousLines, String) {
    let o = bench_worker_with(
        &[
            "--tests",
            test,
            "--sizes",
            "1048576",
            "--samples",
            "3",
            "--min-time-ms",
            "20",
        ],
        &[("TOPOCOMM_VERBOSE", "1")],
    );
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (rendezvous_lines(&err), err)
}

/// A ping-pong sends to the peer between every two messages it receives
/// from it, but its two directions never overlap: its two-copy streams are
/// timed by their elapsed time, not weighed by both sides' copying as an
/// exchange's are (which made the pipelined two-copy look twice as dear
/// and sent 16 MiB latency by the slower single copy). A bidirectional
/// window is an exchange: the lower rank, which chooses for the pair,
/// weighs its timed streams by the copying.
#[test]
fn a_ping_pong_is_timed_one_way_and_an_exchange_by_its_copying() {
    if !single_copy_here() {
        eprintln!("notice: single copy unavailable here: no protocol choice to time; skipped");
        return;
    }
    let run = |test: &str| {
        let (got, err) = verbose_rendezvous_1mib(test);
        assert_eq!(got.len(), 2, "a rendezvous line per rank expected:\n{err}");
        (got, err)
    };
    let (pp, err) = run("latency");
    // Each rank tries both protocols: some of its messages came by two-copy.
    assert!(
        pp.values().any(|&(two, ..)| two > 0),
        "no two-copy stream in the ping-pong:\n{err}"
    );
    for (rank, &(_, _, _, weighed, _)) in &pp {
        assert_eq!(
            weighed, 0,
            "rank {rank} weighed ping-pong streams as an exchange:\n{err}"
        );
    }
    let (ex, err) = run("bibw");
    assert!(
        ex[&0].3 > 0,
        "the lower rank of a bidirectional window weighed no stream by its copying:\n{err}"
    );
}

/// With `lone_rendezvous_min`, a ping-pong's answers within the eager limit
/// go by rendezvous and are read by single copy as asked (not below it), and every
/// byte of a ping-pong and of a random plan of 0-16 KiB arrives (the
/// selftests check them).
#[test]
fn answers_go_by_single_copy_and_every_byte_arrives() {
    if !single_copy_here() {
        eprintln!("notice: single copy unavailable here: answers stay eager; skipped");
        return;
    }
    let rules = tmp(
        "answers.toml",
        "[default]\neager_max = 16384\nfragment = 131072\ncma = true\nlone_rendezvous_min = 8192\n",
    );
    // (rendezvous messages, answers) summed over both ranks.
    let counts = |test: &str, size: &str| -> (u64, u64, String) {
        let err = verbose_bench_worker("0,1", &rules, test, size, &["--window", "16"]);
        let got = rendezvous_lines(&err);
        let total =
            |pick: fn(&(u64, u64, u64, u64, u64)) -> u64| -> u64 { got.values().map(pick).sum() };
        (total(|v| v.0 + v.1), total(|v| v.4), err)
    };
    let (rdv, answers, err) = counts("latency", "16384");
    // The iteration count comes from a timed calibration, so a preempted
    // batch can leave few: two calibration batches and two samples of one
    // iteration each are the least.
    assert!(
        answers >= 4,
        "a 16 KiB ping-pong sent {answers} answers:\n{err}"
    );
    assert_eq!(
        rdv, answers,
        "every rendezvous of the ping-pong is an answer:\n{err}"
    );
    let (_, answers, err) = counts("latency", "4096");
    assert_eq!(answers, 0, "4 KiB is below lone_rendezvous_min:\n{err}");
    let runs = [
        ("pingpong", "2000", &[][..], "pingpong ok: 2000 messages"),
        ("stress", "300", &["--seed", "7"][..], "stress ok: 2 ranks"),
    ];
    for (scenario, messages, extra, ok) in runs {
        let o = selftest_2_ranks(Some(&rules), scenario, messages, "16384", extra, &[]);
        let out = text(&o);
        assert!(o.status.success() && out.contains(ok), "{out}");
    }
}

/// On a crowded node (here two ranks bound to one PU) a message up to a
/// slot goes eagerly, except to a peer the sender is receiving from (an
/// exchange), which gets the rendezvous protocols above the exchange limit
/// (`Plan::exchange_eager_max`, 32 KiB with these rules): 64 KiB
/// one-way bw sends no rendezvous message, 64 KiB bibw does.
#[test]
fn a_crowded_exchange_leaves_eager_above_its_limit_and_one_way_stays_eager() {
    if !single_copy_here() {
        eprintln!("notice: single copy unavailable here: no exchange limit; skipped");
        return;
    }
    let rules = tmp(
        "crowded.toml",
        "[default]\neager_max = 8192\nfragment = 131072\ncma = true\ncma_threshold = 32768\n",
    );
    let rendezvous = |test: &str| -> u64 {
        let err = verbose_bench_worker("0,0", &rules, test, "65536", &[]);
        assert!(err.contains("eager up to 131072 B"), "not raised:\n{err}");
        err.lines()
            .filter_map(|l| {
                l.split_once(" received ")?
                    .1
                    .split(' ')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    };
    assert_eq!(rendezvous("bw"), 0, "one-way 64 KiB went by rendezvous");
    assert!(rendezvous("bibw") > 0, "the exchange stayed eager");
}

/// Two ranks bound to `bind` with `rules` run `topocomm bench-worker p2p`
/// of `test` at `size` (2 samples of 5 ms, `extra` options) under
/// `TOPOCOMM_VERBOSE=1`; their stderr, the job having succeeded.
fn verbose_bench_worker(
    bind: &str,
    rules: &Path,
    test: &str,
    size: &str,
    extra: &[&str],
) -> String {
    let mut args = vec![
        "run",
        "-n",
        "2",
        "--bind",
        bind,
        "--rules",
        rules.to_str().unwrap(),
    ];
    args.extend([
        "--",
        bin(),
        "bench-worker",
        "p2p",
        "--tests",
        test,
        "--sizes",
        size,
    ]);
    args.extend(["--samples", "2", "--min-time-ms", "5"]);
    args.extend_from_slice(extra);
    let o = topocomm_with(&args, &[("TOPOCOMM_VERBOSE", "1")]);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `topocomm bench-worker p2p ARGS` as two ranks under `topocomm run`.
fn bench_worker(args: &[&str]) -> Output {
    bench_worker_with(args, &[])
}

/// [`bench_worker`] with environment variables set.
fn bench_worker_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec!["run", "-n", "2", "--", bin(), "bench-worker", "p2p"];
    all.extend_from_slice(args);
    topocomm_with(&all, env)
}

#[test]
fn bench_worker_prints_the_agreed_json_lines() {
    let o = bench_worker(&[
        "--tests",
        "latency,bw,bibw,msgrate",
        "--sizes",
        "8,70000",
        "--cache",
        "hot,cold",
        "--llc",
        "1048576",
        "--samples",
        "2",
        "--min-time-ms",
        "1",
        "--window",
        "4",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    let meta = err
        .lines()
        .find(|l| l.starts_with(r#"{"bench_meta""#))
        .expect("pinning meta line on stderr");
    let v: serde_json::Value = serde_json::from_str(meta).unwrap();
    assert_eq!(
        v["bench_meta"]["ranks"].as_array().unwrap().len(),
        2,
        "{meta}"
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 16, "{out}");
    assert!(
        lines[0].starts_with(
            r#"{"impl":"topocomm","test":"latency","size":8,"cache":"cold","unit":"us","samples":["#
        ) || lines[0].starts_with(
            r#"{"impl":"topocomm","test":"latency","size":8,"cache":"hot","unit":"us","samples":["#
        ),
        "{}",
        lines[0]
    );
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let s = v["samples"].as_array().unwrap();
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|x| x.as_f64().unwrap() > 0.0), "{l}");
        assert!(v.get("probe_us").is_none(), "no probe asked for: {l}");
    }
}

#[test]
fn bench_worker_probe_tags_every_sample_with_its_machine_state() {
    let o = bench_worker(&[
        "--tests",
        "latency,msgrate",
        "--sizes",
        "8,4096",
        "--samples",
        "3",
        "--min-time-ms",
        "1",
        "--probe",
        "20",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines = topocomm_measure::SampleLine::parse_all(&out, "worker").unwrap();
    assert_eq!(lines.len(), 4, "{out}");
    for l in &lines {
        let p = l.probe_us.as_ref().expect("probe_us on every line");
        assert_eq!(p.len(), l.samples.len(), "one probe per sample: {out}");
        // One-way 8-byte times: positive and finite; no tighter bound: a
        // scheduler tick on a loaded 2-core machine (4 ms, seen in CI) can
        // land in any probe.
        assert!(p.iter().all(|x| x.is_finite() && *x > 0.0), "{p:?}");
    }
}

/// The libraries' benchmark jobs run `topocomm-worker`, not the CLI: a
/// library backend given only the worker's path measures; the worker's own
/// launcher names a bad argument and refuses to run without `--bind`.
#[test]
fn the_worker_binary_serves_the_libraries_without_the_cli() {
    let worker = Path::new(env!("CARGO_BIN_EXE_topocomm-worker"));
    if topocomm_measure::pin::allowed_pus().map_or(0, |p| p.len()) < 2 {
        eprintln!("notice: fewer than two PUs; skipping the worker test");
        return;
    }
    let b = topocomm_measure::matrix::TransportBackend::probe(worker).unwrap();
    let lines = b.measure(0, 1, 4096, 2, Duration::from_secs(60)).unwrap();
    let tests: BTreeSet<&str> = lines.iter().map(|l| l.test.as_str()).collect();
    assert_eq!(
        tests,
        BTreeSet::from(["bw", "latency", "msgrate"]),
        "{lines:?}"
    );
    assert!(lines
        .iter()
        .all(|l| l.samples.len() == 2 && l.samples.iter().all(|x| *x > 0.0)));
    // The same path the tuner uses: a rules file, the worker's launcher.
    let rules = tmp(
        "worker-rules.toml",
        &String::from_utf8_lossy(&topocomm(&["plan", "--toml"]).stdout),
    );
    let o = Command::new(worker)
        .args(["--bind", "0,1", "--rules", rules.to_str().unwrap(), "--"])
        .args([
            "--tests",
            "latency",
            "--sizes",
            "8",
            "--samples",
            "2",
            "--min-time-ms",
            "1",
        ])
        .env("TOPOCOMM_AUTOTUNE", "0")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        topocomm_measure::SampleLine::parse_all(&out, "worker")
            .unwrap()
            .len(),
        1,
        "{out}"
    );
    for (args, says) in [
        (&["--bind", "0,1", "--", "--probe", "-1"][..], "--probe"),
        (&["--bind", "0,1", "--", "--sizes", "x"][..], "--sizes"),
        (&["--bind", "0,1", "--frob"][..], "--frob"),
        (&["--", "--tests", "latency"][..], "--bind is required"),
    ] {
        let o = Command::new(worker).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{args:?}: {err}");
    }
}

/// Wait bounds outside 1 ms .. 10^6 s are refused by the launcher with
/// the range (no rank started: `1e20` used to panic in every rank's
/// Duration conversion, `1e-9` to fail as a dead peer), and
/// `$TOPOCOMM_RULES` is honoured by `run` and `plan`, never ignored.
#[test]
fn out_of_range_wait_bounds_and_the_rules_variable() {
    let stress = [bin(), "selftest", "stress", "--messages", "5"];
    for t in ["1e20", "1e-9", "-1", "inf", "x"] {
        let mut args = vec!["run", "-n", "2", "--timeout", t, "--"];
        args.extend(stress);
        let o = topocomm(&args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{t}: {}", text(&o));
        assert_eq!(e.lines().count(), 1, "{t}: {e}");
        assert!(
            e.contains(&format!("--timeout='{t}'")) && e.contains("0.001 to 1000000"),
            "{e}"
        );
        let mut args = vec!["run", "-n", "2", "--"];
        args.extend(stress);
        let o = Command::new(bin())
            .args(&args)
            .env("TOPOCOMM_TIMEOUT", t)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{t}: {}", text(&o));
        assert!(e.contains(&format!("TOPOCOMM_TIMEOUT='{t}'")), "{e}");
    }
    let o = topocomm(&[
        "run",
        "-n",
        "2",
        "--timeout",
        "0.5",
        "--",
        stress[0],
        stress[1],
        stress[2],
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // A missing rules file named by the variable is an error of both.
    let missing = std::env::temp_dir().join("topocomm-no-such-rules.toml");
    for args in [&["run", "-n", "1", "--", "true"][..], &["plan"][..]] {
        let o = Command::new(bin())
            .args(args)
            .env("TOPOCOMM_RULES", &missing)
            .env("TOPOCOMM_AUTOTUNE", "0")
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && e.contains("topocomm-no-such-rules.toml"),
            "{args:?}: {e}"
        );
    }
    // Set but empty is unset, as for topocomm_mpi_init.
    for args in [&["run", "-n", "1", "--", "true"][..], &["plan"][..]] {
        let o = Command::new(bin())
            .args(args)
            .env("TOPOCOMM_RULES", "")
            .env("TOPOCOMM_AUTOTUNE", "0")
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    }
    // An existing one is what `plan` shows.
    let toml = String::from_utf8_lossy(&topocomm(&["plan", "--toml"]).stdout).into_owned();
    let f = tmp("env-rules.toml", &toml);
    let o = Command::new(bin())
        .arg("plan")
        .env("TOPOCOMM_RULES", &f)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains(f.to_str().unwrap()),
        "{out}"
    );
}

/// `TOPOCOMM_SINGLE_COPY=0`: no message goes by single copy (and the
/// ranks allow no process to read their memory); a bad value is one line
/// from the launcher.
#[test]
fn single_copy_can_be_switched_off() {
    let run = |v: &str| {
        Command::new(bin())
            .args([
                "run",
                "-n",
                "2",
                "--",
                bin(),
                "selftest",
                "stress",
                "--messages",
                "30",
            ])
            .env("TOPOCOMM_SINGLE_COPY", v)
            .env("TOPOCOMM_VERBOSE", "1")
            .env("TOPOCOMM_AUTOTUNE", "0")
            .output()
            .unwrap()
    };
    let o = run("0");
    assert!(o.status.success(), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = e
        .lines()
        .filter(|l| l.contains("rendezvous messages"))
        .collect();
    assert!(!lines.is_empty(), "{e}");
    assert!(lines.iter().all(|l| l.contains(" 0 single copy")), "{e}");
    let o = run("yes");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("TOPOCOMM_SINGLE_COPY='yes'"), "{e}");
}

fn lib_dir() -> PathBuf {
    Path::new(bin()).parent().unwrap().to_path_buf()
}

#[test]
fn c_example_builds_warning_free_and_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lib = lib_dir();
    if !lib.join("libtopocomm.so").exists() {
        // `cargo test --workspace` builds it; a lone `-p topocomm` run may not.
        let st = Command::new(env!("CARGO"))
            .args(["build", "-p", "topocomm-capi"])
            .current_dir(&root)
            .status()
            .unwrap();
        assert!(st.success());
    }
    // examples/c/NAME.c built warning-free against include/topocomm.h.
    let build = |name: &str| {
        let exe = std::env::temp_dir().join(format!("tc-{name}-{}", std::process::id()));
        let o = Command::new("cc")
            .args(["-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&exe)
            .arg(root.join(format!("examples/c/{name}.c")))
            .arg(format!("-I{}", root.join("include").display()))
            .arg(format!("-L{}", lib.display()))
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-ltopocomm")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        exe
    };
    let exe = build("pingpong");
    let out = run_ok(&["run", "-n", "2", "--", exe.to_str().unwrap()]);
    assert!(out.contains("pingpong ok: 2 ranks"), "{out}");
    assert!(out.contains("truncation:"), "{out}");
    let _ = std::fs::remove_file(exe);
    // The collectives, with more ranks than the dev machine's 2 CPUs.
    let exe = build("collectives");
    for n in ["1", "3", "4"] {
        let out = run_ok(&["run", "-n", n, "--", exe.to_str().unwrap()]);
        assert!(out.contains(&format!("collectives ok: {n} ranks")), "{out}");
    }
    let _ = std::fs::remove_file(exe);
}

/// On a node with more ranks than CPUs, unbound ranks start spread: rank
/// `r` on the `r`-th CPU of its affinity mask (modulo its size), the mask
/// itself unchanged (the binding asked for, none, is kept). The scheduler
/// may move a rank between the start-up nudge and its report (more so
/// while the other tests of this binary load the same CPUs: in one CI run
/// it moved a rank in each of three launches), so one launch of eight must
/// show the exact placement; with `TOPOCOMM_SPREAD=0`
/// nothing moves ranks, and a bad value is a one-line error.
#[test]
fn crowded_unbound_ranks_start_spread_over_the_cpus() {
    let allowed = topocomm_transport::launch::allowed_cpus();
    if allowed.len() < 2 || allowed.len() > 16 {
        eprintln!("skipped: {} CPUs (the check wants 2 to 16)", allowed.len());
        return;
    }
    let n = 2 * allowed.len();
    let mask: Vec<String> = allowed.iter().map(u32::to_string).collect();
    let mask = mask.join(",");
    let n_arg = n.to_string();
    let args = [
        "run",
        "-n",
        &n_arg,
        "--bind",
        "none",
        "--",
        bin(),
        "selftest",
        "where",
    ];
    let launch = |env: &[(&str, &str)]| topocomm_with(&args, env);
    let mut exact = false;
    const LAUNCHES: usize = 8;
    for _ in 0..LAUNCHES {
        let o = launch(&[]);
        let out = text(&o);
        assert!(o.status.success(), "{out}");
        let mut seen = 0;
        let mut here = true;
        for l in out.lines().filter(|l| l.starts_with("rank ")) {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 6, "{l}");
            let (rank, cpu): (usize, String) = (f[1].parse().unwrap(), f[3].to_string());
            assert_eq!(f[5], mask, "rank {rank}: the affinity mask changed:\n{out}");
            here &= cpu == allowed[rank % allowed.len()].to_string();
            seen += 1;
        }
        assert_eq!(seen, n, "{out}");
        if here {
            exact = true;
            break;
        }
    }
    assert!(
        exact,
        "no launch of {LAUNCHES} started rank r on CPU r mod {}",
        allowed.len()
    );
    let o = launch(&[("TOPOCOMM_SPREAD", "0")]);
    assert!(o.status.success(), "{}", text(&o));
    let o = launch(&[("TOPOCOMM_SPREAD", "yes")]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("TOPOCOMM_SPREAD='yes'"), "{e}");
}

/// Helped single copy between processes (docs/transport.md, "Helped single
/// copy"): in a ping-pong of 200 messages up to 2 MiB read by single copy, the
/// senders, blocked in their sends, write pieces of them into the
/// receivers' buffers, and every byte arrives; `TOPOCOMM_HELP=0` turns it
/// off.
#[test]
fn senders_help_read_their_messages_and_every_byte_arrives() {
    if !single_copy_here() {
        eprintln!("notice: single copy unavailable here: nothing to help with; skipped");
        return;
    }
    let rules = tmp(
        "help.toml",
        "[default]\ncma = true\ncma_threshold = 32768\nadaptive = false\nhelp_min = 65536\n",
    );
    for help in ["1", "0"] {
        let env = [("TOPOCOMM_VERBOSE", "1"), ("TOPOCOMM_HELP", help)];
        let o = selftest_2_ranks(Some(&rules), "pingpong", "200", "2097152", &[], &env);
        let out = text(&o);
        assert!(
            o.status.success() && out.contains("pingpong ok: 200 messages"),
            "TOPOCOMM_HELP={help}:\n{out}"
        );
        let pieces: u64 = String::from_utf8_lossy(&o.stderr)
            .lines()
            .filter_map(|l| {
                l.split_once(": wrote ")?
                    .1
                    .split_once(" ")?
                    .0
                    .parse::<u64>()
                    .ok()
            })
            .sum();
        if help == "1" {
            assert!(pieces > 0, "no sender wrote a piece:\n{out}");
        } else {
            assert_eq!(pieces, 0, "TOPOCOMM_HELP=0:\n{out}");
        }
    }
}
