#!/usr/bin/env python3
"""Checks scripts/mpich-suite.py's `compare` verdicts on made-up results
(no MPI run): what counts as a difference between plain and wrapped runs.
Run by crates/cli/tests/conformance_rules.rs; exit status 0 when every case
gives the expected verdict."""
import importlib.util
import io
import os
import sys
import tempfile
import types
from contextlib import redirect_stderr, redirect_stdout

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("mpich_suite", os.path.join(ROOT, "scripts", "mpich-suite.py"))
ms = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ms)

EXPECT = """\
mpich    coll/slow 4      # timeout with 4 ranks on 2 CPUs (may pass)
mpich    coll/broken 4    # fail: always
"""


def rec(test, verdict, config):
    return {"impl": "mpich", "id": "coll/%s 4" % test, "folder": "coll", "test": test,
            "prog": test, "np": 4, "verdict": verdict, "config": config}


def compare(plain, wrapped, expect_path):
    """rc and log of `compare` with these verdicts ({test: verdict})."""
    def fake_run(args, impls, wrap, env, label, no_rerun=(), skip=None):
        v = plain if label == "plain" else wrapped
        return [rec(t, x, label) for t, x in v.items()]
    ms.run_config = fake_run
    ms.summarize = lambda results, name=None: {}
    args = types.SimpleNamespace(env=None, config=["nodes2:TOPOCOMM_ACCEL_NODES=2"], wrap="w",
                                 plain_from=None, mpi=["mpich"], folders=["coll"],
                                 expect=expect_path, all=False, json=None)
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        rc = ms.cmd_compare(args)
    return rc, out.getvalue()


def main():
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(EXPECT)
        path = f.name
    cases = [
        # (plain, wrapped, rc, text the log must hold)
        ({"ok": "PASS", "slow": "PASS", "broken": "FAIL"},
         {"ok": "PASS", "slow": "PASS"}, 0, "no differences"),
        # A listed load-dependent timeout: a note, not a difference.
        ({"ok": "PASS", "slow": "PASS", "broken": "FAIL"},
         {"ok": "PASS", "slow": "TIMEOUT"}, 0, "not counted"),
        # The same test failing wrapped still counts.
        ({"ok": "PASS", "slow": "PASS", "broken": "FAIL"},
         {"ok": "PASS", "slow": "FAIL"}, 1, "DIFFERENCES"),
        # A timeout of a test not listed "(may pass)" counts.
        ({"ok": "PASS", "slow": "PASS", "broken": "FAIL"},
         {"ok": "TIMEOUT", "slow": "PASS"}, 1, "[nodes2] mpich coll/ok 4: TIMEOUT"),
        # A new plain failure differs from the list.
        ({"ok": "FAIL", "slow": "PASS", "broken": "FAIL"},
         {"slow": "PASS"}, 1, "NEW FAILURE"),
    ]
    bad = 0
    try:
        for plain, wrapped, want_rc, want_text in cases:
            rc, log = compare(plain, wrapped, path)
            if rc != want_rc or want_text not in log:
                bad += 1
                print("FAILED: plain %s, wrapped %s: rc %s (want %s), log:\n%s"
                      % (plain, wrapped, rc, want_rc, log))
    finally:
        os.unlink(path)
    print("%d of %d cases as expected" % (len(cases) - bad, len(cases)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
