#!/usr/bin/env python3
"""Record steplens' CUDA fix pairs on a real GPU: a training loop with a known performance
problem ("problem") and the same loop with the standard fix ("fixed"), traced with
torch.profiler (CPU + CUDA activities), plus a truth file per pair with the realized saving.
Also records one standalone single-rank DDP (NCCL) trace with memory and Python stacks.

    python3 samples/whatif-cuda/generate.py [--out DIR] [pair ...]    # default: all
    python3 samples/whatif-cuda/generate.py --table

The truth layout is the one of samples/whatif/generate.py (whose reading functions this file
imports): per pair ROUNDS rounds of problem profiled, fixed profiled, problem unprofiled, fixed
unprofiled, each a fresh Python process. The first profiled run of each variant is kept.

On the GPU the host runs ahead of the device, so a ProfilerStep's host span equals the device's
step only once the launch queue throttles the host; WARMUP steps let it fill. Unprofiled runs
also record `synced_mean_step_ns`: the whole timed loop between two torch.cuda.synchronize()
calls, divided by its steps - the device-inclusive step time.

Internal: `generate.py --worker PAIR VARIANT (--trace PATH | --times PATH)`.
"""

import importlib.util
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
THIS_FILE = os.path.basename(__file__)
SEED = 0
WAIT, WARMUP, ACTIVE = 1, 4, 10
N_STEPS = WAIT + WARMUP + ACTIVE
ROUNDS = 2
VARIANTS = ("problem", "fixed")

_spec = importlib.util.spec_from_file_location(
    "cpu_whatif", os.path.join(HERE, "..", "whatif", "generate.py"))
cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu)

FINDING_KIND = {
    "item_sync": "sync_point",
    "unfused_optimizer": "unfused_optimizer",
    "fp32_matmul": "no_mixed_precision",
    "dataloader_workers": "dataloader_stall",
    "pageable_copy": "pageable_copy",
}
PAIRS = tuple(FINDING_KIND)

# Finding kinds both variants of a pair truly have by construction, beside the one the pair
# fixes: fp32 matrix work (no autocast) on a GPU with Tensor Cores.
ALSO_PRESENT = {
    "item_sync": ["no_mixed_precision"],
    "unfused_optimizer": ["no_mixed_precision"],
    "dataloader_workers": ["no_mixed_precision"],
    "pageable_copy": ["no_mixed_precision"],
}

SCENARIOS = {
    "item_sync": {
        "problem": "running_loss += loss.item() every step: the host waits for the device "
                   "before it can launch the next step",
        "fix": "running_loss += loss.detach() (stays on the device), read once after the loop",
        "model": "MLP 4 x (Linear(1024,1024)+ReLU) + Linear(1024,10), batch 256, fp32; "
                 "cross_entropy; SGD(lr=0.01, momentum=0.9)",
        "problem_marker": "WHATIF-ITEM-PROBLEM", "fix_marker": "WHATIF-ITEM-FIX",
    },
    "unfused_optimizer": {
        "problem": "torch.optim.Adam(foreach=False): one small kernel per parameter and op",
        "fix": "torch.optim.Adam(fused=True): one multi-tensor kernel over all parameters",
        "model": "MLP 24 x (Linear(256,256)+ReLU) + Linear(256,10) = 50 parameter tensors, "
                 "batch 128; cross_entropy",
        "problem_marker": "WHATIF-OPT-PROBLEM", "fix_marker": "WHATIF-OPT-FIX",
    },
    "fp32_matmul": {
        "problem": "fp32 matrix products (TF32 off, the PyTorch default): no Tensor Cores",
        "fix": "torch.autocast('cuda', dtype=torch.bfloat16) around forward and loss",
        "model": "MLP 4 x (Linear(4096,4096)+GELU) + Linear(4096,1000), batch 2048; "
                 "cross_entropy; SGD(lr=0.01, momentum=0.9, fused=True)",
        "problem_marker": "WHATIF-AMP-PROBLEM", "fix_marker": "WHATIF-AMP-FIX",
    },
    "dataloader_workers": {
        "problem": "DataLoader(num_workers=0) with a numpy augmentation per sample in "
                   "__getitem__: the step waits for its batch while the GPU idles",
        "fix": "DataLoader(num_workers=6, persistent_workers=True, pin_memory=True, "
               "prefetch_factor=4)",
        "model": "conv net: conv(3->32,s2)+ReLU, conv(32->64,s2)+ReLU, pool, Linear(64,10) on "
                 "64x64, batch 64; cross_entropy; SGD(lr=0.01, fused=True)",
        "problem_marker": "WHATIF-LOADER-PROBLEM", "fix_marker": "WHATIF-LOADER-FIX",
    },
    "pageable_copy": {
        "problem": "batch.to('cuda') from pageable host memory: a synchronous staged copy",
        "fix": "batches pinned once (pin_memory()) and copied with non_blocking=True",
        "model": "conv(3->16,s4)+ReLU, pool, Linear(16,10) on 3x224x224, batch 128 (77 MB "
                 "per batch); cross_entropy; SGD(lr=0.01, fused=True)",
        "problem_marker": "WHATIF-COPY-PROBLEM", "fix_marker": "WHATIF-COPY-FIX",
    },
}


def find_line(marker):
    with open(os.path.abspath(__file__)) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return n, line.strip()
    raise RuntimeError(f"marker {marker} not found")


# ============================================================================================
# Worker side
# ============================================================================================
def worker(pair, variant, trace_path, times_path):
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile, schedule

    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    problem = variant == "problem"
    dev = torch.device("cuda")
    state = {"running": None}

    def mlp(width, depth, out, act):
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), act()]
        layers.append(nn.Linear(width, out))
        return nn.Sequential(*layers).to(dev)

    if pair == "item_sync":
        model = mlp(1024, 4, 10, nn.ReLU)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        data = [(torch.randn(256, 1024, device=dev), torch.randint(0, 10, (256,), device=dev))
                for _ in range(4)]

        def batches():
            i = 0
            while True:
                yield data[i % 4]
                i += 1

        def step(batch):
            x, y = batch
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if problem:
                state["running"] = (state["running"] or 0.0) + loss.item()  # WHATIF-ITEM-PROBLEM
            else:
                d = loss.detach()  # WHATIF-ITEM-FIX
                state["running"] = d if state["running"] is None else state["running"] + d

    elif pair == "unfused_optimizer":
        model = mlp(256, 24, 10, nn.ReLU)
        if problem:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)  # WHATIF-OPT-PROBLEM
        else:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)  # WHATIF-OPT-FIX
        data = [(torch.randn(128, 256, device=dev), torch.randint(0, 10, (128,), device=dev))
                for _ in range(4)]

        def batches():
            i = 0
            while True:
                yield data[i % 4]
                i += 1

        def step(batch):
            x, y = batch
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    elif pair == "fp32_matmul":
        model = mlp(4096, 4, 1000, nn.GELU)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
        data = [(torch.randn(2048, 4096, device=dev), torch.randint(0, 1000, (2048,), device=dev))
                for _ in range(2)]

        def batches():
            i = 0
            while True:
                yield data[i % 2]
                i += 1

        def step(batch):
            x, y = batch
            if problem:
                loss = F.cross_entropy(model(x), y)  # WHATIF-AMP-PROBLEM
            else:
                with torch.autocast("cuda", dtype=torch.bfloat16):  # WHATIF-AMP-FIX
                    loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    elif pair == "dataloader_workers":
        class Augmented(torch.utils.data.Dataset):
            def __len__(self):
                return 1 << 16

            def __getitem__(self, i):
                rng = np.random.default_rng(i)
                img = rng.random((3, 96, 96), dtype=np.float32)
                y0, x0 = rng.integers(0, 32, 2)
                img = img[:, y0:y0 + 64, x0:x0 + 64]
                if rng.random() < 0.5:
                    img = img[:, :, ::-1]
                for _ in range(6):
                    img = (img[:, :-2, :-2] + img[:, 1:-1, 1:-1] + img[:, 2:, 2:]) / 3.0
                    img = np.pad(img, ((0, 0), (1, 1), (1, 1)), mode="edge")
                img = (img - img.mean()) / (img.std() + 1e-6)
                return torch.from_numpy(np.ascontiguousarray(img)), int(rng.integers(0, 10))

        if problem:
            loader = torch.utils.data.DataLoader(Augmented(), batch_size=64, num_workers=0)  # WHATIF-LOADER-PROBLEM
        else:
            loader = torch.utils.data.DataLoader(Augmented(), batch_size=64, num_workers=6, persistent_workers=True, pin_memory=True, prefetch_factor=4)  # WHATIF-LOADER-FIX
        model = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)

        def batches():
            return iter(loader)

        def step(batch):
            x, y = batch
            x = x.to(dev, non_blocking=True)
            y = y.to(dev, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    elif pair == "pageable_copy":
        host = [(torch.randn(128, 3, 224, 224), torch.randint(0, 10, (128,))) for _ in range(2)]
        if not problem:
            host = [(x.pin_memory(), y.pin_memory()) for x, y in host]
        model = nn.Sequential(
            nn.Conv2d(3, 16, 4, stride=4), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, fused=True)

        def batches():
            i = 0
            while True:
                yield host[i % 2]
                i += 1

        def step(batch):
            x, y = batch
            if problem:
                x, y = x.to(dev), y.to(dev)  # WHATIF-COPY-PROBLEM
            else:
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)  # WHATIF-COPY-FIX
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    else:
        raise SystemExit(f"unknown pair {pair!r}")

    def loop(prof):
        times = []
        it = batches()
        torch.cuda.synchronize()
        t_start = None
        for i in range(N_STEPS):
            if i == WAIT + WARMUP:
                torch.cuda.synchronize()
                t_start = time.perf_counter_ns()
            t0 = time.perf_counter_ns()
            batch = next(it)
            step(batch)
            times.append(time.perf_counter_ns() - t0)
            if prof is not None:
                prof.step()
        torch.cuda.synchronize()
        synced = (time.perf_counter_ns() - t_start) / ACTIVE
        if state["running"] is not None:
            float(state["running"])
        return times, synced

    if trace_path:
        def on_ready(p):
            p.export_chrome_trace(trace_path)

        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
            record_shapes=True,
            on_trace_ready=on_ready,
        ) as prof:
            loop(prof)
    else:
        times, synced = loop(None)
        with open(times_path, "w") as f:
            json.dump({"step_ns": times[WAIT + WARMUP:], "all_step_ns": times,
                       "synced_mean_step_ns": round(synced)}, f)
    meta = {"torch": torch.__version__, "num_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0), "cuda": torch.version.cuda}
    print("WORKER-META " + json.dumps(meta))


def ddp_worker(trace_path):
    """One-rank DDP over NCCL: real NCCL kernels and record_param_comms with message sizes,
    with profile_memory and with_stack, for the viewer and the collective views."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    dev = torch.device("cuda:0")
    layers = []
    for _ in range(6):
        layers += [nn.Linear(2048, 2048), nn.ReLU()]
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(*layers, nn.Linear(2048, 10)).to(dev), bucket_cap_mb=8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    x = torch.randn(512, 2048, device=dev)
    y = torch.randint(0, 10, (512,), device=dev)

    def on_ready(p):
        p.export_chrome_trace(trace_path)

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=2, active=4, repeat=1),
                 record_shapes=True, profile_memory=True, with_stack=True,
                 on_trace_ready=on_ready) as prof:
        for _ in range(7):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
    torch.cuda.synchronize()
    dist.destroy_process_group()


# ============================================================================================
# Parent side
# ============================================================================================
def run_worker_process(args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker"] + args
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{res.stderr[-4000:]}")
    for line in res.stdout.splitlines():
        if line.startswith("WORKER-META "):
            return json.loads(line[len("WORKER-META "):])
    return {}


def host_steps(path):
    """[(N, dur_ns)] of the host's ProfilerStep#N spans (the CUDA activity adds a device
    copy of each step, cat gpu_user_annotation, which is not the step)."""
    import decimal
    import gzip
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    out = []
    for e in doc["traceEvents"]:
        if (isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation"
                and str(e.get("name", "")).startswith("ProfilerStep#")):
            out.append((int(e["name"].split("#", 1)[1]), cpu.us_to_ns(e["dur"])))
    out.sort()
    return out


def run_pair(pair, out):
    tmp = tempfile.mkdtemp(prefix=f"steplens-whatif-cuda-{pair}-")
    prof_runs = {v: [] for v in VARIANTS}
    unprof_runs = {v: [] for v in VARIANTS}
    synced = {v: [] for v in VARIANTS}
    order, meta = [], {}
    t_start = time.time()
    for r in range(ROUNDS):
        for v in VARIANTS:
            raw = os.path.join(tmp, f"{pair}.{v}.r{r}.json")
            meta = run_worker_process([pair, v, "--trace", raw]) or meta
            steps = host_steps(raw)
            names = [n for n, _ in steps]
            if names != list(range(WAIT + WARMUP, N_STEPS)):
                raise RuntimeError(f"{raw}: unexpected ProfilerStep numbers {names}")
            prof_runs[v].append({"run": r, "step_ns": [d for _, d in steps]})
            if r == 0:
                cpu.gzip_to(raw, os.path.join(out, f"{pair}.{v}.json.gz"))
            os.remove(raw)
            order.append(f"{v}/profiled/run{r}")
        for v in VARIANTS:
            tp = os.path.join(tmp, f"{pair}.{v}.r{r}.times.json")
            run_worker_process([pair, v, "--times", tp])
            with open(tp) as f:
                t = json.load(f)
            unprof_runs[v].append({"run": r, "step_ns": t["step_ns"]})
            synced[v].append(t["synced_mean_step_ns"])
            order.append(f"{v}/unprofiled/run{r}")
        print(f"[{pair}] round {r}: " + ", ".join(
            f"{v} {cpu.median(prof_runs[v][-1]['step_ns']) / 1e6:.3f} ms profiled, "
            f"{synced[v][-1] / 1e6:.3f} ms synced" for v in VARIANTS), file=sys.stderr)

    prof = cpu.summary([x["step_ns"] for x in prof_runs["problem"]],
                       [x["step_ns"] for x in prof_runs["fixed"]])
    unprof = cpu.summary([x["step_ns"] for x in unprof_runs["problem"]],
                         [x["step_ns"] for x in unprof_runs["fixed"]])
    unprof["synced_mean_step_ns"] = synced
    unprof["synced_saving_ns"] = round(
        sum(synced["problem"]) / ROUNDS - sum(synced["fixed"]) / ROUNDS)
    sp, su = prof["saving_ns"], unprof["saving_ns"]
    sc = dict(SCENARIOS[pair])
    pl, pcode = find_line(sc.pop("problem_marker"))
    fl, fcode = find_line(sc.pop("fix_marker"))
    sc["problem_call_site"] = {"site": f"{THIS_FILE}:{pl}", "code": pcode.split("  # ")[0]}
    sc["fix_call_site"] = {"site": f"{THIS_FILE}:{fl}", "code": fcode.split("  # ")[0]}
    for v in VARIANTS:
        for x in prof_runs[v] + unprof_runs[v]:
            x["median_step_ns"] = cpu.median(x["step_ns"])
    truth = {
        "pair": pair,
        "finding_kind": FINDING_KIND[pair],
        "also_present": ALSO_PRESENT.get(pair, []),
        "files": {v: f"{pair}.{v}.json.gz" for v in VARIANTS},
        "generator": "samples/whatif-cuda/generate.py",
        "torch": meta.get("torch"),
        "cuda": meta.get("cuda"),
        "gpu": meta.get("gpu"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_num_threads": meta.get("num_threads"),
        "scenario": sc,
        "profiler": {
            "activities": ["CPU", "CUDA"],
            "schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE, "repeat": 1},
            "record_shapes": True, "with_stack": False, "profile_memory": False,
            "export": "prof.export_chrome_trace(path) in on_trace_ready, gzip mtime 0",
        },
        "profiled_steps": [f"ProfilerStep#{i}" for i in range(WAIT + WARMUP, N_STEPS)],
        "method": {
            "step_ns": "ProfilerStep#N 'dur' (µs, exact decimal) * 1000, rounded half up; "
                       "unprofiled: time.perf_counter_ns() around next(batches) + the step "
                       "body of the same loop iterations",
            "synced_mean_step_ns": "unprofiled: the timed steps between two "
                                   "torch.cuda.synchronize() calls / their count, per run",
            "median": "over the pooled steps of each variant; even count -> mean of the two "
                      "middle values",
            "saving_ns": "median_problem_ns - median_fixed_ns",
            "interval": "95 % percentile bootstrap of the median difference (as "
                        "samples/whatif/generate.py)",
            "profiler_dominates": "profiled saving_ns > 0 and > 2 x max(unprofiled saving_ns, 0)",
            "run_order": "per round r: problem profiled, fixed profiled, problem unprofiled, "
                         "fixed unprofiled; every run a fresh Python process",
        },
        "run_order": order,
        "committed_run": {
            v: {"file": f"{pair}.{v}.json.gz", "run": 0,
                "median_step_ns": prof_runs[v][0]["median_step_ns"],
                "step_ns": prof_runs[v][0]["step_ns"]}
            for v in VARIANTS
        },
        "profiled": dict(prof, runs={v: prof_runs[v] for v in VARIANTS}),
        "unprofiled": dict(unprof, runs={v: unprof_runs[v] for v in VARIANTS}),
        "profiler_dominates": sp > 0 and sp > 2 * max(su, 0),
        "wall_s": round(time.time() - t_start, 1),
    }
    with open(os.path.join(out, f"{pair}.truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print(f"[{pair}] saving profiled {sp / 1e6:.3f} ms, unprofiled {su / 1e6:.3f} ms, "
          f"synced {unprof['synced_saving_ns'] / 1e6:.3f} ms", file=sys.stderr)


def main(argv):
    if argv and argv[0] == "--worker":
        if argv[1] == "ddp":
            ddp_worker(argv[2])
            return
        pair, variant, kind, path = argv[1:5]
        worker(pair, variant, path if kind == "--trace" else None,
               path if kind == "--times" else None)
        return
    out = HERE
    if argv[:1] == ["--out"]:
        out, argv = argv[1], argv[2:]
    os.makedirs(out, exist_ok=True)
    names = argv or list(PAIRS) + ["ddp"]
    for n in names:
        try:
            if n == "ddp":
                raw = os.path.join(tempfile.mkdtemp(), "ddp_nccl_1rank.json")
                run_worker_process(["ddp", raw])
                cpu.gzip_to(raw, os.path.join(out, "ddp_nccl_1rank.json.gz"))
            else:
                run_pair(n, out)
        except Exception as e:  # one broken pair must not cost the others' device time
            print(f"[{n}] FAILED: {e}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
