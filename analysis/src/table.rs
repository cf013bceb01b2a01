//! Tables as polars DataFrames: the slices, steps, ops, findings, engines and idle tables that
//! `export --tables` writes, and the Parquet/CSV writers (the `tables` feature).
//!
//! All polars code lives in this module: polars changes its API between releases, so one place
//! keeps an upgrade small.

use std::io::Write;

use polars::prelude::*;
use rustc_hash::FxHashMap;
use steplens_ingest::model::{NO_PARENT, Timeline};

use crate::report::Report;

/// A table could not be built or written.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// polars rejected a frame or failed to write it.
    #[error("table {table}: {source}")]
    Polars {
        /// Table name.
        table: &'static str,
        /// The polars error.
        source: PolarsError,
    },
}

fn polars_err(table: &'static str) -> impl FnOnce(PolarsError) -> TableError {
    move |source| TableError::Polars { table, source }
}

/// File format of exported tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// Apache Parquet, zstd-compressed.
    Parquet,
    /// CSV with a header row.
    Csv,
}

impl TableFormat {
    /// File extension, without the dot.
    #[must_use]
    pub fn extension(self) -> &'static str {
        match self {
            Self::Parquet => "parquet",
            Self::Csv => "csv",
        }
    }
}

/// One named table.
pub struct Table {
    /// File stem (`slices`, `steps`, …).
    pub name: &'static str,
    /// The data.
    pub frame: DataFrame,
}

impl Table {
    /// Rows in the table.
    #[must_use]
    pub fn rows(&self) -> usize {
        self.frame.height()
    }

    /// Column names, in order.
    #[must_use]
    pub fn columns(&self) -> Vec<String> {
        self.frame
            .get_column_names()
            .iter()
            .map(|c| c.to_string())
            .collect()
    }

    /// Writes the table in `format`.
    ///
    /// # Errors
    /// When polars fails to encode or `out` fails to take the bytes.
    pub fn write(&mut self, format: TableFormat, out: &mut dyn Write) -> Result<(), TableError> {
        match format {
            TableFormat::Parquet => ParquetWriter::new(out)
                .with_compression(ParquetCompression::Zstd(None))
                .finish(&mut self.frame)
                .map(|_| ()),
            TableFormat::Csv => CsvWriter::new(out)
                .include_header(true)
                .finish(&mut self.frame),
        }
        .map_err(polars_err(self.name))
    }
}

/// One rank's part of a per-rank table (a hive partition `rank=<rank>`).
pub struct RankPart {
    /// The rank.
    pub rank: i64,
    /// Its rows.
    pub table: Table,
}

impl Table {
    /// The table split by rank, for a hive-partitioned dataset (`<name>/rank=<r>/…`): rows by
    /// their `source` column, each input to its rank. `None` for a table without a `source`
    /// column (a run-wide table: ops, findings, engines).
    ///
    /// # Errors
    /// When polars fails to take the rows.
    pub fn split_by_rank(
        &self,
        rank_of: &[(u16, i64)],
    ) -> Result<Option<Vec<RankPart>>, TableError> {
        let Ok(column) = self.frame.column("source") else {
            return Ok(None);
        };
        let sources = column.u32().map_err(polars_err(self.name))?;
        let mut rows: FxHashMap<u32, Vec<IdxSize>> = FxHashMap::default();
        for (i, s) in sources.iter().enumerate() {
            if let Some(s) = s {
                rows.entry(s)
                    .or_default()
                    .push(IdxSize::try_from(i).unwrap_or(IdxSize::MAX));
            }
        }
        let mut parts = Vec::with_capacity(rank_of.len());
        for &(source, rank) in rank_of {
            let idx = rows.remove(&u32::from(source)).unwrap_or_default();
            let frame = self
                .frame
                .take(&IdxCa::from_vec("idx".into(), idx))
                .map_err(polars_err(self.name))?;
            parts.push(RankPart {
                rank,
                table: Table {
                    name: self.name,
                    frame,
                },
            });
        }
        Ok(Some(parts))
    }
}

/// One row per rank of a multi-rank run (the report's rank table).
///
/// # Errors
/// When polars rejects the frame.
pub fn ranks_table(ranks: &crate::ranks::RanksReport) -> Result<Table, TableError> {
    let rows = &ranks.ranks;
    let frame = DataFrame::new(
        rows.len(),
        vec![
            Column::new(
                "rank".into(),
                rows.iter().map(|r| r.rank).collect::<Vec<_>>(),
            ),
            Column::new(
                "source".into(),
                rows.iter().map(|r| u32::from(r.source)).collect::<Vec<_>>(),
            ),
            Column::new(
                "steps".into(),
                rows.iter().map(|r| r.steps as u64).collect::<Vec<_>>(),
            ),
            Column::new(
                "step_p50_ns".into(),
                rows.iter().map(|r| r.step_p50_ns).collect::<Vec<_>>(),
            ),
            Column::new(
                "compute_p50_ns".into(),
                rows.iter().map(|r| r.compute_p50_ns).collect::<Vec<_>>(),
            ),
            Column::new(
                "collective_p50_ns".into(),
                rows.iter().map(|r| r.collective_p50_ns).collect::<Vec<_>>(),
            ),
            Column::new(
                "exposed_comm_p50_ns".into(),
                rows.iter()
                    .map(|r| r.exposed_comm_p50_ns)
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "last_arrivals".into(),
                rows.iter()
                    .map(|r| r.last_arrivals as u64)
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "wait_ns".into(),
                rows.iter().map(|r| r.wait_ns).collect::<Vec<_>>(),
            ),
        ],
    )
    .map_err(polars_err("ranks"))?;
    Ok(Table {
        name: "ranks",
        frame,
    })
}

/// Columns (name and type) and row count of a written table, read back from its bytes: what a
/// user's pandas or DuckDB will see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    /// Column names and polars type names, in order.
    pub columns: Vec<(String, String)>,
    /// Rows.
    pub rows: usize,
}

/// Reads back a table written by [`Table::write`].
///
/// # Errors
/// When the bytes are not a readable table of that format.
pub fn read_shape(format: TableFormat, bytes: Vec<u8>) -> Result<TableShape, TableError> {
    let cursor = std::io::Cursor::new(bytes);
    let frame = match format {
        TableFormat::Parquet => ParquetReader::new(cursor).finish(),
        TableFormat::Csv => CsvReader::new(cursor).finish(),
    }
    .map_err(polars_err("read back"))?;
    Ok(TableShape {
        columns: frame
            .columns()
            .iter()
            .map(|c| (c.name().to_string(), c.dtype().to_string()))
            .collect(),
        rows: frame.height(),
    })
}

/// Every table of a trace and its report, in a fixed order.
///
/// # Errors
/// When polars rejects a frame (columns of unequal length would be a bug here).
pub fn tables(timeline: &Timeline, report: &Report) -> Result<Vec<Table>, TableError> {
    Ok(vec![
        Table {
            name: "slices",
            frame: slices_frame(timeline).map_err(polars_err("slices"))?,
        },
        Table {
            name: "steps",
            frame: steps_frame(report).map_err(polars_err("steps"))?,
        },
        Table {
            name: "ops",
            frame: ops_frame(report).map_err(polars_err("ops"))?,
        },
        Table {
            name: "findings",
            frame: findings_frame(report).map_err(polars_err("findings"))?,
        },
        Table {
            name: "engines",
            frame: engines_frame(report).map_err(polars_err("engines"))?,
        },
        Table {
            name: "idle",
            frame: idle_frame(report).map_err(polars_err("idle"))?,
        },
    ])
}

/// One row per slice: where it is, what it is, its times and its place in the nesting and in
/// the steps.
fn slices_frame(timeline: &Timeline) -> PolarsResult<DataFrame> {
    let slices = &timeline.slices;
    let n = slices.len();
    let child_ns = crate::ops::child_time(timeline);
    // Steps of each clock, sorted by start, to name the step a slice starts in.
    let mut steps_by_source: FxHashMap<u16, Vec<(i64, i64, &str)>> = FxHashMap::default();
    for step in &timeline.steps {
        steps_by_source.entry(step.source).or_default().push((
            step.start,
            step.end(),
            step.name.as_str(),
        ));
    }
    for steps in steps_by_source.values_mut() {
        steps.sort_unstable_by_key(|s| s.0);
    }
    let step_of = |source: u16, ts: i64| -> Option<&str> {
        let steps = steps_by_source.get(&timeline.step_source(source))?;
        let idx = steps.partition_point(|s| s.0 <= ts).checked_sub(1)?;
        let (start, end, name) = steps[idx];
        (start <= ts && ts < end).then_some(name)
    };

    let mut source = Vec::with_capacity(n);
    let mut track = Vec::with_capacity(n);
    let mut track_name = Vec::with_capacity(n);
    let mut process = Vec::with_capacity(n);
    let mut track_kind = Vec::with_capacity(n);
    let mut name = Vec::with_capacity(n);
    let mut category = Vec::with_capacity(n);
    let self_ns: Vec<i64> = slices
        .dur
        .iter()
        .zip(&child_ns)
        .map(|(dur, children)| (dur - children).max(0))
        .collect();
    let mut end_ns = Vec::with_capacity(n);
    let mut depth = Vec::with_capacity(n);
    let mut parent = Vec::with_capacity(n);
    let mut step = Vec::with_capacity(n);
    for i in 0..n {
        let t = &timeline.tracks[slices.track[i] as usize];
        source.push(u32::from(t.source));
        track.push(slices.track[i]);
        track_name.push(t.name.as_str());
        process.push(t.process_name.as_str());
        track_kind.push(t.kind.label());
        name.push(timeline.strings.get(slices.name[i]));
        category.push(timeline.categories.name(slices.cat[i]));
        end_ns.push(slices.end(i as u32));
        depth.push(u32::from(slices.depth[i]));
        parent.push((slices.parent[i] != NO_PARENT).then_some(slices.parent[i]));
        step.push(step_of(t.source, slices.start[i]));
    }
    DataFrame::new(
        n,
        vec![
            Column::new("source".into(), source),
            Column::new("track".into(), track),
            Column::new("track_name".into(), track_name),
            Column::new("process".into(), process),
            Column::new("track_kind".into(), track_kind),
            Column::new("name".into(), name),
            Column::new("category".into(), category),
            Column::new("start_ns".into(), &slices.start),
            Column::new("dur_ns".into(), &slices.dur),
            Column::new("end_ns".into(), end_ns),
            Column::new("self_ns".into(), self_ns),
            Column::new("depth".into(), depth),
            Column::new("parent".into(), parent),
            Column::new("step".into(), step),
        ],
    )
}

fn steps_frame(report: &Report) -> PolarsResult<DataFrame> {
    let steps = &report.steps;
    let mut columns = vec![
        Column::new(
            "name".into(),
            steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ),
        Column::new(
            "source".into(),
            steps
                .iter()
                .map(|s| u32::from(s.source))
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "start_ns".into(),
            steps.iter().map(|s| s.start_ns).collect::<Vec<_>>(),
        ),
        Column::new(
            "dur_ns".into(),
            steps.iter().map(|s| s.dur_ns).collect::<Vec<_>>(),
        ),
        Column::new(
            "host_busy_ns".into(),
            steps.iter().map(|s| s.host_busy_ns).collect::<Vec<_>>(),
        ),
        Column::new(
            "device_busy_ns".into(),
            steps.iter().map(|s| s.device_busy_ns).collect::<Vec<_>>(),
        ),
        Column::new(
            "device_idle_ns".into(),
            steps.iter().map(|s| s.device_idle_ns).collect::<Vec<_>>(),
        ),
        Column::new(
            "dataloader_ns".into(),
            steps.iter().map(|s| s.dataloader_ns).collect::<Vec<_>>(),
        ),
    ];
    let mut classes: Vec<&String> = steps.iter().flat_map(|s| s.engines.keys()).collect();
    classes.sort();
    classes.dedup();
    for class in classes {
        columns.push(Column::new(
            format!("engine_{class}_ns").into(),
            steps
                .iter()
                .map(|s| s.engines.get(class).copied().unwrap_or(0))
                .collect::<Vec<_>>(),
        ));
    }
    DataFrame::new(steps.len(), columns)
}

fn ops_frame(report: &Report) -> PolarsResult<DataFrame> {
    let ops = &report.ops;
    let strs = |f: fn(&crate::ops::OpStats) -> &str| ops.iter().map(f).collect::<Vec<_>>();
    let ints = |f: fn(&crate::ops::OpStats) -> i64| ops.iter().map(f).collect::<Vec<_>>();
    DataFrame::new(
        ops.len(),
        vec![
            Column::new("name".into(), strs(|o| &o.name)),
            Column::new("track_kind".into(), strs(|o| &o.track_kind)),
            Column::new("category".into(), strs(|o| &o.category)),
            Column::new(
                "count".into(),
                ops.iter().map(|o| o.count).collect::<Vec<_>>(),
            ),
            Column::new("total_ns".into(), ints(|o| o.total_ns)),
            Column::new("self_ns".into(), ints(|o| o.self_ns)),
            Column::new("mean_ns".into(), ints(|o| o.mean_ns)),
            Column::new("p50_ns".into(), ints(|o| o.p50_ns)),
            Column::new("p99_ns".into(), ints(|o| o.p99_ns)),
        ],
    )
}

fn findings_frame(report: &Report) -> PolarsResult<DataFrame> {
    let f = &report.findings;
    let strs = |get: fn(&crate::report::Finding) -> &str| f.iter().map(get).collect::<Vec<_>>();
    DataFrame::new(
        f.len(),
        vec![
            Column::new("kind".into(), strs(|x| x.kind.as_str())),
            Column::new("severity".into(), strs(|x| x.severity.as_str())),
            Column::new("title".into(), strs(|x| &x.title)),
            Column::new(
                "step".into(),
                f.iter().map(|x| x.step.as_deref()).collect::<Vec<_>>(),
            ),
            Column::new(
                "start_ns".into(),
                f.iter().map(|x| x.start_ns).collect::<Vec<_>>(),
            ),
            Column::new(
                "end_ns".into(),
                f.iter().map(|x| x.end_ns).collect::<Vec<_>>(),
            ),
            Column::new(
                "track".into(),
                f.iter().map(|x| x.track.as_deref()).collect::<Vec<_>>(),
            ),
            Column::new(
                "ops".into(),
                f.iter().map(|x| x.ops.join("; ")).collect::<Vec<_>>(),
            ),
            Column::new(
                "call_site".into(),
                f.iter().map(|x| x.call_site.as_deref()).collect::<Vec<_>>(),
            ),
            Column::new(
                "count".into(),
                f.iter().map(|x| x.count).collect::<Vec<_>>(),
            ),
            Column::new(
                "lost_ns".into(),
                f.iter().map(|x| x.lost_ns).collect::<Vec<_>>(),
            ),
            Column::new("recommendation".into(), strs(|x| &x.recommendation)),
            Column::new(
                "evidence_json".into(),
                f.iter()
                    .map(|x| serde_json::to_string(&x.evidence).unwrap_or_default())
                    .collect::<Vec<_>>(),
            ),
        ],
    )
}

fn engines_frame(report: &Report) -> PolarsResult<DataFrame> {
    let e = &report.engines;
    DataFrame::new(
        e.len(),
        vec![
            Column::new(
                "class".into(),
                e.iter().map(|x| x.class.as_str()).collect::<Vec<_>>(),
            ),
            Column::new(
                "engines".into(),
                e.iter().map(|x| x.engines as u64).collect::<Vec<_>>(),
            ),
            Column::new(
                "busy_ns".into(),
                e.iter().map(|x| x.busy_ns).collect::<Vec<_>>(),
            ),
            Column::new(
                "busy_pct".into(),
                e.iter().map(|x| x.busy_pct).collect::<Vec<_>>(),
            ),
            Column::new(
                "mean_engine_utilization_pct".into(),
                e.iter()
                    .map(|x| x.mean_engine_utilization_pct)
                    .collect::<Vec<_>>(),
            ),
        ],
    )
}

fn idle_frame(report: &Report) -> PolarsResult<DataFrame> {
    let d = &report.idle;
    let ints = |get: fn(&crate::idle::StreamIdle) -> i64| d.iter().map(get).collect::<Vec<_>>();
    DataFrame::new(
        d.len(),
        vec![
            Column::new(
                "source".into(),
                d.iter().map(|x| u32::from(x.source)).collect::<Vec<_>>(),
            ),
            Column::new(
                "device".into(),
                d.iter().map(|x| x.device).collect::<Vec<_>>(),
            ),
            Column::new(
                "stream".into(),
                d.iter().map(|x| x.stream.as_str()).collect::<Vec<_>>(),
            ),
            Column::new(
                "kernels".into(),
                d.iter().map(|x| x.kernels).collect::<Vec<_>>(),
            ),
            Column::new("idle_ns".into(), ints(|x| x.idle_ns)),
            Column::new("host_wait_ns".into(), ints(|x| x.host_wait_ns)),
            Column::new("kernel_wait_ns".into(), ints(|x| x.kernel_wait_ns)),
            Column::new("other_ns".into(), ints(|x| x.other_ns)),
        ],
    )
}
