"""Holistic Trace Analysis's most used calls, computed from steplens' slices table.

``TraceAnalysis(trace_dir=...)`` offers the calls of HTA's ``hta.trace_analysis.TraceAnalysis``
that most notebooks use, with HTA's DataFrame columns, index and numbers (HTA 0.5.0; see
``docs/research/hta-api.md`` for each call's definition and the few places we differ on purpose):

- ``get_temporal_breakdown``
- ``get_idle_time_breakdown``
- ``get_gpu_kernel_breakdown``
- ``get_comm_comp_overlap``
- ``get_memory_bw_summary`` / ``get_memory_bw_time_series``
- ``get_queue_length_summary`` / ``get_queue_length_time_series``

The trace is read once by ``steplens.load`` (Rust); everything here is pandas over the
``slices`` table. The only place that touches the run is :func:`_slices`.

Times are µs like HTA's. HTA reads the trace's µs as float64 and, when a file's ``ts`` are not
all integers, rounds every event to whole µs (start up, end down); we rebuild the same float64
values from our exact integer ns and round the same way, so results match to the bit.

No plots: ``visualize`` and the other drawing arguments are accepted and ignored.
"""

from __future__ import annotations

import os
import re
import warnings
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

__all__ = ["TraceAnalysis", "HTA_VERSION"]

#: The HTA release whose behaviour this module reproduces.
HTA_VERSION = "0.5.0"

#: HTA's default ``trace_dir``.
DEFAULT_TRACE_DIR = "/tmp/trace"

#: HTA's limit of queued launches per CUDA stream (for ``get_time_spent_blocked_on_full_queue``).
CUDA_MAX_LAUNCH_QUEUE_PER_STREAM = 1024

# The slice-table columns read here, and the trace args (one column each).
_COLUMNS = ("source", "rank", "file", "name", "category", "start_ns", "dur_ns", "pid", "tid")
_ARGS = ("stream", "correlation", "memory bandwidth (GB/s)")
# Every fixed column of the Rust slices table, in its order (an arg of the same name comes
# after them); the test-only reference loader builds the same columns from this list.
SLICE_COLUMNS = (
    "source",
    "track",
    "track_name",
    "process",
    "track_kind",
    "name",
    "category",
    "start_ns",
    "dur_ns",
    "end_ns",
    "self_ns",
    "depth",
    "parent",
    "step",
    "rank",
    "file",
    "pid",
    "tid",
    "engine",
    "device",
    "correlation",
    "event_index",
)
_FIXED_COLUMNS = frozenset(SLICE_COLUMNS)
# Optional: the event's position in its file's traceEvents (HTA's row order and `index`).
_EVENT_INDEX = "event_index"

# HTA's kernel classes, decided by the kernel's name alone.
_COMM_RE = re.compile(r"^nccl.*Kernel")
_MEMORY_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
COMMUNICATION, MEMORY, COMPUTATION, OTHER = "COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER"

# Device events the idle-time breakdown counts (HTA leaves `cuda_sync` out).
_IDLE_KERNEL_CATS = (
    "kernel",
    "Kernel",
    "gpu_memset",
    "Memset",
    "gpu_memcpy",
    "Memcpy",
    "mtia_ccp_events",
)
_IDLE_NAMES = {0: "host_wait", 1: "kernel_wait", 2: "other"}

# Host calls that enqueue work on a stream (queue length).
_LAUNCH_NAMES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
    "runFunction - job_prep_and_submit_for_execution",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemsetAsync",
    "hipMemcpyAsync",
    "hipMemcpyWithStream",
)
# Device-level syncs HTA counts as GPU events although they are on no stream.
_DEVICE_SYNC_NAMES = ("Event Sync", "Context Sync")


# --------------------------------------------------------------------------------------------
# The run: the one place that knows how steplens hands its slices over.


def _load(paths: Union[str, Sequence[str]]) -> Any:
    """Loads traces (a folder, or a list of files) with steplens' Rust reader."""
    import steplens

    return steplens.load([paths] if isinstance(paths, (str, os.PathLike)) else list(paths))


def _slices(run: Any, args: Sequence[str]) -> pd.DataFrame:
    """The run's slices table as pandas, with one column per arg key."""
    if hasattr(run, "slices"):
        table = run.slices(args=list(args))
    else:
        table = run.table("slices", args=list(args))
    if isinstance(table, pd.DataFrame):
        return table
    if hasattr(table, "to_pandas"):
        return table.to_pandas()
    import pyarrow as pa

    return pa.table(table).to_pandas()


def _slice_frame(run: Any) -> pd.DataFrame:
    """The columns this module reads, with the args renamed ``arg:KEY``.

    An arg key that is also one of the table's fixed columns (``correlation``, the flow id)
    comes as a second column of that name after the fixed ones; the arg is that second one.
    """
    raw = _slices(run, _ARGS)
    names = list(raw.columns)
    missing = [c for c in _COLUMNS if c not in names]
    if missing:
        raise KeyError(f"steplens slices table lacks the columns {missing}")
    frame = pd.DataFrame({c: raw.iloc[:, names.index(c)] for c in _COLUMNS})
    if _EVENT_INDEX in names:
        frame[_EVENT_INDEX] = raw.iloc[:, names.index(_EVENT_INDEX)]
    for key in _ARGS:
        positions = [i for i, c in enumerate(names) if c == key]
        if key in _FIXED_COLUMNS:
            positions = positions[1:]
        if positions:
            frame["arg:" + key] = raw.iloc[:, positions[-1]]
        else:
            frame["arg:" + key] = pd.Series([None] * len(raw), index=raw.index, dtype=object)
    return frame.reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# Building HTA's per-rank event table from the slices.


def _int_or_minus_one(col: pd.Series) -> np.ndarray:
    """Python's ``int()`` of each value, -1 where it fails or is missing (HTA's stream rule)."""
    if pd.api.types.is_integer_dtype(col.dtype):
        return col.astype("Int64").fillna(-1).to_numpy(dtype=np.int64)
    if pd.api.types.is_float_dtype(col.dtype):
        v = col.astype("float64").to_numpy(na_value=np.nan)
        out = np.full(len(v), -1, dtype=np.int64)
        ok = np.isfinite(v)
        out[ok] = np.trunc(v[ok]).astype(np.int64)
        return out

    def conv(x: Any) -> int:
        if x is None or (isinstance(x, float) and np.isnan(x)) or x is pd.NA:
            return -1
        try:
            return int(x)
        except (TypeError, ValueError):
            return -1

    uniques = {u: conv(u) for u in pd.unique(col.astype(object))}
    return col.astype(object).map(uniques).fillna(-1).to_numpy(dtype=np.int64)


def _number_or(col: pd.Series, default: Any, dtype: Any) -> np.ndarray:
    """The arg as numbers, ``default`` where missing or not a number."""
    if pd.api.types.is_integer_dtype(col.dtype):
        return col.astype("Int64").fillna(default).to_numpy(dtype=dtype)
    values = pd.to_numeric(col.astype(object), errors="coerce").astype("float64")
    return values.fillna(default).to_numpy().astype(dtype)


def _hta_times(start_ns: np.ndarray, dur_ns: np.ndarray) -> Tuple[np.ndarray, np.ndarray, bool]:
    """HTA's ``ts`` and ``dur`` (µs) of one file, before alignment.

    HTA parses µs into float64. ``q + r / 1000`` is that same float64 (one correctly rounded
    step: ``r / 1000`` is exact whenever the sum can land on a rounding tie), so the rounding
    below sees exactly HTA's numbers. When the file's ``ts`` are not all whole µs, HTA rounds:
    start up to the µs, end (``ts + dur`` in float64) down, ``dur = end - start``.
    """
    q, r = np.divmod(start_ns.astype(np.int64), 1000)
    ts_f = q.astype(np.float64) + r / 1000.0
    dur_f = dur_ns.astype(np.int64) / 1000.0
    rounded = bool((r != 0).any()) and os.environ.get("HTA_DISABLE_NS_ROUNDING") != "1"
    if rounded:
        ts = np.ceil(ts_f).astype(np.int64)
        end = np.floor(ts_f + dur_f)
        return ts, end - ts, True
    if bool((r != 0).any()):
        return ts_f, dur_f, False
    return q, dur_f, False


def _kernel_type(name: str) -> str:
    if _COMM_RE.match(name):
        return COMMUNICATION
    if _MEMORY_RE.match(name):
        return MEMORY
    if not _NOT_COMPUTE_RE.match(name):
        return COMPUTATION
    return OTHER


def _memory_kind(name: str) -> str:
    if name[:6] == "Memset":
        return "Memset"
    if name[:6] != "Memcpy":
        return "Memcpy Unknown"
    return name[:11]


def _with_kernel_type(df: pd.DataFrame) -> pd.DataFrame:
    kinds = {n: _kernel_type(n) for n in pd.unique(df["name"])}
    df["kernel_type"] = df["name"].map(kinds)
    return df


def _gpu_mask(df: pd.DataFrame) -> pd.Series:
    """HTA's GPU events: a stream and a correlation, or a device-level sync."""
    return ((df["stream"] >= 0) & (df["correlation"] >= 0)) | df["name"].isin(_DEVICE_SYNC_NAMES)


def _add_index_correlation(df: pd.DataFrame) -> None:
    """HTA's ``index_correlation``: the event index of the launch's kernel and back.

    -1 without a correlation, 0 with one whose other end is not in the file, else the other
    end's ``index``. With several matches the last pair in (host, device) file order wins.
    """
    corr = df["correlation"].to_numpy()
    ic = np.minimum(corr, 0).astype(np.int64)
    with_corr = df[df["correlation"].ne(-1)]
    gpu = _gpu_mask(with_corr)
    pairs = with_corr.loc[~gpu, ["index", "correlation"]].merge(
        with_corr.loc[gpu, ["index", "correlation"]], on="correlation", how="inner"
    )
    if len(pairs):
        pos = pd.Series(np.arange(len(df)), index=df["index"].to_numpy())
        ic[pos.loc[pairs["index_x"]].to_numpy()] = pairs["index_y"].to_numpy()
        ic[pos.loc[pairs["index_y"]].to_numpy()] = pairs["index_x"].to_numpy()
    df["index_correlation"] = ic


def _build_traces(
    sl: pd.DataFrame,
    include_last_profiler_step: bool,
    ranks_of_files: Optional[Dict[str, int]] = None,
) -> Tuple[Dict[int, pd.DataFrame], Dict[int, str]]:
    """HTA's per-rank event tables (only the columns the calls read), keyed and ordered by rank."""
    files = sl["file"].astype(str)
    sl = sl[files.str.endswith(".gz") | files.str.endswith(".json")]
    cat = sl["category"]
    # HTA drops events without `cat` (steplens writes those as "") and its `Trace` span.
    sl = sl[cat.notna() & cat.ne("") & cat.ne("Trace")]

    # Rank of each file: HTA's distributedInfo rank, 0 without one; the last file of a rank wins.
    rank_of_source: Dict[int, int] = {}
    file_of_source: Dict[int, str] = {}
    for source, grp in sl.groupby("source", sort=True):
        path = str(grp["file"].iloc[0])
        file_of_source[int(source)] = path
        if ranks_of_files is not None and path in ranks_of_files:
            rank_of_source[int(source)] = int(ranks_of_files[path])
            continue
        ranks = grp["rank"].dropna()
        rank_of_source[int(source)] = int(ranks.iloc[0]) if len(ranks) else 0
    source_of_rank: Dict[int, int] = {}
    for source in sorted(rank_of_source):
        rank = rank_of_source[source]
        if rank in source_of_rank:
            warnings.warn(
                f"{file_of_source[source_of_rank[rank]]} and {file_of_source[source]} have the "
                f"same rank {rank}; using {file_of_source[source]} (HTA keeps one file per rank)",
                stacklevel=3,
            )
        source_of_rank[rank] = source

    has_index = _EVENT_INDEX in sl.columns
    per_rank: Dict[int, pd.DataFrame] = {}
    for rank in sorted(source_of_rank):
        part = sl[sl["source"].eq(source_of_rank[rank])]
        if has_index:
            part = part.sort_values(_EVENT_INDEX, kind="stable")
            index = part[_EVENT_INDEX].to_numpy(dtype=np.int64)
        else:
            # Without the file order, start order; indices from 1 so none stands for event 0.
            part = part.sort_values("start_ns", kind="stable")
            index = np.arange(1, len(part) + 1, dtype=np.int64)
        ts, dur, _ = _hta_times(part["start_ns"].to_numpy(), part["dur_ns"].to_numpy())
        # HTA stores every integer column in the smallest integer type that holds it.
        index = pd.to_numeric(pd.Series(index), downcast="integer").to_numpy()
        if ts.dtype.kind == "i":
            ts = pd.to_numeric(pd.Series(ts), downcast="integer").to_numpy()
        stream = pd.to_numeric(pd.Series(_int_or_minus_one(part["arg:stream"])), downcast="integer")
        df = pd.DataFrame(
            {
                "index": index,
                "name": part["name"].astype(str).to_numpy(),
                "cat": part["category"].astype(str).to_numpy(),
                "pid": part["pid"].to_numpy(),
                "tid": part["tid"].to_numpy(),
                "ts": ts,
                "dur": dur.astype(np.float64),
                "stream": stream.to_numpy(),
                "correlation": _number_or(part["arg:correlation"], -1, np.int64),
                "memory_bw_gbps": _number_or(part["arg:memory bandwidth (GB/s)"], 0.0, np.float64),
            }
        )
        # HTA computes `end` before aligning the ranks and does not move it (only the
        # ProfilerStep filter below reads it).
        df["end"] = df["ts"] + df["dur"]
        _add_index_correlation(df)
        per_rank[rank] = df

    if not per_rank:
        return {}, {}

    # Align all ranks: the earliest event of any rank is t = 0.
    min_ts = min(df["ts"].min() for df in per_rank.values())
    for df in per_rank.values():
        df["ts"] = df["ts"] - min_ts

    # Keep the events of the complete iterations: host events that start before the last
    # ProfilerStep (or, with include_last_profiler_step, all of them: HTA compares the aligned
    # start with the unaligned end) and the device events their launches correlate with.
    step_names = set()
    for df in per_rank.values():
        for col in ("name", "cat"):
            step_names.update(s for s in pd.unique(df[col]) if "ProfilerStep" in s)
    if len(step_names) > 1:
        for rank, df in per_rank.items():
            gpu = _gpu_mask(df)
            cpu_ev, gpu_ev = df[~gpu], df[gpu]
            steps = cpu_ev[cpu_ev["name"].isin(step_names)]
            if include_last_profiler_step:
                cpu_ev = cpu_ev[cpu_ev["ts"] <= steps["end"].max()]
            else:
                cpu_ev = cpu_ev[cpu_ev["ts"] < steps["ts"].max()]
            gpu_ev = gpu_ev.merge(cpu_ev["correlation"], on="correlation", how="inner")
            per_rank[rank] = pd.concat([gpu_ev, cpu_ev], axis=0)
    for rank, df in per_rank.items():
        df = df.set_index("index", drop=False)
        df.index.names = [None]
        per_rank[rank] = df
    return per_rank, {r: file_of_source[s] for r, s in source_of_rank.items()}


# --------------------------------------------------------------------------------------------
# The calls.


def _merge_intervals(kernels: pd.DataFrame) -> pd.DataFrame:
    """Union of the kernels' [ts, ts + dur) as sorted, disjoint ``ts``/``end`` rows."""
    k = kernels[["ts", "dur"]].sort_values(by="ts")
    k["end"] = k["ts"] + k["dur"]
    k["group"] = (k["ts"] > k["end"].shift().cummax()).cumsum()
    return (
        k.groupby("group", as_index=False)
        .agg({"ts": "min", "end": "max"})
        .drop(["group"], axis=1)
        .sort_values(by="ts")
    )


def _device_events(df: pd.DataFrame) -> pd.DataFrame:
    """Every event HTA's breakdowns count as on the GPU: any with a ``stream`` arg but -1."""
    gpu = _with_kernel_type(df[df["stream"].ne(-1)].copy())
    if gpu.empty:
        # HTA's names come from a symbol-table lookup, which types an empty column as object.
        gpu["name"] = gpu["name"].astype(object)
    return gpu


def _overlap_by_type(gpu: pd.DataFrame, kinds: List[str]) -> pd.DataFrame:
    """µs during which each combination of kernel types runs (``A overlapping B``)."""
    events = pd.DataFrame({"status": pd.Series(dtype="str"), "time": pd.Series(dtype="int")})
    bit: Dict[str, int] = {}
    for i, kind in enumerate(kinds):
        bit[kind] = 1 << i
        merged = _merge_intervals(gpu[gpu["kernel_type"].eq(kind)])
        marks = merged.melt(var_name="status", value_name="time").replace(
            {"ts": bit[kind], "end": -bit[kind]}
        )
        events = pd.concat([events, marks]).sort_values(by="time").reset_index(drop=True)
    events["running"] = events["status"].cumsum()
    events["next_time"] = events["time"].shift(-1)
    label: Dict[Any, str] = {}
    for running in events["running"].unique():
        if running > 0:
            names = [k for k, b in bit.items() if running & b]
            if names:
                label[running] = " overlapping ".join(names)
    events["kernel_type"] = ""
    events = events[events["running"] > 0]
    for running, name in label.items():
        events.loc[events["running"].eq(running), "kernel_type"] = name
    events["dur"] = (events["next_time"] - events["time"]).astype(int)
    out = events.groupby(by=["kernel_type"])["dur"].agg(["sum"])
    out.reset_index(inplace=True)
    return out


def _aggregate(kernels: pd.DataFrame, num_kernels: int, duration_ratio: float) -> pd.DataFrame:
    """Per-name sum/max/min/mean/std of ``dur``; the tail folded into ``others``.

    Names are ranked by total time; those past the ``duration_ratio`` quantile of the running
    total, or past the first ``num_kernels``, become one ``others`` row whose statistics are
    over the folded names' totals (as HTA does).
    """
    agg = kernels.groupby(by=["name"])["dur"].agg(["sum", "max", "min", "mean", "std"])
    agg.reset_index(inplace=True)
    agg = agg.sort_values(by=["sum"], ascending=False, ignore_index=True)
    agg.fillna({"std": 0}, inplace=True)
    if agg.shape[0] > num_kernels:
        agg["cumsum"] = agg["sum"].cumsum()
        threshold = agg["cumsum"].quantile(duration_ratio)
        agg.loc[agg["cumsum"] > threshold, "name"] = "others"
        agg.loc[agg.index >= num_kernels, "name"] = "others"
        agg = agg.groupby(by=["name"])["sum"].agg(["sum", "max", "min", "mean", "std"])
        agg.reset_index(inplace=True)
        agg.fillna({"std": 0}, inplace=True)
    return agg


class TraceAnalysis:
    """HTA's ``TraceAnalysis`` over a steplens load.

    Args:
        trace_files: as HTA: a dict rank → file (relative to ``trace_dir`` or absolute), or a
            list of files (ranks from each file's ``distributedInfo``). Default: every
            ``.json``/``.gz`` file of ``trace_dir``.
        trace_dir: the folder of per-rank trace files (HTA's default ``/tmp/trace``).
        include_last_profiler_step: as HTA (note HTA then keeps every host event; see the doc).
        run: an already loaded steplens run to analyse instead of loading ``trace_dir``.
    """

    def __init__(
        self,
        trace_files: Optional[Union[Dict[int, str], List[str]]] = None,
        trace_dir: str = DEFAULT_TRACE_DIR,
        include_last_profiler_step: Optional[bool] = False,
        *,
        run: Any = None,
    ) -> None:
        ranks_of_files: Optional[Dict[str, int]] = None
        if run is None:
            if trace_files is None:
                run = _load(trace_dir)
            else:
                named = trace_files.values() if isinstance(trace_files, dict) else trace_files
                paths = [f if os.path.isabs(f) else os.path.join(trace_dir, f) for f in named]
                run = _load(paths)
                if isinstance(trace_files, dict):
                    ranks_of_files = {
                        (f if os.path.isabs(f) else os.path.join(trace_dir, f)): int(r)
                        for r, f in trace_files.items()
                    }
        self.run = run
        frame = _slice_frame(run)
        #: Whether the slices came with their file order (``event_index``): without it, results
        #: that depend on the order of simultaneous events can differ from HTA's (see the doc).
        self.in_file_order = _EVENT_INDEX in frame.columns
        self.traces, self.trace_files = _build_traces(
            frame, bool(include_last_profiler_step), ranks_of_files
        )

    # ---- helpers ------------------------------------------------------------------------

    def get_ranks(self) -> List[int]:
        """The ranks loaded, sorted."""
        return sorted(self.traces)

    def _trace(self, rank: int) -> pd.DataFrame:
        if rank not in self.traces:
            raise ValueError(f"no trace for rank {rank}; ranks: {self.get_ranks()}")
        return self.traces[rank]

    # ---- temporal breakdown -------------------------------------------------------------

    def get_temporal_breakdown(self, visualize: bool = True) -> pd.DataFrame:
        """Per rank: idle, compute and non-compute time (µs) over the kernels' span, and %."""
        result: Dict[str, List[Any]] = defaultdict(list)
        for rank, df in self.traces.items():
            gpu = _device_events(df)
            if gpu.empty:
                raise ValueError(f"rank {rank} has no GPU events: no temporal breakdown")
            merged = _merge_intervals(gpu)
            span = merged.iloc[-1]["end"] - merged.iloc[0]["ts"]
            idle = span - (merged["end"].sum() - merged["ts"].sum())
            comp = _merge_intervals(gpu[gpu["kernel_type"].eq(COMPUTATION)])
            compute = comp["end"].sum() - comp["ts"].sum()
            result["rank"].append(rank)
            result["idle_time(us)"].append(idle)
            result["compute_time(us)"].append(compute)
            result["non_compute_time(us)"].append(span - compute - idle)
            result["kernel_time(us)"].append(span)
        out = pd.DataFrame(result)
        for part in ("idle_time", "compute_time", "non_compute_time"):
            out[part] = out[f"{part}(us)"] / out["kernel_time(us)"]
            out[f"{part}_pctg"] = round(100 * out[part], 2)
        return out[
            [
                "rank",
                "idle_time(us)",
                "compute_time(us)",
                "non_compute_time(us)",
                "kernel_time(us)",
                "idle_time_pctg",
                "compute_time_pctg",
                "non_compute_time_pctg",
            ]
        ]

    # ---- kernel breakdown ---------------------------------------------------------------

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str = "",
    ) -> Tuple[pd.DataFrame, pd.DataFrame]:
        """(time per kernel type incl. overlaps with %, per-kernel statistics per rank)."""
        kinds = [COMPUTATION, COMMUNICATION] + ([MEMORY] if include_memory_kernels else [])
        by_kind = pd.DataFrame(
            {"kernel_type": pd.Series(dtype="str"), "sum": pd.Series(dtype="int")}
        )
        per_kernel = pd.DataFrame(
            {
                "name": pd.Series(dtype="str"),
                "sum": pd.Series(dtype="int"),
                "max": pd.Series(dtype="int"),
                "min": pd.Series(dtype="int"),
                "std": pd.Series(dtype="float"),
                "mean": pd.Series(dtype="int"),
                "kernel_type": pd.Series(dtype="str"),
                "rank": pd.Series(dtype="int"),
            }
        )
        for rank, df in self.traces.items():
            gpu = _device_events(df)
            by_kind = pd.concat([by_kind, _overlap_by_type(gpu, kinds)], ignore_index=True)
            for kind in kinds:
                agg = _aggregate(gpu[gpu["kernel_type"] == kind], num_kernels, duration_ratio)
                agg["kernel_type"] = kind
                agg["rank"] = int(rank)
                per_kernel = pd.concat([per_kernel, agg], ignore_index=True)
        by_kind = by_kind.groupby(by=["kernel_type"])["sum"].agg(["sum"])
        by_kind.reset_index(inplace=True)
        by_kind.sort_values(by=["sum"], ignore_index=True, inplace=True, ascending=False)
        by_kind["percentage"] = (by_kind["sum"] / by_kind["sum"].sum()) * 100
        by_kind = by_kind.round({"percentage": 1})
        per_kernel.sort_values(by=["kernel_type", "name", "rank"], ignore_index=True, inplace=True)
        per_kernel.rename(
            columns={
                "sum": "sum (us)",
                "mean": "mean (us)",
                "max": "max (us)",
                "min": "min (us)",
                "std": "stddev",
            },
            inplace=True,
        )
        return by_kind, per_kernel

    # ---- communication / computation overlap --------------------------------------------

    def get_comm_comp_overlap(self, visualize: bool = True) -> pd.DataFrame:
        """Per rank: % of communication-kernel time during which a compute kernel also runs."""
        result: Dict[str, List[Any]] = defaultdict(list)
        for rank, df in self.traces.items():
            gpu = _device_events(df)
            comp = _merge_intervals(gpu[gpu["kernel_type"].eq(COMPUTATION)])
            comm = _merge_intervals(gpu[gpu["kernel_type"].eq(COMMUNICATION)])
            marks = (
                pd.concat(
                    [
                        comm.melt(var_name="status", value_name="time").replace(
                            {"ts": 1, "end": -1}
                        ),
                        comp.melt(var_name="status", value_name="time").replace(
                            {"ts": 2, "end": -2}
                        ),
                    ]
                )
                .sort_values(by="time")
                .reset_index(drop=True)
            )
            marks["running"] = marks["status"].cumsum()
            both = marks[marks["running"].eq(3)]
            spans = both.merge(marks.shift(-1).dropna(), left_index=True, right_index=True)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = (spans["time_y"] - spans["time_x"]).sum() / (comm["end"] - comm["ts"]).sum()
            result["rank"].append(rank)
            result["comp_comm_overlap_ratio"].append(ratio)
        out = pd.DataFrame(result)
        out["comp_comm_overlap_pctg"] = round(100 * out["comp_comm_overlap_ratio"], 2)
        return out[["rank", "comp_comm_overlap_pctg"]]

    # ---- idle time breakdown ------------------------------------------------------------

    def _idle_for_rank(
        self,
        rank: int,
        streams: Optional[List[int]],
        show_idle_interval_stats: bool,
        consecutive_kernel_delay: int,
    ) -> Tuple[pd.DataFrame, Optional[pd.DataFrame]]:
        df = self._trace(rank)
        kernels = (
            df[df["stream"].ne(-1) & df["cat"].isin(_IDLE_KERNEL_CATS)]
            .copy()
            .set_index("index_correlation")
        )
        # The launch's start, through index_correlation (0 and -1 find event 0 / nothing).
        kernels = kernels.join(df[["ts", "index"]], on="index_correlation", rsuffix="_runtime")
        if not streams:
            streams = list(kernels["stream"].unique())
        if not streams:
            raise ValueError(f"rank {rank} has no GPU kernels: no idle time breakdown")
        sums: List[pd.DataFrame] = []
        stats: List[pd.DataFrame] = []
        for stream in streams:
            k = kernels[kernels["stream"] == stream].copy().sort_values(by="ts")
            k["end_ts"] = k["ts"] + k["dur"]
            k["prev_end_ts"] = k["end_ts"].shift(1)
            k["idle_interval"] = k["ts"] - k["prev_end_ts"]
            k["idle_category"] = 2
            host_wait = k["ts_runtime"] > k["prev_end_ts"]
            k.loc[host_wait, "idle_category"] = 0
            k.loc[~host_wait & (k["idle_interval"] < consecutive_kernel_delay), "idle_category"] = 1
            groups = k.groupby("idle_category")
            if show_idle_interval_stats:
                described = groups["idle_interval"].describe()
                described.insert(0, "stream", stream)
                stats.append(described)
            part = pd.DataFrame(groups["idle_interval"].sum())
            total = part["idle_interval"].sum()
            part["stream"] = stream
            part["idle_time_ratio"] = part["idle_interval"] / total
            part.rename(columns={"idle_interval": "idle_time"}, inplace=True)
            sums.append(part)
        out = pd.concat(sums)
        out.rename(mapper=_IDLE_NAMES, axis=0, inplace=True)
        out.reset_index(inplace=True)
        out["rank"] = rank
        interval_stats = None
        if show_idle_interval_stats:
            interval_stats = pd.concat(stats).round(2)
            interval_stats.insert(0, "rank", rank)
            interval_stats.rename(mapper=_IDLE_NAMES, axis=0, inplace=True)
        out = out[["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]].round(2)
        return out, interval_stats

    def get_idle_time_breakdown(
        self,
        ranks: Optional[List[int]] = None,
        streams: Optional[List[int]] = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> Tuple[pd.DataFrame, Optional[pd.DataFrame]]:
        """Per rank and stream: GPU idle µs split into host wait, kernel wait and other."""
        if not ranks:
            ranks = [0]
        sums, stats = [], []
        for rank in ranks:
            part, interval = self._idle_for_rank(
                rank, streams, show_idle_interval_stats, consecutive_kernel_delay
            )
            sums.append(part)
            if interval is not None:
                stats.append(interval)
        return pd.concat(sums), (pd.concat(stats) if show_idle_interval_stats else None)

    # ---- memory bandwidth ---------------------------------------------------------------

    def _memory_bw_series(self, rank: int) -> Optional[pd.DataFrame]:
        gpu = _device_events(self._trace(rank))
        mem = gpu[gpu["kernel_type"] == MEMORY].copy()
        kinds = {n: _memory_kind(n) for n in pd.unique(mem["name"])}
        mem["name"] = mem["name"].map(kinds)
        # HTA counts a 0 µs copy as 1 µs so its end comes after its start.
        mem.loc[mem["dur"] == 0, ["dur"]] = 1
        starts = mem[["ts", "name", "pid", "memory_bw_gbps"]]
        ends = mem[["ts", "name", "dur", "pid", "memory_bw_gbps"]].copy()
        ends["ts"] = ends["ts"] + ends["dur"]
        ends["memory_bw_gbps"] = -ends["memory_bw_gbps"]
        series = pd.concat(
            [starts, ends[["ts", "pid", "name", "memory_bw_gbps"]]], ignore_index=True
        ).sort_values(by="ts")
        parts = []
        for _, part in series.groupby("name"):
            part = part.copy()
            part["memory_bw_gbps"] = part["memory_bw_gbps"].cumsum()
            parts.append(part)
        if not parts:
            return None
        return pd.concat(parts)[["ts", "pid", "name", "memory_bw_gbps"]]

    def get_memory_bw_time_series(
        self, ranks: Optional[List[int]] = None
    ) -> Dict[int, pd.DataFrame]:
        """Per rank: GB/s in use by each copy kind (``Memcpy HtoD``, ``Memset``, …) as it changes."""
        if not ranks:
            ranks = [0]
        out = {rank: self._memory_bw_series(rank) for rank in ranks}
        return {r: v for r, v in out.items() if v is not None}

    def get_memory_bw_summary(self, ranks: Optional[List[int]] = None) -> Optional[pd.DataFrame]:
        """Per rank and copy kind: statistics of the non-zero points of the GB/s series."""
        parts = []
        for rank, series in self.get_memory_bw_time_series(ranks).items():
            series["rank"] = rank
            series = series[series["memory_bw_gbps"] > 0]
            parts.append(
                series[["rank", "name", "memory_bw_gbps"]].groupby(["rank", "name"]).describe()
            )
        return pd.concat(parts) if parts else None

    # ---- queue length -------------------------------------------------------------------

    def _queue_series(self, rank: int) -> Optional[pd.DataFrame]:
        df = self._trace(rank)
        cols = ["index", "ts", "pid", "tid", "stream", "correlation"]
        launches = df[df["name"].isin(_LAUNCH_NAMES) & (df["index_correlation"] > 0)][cols].copy()
        launches.drop(["stream", "pid", "tid"], axis=1, inplace=True)
        launches["queue"] = 1
        kernels = df[df["stream"].ne(-1)][cols].copy()
        kernels["queue"] = -1
        launches = launches.join(
            kernels[["stream", "pid", "tid", "correlation"]].set_index("correlation"),
            on="correlation",
        )
        kernels = kernels[kernels["correlation"].isin(launches["correlation"])]
        merged = pd.concat([launches, kernels]).sort_values(by="ts").set_index("index")
        parts = []
        for _, part in merged.groupby("stream"):
            part = part.copy()
            part["queue_length"] = part["queue"].cumsum()
            parts.append(part)
        if not parts:
            return None
        return pd.concat(parts)[["ts", "pid", "tid", "stream", "queue_length"]]

    def get_queue_length_time_series(
        self, ranks: Optional[List[int]] = None
    ) -> Dict[int, pd.DataFrame]:
        """Per rank: launches queued on each stream (+1 at the launch, -1 when it runs)."""
        if not ranks:
            ranks = [0]
        out = {rank: self._queue_series(rank) for rank in ranks}
        return {r: v for r, v in out.items() if v is not None}

    def get_queue_length_summary_from_time_series(
        self, queue_length_dict: Dict[int, pd.DataFrame]
    ) -> Optional[pd.DataFrame]:
        """Per rank and stream: statistics of the queue length series."""
        parts = []
        for rank, series in queue_length_dict.items():
            series["rank"] = rank
            parts.append(
                series[["rank", "stream", "queue_length"]].groupby(["rank", "stream"]).describe()
            )
        return pd.concat(parts) if parts else None

    def get_queue_length_summary(self, ranks: Optional[List[int]] = None) -> Optional[pd.DataFrame]:
        """Per rank and stream: statistics of the queue length series."""
        return self.get_queue_length_summary_from_time_series(
            self.get_queue_length_time_series(ranks)
        )

    # ---- not offered --------------------------------------------------------------------

    def critical_path_analysis(self, rank: int, annotation: str, instance_id: Any) -> Any:
        """Not offered: HTA's critical path is a networkx graph over call stacks and CUDA sync
        edges (about 1,800 lines in HTA); steplens' own critical path is ``run.table("critical_path")``."""
        raise NotImplementedError(
            "steplens.hta does not reproduce HTA's critical_path_analysis; "
            "steplens computes its own critical path (the critical_path table)"
        )
