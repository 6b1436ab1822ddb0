#!/usr/bin/env python3
"""Two or more builds of libtopocomm.so against each other under
`topocomm accel`, with plain MPI measured in the same rounds: alternating
independent jobs of mpi/bench/std_p2p or std_coll (docs/benchmarks/accel.md,
"Comparing builds").

    scripts/lib-ab.py --bench coll --np 4 --rounds 6 \\
        --tests barrier,bcast,reduce,allreduce --sizes 8,64K old=/tmp/libold.so new=target/release/libtopocomm.so

Each build LABEL=PATH gets a folder of its own (a temporary TOPOCOMM_MPI_BUILD)
holding copies of mpi/build/<impl>/libtopocomm-{accel,mpi,fortran}.so
next to PATH copied as libtopocomm.so; the accelerator's
rpath starts with $ORIGIN, so it loads that copy. Nothing in the checkout is
overwritten. A PATH that is a folder with <impl>/ in it (mpi/build of another
checkout, e.g. a `git worktree` of the base commit) is a whole build, the
accelerator included, used in place as TOPOCOMM_MPI_BUILD. Per round: plain and every build, the order rotated round by
round, so no configuration always runs first or last. Prints, per test and
size, the median over rounds of each configuration and every job's value.

--env LABEL:VAR=V[,VAR=V...] (repeatable) adds a configuration that runs
this checkout's build (mpi/build) with those variables set, e.g. `--env
nospread:TOPOCOMM_SPREAD=0` against `--env default:` (none set): settings
compared in the same rounds as builds are.

With --np above the number of CPUs the ranks run unbound and oversubscribed
(Open MPI: --bind-to none --oversubscribe), else one per core.
Only the Python standard library is used; exit status 1 when a job fails.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20}
    return str(int(s[:-1]) * mult[s[-1]]) if s[-1] in mult else str(int(s))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("builds", nargs="*", help="LABEL=PATH of a libtopocomm.so")
    ap.add_argument("--env", action="append", default=[], metavar="LABEL:VAR=V,...",
                    help="this checkout's build with these variables set (repeatable)")
    ap.add_argument("--bench", choices=["p2p", "coll"], default="p2p")
    ap.add_argument("--impl", choices=["openmpi", "mpich"], default="openmpi")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--tests", default=None, help="std_p2p/std_coll tests")
    ap.add_argument("--sizes", default="8,64K")
    ap.add_argument("--time-ms", type=int, default=None)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per job")
    a = ap.parse_args()
    if a.np < 2 or a.rounds < 1:
        sys.exit("lib-ab.py: --np must be >= 2 and --rounds >= 1")
    if not a.builds and not a.env:
        sys.exit("lib-ab.py: give at least one build LABEL=PATH or one --env LABEL:VAR=V")
    envs = {}
    for spec in a.env:
        label, sep, assigns = spec.partition(":")
        pairs = [kv.partition("=") for kv in assigns.split(",") if kv]
        if not label or not sep or any(not k or not eq for k, eq, _ in pairs):
            sys.exit(f"lib-ab.py: --env {spec!r}: expected LABEL:VAR=V[,VAR=V...] (LABEL: for none)")
        envs[label] = {k: v for k, _, v in pairs}
    builds = []
    for b in a.builds:
        label, _, path = b.partition("=")
        whole = os.path.isdir(os.path.join(path, a.impl))
        if not label or not path or not (os.path.isfile(path) or whole):
            sys.exit(f"lib-ab.py: build {b!r}: expected LABEL=PATH of an existing libtopocomm.so "
                     f"or of a build folder with {a.impl}/ in it (mpi/build of a checkout)")
        builds.append((label, os.path.abspath(path)))
    prog = "std_p2p" if a.bench == "p2p" else "std_coll"
    src = os.path.join(ROOT, "mpi", "build", a.impl)
    exe = os.path.join(ROOT, "target", "release", "topocomm")
    for need in (os.path.join(src, prog), os.path.join(src, "libtopocomm-accel.so"), exe):
        if not os.path.exists(need):
            sys.exit(f"lib-ab.py: {need} is missing (run `make build` first)")
    tests = a.tests or ("latency,bw" if a.bench == "p2p" else "barrier,bcast,reduce,allreduce")
    sizes = ",".join(size_arg(s) for s in a.sizes.split(","))
    time_ms = a.time_ms or (40 if a.bench == "p2p" else 10)
    over = a.np > (os.cpu_count() or 1)
    if a.impl == "openmpi":
        mpirun = ["mpirun.openmpi", "-n", str(a.np)]
        mpirun += ["--bind-to", "none", "--oversubscribe"] if over else ["--bind-to", "core"]
    else:
        mpirun = ["mpirun.mpich", "-n", str(a.np), "-bind-to", "none" if over else "core"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               TOPOCOMM_AUTOTUNE=os.environ.get("TOPOCOMM_AUTOTUNE", "0"))
    tmp = tempfile.mkdtemp(prefix="lib-ab-")
    try:
        dirs = {}
        for label, path in builds:
            if os.path.isdir(path):
                # A whole build (accelerator and all): used in place; its
                # libraries find their libtopocomm.so through their rpath.
                dirs[label] = path
                continue
            d = os.path.join(tmp, label, a.impl)
            os.makedirs(d)
            for f in ("libtopocomm-accel.so", "libtopocomm-mpi.so", "libtopocomm-fortran.so"):
                shutil.copy2(os.path.join(src, f), d)
            shutil.copy2(path, os.path.join(d, "libtopocomm.so"))
            dirs[label] = os.path.join(tmp, label)
        for label in envs:
            dirs[label] = os.path.join(ROOT, "mpi", "build")
        bench = [prog, "--tests", tests, "--sizes", sizes, "--time-ms", str(time_ms), "--json"]
        res, failed = {}, 0
        confs = ["plain"] + [label for label, _ in builds] + list(envs)
        if len(set(confs)) != len(confs):
            sys.exit("lib-ab.py: every configuration needs a label of its own (and not 'plain')")
        for r in range(a.rounds):
            k = r % len(confs)
            for c in confs[k:] + confs[:k]:
                if c == "plain":
                    cmd, e = mpirun + [os.path.join(src, bench[0])] + bench[1:], env
                else:
                    cmd = [exe, "accel", "--mpi", a.impl, "--"] + mpirun
                    cmd += [os.path.join(src, bench[0])] + bench[1:]
                    e = dict(env, TOPOCOMM_MPI_BUILD=dirs[c], **envs.get(c, {}))
                try:
                    out = subprocess.run(cmd, env=e, capture_output=True, text=True,
                                         timeout=a.timeout).stdout
                    doc = json.loads(out[out.index("{"):])
                except (subprocess.TimeoutExpired, ValueError) as err:
                    print(f"round {r + 1} {c}: failed ({err})", file=sys.stderr)
                    failed += 1
                    continue
                for t, pts in doc["results"].items():
                    for p in pts:
                        res.setdefault((t, p.get("size", 0)), {}).setdefault(c, []).append(p["value"])
                print(f"round {r + 1}/{a.rounds} {c} done", file=sys.stderr)
        unit = "us" if a.bench == "coll" else "us (latency), GB/s (bw, bibw), Mmsg/s (msgrate)"
        print(f"{a.bench}, {a.np} ranks ({'unbound, oversubscribed' if over else 'one per core'}), "
              f"{a.impl}, {a.rounds} rounds; medians over rounds, {unit}")
        for (t, s) in sorted(res):
            for c in confs:
                v = res[(t, s)].get(c, [])
                if v:
                    vals = " ".join(f"{x:.3g}" for x in v)
                    print(f"{t:10} {s:>8}  {c:12} {statistics.median(v):10.4g}   {vals}")
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
