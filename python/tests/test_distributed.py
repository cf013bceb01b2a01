"""Map and reduce: ``steplens.summarize`` per rank, ``steplens.reduce`` in one place, on every
multi-rank sample, on generated ranks, and on a real distributed engine (Dask; Ray where it is
installed). The reduce must give the rank analysis ``steplens.load`` gives for the same traces.
"""

import importlib.util
import itertools
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

import steplens

from test_api import cli

REPO = Path(__file__).resolve().parents[1].parent
SAMPLES = REPO / "samples"


def _multi_rank_samples():
    """Every set of rank traces in samples/: files named ``<prefix>rank<N>`` that share a
    folder and a prefix, two or more to a set."""
    found = sorted(SAMPLES.rglob("*rank[0-9]*.json*"))
    found = [p for p in found if not p.name.endswith(".truth.json")]
    key = lambda p: (str(p.parent), re.sub(r"rank\d+.*", "", p.name))  # noqa: E731
    sets = []
    for _, group in itertools.groupby(sorted(found, key=key), key=key):
        group = sorted(group, key=lambda p: int(re.search(r"rank(\d+)", p.name).group(1)))
        if len(group) >= 2:
            sets.append(group)
    return sets


MULTI = _multi_rank_samples()
STRAGGLER = sorted((SAMPLES / "ci-aa").glob("straggler_rank*.json.gz"))


def _generator():
    spec = importlib.util.spec_from_file_location("make_rank_traces",
                                                  REPO / "bench" / "make_rank_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """64 simulated ranks (8 hosts with offset clocks, one straggler) and their truth."""
    out = tmp_path_factory.mktemp("ranks64")
    paths = _generator().write(64, str(out), steps=8, buckets=3, straggler=37)
    truth = json.loads((out / "truth.json").read_text())
    return [Path(p) for p in paths], truth


def _without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


# What only the events give: the TensorBoard-style `distributed` view, and a straggler's
# evidence (its late collectives' slices, and the track they ran on).
def assert_same_rank_analysis(reduced, loaded):
    assert reduced.from_summaries() and not loaded.from_summaries()
    ranks, want = reduced.report()["ranks"], loaded.report()["ranks"]
    assert _without(ranks, "distributed") == _without(want, "distributed")
    assert reduced.ranks().to_arrow().to_pylist() == loaded.ranks().to_arrow().to_pylist()
    assert (reduced.collectives().to_arrow().to_pylist()
            == loaded.collectives().to_arrow().to_pylist())
    straggler = lambda run: [  # noqa: E731
        _without(f, "evidence", "track")
        for f in run.report()["findings"] if f["kind"] == "straggler"
    ]
    assert straggler(reduced) == straggler(loaded)
    # Everything the reduce finds is a rank finding.
    assert {f["kind"] for f in reduced.report()["findings"]} <= {"straggler"}
    rows = lambda run: [  # noqa: E731
        _without(r, "evidence_json", "track", "group")
        for r in run.findings().to_arrow().to_pylist() if r["kind"] == "straggler"
    ]
    assert rows(reduced) == rows(loaded)


@pytest.mark.parametrize("paths", MULTI, ids=lambda ps: ps[0].parent.name + "/" + ps[0].name)
def test_reduce_equals_load_on_every_multi_rank_sample(paths):
    loaded = steplens.load(*paths)
    reduced = steplens.reduce([steplens.summarize(p) for p in paths])
    assert_same_rank_analysis(reduced, loaded)


def test_the_samples_hold_multi_rank_sets():
    assert len(MULTI) >= 8
    assert STRAGGLER in MULTI


def test_a_summary_is_the_cli_summary_small_and_picklable(tmp_path):
    path = STRAGGLER[2]
    summary = steplens.summarize(path)
    assert summary.rank == 2
    assert summary.path == str(path)
    out = subprocess.run([cli(), "summarize", str(path)], capture_output=True)
    assert out.returncode == 0, out.stderr
    assert bytes(summary) + b"\n" == out.stdout
    assert summary.to_dict()["schema"] == steplens.SUMMARY_SCHEMA == "steplens.rank-summary/1"
    assert len(summary) < os.path.getsize(path)
    again = pickle.loads(pickle.dumps(summary))
    assert again == summary and again.rank == 2 and again.path == str(path)
    # Saved, it is what `report --summaries` reads, and read back it is the same summary.
    summary.save(tmp_path / "rank2.summary.json")
    assert steplens.Summary.from_file(tmp_path / "rank2.summary.json") == summary
    assert steplens.Summary(bytes(summary)).rank == 2


def test_reduce_is_report_summaries(tmp_path):
    for path in STRAGGLER:
        steplens.summarize(path).save(tmp_path / (path.name.split(".")[0] + ".summary.json"))
    out = subprocess.run([cli(), "report", "--summaries", str(tmp_path), "-f", "json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    # Bytes, Summaries and summary files reduce alike.
    files = sorted(tmp_path.glob("*.summary.json"))
    for items in (files, [steplens.Summary.from_file(f) for f in files],
                  [f.read_bytes() for f in files]):
        reduced = steplens.reduce(items)
        assert reduced.report()["ranks"] == doc["ranks"]
        assert [f["title"] for f in reduced.report()["findings"]] == [
            f["title"] for f in doc["findings"]]


def test_another_schema_version_is_one_line_naming_both(tmp_path):
    good = steplens.summarize(STRAGGLER[0])
    doc = good.to_dict()
    doc["schema"] = "steplens.rank-summary/2"
    other = json.dumps(doc).encode()
    with pytest.raises(steplens.TraceError) as err:
        steplens.reduce([good, other])
    message = str(err.value)
    assert "\n" not in message
    assert "steplens.rank-summary/2" in message and "steplens.rank-summary/1" in message
    with pytest.raises(steplens.TraceError) as err:
        steplens.reduce([good, b'{"schema": 3'])
    assert "\n" not in str(err.value) and "line 1" in str(err.value)
    with pytest.raises(TypeError):
        steplens.reduce([good, 3])
    with pytest.raises(steplens.TraceError):
        steplens.reduce([])
    with pytest.raises(steplens.TraceError) as err:
        steplens.summarize(tmp_path / "missing.json")
    assert err.value.code == "io"


def test_two_summaries_of_one_rank_are_refused_in_one_line():
    # The same trace twice: both claim its rank, as `report --summaries` refuses.
    one = steplens.summarize(STRAGGLER[0])
    with pytest.raises(steplens.TraceError) as err:
        steplens.reduce([one, one, steplens.summarize(STRAGGLER[1])])
    message = str(err.value)
    assert "\n" not in message and "rank" in message


def test_a_reduced_run_holds_the_rank_tables_only():
    reduced = steplens.reduce([steplens.summarize(p) for p in STRAGGLER])
    assert len(reduced.ranks()) == 4
    assert reduced.files() == [str(p) for p in STRAGGLER]
    assert "4 ranks" in repr(reduced)
    with pytest.raises(ValueError, match="load the traces"):
        reduced.steps()
    assert "straggler" in reduced.text()


def test_generated_ranks_give_the_planted_straggler_and_offsets(generated):
    paths, truth = generated
    reduced = steplens.reduce([steplens.summarize(p) for p in paths])
    ranks = reduced.report()["ranks"]
    assert ranks["world_size"] == 64
    assert [r["clock_offset_ns"] for r in ranks["ranks"]] == truth["clock_offset_ns"]
    assert ranks["clock"].startswith("aligned to rank 0")
    found = [f for f in reduced.report()["findings"] if f["kind"] == "straggler"]
    assert len(found) == 1 and found[0]["rank"] == truth["straggler"]
    assert found[0]["title"].startswith(f"rank {truth['straggler']} arrives last at 24 of 24")


def test_generated_ranks_reduce_to_the_load(generated):
    paths, _ = generated
    assert_same_rank_analysis(steplens.reduce([steplens.summarize(p) for p in paths]),
                              steplens.load(*paths))


# --- Dask: the recipe of docs/ranks.md, on a LocalCluster of two worker processes. ----------


def _dask():
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("dask[distributed] is not installed (.ci/run installs it)")
        pytest.skip("dask[distributed] is not installed: pip install 'dask[distributed]'")
    return Client, LocalCluster


@pytest.fixture(scope="module")
def dask_client():
    Client, LocalCluster = _dask()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def dask_reduce(client, paths):
    """docs/ranks.md's Dask recipe."""
    futures = client.map(steplens.summarize, [str(p) for p in paths])
    return steplens.reduce(client.gather(futures))


def test_dask_gives_the_single_process_report_on_a_4_rank_sample(dask_client):
    reduced = dask_reduce(dask_client, STRAGGLER)
    assert len(dask_client.scheduler_info()["workers"]) == 2
    assert_same_rank_analysis(reduced, steplens.load(*STRAGGLER))


def test_dask_gives_the_single_process_report_on_64_generated_ranks(dask_client, generated):
    paths, truth = generated
    reduced = dask_reduce(dask_client, paths)
    assert_same_rank_analysis(reduced, steplens.load(*paths))
    assert [r["clock_offset_ns"] for r in reduced.report()["ranks"]["ranks"]] == \
        truth["clock_offset_ns"]


# --- Ray: the recipe of docs/ranks.md, where ray is installed. ------------------------------


def test_ray_recipe(generated):
    ray = pytest.importorskip(
        "ray", reason="ray is not installed: pip install ray to run docs/ranks.md's Ray recipe")
    paths, truth = generated
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    try:
        summarize = ray.remote(steplens.summarize)
        summaries = ray.get([summarize.remote(str(p)) for p in paths])
        reduced = steplens.reduce(summaries)
    finally:
        ray.shutdown()
    assert_same_rank_analysis(reduced, steplens.load(*paths))
    assert reduced.report()["findings"][0]["rank"] == truth["straggler"]


def test_the_docs_one_liner(tmp_path):
    """The line docs/ranks.md and the README show, run as they show it."""
    paths = [str(p) for p in STRAGGLER]
    line = ("import steplens; print(steplens.reduce([steplens.summarize(p) for p in paths])"
            ".ranks())")
    out = subprocess.run([sys.executable, "-c", f"paths = {paths!r}; {line}"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("steplens.Table 'ranks': 4 rows")
    assert "[4 rows x" in out.stdout
    docs = (REPO / "docs" / "ranks.md").read_text()
    assert line.replace("import steplens; ", "") in docs


# --- Parquet for the big engines: one rank of a 64-rank export, by a hive partition filter. ---


def test_polars_scans_one_rank_of_a_64_rank_export(generated, tmp_path):
    """``export --tables`` of 64 ranks read back with polars' lazy ``scan_parquet`` under a hive
    partition filter (``rank = 7``) gives that rank's rows (beside the DuckDB check of
    ``.ci/run``, ``tests/duckdb/rank_table.py``)."""
    pl = pytest.importorskip("polars")
    paths, _ = generated
    tables = tmp_path / "tables"
    out = subprocess.run([cli(), "export", *map(str, paths), "--tables", str(tables)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (tables / "slices" / "rank=7").is_dir()
    run = steplens.load(*paths)
    key = ["name", "start_ns", "dur_ns"]
    for table, want in (
        ("slices", run.slices(backend="polars")),
        ("steps", run.steps(backend="polars")),
    ):
        lazy = pl.scan_parquet(tables / table / "**" / "*.parquet", hive_partitioning=True)
        got = lazy.filter(pl.col("rank") == 7).collect()
        rank7 = want.filter(pl.col("rank") == 7)
        assert got.height == rank7.height > 0, table
        assert set(got["rank"].unique().to_list()) == {7}
        assert got.select(key).sort(key).equals(rank7.select(key).sort(key)), table
