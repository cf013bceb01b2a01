"""The Python API against the CLI: same report, same errors, every table in every backend."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

import steplens

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
CLEAN = SAMPLES / "torch-cpu" / "train_clean.json"
SYNC = SAMPLES / "torch-cpu" / "train_sync.json.gz"
RANKS = sorted((SAMPLES / "ci-aa").glob("straggler_rank*.json.gz"))
GAUDI = SAMPLES / "gaudi" / "train_hpu.hw.csv"


def cli():
    """The steplens binary built from this checkout: $STEPLENS_BIN, else the newer of the
    release and debug builds (the older one may predate the code under test)."""
    if os.environ.get("STEPLENS_BIN"):
        return os.environ["STEPLENS_BIN"]
    built = [REPO / "target" / p / "steplens" for p in ("release", "debug")]
    built = [p for p in built if p.exists()]
    if built:
        return str(max(built, key=lambda p: p.stat().st_mtime))
    found = shutil.which("steplens")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("no steplens binary in target/ (build it first: cargo build --release)")
    pytest.skip("no steplens binary in target/: cargo build --release")


def cli_json(*args):
    out = subprocess.run([cli(), *args], capture_output=True, text=True)
    return out.returncode, out.stdout, out.stderr


@pytest.fixture(scope="module")
def clean():
    return steplens.load(CLEAN)


@pytest.fixture(scope="module")
def ranks():
    return steplens.load(*RANKS)


def test_report_is_the_cli_json(clean):
    code, out, _ = cli_json("report", str(CLEAN), "-f", "json")
    assert code == 0
    assert clean.report() == json.loads(out)
    assert clean.report()["schema"] == "steplens.report/1"


def test_multi_rank_report_is_the_cli_json(ranks):
    code, out, _ = cli_json("report", *map(str, RANKS), "-f", "json")
    assert code == 0
    assert ranks.report() == json.loads(out)


def test_directory_loads_its_traces_and_skips_the_rest(tmp_path):
    for path in RANKS:
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "README.md").write_text("not a trace")
    (tmp_path / "truth.json").write_text("{}")
    run = steplens.load(tmp_path)
    assert [Path(f).name for f in run.files()] == [p.name for p in RANKS]
    assert len(run.ranks()) == len(RANKS)


@pytest.mark.parametrize(
    "make, code",
    [
        (lambda d: d / "missing.json", "io"),
        (lambda d: _write(d / "notes.json", b"hello, not a trace"), "not_a_trace"),
        (lambda d: _write(d / "cut.json.gz", CLEAN.read_bytes()[:10]), None),
        # A document steplens wrote is refused at the first look, naming what reads it.
        (
            lambda d: _write(
                d / "set.json", b'{"schema": "steplens.baselines/1", "keep": 5, "runs": []}'
            ),
            "not_a_trace",
        ),
    ],
)
def test_errors_are_the_cli_line(tmp_path, make, code):
    path = make(tmp_path)
    status, _, err = cli_json("report", str(path))
    with pytest.raises(steplens.TraceError) as raised:
        steplens.load(path)
    if status == 2:
        assert err.strip() == f"steplens: error: {raised.value}"
    assert isinstance(raised.value, ValueError)
    if code is not None:
        assert raised.value.code == code


def _write(path, data):
    path.write_bytes(data)
    return path


def test_bad_rank_regex_is_a_trace_error():
    with pytest.raises(steplens.TraceError, match="rank_regex: not a valid regex"):
        steplens.load(CLEAN, rank_regex="rank(")


def test_no_paths_is_an_error():
    with pytest.raises(steplens.TraceError, match="at least one"):
        steplens.load()


def test_step_marker_names_the_steps(tmp_path):
    # An inference trace in vLLM's shape: no ProfilerStep#N, one annotation per engine step.
    events = [{"ph": "X", "cat": "user_annotation", "name": "generate", "pid": 1, "tid": 1,
               "ts": 100 * i, "dur": 50} for i in range(3)]
    events += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                "ts": 100 * i + 10, "dur": 5} for i in range(3)]
    path = tmp_path / "serve.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert steplens.load(path).report()["steps"] == []
    steps = steplens.load(path, step_marker="^generate$").report()["steps"]
    assert [s["name"] for s in steps] == ["generate#1", "generate#2", "generate#3"]
    with pytest.raises(steplens.TraceError, match="step_marker: not a valid regex"):
        steplens.load(path, step_marker="(")


def test_rank_regex_names_ranks(tmp_path):
    # The sample traces carry distributedInfo; a copy without it gets its rank from the path.
    doc = json.loads(CLEAN.read_text())
    doc.pop("distributedInfo", None)
    path = tmp_path / "worker_r7.json"
    path.write_text(json.dumps(doc))
    run = steplens.load(path, rank_regex=r"worker_r(\d+)")
    assert set(run.slices(backend="pandas")["rank"].dropna()) == {7}


def test_steps_match_the_report(clean):
    steps = clean.steps().to_pandas()
    report = clean.report()["steps"]
    assert list(steps["name"]) == [s["name"] for s in report]
    assert list(steps["dur_ns"]) == [s["dur_ns"] for s in report]
    assert list(steps["host_busy_ns"]) == [s["host_busy_ns"] for s in report]
    assert list(steps["host_dur_ns"]) == [s["host_dur_ns"] for s in report]


def test_rank_steps_carry_their_rank(ranks):
    steps = ranks.steps().to_pandas()
    report = ranks.report()["steps"]
    assert list(steps["rank"]) == [s["rank"] for s in report]
    assert set(steps["rank"]) == {0, 1, 2, 3}


def test_every_table_in_every_backend(clean, ranks):
    import pandas as pd
    import polars as pl

    for run in (clean, ranks):
        for name in steplens.Run.table_names():
            table = run.table(name)
            assert table.name == name
            frame = table.to_pandas()
            assert isinstance(frame, pd.DataFrame)
            assert list(frame.columns) == table.columns
            assert len(frame) == len(table)
            polars_frame = table.to_polars()
            assert isinstance(polars_frame, pl.DataFrame)
            assert polars_frame.columns == table.columns
            assert polars_frame.height == len(table)
            assert pa.table(table).num_rows == len(table)
            assert isinstance(run.table(name, backend="polars"), pl.DataFrame)


def test_tables_hold_the_report_figures(ranks):
    report = ranks.report()
    assert len(ranks.findings()) == len(report["findings"])
    assert list(ranks.findings().to_pandas()["kind"]) == [f["kind"] for f in report["findings"]]
    assert list(ranks.ranks().to_pandas()["rank"]) == [r["rank"] for r in report["ranks"]["ranks"]]
    collectives = ranks.collectives().to_pandas()
    assert list(collectives["name"]) == [c["name"] for c in report["ranks"]["collectives"]]
    ops = ranks.ops().to_pandas()
    assert list(ops["total_ns"]) == [o["total_ns"] for o in report["ops"]]


def test_op_perf_is_the_report_op_perf():
    run = steplens.load(SAMPLES / "ranks" / "nccl_straggler" / "nccl_straggler_rank0.json.gz")
    rows = run.report()["op_perf"]
    table = run.op_perf()
    assert table.name == "op_perf" and len(table) == len(rows) > 0
    flat = []
    for row in rows:
        gemm = row.get("gemm") or {}
        out = {k: v for k, v in row.items() if k != "gemm"}
        out.update({f"gemm.{k}": gemm.get(k) for k in ("m", "n", "k", "b", "bias")})
        flat.append(out)
    got = table.to_arrow().to_pylist()
    assert [{k: r.get(k) for k in f} for r, f in zip(got, flat)] == flat
    assert any(r["gemm.m"] for r in got)
    assert run.op_perf(backend="pandas")["calls"].sum() == sum(r["calls"] for r in rows)


def test_slices_are_every_slice_with_provenance(ranks):
    slices = ranks.slices().to_pandas()
    info = json.loads(cli_json("info", str(RANKS[0]), "--json")[1])
    assert len(slices) > 0
    assert set(slices["rank"]) == set(range(len(RANKS)))
    assert (slices["end_ns"] - slices["start_ns"] == slices["dur_ns"]).all()
    assert (slices["self_ns"] <= slices["dur_ns"]).all()
    # Every parent starts no later and ends no earlier than its child, on the same track.
    child = slices[slices["parent"].notna()]
    parent = slices.loc[child["parent"].astype(int)].set_index(child.index)
    assert (parent["start_ns"] <= child["start_ns"]).all()
    assert (parent["end_ns"] >= child["end_ns"]).all()
    assert (parent["track"] == child["track"]).all()
    assert info["slices"] == (slices["source"] == 0).sum()


def test_slices_filters_and_args(clean):
    all_slices = clean.slices(args=["Input Dims"]).to_pandas()
    ops = clean.slices(category="cpu_op", backend="pandas")
    assert len(ops) == (all_slices["category"] == "cpu_op").sum()
    linear = clean.slices(name=["aten::linear", "aten::addmm"], backend="polars")
    assert set(linear["name"].unique()) <= {"aten::linear", "aten::addmm"}
    assert linear.height == all_slices["name"].isin(["aten::linear", "aten::addmm"]).sum()
    one_track = clean.slices(track=0, backend="arrow")
    assert set(one_track["track"].to_pylist()) == {0}
    dims = all_slices.loc[all_slices["name"] == "aten::addmm", "Input Dims"]
    assert dims.notna().all() and dims.str.startswith("[[").all()


def test_gaudi_and_critical_path():
    run = steplens.load(GAUDI)
    assert len(run.slices()) > 0
    engines = run.engines().to_pandas()
    assert set(engines["class"]) & {"MME", "TPC"}
    clean = steplens.load(CLEAN)
    path = clean.critical_path().to_pandas()
    report = clean.report()
    assert len(path) == sum(len(s.get("critical_path", {}).get("slices", [])) for s in report["steps"])
    bounds = {"host_compute", "launch_overhead", "device_compute", "communication", "kernel_gap",
              "sync_wait", "data_loading", "compile"}
    assert len(path) > 0 and set(path["bound"]) <= bounds
    # Within a step no nanosecond is on the path twice.
    for _, step in path.groupby("step"):
        step = step.sort_values("start_ns")
        assert (step["start_ns"].iloc[1:].values >= (step["start_ns"] + step["dur_ns"]).iloc[:-1].values).all()


def test_check_matches_the_cli():
    baseline = SAMPLES / "ci" / "baseline.report.json"
    budget = SAMPLES / "ci" / "steplens.toml"
    for current, expect in ((CLEAN, True), (SYNC, False)):
        verdict = steplens.check(current, baseline, budget=budget)
        code, out, _ = cli_json("check", str(current), "--baseline", str(baseline), "--budget", str(budget), "-f", "json")
        cli_verdict = json.loads(out)
        assert verdict.passed is expect and bool(verdict) is expect
        assert code == (0 if expect else 1)
        assert [(r["rule"], r["status"]) for r in verdict["rules"]] == [
            (r["rule"], r["status"]) for r in cli_verdict["rules"]
        ]
    # Runs from load() stand in for paths.
    verdict = steplens.check(steplens.load(SYNC), [steplens.load(CLEAN)])
    assert verdict["schema"] == "steplens.check/1"
    with pytest.raises(ValueError, match="Runs from steplens.load"):
        steplens.check(CLEAN, [42])


def test_text_and_html(clean):
    code, out, _ = cli_json("report", str(CLEAN))
    assert clean.text() == out
    assert clean.html().lstrip().lower().startswith("<!doctype html")
    assert "<iframe" in clean._repr_html_()
    assert "steps" in repr(clean)
    assert "ProfilerStep" in repr(clean.steps())


def test_unknown_table_and_backend(clean):
    with pytest.raises(ValueError, match="no table named"):
        clean.table("nope")
    with pytest.raises(ValueError, match="backend must be"):
        clean.steps(backend="excel")
