"""Real 4-rank DDP runs for the `fragmented_collectives` finding, torch CPU profiler,
gloo over localhost.

- ``buckets_tiny/buckets_tiny_rank{0..3}.json.gz``: a 12-layer MLP under DistributedDataParallel with
  ``bucket_cap_mb=0.01``: every gradient gets its own bucket, so each step issues one small
  all_reduce per parameter (25 per step) instead of one.
- ``buckets_default/buckets_default_rank{0..3}.json.gz``: the same model with DDP's default buckets (25 MB):
  a handful of all_reduces per step; nothing to report.

The truth files are read back from each trace's own events by this script: per rank and
ProfilerStep, the ``gloo:all_reduce`` ranges that start in it (these CPU traces record no
message sizes).

Usage: python3 samples/ranks/generate.py [--truth-only]   (needs torch; about a minute)
"""

import gzip
import json
import os
import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 5  # wait=1, warmup=1, active=5
WORLD = 4


def model():
    torch.manual_seed(0)
    layers = []
    for _ in range(12):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(64, 10))


def rank_main(rank, prefix, bucket_cap_mb):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29533"
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    kwargs = {} if bucket_cap_mb is None else {"bucket_cap_mb": bucket_cap_mb}
    m = nn.parallel.DistributedDataParallel(model(), **kwargs)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
    out_dir = tempfile.mkdtemp()
    sched = torch.profiler.schedule(wait=1, warmup=1, active=STEPS, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                record_shapes=True, with_stack=True,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(out_dir)) as prof:
        for _ in range(STEPS + 2):
            loss = nn.functional.cross_entropy(m(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
    (name,) = os.listdir(out_dir)
    os.makedirs(os.path.join(HERE, prefix), exist_ok=True)
    dst = os.path.join(HERE, prefix, f"{prefix}_rank{rank}.json.gz")
    with open(os.path.join(out_dir, name), "rb") as src, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            shutil.copyfileobj(src, gz)
    shutil.rmtree(out_dir)
    dist.destroy_process_group()


def truth(prefix, fragmented):
    """Per rank and ProfilerStep, the gloo:all_reduce ranges starting in the step (read from the
    trace's events); the planted finding is one per rank and step."""
    per_rank, expected = {}, []
    for rank in range(WORLD):
        with gzip.open(os.path.join(HERE, prefix, f"{prefix}_rank{rank}.json.gz"), "rt") as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        steps = sorted((e for e in events if str(e["name"]).startswith("ProfilerStep#")), key=lambda e: e["ts"])
        counts = {}
        for s in steps:
            counts[s["name"]] = sum(1 for e in events if e["name"] == "gloo:all_reduce"
                                    and s["ts"] <= e["ts"] < s["ts"] + s["dur"])
            if fragmented:
                expected.append({"kind": "fragmented_collectives", "rank": rank, "step": s["name"],
                                 "count": counts[s["name"]]})
        per_rank[str(rank)] = counts
    out = {"traces": [f"{prefix}_rank{r}.json.gz" for r in range(WORLD)], "generator": "samples/ranks/generate.py",
           "rule": "per rank and step: the gloo:all_reduce ranges starting in the step (no sizes are recorded "
                   "in these CPU traces); fragmented when a step has >= 8 of one collective",
           "all_reduce_per_step": per_rank, "expected_findings": expected}
    with open(os.path.join(HERE, prefix, f"{prefix}.truth.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    import sys
    for prefix, cap in (("buckets_tiny", 0.01), ("buckets_default", None)):
        if "--truth-only" not in sys.argv:
            mp.spawn(rank_main, args=(prefix, cap), nprocs=WORLD, join=True)
        truth(prefix, cap is not None)
        print("done", prefix)
