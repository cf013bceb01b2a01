"""Real runs for the check's A/A and A/B tests, made with the torch CPU profiler.

- ``ddp_rank{0..3}.json.gz``: one 4-rank DistributedDataParallel run (gloo over localhost,
  CPU): every rank does identical work, so checking any rank against any other must not fail.
- ``same_script_{a,b}.json.gz``: the single-process loop run twice (identical work, two runs).
- ``slow25.json.gz``: the single-process loop with +25 % work per step (a larger hidden layer
  in one extra matmul per step), a real regression.
- ``newsync.json.gz``: the single-process loop reading ``loss.item()`` every step (a new sync).
- ``steady_{a,b}.json.gz``: a loop of wide layers whose steps are tens of ms of matmul, steady
  to a few percent, run twice: an A/A pair, and the runs a planted +10 % must always be caught on.
- ``steady_ref.json.gz`` and ``steady_slow10.json.gz``: the steady loop, recorded back to back,
  plain and with one extra no-grad 512x1024 @ 1024x480 matmul per step (about +10 % of the step's
  multiply-adds): a real A/B pair for the smallest regression the check must catch.
- ``straggler_rank{0..3}.json.gz``: the 4-rank DDP run again, but rank 2 computes an extra
  256x1024 @ 1024x1024 matmul (with ``aten::mm`` in the trace) every step before its forward:
  the planted straggler the others wait for in every all_reduce.

The machine is shared and noisy (2 cores, 4 ranks): that is the point.

Usage: python3 samples/ci-aa/generate.py   (needs torch; about a minute)
"""

import gzip
import os
import shutil
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 20  # wait=1, warmup=1, active=20
torch.set_num_threads(1)


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def profile(step_fn, dst):
    out_dir = tempfile.mkdtemp()
    sched = torch.profiler.schedule(wait=1, warmup=1, active=STEPS, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                with_stack=True,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(out_dir)) as prof:
        for i in range(STEPS + 2):
            step_fn(i)
            prof.step()
    (name,) = os.listdir(out_dir)
    with open(os.path.join(out_dir, name), "rb") as src, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            shutil.copyfileobj(src, gz)
    shutil.rmtree(out_dir)


def single(variant: str):
    m = model()
    extra = nn.Linear(256, 256) if variant == "slow25" else None
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    torch.manual_seed(1)
    xs = [torch.randn(256, 128) for _ in range(4)]
    ys = [torch.randint(0, 10, (256,)) for _ in range(4)]
    losses = []

    def step(i):
        x, y = xs[i % 4], ys[i % 4]
        out = m(x)
        if extra is not None:
            # one more matmul chain per step: about a quarter more forward + backward work
            out = out + extra(torch.relu(m[2](m[1](m[0](x))))).sum(dim=1, keepdim=True) * 0
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if variant == "newsync":
            losses.append(loss.item())

    profile(step, os.path.join(HERE, f"{variant}.json.gz"))


def steady(name: str):
    """Wide layers: each step is tens of ms of matmul, so Python and allocator jitter are a small
    share of it and steps are steady (the planted +10 % runs start from it). ``steady_slow10``
    adds one no-grad matmul per step, about a tenth of the step's multiply-adds."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                      nn.Linear(1024, 10))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    torch.manual_seed(1)
    xs = [torch.randn(512, 512) for _ in range(4)]
    ys = [torch.randint(0, 10, (512,)) for _ in range(4)]
    slow = name.endswith("slow10")
    # Forward + backward of the three layers: about 3 x 512 x (512x1024 + 1024x1024 + 1024x10)
    # multiply-adds; the extra matmul is 512 x 1024 x 480, 10.4 % of that.
    extra_a, extra_b = torch.randn(512, 1024), torch.randn(1024, 480)

    def step(i):
        loss = nn.functional.cross_entropy(m(xs[i % 4]), ys[i % 4])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if slow:
            with torch.no_grad():
                extra_a.mm(extra_b)

    profile(step, os.path.join(HERE, f"{name}.json.gz"))


def rank_main(rank, world, prefix="ddp", slow_rank=None):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29517"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    m = nn.parallel.DistributedDataParallel(model())
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    torch.manual_seed(1 + rank)
    xs = [torch.randn(256, 128) for _ in range(4)]
    ys = [torch.randint(0, 10, (256,)) for _ in range(4)]

    heavy = torch.randn(1024, 1024)
    extra_in = torch.randn(256, 1024)

    def step(i):
        if rank == slow_rank:
            for _ in range(3):
                extra_in.mm(heavy)
        loss = nn.functional.cross_entropy(m(xs[i % 4]), ys[i % 4])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    profile(step, os.path.join(HERE, f"{prefix}_rank{rank}.json.gz"))
    dist.destroy_process_group()


if __name__ == "__main__":
    which = sys.argv[1:] or ["ddp", "same_script_a", "same_script_b", "slow25", "newsync",
                             "straggler", "steady_a", "steady_b", "steady_ref", "steady_slow10"]
    for w in which:
        if w == "ddp":
            mp.spawn(rank_main, args=(4,), nprocs=4, join=True)
        elif w.startswith("steady"):
            steady(w)
        elif w == "straggler":
            mp.spawn(rank_main, args=(4, "straggler", 2), nprocs=4, join=True)
        else:
            single(w)
        print("done", w)
