//! The part of the `steplens` command line that other front ends share (the Python package):
//! reading inputs (traces, directories of traces, saved reports, baseline sets, budget files),
//! turning an error into the one line the CLI prints, and writing output files whole and never
//! over an input (`output_path`).

pub mod output_path;
pub mod run_input;
