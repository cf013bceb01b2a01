"""steplens for Python: where each training step's time goes, as DataFrames.

    import steplens
    run = steplens.load("traces/")          # files or directories; ranks from distributedInfo
    run.steps().to_pandas()                 # or .to_polars(), .to_arrow(), backend="pandas"
    run.findings(backend="polars")
    run.report()                            # the steplens.report/1 JSON, as a dict
    run                                     # in Jupyter: the HTML report

    # Many ranks, mapped where they live (Dask, Ray, a Slurm array) and reduced in one place:
    summaries = client.map(steplens.summarize, paths)   # one small, picklable Summary per rank
    steplens.reduce(client.gather(summaries)).ranks()   # the rank table of steplens.load(*paths)

Every figure comes from the same Rust code as the `steplens` command line, so a number in a
DataFrame is the number `steplens report` prints. Tables cross from Rust to Python as Arrow
(the PyCapsule stream interface): no JSON, no copy into Python objects until a backend asks.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Optional, Sequence, Union

from . import _steplens
from ._steplens import TraceError

__all__ = ["load", "check", "summarize", "reduce", "Run", "Summary", "Table", "Verdict",
           "TraceError", "SUMMARY_SCHEMA", "__version__"]
__version__ = _steplens.__version__
SUMMARY_SCHEMA = _steplens.SUMMARY_SCHEMA

PathLike = Union[str, "os.PathLike[str]"]
_BACKENDS = ("arrow", "pandas", "polars")


class Table:
    """One table of a run, held as Arrow data until a backend asks for it.

    ``to_pandas()``, ``to_polars()`` and ``to_arrow()`` convert it; it also speaks the Arrow
    PyCapsule protocol, so ``pyarrow.table(t)`` and ``polars.DataFrame(t)`` take it directly.
    """

    def __init__(self, arrow_table: Any):
        self._table = arrow_table

    @property
    def name(self) -> str:
        """The table's name (``steps``, ``slices``, …)."""
        return self._table.name

    @property
    def columns(self) -> list:
        """Column names, in order."""
        return list(self._table.columns)

    def __len__(self) -> int:
        return len(self._table)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._table.__arrow_c_stream__(requested_schema)

    def to_arrow(self):
        """The table as a ``pyarrow.Table``."""
        import pyarrow as pa

        return pa.table(self._table)

    def to_pandas(self):
        """The table as a ``pandas.DataFrame`` (nullable integer columns stay integers)."""
        import pandas as pd

        return self.to_arrow().to_pandas(types_mapper=_pandas_types(pd))

    def to_polars(self):
        """The table as a ``polars.DataFrame``."""
        import polars as pl

        return pl.from_arrow(self.to_arrow())

    def to(self, backend: str):
        """The table in ``backend``: ``"pandas"``, ``"polars"`` or ``"arrow"``."""
        if backend == "pandas":
            return self.to_pandas()
        if backend == "polars":
            return self.to_polars()
        if backend == "arrow":
            return self.to_arrow()
        raise ValueError(f"backend must be one of {', '.join(_BACKENDS)}, not {backend!r}")

    def __repr__(self) -> str:
        try:
            frame = self.to_pandas()
        except ImportError:
            frame = self.to_arrow()
        return f"steplens.Table {self.name!r}: {len(self)} rows\n{frame}"

    def _repr_html_(self) -> Optional[str]:
        try:
            return self.to_pandas()._repr_html_()
        except ImportError:
            return None


def _pandas_types(pd: Any):
    """Arrow → pandas dtypes that keep nulls in integer columns as ``<NA>``, not floats."""
    import pyarrow as pa

    mapping = {
        pa.int64(): pd.Int64Dtype(),
        pa.uint32(): pd.UInt32Dtype(),
        pa.uint64(): pd.UInt64Dtype(),
        pa.bool_(): pd.BooleanDtype(),
    }
    return mapping.get


def _deliver(table: Table, backend: Optional[str]):
    return table if backend is None else table.to(backend)


class Run:
    """Traces loaded and analysed: the report, the tables and the HTML page."""

    def __init__(self, inner: Any):
        self._run = inner
        self._report: Optional[dict] = None

    def files(self) -> list:
        """The input files (directories expanded)."""
        return self._run.files()

    def warnings(self) -> list:
        """Problems met while loading that did not stop it: ``(file, code, message)``."""
        return self._run.warnings()

    def report(self) -> dict:
        """The ``steplens.report/1`` JSON as a dict: exactly what ``steplens report -f json`` writes."""
        if self._report is None:
            self._report = json.loads(self._run.report_json())
        return self._report

    def text(self, top: int = 20) -> str:
        """The report as ``steplens report`` prints it."""
        return self._run.text(top)

    def html(self) -> str:
        """The self-contained HTML report page."""
        return self._run.html()

    def from_summaries(self) -> bool:
        """Whether ``reduce()`` made this Run from rank summaries: it then holds the rank
        analysis alone (``ranks()``, ``collectives()``, ``findings()``, ``report()``)."""
        return self._run.made_from_summaries()

    def _repr_html_(self) -> Optional[str]:
        if self.from_summaries():
            return None
        # Inline in a notebook: the report page in an iframe, so its styles stay its own.
        import html

        page = html.escape(self.html(), quote=True)
        return (
            f'<iframe srcdoc="{page}" style="width:100%;height:720px;border:1px solid #ccc" '
            'sandbox="allow-scripts"></iframe>'
        )

    def __repr__(self) -> str:
        report = self.report()
        found = _finding_count(report)
        if self.from_summaries():
            ranks = len((report.get("ranks") or {}).get("ranks", []))
            return f"<steplens.Run from {len(self.files())} summaries: {ranks} ranks, {found}>"
        return f"<steplens.Run {', '.join(self.files())}: {_step_count(report)}, {found}>"

    def table(self, name: str, backend: Optional[str] = None, args: Optional[Sequence[str]] = None):
        """Any table by name (see ``Run.table_names()``)."""
        return _deliver(Table(self._run.table(name, list(args) if args else None)), backend)

    @staticmethod
    def table_names() -> list:
        """Every name ``table()`` accepts."""
        return list(_steplens.Run.table_names())

    def steps(self, backend: Optional[str] = None):
        """One row per step: duration, host and device busy, device idle, data loader, engines."""
        return self.table("steps", backend)

    def ops(self, backend: Optional[str] = None):
        """The op summary: count, total, self, mean, p50 and p99 per op name and track kind."""
        return self.table("ops", backend)

    def findings(self, backend: Optional[str] = None):
        """The findings, ranked by what fixing them saves."""
        return self.table("findings", backend)

    def memory(self, backend: Optional[str] = None):
        """Memory per device (from ``profile_memory=True`` traces): peak, slack, never freed."""
        return self.table("memory", backend)

    def ranks(self, backend: Optional[str] = None):
        """One row per rank of a multi-rank run: step and collective medians, late arrivals."""
        return self.table("ranks", backend)

    def collectives(self, backend: Optional[str] = None):
        """One row per collective matched across ranks: latency, wait, skew."""
        return self.table("collectives", backend)

    def op_perf(self, backend: Optional[str] = None):
        """The performance model per op signature (name, shapes, dtypes) whose calls launched
        device work: FLOPs and bytes per call, achieved TFLOP/s and TB/s, share of the device's
        peak, what bounds it (the report's ``op_perf[]``; ``gemm.*`` columns for GEMMs)."""
        return self.table("op_perf", backend)

    def critical_path(self, backend: Optional[str] = None):
        """The critical path of every step: its slices, each with what bounds it."""
        return self.table("critical_path", backend)

    def idle(self, backend: Optional[str] = None):
        """Device idle time per stream: host wait, kernel wait and other."""
        return self.table("idle", backend)

    def engines(self, backend: Optional[str] = None):
        """Busy time and utilization per engine class."""
        return self.table("engines", backend)

    def tensorboard(self, view: str, backend: Optional[str] = None):
        """A TensorBoard plugin view: ``overview``, ``gpu_summary``, ``operators``,
        ``operators_by_shape``, ``kernels``, ``kernels_by_op`` or ``distributed``."""
        views = ("overview", "gpu_summary", "operators", "operators_by_shape", "kernels",
                 "kernels_by_op", "distributed")
        if view not in views:
            raise ValueError(f"view must be one of {', '.join(views)}, not {view!r}")
        return self.table(view, backend)

    def slices(
        self,
        name: Union[None, str, Iterable[str]] = None,
        track: Union[None, str, int] = None,
        category: Union[None, str, Iterable[str]] = None,
        args: Optional[Sequence[str]] = None,
        backend: Optional[str] = None,
    ):
        """Every slice, columnar: where it is (source, rank, file, track, pid, tid, engine),
        what it is (name, category), its times (ns), nesting, step and correlation id.

        ``name`` and ``category`` keep slices with that value (or any of several);
        ``track`` keeps one track by name or index; ``args`` adds one column per arg key.
        """
        table = Table(self._run.table("slices", list(args) if args else None))
        if name is None and track is None and category is None:
            return _deliver(table, backend)
        import pyarrow as pa
        import pyarrow.compute as pc

        data = table.to_arrow()
        keep = pa.array([True] * data.num_rows)
        if name is not None:
            keep = pc.and_(keep, pc.is_in(data["name"], value_set=pa.array(_values(name))))
        if category is not None:
            keep = pc.and_(keep, pc.is_in(data["category"], value_set=pa.array(_values(category))))
        if track is not None:
            column = data["track"] if isinstance(track, int) else data["track_name"]
            keep = pc.and_(keep, pc.equal(column, track))
        return _deliver(Table(_ArrowHolder(data.filter(keep), "slices")), backend)


class _ArrowHolder:
    """A pyarrow table in the shape ``Table`` wraps (for filtered slices)."""

    def __init__(self, data: Any, name: str):
        self._data = data
        self.name = name

    @property
    def columns(self) -> list:
        return list(self._data.column_names)

    def __len__(self) -> int:
        return self._data.num_rows

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._data.__arrow_c_stream__(requested_schema)


def _values(value: Union[str, Iterable[str]]) -> list:
    return [value] if isinstance(value, str) else list(value)


def _paths(paths: Iterable[Any]) -> list:
    out = []
    for p in paths:
        if isinstance(p, (list, tuple)):
            out.extend(_paths(p))
        else:
            out.append(os.fspath(p))
    return out


def load(*paths: PathLike, rank_regex: Optional[str] = None, no_mmap: bool = False,
         step_marker: Optional[str] = None) -> Run:
    """Load and analyse traces: files or directories of them (a run's ranks), any format
    steplens reads (Kineto JSON, Gaudi, Perfetto, .gz, .hltv).

    ``rank_regex`` gives the rank of a trace without ``distributedInfo`` from its path (the
    first capture group), as ``--rank-regex`` does. ``step_marker`` names the annotations that
    mark steps (a regex), as ``--step-marker`` does: an inference server's ``execute_model``,
    say. Raises ``steplens.TraceError`` (a ``ValueError``) with the CLI's one-line message and
    a ``code`` attribute.
    """
    return Run(_steplens.load(_paths(paths), rank_regex=rank_regex, no_mmap=no_mmap,
                              step_marker=step_marker))


class Summary:
    """One rank's summary: the ``steplens.rank-summary/1`` JSON that ``steplens summarize``
    writes (its collectives, per-step medians, op self time), a few kilobytes to a few hundred.

    Small and picklable, so a distributed engine ships it from the worker that read the trace
    to the one that calls ``reduce()``. ``bytes(summary)`` is the JSON; ``rank`` is the rank
    the trace (or ``rank_regex``, or its file name) states, ``None`` when nothing does;
    ``path`` is the trace's path.
    """

    __slots__ = ("_json", "rank", "path")

    def __init__(self, data: bytes, rank: Optional[int] = None, path: Optional[str] = None):
        data = bytes(data)
        if path is None:
            rank, path = _steplens.summary_info(data)
        self._json = data
        self.rank = rank
        self.path = path

    @classmethod
    def from_file(cls, path: PathLike) -> "Summary":
        """A summary ``steplens summarize -o FILE`` wrote."""
        with open(os.fspath(path), "rb") as f:
            return cls(f.read().rstrip(b"\r\n"))

    def save(self, path: PathLike) -> None:
        """Writes the summary as ``steplens summarize -o`` does (name it ``*.summary.json`` for
        ``steplens report --summaries DIR``)."""
        with open(os.fspath(path), "wb") as f:
            f.write(self._json + b"\n")

    def to_dict(self) -> dict:
        """The summary's JSON as a dict."""
        return json.loads(self._json)

    def __bytes__(self) -> bytes:
        return self._json

    def __len__(self) -> int:
        return len(self._json)

    def __getstate__(self):
        return (self._json, self.rank, self.path)

    def __setstate__(self, state) -> None:
        self._json, self.rank, self.path = state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Summary) and other._json == self._json

    def __hash__(self) -> int:
        return hash(self._json)

    def __repr__(self) -> str:
        return f"<steplens.Summary rank {self.rank} of {self.path}: {len(self._json):,} bytes>"


def _plural(n: int, one: str) -> str:
    return f"{n} {one}{'' if n == 1 else 's'}"


def _step_count(report: dict) -> str:
    """The steps as the CLI counts them: ``8 steps × 4 ranks`` when several ranks (else inputs)
    have steps."""
    steps = report.get("steps", [])
    ranks = {(s.get("rank"), 0 if s.get("rank") is not None else s.get("source")) for s in steps}
    n, r = len(steps), len(ranks)
    whose = "ranks" if any(s.get("rank") is not None for s in steps) else "inputs"
    if r > 1 and n % r == 0:
        return f"{_plural(n // r, 'step')} × {r} {whose}"
    if r > 1:
        return f"{_plural(n, 'step')} over {r} {whose}"
    return _plural(n, "step")


def _finding_count(report: dict) -> str:
    """The findings as the CLI counts them: ``2 groups · 19 findings`` (groups of one kind and
    place), ``3 findings`` when every group is one finding."""
    findings = len(report.get("findings", []))
    groups = len(report.get("finding_groups") or []) or findings
    if groups == findings:
        return _plural(findings, "finding")
    return f"{_plural(groups, 'group')} · {_plural(findings, 'finding')}"


def summarize(path: PathLike, rank_regex: Optional[str] = None, no_mmap: bool = False,
              step_marker: Optional[str] = None) -> Summary:
    """Summarize one rank's trace, as ``steplens summarize`` does: the map side of a job too
    large for one machine. Releases the GIL while it reads, so threads run in parallel.

    Map it where the traces are (``client.map(steplens.summarize, paths)`` on Dask,
    ``ray.remote``, one task of a Slurm array) and give the summaries to ``reduce()``.
    ``rank_regex`` and ``step_marker`` are ``load()``'s. Raises ``steplens.TraceError``.
    """
    data, rank, trace = _steplens.summarize(os.fspath(path), rank_regex=rank_regex,
                                            no_mmap=no_mmap, step_marker=step_marker)
    return Summary(data, rank, trace)


def reduce(summaries: Iterable[Union[Summary, bytes, PathLike]]) -> Run:
    """The rank analysis of many ranks from their summaries, as ``steplens report --summaries``
    does: a ``Run`` whose ``ranks()``, ``collectives()``, ``findings()`` (``straggler``) and
    ``report()["ranks"]`` equal those of ``steplens.load(*traces)`` for the same traces, given
    in the same order. The per-event parts of a report (steps, ops, the other detectors, the
    ``distributed`` view and the straggler's evidence slices) need the traces themselves.

    Each item is a ``Summary``, its bytes, or the path of a ``*.summary.json`` file. A summary
    of another schema version raises ``steplens.TraceError`` naming both versions.
    """
    docs = []
    labels = []
    for item in summaries:
        if isinstance(item, Summary):
            docs.append(item._json)
            labels.append(item.path or "")
        elif isinstance(item, (bytes, bytearray, memoryview)):
            docs.append(bytes(item))
            labels.append("")
        elif isinstance(item, (str, os.PathLike)):
            with open(os.fspath(item), "rb") as f:
                docs.append(f.read())
            labels.append(os.fspath(item))
        else:
            raise TypeError(
                f"reduce() takes Summaries from steplens.summarize(), their bytes or paths, "
                f"not {type(item).__name__}")
    return Run(_steplens.reduce(docs, labels))


class Verdict(dict):
    """The ``steplens.check/1`` verdict: a dict as ``steplens check -f json`` prints it, with
    ``passed`` as an attribute and as its truth value."""

    @property
    def passed(self) -> bool:
        return bool(self.get("passed"))

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        rules = self.get("rules", [])
        failed = [r.get("rule") for r in rules if r.get("status") == "fail"]
        state = "passed" if self.passed else f"failed: {', '.join(map(str, failed))}"
        return f"<steplens.Verdict {state}; {len(rules)} rules>"


def check(
    current: Union[Run, PathLike],
    baselines: Union[Run, PathLike, Sequence[Union[Run, PathLike]]],
    budget: Optional[PathLike] = None,
    warmup: Optional[int] = None,
) -> Verdict:
    """Check a run against baselines under a budget, as ``steplens check`` does.

    ``current`` and each baseline are a ``Run`` or a path (a trace, a saved report, or a
    baseline set from ``steplens baseline update``); several baselines are pooled. Paths are
    analysed with the budget's ``[thresholds]``; a ``Run`` keeps the analysis it was loaded with.
    """
    if isinstance(baselines, (Run, str, os.PathLike)):
        baselines = [baselines]
    def unwrap(x):
        if isinstance(x, Run):
            return x._run
        return os.fspath(x) if isinstance(x, (str, os.PathLike)) else x

    text = _steplens.check(
        unwrap(current),
        [unwrap(b) for b in baselines],
        budget=None if budget is None else os.fspath(budget),
        warmup=warmup,
    )
    return Verdict(json.loads(text))
