#!/usr/bin/env python3
"""One synthetic GPU training run rendered in every Kineto JSON shape since PyTorch 1.8, with truth.

    python3 samples/kineto-compat/generate.py      # rewrites samples/kineto-compat/*

The generator first builds one *model* of a run in integer nanoseconds: the host ops of one Python
thread (ProfilerStep#2..#6, DataLoader ranges, forward / backward / optimizer ops, the runtime calls
they make), the device work those calls queue on GPU 0 stream 7, the Python frames around them and
the allocator's [memory] events. It then writes that model in each historical file shape (see
README.md and docs/kineto-compat.md for what each shape is and the evidence behind it) and computes
each shape's truth from the model -- never from steplens. Shapes that store whole microseconds get
the model rounded the way Kineto rounded (floor of start and of end), and their truth is computed
from that rounded model.

Standard library only. Deterministic: fixed seed, gzip mtime 0, no dict-order dependence.
"""

import decimal
import gzip
import io
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
US = 1_000
MS = 1_000_000

PID = 4242              # the python process; its main thread has the same id
TID = 4242
DEV = 0                 # GPU 0
STREAM = 7
STEPS = [2, 3, 4, 5, 6]  # schedule(wait=1, warmup=1, active=5): the first recorded step is #2
SYNC_STEP = 3
STALL_STEP = 4

DL_NAME = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
OPT_STEP = "Optimizer.step#SGD.step"
OPT_ZERO = "Optimizer.zero_grad#SGD.zero_grad"

# Kernel names as CUDA 11 / cuBLAS on a V100 wrote them.
GEMM_FWD = "volta_sgemm_128x64_tn"
GEMM_DGRAD = "volta_sgemm_128x64_nn"
GEMM_WGRAD = "volta_sgemm_128x64_nt"
K_RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
          "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}"
          "::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >"
          "(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, "
          "c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()"
          "() const::{lambda(float)#1}, at::detail::Array<char*, 2>)")
K_RELU_BWD = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
              "threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, "
              "at::detail::Array<char*, 3> >(int, at::native::(anonymous namespace)::threshold_kernel_impl<float>"
              "(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3>)")
K_SOFTMAX = ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>"
             "(float*, float const*, int, int, int, bool const*, int, bool)")
K_SOFTMAX_BWD = ("void (anonymous namespace)::softmax_warp_backward<float, float, float, 10, true, false>"
                 "(float*, float const*, float const*, int, int, int, bool const*)")
K_NLL = ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>"
         "(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)")
K_NLL_BWD = ("void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>"
             "(float*, float const*, long const*, float const*, float const*, bool, int, int, long, long)")
K_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
          "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
K_SUM = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
         "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
         "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
         "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
         "unsigned int, float, 4>)")
K_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
         "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
H2D = "Memcpy HtoD (Pageable -> Device)"
D2H = "Memcpy DtoH (Device -> Pageable)"
MEMSET = "Memset (Device)"

CBID = {"cudaLaunchKernel": 211, "cudaMemcpyAsync": 41, "cudaMemsetAsync": 51,
        "cudaStreamSynchronize": 131, "cudaDeviceSynchronize": 165}

V100 = {"id": 0, "name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16945512448, "computeMajor": 7,
        "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 98304, "numSms": 80, "sharedMemPerBlockOptin": 98304}

# Python source the frames point at: key -> (file under the site-packages dir or the project, def lines).
SITE_OLD = "/opt/conda/lib/python3.8/site-packages/"
SITE_NEW = "/opt/conda/lib/python3.10/site-packages/"
PROJ = "/home/user/proj/"
PYFILES = {
    "train": "train.py", "model": "model.py",
    "module": "torch/nn/modules/module.py", "linear": "torch/nn/modules/linear.py",
    "activation": "torch/nn/modules/activation.py", "functional": "torch/nn/functional.py",
    "loss": "torch/nn/modules/loss.py", "tensor": "torch/_tensor.py", "autograd": "torch/autograd/__init__.py",
    "optimizer": "torch/optim/optimizer.py", "sgd": "torch/optim/sgd.py",
    "dataloader": "torch/utils/data/dataloader.py", "fetch": "torch/utils/data/_utils/fetch.py",
    "collate": "torch/utils/data/_utils/collate.py", "dataset": "dataset.py", "profiler": "torch/profiler/profiler.py",
}
USER_FILES = {"train", "model", "dataset"}

# train.py as the frames describe it (line numbers are the ones the truth names):
#   38 def train_step(model, x, y, step):
#   39     x, y = x.to(dev), y.to(dev)
#   40     out = model(x)
#   41     loss = loss_fn(out, y)
#   42     if step == 3: log.info(loss.item())     <- the planted sync point
#   43     loss.backward()
#   44     opt.step()
#   45     opt.zero_grad(set_to_none=True)
#   50 def log_metrics(step): ...                 (pure Python, ~5 ms a step)
#   60 def main():
#   64     for step, (x, y) in enumerate(loader):  <- DataLoader __next__ (the planted stall in step 4)
#   66         train_step(model, x, y, step)
#   67         log_metrics(step)
#   68         prof.step()
#   96 main()
SYNC_SITE = "train.py:42"
DL_SITE = "train.py:64"
COPY_SITE = "train.py:39"


# ------------------------------------------------------------------------------------ intervals
def union(iv):
    out = []
    for s, e in sorted(x for x in iv if x[1] > x[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def clip(iv, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in iv if min(e, hi) > max(s, lo)]


def total(iv):
    return sum(e - s for s, e in union(iv))


def subtract(a, b):
    out = []
    b = union(b)
    for s, e in union(a):
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


def intersect(a, b):
    return subtract(a, subtract(a, b))


# ------------------------------------------------------------------------------------ the model
class HostEv:
    """A host slice: kind op (cpu_op), ann (record_function range), step, dl, rt (runtime call)."""

    def __init__(self, kind, name, start, parent):
        self.kind, self.name, self.start, self.end, self.parent = kind, name, start, None, parent
        self.ext = None          # External id (ops and annotations)
        self.corr = None         # correlation id (runtime calls)
        self.op_ext = 0          # runtime: External id of the innermost op around it (0: none)
        self.op_start = 0        # runtime: that op's start ("external ts" in the 1.8/1.9 writers)
        self.frame = None        # innermost Python frame when the op started
        self.line = None         # the line of that frame that is executing (the call site)
        self.seq = None          # autograd sequence number
        self.backward = False    # runs inside the autograd engine (no Python stack recorded)
        self.fwd_link = None     # backward node: the forward op it belongs to (fwdbwd flow)


class DevEv:
    def __init__(self, kind, name, start, end, rt, extra):
        self.kind, self.name, self.start, self.end, self.rt, self.extra = kind, name, start, end, rt, extra


class Frame:
    """A Python frame: kind py (function; key, def line, name), builtin (C call) or module (nn.Module)."""

    def __init__(self, kind, key, defline, func, start, parent, call_from):
        self.kind, self.key, self.defline, self.func = kind, key, defline, func
        self.start, self.end, self.parent, self.call_from = start, None, parent, call_from
        self.module_id = None


class Model:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.host, self.dev, self.frames, self.mem = [], [], [], []
        self.stack, self.pystack = [], []
        self.ext = 0
        self.corr = 4096          # CUPTI correlation ids are their own counter
        self.stream_free = 0
        self.steps = []           # (name, start, end)
        self.seq = 100
        self.alloc = 512 * 1024 * 1024
        self.addr = 0x7F3A40000000

    # -- host ---------------------------------------------------------------------------------
    def j(self, lo, hi):
        """A jittered duration in ns between lo and hi µs."""
        return self.rng.randint(lo * US, hi * US) + self.rng.randint(0, 999)

    def open(self, kind, name, t, line=None, seq=False):
        ev = HostEv(kind, name, t, self.stack[-1] if self.stack else None)
        if kind != "rt":
            self.ext += 1
            ev.ext = self.ext
        ev.frame = self.pystack[-1] if self.pystack else None
        if line is None and self.stack and self.stack[-1].frame is ev.frame:
            line = self.stack[-1].line        # nested ops run at their caller's line
        ev.line = line
        ev.backward = any(x.backward for x in self.stack) or name.startswith("autograd::engine")
        if seq:
            self.seq += 1
            ev.seq = self.seq
        self.host.append(ev)
        self.stack.append(ev)
        return ev

    def close(self, ev, t):
        assert self.stack[-1] is ev, (ev.name, self.stack[-1].name)
        assert t >= ev.start
        ev.end = t
        self.stack.pop()
        return t

    def op(self, name, t, body=None, pre=(3, 6), post=(2, 4), kind="op", line=None, seq=False):
        ev = self.open(kind, name, t, line=line, seq=seq)
        t += self.j(*pre)
        if body:
            t = body(t)
        return self.close(ev, t + self.j(*post))

    def innermost_op(self):
        for x in reversed(self.stack):
            if x.kind == "op":
                return x
        return None

    def runtime(self, name, t, dur):
        rt = self.open("rt", name, t)
        self.corr += 1
        rt.corr = self.corr
        o = self.innermost_op()
        rt.op_ext, rt.op_start = (o.ext, o.start) if o else (0, 0)
        rt.end = t + dur
        self.stack.pop()
        return rt

    def launch(self, t, kname, dur_ns, grid, block, regs, smem):
        """cudaLaunchKernel at t; the kernel runs on stream 7 after the launch and the queue."""
        rt = self.runtime("cudaLaunchKernel", t, self.j(4, 8))
        ks = max(rt.end + self.j(2, 12), self.stream_free + self.rng.randint(1_000, 2_500))
        self.dev.append(DevEv("kernel", kname, ks, ks + dur_ns, rt,
                              {"grid": grid, "block": block, "regs": regs, "smem": smem}))
        self.stream_free = ks + dur_ns
        return rt.end

    def memcpy(self, t, name, nbytes, dur_ns, rt_dur, blocking=False):
        rt = self.runtime("cudaMemcpyAsync", t, rt_dur)
        cs = max(t + self.j(4, 9), self.stream_free + self.rng.randint(1_000, 2_500))
        self.dev.append(DevEv("memcpy", name, cs, cs + dur_ns, rt, {"bytes": nbytes}))
        self.stream_free = cs + dur_ns
        if blocking:
            # Device -> pageable host memory: the call returns once the copy has completed, and the
            # copy waits behind everything queued on the stream before it.
            rt.end = max(rt.end, cs + dur_ns + self.j(3, 6))
        return rt.end

    def memset(self, t, nbytes, dur_ns):
        rt = self.runtime("cudaMemsetAsync", t, self.j(4, 7))
        ms = max(rt.end + self.j(2, 8), self.stream_free + self.rng.randint(1_000, 2_000))
        self.dev.append(DevEv("memset", MEMSET, ms, ms + dur_ns, rt, {"bytes": nbytes}))
        self.stream_free = ms + dur_ns
        return rt.end

    def sync(self, name, t):
        rt = self.runtime(name, t, self.j(2, 4))
        rt.end = max(rt.end, self.stream_free + self.j(2, 5))
        return rt.end

    # -- python frames ------------------------------------------------------------------------
    def enter(self, kind, key, defline, func, t, call_from):
        f = Frame(kind, key, defline, func, t, self.pystack[-1] if self.pystack else None, call_from)
        self.frames.append(f)
        self.pystack.append(f)
        return f

    def leave(self, f, t):
        assert self.pystack[-1] is f, (f.func, self.pystack[-1].func)
        f.end = t
        self.pystack.pop()
        return t

    def memory(self, t, nbytes):
        self.alloc += nbytes
        if nbytes > 0:
            self.addr += 0x200000
        # A caching allocator: reserves 20 MiB segments as allocations need them, never returns
        # them (so reserved stays a little above the peak allocated).
        seg = 20 * 1024 * 1024
        self.reserved = max(getattr(self, "reserved", 0), -(-self.alloc // seg) * seg)
        self.mem.append({"t": t, "bytes": nbytes, "addr": self.addr, "allocated": self.alloc,
                         "reserved": self.reserved})


def linear_op(m, t, gemm_us, out_elems, line):
    """nn.Linear.forward: aten::linear > aten::t, aten::addmm > cudaLaunchKernel (GEMM)."""
    def body(t):
        t = m.op("aten::t", t, lambda t: m.op("aten::transpose", t, lambda t: m.op("aten::as_strided", t)),
                 seq=True)
        t += m.j(1, 3)

        def addmm(t):
            m.memory(t + 500, out_elems * 4)
            return m.launch(t + m.j(6, 10), GEMM_FWD, gemm_us * US + m.rng.randint(-9_000, 9_000),
                            [8, 16, 1], [256, 1, 1], 126, 33_280)
        return m.op("aten::addmm", t, addmm, pre=(4, 8), post=(3, 6), seq=True)
    return m.op("aten::linear", t, body, line=line, seq=True)


def build(seed=20210304):
    m = Model(seed)
    rng = m.rng
    T0 = 200 * US                       # capture start on the model clock
    m.capture_start = T0
    t = T0
    root = m.enter("py", "train", 96, "<module>", t, ("train", 96))
    main = m.enter("py", "train", 60, "main", t + 1_000, ("train", 96))
    # A few ops before the first step: the tail of the warm-up iteration's bookkeeping.
    t = T0 + 35 * US
    t = m.op("aten::empty", t, line=63)
    t = m.op("aten::zeros", t + m.j(8, 14), lambda t: m.op("aten::zero_", m.op("aten::empty", t) + 2_000,
                                                         lambda t: m.op("aten::fill_", t)), line=63)
    t = m.op("aten::detach", t + m.j(6, 10), line=63)
    t += 60 * US

    weights = [(1024, 4096), (4096, 4096), (4096, 1000)]
    gemm_fwd_us = [620, 2560, 600]
    for n in STEPS:
        pf = m.enter("py", "profiler", 597, "step", t - 14 * US, ("train", 68))
        S = t
        step = m.open("step", f"ProfilerStep#{n}", S, line=605)
        m.leave(pf, S + 9 * US)
        t = S + m.j(11, 14)

        # -- DataLoader: next(batch); collate covered by aten::stack, except the planted stall ----------
        nxt = m.enter("py", "dataloader", 628, "__next__", t - 2 * US, ("train", 64))
        dl = m.open("dl", DL_NAME, t, line=634)
        t += m.j(6, 9)
        if n == STALL_STEP:
            # __getitem__ decodes/augments in Python (no op runs): ~5.7 ms with the device idle.
            ds = m.enter("py", "dataset", 21, "__getitem__", t, ("fetch", 51))
            t = m.leave(ds, t + 5_700 * US + rng.randint(0, 40_000))
            t += m.j(2, 4)
        col = m.enter("py", "collate", 138, "default_collate", t, ("fetch", 54))
        t = m.op("aten::stack", t + 1_000, lambda t: m.op("aten::cat", t, pre=(2, 4), post=(2, 3)) + 215 * US,
                 pre=(3, 5), post=(2, 4), line=141)
        t = m.op("aten::stack", t + m.j(2, 4), lambda t: m.op("aten::cat", t) + 28 * US, pre=(3, 5), post=(2, 4),
                 line=141)
        m.leave(col, t + 1_000)
        t = m.close(dl, t + m.j(3, 6))
        m.leave(nxt, t + 2 * US)
        t += m.j(6, 9)

        # -- train_step -----------------------------------------------------------------------------
        ts_frame = m.enter("py", "train", 38, "train_step", t, ("train", 66))
        t += m.j(4, 7)

        def to_dev(t, nbytes, copy_us, rt_us):
            def to_copy(t):
                def copy_(t):
                    m.memory(t + 800, nbytes)
                    return m.memcpy(t + m.j(3, 5), H2D, nbytes, copy_us * US + rng.randint(-3_000, 3_000),
                                    rt_us * US + rng.randint(0, 4_000))
                return m.op("aten::copy_", m.op("aten::empty_strided", t) + 1_000, copy_)
            # x.to(device) from train.py:39: the C method is a builtin frame, as with_stack records it
            b = m.enter("builtin", None, None, "<built-in method to of Tensor object at 0x7f3a2c1e5a80>", t,
                        ("train", 39))
            t = m.op("aten::to", t + 2 * US, lambda t: m.op("aten::_to_copy", t, to_copy), line=39)
            return m.leave(b, t + 1_000)
        t = to_dev(t, 4 * 1024 * 1024, 400, 118)
        t = to_dev(t + m.j(3, 6), 8 * 1024, 3, 12)
        t += m.j(30, 40)

        # forward: Python-heavy module calls (hooks, wrappers) between short ops
        call = m.enter("py", "module", 1501, "_call_impl", t, ("train", 40))
        net = m.enter("module", "module", 0, "Net", t + 2 * US, ("module", 1501))
        fwd = m.enter("py", "model", 20, "forward", t + 4 * US, ("module", 1501))
        t += m.j(60, 80)
        fwd_ops = []
        for i, (k_in, k_out) in enumerate(weights):
            c = m.enter("py", "module", 1501, "_call_impl", t, ("model", 22 + 2 * i))
            mm = m.enter("module", "module", i, "Linear", t + 2 * US, ("module", 1501))
            lf = m.enter("py", "linear", 113, "forward", t + 4 * US, ("module", 1501))
            b = m.enter("builtin", None, None, "<built-in function linear>", t + 9 * US, ("linear", 114))
            t = linear_op(m, t + 11 * US, gemm_fwd_us[i], 1024 * k_out, line=114)
            addmm = [x for x in m.host if x.name == "aten::addmm"][-1]
            fwd_ops.append(addmm)
            m.leave(b, t + 1_000)
            m.leave(lf, t + 3_000)
            m.leave(mm, t + 4_000)
            t = m.leave(c, t + 6_000) + m.j(150, 190)
            if i < 2:
                c = m.enter("py", "module", 1501, "_call_impl", t, ("model", 23 + 2 * i))
                rm = m.enter("module", "module", i, "ReLU", t + 2 * US, ("module", 1501))
                rf = m.enter("py", "activation", 102, "forward", t + 4 * US, ("module", 1501))
                fr = m.enter("py", "functional", 1457, "relu", t + 6 * US, ("activation", 103))
                b = m.enter("builtin", None, None, "<built-in method relu of type object at 0x7f3a7d9e1f40>",
                            t + 9 * US, ("functional", 1471))
                t = m.op("aten::relu", t + 11 * US,
                         lambda t: m.op("aten::clamp_min", t, lambda t: m.launch(
                             t + m.j(4, 7), K_RELU, 40 * US + rng.randint(0, 2_000), [16384, 1, 1], [128, 1, 1],
                             18, 0)), line=1471, seq=True)
                m.leave(b, t + 1_000)
                m.leave(fr, t + 2_000)
                m.leave(rf, t + 3_000)
                m.leave(rm, t + 4_000)
                t = m.leave(c, t + 6_000) + m.j(140, 170)
        m.leave(fwd, t)
        m.leave(net, t + 2_000)
        t = m.leave(call, t + 4_000) + m.j(40, 60)
        # loss
        c = m.enter("py", "module", 1501, "_call_impl", t, ("train", 41))
        lm = m.enter("module", "module", 0, "CrossEntropyLoss", t + 2 * US, ("module", 1501))
        lf = m.enter("py", "loss", 1173, "forward", t + 4 * US, ("module", 1501))
        ff = m.enter("py", "functional", 3026, "cross_entropy", t + 6 * US, ("loss", 1174))
        b = m.enter("builtin", None, None, "<built-in method cross_entropy_loss of PyCapsule object at 0x7f3a6c2b8e10>",
                    t + 9 * US, ("functional", 3053))

        def xent(t):
            t = m.op("aten::log_softmax", t, lambda t: m.op("aten::_log_softmax", t, lambda t: m.launch(
                t + m.j(3, 5), K_SOFTMAX, 14 * US + rng.randint(0, 1_500), [128, 1, 1], [32, 4, 1], 38, 0)),
                seq=True)

            def nll_fwd(t):
                t = m.memset(t + m.j(3, 5), 4, 1_200 + rng.randint(0, 400))
                return m.launch(t + m.j(2, 4), K_NLL, 7 * US + rng.randint(0, 1_000), [1, 1, 1], [32, 1, 1], 32, 2048)
            return m.op("aten::nll_loss_nd", t + m.j(2, 3), lambda t: m.op("aten::nll_loss", t, lambda t: m.op(
                "aten::nll_loss_forward", t, nll_fwd)), seq=True)
        t = m.op("aten::cross_entropy_loss", t + 11 * US, xent, line=3053, seq=True)
        loss_op = [x for x in m.host if x.name == "aten::nll_loss_nd"][-1]
        m.leave(b, t + 1_000)
        m.leave(ff, t + 2_000)
        m.leave(lf, t + 3_000)
        m.leave(lm, t + 4_000)
        t = m.leave(c, t + 6_000) + m.j(25, 35)

        if n == SYNC_STEP:
            # log.info(loss.item()) at train.py:42: item > _local_scalar_dense > D2H copy to pageable
            # memory (blocks until the queue ahead of it has run) + cudaStreamSynchronize.
            b = m.enter("builtin", None, None, "<built-in method item of Tensor object at 0x7f3a2c1e5e40>", t,
                        ("train", 42))

            def lsd(t):
                t = m.memcpy(t + m.j(3, 5), D2H, 4, 1_800 + rng.randint(0, 400), 6 * US, blocking=True)
                return m.sync("cudaStreamSynchronize", t + m.j(1, 2))
            t = m.op("aten::item", t + 2 * US, lambda t: m.op("aten::_local_scalar_dense", t, lsd), line=42)
            t = m.leave(b, t + 1_000) + m.j(5, 8)

        # backward: the autograd engine (C++: dense, no Python between nodes)
        tb = m.enter("py", "tensor", 487, "backward", t, ("train", 43))
        ab = m.enter("py", "autograd", 200, "backward", t + 2 * US, ("tensor", 488))
        bb = m.enter("builtin", None, None, "<built-in method run_backward of torch._C._EngineBase object at "
                     "0x7f3a7e0c2a80>", t + 5 * US, ("autograd", 251))
        t += 6 * US
        t = m.op("aten::ones_like", t, lambda t: m.op("aten::fill_", m.op("aten::empty_like", t) + 1_000,
                                                      lambda t: m.launch(t + 2_000, K_FILL, 1_800, [1, 1, 1],
                                                                         [64, 1, 1], 16, 0)), line=251)

        def node(t, nname, body, fwd=None):
            def inner(t):
                return m.op(nname, t, body, seq=False)
            ev = m.open("op", f"autograd::engine::evaluate_function: {nname}", t)
            ev.fwd_link = fwd
            m.seq += 1
            ev.seq = fwd.seq if fwd is not None else m.seq
            t = inner(t + m.j(2, 4))
            return m.close(ev, t + m.j(2, 4)) + m.j(1, 3)

        def k(name, us, grid=(160, 1, 1), block=(256, 1, 1)):
            return lambda t: m.launch(t + m.j(3, 5), name, us * US + rng.randint(0, 1_500), list(grid), list(block),
                                      32, 0)
        t = node(t, "NllLossBackward0", lambda t: m.op("aten::nll_loss_backward", t, k(K_NLL_BWD, 6)), loss_op)
        t = node(t, "LogSoftmaxBackward0",
                 lambda t: m.op("aten::_log_softmax_backward_data", t, k(K_SOFTMAX_BWD, 16)))
        for i in (2, 1, 0):
            k_in, k_out = weights[i]
            g = gemm_fwd_us[i]

            def addmm_bwd(t, i=i, g=g):
                if i > 0:
                    t = m.op("aten::t", t) + 1_000
                    t = m.op("aten::mm", t, lambda t: m.launch(t + m.j(4, 7), GEMM_DGRAD,
                                                               g * US + rng.randint(-9_000, 9_000), [8, 32, 1],
                                                               [256, 1, 1], 126, 33_280)) + 1_000
                t = m.op("aten::t", t) + 1_000
                t = m.op("aten::mm", t, lambda t: m.launch(t + m.j(4, 7), GEMM_WGRAD,
                                                           g * US + rng.randint(-9_000, 9_000), [16, 32, 1],
                                                           [256, 1, 1], 126, 33_280)) + 1_000
                t = m.op("aten::t", t) + 1_000
                return m.op("aten::sum", t, lambda t: m.launch(t + m.j(4, 7), K_SUM, 22 * US + rng.randint(0, 2_000),
                                                               [32, 16, 1], [32, 16, 1], 38, 4096)) + 1_000
            t = node(t, "AddmmBackward0", addmm_bwd, fwd_ops[i])
            t = node(t, "TBackward0", lambda t: m.op("aten::t", t))
            for _ in range(2):
                t = node(t, "torch::autograd::AccumulateGrad", lambda t: m.op("aten::detach", t, lambda t: m.op(
                    "detach", t)))
            if i > 0:
                t = node(t, "ReluBackward0", lambda t: m.op("aten::threshold_backward", t, k(K_RELU_BWD, 52)))
        m.leave(bb, t + 1_000)
        m.leave(ab, t + 3_000)
        t = m.leave(tb, t + 5_000) + m.j(30, 45)

        # optimizer: a Python loop over the 6 parameters
        ow = m.enter("py", "optimizer", 265, "wrapper", t, ("train", 44))
        ost = m.open("ann", OPT_STEP, t + 6 * US, line=276)
        sg = m.enter("py", "sgd", 63, "step", t + 10 * US, ("optimizer", 280))
        t += m.j(60, 80)
        for k_in, k_out in weights:
            for is_w in (True, False):
                us = 205 if is_w and k_in * k_out > 5_000_000 else (60 if is_w else 2)
                t = m.op("aten::add_", t, lambda t, us=us: m.launch(t + m.j(4, 6), K_ADD, us * US + rng.randint(
                    0, 3_000), [2048, 1, 1], [128, 1, 1], 16, 0), line=112) + m.j(150, 175)
        m.leave(sg, t)
        t = m.close(ost, t + m.j(4, 6))
        t = m.leave(ow, t + 3 * US) + m.j(15, 25)
        zg = m.enter("py", "optimizer", 435, "zero_grad", t, ("train", 45))
        oz = m.open("ann", OPT_ZERO, t + 4 * US, line=452)
        t = m.close(oz, t + 4 * US + m.j(48, 60))     # set_to_none=True: Python only, no op, no kernel
        t = m.leave(zg, t + 3 * US)
        for k, nb in enumerate((16 * 1024 * 1024, 16 * 1024 * 1024, 1024 * 1000 * 4, 4 * 1024 * 1024 + 8 * 1024)):
            m.memory(t + (k + 1) * 1_000, -nb)
        t = m.leave(ts_frame, t + 6 * US)

        # log_metrics: pure Python bookkeeping, no op; the device drains its queue meanwhile
        lg = m.enter("py", "train", 50, "log_metrics", t + m.j(8, 12), ("train", 67))
        t = m.leave(lg, lg.start + 6_000 * US + rng.randint(0, 80_000))
        t += m.j(25, 35)
        E = t
        m.close(step, E)
        m.steps.append((step.name, S, E))
        t = E + m.j(1, 3)
    # after the last step: the profiler stops (prof.__exit__) and Kineto drains the device: a
    # cudaDeviceSynchronize with no op around it (the profiler's flush, not a user sync)
    m.leave(main, t + 30 * US)
    m.leave(root, t + 35 * US)
    t += 60 * US
    m.sync("cudaDeviceSynchronize", t)
    m.flush = m.host[-1]
    assert m.flush.name == "cudaDeviceSynchronize" and m.flush.op_ext == 0
    m.capture_end = m.flush.end + 25 * US
    assert not m.stack and not m.pystack
    return m


# ------------------------------------------------------------------------------------ rounding
class View:
    """The model as one file shape carries it: every time as ns on the file's clock."""

    def __init__(self, m, base_ns, res):
        self.m, self.base, self.res = m, base_ns, res

    def q(self, t):
        """Model ns -> file-clock ns, floored to whole µs when the shape stores integer µs."""
        v = self.base + t
        return v - v % 1000 if self.res == "us" else v


# ------------------------------------------------------------------------------------ truth
def device_windows(steps, launches):
    """Each step as the device lived it (report-schema.md, Step): `steps` are (name, S, E) host
    ranges, `launches` (runtime start, runtime end, device start, device end) per launched
    device slice. A step runs from its host start (or the previous step's end, when later) to
    the later of its host end and the end of the device work that runtime calls wholly inside
    its host range launched; the first step starts after launched work outside every step that
    ends before the first step's own device work."""
    launched = [[x for x in launches if S <= x[0] and x[1] <= E] for _, S, E in steps]
    prev = steps[0][1]
    if launched[0]:
        first = min(x[2] for x in launched[0])
        inside = {x for xs in launched for x in xs}
        prev = max([prev] + [x[3] for x in launches if x not in inside and x[3] < first])
    out = []
    for (_, S, E), xs in zip(steps, launched):
        start = max(prev, S)
        end = max([E, start] + [x[3] for x in xs])
        out.append((start, end))
        prev = end
    return out


def truth_for(m, shape, view, path):
    q = view.q
    steps = [(name, q(S), q(E)) for name, S, E in m.steps]
    dev = [(q(d.start), q(d.end)) for d in m.dev]
    dls = [(q(h.start), q(h.end)) for h in m.host if h.kind == "dl"]
    # outermost op / runtime slices (what findings.md calls op work); annotations are not op work
    ops = [(q(h.start), q(h.end)) for h in m.host if h.kind in ("op", "rt")]
    user_item = [h for h in m.host if h.name == "aten::item"]
    blocking = [h for h in m.host if h.kind == "rt" and any(
        a is not None and a.name == "aten::item" for a in ancestors(h))
        and h.name in ("cudaMemcpyAsync", "cudaStreamSynchronize")]
    blocking_iv = [(q(h.start), q(h.end)) for h in blocking]
    has_callsite = shape["callsite"] == "line"
    # Pageable host -> device copies (findings.md `pageable_copy`): the outermost op
    # (aten::to) of each cudaMemcpyAsync whose copy reads pageable memory; lost = the memcpy's
    # time in the step with no other device work beside it (the copies make the host wait in no
    # synchronize).
    h2d = [d for d in m.dev if d.kind == "memcpy" and d.name == H2D]
    h2d_iv = [(q(d.start), q(d.end)) for d in h2d]
    other_dev = [(q(d.start), q(d.end)) for d in m.dev if d not in h2d]

    def outermost(h):
        return [a for a in [h] + list(ancestors(h)) if a.kind == "op"][-1]
    copies = [(outermost(d.rt), (q(d.start), q(d.end))) for d in h2d]
    # fp32 matrix work (findings.md `no_mixed_precision`): the V100's sgemm kernels, in the step
    # their device start falls in; count = the ops that launched them; lost = half their time.
    gemms = [d for d in m.dev if d.kind == "kernel" and d.name in (GEMM_FWD, GEMM_DGRAD, GEMM_WGRAD)]
    windows = device_windows(steps, [(q(d.rt.start), q(d.rt.end), q(d.start), q(d.end)) for d in m.dev])
    out_steps, expected = [], []
    for (name, S, E), (WS, WE) in zip(steps, windows):
        dur = E - S
        launched = [(q(d.start), q(d.end)) for d in m.dev if S <= q(d.rt.start) < E]
        busy = total(clip(dev, WS, WE))
        dl_here = clip(dls, S, E)
        dl_ns = total(dl_here)
        dl_uncovered = total(subtract(dl_here, ops))
        dl_dev_idle = total(subtract(dl_here, dev))
        sync_ns = total(clip(blocking_iv, S, E))
        # device-idle gaps >= 50 µs inside the step, and the op work in them outside DataLoader
        # ranges and blocking syncs (findings.md's host-bound rule)
        gaps = [g for g in subtract([(S, E)], dev) if g[1] - g[0] >= 50 * US]
        host_bound = total(subtract(intersect(gaps, ops), dls + blocking_iv))
        st = {"name": name, "start_ns": WS, "dur_ns": WE - WS,
              "host_start_ns": S, "host_dur_ns": dur,
              "device_busy_in_window_ns": busy,
              "device_launched_ns": total(launched),
              "device_launched_outside_window_ns": total(subtract(launched, [(S, E)])),
              "dataloader_ns": dl_ns,
              "dataloader_uncovered_ns": dl_uncovered,
              "dataloader_device_idle_ns": dl_dev_idle,
              "sync_blocked_ns": sync_ns,
              "host_bound_idle_ns": host_bound,
              "findings": {}}
        if name == f"ProfilerStep#{SYNC_STEP}":
            f = {"kind": "sync_point", "step": name, "count": len(user_item),
                 "call_site": SYNC_SITE if has_callsite else None,
                 "call_site_frame": shape["item_frame"], "ops": ["aten::item"], "lost_ns": sync_ns}
            st["findings"]["sync_point"] = f
            expected.append(f)
        if name == f"ProfilerStep#{STALL_STEP}":
            f = {"kind": "dataloader_stall", "step": name, "count": 1,
                 "call_site": DL_SITE if has_callsite else None,
                 "call_site_frame": shape["dl_frame"], "ops": [DL_NAME], "lost_ns": dl_dev_idle}
            st["findings"]["dataloader_stall"] = f
            expected.append(f)
        mine = [(op, iv) for op, iv in copies if S <= q(op.start) < E]
        # the item() sync's wait is sync_point's (it comes first for a nanosecond both claim); a
        # finding must cost >= 1 % of its step and >= 20 µs (findings.md, materiality)
        lost = total(clip(subtract(subtract([iv for _, iv in mine], other_dev), blocking_iv), S, E))
        if mine and lost >= 20 * US and lost * 100 >= dur:
            f = {"kind": "pageable_copy", "step": name, "count": len(mine),
                 "call_site": COPY_SITE if has_callsite else None, "ops": ["aten::to"], "lost_ns": lost}
            st["findings"]["pageable_copy"] = f
            expected.append(f)
        # in the step whose device-inclusive window their start falls in
        step_gemms = [d for d in gemms if WS <= q(d.start) < WE]
        in_window = clip([(q(d.start), q(d.end)) for d in step_gemms], WS, WE)
        fp32_ns = total(union(in_window))
        # a V100 is no device class steplens has GEMM rates for: reduced precision at (at least)
        # twice the rate saves the first half of each kernel (half of an odd ns count rounds
        # half away from zero, as Rust's f64::round); the item() sync's wait is sync_point's
        # (it comes first for a nanosecond both claim)
        halves = union([(a, a + (b - a + 1) // 2) for a, b in in_window])
        # a clear margin over the 10 % floor, so rounding cannot move the finding
        assert fp32_ns * 100 >= 15 * (WE - WS), (shape["name"], name, fp32_ns, WE - WS)
        launching_ops = {id([a for a in ancestors(d.rt) if a.kind == "op"][0]) for d in step_gemms}
        f = {"kind": "no_mixed_precision", "step": name, "count": len(launching_ops),
             "ops": ["aten::addmm", "aten::mm"], "fp32_matrix_ns": fp32_ns,
             "lost_ns": total(subtract(halves, clip(blocking_iv, WS, WE)))}
        st["findings"]["no_mixed_precision"] = f
        expected.append(f)
        # margins: planted problems >= 20 % of their step, everything else < 0.5 %
        for key, step_n in (("sync_blocked_ns", SYNC_STEP), ("dataloader_uncovered_ns", STALL_STEP)):
            if name == f"ProfilerStep#{step_n}":
                assert st[key] * 100 >= 20 * dur, (shape["name"], name, key, st[key], dur)
            else:
                assert st[key] * 1000 < 5 * dur, (shape["name"], name, key, st[key], dur)
        assert host_bound * 1000 < 5 * dur, (shape["name"], name, host_bound, dur)
        if name == f"ProfilerStep#{STALL_STEP}":
            assert dl_dev_idle * 100 >= 20 * dur
        out_steps.append(st)
    assert any(s["device_launched_outside_window_ns"] > 0 for s in out_steps)
    fl = m.flush
    return {
        "generator": "samples/kineto-compat/generate.py",
        "trace": os.path.basename(path),
        "shape": shape["name"],
        "pytorch": shape["pytorch"],
        "clock": "integer ns on the file's own clock: the file's µs values x 1000, read from the decimal text",
        "resolution_ns": 1000 if view.res == "us" else 1,
        "resolution_note": ("whole µs in the file: every start and end of the model was floored to the µs "
                            "(Kineto's own truncation) and these figures come from that rounded model"
                            if view.res == "us" else "ns: the file carries the model's exact nanoseconds"),
        "device": {"kind": "cuda", "name": V100["name"] if shape["device_properties"] else None, "count": 1},
        "call_sites": ("exact user lines (file:line)" if has_callsite else
                       "not carried: " + shape["callsite_note"]),
        "steps": out_steps,
        "expected_findings": expected,
        "expected_findings_total": {"sync_point": 1, "dataloader_stall": 1,
                                    "pageable_copy": sum(1 for e in expected if e["kind"] == "pageable_copy"),
                                    "no_mixed_precision": len(steps)},
        "not_findings": [
            {"what": "profiler flush", "name": "cudaDeviceSynchronize", "start_ns": q(fl.start),
             "dur_ns": q(fl.end) - q(fl.start),
             "why": "a synchronize with no op around it, after the last step: the profiler draining the "
                    "device when the capture stops"},
            {"what": "pageable H2D copies as syncs", "name": "cudaMemcpyAsync under aten::to",
             "why": "host -> device copies do not wait for the device: pageable_copy's, not sync_point's"},
            {"what": "zero_grad(set_to_none=True)", "name": OPT_ZERO,
             "why": "no aten::zero_, and AccumulateGrad only detaches: not slow_zero_grad"},
        ],
        "tolerance": {"lost_ns_rel": 0.02, "lost_ns_abs": 50 * US},
    }


def ancestors(h):
    p = h.parent
    while p is not None:
        yield p
        p = p.parent


# ------------------------------------------------------------------------------------ writers
class Raw:
    """A value written verbatim (numbers in the writer's own format)."""

    def __init__(self, s):
        self.s = s


def val(v):
    if isinstance(v, Raw):
        return v.s
    return json.dumps(v, ensure_ascii=False)


def kv(pairs):
    return ", ".join(f"{json.dumps(k)}: {val(v)}" for k, v in pairs)


def ev_text(lines, args=None, args_style="lines"):
    """Kineto's pretty layout: one event over several lines, args block last."""
    body = [f"    {kv(ln)}" for ln in lines if ln]
    if args is not None:
        if not args:
            body.append('    "args": {\n    }')
        elif args_style == "one":
            body.append('    "args": {\n      ' + kv(args) + "\n    }")
        else:
            groups = args if isinstance(args[0], list) else [args]
            inner = ",\n".join("      " + kv(g) for g in groups if g)
            body.append('    "args": {\n' + inner + "\n    }")
    return "  {\n" + ",\n".join(body) + "\n  }"


def fmt_ts(view, t):
    v = view.q(t)
    if view.res == "us":
        return Raw(str(v // 1000))
    return Raw(f"{v // 1000}.{v % 1000:03d}")


def fmt_dur(view, a, b):
    d = view.q(b) - view.q(a)
    if view.res == "us":
        return Raw(str(d // 1000))
    return Raw(f"{d // 1000}.{d % 1000:03d}")


def py_name(shape, f):
    if f.kind == "builtin":
        return f.func
    if f.kind == "module":
        return f"nn.Module: {f.func}_{f.defline}"
    rel = PYFILES[f.key]
    if shape["paths"] == "full":
        path = (PROJ if f.key in USER_FILES else shape["site"]) + rel
    else:
        path = rel
    return f"{path}({f.defline}): {f.func}"


def call_stack(shape, h):
    """The jit-style 'Call stack' (1.9/1.10): Python frames innermost first, each at the line it is
    executing (the innermost at the op's call line, each outer one where it called the next)."""
    f, line = h.frame, h.line
    frames = []
    while f is not None:
        if f.kind == "py":
            assert line is not None, h.name
            path = (PROJ if f.key in USER_FILES else shape["site"]) + PYFILES[f.key]
            frames.append(f"{path}({line}): {f.func}")
        line = f.call_from[1]
        f = f.parent
    return ";".join(frames)


def render(m, shape, view):
    """Write the model in one shape; returns the file text."""
    S = shape
    ts = lambda t: fmt_ts(view, t)                       # noqa: E731
    dur = lambda a, b: fmt_dur(view, a, b)               # noqa: E731
    hpid = str(PID) if S["host_pid_str"] else PID
    htid = str(TID) if S["host_tid_str"] else TID
    ftid = str(TID) if S["host_pid_str"] else TID       # flow/instant tid (always int in real writers)
    dtid = f"stream {STREAM}" if S["dev_tid_str"] else STREAM
    cat = S["cats"]
    host_out, dev_out, flow_rt, meta = [], [], [], []
    ev_idx = 0

    # python frames
    pyev = []
    py_ids = {}
    if S["stack"] in ("py111", "py20", "pycf"):
        frames = [f for f in m.frames if f.end is not None and f.end > m.capture_start]
        if S["stack"] == "py111":
            frames = [f for f in frames if f.kind == "py"]
        frames.sort(key=lambda f: (f.start, -f.end))
        module_ids = {}
        for f in frames:
            if f.kind == "module" and (f.func, f.defline) not in module_ids:
                module_ids[(f.func, f.defline)] = len(module_ids)
        for i, f in enumerate(frames):
            py_ids[id(f)] = i + (0 if S["stack"] == "py111" else 1)

        def py_parent(f):
            p = f.parent
            while p is not None and id(p) not in py_ids:
                p = p.parent
            return p
        for f in frames:
            a = []
            par = py_parent(f)
            if S["stack"] == "pycf":
                a.append(("CallFrom", f"{PYFILES[f.call_from[0]]}:{f.call_from[1]}"))
            if S["stack"] == "py111":
                a.append(("Python id", py_ids[id(f)]))
                a.append(("Python parent id", py_ids[id(par)] if par is not None else None))
                a.append(("Python thread", 0))
            else:
                if par is not None:
                    a.append(("Python parent id", py_ids[id(par)]))
                a.append(("Python id", py_ids[id(f)]))
                if f.kind == "module":
                    a.append(("Python module id", module_ids[(f.func, f.defline)]))
            pyev.append((f.start, f, a))

    def py_caller(h):
        f = h.frame
        while f is not None and id(f) not in py_ids:
            f = f.parent
        return f

    # host slices
    hosts = [h for h in m.host if h.kind != "rt"]
    order = (lambda h: (h.end, h.start)) if S["host_order"] == "end" else (lambda h: (h.start, -h.end))
    items = []
    for h in sorted(hosts, key=order):
        if h.kind in ("step", "dl", "ann"):
            c = cat["annotation"]
        else:
            c = cat["op"]
        args = []
        st = S["op_args"]
        if st == "1.8":
            args = [[("Input dims", Raw("[]")), ("Input type", Raw("[]")), ("Input names", Raw("[]"))],
                    [("Output dims", Raw("[]")), ("Output type", Raw("[]")), ("Output names", Raw("[]"))],
                    [("Device", 0), ("External id", h.ext), ("Extra arguments", Raw("[]"))],
                    [("Trace name", "PyTorch Profiler"), ("Trace iteration", 0)]]
        elif st in ("1.9", "1.10"):
            md = []
            if S["stack"] == "callstack" and not h.backward and h.frame is not None:
                md.append(("Call stack", call_stack(S, h)))
            if h.seq is not None:
                md.append(("Fwd thread id", 0 if not h.backward else 1))
                md.append(("Sequence number", h.seq))
            head = [("Device", PID)] if st == "1.9" else []
            args = [head + [("External id", h.ext)] if st == "1.9" else [("External id", h.ext)],
                    [("Trace name", "PyTorch Profiler"), ("Trace iteration", 0)]]
            if md:
                args.append(md)
        elif st == "1.11":
            md = [("Profiler Event Index", ev_idx)]
            if S["stack"] == "py111":
                pc = py_caller(h)
                names = []
                f = pc
                while f is not None:
                    if id(f) in py_ids:
                        names.append(py_name(S, f))
                    f = f.parent
                md.append(("Call stack", ";".join(names)))
                md.append(("python_caller_id", py_ids[id(pc)] if pc is not None else None))
            if h.seq is not None:
                md.append(("Sequence number", h.seq))
                md.append(("Fwd thread id", 0 if not h.backward else 1))
            args = [[("Trace name", "PyTorch Profiler"), ("Trace iteration", 0)], [("External id", h.ext)], md]
        else:   # 2.0 / 2.3 / 2.x
            a = [("External id", h.ext)]
            if h.seq is not None:
                a += [("Sequence number", h.seq), ("Fwd thread id", 0 if not h.backward else 1)]
            if st == "2.x":
                a.append(("Record function id", 0))
            a.append(("Ev Idx", ev_idx))
            args = [a]
        ev_idx += 1
        lines = [[("ph", "X"), ("cat", c), ("name", h.name), ("pid", hpid), ("tid", htid)],
                 [("ts", ts(h.start)), ("dur", dur(h.start, h.end))]]
        items.append((h.start, ev_text(lines, args)))
        if S["fwdbwd"] and h.fwd_link is not None:
            fo = h.fwd_link
            fid = h.seq
            items.append((fo.start, ev_text([[("ph", "s"), ("id", fid), ("pid", hpid), ("tid", ftid),
                                              ("ts", ts(fo.start))], [("cat", "fwdbwd"), ("name", "fwdbwd")]])))
            items.append((h.start, ev_text([[("ph", "f"), ("id", fid), ("pid", hpid), ("tid", ftid),
                                             ("ts", ts(h.start))],
                                            [("cat", "fwdbwd"), ("name", "fwdbwd"), ("bp", "e")]])))
    if pyev:
        for _, f, a in pyev:
            if S["op_args"] in ("2.0", "2.x"):
                a = a + [("Ev Idx", ev_idx)]
                ev_idx += 1
            start = max(f.start, m.capture_start)
            lines = [[("ph", "X"), ("cat", "python_function"), ("name", py_name(S, f)), ("pid", hpid),
                      ("tid", htid)], [("ts", ts(start)), ("dur", dur(start, f.end))]]
            items.append((start, ev_text(lines, a)))
    # memory instants
    if S["memory"]:
        for i, mm in enumerate(m.mem):
            a = [("Device Type", 1), ("Device Id", DEV)]
            if S["memory"] != "1.9":
                a = [("Total Reserved", mm["reserved"]), ("Total Allocated", mm["allocated"]), ("Bytes", mm["bytes"]),
                     ("Device Id", DEV), ("Device Type", 1), ("Addr", mm["addr"])]
                if S["op_args"] in ("2.0", "2.x"):
                    a.append(("Ev Idx", ev_idx))
                    ev_idx += 1
            else:
                a.append(("Bytes", mm["bytes"]))
            head = [("ph", "i")] + ([("cat", "cpu_instant_event")] if S["memory"] != "nocat" and S["memory"] != "1.9"
                                    else []) + [("s", "t"), ("name", "[memory]")]
            lines = [head, [("pid", hpid), ("tid", ftid)], [("ts", ts(mm["t"]))]]
            items.append((mm["t"], ev_text(lines, a, args_style="one")))
    items.sort(key=lambda x: x[0]) if S["host_order"] == "start" else None
    host_out = [x[1] for x in items]

    # runtime calls and device work, with their flows
    ext_key = S["dev_ext_key"]
    rts = sorted((h for h in m.host if h.kind == "rt"), key=lambda h: h.start)
    dev_of = {id(d.rt): d for d in m.dev}
    fl = S["flows"]
    for h in rts:
        d = dev_of.get(id(h))
        if S["rt_args"] == "old":
            a = [[("cbid", CBID[h.name]), ("correlation", h.corr)],
                 [("external id", h.op_ext), ("external ts", int(view.q(h.op_start) // 1000) if h.op_ext else 0)]]
        else:
            a = [[("External id", h.op_ext), ("cbid", CBID[h.name]), ("correlation", h.corr)]]
        lines = [[("ph", "X"), ("cat", cat["runtime"]), ("name", h.name), ("pid", hpid), ("tid", htid)],
                 [("ts", ts(h.start)), ("dur", dur(h.start, h.end))]]
        flow_rt.append((h.start, ev_text(lines, a)))
        if fl and d is not None:
            if fl == "async":
                ln = [[("ph", "s"), ("id", h.corr), ("pid", hpid), ("tid", ftid), ("ts", ts(h.start))],
                      [("cat", "async"), ("name", "launch")]]
            elif fl == "async_gpu":
                ln = [[("ph", "s"), ("id", h.corr), ("pid", hpid), ("tid", ftid), ("ts", ts(h.start))],
                      [("cat", "async_gpu"), ("name", h.name), ("bp", "e")]]
            elif fl == "async_cpu_to_gpu":
                ln = [[("ph", "s"), ("id", h.corr), ("pid", hpid), ("tid", ftid), ("ts", ts(h.start))],
                      [("cat", "async_cpu_to_gpu"), ("name", "async_gpu"), ("bp", "e")]]
            else:
                ln = [[("ph", "s"), ("id", h.corr), ("pid", hpid), ("tid", ftid), ("ts", ts(h.start))],
                      [("cat", "ac2g"), ("name", "ac2g")]]
            flow_rt.append((h.start, ev_text(ln)))
        elif fl in ("async_cpu_to_gpu", "ac2g") and d is None:
            # a runtime call that launched nothing still gets a flow end on the host (dangling)
            c, nm = ("ac2g", "ac2g") if fl == "ac2g" else ("async_cpu_to_gpu", "async_gpu")
            flow_rt.append((h.start, ev_text([[("ph", "f"), ("id", h.corr), ("pid", hpid), ("tid", ftid),
                                                ("ts", ts(h.start))], [("cat", c), ("name", nm), ("bp", "e")]])))
    for d in sorted(m.dev, key=lambda d: d.start):
        h = d.rt
        if d.kind == "kernel":
            x = d.extra
            blocks = x["grid"][0] * x["grid"][1] * x["grid"][2]
            bps = blocks / 80
            wps = bps * x["block"][0] * x["block"][1] * x["block"][2] / 32
            occ = min(100, int(0.5 + min(wps, 64) / 64 * 100 * 0.5))
            if S["kernel_args"] == "1.8":
                a = [[("queued", 0), ("device", DEV), ("context", 1)],
                     [("stream", STREAM), ("correlation", h.corr), (ext_key, h.op_ext)],
                     [("registers per thread", x["regs"])], [("shared memory", x["smem"])],
                     [("warps per SM", Raw(f"{wps:g}"))],
                     [("grid", x["grid"])], [("block", x["block"])]]
            else:
                a = [[("queued", 0), ("device", DEV), ("context", 1)],
                     [("stream", STREAM), ("correlation", h.corr), (ext_key, h.op_ext)],
                     [("registers per thread", x["regs"])], [("shared memory", x["smem"])],
                     [("blocks per SM", Raw(f"{bps:f}" if S["op_args"] in ("2.3", "2.x") else f"{bps:g}"))],
                     [("warps per SM", Raw(f"{wps:f}" if S["op_args"] in ("2.3", "2.x") else f"{wps:g}"))],
                     [("grid", x["grid"])], [("block", x["block"])], [("est. achieved occupancy %", occ)]]
                if ext_key == "External id":
                    a = [[(ext_key, h.op_ext)], [("queued", 0), ("device", DEV), ("context", 1)],
                         [("stream", STREAM), ("correlation", h.corr)]] + a[2:]
            c = cat["kernel"]
        else:
            nb = d.extra["bytes"]
            bw = nb / max(1, view.q(d.end) - view.q(d.start))
            a = [[("device", DEV), ("context", 1)], [("stream", STREAM), ("correlation", h.corr), (ext_key, h.op_ext)],
                 [("bytes", nb), ("memory bandwidth (GB/s)", Raw(f"{bw:.6g}"))]]
            if ext_key == "External id":
                a = [[(ext_key, h.op_ext)], [("device", DEV), ("context", 1)],
                     [("stream", STREAM), ("correlation", h.corr)], a[2]]
            c = cat["memcpy"] if d.kind == "memcpy" else cat["memset"]
        lines = [[("ph", "X"), ("cat", c), ("name", d.name), ("pid", DEV), ("tid", dtid)],
                 [("ts", ts(d.start)), ("dur", dur(d.start, d.end))]]
        dev_out.append(ev_text(lines, a))
        if fl:
            if fl == "async":
                ln = [[("ph", "f"), ("id", h.corr), ("pid", DEV), ("tid", dtid), ("ts", ts(d.start))],
                      [("cat", "async"), ("name", "launch"), ("bp", "e")]]
            elif fl == "async_gpu":
                nm = {"kernel": "cudaLaunchKernel", "memcpy": "cudaMemcpyAsync", "memset": "cudaMemsetAsync"}[d.kind]
                ln = [[("ph", "f"), ("id", h.corr), ("pid", DEV), ("tid", dtid), ("ts", ts(d.start))],
                      [("cat", "async_gpu"), ("name", nm), ("bp", "e")]]
            elif fl == "async_cpu_to_gpu":
                ln = [[("ph", "f"), ("id", h.corr), ("pid", DEV), ("tid", dtid), ("ts", ts(d.start))],
                      [("cat", "async_cpu_to_gpu"), ("name", "async_gpu"), ("bp", "e")]]
            else:
                ln = [[("ph", "f"), ("id", h.corr), ("pid", DEV), ("tid", dtid), ("ts", ts(d.start))],
                      [("cat", "ac2g"), ("name", "ac2g"), ("bp", "e")]]
            dev_out.append(ev_text(ln))
    # device-side mirrors of the step and optimizer annotations
    if S["gpu_user_annotation"]:
        for h in m.host:
            if h.kind not in ("step", "ann") or h.name == OPT_ZERO:
                continue
            ds = [d for d in m.dev if h.start <= d.rt.start < h.end]
            if not ds:
                continue
            a0, a1 = min(d.start for d in ds), max(d.end for d in ds)
            dev_out.append(ev_text([[("ph", "X"), ("cat", "gpu_user_annotation"), ("name", h.name), ("pid", DEV),
                                     ("tid", dtid)], [("ts", ts(a0)), ("dur", dur(a0, a1))]],
                                   [("External id", h.ext)]))

    # lane metadata
    t_meta = ts(m.capture_start)
    M = S["meta"]

    def mev(name, pid, tid, args, with_tid=True):
        ln = [("name", name), ("ph", "M"), ("ts", t_meta), ("pid", pid)]
        if with_tid:
            ln.append(("tid", tid))
        return ev_text([ln], [args])
    if M == "1.8":
        meta.append(mev("process_name", hpid, 0, ("name", "python3.8")))
        meta.append(mev("process_labels", hpid, 0, ("labels", "CPU")))
        meta.append(mev("thread_name", hpid, str(TID), ("name", f"thread {TID} (python3.8)")))
    else:
        no_tid = S.get("meta_no_tid", False)
        pname = "python3.10" if S["site"] == SITE_NEW else "python3.8"
        reps = 2 if S.get("dup_meta") else 1
        for _ in range(reps):
            meta.append(mev("process_name", hpid, 0, ("name", pname), with_tid=not no_tid))
            meta.append(mev("process_labels", hpid, 0, ("labels", "CPU"), with_tid=not no_tid))
            meta.append(mev("process_sort_index", hpid, 0, ("sort_index", PID), with_tid=not no_tid))
        meta.append(mev("process_name", DEV, 0, ("name", pname), with_tid=not no_tid))
        meta.append(mev("process_labels", DEV, 0, ("labels", f"GPU {DEV}"), with_tid=not no_tid))
        meta.append(mev("process_sort_index", DEV, 0, ("sort_index", 0x1000000 + DEV), with_tid=not no_tid))
        for _ in range(reps):
            meta.append(mev("thread_name", hpid, htid, ("name", f"thread {TID} ({pname})")))
            meta.append(mev("thread_sort_index", hpid, htid, ("sort_index", TID)))
        meta.append(mev("thread_name", DEV, dtid, ("name", f"stream {STREAM} ")))
        meta.append(mev("thread_sort_index", DEV, dtid, ("sort_index", STREAM)))

    span = []
    cs, ce = m.capture_start, m.capture_end
    tp = "Traces" if S["span_pid"] == "Traces" else "Spans"
    span.append(ev_text([[("ph", "X"), ("cat", "Trace"), ("ts", ts(cs)), ("dur", dur(cs, ce))],
                         [("pid", tp), ("tid", "PyTorch Profiler")], [("name", "PyTorch Profiler (0)")]],
                        [("Op count", 0)]))
    if tp == "Spans":
        span.append(ev_text([[("name", "process_sort_index"), ("ph", "M"), ("ts", ts(cs))],
                             [("pid", "Spans"), ("tid", 0)]], [("sort_index", 0x20000000)]))
    span.append(ev_text([[("name", "Iteration Start: PyTorch Profiler"), ("ph", "i"), ("s", "g")],
                         [("pid", "Traces"), ("tid", "Trace PyTorch Profiler"), ("ts", ts(cs))]]))
    rwe = ev_text([[("name", "Record Window End"), ("ph", "i"), ("s", "g")],
                   [("pid", ""), ("tid", ""), ("ts", ts(ce + 3 * US))]])

    flow_rt.sort(key=lambda x: x[0])
    rt_out = [x[1] for x in flow_rt]
    if S["meta_pos"] == "start":
        events = meta + span + host_out + rt_out + dev_out + [rwe]
    else:
        events = host_out + rt_out + dev_out + meta + span + [rwe]
    body = ",\n".join(events)

    if S["framing"] == "array":
        return "[\n" + body + "\n]\n"
    head = ["{"]
    for k, v in S["header"](view):
        head.append(f"  {json.dumps(k)}: {v},")
    head.append('  "traceEvents": [')
    tail = ["  ]"]
    for k, v in S["trailer"](view):
        tail[-1] += ","
        tail.append(f"  {json.dumps(k)}: {v}")
    return "\n".join(head) + "\n" + body + "\n" + "\n".join(tail) + "\n}\n"


def dev_props_json(indent="    "):
    keys = list(V100.items())
    lines = [", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in keys[i:i + 3]) for i in range(0, len(keys), 3)]
    return "[\n" + indent + "{\n" + ",\n".join(indent + "  " + ln for ln in lines) + "\n" + indent + "}\n  ]"


DIST = json.dumps({"backend": "nccl", "rank": 0, "world_size": 1})


# ------------------------------------------------------------------------------------ shapes
OLD_CATS = {"op": "Operator", "annotation": "Operator", "runtime": "Runtime", "kernel": "Kernel",
            "memcpy": "Memcpy", "memset": "Memset"}
MIX_CATS = {"op": "cpu_op", "annotation": "user_annotation", "runtime": "Runtime", "kernel": "Kernel",
            "memcpy": "Memcpy", "memset": "Memset"}
NEW_CATS = {"op": "cpu_op", "annotation": "user_annotation", "runtime": "cuda_runtime", "kernel": "kernel",
            "memcpy": "gpu_memcpy", "memset": "gpu_memset"}


def shapes():
    base = dict(framing="object", host_pid_str=False, host_tid_str=False, dev_tid_str=False, fwdbwd=False,
                gpu_user_annotation=False, memory=None, stack=None, paths="full", site=SITE_OLD, meta="new",
                meta_pos="end", span_pid="Spans", host_order="start", rt_args="new", kernel_args="new",
                dev_ext_key="External id", device_properties=True, dup_meta=False,
                header=lambda v: [("schemaVersion", "1")], trailer=lambda v: [])
    out = []

    def add(**kw):
        s = dict(base)
        s.update(kw)
        out.append(s)

    old = dict(cats=OLD_CATS, host_tid_str=True, dev_tid_str=True, meta="1.8", meta_pos="start", span_pid="Traces",
               host_order="end", rt_args="old", dev_ext_key="external id", flows="async")
    add(name="pt1_8", pytorch="1.8", base_ns=1_615_212_345_678_000 * 1000, res="us", **old, op_args="1.8",
        kernel_args="1.8", device_properties=False)
    add(name="pt1_8_array", pytorch="1.8 shape as a bare array with no flow events (robustness variant)",
        base_ns=1_615_212_345_678_000 * 1000, res="us", **dict(old, flows=None), op_args="1.8", kernel_args="1.8",
        device_properties=False, framing="array")
    add(name="pt1_9", pytorch="1.9", base_ns=1_623_143_089_861_000 * 1000, res="us", **old, op_args="1.9",
        memory="1.9", stack="callstack",
        header=lambda v: [("schemaVersion", "1"), ("deviceProperties", dev_props_json())])
    add(name="variant_string_ids", pytorch="1.9 shape, every host pid/tid a string (robustness variant)",
        base_ns=1_623_143_089_861_000 * 1000, res="us", **dict(old, host_tid_str=True), op_args="1.9",
        memory="1.9", stack="callstack", host_pid_str=True,
        header=lambda v: [("schemaVersion", "1"), ("deviceProperties", dev_props_json())])
    add(name="pt1_10", pytorch="1.10", base_ns=1_635_202_069_792_000 * 1000, res="us", cats=MIX_CATS,
        op_args="1.10", rt_args="old", dev_ext_key="external id", flows="async_gpu", memory="nocat",
        stack="callstack", host_order="end",
        header=lambda v: [("schemaVersion", "1"), ("distributedInfo", DIST), ("deviceProperties", dev_props_json())])
    add(name="pt1_11", pytorch="1.11-1.12 (async_cpu_to_gpu era; observed in HTA trace_diff, Aug 2022)",
        base_ns=1_661_938_466_240_000 * 1000, res="us", cats=NEW_CATS, op_args="1.11", flows="async_cpu_to_gpu",
        memory="cat", stack="py111",
        header=lambda v: [("schemaVersion", "1"), ("deviceProperties", dev_props_json()), ("distributedInfo", DIST)])
    add(name="pt2_0", pytorch="2.0-2.2 (ac2g, Ev Idx, integer µs)", base_ns=1_683_564_901_540_000 * 1000, res="us",
        cats=NEW_CATS, op_args="2.0", flows="ac2g", memory="cat", stack="py20", site=SITE_NEW,
        header=lambda v: [("schemaVersion", "1"), ("deviceProperties", dev_props_json()), ("distributedInfo", DIST)],
        trailer=lambda v: [("traceName", json.dumps("/home/user/proj/log/host_4242.1683564901540.pt.trace.json"))])
    add(name="pt2_3", pytorch="2.3+ with ns-resolution timestamps (epoch µs with 3 decimals)",
        base_ns=1_712_195_495_500_000_047, res="ns", cats=NEW_CATS, op_args="2.3", flows="ac2g", fwdbwd=True,
        gpu_user_annotation=True, site=SITE_NEW,
        header=lambda v: [("schemaVersion", "1"), ("deviceProperties", dev_props_json()), ("distributedInfo", DIST)],
        trailer=lambda v: [("traceName", json.dumps("/home/user/proj/log/host_4242.1712195495500.pt.trace.json")),
                           ("displayTimeUnit", json.dumps("ns"))])
    modern_header = lambda v: [("schemaVersion", "1"), ("deviceProperties", dev_props_json()),   # noqa: E731
                               ("distributedInfo", DIST), ("trace_id", json.dumps("9F2C61B4D0E84A7FA1C3E5B7092D4F6A")),
                               ("with_stack", "1"), ("profile_memory", "1"), ("host_name", json.dumps("gpu-node-07")),
                               ("displayTimeUnit", json.dumps("ms")),
                               ("baseTimeNanoseconds", "1790857026000000000")]
    modern_trailer = lambda v: [("traceName", json.dumps(                                       # noqa: E731
        "/home/user/proj/log/gpu-node-07_4242.1790857031123456789.pt.trace.json"))]
    add(name="pt2_x", pytorch="latest (T215-like: base-relative ns timestamps, CallFrom)",
        base_ns=4_456_820_364_934_489, res="ns", cats=NEW_CATS, op_args="2.x", flows="ac2g", fwdbwd=True,
        gpu_user_annotation=True, memory="cat", stack="pycf", paths="short", site=SITE_NEW, dup_meta=True,
        header=modern_header, trailer=modern_trailer)
    add(name="variant_meta_no_tid", pytorch="latest shape, process metadata without tid (robustness variant)",
        base_ns=4_456_820_364_934_489, res="ns", cats=NEW_CATS, op_args="2.x", flows="ac2g", fwdbwd=True,
        gpu_user_annotation=True, memory="cat", stack="pycf", paths="short", site=SITE_NEW, meta_no_tid=True,
        header=modern_header, trailer=modern_trailer)
    # what each shape can say about the user's call site
    for s in out:
        st = s["stack"]
        if st in ("callstack", "pycf"):
            s["callsite"] = "line"
            s["callsite_note"] = ""
            s["item_frame"] = "train.py(42): train_step" if st == "callstack" else "train.py(38): train_step"
            s["dl_frame"] = "train.py(64): main" if st == "callstack" else "train.py(60): main"
        elif st in ("py111", "py20"):
            s["callsite"] = "frame"
            s["callsite_note"] = ("python_function names carry the enclosing function's def line "
                                  "(train.py(38): train_step), not the calling line, and there is no CallFrom")
            s["item_frame"] = "train.py(38): train_step"
            s["dl_frame"] = "train.py(60): main"
        else:
            s["callsite"] = None
            s["callsite_note"] = "the trace has no Python stack (with_stack off, or not written by this release)"
            s["item_frame"] = None
            s["dl_frame"] = None
    return out


# ------------------------------------------------------------------------------------ read-back check
def read_back(text, truth):
    """Recompute the truth's per-step figures from the written file alone (decimal text -> ns, links by
    correlation id) and check them, the flows and the op nesting. Guards the writers, not the model."""
    doc = json.loads(text, parse_float=decimal.Decimal)
    evs = doc if isinstance(doc, list) else doc["traceEvents"]

    def ns(v):
        return int((decimal.Decimal(v) * 1000).to_integral_value())
    xs = [e for e in evs if e.get("ph") == "X"]
    dev_cats = {"Kernel", "kernel", "Memcpy", "gpu_memcpy", "Memset", "gpu_memset"}
    rt_cats = {"Runtime", "cuda_runtime"}
    op_cats = {"Operator", "cpu_op"}
    ann = ("ProfilerStep#", "enumerate(DataLoader)#", "Optimizer.")

    def iv(e):
        return (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
    steps = sorted((iv(e), e["name"]) for e in xs if e["name"].startswith("ProfilerStep#")
                   and e.get("cat") in ("Operator", "user_annotation"))
    devs = [e for e in xs if e.get("cat") in dev_cats]
    dev = [iv(e) for e in devs]
    rts = {e["args"]["correlation"]: e for e in xs if e.get("cat") in rt_cats}
    dls = [iv(e) for e in xs
           if e["name"].startswith("enumerate(DataLoader)#") and e.get("cat") != "gpu_user_annotation"]
    ops = [iv(e) for e in xs
           if (e.get("cat") in op_cats and not e["name"].startswith(ann)) or e.get("cat") in rt_cats]
    items = [iv(e) for e in xs if e["name"] == "aten::item"]
    blocking = [iv(e) for e in xs
                if e.get("cat") in rt_cats and e["name"] in ("cudaMemcpyAsync", "cudaStreamSynchronize")
                and any(a <= iv(e)[0] and iv(e)[1] <= b for a, b in items)]
    assert [n for _, n in steps] == [s["name"] for s in truth["steps"]]
    launches = [(ns(rts[d["args"]["correlation"]]["ts"]),
                 ns(rts[d["args"]["correlation"]]["ts"]) + ns(rts[d["args"]["correlation"]]["dur"]))
                + iv(d) for d in devs]
    windows = device_windows([(n, S, E) for (S, E), n in steps], launches)
    for ((S, E), name), (WS, WE), st in zip(steps, windows, truth["steps"]):
        gaps = [g for g in subtract([(S, E)], dev) if g[1] - g[0] >= 50 * US]
        dl_here = clip(dls, S, E)
        got = {"start_ns": WS, "dur_ns": WE - WS, "host_start_ns": S, "host_dur_ns": E - S,
               "device_busy_in_window_ns": total(clip(dev, WS, WE)),
               "device_launched_ns": total([iv(d) for d in devs if S <= ns(rts[d["args"]["correlation"]]["ts"]) < E]),
               "dataloader_ns": total(dl_here),
               "dataloader_uncovered_ns": total(subtract(dl_here, ops)),
               "dataloader_device_idle_ns": total(subtract(dl_here, dev)),
               "sync_blocked_ns": total(clip(blocking, S, E)),
               "host_bound_idle_ns": total(subtract(intersect(gaps, ops), dls + blocking))}
        for k, v in got.items():
            assert v == st[k], (truth["shape"], name, k, v, st[k])
    # device work links to its launch: same correlation, same External id of the launching op
    for d in devs:
        r = rts[d["args"]["correlation"]]
        key = "External id" if "External id" in d["args"] else "external id"
        rkey = "External id" if "External id" in r["args"] else "external id"
        assert d["args"][key] == r["args"][rkey], d["name"]
    # flows: every start has its end on the device event of the same correlation
    by_corr = {d["args"]["correlation"]: d for d in devs}
    for f in evs:
        if f.get("ph") not in ("s", "f") or f.get("cat") == "fwdbwd":
            continue
        if f["ph"] == "s":
            assert f["id"] in by_corr and ns(f["ts"]) == ns(rts[f["id"]]["ts"])
        elif f["id"] in by_corr:
            assert ns(f["ts"]) == ns(by_corr[f["id"]]["ts"]) and f["pid"] == by_corr[f["id"]]["pid"]
        else:
            assert f["id"] in rts and ns(f["ts"]) == ns(rts[f["id"]]["ts"])     # dangling end on the host
    # host ops, runtime calls and annotations nest (no partial overlap) on the host thread
    host = sorted((iv(e) for e in xs if e.get("cat") in op_cats | rt_cats | {"user_annotation"}),
                  key=lambda x: (x[0], -x[1]))
    open_ = []
    for a, b in host:
        while open_ and open_[-1] <= a:
            open_.pop()
        assert not open_ or b <= open_[-1], (truth["shape"], a, b, open_[-1])
        open_.append(b)


def write_gz(path, text):
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(text.encode())
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def main():
    m = build()
    for s in shapes():
        view = View(m, s["base_ns"], s["res"])
        path = os.path.join(HERE, f"{s['name']}.json.gz")
        text = render(m, s, view)
        json.loads(text)                      # every shape is valid JSON
        write_gz(path, text)
        truth = truth_for(m, s, view, path)
        read_back(text, truth)
        with open(os.path.join(HERE, f"{s['name']}.truth.json"), "w") as f:
            json.dump(truth, f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
