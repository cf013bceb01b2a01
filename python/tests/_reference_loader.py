"""Test-only stand-in for ``steplens.load``: the ``slices`` table built in Python from the JSON.

``steplens.hta`` reads a run only through ``run.slices(args=[...]).to_pandas()`` (see
``steplens.hta._slices``). Until the Rust module is importable, the HTA reference tests load the
corpus traces with this module instead, which builds the same table the Rust side documents:

- one row per complete (``"ph": "X"``) event that has ``ts`` and ``dur``; a negative ``dur`` is
  clamped to 0 as the Rust builder does; a missing ``cat`` becomes ``""``;
- ``start_ns``/``dur_ns``: the µs text × 1000 **exactly** (decimal digits, not a float product),
  as ``ingest::json::micros_to_ns`` does; a fourth fractional digit rounds;
- provenance columns ``rank`` (``distributedInfo.rank``), ``file``, ``pid``, ``tid`` (null when
  written as a string), ``engine``, ``device`` and ``correlation`` (the ``ac2g`` /
  ``async_cpu_to_gpu`` flow id, on both ends);
- one column per requested arg key, after the fixed columns, named after the key: Int64 when every
  present value is an integer, Float64 when they are all numbers, else text (null where absent).
  A key that is also a fixed column name (``correlation``) gives a second column of that name,
  as the Arrow table does: ``steplens.hta._slices`` takes the last one for an arg.
- ``event_index``: the event's position in its file's ``traceEvents`` array. This column is the
  one addition ``steplens.hta`` asks of the Rust table (HTA's row order and its ``index`` column
  come from it); without it ``steplens.hta`` falls back to start-time order.

The rows come out grouped by source and track and sorted by start, not in file order, like the
Rust timeline, so the HTA layer cannot lean on the row order. ``track_name``, ``process``,
``track_kind``, ``engine``, ``depth``, ``parent``, ``self_ns`` and ``step`` are simple
approximations of the Rust values: ``steplens.hta`` does not read them.
"""

from __future__ import annotations

import gzip
import json
import os
from bisect import bisect_right
from typing import Any, Dict, Iterable, List, Optional, Sequence

import pandas as pd

from steplens.hta import SLICE_COLUMNS

_DEVICE_CATS = {
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "cuda_sync",
    "mtia_ccp_events",
    "Kernel",
    "Memcpy",
    "Memset",
}
_FLOW_CATS = {"ac2g", "async_cpu_to_gpu"}


class _JsonFloat(str):
    """A JSON number with a fraction or exponent, kept as its text so µs convert exactly."""


def _micros_to_ns(value: Any) -> Optional[int]:
    """µs (int, or the text of a JSON number) to integer ns, exactly for up to 3 decimals."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value * 1000
    text = str(value)
    if any(c in text for c in "eE"):
        return int(round(float(text) * 1000.0))
    negative = text.startswith("-")
    if negative:
        text = text[1:]
    whole, _, frac = text.partition(".")
    if not whole.isdigit() and whole != "":
        return None
    ns = int(whole or "0") * 1000
    digits = (frac + "000")[:3]
    ns += int(digits) if digits.isdigit() else 0
    if len(frac) > 3 and frac[3].isdigit() and int(frac[3]) >= 5:
        ns += 1
    return -ns if negative else ns


def _lane(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return None


def _arg_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _JsonFloat):
        f = float(value)
        return str(int(f)) if f.is_integer() else repr(f)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _arg_column(values: List[Any]) -> pd.Series:
    """Types one arg column the way the Rust table does (numbers, else text)."""
    present = [v for v in values if v is not None]
    is_int = [isinstance(v, int) and not isinstance(v, bool) for v in present]
    is_num = [isinstance(v, _JsonFloat) or k for v, k in zip(present, is_int)]
    if present and all(is_int):
        return pd.array(values, dtype="Int64")
    if all(is_num) and present:
        return pd.array([None if v is None else float(v) for v in values], dtype="Float64")
    if not present:
        return pd.array(values, dtype="Int64")
    return pd.Series([None if v is None else _arg_text(v) for v in values], dtype=object)


def _read(path: str) -> Dict[str, Any]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return json.loads(fh.read(), parse_float=_JsonFloat)


def trace_files(trace_dir: str) -> List[str]:
    """The files of a trace directory this loader reads (sorted, like the Rust directory walk)."""
    names = sorted(n for n in os.listdir(trace_dir) if n.endswith(".json") or n.endswith(".gz"))
    return [os.path.join(trace_dir, n) for n in names]


class _Table:
    def __init__(self, df: pd.DataFrame) -> None:
        self._df = df

    def to_pandas(self) -> pd.DataFrame:
        return self._df.copy()


class ReferenceRun:
    """What ``steplens.hta`` needs of a ``steplens`` run: ``files()`` and ``slices(args=...)``."""

    def __init__(self, paths: Sequence[str]) -> None:
        self._paths = list(paths)
        self._docs = [_read(p) for p in self._paths]
        self._base: Optional[pd.DataFrame] = None
        self._raw_args: List[Optional[Dict[str, Any]]] = []

    def files(self) -> List[str]:
        return list(self._paths)

    def _build(self) -> pd.DataFrame:
        rows: Dict[str, list] = {
            k: []
            for k in (
                "source",
                "track",
                "track_name",
                "process",
                "track_kind",
                "name",
                "category",
                "start_ns",
                "dur_ns",
                "rank",
                "file",
                "pid",
                "tid",
                "event_index",
            )
        }
        raw_args: List[Optional[Dict[str, Any]]] = []
        flows: List[tuple] = []
        track_ids: Dict[tuple, int] = {}
        for source, (path, doc) in enumerate(zip(self._paths, self._docs)):
            info = doc.get("distributedInfo") or {}
            rank = info.get("rank") if isinstance(info.get("rank"), int) else None
            names: Dict[Any, str] = {}
            events = doc.get("traceEvents") or []
            for e in events:
                if e.get("ph") == "M" and e.get("name") == "process_name":
                    names[e.get("pid")] = str((e.get("args") or {}).get("name", ""))
            for idx, e in enumerate(events):
                ph = e.get("ph")
                if ph in ("s", "f") and e.get("cat") in _FLOW_CATS:
                    flows.append((source, e.get("pid"), e.get("tid"), e.get("ts"), e.get("id"), ph))
                    continue
                if ph != "X" or "ts" not in e or "dur" not in e:
                    continue
                start = _micros_to_ns(e["ts"])
                dur = _micros_to_ns(e["dur"])
                if start is None or dur is None:
                    continue
                pid, tid = e.get("pid"), e.get("tid", e.get("pid"))
                key = (source, str(pid), str(tid))
                if key not in track_ids:
                    track_ids[key] = len(track_ids)
                rows["source"].append(source)
                rows["track"].append(track_ids[key])
                rows["track_name"].append(f"{pid}/{tid}")
                rows["process"].append(names.get(pid, str(pid)))
                rows["track_kind"].append("host")
                rows["name"].append(str(e.get("name", "")))
                rows["category"].append(str(e.get("cat", "")) if e.get("cat") is not None else "")
                rows["start_ns"].append(start)
                rows["dur_ns"].append(max(dur, 0))
                rows["rank"].append(rank)
                rows["file"].append(path)
                rows["pid"].append(_lane(pid))
                rows["tid"].append(_lane(tid))
                rows["event_index"].append(idx)
                args = e.get("args")
                raw_args.append(args if isinstance(args, dict) else None)
        df = pd.DataFrame(
            {
                "source": pd.array(rows["source"], dtype="uint32"),
                "track": pd.array(rows["track"], dtype="uint32"),
                "track_name": rows["track_name"],
                "process": rows["process"],
                "track_kind": rows["track_kind"],
                "name": rows["name"],
                "category": rows["category"],
                "start_ns": pd.array(rows["start_ns"], dtype="int64"),
                "dur_ns": pd.array(rows["dur_ns"], dtype="int64"),
            }
        )
        df["end_ns"] = df["start_ns"] + df["dur_ns"]
        df["rank"] = pd.array(rows["rank"], dtype="Int64")
        df["file"] = rows["file"]
        df["pid"] = pd.array(rows["pid"], dtype="Int64")
        df["tid"] = pd.array(rows["tid"], dtype="Int64")
        df["event_index"] = pd.array(rows["event_index"], dtype="int64")
        self._raw_args = raw_args

        # Device tracks: the ones carrying GPU activity.
        device_tracks = set(df.loc[df["category"].isin(_DEVICE_CATS), "track"].tolist())
        is_dev = df["track"].isin(device_tracks)
        df.loc[is_dev, "track_kind"] = "device"
        df["engine"] = pd.Series([None] * len(df), dtype=object)
        df.loc[is_dev, "engine"] = "compute-stream"
        df.loc[is_dev & df["category"].isin(["gpu_memcpy", "gpu_memset"]), "engine"] = "memcpy"
        df.loc[is_dev & df["category"].eq("cuda_sync"), "engine"] = "sync"
        df.loc[is_dev & df["category"].eq("gpu_user_annotation"), "engine"] = "annotation"
        df["device"] = df["pid"].where(is_dev)

        # Nesting per track: depth, parent, self time.
        order = df.sort_values(
            ["track", "start_ns", "dur_ns"], ascending=[True, True, False], kind="stable"
        ).index
        depth = [0] * len(df)
        parent: List[Optional[int]] = [None] * len(df)
        child = [0] * len(df)
        starts, ends, tracks = df["start_ns"].tolist(), df["end_ns"].tolist(), df["track"].tolist()
        stack: List[int] = []
        last_track = None
        for i in order:
            if tracks[i] != last_track:
                stack, last_track = [], tracks[i]
            while (
                stack
                and ends[stack[-1]] <= starts[i]
                and not (ends[stack[-1]] == starts[i] and starts[stack[-1]] == starts[i])
            ):
                stack.pop()
            if stack and ends[i] <= ends[stack[-1]]:
                parent[i] = stack[-1]
                depth[i] = depth[stack[-1]] + 1
                child[stack[-1]] += ends[i] - starts[i]
            stack.append(i)
        df["self_ns"] = (df["dur_ns"] - pd.Series(child, index=df.index)).clip(lower=0)
        df["depth"] = pd.array(depth, dtype="uint32")
        df["parent"] = pd.array(parent, dtype="UInt32")

        # Step: the ProfilerStep#N (host) slice of the same source the slice starts in.
        step: List[Optional[str]] = [None] * len(df)
        is_step = df["name"].str.startswith("ProfilerStep#") & df["track_kind"].eq("host")
        for source, grp in df[is_step].groupby("source"):
            grp = grp.sort_values("start_ns")
            s_start, s_end, s_name = (
                grp["start_ns"].tolist(),
                grp["end_ns"].tolist(),
                grp["name"].tolist(),
            )
            sel = df.index[df["source"].eq(source)]
            for i, ts in zip(sel, df.loc[sel, "start_ns"].tolist()):
                k = bisect_right(s_start, ts) - 1
                if k >= 0 and ts < s_end[k]:
                    step[i] = s_name[k]
        df["step"] = pd.Series(step, dtype=object)

        # Flow correlation: the slice each flow end binds to (same lane, starting at its ts).
        corr: List[Optional[int]] = [None] * len(df)
        by_lane: Dict[tuple, Dict[int, List[int]]] = {}
        for i, (s, p, t, ts) in enumerate(
            zip(df["source"].tolist(), df["pid"].tolist(), df["tid"].tolist(), starts)
        ):
            by_lane.setdefault((s, p, t), {}).setdefault(ts, []).append(i)
        for source, pid, tid, ts, fid, _ph in flows:
            ts_ns = _micros_to_ns(ts)
            hits = by_lane.get((source, _lane(pid), _lane(tid)), {}).get(ts_ns, [])
            if hits and isinstance(fid, int):
                corr[hits[-1]] = fid
        df["correlation"] = pd.array(corr, dtype="Int64")

        fixed = list(SLICE_COLUMNS)
        df = df[fixed]
        # Rust order: by source, track, start — not file order.
        order = df.sort_values(["source", "track", "start_ns"], kind="stable").index
        self._raw_args = [raw_args[i] for i in order]
        df = df.loc[order].reset_index(drop=True)
        return df

    def slices(self, args: Iterable[str] = ()) -> _Table:
        if self._base is None:
            self._base = self._build()
        df = self._base.copy()
        extra = []
        for key in args:
            values = [None if a is None else a.get(key) for a in self._raw_args]
            extra.append((key, _arg_column(values)))
        if extra:
            # Append positionally so a key equal to a fixed column's name gives a second column.
            parts = [df] + [pd.DataFrame({k: v}) for k, v in extra]
            df = pd.concat(parts, axis=1)
        return _Table(df)


def load(trace_dir: str) -> ReferenceRun:
    """Loads every ``.json``/``.gz`` file of ``trace_dir`` (or one file)."""
    if os.path.isdir(trace_dir):
        return ReferenceRun(trace_files(trace_dir))
    return ReferenceRun([trace_dir])
