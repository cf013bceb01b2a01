"""steplens for Python: where each training step's time goes, as DataFrames.

    import steplens
    run = steplens.load("traces/")          # files or directories; ranks from distributedInfo
    run.steps().to_pandas()                 # or .to_polars(), .to_arrow(), backend="pandas"
    run.findings(backend="polars")
    run.report()                            # the steplens.report/1 JSON, as a dict
    run                                     # in Jupyter: the HTML report

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

__all__ = ["load", "check", "Run", "Table", "Verdict", "TraceError", "__version__"]
__version__ = _steplens.__version__

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

    def _repr_html_(self) -> str:
        # Inline in a notebook: the report page in an iframe, so its styles stay its own.
        import html

        page = html.escape(self.html(), quote=True)
        return (
            f'<iframe srcdoc="{page}" style="width:100%;height:720px;border:1px solid #ccc" '
            'sandbox="allow-scripts"></iframe>'
        )

    def __repr__(self) -> str:
        report = self.report()
        steps = len(report.get("steps", []))
        findings = len(report.get("findings", []))
        return f"<steplens.Run {', '.join(self.files())}: {steps} steps, {findings} findings>"

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
