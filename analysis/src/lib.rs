//! steplens analysis: steps, utilization, the op summary, findings and the report.
//!
//! Everything here reads a [`steplens_ingest::model::Timeline`] and never touches files.
//! [`report::build_report`] is the entry point the CLI and the viewer use; the pieces
//! ([`steps`], [`ops`], [`intervals`]) are public for detectors and tests. [`check`] and
//! [`diff`] compare two runs' [`compare::RunFigures`] (and [`op_rows`], the op join); [`columns`]
//! defines every table's columns; [`table`] turns them into polars frames (the export tables),
//! behind the `tables` feature.

pub mod budget;
pub mod busy;
pub(crate) mod call_site;
pub mod check;
pub mod columns;
pub mod compare;
pub mod context;
pub mod critical_path;
pub mod detect;
pub mod device_rates;
pub mod diff;
pub mod engines;
pub mod finding;
/// Interval sets live with the Timeline (ingest aligns clocks with them); re-exported here.
pub use steplens_ingest::intervals;
pub mod idle;
pub mod ledger;
pub mod memory;
pub mod nodes;
pub mod op_names;
pub mod op_perf;
pub mod op_rows;
pub mod ops;
pub(crate) mod parallel;
pub mod perfetto_export;
pub mod profiler_overhead;
pub mod ranks;
pub mod report;
pub mod stats;
pub mod step_windows;
pub mod steps;
#[cfg(feature = "tables")]
pub mod table;
pub mod table_spec;
pub mod tensorboard;
pub mod thresholds;
pub mod trace_info;
pub mod units;
pub mod whatif;

pub use finding::{Evidence, Finding, FindingKind, Severity};
pub use report::{Report, build_report, build_report_with};
pub use thresholds::Thresholds;
