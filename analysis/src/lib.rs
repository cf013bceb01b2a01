//! steplens analysis: steps, utilization, the op summary, findings and the report.
//!
//! Everything here reads a [`steplens_ingest::model::Timeline`] and never touches files.
//! [`report::build_report`] is the entry point the CLI and the viewer use; the pieces
//! ([`steps`], [`ops`], [`intervals`]) are public for detectors and tests. Two rooms hold what
//! is not an analysis pass: [`compare`] (two runs' [`compare::figures::RunFigures`], the
//! [`compare::check`] and the [`compare::diff`] of them, the budget file, the op join, the fix
//! pairs) and [`export`] (every table's columns, the polars frames behind the `tables` feature,
//! and the Perfetto writer with the report's overlay).

pub mod busy;
pub(crate) mod call_site;
pub mod compare;
pub mod context;
pub mod critical_path;
pub mod detect;
pub mod device_rates;
pub mod engines;
pub mod export;
pub mod finding;
/// Interval sets live with the Timeline (ingest aligns clocks with them); re-exported here.
pub use steplens_ingest::intervals;
pub mod idle;
pub mod ledger;
pub mod memory;
pub mod nodes;
pub mod op_names;
pub mod op_perf;
pub mod ops;
pub(crate) mod parallel;
pub mod profiler_overhead;
pub mod ranks;
pub mod report;
pub mod stats;
pub mod step_windows;
pub mod steps;
pub mod table_spec;
pub mod tensorboard;
pub mod thresholds;
pub mod trace_info;
pub mod units;

pub use finding::{Evidence, Finding, FindingKind, Severity};
pub use report::{Report, build_report, build_report_with};
pub use thresholds::Thresholds;
