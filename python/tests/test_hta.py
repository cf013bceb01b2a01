"""``steplens.hta`` against Holistic Trace Analysis itself, on every corpus trace HTA loads.

Each test runs one HTA call on one trace twice, with HTA (``pip install HolisticTraceAnalysis``,
0.5.0) and with ``steplens.hta``, and compares DataFrame to DataFrame.

Tolerances, column by column:

- Every column of every returned DataFrame, its index and its dtypes: **exact**
  (``assert_frame_equal(check_exact=True)``): ``steplens.hta`` rebuilds HTA's float64 µs from
  our integer ns bit for bit and does its sums and sorts in HTA's order, so there is nothing to
  forgive.
- ``pid`` and ``tid`` of the two time-series calls: equal values, different dtype on purpose (ours
  are the slices table's nullable integers; HTA keeps the JSON's mixed ``object`` column).
- Where HTA raises (a trace without kernels: ``cupti_profiler``, temporal and idle breakdowns;
  a default ``ranks=[0]`` on a trace without rank 0), ``steplens.hta`` must raise ``ValueError``.
- Without the slices table's ``event_index`` column (``test_fallback_without_event_index``, and
  the ``steplens.load`` comparisons while the Rust table lacks it), HTA's file order is unknown:
  the idle breakdown's rows come in another stream order (compared sorted; values exact),
  per-kernel ``stddev`` sums in another order (relative 1e-12), the queue-length statistics see
  launches and kernels that start in the same µs in another order (count exact, the others within
  1 queued launch), the memory-bandwidth summary may count one float residual more or less at
  simultaneous copies (count within 0.1 %, max exact, the percentiles not compared), and the time
  series' index (event numbers) and tie order differ (same points compared, values not).

The traces come from ``<repo>/../shared/corpus/hta`` (one trace directory per case, each file
linked into its own temporary folder as HTA wants). A missing corpus or a missing HTA skips these
tests with the reason, and fails them when ``CI=true``. Until the Rust module is built the traces
are read by ``_reference_loader`` (the slices table built in Python); once ``steplens.load``
exists, every comparison also runs on its table.
"""

from __future__ import annotations

import logging
import os
import pathlib
import random
import warnings
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import pandas as pd
import pytest

import _reference_loader
from steplens import hta as sh

REPO = pathlib.Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus"
HTA_CORPUS = CORPUS / "hta"
IN_CI = os.environ.get("CI") == "true"

# Case → trace files below corpus/hta (one case = one trace directory, one file per rank).
# Every Kineto trace of the corpus is here: HTA loads each in under 5 s (the largest, MTIA's
# 87 MB, in about 5 s), so none is skipped for time.
CASES: Dict[str, List[str]] = {
    "amd_mi250": ["amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"],
    "alexnet": ["critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"],
    "cuda_event_sync": ["critical_path/cuda_event_sync/event_sync_trace.json.gz"],
    "cuda_event_sync_multi_stream": [
        "critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz"
    ],
    "cupti_profiler": ["cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"],
    "df_index_resolver": ["df_index_resolver/df_index_resolver.json.gz"],
    "mtia_single_rank": ["mtia_trace_single_rank/mtia_rank_0.json.gz"],
    "nccl_parser_config": ["nccl_parser_config/nccl_data.json.gz"],
    "negative_queue_length": ["negative_queue_length_values_check/rank0.json.gz"],
    "ns_resolution": ["ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"],
    "trace_diff_control": ["trace_diff/control/control.json.gz"],
    "trace_diff_test": ["trace_diff/test/test.json.gz"],
    "trace_filter_two_ranks": [
        "trace_filter/sampled_rank-0.json.gz",
        "trace_filter/sampled_rank-1.json.gz",
    ],
    "triton": ["triton_example/triton_example.json.gz"],
}
# Cases also run with include_last_profiler_step=True (a second HTA load each: small ones).
LAST_STEP_CASES = ["amd_mi250", "nccl_parser_config", "trace_filter_two_ranks"]
# Cases of the fallback test (slices without event_index).
FALLBACK_CASES = ["alexnet", "negative_queue_length", "trace_filter_two_ranks"]

Call = Callable[[Any, List[int]], Any]
CALLS: Dict[str, Call] = {
    "temporal_breakdown": lambda ta, ranks: ta.get_temporal_breakdown(visualize=False),
    "idle_time_breakdown": lambda ta, ranks: ta.get_idle_time_breakdown(
        ranks=ranks, visualize=False, show_idle_interval_stats=True
    ),
    "idle_time_breakdown_defaults": lambda ta, ranks: ta.get_idle_time_breakdown(visualize=False),
    "idle_time_breakdown_delay_5": lambda ta, ranks: ta.get_idle_time_breakdown(
        ranks=ranks, visualize=False, consecutive_kernel_delay=5
    ),
    "gpu_kernel_breakdown": lambda ta, ranks: ta.get_gpu_kernel_breakdown(visualize=False),
    "gpu_kernel_breakdown_top3_no_memory": lambda ta, ranks: ta.get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=0.5, num_kernels=3, include_memory_kernels=False
    ),
    "comm_comp_overlap": lambda ta, ranks: ta.get_comm_comp_overlap(visualize=False),
    "memory_bw_summary": lambda ta, ranks: ta.get_memory_bw_summary(ranks=ranks),
    "memory_bw_time_series": lambda ta, ranks: ta.get_memory_bw_time_series(ranks=ranks),
    "queue_length_summary": lambda ta, ranks: ta.get_queue_length_summary(ranks=ranks),
    "queue_length_time_series": lambda ta, ranks: ta.get_queue_length_time_series(ranks=ranks),
}
LAST_STEP_CALLS = ["temporal_breakdown", "gpu_kernel_breakdown", "queue_length_summary"]


# --------------------------------------------------------------------------------------------
# Environment: the corpus and HTA.


def _missing(what: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} (CI=true: the HTA reference tests must run)")
    pytest.skip(what)


def _need_corpus() -> None:
    if not HTA_CORPUS.is_dir():
        _missing(f"trace corpus not found at {HTA_CORPUS} (expected <repo>/../shared/corpus)")


def _hta_class() -> Any:
    try:
        from hta.configs.config import logger
        from hta.trace_analysis import TraceAnalysis
    except ImportError as exc:
        _missing(
            f"HolisticTraceAnalysis is not importable ({exc}); pip install HolisticTraceAnalysis"
        )
    logger.setLevel(logging.ERROR)
    return TraceAnalysis


def _real_load() -> Any:
    """``steplens.load`` when the Rust module is built, else None."""
    try:
        import steplens

        load = getattr(steplens, "load", None)
        return load if callable(load) else None
    except ImportError:
        return None


# --------------------------------------------------------------------------------------------
# Loading and running, cached for the session.

_DIRS: Dict[str, str] = {}
_TAS: Dict[Tuple[str, str, bool], Any] = {}
_RESULTS: Dict[Tuple[str, str, bool, str], Tuple[bool, Any]] = {}


@pytest.fixture(scope="session")
def trace_root(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("hta-traces")


def _case_dir(root: pathlib.Path, case: str) -> str:
    if case not in _DIRS:
        folder = root / case
        folder.mkdir()
        for rel in CASES[case]:
            src = HTA_CORPUS / rel
            if not src.is_file():
                _missing(f"corpus trace {src} not found")
            (folder / src.name).symlink_to(src)
        _DIRS[case] = str(folder)
    return _DIRS[case]


class _NoEventIndex:
    """A run whose slices table lacks ``event_index`` (the fallback path)."""

    def __init__(self, run: Any) -> None:
        self._run = run

    def slices(self, args: Any = ()) -> Any:
        df = sh._slices(self._run, args)
        return df.drop(columns=[c for c in df.columns if c == "event_index"])


def _analysis(side: str, root: pathlib.Path, case: str, last_step: bool) -> Any:
    key = (side, case, last_step)
    if key not in _TAS:
        folder = _case_dir(root, case)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if side == "hta":
                    ta = _hta_class()(trace_dir=folder, include_last_profiler_step=last_step)
                elif side == "reference":
                    ta = sh.TraceAnalysis(
                        run=_reference_loader.load(folder), include_last_profiler_step=last_step
                    )
                elif side == "fallback":
                    run = _NoEventIndex(_reference_loader.load(folder))
                    ta = sh.TraceAnalysis(run=run, include_last_profiler_step=last_step)
                else:
                    ta = sh.TraceAnalysis(trace_dir=folder, include_last_profiler_step=last_step)
            except (pytest.skip.Exception, pytest.fail.Exception):
                raise
            except Exception as exc:  # noqa: BLE001 - reported by the test that needs it
                ta = exc
        _TAS[key] = ta
    ta = _TAS[key]
    if isinstance(ta, Exception):
        raise ta
    return ta


def _run(side: str, root: pathlib.Path, case: str, last_step: bool, call: str) -> Tuple[bool, Any]:
    """(True, result) or (False, exception) of one call."""
    key = (side, case, last_step, call)
    if key not in _RESULTS:
        ta = _analysis(side, root, case, last_step)
        ranks = sorted(ta.t.get_ranks()) if side == "hta" else ta.get_ranks()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                _RESULTS[key] = (True, CALLS[call](ta, ranks))
            except Exception as exc:  # noqa: BLE001
                _RESULTS[key] = (False, exc)
    return _RESULTS[key]


# --------------------------------------------------------------------------------------------
# Comparing.


def _assert_series_frames(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    """A time series: exact but for pid/tid, whose values (not dtypes) must be equal."""
    lanes = [c for c in ("pid", "tid") if c in theirs.columns]
    pd.testing.assert_frame_equal(
        ours.drop(columns=lanes), theirs.drop(columns=lanes), check_exact=True
    )
    for col in lanes:
        assert [int(v) for v in ours[col]] == [int(v) for v in theirs[col]], col


def _assert_same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
    elif theirs is None:
        assert ours is None
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict)
        assert sorted(ours) == sorted(theirs)
        for rank in theirs:
            _assert_series_frames(ours[rank], theirs[rank])
    else:
        assert isinstance(ours, pd.DataFrame), type(ours)
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True)


def _compare(side: str, root: pathlib.Path, case: str, last_step: bool, call: str) -> None:
    _need_corpus()
    hta_ok, theirs = _run("hta", root, case, last_step, call)
    ok, ours = _run(side, root, case, last_step, call)
    if not hta_ok:
        assert not ok, f"HTA raised {theirs!r}; steplens.hta returned a result"
        assert isinstance(ours, ValueError), f"expected ValueError, got {ours!r} (HTA: {theirs!r})"
        return
    if not ok:
        raise ours
    if _analysis(side, root, case, last_step).in_file_order:
        _assert_same(ours, theirs)
    else:
        _assert_close_without_file_order(call, ours, theirs)


# --------------------------------------------------------------------------------------------
# The tests.

PAIRS = [(case, call) for case in CASES for call in CALLS]


@pytest.mark.parametrize("case,call", PAIRS, ids=[f"{c}-{k}" for c, k in PAIRS])
def test_matches_hta(trace_root: pathlib.Path, case: str, call: str) -> None:
    _compare("reference", trace_root, case, False, call)


LAST_PAIRS = [(case, call) for case in LAST_STEP_CASES for call in LAST_STEP_CALLS]


@pytest.mark.parametrize("case,call", LAST_PAIRS, ids=[f"{c}-{k}" for c, k in LAST_PAIRS])
def test_matches_hta_include_last_profiler_step(
    trace_root: pathlib.Path, case: str, call: str
) -> None:
    _compare("reference", trace_root, case, True, call)


@pytest.mark.parametrize("case", list(CASES))
def test_same_ranks_as_hta(trace_root: pathlib.Path, case: str) -> None:
    _need_corpus()
    theirs = _analysis("hta", trace_root, case, False)
    ours = _analysis("reference", trace_root, case, False)
    assert ours.get_ranks() == sorted(theirs.t.get_ranks())


@pytest.mark.parametrize("case,call", PAIRS, ids=[f"{c}-{k}" for c, k in PAIRS])
def test_matches_hta_with_steplens_load(trace_root: pathlib.Path, case: str, call: str) -> None:
    """The same comparisons on the Rust slices table, once ``steplens.load`` exists."""
    if _real_load() is None:
        pytest.skip("steplens.load is not available (Rust module not built)")
    _compare("steplens", trace_root, case, False, call)


def _sorted_idle(df: pd.DataFrame, stats: bool) -> pd.DataFrame:
    if stats:
        df = df.reset_index()
    return df.sort_values(["rank", "stream", "idle_category"], kind="stable").reset_index(drop=True)


def _assert_close_without_file_order(call: str, ours: Any, theirs: Any) -> None:
    """The tolerances of slices without ``event_index`` (see the module docstring)."""
    if call.startswith("idle_time_breakdown"):
        for stats, (a, b) in enumerate(zip(ours, theirs)):
            if b is None:
                assert a is None
                continue
            pd.testing.assert_frame_equal(
                _sorted_idle(a, bool(stats)), _sorted_idle(b, bool(stats)), check_exact=True
            )
    elif call.startswith("gpu_kernel_breakdown"):
        pd.testing.assert_frame_equal(ours[0], theirs[0], check_exact=True)
        pd.testing.assert_frame_equal(ours[1], theirs[1], check_exact=False, rtol=1e-12, atol=1e-9)
    elif call == "queue_length_summary":
        if theirs is None:
            assert ours is None
            return
        pd.testing.assert_index_equal(ours.index, theirs.index)
        count = ("queue_length", "count")
        pd.testing.assert_series_equal(ours[count], theirs[count], check_exact=True)
        rest = [c for c in theirs.columns if c != count]
        pd.testing.assert_frame_equal(ours[rest], theirs[rest], check_exact=False, rtol=0, atol=1.0)
    elif call == "memory_bw_summary":
        # A copy ending where another starts leaves a float residual (1e-13 GB/s) or not,
        # depending on which comes first; the residual is one more "non-zero" point, which moves
        # the percentiles. Only the count (within one point per 1000) and the max are compared.
        if theirs is None:
            assert ours is None
            return
        pd.testing.assert_index_equal(ours.index, theirs.index)
        count, top = ("memory_bw_gbps", "count"), ("memory_bw_gbps", "max")
        pd.testing.assert_series_equal(
            ours[count], theirs[count], check_exact=False, rtol=1e-3, atol=1
        )
        pd.testing.assert_series_equal(ours[top], theirs[top], check_exact=True)
    elif call.endswith("time_series"):
        # Which of two simultaneous points comes first is unknown: same points, values unchecked.
        assert sorted(ours) == sorted(theirs)
        for rank in theirs:
            assert sorted(ours[rank]["ts"].tolist()) == sorted(theirs[rank]["ts"].tolist())
            key = "stream" if "stream" in theirs[rank].columns else "name"
            assert sorted(ours[rank][key].tolist()) == sorted(theirs[rank][key].tolist())
    else:
        _assert_same(ours, theirs)


FALLBACK_CALLS = [
    "temporal_breakdown",
    "idle_time_breakdown",
    "gpu_kernel_breakdown",
    "comm_comp_overlap",
    "memory_bw_summary",
    "queue_length_summary",
    "queue_length_time_series",
]
FALLBACK_PAIRS = [(case, call) for case in FALLBACK_CASES for call in FALLBACK_CALLS]


@pytest.mark.parametrize("case,call", FALLBACK_PAIRS, ids=[f"{c}-{k}" for c, k in FALLBACK_PAIRS])
def test_fallback_without_event_index(trace_root: pathlib.Path, case: str, call: str) -> None:
    """Slices without ``event_index``: the tolerances of the module docstring."""
    _need_corpus()
    hta_ok, theirs = _run("hta", trace_root, case, False, call)
    ok, ours = _run("fallback", trace_root, case, False, call)
    assert hta_ok and ok, (theirs, ours)
    assert not _analysis("fallback", trace_root, case, False).in_file_order
    _assert_close_without_file_order(call, ours, theirs)


# --------------------------------------------------------------------------------------------
# Without HTA or the corpus.


def test_float_us_rebuilt_exactly() -> None:
    """``q + r / 1000`` from our ns is the float64 HTA's JSON parser makes of the µs text."""
    rng = random.Random(7)
    starts, texts = [], []
    for _ in range(20000):
        whole = rng.randrange(10**9, 9 * 10**15)
        frac = rng.randrange(1000)
        texts.append(f"{whole}.{frac:03d}")
        starts.append(whole * 1000 + frac)
    for whole in (4458676522690, 1712195495505543, 2**52, 2**53 - 1):
        for frac in (0, 125, 250, 375, 500, 625, 750, 875, 1, 999):
            texts.append(f"{whole}.{frac:03d}")
            starts.append(whole * 1000 + frac)
    start_ns = np.array(starts, dtype=np.int64)
    q, r = np.divmod(start_ns, 1000)
    ours = q.astype(np.float64) + r / 1000.0
    assert ours.tolist() == [float(t) for t in texts]


def test_hta_rounding_of_fractional_microseconds() -> None:
    """Start rounds up, end (``ts + dur`` in float64) down; whole-µs files are left alone."""
    ts, dur, rounded = sh._hta_times(np.array([1_500, 10_200]), np.array([2_000, 500]))
    assert rounded
    assert ts.tolist() == [2, 11]
    assert dur.tolist() == [1.0, -1.0]  # 10.2 + 0.5 floors to 10, before the start: HTA's -1
    ts, dur, rounded = sh._hta_times(np.array([1_000, 3_000]), np.array([2_500, 0]))
    assert not rounded
    assert ts.tolist() == [1, 3] and dur.tolist() == [2.5, 0.0]


def test_correlation_arg_beside_the_flow_column() -> None:
    """A ``correlation`` arg comes after the table's own ``correlation``: the arg is the last."""

    class Run:
        def slices(self, args: Any = ()) -> pd.DataFrame:
            fixed = pd.DataFrame(
                {
                    "source": [0],
                    "rank": [None],
                    "file": ["a.json"],
                    "name": ["k"],
                    "category": ["kernel"],
                    "start_ns": [1000],
                    "dur_ns": [1000],
                    "pid": [0],
                    "tid": [7],
                    "correlation": [99],
                }
            )
            extra = pd.DataFrame(
                {"stream": [7], "correlation": [5], "memory bandwidth (GB/s)": [None]}
            )
            return pd.concat([fixed, extra[list(args)]], axis=1)

    frame = sh._slice_frame(Run())
    assert frame["arg:correlation"].tolist() == [5]
    assert frame["arg:stream"].tolist() == [7]
    assert "event_index" not in frame.columns


def test_critical_path_is_not_offered() -> None:
    ta = sh.TraceAnalysis.__new__(sh.TraceAnalysis)
    with pytest.raises(NotImplementedError):
        ta.critical_path_analysis(0, "ProfilerStep", 1)
