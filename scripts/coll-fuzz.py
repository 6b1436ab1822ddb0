#!/usr/bin/env python3
"""Random collective sequences and point-to-point traffic under `topocomm
accel`, every result checked (crates/cli/tests/accel/fuzz.c and pfuzz.c;
not run by CI, which runs short ones in crates/cli/tests/accel.rs).

Builds the programs with plain mpicc for each MPI, then runs jobs back to
back for --minutes: each job a random program, MPI, rank count (2..--max-np;
oversubscribed beyond the CPUs), seed and accelerator setting (the
defaults, every small collective through the lanes or none, no staging
areas, no gets, the rank order instead of the near order, two pretend nodes
with hierarchical collectives, a CPU per rank taken, with the pair line
forced for two-member barriers and small allreduces), with --calls collective calls (fuzz) or
--rounds rounds of up to 24 messages (pfuzz) of up to --max-bytes bytes. A job fails
when it exits non-zero, prints no "fuzz: ok" line, or runs past --timeout;
the failing command line (seed included) is printed so it can be rerun,
with FUZZ_TRACE=1 for every call's parameters. Before a job past the
timeout is killed, the stacks of its ranks are written with gdb (when
installed) to a file named in the report: a hang depends on timing and
may not come back on a rerun.

    python3 scripts/coll-fuzz.py --minutes 20 --json fuzz.json

Exit status 1 when a job failed. Only the Python standard library.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from proctree import descendants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = os.path.join(ROOT, "crates", "cli", "tests", "accel")
PROGRAMS = ("fuzz", "pfuzz")

SETTINGS = {
    "default": {},
    "lanes-everywhere": {"TOPOCOMM_ACCEL_COLL_LANES": "1"},
    "no-lanes": {"TOPOCOMM_ACCEL_COLL_LANES": "0"},
    "no-staging": {"TOPOCOMM_ACCEL_STAGE": "0"},
    "no-gets": {"TOPOCOMM_ACCEL_GETS": "0"},
    "rank-order": {"TOPOCOMM_ACCEL_NEAR": "0"},
    "two-nodes-hier": {"TOPOCOMM_ACCEL_NODES": "2", "TOPOCOMM_ACCEL_COLL_HIER": "1"},
    # The paths of a node with a CPU per rank (pairs pick the pair line or
    # messages by trials), and with the pair line forced.
    "cpu-per-rank": {"TOPOCOMM_ACCEL_CPUS": "64"},
    "pair-line": {"TOPOCOMM_ACCEL_CPUS": "64", "TOPOCOMM_ACCEL_PAIR": "line"},
}


def rank_stacks(procs, program, out):
    """Writes every thread's stack of the processes in `procs` named
    `program` to `out` with gdb; returns `out`, or None without gdb or
    ranks."""
    gdb = shutil.which("gdb")
    pids = sorted(pid for pid, name in procs if name == program[:15])
    if not gdb or not pids:
        return None
    with open(out, "w") as f:
        for pid in pids:
            f.write(f"==== pid {pid}\n")
            f.flush()
            try:
                subprocess.run([gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                               stdout=f, stderr=subprocess.STDOUT, timeout=60)
            except subprocess.TimeoutExpired:
                f.write("(gdb took over 60 s)\n")
    return out


def launcher(mpi, np):
    if mpi == "openmpi":
        extra = ["--oversubscribe", "--bind-to", "none"] if np > os.cpu_count() else []
        return ["mpirun.openmpi", "-np", str(np)] + extra
    return ["mpirun.mpich", "-np", str(np)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--max-np", type=int, default=8)
    ap.add_argument("--programs", default="fuzz,pfuzz",
                    help="comma-separated, among: " + ", ".join(PROGRAMS))
    ap.add_argument("--calls", type=int, default=300, help="collective calls per fuzz job")
    ap.add_argument("--rounds", type=int, default=150, help="rounds per pfuzz job")
    ap.add_argument("--max-bytes", type=int, default=1 << 20)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per job")
    ap.add_argument("--seed", type=int, default=None, help="seed of the job draws")
    ap.add_argument("--mpis", default="openmpi,mpich")
    ap.add_argument("--settings", default=",".join(SETTINGS),
                    help="comma-separated, among: " + ", ".join(SETTINGS))
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.max_np < 2 or a.calls < 1 or a.rounds < 1 or a.minutes <= 0:
        sys.exit("coll-fuzz: --max-np >= 2, --calls >= 1, --rounds >= 1 and --minutes > 0")
    programs = a.programs.split(",")
    for p in programs:
        if p not in PROGRAMS:
            sys.exit(f"coll-fuzz: --programs: unknown '{p}' (expected among {', '.join(PROGRAMS)})")
    settings = a.settings.split(",")
    for s in settings:
        if s not in SETTINGS:
            sys.exit(f"coll-fuzz: --settings: unknown '{s}' (expected among {', '.join(SETTINGS)})")
    topocomm = shutil.which("topocomm") or os.path.join(ROOT, "target", "release", "topocomm")
    if not os.path.exists(topocomm):
        sys.exit("coll-fuzz: no topocomm binary (make build, or put it on PATH)")
    tmp = tempfile.mkdtemp(prefix="coll-fuzz-")
    progs = {}
    for mpi in a.mpis.split(","):
        if mpi not in ("openmpi", "mpich"):
            sys.exit(f"coll-fuzz: --mpis: unknown '{mpi}' (openmpi, mpich)")
        for prog in programs:
            out = os.path.join(tmp, f"{prog}-{mpi}")
            src = os.path.join(SOURCES, prog + ".c")
            subprocess.run([f"mpicc.{mpi}", "-O2", "-Wall", "-Wextra", "-Werror", "-o", out, src],
                           check=True)
            progs[(prog, mpi)] = out
    draw = random.Random(a.seed)
    env0 = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    jobs, failures = [], []
    end = time.time() + a.minutes * 60
    while time.time() < end:
        prog, mpi = draw.choice(sorted(progs))
        np = draw.randint(2, a.max_np)
        seed = draw.randint(1, 1 << 30)
        setting = draw.choice(settings)
        env = dict(env0, **SETTINGS[setting])
        count = a.calls if prog == "fuzz" else a.rounds
        cmd = [topocomm, "accel", "--"] + launcher(mpi, np) + [progs[(prog, mpi)], str(seed),
                                                               str(count), str(a.max_bytes)]
        t0 = time.time()
        # Past the timeout the whole job goes: its session (Open MPI's
        # ranks) and every process below it (MPICH's, in sessions of their
        # own). Killing the `topocomm accel` process alone left a hung
        # job's ranks spinning for good.
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=a.timeout)
            ok = p.returncode == 0 and f"{prog}: ok" in out
            why = "" if ok else f"exit {p.returncode}: " + (err.strip().splitlines() or [""])[-1]
            detail = [l for l in err.splitlines() if l.startswith(f"{prog}:")][:3]
        except subprocess.TimeoutExpired:
            procs = descendants(p.pid)
            stacks = rank_stacks(procs, os.path.basename(progs[(prog, mpi)]),
                                 os.path.join(tmp, f"stacks-{prog}-{mpi}-{seed}.txt"))
            os.killpg(p.pid, signal.SIGKILL)
            for pid, _ in procs:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.communicate()
            ok, why, detail = False, f"no end within {a.timeout} s", []
            if stacks:
                detail = [f"stacks of the ranks: {stacks}"]
        job = {"program": prog, "mpi": mpi, "np": np, "seed": seed, "setting": setting, "ok": ok,
               "seconds": round(time.time() - t0, 2)}
        jobs.append(job)
        line = " ".join(f"{k}={v}" for k, v in SETTINGS[setting].items())
        print(f"coll-fuzz: {'ok  ' if ok else 'FAIL'} {prog} {mpi} np {np} seed {seed} {setting} "
              f"({job['seconds']} s)", flush=True)
        if not ok:
            job["why"] = why
            job["command"] = (line + " " if line else "") + " ".join(cmd)
            failures.append(job)
            print(f"  {why}\n  rerun: {job['command']}", flush=True)
            for d in detail:
                print(f"  {d}", flush=True)
    if failures:
        print(f"coll-fuzz: the programs stay in {tmp} for the reruns")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"coll-fuzz: {len(jobs)} jobs, {len(failures)} failed ({a.calls} collective calls or "
          f"{a.rounds} rounds of messages of up to {a.max_bytes} bytes a job)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"calls": a.calls, "rounds": a.rounds, "max_bytes": a.max_bytes,
                       "jobs": jobs}, f, indent=1)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
