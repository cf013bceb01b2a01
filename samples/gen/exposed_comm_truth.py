"""Exposed communication of one rank's Kineto trace, read from its raw events with plain `json`
(independently of steplens), for `tests/it/ranks.rs`.

Rules (docs/findings.md, `exposed_communication`):
- a step runs from its `ProfilerStep#N` host start (or the previous step's end, when later) to
  the later of its host end and the end of the device work that runtime calls wholly inside it
  launched (linked by `correlation`);
- communication: the union of the NCCL kernels inside the step; compute: the union of every
  other kernel, copy and memset; exposed: communication with no compute beside it;
- the modelled loss: exposed, capped by the step's compute that is not beside communication.

Usage: python3 samples/gen/exposed_comm_truth.py TRACE.json.gz
Prints, per step: name, step ns, communication ns, exposed ns, modelled loss ns.
"""
import gzip
import json
import sys


def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def total(iv):
    return sum(b - a for a, b in iv)


def minus(keep, cut):
    out = []
    for a, b in keep:
        cur = a
        for c, d in cut:
            if d <= cur or c >= b:
                continue
            if c > cur:
                out.append([cur, c])
            cur = max(cur, d)
        if cur < b:
            out.append([cur, b])
    return out


def clip(iv, a, b):
    return [[max(x, a), min(y, b)] for x, y in iv if min(y, b) > max(x, a)]


def main(path):
    trace = json.load(gzip.open(path))
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")
                    and e.get("cat") in ("cpu_op", "user_annotation")), key=lambda e: e["ts"])
    device = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    runtime = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    by_correlation = {}
    for k in device:
        by_correlation.setdefault(k["args"].get("correlation"), []).append(k)
    windows, prev = [], steps[0]["ts"]
    for s in steps:
        a, b = s["ts"], s["ts"] + s["dur"]
        device_end = b
        for r in runtime:
            if a <= r["ts"] and r["ts"] + r["dur"] <= b:
                for k in by_correlation.get(r["args"].get("correlation"), []):
                    device_end = max(device_end, k["ts"] + k["dur"])
        start = max(prev, a)
        end = max(device_end, start)
        windows.append((s["name"], start, end))
        prev = end
    comm = union([[k["ts"], k["ts"] + k["dur"]] for k in device if "nccl" in k["name"].lower()])
    compute = union([[k["ts"], k["ts"] + k["dur"]] for k in device
                     if "nccl" not in k["name"].lower()])
    for name, a, b in windows:
        c = clip(comm, a, b)
        exposed = minus(c, compute)
        work = clip(compute, a, b)
        free = total(minus(work, c))
        print(name, round((b - a) * 1000), round(total(c) * 1000), round(total(exposed) * 1000),
              round(min(total(exposed), free) * 1000))


if __name__ == "__main__":
    main(sys.argv[1])
