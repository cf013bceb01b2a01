#!/usr/bin/env python3
"""Synthetic CUDA training runs for the advice detectors, written in the shape of a
PyTorch 2.x Kineto trace (`tensorboard_trace_handler` JSON), with truth computed from the model.

    python3 samples/advice/generate_gpu.py     # rewrites samples/advice/gpu_*.json.gz + truth

This machine has no GPU, so the runs are modelled, in integer nanoseconds: the host ops of the
Python thread and of the autograd thread, the runtime calls they make, the device work those
calls queue (a stream runs one thing at a time, after its launch), and the Python frames around
them. Event shapes follow real torch 2.x CUDA traces: `cpu_op` / `cuda_runtime` / `kernel` /
`gpu_memcpy` categories, `ac2g` flows keyed by the CUPTI correlation id, builtin frames carrying
the user's `CallFrom` line, `deviceProperties` of an A100, autograd functions recorded under
their class names (`Broadcast`, `Scatter`, `Gather`).

- ``gpu_input_copies``: a conv net in fp32 on an A100 (TF32 kernels) that each step builds a
  noise tensor on the host (``torch.randn(shape).to(dev)``, train.py:33) and copies its batch
  from pageable memory with a blocking ``.to(dev)`` (train.py:34).
- ``gpu_clean``: the same net done the right way: noise made on the device, a pinned batch
  copied with ``non_blocking=True``, convolutions under bf16 autocast.
- ``gpu_data_parallel``: the clean net wrapped in ``nn.DataParallel`` over two GPUs.

Truth: findings.md's rules applied to the model (never to steplens): per step, the kinds
planted, their counts, call sites and lost time; every other detector's figure is asserted to
stay clear of its threshold. Standard library only; deterministic (fixed seed, gzip mtime 0).
"""

import gzip
import json
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
US = 1_000
PID, TID, BWD_TID = 3100, 3100, 3177
STEPS = [2, 3, 4, 5]
BASE_US = 5_811_402_120_000  # the host clock at the model's zero, µs

A100 = {"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42298834944, "computeMajor": 8,
        "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 167936, "numSms": 108, "sharedMemPerBlockOptin": 166912}

DL_NAME = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
K_FWD_TF32 = ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
              "warpsize2x2x1_g1_tensor16x8x8_kernel")
K_DGRAD_TF32 = "sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_kernel"
K_WGRAD_TF32 = "sm80_xmma_wgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_kernel"
K_FWD_BF16 = ("sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_"
              "warpsize2x2x1_g1_tensor16x8x16_kernel")
K_DGRAD_BF16 = "sm80_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel"
K_WGRAD_BF16 = "sm80_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel"
K_RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
          "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}"
          "::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >")
K_CAST = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
          "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>")
K_NORMAL = ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
            "at::native::templates::cuda::normal_and_transform<float, float>>")
K_LOSS = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>"
K_FOREACH = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
             "TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>>")
K_NCCL_BCAST = "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
K_NCCL_REDUCE = "ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
H2D_PAGEABLE = "Memcpy HtoD (Pageable -> Device)"
H2D_PINNED = "Memcpy HtoD (Pinned -> Device)"
P2P = "Memcpy PtoP (Device -> Device)"

NOISE = [64, 3, 32, 32]
BATCH = [64, 3, 64, 64]
# DataParallel's replicas are busier (the whole model's batch per GPU in this run)
DP_CONV_US = 300
CONV_SHAPES = [[64, 3, 64, 64], [64, 32, 64, 64], [64, 32, 64, 64]]


def union(iv):
    out = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def clip(iv, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in iv if min(e, hi) > max(s, lo)]


def total(iv):
    return sum(e - s for s, e in union(iv))


def subtract(a, b):
    out, b = [], union(b)
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


class Ev:
    def __init__(self, cat, name, tid, start, parent, args):
        self.cat, self.name, self.tid, self.start, self.end = cat, name, tid, start, None
        self.parent, self.args = parent, dict(args or {})
        self.corr = None


class Dev:
    def __init__(self, cat, name, device, start, end, rt, nbytes):
        self.cat, self.name, self.device, self.start, self.end = cat, name, device, start, end
        self.rt, self.bytes = rt, nbytes


class Model:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.host, self.dev = [], []
        self.stacks = {}
        self.ext = 0
        self.corr = 88000
        self.free = {}           # device -> when its stream 7 is free
        self.steps = []          # (name, start, end)

    def j(self, lo, hi):
        return self.rng.randint(lo * US, hi * US) + self.rng.randint(0, 999)

    def open(self, cat, name, tid, t, args=None):
        stack = self.stacks.setdefault(tid, [])
        ev = Ev(cat, name, tid, t, stack[-1] if stack else None, args)
        if cat in ("cpu_op", "user_annotation"):
            self.ext += 1
            ev.args = {"External id": self.ext, "Record function id": 0, **ev.args}
        self.host.append(ev)
        stack.append(ev)
        return ev

    def close(self, ev, t):
        stack = self.stacks[ev.tid]
        assert stack[-1] is ev, (ev.name, stack[-1].name)
        assert t >= ev.start
        ev.end = t
        stack.pop()
        return t

    def span(self, cat, name, tid, t, body=None, args=None, pre=(2, 4), post=(1, 3)):
        ev = self.open(cat, name, tid, t, args)
        t += self.j(*pre)
        if body:
            t = body(t)
        return self.close(ev, t + self.j(*post))

    def op(self, name, tid, t, body=None, shapes=None, types=None, **kw):
        args = {}
        if shapes is not None:
            args = {"Input Dims": shapes, "Input type": types or ["float"] * len(shapes)}
        return self.span("cpu_op", name, tid, t, body, args, **kw)

    def frame(self, name, call_from, tid, t, body):
        return self.span("python_function", name, tid, t, body, {"CallFrom": call_from}, pre=(1, 2), post=(1, 2))

    def runtime(self, name, tid, t, dur):
        rt = self.open("cuda_runtime", name, tid, t)
        self.corr += 1
        rt.corr = self.corr
        rt.args = {"cbid": 211 if name == "cudaLaunchKernel" else 41, "correlation": rt.corr}
        self.close(rt, t + dur)
        return rt

    def launch(self, tid, t, kname, dur_ns, device=0):
        rt = self.runtime("cudaLaunchKernel", tid, t, self.j(4, 7))
        ks = max(rt.end + self.j(2, 6), self.free.get(device, 0) + self.rng.randint(1_000, 2_000))
        self.dev.append(Dev("kernel", kname, device, ks, ks + dur_ns, rt, None))
        self.free[device] = ks + dur_ns
        return rt.end

    def memcpy(self, tid, t, name, nbytes, dur_ns, device=0):
        rt = self.runtime("cudaMemcpyAsync", tid, t, self.j(8, 12))
        cs = max(rt.start + self.j(4, 6), self.free.get(device, 0) + self.rng.randint(1_000, 2_000))
        self.dev.append(Dev("gpu_memcpy", name, device, cs, cs + dur_ns, rt, nbytes))
        self.free[device] = cs + dur_ns
        return rt.end

    def sync(self, tid, t, device=0):
        rt = self.runtime("cudaStreamSynchronize", tid, t, self.j(2, 3))
        rt.end = max(rt.end, self.free.get(device, 0) + self.j(2, 4))
        return rt.end


# ---------------------------------------------------------------------------------- the runs
def to_device(m, t, line, shape, copy_us, pageable):
    """x.to(dev) at train.py:<line>: aten::to > aten::_to_copy > empty_strided, copy_ > memcpy."""
    nbytes = 4
    for d in shape:
        nbytes *= d
    def copy_(t):
        if pageable:
            # a blocking copy from pageable memory: cudaMemcpyAsync, then the stream sync of
            # copy_'s non_blocking=False path
            t = m.memcpy(TID, t + m.j(2, 4), H2D_PAGEABLE, nbytes, copy_us * US + m.rng.randint(0, 9_000))
            return m.sync(TID, t + m.j(1, 2))
        return m.memcpy(TID, t + m.j(2, 4), H2D_PINNED, nbytes, copy_us * US // 2 + m.rng.randint(0, 9_000))

    def to_copy(t):
        t = m.op("aten::empty_strided", TID, t)
        return m.op("aten::copy_", TID, t + 1_000, copy_)

    return m.frame("<built-in method to of Tensor object at 0x7f1c2a3b5e40>", f"train.py:{line}", TID, t,
                   lambda t: m.op("aten::to", TID, t, lambda t: m.op("aten::_to_copy", TID, t, to_copy),
                                  shapes=[shape], types=["float"]))


def conv_layer(m, t, i, bf16, device=0, tid=TID, dur_us=None):
    """conv2d (+ relu) at model.py:<12+2i>, fp32 (TF32 kernels) or under bf16 autocast."""
    shape = CONV_SHAPES[i]
    kt = ["c10::BFloat16"] * 3 if bf16 else ["float"] * 3
    dur = (dur_us or conv_us(bf16)) * US

    def cudnn(t):
        return m.launch(tid, t + m.j(3, 5), K_FWD_BF16 if bf16 else K_FWD_TF32, dur + m.rng.randint(0, 20_000),
                        device)

    def conv(t):
        if bf16:
            # autocast casts the fp32 input and weight, then runs the bf16 convolution
            t = m.op("aten::to", tid, t, lambda t: m.op("aten::_to_copy", tid, t, lambda t: m.launch(
                tid, t + 2_000, K_CAST, 6 * US, device)), shapes=[shape], types=["float"])
        return m.op("aten::convolution", tid, t, lambda t: m.op("aten::_convolution", tid, t, lambda t: m.op(
            "aten::cudnn_convolution", tid, t, cudnn, shapes=[shape, [32, shape[1], 3, 3], []], types=kt),
            shapes=[shape, [32, shape[1], 3, 3], []], types=kt), shapes=[shape, [32, shape[1], 3, 3], []],
            types=kt)

    t = m.frame("<built-in method conv2d of type object at 0x7f1c4d1e2f00>", f"model.py:{12 + 2 * i}", tid, t,
                lambda t: m.op("aten::conv2d", tid, t, conv, shapes=[shape, [32, shape[1], 3, 3], [32]]))
    out = [64, 32, 64, 64]
    return m.frame("<built-in method relu of type object at 0x7f1c4d1e2f00>", f"model.py:{13 + 2 * i}", tid,
                   t + m.j(20, 30), lambda t: m.op("aten::relu", tid, t, lambda t: m.op(
                       "aten::clamp_min", tid, t, lambda t: m.launch(tid, t + 2_000, K_RELU, 38 * US, device),
                       shapes=[out, []]), shapes=[out]))


def randn(m, t, shape, fill, pre=(2, 4)):
    """torch.randn(shape): aten::randn > aten::empty, aten::normal_ (its size in Concrete Inputs)."""
    size = "[" + ", ".join(str(d) for d in shape) + "]"
    return m.span("cpu_op", "aten::randn", TID, t, lambda t: m.op("aten::normal_", TID, m.op("aten::empty", TID, t),
                                                                   fill), {"Input Dims": [[], [], [], [], [], []],
                  "Input type": ["ScalarList", "", "", "", "", ""], "Concrete Inputs": [size, "", "", "", "", ""]},
                  pre=pre)


def conv_us(bf16):
    """A convolution kernel's time: bf16 runs at twice the TF32 rate."""
    return 130 if bf16 else 260


def backward(m, t, bf16, devices=(0,), dur_us=None):
    """loss.backward() at train.py:38: run_backward on the main thread, the autograd engine's
    nodes on its own thread, three ConvolutionBackward0 (dgrad + wgrad)."""
    def engine(t):
        t0 = t
        bt = t + m.j(8, 12)
        for device in devices:
            for i in reversed(range(3)):
                shape = CONV_SHAPES[i]
                kt = ["c10::BFloat16"] * 3 if bf16 else ["float"] * 3
                dur = (dur_us or conv_us(bf16)) * US

                def node(t, device=device, shape=shape, kt=kt, dur=dur):
                    def cb(t):
                        t = m.launch(BWD_TID, t + m.j(3, 5), K_DGRAD_BF16 if bf16 else K_DGRAD_TF32,
                                     dur + m.rng.randint(0, 20_000), device)
                        return m.launch(BWD_TID, t + m.j(3, 5), K_WGRAD_BF16 if bf16 else K_WGRAD_TF32,
                                        dur + m.rng.randint(0, 20_000), device)
                    return m.op("ConvolutionBackward0", BWD_TID, t, lambda t: m.op(
                        "aten::convolution_backward", BWD_TID, t, cb, shapes=[[64, 32, 64, 64], shape,
                                                                              [32, shape[1], 3, 3]], types=kt))
                bt = m.op("autograd::engine::evaluate_function: ConvolutionBackward0", BWD_TID, bt + m.j(6, 10),
                          node)
        return max(t0, bt) + m.j(10, 15)
    return m.frame("<built-in method run_backward of torch._C._EngineBase object at 0x7f1c5e0a1b20>",
                   "torch/autograd/graph.py:829", TID, t, engine)


def optimizer(m, t, devices=(0,)):
    """opt.step() at train.py:39: AdamW with foreach (multi-tensor kernels, one per op)."""
    def body(t):
        for name in ("aten::_foreach_mul_", "aten::_foreach_lerp_", "aten::_foreach_addcmul_",
                     "aten::_foreach_sqrt", "aten::_foreach_addcdiv_"):
            for device in devices:
                t = m.op(name, TID, t + m.j(4, 6), lambda t, d=device: m.launch(TID, t + 2_000, K_FOREACH,
                                                                                 24 * US, d))
        return t
    t = m.span("user_annotation", "Optimizer.step#AdamW.step", TID, t, body)
    return m.span("user_annotation", "Optimizer.zero_grad#AdamW.zero_grad", TID, t + m.j(6, 9))


def loss(m, t, device=0):
    return m.frame("<built-in method mse_loss of PyCapsule object at 0x7f1c4d2a9c30>", "train.py:37", TID, t,
                   lambda t: m.op("aten::mse_loss", TID, t, lambda t: m.launch(TID, t + 2_000, K_LOSS, 12 * US,
                                                                                device),
                                  shapes=[[64, 32, 64, 64], [64, 32, 64, 64]]))


def dataloader(m, t):
    return m.span("user_annotation", DL_NAME, TID, t, lambda t: m.op("aten::stack", TID, t + m.j(20, 30),
                                                                      pre=(40, 60)))


def warmup_tail(m, t, devices, bf16, dur_us=None):
    """The warm-up step's last kernels, still running when the capture starts; their launches
    were before it, so they come without a runtime call or flow (as Kineto writes them)."""
    for device in devices:
        k = t
        for name in ((K_DGRAD_BF16, K_WGRAD_BF16) if bf16 else (K_DGRAD_TF32, K_WGRAD_TF32)) * 2:
            d = (dur_us or conv_us(bf16)) * US
            m.dev.append(Dev("kernel", name, device, k, k + d, None, None))
            k += d + 1_500
        m.free[device] = k


def training_loop(m, train_step):
    """The profiled loop on the main thread: per step `ProfilerStep#N`, the DataLoader's next
    batch, then `train_step(t)` inside its frame; the profiler drains the device at the end."""
    t = 200 * US
    main = m.open("python_function", "train.py(58): main", TID, t, {"CallFrom": "train.py:80"})
    t += 5 * US
    for n in STEPS:
        S = t
        step = m.open("user_annotation", f"ProfilerStep#{n}", TID, S)
        t = dataloader(m, t + m.j(5, 8))
        t = m.frame("train.py(30): train_step", "train.py:64", TID, t + m.j(3, 5), train_step)
        t = m.close(step, t + m.j(4, 6))
        m.steps.append((step.name, S, t))
        t += m.j(2, 3)
    m.close(main, t + 10 * US)
    # the profiler drains the device when the capture stops
    m.sync(TID, t + 20 * US)
    return m


def run_single(seed, mistakes):
    m = Model(seed)
    warmup_tail(m, 50 * US, [0], bf16=not mistakes)

    def train_step(t):
        if mistakes:
            # noise = torch.randn(x.shape).to(dev): made on the host, then a blocking copy
            t = m.frame("<built-in method randn of type object at 0x7f1c4d1e2f00>", "train.py:33", TID, t,
                        lambda t: randn(m, t, NOISE, pre=(2, 3), fill=lambda t: t + m.j(30, 40)))
            t = to_device(m, t + m.j(2, 4), 33, NOISE, 70, pageable=True)
            t = to_device(m, t + m.j(3, 5), 34, BATCH, 260, pageable=True)
        else:
            # noise = torch.randn(x.shape, device=dev); x = x.to(dev, non_blocking=True)
            t = m.frame("<built-in method randn of type object at 0x7f1c4d1e2f00>", "train.py:33", TID, t,
                        lambda t: randn(m, t, NOISE, fill=lambda t: m.launch(TID, t + 2_000, K_NORMAL, 9 * US)))
            t = to_device(m, t + m.j(3, 5), 34, BATCH, 260, pageable=False)
        t = m.frame("train.py(20): forward", "torch/nn/modules/module.py:1786", TID, t + m.j(10, 14),
                    lambda t: conv_layer(m, conv_layer(m, conv_layer(m, t, 0, not mistakes) + m.j(15, 25),
                                                       1, not mistakes) + m.j(15, 25), 2, not mistakes))
        t = loss(m, t + m.j(8, 12))
        t = backward(m, t + m.j(5, 8), bf16=not mistakes)
        return optimizer(m, t + m.j(6, 10))
    return training_loop(m, train_step)


def run_data_parallel(seed):
    """nn.DataParallel(net, device_ids=[0, 1]) at train.py:35, bf16 autocast, a pinned batch."""
    m = Model(seed)
    warmup_tail(m, 50 * US, [0, 1], bf16=True, dur_us=DP_CONV_US)
    rep_tids = {0: 3203, 1: 3204}

    def train_step(t):
        t = to_device(m, t, 34, BATCH, 260, pageable=False)

        def dp_forward(t):
            # scatter: the batch split over the two GPUs (Scatter.apply)
            t = m.frame("torch/nn/parallel/data_parallel.py(200): scatter", "torch/nn/parallel/data_parallel.py:187",
                        TID, t, lambda t: m.op("Scatter", TID, t, lambda t: m.op(
                            "aten::to", TID, m.op("aten::chunk", TID, t),
                            lambda t: m.memcpy(TID, t + 2_000, P2P, 1_572_864, 70 * US, device=1)),
                            pre=(20, 30)))
            # replicate: parameters and buffers broadcast to each GPU (Broadcast.apply)
            t = m.frame("torch/nn/parallel/replicate.py(110): replicate", "torch/nn/parallel/data_parallel.py:195",
                        TID, t + m.j(5, 8), lambda t: m.op("Broadcast", TID, t, lambda t: m.launch(
                            TID, m.launch(TID, t + 5_000, K_NCCL_BCAST, 60 * US, 0) + 2_000, K_NCCL_BCAST,
                            60 * US, 1), pre=(90, 120)))

            # parallel_apply: one Python thread per replica
            def replicas(t):
                ends = []
                for d, tid in rep_tids.items():
                    rt = t + m.j(20, 40)
                    rt = conv_layer(m, rt, 0, True, d, tid, DP_CONV_US)
                    rt = conv_layer(m, rt + m.j(15, 25), 1, True, d, tid, DP_CONV_US)
                    rt = conv_layer(m, rt + m.j(15, 25), 2, True, d, tid, DP_CONV_US)
                    ends.append(rt)
                return max(ends) + m.j(30, 50)
            t = m.frame("torch/nn/parallel/parallel_apply.py(46): parallel_apply",
                        "torch/nn/parallel/data_parallel.py:196", TID, t + m.j(5, 8), replicas)
            # gather: outputs copied to GPU 0 (Gather.apply)
            return m.frame("torch/nn/parallel/data_parallel.py(213): gather", "torch/nn/parallel/data_parallel.py:197",
                           TID, t + m.j(5, 8), lambda t: m.op("Gather", TID, t, lambda t: m.op(
                               "aten::cat", TID, t, lambda t: m.memcpy(TID, t + 2_000, P2P, 1_572_864, 70 * US,
                                                                       device=0)), pre=(20, 30)))
        t = m.frame("torch/nn/modules/module.py(1775): _call_impl", "train.py:36", TID, t + m.j(10, 14),
                    lambda t: m.frame("torch/nn/parallel/data_parallel.py(183): forward",
                                      "torch/nn/modules/module.py:1786", TID, t, dp_forward))
        t = loss(m, t + m.j(8, 12))
        t = backward(m, t + m.j(5, 8), bf16=True, devices=(0, 1), dur_us=DP_CONV_US)
        return optimizer(m, t + m.j(6, 10), devices=(0,))
    return training_loop(m, train_step)


# ---------------------------------------------------------------------------------- the truth
def ancestors(ev):
    p = ev.parent
    while p is not None:
        yield p
        p = p.parent


def outermost_op(ev):
    ops = [a for a in [ev] + list(ancestors(ev)) if a.cat == "cpu_op"]
    return ops[-1] if ops else None


# bf16 takes this share off a TF32 GEMM on an A100: 1 - 134 / 271 TFLOP/s, the rates large
# GEMMs reach there (docs/research/device-rates.md; findings.md, no_mixed_precision).
A100_TF32_SAVED = 1.0 - 134.0 / 271.0


def device_windows(m):
    """Each step as the device lived it (report-schema.md, Step): from its host start (or the
    previous step's end, when later) to the later of its host end and the end of the device
    work that runtime calls wholly inside its host range launched; the first step starts after
    launched work outside every step that ends before the first step's own device work."""
    launched = []
    for _, S, E in m.steps:
        launched.append([d for d in m.dev if d.rt is not None and S <= d.rt.start and d.rt.end <= E])
    prev = m.steps[0][1]
    if launched[0]:
        first = min(d.start for d in launched[0])
        inside = {id(d) for ds in launched for d in ds}
        for d in m.dev:
            if d.rt is not None and id(d) not in inside and d.end < first:
                prev = max(prev, d.end)
    out = []
    for (sname, S, E), ds in zip(m.steps, launched):
        start = max(prev, S)
        end = max(E, max((d.end for d in ds), default=E), start)
        out.append((start, end))
        prev = end
    return out


def truth(m, name):
    """findings.md's rules on the model."""
    dev_iv = [(d.start, d.end) for d in m.dev]
    # host-to-device copies: the outermost op of each memcpy's launch; the kind that owns it
    copies = {}
    for d in m.dev:
        if "HtoD" not in d.name or d.rt is None:
            continue
        op = outermost_op(d.rt)
        copies.setdefault(id(op), {"op": op, "memcpys": [], "syncs": []})["memcpys"].append(d)
    for c in copies.values():
        op = c["op"]
        # findings.md: the copy owns its synchronizes from the moment its memcpy started on the
        # device; before that the host waited for work queued earlier (a sync's cost)
        copy_start = min(d.start for d in c["memcpys"])
        syncs = [h for h in m.host if h.cat == "cuda_runtime"
                 and h.name == "cudaStreamSynchronize" and op in ancestors(h)]
        c["syncs"] = [(max(h.start, copy_start), h.end) for h in syncs if h.end > copy_start]
        c["waits"] = [(h.start, min(h.end, copy_start)) for h in syncs if h.start < copy_start]
        prev = [h for h in m.host if h.tid == op.tid and h.cat == "cpu_op" and outermost_op(h) is h
                and h.end <= op.start]
        made = max(prev, key=lambda h: h.end) if prev else None
        # a factory that launched nothing made its tensor on the host
        host_made = made is not None and made.name == "aten::randn" and not any(
            made in ancestors(d.rt) for d in m.dev if d.rt)
        c["kind"] = ("host_created_tensor" if host_made
                     else "pageable_copy" if any("Pageable" in d.name for d in c["memcpys"]) else None)
        c["site"] = [h for h in ancestors(op) if h.cat == "python_function"][0].args["CallFrom"]
    claimed = [d for c in copies.values() if c["kind"] for d in c["memcpys"]]
    other_dev = [(d.start, d.end) for d in m.dev if d not in claimed]
    blocking = [(h.start, h.end) for h in m.host if h.cat == "cuda_runtime" and h.name == "cudaStreamSynchronize"]
    outer_work = [(h.start, h.end) for h in m.host if h.cat in ("cpu_op", "cuda_runtime")
                  and (outermost_op(h) is h or (h.cat == "cuda_runtime" and outermost_op(h) is None))]
    dls = [(h.start, h.end) for h in m.host if h.name == DL_NAME]
    steps, expected = [], []
    for (sname, S, E), (WS, WE) in zip(m.steps, device_windows(m)):
        dur = E - S
        # what earlier kinds own in this step (findings.md's owner order): first sync_point's
        # part of the copies' synchronizes, their wait for work queued before the copy
        owned = clip(union([w for c in copies.values() if c["kind"] and S <= c["op"].start < E
                            for w in c["waits"]]), WS, WE)
        figures = {"name": sname, "start_ns": S, "dur_ns": dur, "device_start_ns": WS,
                   "device_dur_ns": WE - WS}
        for kind in ("host_created_tensor", "pageable_copy"):
            mine = [c for c in copies.values() if c["kind"] == kind and S <= c["op"].start < E]
            if not mine:
                continue
            ranges = []
            for c in mine:
                ranges += subtract([(d.start, d.end) for d in c["memcpys"]], other_dev) + c["syncs"]
            # the cost inside the step's device-inclusive window: the host ran ahead of a
            # device-bound step, and a wait before the window is the step before's device time
            ranges = subtract(clip(union(ranges), WS, WE), owned)
            lost = total(ranges)
            owned = union(owned + ranges)
            if lost < 20 * US or lost * 100 < WE - WS:
                continue       # findings.md, materiality
            sites = sorted({c["site"] for c in mine})
            assert len(sites) == 1
            expected.append({"kind": kind, "step": sname, "count": len(mine), "call_site": sites[0],
                             "lost_ns": lost})
        # DataParallel's machinery: outermost Broadcast/Scatter/Gather ops (a pattern finding)
        dp = [h for h in m.host if h.name in ("Broadcast", "Scatter", "Gather") and outermost_op(h) is h
              and S <= h.start < E]
        if dp:
            ranges = subtract(clip(union([(h.start, h.end) for h in dp]), WS, WE), owned)
            owned = union(owned + ranges)
            frames = [h for h in m.host if h.name.startswith("torch/nn/parallel/data_parallel.py(")
                      and h.name.endswith(": forward") and S <= h.start < E]
            expected.append({"kind": "data_parallel", "step": sname, "count": len(frames), "lost_ns": total(ranges)})
        # fp32 matrix kernels starting in the step's device-inclusive window (the TF32
        # convolution kernels); bf16 takes A100_TF32_SAVED of each, as its first part
        fp32 = [d for d in m.dev if "tf32" in d.name and WS <= d.start < WE]
        in_window = [(max(d.start, WS), max(min(d.end, WE), max(d.start, WS))) for d in fp32]
        fp32_ns = total(union(in_window))
        figures["fp32_matrix_ns"] = fp32_ns
        if fp32:
            assert fp32_ns * 100 >= 15 * (WE - WS), (name, sname, fp32_ns, WE - WS)
            # round half away from zero on the float product, as Rust's f64::round
            halves = union([(a, a + int(math.floor((b - a) * A100_TF32_SAVED + 0.5))) for a, b in in_window])
            # a kernel whose launch is before the capture counts as itself
            launching = {id([a for a in ancestors(d.rt) if a.cat == "cpu_op"][0]) if d.rt else id(d) for d in fp32}
            expected.append({"kind": "no_mixed_precision", "step": sname, "count": len(launching),
                             "fp32_matrix_ns": fp32_ns, "lost_ns": total(subtract(halves, owned))})
        else:
            assert fp32_ns == 0
        # other detectors stay clear of their thresholds: host-bound idle (device-idle gaps of
        # >= 50 µs, op work in them outside the data loader and blocking syncs) < 4 % of the step;
        # data-loader time with the device idle < 1 ms
        gaps = [g for g in subtract([(S, E)], dev_iv) if g[1] - g[0] >= 50 * US]
        in_gaps = subtract(gaps, subtract(gaps, outer_work))
        host_bound = total(subtract(in_gaps, dls + blocking))
        figures["host_bound_idle_ns"] = host_bound
        assert host_bound * 100 < 4 * dur, (name, sname, host_bound, dur)
        dl_idle = total(subtract(clip(dls, S, E), dev_iv))
        figures["dataloader_device_idle_ns"] = dl_idle
        assert dl_idle < 1_000 * US
        steps.append(figures)
    return {"trace": f"{name}.json.gz", "generator": "samples/advice/generate_gpu.py",
            "device": {"kind": "cuda", "name": A100["name"], "compute_capability": "8.0"},
            "rules": ("findings.md applied to the model, steps device-inclusive (report-schema.md): "
                      "host_created_tensor / pageable_copy per step and call site, "
                      "lost = memcpy time with no other device work + the copy's own stream syncs, inside the step's "
                      "device-inclusive window (material: >= 20 us and 1 % of it); "
                      "data_parallel per step, count = DataParallel.forward frames, lost = host time of the "
                      "outermost Broadcast/Scatter/Gather ops inside that window; no_mixed_precision per step, fp32 (TF32) matrix "
                      "kernels starting in the step's device-inclusive window, count = launching ops (a kernel launched "
                      "before the capture: itself), lost = the first 1 - 134/271 (A100 TF32 vs bf16 GEMM rates) of "
                      "each kernel inside the window, less what the copies own (owner order)"),
            "steps": steps, "expected_findings": expected}


# ---------------------------------------------------------------------------------- the writer
def us(t):
    return round(BASE_US + t / 1000, 3)


def render(m, devices):
    out, flows = [], []
    for h in sorted(m.host, key=lambda h: (h.tid, h.start, -h.end)):
        ev = {"ph": "X", "cat": h.cat, "name": h.name, "pid": PID, "tid": h.tid, "ts": us(h.start),
              "dur": round((h.end - h.start) / 1000, 3), "args": h.args}
        out.append(ev)
        if h.corr is not None and any(d.rt is h for d in m.dev):
            flows.append({"ph": "s", "id": h.corr, "pid": PID, "tid": h.tid, "ts": us(h.start), "cat": "ac2g",
                          "name": "ac2g"})
    for d in sorted(m.dev, key=lambda d: (d.device, d.start)):
        launcher = outermost_op(d.rt) if d.rt else None
        args = {"External id": launcher.args["External id"] if launcher else 0,
                "device": d.device, "context": 1, "stream": 7,
                "correlation": d.rt.corr if d.rt else 87000 + m.dev.index(d)}
        if d.bytes is not None:
            args["bytes"] = d.bytes
            args["memory bandwidth (GB/s)"] = round(d.bytes / (d.end - d.start), 4)
        out.append({"ph": "X", "cat": d.cat, "name": d.name, "pid": d.device, "tid": 7, "ts": us(d.start),
                    "dur": round((d.end - d.start) / 1000, 3), "args": args})
        if d.rt is None:
            continue
        flows.append({"ph": "f", "id": d.rt.corr, "pid": d.device, "tid": 7, "ts": us(d.start), "cat": "ac2g",
                      "name": "ac2g", "bp": "e"})
    meta = [{"name": "process_name", "ph": "M", "ts": us(0), "pid": PID, "tid": 0, "args": {"name": "python3"}},
            {"name": "process_labels", "ph": "M", "ts": us(0), "pid": PID, "tid": 0, "args": {"labels": "CPU"}}]
    for tid in sorted({h.tid for h in m.host}):
        meta.append({"name": "thread_name", "ph": "M", "ts": us(0), "pid": PID, "tid": tid,
                     "args": {"name": f"thread {tid} (python3)"}})
    for d in devices:
        meta += [{"name": "process_name", "ph": "M", "ts": us(0), "pid": d, "tid": 0, "args": {"name": "python3"}},
                 {"name": "process_labels", "ph": "M", "ts": us(0), "pid": d, "tid": 0, "args": {"labels": f"GPU {d}"}},
                 {"name": "thread_name", "ph": "M", "ts": us(0), "pid": d, "tid": 7, "args": {"name": "stream 7"}}]
    props = [dict(A100, id=d) for d in devices]
    return {"schemaVersion": 1, "deviceProperties": props, "with_stack": 1, "record_shapes": 1,
            "trace_id": "5B0E2D7C9A1F4E3B8C6D0A2F4E6B8D10", "displayTimeUnit": "ms",
            "baseTimeNanoseconds": 1795000000000000000, "traceEvents": out + flows + meta,
            "traceName": "/home/user/proj/log/gpu-node-03_3100.1795000000123456789.pt.trace.json"}


def write(name, m, devices):
    path = os.path.join(HERE, f"{name}.json.gz")
    text = json.dumps(render(m, devices), separators=(",", ":"))
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(text.encode())
    with open(os.path.join(HERE, f"{name}.truth.json"), "w") as f:
        json.dump(truth(m, name), f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    write("gpu_input_copies", run_single(7, mistakes=True), [0])
    write("gpu_clean", run_single(7, mistakes=False), [0])
    write("gpu_data_parallel", run_data_parallel(11), [0, 1])
    print("done")
