"""Real CPU PyTorch traces for the advice detectors, each mistake with a clean twin.

- ``cpu_pointwise``: an MLP whose activation is GELU written out as its formula (8 elementwise
  ops over one activation tensor, one line of this file); twin ``cpu_pointwise_clean`` calls
  ``F.gelu`` (one op).
- ``cpu_adamw_loop``: a deep MLP trained with ``AdamW(foreach=False)``: the optimizer updates
  its parameters one at a time, several small ops each; twins ``cpu_adamw_foreach``
  (``foreach=True``: ``_foreach_*`` ops, which fall back to per-tensor children on the CPU, and
  ``step.item()`` per parameter) and ``cpu_adamw_fused`` (``fused=True``).
- ``cpu_bf16_autocast``: the MLP under ``torch.autocast("cpu", torch.bfloat16)``: on a CPU the
  trace does not show bf16 units, so nothing may be said about precision; must stay silent.

Every run: 4 profiled steps (schedule wait=1, warmup=1, active=4), record_shapes, with_stack.
The truth files come from this script: what it planted (the GELU line; the optimizer's
per-parameter math, read back from the trace's own events by the rule in findings.md: the ops
the optimizer's code issues inside ``Optimizer.step#…``, elementwise, on tensors of more than
one element).

Usage: python3 samples/advice/generate_cpu.py   (needs torch)
"""

import gzip
import json
import os
import shutil
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 4
torch.set_num_threads(1)

POINTWISE = {"add", "sub", "mul", "div", "neg", "abs", "exp", "log", "pow", "sqrt", "rsqrt", "reciprocal", "tanh",
             "sigmoid", "relu", "gelu", "silu", "erf", "clamp", "clamp_min", "clamp_max", "where", "maximum",
             "minimum", "rsub", "square", "lerp", "addcmul", "addcdiv"}


class Mlp(nn.Module):
    def __init__(self, manual_gelu: bool, depth: int = 2, width: int = 256):
        super().__init__()
        self.manual_gelu = manual_gelu
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if self.manual_gelu:
                x = 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3.0))))  # GELU_LINE
            else:
                x = F.gelu(x, approximate="tanh")
        return self.head(x)


def line_of(marker: str) -> int:
    with open(os.path.abspath(__file__)) as f:
        for n, text in enumerate(f, 1):
            if marker in text and "line_of" not in text:
                return n
    raise ValueError(marker)


def profile(name: str, net: nn.Module, opt, autocast: bool = False) -> dict:
    torch.manual_seed(0)
    x = torch.randn(128, net.layers[0].in_features)
    y = torch.randint(0, 10, (128,))
    out_dir = tempfile.mkdtemp()
    sched = torch.profiler.schedule(wait=1, warmup=1, active=STEPS, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                record_shapes=True, with_stack=True,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(out_dir)) as prof:
        for _ in range(STEPS + 2):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = F.cross_entropy(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
    (trace,) = os.listdir(out_dir)
    src = os.path.join(out_dir, trace)
    with open(src) as f:
        events = json.load(f)
    dst = os.path.join(HERE, f"{name}.json.gz")
    with open(src, "rb") as raw_in, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            shutil.copyfileobj(raw_in, gz)
    shutil.rmtree(out_dir)
    return events


def steps_of(events: dict) -> list:
    return sorted((e for e in events["traceEvents"] if e.get("ph") == "X"
                   and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])


def optimizer_math(events: dict, step: dict) -> int:
    """The optimizer's own per-parameter math in one step, read from the trace: ops directly
    inside ``Optimizer.step#`` (no op around them), elementwise, on a tensor of > 1 element."""
    evs = [e for e in events["traceEvents"] if e.get("ph") == "X" and e.get("tid") == step["tid"]]
    opt = [e for e in evs if str(e["name"]).startswith("Optimizer.step#")
           and step["ts"] <= e["ts"] < step["ts"] + step["dur"]]
    if not opt:
        return 0
    o = opt[0]
    ops = sorted((e for e in evs if e.get("cat") == "cpu_op" and o["ts"] <= e["ts"]
                  and e["ts"] + e["dur"] <= o["ts"] + o["dur"]), key=lambda e: (e["ts"], -e["dur"]))
    top, end = [], -1.0
    for e in ops:
        if e["ts"] >= end:
            top.append(e)
            end = e["ts"] + e["dur"]
    if any(e["name"].startswith(("aten::_foreach_", "aten::_fused_")) for e in top):
        return 0

    def on_tensor(e):
        dims = e.get("args", {}).get("Input Dims") or [[]]
        n = 1
        for d in dims[0]:
            n *= d
        return n > 1
    return sum(1 for e in top if e["name"].removeprefix("aten::").rstrip("_") in POINTWISE and on_tensor(e))


def write_truth(name: str, events: dict, expected: list, rule: str) -> None:
    truth = {"trace": f"{name}.json.gz", "generator": "samples/advice/generate_cpu.py", "rule": rule,
             "torch": torch.__version__, "steps": [s["name"] for s in steps_of(events)],
             "expected_findings": expected}
    with open(os.path.join(HERE, f"{name}.truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
        f.write("\n")


def main() -> None:
    gelu_site = f"generate_cpu.py:{line_of('GELU_LINE')}"
    for name, manual in (("cpu_pointwise", True), ("cpu_pointwise_clean", False)):
        torch.manual_seed(0)
        net = Mlp(manual)
        events = profile(name, net, torch.optim.SGD(net.parameters(), lr=0.01))
        # one chain per layer call: 2 layers -> 2 chains per step, both at the GELU line
        expected = [{"kind": "unfused_pointwise", "step": s["name"], "count": len(net.layers),
                     "call_site": gelu_site} for s in steps_of(events)] if manual else []
        write_truth(name, events, expected,
                    "unfused_pointwise: per step and call site, one chain per call of the written-out GELU "
                    "(8 elementwise ops over one activation shape)")
    for name, kwargs in (("cpu_adamw_loop", {"foreach": False}), ("cpu_adamw_foreach", {"foreach": True}),
                         ("cpu_adamw_fused", {"fused": True})):
        torch.manual_seed(0)
        net = Mlp(False, depth=12, width=64)
        events = profile(name, net, torch.optim.AdamW(net.parameters(), lr=1e-3, **kwargs))
        expected = []
        for s in steps_of(events):
            n = optimizer_math(events, s)
            if n:
                expected.append({"kind": "unfused_optimizer", "step": s["name"], "count": n})
        if kwargs.get("foreach") is False:
            assert len(expected) == STEPS, expected
        else:
            assert not expected, expected
        write_truth(name, events, expected,
                    "unfused_optimizer: per step, the optimizer's own elementwise ops on tensors inside "
                    "Optimizer.step# when none is a _foreach_/_fused_ op")
    torch.manual_seed(0)
    net = Mlp(False)
    events = profile("cpu_bf16_autocast", net, torch.optim.SGD(net.parameters(), lr=0.01), autocast=True)
    write_truth("cpu_bf16_autocast", events, [],
                "no_mixed_precision says nothing on a CPU trace (bf16 units not shown); nothing else planted")
    print("done")


if __name__ == "__main__":
    main()
