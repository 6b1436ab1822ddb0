#!/usr/bin/env python3
"""Plain MPI against `topocomm accel` with a benchmark that uses only standard
MPI calls (mpi/bench/std_p2p.c), as N independent jobs per configuration
(docs/benchmarks/accel.md).

For each MPI (Open MPI, MPICH) and each job number it starts one job of every
configuration, back to back, the order rotated job by job:

  plain  mpirun.<impl> -n 2 --bind-to core mpi/build/<impl>/std_p2p ...
         (MPICH: -bind-to core; --bind-to none when --np exceeds the CPUs)
  accel  the same argv prefixed by the wrapper (--wrap, default
         'topocomm accel --mpi {impl} --'; {impl} becomes openmpi or mpich)
  split  accel with TOPOCOMM_ACCEL_NODES=2 in the environment: the two ranks
         count as on different nodes, so every message takes the
         accelerator's fallback to plain MPI

A job gives one value per (test, size): the median of std_p2p's timed
batches. Per (impl, test, size) the report has, for each configuration, the
median over jobs with its 95% CI (order statistics, as scripts/p2p-jobs.py),
and the cost ratio of accel and of split to plain:

  ratio = median(config) / median(plain)   for latency (us)
  ratio = median(plain) / median(config)   for bw, bibw, msgrate

so that a ratio below 1 always means faster than plain and above 1 slower.
Its 95% CI is a percentile bootstrap over jobs (--bootstrap resamples, fixed
seed): each resample draws N job numbers with replacement and takes the same
job numbers of both configurations (jobs with one number ran back to back),
then the ratio of the two medians.

Acceptance checks, printed as PASS/FAIL per MPI:
  small-message latency  accel/plain latency ratio <= 0.7 at every size
                         <= --small-max (default 8 B)
  never slower           upper 95% CI of the accel/plain ratio <= 1.05 at
                         every test and size run (1 B .. 16 MiB by default)
  remote-path overhead   split/plain latency ratio at 8 B <= 1.03

With --bench std_coll the program is mpi/bench/std_coll.c (barrier, bcast,
reduce, allreduce latency in us on all --np ranks by default; gather, scatter,
allgather, alltoall with --tests; docs/collectives.md) and
the checks are issue 16's: 8 B allreduce and barrier <= 0.5x plain (also
shown against the better MPI's plain median) and never slower from 8 B to
16 MiB.

On a virtual machine the host moves the vCPUs between near and distant
physical cores, also between two jobs (docs/transport.md, "Job-level slow
mode"), so a job of one configuration may run in the other state than its
partner job of plain MPI. --state near (or far) runs scripts/line-probe.c
(one cache line bounced between the two PUs ranks 0 and 1 run on) before
and after every job and keeps only the job numbers whose jobs all ran
between two probes of that state: near when the round trip is at most
twice the 10th percentile of all probes of the run, far when it is above.
The probes and every job's state are in the JSON.

    scripts/accel-bench.py                                   # 10 jobs, all sizes
    scripts/accel-bench.py --bench std_coll --np 4 --jobs 7  # collectives
    scripts/accel-bench.py --quick --wrap 'env --'           # plumbing smoke run
    scripts/accel-bench.py --jobs 20 --json accel.json

Only the Python standard library is used. Exit status 0 when every job ran
(the verdict is printed; --fail-exit makes a FAIL exit 1), 2 on bad usage or
a missing wrapper, 1 when a job fails.
"""

import argparse
import json
import math
import os
import random
import shlex
import shutil
import subprocess
import sys
import time

from order_stats import median, median_ci  # scripts/order_stats.py

import line_probe  # scripts/line_probe.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLL_TESTS = ("barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall")
TESTS = ("latency", "bw", "bibw", "msgrate") + COLL_TESTS
UNITS = {"latency": "us", "bw": "GB/s", "bibw": "GB/s", "msgrate": "Mmsg/s",
         **{t: "us" for t in COLL_TESTS}}
LOWER_BETTER = {"latency": True, "bw": False, "bibw": False, "msgrate": False,
                **{t: True for t in COLL_TESTS}}
# The benchmark programs (mpi/bench/<name>.c) and their default tests and sizes.
BENCHES = {"std_p2p": ("latency,bw,bibw,msgrate", "1:16M"),
           "std_coll": ("barrier,bcast,reduce,allreduce", "4:16M")}
IMPLS = ("openmpi", "mpich")
CONFIGS = ("plain", "accel", "split")
SPLIT_ENV = "TOPOCOMM_ACCEL_NODES"


def cost_ratio(test, base, other):
    """other's cost relative to base: < 1 faster, > 1 slower."""
    if LOWER_BETTER[test]:
        return other / base if base > 0 else math.inf
    return base / other if other > 0 else math.inf


def ratio_ci(test, base, other, resamples, rng):
    """Ratio of medians and its paired percentile-bootstrap 95% CI over jobs.
    base and other are per-job values indexed by job number."""
    point = cost_ratio(test, median(base), median(other))
    n = len(base)
    if n < 2 or resamples < 1:
        return point, [point, point]
    rs = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        rs.append(cost_ratio(test, median([base[i] for i in idx]), median([other[i] for i in idx])))
    rs.sort()
    lo = rs[int(math.floor(0.025 * (resamples - 1)))]
    hi = rs[int(math.ceil(0.975 * (resamples - 1)))]
    return point, [lo, hi]


def resolve_wrap(template, impl):
    """The wrapper argv for impl, its first word resolved; exits if missing."""
    argv = [w.replace("{impl}", impl) for w in shlex.split(template)]
    if not argv:
        return []
    exe = argv[0]
    found = None
    if os.sep in exe:
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            found = os.path.abspath(exe)
    else:
        found = shutil.which(exe)
        # topocomm not installed: the workspace's release build will do.
        if found is None and exe == "topocomm":
            cand = os.path.join(ROOT, "target", "release", "topocomm")
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                found = cand
    if found is None:
        sys.stderr.write(
            f"accel-bench: wrapper command '{exe}' not found (from --wrap '{template}').\n"
            "  Build topocomm ('cargo build --release', then it is taken from target/release/) or put it on PATH,\n"
            "  or test the plumbing with --wrap 'env --', or run only --configs plain.\n")
        sys.exit(2)
    return [found] + argv[1:]


def build(impl, bench):
    exe = os.path.join(ROOT, "mpi", "build", impl, bench)
    r = subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "mpi"), f"build/{impl}/{bench}"],
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(exe):
        sys.exit(f"accel-bench: cannot build {exe} (make -C mpi build/{impl}/{bench}):\n{r.stdout}{r.stderr}")
    return exe


def commands(impl, a, exe):
    bench = [exe, "--json", "--tests", a.tests, "--sizes", a.sizes, "--time-ms", str(a.time_ms),
             "--reps", str(a.reps)] + shlex.split(a.bench_args)
    mpirun = f"mpirun.{impl}"
    if shutil.which(mpirun) is None:
        sys.exit(f"accel-bench: {mpirun} not found (scripts/setup.sh installs Open MPI and MPICH)")
    # More ranks than CPUs: unbound, as a user's oversubscribed job runs
    # (binding two ranks to one core is refused by Open MPI without
    # overload-allowed, and is the colocated case of docs/transport.md).
    bind = a.bind or ("core" if a.np <= (os.cpu_count() or 1) else "none")
    if impl == "openmpi":
        plain = [mpirun, "-n", str(a.np), "--bind-to", bind] + (["--oversubscribe"] if a.np > 2 else [])
    else:
        plain = [mpirun, "-n", str(a.np), "-bind-to", bind]
    plain += bench
    cmds = {}
    for c in a.configs:
        cmds[c] = plain if c == "plain" else resolve_wrap(a.wrap, impl) + plain
    return cmds


def run_job(impl, config, cmd, a):
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.pop(SPLIT_ENV, None)
    if config == "split":
        env[SPLIT_ENV] = str(a.split_nodes)
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"accel-bench: {impl}/{config} job ran past --timeout {a.timeout} s: {shlex.join(cmd)}")
    wall = time.time() - t0
    if r.returncode != 0:
        sys.exit(f"accel-bench: {impl}/{config} job failed (exit {r.returncode}): {shlex.join(cmd)}\n"
                 f"{r.stderr.strip()[-4000:]}")
    doc = None
    for line in r.stdout.splitlines():
        line = line.strip()
        if line.startswith('{"benchmark":"%s"' % a.bench):
            doc = json.loads(line)
    if doc is None:
        sys.exit(f"accel-bench: {impl}/{config} job printed no {a.bench} JSON: {shlex.join(cmd)}\n"
                 f"stdout: {r.stdout.strip()[-2000:]}\nstderr: {r.stderr.strip()[-2000:]}")
    if doc["meta"].get("check") == "failed":
        sys.exit(f"accel-bench: {impl}/{config}: {a.bench}'s data check failed: {shlex.join(cmd)}")
    vals = {(t, p["size"]): p["value"] for t, pts in doc["results"].items() for p in pts}
    return {"impl": impl, "config": config, "wall_s": wall, "meta": doc["meta"],
            "values": vals, "stderr_tail": r.stderr.strip()[-1000:]}


def probe():
    """The cache-line round trip between PUs 0 and 1 (where --bind-to core
    puts ranks 0 and 1), in ns."""
    return line_probe.probe("accel-bench", 0, 1)[0]


def fmt(v):
    return f"{v:.4g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10, help="independent jobs per MPI and configuration (default 10)")
    ap.add_argument("--impls", default="openmpi,mpich", help="MPIs (default openmpi,mpich)")
    ap.add_argument("--configs", default="plain,accel,split", help="configurations (default plain,accel,split)")
    ap.add_argument("--wrap", default="topocomm accel --mpi {impl} --",
                    help="command put before mpirun for accel and split; {impl} is replaced "
                         "(default 'topocomm accel --mpi {impl} --')")
    ap.add_argument("--bench", choices=sorted(BENCHES), default="std_p2p",
                    help="benchmark program: std_p2p (point-to-point, default) or std_coll (collectives, all ranks)")
    ap.add_argument("--tests", default=None,
                    help="the benchmark's tests (default all: latency,bw,bibw,msgrate or barrier,bcast,reduce,allreduce)")
    ap.add_argument("--sizes", default=None, help="sizes (default 1:16M for std_p2p, 4:16M for std_coll; powers of 2)")
    ap.add_argument("--time-ms", type=float, default=30.0, help="std_p2p timed batch length (default 30 ms)")
    ap.add_argument("--reps", type=int, default=3, help="std_p2p timed batches per point (default 3)")
    ap.add_argument("--bench-args", default="", help="more std_p2p arguments, one string")
    ap.add_argument("--np", type=int, default=2, help="ranks (default 2; ranks past 1 only wait)")
    ap.add_argument("--bind", choices=["core", "none"], default=None,
                    help="mpirun binding (default core, none when --np exceeds the CPUs)")
    ap.add_argument("--split-nodes", type=int, default=2, help=f"{SPLIT_ENV} for split (default 2)")
    ap.add_argument("--small-max", type=int, default=8, help="largest 'small message' in bytes (default 8)")
    ap.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (default 2000)")
    ap.add_argument("--seed", type=int, default=1, help="bootstrap seed (default 1)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before a job is killed (default 900)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2 jobs, sizes 1,8,64K,16M, 5 ms batches, 1 rep")
    ap.add_argument("--fail-exit", action="store_true", help="exit 1 when an acceptance check fails")
    ap.add_argument("--state", choices=["all", "near", "far"], default="all",
                    help="keep only the job numbers whose jobs all ran in this machine state, told by "
                         "scripts/line-probe.c before and after every job (default all: no probes)")
    ap.add_argument("--json", help="write per-job values, the summary and the checks here")
    a = ap.parse_args()
    a.tests = a.tests or BENCHES[a.bench][0]
    a.sizes = a.sizes or BENCHES[a.bench][1]
    if a.quick:
        a.jobs, a.sizes, a.time_ms, a.reps = 2, "1,8,64K,16M", 5.0, 1
    a.impls = [x for x in a.impls.split(",") if x]
    a.configs = [x for x in a.configs.split(",") if x]
    for x in a.impls:
        if x not in IMPLS:
            sys.exit(f"accel-bench: --impls {x}: expected openmpi or mpich")
    for x in a.configs:
        if x not in CONFIGS:
            sys.exit(f"accel-bench: --configs {x}: expected plain, accel or split")
    if "plain" not in a.configs:
        a.configs.insert(0, "plain")
        print("accel-bench: plain added to --configs (the ratios need it)", file=sys.stderr)
    if a.jobs < 1 or a.np < 2 or a.reps < 1:
        sys.exit("accel-bench: --jobs and --reps must be >= 1, --np >= 2")

    cmds = {}
    for impl in a.impls:
        cmds[impl] = commands(impl, a, build(impl, a.bench))
        for c in a.configs:
            print(f"# {impl:7s} {c:5s} {'env ' + SPLIT_ENV + '=' + str(a.split_nodes) + ' ' if c == 'split' else ''}"
                  f"{shlex.join(cmds[impl][c])}")
    print(flush=True)

    jobs = []
    per = {impl: {c: [] for c in a.configs} for impl in a.impls}
    for j in range(a.jobs):
        k = j % len(a.configs)
        order = a.configs[k:] + a.configs[:k]
        for impl in a.impls:
            for c in order:
                before = probe() if a.state != "all" else None
                res = run_job(impl, c, cmds[impl][c], a)
                res["job"] = j
                if a.state != "all":
                    res["probe_ns"] = [before, probe()]
                jobs.append(res)
                per[impl][c].append(res["values"])
                cpus = [r.get("cpu") for r in res["meta"].get("ranks", [])]
                warn = "  WARNING: both ranks on one CPU" if len(cpus) == 2 and cpus[0] == cpus[1] else ""
                v = res["values"]
                shown = [("latency", 8), ("bw", 1 << 20), ("msgrate", 8), ("barrier", 0), ("allreduce", 8)]
                show = " ".join(f"{t}:{s}={fmt(v[(t, s)])}" for t, s in shown if (t, s) in v)
                pr = f" probe {res['probe_ns'][0]:.0f}/{res['probe_ns'][1]:.0f} ns" if "probe_ns" in res else ""
                print(f"job {j + 1:3d} {impl:7s} {c:5s} {res['wall_s']:6.1f}s cpus {cpus}{pr} {show}{warn}",
                      flush=True)

    if a.state != "all":
        rtts = sorted(x for r in jobs for x in r["probe_ns"])
        cut = 2 * rtts[len(rtts) // 10]
        for r in jobs:
            near, far = max(r["probe_ns"]) <= cut, min(r["probe_ns"]) > cut
            r["state"] = "near" if near else "far" if far else "changed"
        for impl in a.impls:
            keep = [j for j in range(a.jobs)
                    if all(r["state"] == a.state for r in jobs if r["impl"] == impl and r["job"] == j)]
            for c in a.configs:
                per[impl][c] = [r["values"] for r in jobs
                                if r["impl"] == impl and r["config"] == c and r["job"] in keep]
            print(f"{impl}: {len(keep)} of {a.jobs} job numbers ran in the {a.state} state in all "
                  f"configurations (line-probe round trip {'<=' if a.state == 'near' else '>'} {cut:.0f} ns "
                  f"before and after each job)")
            if not keep:
                if a.json:
                    # The jobs ran: keep their values and probes.
                    with open(a.json, "w") as f:
                        json.dump({"args": vars(a), "jobs": [
                            {k: (sorted([list(kk), v] for kk, v in r[k].items()) if k == "values" else r[k])
                             for k in ("job", "impl", "config", "probe_ns", "state", "values")}
                            for r in jobs]}, f, indent=1)
                sys.exit(f"accel-bench: no job number of {impl} ran in the {a.state} state in all its "
                         f"configurations; run more --jobs" + (f" (the jobs are in {a.json})" if a.json else ""))
            if len(keep) < 3:
                print(f"accel-bench: WARNING: {impl}: {len(keep)} job number(s) kept; the 95% intervals "
                      f"below need at least 3 to mean anything")

    rng = random.Random(a.seed)
    summary = {}
    for impl in a.impls:
        keys = sorted({k for c in a.configs for vals in per[impl][c] for k in vals},
                      key=lambda k: (TESTS.index(k[0]), k[1]))
        for test, size in keys:
            row = {}
            for c in a.configs:
                xs = [vals[(test, size)] for vals in per[impl][c] if (test, size) in vals]
                lo, hi = median_ci(xs)
                row[c] = {"median": median(xs), "ci95": [lo, hi], "jobs": xs}
            base = row["plain"]["jobs"]
            for c in a.configs:
                if c == "plain" or len(row[c]["jobs"]) != len(base):
                    continue
                r, ci = ratio_ci(test, base, row[c]["jobs"], a.bootstrap, rng)
                row[f"{c}_over_plain"] = {"ratio": r, "ci95": ci}
            row["unit"] = UNITS[test]
            summary.setdefault(impl, {}).setdefault(test, {})[size] = row

    print()
    print("cost ratio = config/plain for latency, plain/config for bw, bibw, msgrate: < 1 faster than plain, "
          "> 1 slower;")
    print(f"median over the jobs kept [95% CI of the median, order statistics]; ratio of medians "
          f"[95% CI, paired bootstrap over jobs, {a.bootstrap} resamples]")
    for impl in a.impls:
        for test in TESTS:
            if test not in summary[impl]:
                continue
            print()
            hdr = f"{impl:7s} {test:8s} {'size':>9s}"
            for c in a.configs:
                hdr += f" {c + ' median':>12s} {'[95% CI]':21s}"
                if c != "plain":
                    hdr += f" {c + '/plain':>11s} {'[95% CI]':17s}"
            print(hdr)
            for size, row in sorted(summary[impl][test].items()):
                line = f"{impl:7s} {test:8s} {size:9d}"
                for c in a.configs:
                    m = row[c]
                    line += f" {fmt(m['median']):>12s} {'[' + fmt(m['ci95'][0]) + ', ' + fmt(m['ci95'][1]) + ']':21s}"
                    if c != "plain":
                        q = row.get(f"{c}_over_plain")
                        if q:
                            line += f" {q['ratio']:11.3f} {'[' + format(q['ci95'][0], '.3f') + ', ' + format(q['ci95'][1], '.3f') + ']':17s}"
                        else:
                            line += f" {'-':>11s} {'':17s}"
                print(line + f" {row['unit']}")

    # Acceptance checks.
    print()
    checks = []

    def verdict(impl, name, ok, detail):
        status = "SKIP" if ok is None else ("PASS" if ok else "FAIL")
        checks.append({"impl": impl, "check": name, "status": status, "detail": detail})
        print(f"{status} {impl:7s} {name}: {detail}")

    if a.bench == "std_coll":
        coll_checks(a, summary, verdict)
    for impl in a.impls if a.bench == "std_p2p" else []:
        s = summary[impl]
        lat = s.get("latency", {})
        # 1. small-message latency
        small = [z for z in sorted(lat) if z <= a.small_max]
        if "accel" not in a.configs or not small:
            verdict(impl, "small-message latency <= 0.7x plain", None,
                    "needs --configs accel and latency at a size <= --small-max")
        else:
            parts, ok = [], True
            for z in small:
                q = lat[z]["accel_over_plain"]
                ok &= q["ratio"] <= 0.7
                parts.append(f"{z} B {q['ratio']:.3f} [{q['ci95'][0]:.3f}, {q['ci95'][1]:.3f}]")
            verdict(impl, "small-message latency <= 0.7x plain", ok,
                    "accel/plain latency (ratio of medians) " + ", ".join(parts))
        # 2. never slower than plain
        never_slower(a, impl, s, verdict, smallest=1)
        # 3. remote-path overhead
        if "split" not in a.configs or 8 not in lat:
            verdict(impl, "remote-path overhead at 8 B <= 3%", None, "needs --configs split and latency at 8 B")
        else:
            q = lat[8]["split_over_plain"]
            info = []
            for test in ("bw", "bibw", "msgrate"):
                row = s.get(test, {}).get(8)
                if row and "split_over_plain" in row:
                    qq = row["split_over_plain"]
                    info.append(f"{test} {qq['ratio']:.3f} [{qq['ci95'][0]:.3f}, {qq['ci95'][1]:.3f}]")
            verdict(impl, "remote-path overhead at 8 B <= 3%", q["ratio"] <= 1.03,
                    f"split/plain latency at 8 B {q['ratio']:.3f} [{q['ci95'][0]:.3f}, {q['ci95'][1]:.3f}]"
                    + (f" (info, 8 B: {', '.join(info)})" if info else ""))

    if a.json:
        out = {
            "args": {k: v for k, v in vars(a).items()},
            "commands": {impl: {c: cmds[impl][c] for c in a.configs} for impl in a.impls},
            "split_env": {SPLIT_ENV: str(a.split_nodes)},
            "ratio": "cost ratio: config/plain for latency, plain/config for bw, bibw, msgrate; "
                     "CI: paired percentile bootstrap over jobs of the ratio of medians",
            "jobs": [{"job": r["job"], "impl": r["impl"], "config": r["config"], "wall_s": r["wall_s"],
                      "meta": r["meta"], "probe_ns": r.get("probe_ns"), "state": r.get("state"),
                      "results": [{"test": t, "size": z, "value": v} for (t, z), v in sorted(r["values"].items())]}
                     for r in jobs],
            "summary": {impl: {t: {str(z): row for z, row in pts.items()} for t, pts in s.items()}
                        for impl, s in summary.items()},
            "checks": checks,
        }
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"\nwrote {a.json}")
    if a.fail_exit and any(c["status"] == "FAIL" for c in checks):
        sys.exit(1)


def never_slower(a, impl, s, verdict, smallest):
    """accel's upper 95% CI of the cost ratio <= 1.05 at every point."""
    if "accel" not in a.configs:
        verdict(impl, "accel never slower than plain (upper 95% CI <= 1.05)", None, "needs --configs accel")
        return
    bad, worst, n = [], None, 0
    sizes = set()
    for test, pts in s.items():
        for z, row in pts.items():
            q = row.get("accel_over_plain")
            if not q:
                continue
            n += 1
            if test not in ("msgrate", "barrier"):
                sizes.add(z)
            if worst is None or q["ci95"][1] > worst[2]:
                worst = (test, z, q["ci95"][1], q["ratio"])
            if q["ci95"][1] > 1.05:
                bad.append(f"{test} {z} B: {q['ratio']:.3f} [{q['ci95'][0]:.3f}, {q['ci95'][1]:.3f}]")
    cover = f"{min(sizes)} B .. {max(sizes)} B, {len(sizes)} sizes" if sizes else "no sizes"
    full = sizes and min(sizes) <= smallest and max(sizes) >= 16 << 20
    note = "" if full else f" (NOTE: the acceptance asks for {smallest} B .. 16 MiB)"
    detail = f"{n} points over {cover}{note}; "
    detail += (f"worst upper CI {worst[2]:.3f} at {worst[0]} {worst[1]} B (ratio {worst[3]:.3f})" if worst else "")
    if bad:
        detail += "; over 1.05: " + "; ".join(bad)
    verdict(impl, "accel never slower than plain (upper 95% CI <= 1.05)", not bad, detail)


def coll_checks(a, summary, verdict):
    """Issue 16's latency checks: 8 B allreduce and barrier <= 0.5x plain
    (per MPI, paired CI; and against the better MPI's plain median), and
    never slower than plain."""
    for impl in a.impls:
        s = summary[impl]
        points = [("barrier", 0), ("allreduce", 8)]
        have = [(t, z) for t, z in points if z in s.get(t, {}) and "accel_over_plain" in s[t][z]]
        if not have:
            verdict(impl, "8 B allreduce and barrier <= 0.5x plain", None,
                    "needs --configs accel, barrier and allreduce at 8 B")
        else:
            ok, parts = True, []
            for t, z in have:
                q = s[t][z]["accel_over_plain"]
                ok &= q["ratio"] <= 0.5
                best = min(summary[i][t][z]["plain"]["median"] for i in a.impls if z in summary[i].get(t, {}))
                vs_best = s[t][z]["accel"]["median"] / best if best > 0 else math.inf
                parts.append(f"{t} {z} B {q['ratio']:.3f} [{q['ci95'][0]:.3f}, {q['ci95'][1]:.3f}]"
                             f" (vs the better MPI's plain median: {vs_best:.3f})")
            verdict(impl, "8 B allreduce and barrier <= 0.5x plain", ok, ", ".join(parts))
        never_slower(a, impl, s, verdict, smallest=8)


if __name__ == "__main__":
    main()
