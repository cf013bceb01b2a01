#!/usr/bin/env python3
"""Independent Gaudi 3 lazy-mode training runs with planted problems, and their truth.

Written from ../shared/reference/habana-formats.md (§2.4 Synapse TEF, §3 HW-trace CSV, §5.2 bridge
merge, §5.3 Kineto plugin) and kineto-format.md, not from samples/gen/make_gaudi_samples.py. The
generator first builds one *model* of a run (host slices on one clock in integer ns, device node
occurrences with their per-engine slices, the compiles and syncs it planted), then writes that model
in each file shape, and computes the truth from the model with the rules in README.md — never from
steplens output.

    python3 samples/gaudi-cases/generate.py      # rewrites samples/gaudi-cases/*

Deterministic: fixed seeds, gzip mtime 0, sorted keys where order is free.
"""

import gzip
import io
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
US = 1_000
MS = 1_000_000

# Clocks. Kineto CPU `ts` is µs on a process-relative monotonic clock; the Synapse profiler clock
# (TEF, HW CSV) is another one. Only differences matter; both keep ns exact in 3 decimals.
KINETO_BASE_NS = 3_912_004_117_000
SYN_BASE_NS = 554_804_000_000_000 - KINETO_BASE_NS

PID = 41877          # python process
MAIN_TID = 41877
DEVICE_PID_BRIDGE = 0          # bridge 1.19 device_lane_ 0
DEVICE_PID_PLUGIN = 1          # older Kineto-plugin code used 1 (habana-formats.md §5.2 table)
SYN_HOST_PID = 11              # engineType of ***Host (numeric value unconfirmed; any small int)
BRIDGE_LOG_PID = PID + 20000
SYN_LANE_PID, SYN_LANE_TID = PID + 1, PID + 1   # the plugin's own host lane for Synapse calls
MEMORY_PID = PID + 30000

DIES = 8
TPC_PER_DIE = 6
# Engines: (class, die, index-in-die). Gaudi 3 as in the real HW CSV: [HDn] TPC k and [HDn] MME.
TPCS = [("TPC", d, k) for d in range(DIES) for k in range(TPC_PER_DIE)]
MMES = [("MME", d, 0) for d in range(DIES)]
DMAS = [("EDMA", 0, 0), ("EDMA", 0, 1)]
ENGINES = MMES + TPCS + DMAS


def hw_name(e):
    cls, d, k = e
    if cls == "MME":
        return f"[HD{d}] MME"
    if cls == "TPC":
        return f"[HD{d}] TPC {k}"
    return f"[D0] EDMA {k}"


def flat_index(e):
    """Engine index within its class, across dies."""
    cls, d, k = e
    if cls == "TPC":
        return d * TPC_PER_DIE + k
    if cls == "MME":
        return d
    return k


def bridge_tid(e):
    # typeIdx*1000 + engineIndex, with the Gaudi2 examples of §5.2: TPC 7000+i, MME 6000+i, EDMA 4000+i.
    return {"TPC": 7000, "MME": 6000, "EDMA": 4000}[e[0]] + flat_index(e)


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


def intersect(a, b):
    a, b = union(a), union(b)
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


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


def complement(iv, lo, hi):
    return subtract([(lo, hi)], iv)


# ------------------------------------------------------------------------------------ graphs
class Recipe:
    def __init__(self, rid, graph, units):
        self.id = rid
        self.graph = graph                      # "g_0"
        self.name = f".graph_dumps/{graph}_0"   # lazy-mode recipe name (§5.2)
        self.handle = 0x55D3A1E04000 + rid * 0x1F40
        self.units = units


def unit(mme=None, tpcs=()):
    """One stretch of a graph: an MME node (all 8 MMEs) with TPC nodes running inside it, or TPC only.
    mme = (node_suffix, guid, dur_ns); tpcs = [(node_suffix, guid, dur_ns, n_engines, offset_ns)]."""
    return {"mme": mme, "tpcs": list(tpcs)}


def fwd_bwd_units(rng, n_units, mme_us, tpc_engines, transposes=0, transpose_at=2):
    fwd = ["layer_norm_fwd_bf16", "gelu_fwd_bf16", "add_fwd_bf16", "softmax_fwd_bf16", "dropout_fwd_bf16"]
    bwd = ["gelu_bwd_bf16", "layer_norm_bwd_bf16", "add_fwd_bf16", "softmax_bwd_bf16", "reduce_sum_fwd_bf16"]
    units, k = [], 0
    for i in range(n_units):
        guids = fwd if i < n_units // 2 else bwd
        mdur = rng.randint(mme_us[0], mme_us[1]) * US
        mme = (f"gemm_{k}", "gemm" if i < n_units // 2 else "gemm_dedx", mdur)
        k += 1
        g = guids[i % len(guids)]
        tdur = rng.randint(int(mdur * 0.25), int(mdur * 0.45))
        tpcs = [(f"{g.rsplit('_', 1)[0]}_{k}", g, tdur, tpc_engines, rng.randint(20, 60) * US)]
        k += 1
        if transposes and transpose_at <= i < transpose_at + transposes:
            # A layout transpose materialised on 24 TPCs, inside the same MME node.
            tpcs.append((f"transpose_{k}", "transpose_fwd_bf16", rng.randint(96, 104) * US, 24, 4 * US))
            k += 1
        units.append(unit(mme, tpcs))
    return units


def optimizer_units():
    # AdamW on TPC only: ~40 µs of TPC work with the MMEs idle.
    return [unit(None, [("adamw_0", "adamw_fwd_f32", 12 * US, 48, 0),
                        ("mul_1", "mult_fwd_f32", 11 * US, 48, 2 * US),
                        ("add_2", "add_fwd_f32", 11 * US, 48, 2 * US)])]


class Model:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.host = []        # {kind, name, start, end, args}; kinds: step dl ann op hop rt
        self.slices = []      # per-engine device slices
        self.nodes = []       # node occurrences
        self.compiles = []    # {start, end, recipe}
        self.syncs = []       # {start, end, name, user}
        self.launches = []    # {start, end, recipe, ctx, dev_start, dev_end}
        self.dev_free = 0
        self.ctx = 0
        self.compiled = set()
        self.steps = []       # (name, start, end)

    # host ---------------------------------------------------------------------------
    def h(self, kind, name, start, end, **args):
        assert end >= start, (name, start, end)
        self.host.append({"kind": kind, "name": name, "start": start, "end": end, "args": args})

    def ops(self, t, until, names):
        """Back-to-back lazy-mode host ops (graph building) from t to about `until`."""
        i = 0
        while t < until - 20 * US:
            d = min(self.rng.randint(30, 110) * US + self.rng.randint(0, 999), until - t)
            self.h("op", names[i % len(names)], t, t + d)
            t += d + self.rng.randint(2, 5) * US
            i += 1
        return t

    # device -------------------------------------------------------------------------
    def execute(self, recipe, ready, after_ctx=True):
        """Queue one launch of `recipe`; the device starts when the launch has landed and it is free."""
        rng = self.rng
        self.ctx += 1
        jitter = rng.randint(12, 38) * US
        t = max(ready + 15 * US, self.dev_free + jitter)
        start = t
        for u in recipe.units:
            ustart, uend = t, t
            if u["mme"]:
                suffix, guid, dur = u["mme"]
                d = int(dur * rng.uniform(0.997, 1.003))
                self.node(recipe, suffix, guid, "MME", MMES, t, d, stagger_us=3)
                uend = max(uend, self.nodes[-1]["end"])
            tt = t
            for suffix, guid, dur, n, off in u["tpcs"]:
                tt = max(tt + off, ustart + off)
                d = int(dur * rng.uniform(0.997, 1.003))
                engines = sorted(rng.sample(TPCS, n)) if n < len(TPCS) else TPCS
                self.node(recipe, suffix, guid, "TPC", engines, tt, d, stagger_us=4)
                tt = self.nodes[-1]["end"] + 2 * US
                uend = max(uend, self.nodes[-1]["end"])
            t = uend + rng.randint(2, 8) * US
        end = max(n["end"] for n in self.nodes if n["ctx"] == self.ctx)
        self.dev_free = end
        return start, end

    def node(self, recipe, suffix, guid, cls, engines, t, dur, stagger_us):
        name = f"{recipe.graph}_{suffix}"
        sl = []
        for e in engines:
            s = t + self.rng.randint(0, stagger_us * 1000)
            d = dur + self.rng.randint(-800, 800)
            sl.append({"engine": e, "start": s, "end": s + d})
        for x in sl:
            x.update(node=name, guid=guid, recipe=recipe, ctx=self.ctx, cls=cls)
            self.slices.append(x)
        self.nodes.append({"name": name, "guid": guid, "cls": cls, "recipe": recipe, "ctx": self.ctx,
                           "start": min(x["start"] for x in sl), "end": max(x["end"] for x in sl),
                           "engines": len(sl), "wall": total([(x["start"], x["end"]) for x in sl])})

    def dma(self, name, ready, dur, after_queue):
        """A copy on an EDMA engine: H2D beside compute (ready at once) or D2H queued after compute."""
        t = max(ready + 5 * US, self.dev_free + 3 * US) if after_queue else ready + 5 * US
        e = DMAS[0] if "HtoD" in name else DMAS[1]
        self.ctx += 1
        self.slices.append({"engine": e, "start": t, "end": t + dur, "node": name, "guid": name,
                            "recipe": None, "ctx": self.ctx, "cls": "DMA"})
        if after_queue:
            self.dev_free = t + dur
        return t + dur

    # lazy-mode pieces ---------------------------------------------------------------------
    def mark_step(self, t, recipe, compile_ns=0, kind="hop"):
        """htcore.mark_step(): the bridge chain SyncTensorsGraphInternal > [synGraphCompile] >
        LaunchSyncTensorsGraph > synLaunchWithExternalEvents."""
        s0 = t
        t += 8 * US
        if compile_ns:
            self.h("rt", "synGraphCompile", t, t + compile_ns, recipe=recipe)
            self.compiles.append({"start": t, "end": t + compile_ns, "recipe": recipe.name})
            t += compile_ns + 3 * US
        self.compiled.add(recipe.name)
        l0 = t
        t += 4 * US
        self.h("rt", "synLaunchWithExternalEvents", t, t + 25 * US, recipe=recipe)
        ready = t + 25 * US
        ds, de = self.execute(recipe, ready)
        self.launches.append({"start": t, "end": ready, "recipe": recipe, "ctx": self.ctx,
                              "dev_start": ds, "dev_end": de})
        t = ready + 4 * US
        self.h(kind, "LaunchSyncTensorsGraph", l0, t)
        t += 3 * US
        self.h(kind, "SyncTensorsGraphInternal", s0, t)
        return t + 2 * US


# ------------------------------------------------------------------------------------ torch runs
FWD_OPS = ["aten::linear", "aten::layer_norm", "aten::gelu", "aten::add", "aten::dropout", "aten::view"]
BWD_OPS = ["autograd::engine::evaluate_function: AddmmBackward0",
           "autograd::engine::evaluate_function: GeluBackward0",
           "autograd::engine::evaluate_function: NativeLayerNormBackward0",
           "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"]
OPT_OPS = ["aten::_foreach_mul_", "aten::_foreach_add_", "aten::_foreach_addcmul_", "aten::_foreach_sqrt",
           "aten::_foreach_addcdiv_"]
TAIL_OPS = ["aten::detach", "aten::add_", "aten::mul"]

N_STEPS = 6
SYNC_CALL_SITE = "train.py:52"   # `print(loss.item())` in compile_in_sync (Python frames recorded)


def torch_run(scenario, seed):
    m = Model(seed)
    rng = m.rng
    transposes = 6 if scenario == "transposes" else 0
    A = Recipe(1, "g_0", fwd_bwd_units(rng, 20, (480, 640), 24, transposes))
    B = Recipe(2, "g_1", optimizer_units())
    # compile_in_sync: loss.item() between forward and backward splits graph g_0 into a forward+loss
    # graph (g_2) and a backward graph (g_3), both new recipes.
    C = Recipe(3, "g_2", A.units[:10] + [unit(None, [("mse_loss_0", "mse_loss_fwd_bf16", 30 * US, 24, 0)])])
    D = Recipe(4, "g_3", A.units[10:])
    # host_gaps: a new batch shape in step 5 gives a new recipe of the same graph.
    E = Recipe(5, "g_4", [unit((s, g, int(d * 1.04)), [(a, b, int(c * 1.04), n, o) for a, b, c, n, o in u["tpcs"]])
                          for u in A.units for (s, g, d) in [u["mme"]]])
    dev_nominal = sum(max(u["mme"][2] if u["mme"] else 0,
                          max((o + d for _, _, d, _, o in u["tpcs"]), default=0)) + 5 * US for u in A.units)
    dev_nominal += 40 * US + 2 * 25 * US
    host_period = dev_nominal - 140 * US   # the host runs slightly ahead: the device never waits
    m.compiled |= {A.name, B.name}          # compiled in the unprofiled warm-up
    with_stack = scenario == "compile_in_sync"
    m.pyid = 0
    t = 1_000 * US

    for n in range(0, N_STEPS + 1):
        S = t
        recorded = n >= 1
        # DataLoader: next(batch) fully covered by collate ops (no stall), then the H2D copy.
        m.h("dl", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", S + 3 * US, S + 183 * US)
        m.h("op", "aten::stack", S + 6 * US, S + 180 * US)
        t = S + 186 * US
        m.h("op", "aten::to", t, t + 42 * US)
        m.h("op", "aten::_to_copy", t + 2 * US, t + 40 * US)
        m.h("op", "aten::copy_", t + 4 * US, t + 38 * US)
        m.h("rt", "synMemCopyAsync", t + 8 * US, t + 22 * US)
        m.dma("memcpy HtoD", t + 22 * US, 18 * US, after_queue=False)
        t += 45 * US
        t = m.ops(t, S + 1_800 * US, FWD_OPS)
        main = A
        if scenario == "compile_in_sync" and n == 3:
            # print(loss.item()): aten::item > _local_scalar_dense > mark_step chain > compile > launch
            # > D2H copy > synStreamSynchronize, all inside the item.
            i0 = t
            t += 4 * US
            l0 = t
            t = m.mark_step(t + 3 * US, C, compile_ns=3_100 * US)
            m.h("rt", "synMemCopyAsync", t, t + 12 * US)
            m.dma("memcpy DtoH", t + 12 * US, 6 * US, after_queue=True)
            t += 14 * US
            s_end = max(t + 8 * US, m.dev_free + 6 * US)
            m.h("rt", "synStreamSynchronize", t, s_end)
            m.syncs.append({"start": t, "end": s_end, "name": "synStreamSynchronize", "user": "aten::item",
                            "call_site": SYNC_CALL_SITE if with_stack else None})
            t = s_end + 3 * US
            m.h("op", "aten::_local_scalar_dense", l0, t)
            t += 3 * US
            m.h("op", "aten::item", i0, t)
            if with_stack:
                m.pyid += 1
                m.h("py", "<built-in method item of Tensor object at 0x7f3a2c1e5e40>", i0 - 1 * US, t + 1 * US,
                    **{"Python id": m.pyid, "CallFrom": SYNC_CALL_SITE})
            t += 4 * US
            main = D
        t = m.ops(t, t + 1_600 * US, BWD_OPS)
        compile_ns = 0
        if scenario == "compile_in_sync" and n == 3:
            compile_ns = 2_400 * US
        if scenario == "host_gaps" and n in (2, 5):
            # Host-side work (CPU augmentation of the batch) that outlasts the queued device work.
            planted = 1_500 * US if n == 2 else 1_200 * US
            x = max(0, m.dev_free - t) + planted
            m.h("op", "aten::index_select", t, t + x)
            t += x + 3 * US
            if n == 5:
                main, compile_ns = E, 2_500 * US
        t = m.mark_step(t, main, compile_ns)
        o0 = t
        t = m.ops(t + 4 * US, t + 420 * US, OPT_OPS)
        m.h("ann", "Optimizer.step#AdamW.step", o0, t)
        t = m.mark_step(t + 3 * US, B)
        end = max(t + 40 * US, S + host_period)
        m.ops(t + 3 * US, end, TAIL_OPS)
        m.h("step", f"ProfilerStep#{n}", S, end)
        if with_stack:
            # with_stack=True: the user's loop frame around the step's work.
            m.pyid += 1
            m.h("py", "train.py(38): train_step", S + 1 * US, end, **{"Python id": m.pyid, "CallFrom": "train.py:71"})
            for x in m.host:
                if x["kind"] == "py" and "Python parent id" not in x["args"] and x["name"].startswith("<built-in"):
                    x["args"]["Python parent id"] = m.pyid
        if recorded:
            m.steps.append((f"ProfilerStep#{n}", S, end))
        t = end + 6 * US
        if n == 0:
            first = t
    last_end = m.steps[-1][2]
    if scenario == "profiler_flush":
        # The profiler's own flush when the capture stops: a device synchronize with no op above it.
        s0 = last_end + 31 * US
        s1 = max(s0 + 10 * US, m.dev_free + 7 * US)
        m.h("rt", "synDeviceSynchronize", s0, s1)
        m.syncs.append({"start": s0, "end": s1, "name": "synDeviceSynchronize", "user": None})
    # The capture: host from step 1; device work that ends after the capture began.
    m.host = [x for x in m.host if x["start"] >= first]
    m.slices = [x for x in m.slices if x["end"] > first]
    m.nodes = [x for x in m.nodes if x["end"] > first]
    m.capture = (first, max([last_end] + [x["end"] for x in m.host]))
    return m


# ------------------------------------------------------------------------------------ truth
WARMUP_STEPS = 2
GAP_MIN_NS = 50 * US
HOST_GAP_MIN_PCT = 5.0          # docs/findings.md host_gap_min_pct
MATERIAL_PCT = 1.0              # the materiality default (Thresholds::min_finding_pct)
MME_IDLE_MIN_NS = 20 * US


def step_truth(m, name, S, E, idx, host_visible=True, base=0):
    """Findings the model planted in step window [S, E) (rules in README.md)."""
    dur = E - S
    dev = [(x["start"], x["end"]) for x in m.slices]
    compiles = [(c["start"], c["end"]) for c in m.compiles]
    syncs = [(s["start"], s["end"]) for s in m.syncs]
    dl = [(x["start"], x["end"]) for x in m.host if x["kind"] == "dl"]
    opwork = [(x["start"], x["end"]) for x in m.host if x["kind"] in ("op", "hop", "rt")]
    findings = {}
    figures = {}

    # host_bound_gap
    idle = [g for g in complement(clip(dev, S, E), S, E) if g[1] - g[0] >= GAP_MIN_NS]
    gaps = []
    for g in idle:
        cover = intersect([g], opwork) if host_visible else [g]
        hb = total(subtract(cover, dl + syncs + compiles))
        if hb:
            gaps.append({"start_ns": base + g[0], "end_ns": base + g[1], "idle_ns": g[1] - g[0], "host_bound_ns": hb})
    hb_total = sum(g["host_bound_ns"] for g in gaps)
    figures["host_bound_ns"] = hb_total
    figures["host_bound_gaps"] = gaps
    if hb_total and hb_total * 100 >= HOST_GAP_MIN_PCT * dur:
        findings["host_bound_gap"] = {"count": sum(1 for g in gaps if g["host_bound_ns"] >= GAP_MIN_NS),
                                      "lost_ns": hb_total, "call_site": None}

    # mme_idle_behind_tpc
    mme = union(clip([(x["start"], x["end"]) for x in m.slices if x["cls"] == "MME"], S, E))
    tpc = [(x["start"], x["end"]) for x in m.slices if x["cls"] == "TPC"]
    behind = 0
    for (a0, a1), (b0, b1) in zip(mme, mme[1:]):
        behind += total(intersect([(a1, b0)], tpc))
    figures["mme_idle_behind_tpc_ns"] = behind
    if behind >= MME_IDLE_MIN_NS and behind * 100 >= MATERIAL_PCT * dur:
        findings["mme_idle_behind_tpc"] = {"count": 1, "lost_ns": behind, "call_site": None}

    # device transposes: node occurrences that start in the step, wall = union over their engines
    tn = [n for n in m.nodes if n["guid"].startswith("transpose") and S <= n["start"] < E]
    if tn:
        assert all(n["end"] <= E for n in tn), "a transpose node crosses a step boundary"
        wall = total([(x["start"], x["end"]) for x in m.slices
                      if x["guid"].startswith("transpose") and S <= x["start"] < E])
        figures["device_transpose_engine_ns"] = sum(x["end"] - x["start"] for x in m.slices
                                                     if x["guid"].startswith("transpose") and S <= x["start"] < E)
        figures["device_transpose_slices"] = sum(n["engines"] for n in tn)
        findings["non_logical_transpose"] = {"count": len(tn), "lost_ns": wall, "call_site": None,
                                             "engines_per_node": sorted({n["engines"] for n in tn})}

    # recompile: compile of a never-compiled recipe after the warm-up steps
    rc = [c for c in m.compiles if S <= c["start"] < E]
    if rc:
        assert idx > WARMUP_STEPS
        findings["recompile"] = {"count": len(rc), "lost_ns": sum(c["end"] - c["start"] for c in rc),
                                 "call_site": None, "recipes": [c["recipe"] for c in rc]}

    # sync_point: user syncs only; lost = blocked time not covered by a compile
    us = [s for s in m.syncs if s["user"] and S <= s["start"] < E]
    sync_lost = total(subtract([(s["start"], s["end"]) for s in us], compiles))
    figures["sync_blocked_ns"] = sync_lost
    assert sync_lost * 100 <= 0.6 * dur or sync_lost * 100 >= 5 * dur, (name, sync_lost)
    if us and sync_lost * 100 >= MATERIAL_PCT * dur:
        findings["sync_point"] = {"count": len(us),
                                  "lost_ns": total(subtract([(s["start"], s["end"]) for s in us], compiles)),
                                  "call_site": us[0].get("call_site"), "ops": sorted({s["user"] for s in us})}
    lost = sum(f["lost_ns"] for f in findings.values() if f["lost_ns"] is not None)
    assert lost <= dur, (name, lost, dur)
    # Margins: nothing sits near a threshold, so any threshold in the documented band gives the same
    # answer. Planted findings cost ≥ 5 % of the step, non-findings ≤ 0.6 %.
    for f in findings.values():
        if f["lost_ns"] is not None:
            assert f["lost_ns"] * 100 >= 4.9 * dur or f is findings.get("sync_point") or f is findings.get(
                "recompile"), (name, findings)
    assert behind * 100 <= 0.6 * dur or "mme_idle_behind_tpc" in findings, (name, behind, dur)
    assert hb_total * 100 <= 0.6 * dur or "host_bound_gap" in findings, (name, hb_total, dur)
    return {"name": name, "start_ns": base + S, "dur_ns": dur, "findings": findings, "figures": figures}


def torch_truth(m, scenario, shape, path, fmt):
    steps = [step_truth(m, name, S, E, i + 1, base=KINETO_BASE_NS) for i, (name, S, E) in enumerate(m.steps)]
    expect_none = scenario in ("clean", "profiler_flush")
    if expect_none:
        assert all(not s["findings"] for s in steps), scenario
    return {
        "generator": "samples/gaudi-cases/generate.py",
        "scenario": scenario, "shape": shape, "trace": os.path.basename(path), "file_shape": fmt,
        "clock": "ns on the trace's own clock (µs in the file × 1000)",
        "steps_kind": "ProfilerStep",
        # Whole capture: transpose node occurrences and the engine slices they were split into.
        "device_transpose_nodes": sum(1 for n in m.nodes if n["guid"].startswith("transpose")),
        "device_transpose_slices": sum(1 for x in m.slices if x["guid"].startswith("transpose")),
        "expect_no_findings": expect_none,
        "steps": steps,
        "not_findings": {
            "profiler_flush_sync": [{"name": s["name"], "start_ns": KINETO_BASE_NS + s["start"], "dur_ns": s["end"] - s["start"]}
                                    for s in m.syncs if not s["user"]],
            "warmup_compiles": "recipes g_0 and g_1 were compiled before the capture",
        },
        "tolerance": {"lost_ns_rel": 0.02, "lost_ns_abs": 50 * US},
    }


# ------------------------------------------------------------------------------------ writers
def us(ns):
    """µs with 3 decimals, exact."""
    return float(f"{ns // 1000}.{ns % 1000:03d}")


def kineto_cpu_events(m, cats):
    ev = [{"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}},
          {"ph": "M", "name": "thread_name", "pid": PID, "tid": MAIN_TID, "args": {"name": "thread 41877 (python3)"}}]
    idx = 0
    for x in sorted(m.host, key=lambda x: (x["start"], -x["end"])):
        cat = cats.get(x["kind"])
        if cat is None:
            continue
        idx += 1
        args = {"External id": idx, "Record function id": 0, "Ev Idx": idx}
        if x["kind"] == "py":
            args = dict(x["args"], **{"Ev Idx": idx})
        elif x["kind"] == "rt" and "recipe" in x["args"]:
            args = {"recipeId": x["args"]["recipe"].id, "recipeName": x["args"]["recipe"].name,
                    "External id": idx}
        ev.append({"ph": "X", "cat": cat, "name": x["name"], "pid": PID, "tid": MAIN_TID,
                   "ts": us(KINETO_BASE_NS + x["start"]), "dur": us(x["end"] - x["start"]), "args": args})
    return ev


def kineto_header():
    return {"schemaVersion": 1, "deviceProperties": [], "with_flops": False, "record_shapes": False,
            "displayTimeUnit": "ms", "baseTimeNanoseconds": 1764000000000000000}


def write_gz(path, obj_text):
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(obj_text.encode())
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def dump_events(head, events):
    """Kineto-like layout: header keys, then one event per line."""
    lines = ["{"]
    for k, v in head.items():
        lines.append(f'  "{k}": {json.dumps(v)},')
    lines.append('  "traceEvents": [')
    lines.append(",\n".join("  " + json.dumps(e, separators=(", ", ": ")) for e in events))
    lines.append("  ],")
    lines.append('  "traceName": "hpu_run.pt.trace.json"')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_bridge(m, path):
    """§5.2: Kineto wrote the CPU trace; the bridge appended /device:HPU:0 lanes, Synapse host API lanes,
    Bridge Logs and Memory Logs, and its deviceProperties entry."""
    ev = kineto_cpu_events(m, {"step": "user_annotation", "dl": "user_annotation", "ann": "user_annotation",
                               "op": "cpu_op", "py": "python_function"})
    ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
               "ts": us(KINETO_BASE_NS + m.capture[0]), "dur": us(m.capture[1] - m.capture[0]), "args": {"Op count": 0}})
    app = [{"name": "process_name", "ph": "M", "ts": 0.0, "pid": DEVICE_PID_BRIDGE, "tid": 0, "args": {"name": "/device:HPU:0"}},
           {"name": "process_labels", "ph": "M", "ts": 0.0, "pid": DEVICE_PID_BRIDGE, "tid": 0, "args": {"labels": "/device:HPU:0"}},
           {"name": "process_sort_index", "ph": "M", "ts": 0.0, "pid": DEVICE_PID_BRIDGE, "tid": 0,
            "args": {"sort_index": 0x1000000}}]
    for e in ENGINES:
        nm = {"TPC": "TPC", "MME": "MME", "EDMA": "EDMA"}[e[0]] + f" {flat_index(e)}"
        app.append({"name": "thread_name", "ph": "M", "ts": 0.0, "pid": DEVICE_PID_BRIDGE, "tid": bridge_tid(e), "args": {"name": nm}})
        app.append({"name": "thread_sort_index", "ph": "M", "ts": 0.0, "pid": DEVICE_PID_BRIDGE, "tid": bridge_tid(e),
                    "args": {"sort_index": bridge_tid(e)}})
    for tid, nm in ((1, "Synapse/Host API"), (2, "Synapse/Host Wait")):
        app.append({"name": "thread_name", "ph": "M", "ts": 0.0, "pid": SYN_HOST_PID, "tid": tid, "args": {"name": nm}})
    app.append({"name": "process_name", "ph": "M", "ts": 0.0, "pid": BRIDGE_LOG_PID, "tid": 0, "args": {"name": "Bridge Logs"}})
    app.append({"name": "process_name", "ph": "M", "ts": 0.0, "pid": MEMORY_PID, "tid": 0, "args": {"name": "Memory Logs"}})
    # Synapse buffer order: device activities at their end, host calls at their start.
    items = []
    for x in m.slices:
        r = x["recipe"]
        if x["cls"] == "DMA":
            cat, name = "Memcpy", x["node"]
            args = {"streamHandle": "0xd97f000000000001", "device": "0"}
        else:
            cat, name = "Kernel", x["guid"]   # name = args.operation when non-empty
            args = {"recipeId": r.id, "recipeName": r.name, "streamHandle": "0xd97f000000000003",
                    "eventHandle": "0x0", "device": "0", "dataType": "bf16",
                    "node name": x["node"], "contextId": str(x["ctx"])}
        items.append((x["end"], 0, {"cat": cat, "name": name, "pid": DEVICE_PID_BRIDGE, "tid": bridge_tid(x["engine"]),
                                    "ts": us(KINETO_BASE_NS + x["start"]), "ph": "X", "dur": us(x["end"] - x["start"]),
                                    "args": args}))
    for x in m.host:
        if x["kind"] == "rt":
            args = {}
            if "recipe" in x["args"]:
                args = {"recipeId": str(x["args"]["recipe"].id), "recipeName": x["args"]["recipe"].name}
            tid = 2 if "Synchronize" in x["name"] else 1
            items.append((x["start"], 1, {"cat": "Runtime", "name": x["name"], "pid": SYN_HOST_PID, "tid": tid,
                                          "ts": us(KINETO_BASE_NS + x["start"]), "ph": "X",
                                          "dur": us(x["end"] - x["start"]), "args": args}))
        elif x["kind"] == "hop":
            for ph, t in (("B", x["start"]), ("E", x["end"])):
                items.append((t, 2 if ph == "B" else -1, {"cat": "Runtime", "name": x["name"], "pid": BRIDGE_LOG_PID,
                                                           "tid": MAIN_TID, "ts": us(KINETO_BASE_NS + t), "ph": ph}))
    total_alloc = 6_442_450_944
    for i, la in enumerate(m.launches):
        if la["start"] < m.capture[0]:
            continue
        total_alloc += 33_554_432 if i % 2 == 0 else -33_554_432
        items.append((la["start"], 3, {"cat": "cpu_instant_event", "name": "[memory]", "ph": "i", "s": "t",
                                       "pid": MEMORY_PID, "tid": MAIN_TID, "ts": us(KINETO_BASE_NS + la["start"]),
                                       "args": {"Addr": 140211233112064 + 4096 * i,
                                                "Bytes": 33_554_432 if i % 2 == 0 else -33_554_432,
                                                "Device Id": 0, "Device Type": 1, "Profiler Event Index": i,
                                                "Total Allocated": total_alloc, "Total Reserved": 8_589_934_592}}))
    items.sort(key=lambda z: (z[0], z[1]))
    head = kineto_header()
    head["deviceProperties"] = [{"name": "GAUDI3", "totalGlobalMem": 137_438_953_472}]
    write_gz(path, dump_events(head, ev + app + [z[2] for z in items]))


def write_plugin(m, path, synapse_lane=False):
    """§5.3: one Kineto-written file; HPU activities from the bridge's IActivityProfiler.
    With `synapse_lane`, as newer Habana plugins write it (issue: 'Gaudi syncs on plugin lanes'):
    the Synapse API calls are `hpu_op` events on a host lane of their own (own pid/tid), not
    nested under the `aten::item` / `aten::_local_scalar_dense` that made them."""
    ev = kineto_cpu_events(m, {"step": "user_annotation", "dl": "user_annotation", "ann": "user_annotation",
                               "op": "cpu_op", "hop": "hpu_op", "rt": "privateuse1_runtime",
                               "py": "python_function"})
    for e in ev:
        if e.get("cat") == "hpu_op":
            e["args"]["hidden"] = "1"
    if synapse_lane:
        ev.append({"ph": "M", "name": "process_name", "pid": SYN_LANE_PID, "tid": 0,
                   "args": {"name": "Synapse API"}})
        ev.append({"ph": "M", "name": "thread_name", "pid": SYN_LANE_PID, "tid": SYN_LANE_TID,
                   "args": {"name": "synapse_logger"}})
        for e in ev:
            if e.get("cat") == "privateuse1_runtime":
                e.update({"cat": "hpu_op", "pid": SYN_LANE_PID, "tid": SYN_LANE_TID})
    ev.append({"ph": "M", "name": "process_name", "pid": DEVICE_PID_PLUGIN, "tid": 0, "args": {"name": "HPU 0"}})
    ev.append({"ph": "M", "name": "process_labels", "pid": DEVICE_PID_PLUGIN, "tid": 0, "args": {"labels": "/device:HPU:0"}})
    for i, e in enumerate(ENGINES):
        ev.append({"ph": "M", "name": "thread_name", "pid": DEVICE_PID_PLUGIN, "tid": i, "args": {"name": hw_name(e)}})
    tid_of = {e: i for i, e in enumerate(ENGINES)}
    for x in sorted(m.slices, key=lambda x: (x["start"], tid_of[x["engine"]])):
        r = x["recipe"]
        if x["cls"] == "DMA":
            ev.append({"ph": "X", "cat": "gpu_memcpy", "name": x["node"], "pid": DEVICE_PID_PLUGIN,
                       "tid": tid_of[x["engine"]], "ts": us(KINETO_BASE_NS + x["start"]), "dur": us(x["end"] - x["start"]),
                       "args": {"device": "0", "streamHandle": "0xd97f000000000001", "hidden": "1"}})
            continue
        ev.append({"ph": "X", "cat": "kernel", "name": x["node"], "pid": DEVICE_PID_PLUGIN, "tid": tid_of[x["engine"]],
                   "ts": us(KINETO_BASE_NS + x["start"]), "dur": us(x["end"] - x["start"]),
                   "args": {"operation": x["guid"], "recipeId": str(r.id), "recipeName": r.name,
                            "streamHandle": "0xd97f000000000003", "eventHandle": "0x0", "device": "0",
                            "dataType": "bf16", "contextId": str(x["ctx"]), "hidden": "1"}})
    alloc = 6_442_450_944
    for i, la in enumerate(m.launches):
        if la["start"] < m.capture[0]:
            continue
        b = 16_777_216 if i % 2 == 0 else -16_777_216
        alloc += b
        ev.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "s": "t", "pid": PID, "tid": MAIN_TID,
                   "ts": us(KINETO_BASE_NS + la["start"] + 1000),
                   "args": {"Addr": 140211233112064 + 8192 * i, "Bytes": b, "Total Allocated": alloc,
                            "Total Reserved": 8_589_934_592, "Device Id": 0, "Device Type": 20}})
    ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
               "ts": us(KINETO_BASE_NS + m.capture[0]), "dur": us(m.capture[1] - m.capture[0]), "args": {"Op count": 0}})
    head = kineto_header()
    head["deviceProperties"] = [{"id": 0, "name": "GAUDI3", "totalGlobalMem": 137_438_953_472}]
    write_gz(path, dump_events(head, ev))


# ------------------------------------------------------------------------------------ synapse-only
def synapse_run(seed, recompiles=None, late_b=2):
    """A Synapse application (no torch): per iteration launch recipe A then recipe B; graphs compiled
    up front; in iteration 4 a new recipe C is compiled and launched; in iteration 2 the host launches
    B ~2 ms after the device ran out of work.

    `recompiles` ({iteration: (graph, launches)}) plants other recompiles instead: in that iteration,
    after A, a never-seen recipe is compiled and then launched `launches` times (a new input shape run
    for that many micro-batches) before B. `late_b` is the iteration whose B comes late (None: none)."""
    if recompiles is None:
        recompiles = {4: ("g_2", 1)}
    m = Model(seed)
    rng = m.rng
    A = Recipe(1, "g_0", fwd_bwd_units(rng, 5, (820, 980), 8))
    B = Recipe(2, "g_1", [unit(None, [("adamw_0", "adamw_fwd_f32", 14 * US, 8, 0)])])
    C = Recipe(3, "g_2", [unit(("gemm_0", "gemm", 700 * US), [("gelu_1", "gelu_fwd_bf16", 250 * US, 8, 40 * US)])])
    dev_nominal = sum(u["mme"][2] + 5 * US for u in A.units) + 30 * US + 2 * 25 * US
    period = dev_nominal - 150 * US
    t = 500 * US
    for r in (A, B):
        # Warm-up compiles, before any device work.
        m.h("rt", "synGraphCompile", t, t + 1_800 * US, recipe=r)
        m.compiles.append({"start": t, "end": t + 1_800 * US, "recipe": r.name, "warmup": True})
        t += 1_850 * US
    m.iter_launch = []
    for k in range(1, 8):
        I = t
        m.iter_launch.append(I)
        m.h("rt", "synLaunchWithExternalEvents", I, I + 25 * US, recipe=A)
        m.execute(A, I + 25 * US)
        m.launches.append({"start": I, "recipe": A, "ctx": m.ctx})
        t = I + 40 * US
        if k in recompiles:
            graph, times = recompiles[k]
            if graph != C.graph:
                C = Recipe(2 + k, graph, C.units)
            m.h("rt", "synGraphCompile", t, t + 2_600 * US, recipe=C)
            m.compiles.append({"start": t, "end": t + 2_600 * US, "recipe": C.name, "warmup": False})
            t += 2_640 * US
            for _ in range(times):
                m.h("rt", "synLaunchWithExternalEvents", t, t + 25 * US, recipe=C)
                m.execute(C, t + 25 * US)
                m.launches.append({"start": t, "recipe": C, "ctx": m.ctx})
                t += 40 * US
        tb = I + 3_100 * US
        if k == late_b:
            tb = m.dev_free + 2_000 * US
        tb = max(tb, t)
        m.h("rt", "synLaunchWithExternalEvents", tb, tb + 25 * US, recipe=B)
        m.execute(B, tb + 25 * US)
        m.launches.append({"start": tb, "recipe": B, "ctx": m.ctx})
        m.h("rt", "synEventRecord", tb + 30 * US, tb + 36 * US)
        # Double buffering: wait for the event recorded one iteration earlier, long complete, so
        # the call returns at once. A sync call, but it costs ~5 µs: not a finding.
        m.h("rt", "synEventSynchronize", tb + 40 * US, tb + 45 * US)
        m.syncs.append({"start": tb + 40 * US, "end": tb + 45 * US, "name": "synEventSynchronize",
                        "user": "synEventSynchronize"})
        t = max(I + period, tb + 30 * US + 6 * US + 24 * US)
        if k == late_b:
            t = tb + 60 * US
    m.capture = (0, m.dev_free)
    return m


def synapse_truth(m, shape, path, fmt, scenario="synapse_only_recompile"):
    if shape == "tef":
        bounds = m.iter_launch
        rule = "start of the host synLaunchWithExternalEvents of recipe g_0 (first of the repeating set {g_0, g_1}) to the next"
    else:
        # HW CSV: no host lanes; an iteration starts at the first engine BEGIN of a launch of g_0.
        bounds = sorted(min(x["start"] for x in m.slices if x["ctx"] == la["ctx"])
                        for la in m.launches if la["recipe"].graph == "g_0")
        rule = "first engine BEGIN of each execution of recipe g_0 (first of the repeating set) to the next"
    steps = []
    for i, (S, E) in enumerate(zip(bounds, bounds[1:])):
        st = step_truth(m, f"iteration {i + 1}", S, E, i + 1, host_visible=False, base=SYN_BASE_NS)
        steps.append(st)
    if shape == "hw":
        # No host lanes: the compile is not in the file; a never-seen recipe after warm-up is the only
        # signal, counted in the iteration where its first node runs.
        for st in steps:
            st["findings"].pop("recompile", None)
            new = [n["recipe"].name for n in m.nodes if n["recipe"].graph not in ("g_0", "g_1")
                   and st["start_ns"] <= SYN_BASE_NS + n["start"] < st["start_ns"] + st["dur_ns"]]
            if new:
                st["findings"]["recompile"] = {"count": 1, "lost_ns": None, "call_site": None,
                                               "recipes": sorted(set(new))}
    return {
        "generator": "samples/gaudi-cases/generate.py",
        "scenario": scenario, "shape": shape, "trace": os.path.basename(path), "file_shape": fmt,
        "clock": "ns on the trace's own clock (µs in the file × 1000)",
        "steps_kind": "derived",
        "iteration_rule": rule,
        "expect_no_findings": False,
        "steps": steps,
        "not_findings": {"warmup_compiles": [c["recipe"] for c in m.compiles if c.get("warmup")],
                         "trailing_launch": "the 7th launch of g_0 has no successor: its work is not a step"},
        "tolerance": {"lost_ns_rel": 0.02, "lost_ns_abs": 50 * US},
    }


TEF_TYPES = {"MME": (6, "*MME "), "TPC": (7, "*TPC "), "EDMA": (4, "*EDMA ")}


def write_tef(m, path):
    """§2.4: pid = engine type, tid = engine index, B/E paired by id (context id); host API on `***Host`;
    written as the logger does: one event per line, the array never closed."""
    meta = [{"name": "process_name", "ph": "M", "pid": SYN_HOST_PID, "tid": 0, "args": {"name": "***Host", "level": 0}},
            {"name": "thread_name", "ph": "M", "pid": SYN_HOST_PID, "tid": 0, "args": {"name": "Host API", "level": 0}}]
    for cls, (tp, nm) in sorted(TEF_TYPES.items(), key=lambda z: z[1][0]):
        meta.append({"name": "process_name", "ph": "M", "pid": tp, "tid": 0, "args": {"name": nm, "level": tp}})
        for e in ENGINES:
            if e[0] == cls:
                meta.append({"name": "thread_name", "ph": "M", "pid": tp, "tid": flat_index(e),
                             "args": {"name": f"{cls} {flat_index(e)}", "level": tp}})
    used = {x["engine"] for x in m.slices}
    meta = [e for e in meta if e["name"] != "thread_name" or e["pid"] == SYN_HOST_PID
            or any(TEF_TYPES[u[0]][0] == e["pid"] and flat_index(u) == e["tid"] for u in used)]
    timed = []
    for x in m.slices:
        r = x["recipe"]
        tp = TEF_TYPES[x["engine"][0]][0]
        args = {"dtype": "bf16", "op": x["guid"], "recipe id": r.id, "graph name": r.name,
                "streamHandle": "0xd97f000000000003", "eventHandle": "0x0"}
        base = {"name": x["node"], "cat": "HW", "pid": tp, "tid": flat_index(x["engine"]), "id": x["ctx"], "args": args}
        timed.append((x["start"], 1, dict(base, ph="B", ts=us(SYN_BASE_NS + x["start"]))))
        timed.append((x["end"], 0, dict(base, ph="E", ts=us(SYN_BASE_NS + x["end"]))))
    for x in m.host:
        args = {}
        if "recipe" in x["args"]:
            r = x["args"]["recipe"]
            args = {"recipe id": r.id, "graph name": r.name, "recipeHandle": hex(r.handle)}
        timed.append((x["start"], 2, {"name": x["name"], "cat": "SW", "ph": "X", "ts": us(SYN_BASE_NS + x["start"]),
                                      "dur": us(x["end"] - x["start"]), "pid": SYN_HOST_PID, "tid": 0, "args": args}))
    timed.sort(key=lambda z: (z[0], z[1]))
    body = "[\n" + "".join(json.dumps(e, separators=(",", ":")) + ",\n" for e in meta + [z[2] for z in timed])
    write_gz(path, body)


CSV_HEADER = ("Name,Trace Source,Engine,Event type,Timestamp[usec],recipeHandle,streamHandle,Recipe ID,Recipe name,"
              "Context ID,Device,Operation,Data Type,HW Event port,HW Event description,SPMU value,BMON min,BMON avg,"
              "BMON max,BMON matches,BMON configured cycles,NIC Packets amount,Misc")


def csv_ts(ns):
    ns += SYN_BASE_NS
    return f"{ns // 1000}.{ns % 1000:03d}000"


def write_csv(m, path):
    """§3: 23 columns; TPC: [QMAN_CMD_EXE] BEGIN END VPU_HALT EOK_WRITE; MME: BEGIN END; SPMU counters."""
    rng = random.Random(7)
    rows = []
    for x in m.slices:
        r = x["recipe"]
        common = [x["node"], "HW", hw_name(x["engine"])]
        tail = [hex(r.handle), "0xd97f000000000003", str(r.id), f"/home/user/run/recipes/train.{r.graph}",
                str(x["ctx"]), "accel0", x["guid"], "bfloat16"]
        if x["cls"] == "TPC":
            if rng.random() < 0.6:   # the real sample has QMAN_CMD_EXE for only 30 of 48 slices
                rows.append((x["start"] - 2000, common + ["INSTANT", csv_ts(x["start"] - 2000)] + tail + ["0", "TPC_QMAN_CMD_EXE"]))
            rows.append((x["start"], common + ["BEGIN", csv_ts(x["start"])] + tail + ["1", "TPC_SPU_START"]))
            rows.append((x["end"], common + ["END", csv_ts(x["end"])] + tail + ["2", "TPC_SPU_START_TO_SPU_HALT"]))
            rows.append((x["end"] + 600, common + ["INSTANT", csv_ts(x["end"] + 600)] + tail + ["3", "TPC_VPU_HALT"]))
            rows.append((x["end"] + 1200, common + ["INSTANT", csv_ts(x["end"] + 1200)] + tail
                         + ["4", "TPC_END_OF_KERNEL_MESSAGE_WRITE"]))
        else:
            rows.append((x["start"], common + ["BEGIN", csv_ts(x["start"])] + tail + ["8", "SB0_START_EVT"]))
            rows.append((x["end"], common + ["END", csv_ts(x["end"])] + tail + ["18", "WB0_END"]))
    t0, t1 = min(x["start"] for x in m.slices), m.dev_free
    for i, t in enumerate(range(t0, t1, 2_000 * US)):
        # As in the real sample: Device filled, recipe/port columns empty, `SPMU` then the value.
        for nm, eng, v in (("[8] Back pressure from memory to TPC write queue on store tensors",
                            hw_name(TPCS[(7 * i) % len(TPCS)]), 1 + i % 3),
                           ("Outgoing HBM partial writes", "[D0] Cache Slice", 18446744073709551415 - i)):
            rows.append((t, [nm, "HW", eng, "COUNTER", csv_ts(t)] + [""] * 5 + ["accel0"] + [""] * 3 + ["SPMU", str(v)]))
    rows.sort(key=lambda z: z[0])
    with open(path, "w", newline="") as f:
        f.write(CSV_HEADER + "\n")
        for _, r in rows:
            r = r + [""] * (23 - len(r))
            assert len(r) == 23
            f.write(",".join(r) + "\n")


# ------------------------------------------------------------------------------------ main
SCENARIOS = ["clean", "compile_in_sync", "transposes", "host_gaps", "profiler_flush"]
# Also written with the plugin's separate Synapse lane: the sync case, and the clean run.
LANE_SCENARIOS = ["clean", "compile_in_sync"]


def main():
    for i, sc in enumerate(SCENARIOS):
        m = torch_run(sc, 1300 + i)
        shapes = [("bridge", write_bridge, "bridge-merged Kineto JSON (habana-formats.md §5.2)"),
                  ("plugin", write_plugin, "Kineto-plugin JSON (habana-formats.md §5.3)")]
        if sc in LANE_SCENARIOS:
            shapes.append(("plugin_lanes", lambda m, p: write_plugin(m, p, synapse_lane=True),
                           "Kineto-plugin JSON, Synapse API calls as hpu_op on their own host lane"))
        for shape, writer, fmt in shapes:
            path = os.path.join(HERE, f"{sc}.{shape}.json.gz")
            writer(m, path)
            truth = torch_truth(m, sc, shape, path, fmt)
            with open(os.path.join(HERE, f"{sc}.{shape}.truth.json"), "w") as f:
                json.dump(truth, f, indent=1, sort_keys=True)
                f.write("\n")
    m = synapse_run(1400)
    for shape, writer, ext, fmt in (("tef", write_tef, "json.gz", "Synapse TEF, array left open (habana-formats.md §2.4)"),
                                   ("hw", write_csv, "csv", "HW-trace CSV, 23 columns (habana-formats.md §3)")):
        path = os.path.join(HERE, f"synapse_only_recompile.{shape}.{ext}")
        writer(m, path)
        with open(os.path.join(HERE, f"synapse_only_recompile.{shape}.truth.json"), "w") as f:
            json.dump(synapse_truth(m, shape, path, fmt), f, indent=1, sort_keys=True)
            f.write("\n")
    # Two recompiling iterations (issue 47, item 4): in iterations 3 and 5, after g_0, a new recipe
    # (g_2, then g_3) is compiled and launched twice before g_1. Host lane and engines, TEF only.
    m = synapse_run(1401, recompiles={3: ("g_2", 2), 5: ("g_3", 2)}, late_b=None)
    path = os.path.join(HERE, "synapse_recompiles.tef.json.gz")
    write_tef(m, path)
    with open(os.path.join(HERE, "synapse_recompiles.tef.truth.json"), "w") as f:
        json.dump(synapse_truth(m, "tef", path, "Synapse TEF, array left open (habana-formats.md §2.4)",
                                scenario="synapse_recompiles"), f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
