"""Modelled 4-GPU NCCL DDP runs in the shape torch 2.x Kineto writes.

This machine has no GPU, so these traces are written from a schedule, event by event, the way
a real CUDA run's trace looks (compare ``hta/nccl_parser_config`` in the corpus): per rank one
file with ``distributedInfo`` (backend nccl, rank, world size, process group config) and
``deviceProperties`` (A100); the host thread's ``ProfilerStep#N``, ``aten::`` ops,
``cudaLaunchKernel`` with ``ac2g`` flows to the kernels; bf16 GEMM kernels on stream 7; DDP's
gradient buckets as ``record_param_comms`` (with ``Collective name``, ``In msg nelems``,
``dtype``, ``Group size``, ``Process Group Name/Ranks``) around ``nccl:all_reduce`` around the
launch of ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` on stream 20, whose args repeat the
collective's; a ``loss.item()`` per step (``cudaMemcpyAsync`` D2H + ``cudaStreamSynchronize``).

The schedule: a bucket's all-reduce kernel starts on a rank when its launch has happened and
the bucket's last gradient kernel has finished on that rank's compute stream; it ends on every
rank at the same moment, the latest start over the ranks plus the transfer time of the bucket
(the ring's latency). The optimizer's kernels wait for the last all-reduce.

- ``nccl_balanced/nccl_balanced_rank{0..3}``: identical GPUs (launch gaps differ by a few µs per rank).
- ``nccl_straggler/nccl_straggler_rank{0..3}``: rank 2's GPU runs every GEMM 30 % slower (a throttled card).

The truth files are the schedule's own figures, not read back from the traces by steplens'
rules: per rank the extra GEMM time per step, each rank's wait per step (latest start − its
start, summed over the step's all-reduces), the transfer time (the shortest all-reduce
duration), the bucket size in bytes and the ring's bus bandwidth (bytes × 2(n−1)/n / time).

Usage: python3 samples/ranks/generate_nccl.py   (no torch needed; deterministic)
"""

import gzip
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 4
STEPS = 6
FIRST_STEP = 2  # ProfilerStep#2.. (wait=1, warmup=1 before them)
LAYERS = 6
BUCKETS = [(5, 4), (3, 2), (1, 0)]  # layers whose gradients fill each bucket, in ready order
NELEMS = 6_553_600  # 25 MiB of fp32 per bucket (DDP's default bucket_cap_mb)
TRANSFER_US = 1_400  # ring all-reduce of 25 MiB on 4 GPUs over PCIe, µs
FWD_GEMM_US = 700
BWD_GEMM_US = 650  # each of dgrad and wgrad
SLOW = 1.30
GEMM = "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add"
               "<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add"
               "<c10::BFloat16>, at::detail::Array<char*, 3>)")
COMPUTE_STREAM = 7
NCCL_STREAM = 20
BASE_US = 1_732_000_000_000_000 // 1000  # a wall-clock epoch in µs, as Kineto writes


class Rank:
    """One rank's trace under construction: events, ids and its streams' free times."""

    def __init__(self, rank, slow, rng):
        self.rank = rank
        self.slow = slow
        self.rng = rng
        self.pid = 41_000 + rank
        self.tid = 41_000 + rank
        self.events = []
        self.ext = 100
        self.corr = 5_000
        self.stream_free = {COMPUTE_STREAM: 0, NCCL_STREAM: 0}
        self.gemm_extra_us = 0

    def op(self, name, ts, dur, cat="cpu_op", **args):
        self.ext += 1
        event = {"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": self.tid,
                 "ts": ts, "dur": dur, "args": {"External id": self.ext, **args}}
        self.events.append(event)
        return event

    def launch(self, name, ts, kernel_dur, stream, not_before=0, kernel_args=None,
               runtime="cudaLaunchKernel", ext=None):
        """A runtime call at ``ts`` (8 µs) and its kernel queued on ``stream``; returns the
        kernel's (start, end)."""
        self.corr += 1
        corr = self.corr
        ext = self.ext if ext is None else ext
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": runtime, "pid": self.pid,
                            "tid": self.tid, "ts": ts, "dur": 8,
                            "args": {"External id": ext, "cbid": 211, "correlation": corr}})
        start = max(ts + 6, self.stream_free[stream], not_before)
        self.stream_free[stream] = start + kernel_dur
        args = {"External id": ext, "queued": 0, "device": self.rank, "context": 1,
                "stream": stream, "correlation": corr, "registers per thread": 168,
                "shared memory": 73728, "grid": [132, 1, 1], "block": [256, 1, 1]}
        args.update(kernel_args or {})
        self.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": self.rank,
                            "tid": stream, "ts": start, "dur": kernel_dur, "args": args})
        self.events.append({"ph": "s", "id": corr, "pid": self.pid, "tid": self.tid, "ts": ts,
                            "cat": "ac2g", "name": "ac2g"})
        self.events.append({"ph": "f", "id": corr, "pid": self.rank, "tid": stream, "ts": start,
                            "cat": "ac2g", "name": "ac2g", "bp": "e"})
        return start, start + kernel_dur

    def gemm(self, base_us):
        dur = round(base_us * self.slow)
        self.gemm_extra_us += dur - base_us
        return dur

    def jitter(self):
        return self.rng.randint(0, 6)


COMM_ARGS = {"Collective name": "allreduce", "In msg nelems": NELEMS, "Out msg nelems": NELEMS,
             "Group size": WORLD, "dtype": "Float", "In split size": "[]",
             "Out split size": "[]", "Process Group Name": "0",
             "Process Group Description": "default_pg",
             "Process Group Ranks": str(list(range(WORLD)))}


def host_phase(r, t, bucket_launch):
    """The host side of one step from ``t`` up to the all-reduce launches: forward, loss and
    backward ops with their kernels; ``bucket_launch(b, t, ready)`` is called when bucket ``b``
    is ready on the host at ``t`` with its gradients done on the device at ``ready``. Returns
    the host time after backward."""
    for layer in range(LAYERS):
        linear = r.op("aten::linear", t, 60, **{"Input type": ["c10::BFloat16"] * 3,
                                                 "Input Dims": [[4096, 4096], [4096, 4096],
                                                                [4096]]})
        r.op("aten::addmm", t + 10, 40, **{"Input type": ["c10::BFloat16"] * 3,
                                           "Input Dims": [[4096], [4096, 4096], [4096, 4096]]})
        r.launch(GEMM, t + 20, r.gemm(FWD_GEMM_US), COMPUTE_STREAM)
        t = linear["ts"] + linear["dur"] + 15 + r.jitter()
    r.op("aten::cross_entropy_loss", t, 50)
    r.launch(ELEMENTWISE, t + 20, 30, COMPUTE_STREAM)
    t += 70
    r.op("aten::ones_like", t, 20)
    r.launch(ELEMENTWISE, t + 5, 5, COMPUTE_STREAM)
    t += 40
    for layer in reversed(range(LAYERS)):
        fn = r.op("autograd::engine::evaluate_function: AddmmBackward0", t, 120, cat="cpu_op")
        r.op("AddmmBackward0", t + 5, 105)
        r.op("aten::mm", t + 10, 40)
        r.launch(GEMM, t + 25, r.gemm(BWD_GEMM_US), COMPUTE_STREAM)
        r.op("aten::mm", t + 60, 40)
        _, done = r.launch(GEMM, t + 75, r.gemm(BWD_GEMM_US), COMPUTE_STREAM)
        t = fn["ts"] + fn["dur"] + 10 + r.jitter()
        for b, layers in enumerate(BUCKETS):
            if layer == layers[-1]:
                t = bucket_launch(b, t, done)
    return t


def main():
    for variant, slow_rank in (("nccl_balanced", None), ("nccl_straggler", 2)):
        rng = random.Random(7)
        ranks = [Rank(i, SLOW if i == slow_rank else 1.0, random.Random(100 + i + 10 * (slow_rank or 0)))
                 for i in range(WORLD)]
        start = BASE_US
        truth_steps = []
        step_starts = [start] * WORLD
        for step in range(FIRST_STEP, FIRST_STEP + STEPS):
            # Each rank runs its host phase up to each bucket's launch; the all-reduce kernel
            # of a bucket ends on every rank at (latest start + transfer). Ranks are scheduled
            # bucket by bucket, so the host phases are run as generators.
            launches = [[None] * len(BUCKETS) for _ in ranks]
            ends = {}

            def make_launcher(i):
                r = ranks[i]

                def bucket_launch(b, t, ready):
                    rec = r.op("record_param_comms", t, 40, **COMM_ARGS)
                    r.op("nccl:all_reduce", t + 5, 30, cat="user_annotation")
                    launches[i][b] = (r, t + 12, ready, rec)
                    return t + 50
                return bucket_launch

            host_end = []
            for i, r in enumerate(ranks):
                t0 = step_starts[i]
                r.step_event = r.op(f"ProfilerStep#{step}", t0, 0, cat="user_annotation")
                r.events.pop()  # re-added with its duration once the step is known
                r.step_t0 = t0
                host_end.append(host_phase(r, t0 + 20 + rng.randint(0, 3), make_launcher(i)))
            # The all-reduces, bucket by bucket, on every rank.
            waits = [0] * WORLD
            starts_per_bucket = []
            for b in range(len(BUCKETS)):
                starts = []
                for i, r in enumerate(ranks):
                    _, launch_ts, ready, _ = launches[i][b]
                    starts.append(max(launch_ts + 6, r.stream_free[NCCL_STREAM], ready))
                end = max(starts) + TRANSFER_US
                for i, r in enumerate(ranks):
                    waits[i] += max(starts) - starts[i]
                    _, launch_ts, ready, _ = launches[i][b]
                    r.stream_free[NCCL_STREAM] = 0
                    s, e = r.launch(NCCL, launch_ts, end - starts[i], NCCL_STREAM,
                                    not_before=max(ready, starts[i]), kernel_args=COMM_ARGS,
                                    ext=launches[i][b][3]["args"]["External id"] + 1)
                    assert s == starts[i] and e == end, (s, starts[i], e, end)
                ends[b] = end
                starts_per_bucket.append(starts)
            # Optimizer (waits for the last all-reduce on the compute stream) and loss.item().
            step_ends = []
            for i, r in enumerate(ranks):
                t = host_end[i] + 10
                r.op("Optimizer.step#AdamW.step", t, 120)
                r.op("aten::_fused_adamw_", t + 20, 80)
                r.stream_free[COMPUTE_STREAM] = max(r.stream_free[COMPUTE_STREAM], ends[2])
                _, opt_end = r.launch("void at::native::(anonymous namespace)::fused_adamw_kernel"
                                      "<c10::BFloat16>(...)", t + 40, 180, COMPUTE_STREAM)
                t += 140
                item = r.op("aten::item", t, 0)
                dense = r.op("aten::_local_scalar_dense", t + 5, 0)
                _, copy_end = r.launch("Memcpy DtoH (Device -> Pageable)", t + 10, 3,
                                       COMPUTE_STREAM, runtime="cudaMemcpyAsync")
                r.events[-3]["cat"] = "gpu_memcpy"
                sync_start = t + 20
                sync_end = max(sync_start + 5, copy_end + 4)
                r.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize",
                                 "pid": r.pid, "tid": r.tid, "ts": sync_start,
                                 "dur": sync_end - sync_start,
                                 "args": {"External id": r.ext, "cbid": 131,
                                          "correlation": r.corr + 1}})
                r.corr += 1
                dense["dur"] = sync_end + 3 - dense["ts"]
                item["dur"] = sync_end + 6 - item["ts"]
                step_end = item["ts"] + item["dur"] + 25
                r.step_event["dur"] = step_end - r.step_t0
                r.events.append(r.step_event)
                step_ends.append(step_end)
            for i in range(WORLD):
                step_starts[i] = step_ends[i] + 1
            truth_steps.append({
                "step": f"ProfilerStep#{step}",
                "wait_us": waits,
                "transfer_us": TRANSFER_US,
                "all_reduce_starts_us": starts_per_bucket,
            })
        write(variant, ranks, truth_steps, slow_rank)


def write(variant, ranks, truth_steps, slow_rank):
    for r in ranks:
        meta = [
            {"ph": "M", "name": "process_name", "pid": r.pid, "tid": 0,
             "args": {"name": "python"}},
            {"ph": "M", "name": "thread_name", "pid": r.pid, "tid": r.tid,
             "args": {"name": "thread 41000 (python)"}},
            {"ph": "M", "name": "process_name", "pid": r.rank, "tid": 0,
             "args": {"name": "python"}},
            {"ph": "M", "name": "process_labels", "pid": r.rank, "tid": 0,
             "args": {"labels": f"GPU {r.rank}"}},
        ] + [{"ph": "M", "name": "thread_name", "pid": r.rank, "tid": s,
              "args": {"name": f"stream {s}"}} for s in (COMPUTE_STREAM, NCCL_STREAM)]
        events = sorted(r.events, key=lambda e: (e["ts"], -e.get("dur", 0)))
        trace = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": i, "name": "NVIDIA A100-SXM4-80GB",
                                  "totalGlobalMem": 85_097_971_712, "computeMajor": 8,
                                  "computeMinor": 0, "maxThreadsPerBlock": 1024,
                                  "maxThreadsPerMultiprocessor": 2048,
                                  "regsPerBlock": 65536, "regsPerMultiprocessor": 65536,
                                  "warpSize": 32, "sharedMemPerBlock": 49152,
                                  "sharedMemPerMultiprocessor": 167936,
                                  "numSms": 108, "sharedMemPerBlockOptin": 166912}
                                 for i in range(WORLD)],
            "distributedInfo": {"backend": "nccl", "rank": r.rank, "world_size": WORLD,
                                "pg_count": 1,
                                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                                               "backend_config": "cuda:nccl",
                                               "pg_size": WORLD,
                                               "ranks": list(range(WORLD))}],
                                "nccl_version": "2.21.5"},
            "record_shapes": 1,
            "with_stack": 0,
            "traceEvents": meta + events,
            "traceName": f"{variant}_rank{r.rank}.pt.trace.json",
            "displayTimeUnit": "ms",
            "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        }
        os.makedirs(os.path.join(HERE, variant), exist_ok=True)
        path = os.path.join(HERE, variant, f"{variant}_rank{r.rank}.json.gz")
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            gz.write(json.dumps(trace, separators=(",", ":")).encode())
    per_step_extra = [r.gemm_extra_us / STEPS for r in ranks]
    n = WORLD
    bytes_ = NELEMS * 4
    truth = {
        "generator": "samples/ranks/generate_nccl.py",
        "rule": "the schedule's own figures: a bucket's all-reduce kernel starts on a rank when "
                "launched and its gradients are done; it ends on every rank at the latest start + "
                "the transfer time; a rank's wait = latest start - its start, summed per step; "
                "the straggler's extra time = its GEMMs' extra duration per step (30 % slower GPU)",
        "traces": [f"{variant}_rank{r.rank}.json.gz" for r in ranks],
        "straggler_rank": slow_rank,
        "extra_gemm_ns_per_step": [round(x * 1000) for x in per_step_extra],
        "wait_ns_per_step": {
            str(i): [s["wait_us"][i] * 1000 for s in truth_steps] for i in range(WORLD)
        },
        "all_reduce": {
            "per_step": len(BUCKETS),
            "count": len(BUCKETS) * STEPS,
            "latency_ns": TRANSFER_US * 1000,
            "bytes": bytes_,
            "bus_gbps": round(bytes_ * 2 * (n - 1) / n / (TRANSFER_US * 1e3), 2),
        },
        "steps": [s["step"] for s in truth_steps],
    }
    with open(os.path.join(HERE, variant, f"{variant}.truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
