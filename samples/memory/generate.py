"""Real CPU PyTorch traces with profile_memory=True for steplens' memory analysis.

Runs a small MLP training loop under torch.profiler (CPU only, single process) in two
scenarios and writes each trace next to this file:

- ``clean``: an ordinary loop; every step frees what it allocated.
- ``leak``: the same loop, but each step keeps its activations alive by appending the
  loss's graph inputs (a 1 MiB tensor per step) to a Python list: allocated memory at the
  start of each step rises by ~1 MiB per step (a leak a user would want named).

Usage: python3 samples/memory/generate.py  (needs torch; writes *.json.gz)
"""

import gzip
import json
import os
import shutil
import tempfile

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 6  # wait=1, warmup=1, active=6 -> ProfilerStep#2..#7


def run(scenario: str) -> str:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    sched = torch.profiler.schedule(wait=1, warmup=1, active=STEPS, repeat=1)
    out_dir = tempfile.mkdtemp()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=sched,
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
        on_trace_ready=torch.profiler.tensorboard_trace_handler(out_dir),
    ) as prof:
        for _ in range(STEPS + 2):
            x = torch.randn(64, 256)
            y = torch.randint(0, 10, (64,))
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if scenario == "leak":
                kept.append(torch.empty(256, 1024))  # 1 MiB kept alive every step
            prof.step()
    (name,) = os.listdir(out_dir)
    dst = os.path.join(HERE, f"train_{scenario}.json.gz")
    with open(os.path.join(out_dir, name), "rb") as src, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            shutil.copyfileobj(src, gz)
    shutil.rmtree(out_dir)
    return dst


if __name__ == "__main__":
    for s in ("clean", "leak"):
        print(run(s))
