//! What every fuzz target runs: load the bytes as a trace (content sniffing picks the reader),
//! and when that works, check the Timeline's structural invariants and build the whole report
//! on it. Errors are fine; panics (a broken invariant panics), hangs and runaway memory are what
//! the fuzzer looks for.

use steplens_ingest::{Limits, LoadOptions};

/// Options small enough that a fuzz input cannot spend the fuzzer's memory budget legitimately.
fn options() -> LoadOptions {
    LoadOptions {
        max_inflated_bytes: 64 << 20,
        limits: Limits {
            max_tracks: 10_000,
            ..Limits::default()
        },
        ..LoadOptions::default()
    }
}

/// Loads `data` as a trace and, if it loads, analyses it.
pub fn load_and_report(data: &[u8]) {
    if let Ok(timeline) = steplens_ingest::load_bytes("fuzz-input", data.to_vec(), &options()) {
        if let Err(broken) = timeline.check_invariants() {
            panic!("Timeline invariant broken:\n{broken}");
        }
        let report = steplens_analysis::build_report(&timeline);
        // The report must serialize: the JSON contract is part of what is under test.
        let _ = serde_json::to_vec(&report);
    }
}

/// Parses `data` as a budget file.
pub fn parse_budget(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = steplens_analysis::compare::budget::parse_budget(text);
    }
}
