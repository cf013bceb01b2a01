"""Real 4-rank DDP runs for the `fragmented_collectives` finding, torch CPU profiler,
gloo over localhost.

- ``buckets_tiny/buckets_tiny_rank{0..3}.json.gz``: a 12-layer MLP under DistributedDataParallel with
  ``bucket_cap_mb=0.01``: every gradient gets its own bucket, so each step issues one small
  all_reduce per parameter (25 per step) instead of one.
- ``buckets_default/buckets_default_rank{0..3}.json.gz``: the same model with DDP's default buckets (25 MB):
  a handful of all_reduces per step; nothing to report.
- ``buckets_1mb/``: a 12-layer MLP 512 wide (12.0 MiB of fp32 gradients) with ``bucket_cap_mb=1``:
  about a dozen all_reduces of just over 1 MiB per step, where DDP's default buckets would need one;
  fragmented, though no message is small.
- ``buckets_1mb_default/``: the same 512-wide model with the default buckets: two all_reduces per
  step (DDP's first bucket is capped at 1 MiB); nothing to report.

The truth files are read back from each trace's own events by this script: per rank and
ProfilerStep, the ``gloo:all_reduce`` ranges that start in it and their sizes (the annotation's
``Input Dims`` × 4 bytes, fp32 gradients).

Usage: python3 samples/ranks/generate.py [--truth-only] [RUN ...]   (needs torch; about a minute a run)
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


def model(width):
    torch.manual_seed(0)
    layers = []
    for _ in range(12):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def rank_main(rank, prefix, bucket_cap_mb, width=64, foreach=None):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29533"
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    kwargs = {} if bucket_cap_mb is None else {"bucket_cap_mb": bucket_cap_mb}
    m = nn.parallel.DistributedDataParallel(model(width), **kwargs)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, foreach=foreach)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(64, width), torch.randint(0, 10, (64,))
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


BUCKET_BYTES = 25 << 20   # DDP's default bucket_cap_mb


def numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def truth(prefix, fragmented):
    """Per rank and ProfilerStep, the gloo:all_reduce ranges starting in the step and their sizes
    (read from the trace's events); the planted finding is one per rank and step, and the rule
    (findings.md, fragmented_collectives) must agree with what was planted."""
    per_rank, sizes_per_rank, expected = {}, {}, []
    for rank in range(WORLD):
        with gzip.open(os.path.join(HERE, prefix, f"{prefix}_rank{rank}.json.gz"), "rt") as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        steps = sorted((e for e in events if str(e["name"]).startswith("ProfilerStep#")), key=lambda e: e["ts"])
        counts, sizes = {}, {}
        for s in steps:
            mine = [e for e in events if e["name"] == "gloo:all_reduce"
                    and s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
            counts[s["name"]] = len(mine)
            sizes[s["name"]] = [4 * numel(e["args"]["Input Dims"][0]) for e in mine]
            needed = max(1, -(-sum(sizes[s["name"]]) // BUCKET_BYTES))
            by_rule = len(mine) >= 8 and len(mine) > 2 * needed
            assert by_rule == fragmented, (prefix, rank, s["name"], len(mine), needed)
            if fragmented:
                expected.append({"kind": "fragmented_collectives", "rank": rank, "step": s["name"],
                                 "count": counts[s["name"]]})
        per_rank[str(rank)] = counts
        sizes_per_rank[str(rank)] = sizes
    out = {"traces": [f"{prefix}_rank{r}.json.gz" for r in range(WORLD)], "generator": "samples/ranks/generate.py",
           "rule": "per rank and step: the gloo:all_reduce ranges starting in the step, each sized by its "
                   "Input Dims x 4 bytes; fragmented when a step has >= 8 of one collective and more than "
                   "2 x ceil(total bytes / 25 MiB), the all-reduces DDP's default buckets would need",
           "all_reduce_per_step": per_rank, "all_reduce_bytes_per_step": sizes_per_rank,
           "expected_findings": expected}
    with open(os.path.join(HERE, prefix, f"{prefix}.truth.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


# (run, bucket_cap_mb, width, fragmented, SGD foreach). The 512-wide runs step SGD with
# foreach=True: its per-parameter loop over 26 large tensors would be a finding of its own
# (`unfused_optimizer`), which these runs are not about.
RUNS = (("buckets_tiny", 0.01, 64, True, None), ("buckets_default", None, 64, False, None),
        ("buckets_1mb", 1, 512, True, True), ("buckets_1mb_default", None, 512, False, True))

if __name__ == "__main__":
    import sys
    wanted = [a for a in sys.argv[1:] if not a.startswith("--")]
    for prefix, cap, width, fragmented, foreach in RUNS:
        if wanted and prefix not in wanted:
            continue
        if "--truth-only" not in sys.argv:
            mp.spawn(rank_main, args=(prefix, cap, width, foreach), nprocs=WORLD, join=True)
        truth(prefix, fragmented)
        print("done", prefix)
