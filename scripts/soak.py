#!/usr/bin/env python3
"""Soak test of the shared-memory transport (issue 19; not run by CI).

Runs `topocomm run -n N -- topocomm selftest stress` jobs back to back for
--minutes, each with a random rank count (2..--max-np, oversubscribed on small
machines), seed, message count and largest size. The stress scenario sends
log-uniform sizes (0 B up to the largest) with random tags, receives them with
ANY_SOURCE/ANY_TAG, probe-then-receive and ANY_SOURCE-with-tag, checks every
byte and the non-overtaking order, and cancels a parked receive on every rank.
Every --kill-every'th job gets one rank killed with SIGKILL at a random moment:
the job must then fail in bounded time, naming the dead rank.

After every job it checks: no process of the job left alive, no new entry in
/dev/shm. It reports jobs, messages, bytes, checksum failures, hangs, leaked
segments and processes, and writes the same as JSON with --json.

    python3 scripts/soak.py --minutes 30 --json soak.json
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

from proctree import descendants

CHECKSUM = re.compile(r"corrupted|order or length broken|unexpected message|probe said")
STRESS_OK = re.compile(r"stress ok: (\d+) ranks, \d+ messages each \((\d+) in all, (\d+) bytes\)")


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# Named segments of other programs (an MPI job running beside the soak):
# listed in the JSON, not counted. topocomm itself names nothing in
# /dev/shm (its segment is an inherited memfd), so any other new entry counts.
FOREIGN_SHM = re.compile(r"^(vader_segment\.|sm_segment\.|mpich|ompi|ucx_shm|sem\.|psm|\.org\.chromium)")


def shm_entries():
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def one_job(a, rng, kill, totals):
    n = rng.randint(2, a.max_np)
    seed = rng.randrange(1 << 32)
    messages = rng.randint(10, a.max_messages)
    max_size = rng.choice([0, 64, 4096, 65536, 1 << 20, 4 << 20])
    cmd = [a.topocomm, "run", "-n", str(n), "--timeout", str(a.rank_timeout), "--",
           a.topocomm, "selftest", "stress", "--seed", str(seed),
           "--messages", str(messages), "--max-size", str(max_size)]
    shm_before = shm_entries()
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, env=dict(os.environ, TOPOCOMM_AUTOTUNE="0"))
    killed = None
    if kill:
        time.sleep(rng.uniform(0.02, 0.6))
        ranks = [q for q, _ in descendants(p.pid) if "selftest" in cmdline(q)]
        if ranks:
            killed = rng.choice(ranks)
            try:
                os.kill(killed, signal.SIGKILL)
            except ProcessLookupError:
                killed = None
        if killed is None:
            totals["kills_skipped"] += 1  # no rank alive yet or any more
    try:
        out, _ = p.communicate(timeout=a.job_bound)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        hung = True
    wall = time.monotonic() - t0
    out = out.decode(errors="replace")
    time.sleep(0.05)
    # The launcher is reaped, so its leftover ranks were re-parented to init
    # and only the session (process group) still finds them.
    try:
        os.killpg(p.pid, 0)
        left = True
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        left = False
    new_all = sorted(shm_entries() - shm_before)
    new_shm = [e for e in new_all if not FOREIGN_SHM.match(e)]
    foreign = [e for e in new_all if FOREIGN_SHM.match(e)]

    job = {"ranks": n, "seed": seed, "messages": messages, "max_size": max_size,
           "killed": killed is not None, "rc": p.returncode, "wall_s": round(wall, 2)}
    totals["jobs"] += 1
    if hung:
        totals["hangs"] += 1
        job["verdict"] = "hang"
    elif CHECKSUM.search(out):
        totals["checksum_failures"] += 1
        job["verdict"] = "checksum"
    elif killed is not None:
        if p.returncode == 0:
            totals["kills_too_late"] += 1  # the job ended before the signal landed
            job["verdict"] = "ok (kill too late)"
        else:
            totals["kills_detected"] += 1
            job["verdict"] = "kill detected"
    else:
        m = STRESS_OK.search(out)
        if p.returncode == 0 and m:
            totals["messages"] += int(m.group(2))
            totals["bytes"] += int(m.group(3))
            job["verdict"] = "ok"
        else:
            totals["other_failures"] += 1
            job["verdict"] = "failed"
    if left:
        totals["leaked_processes"] += 1
        job["leaked_processes"] = True
    if new_shm:
        totals["leaked_segments"] += len(new_shm)
        job["leaked_segments"] = new_shm
    if foreign:
        job["foreign_shm_entries"] = foreign
    if job["verdict"] not in ("ok", "kill detected", "ok (kill too late)") or left or new_shm:
        job["output_tail"] = out[-1500:]
        print(f"  job {totals['jobs']}: {job['verdict']}: {' '.join(cmd)}\n{out[-800:]}",
              file=sys.stderr)
    return job


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--max-np", type=int, default=16)
    ap.add_argument("--max-messages", type=int, default=200)
    ap.add_argument("--kill-every", type=int, default=5, help="every K-th job gets a rank killed (0: never)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--rank-timeout", type=int, default=60, help="topocomm run --timeout (seconds)")
    ap.add_argument("--job-bound", type=int, default=180, help="seconds after which a job counts as hung")
    ap.add_argument("--topocomm", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "topocomm"))
    ap.add_argument("--json", help="write the summary and every job here")
    a = ap.parse_args()
    if not 2 <= a.max_np <= 4096 or a.minutes <= 0 or a.max_messages < 10 or a.kill_every < 0:
        ap.error("--max-np 2..4096, --minutes > 0, --max-messages >= 10, --kill-every >= 0")
    if not os.access(a.topocomm, os.X_OK):
        ap.error(f"--topocomm {a.topocomm}: not an executable (build with `make build`)")
    rng = random.Random(a.seed)
    totals = dict(jobs=0, messages=0, bytes=0, checksum_failures=0, hangs=0, kills_detected=0,
                  kills_too_late=0, kills_skipped=0, other_failures=0, leaked_segments=0, leaked_processes=0)
    jobs = []
    t_end = time.monotonic() + a.minutes * 60
    t0 = time.monotonic()
    while time.monotonic() < t_end:
        kill = a.kill_every > 0 and (totals["jobs"] + 1) % a.kill_every == 0
        jobs.append(one_job(a, rng, kill, totals))
        if totals["jobs"] % 25 == 0:
            print(f"{(time.monotonic() - t0) / 60:5.1f} min: {totals}", flush=True)
    summary = dict(totals, minutes=round((time.monotonic() - t0) / 60, 1), seed=a.seed,
                   max_np=a.max_np, cpus=os.cpu_count())
    print("soak:", json.dumps(summary))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "jobs": jobs}, f, indent=1)
    bad = totals["checksum_failures"] + totals["hangs"] + totals["other_failures"] \
        + totals["leaked_segments"] + totals["leaked_processes"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
