#!/usr/bin/env python3
"""Compare steplens against Python json.load and Holistic Trace Analysis (HTA).

Usage:
    python3 bench/compare.py TRACE [--steplens PATH] [--skip-hta] [--json OUT]

(PATH: the steplens-bench binary, `cargo build --release -p steplens-tools`.)

TRACE is a PyTorch profiler (Kineto) Chrome-trace JSON file, plain or .gz.
Every tool runs in its own fresh subprocess, so each peak-memory figure
belongs to one tool. Peak RSS comes from GNU time (/usr/bin/time -f %M) when
it is installed; otherwise from the children themselves (VmHWM) and, for
steplens, its own peak_rss_bytes. (A child's ru_maxrss from wait4() is not
used when time is there: on Linux it starts from the RSS of the process that
spawned it, i.e. of this script.) Wall times are taken around the measured
work: steplens reports its own figures; the Python children time the work
only, not interpreter start-up or imports (HTA's import time is kept apart).

The file is read once before any tool runs, so every tool starts with the
trace in the page cache. See bench/README.md.
"""

import argparse
import datetime
import gzip
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MIB = 1024 * 1024
MARK = "@@compare@@ "  # prefix of the result lines the Python children print

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BINARY = os.path.join("target", "release", "steplens-bench")
STEPLENS_KEYS = (
    "file_bytes",
    "events",
    "ingest_s",
    "ingest_mb_s",
    "events_per_s",
    "report_s",
    "peak_rss_bytes",
    "private_bytes",
)

# ---------------------------------------------------------------- children

# Children report VmHWM (peak RSS of their own address space) rather than
# ru_maxrss: on Linux a child's ru_maxrss starts from the RSS of the process
# that spawned it (with vfork, that process's *peak*), so it is not per-tool.
CHILD_COMMON = r"""
import json, resource, sys, time
MARK = %r

def peak_rss_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

def emit(**kw):
    kw["peak_rss_kb"] = peak_rss_kb()
    print(MARK + json.dumps(kw), flush=True)

def reason(e):
    msg = str(e).strip().splitlines()
    return type(e).__name__ + (": " + msg[0] if msg else "")
""" % MARK

JSON_LOAD_CHILD = CHILD_COMMON + r"""
import gzip
path = sys.argv[1]
t0 = time.perf_counter()
with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
    d = json.load(f)
n = len(d["traceEvents"])
t1 = time.perf_counter()
emit(phase="load", wall_s=t1 - t0, events=n)
"""

HTA_CHILD = CHILD_COMMON + r"""
import os, tempfile, traceback

path = os.path.abspath(sys.argv[1])
t0 = time.perf_counter()
try:
    import hta
    from hta.trace_analysis import TraceAnalysis
except ImportError as e:
    missing = getattr(e, "name", None) or ""
    if missing == "hta":
        hint = "HTA is not installed: pip install HolisticTraceAnalysis"
    else:
        hint = ("HTA is installed but its import failed (%s); install the missing "
                "dependency, e.g. pip install %s" % (reason(e), missing or "<module>"))
    emit(phase="import", error=hint)
    sys.exit(3)
t1 = time.perf_counter()
version = None
try:
    from importlib.metadata import version as _v
    version = _v("HolisticTraceAnalysis")
except Exception:
    try:
        from hta.version import __version_tuple__
        version = ".".join(str(x) for x in __version_tuple__)
    except Exception:
        pass
emit(phase="import", wall_s=t1 - t0, version=version)

# HTA takes a directory of per-rank traces. It picks up every *.json / *.gz
# file in it and finds the rank by a regex ('"rank":\s+N') on the first line
# that matches; without one it warns and uses rank 0. A symlink is enough.
with tempfile.TemporaryDirectory(prefix="steplens-hta-") as tmp:
    name = "rank-0.json.gz" if path.endswith(".gz") else "rank-0.json"
    os.symlink(path, os.path.join(tmp, name))
    t2 = time.perf_counter()
    try:
        ta = TraceAnalysis(trace_dir=tmp)
    except BaseException as e:
        traceback.print_exc()
        emit(phase="load", error=reason(e))
        sys.exit(4)
    t3 = time.perf_counter()
    try:
        events = int(sum(len(df) for df in ta.t.traces.values()))
    except Exception:
        events = None
    emit(phase="load", wall_s=t3 - t2, events=events,
         ranks=sorted(int(r) for r in ta.t.traces.keys()))
    try:
        df = ta.get_temporal_breakdown(visualize=False)
        rows = len(df)
    except BaseException as e:
        traceback.print_exc()
        emit(phase="temporal", error=reason(e))
        sys.exit(5)
    t4 = time.perf_counter()
    emit(phase="temporal", wall_s=t4 - t3, rows=rows)
"""


# ------------------------------------------------------------------ helpers


def find_gnu_time():
    """Path of GNU time if it is there and reports %M sanely, else None."""
    for c in ("/usr/bin/time", "/bin/time"):
        if os.path.isfile(c) and os.access(c, os.X_OK):
            try:
                r = subprocess.run(
                    [c, "-f", "%M", "true"], capture_output=True, text=True, timeout=10
                )
                if r.returncode == 0 and r.stderr.strip().splitlines()[-1].isdigit():
                    return c
            except (OSError, subprocess.SubprocessError, IndexError):
                pass
    return None


GNU_TIME = find_gnu_time()


def run_child(argv, timeout):
    """Run argv, return dict(rc, wall_s, maxrss_bytes, stdout, stderr, timed_out).

    Peak RSS: GNU time's %M when /usr/bin/time exists (time is a small process
    that forks the tool, so the figure is the tool's own); otherwise the
    ru_maxrss of os.wait4() for this child, which on Linux can't be lower than
    this script's own RSS (a floor of a few tens of MB, see README).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(prefix="compare-time-") as tf:
        full = argv
        if GNU_TIME:
            full = [GNU_TIME, "-f", "%M", "-o", tf.name] + list(argv)
        t0 = time.perf_counter()
        # Own session, so a timeout or Ctrl-C can end the tool and its children
        # (the process group we created) without touching anything else.
        p = subprocess.Popen(
            full, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
        )
        deadline = None if timeout is None else t0 + timeout
        timed_out = False

        def kill_group():
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass

        try:
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid == p.pid:
                    break
                if deadline is not None and not timed_out and time.perf_counter() > deadline:
                    timed_out = True
                    kill_group()
                time.sleep(0.01)
        except BaseException:
            kill_group()
            try:
                os.waitpid(p.pid, 0)
            except OSError:
                pass
            raise
        wall = time.perf_counter() - t0
        if timed_out:
            kill_group()  # stragglers in the group, if any
        rc = os.waitstatus_to_exitcode(status)
        p.returncode = rc  # keep Popen from waiting for it again
        maxrss = ru.ru_maxrss * 1024  # Linux reports KiB
        method = "wait4 ru_maxrss"
        if GNU_TIME:
            with open(tf.name) as f:
                lines = [l.strip() for l in f if l.strip()]
            if lines and lines[-1].isdigit():
                maxrss = int(lines[-1]) * 1024
                method = "GNU time %M"
            # GNU time exits 128+N when the tool died of signal N.
            if rc > 128 and any("terminated by signal" in l for l in lines):
                rc = -(rc - 128)
        out.seek(0)
        err.seek(0)
        return {
            "rc": rc,
            "wall_s": wall,
            "maxrss_bytes": maxrss,
            "rss_method": method,
            "stdout": out.read().decode("utf-8", "replace"),
            "stderr": err.read().decode("utf-8", "replace"),
            "timed_out": timed_out,
        }


def marked_lines(stdout):
    res = []
    for line in stdout.splitlines():
        if line.startswith(MARK):
            try:
                res.append(json.loads(line[len(MARK):]))
            except ValueError:
                pass
    return res


def tail(text, n=1):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:]) if lines else ""


def child_failure(r, timeout):
    if r["timed_out"]:
        return "timeout after %g s" % timeout
    if r["rc"] < 0:
        try:
            sig = signal.Signals(-r["rc"]).name
        except ValueError:
            sig = "signal %d" % -r["rc"]
        extra = " (killed: out of memory?)" if sig == "SIGKILL" else ""
        return "killed by %s%s" % (sig, extra)
    return "exit %d: %s" % (r["rc"], tail(r["stderr"]) or tail(r["stdout"]) or "no output")


def parse_json_object(text):
    """Find the JSON object a tool printed on stdout."""
    text = text.strip()
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            return obj
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
                if isinstance(obj, dict):
                    return obj
            except ValueError:
                pass
    i, j = text.find("{"), text.rfind("}")
    if 0 <= i < j:
        try:
            obj = json.loads(text[i : j + 1])
            if isinstance(obj, dict):
                return obj
        except ValueError:
            pass
    return None


def warm_and_measure(path):
    """Read the file once (page cache) and return its JSON byte count."""
    chunk = 1 * MIB
    n = 0
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            while True:
                b = f.read(chunk)
                if not b:
                    break
                n += len(b)
    else:
        with open(path, "rb") as f:
            while True:
                b = f.read(chunk)
                if not b:
                    break
                n += len(b)
    return n


def find_binary(arg):
    cands = [arg]
    if not os.path.isabs(arg):
        cands.append(os.path.join(REPO_ROOT, arg))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return None


def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# -------------------------------------------------------------------- tools


def run_steplens(binary, trace, runs, timeout):
    """Return (rows, raw) for the steplens binary."""
    results = []
    maxrss = 0
    for i in range(runs):
        r = run_child([binary, trace, "--format", "json"], timeout)
        if r["rc"] != 0 or r["timed_out"]:
            reason = child_failure(r, timeout)
            return [failed_row("steplens report", reason), failed_row("steplens ingest", reason)], {
                "error": reason,
                "stderr_tail": r["stderr"][-2000:],
            }
        obj = parse_json_object(r["stdout"])
        if obj is None:
            reason = "no JSON object on stdout: %r" % r["stdout"][:200]
            return [failed_row("steplens report", reason), failed_row("steplens ingest", reason)], {
                "error": reason
            }
        obj["_wait4_maxrss_bytes"] = r["maxrss_bytes"]
        obj["_process_wall_s"] = r["wall_s"]
        maxrss = max(maxrss, r["maxrss_bytes"])
        results.append(obj)

    missing = [k for k in STEPLENS_KEYS if k not in results[0]]
    if missing:
        print("warning: steplens-bench output lacks keys: %s" % ", ".join(missing), file=sys.stderr)

    def key(o):
        v = o.get("report_s")
        return v if num(v) else o["_process_wall_s"]

    ordered = sorted(results, key=key)
    med = ordered[(len(ordered) - 1) // 2]  # lower median: a real run, not an average
    if GNU_TIME:
        peak = maxrss
    else:
        # wait4's figure has a floor (this script's RSS); prefer the binary's own.
        peak = med.get("peak_rss_bytes") if num(med.get("peak_rss_bytes")) else maxrss
    report_s = med.get("report_s") if num(med.get("report_s")) else None
    ingest_s = med.get("ingest_s") if num(med.get("ingest_s")) else None
    rows = [
        {
            "tool": "steplens report",
            "what": "steplens-bench: ingest + full report (report_s)",
            "wall_s": report_s,
            "peak_rss_bytes": peak,
            "status": "ok" if report_s is not None else "failed: no report_s in output",
        },
        {
            "tool": "steplens ingest",
            "what": "steplens-bench: ingest only (ingest_s); memory is the whole run's peak",
            "wall_s": ingest_s,
            "peak_rss_bytes": peak,
            "status": "ok" if ingest_s is not None else "failed: no ingest_s in output",
        },
    ]
    raw = {
        "runs": results,
        "median_run": med,
        "report_s_all": [key(o) for o in results],
    }
    if len(results) > 1:
        raw["report_s_stdev"] = statistics.pstdev(raw["report_s_all"])
    return rows, raw


def run_json_load(trace, timeout):
    r = run_child([sys.executable, "-c", JSON_LOAD_CHILD, trace], timeout)
    res = {x["phase"]: x for x in marked_lines(r["stdout"])}
    if "load" not in res:
        return [failed_row("python json.load", child_failure(r, timeout))], None
    x = res["load"]
    return [
        {
            "tool": "python json.load",
            "what": "json.load(open(TRACE)); len(traceEvents)",
            "wall_s": x["wall_s"],
            "peak_rss_bytes": r["maxrss_bytes"] if GNU_TIME else x["peak_rss_kb"] * 1024,
            "self_reported_peak_rss_bytes": x["peak_rss_kb"] * 1024,
            "status": "ok",
            "events": x.get("events"),
        }
    ], x.get("events")


STEPLENS_PY_CHILD = CHILD_COMMON + r"""
path = sys.argv[1]
try:
    import steplens
except Exception as e:
    emit(phase="load", error="the steplens Python package is not installed (pip install ./python): " + reason(e))
    sys.exit(0)
t0 = time.perf_counter()
run = steplens.load(path)
t1 = time.perf_counter()
steps = run.steps()
n = len(steps)
t2 = time.perf_counter()
emit(phase="load", wall_s=t1 - t0, steps_s=t2 - t1, steps=n)
"""


def run_steplens_python(trace, timeout):
    """The Python package: steplens.load(TRACE).steps() in a fresh interpreter."""
    r = run_child([sys.executable, "-c", STEPLENS_PY_CHILD, trace], timeout)
    res = {x["phase"]: x for x in marked_lines(r["stdout"])}
    x = res.get("load")
    if x is None or "error" in x:
        return [failed_row("steplens (Python)", (x or {}).get("error") or child_failure(r, timeout))]
    return [
        {
            "tool": "steplens (Python)",
            "what": "steplens.load(TRACE).steps(): load + report, then the step table",
            "wall_s": x["wall_s"] + x["steps_s"],
            # The process's peak after the load: what a loaded Run holds, plus the interpreter.
            "peak_rss_bytes": r["maxrss_bytes"] if GNU_TIME else x["peak_rss_kb"] * 1024,
            "self_reported_peak_rss_bytes": x["peak_rss_kb"] * 1024,
            "status": "ok",
        }
    ]


def run_hta(trace, timeout):
    """Return (rows, info) for HTA load and HTA load+temporal breakdown."""
    r = run_child([sys.executable, "-c", HTA_CHILD, trace], timeout)
    res = {x["phase"]: x for x in marked_lines(r["stdout"])}
    info = {"stderr_tail": r["stderr"][-4000:], "process_wall_s": r["wall_s"]}
    imp = res.get("import", {})
    info["version"] = imp.get("version")
    info["import_s"] = imp.get("wall_s")
    if "error" in imp:
        info["error"] = imp["error"]
        return [failed_row("HTA load", imp["error"]), failed_row("HTA load+temporal", imp["error"])], info
    crash = child_failure(r, timeout) if (r["rc"] != 0 or r["timed_out"]) else None
    load = res.get("load")
    if load is None or "error" in load:
        why = (load or {}).get("error") or crash or "no result"
        return [failed_row("HTA load", why), failed_row("HTA load+temporal", why)], info
    rows = [
        {
            "tool": "HTA load",
            "what": "TraceAnalysis(trace_dir=dir with rank-0.json symlink)",
            "wall_s": load["wall_s"],
            "peak_rss_bytes": load["peak_rss_kb"] * 1024,
            "status": "ok",
            "events": load.get("events"),
        }
    ]
    info["ranks"] = load.get("ranks")
    info["dataframe_rows"] = load.get("events")
    tb = res.get("temporal")
    if tb is None or "error" in tb:
        why = (tb or {}).get("error") or crash or "no result"
        rows.append(failed_row("HTA load+temporal", why))
    else:
        rows.append(
            {
                "tool": "HTA load+temporal",
                "what": "the load above, then get_temporal_breakdown(visualize=False)",
                "wall_s": load["wall_s"] + tb["wall_s"],
                "peak_rss_bytes": r["maxrss_bytes"] if GNU_TIME else tb["peak_rss_kb"] * 1024,
                "self_reported_peak_rss_bytes": tb["peak_rss_kb"] * 1024,
                "status": "ok",
                "temporal_s": tb["wall_s"],
            }
        )
    return rows, info


def failed_row(tool, reason):
    return {"tool": tool, "wall_s": None, "peak_rss_bytes": None, "status": "failed: " + reason}


# ------------------------------------------------------------------- output


def fmt_s(v):
    if v is None:
        return "-"
    if v < 10:
        return "%.3f" % v
    if v < 100:
        return "%.2f" % v
    return "%.1f" % v


def fmt_x(v):
    if v is None:
        return "-"
    if v >= 100:
        return "%.0fx" % v
    if v >= 10:
        return "%.1fx" % v
    return "%.2fx" % v


def fmt_f(v, digits=1):
    return "-" if v is None else ("%%.%df" % digits) % v


def add_derived(rows, json_bytes, base):
    base_t = base["wall_s"] if base and base.get("status") == "ok" else None
    base_m = base["peak_rss_bytes"] if base and base.get("status") == "ok" else None
    for row in rows:
        t, m = row.get("wall_s"), row.get("peak_rss_bytes")
        row["mb_s"] = json_bytes / MIB / t if t else None
        row["peak_rss_mb"] = m / MIB if m else None
        row["time_vs_steplens"] = t / base_t if (t and base_t) else None
        row["memory_vs_steplens"] = m / base_m if (m and base_m) else None


def print_table(rows):
    head = ["tool", "wall s", "MB/s", "peak RSS MB", "vs steplens (time)", "vs steplens (memory)"]
    body = []
    for r in rows:
        if r["status"] != "ok":
            body.append([r["tool"], r["status"]])
            continue
        body.append(
            [
                r["tool"],
                fmt_s(r["wall_s"]),
                fmt_f(r["mb_s"]),
                fmt_f(r["peak_rss_mb"], 0),
                fmt_x(r["time_vs_steplens"]),
                fmt_x(r["memory_vs_steplens"]),
            ]
        )
    full = [b for b in body if len(b) == len(head)]
    w = [max(len(x[i]) for x in [head] + full) for i in range(len(head))]
    w[0] = max([w[0]] + [len(b[0]) for b in body])
    sep = "  "
    print(sep.join([head[0].ljust(w[0])] + [h.rjust(w[i]) for i, h in enumerate(head) if i]))
    print(sep.join("-" * x for x in w))
    for b in body:
        if len(b) == len(head):
            print(sep.join([b[0].ljust(w[0])] + [c.rjust(w[i]) for i, c in enumerate(b) if i]))
        else:
            print(b[0].ljust(w[0]) + sep + b[1])


# --------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(
        description="Compare steplens with python json.load and HTA on one Kineto trace."
    )
    ap.add_argument("trace", help="Kineto Chrome-trace JSON file (.json or .json.gz)")
    ap.add_argument(
        "--steplens",
        default=DEFAULT_BINARY,
        help="steplens binary (default: %(default)s, relative to the cwd or the repo root)",
    )
    ap.add_argument("--skip-hta", action="store_true", help="do not run HTA")
    ap.add_argument("--skip-json-load", action="store_true", help="do not run python json.load")
    ap.add_argument(
        "--skip-python-package",
        action="store_true",
        help="do not run the steplens Python package (pip install ./python in this interpreter)",
    )
    ap.add_argument("--json", metavar="OUT", help="also write every figure as JSON to OUT")
    ap.add_argument(
        "--steplens-runs",
        type=int,
        default=3,
        metavar="N",
        help="run steplens N times and keep the median run (default: %(default)s)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=1800,
        metavar="S",
        help="kill a tool after S seconds and report it as failed (default: %(default)s)",
    )
    a = ap.parse_args()

    trace = os.path.abspath(a.trace)
    if not os.path.isfile(trace):
        print("error: trace not found: %s" % a.trace, file=sys.stderr)
        return 2
    binary = find_binary(a.steplens)
    if binary is None:
        print(
            "error: steplens binary not found or not executable: %s\n"
            "Build it first with\n    cargo build --release\n"
            "in the repository root (%s), or pass --steplens PATH." % (a.steplens, REPO_ROOT),
            file=sys.stderr,
        )
        return 2
    if a.steplens_runs < 1:
        ap.error("--steplens-runs must be at least 1")

    file_bytes = os.path.getsize(trace)
    print("trace: %s" % trace, flush=True)
    print("warming the page cache (reading the file once) ...", flush=True)
    json_bytes = warm_and_measure(trace)
    if trace.endswith(".gz"):
        print(
            "size: %.1f MB gzip, %.1f MB of JSON (MB/s below uses the JSON size)"
            % (file_bytes / MIB, json_bytes / MIB)
        )
    else:
        print("size: %.1f MB" % (json_bytes / MIB))

    timeout = a.timeout if a.timeout and a.timeout > 0 else None
    rows = []
    out = {
        "trace": trace,
        "file_bytes": file_bytes,
        "json_bytes": json_bytes,
        "mb": "MiB (2^20 bytes)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": {
            "machine": platform.machine(),
            "system": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "steplens_binary": binary,
        "peak_rss_method": (
            "GNU time %M (per process)" if GNU_TIME else "wait4 ru_maxrss / self-reported VmHWM"
        ),
    }

    print("running steplens (%d run%s) ..." % (a.steplens_runs, "s" if a.steplens_runs > 1 else ""), flush=True)
    srows, sraw = run_steplens(binary, trace, a.steplens_runs, timeout)
    rows += srows
    out["steplens"] = sraw
    if "error" in sraw:
        print("steplens failed: %s" % sraw["error"], file=sys.stderr)

    if not a.skip_python_package:
        print("running steplens from Python (steplens.load(...).steps()) ...", flush=True)
        rows += run_steplens_python(trace, timeout)

    if not a.skip_json_load:
        print("running python json.load ...", flush=True)
        jrows, jevents = run_json_load(trace, timeout)
        rows += jrows
        out["json_load_events"] = jevents

    if not a.skip_hta:
        print("running HTA (slow: about a minute per 500 MB) ...", flush=True)
        hrows, hinfo = run_hta(trace, timeout)
        rows += hrows
        out["hta"] = hinfo
        if "error" in hinfo:
            print("HTA: %s (or pass --skip-hta)" % hinfo["error"], file=sys.stderr)

    add_derived(rows, json_bytes, rows[0])
    print()
    print_table(rows)
    print()

    # Notes under the table.
    notes = []
    med = sraw.get("median_run") or {}
    if med:
        if num(med.get("events")):
            notes.append("steplens events: %d" % med["events"])
        if num(med.get("private_bytes")):
            pb = med["private_bytes"]
            line = "steplens private (anonymous) memory after load: %.0f MB" % (pb / MIB)
            prow = rows[0]
            if prow.get("peak_rss_bytes"):
                line += (
                    " (its peak RSS of %.0f MB also counts pages of the trace file it maps,"
                    " which are page cache, not private memory)" % (prow["peak_rss_bytes"] / MIB)
                )
            notes.append(line)
        if num(med.get("peak_rss_bytes")):
            notes.append("steplens self-reported peak_rss_bytes: %.0f MB" % (med["peak_rss_bytes"] / MIB))
        if "report_s_stdev" in sraw:
            notes.append(
                "steplens report_s over %d runs: %s (median kept)"
                % (len(sraw["report_s_all"]), ", ".join(fmt_s(x) for x in sraw["report_s_all"]))
            )
    if out.get("json_load_events") is not None:
        notes.append("json.load traceEvents: %d" % out["json_load_events"])
    h = out.get("hta")
    if h:
        if h.get("version"):
            notes.append("HTA version: %s (import took %s s, not counted)" % (h["version"], fmt_s(h.get("import_s"))))
        if h.get("dataframe_rows") is not None:
            notes.append("HTA dataframe rows: %d" % h["dataframe_rows"])
    notes.append(
        "wall s: time of the work only (no process start-up, no imports); page cache warm; "
        "memory ratios use peak RSS; MB = 2^20 bytes"
    )
    for n in notes:
        print("  " + n)

    out["rows"] = rows
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
        print("\nwrote %s" % a.json)

    return 1 if "error" in sraw else 0


if __name__ == "__main__":
    sys.exit(main())
