"""Cuts one `ProfilerStep#N` out of a Kineto trace, in the shape the profiler wrote it: the
metadata events, the top-level keys, every event that starts inside the step's device-inclusive
window (report-schema.md, Step) or encloses its start, and the flow pairs both of whose ends are
kept. Used to make `samples/hta/nccl_ddp_rank0.json.gz` from the HTA test data's
`nccl_parser_config/nccl_data.json.gz` (MIT licence, `samples/hta/LICENSE.MIT`).

Usage: python3 samples/gen/cut_trace.py IN.json.gz OUT.json.gz STEP_NAME
"""
import gzip
import json
import sys


def main(src, dst, step_name):
    trace = json.load(gzip.open(src))
    ev = trace["traceEvents"]
    step = next(e for e in ev if e.get("ph") == "X" and e["name"] == step_name
                and e.get("cat") in ("cpu_op", "user_annotation"))
    start, host_end = step["ts"], step["ts"] + step["dur"]
    # the device work that runtime calls wholly inside the step launched (by correlation)
    runtime = {e["args"]["correlation"] for e in ev
               if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
               and start <= e["ts"] and e["ts"] + e["dur"] <= host_end}
    end = max([host_end] + [e["ts"] + e["dur"] for e in ev if e.get("ph") == "X"
                            and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                            and e.get("args", {}).get("correlation") in runtime])

    def kept(e):
        if e.get("ph") == "M":
            return True
        ts = e.get("ts")
        if ts is None:
            return False
        if start <= ts <= end:
            return True
        return e.get("ph") == "X" and ts < start and ts + e.get("dur", 0) > start

    out = [e for e in ev if kept(e) and e.get("ph") not in ("s", "f", "t")]
    flows = {}
    for e in ev:
        if e.get("ph") in ("s", "f", "t") and kept(e):
            flows.setdefault((e.get("cat"), e.get("id")), []).append(e)
    for pair in flows.values():
        if {p["ph"] for p in pair} >= {"s", "f"}:
            out.extend(pair)
    trace["traceEvents"] = out
    with gzip.GzipFile(dst, "wb", mtime=0) as f:
        f.write(json.dumps(trace, separators=(",", ":")).encode())


if __name__ == "__main__":
    main(*sys.argv[1:4])
