#!/usr/bin/env python3
"""Generate a synthetic, format-faithful Intel Gaudi 3 (HPU) profile of a lazy-mode training loop.

No public full Gaudi timeline trace exists, so steplens' Gaudi readers and detectors are tested on
files this script writes. Every file follows the layouts documented in
../shared/reference/habana-formats.md (and, where that page leaves a detail open, the public
gaudi-pytorch-bridge v1.19 source it cites); the assumptions made for unconfirmed details are
listed in samples/README.md ("gaudi/ — generated Gaudi 3 run").

One simulated run (5 steps, ProfilerStep#0..#4, step #0 is the compile warm-up) is rendered into
four files under samples/gaudi/:

  train_hpu.bridge.json.gz  habana-bridge-json: Kineto CPU trace + HPU lanes appended by the bridge
  train_hpu.tef.json.gz     synapse-tef-json: Synapse profiler TEF (pid = engine type), array left open
  train_hpu.hw.csv          habana-hw-csv: 23-column HW trace of the launches of steps #2..#4
  train_hpu.metrics.json    habana-metrics: PT_HPU_METRICS_FILE (mark_step + process_exit dumps)

plus one `<name>.truth.json` per file. The truth is computed by re-reading the written files with
the standard library only (decimal text -> integer ns, never through float) and is cross-checked
against what the generator planted; the generator fails if they disagree.

Planted (consistently across the files): mme_idle_behind_tpc and a recompile in step #3, a
host-device sync (`loss.item()` -> synStreamSynchronize) in every step, a CPU fallback op
(aten::_unique2, step #3), a ~1 ms host-bound gap in step #4.

Deterministic (fixed seed, gzip mtime 0, no wall clock): re-running rewrites identical bytes.

Usage:  python3 samples/gen/make_gaudi_samples.py
"""

import contextlib
import csv
import datetime
import decimal
import gzip
import io
import json
import os
import random
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(os.path.dirname(HERE), "gaudi")
sys.path.insert(0, HERE)
import truth as kineto_truth  # noqa: E402  (samples/gen/truth.py: the torch-side truth rules)

SEED = 20241211
US = 1_000
MS = 1_000_000

# ---------------------------------------------------------------- run constants
PID = 52891                      # python process (Kineto CPU lanes)
MAIN_TID = 52891
BWD_TID = 52963                  # autograd device thread (backward ops)
SYNLOG_PID = PID + 10000         # "Synapse Logger" (bridge offset 10000)
BRIDGE_PID = PID + 20000         # "Bridge Logs" (habana-formats.md §5.2: getpid() + 20000)
MEM_PID = PID + 30000            # "Memory Logs" (offset 30000)
DEVICE_PID = 0                   # "/device:HPU:0" (device_lane_ 0 in bridge 1.19)
BASE_EPOCH_NS = 1_733_926_455_000_000_000   # ChromeTraceBaseTime = baseTimeNanoseconds (2024-12-11T14:14:15Z)
# Synapse profiler clock = bridge clock + SYN_OFFSET_NS (TEF and HW CSV are on the Synapse clock)
SYN_OFFSET_NS = 1_203_456_789_012
DEVICE_NAME = "GAUDI3"
TOTAL_MEM = 136_365_211_648
COMPUTE_STREAM = 0xD97F000000000003
H2D_STREAM = 0xD97F000000000001
D2H_STREAM = 0xD97F000000000002

B, S, H, F, C = 16, 128, 1024, 4096, 1000   # batch, seq len, hidden, ffn, classes
S_STEP3 = 160                                # step #3's batch has a new sequence length

# Engine types: (TEF pid = Synapse engineType, TEF type name, bridge typeIdx, class)
# typeIdx = position in the bridge's engines_of_interest table (trace_parser.cpp):
# "**DMA "0 "**MME "1 "**TPC "2 "*PDMA"3 "*EDMA "4 "*KDMA"5 "*MME "6 "*TPC "7 ... "*NIC "14
HOST_TYPE = 9
ENGINE_TYPES = [
    (HOST_TYPE, "***Host", -1, "HOST"),
    (1, "*EDMA ", 4, "DMA"),
    (2, "*PDMA", 3, "DMA"),
    (3, "*MME ", 6, "MME"),
    (4, "*TPC ", 7, "TPC"),
    (5, "*NIC ", 14, "NIC"),
]
TYPE_BY_PID = {t[0]: t for t in ENGINE_TYPES}


def build_engines():
    """Global engine indices (unique across types, see README: the bridge keys lanes by index)."""
    eng = []
    for d in range(8):
        eng.append((d, 3, f"[HD{d}] MME"))
    for d in range(8):
        for k in range(6):
            eng.append((8 + d * 6 + k, 4, f"[HD{d}] TPC {k}"))
    for i, n in enumerate(["[HD0] EDMA 0", "[HD0] EDMA 1", "[HD1] EDMA 0", "[HD1] EDMA 1"]):
        eng.append((56 + i, 1, n))
    eng.append((60, 2, "PDMA 0"))
    eng.append((61, 2, "PDMA 1"))
    for i in range(4):
        eng.append((62 + i, 5, f"NIC {i}"))
    eng.append((70, HOST_TYPE, f"Thread {MAIN_TID}"))
    out = {}
    for idx, tp, name in eng:
        t = TYPE_BY_PID[tp]
        out[idx] = {"index": idx, "type": tp, "type_name": t[1], "type_idx": t[2], "class": t[3], "name": name}
    return out


ENGINES = build_engines()
MME_ENG = [i for i, e in ENGINES.items() if e["class"] == "MME"]
TPC_ENG = [i for i, e in ENGINES.items() if e["class"] == "TPC"]
EDMA_ENG = [56, 57, 58, 59]
PDMA_ENG = [60, 61]
HOST_ENG = 70


def bridge_line(idx):
    """Bridge lane (tid) of engine idx: typeIdx*1000 + index (+offset 0), as uint32 like the bridge."""
    e = ENGINES[idx]
    return (e["type_idx"] * 1000 + idx) & 0xFFFFFFFF


# ---------------------------------------------------------------- number formats
def us_nlohmann(ns):
    """µs as nlohmann::json prints the double ns/1000.0: shortest form, at least one decimal."""
    if ns < 0:
        raise ValueError(ns)
    q, r = divmod(ns, 1000)
    if r == 0:
        return f"{q}.0"
    return f"{q}." + f"{r:03d}".rstrip("0")


def us_fixed3(ns):
    q, r = divmod(ns, 1000)
    return f"{q}.{r:03d}"


def us_fixed6_ps(ps):
    q, r = divmod(ps, 1_000_000)
    return f"{q}.{r:06d}"


class Raw:
    """A number written verbatim (already-formatted decimal text)."""

    __slots__ = ("s",)

    def __init__(self, s):
        self.s = s


def dump_json(obj, sort_keys):
    """Compact JSON writer; Raw values are inserted verbatim (exact decimal text)."""
    if isinstance(obj, Raw):
        return obj.s
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if obj is None:
        return "null"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        raise TypeError("floats must be Raw")
    if isinstance(obj, str):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, dict):
        items = sorted(obj.items()) if sort_keys else obj.items()
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + dump_json(v, sort_keys) for k, v in items) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dump_json(v, sort_keys) for v in obj) + "]"
    raise TypeError(type(obj))


def hexs(v):
    return "0x%x" % v


# ---------------------------------------------------------------- the simulated run
class World:
    def __init__(self):
        self.rng = random.Random(SEED)
        self.kineto = []          # Kineto events (ns ints in ts/dur)
        self.ext_id = 0
        self.ev_idx = 0
        self.seq_nr = 100
        self.flow_id = 1
        self.bridge_logs = []     # (ph, name, tid, t)
        self.synlog = []          # dict(name, tid, b, e, args_b, args_e)
        self.synhost = []         # host API events on the Synapse host lane: dict(name, b, e, args)
        self.dev = []             # device slices: dict(eng, name, op, dtype, b, e, recipe, ctx, stream, event, launch)
        self.counters = []        # TEF counters (ns, pid, tid, name, args)
        self.mem_logs = []        # bridge memory events
        self.kineto_mem = 0
        self.recipes = []         # dict(id, name, handle, key)
        self.launches = []
        self.compiles = []
        self.steps = []
        self.metric_dumps = []    # (t_ns, trigger, snapshot)
        self.gc_list = []         # [(recipe_name, dur_us)]
        self.cache_hit = Counter()
        self.cache_miss = Counter()
        self.fallbacks = Counter()
        self.mem_total = 0
        self.mem_reserved = 0
        self.mem_index = 0
        self.addr_next = 0x1000_0000_0000
        self.live_allocs = []
        self.planted = {}
        self.launch_seq = 0
        self.recipe_sched = {}

    # ---- Kineto helpers
    def k_args(self, extra=None):
        self.ext_id += 1
        a = {"External id": self.ext_id, "Record function id": 0, "Ev Idx": self.ev_idx}
        self.ev_idx += 1
        if extra:
            a.update(extra)
        return a

    def k_x(self, cat, name, tid, ts, args):
        ev = {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": 0, "args": args}
        self.kineto.append(ev)
        return ev


def shapes(dims, types=None, strides=None, concrete=None):
    n = len(dims)
    if types is None:
        types = ["c10::BFloat16" if d else "Scalar" for d in dims]
    if strides is None:
        strides = []
        for d in dims:
            st, acc = [], 1
            for x in reversed(d):
                st.insert(0, acc)
                acc *= x
            strides.append(st)
    if concrete is None:
        concrete = ["" for _ in range(n)]
    return {"Input Dims": dims, "Input type": types, "Input Strides": strides, "Concrete Inputs": concrete}


NO_SHAPES = {"Input Dims": [], "Input type": [], "Input Strides": [], "Concrete Inputs": []}


class Thread:
    """A host thread cursor that lays out nested Kineto ops, bridge-log spans and Synapse calls."""

    def __init__(self, w, tid):
        self.w = w
        self.tid = tid
        self.t = 0

    def gap(self, lo=300, hi=900):
        self.t += self.w.rng.randint(lo, hi)

    @contextlib.contextmanager
    def op(self, name, cat="cpu_op", args=None, pre=(300, 900), post=(200, 600), seq=False):
        self.gap(*pre)
        start = self.t
        extra = dict(NO_SHAPES) if cat == "cpu_op" else {}
        if args:
            extra.update(args)
        if seq:
            self.w.seq_nr += 1
            extra["Sequence number"] = self.w.seq_nr
            extra["Fwd thread id"] = 0
        ev = self.w.k_x(cat, name, self.tid, start, self.w.k_args(extra))
        yield ev
        self.gap(*post)
        ev["dur"] = self.t - start

    def leaf(self, name, dur, args=None, seq=False, cat="cpu_op"):
        with self.op(name, cat=cat, args=args, seq=seq, pre=(300, 900), post=(0, 0)) as ev:
            self.t += dur
        return ev

    @contextlib.contextmanager
    def bridge(self, name):
        self.gap(150, 400)
        self.w.bridge_logs.append(("B", name, self.tid, self.t))
        yield
        self.gap(100, 300)
        self.w.bridge_logs.append(("E", name, self.tid, self.t))

    def syn(self, name, dur=None, until=None, args_b=None, host_args=None, enqueue=None):
        """One Synapse API call: Synapse Logger B/E (bridge file) + host-lane X (TEF and bridge)."""
        self.gap(200, 500)
        b = self.t
        self.t = until if until is not None else b + dur
        e = self.t
        self.w.synlog.append({"name": name, "tid": self.tid, "b": b, "e": e,
                              "args_b": args_b or {}, "args_e": {"status": "0"}})
        hb, he = b + 150, e - 120
        self.w.synhost.append({"name": name, "b": hb, "e": he, "args": host_args or {}})
        if enqueue is not None:
            # runtime annotation nested in the launch call: carries the recipe id (flow source)
            launch, recipe = enqueue
            eb, ee = hb + 2 * US, he - 1 * US
            self.w.synhost.append({
                "name": f"enqueueWithExternalEvents seqId:{launch['seq']} recipeId:{recipe['id']}",
                "b": eb, "e": ee, "enqueue": True,
                "args": {"recipe id": recipe["id"], "graph name": recipe["name"],
                         "streamHandle": hexs(COMPUTE_STREAM), "eventHandle": hexs(launch["event"])}})
            launch["enqueue_b"], launch["enqueue_e"] = eb, ee
        return b, e


# ---------------------------------------------------------------- device graphs
# MME node sequence of the fwd+bwd graph: (label, base µs, attached TPC nodes, dma)
# attached TPC node: (guid, dtype, start fraction, end fraction, engines)
FB_GRAPH = [
    ("l1_fc1_gemm", 1150, [("gelu_fwd_bf16", "bfloat16", 0.15, 1.0, 12)], None),
    ("l1_fc2_gemm", 1120, [("add_fwd_bf16", "bfloat16", 0.20, 0.92, 8),
                           ("layer_norm_fwd_bf16", "bfloat16", 0.55, 1.0, 8)], None),
    ("l2_fc1_gemm", 1150, [("gelu_fwd_bf16", "bfloat16", 0.15, 1.0, 12)], None),
    ("l2_fc2_gemm", 1120, [("add_fwd_bf16", "bfloat16", 0.20, 0.92, 8),
                           ("layer_norm_fwd_bf16", "bfloat16", 0.55, 1.0, 8)], None),
    ("head_gemm", 380, [("log_softmax_fwd_f32", "float32", 0.30, 0.75, 8),
                        ("nll_loss_fwd_f32", "float32", 0.70, 1.0, 8)], None),
    ("head_dedx", 360, [("nll_loss_bwd_f32", "float32", 0.0, 0.35, 8),
                        ("log_softmax_bwd_f32", "float32", 0.30, 0.90, 8)], None),
    ("head_dedw", 350, [("reduce_sum_fwd_f32", "float32", 0.25, 0.80, 8)], None),
    ("l2_fc2_dedx", 1110, [("layer_norm_bwd_bf16", "bfloat16", 0.10, 0.90, 12)], "DmaTranspose"),
    ("l2_fc2_dedw", 1100, [("reduce_sum_fwd_f32", "float32", 0.30, 0.80, 8)], None),
    ("l2_fc1_dedx", 1130, [("gelu_bwd_bf16", "bfloat16", 0.10, 0.95, 12)], None),
    ("l2_fc1_dedw", 1110, [("reduce_sum_fwd_f32", "float32", 0.30, 0.80, 8)], None),
    ("l1_fc2_dedx", 1110, [("layer_norm_bwd_bf16", "bfloat16", 0.10, 0.90, 12)], None),
    ("l1_fc2_dedw", 1100, [("reduce_sum_fwd_f32", "float32", 0.30, 0.80, 8)], None),
    ("l1_fc1_dedw", 1110, [("gelu_bwd_bf16", "bfloat16", 0.05, 0.60, 12),
                           ("cast_bf16_to_f32", "float32", 0.65, 1.0, 8)], None),
]
PLANT_AFTER = "l2_fc1_dedw"      # the MME-idle stretch sits between this node and the next
PLANT_NODES = 6                  # reduce_sum_fwd_f32 nodes, ~50 µs each, 16 TPC engines
PLANT_NODE_US = 50
OPT_GRAPH = ["mult_fwd_f32", "add_fwd_f32", "add_fwd_f32"] * 4


def schedule_fb(rng, gidx, scale, planted):
    """Relative schedule (ns from graph start) of the fwd+bwd recipe."""
    free = defaultdict(int)
    sl = []

    def put(eng, name, op, dt, b, e):
        assert b >= free[eng], (eng, b, free[eng])
        assert e > b
        free[eng] = e
        sl.append({"eng": eng, "name": name, "op": op, "dtype": dt, "b": b, "e": e})

    def pick_tpc(k, start):
        cands = sorted((free[i], i) for i in TPC_ENG if free[i] + 200 <= start)
        assert len(cands) >= k, "not enough free TPC engines"
        return [i for _, i in cands[:k]]

    # graph prologue: zero the grad accumulation buffer (EDMA memset)
    for j, eng in enumerate(EDMA_ENG[:2]):
        put(eng, "memset", "", "bfloat16", 1 * US + j * 150, 4 * US + j * 90)
    t = 6 * US
    plant = None
    node_no = 0
    for label, base_us, tpcs, dma in FB_GRAPH:
        d = int(base_us * US * scale * rng.uniform(0.985, 1.015))
        mname = f"g_{gidx}_{label}_{node_no}"
        node_no += 1
        for eng in MME_ENG:
            put(eng, mname, "Gemm", "bfloat16", t + rng.randint(0, 1200), t + d - rng.randint(0, 1500))
        for guid, dt, f0, f1, k in tpcs:
            st = t + int(f0 * d) + rng.randint(500, 2000)
            en = t + int(f1 * d) + (rng.randint(500, 2000) if f1 >= 1.0 else 0)
            tname = f"g_{gidx}_{guid.rsplit('_', 1)[0]}_{node_no}"
            node_no += 1
            for m, eng in enumerate(pick_tpc(k, st)):
                put(eng, tname, guid, dt, st + m * rng.randint(20, 400), en - rng.randint(0, 900))
        if dma:
            st = t + int(0.4 * d)
            for m, eng in enumerate(EDMA_ENG):
                put(eng, f"g_{gidx}_{label}_transpose_{node_no}", dma, "bfloat16",
                    st + m * 300, st + 35 * US - rng.randint(0, 500))
            node_no += 1
        t = t + d + rng.randint(3, 8) * US
        if planted and label == PLANT_AFTER:
            mme_end = max(s["e"] for s in sl if s["eng"] in MME_ENG)
            s0 = mme_end + 4 * US
            set_a = pick_tpc(16, s0)
            set_b = [i for i in TPC_ENG if i not in set_a][:16]
            for j in range(PLANT_NODES):
                engs = set_a if j % 2 == 0 else set_b
                nb = s0 + j * PLANT_NODE_US * US
                ne = nb + (PLANT_NODE_US + 2) * US
                rname = f"g_{gidx}_reduce_sum_bias_grad_{node_no}"
                node_no += 1
                for m, eng in enumerate(engs):
                    put(eng, rname, "reduce_sum_fwd_f32", "float32", nb + m * 25, ne - m * 20)
            stretch_end = s0 + (PLANT_NODES * PLANT_NODE_US + 2) * US
            t = stretch_end + 4 * US
            plant = {"tpc_stretch_b": s0, "tpc_stretch_e": stretch_end}
    end = max(s["e"] for s in sl)
    return sl, end, plant


def schedule_opt(rng, gidx):
    sl = []
    t = 3 * US
    for j, guid in enumerate(OPT_GRAPH):
        d = rng.randint(95, 160) * US
        engs = TPC_ENG[(j % 6) * 8:(j % 6) * 8 + 8]
        name = f"g_{gidx}_sgd_{guid.rsplit('_', 2)[0]}_{j}"
        for m, eng in enumerate(engs):
            sl.append({"eng": eng, "name": name, "op": guid, "dtype": "float32",
                       "b": t + m * 40, "e": t + d - m * 30})
        t += d + rng.randint(2, 4) * US
    return sl, max(s["e"] for s in sl), None


class Device:
    def __init__(self, w):
        self.w = w
        self.busy_until = 0       # compute stream: end of the last graph
        self.pdma_free = 0

    def new_recipe(self, key, builder):
        w = self.w
        rid = len(w.recipes) + 1
        r = {"id": rid, "name": f".graph_dumps/HabanaFusedOpLazy_{rid - 1}",
             "handle": 0x55D1C3A4E2B0 + 0x1A40 * rid, "key": key}
        w.recipes.append(r)
        w.recipe_sched[rid] = builder(rid - 1)
        return r

    def run_graph(self, recipe, launch, not_before):
        w = self.w
        sched, length, plant = w.recipe_sched[recipe["id"]]
        start = max(not_before, self.busy_until + w.rng.randint(3, 6) * US)
        num, den = w.rng.randint(998, 1002), 1000     # small per-launch speed jitter
        for s in sched:
            w.dev.append({"eng": s["eng"], "name": s["name"], "op": s["op"], "dtype": s["dtype"],
                          "b": start + s["b"] * num // den, "e": start + s["e"] * num // den,
                          "recipe": recipe, "ctx": launch["seq"], "stream": COMPUTE_STREAM,
                          "event": launch["event"], "launch": launch["seq"]})
        end = start + length * num // den
        launch["dev_b"], launch["dev_e"] = start, end
        if plant:
            launch["plant"] = {k: start + v * num // den for k, v in plant.items()}
        self.busy_until = end
        # BMON counters on [HD0] MME / [HD0] TPC 0 lanes (TEF only)
        for frac, (pid, tid, cname) in ((3, (3, 0, "BMON [HD0] MME")), (6, (4, 8, "BMON [HD0] TPC 0"))):
            t = start + (end - start) * frac // 10
            mx = w.rng.randint(400, 512)
            w.counters.append({"t": t, "pid": pid, "tid": tid, "name": cname,
                               "args": {"Min": w.rng.randint(0, 16), "Max": mx,
                                        "Avg": Raw(f"{w.rng.randint(150, 300)}.{w.rng.randint(0, 99):02d}"),
                                        "Match": w.rng.randint(9000, 30000)}})
        return start, end

    def memcpy(self, direction, nbytes, not_before, after=0):
        """A PDMA copy (no recipe). direction 'h2d' / 'd2h'."""
        w = self.w
        eng = PDMA_ENG[0] if direction == "h2d" else PDMA_ENG[1]
        b = max(not_before, after, self.pdma_free) + w.rng.randint(4, 9) * US
        dur = max(1500, nbytes * 1000 // 52_000)          # ~52 GB/s
        e = b + dur
        self.pdma_free = e
        name = "memcpy_host_to_device" if direction == "h2d" else "memcpy_device_to_host"
        w.dev.append({"eng": eng, "name": name, "op": "", "dtype": "", "b": b, "e": e,
                      "recipe": None, "ctx": 0, "stream": H2D_STREAM if direction == "h2d" else D2H_STREAM,
                      "event": 0, "launch": None})
        return b, e


# ---------------------------------------------------------------- host-side program
def mem_event(w, t, nbytes):
    """A bridge Memory Logs event (allocation if nbytes > 0, else frees the oldest live block).

    As the bridge writes them (gaudi-pytorch-bridge backend/profiling/trace_sources/memory_source.cpp:
    `addMemoryEvent(pid, tid, time, addr, bytes, 0, 1, total_allocated, total_reserved)`, the two
    constants being `Device Id` and `Device Type`; json_file_parser.cpp `constructMemoryEvent`): the HPU's
    memory under `Device Type` 1, which is c10's CUDA number, while the file's `deviceProperties` entry
    (`{"name": synDeviceGetName, "totalGlobalMem": ...}`, synapse_profiler_source.cpp `initHpuDetails`)
    says the device is a Gaudi. A reader trusts the described device: this memory is `hpu:0`.
    """
    if nbytes > 0:
        addr = w.addr_next
        w.addr_next += (nbytes + 0xFFFFF) & ~0xFFFFF
        w.mem_total += nbytes
        w.mem_reserved = max(w.mem_reserved, (w.mem_total + (1 << 30) - 1) & ~((1 << 30) - 1))
        w.live_allocs.append((addr, nbytes))
    else:
        addr, n = w.live_allocs.pop(0)
        nbytes = -n
        w.mem_total -= n
    w.mem_index += 1
    w.mem_logs.append({"t": t, "args": {"Addr": addr, "Bytes": nbytes, "Device Id": 0, "Device Type": 1,
                                        "Profiler Event Index": w.mem_index,
                                        "Total Allocated": w.mem_total, "Total Reserved": w.mem_reserved}})


def kineto_mem(w, th, nbytes, addr):
    w.kineto_mem += nbytes
    args = w.k_args()
    args.pop("External id")
    args.pop("Record function id")
    args.update({"Total Reserved": 0, "Total Allocated": max(w.kineto_mem, 0), "Bytes": nbytes,
                 "Device Id": -1, "Device Type": 0, "Addr": addr})
    w.kineto.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": PID, "tid": th.tid,
                     "ts": th.t, "s": "t", "args": args})


def metrics_snapshot(w):
    gc_total = sum(d for _, d in w.gc_list)
    n = len(w.gc_list)
    return [
        ("graph_compilation", {"TotalNumber": n, "TotalTime": gc_total,
                               "AvgTime": Raw(repr(float(gc_total) / n)) if n else 0,
                               "recipe": [[a, d] for a, d in w.gc_list]}),
        ("cpu_fallback", {"TotalNumber": sum(w.fallbacks.values()), "FallbackOps": dict(w.fallbacks)}),
        ("memory_defragmentation", {"TotalNumber": 0, "TotalSuccessful": 0, "AvgTime": 0, "MaxTime": 0}),
        ("recipe_cache", {"TotalHit": sum(w.cache_hit.values()), "RecipeHit": {str(k): v for k, v in sorted(w.cache_hit.items())},
                          "TotalMiss": sum(w.cache_miss.values()), "RecipeMiss": {str(k): v for k, v in sorted(w.cache_miss.items())}}),
    ]


def h2d_copy(w, th, dev, dims, dtype, nbytes, label):
    with th.op("aten::to", args=shapes([dims, [], [], [], []], [dtype, "Scalar", "Scalar", "Scalar", "Scalar"],
                                        concrete=["", "", "", "False", "False"])):
        with th.op("aten::_to_copy", args=shapes([dims], [dtype])):
            th.leaf("aten::empty_strided", 3 * US)
            with th.op("aten::copy_", args=shapes([dims, dims, []], [dtype, dtype, "Scalar"])):
                b, _ = th.syn("synMemCopyAsync", dur=9 * US,
                              args_b={"streamHandle": hexs(H2D_STREAM), "src": hexs(0x7F3A00000000 + nbytes),
                                      "size": str(nbytes), "dst": hexs(w.addr_next), "direction": "0"},
                              host_args={"streamHandle": hexs(H2D_STREAM)})
                dev.memcpy("h2d", nbytes, b)


def d2h_copy_sync(w, th, dev, nbytes, after):
    """synMemCopyAsync D2H + synStreamSynchronize until the copy lands. Returns the sync (b, e)."""
    b, _ = th.syn("synMemCopyAsync", dur=7 * US,
                  args_b={"streamHandle": hexs(D2H_STREAM), "src": hexs(w.addr_next - 0x200000),
                          "size": str(nbytes), "dst": hexs(0x7F3A10000000), "direction": "1"},
                  host_args={"streamHandle": hexs(D2H_STREAM)})
    cb, ce = dev.memcpy("d2h", nbytes, b, after=after)
    sb, se = th.syn("synStreamSynchronize", until=max(th.t + 3 * US, ce + w.rng.randint(5, 9) * US),
                    args_b={"streamHandle": hexs(D2H_STREAM)}, host_args={"streamHandle": hexs(D2H_STREAM)})
    return (sb, se), (cb, ce)


def linear_fwd(th, rows, din, dout, seq_log):
    with th.op("aten::linear", args=shapes([[rows, din], [dout, din], [dout]])):
        with th.op("aten::t", args=shapes([[dout, din]])):
            with th.op("aten::transpose", args=shapes([[dout, din], [], []], concrete=["", "0", "1"])):
                th.leaf("aten::as_strided", 2 * US)
        ev = th.leaf("aten::addmm", 11 * US, args=shapes([[dout], [rows, din], [din, dout], [], []],
                                                         ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"],
                                                         concrete=["", "", "", "1", "1"]), seq=True)
        seq_log.append(("AddmmBackward0", ev))


def mark_step(w, th, dev, step, graph_key, builder, rows):
    """htcore.mark_step(): bridge-log chain, compile on a cache miss, launch, event record."""
    recipe = next((r for r in w.recipes if r["key"] == graph_key), None)
    w.launch_seq += 1
    launch = {"seq": w.launch_seq, "step": step, "event": 0x7F3B400012A0 + 0x40 * w.launch_seq}
    compiled = None
    with th.bridge("MarkStep"):
        with th.bridge("StepMarkerBind"):
            with th.bridge("SyncTensorsGraphInternal"):
                with th.bridge("CollectSyncTensors"):
                    th.t += w.rng.randint(8, 14) * US
                with th.bridge("RunPostOrder"):
                    th.t += w.rng.randint(12, 20) * US
                with th.bridge("LaunchSyncTensorsGraph"):
                    if recipe is None:
                        recipe = dev.new_recipe(graph_key, builder)
                        w.cache_miss[recipe["id"]] += 1
                        comp_us = {0: 48213, 1: 21704, 2: 52371}[recipe["id"] - 1]
                        gb, ge = th.syn("synGraphCompile", dur=comp_us * US + w.rng.randint(100, 900),
                                        args_b={"pRecipeHandle": hexs(recipe["handle"] - 8),
                                                "graphHandle": hexs(0x55D1C0000000 + recipe["id"] * 0x100),
                                                "pRecipeName": recipe["name"]})
                        compiled = {"recipe": recipe, "b": gb, "e": ge, "step": step}
                        w.compiles.append(compiled)
                        w.gc_list.append((recipe["name"], (ge - gb) // US))
                        exec_name = None
                    else:
                        w.cache_hit[recipe["id"]] += 1
                        exec_name = "ExecuteCachedGraph"
                    launch["recipe"] = recipe
                    ctx = th.bridge(exec_name) if exec_name else contextlib.nullcontext()
                    with ctx:
                        th.t += w.rng.randint(6, 10) * US
                        lb, le = th.syn("synLaunchWithExternalEvents", dur=w.rng.randint(22, 30) * US,
                                        args_b={"streamHandle": hexs(COMPUTE_STREAM),
                                                "pRecipeHandle": hexs(recipe["handle"]),
                                                "numberOfTensors": str(18 if graph_key.startswith("fb") else 42),
                                                "numberOfEvents": "0", "flags": "0"},
                                        host_args={"streamHandle": hexs(COMPUTE_STREAM)},
                                        enqueue=(launch, recipe))
                        launch["api_b"], launch["api_e"] = lb, le
                        th.syn("synEventRecord", dur=3 * US,
                               args_b={"eventHandle": hexs(launch["event"]), "streamHandle": hexs(COMPUTE_STREAM)},
                               host_args={"streamHandle": hexs(COMPUTE_STREAM), "eventHandle": hexs(launch["event"])})
        with th.bridge("StepMarkerFinish"):
            th.t += w.rng.randint(4, 8) * US
    db, de = dev.run_graph(recipe, launch, launch["enqueue_b"] + w.rng.randint(12, 18) * US)
    # device memory for the graph's outputs / workspace
    for k in range(2 if graph_key.startswith("fb") else 1):
        mem_event(w, launch["api_b"] + (k + 1) * 1500, rows * H * 2 * (k + 1))
    w.launches.append(launch)
    w.metric_dumps.append((th.t, "mark_step", metrics_snapshot(w)))
    return launch, compiled


def run_program(w):
    dev = Device(w)
    main = Thread(w, MAIN_TID)
    bwd = Thread(w, BWD_TID)
    t0 = 4_712_345_678
    main.t = t0
    w.prof_start = t0 - 137_211
    ki_seq = []   # (node name, forward event) for fwdbwd flows

    for step in range(5):
        seq = S_STEP3 if step == 3 else S
        rows = B * seq
        scale = seq / S
        st = {"name": f"ProfilerStep#{step}", "start": main.t, "n": step}
        w.steps.append(st)
        step_ev = w.k_x("user_annotation", st["name"], MAIN_TID, main.t, w.k_args())
        main.t += w.rng.randint(2, 4) * US
        # ---- data loading (CPU collate)
        with main.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", cat="user_annotation",
                     pre=(500, 900), post=(20 * US, 30 * US)) as dl:
            main.t += w.rng.randint(60, 90) * US         # Python __getitem__ work, no op
            # the collated batch (inputs, labels): CPU tensors, freed when the step is done with them
            batch = [(0x7F3A00000000 + step * 0x10000000, B * seq * H * 2), (0x7F3A08000000 + step * 0x10000000, B * seq * 8)]
            with main.op("aten::stack", args=shapes([[B, seq, H], []], ["TensorList", "Scalar"], [[], []], ["", "0"])):
                kineto_mem(w, main, batch[0][1], batch[0][0])
                with main.op("aten::cat", args=shapes([[B, seq, H], []], ["TensorList", "Scalar"], [[], []], ["", "0"])):
                    main.t += w.rng.randint(55, 70) * US
            with main.op("aten::stack", args=shapes([[B, seq], []], ["TensorList", "Scalar"], [[], []], ["", "0"])):
                kineto_mem(w, main, batch[1][1], batch[1][0])
                with main.op("aten::cat", args=shapes([[B, seq], []], ["TensorList", "Scalar"], [[], []], ["", "0"])):
                    main.t += w.rng.randint(6, 9) * US
        st["dataloader"] = (dl["ts"], dl["ts"] + dl["dur"])
        # ---- planted host-bound stretch (step #4): per-sample CPU augmentation loop, all engines idle
        if step == 4:
            first = None
            n_ops = 0
            for i in range(32):
                a = main.leaf("aten::select", w.rng.randint(5, 7) * US,
                              args=shapes([[B, seq, H], [], []], ["float", "Scalar", "Scalar"], concrete=["", "0", str(i % B)]))
                first = first or a
                main.leaf("aten::mul", w.rng.randint(11, 13) * US, args=shapes([[seq, H], []], ["float", "Scalar"], concrete=["", "0.5"]))
                last = main.leaf("aten::add_", w.rng.randint(8, 10) * US, args=shapes([[seq, H], [seq, H], []], ["float", "float", "Scalar"], concrete=["", "", "1"]))
                n_ops += 3
            w.planted["host_bound_ops"] = {"b": first["ts"], "e": last["ts"] + last["dur"], "ops": n_ops}
        # ---- inputs to the device
        h2d_copy(w, main, dev, [B, seq, H], "c10::BFloat16", B * seq * H * 2, "inputs")
        h2d_copy(w, main, dev, [B, seq], "long int", B * seq * 8, "labels")
        # ---- planted CPU fallback (step #3): torch.unique(labels) -> aten::_unique2 runs on the CPU
        fb = None
        if step == 3:
            w.fallbacks["aten::_unique2"] += 1
            with main.op("aten::_unique2", args=shapes([[B, seq], [], [], []], ["long int", "Scalar", "Scalar", "Scalar"],
                                                       concrete=["", "True", "False", "False"])) as u:
                with main.op("aten::_to_cpu", args=shapes([[B, seq]], ["TensorList"], [[]])):
                    with main.op("aten::to", args=shapes([[B, seq], [], [], [], []], ["long int"] + ["Scalar"] * 4,
                                                         concrete=["", "", "", "False", "False"])):
                        with main.op("aten::_to_copy", args=shapes([[B, seq]], ["long int"])):
                            main.leaf("aten::empty_strided", 3 * US)
                            with main.op("aten::copy_", args=shapes([[B, seq], [B, seq], []], ["long int", "long int", "Scalar"])):
                                fb_sync, fb_copy = d2h_copy_sync(w, main, dev, B * seq * 8, dev.pdma_free)
                main.t += 141 * US                               # the CPU kernel itself
                for nout, n in ((C, C * 8), (B * seq, B * seq * 8)):
                    with main.op("aten::to", args=shapes([[nout], [], [], [], []], ["long int"] + ["Scalar"] * 4,
                                                         concrete=["", "", "", "False", "False"])):
                        with main.op("aten::_to_copy", args=shapes([[nout]], ["long int"])):
                            main.leaf("aten::empty_strided", 2 * US)
                            with main.op("aten::copy_", args=shapes([[nout], [nout], []], ["long int", "long int", "Scalar"])):
                                b_, _ = main.syn("synMemCopyAsync", dur=8 * US,
                                                 args_b={"streamHandle": hexs(H2D_STREAM), "src": hexs(0x7F3A20000000),
                                                         "size": str(n), "dst": hexs(w.addr_next), "direction": "0"},
                                                 host_args={"streamHandle": hexs(H2D_STREAM)})
                                dev.memcpy("h2d", n, b_)
            fb = {"op": u, "sync": fb_sync, "copy": fb_copy}
            w.planted["cpu_fallback"] = fb
        # ---- zero_grad(set_to_none=True): annotation only
        with main.op("Optimizer.zero_grad#SGD.zero_grad", cat="user_annotation"):
            main.t += w.rng.randint(4, 7) * US
        # ---- forward (lazy: ops only record the graph)
        fwd_seq = []
        main.leaf("aten::view", 3 * US, args=shapes([[B, seq, H], []], ["c10::BFloat16", "ScalarList"], concrete=["", f"[-1, {H}]"]))
        for layer in (1, 2):
            linear_fwd(main, rows, H, F, fwd_seq)
            g = main.leaf("aten::gelu", 7 * US, args=shapes([[rows, F]], concrete=[""]), seq=True)
            fwd_seq.append(("GeluBackward0", g))
            linear_fwd(main, rows, F, H, fwd_seq)
            a = main.leaf("aten::add", 6 * US, args=shapes([[rows, H], [rows, H], []], concrete=["", "", "1"]), seq=True)
            fwd_seq.append(("AddBackward0", a))
            with main.op("aten::layer_norm", args=shapes([[rows, H], [], [H], [H], [], []])):
                ln = main.leaf("aten::native_layer_norm", 12 * US, args=shapes([[rows, H], [], [H], [H], []]), seq=True)
            fwd_seq.append(("NativeLayerNormBackward0", ln))
        linear_fwd(main, rows, H, C, fwd_seq)
        with main.op("aten::cross_entropy_loss", args=shapes([[rows, C], [rows], [], [], [], []],
                                                             ["float", "long int", "", "Scalar", "Scalar", "Scalar"])):
            with main.op("aten::log_softmax", args=shapes([[rows, C], [], []], ["float", "Scalar", ""])):
                ls = main.leaf("aten::_log_softmax", 8 * US, args=shapes([[rows, C], [], []], ["float", "Scalar", "Scalar"]), seq=True)
            fwd_seq.append(("LogSoftmaxBackward0", ls))
            with main.op("aten::nll_loss_nd", args=shapes([[rows, C], [rows], [], [], []], ["float", "long int", "", "Scalar", "Scalar"])):
                with main.op("aten::nll_loss", args=shapes([[rows, C], [rows], [], [], []], ["float", "long int", "", "Scalar", "Scalar"])):
                    nl = main.leaf("aten::nll_loss_forward", 9 * US, args=shapes([[rows, C], [rows], [], [], []],
                                                                               ["float", "long int", "", "Scalar", "Scalar"]), seq=True)
            fwd_seq.append(("NllLossBackward0", nl))
        # ---- backward: seed on the main thread, nodes on the autograd device thread
        with main.op("aten::ones_like", args=shapes([[], [], [], [], [], []])):
            main.leaf("aten::empty_like", 2 * US)
            main.leaf("aten::fill_", 3 * US)
        bwd.t = main.t + w.rng.randint(15, 25) * US
        for node, fwd_ev in reversed(fwd_seq):
            with bwd.op(f"autograd::engine::evaluate_function: {node}", pre=(600, 1500)) as ev:
                w.kineto.append({"ph": "s", "id": w.flow_id, "pid": PID, "tid": MAIN_TID, "ts": fwd_ev["ts"],
                                 "cat": "fwdbwd", "name": "fwdbwd"})
                w.kineto.append({"ph": "f", "id": w.flow_id, "pid": PID, "tid": BWD_TID, "ts": ev["ts"],
                                 "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"})
                w.flow_id += 1
                fargs = {"Sequence number": fwd_ev["args"]["Sequence number"], "Fwd thread id": MAIN_TID}
                with bwd.op(node, args=fargs):
                    if node == "AddmmBackward0":
                        bwd.leaf("aten::t", 3 * US)
                        bwd.leaf("aten::mm", 9 * US)
                        bwd.leaf("aten::t", 3 * US)
                        bwd.leaf("aten::mm", 9 * US)
                        bwd.leaf("aten::sum", 6 * US)
                    elif node == "GeluBackward0":
                        bwd.leaf("aten::gelu_backward", 7 * US)
                    elif node == "NativeLayerNormBackward0":
                        bwd.leaf("aten::native_layer_norm_backward", 13 * US)
                    elif node == "LogSoftmaxBackward0":
                        bwd.leaf("aten::_log_softmax_backward_data", 7 * US)
                    elif node == "NllLossBackward0":
                        bwd.leaf("aten::nll_loss_backward", 8 * US)
                    else:
                        bwd.t += 2 * US
            if node in ("AddmmBackward0", "NativeLayerNormBackward0"):
                for _ in range(2):   # weight and bias
                    with bwd.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"):
                        with bwd.op("torch::autograd::AccumulateGrad"):
                            bwd.leaf("aten::detach", 2 * US)
        main.t = bwd.t + w.rng.randint(20, 40) * US
        # ---- mark_step #1: fwd+bwd graph
        key_fb = f"fb_seq{seq}"
        la, comp = mark_step(w, main, dev, step, key_fb,
                             lambda g, sc=scale, pl=(seq == S_STEP3): schedule_fb(w.rng, g, sc, pl), rows)
        # ---- optimizer (foreach SGD with momentum): lazy ops while the device runs the fwd+bwd graph
        with main.op("Optimizer.step#SGD.step", cat="user_annotation"):
            for name in ("aten::_foreach_mul_", "aten::_foreach_add_", "aten::_foreach_add_"):
                main.leaf(name, w.rng.randint(28, 40) * US,
                          args=shapes([[], [], []], ["TensorList", "TensorList", "Scalar"], [[], [], []], ["", "", "0.9"]))
        lb, _ = mark_step(w, main, dev, step, "opt", lambda g: schedule_opt(w.rng, g), rows)
        # ---- loss.item(): D2H copy + stream sync (waits for both graphs)
        with main.op("aten::item", args=shapes([[]], ["float"])):
            with main.op("aten::_local_scalar_dense", args=shapes([[]], ["float"])) as lsd:
                sync, copy = d2h_copy_sync(w, main, dev, 4, lb["dev_e"])
        # the graphs' outputs freed once the sync returns, in time order as the bridge logs them
        # (successive Total Allocated values then differ by exactly Bytes)
        for t in sorted([sync[1] + w.rng.randint(2, 9) * US for _ in range(3)]):
            mem_event(w, t, -1)
        st["sync"] = sync
        st["item"] = lsd
        st["launches"] = (la, lb)
        # `del inputs, labels` at the end of the loop body: the batch is freed inside its own step, so
        # the CPU allocated baseline is the same at every step start (nothing planted grows)
        for addr, nbytes in batch:
            kineto_mem(w, main, -nbytes, addr)
        main.t += w.rng.randint(25, 45) * US
        st["end"] = main.t - w.rng.randint(2, 4) * US
        step_ev["dur"] = st["end"] - st["start"]
        st["ev"] = step_ev
    w.prof_stop = main.t + 212_345
    w.metric_dumps.append((w.prof_stop + 850 * MS, "process_exit", metrics_snapshot(w)))
    # sanity: device work lies inside the profiling window
    assert max(d["e"] for d in w.dev) < w.prof_stop
    return dev


# ---------------------------------------------------------------- writers
def kineto_events(w):
    """Kineto's own part of the trace (before the bridge appends HPU events)."""
    ev = []
    pts = w.prof_start
    ev.append({"ph": "M", "name": "process_name", "ts": pts, "pid": PID, "tid": 0, "args": {"name": "python3.10"}})
    ev.append({"ph": "M", "name": "process_labels", "ts": pts, "pid": PID, "tid": 0, "args": {"labels": "CPU"}})
    ev.append({"ph": "M", "name": "process_sort_index", "ts": pts, "pid": PID, "tid": 0, "args": {"sort_index": PID}})
    for tid, tname in ((MAIN_TID, "python3.10"), (BWD_TID, "pt_autograd_0")):
        ev.append({"ph": "M", "name": "thread_name", "ts": pts, "pid": PID, "tid": tid, "args": {"name": f"thread {tid} ({tname})"}})
        ev.append({"ph": "M", "name": "thread_sort_index", "ts": pts, "pid": PID, "tid": tid, "args": {"sort_index": tid}})
    body = sorted(w.kineto, key=lambda e: (e["ts"], -e.get("dur", 0)))
    ev.extend(body)
    span_dur = w.prof_stop - w.prof_start
    ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
               "ts": pts, "dur": span_dur, "args": {"Op count": 0}})
    ev.append({"ph": "M", "name": "process_sort_index", "ts": pts, "pid": "Spans", "tid": 0, "args": {"sort_index": 536870912}})
    ev.append({"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces",
               "tid": "Trace PyTorch Profiler", "ts": pts})
    ev.append({"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": w.prof_stop})
    return ev


def tef_events(w):
    """Synapse TEF events (Synapse clock, ns). Metadata first, then everything by time."""
    meta = []
    for tp, tname, _, _ in ENGINE_TYPES:
        meta.append({"name": "process_name", "ph": "M", "pid": tp, "tid": 0,
                     "args": {"name": tname, "level": tp}})
    for idx in sorted(ENGINES, key=lambda i: (ENGINES[i]["type"] != HOST_TYPE, ENGINES[i]["type"], i)):
        e = ENGINES[idx]
        meta.append({"name": "thread_name", "ph": "M", "pid": e["type"], "tid": idx,
                     "args": {"name": e["name"], "level": e["type"]}})
    timed = []   # (t_ns_syn, order, event)
    for d in w.dev:
        e = ENGINES[d["eng"]]
        r = d["recipe"]
        args = {"dtype": d["dtype"], "op": d["op"], "recipe id": r["id"] if r else 0,
                "graph name": r["name"] if r else "", "streamHandle": hexs(d["stream"]), "eventHandle": hexs(d["event"])}
        base = {"name": d["name"], "cat": "HW", "pid": e["type"], "tid": d["eng"], "id": d["ctx"], "args": args}
        timed.append((d["b"] + SYN_OFFSET_NS, 1, dict(base, ph="B", ts=d["b"] + SYN_OFFSET_NS)))
        timed.append((d["e"] + SYN_OFFSET_NS, 0, dict(base, ph="E", ts=d["e"] + SYN_OFFSET_NS)))
    for h in w.synhost:
        args = dict(h["args"])
        timed.append((h["b"] + SYN_OFFSET_NS, 2, {"name": h["name"], "cat": "SW", "ph": "X", "ts": h["b"] + SYN_OFFSET_NS,
                                                   "dur": h["e"] - h["b"], "pid": HOST_TYPE, "tid": HOST_ENG, "args": args}))
    for c in w.counters:
        timed.append((c["t"] + SYN_OFFSET_NS, 3, {"name": c["name"], "cat": "BMON", "ph": "C", "ts": c["t"] + SYN_OFFSET_NS,
                                                   "pid": c["pid"], "tid": c["tid"], "args": c["args"]}))
    timed.sort(key=lambda x: (x[0], x[1]))
    return meta, [t[2] for t in timed]


def write_tef(w, path):
    meta, body = tef_events(w)
    lines = []
    order = ("name", "cat", "ph", "ts", "dur", "pid", "tid", "id", "args")
    for ev in meta + body:
        o = {}
        for k in order:
            if k in ev:
                v = ev[k]
                o[k] = Raw(us_fixed3(v)) if k in ("ts", "dur") else v
        lines.append(dump_json(o, sort_keys=False))
    text = "[\n" + ",\n".join(lines) + "\n"      # array left open, as Synapse writes it
    write_gz(path, text)
    return meta, body


def bridge_appended(w):
    """What the bridge's _export_logs appends, in its order (see habana-formats.md §5.2)."""
    out = []
    # SynapseProfilerSource: initLanes (device + one thread per engine), then activities
    out.append({"name": "process_name", "ph": "M", "ts": "0.0", "pid": DEVICE_PID, "tid": 0, "args": {"name": "/device:HPU:0"}})
    out.append({"name": "process_labels", "ph": "M", "ts": "0.0", "pid": DEVICE_PID, "tid": 0, "args": {"labels": "/device:HPU:0"}})
    out.append({"name": "process_sort_index", "ph": "M", "ts": "0.0", "pid": DEVICE_PID, "tid": 0,
                "args": {"sort_index": DEVICE_PID + 0x1000000}})
    for idx in sorted(ENGINES, key=lambda i: (ENGINES[i]["type"], i)):
        e = ENGINES[idx]
        if e["type"] == HOST_TYPE:
            pid, name = HOST_TYPE, "Synapse/" + e["name"]
        else:
            pid, name = DEVICE_PID, e["name"]
        line = bridge_line(idx)
        out.append({"name": "thread_name", "ph": "M", "ts": "0.0", "pid": pid, "tid": line, "args": {"name": name}})
        out.append({"name": "thread_sort_index", "ph": "M", "ts": "0.0", "pid": pid, "tid": line, "args": {"sort_index": line}})
    # activities in Synapse buffer order: device slices complete at their E, host X at their start
    launch_enqueue = {la["seq"]: la["enqueue_b"] for la in w.launches}
    items = []
    for d in w.dev:
        items.append((d["e"], 0, "dev", d))
    for h in w.synhost:
        items.append((h["b"], 1, "host", h))
    items.sort(key=lambda x: (x[0], x[1]))
    flow_id = 0
    for _, _, kind, x in items:
        if kind == "dev":
            e = ENGINES[x["eng"]]
            r = x["recipe"]
            name = x["op"] or x["name"]
            if x["op"] == "DmaTranspose" or e["class"] in ("MME", "TPC"):
                cat = "Kernel"
            elif name.startswith("memcpy"):
                cat = "Memcpy"
            elif name.startswith("memset"):
                cat = "Memset"
            else:
                cat = "Runtime"
            args = {"recipeId": r["id"] if r else 0, "recipeName": r["name"] if r else "",
                    "streamHandle": hexs(x["stream"]), "eventHandle": hexs(x["event"]), "dataType": x["dtype"]}
            if cat == "Kernel":
                args["device"] = DEVICE_PID
            out.append({"cat": cat, "name": name, "pid": DEVICE_PID, "tid": bridge_line(x["eng"]),
                        "ts": x["b"], "ph": "X", "dur": x["e"] - x["b"], "args": args})
            if r is not None:
                src = launch_enqueue[x["launch"]]
                for ph, pid, tid, ts in (("s", HOST_TYPE, bridge_line(HOST_ENG), src),
                                         ("f", DEVICE_PID, bridge_line(x["eng"]), x["b"])):
                    out.append({"ph": ph, "cat": "enqueue", "name": name, "ts": ts, "pid": pid, "tid": tid,
                                "bp": "e", "id": flow_id})
                flow_id += 1
        else:
            a = x["args"]
            args = {"recipeId": a.get("recipe id", 0), "recipeName": a.get("graph name", ""),
                    "streamHandle": a.get("streamHandle", "0x0"), "eventHandle": a.get("eventHandle", "0x0"),
                    "dataType": ""}
            out.append({"cat": "Runtime", "name": x["name"], "pid": HOST_TYPE, "tid": bridge_line(HOST_ENG),
                        "ts": x["b"], "ph": "X", "dur": x["e"] - x["b"], "args": args})
    # SynapseLoggerSource: B/E activities, then its process metadata
    for s in w.synlog:
        out.append({"cat": "Runtime", "name": s["name"], "pid": SYNLOG_PID, "tid": s["tid"], "ts": s["b"], "ph": "B",
                    "args": s["args_b"]})
        out.append({"cat": "Runtime", "name": s["name"], "pid": SYNLOG_PID, "tid": s["tid"], "ts": s["e"], "ph": "E",
                    "args": s["args_e"]})
    out.extend(device_meta("Synapse Logger", SYNLOG_PID))
    # BridgeLogsSource
    for ph, name, tid, t in w.bridge_logs:
        out.append({"cat": "Runtime", "name": name, "pid": BRIDGE_PID, "tid": tid, "ts": t, "ph": ph})
    out.extend(device_meta("Bridge Logs", BRIDGE_PID))
    # MemorySource
    for m in w.mem_logs:
        out.append({"cat": "cpu_instant_event", "name": "[memory]", "ph": "i", "pid": MEM_PID, "s": "t",
                    "tid": MAIN_TID, "ts": m["t"], "args": m["args"]})
    out.extend(device_meta("Memory Logs", MEM_PID))
    return out


def device_meta(name, pid):
    return [
        {"name": "process_name", "ph": "M", "ts": "0.0", "pid": pid, "tid": 0, "args": {"name": name}},
        {"name": "process_labels", "ph": "M", "ts": "0.0", "pid": pid, "tid": 0, "args": {"labels": name}},
        {"name": "process_sort_index", "ph": "M", "ts": "0.0", "pid": pid, "tid": 0,
         "args": {"sort_index": pid + 0x1000000 if pid < 8 else pid}},
    ]


def to_bridge_json(ev):
    o = {}
    for k, v in ev.items():
        if k in ("ts", "dur"):
            o[k] = Raw(v) if isinstance(v, str) else Raw(us_nlohmann(v))
        else:
            o[k] = v
    return o


def write_bridge(w, path):
    events = kineto_events(w) + bridge_appended(w)
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"name": DEVICE_NAME, "totalGlobalMem": TOTAL_MEM}],
        "trace_id": "6B1F0C2E9A4D4F7DB0E3A1C58D2F7E41",
        "record_shapes": 1,
        "profile_memory": 1,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": BASE_EPOCH_NS,
        "traceEvents": [to_bridge_json(e) for e in events],
        "traceName": "./hpu_profile/hls3-node07_52891.1733926459874.pt.trace.json",
    }
    # nlohmann::json (std::map) re-serialises the whole Kineto file: sorted keys, compact
    write_gz(path, dump_json(doc, sort_keys=True))
    return events


def write_gz(path, text):
    data = text.encode("utf-8")
    with open(path, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as g:
            g.write(data)


CSV_HEADER = ["Name", "Trace Source", "Engine", "Event type", "Timestamp[usec]", "recipeHandle", "streamHandle",
              "Recipe ID", "Recipe name", "Context ID", "Device", "Operation", "Data Type", "HW Event port",
              "HW Event description", "SPMU value", "BMON min", "BMON avg", "BMON max", "BMON matches",
              "BMON configured cycles", "NIC Packets amount", "Misc"]
CSV_STEPS = (2, 3, 4)
WRAPPED_SPMU = 18446744073709551415     # 2**64 - 201, as in the real sample


def write_csv(w, path):
    rng = random.Random(SEED + 7)
    rows = []   # (ps, order, row)

    def ps_of(ns):
        return (ns + SYN_OFFSET_NS) * 1000 + rng.randint(0, 499)   # sub-ns digits < .5 ns: rounds and truncates alike

    def rec_row(d, etype, ps, port, desc):
        r = d["recipe"]
        return [d["name"], "HW", ENGINES[d["eng"]]["name"], etype, us_fixed6_ps(ps), hexs(r["handle"]),
                hexs(d["stream"]), str(r["id"]), r["name"], str(d["ctx"]), "accel0", d["op"], d["dtype"],
                str(port), desc, "", "", "", "", "", "", "", ""]

    seqs = {la["seq"] for la in w.launches if la["step"] in CSV_STEPS}
    covered = [d for d in w.dev if d["launch"] in seqs and ENGINES[d["eng"]]["class"] in ("MME", "TPC")]
    n_qman = 0
    for i, d in enumerate(covered):
        cls = ENGINES[d["eng"]]["class"]
        b_ps, e_ps = ps_of(d["b"]), ps_of(d["e"])
        if cls == "TPC":
            if rng.random() < 0.62:
                rows.append((b_ps - 2000, 0, rec_row(d, "INSTANT", b_ps - 2000, 0, "TPC_QMAN_CMD_EXE")))
                n_qman += 1
            rows.append((b_ps, 1, rec_row(d, "BEGIN", b_ps, 1, "TPC_SPU_START")))
            rows.append((e_ps, 2, rec_row(d, "END", e_ps, 2, "TPC_SPU_START_TO_SPU_HALT")))
            v = e_ps + rng.randint(560, 660) * 1000 + rng.randint(0, 999)
            rows.append((v, 3, rec_row(d, "INSTANT", v, 3, "TPC_VPU_HALT")))
            k = v + rng.randint(1270, 1300) * 1000 + rng.randint(0, 999)
            rows.append((k, 4, rec_row(d, "INSTANT", k, 4, "TPC_END_OF_KERNEL_MESSAGE_WRITE")))
        else:
            rows.append((b_ps, 1, rec_row(d, "BEGIN", b_ps, 8, "SB0_START_EVT")))
            rows.append((e_ps, 2, rec_row(d, "END", e_ps, 18, "WB0_END")))
    # SPMU counters per launch: back pressure on 10 TPC engines, HBM partial writes on the 4 cache slices
    counters = []
    wrapped_done = False
    for la in w.launches:
        if la["seq"] not in seqs:
            continue
        span = la["dev_e"] - la["dev_b"]
        for j, eng in enumerate(rng.sample(TPC_ENG, 10)):
            t = la["dev_b"] + span * (j + 1) // 12
            counters.append((ps_of(t), ENGINES[eng]["name"],
                             "[8] Back pressure from memory to TPC write queue on store tensors", str(rng.randint(0, 2400))))
        for rep in (1, 3):
            for sl in range(4):
                t = la["dev_b"] + span * rep // 4 + sl * rng.randint(150, 900) * US // 10
                if not wrapped_done and la["step"] == 3 and rep == 1 and sl == 2:
                    val = str(WRAPPED_SPMU)
                    wrapped_done = True
                else:
                    val = str(rng.randint(90, 4200))
                counters.append((ps_of(t), f"[D{sl}] Cache Slice", "Outgoing HBM partial writes", val))
    for ps, eng, name, val in counters:
        rows.append((ps, 5, [name, "HW", eng, "COUNTER", us_fixed6_ps(ps), "", "", "", "", "", "accel0", "", "",
                             "", "SPMU", val, "", "", "", "", "", "", ""]))
    rows.sort(key=lambda r: (r[0], r[1]))
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(CSV_HEADER)
    for _, _, r in rows:
        wr.writerow(r)
    with open(path, "w", newline="") as f:
        f.write(buf.getvalue())
    return {"qman": n_qman, "counters": len(counters), "wrapped": 1 if wrapped_done else 0}


def iso(t_ns):
    dt = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=(BASE_EPOCH_NS + t_ns) // 1000)
    return dt.isoformat()


def write_metrics(w, path):
    parts = []
    for t, trig, snap in w.metric_dumps:
        for name, stats in snap:
            obj = {"metric_name": name, "triggered_by": trig, "generated_on": iso(t), "statistics": stats}
            parts.append(py_json(obj))
    with open(path, "w") as f:
        f.write("[" + ",\n".join(parts) + "]\n")    # MetricJsonWriter: "[", ",\n" between objects, "]\n" at exit


def py_json(obj):
    """json.dumps(obj) spacing (", " and ": "), with Raw numbers verbatim."""
    if isinstance(obj, Raw):
        return obj.s
    if isinstance(obj, dict):
        return "{" + ", ".join(json.dumps(k) + ": " + py_json(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ", ".join(py_json(v) for v in obj) + "]"
    return json.dumps(obj)


# ---------------------------------------------------------------- truth (from the written files)
D = decimal.Decimal
_CTX = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_UP)


def ns_of(v):
    return kineto_truth.us_to_ns(v)


def load_json_exact(path, open_array=False):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        text = f.read().decode("utf-8")
    if open_array:
        text = text + "]"
    return json.loads(text, parse_float=D)


def union(iv):
    iv = sorted((a, b) for a, b in iv if b > a)
    out = []
    for a, b in iv:
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [tuple(x) for x in out]


def clip(iv, lo, hi):
    return [(max(a, lo), min(b, hi)) for a, b in iv if min(b, hi) > max(a, lo)]


def length(iv):
    return sum(b - a for a, b in iv)


def intersect(x, y):
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if b > a:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(x, y):
    out = []
    for a, b in x:
        cur = a
        for c, d in y:
            if d <= cur or c >= b:
                continue
            if c > cur:
                out.append((cur, c))
            cur = max(cur, d)
        if cur < b:
            out.append((cur, b))
    return out


def engine_class(name):
    """Class of a Gaudi engine lane from its name (`[HD3] TPC 5`, `*MME `, `PDMA 0`, `NIC 2`)."""
    n = name.strip().lstrip("*").strip()
    if n.startswith("[") and "]" in n:
        n = n.split("]", 1)[1].strip()
    word = ""
    for ch in n:
        if ch in " _" or ch.isdigit():
            break
        word += ch
    return {"MME": "MME", "TPC": "TPC", "DMA": "DMA", "EDMA": "DMA", "PDMA": "DMA", "KDMA": "DMA",
            "NIC": "NIC", "ROTATOR": "ROTATOR"}.get(word.upper())


def device_step_stats(steps, slices_by_class):
    """Per step: busy per class (union, clipped), device busy, MME/TPC overlap, MME-idle windows."""
    unions = {c: union(iv) for c, iv in slices_by_class.items()}
    all_u = union([x for iv in slices_by_class.values() for x in iv])
    out = []
    for s in steps:
        lo, hi = s["start_ns"], s["start_ns"] + s["dur_ns"]
        busy = {c: length(clip(u, lo, hi)) for c, u in sorted(unions.items())}
        mme = clip(unions.get("MME", []), lo, hi)
        tpc = clip(unions.get("TPC", []), lo, hi)
        wins = []
        for (a0, a1), (b0, b1) in zip(mme, mme[1:]):
            tb = length(intersect(tpc, [(a1, b0)]))
            if tb > 0:
                wins.append({"start_ns": a1, "end_ns": b0, "dur_ns": b0 - a1, "tpc_busy_ns": tb})
        wins.sort(key=lambda x: (-x["tpc_busy_ns"], x["start_ns"]))
        out.append({
            "name": s["name"], "start_ns": lo, "dur_ns": s["dur_ns"],
            "busy_ns_by_class": busy,
            "device_busy_ns": length(clip(all_u, lo, hi)),
            "mme_tpc_overlap_ns": length(intersect(mme, tpc)),
            "mme_idle_windows": len(wins),
            "max_mme_idle_tpc_busy_ns": wins[0]["tpc_busy_ns"] if wins else 0,
            "top_mme_idle_windows": wins[:3],
        })
    return out


def truth_bridge(path, w, planted):
    doc = load_json_exact(path)
    base = kineto_truth.compute(doc)
    evs = doc["traceEvents"]
    pname, tname = {}, {}
    for e in evs:
        if e.get("ph") == "M":
            if e["name"] == "process_name":
                pname[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                tname[(e["pid"], e["tid"])] = e["args"]["name"]
    # device lanes
    lanes = defaultdict(list)
    for e in evs:
        if e.get("ph") == "X" and e.get("pid") == DEVICE_PID:
            lanes[e["tid"]].append((ns_of(e["ts"]), ns_of(e["ts"]) + ns_of(e["dur"])))
    engines = []
    by_class = defaultdict(list)
    for (pid, tid), n in sorted(tname.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if pid != DEVICE_PID:
            continue
        cls = engine_class(n)
        engines.append({"tid": tid, "name": n, "class": cls, "slices": len(lanes.get(tid, []))})
        by_class[cls].extend(lanes.get(tid, []))
    steps = base["steps"]
    dstats = device_step_stats(steps, by_class)
    # processes
    procs = Counter()
    for e in evs:
        procs[pname.get(e.get("pid"), str(e.get("pid")))] += 1
    # host work / exclusions for host_bound
    host_work, dl, syncs = [], [], []
    per_step_sync = []
    slices_b = defaultdict(list)
    open_be = defaultdict(list)
    for e in evs:
        ph, pid = e.get("ph"), e.get("pid")
        if ph == "X":
            t0, t1 = ns_of(e["ts"]), ns_of(e["ts"]) + ns_of(e.get("dur", 0))
            if e.get("cat") == "cpu_op" and pid == PID:
                host_work.append((t0, t1))
            elif e.get("cat") == "Runtime" and pid == HOST_TYPE:
                host_work.append((t0, t1))
                if e["name"] in ("synStreamSynchronize", "synEventSynchronize", "synDeviceSynchronize"):
                    syncs.append((t0, t1))
            if e.get("name", "").startswith("enumerate(DataLoader)#"):
                dl.append((t0, t1))
        elif ph in ("B", "E") and pid in (SYNLOG_PID, BRIDGE_PID):
            key = (pid, e["tid"], e["name"])
            if ph == "B":
                open_be[key].append(ns_of(e["ts"]))
            else:
                t0 = open_be[key].pop()
                t1 = ns_of(e["ts"])
                host_work.append((t0, t1))
                slices_b[(pid, e["name"])].append((t0, t1))
                if e["name"] in ("synStreamSynchronize", "synEventSynchronize", "synDeviceSynchronize"):
                    syncs.append((t0, t1))
    assert not any(open_be.values())
    hw_u = union(host_work)
    excl = union(dl + syncs)
    dev_u = union([x for iv in by_class.values() for x in iv])
    host_bound = []
    for s in steps:
        lo, hi = s["start_ns"], s["start_ns"] + s["dur_ns"]
        gaps = [g for g in subtract([(lo, hi)], clip(dev_u, lo, hi)) if g[1] - g[0] >= 50 * US]
        work = subtract(clip(hw_u, lo, hi), excl)
        gl = []
        tot = 0
        for g in gaps:
            hb = length(intersect(work, [g]))
            tot += hb
            gl.append({"start_ns": g[0], "end_ns": g[1], "dur_ns": g[1] - g[0], "host_bound_ns": hb})
        gl.sort(key=lambda x: -x["host_bound_ns"])
        pct = D(tot * 100) / D(s["dur_ns"])
        host_bound.append({"step": s["name"], "host_bound_ns": tot,
                           "host_bound_pct": float(pct.quantize(D("0.01"))),
                           "flagged_at_5pct": bool(tot * 100 >= 5 * s["dur_ns"]),
                           "gaps_ge_50us": len(gl), "largest_gaps": gl[:3]})
    # per-step Synapse API / torch counts
    per_step = []
    for s in steps:
        lo, hi = s["start_ns"], s["start_ns"] + s["dur_ns"]
        c = Counter()
        for e in evs:
            if e.get("ph") not in ("X", "B"):
                continue
            t = ns_of(e["ts"])
            if not (lo <= t < hi):
                continue
            n = e.get("name", "")
            pid = e.get("pid")
            if pid == SYNLOG_PID and e["ph"] == "B":
                c["logger:" + n] += 1
            elif pid == HOST_TYPE and e["ph"] == "X":
                c["host_lane:" + (n.split(" ")[0])] += 1
            elif pid == PID and n in ("aten::item", "aten::_local_scalar_dense", "aten::_unique2"):
                c["torch:" + n] += 1
        rec = []
        for e in evs:
            if e.get("ph") == "X" and e.get("pid") == HOST_TYPE and e["name"].startswith("enqueueWithExternalEvents"):
                t = ns_of(e["ts"])
                if lo <= t < hi:
                    rec.append({"recipeId": e["args"]["recipeId"], "recipeName": e["args"]["recipeName"]})
        per_step.append({"step": s["name"], "counts": dict(sorted(c.items())), "launched_recipes": rec})
    first_seen = {}
    for i, ps in enumerate(per_step):
        for r in ps["launched_recipes"]:
            first_seen.setdefault(r["recipeName"], ps["step"])
    out = {"trace": os.path.basename(path), "format": "habana-bridge-json"}
    out.update(base)
    out.update({
        "events_by_process": dict(sorted(procs.items())),
        "device": {"name": DEVICE_NAME, "totalGlobalMem": TOTAL_MEM, "process": "/device:HPU:0", "pid": DEVICE_PID},
        "lanes": {
            "device_engines": engines,
            "host_synapse_lane": {"pid": HOST_TYPE, "tid": bridge_line(HOST_ENG), "name": tname[(HOST_TYPE, bridge_line(HOST_ENG))],
                                  "x_events": sum(1 for e in evs if e.get("ph") == "X" and e.get("pid") == HOST_TYPE)},
            "synapse_logger": {"pid": SYNLOG_PID, "be_pairs": sum(len(v) for (p, _), v in slices_b.items() if p == SYNLOG_PID)},
            "bridge_logs": {"pid": BRIDGE_PID, "be_pairs": sum(len(v) for (p, _), v in slices_b.items() if p == BRIDGE_PID)},
            "memory_logs": {"pid": MEM_PID, "instants": sum(1 for e in evs if e.get("pid") == MEM_PID and e.get("ph") == "i")},
        },
        "device_slices_by_class": {c: len(v) for c, v in sorted(by_class.items(), key=lambda kv: str(kv[0]))},
        "device_slices_by_cat": dict(sorted(Counter(e["cat"] for e in evs if e.get("ph") == "X" and e.get("pid") == DEVICE_PID).items())),
        "enqueue_flows": {"s": sum(1 for e in evs if e.get("cat") == "enqueue" and e["ph"] == "s"),
                          "f": sum(1 for e in evs if e.get("cat") == "enqueue" and e["ph"] == "f")},
        "device_steps": dstats,
        "host_bound": host_bound,
        "memory": truth_memory(doc, steps),
        "per_step": per_step,
        "recipe_first_seen": first_seen,
        "clock": {"bridge_ns_to_synapse_ns_offset": SYN_OFFSET_NS, "baseTimeNanoseconds": BASE_EPOCH_NS,
                  "note": "synapse_ns = bridge_ns + offset (TEF and HW CSV); epoch_ns = bridge_ns + baseTimeNanoseconds (metrics generated_on)"},
        "definitions": DEFINITIONS,
        "planted": planted,
    })
    return out


DEFINITIONS = {
    "time": "integer ns from the files' decimal text (µs x 1000, half away from zero), never through float",
    "inside_step": "start_ns <= t < start_ns + dur_ns (ProfilerStep# ranges of the bridge file; TEF/CSV use the "
                   "same windows shifted by clock.bridge_ns_to_synapse_ns_offset)",
    "device_slices": "bridge: ph X on pid 0 (/device:HPU:0); TEF: B/E matched FIFO per (pid, tid, id); "
                     "CSV: BEGIN/END matched FIFO per (Engine, Name, Context ID)",
    "engine_class": "from the lane name: optional '[HDn] '/'[Dn] ' prefix and leading '*' dropped, first word "
                    "MME / TPC / DMA|EDMA|PDMA|KDMA (-> DMA) / NIC",
    "busy_ns_by_class": "length of the union of the class's slices clipped to the step window",
    "device_busy_ns": "union of all device slices (every class) clipped to the step",
    "mme_tpc_overlap_ns": "|MME union ∩ TPC union| inside the step",
    "mme_idle_windows": "gaps between consecutive MME-union intervals inside the step (MME work on both sides); "
                        "tpc_busy_ns = |TPC union ∩ gap|; only gaps with tpc_busy_ns > 0 are counted",
    "host_bound": "gaps >= 50 µs in the union of all device slices inside the step; host work = union of cpu_op X "
                  "(pid %d, any thread) + Runtime X on the Synapse host lane (pid %d) + B/E spans of Synapse Logger "
                  "and Bridge Logs, minus DataLoader ranges and syn*Synchronize spans; host_bound_ns = |work ∩ gaps|; "
                  "flagged when >= 5 %% of the step (docs/findings.md host_bound_gap defaults)" % (PID, HOST_TYPE),
    "memory.device": "a [memory] event's device: Device Type 0 -> cpu; Device Type 1 (c10 CUDA) or 20 "
                     "(PrivateUse1) in a file whose deviceProperties name a Gaudi (GAUDI/Gaudi/HPU) -> "
                     "hpu:<Device Id> (the bridge's Memory Logs hard-code Device Type 1 for the HPU); "
                     "otherwise c10's name (1 cuda, 15 hpu, 20 privateuseone)",
    "memory": "per device, events in time order (file order on ties): allocations / frees = Bytes > 0 / < 0; "
              "peaks = max Total Allocated / Total Reserved; integrity_breaks = successive events whose Total Allocated "
              "differ by other than Bytes; never_freed_bytes = allocations (by Addr) with no "
              "later free; per step: start_allocated_bytes = Total Allocated after the last event before the "
              "step (the first event's total minus its Bytes when none), peak = max(start, totals inside)",
    "per_step.counts": "events starting inside the step: 'logger:' = Synapse Logger B events, 'host_lane:' = X events "
                       "on the Synapse profiler host lane (first word of the name), 'torch:' = cpu_op X",
}


def memory_device(doc, args):
    """The device of a `[memory]` event as the file describes it (DEFINITIONS["memory.device"])."""
    kind, index = args["Device Type"], max(args.get("Device Id", 0), 0)
    names = [str(d.get("name", "")) for d in doc.get("deviceProperties", [])]
    gaudi = any("GAUDI" in n or "Gaudi" in n or "HPU" in n for n in names)
    if kind == 0:
        return "cpu"
    if gaudi and kind in (1, 20):
        return f"hpu:{index}"
    return {1: "cuda", 15: "hpu", 20: "privateuseone"}.get(kind, "device") + f":{index}"


def truth_memory(doc, steps):
    """Per device, what the file's `[memory]` events show (DEFINITIONS["memory"])."""
    by_dev = defaultdict(list)
    for i, e in enumerate(doc["traceEvents"]):
        if e.get("name") == "[memory]" and e.get("ph") == "i":
            by_dev[memory_device(doc, e["args"])].append((ns_of(e["ts"]), i, e["args"]))
    out = []
    for dev, evs in sorted(by_dev.items()):
        evs.sort(key=lambda x: (x[0], x[1]))
        live = {}
        breaks = 0
        for k, (_, _, a) in enumerate(evs):
            if a["Bytes"] > 0:
                live[a["Addr"]] = a["Bytes"]
            elif a["Bytes"] < 0:
                live.pop(a["Addr"], None)
            if k and a["Total Allocated"] - evs[k - 1][2]["Total Allocated"] != a["Bytes"]:
                breaks += 1
        per_step = []
        for st in steps:
            lo, hi = st["start_ns"], st["start_ns"] + st["dur_ns"]
            before = [x for x in evs if x[0] < lo]
            base = before[-1][2]["Total Allocated"] if before else evs[0][2]["Total Allocated"] - evs[0][2]["Bytes"]
            inside = [x[2]["Total Allocated"] for x in evs if lo <= x[0] < hi]
            per_step.append({"step": st["name"], "start_allocated_bytes": base,
                             "peak_allocated_bytes": max([base] + inside)})
        out.append({
            "device": dev,
            "processes": sorted({doc["traceEvents"][i]["pid"] for _, i, _ in evs}),
            "device_type": sorted({a["Device Type"] for _, _, a in evs}),
            "allocations": sum(1 for x in evs if x[2]["Bytes"] > 0),
            "frees": sum(1 for x in evs if x[2]["Bytes"] < 0),
            "bytes_allocated": sum(x[2]["Bytes"] for x in evs if x[2]["Bytes"] > 0),
            "peak_allocated_bytes": max(x[2]["Total Allocated"] for x in evs),
            "peak_reserved_bytes": max(x[2]["Total Reserved"] for x in evs),
            "integrity_breaks": breaks,
            "never_freed_bytes": sum(live.values()),
            "steps": per_step,
        })
    return out


def truth_tef(path, planted, steps_bridge):
    with gzip.open(path, "rb") as f:
        raw = f.read().decode("utf-8")
    assert not raw.rstrip().endswith("]"), "TEF array must stay open"
    evs = json.loads(raw + "]", parse_float=D)
    by_ph = Counter(e.get("ph", "") for e in evs)
    type_names, eng_names = {}, {}
    for e in evs:
        if e.get("ph") == "M":
            if e["name"] == "process_name":
                type_names[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                eng_names[(e["pid"], e["tid"])] = e["args"]["name"]
    open_ = defaultdict(list)
    slices = defaultdict(list)
    for e in evs:
        if e.get("ph") == "B":
            open_[(e["pid"], e["tid"], e["id"])].append(ns_of(e["ts"]))
        elif e.get("ph") == "E":
            b = open_[(e["pid"], e["tid"], e["id"])].pop(0)
            slices[(e["pid"], e["tid"])].append((b, ns_of(e["ts"])))
    assert not any(open_.values())
    engines = []
    by_class = defaultdict(list)
    for (pid, tid), n in sorted(eng_names.items()):
        tn = type_names[pid]
        cls = "HOST" if tn == "***Host" else engine_class(tn)
        engines.append({"pid": pid, "tid": tid, "engine_type": tn, "name": n, "class": cls,
                        "slices_be": len(slices.get((pid, tid), []))})
        if cls != "HOST":
            by_class[cls].extend(slices.get((pid, tid), []))
    steps = [{"name": s["name"], "start_ns": s["start_ns"] + SYN_OFFSET_NS, "dur_ns": s["dur_ns"]} for s in steps_bridge]
    host_x = Counter(e["name"].split(" ")[0] for e in evs if e.get("ph") == "X")
    return {
        "trace": os.path.basename(path), "format": "synapse-tef-json",
        "array_terminated": False,
        "events": len(evs), "events_by_ph": dict(sorted(by_ph.items())),
        "engine_types": [{"pid": p, "name": n} for p, n in sorted(type_names.items())],
        "engines": engines,
        "device_slices_by_class": {c: len(v) for c, v in sorted(by_class.items())},
        "host_x_events_by_name": dict(sorted(host_x.items())),
        "counters": {"events": by_ph.get("C", 0), "arg_keys": ["Min", "Max", "Avg", "Match"]},
        "steps_note": "TEF has no ProfilerStep; step windows are the bridge trace's ProfilerStep ranges + clock offset",
        "device_steps": device_step_stats(steps, by_class),
        "definitions": DEFINITIONS,
        "planted": planted,
    }


def truth_csv(path, planted, steps_bridge, extra):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, data = rows[0], rows[1:]
    assert header == CSV_HEADER and all(len(r) == 23 for r in rows)
    by_type = Counter(r[3] for r in data)
    by_desc = Counter((r[3], r[14]) for r in data)
    open_ = defaultdict(list)
    slices = defaultdict(list)
    insts = Counter()
    ctrs = Counter()
    wrapped = []
    for r in data:
        t = ns_of(r[4])
        if r[3] == "BEGIN":
            open_[(r[2], r[0], r[9])].append(t)
        elif r[3] == "END":
            slices[r[2]].append((open_[(r[2], r[0], r[9])].pop(0), t))
        elif r[3] == "INSTANT":
            insts[r[2]] += 1
        elif r[3] == "COUNTER":
            ctrs[r[2]] += 1
            if int(r[15]) >= 1 << 63:
                wrapped.append({"engine": r[2], "timestamp": r[4], "value": r[15], "as_i64": int(r[15]) - (1 << 64)})
    assert not any(open_.values())
    engs = sorted(set(list(slices) + list(insts) + list(ctrs)))
    engines = [{"engine": e, "class": engine_class(e), "slices": len(slices.get(e, [])), "instants": insts.get(e, 0),
                "counters": ctrs.get(e, 0)} for e in engs]
    by_class = defaultdict(list)
    for e, iv in slices.items():
        by_class[engine_class(e)].extend(iv)
    steps = [{"name": s["name"], "start_ns": s["start_ns"] + SYN_OFFSET_NS, "dur_ns": s["dur_ns"]} for s in steps_bridge]
    recipes = Counter((r[7], r[8]) for r in data if r[7])
    return {
        "trace": os.path.basename(path), "format": "habana-hw-csv",
        "rows": len(data), "columns": len(header), "rows_by_event_type": dict(sorted(by_type.items())),
        "rows_by_event_and_description": {f"{a} {b}": n for (a, b), n in sorted(by_desc.items())},
        "slices_by_class": {c: len(v) for c, v in sorted(by_class.items(), key=lambda kv: str(kv[0]))},
        "engines": engines,
        "recipes": [{"recipe_id": int(a), "recipe_name": b, "rows": n} for (a, b), n in sorted(recipes.items())],
        "context_ids": sorted({int(r[9]) for r in data if r[9]}),
        "spmu": {"counters": by_type.get("COUNTER", 0), "wrapped_u64": wrapped},
        "tpc_qman_cmd_exe": extra["qman"],
        "covered_steps": [f"ProfilerStep#{s}" for s in CSV_STEPS],
        "timestamp_note": "6-decimal µs; sub-ns digits are < .5 ns so rounding and truncating to ns agree",
        "device_steps": device_step_stats(steps, by_class),
        "definitions": DEFINITIONS,
        "planted": planted,
    }


def truth_metrics(path, w):
    with open(path) as f:
        text = f.read()
    doc = json.loads(text, parse_float=D)
    per_trigger = Counter(o["triggered_by"] for o in doc)
    gc_series = [o["statistics"]["TotalNumber"] for o in doc
                 if o["metric_name"] == "graph_compilation" and o["triggered_by"] == "mark_step"]
    final = {o["metric_name"]: o["statistics"] for o in doc if o["triggered_by"] == "process_exit"}

    def plain(x):
        if isinstance(x, D):
            return int(x) if x == x.to_integral_value() and "." not in str(x) else float(x)
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, list):
            return [plain(v) for v in x]
        return x

    return {
        "trace": os.path.basename(path), "format": "habana-metrics",
        "objects": len(doc), "objects_by_trigger": dict(sorted(per_trigger.items())),
        "metrics_per_dump": ["graph_compilation", "cpu_fallback", "memory_defragmentation", "recipe_cache"],
        "mark_step_dumps": per_trigger["mark_step"] // 4,
        "graph_compilation_total_after_each_mark_step": gc_series,
        "mark_step_dump_steps": [f"ProfilerStep#{la['step']}" for la in w.launches],
        "dumps": [{"generated_on": iso(t), "triggered_by": trig,
                   "bridge_ns": t, "graph_compilation_TotalNumber": snap[0][1]["TotalNumber"],
                   "cpu_fallback_TotalNumber": snap[1][1]["TotalNumber"],
                   "recipe_cache_TotalMiss": snap[3][1]["TotalMiss"]} for t, trig, snap in w.metric_dumps],
        "clock_note": "generated_on = datetime(baseTimeNanoseconds + bridge_ns) (µs, no timezone); the "
                      "mark_step dump is written at the end of the bridge's MarkStep span",
        "final": plain(final),
        "env": {"PT_HPU_METRICS_FILE": "train_hpu.metrics.json", "PT_HPU_METRICS_DUMP_TRIGGERS": "process_exit,mark_step",
                "PT_HPU_METRICS_GC_DETAILS": "1", "PT_HPU_ENABLE_CACHE_METRICS": "1"},
    }


# ---------------------------------------------------------------- planted summary (from the model)
def planted_summary(w):
    st3, st4 = w.steps[3], w.steps[4]
    la3 = st3["launches"][0]
    p = la3["plant"]
    mme_prev_end = max(d["e"] for d in w.dev if d["launch"] == la3["seq"] and d["eng"] in MME_ENG and d["e"] <= p["tpc_stretch_b"])
    mme_next_b = min(d["b"] for d in w.dev if d["launch"] == la3["seq"] and d["eng"] in MME_ENG and d["b"] >= p["tpc_stretch_e"])
    reduce_slices = [d for d in w.dev if d["launch"] == la3["seq"] and "bias_grad" in d["name"]]
    comp3 = next(c for c in w.compiles if c["step"] == 3)
    fb = w.planted["cpu_fallback"]
    hb = w.planted["host_bound_ops"]
    # device idle window around the planted host ops (step #4)
    dev_iv = union([(d["b"], d["e"]) for d in w.dev])
    lo, hi = st4["start"], st4["end"]
    idle = [g for g in subtract([(lo, hi)], clip(dev_iv, lo, hi)) if g[0] <= hb["b"] and g[1] >= hb["e"]]
    assert len(idle) == 1
    return {
        "warmup_steps": ["ProfilerStep#0"],
        "clean_steps": ["ProfilerStep#1", "ProfilerStep#2"],
        "mme_idle_behind_tpc": {
            "step": "ProfilerStep#3", "count": 1,
            "recipe_id": la3["recipe"]["id"], "recipe_name": la3["recipe"]["name"],
            "mme_idle_start_ns": mme_prev_end, "mme_idle_end_ns": mme_next_b, "mme_idle_ns": mme_next_b - mme_prev_end,
            "tpc_stretch_start_ns": p["tpc_stretch_b"], "tpc_stretch_end_ns": p["tpc_stretch_e"],
            "tpc_busy_ns": p["tpc_stretch_e"] - p["tpc_stretch_b"],
            "tpc_kernel": "reduce_sum_fwd_f32", "tpc_nodes": PLANT_NODES, "tpc_slices": len(reduce_slices),
            "synapse_clock": {"mme_idle_start_ns": mme_prev_end + SYN_OFFSET_NS, "mme_idle_end_ns": mme_next_b + SYN_OFFSET_NS},
            "note": "bridge clock ns; MME busy before and after in the same graph (launch seq %d)" % la3["seq"],
        },
        "recompile": {
            "step": "ProfilerStep#3", "count": 1,
            "synGraphCompile_start_ns": comp3["b"], "synGraphCompile_end_ns": comp3["e"],
            "compile_ns": comp3["e"] - comp3["b"], "compile_us_in_metrics": (comp3["e"] - comp3["b"]) // US,
            "recipe_id": comp3["recipe"]["id"], "recipe_name": comp3["recipe"]["name"],
            "cause": f"sequence length {S} -> {S_STEP3} in step #3's batch (new input shape)",
            "warmup_compiles": [{"step": f"ProfilerStep#{c['step']}", "recipe_name": c["recipe"]["name"],
                                 "start_ns": c["b"], "end_ns": c["e"]} for c in w.compiles if c["step"] == 0],
            "metrics_graph_compilation_total": len(w.compiles),
        },
        "sync_point": {
            "count_per_step": [2 if s["n"] == 3 else 1 for s in w.steps],
            "per_step": [{"step": s["name"], "call": "loss.item()", "torch_ops": ["aten::item", "aten::_local_scalar_dense"],
                          "synStreamSynchronize_start_ns": s["sync"][0], "synStreamSynchronize_end_ns": s["sync"][1],
                          "blocked_ns": s["sync"][1] - s["sync"][0]} for s in w.steps],
            "extra": {"step": "ProfilerStep#3", "call": "inside the CPU fallback of aten::_unique2 (D2H copy of its input)",
                      "synStreamSynchronize_start_ns": fb["sync"][0], "synStreamSynchronize_end_ns": fb["sync"][1]},
            "note": "each API call appears twice in the bridge file: Synapse Logger B/E (pid %d) and the Synapse "
                    "profiler host lane X (pid %d); count once" % (SYNLOG_PID, HOST_TYPE),
        },
        "cpu_fallback": {
            "step": "ProfilerStep#3", "count": 1, "op": "aten::_unique2",
            "start_ns": fb["op"]["ts"], "end_ns": fb["op"]["ts"] + fb["op"]["dur"],
            "metrics": {"TotalNumber": 1, "FallbackOps": {"aten::_unique2": 1}},
        },
        "host_bound_gap": {
            "step": "ProfilerStep#4", "count": 1,
            "host_ops_start_ns": hb["b"], "host_ops_end_ns": hb["e"], "host_ops": hb["ops"],
            "all_engines_idle_start_ns": idle[0][0], "all_engines_idle_end_ns": idle[0][1],
            "note": "96 small CPU ops (aten::select/mul/add_) between the DataLoader and the H2D copies",
        },
        "expected_findings_per_step": {
            "ProfilerStep#0": ["sync_point", "host_bound_gap (warm-up: 2 graph compiles, device idle)"],
            "ProfilerStep#1": ["sync_point"],
            "ProfilerStep#2": ["sync_point"],
            "ProfilerStep#3": ["sync_point (item; plus the fallback's own D2H sync under aten::_unique2)", "recompile",
                               "mme_idle_behind_tpc", "cpu_fallback",
                               "host_bound_gap (consequence of the 52 ms recompile, device idle)"],
            "ProfilerStep#4": ["sync_point", "host_bound_gap"],
        },
    }


def validate_files(p_bridge, p_tef, p_csv, p_met):
    """Structural checks on the written files (they must parse and be well formed)."""
    doc = load_json_exact(p_bridge)
    ev = doc["traceEvents"]
    lanes = defaultdict(list)
    for e in ev:
        if e.get("ph") == "X":
            t0 = ns_of(e["ts"])
            lanes[(str(e["pid"]), e["tid"])].append((t0, t0 + ns_of(e["dur"])))
    for k, v in lanes.items():
        v.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for a, b in v:
            while stack and stack[-1] <= a:
                stack.pop()
            assert not stack or b <= stack[-1], f"partial overlap on {k} at {a}"
            stack.append(b)
        if k[0] == str(DEVICE_PID):
            assert all(x[1] <= y[0] for x, y in zip(v, v[1:])), f"device lane {k} overlaps"
    open_be = defaultdict(list)
    for e in ev:
        if e.get("ph") == "B":
            open_be[(e["pid"], e["tid"])].append(e["name"])
        elif e.get("ph") == "E":
            assert open_be[(e["pid"], e["tid"])].pop() == e["name"]
    assert not any(open_be.values())
    flows = defaultdict(Counter)
    for e in ev:
        if e.get("ph") in ("s", "f"):
            flows[(e["cat"], e["id"])][e["ph"]] += 1
    assert all(c == Counter({"s": 1, "f": 1}) for c in flows.values())
    # TEF: open array, M first, B/E balanced per (pid, tid, id), no overlap per engine
    with gzip.open(p_tef, "rb") as f:
        raw = f.read().decode("utf-8")
    assert raw.startswith("[\n") and not raw.rstrip().endswith("]")
    tef = json.loads(raw + "]", parse_float=D)
    first_non_m = next(i for i, e in enumerate(tef) if e["ph"] != "M")
    assert all(e["ph"] != "M" for e in tef[first_non_m:])
    opened = {}
    last_end = defaultdict(int)
    for e in tef:
        k = (e["pid"], e["tid"], e.get("id"))
        if e["ph"] == "B":
            assert k not in opened
            opened[k] = ns_of(e["ts"])
            assert opened[k] >= last_end[(e["pid"], e["tid"])]
        elif e["ph"] == "E":
            opened.pop(k)
            last_end[(e["pid"], e["tid"])] = ns_of(e["ts"])
    assert not opened
    with open(p_csv, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == CSV_HEADER and all(len(r) == 23 for r in rows)
    with open(p_met) as f:
        met = json.load(f)
    assert all(set(o) == {"metric_name", "triggered_by", "generated_on", "statistics"} for o in met)


def check(truth_b, truth_t, truth_c, planted):
    """The written files must show what was planted."""
    ds = {s["name"]: s for s in truth_b["device_steps"]}
    m = planted["mme_idle_behind_tpc"]
    top = ds["ProfilerStep#3"]["top_mme_idle_windows"][0]
    assert top["start_ns"] == m["mme_idle_start_ns"] and top["end_ns"] == m["mme_idle_end_ns"], (top, m)
    assert top["tpc_busy_ns"] == m["tpc_busy_ns"], (top, m)
    for n in ("ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#4"):
        assert ds[n]["max_mme_idle_tpc_busy_ns"] < 20 * US, (n, ds[n]["max_mme_idle_tpc_busy_ns"])
    hb = {h["step"]: h for h in truth_b["host_bound"]}
    assert not hb["ProfilerStep#1"]["flagged_at_5pct"] and not hb["ProfilerStep#2"]["flagged_at_5pct"], hb
    assert hb["ProfilerStep#4"]["flagged_at_5pct"] and hb["ProfilerStep#3"]["flagged_at_5pct"]
    g = hb["ProfilerStep#4"]["largest_gaps"][0]
    assert g["start_ns"] == planted["host_bound_gap"]["all_engines_idle_start_ns"]
    assert g["end_ns"] == planted["host_bound_gap"]["all_engines_idle_end_ns"]
    for ps in truth_b["per_step"]:
        c = ps["counts"]
        exp = 2 if ps["step"] == "ProfilerStep#3" else 1
        assert c.get("logger:synStreamSynchronize") == exp and c.get("host_lane:synStreamSynchronize") == exp, ps
        assert c.get("torch:aten::_local_scalar_dense") == 1
        assert c.get("logger:synGraphCompile", 0) == {"ProfilerStep#0": 2, "ProfilerStep#3": 1}.get(ps["step"], 0)
    assert truth_b["recipe_first_seen"][planted["recompile"]["recipe_name"]] == "ProfilerStep#3"
    # memory: the CPU batches and the HPU's (Memory Logs, Device Type 1 on a GAUDI3) both go back to
    # the same baseline at every step start; nothing is planted to grow
    mem = {m["device"]: m for m in truth_b["memory"]}
    assert sorted(mem) == ["cpu", "hpu:0"], sorted(mem)
    assert mem["hpu:0"]["processes"] == [MEM_PID] and mem["hpu:0"]["device_type"] == [1]
    for m in mem.values():
        starts = {st["start_allocated_bytes"] for st in m["steps"]}
        assert len(starts) == 1, (m["device"], m["steps"])
        assert m["never_freed_bytes"] == 0 and m["allocations"] == m["frees"], m
        assert m["integrity_breaks"] == 0, m
    # TEF and CSV agree with the bridge (same clock up to the offset)
    for name in ("ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"):
        bt = ds[name]
        tt = next(s for s in truth_t["device_steps"] if s["name"] == name)
        ct = next(s for s in truth_c["device_steps"] if s["name"] == name)
        assert bt["busy_ns_by_class"] == tt["busy_ns_by_class"], name
        for cls in ("MME", "TPC"):
            assert ct["busy_ns_by_class"][cls] == bt["busy_ns_by_class"][cls], (name, cls)
        assert ct["mme_tpc_overlap_ns"] == bt["mme_tpc_overlap_ns"]
        assert ct["max_mme_idle_tpc_busy_ns"] == bt["max_mme_idle_tpc_busy_ns"]
    assert len(truth_c["spmu"]["wrapped_u64"]) == 1


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    w = World()
    run_program(w)
    p_bridge = os.path.join(OUT_DIR, "train_hpu.bridge.json.gz")
    p_tef = os.path.join(OUT_DIR, "train_hpu.tef.json.gz")
    p_csv = os.path.join(OUT_DIR, "train_hpu.hw.csv")
    p_met = os.path.join(OUT_DIR, "train_hpu.metrics.json")
    write_bridge(w, p_bridge)
    write_tef(w, p_tef)
    extra = write_csv(w, p_csv)
    write_metrics(w, p_met)
    validate_files(p_bridge, p_tef, p_csv, p_met)
    planted = planted_summary(w)
    tb = truth_bridge(p_bridge, w, planted)
    steps_bridge = tb["steps"]
    tt = truth_tef(p_tef, planted, steps_bridge)
    tc = truth_csv(p_csv, planted, steps_bridge, extra)
    tm = truth_metrics(p_met, w)
    tm["planted"] = {"recompile": planted["recompile"], "cpu_fallback": planted["cpu_fallback"]}
    assert tm["final"]["graph_compilation"]["TotalNumber"] == 3
    assert tm["final"]["cpu_fallback"]["FallbackOps"] == {"aten::_unique2": 1}
    check(tb, tt, tc, planted)
    for path, t in ((p_bridge, tb), (p_tef, tt), (p_csv, tc), (p_met, tm)):
        stem = os.path.basename(path)
        for suf in (".json.gz", ".json", ".csv"):
            if stem.endswith(suf):
                stem = stem[: -len(suf)]
                break
        out = os.path.join(OUT_DIR, stem + ".truth.json")
        with open(out, "w") as f:
            json.dump(t, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"{os.path.relpath(path)}  {os.path.getsize(path):,} B  -> {os.path.relpath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
