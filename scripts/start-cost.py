#!/usr/bin/env python3
"""What loading this machine's cached rules costs a job at start: alternating
jobs of `topocomm run` with the cached rules (no rules file), with a static
rules file, and with the built-in rules (TOPOCOMM_AUTOTUNE=0), issue 14's
"a second job starts <= 50 ms slower than with a static rules file".

    scripts/start-cost.py --rounds 30

Each job is `topocomm run -n NP -q [--rules F] -- topocomm bench-worker p2p`
with one 8-byte latency sample of 1 ms: the start of the launcher, of the
ranks and of the transport, one exchange, and the exit. The static rules
file is what `topocomm plan --toml` prints for this machine (the same rules
as the cache holds, so the jobs differ only in where their rules come from).
Before the rounds one untimed job fills the cache if it is empty (that
first-use measurement is printed, not counted). Per round the three
configurations run in a rotated order; the script prints each one's median
wall time with its 95% CI and the per-round differences to the static file
(median and CI, order statistics).

Only the Python standard library is used; exit status 1 when a job fails.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

from order_stats import median, median_ci  # scripts/order_stats.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def topocomm_exe():
    built = os.path.join(ROOT, "target", "release", "topocomm")
    return built if os.path.exists(built) else "topocomm"


def timed_job(exe, np_, rules, env, timeout):
    cmd = [exe, "run", "-n", str(np_), "-q"]
    if rules:
        cmd += ["--rules", rules]
    cmd += ["--", exe, "bench-worker", "p2p", "--tests", "latency", "--sizes", "8",
            "--samples", "1", "--min-time-ms", "1"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"start-cost: job failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return dt * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per job")
    a = ap.parse_args()
    if a.rounds < 1 or a.np < 2:
        sys.exit("start-cost: --rounds must be >= 1 and --np >= 2")
    exe = topocomm_exe()
    env = dict(os.environ)
    env.pop("TOPOCOMM_AUTOTUNE", None)

    t0 = time.perf_counter()
    fill = subprocess.run([exe, "plan", "-q"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=a.timeout)
    if fill.returncode != 0:
        sys.exit(f"start-cost: `topocomm plan` failed: {fill.stderr}")
    print(f"rules resolved (measured first if the cache was empty) in {time.perf_counter() - t0:.2f} s")

    with tempfile.TemporaryDirectory(prefix="tc-start-cost-") as tmp:
        static = os.path.join(tmp, "static.toml")
        toml = subprocess.run([exe, "plan", "-q", "--toml"], env=env, capture_output=True,
                              text=True, timeout=a.timeout)
        if toml.returncode != 0:
            sys.exit(f"start-cost: `topocomm plan --toml` failed: {toml.stderr}")
        with open(static, "w") as f:
            f.write(toml.stdout)
        builtin_env = dict(env, TOPOCOMM_AUTOTUNE="0")
        configs = [("cached", None, env), ("static file", static, env),
                   ("built-in", None, builtin_env)]
        times = {c[0]: [] for c in configs}
        for _ in range(2):  # untimed: page cache, first exec of the binaries
            for _, rules, e in configs:
                timed_job(exe, a.np, rules, e, a.timeout)
        for r in range(a.rounds):
            k = r % len(configs)
            for name, rules, e in configs[k:] + configs[:k]:
                times[name].append(timed_job(exe, a.np, rules, e, a.timeout))

    print(f"{a.rounds} rounds of {a.np}-rank jobs, wall time in ms: median [95% CI]")
    for name, ts in times.items():
        lo, hi = median_ci(ts)
        print(f"  {name:<12} {median(ts):7.1f} [{lo:.1f}, {hi:.1f}]  min {min(ts):.1f}  max {max(ts):.1f}")
    for name in ("cached", "built-in"):
        d = [x - y for x, y in zip(times[name], times["static file"])]
        lo, hi = median_ci(d)
        print(f"  {name} - static file, per round: median {median(d):+.1f} ms [{lo:+.1f}, {hi:+.1f}]")


if __name__ == "__main__":
    main()
