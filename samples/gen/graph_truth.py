"""Truth for `samples/hta/cuda_graphs_rank0.json.gz` (a real A100 torch.compile run whose
compiled regions replay CUDA graphs), read from the trace's raw events, independently of
steplens.

- Graph launches: every `cudaGraphLaunch` / `hipGraphLaunch` X event; its graph is the device
  work (kernel, gpu_memcpy, gpu_memset) that carries the launch's `correlation` id (the
  profiler writes one id for the call and every kernel of the replay). Per launch: the kernel
  count and the union of their intervals.
- Queued gaps: the device-idle gaps (no device work on any stream) of at least 10 µs inside
  `ProfilerStep#552`'s device-inclusive window (the step's start to the end of the last device
  work launched by a runtime call inside the host step), split by whether every piece of work
  starting at the gap's end was launched (its runtime call started) before the gap began. A
  queued gap is not the host's fault: the work was already issued.
- Graph GEMMs: the graph launches of that step that ran an fp32/TF32 cutlass GEMM
  (`s1688gemm`, `sgemm`).

Usage (the first writes the standard fields, this adds its own to the same file):
    python3 samples/gen/truth.py samples/hta/cuda_graphs_rank0.json.gz
    python3 samples/gen/graph_truth.py samples/hta/cuda_graphs_rank0.json.gz
"""
import gzip
import json
import sys

DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME = ("cuda_runtime", "cuda_driver")
STEP = "ProfilerStep#552"
MIN_GAP_US = 10


def union(intervals):
    merged = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def main(src):
    dst = src.removesuffix(".gz").removesuffix(".json") + ".truth.json"
    events = [e for e in json.load(gzip.open(src))["traceEvents"] if e.get("ph") == "X"]
    device = [e for e in events if e.get("cat") in DEVICE]
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("cat") in RUNTIME and "correlation" in e.get("args", {})}
    by_corr = {}
    for d in device:
        by_corr.setdefault(d["args"].get("correlation"), []).append(d)

    launches = []
    for e in sorted(events, key=lambda e: e["ts"]):
        if e.get("cat") in RUNTIME and "GraphLaunch" in e["name"]:
            work = by_corr.get(e["args"]["correlation"], [])
            busy = sum(b - a for a, b in union((w["ts"], w["ts"] + w["dur"]) for w in work))
            launches.append({"ts_us": e["ts"], "correlation": e["args"]["correlation"],
                             "kernels": len(work), "device_us": busy,
                             "names": sorted({w["name"] for w in work})})

    step = next(e for e in events if e["name"] == STEP)
    start, host_end = step["ts"], step["ts"] + step["dur"]
    inside = {c for c, e in calls.items() if start <= e["ts"] and e["ts"] + e["dur"] <= host_end}
    end = max([host_end] + [d["ts"] + d["dur"] for d in device
                             if d["args"].get("correlation") in inside])
    busy = union((max(d["ts"], start), min(d["ts"] + d["dur"], end)) for d in device
                 if d["ts"] < end and d["ts"] + d["dur"] > start)
    edges = [start] + [x for iv in busy for x in iv] + [end]
    gaps = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)
            if edges[i + 1] - edges[i] >= MIN_GAP_US]
    queued, late = [], []
    for a, b in gaps:
        starting = [d for d in device if d["ts"] == b]
        launched = [calls.get(d["args"].get("correlation")) for d in starting]
        if starting and all(c is not None and c["ts"] <= a for c in launched):
            queued.append([a, b])
        else:
            late.append([a, b])
    graph_gemms = [l for l in launches
                   if start <= l["ts_us"] <= host_end
                   and any("s1688gemm" in n or "sgemm" in n for n in l["names"])]

    # Matrix kernels of the step's window by precision, from their names: cutlass `s1688gemm` /
    # `sgemm` are fp32 storage (TF32 or fp32 math); `h16`, `f16`, `bf16`, `hgemm` reduced.
    def precision(name):
        low = name.lower()
        if any(k in low for k in ("bf16", "f16", "h16", "hgemm", "h1688", "h16816")):
            return "reduced"
        if any(k in low for k in ("s1688gemm", "sgemm", "s16816gemm", "tf32")):
            return "fp32"
        return None
    window = [d for d in device if start <= d["ts"] < end]
    fp32_gemm = [d for d in window if precision(d["name"]) == "fp32"]
    reduced_gemm = [d for d in window if precision(d["name"]) == "reduced"]
    fp32_us = sum(b - a for a, b in union((d["ts"], d["ts"] + d["dur"]) for d in fp32_gemm))

    with open(dst) as f:
        truth = json.load(f)
    truth |= {
        "graph_launches": {
            "calls": len(launches),
            "kernels": sum(l["kernels"] for l in launches),
            "device_ns": round(sum(l["device_us"] for l in launches) * 1000),
            "per_call": [{k: l[k] for k in ("ts_us", "correlation", "kernels", "device_us")}
                         for l in launches],
        },
        "step": STEP,
        "step_window_us": [start, end],
        "idle_gaps_min_us": MIN_GAP_US,
        "queued_gaps": {"count": len(queued), "total_us": round(sum(b - a for a, b in queued), 3)},
        "late_gaps": {"count": len(late), "total_us": round(sum(b - a for a, b in late), 3)},
        "fp32_gemm_kernels": {"count": len(fp32_gemm), "union_us": fp32_us,
                              "reduced_precision_gemm_kernels": len(reduced_gemm)},
        "advice_findings": {
            "no_mixed_precision": (
                f"an A100 (deviceProperties) runs {len(fp32_gemm)} fp32-storage GEMM kernels "
                f"(cutlass s1688gemm: TF32 tensor-op math) for {fp32_us / 1000:.1f} ms of "
                f"{STEP}'s window and {len(reduced_gemm)} bf16/fp16 ones; "
                f"{len(graph_gemms)} replayed CUDA graphs run some of them"
            ),
        },
        "graph_launches_with_fp32_gemm": {
            "count": len(graph_gemms),
            "kernels": sorted(l["kernels"] for l in graph_gemms),
        },
    }
    with open(dst, "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
