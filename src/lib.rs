//! The part of the `steplens` command line that other front ends share (the Python package):
//! reading inputs (traces, directories of traces, saved reports, baseline sets, budget files)
//! and turning an error into the one line the CLI prints.

pub mod run_input;
