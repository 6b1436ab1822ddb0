"""scripts/line-probe.c from Python (scripts/p2p-jobs.py, scripts/accel-bench.py):
built into target/ when missing or older than its source, then run between
two PUs. Only the Python standard library is used."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def exe(who):
    """The probe binary, built first if needed; `who` prefixes errors."""
    out = os.path.join(ROOT, "target", "line-probe")
    src = os.path.join(ROOT, "scripts", "line-probe.c")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        cc = subprocess.run(["cc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", src, "-o", out],
                            capture_output=True, text=True)
        if cc.returncode != 0:
            sys.exit(f"{who}: cannot build {src}:\n{cc.stderr}")
    return out


def probe(who, p, q):
    """(cache-line round trip in ns, cross-core copy in GB/s) between PUs p and q."""
    r = subprocess.run([exe(who), str(p), str(q)], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit(f"{who}: line-probe {p} {q} failed: {r.stderr.strip()}")
    kv = dict(x.split("=") for x in r.stdout.split())
    return float(kv["rtt_ns"]), float(kv["copy_gbs"])
