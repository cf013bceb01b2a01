#!/usr/bin/env python3
"""Generate steplens' small real CPU traces with torch.profiler, plus their truth files.

    python3 samples/gen/make_torch_samples.py            # all scenarios
    python3 samples/gen/make_torch_samples.py train_sync # one

Writes samples/torch-cpu/<scenario>.json (train_clean) or <scenario>.json.gz (the others)
and <scenario>.truth.json beside each (see truth.py for the fields). The training loop is
seeded; op counts and structure are reproducible, timings are not.

Scenarios (train_zero_grad, train_anomaly, train_transpose: see EXTRA_SCENARIOS below)
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
    extra = name in EXTRA_SCENARIOS
    ds = SyntheticImages(BATCH * N_STEPS, sleep_s=SLEEP_PER_SAMPLE_S if stall else 0.0)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=False, num_workers=0)
    model = TransposeNet() if name == "train_transpose" else TinyNet()
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
        if extra:
            train_variant(prof, loader, model, opt, name)
        else:
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
    if extra:
        scenario.update(EXTRA_SCENARIO_INFO[name])

    doc = truth.load_trace(final)
    scenario["observed_per_step"] = observe(doc)
    if extra:
        check_extra(name, scenario, observe_detectors(doc))
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


# ---------------------------------------------------------------------------------------------
# Scenarios for the layout, gradient-zeroing and debug-API detectors (non_logical_transpose,
# slow_zero_grad, debug_api_enabled). They live below train() so that the line numbers recorded
# in the train_sync trace (SYNC-ITEM, SYNC-PRINT) stay where they are.
#
#   train_zero_grad  opt.zero_grad(set_to_none=False): one aten::zero_ per parameter gradient
#                    under Optimizer.zero_grad#SGD.zero_grad, then every AccumulateGrad node adds
#                    into the zeroed gradient (aten::add_) instead of taking the new one over
#   train_anomaly    torch.autograd.set_detect_anomaly(True) around the loop: every backward node
#                    checks each gradient it produced (aten::isnan, aten::_is_any_true > aten::any,
#                    aten::item)
#   train_transpose  TransposeNet: permute(0, 2, 3, 1).contiguous() of the NCHW conv activation
#                    (non-logical: the stride-1 dim moves, the copy is a strided gather), plus the
#                    traps: a (B,T,H,D) -> (B,H,T,D) head split and a (B,H,T,D) -> (B,T,H,D)
#                    transpose(1, 2).contiguous() of the attention output, both keeping the last
#                    dim in place (row copies, logical)

EXTRA_SCENARIOS = ("train_zero_grad", "train_anomaly", "train_transpose")
HEADS = 4

TRANSPOSE_MODEL = (
    "TransposeNet: TinyNet + after conv1/pool: permute(0,2,3,1).contiguous() (NHWC), "
    "LayerNorm(16) over channels, permute(0,3,1,2) back (a view); after the token flatten: "
    "Linear(32,32) -> view(B,T,4,8).transpose(1,2).contiguous() -> SDPA(q,q,q) -> "
    "transpose(1,2).contiguous() -> view(B,T,32) -> Linear(32,32), residual; then the MLP block "
    "and head of TinyNet"
)


class TransposeNet(TinyNet):
    """TinyNet with one non-logical layout change (NCHW -> NHWC copy) and logical ones."""

    def __init__(self):
        super().__init__()
        self.chan_norm = nn.LayerNorm(16)
        self.q = nn.Linear(32, 32)
        self.o = nn.Linear(32, 32)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 16, 32, 32), NCHW
        x = x.permute(0, 2, 3, 1).contiguous()  # TRANSPOSE-NONLOGICAL
        x = self.chan_norm(x).permute(0, 3, 1, 2)  # normalise channels, back to an NCHW view
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 32, 16, 16)
        t = x.flatten(2).transpose(1, 2)  # (B, 256 tokens, 32 channels)
        b, n, c = t.shape
        q = self.q(t).view(b, n, HEADS, c // HEADS).transpose(1, 2).contiguous()  # TRANSPOSE-HEADS
        a = F.scaled_dot_product_attention(q, q, q)  # (B, H, T, D), contiguous
        a = a.transpose(1, 2).contiguous()  # TRANSPOSE-LOGICAL
        t = t + self.o(a.view(b, n, c))
        t = self.block(t)
        return self.head(t.mean(dim=1))


def train_variant(prof, loader, model, opt, name):
    anomaly = name == "train_anomaly"
    if anomaly:
        torch.autograd.set_detect_anomaly(True)  # ANOMALY-ON
    try:
        for step, (x, y) in enumerate(loader):
            out = model(x)
            loss = F.cross_entropy(out, y)
            opt.zero_grad(set_to_none=name != "train_zero_grad")  # ZERO-GRAD
            loss.backward()
            opt.step()
            prof.step()
            if step + 1 >= N_STEPS:
                break
    finally:
        if anomaly:
            torch.autograd.set_detect_anomaly(False)


N_PARAMS_TINYNET = 12  # conv1, conv2, block.norm, block.fc1, block.fc2, head: weight + bias

# What each extra scenario plants, and the findings a correct analyzer reports per profiled step
# (kinds of docs/findings.md). check_extra() compares these with what observe_detectors() counts
# in the trace.
EXTRA_SCENARIO_INFO = {
    "train_zero_grad": {
        "zero_grad": "set_to_none=False",
        "planted": "opt.zero_grad(set_to_none=False): 12 aten::zero_ per step directly under "
                   "Optimizer.zero_grad#SGD.zero_grad, 12 AccumulateGrad doing aten::add_",
        "expected_findings_per_step": {
            "slow_zero_grad": 1, "non_logical_transpose": 0, "debug_api_enabled": 0,
        },
        "expected_zeroed_gradients_per_step": N_PARAMS_TINYNET,
    },
    "train_anomaly": {
        "anomaly_mode": "torch.autograd.set_detect_anomaly(True) for the whole loop",
        "planted": "anomaly detection: per backward node and produced gradient aten::isnan + "
                   "aten::_is_any_true (> aten::any) + aten::item under "
                   "autograd::engine::evaluate_function: <Node>",
        "expected_findings_per_step": {
            "debug_api_enabled": 1, "non_logical_transpose": 0, "slow_zero_grad": 0,
        },
    },
    "train_transpose": {
        "model": TRANSPOSE_MODEL,
        "planted": "x.permute(0, 2, 3, 1).contiguous() of the (8, 16, 32, 32) conv activation "
                   "(last dim moves: strided gather); traps: q.view(B,T,H,D).transpose(1, 2)"
                   ".contiguous() and attn.transpose(1, 2).contiguous() of (8, 4, 256, 8), both "
                   "keep the last dim (row copies)",
        "expected_findings_per_step": {
            "non_logical_transpose": 1, "slow_zero_grad": 0, "debug_api_enabled": 0,
        },
    },
}
for _info in EXTRA_SCENARIO_INFO.values():
    _info["expected_findings_total"] = {
        k: v * ACTIVE for k, v in _info["expected_findings_per_step"].items()
    }


def check_extra(name, scenario, observed):
    """Merge the detector observations into observed_per_step and warn when the trace does not
    show what the scenario planted."""
    for rec, obs in zip(scenario["observed_per_step"], observed):
        rec.update(obs)
    want = scenario["expected_findings_per_step"]
    for obs in observed:
        got = {
            "non_logical_transpose": len(obs["transposes"]["nonlogical_with_copy_ops"]),
            "slow_zero_grad": int(bool(obs["user_level_zeroing_ops"])
                                  and obs["accumulate_grad"]["with_add_"] > 0),
            "debug_api_enabled": int(obs["backward_nan_checks"].get("aten::isnan", 0) > 0),
        }
        if got != want:
            print(f"WARNING {name} {obs['step']}: observed {got}, planted {want}", file=sys.stderr)


TRANSPOSE_OPS = ("aten::permute", "aten::transpose", "aten::t", "aten::swapaxes",
                 "aten::swapdims")
COPY_OPS = ("aten::contiguous", "aten::clone", "aten::copy_", "aten::reshape")
COPY_WRAPPERS = COPY_OPS + ("aten::flatten", "aten::to", "aten::_to_copy")
COMPILE_SPANS = ("dynamo", "entire_frame_compile", "entire_backward_compile", "inductor_compile",
                 "compile_fx_inner", "backend_compile")
EVALUATE = "autograd::engine::evaluate_function: "


def _nest(events):
    """Parent links per (pid, tid): sort by (start, longer first), stack of open slices."""
    lanes = {}
    for e in events:
        key = (truth._hashable(e.get("pid")), truth._hashable(e.get("tid")))
        lanes.setdefault(key, []).append(e)
    for lane in lanes.values():
        lane.sort(key=lambda e: (e["_s"], -(e["_e"] - e["_s"])))  # stable: file order last
        stack = []
        for e in lane:
            # e nests in the top when it ends inside it and starts inside it (or with it)
            while stack and not (e["_e"] <= stack[-1]["_e"] and (
                    e["_s"] < stack[-1]["_e"] or e["_s"] == stack[-1]["_s"])):
                stack.pop()
            e["_parent"] = stack[-1] if stack else None
            e["_children"] = []
            if stack:
                stack[-1]["_children"].append(e)
            stack.append(e)
    return lanes


def _ancestors(e):
    p = e["_parent"]
    while p is not None:
        yield p
        p = p["_parent"]


def _cpu_ancestors(e):
    return [a for a in _ancestors(e) if a.get("cat") == "cpu_op"]


def _under_compile(e):
    return any(a["name"].endswith("(dynamo_timed)") or a["name"] in COMPILE_SPANS
               for a in _ancestors(e))


def _in_backward(e):
    return any(a["name"].startswith(EVALUATE) for a in _ancestors(e))


def _perm(e):
    """Permutation applied by a transpose-like op, from Input Dims and Concrete Inputs."""
    import json  # local: a module-level import would move the SYNC-* lines of train_sync
    args = e.get("args") or {}
    dims = args.get("Input Dims") or []
    conc = args.get("Concrete Inputs") or []
    if not dims or not isinstance(dims[0], list):
        return None
    n = len(dims[0])
    if e["name"] == "aten::permute":
        return [int(d) % n for d in json.loads(conc[1])]
    if e["name"] == "aten::t":
        return [1, 0] if n == 2 else list(range(n))
    d0, d1 = int(conc[1]) % n, int(conc[2]) % n
    p = list(range(n))
    p[d0], p[d1] = p[d1], p[d0]
    return p


def _copy_input(c):
    """(dims, strides) of the tensor a copy-family op copies from, or None."""
    if c["name"] == "aten::reshape" and not any(k["name"] == "aten::clone" for k in c["_children"]):
        return None  # a reshape that only views
    if c["name"] == "aten::contiguous" and not c["_children"]:
        return None  # already contiguous: no copy
    if c["name"] == "aten::clone":
        conc = (c.get("args") or {}).get("Concrete Inputs") or []
        if len(conc) < 2 or conc[1] in ("", "1"):
            return None  # preserve_format keeps the strides: no gather
    args = c.get("args") or {}
    k = 1 if c["name"] == "aten::copy_" else 0
    dims, strides = args.get("Input Dims") or [], args.get("Input Strides") or []
    if len(dims) <= k or len(strides) <= k:
        return None
    return dims[k], strides[k]


def observe_detectors(doc):
    """Per step: the transpose classification of kineto-format.md section 14 (a transpose-like
    op outside other aten ops that moves the last dim, then a later copy-family op on the same
    thread in the same step whose input has exactly the transposed shape and strides; forward
    copies count only at user level, backward copies anywhere in the backward), user-level
    gradient zeroing, AccumulateGrad nodes with aten::add_, and anomaly-mode NaN checks."""
    evs = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    for e in evs:
        e["_s"] = truth.us_to_ns(e.get("ts"))
        e["_e"] = e["_s"] + truth.us_to_ns(e.get("dur", 0))
        e.setdefault("name", "")
    lanes = _nest(evs)
    steps = sorted((e for e in evs if e.get("cat") == "user_annotation"
                    and e["name"].startswith("ProfilerStep#")), key=lambda e: e["_s"])
    out = []
    for s in steps:
        lane = lanes[(truth._hashable(s.get("pid")), truth._hashable(s.get("tid")))]
        ops = [e for e in lane if e.get("cat") == "cpu_op" and s["_s"] <= e["_s"] < s["_e"]]
        counts = {"nonlogical_with_copy": 0, "nonlogical_no_copy": 0,
                  "logical_with_copy": 0, "logical_no_copy": 0}
        flagged = []
        used = set()
        for e in ops:
            if e["name"] not in TRANSPOSE_OPS or _under_compile(e):
                continue
            cpu_anc = _cpu_ancestors(e)
            if cpu_anc and cpu_anc[0]["name"] in TRANSPOSE_OPS:
                continue  # aten::transpose inside aten::t: counted once, as the aten::t
            if cpu_anc and cpu_anc[0]["name"].startswith("aten::"):
                continue  # inside an unrelated aten op: its implementation, not a layout choice
            p = _perm(e)
            if p is None:
                continue
            args = e["args"]
            dims, strides = args["Input Dims"][0], args["Input Strides"][0]
            out_dims = [dims[i] for i in p]
            out_strides = [strides[i] for i in p]
            # non-logical: the last dim moves and the view's innermost stride is no longer 1
            moves = bool(p) and p[-1] != len(p) - 1 and out_strides[-1] != 1 and out_dims[-1] > 1
            bwd = _in_backward(e)
            copy = None
            for c in ops:
                if c["_s"] <= e["_s"] or c["name"] not in COPY_OPS or id(c) in used:
                    continue
                if _under_compile(c) or _in_backward(c) != bwd:
                    continue
                if not bwd and any(a["name"] not in COPY_WRAPPERS for a in _cpu_ancestors(c)):
                    continue
                if _copy_input(c) == (out_dims, out_strides):
                    copy = c
                    # the copy and the copies inside it (contiguous > clone > copy_) are taken
                    used.update(id(k) for k in ops if c["_s"] <= k["_s"] < c["_e"]
                                and k["name"] in COPY_OPS)
                    break
            key = ("nonlogical" if moves else "logical") + ("_with_copy" if copy else "_no_copy")
            counts[key] += 1
            if moves and copy:
                flagged.append({
                    "op": e["name"], "perm": p, "input_dims": dims, "input_strides": strides,
                    "in_backward": bwd, "copy_op": copy["name"],
                    "copy_dur_ns": copy["_e"] - copy["_s"],
                })
        zeroing = {}
        for e in ops:
            if e["name"] in ("aten::zero_", "aten::_foreach_zero_") and not _cpu_ancestors(e) \
                    and not _under_compile(e):
                zeroing[e["name"]] = zeroing.get(e["name"], 0) + 1
        acc = [e for e in ops if e["name"] == "torch::autograd::AccumulateGrad"]
        with_add = sum(1 for e in acc if any(k["name"] == "aten::add_" for k in e["_children"]))
        nan = {}
        for e in ops:
            par = e["_parent"]
            if par is not None and par["name"].startswith(EVALUATE) and e["name"] in (
                    "aten::isnan", "aten::_is_any_true", "aten::item"):
                nan[e["name"]] = nan.get(e["name"], 0) + 1
        out.append({
            "step": s["name"],
            "transposes": dict(counts, nonlogical_with_copy_ops=flagged),
            "user_level_zeroing_ops": zeroing,
            "accumulate_grad": {"count": len(acc), "with_add_": with_add},
            "backward_nan_checks": dict(sorted(nan.items())),
        })
    return out


SCENARIOS = ("train_clean", "train_sync", "train_stall") + EXTRA_SCENARIOS


def refresh_truth(name):
    """Recompute <name>.truth.json from the trace already in samples/ without running torch:
    the recorded scenario fields are kept, the observations (and, for the extra scenarios, what
    was planted) are recomputed by the current code."""
    gz = name != "train_clean"
    final = os.path.join(OUT_DIR, name + (".json.gz" if gz else ".json"))
    with open(truth.truth_path(final)) as f:
        scenario = truth.json.load(f)["scenario"]
    if name in EXTRA_SCENARIOS:
        scenario.update(EXTRA_SCENARIO_INFO[name])
    doc = truth.load_trace(final)
    scenario["observed_per_step"] = observe(doc)
    if name in EXTRA_SCENARIOS:
        check_extra(name, scenario, observe_detectors(doc))
    del doc
    truth.write_truth(final, scenario)
    print(f"{truth.truth_path(final)}: refreshed", file=sys.stderr)


def main(argv):
    truth_only = "--truth-only" in argv
    names = [a for a in argv if a != "--truth-only"] or list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            raise SystemExit(f"unknown scenario {n!r}; choose from {SCENARIOS}")
    for n in names:
        if truth_only:
            refresh_truth(n)
        else:
            run_scenario(n)


if __name__ == "__main__":
    main(sys.argv[1:])
