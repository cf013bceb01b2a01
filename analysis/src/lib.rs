//! steplens analysis: steps, utilization, the op summary, findings and the report.
//!
//! Everything here reads a [`steplens_ingest::model::Timeline`] and never touches files.
//! [`report::build_report`] is the entry point the CLI and the viewer use; the pieces
//! ([`steps`], [`ops`], [`intervals`]) are public for detectors and tests.

pub mod detect;
pub mod engines;
/// Interval sets live with the Timeline (ingest aligns clocks with them); re-exported here.
pub use steplens_ingest::intervals;
pub mod idle;
pub mod ops;
pub mod perfetto_export;
pub mod report;
pub mod steps;

pub use detect::Thresholds;
pub use report::{Report, build_report, build_report_with};
