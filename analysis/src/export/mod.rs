//! Exports: a trace and its report written for other tools.
//!
//! - [`columns`]: every table's columns as plain typed columns, one definition shared by
//!   `export --tables` and the Python package (no DataFrame library);
//! - [`table`]: those columns as polars DataFrames and their Parquet/CSV writers (the `tables`
//!   feature; all polars code lives there);
//! - [`perfetto`]: a Timeline with its analysis as a Perfetto trace (the report's overlay), over
//!   the Perfetto TrackEvent writer ([`perfetto::write`]), whose file ingest's `perfetto-proto`
//!   reader reads back.

pub mod columns;
pub mod perfetto;
#[cfg(feature = "tables")]
pub mod table;
