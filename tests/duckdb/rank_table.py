"""The hive-partitioned tables of a multi-rank export, queried as is by DuckDB.

    python3 tests/duckdb/rank_table.py TABLES_DIR REPORT_JSON

TABLES_DIR comes from `steplens export rank*.json --tables DIR`, REPORT_JSON from
`steplens report rank*.json -f json` of the same traces. The SQL below (the one in docs/export.md)
rebuilds the rank table's step count and median step per rank from `steps/rank=N/*.parquet`,
and must agree with the report; the `ranks` table must list the same ranks. Needs `duckdb`
(`pip install duckdb`). Exit 0 when they agree, 1 with the difference otherwise.
"""

import json
import sys

import duckdb

RANK_TABLE_SQL = """
SELECT rank, count(*) AS steps, median(dur_ns) AS median_step_ns
FROM read_parquet('{dir}/steps/*/*.parquet', hive_partitioning = true)
GROUP BY rank
ORDER BY rank
"""


def main() -> int:
    tables, report_path = sys.argv[1], sys.argv[2]
    with open(report_path) as f:
        report = json.load(f)
    want = {r["rank"]: (r["steps"], r["step_p50_ns"]) for r in report["ranks"]["ranks"]}
    rows = duckdb.sql(RANK_TABLE_SQL.format(dir=tables)).fetchall()
    got = {int(rank): (steps, median) for rank, steps, median in rows}
    bad = []
    if sorted(got) != sorted(want):
        bad.append(f"ranks {sorted(got)} != {sorted(want)}")
    for rank, (steps, median) in got.items():
        w_steps, w_median = want.get(rank, (None, None))
        if steps != w_steps or w_median is None or abs(median - w_median) > 1:
            bad.append(f"rank {rank}: steps {steps} median {median} (report: {w_steps}, {w_median})")
    slices = duckdb.sql(
        f"SELECT count(DISTINCT rank) FROM read_parquet('{tables}/slices/*/*.parquet', hive_partitioning = true)"
    ).fetchall()[0][0]
    if slices != len(want):
        bad.append(f"slices cover {slices} ranks, not {len(want)}")
    listed = [r[0] for r in duckdb.sql(f"SELECT rank FROM read_parquet('{tables}/ranks.parquet') ORDER BY rank").fetchall()]
    if listed != sorted(want):
        bad.append(f"ranks table {listed}")
    for line in bad:
        print(line)
    if not bad:
        print(f"duckdb: the rank table of {len(got)} ranks matches the report")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
