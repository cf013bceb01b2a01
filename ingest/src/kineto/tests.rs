//! The two-thread parse and the parse behind a filling [`Feed`] against the single-threaded
//! loop.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use super::{KinetoReader, TraceEventReader};
use crate::builder::TimelineBuilder;
use crate::feed::Feed;
use crate::format::FormatId;
use crate::model::SourceInfo;
use crate::reader::Reader;
use crate::source::{SourceData, finish_input};

/// How a test reads its input.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// One thread.
    Serial,
    /// The event array parsed by two threads, the second starting near this share of it.
    Split(f64),
    /// Arriving through a [`Feed`] this many bytes at a time, then split at this share.
    Fed(usize, f64),
}

/// The read summary and the finished Timeline of `bytes`, read as `mode` says.
fn read_with(bytes: &[u8], mode: Mode) -> String {
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
    let split = |reader: &mut KinetoReader<'_, '_, '_>, fraction: Option<f64>| match fraction {
        Some(fraction) => {
            reader.split_min_bytes = 0;
            reader.split_fraction = fraction;
        }
        None => reader.split_min_bytes = usize::MAX,
    };
    let summary = match mode {
        Mode::Serial | Mode::Split(_) => {
            let mut reader = KinetoReader::new(data.bytes(), "t.json", &mut builder, source, None);
            split(
                &mut reader,
                if let Mode::Split(f) = mode {
                    Some(f)
                } else {
                    None
                },
            );
            reader.read()
        }
        Mode::Fed(chunk, fraction) => {
            let feed = Feed::new(bytes.len() + 1, bytes.len()).unwrap();
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    let mut at = 0;
                    feed.fill(|out| {
                        let n = out.len().min(chunk).min(bytes.len() - at);
                        out[..n].copy_from_slice(&bytes[at..at + n]);
                        at += n;
                        Ok(n)
                    })
                });
                let mut reader =
                    KinetoReader::with_feed(&feed, "t.json", &mut builder, source, None);
                split(&mut reader, Some(fraction));
                reader.read()
            })
        }
    };
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

/// Parsing with two threads, or behind a writer that is still filling the input, builds
/// exactly what the single-threaded loop builds, on every Trace Event sample and on damaged,
/// cut and oddly shaped arrays.
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
    let edge_cases: [&[u8]; 11] = [
        br#"[{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"name":"a"}, 7, {"ph":"X","ts":5,"dur":1,"pid":"p","tid":"t","name":"b"}]"#,
        br#"{"traceEvents":[{"ph":"B","ts":1,"pid":1,"tid":1,"name":"a"},{"ph":"E","ts":4,"pid":1,"tid":1}],"distributedInfo":{"rank":3}}"#,
        br#"{"traceEvents":[{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"name":"a"},{"ph":"X","ts":"#,
        br#"[{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"name":"a","tts":3},{"ph":"X" "ts":1}]"#,
        br#"{"traceEvents":[]}"#,
        br#"{"schemaVersion":1,"traceEvents":[{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"name":"a"}],"traceName":"x"} trailing"#,
        b"\xEF\xBB\xBF[{\"ph\":\"i\",\"ts\":1,\"pid\":1,\"tid\":1,\"name\":\"a\"}]",
        b"   \n ",
        br#"{"traceEvents":{"a":1}}"#,
        br#"[null]"#,
        // `}, {` inside a string: a split guess that is no element boundary.
        br#"[{"ph":"X","ts":1,"dur":2,"pid":1,"tid":1,"name":"a}, {b}, {c}, {d"},{"ph":"X","ts":3,"dur":1,"pid":1,"tid":1,"name":"e\u00e9"}, {"ph":"i","ts":4,"pid":1,"tid":"x\ty","name":"i","s":"p"}]"#,
    ];
    for (i, case) in edge_cases.iter().enumerate() {
        inputs.push((format!("edge case {i}"), case.to_vec()));
    }
    // More events than one batch of the parse thread holds, with names, categories and textual
    // tids first seen in later batches, and a non-object now and then.
    let mut many = String::from("[");
    for i in 0..40_000 {
        if i > 0 {
            many.push(',');
        }
        if i % 9_999 == 0 {
            many.push_str("null,");
        }
        many.push_str(&format!(
            r#"{{"ph":"X","ts":{i},"dur":1,"pid":1,"tid":"t{}","name":"op{}","cat":"c{}"}}"#,
            i / 7_000,
            i / 1_000,
            i / 20_000
        ));
    }
    many.push(']');
    inputs.push(("many batches".into(), many.into_bytes()));
    for (name, body) in &inputs {
        let serial = read_with(body, Mode::Serial);
        let mut modes = vec![
            Mode::Split(0.0),
            Mode::Split(0.43),
            Mode::Split(0.9),
            Mode::Fed(4093, 0.5),
            Mode::Fed(61, 0.0),
        ];
        if body.len() < 4096 {
            modes.push(Mode::Fed(1, 0.3));
        }
        for mode in modes {
            let other = read_with(body, mode);
            assert!(serial == other, "{name}: {mode:?} differs");
        }
    }
}
