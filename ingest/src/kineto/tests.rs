//! The two-thread parse against the single-threaded loop.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use super::{KinetoReader, TraceEventReader};
use crate::builder::TimelineBuilder;
use crate::format::FormatId;
use crate::model::SourceInfo;
use crate::reader::Reader;
use crate::source::{SourceData, finish_input};

/// The read summary and the finished Timeline of `bytes`; with `split`, its event array is
/// parsed by two threads, the second starting near that share of the array.
fn read_with(bytes: &[u8], split: Option<f64>) -> String {
    let mut builder = TimelineBuilder::default();
    let data = Arc::new(SourceData::Owned(bytes.to_vec()));
    let info = SourceInfo {
        path: "t.json".into(),
        format: FormatId::KinetoJson,
        bytes: bytes.len() as u64,
        stored_bytes: bytes.len() as u64,
        compressed: false,
        events: 0,
        events_by_phase: Vec::new(),
        warnings: Vec::new(),
        top_level: Vec::new(),
        rank: None,
        world_size: None,
    };
    let source = builder.add_source(info, Arc::clone(&data));
    let mut reader = KinetoReader::new(data.bytes(), "t.json", &mut builder, source, None);
    match split {
        Some(fraction) => {
            reader.split_min_bytes = 0;
            reader.split_fraction = fraction;
        }
        None => reader.split_min_bytes = usize::MAX,
    }
    let summary = reader.read();
    format!("{summary:?}\n{:?}", builder.finish())
}

fn trace_event_samples(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            trace_event_samples(&path, out);
        } else if path.to_string_lossy().contains(".json") {
            out.push(path);
        }
    }
}

/// Parsing with two threads builds exactly what the single-threaded loop builds, on
/// every Trace Event sample and on damaged, cut and oddly shaped arrays.
#[test]
fn pipelined_parse_builds_the_same_timeline() {
    let mut paths = Vec::new();
    trace_event_samples(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples"),
        &mut paths,
    );
    let mut inputs: Vec<(String, Vec<u8>)> = Vec::new();
    for path in &paths {
        let raw = SourceData::Owned(std::fs::read(path).unwrap());
        let display = path.display().to_string();
        let Ok(input) = finish_input(raw, &display, &crate::LoadOptions::default()) else {
            continue;
        };
        let body = input.data.bytes().to_vec();
        if TraceEventReader.sniff(&body) {
            inputs.push((display, body));
        }
    }
    assert!(inputs.len() > 20, "only {} samples found", inputs.len());
    let edge_cases: [&[u8]; 7] = [
        br#"[{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"name":"a"}, 7, {"ph":"X","ts":5,"dur":1,"pid":"p","tid":"t","name":"b"}]"#,
        br#"{"traceEvents":[{"ph":"B","ts":1,"pid":1,"tid":1,"name":"a"},{"ph":"E","ts":4,"pid":1,"tid":1}],"distributedInfo":{"rank":3}}"#,
        br#"{"traceEvents":[{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"name":"a"},{"ph":"X","ts":"#,
        br#"[{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"name":"a","tts":3},{"ph":"X" "ts":1}]"#,
        br#"{"traceEvents":[]}"#,
        br#"[null]"#,
        // `}, {` inside a string: a split guess that is no element boundary.
        br#"[{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"name":"a}, {b}, {c}, {d"},{"ph":"X","ts":3,"dur":1,"pid":1,"tid":1,"name":"e\u00e9"}, {"ph":"i","ts":4,"pid":1,"tid":"x\ty","name":"i","s":"p"}]"#,
    ];
    for (i, case) in edge_cases.iter().enumerate() {
        inputs.push((format!("edge case {i}"), case.to_vec()));
    }
    for (name, body) in &inputs {
        let serial = read_with(body, None);
        for fraction in [0.0, 0.43, 0.9] {
            let split = read_with(body, Some(fraction));
            assert!(serial == split, "{name}: split at {fraction} differs");
        }
    }
}
