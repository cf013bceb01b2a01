#!/usr/bin/env python3
"""Generate steplens' small real CPU traces with torch.profiler, plus their truth files.

    python3 samples/gen/make_torch_samples.py            # all scenarios
    python3 samples/gen/make_torch_samples.py train_sync # one

Writes samples/torch-cpu/<scenario>.json (train_clean) or <scenario>.json.gz (the others)
and <scenario>.truth.json beside each (see truth.py for the fields). The training loop is
seeded; op counts and structure are reproducible, timings are not.

Scenarios
  train_clean  nothing wrong: no .item(), fast data, zero_grad(set_to_none=True)
  train_sync   + loss.item() and print(loss) every step (host syncs), with_stack=True
  train_stall  Dataset.__getitem__ sleeps SLEEP_PER_SAMPLE_S per sample (num_workers=0)
"""

import gzip
import os
import platform
import random
import shutil
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import truth  # noqa: E402

OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "torch-cpu"))
SEED = 0
BATCH = 8
WAIT, WARMUP, ACTIVE = 1, 1, 3
N_STEPS = WAIT + WARMUP + ACTIVE  # 5 loop iterations -> ProfilerStep#0..#4, #2..#4 exported
SLEEP_PER_SAMPLE_S = 0.001
IMG = 64  # big enough that a step (~10+ ms) dwarfs normal batch loading
THIS_FILE = os.path.basename(__file__)


class SyntheticImages(torch.utils.data.Dataset):
    """Fixed random 3xIMGxIMG images with labels in [0, 10). Optionally slow."""

    def __init__(self, n, sleep_s=0.0):
        g = torch.Generator().manual_seed(SEED)
        self.x = torch.randn(n, 3, IMG, IMG, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.sleep_s = sleep_s

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)  # STALL-SLEEP
        return self.x[i], self.y[i]


class MlpBlock(nn.Module):
    """Pre-norm residual MLP over tokens: the 'transformer-ish' half."""

    def __init__(self, d, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, t):
        return t + self.fc2(F.gelu(self.fc1(self.norm(t))))


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.block = MlpBlock(32, 128)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 16, 32, 32)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 32, 16, 16)
        t = x.flatten(2).transpose(1, 2)  # (B, 256 tokens, 32 channels)
        t = self.block(t)
        return self.head(t.mean(dim=1))


def find_line(marker):
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return n
    raise RuntimeError(f"marker {marker} not found")


def train(prof, loader, model, opt, sync):
    for step, (x, y) in enumerate(loader):
        out = model(x)
        loss = F.cross_entropy(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sync:
            loss_val = loss.item()  # SYNC-ITEM
            print(loss)  # SYNC-PRINT
            del loss_val
        prof.step()
        if step + 1 >= N_STEPS:
            break


def run_scenario(name):
    random.seed(SEED)
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    sync = name == "train_sync"
    stall = name == "train_stall"
    ds = SyntheticImages(BATCH * N_STEPS, sleep_s=SLEEP_PER_SAMPLE_S if stall else 0.0)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=False, num_workers=0)
    model = TinyNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    os.makedirs(OUT_DIR, exist_ok=True)
    gz = name != "train_clean"
    final = os.path.join(OUT_DIR, name + (".json.gz" if gz else ".json"))
    tmpdir = tempfile.mkdtemp(prefix="steplens-trace-")
    raw = os.path.join(tmpdir, name + ".json")

    def on_ready(p):
        p.export_chrome_trace(raw)  # the one allowed save

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        record_shapes=True,
        with_stack=sync,
        on_trace_ready=on_ready,
    ) as prof:
        train(prof, loader, model, opt, sync)

    if gz:
        with open(raw, "rb") as src, open(final, "wb") as dst_f:
            with gzip.GzipFile(filename="", mode="wb", fileobj=dst_f, mtime=0) as dst:
                shutil.copyfileobj(src, dst)
    else:
        shutil.copyfile(raw, final)
    shutil.rmtree(tmpdir)

    scenario = {
        "name": name,
        "generator": "samples/gen/make_torch_samples.py",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_num_threads": torch.get_num_threads(),
        "profiler": {
            "activities": ["CPU"],
            "schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE, "repeat": 1},
            "record_shapes": True,
            "with_stack": sync,
            "profile_memory": False,
        },
        "profiled_steps": [f"ProfilerStep#{i}" for i in range(WAIT + WARMUP, N_STEPS)],
        "model": "TinyNet: conv(3->16)+relu+maxpool, conv(16->32)+relu+maxpool, "
                 "256 tokens x 32 ch -> LayerNorm+Linear(32,128)+GELU+Linear(128,32) residual, "
                 "mean over tokens, Linear(32,10); cross_entropy; SGD(lr=0.01, momentum=0.9)",
        "input": {"batch_size": BATCH, "image": [3, IMG, IMG], "num_workers": 0, "shuffle": False},
        "zero_grad": "set_to_none=True",
        "item_calls_per_step": 1 if sync else 0,
        "print_calls_per_step": 1 if sync else 0,
        "sync_call_sites": [],
        "dataloader_stall": stall,
        "sleep_per_sample_s": SLEEP_PER_SAMPLE_S if stall else 0.0,
        "sleep_per_batch_s": SLEEP_PER_SAMPLE_S * BATCH if stall else 0.0,
    }
    if sync:
        scenario["sync_call_sites"] = [
            {"site": f"{THIS_FILE}:{find_line('SYNC-ITEM')}", "code": "loss_val = loss.item()",
             "kind": "item"},
            {"site": f"{THIS_FILE}:{find_line('SYNC-PRINT')}", "code": "print(loss)",
             "kind": "print"},
        ]
    if stall:
        scenario["sleep_site"] = f"{THIS_FILE}:{find_line('STALL-SLEEP')}"

    doc = truth.load_trace(final)
    scenario["observed_per_step"] = observe(doc)
    del doc
    t = truth.write_truth(final, scenario)
    print(f"{final}: {os.path.getsize(final)} bytes, {t['events']} events, "
          f"steps {[s['name'] for s in t['steps']]}", file=sys.stderr)
    return final


SYNC_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::masked_select")


def observe(doc):
    """Per-step facts for the detectors team: sync-op counts, DataLoader time not covered by
    any cpu_op on the step's thread, and (with_stack) the CallFrom of python frames that
    directly call into the sync ops' frames from this script."""
    evs = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    for e in evs:
        e["_s"] = truth.us_to_ns(e.get("ts"))
        e["_e"] = e["_s"] + truth.us_to_ns(e.get("dur", 0))
    steps = sorted((e for e in evs if e.get("cat") == "user_annotation"
                    and e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["_s"])
    out = []
    for s in steps:
        inside = [e for e in evs if s["_s"] <= e["_s"] < s["_e"]]
        same = [e for e in inside if e.get("pid") == s.get("pid") and e.get("tid") == s.get("tid")]
        ops = [e for e in same if e.get("cat") == "cpu_op"]
        counts = {n: sum(1 for e in ops if e["name"] == n) for n in SYNC_OPS}
        dl_total = dl_uncovered = 0
        for d in (e for e in same if e.get("name", "").startswith("enumerate(DataLoader)#")):
            ivs = sorted((max(o["_s"], d["_s"]), min(o["_e"], d["_e"])) for o in ops
                         if o["_s"] < d["_e"] and o["_e"] > d["_s"])
            covered, cur_s, cur_e = 0, None, None
            for a, b in ivs:
                if cur_e is None or a > cur_e:
                    if cur_e is not None:
                        covered += cur_e - cur_s
                    cur_s, cur_e = a, b
                else:
                    cur_e = max(cur_e, b)
            if cur_e is not None:
                covered += cur_e - cur_s
            dl_total += d["_e"] - d["_s"]
            dl_uncovered += (d["_e"] - d["_s"]) - covered
        sites = {}
        for e in same:
            if e.get("cat") == "python_function":
                cf = (e.get("args") or {}).get("CallFrom", "")
                if cf.startswith(THIS_FILE + ":"):
                    sites[cf] = sites.get(cf, 0) + 1
        rec = {
            "step": s["name"],
            "sync_ops": counts,
            "dataloader_ns": dl_total,
            "dataloader_uncovered_ns": dl_uncovered,
        }
        if sites:
            rec["python_calls_from_this_file"] = dict(sorted(sites.items()))
        out.append(rec)
    return out


SCENARIOS = ("train_clean", "train_sync", "train_stall")


def main(argv):
    names = argv or list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            raise SystemExit(f"unknown scenario {n!r}; choose from {SCENARIOS}")
    for n in names:
        run_scenario(n)


if __name__ == "__main__":
    main(sys.argv[1:])
