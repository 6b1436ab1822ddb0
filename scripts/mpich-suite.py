#!/usr/bin/env python3
"""Build and run MPICH's own test suite (a subset kept in ../shared/suites/mpich-tests) against
Debian's Open MPI and MPICH, plainly or under a wrapper such as `topocomm accel --`.

    scripts/mpich-suite.py build   [--mpi openmpi,mpich] [--folders pt2pt,comm,...] [-j N]
    scripts/mpich-suite.py run     [--mpi ...] [--folders ...] [--only RE] [--max-np 8]
                                   [--wrap 'topocomm accel --'] [--env K=V ...]
                                   [--expect tests/mpich-suite/plain-failures.txt] [--json FILE]
    scripts/mpich-suite.py compare [--mpi ...] [--folders ...] --wrap 'topocomm accel --'
                                   [--config NAME:K=V,K=V ...] [--json FILE]

See docs/conformance.md. Python 3 standard library only.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SUITE = os.path.normpath(os.path.join(ROOT, "..", "shared", "suites", "mpich-tests"))
DEFAULT_OUT = os.path.join(ROOT, "target", "mpich-suite")
DEFAULT_FOLDERS = ["pt2pt", "comm", "coll", "topo", "f77/pt2pt", "f77/coll"]
IMPLS = {
    "openmpi": {"cc": "mpicc.openmpi", "fc": "mpif77.openmpi", "run": "mpirun.openmpi"},
    "mpich": {"cc": "mpicc.mpich", "fc": "mpif77.mpich", "run": "mpirun.mpich"},
}
# The MPI standard version each MPI implements (for testlist `mpiversion=`).
MPI_VERSION = {"openmpi": (3, 1), "mpich": (4, 0)}
C_UTIL = ["mtest.c", "mtest_common.c", "mtest_single.c", "dtypes.c"]
# programs written as `int run(const char *arg)` (no main) link MPICH's driver main
RUN_MAIN = "run_mpitests.c"
F_UTIL = ["mtest_f77.f"]
FAIL_VERDICTS = ("FAIL", "TIMEOUT", "NOBUILD")

MPITESTCONF = """/* hand-written for building MPICH's tests outside autotools (scripts/mpich-suite.py) */
#ifndef MPITESTCONF_H_INCLUDED
#define MPITESTCONF_H_INCLUDED
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_UNISTD_H 1
#define HAVE_STDARG_H 1
#define HAVE_STDINT_H 1
#define HAVE_INTTYPES_H 1
#define THREAD_PACKAGE_NAME 1
#endif
"""
ATTR1AINTS = "       integer*8 extrastate, valin, valout, val\n"


def log(*a):
    print(*a, flush=True)


# ----------------------------------------------------------------------------- testlists

def testlist_path(suite, folder):
    for name in ("testlist", "testlist.in"):
        p = os.path.join(suite, folder, name)
        if os.path.exists(p):
            return p
    return None


def parse_testlist(suite, folder):
    """Return a list of test instances (dicts) from a folder's testlist."""
    path = testlist_path(suite, folder)
    if path is None:
        return []
    raw = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#") or "@" in line:
                continue
            toks = line.split()
            if len(toks) < 2 or not toks[1].isdigit():
                continue
            t = {"prog": toks[0], "np": int(toks[1]), "args": [], "env": {}, "opts": {},
                 "line": lineno}
            for tok in toks[2:]:
                k, _, v = tok.partition("=")
                if k == "arg":
                    t["args"].append(v)
                elif k == "env":
                    ek, _, ev = v.partition("=")
                    t["env"][ek] = ev
                else:
                    t["opts"][k] = v
            raw.append(t)
    # name the instances: prog, or prog~N when a (prog, np) pair has several lines
    count = {}
    for t in raw:
        count[(t["prog"], t["np"])] = count.get((t["prog"], t["np"]), 0) + 1
    seen = {}
    for t in raw:
        key = (t["prog"], t["np"])
        seen[key] = seen.get(key, 0) + 1
        t["test"] = t["prog"] if count[key] == 1 else "%s~%d" % (t["prog"], seen[key])
        t["folder"] = folder
        t["id"] = "%s/%s %d" % (folder, t["test"], t["np"])
    return raw


def parse_makefile_am(suite, folder):
    """prog -> {'sources': [...], 'cppflags': [...]} from Makefile.am overrides."""
    out = {}
    path = os.path.join(suite, folder, "Makefile.am")
    if not os.path.exists(path):
        return out
    text = open(path).read().replace("\\\n", " ")
    for m in re.finditer(r"^(\w+?)_(SOURCES|CPPFLAGS)\s*=\s*(.*)$", text, re.M):
        prog, kind, val = m.groups()
        vals = [v for v in val.split() if not v.startswith("$(")]
        out.setdefault(prog, {})["sources" if kind == "SOURCES" else "cppflags"] = vals
    return out


# ----------------------------------------------------------------------------- build

def is_fortran(folder):
    return folder.startswith("f77")


def run_cmd(cmd, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, errors="replace")
    return p.returncode, p.stdout


def fortran_flags(fc):
    flags = ["-w", "-O1"]
    rc, out = run_cmd([fc, "--version"])
    m = re.search(r"GNU Fortran.*?(\d+)\.\d+", out)
    if m and int(m.group(1)) >= 10:
        flags.append("-fallow-argument-mismatch")
    return flags


def compile_reason(out):
    """One-line reason why a compile failed, read off the compiler output."""
    pats = [
        (r"fatal error: (\S+): No such file", "needs {0} (not available here)"),
        (r'static assertion failed: "([^"]*)"', "{0}"),
        (r"undefined reference to `(\w+)'", "{0} missing (undefined reference)"),
        (r"'(\w+)' undeclared", "{0} undeclared"),
        (r"implicit declaration of function '(\w+)'", "{0} not declared"),
        (r"unknown type name '(\w+)'", "unknown type {0}"),
        (r"Symbol '(\w+)' at .* has no IMPLICIT type", "Fortran symbol {0} undefined"),
    ]
    for pat, fmt in pats:
        found = []
        for m in re.finditer(pat, out):
            if m.group(1) not in found:
                found.append(m.group(1))
        if found:
            if "{0}" in fmt and len(found) > 1:
                return fmt.format(", ".join(found[:4]) + ("..." if len(found) > 4 else ""))
            return fmt.format(found[0])
    lines = [l for l in out.splitlines() if "error" in l.lower()]
    return (lines[0] if lines else out.strip().splitlines()[-1] if out.strip() else "?")[:200]


def newest_mtime(paths):
    return max(os.path.getmtime(p) for p in paths)


def prepare_impl(args, impl):
    """Write the config headers and compile the util objects once per impl."""
    base = os.path.join(args.out, impl)
    inc = os.path.join(base, "include")
    udir = os.path.join(base, "util")
    os.makedirs(inc, exist_ok=True)
    os.makedirs(udir, exist_ok=True)
    for name, text in (("mpitestconf.h", MPITESTCONF), ("mtest_mpix.h", "/* empty */\n"),
                       ("attr1aints.h", ATTR1AINTS)):
        p = os.path.join(inc, name)
        if not os.path.exists(p) or open(p).read() != text:
            with open(p, "w") as f:
                f.write(text)
    tools = IMPLS[impl]
    objs = {"c": [], "f": []}
    for kind, srcs in (("c", C_UTIL + [RUN_MAIN]), ("f", F_UTIL)):
        if kind == "f" and not any(is_fortran(fo) for fo in args.folders):
            continue
        for s in srcs:
            src = os.path.join(args.suite, "util", s)
            obj = os.path.join(udir, os.path.splitext(s)[0] + ".o")
            if not os.path.exists(obj) or os.path.getmtime(obj) < newest_mtime(
                    [src] + [os.path.join(inc, h) for h in os.listdir(inc)]):
                if kind == "c":
                    cmd = [tools["cc"], "-O1", "-w", "-I" + inc,
                           "-I" + os.path.join(args.suite, "include"), "-c", src, "-o", obj]
                else:
                    cmd = [tools["fc"]] + fortran_flags(tools["fc"]) + ["-I" + inc, "-c", src,
                                                                         "-o", obj]
                rc, out = run_cmd(cmd)
                if rc != 0:
                    sys.exit("cannot compile util %s for %s:\n%s" % (s, impl, out))
            if s == RUN_MAIN:
                objs["main"] = obj
            else:
                objs[kind].append(obj)
    return inc, objs


def has_main(src):
    with open(src, errors="replace") as f:
        return re.search(r"\bmain\s*\(", f.read()) is not None


def build_one(job):
    """Compile one program; returns (prog, status, reason, seconds)."""
    t0 = time.time()
    out_bin, fail_file, cmd, deps = job["bin"], job["fail"], job["cmd"], job["deps"]
    newest = newest_mtime(deps)
    stamp = " ".join(map(shlex.quote, cmd))
    cmd_file = out_bin + ".cmd"

    def fresh(path, cmdline):
        return os.path.exists(path) and os.path.getmtime(path) >= newest and cmdline == stamp

    if fresh(out_bin, open(cmd_file).read().strip() if os.path.exists(cmd_file) else ""):
        return job["prog"], "uptodate", "", 0.0
    if os.path.exists(fail_file):
        lines = open(fail_file).read().splitlines()
        if fresh(fail_file, lines[2] if len(lines) > 2 else ""):
            return job["prog"], "failed", lines[0], 0.0
    tmp = out_bin + ".tmp"
    rc, out = run_cmd(cmd + ["-o", tmp], cwd=job["cwd"])
    if rc == 0:
        os.replace(tmp, out_bin)
        with open(cmd_file, "w") as f:
            f.write(stamp + "\n")
        if os.path.exists(fail_file):
            os.remove(fail_file)
        return job["prog"], "built", "", time.time() - t0
    if os.path.exists(tmp):
        os.remove(tmp)
    reason = compile_reason(out)
    with open(fail_file, "w") as f:
        f.write(reason + "\n\n" + stamp + "\n\n" + out)
    if os.path.exists(out_bin):
        os.remove(out_bin)
    return job["prog"], "failed", reason, time.time() - t0


def cmd_build(args):
    summary = []
    for impl in args.mpi:
        t_impl = time.time()
        inc, objs = prepare_impl(args, impl)
        log("[%s] util objects ready (%.1fs)" % (impl, time.time() - t_impl))
        tools = IMPLS[impl]
        fflags = fortran_flags(tools["fc"]) if any(is_fortran(f) for f in args.folders) else []
        status_path = os.path.join(args.out, impl, "build.json")
        status = json.load(open(status_path)) if os.path.exists(status_path) else {}
        for folder in args.folders:
            t0 = time.time()
            src_dir = os.path.join(args.suite, folder)
            bdir = os.path.join(args.out, impl, folder)
            os.makedirs(bdir, exist_ok=True)
            mk = parse_makefile_am(args.suite, folder)
            progs = []
            for t in parse_testlist(args.suite, folder):
                if t["prog"] not in progs:
                    progs.append(t["prog"])
            jobs = []
            for prog in progs:
                info = mk.get(prog, {})
                ext = ".f" if is_fortran(folder) else ".c"
                srcs = [os.path.join(src_dir, s) for s in info.get("sources", [prog + ext])]
                if is_fortran(folder):
                    cmd = [tools["fc"]] + fflags + ["-I" + inc, "-I" + src_dir] + srcs + objs["f"]
                    utilobjs = objs["f"]
                else:
                    cmd = ([tools["cc"], "-O1", "-w", "-I" + inc,
                            "-I" + os.path.join(args.suite, "include"), "-I" + src_dir]
                           + info.get("cppflags", []) + srcs + objs["c"] + ["-lm"])
                    utilobjs = objs["c"]
                    if not any(has_main(s) for s in srcs if os.path.exists(s)):
                        cmd.insert(-1, objs["main"])
                missing = [s for s in srcs if not os.path.exists(s)]
                if missing:
                    with open(os.path.join(bdir, prog + ".buildfail"), "w") as f:
                        f.write("source %s not in the suite\n" % os.path.basename(missing[0]))
                    status.setdefault(folder, {})[prog] = {
                        "status": "failed",
                        "reason": "source %s not in the suite" % os.path.basename(missing[0])}
                    continue
                jobs.append({"prog": prog, "bin": os.path.join(bdir, prog),
                             "fail": os.path.join(bdir, prog + ".buildfail"), "cmd": cmd,
                             "cwd": bdir, "deps": srcs + utilobjs})
            counts = {"built": 0, "uptodate": 0, "failed": 0}
            with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
                for prog, st, reason, secs in ex.map(build_one, jobs):
                    counts[st] += 1
                    status.setdefault(folder, {})[prog] = {"status": st, "reason": reason}
                    if st == "failed" and args.verbose:
                        log("  [%s] %s/%s: not built: %s" % (impl, folder, prog, reason))
            dt = time.time() - t0
            nfail = sum(1 for v in status.get(folder, {}).values() if v["status"] == "failed")
            line = ("[%s] %-10s %3d programs: %3d built, %3d up to date, %3d not built  (%.1fs)"
                    % (impl, folder, len(progs), counts["built"], counts["uptodate"], nfail, dt))
            log(line)
            summary.append({"impl": impl, "folder": folder, "programs": len(progs),
                            "built": counts["built"], "uptodate": counts["uptodate"],
                            "not_built": nfail, "seconds": round(dt, 1)})
        with open(status_path, "w") as f:
            json.dump(status, f, indent=1, sort_keys=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


# ----------------------------------------------------------------------------- run

def mpi_version_ok(impl, spec):
    try:
        want = tuple(int(x) for x in spec.split(".")[:2])
    except ValueError:
        return True
    return MPI_VERSION[impl] >= want


def select_tests(args, impl):
    """All test instances of the selected folders with a verdict pre-set for skipped ones."""
    sel = []
    only = re.compile(args.only) if args.only else None
    for folder in args.folders:
        bdir = os.path.join(args.out, impl, folder)
        for t in parse_testlist(args.suite, folder):
            t = dict(t, impl=impl)
            if only and not only.search("%s %s/%s %d" % (impl, folder, t["test"], t["np"])):
                continue
            skip = None
            if t["np"] > args.max_np:
                skip = "needs %d ranks (> --max-np %d)" % (t["np"], args.max_np)
            elif float(t["opts"].get("mem", 0) or 0) > args.max_mem:
                skip = "needs %s GB (> --max-mem %g)" % (t["opts"]["mem"], args.max_mem)
            elif "mpiversion" in t["opts"] and not mpi_version_ok(impl, t["opts"]["mpiversion"]):
                skip = "needs MPI %s" % t["opts"]["mpiversion"]
            if skip:
                t["verdict"], t["reason"] = "SKIP", skip
            elif not os.path.exists(os.path.join(bdir, t["prog"])):
                ff = os.path.join(bdir, t["prog"] + ".buildfail")
                t["verdict"] = "NOBUILD"
                t["reason"] = (open(ff).readline().strip() if os.path.exists(ff)
                               else "not built (run `build` first)")
                if not os.path.exists(ff):
                    t["verdict"], t["reason"] = "SKIP", "not built (run `build` first)"
            sel.append(t)
    return sel


def launcher_argv(impl, t, wrap, extra_env):
    argv = [IMPLS[impl]["run"]]
    if impl == "openmpi":
        argv += ["--oversubscribe"]
        for k in list(t["env"]) + list(extra_env):
            argv += ["-x", k]
    argv += ["-n", str(t["np"]), "./" + t["prog"]] + t["args"]
    return shlex.split(wrap) + argv if wrap else argv


def descendants(pid):
    """All live descendants of pid (Linux /proc walk)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_all(pgid, pids, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for q in pids:
        try:
            os.kill(q, sig)
        except (ProcessLookupError, PermissionError):
            pass


def run_once(args, t, wrap, extra_env):
    bdir = os.path.join(args.out, t["impl"], t["folder"])
    argv = launcher_argv(t["impl"], t, wrap, extra_env)
    env = dict(os.environ)
    if t["impl"] == "openmpi":
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.update(t["env"])
    env.update(extra_env)
    limit = float(t["opts"].get("timeLimit", 0) or 0) or args.timeout
    if args.timeout_cap:
        limit = min(limit, args.timeout_cap)
    t0 = time.time()
    with tempfile.TemporaryFile() as outf:
        p = subprocess.Popen(argv, cwd=bdir, env=env, stdin=subprocess.DEVNULL, stdout=outf,
                             stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            rc = p.wait(timeout=limit)
        except KeyboardInterrupt:
            # interrupted (Ctrl-C or SIGTERM): leave no ranks behind
            victims = descendants(p.pid)
            kill_all(p.pid, victims, signal.SIGTERM)
            time.sleep(1)
            kill_all(p.pid, descendants(p.pid) + victims, signal.SIGKILL)
            raise
        except subprocess.TimeoutExpired:
            timed_out = True
            # Open MPI puts ranks in process groups of their own: kill the launcher's group
            # and every descendant found under /proc.
            victims = descendants(p.pid)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                kill_all(p.pid, victims, sig)
                try:
                    p.wait(timeout=5)
                    if sig == signal.SIGTERM:
                        time.sleep(1)
                except subprocess.TimeoutExpired:
                    pass
            rc = p.returncode
        # stragglers (ranks that outlived the launcher)
        kill_all(p.pid, [], signal.SIGKILL)
        secs = time.time() - t0
        outf.seek(0)
        out = outf.read().decode("utf-8", "replace")
    if timed_out:
        verdict = "TIMEOUT"
    elif rc == 0 and re.search(r"^\s*No Errors\s*$", out, re.M):
        verdict = "PASS"
    else:
        verdict = "FAIL"
    return verdict, rc, secs, out, argv


def want_rerun(args, rec, verdict, no_rerun):
    """Rerun a failed test once, except known failures (they would only cost time)."""
    if not args.rerun or (rec["impl"], rec["id"]) in no_rerun:
        return False
    if verdict == "TIMEOUT" and not args.rerun_timeouts:
        return False
    if args.expect_entries and any(entry_matches(e, rec) for e in args.expect_entries):
        return False
    return True


def run_config(args, impls, wrap, extra_env, label, no_rerun=(), skip_failed=None):
    """Run all selected tests of each impl in one configuration; returns the result list.
    no_rerun: (impl, id) pairs not to rerun on failure (e.g. those failing plain);
    skip_failed: {(impl, id): verdict} of those not to run at all (compare without --all)."""
    results = []
    for impl in impls:
        tests = select_tests(args, impl)
        for t in tests:
            rec = {"config": label, "impl": impl, "folder": t["folder"], "test": t["test"],
                   "prog": t["prog"], "np": t["np"], "args": t["args"], "env": t["env"],
                   "id": t["id"]}
            if "verdict" not in t and skip_failed is not None and (impl, t["id"]) in no_rerun:
                t["verdict"], t["reason"] = "SKIP", "fails plain (%s)" % skip_failed.get(
                    (impl, t["id"]), "?")
            if "verdict" in t:
                rec.update(verdict=t["verdict"], seconds=0.0, reason=t["reason"])
            else:
                verdict, rc, secs, out, argv = run_once(args, t, wrap, extra_env)
                rec.update(rc=rc, seconds=round(secs, 2), argv=argv)
                if verdict != "PASS" and want_rerun(args, rec, verdict, no_rerun):
                    first = {"verdict": verdict, "rc": rc, "seconds": round(secs, 2),
                             "tail": out.splitlines()[-args.tail:]}
                    verdict, rc, secs2, out, argv = run_once(args, t, wrap, extra_env)
                    rec.update(rc=rc, seconds=round(secs + secs2, 2), first_try=first,
                               rerun=True)
                rec["verdict"] = verdict
                if verdict != "PASS":
                    rec["tail"] = out.splitlines()[-args.tail:]
                    rec["reason"] = failure_reason(out, rc, verdict)
            flag = " (passed on rerun: flaky)" if rec.get("rerun") and rec["verdict"] == "PASS" \
                else ""
            extra = ""
            if rec["verdict"] != "PASS":
                extra = "  -- " + rec.get("reason", "")
            if rec["verdict"] != "SKIP" or args.verbose:
                log("%-7s %6.1fs  %-8s %-7s %s%s%s%s" % (
                    rec["verdict"], rec["seconds"], impl, label, rec["id"],
                    (" " + " ".join(t["args"])) if t["args"] and args.verbose else "", flag,
                    extra))
            results.append(rec)
    return results


def failure_reason(out, rc, verdict):
    if verdict == "TIMEOUT":
        return "timed out"
    lines = [re.sub(r"^(\[[^\]]*\]\s*)+", "", l.strip()) for l in out.splitlines() if l.strip()]
    if any(l.startswith("Test Skipped") for l in lines):
        return "prints 'Test Skipped' (feature not available), no ' No Errors'"
    for pat in (r"Found \d+ errors", r"MPI_ERR_\w+|Fatal error in \w+|error class",
                r"[Ee]rror|[Ss]egmentation|signal|Abort|abort|failed|Failed"):
        for l in lines:
            if re.search(pat, l):
                return l[:200]
    return ("exit code %s, no ' No Errors'" % rc) + ((": " + lines[-1][:150]) if lines else "")


def summarize(results, label=""):
    by = {}
    for r in results:
        k = (r["impl"], r["folder"])
        d = by.setdefault(k, {"PASS": 0, "FAIL": 0, "TIMEOUT": 0, "SKIP": 0, "NOBUILD": 0,
                              "flaky": 0, "seconds": 0.0})
        d[r["verdict"]] += 1
        d["seconds"] += r.get("seconds", 0.0)
        if r.get("rerun") and r["verdict"] == "PASS":
            d["flaky"] += 1
    log("")
    log("Summary%s:" % ((" (" + label + ")") if label else ""))
    log("  %-8s %-10s %5s %5s %7s %7s %5s %5s %8s" % ("impl", "folder", "pass", "fail", "timeout",
                                                   "nobuild", "skip", "flaky", "seconds"))
    for (impl, folder), d in by.items():
        log("  %-8s %-10s %5d %5d %7d %7d %5d %5d %8.1f" % (
            impl, folder, d["PASS"], d["FAIL"], d["TIMEOUT"], d["NOBUILD"], d["SKIP"],
            d["flaky"], d["seconds"]))
    skipped = [r for r in results if r["verdict"] == "SKIP"]
    if skipped:
        log("  skipped: " + ", ".join("%s:%s" % (r["impl"], r["id"]) for r in skipped[:60])
            + (" ..." if len(skipped) > 60 else ""))
    flaky = [r for r in results if r.get("rerun") and r["verdict"] == "PASS"]
    for r in flaky:
        log("  flaky (passed on rerun): %s %s" % (r["impl"], r["id"]))
    return {"%s %s" % k: v for k, v in by.items()}


# ----------------------------------------------------------------------------- expectations

def load_expect(path):
    """[(impl, folder/test, np or None, reason, lineno)]"""
    entries = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            body, _, reason = line.partition("#")
            toks = body.split()
            if not toks:
                continue
            if len(toks) not in (2, 3) or (len(toks) == 3 and not toks[2].isdigit()):
                sys.exit("%s:%d: expected `<impl> <folder>/<test>[ <np>] # reason`" % (path, n))
            entries.append((toks[0], toks[1], int(toks[2]) if len(toks) == 3 else None,
                            reason.strip(), n))
    return entries


def entry_matches(e, r):
    impl, name, np_, _, _ = e
    if impl != r["impl"] or (np_ is not None and np_ != r["np"]):
        return False
    full = "%s/%s" % (r["folder"], r["test"])
    base = "%s/%s" % (r["folder"], r["prog"])
    return name in (full, base)


def check_expect(results, entries, path):
    """Returns the number of differences between the plain fail set and the list."""
    ran = [r for r in results if r["verdict"] != "SKIP"]
    diffs = 0
    for r in ran:
        if r["verdict"] in FAIL_VERDICTS and not any(entry_matches(e, r) for e in entries):
            log("NEW FAILURE (not in %s): %s %s %s -- %s" % (
                os.path.relpath(path), r["impl"], r["id"], r["verdict"], r.get("reason", "")))
            diffs += 1
    for e in entries:
        matched = [r for r in ran if entry_matches(e, r)]
        if "(may pass)" in e[3]:
            continue
        if matched and not any(r["verdict"] in FAIL_VERDICTS for r in matched):
            log("NOW PASSES (listed at %s:%d, remove it): %s %s%s" % (
                os.path.relpath(path), e[4], e[0], e[1], (" %d" % e[2]) if e[2] else ""))
            diffs += 1
    if diffs == 0:
        log("plain failures match %s" % os.path.relpath(path))
    return diffs


def parse_env(items):
    env = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep:
            sys.exit("--env wants K=V, got %r" % it)
        env[k] = v
    return env


def cmd_run(args):
    t0 = time.time()
    label = "wrapped" if (args.wrap or args.env) else "plain"
    results = run_config(args, args.mpi, args.wrap, parse_env(args.env), label)
    summary = summarize(results)
    log("total %.1fs" % (time.time() - t0))
    rc = 0
    if args.expect:
        rc = 1 if check_expect(results, load_expect(args.expect), args.expect) else 0
    elif any(r["verdict"] in ("FAIL", "TIMEOUT") for r in results):
        rc = 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"configs": {label: {"wrap": args.wrap, "env": parse_env(args.env)}},
                       "summary": summary, "results": results}, f, indent=1)
    return rc


def cmd_compare(args):
    configs = []
    base_env = parse_env(args.env)
    for c in args.config or []:
        name, sep, envs = c.partition(":")
        if not sep:
            sys.exit("--config wants NAME:K=V[,K=V...] (or NAME: for none), got %r" % c)
        env = dict(base_env)
        env.update(parse_env([e for e in envs.split(",") if e]))
        configs.append((name, env))
    if not configs:
        configs = [("wrapped", base_env)]
    if not args.wrap and all(not e for _, e in configs):
        sys.exit("compare needs --wrap and/or --config NAME:K=V")
    all_results = []
    if args.plain_from:
        plain = []
        for path in args.plain_from:
            plain += [r for r in json.load(open(path))["results"]
                      if r["config"] == "plain" and r["impl"] in args.mpi
                      and r["folder"] in args.folders]
        log("plain results read from %s" % ", ".join(args.plain_from))
    else:
        plain = run_config(args, args.mpi, None, {}, "plain")
    all_results += plain
    summaries = {"plain": summarize(plain, "plain")}
    rc = 0
    expect = load_expect(args.expect) if args.expect else []
    if args.expect and check_expect(plain, expect, args.expect):
        rc = 1
    pmap = {(r["impl"], r["id"]): r for r in plain}
    # A timeout the plain run is known to hit now and then ("(may pass)" in
    # --expect: e.g. MPICH polling without yielding, 4 ranks on 2 CPUs)
    # says nothing about the wrapper when the wrapped run times out too:
    # under two pretend nodes it runs the MPI's own collectives (plain MPICH
    # passed coll/allgatherv4 4 in 59.8 s of its 60). A wrapped FAIL of
    # such a test still counts.
    may_pass = [e for e in expect if "(may pass)" in e[3]]
    regressions, improvements, load_dependent = [], [], []
    for name, env in configs:
        failed_plain = {(r["impl"], r["id"]) for r in plain if r["verdict"] != "PASS"}
        skip = None if args.all else {(r["impl"], r["id"]): r["verdict"] for r in plain
                                      if r["verdict"] != "PASS"}
        res = run_config(args, args.mpi, args.wrap, env, name, failed_plain, skip)
        all_results += res
        summaries[name] = summarize(res, name)
        for r in res:
            p = pmap.get((r["impl"], r["id"]))
            if p is None:
                continue
            if p["verdict"] == "PASS" and r["verdict"] != "PASS" and r["verdict"] != "SKIP":
                if r["verdict"] == "TIMEOUT" and any(entry_matches(e, r) for e in may_pass):
                    load_dependent.append((name, r))
                else:
                    regressions.append((name, r))
            elif p["verdict"] in ("FAIL", "TIMEOUT") and r["verdict"] == "PASS":
                improvements.append((name, r))
    log("")
    if regressions:
        log("DIFFERENCES: %d test(s) pass plain but not wrapped:" % len(regressions))
        for name, r in regressions:
            log("  [%s] %s %s: %s -- %s" % (name, r["impl"], r["id"], r["verdict"],
                                            r.get("reason", "")))
            for l in r.get("tail", [])[-5:]:
                log("      | " + l)
        rc = 1
    else:
        log("no differences: every test passing plain passes in %s" %
            ", ".join(n for n, _ in configs))
    for name, r in improvements:
        log("  note: [%s] %s %s fails plain but passes wrapped" % (name, r["impl"], r["id"]))
    for name, r in load_dependent:
        log("  note: [%s] %s %s timed out wrapped: a load-dependent timeout of plain MPI too"
            " (listed \"(may pass)\" in %s), not counted" % (name, r["impl"], r["id"],
                                                         os.path.relpath(args.expect)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"configs": dict([("plain", {"wrap": None, "env": {}})] +
                                       [(n, {"wrap": args.wrap, "env": e}) for n, e in configs]),
                       "summary": summaries, "results": all_results,
                       "differences": [dict(r, config=n) for n, r in regressions],
                       "load_dependent": [dict(r, config=n) for n, r in load_dependent]},
                      f, indent=1)
    return rc


IMPL_NAME = {"openmpi": "Open MPI 4.1", "mpich": "MPICH 4.0"}


def cmd_expect(args):
    """Print an expected-failures file from the plain results of earlier --json files."""
    results = []
    for path in args.files:
        results += [r for r in json.load(open(path))["results"] if r["config"] == "plain"]
    lines = []
    done = set()
    for r in results:
        if r["verdict"] not in FAIL_VERDICTS:
            continue
        if r["verdict"] == "NOBUILD":
            key = (r["impl"], "%s/%s" % (r["folder"], r["prog"]), "")
            why = r.get("reason", "")
            m = re.match(r"(.*) missing \(undefined reference\)", why)
            if m:
                why = "does not link: %s missing in %s" % (m.group(1), IMPL_NAME[r["impl"]])
            else:
                why = "does not compile: " + why
        else:
            key = (r["impl"], "%s/%s" % (r["folder"], r["test"]), " %d" % r["np"])
            why = "%s: %s" % (r["verdict"].lower(), r.get("reason", ""))
            if r.get("args") or r.get("env"):
                why += "  [" + " ".join(r.get("args", []) + ["%s=%s" % kv for kv in
                                                              r.get("env", {}).items()]) + "]"
        if key in done:
            continue
        done.add(key)
        lines.append("%-8s %-34s # %s" % (key[0], key[1] + key[2], why.replace("#", "No.")))
    for l in lines:
        print(l)
    return 0


# ----------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--mpi", default="openmpi,mpich",
                        help="comma list of MPIs: openmpi, mpich (default both)")
    common.add_argument("--folders", default=",".join(DEFAULT_FOLDERS),
                        help="comma list of suite folders (default %(default)s)")
    common.add_argument("--suite", default=DEFAULT_SUITE, help="suite root (default %(default)s)")
    common.add_argument("--out", default=DEFAULT_OUT, help="build root (default %(default)s)")
    common.add_argument("--json", help="write results as JSON to FILE")
    common.add_argument("-v", "--verbose", action="store_true")

    b = sub.add_parser("build", parents=[common], help="compile the tests")
    b.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)

    runp = argparse.ArgumentParser(add_help=False)
    runp.add_argument("--only", help="regex on '<impl> <folder>/<test> <np>'")
    runp.add_argument("--max-np", type=int, default=8, help="skip tests needing more ranks (8)")
    runp.add_argument("--max-mem", type=float, default=2.0,
                      help="skip tests whose testlist mem= (GB) exceeds this (2)")
    runp.add_argument("--timeout", type=float, default=60.0,
                      help="seconds per test when the testlist gives no timeLimit (60)")
    runp.add_argument("--timeout-cap", type=float, default=0,
                      help="upper bound on any test's time limit (0: none)")
    runp.add_argument("--no-rerun", dest="rerun", action="store_false",
                      help="do not rerun a failing test once")
    runp.add_argument("--no-rerun-timeouts", dest="rerun_timeouts", action="store_false",
                      help="rerun failures but not timeouts")
    runp.add_argument("--tail", type=int, default=20, help="output lines kept on failure")
    runp.add_argument("--wrap", help="command put before the mpirun argv (shlex-split)")
    runp.add_argument("--env", action="append", help="K=V added to the environment (repeatable)")
    runp.add_argument("--expect", help="known plain failures file; exit 1 when the set differs")

    sub.add_parser("run", parents=[common, runp], help="run the built tests")
    c = sub.add_parser("compare", parents=[common, runp],
                       help="run plain and wrapped, fail on tests that only fail wrapped")
    c.add_argument("--config", action="append",
                   help="NAME:K=V[,K=V] a wrapped configuration (repeatable; default one, "
                        "'wrapped', with --env only)")
    c.add_argument("--all", action="store_true",
                   help="also run, wrapped, the tests that fail plain (default: skip them)")
    c.add_argument("--plain-from", action="append",
                   help="reuse the plain results of earlier --json files (repeatable)")

    e = sub.add_parser("expect", help="print an expected-failures list from --json results")
    e.add_argument("files", nargs="+")

    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    if args.cmd == "expect":
        return cmd_expect(args)
    if not args.cmd:
        ap.print_help()
        return 2
    args.mpi = [m for m in args.mpi.split(",") if m]
    for m in args.mpi:
        if m not in IMPLS:
            sys.exit("unknown MPI %r (openmpi, mpich)" % m)
    args.folders = [f.strip("/") for f in args.folders.split(",") if f]
    args.expect_entries = load_expect(args.expect) if getattr(args, "expect", None) else []
    if not os.path.isdir(args.suite):
        log("NOTICE: suite %s absent; nothing to do" % args.suite)
        return 0
    for f in args.folders:
        if not os.path.isdir(os.path.join(args.suite, f)):
            sys.exit("no folder %s in %s" % (f, args.suite))
    return {"build": cmd_build, "run": cmd_run, "compare": cmd_compare}[args.cmd](args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
