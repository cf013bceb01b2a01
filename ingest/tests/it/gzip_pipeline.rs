//! Gzip files of a megabyte or more are parsed while they inflate (`feed.rs`, `inflating.rs`):
//! these hold that path to what inflating first and then reading gives, on whole, cut,
//! multi-member, oversized and non-trace inputs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::PathBuf;

use flate2::Compression;
use flate2::write::GzEncoder;
use steplens_ingest::error::IngestError;
use steplens_ingest::model::Timeline;
use steplens_ingest::{LoadOptions, load, load_bytes};
use tempfile::TempDir;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// `n` X events with pseudo-random numbers, so that the trace compresses poorly (the
/// pipelined path starts at 1 MiB of gzip).
fn events(n: usize) -> Vec<String> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            format!(
                r#"{{"ph":"X","cat":"cpu_op","name":"op{}","pid":1,"tid":{},"ts":{}.{:03},"dur":{},"args":{{"r":{state},"Input Dims":[[{}, 3]]}}}}"#,
                state % 97,
                1 + state % 3,
                i as u64 * 1000 + state % 500,
                state % 1000,
                state % 400,
                state % 4096,
            )
        })
        .collect()
}

fn trace(n: usize) -> String {
    format!(
        "{{\"schemaVersion\":1,\"traceEvents\":[\n{}\n],\"traceName\":\"x\"}}",
        events(n).join(",\n")
    )
}

fn write(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Everything a load says of a trace but the input's own description.
fn content(t: &Timeline) -> String {
    let info = &t.sources[0];
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{} {} {} {:?} {:?}",
        t.slices,
        t.tracks,
        t.steps,
        t.stats,
        info.bytes,
        info.stored_bytes,
        info.events,
        info.warnings,
        info.top_level,
    )
}

/// A trace of 60 000 events: about 9 MB of JSON, 2 MB of gzip.
const EVENTS: usize = 60_000;

#[test]
fn a_large_gzip_reads_as_inflating_first_does() {
    let text = trace(EVENTS);
    let gz = gzip(text.as_bytes());
    assert!(gz.len() > 1 << 20, "only {} bytes of gzip", gz.len());
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "t.json.gz", &gz);
    let piped = load(&path, &LoadOptions::default(), None).unwrap();
    let first = load_bytes("t.json.gz", gz, &LoadOptions::default()).unwrap();
    assert_eq!(content(&piped), content(&first));
    assert_eq!(piped.sources[0].bytes, text.len() as u64);
    assert_eq!(piped.sources[0].events, EVENTS as u64);
    assert!(piped.sources[0].compressed);
    assert!(piped.sources[0].warnings.is_empty());
    // Args are read from the inflated bytes after the load.
    let last = piped.slices.len() as u32 - 1;
    assert_eq!(
        piped.arg_raw(last, "Input Dims"),
        first.arg_raw(last, "Input Dims")
    );
    piped.check_invariants().unwrap();
}

#[test]
fn a_cut_large_gzip_keeps_what_inflating_first_keeps() {
    let gz = gzip(trace(EVENTS).as_bytes());
    let cut = &gz[..gz.len() * 2 / 3];
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "t.json.gz", cut);
    let piped = load(&path, &LoadOptions::default(), None).unwrap();
    let first = load_bytes("t.json.gz", cut.to_vec(), &LoadOptions::default()).unwrap();
    assert_eq!(content(&piped), content(&first));
    let codes: Vec<&str> = piped.sources[0]
        .warnings
        .iter()
        .map(|w| w.code.as_str())
        .collect();
    assert_eq!(codes, ["damaged_gzip", "damaged"]);
}

#[test]
fn large_gzip_members_are_all_read() {
    let all = events(EVENTS);
    let (a, b) = all.split_at(EVENTS / 3);
    let mut gz = gzip(format!("[{},", a.join(",")).as_bytes());
    gz.extend(gzip(format!("{}]", b.join(",")).as_bytes()));
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "t.json.gz", &gz);
    let piped = load(&path, &LoadOptions::default(), None).unwrap();
    assert_eq!(piped.sources[0].events, EVENTS as u64);
    assert!(piped.sources[0].warnings.is_empty());
    let first = load_bytes("t.json.gz", gz, &LoadOptions::default()).unwrap();
    assert_eq!(content(&piped), content(&first));
}

#[test]
fn a_large_gzip_past_the_size_limit_is_refused() {
    let text = trace(EVENTS);
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "t.json.gz", &gzip(text.as_bytes()));
    let options = |max| LoadOptions {
        max_inflated_bytes: max,
        ..LoadOptions::default()
    };
    let Err(err) = load(&path, &options(text.len() as u64 - 1), None) else {
        panic!("a byte over the limit loaded");
    };
    assert!(matches!(&err, IngestError::LimitExceeded { .. }), "{err:?}");
    assert!(err.to_string().contains("--max-inflated-bytes"), "{err}");
    // Exactly the limit is allowed.
    let t = load(&path, &options(text.len() as u64), None).unwrap();
    assert_eq!(t.sources[0].events, EVENTS as u64);
}

#[test]
fn a_large_gzip_of_something_else_is_refused_as_before() {
    let mut state = 1u64;
    let noise: Vec<u8> = (0..3 << 20)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) as u8 | 0x80
        })
        .collect();
    let gz = gzip(&noise);
    assert!(gz.len() > 1 << 20);
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "t.json.gz", &gz);
    let piped = load(&path, &LoadOptions::default(), None).unwrap_err();
    let first = load_bytes("t.json.gz", gz, &LoadOptions::default()).unwrap_err();
    assert_eq!(piped.code(), "not_a_trace");
    assert_eq!(piped.code(), first.code());
}
