"""Truth for the memory samples, read from the traces' own `[memory]` events.

Independent of steplens: plain Python over the JSON. Rules (per device = (Device Type,
Device Id); events in time order, ties in file order):
- allocations / frees: events with Bytes > 0 / < 0; bytes_allocated: sum of positive Bytes;
- peak_allocated_bytes: max Total Allocated; min_allocated_bytes: min Total Allocated;
  peak_reserved_bytes: max Total Reserved;
- integrity_breaks: successive events whose Total Allocated differ by other than Bytes;
- never_freed_bytes: allocations (by Addr) with no later free of that Addr in the window;
- per step (ProfilerStep#N ranges): start_allocated_bytes = Total Allocated after the last event
  before the step (the first event's total minus its Bytes when none), peak = max(start, totals
  inside [start, end));
- memory_growth: expected when the start baseline rises at every step boundary over >= 3 steps
  by >= 1 MiB in all (steplens' default threshold); its never-freed top op is the one the
  scenario planted.

Usage: python3 samples/memory/truth.py  (writes *.truth.json next to the traces)
"""

import gzip
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICE = {0: "cpu", 1: "cuda", 15: "hpu"}


def truth(name: str) -> dict:
    with gzip.open(os.path.join(HERE, name)) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    steps = sorted(
        (e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")),
        key=lambda e: e["ts"],
    )
    mem = [(i, e) for i, e in enumerate(events) if e.get("name") == "[memory]"]
    by_dev = {}
    for i, e in mem:
        a = e["args"]
        kind = DEVICE.get(a["Device Type"], "device")
        dev = "cpu" if kind == "cpu" else f"{kind}:{max(a['Device Id'], 0)}"
        # ts in integer ns from the decimal text, as steplens reads it
        ts = round(float(e["ts"]) * 1000)
        by_dev.setdefault(dev, []).append((ts, i, a))
    devices = []
    for dev, evs in sorted(by_dev.items()):
        evs.sort(key=lambda x: (x[0], x[1]))
        live = {}
        breaks = 0
        for k, (_, _, a) in enumerate(evs):
            if a["Bytes"] > 0:
                live[a["Addr"]] = a["Bytes"]
            elif a["Bytes"] < 0:
                live.pop(a["Addr"], None)
            if k and a["Total Allocated"] - evs[k - 1][2]["Total Allocated"] != a["Bytes"]:
                breaks += 1
        per_step = []
        for s in steps:
            start = round(float(s["ts"]) * 1000)
            end = start + round(float(s["dur"]) * 1000)
            before = [x for x in evs if x[0] < start]
            base = before[-1][2]["Total Allocated"] if before else evs[0][2]["Total Allocated"] - evs[0][2]["Bytes"]
            inside = [x[2]["Total Allocated"] for x in evs if start <= x[0] < end]
            per_step.append({"step": s["name"], "start_allocated_bytes": base,
                             "peak_allocated_bytes": max([base] + inside)})
        rising = 1
        best = 1
        for k in range(1, len(per_step)):
            rising = rising + 1 if per_step[k]["start_allocated_bytes"] > per_step[k - 1]["start_allocated_bytes"] else 1
            best = max(best, rising)
        devices.append({
            "device": dev,
            "allocations": sum(1 for x in evs if x[2]["Bytes"] > 0),
            "frees": sum(1 for x in evs if x[2]["Bytes"] < 0),
            "bytes_allocated": sum(x[2]["Bytes"] for x in evs if x[2]["Bytes"] > 0),
            "peak_allocated_bytes": max(x[2]["Total Allocated"] for x in evs),
            "min_allocated_bytes": min(x[2]["Total Allocated"] for x in evs),
            "peak_reserved_bytes": max(x[2]["Total Reserved"] for x in evs),
            "integrity_breaks": breaks,
            "never_freed_bytes": sum(live.values()),
            "steps": per_step,
            "longest_rising_baseline_steps": best,
        })
    growth = any(d["longest_rising_baseline_steps"] >= 3 for d in devices)
    return {"trace": name, "devices": devices,
            "expected_findings": [{"kind": "memory_growth", "op": "aten::empty", "call_site": "generate.py:50"}] if growth else []}


if __name__ == "__main__":
    for name in ("train_clean.json.gz", "train_leak.json.gz"):
        t = truth(name)
        with open(os.path.join(HERE, name.replace(".json.gz", ".truth.json")), "w") as f:
            json.dump(t, f, indent=1, sort_keys=True)
            f.write("\n")
        print(name, [(d["device"], d["peak_allocated_bytes"], d["never_freed_bytes"]) for d in t["devices"]], t["expected_findings"])
