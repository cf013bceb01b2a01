"""Simulated ranks of a data-parallel CPU job: N small Kineto traces with matching collectives,
one straggler and clock offsets between hosts, plus the truth they were made from.

Each rank runs STEPS steps of ``ProfilerStep#N`` on its main thread: forward and backward as
``aten::mm`` / ``aten::relu`` ops split into BUCKETS segments; after each segment its gradient
bucket is all-reduced on a gloo thread (``c10d::allreduce_`` on the main thread,
``gloo:all_reduce`` on ``pt_gloo_runloop``), as DDP does. A bucket's all-reduce starts on a rank
when its segment is done and the previous all-reduce has ended there; it ends on every rank at
the same moment, the latest start plus the transfer time (the ring's latency). The straggler's
compute is STRAGGLER_SLOWDOWN longer, so it arrives last at every all-reduce and the others
wait. Ranks sit RANKS_PER_HOST to a host (``host_name``); each host's clock is off by a planted
offset (host 0's is 0), written to the nanosecond.

``truth.json`` holds the straggler's rank and, per rank, the offset that aligns its clock with
rank 0's (``clock_offset_ns`` as ``steplens`` reports it: minus its host's planted offset).

Usage: python3 bench/make_rank_traces.py N OUT_DIR [--steps S] [--buckets B] [--straggler R]
                                         [--ranks-per-host H] [--seed SEED]
Deterministic for a given seed; no torch needed. ``steplens-bench ranks OUT_DIR`` measures the
reduce of their summaries; ``python/tests/test_distributed.py`` checks the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random

COMPUTE_US = 8_000  # one rank's forward + backward per step, µs
STRAGGLER_SLOWDOWN = 1.35
TRANSFER_US = 400  # one bucket's all-reduce once every rank has arrived, µs
OPTIMIZER_US = 300
HOST_OFFSET_NS = 1_234_567_891  # host h's clock runs h × this (alternating sign) off host 0's
BASE_NS = 1_790_000_000_000_000_000  # a wall-clock epoch, ns


def us(ns: int) -> str:
    """ns as the µs decimal Kineto writes, exact to the ns."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def planted_offset_ns(host: int) -> int:
    return (1 if host % 2 else -1) * host * HOST_OFFSET_NS


def make(n: int, steps: int = 20, buckets: int = 4, straggler: int | None = None,
         ranks_per_host: int = 8, seed: int = 7):
    """The N traces (as JSON text, rank by rank) and the truth."""
    if straggler is None:
        straggler = n // 3
    rng = random.Random(seed)
    hosts = [r // ranks_per_host for r in range(n)]
    # Every rank's compute per bucket segment, per step (ns, true time).
    events = [[] for _ in range(n)]
    ext = [100] * n
    pid = [50_000 + r for r in range(n)]
    gloo_tid = [60_000 + r for r in range(n)]

    def add(r, name, cat, tid, start_ns, dur_ns, **args):
        ext[r] += 1
        events[r].append((name, cat, tid, start_ns, dur_ns, {"External id": ext[r], **args}))

    t = 0  # true time, ns, from BASE_NS
    for step in range(steps):
        step_name = f"ProfilerStep#{step + 2}"
        step_start = t
        seg_end = [[0] * buckets for _ in range(n)]
        host_after = [0] * n
        for r in range(n):
            slow = STRAGGLER_SLOWDOWN if r == straggler else 1.0
            at = step_start + 20_000
            for b in range(buckets):
                dur = int(COMPUTE_US * 1000 * slow / buckets) + rng.randint(0, 40_000)
                mm = dur * 3 // 4
                add(r, "aten::mm", "cpu_op", pid[r], at, mm,
                    **{"Input Dims": [[512, 1024], [1024, 1024]], "Input type": ["float", "float"]})
                add(r, "aten::relu", "cpu_op", pid[r], at + mm + 5_000, dur - mm - 10_000)
                at += dur
                seg_end[r][b] = at
                # DDP hands the bucket to the process group.
                add(r, "c10d::allreduce_", "cpu_op", pid[r], at + 1_000, 30_000)
                at += 40_000
            host_after[r] = at
        # The all-reduces, bucket by bucket: same end on every rank.
        comm_free = [0] * n
        last_end = step_start
        for b in range(buckets):
            starts = [max(seg_end[r][b] + 11_000, comm_free[r]) for r in range(n)]
            end = max(starts) + TRANSFER_US * 1000
            for r in range(n):
                add(r, "gloo:all_reduce", "user_annotation", gloo_tid[r], starts[r],
                    end - starts[r])
                comm_free[r] = end
            last_end = end
        step_end = max(last_end, max(host_after)) + 10_000 + OPTIMIZER_US * 1000
        for r in range(n):
            # The optimizer waits for the last bucket.
            add(r, "Optimizer.step#SGD.step", "user_annotation", pid[r],
                step_end - OPTIMIZER_US * 1000 - 5_000, OPTIMIZER_US * 1000)
            add(r, step_name, "user_annotation", pid[r], step_start, step_end - step_start)
        t = step_end + 20_000

    traces = []
    for r in range(n):
        off = planted_offset_ns(hosts[r])
        trace_events = [
            {"ph": "M", "name": "process_name", "pid": pid[r], "tid": 0,
             "args": {"name": "python3"}},
            {"ph": "M", "name": "thread_name", "pid": pid[r], "tid": pid[r],
             "args": {"name": f"thread {pid[r]} (python3)"}},
            {"ph": "M", "name": "thread_name", "pid": pid[r], "tid": gloo_tid[r],
             "args": {"name": f"thread {gloo_tid[r]} (pt_gloo_runloop)"}},
        ]
        body = [json.dumps(e) for e in trace_events]
        for name, cat, tid, start, dur, args in events[r]:
            body.append(
                '{"ph": "X", "cat": %s, "name": %s, "pid": %d, "tid": %d, "ts": %s, "dur": %s, '
                '"args": %s}' % (json.dumps(cat), json.dumps(name), pid[r], tid,
                                 us(BASE_NS + start + off), us(dur), json.dumps(args)))
        head = {
            "schemaVersion": 1,
            "deviceProperties": [],
            "distributedInfo": {"backend": "gloo", "rank": r, "world_size": n},
            "host_name": f"node{hosts[r]:04d}",
            "displayTimeUnit": "ms",
        }
        text = json.dumps(head)[:-1] + ', "traceEvents": [\n' + ",\n".join(body) + "\n]}\n"
        traces.append(text)
    truth = {
        "ranks": n,
        "steps": steps,
        "buckets": buckets,
        "straggler": straggler,
        "ranks_per_host": ranks_per_host,
        # What aligns rank r's clock with rank 0's: rank 0's planted offset minus its own.
        "clock_offset_ns": [planted_offset_ns(hosts[0]) - planted_offset_ns(hosts[r])
                            for r in range(n)],
    }
    return traces, truth


def write(n: int, out_dir: str, **kwargs) -> list:
    """Writes ``rank{r:05d}.json`` for every rank and ``truth.json``; returns the trace paths."""
    os.makedirs(out_dir, exist_ok=True)
    traces, truth = make(n, **kwargs)
    paths = []
    for r, text in enumerate(traces):
        path = os.path.join(out_dir, f"rank{r:05d}.json")
        with open(path, "w") as f:
            f.write(text)
        paths.append(path)
    with open(os.path.join(out_dir, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ranks", type=int)
    parser.add_argument("out_dir")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--straggler", type=int, default=None)
    parser.add_argument("--ranks-per-host", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    a = parser.parse_args()
    paths = write(a.ranks, a.out_dir, steps=a.steps, buckets=a.buckets, straggler=a.straggler,
                  ranks_per_host=a.ranks_per_host, seed=a.seed)
    size = sum(os.path.getsize(p) for p in paths)
    print(f"wrote {len(paths)} traces ({size / 1e6:.1f} MB) and truth.json to {a.out_dir}")


if __name__ == "__main__":
    main()
