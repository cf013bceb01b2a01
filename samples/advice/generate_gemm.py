#!/usr/bin/env python3
"""A modelled bf16 transformer forward pass on an A100 with GEMMs of three bad shapes, in the
shape of a PyTorch 2.x Kineto trace, with truth computed from what the model planted.

    python3 samples/advice/generate_gemm.py   # rewrites samples/advice/gpu_gemm_shapes.json.gz + truth

The model (`generate_gpu.py`'s: integer nanoseconds, one stream, `ac2g` flows, A100
`deviceProperties`) runs four `ProfilerStep`s of two decoder layers and an LM head. Every GEMM
kernel lasts its FLOPs over a rate planted per signature:
- well-shaped (QKV, output, MLP up/down `aten::addmm`, every dimension a multiple of 8): 240 TFLOP/s;
- `aten::bmm` of the attention scores after `aten::contiguous` copied the keys (a copy beside
  it): 60 TFLOP/s;
- eight per-expert `aten::mm` with 48 tokens (M below 64): 20 TFLOP/s;
- the LM head `aten::mm` onto a vocabulary of 50,257 (not a multiple of 8): 100 TFLOP/s;
- a trap: `aten::mm` onto 1,001 columns at 150 TFLOP/s, unaligned but above half of what its
  shape allows, so not slow.
The residual `aten::add_` and the `aten::gelu` run at 1.6 and 1.5 TB/s (inputs plus output over
kernel time): the memory roof.

Truth (findings.md, `slow_gemm`, applied to the model): per step, the slow signatures by cause,
their count, and the lost time: per kernel, its time less its FLOPs over the attainable rate
(min of the well-shaped rate and intensity × memory roof), rounded half up. Standard library
only; deterministic.
"""

import gzip
import json
import math
import os

import generate_gpu as g

HERE = os.path.dirname(os.path.abspath(__file__))
BF16 = "c10::BFloat16"
T, D, V, FF, H, S, E, TOK = 8192, 4096, 50257, 16384, 32, 2048, 8, 48

K_GEMM = "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn"
K_GEMM_ALIGN2 = "ampere_bf16_s16816gemm_bf16_128x64_ldg2_f2f_stages_64x5_tn"
K_SMALL = "ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_stages_64x5_tn"
K_BMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn"
K_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
         "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)")
K_GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
          "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, "
          "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
          "::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)")


def numel(shape):
    return math.prod(shape)


class Gemms:
    """The planted GEMM kernels: (kernel Dev, op name, dims, flops, bytes, shapes) in launch order."""

    def __init__(self, m):
        self.m = m
        self.kernels = []

    def gemm(self, t, name, shapes, dims, rate_tflops, kname, bias):
        """`name` on `shapes` (bf16), a GEMM of `dims` = (m, n, k, b) at `rate_tflops`."""
        mm, n, k, b = dims
        flops = (2 * mm * n * k + (mm * n if bias else 0)) * b
        elems = numel(shapes[-2]) + numel(shapes[-1]) + mm * n * b + (numel(shapes[0]) if bias else 0)
        dur = round(flops / (rate_tflops * 1000))
        types = [BF16] * len(shapes) + (["Scalar", "Scalar"] if bias else [])
        full = shapes + ([[], []] if bias else [])

        def body(t):
            t = self.m.launch(g.TID, t + 2_000, kname, dur)
            self.kernels.append((self.m.dev[-1], name, dims, flops, elems * 2, shapes))
            return t
        return self.m.op(name, g.TID, t, body, shapes=full, types=types)

    def elementwise(self, t, name, shapes, out, tbps, kname):
        nbytes = (sum(numel(s) for s in shapes if s) + numel(out)) * 2
        dur = round(nbytes / (tbps * 1000))
        types = [BF16 if s else "Scalar" for s in shapes]

        def body(t):
            t = self.m.launch(g.TID, t + 2_000, kname, dur)
            self.kernels.append((self.m.dev[-1], name, None, None, nbytes, shapes))
            return t
        return self.m.op(name, g.TID, t, body, shapes=shapes, types=types)


def linear(gm, t, rows, d_in, d_out, rate=240, kname=K_GEMM):
    def body(t):
        t = gm.m.op("aten::t", g.TID, t + gm.m.j(1, 2), shapes=[[d_out, d_in]], types=[BF16])
        return gm.gemm(t + gm.m.j(1, 2), "aten::addmm", [[d_out], [rows, d_in], [d_in, d_out]],
                       (rows, d_out, d_in, 1), rate, kname, bias=True)
    return gm.m.op("aten::linear", g.TID, t, body, shapes=[[rows, d_in], [d_out, d_in], [d_out]],
                   types=[BF16] * 3)


def matmul(gm, t, a, b, dims, rate, kname, name="aten::mm", copy_first=None):
    """`aten::matmul` around one GEMM; `copy_first` = the shape `aten::contiguous` copies first."""
    def body(t):
        if copy_first is not None:
            def contiguous(t):
                def clone(t):
                    def copy(t):
                        nbytes = numel(copy_first) * 2 * 2
                        return gm.m.launch(g.TID, t + 2_000, g.K_CAST, round(nbytes / 1200))
                    return gm.m.op("aten::copy_", g.TID, t + gm.m.j(1, 2), copy,
                                   shapes=[copy_first, copy_first, []], types=[BF16, BF16, "Scalar"])
                return gm.m.op("aten::clone", g.TID, t + gm.m.j(1, 2), clone, shapes=[copy_first, []],
                               types=[BF16, "Scalar"])
            t = gm.m.op("aten::contiguous", g.TID, t + gm.m.j(1, 2), contiguous, shapes=[copy_first, []],
                        types=[BF16, "Scalar"])
        return gm.gemm(t + gm.m.j(1, 2), name, [a, b], dims, rate, kname, bias=False)
    return gm.m.op("aten::matmul", g.TID, t, body, shapes=[a, b], types=[BF16, BF16])


def layer(gm, t):
    m = gm.m
    t = linear(gm, t, T, D, 3 * D)
    # scores = q @ k.transpose(-2, -1) after k.contiguous(): a copy beside the bmm
    t = matmul(gm, t + m.j(3, 5), [H, S, D // H], [H, D // H, S], (S, S, D // H, H), 60, K_BMM,
               name="aten::bmm", copy_first=[H, D // H, S])
    t = linear(gm, t + m.j(3, 5), T, D, D)
    t = gm.elementwise(t + m.j(2, 3), "aten::add_", [[T, D], [T, D], []], [T, D], 1.6, K_ADD)
    t = linear(gm, t + m.j(3, 5), T, D, FF)
    t = gm.elementwise(t + m.j(2, 3), "aten::gelu", [[T, FF], []], [T, FF], 1.5, K_GELU)
    t = linear(gm, t + m.j(3, 5), T, FF, D)
    for _ in range(E):  # one small GEMM per expert: 48 tokens each
        t = matmul(gm, t + m.j(2, 4), [TOK, D], [D, 14336], (TOK, 14336, D, 1), 20, K_SMALL)
    return t


def run(seed):
    m = g.Model(seed)
    gm = Gemms(m)
    t = 200 * g.US
    main = m.open("python_function", "infer.py(41): main", g.TID, t, {"CallFrom": "infer.py:90"})
    t += 5 * g.US
    for n in g.STEPS:
        start = t
        step = m.open("user_annotation", f"ProfilerStep#{n}", g.TID, start)

        def forward(t):
            t = layer(gm, layer(gm, t + m.j(3, 5)) + m.j(3, 5))
            # LM head onto a vocabulary of 50,257; a side projection onto 1,001 classes (the trap)
            t = matmul(gm, t + m.j(3, 5), [S, D], [D, V], (S, V, D, 1), 100, K_GEMM_ALIGN2)
            return matmul(gm, t + m.j(3, 5), [T, D], [D, 1001], (T, 1001, D, 1), 150, K_GEMM_ALIGN2)
        t = m.frame("infer.py(20): forward", "infer.py:64", g.TID, t + m.j(3, 5), forward)
        t = m.close(step, t + m.j(4, 6))
        m.steps.append((step.name, start, t))
        t += m.j(2, 3)
    m.close(main, t + 10 * g.US)
    m.sync(g.TID, t + 20 * g.US)
    return m, gm


def round_half_up(x):
    return math.floor(x + 0.5)


def truth(m, gm, name):
    """findings.md's `slow_gemm` rule on the model."""
    gemms = [k for k in gm.kernels if k[2] is not None]
    # per signature: (name, shapes) -> calls
    sigs = {}
    for dev, op, dims, flops, nbytes, shapes in gemms:
        sigs.setdefault((op, json.dumps(shapes)), []).append((dev, dims, flops, nbytes))
    copy_sigs = {("aten::bmm", json.dumps([[H, S, D // H], [H, D // H, S]]))}

    def well_shaped(dims, flops):
        mm, n, k, _ = dims
        return all(d % 8 == 0 for d in (mm, n, k)) and mm >= 128 and n >= 128 and k >= 64 and flops >= 1e9
    ref_flops = ref_ns = 0
    for key, calls in sigs.items():
        dims, flops = calls[0][1], calls[0][2]
        if key not in copy_sigs and well_shaped(dims, flops):
            ref_flops += flops * len(calls)
            ref_ns += sum(dev.end - dev.start for dev, *_ in calls)
    reference = ref_flops / ref_ns
    # memory roof: elementwise signatures with >= 50 us of kernels, bytes per ns
    ew = {}
    for dev, op, dims, flops, nbytes, shapes in gm.kernels:
        if dims is None:
            e = ew.setdefault((op, json.dumps(shapes)), [0, 0])
            e[0] += nbytes
            e[1] += dev.end - dev.start
    roof = max(b / ns for b, ns in ew.values() if ns >= 50_000)
    windows = g.device_windows(m)
    found = {}
    for key, calls in sigs.items():
        dims, flops, nbytes = calls[0][1], calls[0][2], calls[0][3]
        mm, n, k, _ = dims
        attainable = min(reference, flops / nbytes * roof)
        total_ns = sum(dev.end - dev.start for dev, *_ in calls)
        if flops * len(calls) / total_ns >= 0.5 * attainable:
            continue
        if key in copy_sigs:
            cause = "copy"
        elif min(mm, n) < 64:
            cause = "tiny"
        elif any(d % 8 for d in (mm, n, k)):
            cause = "unaligned"
        else:
            continue
        for dev, *_ in calls:
            step = next(i for i, (a, b) in enumerate(windows) if a <= dev.start < b)
            lost = round_half_up((dev.end - dev.start) - flops / attainable)
            f = found.setdefault((m.steps[step][0], cause), {"sigs": set(), "lost_ns": 0})
            f["sigs"].add(key)
            f["lost_ns"] += lost
    expected = []
    for (step, cause), f in sorted(found.items()):
        expected.append({"kind": "slow_gemm", "step": step, "cause": cause, "count": len(f["sigs"]),
                         "lost_ns": f["lost_ns"]})
    # tests/it/advice.rs compares per (kind, step): the causes' sums
    per_step = {}
    for e in expected:
        p = per_step.setdefault(e["step"], {"kind": "slow_gemm", "step": e["step"], "count": 0, "lost_ns": 0})
        p["count"] += e["count"]
        p["lost_ns"] += e["lost_ns"]
    return {
        "trace": f"{name}.json.gz",
        "generator": "samples/advice/generate_gemm.py",
        "device": {"kind": "cuda", "name": g.A100["name"], "compute_capability": "8.0"},
        "rules": "findings.md slow_gemm on the model: per bf16 GEMM signature, its rate = FLOPs over kernel "
                 "time; the reference = the well-shaped signatures' (M, N, K multiples of 8, M and N >= 128, "
                 "K >= 64, >= 1 GFLOP per call, no copy beside); the memory roof = the best elementwise "
                 "bandwidth (inputs + output over kernel time, >= 50 us); attainable = min(reference, "
                 "FLOPs/byte x roof); slow below 50 % of attainable, cause copy > tiny (M or N < 64) > "
                 "unaligned; lost per kernel = its time - FLOPs / attainable, rounded half up; grouped per "
                 "step (device-inclusive window of the kernel's start) and cause",
        "reference_tflops": round(reference / 1000, 3),
        "memory_roof_tbps": round(roof / 1000, 3),
        "by_cause": expected,
        "expected_findings": sorted(per_step.values(), key=lambda e: e["step"]),
    }


def write(name, m, gm):
    path = os.path.join(HERE, f"{name}.json.gz")
    text = json.dumps(g.render(m, [0]), separators=(",", ":"))
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(text.encode())
    with open(os.path.join(HERE, f"{name}.truth.json"), "w") as f:
        json.dump(truth(m, gm, name), f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    m, gm = run(23)
    write("gpu_gemm_shapes", m, gm)
    print("done")
