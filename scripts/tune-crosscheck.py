#!/usr/bin/env python3
"""Cross-check of a `topocomm tune --mpi` export with programs the tuner did
not use to decide (issue 21's acceptance; docs/benchmarks/mpi-tune.md).

For job number j = 1..N it runs, back to back and in an order that alternates
with j (defaults first for odd j, the file first for even j):

  bw     mpirun -np 2 (bound to PUs 0,1) tc_mpibench --tests bw (OSU-style
         streaming: a window of non-blocking sends, hot buffers) at --sizes
         (default 64K,256K,1M,4M), once with the MPI's defaults and once
         under the file;
  hpcc   (Open MPI, --hpcc) the HPC Challenge suite from Debian's hpcc package
         on 2 ranks with a tiny HPL (N=--hpcc-n), of which its ping-pong
         bandwidth (2,000,000-byte messages) and latency (8 B) are read:
         a benchmark nobody on this project wrote.

Open MPI reads the file through OMPI_MCA_mca_base_envar_file_prefix=FILE (what
`mpirun --tune FILE` sets); MPICH gets the `export NAME=VALUE` lines of the file
in its environment. A job's value is the median of its samples. Per point the
report gives the median over jobs of each side, the gain (file/defaults for
bandwidth, defaults/file for latency: above 1 is better) with a paired
percentile-bootstrap 95% CI over job numbers, and the geometric mean of the bw
gains over --sizes with its bootstrap CI. A point is SLOWER when the whole CI
of its gain lies below 1 - --tolerance (default 5%).

Acceptance (issue 21): geometric-mean bw gain >= --target (default 1.5) and no
point slower. Exit status 0 when every job ran (the verdict is printed;
--fail-exit makes a FAIL exit 1), 2 on bad usage, 1 when a job fails.

    scripts/tune-crosscheck.py --mpi openmpi --file topocomm-openmpi.conf --hpcc
    scripts/tune-crosscheck.py --mpi mpich --file topocomm-mpich.env --jobs 6

Only the Python standard library is used.
"""

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HPCC_INPUT = "/usr/share/doc/hpcc/examples/_hpccinf.txt"


def size_arg(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{s}' (expected e.g. 64K, 1M)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def label(n):
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def file_env(mpi, path):
    """The environment that makes the MPI read the export."""
    env = dict(os.environ)
    if mpi == "openmpi":
        env["OMPI_MCA_mca_base_envar_file_prefix"] = os.path.abspath(path)
        return env
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"export\s+([A-Za-z_][A-Za-z0-9_]*)=(\S*)", line)
        if not m:
            sys.exit(f"{path}:{n}: expected 'export NAME=VALUE' (an MPICH export of topocomm tune --mpi)")
        env[m.group(1)] = m.group(2)
    return env


def launcher(mpi):
    if mpi == "openmpi":
        return ["mpirun.openmpi", "-np", "2", "--bind-to", "core", "--map-by", "core"]
    return ["mpirun.mpich", "-n", "2", "-bind-to", "core"]


def run(cmd, env, timeout, cwd=None):
    try:
        p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"job timed out after {timeout} s: {' '.join(cmd)}\n")
        sys.exit(1)
    if p.returncode != 0:
        sys.stderr.write(f"job failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}\n")
        sys.exit(1)
    return p.stdout


def bw_job(a, env):
    exe = os.path.join(ROOT, "mpi", "build", a.mpi, "tc_mpibench")
    cmd = launcher(a.mpi) + [exe, "--tests", "bw", "--sizes", ",".join(map(str, a.sizes)),
                             "--window", str(a.window), "--samples", str(a.samples)]
    out = {}
    for line in run(cmd, env, a.timeout).splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[("bw", r["size"])] = median(r["samples"])
    return out


def hpcc_job(a, env):
    d = tempfile.mkdtemp(prefix="tc-hpcc-")
    try:
        lines = open(HPCC_INPUT).read().splitlines()
        lines[5] = f"{a.hpcc_n}         Ns"
        lines[10], lines[11] = "1            Ps", "2            Qs"
        open(os.path.join(d, "hpccinf.txt"), "w").write("\n".join(lines) + "\n")
        run(launcher(a.mpi) + ["hpcc"], env, a.timeout, cwd=d)
        text = open(os.path.join(d, "hpccoutf.txt")).read()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    vals = dict(re.findall(r"^(\w+)=(\S+)$", text, re.M))
    try:
        return {("hpcc-pingpong-bw", 2000000): float(vals["MaxPingPongBandwidth_GBytes"]),
                ("hpcc-pingpong-latency", 8): float(vals["MinPingPongLatency_usec"])}
    except (KeyError, ValueError):
        sys.stderr.write("hpcc: no MaxPingPongBandwidth_GBytes / MinPingPongLatency_usec in hpccoutf.txt\n")
        sys.exit(1)


def gain(key, d, f):
    return d / f if "latency" in key[0] else f / d


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpi", choices=["openmpi", "mpich"], required=True)
    ap.add_argument("--file", required=True, help="the export of topocomm tune --mpi")
    ap.add_argument("--jobs", type=int, default=8, help="job numbers (default 8)")
    ap.add_argument("--sizes", default="64K,256K,1M,4M", help="bw sizes (default 64K,256K,1M,4M)")
    ap.add_argument("--window", type=int, default=64, help="messages in flight (default 64, as osu_bw)")
    ap.add_argument("--samples", type=int, default=7, help="samples per size and job (default 7)")
    ap.add_argument("--hpcc", action="store_true", help="also HPC Challenge's ping-pong (Open MPI; package hpcc)")
    ap.add_argument("--hpcc-n", type=int, default=400, help="HPL problem size of the hpcc runs (default 400)")
    ap.add_argument("--target", type=float, default=1.5, help="geometric-mean bw gain to reach (default 1.5)")
    ap.add_argument("--tolerance", type=float, default=0.05, help="slower = CI below 1 - this (default 0.05)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds before a job is killed (default 300)")
    ap.add_argument("--json", help="per-job values and the summary")
    ap.add_argument("--fail-exit", action="store_true", help="exit 1 when the verdict is FAIL")
    a = ap.parse_args()
    try:
        a.sizes = [size_arg(s) for s in a.sizes.split(",")]
    except argparse.ArgumentTypeError as e:
        ap.error(f"--sizes: {e}")
    if not 2 <= a.jobs <= 1000:
        ap.error(f"--jobs: {a.jobs} (expected 2..1000)")
    if not os.path.isfile(a.file):
        ap.error(f"--file: {a.file}: no such file")
    if a.hpcc and a.mpi != "openmpi":
        ap.error("--hpcc: Debian's hpcc is built for Open MPI only")
    if a.hpcc and not shutil.which("hpcc"):
        ap.error("--hpcc: no hpcc program (apt install hpcc; scripts/setup.sh installs it)")
    if not os.access(os.path.join(ROOT, "mpi", "build", a.mpi, "tc_mpibench"), os.X_OK):
        ap.error(f"mpi/build/{a.mpi}/tc_mpibench missing: run make -C mpi")

    base = dict(os.environ)
    for k in list(base):
        if k.startswith(("OMPI_MCA_btl_vader", "OMPI_MCA_mca_base_", "UCX_", "MPIR_CVAR_")):
            ap.error(f"the environment already sets {k}: the defaults would not be the MPI's defaults")
    if a.mpi == "openmpi":
        base.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        base.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    tuned = file_env(a.mpi, a.file)
    tuned.update({k: v for k, v in base.items() if k.startswith("OMPI_ALLOW")})

    jobs = []
    for j in range(1, a.jobs + 1):
        order = [("defaults", base), ("file", tuned)]
        if j % 2 == 0:
            order.reverse()
        row = {}
        for name, env in order:
            vals = bw_job(a, env)
            if a.hpcc:
                vals.update(hpcc_job(a, env))
            row[name] = vals
        jobs.append(row)
        sys.stderr.write(f"job {j}/{a.jobs} done\n")

    rng = random.Random(1)
    keys = sorted(jobs[0]["defaults"], key=lambda k: (k[0], k[1]))
    bw_keys = [k for k in keys if k[0] == "bw"]
    resamples = [[rng.randrange(len(jobs)) for _ in jobs] for _ in range(2000)]

    def summary(key_list):
        """Median gain of the keys' per-job medians (geometric mean over keys) and its CI."""
        def stat(idx):
            logs = [math.log(gain(k, median([jobs[i]["defaults"][k] for i in idx]),
                                  median([jobs[i]["file"][k] for i in idx]))) for k in key_list]
            return math.exp(sum(logs) / len(logs))
        boots = sorted(stat(idx) for idx in resamples)
        return stat(range(len(jobs))), boots[int(0.025 * len(boots))], boots[int(0.975 * len(boots)) - 1]

    print(f"{a.mpi}: {a.file} vs the defaults, {a.jobs} jobs each, interleaved "
          f"(medians over jobs; gain > 1 is better; 95% CI: paired bootstrap over jobs)")
    print(f"{'test':<22}{'size':>8}{'defaults':>12}{'file':>12}  {'gain [95% CI]':<24}note")
    points, slower = [], []
    for k in keys:
        d = median([r["defaults"][k] for r in jobs])
        f = median([r["file"][k] for r in jobs])
        g, lo, hi = summary([k])
        note = "SLOWER" if hi < 1 - a.tolerance else ""
        if note:
            slower.append(f"{k[0]} {label(k[1])}")
        points.append({"test": k[0], "size": k[1], "defaults": d, "file": f, "gain": g, "ci": [lo, hi]})
        print(f"{k[0]:<22}{label(k[1]):>8}{d:>12.4g}{f:>12.4g}  x{g:.2f} [{lo:.2f}, {hi:.2f}]{'':<6}{note}")
    g, lo, hi = summary(bw_keys)
    ok = g >= a.target and not slower
    print(f"geometric-mean bw gain over {','.join(label(s) for s in a.sizes)}: x{g:.2f} [{lo:.2f}, {hi:.2f}] "
          f"(target x{a.target:.2f})")
    print(f"verdict: {'PASS' if ok else 'FAIL'}"
          + (f" (slower: {', '.join(slower)})" if slower else "")
          + ("" if g >= a.target else f" (gain x{g:.2f} < x{a.target:.2f})"))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"mpi": a.mpi, "file": a.file, "jobs": [
                {side: [{"test": k[0], "size": k[1], "value": v} for k, v in r[side].items()]
                 for side in ("defaults", "file")} for r in jobs],
                "points": points, "geomean_bw_gain": {"gain": g, "ci": [lo, hi]}, "verdict": ok}, fh, indent=1)
    return 1 if (a.fail_exit and not ok) else 0


if __name__ == "__main__":
    sys.exit(main())
