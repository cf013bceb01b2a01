#!/usr/bin/env python3
"""Record steplens' "what-if" fix pairs: one training loop with a known performance problem
("problem") and the same loop with the standard fix ("fixed"), traced with torch.profiler on CPU,
plus a truth file per pair with the realized saving.

    python3 samples/whatif/generate.py                       # all pairs
    python3 samples/whatif/generate.py zero_grad explicit_pad  # some

For each pair, 3 rounds of: problem profiled, fixed profiled, problem unprofiled, fixed
unprofiled; every run is its own Python process (no allocator / compile state shared between
variants). The FIRST profiled run of each variant is kept as <pair>.problem.json.gz /
<pair>.fixed.json.gz (gzip, mtime 0); all runs feed <pair>.truth.json, which is computed by
reading the traces back with the plain json module (ts/dur as exact decimals -> ns).

Internal: `generate.py --worker PAIR VARIANT (--trace PATH | --times PATH)` runs one variant.
"""

import decimal
import gzip
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
THIS_FILE = os.path.basename(__file__)
SEED = 0
BATCH = 8
WAIT, WARMUP, ACTIVE = 1, 2, 16
N_STEPS = WAIT + WARMUP + ACTIVE  # 19 loop iterations: ProfilerStep#0..#18, #3..#18 exported
ROUNDS = 3
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
VARIANTS = ("problem", "fixed")

# The steplens finding kind whose advice each pair's fix applies.
FINDING_KIND = {
    "unfused_optimizer": "unfused_optimizer",
    "pointwise_chain": "unfused_pointwise",
    "explicit_pad": "explicit_pad",
    "zero_grad": "slow_zero_grad",
    "anomaly_detection": "debug_api_enabled",
    "dataloader_work": "dataloader_stall",
    "tensor_from_list": "host_created_tensor",
    "recompile_shapes": "recompile",
}

PAIRS = ("unfused_optimizer", "pointwise_chain", "explicit_pad", "zero_grad",
         "anomaly_detection", "dataloader_work", "tensor_from_list", "recompile_shapes")


# --------------------------------------------------------------------------------------------
# What each pair plants and fixes. "marker"s name the generator line (a trailing `# MARKER`
# comment) that holds the problem / the fix; their line numbers are read at run time.
# --------------------------------------------------------------------------------------------
SCENARIOS = {
    "unfused_optimizer": {
        "problem": "torch.optim.Adam(foreach=False): a Python loop over 16 parameter tensors, "
                   "~20 small aten ops each per step",
        "fix": "torch.optim.Adam(fused=True): one aten::_fused_adam_ over all parameters "
               "(foreach=True on CPU still runs per-tensor kernels under aten::_foreach_*)",
        "model": "ExpertBank: 15 separate (16,16) weights stacked -> einsum -> relu -> mean over "
                 "experts -> Linear(16,10, bias=False) = 16 parameter tensors (kept at 16 so "
                 "the with_stack trace stays small); cross_entropy; Adam(lr=1e-3)",
        "problem_marker": "WHATIF-OPT-PROBLEM", "fix_marker": "WHATIF-OPT-FIX",
    },
    "pointwise_chain": {
        "problem": "hand-written tanh GELU x*0.5*(1+tanh(sqrt(2/pi)*(x+0.044715*x**3))): "
                   "a chain of separate pointwise aten ops (and their backward ops)",
        "fix": "torch.nn.functional.gelu(x, approximate='tanh'): one fused kernel "
               "(aten::gelu / aten::gelu_backward)",
        "model": "SmallNet: conv(3->8)+relu+maxpool, conv(16)+relu+maxpool on 32x32, 64 tokens x 16 ch, residual Linear(16,H)+act+Linear(H,16), mean over tokens, linear head; cross_entropy; SGD(lr=0.01, momentum=0.9, fused=True); batch 8 of 3x32x32; H=512, act = the GELU",
        "problem_marker": "WHATIF-GELU-PROBLEM", "fix_marker": "WHATIF-GELU-FIX",
    },
    "explicit_pad": {
        "problem": "F.pad(x, (1, 1, 1, 1)) then Conv2d(padding=0): an extra aten::pad / "
                   "constant_pad_nd copy of the activation (and its backward) per conv",
        "fix": "Conv2d(padding=1): the convolution pads implicitly",
        "model": "SmallNet: conv(3->8)+relu+maxpool, conv(16)+relu+maxpool on 32x32, 64 tokens x 16 ch, residual Linear(16,H)+act+Linear(H,16), mean over tokens, linear head; cross_entropy; SGD(lr=0.01, momentum=0.9, fused=True); batch 8 of 3x32x32; H=64; both convs padded",
        "problem_marker": "WHATIF-PAD-PROBLEM", "fix_marker": "WHATIF-PAD-FIX",
    },
    "zero_grad": {
        "problem": "opt.zero_grad(set_to_none=False): aten::zero_ on every gradient, then "
                   "AccumulateGrad adds (aten::add_) into it",
        "fix": "opt.zero_grad(set_to_none=True): gradients dropped, AccumulateGrad steals "
               "the fresh gradient",
        "model": "WideMLP: 6 x (Linear(512,512)+ReLU) + Linear(512,10), batch 64; "
                 "cross_entropy; SGD(lr=0.01, momentum=0.9, fused=True)",
        "problem_marker": "WHATIF-ZERO-PROBLEM", "fix_marker": "WHATIF-ZERO-FIX",
    },
    "anomaly_detection": {
        "problem": "torch.autograd.set_detect_anomaly(True) around the loop: NaN checks "
                   "(aten::isnan, aten::_is_any_true, aten::item) after every backward node",
        "fix": "anomaly detection off (the default)",
        "model": "SmallNet: conv(3->8)+relu+maxpool, conv(16)+relu+maxpool on 32x32, 64 tokens x 16 ch, residual Linear(16,H)+act+Linear(H,16), mean over tokens, linear head; cross_entropy; SGD(lr=0.01, momentum=0.9, fused=True); batch 8 of 3x32x32; H=64",
        "problem_marker": "WHATIF-ANOMALY-PROBLEM", "fix_marker": "WHATIF-ANOMALY-FIX",
    },
    "dataloader_work": {
        "problem": "Dataset.__getitem__ does a numpy augmentation (random 56x56 crop, flip, "
                   "12 valid 3x3 box blurs -> 32x32, normalise) per sample in the step, "
                   "batch 8, num_workers=0",
        "fix": "the same augmented samples computed once before the loop (precomputed "
               "tensors, TensorDataset), same batches",
        "model": "SmallNet: conv(3->8)+relu+maxpool, conv(16)+relu+maxpool on 32x32, 64 tokens x 16 ch, residual Linear(16,H)+act+Linear(H,16), mean over tokens, linear head; cross_entropy; SGD(lr=0.01, momentum=0.9, fused=True); batch 8 of 3x32x32; H=64",
        "problem_marker": "WHATIF-DATA-PROBLEM", "fix_marker": "WHATIF-DATA-FIX",
    },
    "tensor_from_list": {
        "problem": "torch.tensor(class_weights) from a Python list of 4096 floats every step "
                   "(cross_entropy class weights)",
        "fix": "the weight tensor built once before the loop",
        "model": "SmallNet: conv(3->8)+relu+maxpool, conv(16)+relu+maxpool on 32x32, 64 tokens x 16 ch, residual Linear(16,H)+act+Linear(H,16), mean over tokens, linear head; cross_entropy; SGD(lr=0.01, momentum=0.9, fused=True); batch 8 of 3x32x32; H=64, head Linear(16,4096) (4096 classes), weighted cross_entropy",
        "problem_marker": "WHATIF-LIST-PROBLEM", "fix_marker": "WHATIF-LIST-FIX",
    },
    "recompile_shapes": {
        "problem": "torch.compile(model, dynamic=False) fed sequence lengths cycling through "
                   "24, 32, 40, 48: a dynamo recompile (+ inductor compile) at the first step "
                   "of each new length; steps 0-2 use 24, so the recompiles for 32, 40, 48 "
                   "fall in ProfilerStep#4, #5, #6",
        "fix": "every batch padded to length 48 (pad token 0, target ignore_index=-100): one "
               "compile, in ProfilerStep#0 (not exported)",
        "model": "SeqNet: Embedding(256,32) + pre-norm residual MLP block (32->128->32, GELU) "
                 "+ Linear(32,256) per token, compiled; per-token cross_entropy; "
                 "Adam(lr=1e-3, fused=True)",
        "problem_marker": "WHATIF-COMPILE-PROBLEM", "fix_marker": "WHATIF-COMPILE-FIX",
    },
}


def find_line(marker):
    with open(os.path.abspath(__file__)) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return n, line.strip()
    raise RuntimeError(f"marker {marker} not found")


# ============================================================================================
# Worker side: the training loops (imports torch lazily so the parent stays light)
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

    class MlpBlock(nn.Module):
        def __init__(self, d, hidden, act):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, hidden)
            self.fc2 = nn.Linear(hidden, d)
            self.act = act

        def forward(self, t):
            return t + self.fc2(self.act(self.fc1(self.norm(t))))

    def hand_gelu(x):
        return x * 0.5 * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))  # WHATIF-GELU-PROBLEM

    def lib_gelu(x):
        return F.gelu(x, approximate="tanh")  # WHATIF-GELU-FIX

    class SmallNet(nn.Module):
        """A smaller TinyNet (kept small so 16 steps with_stack stay < 400 KB gzipped):
        conv(3->8)+relu+pool, conv(8->16)+relu+pool on 32x32 images, 64 tokens x 16 ch,
        residual MLP (Linear(16,hidden), act, Linear(hidden,16)), mean over tokens, head."""

        def __init__(self, n_classes=10, hidden=64, act=F.gelu, explicit_pad=False):
            super().__init__()
            pad = 0 if explicit_pad else 1
            self.explicit_pad = explicit_pad
            self.conv1 = nn.Conv2d(3, 8, 3, padding=pad)
            self.conv2 = nn.Conv2d(8, 16, 3, padding=pad)
            self.fc1 = nn.Linear(16, hidden)
            self.fc2 = nn.Linear(hidden, 16)
            self.act = act
            self.head = nn.Linear(16, n_classes)

        def conv(self, layer, x):
            if self.explicit_pad:
                return layer(F.pad(x, (1, 1, 1, 1)))  # WHATIF-PAD-PROBLEM
            return layer(x)  # WHATIF-PAD-FIX

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv(self.conv1, x)), 2)  # (B, 8, 16, 16)
            x = F.max_pool2d(F.relu(self.conv(self.conv2, x)), 2)  # (B, 16, 8, 8)
            t = x.flatten(2).transpose(1, 2)  # (B, 64 tokens, 16 channels)
            t = t + self.fc2(self.act(self.fc1(t)))
            return self.head(t.mean(dim=1))

    def mlp(width, depth, n_out):  # noqa: E306
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(width, n_out))

    class Batches(torch.utils.data.Dataset):
        """Item i = one whole pre-made batch (x, y): DataLoader(batch_size=None), so per-step
        loading is one __getitem__ (fewer events per step than per-sample collation)."""

        def __init__(self, x, y, batch=BATCH):
            self.items = [(x[i:i + batch], y[i:i + batch]) for i in range(0, len(x), batch)]

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            return self.items[i]

    def images(n, n_classes=10, size=32):
        g = torch.Generator().manual_seed(SEED)
        return (torch.randn(n, 3, size, size, generator=g),
                torch.randint(0, n_classes, (n,), generator=g))

    def loader_of(ds, batched=True):
        if batched:
            return torch.utils.data.DataLoader(ds, batch_size=None, shuffle=False, num_workers=0)
        return torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=False, num_workers=0)

    n_samples = BATCH * N_STEPS
    cleanup = []

    # ---- per pair: build loader, model, optimizer, and the step body ----------------------
    if pair == "unfused_optimizer":
        class ExpertBank(nn.Module):
            """N_EXPERTS separate (16, 16) weight tensors, applied together (stacked) and
            averaged: many parameter tensors for few forward/backward ops."""

            def __init__(self):
                super().__init__()
                self.w = nn.ParameterList(
                    [nn.Parameter(torch.randn(16, 16) * 0.25) for _ in range(N_EXPERTS)])
                self.head = nn.Linear(16, 10, bias=False)

            def forward(self, x):
                h = torch.relu(torch.einsum("bi,kij->bkj", x, torch.stack(list(self.w))))
                return self.head(h.mean(dim=1))

        N_EXPERTS = 15  # + the head weight = 16 parameter tensors
        g = torch.Generator().manual_seed(SEED)
        loader = loader_of(Batches(torch.randn(n_samples, 16, generator=g),
                                   torch.randint(0, 10, (n_samples,), generator=g)))
        model = ExpertBank()
        if problem:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)  # WHATIF-OPT-PROBLEM
        else:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)  # WHATIF-OPT-FIX

        def step(batch):
            x, y = batch
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    elif pair in ("pointwise_chain", "explicit_pad", "anomaly_detection"):
        loader = loader_of(Batches(*images(n_samples)))
        if pair == "pointwise_chain":
            model = SmallNet(hidden=512, act=hand_gelu if problem else lib_gelu)
        else:
            model = SmallNet(explicit_pad=pair == "explicit_pad" and problem)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
        if pair == "anomaly_detection":
            if problem:
                torch.autograd.set_detect_anomaly(True)  # WHATIF-ANOMALY-PROBLEM
                cleanup.append(lambda: torch.autograd.set_detect_anomaly(False))
            else:
                torch.autograd.set_detect_anomaly(False)  # WHATIF-ANOMALY-FIX

        def step(batch):
            x, y = batch
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    elif pair == "zero_grad":
        g = torch.Generator().manual_seed(SEED)
        n = 64 * N_STEPS
        loader = loader_of(Batches(torch.randn(n, 512, generator=g),
                                   torch.randint(0, 10, (n,), generator=g), batch=64))
        model = mlp(512, 6, 10)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)

        def step(batch):
            x, y = batch
            loss = F.cross_entropy(model(x), y)
            if problem:
                opt.zero_grad(set_to_none=False)  # WHATIF-ZERO-PROBLEM
            else:
                opt.zero_grad(set_to_none=True)  # WHATIF-ZERO-FIX
            loss.backward()
            opt.step()

    elif pair == "dataloader_work":
        class AugmentedImages(torch.utils.data.Dataset):
            """40x40 raw images; __getitem__ = pad 4, random 32x32 crop, flip, box blur,
            normalise, all numpy, seeded per index (so precomputing gives the same samples)."""

            def __init__(self, n):
                rng = np.random.default_rng(SEED)
                self.raw = rng.standard_normal((n, 3, RAW, RAW), dtype=np.float32)
                self.y = rng.integers(0, 10, n)

            def __len__(self):
                return len(self.raw)

            def __getitem__(self, i):
                return torch.from_numpy(augment(self.raw[i], i)), int(self.y[i])

        BLUR_ITERS = 12
        CROP = 32 + 2 * BLUR_ITERS  # each valid 3x3 blur shrinks the image by 2
        RAW = CROP + 8

        def augment(img, i):
            rng = np.random.default_rng(SEED + i)
            r, c = rng.integers(0, RAW - CROP + 1, 2)
            img = img[:, r:r + CROP, c:c + CROP]  # random crop
            if rng.random() < 0.5:
                img = img[:, :, ::-1]  # horizontal flip
            for _ in range(BLUR_ITERS):  # valid 3x3 box blur
                img = (img[:, :-2, :-2] + img[:, :-2, 1:-1] + img[:, :-2, 2:]
                       + img[:, 1:-1, :-2] + img[:, 1:-1, 1:-1] + img[:, 1:-1, 2:]
                       + img[:, 2:, :-2] + img[:, 2:, 1:-1] + img[:, 2:, 2:]) * (1.0 / 9.0)
            img = (img - img.mean()) / (img.std() + 1e-5)  # normalise
            return np.ascontiguousarray(img, dtype=np.float32)

        ds = AugmentedImages(n_samples)
        if problem:
            loader = loader_of(ds, batched=False)  # WHATIF-DATA-PROBLEM
        else:
            pre = [ds[i] for i in range(len(ds))]
            pre_ds = torch.utils.data.TensorDataset(torch.stack([p[0] for p in pre]),
                                                    torch.tensor([p[1] for p in pre]))
            loader = loader_of(pre_ds, batched=False)  # WHATIF-DATA-FIX
        model = SmallNet()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)

        def step(batch):
            x, y = batch
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    elif pair == "tensor_from_list":
        n_classes = 4096
        loader = loader_of(Batches(*images(n_samples, n_classes=n_classes)))
        model = SmallNet(n_classes=n_classes)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
        wrng = random.Random(SEED)
        class_weights = [0.5 + wrng.random() for _ in range(n_classes)]  # a Python list
        fixed_w = None if problem else torch.tensor(class_weights)  # WHATIF-LIST-FIX

        def step(batch):
            x, y = batch
            if problem:
                w = torch.tensor(class_weights)  # WHATIF-LIST-PROBLEM
            else:
                w = fixed_w
            loss = F.cross_entropy(model(x), y, weight=w)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    elif pair == "recompile_shapes":
        lengths = (24, 32, 40, 48)
        max_len = max(lengths)
        vocab = 256

        class SeqNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(vocab, 32)
                self.block = MlpBlock(32, 128, F.gelu)
                self.out = nn.Linear(32, vocab)

            def forward(self, tok):
                return self.out(self.block(self.emb(tok)))

        class Sequences(torch.utils.data.Dataset):
            """Item i = one whole batch (BATCH, L_i) of tokens and next-token targets; steps
            0-2 use length 24, then 24, 32, 40, 48 cycle."""

            def __init__(self, n_batches, pad_to=None):
                g = torch.Generator().manual_seed(SEED)
                self.items = []
                for i in range(n_batches):
                    ln = lengths[0] if i < WAIT + WARMUP else lengths[(i - WAIT - WARMUP) % 4]
                    seq = torch.randint(1, vocab, (BATCH, ln + 1), generator=g)
                    tok, tgt = seq[:, :-1], seq[:, 1:].clone()
                    if pad_to is not None and ln < pad_to:
                        tok = F.pad(tok, (0, pad_to - ln), value=0)
                        tgt = F.pad(tgt, (0, pad_to - ln), value=-100)
                    self.items.append((tok.contiguous(), tgt.contiguous()))

            def __len__(self):
                return len(self.items)

            def __getitem__(self, i):
                return self.items[i]

        if problem:
            ds = Sequences(N_STEPS)  # WHATIF-COMPILE-PROBLEM
        else:
            ds = Sequences(N_STEPS, pad_to=max_len)  # WHATIF-COMPILE-FIX
        loader = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=False, num_workers=0)
        eager = SeqNet()
        model = torch.compile(eager, dynamic=False)
        opt = torch.optim.Adam(eager.parameters(), lr=1e-3, fused=True)

        def step(batch):
            tok, tgt = batch
            logits = model(tok)
            loss = F.cross_entropy(logits.reshape(-1, vocab), tgt.reshape(-1), ignore_index=-100)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    else:
        raise SystemExit(f"unknown pair {pair!r}")

    # ---- the loop: identical for every pair, profiled or timed ---------------------------
    def loop(prof):
        times = []
        it = iter(loader)
        for _ in range(N_STEPS):
            t0 = time.perf_counter_ns()
            batch = next(it)
            step(batch)
            t1 = time.perf_counter_ns()
            times.append(t1 - t0)
            if prof is not None:
                prof.step()
        return times

    try:
        if trace_path:
            def on_ready(p):
                p.export_chrome_trace(trace_path)

            with profile(
                activities=[ProfilerActivity.CPU],
                schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                record_shapes=True,
                with_stack=with_stack(pair),
                on_trace_ready=on_ready,
            ) as prof:
                loop(prof)
        else:
            times = loop(None)
            with open(times_path, "w") as f:
                json.dump({"step_ns": times[WAIT + WARMUP:], "all_step_ns": times}, f)
    finally:
        for c in cleanup:
            c()
    meta = {"torch": torch.__version__, "num_threads": torch.get_num_threads()}
    print("WORKER-META " + json.dumps(meta))


# ============================================================================================
# Parent side: runs, then an independent reading of the traces (plain json, exact decimals)
# ============================================================================================
def with_stack(pair):
    """with_stack=True everywhere but in two pairs where the Python tracer explodes the trace:
    recompile_shapes (it records every dynamo/inductor call of the 3 in-step recompiles: ~8 M
    python_function events, a 2.8 GB JSON / 197 MB gzipped trace, ~10 s per recompile step) and
    anomaly_detection (anomaly mode captures a Python traceback for every autograd node: a
    4.3 MB gzipped problem trace). Both record with record_shapes only."""
    return pair not in ("recompile_shapes", "anomaly_detection")


def us_to_ns(v):
    """A ts/dur value in µs (parsed as Decimal or int) -> int ns, half away from zero."""
    d = decimal.Decimal(v) if not isinstance(v, decimal.Decimal) else v
    return int((d * 1000).to_integral_value(rounding=decimal.ROUND_HALF_UP))


def profiler_steps(path):
    """[(N, dur_ns)] of the ProfilerStep#N events of a (gzipped) chrome trace, by N."""
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    out = []
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and e.get("ph") == "X" and str(e.get("name", "")).startswith(
                "ProfilerStep#"):
            out.append((int(e["name"].split("#", 1)[1]), us_to_ns(e["dur"])))
    out.sort()
    return out


def median(xs):
    """Median; for an even count the mean of the two middle values (may end in .5)."""
    s = sorted(xs)
    n = len(s)
    if n % 2:
        return s[n // 2]
    a, b = s[n // 2 - 1], s[n // 2]
    return (a + b) // 2 if (a + b) % 2 == 0 else (a + b) / 2


def bootstrap_interval(p, f, seed=BOOTSTRAP_SEED, n=BOOTSTRAP_RESAMPLES):
    """95 % percentile bootstrap of median(p) - median(f): resample each variant's steps with
    replacement (random.Random(seed).choices, problem then fixed per resample), sort the n
    differences, take sorted[int(0.025 n)] and sorted[int(0.975 n) - 1] (indices 50 and 1949)."""
    rng = random.Random(seed)
    diffs = []
    for _ in range(n):
        diffs.append(median(rng.choices(p, k=len(p))) - median(rng.choices(f, k=len(f))))
    diffs.sort()
    return [diffs[int(0.025 * n)], diffs[int(0.975 * n) - 1]]


def summary(runs_p, runs_f):
    pp = [x for r in runs_p for x in r]
    ff = [x for r in runs_f for x in r]
    mp, mf = median(pp), median(ff)
    return {
        "steps_per_variant": [len(pp), len(ff)],
        "median_problem_ns": mp,
        "median_fixed_ns": mf,
        "saving_ns": mp - mf,
        "saving_interval_95_ns": bootstrap_interval(pp, ff),
        "mean_problem_ns": round(sum(pp) / len(pp)),
        "mean_fixed_ns": round(sum(ff) / len(ff)),
        "total_problem_ns": sum(pp),
        "total_fixed_ns": sum(ff),
    }


def run_worker_process(args, tmp):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker"] + args
    env = dict(os.environ)
    # a fresh inductor cache per run: no compiled artifacts carried from one run to the next
    env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-", dir=tmp)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{res.stderr[-4000:]}")
    meta = {}
    for line in res.stdout.splitlines():
        if line.startswith("WORKER-META "):
            meta = json.loads(line[len("WORKER-META "):])
    return meta


def gzip_to(src, dst):
    with open(src, "rb") as s, open(dst, "wb") as d:
        with gzip.GzipFile(filename="", mode="wb", fileobj=d, mtime=0) as z:
            shutil.copyfileobj(s, z)


def run_pair(pair):
    tmp = tempfile.mkdtemp(prefix=f"steplens-whatif-{pair}-")
    prof_runs = {v: [] for v in VARIANTS}
    unprof_runs = {v: [] for v in VARIANTS}
    order = []
    meta = {}
    t_start = time.time()
    for r in range(ROUNDS):
        for v in VARIANTS:
            raw = os.path.join(tmp, f"{pair}.{v}.r{r}.json")
            meta = run_worker_process([pair, v, "--trace", raw], tmp) or meta
            steps = profiler_steps(raw)
            names = [n for n, _ in steps]
            if names != list(range(WAIT + WARMUP, N_STEPS)):
                raise RuntimeError(f"{raw}: unexpected ProfilerStep numbers {names}")
            prof_runs[v].append({"run": r, "step_ns": [d for _, d in steps]})
            if r == 0:
                gzip_to(raw, os.path.join(HERE, f"{pair}.{v}.json.gz"))
            os.remove(raw)
            order.append(f"{v}/profiled/run{r}")
            print(f"[{pair}] {v} profiled run {r}: median step "
                  f"{median(prof_runs[v][-1]['step_ns']) / 1e6:.3f} ms", file=sys.stderr)
        for v in VARIANTS:
            tp = os.path.join(tmp, f"{pair}.{v}.r{r}.times.json")
            run_worker_process([pair, v, "--times", tp], tmp)
            with open(tp) as f:
                unprof_runs[v].append({"run": r, "step_ns": json.load(f)["step_ns"]})
            order.append(f"{v}/unprofiled/run{r}")
            print(f"[{pair}] {v} unprofiled run {r}: median step "
                  f"{median(unprof_runs[v][-1]['step_ns']) / 1e6:.3f} ms", file=sys.stderr)
    shutil.rmtree(tmp)

    prof = summary([x["step_ns"] for x in prof_runs["problem"]],
                   [x["step_ns"] for x in prof_runs["fixed"]])
    unprof = summary([x["step_ns"] for x in unprof_runs["problem"]],
                     [x["step_ns"] for x in unprof_runs["fixed"]])
    sp, su = prof["saving_ns"], unprof["saving_ns"]
    sc = dict(SCENARIOS[pair])
    pl, pcode = find_line(sc.pop("problem_marker"))
    fl, fcode = find_line(sc.pop("fix_marker"))
    sc["problem_call_site"] = {"site": f"{THIS_FILE}:{pl}", "code": pcode.split("  # ")[0]}
    sc["fix_call_site"] = {"site": f"{THIS_FILE}:{fl}", "code": fcode.split("  # ")[0]}
    for v in VARIANTS:
        for x in prof_runs[v] + unprof_runs[v]:
            x["median_step_ns"] = median(x["step_ns"])
    truth = {
        "pair": pair,
        "finding_kind": FINDING_KIND[pair],
        "files": {v: f"{pair}.{v}.json.gz" for v in VARIANTS},
        "generator": "samples/whatif/generate.py",
        "torch": meta.get("torch"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_num_threads": meta.get("num_threads"),
        "scenario": sc,
        "profiler": {
            "activities": ["CPU"],
            "schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE, "repeat": 1},
            "record_shapes": True, "with_stack": with_stack(pair), "profile_memory": False,
            "export": "prof.export_chrome_trace(path) in on_trace_ready, gzip mtime 0",
        },
        "profiled_steps": [f"ProfilerStep#{i}" for i in range(WAIT + WARMUP, N_STEPS)],
        "method": {
            "step_ns": "ProfilerStep#N 'dur' (µs, exact decimal) * 1000, rounded half up; "
                       "unprofiled: time.perf_counter_ns() around next(loader) + the step body "
                       "of the same 16 loop iterations (#3..#18)",
            "median": "over the pooled 48 steps (3 runs x 16) of each variant; even count -> "
                      "mean of the two middle values",
            "saving_ns": "median_problem_ns - median_fixed_ns",
            "interval": "95 % percentile bootstrap of the median difference: 2000 resamples, "
                        "random.Random(0).choices with replacement within each variant (problem "
                        "then fixed per resample), sorted differences at indices 50 and 1949",
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
    with open(os.path.join(HERE, f"{pair}.truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print(f"[{pair}] saving profiled {sp / 1e6:.3f} ms {prof['saving_interval_95_ns']}, "
          f"unprofiled {su / 1e6:.3f} ms, dominates={truth['profiler_dominates']}",
          file=sys.stderr)


def table():
    """The README table, from the truth files present (ms, 3 decimals)."""
    ms = lambda ns: f"{ns / 1e6:.3f}"  # noqa: E731
    print("| pair | median problem | median fixed | realized saving (profiled) | 95 % interval "
          "| realized saving (unprofiled) | unprofiled interval | profiler dominates? |")
    print("|---|---|---|---|---|---|---|---|")
    for pair in PAIRS:
        path = os.path.join(HERE, f"{pair}.truth.json")
        if not os.path.exists(path):
            print(f"| `{pair}` | skipped | | | | | | |")
            continue
        with open(path) as f:
            t = json.load(f)
        p, u = t["profiled"], t["unprofiled"]
        print(f"| `{pair}` | {ms(p['median_problem_ns'])} ms ({ms(u['median_problem_ns'])}) "
              f"| {ms(p['median_fixed_ns'])} ms ({ms(u['median_fixed_ns'])}) "
              f"| {ms(p['saving_ns'])} ms "
              f"| [{ms(p['saving_interval_95_ns'][0])}, {ms(p['saving_interval_95_ns'][1])}] "
              f"| {ms(u['saving_ns'])} ms "
              f"| [{ms(u['saving_interval_95_ns'][0])}, {ms(u['saving_interval_95_ns'][1])}] "
              f"| {'yes' if t['profiler_dominates'] else 'no'} |")


def main(argv):
    if argv == ["--table"]:
        table()
        return
    if argv and argv[0] == "--worker":
        pair, variant, kind, path = argv[1:5]
        worker(pair, variant, path if kind == "--trace" else None,
               path if kind == "--times" else None)
        return
    names = argv or list(PAIRS)
    for n in names:
        if n not in PAIRS:
            raise SystemExit(f"unknown pair {n!r}; choose from {PAIRS}")
    for n in names:
        run_pair(n)


if __name__ == "__main__":
    main(sys.argv[1:])
