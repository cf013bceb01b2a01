"""A real torch profiler trace of benchmark size, made on this machine's CPU.

A small transformer-ish MLP stack (many small ops per step, as real training is) trained for
--steps profiled steps with record_shapes and with_stack on, so the trace carries what real
ones do: cpu_op events with Input Dims/types, python_function frames, ProfilerStep ranges and
the DataLoader's __next__. The trace is written by torch's own exporter
(``prof.export_chrome_trace``), nothing here touches its events.

Usage: python3 bench/make_torch_trace.py OUT.json [--steps N] [--layers N]
(about 2 minutes and 450 MB for the defaults on a 2-core machine)
"""

import argparse
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--layers", type=int, default=48)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    blocks = []
    for _ in range(args.layers):
        blocks += [nn.LayerNorm(64), nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64),
                   nn.Dropout(0.1)]
    model = nn.Sequential(*blocks, nn.Linear(64, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    data = TensorDataset(torch.randn(64 * (args.steps + 2), 64),
                         torch.randint(0, 10, (64 * (args.steps + 2),)))
    loader = DataLoader(data, batch_size=64)
    sched = torch.profiler.schedule(wait=1, warmup=1, active=args.steps, repeat=1)
    started = time.time()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=sched, record_shapes=True, with_stack=True) as prof:
        for i, (x, y) in enumerate(loader):
            if i >= args.steps + 2:
                break
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
    prof.export_chrome_trace(args.out)
    size = os.path.getsize(args.out)
    print(f"wrote {args.out}: {size / 2**20:.0f} MiB, {args.steps} profiled steps, "
          f"{time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
