#!/usr/bin/env python3
"""Ground truth for steplens' trace tests, computed independently of the Rust code.

Reads a Kineto / Chrome-trace JSON file (plain or gzip) with nothing but the standard
library and writes `<name>.truth.json` beside it (name = file name without `.json` /
`.json.gz`). Every timestamp is converted from the decimal text of the file (µs) to
integer nanoseconds with exact decimal arithmetic, rounding half away from zero.

Definitions (the Rust side must use the same ones):
  events                 len(traceEvents)
  events_by_ph           {ph: count}; missing ph -> ""
  events_by_cat          {cat: count}; missing cat -> ""
  x_events               count of ph == "X"
  flows                  {"s": n, "t": n, "f": n} (ph s / t / f)
  steps                  host steps: ph "X", cat "user_annotation", name starts with
                         "ProfilerStep#" (the device mirror, cat "gpu_user_annotation",
                         is excluded), sorted by (start_ns, name);
                         each {"name", "start_ns", "dur_ns", "pid", "tid"}
  "inside a step"        an event starts inside a step when
                         step.start_ns <= event.start_ns < step.start_ns + step.dur_ns
  dataloader_ns_per_step per step: sum of dur_ns of ph "X" events, any thread, whose name
                         starts with "enumerate(DataLoader)#" and whose cat is not
                         "gpu_user_annotation", that start inside the step
  cpu_op_count_per_step  per step: number of ph "X", cat "cpu_op" events on the step's
                         (pid, tid) that start inside the step
  top_ops                the 10 most frequent cpu_op (ph "X") names over the whole trace,
                         [{"name", "count"}], sorted by count descending then name ascending
                         (code-point order)
  scenario               free-form object passed in by the generator (what was planted)

Usage:  python3 truth.py TRACE [TRACE ...]          writes <name>.truth.json beside each
        python3 truth.py --stdout TRACE             prints instead
"""

import decimal
import gzip
import json
import os
import sys
from collections import Counter

DATALOADER_PREFIX = "enumerate(DataLoader)#"
STEP_PREFIX = "ProfilerStep#"

_CTX = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_UP)


def load_trace(path):
    """Parse the whole file; floats stay as exact decimal.Decimal values."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8", errors="surrogateescape")
    del raw
    doc = json.loads(text, parse_float=decimal.Decimal)
    if isinstance(doc, list):  # bare-array form of the Trace Event Format
        return {"traceEvents": doc}
    return doc


def us_to_ns(v):
    """µs value (int, Decimal, or numeric string) -> int ns, half away from zero."""
    if v is None:
        return None
    if isinstance(v, bool):
        raise TypeError("boolean timestamp")
    if isinstance(v, int):
        return v * 1000
    if isinstance(v, str):
        v = decimal.Decimal(v.strip())
    if isinstance(v, decimal.Decimal):
        ns = _CTX.multiply(v, decimal.Decimal(1000))
        return int(ns.to_integral_value(rounding=decimal.ROUND_HALF_UP, context=_CTX))
    if isinstance(v, float):  # never produced by load_trace; kept for callers
        return us_to_ns(decimal.Decimal(repr(v)))
    raise TypeError(f"unexpected timestamp type {type(v)!r}")


def compute(doc, scenario=None):
    events = doc.get("traceEvents", [])
    by_ph = Counter()
    by_cat = Counter()
    flows = {"s": 0, "t": 0, "f": 0}
    x_count = 0
    steps = []
    dl = []  # (start_ns, dur_ns)
    cpu_ops = {}  # (pid, tid) -> list of start_ns
    op_names = Counter()

    for ev in events:
        if not isinstance(ev, dict):
            by_ph[""] += 1
            by_cat[""] += 1
            continue
        ph = ev.get("ph", "")
        cat = ev.get("cat", "")
        if not isinstance(ph, str):
            ph = str(ph)
        if not isinstance(cat, str):
            cat = str(cat)
        by_ph[ph] += 1
        by_cat[cat] += 1
        if ph in flows:
            flows[ph] += 1
        if ph != "X":
            continue
        x_count += 1
        name = ev.get("name", "")
        if not isinstance(name, str):
            name = str(name)
        if cat == "user_annotation" and name.startswith(STEP_PREFIX):
            steps.append({
                "name": name,
                "start_ns": us_to_ns(ev.get("ts")),
                "dur_ns": us_to_ns(ev.get("dur", 0)),
                "pid": ev.get("pid"),
                "tid": ev.get("tid"),
            })
        if name.startswith(DATALOADER_PREFIX) and cat != "gpu_user_annotation":
            dl.append((us_to_ns(ev.get("ts")), us_to_ns(ev.get("dur", 0))))
        if cat == "cpu_op":
            op_names[name] += 1
            key = (_hashable(ev.get("pid")), _hashable(ev.get("tid")))
            cpu_ops.setdefault(key, []).append(us_to_ns(ev.get("ts")))

    steps.sort(key=lambda s: (s["start_ns"], s["name"]))

    dl_per_step = []
    ops_per_step = []
    for s in steps:
        lo = s["start_ns"]
        hi = lo + s["dur_ns"]
        dl_per_step.append(sum(d for (t, d) in dl if lo <= t < hi))
        starts = cpu_ops.get((_hashable(s["pid"]), _hashable(s["tid"])), [])
        ops_per_step.append(sum(1 for t in starts if lo <= t < hi))

    top = sorted(op_names.items(), key=lambda kv: (-kv[1], kv[0]))[:10]

    out = {
        "events": len(events),
        "events_by_ph": dict(sorted(by_ph.items())),
        "events_by_cat": dict(sorted(by_cat.items())),
        "x_events": x_count,
        "flows": flows,
        "steps": steps,
        "dataloader_ns_per_step": dl_per_step,
        "cpu_op_count_per_step": ops_per_step,
        "top_ops": [{"name": n, "count": c} for n, c in top],
    }
    if scenario is not None:
        out["scenario"] = scenario
    return out


def _hashable(v):
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


def trace_stem(path):
    base = os.path.basename(path)
    for suffix in (".json.gz", ".json"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def truth_path(path):
    return os.path.join(os.path.dirname(os.path.abspath(path)), trace_stem(path) + ".truth.json")


def write_truth(trace_path, scenario=None, out_path=None):
    """Compute the truth of `trace_path` and write it beside the trace. Returns the dict."""
    doc = load_trace(trace_path)
    truth = {"trace": os.path.basename(trace_path)}
    truth.update(compute(doc, scenario))
    del doc
    out_path = out_path or truth_path(trace_path)
    with open(out_path, "w") as f:
        json.dump(truth, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return truth


def main(argv):
    to_stdout = False
    paths = []
    for a in argv:
        if a == "--stdout":
            to_stdout = True
        else:
            paths.append(a)
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    for p in paths:
        if to_stdout:
            t = {"trace": os.path.basename(p)}
            t.update(compute(load_trace(p)))
            json.dump(t, sys.stdout, indent=1, ensure_ascii=False)
            print()
        else:
            write_truth(p)
            print(truth_path(p))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
