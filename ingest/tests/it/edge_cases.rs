//! Integration tests of `steplens_ingest::load` on small inline traces, one edge case at a time
//! (kineto-format.md §13): document shapes, damage, lanes, times, nesting, B/E pairs, instants,
//! counters, metadata, flows, steps, device detection, lazy args, gzip and errors.
//!
//! Every loaded Timeline is also run through the structural invariant checker.
//!
//! One short test per edge case, in the order of the format notes, in three submodules
//! (`documents`, `tracks`, `files`); the helpers they share are here.

// Helpers outside `#[test]` functions panic on failure too, by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use steplens_ingest::model::{
    CategoryClass, DeviceKind, EngineClass, LaneId, NO_PARENT, SliceId, TrackKind, Warning,
};
use steplens_ingest::{IngestError, LoadOptions, Timeline, load, load_many};
use tempfile::TempDir;

mod documents;
mod files;
mod tracks;

// ---------------------------------------------------------------------------------------------
// Helpers

fn write(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write temp trace");
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes).expect("gzip");
    enc.finish().expect("gzip finish")
}

fn try_load_bytes(bytes: &[u8]) -> Result<Timeline, IngestError> {
    let dir = TempDir::new().expect("temp dir");
    let path = write(&dir, "trace.json", bytes);
    load(&path, &LoadOptions::default(), None)
}

/// Loads `text` from a temp file, checks the invariants, and returns the Timeline.
fn load_str(text: &str) -> Timeline {
    let timeline = try_load_bytes(text.as_bytes())
        .unwrap_or_else(|e| panic!("load failed: {e}\ninput: {text}"));
    checked(timeline)
}

fn checked(timeline: Timeline) -> Timeline {
    if let Err(e) = common::check_invariants(&timeline) {
        panic!("invariants violated:\n{e}");
    }
    timeline
}

fn load_err(bytes: &[u8]) -> IngestError {
    match try_load_bytes(bytes) {
        Ok(t) => panic!(
            "expected an error, loaded {} events: {:?}",
            t.event_count(),
            t.sources[0].warnings
        ),
        Err(e) => e,
    }
}

fn warnings(t: &Timeline) -> &[Warning] {
    &t.sources[0].warnings
}

fn warning<'a>(t: &'a Timeline, code: &str) -> &'a Warning {
    warnings(t)
        .iter()
        .find(|w| w.code == code)
        .unwrap_or_else(|| panic!("no {code:?} warning in {:?}", warnings(t)))
}

fn codes(t: &Timeline) -> Vec<&'static str> {
    warnings(t).iter().map(|w| w.code.as_str()).collect()
}

fn names(t: &Timeline) -> Vec<&str> {
    (0..t.slices.len() as SliceId)
        .map(|i| t.slice_name(i))
        .collect()
}

fn slice_named(t: &Timeline, name: &str) -> SliceId {
    let found: Vec<SliceId> = (0..t.slices.len() as SliceId)
        .filter(|&i| t.slice_name(i) == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one slice named {name:?}, got {found:?}"
    );
    found[0]
}

fn track_named(t: &Timeline, name: &str) -> usize {
    t.tracks
        .iter()
        .position(|tr| tr.name == name)
        .unwrap_or_else(|| {
            let all: Vec<&str> = t.tracks.iter().map(|tr| tr.name.as_str()).collect();
            panic!("no track named {name:?} in {all:?}")
        })
}

fn phases(t: &Timeline) -> Vec<(char, u64)> {
    t.sources[0].events_by_phase.clone()
}

/// A complete `X` event on host lane (1, 1).
fn x(name: &str, ts: &str, dur: &str) -> String {
    format!(r#"{{"ph":"X","cat":"cpu_op","name":"{name}","pid":1,"tid":1,"ts":{ts},"dur":{dur}}}"#)
}

/// The first `n` simple X events, `e0` … at 10 µs spacing.
fn x_events(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| x(&format!("e{i}"), &(i * 10).to_string(), "5"))
        .collect()
}

/// Checks a damaged load: exactly the events `e0..kept` survive and one `damaged` warning
/// points at `offset`.
fn assert_damaged(t: &Timeline, kept: usize, offset: usize) {
    assert_eq!(t.event_count(), kept as u64);
    let expected: Vec<String> = (0..kept).map(|i| format!("e{i}")).collect();
    assert_eq!(
        names(t),
        expected,
        "events before the damage, and no invented one"
    );
    let damaged: Vec<&Warning> = warnings(t).iter().filter(|w| w.code == "damaged").collect();
    assert_eq!(damaged.len(), 1, "{:?}", warnings(t));
    assert_eq!(
        damaged[0].offset,
        Some(offset as u64),
        "{}",
        damaged[0].message
    );
    assert!(
        damaged[0].message.contains(&offset.to_string()),
        "message names the offset: {}",
        damaged[0].message
    );
}
