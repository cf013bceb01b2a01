"""Real CPU PyTorch traces for the layer-pattern detectors, each with a clean twin.

- ``explicit_pad``: a conv net that pads its input with ``F.pad`` (``aten::constant_pad_nd``)
  before each of its 2 convolutions instead of using the convolution's ``padding=``.
- ``bias_bn``: a conv net whose 2 convolutions keep ``bias=True`` although a ``BatchNorm2d``
  follows each (the bias is cancelled by the norm's mean subtraction).
- ``patterns_clean``: the same net written the right way (``padding=1``, ``bias=False``).

Every run: 6 profiled steps (schedule wait=1, warmup=1, active=6), record_shapes and with_stack.
The truth file of each trace says what was planted per step (counts per call site) and is
written from this script's own model, not from steplens.

Usage: python3 samples/patterns/generate.py   (needs torch)
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
STEPS = 6
torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self, explicit_pad: bool, bias: bool):
        super().__init__()
        self.explicit_pad = explicit_pad
        pad = 0 if explicit_pad else 1
        self.c1 = nn.Conv2d(3, 16, 3, padding=pad, bias=bias)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 16, 3, padding=pad, bias=bias)
        self.b2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        if self.explicit_pad:
            x = F.pad(x, (1, 1, 1, 1))  # PAD_LINE_1
        x = torch.relu(self.b1(self.c1(x)))
        if self.explicit_pad:
            x = F.pad(x, (1, 1, 1, 1))  # PAD_LINE_2
        x = torch.relu(self.b2(self.c2(x)))
        return self.fc(x.mean(dim=(2, 3)))


def line_of(marker: str) -> int:
    with open(os.path.abspath(__file__)) as f:
        for n, text in enumerate(f, 1):
            if marker in text and "line_of" not in text:
                return n
    raise ValueError(marker)


def run(name: str, explicit_pad: bool, bias: bool) -> None:
    torch.manual_seed(0)
    net = Net(explicit_pad, bias)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(8, 3, 32, 32)
    y = torch.randint(0, 10, (8,))
    out_dir = tempfile.mkdtemp()
    sched = torch.profiler.schedule(wait=1, warmup=1, active=STEPS, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched,
                                record_shapes=True, with_stack=True,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(out_dir)) as prof:
        for _ in range(STEPS + 2):
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
    (trace,) = os.listdir(out_dir)
    dst = os.path.join(HERE, f"{name}.json.gz")
    with open(os.path.join(out_dir, trace), "rb") as src, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            shutil.copyfileobj(src, gz)
    shutil.rmtree(out_dir)
    steps = [f"ProfilerStep#{n}" for n in range(2, 2 + STEPS)]
    expected = []
    if explicit_pad:
        for step in steps:
            for marker in ("PAD_LINE_1", "PAD_LINE_2"):
                expected.append({"kind": "explicit_pad", "step": step, "count": 1,
                                 "call_site": f"generate.py:{line_of(marker)}"})
    if bias:
        # one finding per step: the two conv+bias layers feeding a batch norm
        for step in steps:
            expected.append({"kind": "bias_before_batchnorm", "step": step, "count": 2})
    truth = {
        "trace": os.path.basename(dst),
        "generator": "samples/patterns/generate.py",
        "rule": "explicit_pad: one per F.pad call feeding a convolution, per step and call site; "
                "bias_before_batchnorm: per step, the number of convolutions with a bias whose "
                "output goes straight into batch norm (the forward pass only)",
        "steps": steps,
        "expected_findings": expected,
    }
    with open(os.path.join(HERE, f"{name}.truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    run("explicit_pad", explicit_pad=True, bias=False)
    run("bias_bn", explicit_pad=False, bias=True)
    run("patterns_clean", explicit_pad=False, bias=False)
    print("done")
