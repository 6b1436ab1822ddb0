#!/usr/bin/env python3
"""Runs the same point-to-point benchmark as N independent jobs and reports
the job-to-job spread (docs/benchmarks/p2p-jobs.md).

A process-level state can make a whole job fast or slow, so samples of one
job say nothing about the next: this script starts N fresh jobs of
`topocomm bench-worker p2p` under `topocomm run` (and, interleaved, the same
test under Open MPI / MPICH with tc_mpibench when asked), takes each job's
median per (test, size), and prints per-job medians, the median job with a
95% confidence interval (order statistics), the slowest/median ratio and the
share of slow jobs (below --slow x the median job).

Before every job it also runs scripts/line-probe.c (compiled into target/ on
first use) on the same pair: the cache-line round trip and the cross-core
copy rate of the machine at that moment, printed on the job's line.

    scripts/p2p-jobs.py --jobs 50
    scripts/p2p-jobs.py --jobs 20 --vs openmpi,mpich
    scripts/p2p-jobs.py --jobs 20 --hog 1          # a CPU hog bound to PU 1
    scripts/p2p-jobs.py --jobs 20 --concurrent 2   # two jobs at once: 4 ranks on 2 PUs
    scripts/p2p-jobs.py --jobs 20 --rules two-copy.toml   # other transport rules

Every sample is followed by a probe (--probe N: N 8-byte ping-pongs through
the implementation being measured, their one-way time printed next to the
sample), and the tables are given for all samples, and for the samples that
ran in the near and in the distant machine state: on a VM the host moves the
vCPUs between near and distant physical cores every second or so, also in
the middle of a job, so a probe taken before a job cannot tell.

Only the Python standard library is used. Exit status 0 when every job ran;
the verdict is printed, not turned into an exit code (timing is not a test).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import line_probe  # scripts/line_probe.py
from order_stats import median, median_ci  # scripts/order_stats.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNITS = {"latency": "us", "bw": "GB/s", "bibw": "GB/s", "msgrate": "Mmsg/s"}


def spread(vals, lower_better, slow_at):
    """Median job, its CI, the slowest job and the share of slow jobs."""
    med = median(vals)
    lo, hi = median_ci(vals)
    worst = max(vals) if lower_better else min(vals)
    best = min(vals) if lower_better else max(vals)
    speed = (lambda v: med / v) if lower_better else (lambda v: v / med)
    return {"median": med, "ci95": [lo, hi], "slowest": worst, "fastest": best,
            "slowest_over_median": speed(worst), "slow_jobs": sum(1 for v in vals if speed(v) < slow_at),
            "jobs": vals}


def parse_points(text):
    """(test, size) -> (samples, probe_us or None) of one job."""
    pts = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith('{"impl"'):
            continue
        d = json.loads(line)
        pts[(d["test"], d["size"])] = (d["samples"], d.get("probe_us"))
    return pts


def percentile(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def job_medians(job, keep):
    """Per (test, size): the median of the samples whose state passes `keep`
    (probe value -> bool); points with no such sample are left out."""
    out = {}
    for key, (samples, probes) in job.items():
        sel = [v for i, v in enumerate(samples) if keep(probes[i] if probes else None)]
        if sel:
            out[key] = median(sel)
    return out


def command(impl, a):
    worker = ["--tests", a.tests, "--sizes", a.sizes, "--samples", str(a.samples),
              "--window", str(a.window), "--min-time-ms", str(a.min_time_ms), "--probe", str(a.probe)]
    pq = a.pair
    if impl == "topocomm":
        exe = a.exe or os.path.join(ROOT, "target", "release", "topocomm")
        rules = ["--rules", a.rules] if a.rules else []
        return [exe, "run", "-n", "2", "--bind", pq] + rules + ["--", exe, "bench-worker", "p2p"] + worker
    mpirun = {"openmpi": "mpirun.openmpi", "mpich": "mpirun.mpich"}[impl]
    exe = os.path.join(ROOT, "mpi", "build", impl, "tc_mpibench")
    # The same pinning as `topocomm bench p2p` (measure::backends::bind_args).
    if impl == "openmpi":
        launch = [mpirun, "-np", "2", "--oversubscribe", "--cpu-list", pq, "--bind-to", "cpu-list:ordered"]
    else:
        launch = [mpirun, "-np", "2", "-bind-to", f"user:{pq}"]
    return launch + [exe] + worker


def probe(a):
    p, q = a.pair.split(",")
    return line_probe.probe("p2p-jobs", p, q)


def run_job(impl, a):
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    cmd = command(impl, a)
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(a.concurrent)]
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            sys.exit(f"p2p-jobs: {impl} job ran past --timeout {a.timeout} s: {' '.join(cmd)}")
        if p.returncode != 0:
            sys.exit(f"p2p-jobs: {impl} job failed (exit {p.returncode}): {' '.join(cmd)}\n{err.strip()}")
        pts = parse_points(out)
        if not pts:
            sys.exit(f"p2p-jobs: {impl} job printed no result: {' '.join(cmd)}\n{err.strip()}")
        results.append(pts)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=20, help="independent jobs per implementation (default 20)")
    ap.add_argument("--tests", default="bw,msgrate", help="worker tests (default bw,msgrate)")
    ap.add_argument("--sizes", default="8,65536,1048576", help="sizes in bytes (default 8,65536,1048576)")
    ap.add_argument("--samples", type=int, default=5, help="samples per point in a job (default 5)")
    ap.add_argument("--window", type=int, default=64, help="messages in flight (default 64)")
    ap.add_argument("--min-time-ms", type=float, default=20.0, help="batch length (default 20 ms)")
    ap.add_argument("--pair", default="0,1", help="PUs of the two ranks (default 0,1)")
    ap.add_argument("--vs", default="", help="also run openmpi and/or mpich, interleaved (comma list)")
    ap.add_argument("--hog", type=int, default=None, metavar="PU", help="run a busy-loop process bound to this PU meanwhile")
    ap.add_argument("--concurrent", type=int, default=1, help="jobs run at the same time (2 = 4 ranks on the pair)")
    ap.add_argument("--slow", type=float, default=0.85, help="a job below this x the median job is slow (default 0.85)")
    ap.add_argument("--probe", type=int, default=100,
                    help="8-byte ping-pongs after every sample, whose time tags the sample's machine state (default 100; 0: none)")
    ap.add_argument("--far", type=float, default=2.0,
                    help="a sample whose probe exceeds this x the implementation's 10th-percentile probe ran in the "
                         "distant state (default 2)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds before a job is killed (default 600)")
    ap.add_argument("--json", help="write every job's medians here")
    ap.add_argument("--exe", help="topocomm binary (default target/release/topocomm)")
    ap.add_argument("--rules", help="transport rules file for the topocomm jobs (topocomm run --rules)")
    a = ap.parse_args()
    if a.jobs < 1 or a.concurrent < 1:
        sys.exit("p2p-jobs: --jobs and --concurrent must be >= 1")
    impls = ["topocomm"] + [x for x in a.vs.split(",") if x]
    for x in impls[1:]:
        if x not in ("openmpi", "mpich"):
            sys.exit(f"p2p-jobs: --vs {x}: expected openmpi or mpich")

    hog = None
    if a.hog is not None:
        hog = subprocess.Popen(["taskset", "-c", str(a.hog), "sh", "-c", "while :; do :; done"])
    jobs = {i: [] for i in impls}
    probes = {i: [] for i in impls}
    try:
        for j in range(a.jobs):
            for impl in impls:
                rtt, cgbs = probe(a)
                t0 = time.time()
                for pts in run_job(impl, a):
                    jobs[impl].append(pts)
                    probes[impl].append(rtt)
                line = " ".join(f"{t}:{s}={v:.4g}" for (t, s), v in sorted(job_medians(jobs[impl][-1],
                                                                                      lambda p: True).items()))
                print(f"job {j + 1:3d} {impl:9s} {time.time() - t0:5.1f}s  probe {rtt:5.0f} ns {cgbs:5.1f} GB/s  {line}",
                      flush=True)
    finally:
        if hog:
            hog.kill()
            hog.wait()

    print()
    print(f"pre-job line probe: median round trip {median([r for i in impls for r in probes[i]]):.0f} ns")
    # The machine state of every sample, from the probe that followed it:
    # near while the probe stays within --far x the implementation's own
    # 10th percentile (its near-state probe), distant above.
    cut = {}
    for impl in impls:
        pv = [p for job in jobs[impl] for (_, probes_) in job.values() for p in (probes_ or [])]
        if pv:
            cut[impl] = a.far * percentile(pv, 0.10)
            nfar = sum(1 for p in pv if p > cut[impl])
            print(f"{impl}: probe 10th percentile {percentile(pv, 0.10):.3f} us, median {median(pv):.3f} us; "
                  f"{nfar}/{len(pv)} samples ran in the distant state (probe > {cut[impl]:.3f} us)")
    groups = [("all", lambda impl: (lambda p: True))]
    if cut:
        groups += [("near", lambda impl: (lambda p: p is None or p <= cut.get(impl, float("inf")))),
                   ("far", lambda impl: (lambda p: p is not None and p > cut.get(impl, float("inf"))))]
    print()
    hdr = f"{'impl':9s} {'test':8s} {'size':>8s} {'median job':>11s} {'95% CI':>19s} {'slowest':>9s} {'fastest':>9s} {'slow/med':>8s} {'slow jobs':>9s}"
    print("state  " + hdr)
    summary = {}
    for gname, keep in groups:
        for impl in impls:
            sel = [job_medians(job, keep(impl)) for job in jobs[impl]]
            for key in sorted({k for p in sel for k in p}):
                vals = [p[key] for p in sel if key in p]
                row = spread(vals, key[0] == "latency", a.slow)
                row["unit"] = UNITS.get(key[0], "")
                print(f"{gname:6s} {impl:9s} {key[0]:8s} {key[1]:8d} {row['median']:9.4g} {row['unit']:<6s}"
                      f"[{row['ci95'][0]:.4g}, {row['ci95'][1]:.4g}]".ljust(65)
                      + f" {row['slowest']:9.4g} {row['fastest']:9.4g} {row['slowest_over_median']:8.2f}"
                      f" {row['slow_jobs']:4d}/{len(vals)}")
                summary.setdefault(gname, {}).setdefault(impl, {})[f"{key[0]}:{key[1]}"] = row
    if a.json:
        with open(a.json, "w") as f:
            raw = {impl: [{f"{t}:{z}": {"samples": v[0], "probe_us": v[1]} for (t, z), v in job.items()} for job in jobs[impl]]
                   for impl in impls}
            json.dump({"args": vars(a), "probe_rtt_ns": probes, "probe_cut_us": cut, "results": summary,
                       "raw": raw}, f, indent=1)


if __name__ == "__main__":
    main()
