//! Tables as polars DataFrames: the tables of [`crate::export::columns`] that `export --tables` writes,
//! and the Parquet/CSV writers (the `tables` feature).
//!
//! All polars code lives in this module: polars changes its API between releases, so one place
//! keeps an upgrade small.

use std::io::Write;

use polars::prelude::*;
use rustc_hash::FxHashMap;
use steplens_ingest::model::Timeline;

use crate::export::columns::{ColumnTable, Values};
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

/// The tables whose every row belongs to one input, and so to one rank.
const PER_INPUT_TABLES: [&str; 3] = ["slices", "steps", "idle"];

/// One rank's part of a per-rank table (a hive partition `rank=<rank>`).
pub struct RankPart {
    /// The rank.
    pub rank: i64,
    /// Its rows.
    pub table: Table,
}

impl Table {
    /// The table split by rank, for a hive-partitioned dataset (`<name>/rank=<r>/…`): rows by
    /// their `source` column, each input to its rank. `None` for a run-wide table (ops,
    /// findings, engines).
    ///
    /// # Errors
    /// When polars fails to take the rows.
    pub fn split_by_rank(
        &self,
        rank_of: &[(u16, i64)],
    ) -> Result<Option<Vec<RankPart>>, TableError> {
        // Findings carry their input too, but a run-wide finding has none: that table stays
        // whole, as do the other run-wide ones.
        if !PER_INPUT_TABLES.contains(&self.name) {
            return Ok(None);
        }
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
            let mut frame = self
                .frame
                .take(&IdxCa::from_vec("idx".into(), idx))
                .map_err(polars_err(self.name))?;
            // The partition's path (`rank=<r>`) carries the rank; a column of the same name
            // would clash with it in a hive-partitioned reader.
            if frame.column("rank").is_ok() {
                frame = frame.drop("rank").map_err(polars_err(self.name))?;
            }
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
    to_polars(&crate::export::columns::ranks_table(ranks))
}

/// A table of plain columns as a polars frame.
///
/// # Errors
/// When polars rejects the frame (columns of unequal length would be a bug).
pub fn to_polars(table: &ColumnTable<'_>) -> Result<Table, TableError> {
    let columns = table
        .columns
        .iter()
        .map(|c| {
            let name = c.name.as_str().into();
            match &c.values {
                Values::U32(v) => Column::new(name, v),
                Values::OptU32(v) => Column::new(name, v),
                Values::U64(v) => Column::new(name, v),
                Values::I64(v) => Column::new(name, v),
                Values::OptI64(v) => Column::new(name, v),
                Values::F64(v) => Column::new(name, v),
                Values::OptF64(v) => Column::new(name, v),
                Values::OptBool(v) => Column::new(name, v),
                Values::Str(v) => {
                    Column::new(name, v.iter().map(AsRef::as_ref).collect::<Vec<&str>>())
                }
                Values::OptStr(v) => Column::new(
                    name,
                    v.iter()
                        .map(|s| s.as_deref())
                        .collect::<Vec<Option<&str>>>(),
                ),
            }
        })
        .collect();
    let frame = DataFrame::new(table.rows, columns).map_err(polars_err(table.name))?;
    Ok(Table {
        name: table.name,
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
    crate::export::columns::export_tables(timeline, report)
        .iter()
        .map(to_polars)
        .collect()
}
