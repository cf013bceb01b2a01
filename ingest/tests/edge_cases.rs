//! Integration tests of `steplens_ingest::load` on small inline traces, one edge case at a time
//! (kineto-format.md §13): document shapes, damage, lanes, times, nesting, B/E pairs, instants,
//! counters, metadata, flows, steps, device detection, lazy args, gzip and errors.
//!
//! Every loaded Timeline is also run through the structural invariant checker.
//!
//! Long on purpose: one short test per edge case, in the order of the format notes, with the
//! helpers they share at the top.

// Helpers outside `#[test]` functions panic on failure too, by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use steplens_ingest::model::{
    CategoryClass, DeviceKind, EngineClass, LaneId, NO_PARENT, SliceId, TrackKind, Warning,
};
use steplens_ingest::{IngestError, LoadOptions, Timeline, load, load_many};
use tempfile::TempDir;

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

// ---------------------------------------------------------------------------------------------
// Document shapes

#[test]
fn bare_top_level_array() {
    let t = load_str(&format!("[{}]", x_events(3).join(",")));
    assert_eq!(t.event_count(), 3);
    assert_eq!(phases(&t), [('X', 3)]);
    assert_eq!(names(&t), ["e0", "e1", "e2"]);
    assert_eq!(t.slices.start, [0, 10_000, 20_000]);
    assert_eq!(t.slices.dur, [5_000, 5_000, 5_000]);
    assert!(warnings(&t).is_empty(), "{:?}", warnings(&t));
    assert_eq!(t.sources[0].format, "kineto-json");
    assert!(!t.sources[0].compressed);
    assert!(t.sources[0].top_level.is_empty());
}

#[test]
fn bare_array_with_bom_and_whitespace() {
    let text = format!("\u{feff}\n  [ {} ]\n", x_events(2).join(" ,\n "));
    let t = load_str(&text);
    assert_eq!(t.event_count(), 2);
    assert_eq!(names(&t), ["e0", "e1"]);
    assert!(warnings(&t).is_empty(), "{:?}", warnings(&t));
}

#[test]
fn json_after_a_leading_newline_is_still_json() {
    // 0x0a is also the tag byte a Perfetto protobuf trace starts with.
    let t = load_str(&format!("\n[{}]", x_events(1)[0]));
    assert_eq!(t.event_count(), 1);
    let t = load_str(&format!(
        "\n\n{{\"traceEvents\":[{}]}}",
        x_events(2).join(",")
    ));
    assert_eq!(t.event_count(), 2);
}

#[test]
fn object_with_keys_before_and_after_trace_events() {
    let text = format!(
        r#"{{"schemaVersion": 1, "distributedInfo": {{"rank": 3, "world_size": 8}},
            "traceEvents": [{}],
            "traceName": "/tmp/x.json", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000}}"#,
        x_events(2).join(",")
    );
    let t = load_str(&text);
    assert_eq!(t.event_count(), 2);
    assert_eq!(names(&t), ["e0", "e1"]);
    let info = &t.sources[0];
    assert_eq!(info.rank, Some(3));
    assert_eq!(info.world_size, Some(8));
    let keys: Vec<&str> = info.top_level.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "schemaVersion",
            "distributedInfo",
            "traceName",
            "displayTimeUnit",
            "baseTimeNanoseconds"
        ]
    );
    assert_eq!(info.top_level[2].1, r#""/tmp/x.json""#);
    assert_eq!(info.top_level[4].1, "1700000000000000000");
    assert!(warnings(&t).is_empty(), "{:?}", warnings(&t));
}

#[test]
fn empty_event_list_loads_with_an_empty_warning() {
    for text in [
        "[]",
        r#"{"traceEvents": []}"#,
        r#"{"traceEvents": [], "traceName": "x"}"#,
    ] {
        let t = load_str(text);
        assert_eq!(t.event_count(), 0, "{text}");
        assert!(t.slices.is_empty());
        assert_eq!(codes(&t), ["empty"], "{text}");
    }
}

#[test]
fn trailing_data_after_the_object_is_a_warning() {
    let text = format!(r#"{{"traceEvents":[{}]}} garbage"#, x_events(1)[0]);
    let t = load_str(&text);
    assert_eq!(t.event_count(), 1);
    let w = warning(&t, "trailing_data");
    assert_eq!(w.offset, Some(text.find("garbage").unwrap() as u64));
}

#[test]
fn non_object_elements_are_skipped_and_counted() {
    let events = x_events(2);
    let t = load_str(&format!(
        "[{}, 1, null, \"x\", [2], {}]",
        events[0], events[1]
    ));
    assert_eq!(t.event_count(), 2);
    assert_eq!(names(&t), ["e0", "e1"]);
    assert_eq!(t.stats.malformed, 4);
    assert_eq!(codes(&t), ["malformed_event"]);
}

#[test]
fn events_missing_ts_or_dur_are_skipped_and_counted() {
    let text = r#"[{"ph":"X","name":"no_dur","pid":1,"tid":1,"ts":1},
                   {"ph":"X","name":"no_ts","pid":1,"tid":1,"dur":1},
                   {"ph":"i","name":"instant_no_ts","pid":1,"tid":1},
                   {"ph":"X","name":"ok","pid":1,"tid":1,"ts":2,"dur":1},
                   {"ph":"P","name":"sample","pid":1,"tid":1,"ts":2}]"#;
    let t = load_str(text);
    assert_eq!(t.event_count(), 5);
    assert_eq!(phases(&t), [('P', 1), ('X', 3), ('i', 1)]);
    assert_eq!(names(&t), ["ok"]);
    assert!(t.instants.is_empty());
    assert_eq!(t.stats.malformed, 3);
    assert_eq!(t.stats.unsupported_phase, 1);
    assert_eq!(codes(&t), ["unsupported_phase", "malformed_event"]);
}

// ---------------------------------------------------------------------------------------------
// Damage

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

#[test]
fn unterminated_array_cut_mid_event() {
    let events = x_events(3);
    let full = format!("[{}]", events.join(","));
    // Cut inside the third event at several places: in a key, in a string value, in a number,
    // right after `{`, right after a `:`.
    let third = full.rfind("{\"ph\"").unwrap();
    for cut in [
        third + 1,
        third + 3,
        third + 12,
        third + 40,
        full.len() - 4,
        full.len() - 2,
    ] {
        let text = &full[..cut];
        let t = load_str(text);
        assert_damaged(&t, 2, cut);
    }
}

#[test]
fn unterminated_array_cut_after_a_complete_event() {
    let events = x_events(3);
    let text = format!("[{}", events.join(","));
    let t = load_str(&text);
    assert_damaged(&t, 3, text.len());
    assert!(warning(&t, "damaged").message.contains("ends early"));
}

#[test]
fn unterminated_array_cut_right_after_a_comma() {
    let events = x_events(3);
    for text in [
        format!("[{},", events[..2].join(",")),
        format!("[{},\n  ", events[..2].join(",")),
    ] {
        let t = load_str(&text);
        assert_damaged(&t, 2, text.len());
    }
}

#[test]
fn garbage_in_the_middle_keeps_what_came_before() {
    let events = x_events(3);
    let text = format!("[{},{} @@@ ,{}]", events[0], events[1], events[2]);
    let t = load_str(&text);
    assert_damaged(&t, 2, text.find('@').unwrap());
    assert!(warning(&t, "damaged").message.contains("'@'"));
}

#[test]
fn unterminated_object() {
    let events = x_events(3);
    // Cut inside the event array of an object.
    let text = format!(r#"{{"schemaVersion":1,"traceEvents":[{}"#, events.join(","));
    let t = load_str(&text[..text.len() - 5]);
    assert_damaged(&t, 2, text.len() - 5);
    // Cut after the array, inside a later key: every event is kept.
    let text = format!(r#"{{"traceEvents":[{}],"traceNa"#, events.join(","));
    let t = load_str(&text);
    assert_damaged(&t, 3, text.len());
    // Cut after the array's `]`, before the object's `}`.
    let text = format!(r#"{{"traceEvents":[{}]"#, events.join(","));
    let t = load_str(&text);
    assert_damaged(&t, 3, text.len());
}

#[test]
fn damage_before_the_first_event_is_an_error() {
    for text in [
        r#"[{"ph":"X","na"#,
        r#"{"traceEvents":[{"ph""#,
        "[",
        r#"{"traceEvents":["#,
    ] {
        let err = load_err(text.as_bytes());
        assert!(
            matches!(&err, IngestError::Damaged { offset, .. } if *offset == text.len() as u64),
            "{text}: {err:?}"
        );
        assert_eq!(err.code(), "damaged");
        assert!(err.to_string().contains("trace.json"), "{err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Lanes and times

#[test]
fn string_and_integer_pid_tid() {
    let text = r#"[
        {"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","pid":"Spans","tid":"PyTorch Profiler","ts":0,"dur":100},
        {"ph":"i","cat":"","name":"Record Window End","pid":"","tid":"","ts":90,"s":"g"},
        {"ph":"X","cat":"cpu_op","name":"a","pid":"123","tid":"123","ts":1,"dur":2},
        {"ph":"X","cat":"cpu_op","name":"b","pid":123,"tid":123,"ts":5,"dur":2},
        {"ph":"X","cat":"cpu_op","name":"c","pid":123,"tid":"7","ts":5,"dur":2}
    ]"#;
    let t = load_str(text);
    assert_eq!(t.event_count(), 5);
    // "123" and 123 are the same lane; "7" is an integer tid.
    let a = slice_named(&t, "a");
    let b = slice_named(&t, "b");
    let c = slice_named(&t, "c");
    assert_eq!(t.slices.track[a as usize], t.slices.track[b as usize]);
    assert_ne!(t.slices.track[a as usize], t.slices.track[c as usize]);
    let main = t.slice_track(a).unwrap();
    assert_eq!(main.pid, LaneId::Int(123));
    assert_eq!(main.tid, LaneId::Int(123));
    assert_eq!(main.kind, TrackKind::HostThread);
    assert_eq!(main.name, "thread 123");
    assert_eq!(t.slice_track(c).unwrap().tid, LaneId::Int(7));

    let span = t
        .slice_track(slice_named(&t, "PyTorch Profiler (0)"))
        .unwrap();
    assert_eq!(span.kind, TrackKind::Async);
    assert_eq!(span.name, "PyTorch Profiler");
    assert_eq!(span.process_name, "Spans");
    assert!(matches!(span.pid, LaneId::Str(s) if t.strings.get(s) == "Spans"));

    assert_eq!(t.instants.len(), 1);
    let global = &t.tracks[t.instants.track[0] as usize];
    assert_eq!(global.kind, TrackKind::Async);
    assert_eq!(global.name, "global");
    assert!(matches!(global.pid, LaneId::Str(s) if t.strings.get(s).is_empty()));
    // Host threads come before async lanes.
    let kinds: Vec<&str> = t.tracks.iter().map(|tr| tr.kind.label()).collect();
    assert_eq!(kinds, ["host", "host", "async", "async"]);
}

#[test]
fn fractional_ns_resolution_timestamps_are_exact() {
    let text = r#"[
        {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1712195495519689.047,"dur":3.001},
        {"ph":"X","cat":"cpu_op","name":"h","pid":1,"tid":1,"ts":"1712195495519680.5","dur":"0.0005"},
        {"ph":"X","cat":"cpu_op","name":"e","pid":1,"tid":1,"ts":1.5e3,"dur":2}
    ]"#;
    let t = load_str(text);
    let k = slice_named(&t, "k") as usize;
    assert_eq!(t.slices.start[k], 1_712_195_495_519_689_047);
    assert_eq!(t.slices.dur[k], 3_001);
    assert_eq!(t.slices.end(k as SliceId), 1_712_195_495_519_692_048);
    // Numbers written as strings are accepted; sub-ns digits round half away from zero.
    let h = slice_named(&t, "h") as usize;
    assert_eq!(t.slices.start[h], 1_712_195_495_519_680_500);
    assert_eq!(t.slices.dur[h], 1);
    let e = slice_named(&t, "e") as usize;
    assert_eq!(t.slices.start[e], 1_500_000);
    assert_eq!(t.slices.dur[e], 2_000);
}

#[test]
fn tiny_negative_durations_are_clamped() {
    let text = r#"[
        {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":100.002,"dur":-0.001},
        {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":200,"dur":-0.003},
        {"ph":"X","cat":"kernel","name":"k3","pid":0,"tid":7,"ts":300,"dur":1}
    ]"#;
    let t = load_str(text);
    assert_eq!(names(&t), ["k1", "k2", "k3"]);
    assert_eq!(t.slices.start, [100_002, 200_000, 300_000]);
    assert_eq!(t.slices.dur, [0, 0, 1_000]);
    assert_eq!(t.stats.negative_durations, 2);
    assert_eq!(t.stats.most_negative_ns, -3);
    assert_eq!(codes(&t), ["negative_duration"]);
    assert!(warning(&t, "negative_duration").message.contains("-3 ns"));
}

#[test]
fn overlong_durations_are_dropped() {
    let week_us = 7 * 24 * 3600 * 1_000_000_i64;
    let text = format!(
        r#"[{{"ph":"X","cat":"kernel","name":"bad","pid":0,"tid":7,"ts":0,"dur":{}}},
            {{"ph":"X","cat":"kernel","name":"ok","pid":0,"tid":7,"ts":0,"dur":{week_us}}}]"#,
        week_us + 1
    );
    let t = load_str(&text);
    assert_eq!(t.event_count(), 2);
    assert_eq!(names(&t), ["ok"]);
    assert_eq!(t.stats.overlong, 1);
    assert_eq!(codes(&t), ["overlong_slice"]);
}

// ---------------------------------------------------------------------------------------------
// Nesting

#[test]
fn nested_slices_get_depth_and_parent() {
    // a [0,100] > b [10,50] > c [20,30]; a > d [60,90]; e [100,110] is a sibling of a
    // (touching, not inside); z [100,100] (zero length, at a's end) nests in e, which starts
    // at the same time and is longer.
    let text = format!(
        "[{}]",
        [
            x("d", "60", "30"),
            x("c", "20", "10"),
            x("a", "0", "100"),
            x("b", "10", "40"),
            x("e", "100", "10"),
            x("z", "100", "0"),
        ]
        .join(",")
    );
    let t = load_str(&text);
    assert_eq!(names(&t), ["a", "b", "c", "d", "e", "z"]);
    assert_eq!(t.slices.depth, [0, 1, 2, 1, 0, 1]);
    assert_eq!(t.slices.parent, [NO_PARENT, 0, 1, 0, NO_PARENT, 4]);
    assert_eq!(t.tracks.len(), 1);
    assert_eq!(t.tracks[0].max_depth, 2);
    assert_eq!(t.tracks[0].slices, 0..6);
    assert_eq!(t.stats.partial_overlaps, 0);
    assert!(warnings(&t).is_empty(), "{:?}", warnings(&t));
    // slice_at finds the deepest slice containing a time.
    assert_eq!(t.slice_at(0, 25_000), Some(2));
    assert_eq!(t.slice_at(0, 55_000), Some(0));
    assert_eq!(t.slice_at(0, 105_000), Some(4));
    assert_eq!(t.slice_at(0, 200_000), None);
}

#[test]
fn identical_slices_nest_in_file_order() {
    let text = format!("[{},{}]", x("outer", "0", "10"), x("inner", "0", "10"));
    let t = load_str(&text);
    assert_eq!(names(&t), ["outer", "inner"]);
    assert_eq!(t.slices.depth, [0, 1]);
    assert_eq!(t.slices.parent, [NO_PARENT, 0]);
}

#[test]
fn overlapping_non_nested_slices_are_both_kept() {
    // a [0,10] and b [5,15] overlap without nesting; c [6,8] nests in b.
    let text = format!(
        "[{}]",
        [x("a", "0", "10"), x("b", "5", "10"), x("c", "6", "2")].join(",")
    );
    let t = load_str(&text);
    assert_eq!(names(&t), ["a", "b", "c"]);
    assert_eq!(t.slices.start, [0, 5_000, 6_000]);
    assert_eq!(t.slices.dur, [10_000, 10_000, 2_000]);
    assert_eq!(t.slices.depth, [0, 0, 1]);
    assert_eq!(t.slices.parent, [NO_PARENT, NO_PARENT, 1]);
    assert_eq!(t.stats.partial_overlaps, 1);
    assert_eq!(t.stats.max_overlap_ns, 5_000);
    assert_eq!(codes(&t), ["overlap"]);
    assert!(warning(&t, "overlap").message.contains("5000 ns"));
}

#[test]
fn a_slice_overlapping_a_nest_counts_once() {
    // b [5,15] starts inside both a [0,10] and its child a1 [1,9] and ends after both.
    let text = format!(
        "[{}]",
        [x("a", "0", "10"), x("a1", "1", "8"), x("b", "5", "10")].join(",")
    );
    let t = load_str(&text);
    assert_eq!(names(&t), ["a", "a1", "b"]);
    assert_eq!(t.slices.depth, [0, 1, 0]);
    assert_eq!(t.stats.partial_overlaps, 1, "one slice overlaps");
    assert_eq!(t.stats.max_overlap_ns, 5_000);
}

#[test]
fn python_frames_straddling_a_range_are_not_an_overlap() {
    let text = r#"[
        {"ph":"X","cat":"python_function","name":"enter","pid":1,"tid":1,"ts":0,"dur":10},
        {"ph":"X","cat":"user_annotation","name":"range","pid":1,"tid":1,"ts":5,"dur":10}
    ]"#;
    let t = load_str(text);
    assert_eq!(t.slices.depth, [0, 0]);
    assert_eq!(t.stats.partial_overlaps, 0);
    assert!(warnings(&t).is_empty(), "{:?}", warnings(&t));
}

// ---------------------------------------------------------------------------------------------
// B/E pairs, instants, counters

#[test]
fn begin_end_pairs_become_slices() {
    let text = r#"[
        {"ph":"B","cat":"user_annotation","name":"outer","pid":1,"tid":1,"ts":0,"args":{"k":1}},
        {"ph":"B","cat":"cpu_op","name":"inner","pid":1,"tid":1,"ts":1},
        {"ph":"E","pid":1,"tid":1,"ts":2},
        {"ph":"X","cat":"cpu_op","name":"x","pid":1,"tid":1,"ts":3,"dur":1},
        {"ph":"E","pid":1,"tid":1,"ts":5},
        {"ph":"B","cat":"cpu_op","name":"open","pid":1,"tid":1,"ts":10},
        {"ph":"X","cat":"cpu_op","name":"last","pid":1,"tid":1,"ts":12,"dur":8},
        {"ph":"E","pid":1,"tid":2,"ts":3}
    ]"#;
    let t = load_str(text);
    assert_eq!(t.event_count(), 8);
    assert_eq!(phases(&t), [('B', 3), ('E', 3), ('X', 2)]);
    assert_eq!(names(&t), ["outer", "inner", "x", "open", "last"]);
    assert_eq!(t.slices.start, [0, 1_000, 3_000, 10_000, 12_000]);
    // `open` has no E: closed at the last time seen on its track (the end of `last`, 20 µs).
    assert_eq!(t.slices.dur, [5_000, 1_000, 1_000, 10_000, 8_000]);
    assert_eq!(t.slices.depth, [0, 1, 1, 0, 1]);
    assert_eq!(t.slices.parent, [NO_PARENT, 0, 0, NO_PARENT, 3]);
    assert_eq!(t.arg_i64(0, "k"), Some(1));
    assert_eq!(t.stats.unclosed_begins, 1);
    assert_eq!(t.stats.unmatched_ends, 1);
    assert_eq!(codes(&t), ["unclosed_begin", "unmatched_end"]);
    // The stray E (tid 2) made a track, which holds nothing.
    assert_eq!(t.tracks.len(), 2);
    assert_eq!(t.tracks[1].slices, 5..5);
}

#[test]
fn instants() {
    let text = r#"[
        {"ph":"i","cat":"","name":"Iteration Start: PyTorch Profiler","pid":"Traces","tid":"Trace PyTorch Profiler","ts":50,"s":"g"},
        {"ph":"I","cat":"cpu_instant_event","name":"late","pid":1,"tid":1,"ts":30,"s":"p","args":{"n":3}},
        {"ph":"i","cat":"cpu_instant_event","name":"early","pid":1,"tid":1,"ts":10},
        {"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":0,"dur":100}
    ]"#;
    let t = load_str(text);
    assert_eq!(t.instants.len(), 3);
    let name = |i: usize| t.strings.get(t.instants.name[i]);
    // Sorted by (track, ts): the host thread first, then the async lane.
    assert_eq!(
        [name(0), name(1), name(2)],
        ["early", "late", "Iteration Start: PyTorch Profiler"]
    );
    assert_eq!(t.instants.ts, [10_000, 30_000, 50_000]);
    assert_eq!(t.instants.scope, [b't', b'p', b'g']);
    assert_eq!(t.instants.track[0], t.instants.track[1]);
    assert_eq!(
        t.tracks[t.instants.track[0] as usize].kind,
        TrackKind::HostThread
    );
    assert_eq!(
        t.tracks[t.instants.track[2] as usize].kind,
        TrackKind::Async
    );
    let args = t.resolve_args(0, t.instants.args[1]).expect("instant args");
    assert_eq!(args, br#"{"n":3}"#);
    assert_eq!(t.categories.class(t.instants.cat[0]), CategoryClass::Other);
}

#[test]
fn counters_become_counter_tracks() {
    let text = r#"[
        {"ph":"C","name":"Memory","pid":1,"ts":20,"args":{"allocated":5,"reserved":"7.5"}},
        {"ph":"C","name":"Memory","pid":1,"ts":10,"args":{"allocated":4,"reserved":6}},
        {"ph":"C","name":"queue","pid":2,"ts":5,"args":{"queue":3, "skip": {"nested": 1}}},
        {"ph":"C","name":"nothing","pid":2,"ts":5},
        {"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":0,"dur":100}
    ]"#;
    let t = load_str(text);
    assert_eq!(t.event_count(), 5);
    assert_eq!(phases(&t), [('C', 4), ('X', 1)]);
    assert_eq!(t.stats.malformed, 1, "a C event without args");
    let counter_tracks: Vec<(&str, LaneId)> = t
        .tracks
        .iter()
        .filter(|tr| tr.kind == TrackKind::Counter)
        .map(|tr| (tr.name.as_str(), tr.pid))
        .collect();
    assert_eq!(
        counter_tracks,
        [
            ("Memory allocated", LaneId::Int(1)),
            ("Memory reserved", LaneId::Int(1)),
            ("queue", LaneId::Int(2)),
        ]
    );
    // Counter tracks come after host tracks.
    assert_eq!(t.tracks[0].kind, TrackKind::HostThread);
    let allocated = track_named(&t, "Memory allocated") as u32;
    let reserved = track_named(&t, "Memory reserved") as u32;
    let queue = track_named(&t, "queue") as u32;
    assert_eq!(
        t.counters.track,
        [allocated, allocated, reserved, reserved, queue]
    );
    assert_eq!(t.counters.ts, [10_000, 20_000, 10_000, 20_000, 5_000]);
    assert_eq!(t.counters.value, [4.0, 5.0, 6.0, 7.5, 3.0]);
}

// ---------------------------------------------------------------------------------------------
// Metadata, track kinds and order

#[test]
fn metadata_names_kinds_and_order() {
    let text = r#"{"traceEvents":[
        {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":20,"dur":10},
        {"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":8,"ts":5,"dur":2},
        {"ph":"X","cat":"gpu_memset","name":"Memset (Device)","pid":0,"tid":8,"ts":8,"dur":1},
        {"ph":"X","cat":"cuda_sync","name":"Event Sync","pid":0,"tid":-1,"ts":25,"dur":1},
        {"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#1","pid":0,"tid":9,"ts":0,"dur":40},
        {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":100,"ts":10,"dur":5},
        {"ph":"X","cat":"cpu_op","name":"bwd","pid":100,"tid":200,"ts":10,"dur":5},
        {"ph":"X","cat":"cpu_op","name":"worker","pid":50,"tid":50,"ts":10,"dur":5},
        {"ph":"M","name":"process_name","pid":100,"tid":0,"args":{"name":"python3"}},
        {"ph":"M","name":"process_labels","pid":100,"tid":0,"args":{"labels":"CPU"}},
        {"ph":"M","name":"process_sort_index","pid":100,"tid":0,"args":{"sort_index":1}},
        {"ph":"M","name":"process_sort_index","pid":50,"tid":0,"args":{"sort_index":2}},
        {"ph":"M","name":"thread_name","pid":100,"tid":100,"args":{"name":"thread 100 (python3)"}},
        {"ph":"M","name":"thread_sort_index","pid":100,"tid":100,"args":{"sort_index":300}},
        {"ph":"M","name":"thread_name","pid":100,"tid":200,"args":{"name":"autograd"}},
        {"ph":"M","name":"thread_sort_index","pid":100,"tid":200,"args":{"sort_index":100}},
        {"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"python3"}},
        {"ph":"M","name":"process_labels","pid":0,"tid":0,"args":{"labels":"GPU 0"}},
        {"ph":"M","name":"process_sort_index","pid":0,"tid":0,"args":{"sort_index":16777216}},
        {"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7 "}},
        {"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7 "}},
        {"ph":"M","name":"thread_name","pid":0,"tid":-1,"args":{"name":"Device 0"}}
    ]}"#;
    let t = load_str(text);
    assert_eq!(t.event_count(), 22);
    assert_eq!(phases(&t), [('M', 14), ('X', 8)]);
    let summary: Vec<(&str, &str, String)> = t
        .tracks
        .iter()
        .map(|tr| {
            let kind = match &tr.kind {
                TrackKind::DeviceEngine { class, device } => format!("device {class} {device:?}"),
                other => other.label().to_owned(),
            };
            (tr.process_name.as_str(), tr.name.as_str(), kind)
        })
        .collect();
    assert_eq!(
        summary,
        [
            // Host tracks first, by process then thread sort index.
            ("python3", "autograd", "host".to_owned()),
            ("python3", "thread 100 (python3)", "host".to_owned()),
            ("50", "thread 50", "host".to_owned()),
            // Device lanes: named by their label, device index from "GPU 0", by tid.
            ("GPU 0", "Device 0", "device sync Some(0)".to_owned()),
            (
                "GPU 0",
                "stream 7",
                "device compute-stream Some(0)".to_owned()
            ),
            ("GPU 0", "stream 8", "device memcpy Some(0)".to_owned()),
            ("GPU 0", "stream 9", "device annotation Some(0)".to_owned()),
        ]
    );
    let gemm = t.slice_track(slice_named(&t, "gemm")).unwrap();
    assert_eq!(
        gemm.kind,
        TrackKind::DeviceEngine {
            class: EngineClass::ComputeStream,
            device: Some(0)
        }
    );
    assert_eq!(gemm.sort_key, (16_777_216, 7));
    assert_eq!(t.tracks[0].sort_key, (1, 100));
    assert_eq!(t.device.kind, DeviceKind::Cuda);
    assert_eq!(t.device.count, 1);
    // The device mirror of a step annotation is not a step.
    assert!(t.steps.is_empty());
    assert!(t.has_device());
}

#[test]
fn device_lanes_found_by_label_without_device_work() {
    // An MTIA lane holding only runtime-looking events is still a device lane by its label.
    let text = r#"[
        {"ph":"X","cat":"mtia_ccp_events","name":"dma_request","pid":9,"tid":3,"ts":0,"dur":1},
        {"ph":"X","cat":"other","name":"fw","pid":9,"tid":4,"ts":0,"dur":1},
        {"ph":"M","name":"process_labels","pid":9,"tid":0,"args":{"labels":"MTIA 9"}},
        {"ph":"M","name":"thread_name","pid":9,"tid":3,"args":{"name":"DMA_REQUEST"}},
        {"ph":"M","name":"thread_name","pid":9,"tid":4,"args":{"name":"Stream 1 FW"}}
    ]"#;
    let t = load_str(text);
    let kinds: Vec<(&str, TrackKind)> = t
        .tracks
        .iter()
        .map(|tr| (tr.name.as_str(), tr.kind.clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            (
                "DMA_REQUEST",
                TrackKind::DeviceEngine {
                    class: EngineClass::Dma,
                    device: Some(9)
                }
            ),
            (
                "Stream 1 FW",
                TrackKind::DeviceEngine {
                    class: EngineClass::ComputeStream,
                    device: Some(9)
                }
            ),
        ]
    );
    assert_eq!(t.device.kind, DeviceKind::Mtia);
}

// ---------------------------------------------------------------------------------------------
// Flows

#[test]
fn flows_bind_to_slices() {
    let text = r#"[
        {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":100,"tid":100,"ts":8,"dur":10},
        {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":100,"ts":10,"dur":5},
        {"ph":"s","cat":"ac2g","name":"ac2g","id":7,"pid":100,"tid":100,"ts":10},
        {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":20,"dur":10},
        {"ph":"f","cat":"ac2g","name":"ac2g","id":7,"pid":0,"tid":7,"ts":20,"bp":"e"},
        {"ph":"X","cat":"cpu_op","name":"aten::add","pid":100,"tid":100,"ts":40,"dur":4},
        {"ph":"s","cat":"fwdbwd","name":"fwdbwd","id":3,"pid":100,"tid":100,"ts":40,"bp":"e"},
        {"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: AddBackward0","pid":100,"tid":200,"ts":60,"dur":6},
        {"ph":"f","cat":"fwdbwd","name":"fwdbwd","id":3,"pid":100,"tid":200,"ts":60,"bp":"e"},
        {"ph":"X","cat":"cuda_runtime","name":"cudaStreamWaitEvent","pid":100,"tid":100,"ts":50,"dur":1},
        {"ph":"f","cat":"ac2g","name":"ac2g","id":99,"pid":100,"tid":100,"ts":50,"bp":"e"}
    ]"#;
    let t = load_str(text);
    assert_eq!(t.event_count(), 11);
    assert_eq!(phases(&t), [('X', 6), ('f', 3), ('s', 2)]);
    let by_cat = |cat: &str| {
        let id = t.categories.lookup(cat).unwrap();
        t.flows
            .iter()
            .filter(|f| f.cat == id)
            .copied()
            .collect::<Vec<_>>()
    };
    let ac2g = by_cat("ac2g");
    assert_eq!(ac2g.len(), 1);
    assert_eq!(ac2g[0].id, 7);
    // The start binds to the deepest enclosing slice (the runtime call, not the op).
    assert_eq!(t.slice_name(ac2g[0].from), "cudaLaunchKernel");
    assert_eq!(t.slice_name(ac2g[0].to), "gemm");
    assert_eq!(t.slice_class(ac2g[0].from), CategoryClass::Runtime);
    assert_eq!(t.slice_class(ac2g[0].to), CategoryClass::Kernel);
    let fwdbwd = by_cat("fwdbwd");
    assert_eq!(fwdbwd.len(), 1);
    assert_eq!(fwdbwd[0].id, 3);
    assert_eq!(t.slice_name(fwdbwd[0].from), "aten::add");
    assert_eq!(
        t.slice_name(fwdbwd[0].to),
        "autograd::engine::evaluate_function: AddBackward0"
    );
    assert_eq!(t.flows.len(), 2);
    // The `f` with id 99 has no `s`.
    assert_eq!(t.stats.unbound_flow_ends, 1);
    assert_eq!(t.device.kind, DeviceKind::Cuda);
}

#[test]
fn flow_start_without_finish_and_unbindable_finish_are_counted() {
    let text = r#"[
        {"ph":"X","cat":"cuda_runtime","name":"cudaDeviceSynchronize","pid":1,"tid":1,"ts":0,"dur":5},
        {"ph":"s","cat":"ac2g","id":39,"pid":1,"tid":1,"ts":1},
        {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":10,"dur":5},
        {"ph":"s","cat":"ac2g","id":40,"pid":1,"tid":1,"ts":10},
        {"ph":"f","cat":"ac2g","id":40,"pid":0,"tid":7,"ts":30,"bp":"e"}
    ]"#;
    let t = load_str(text);
    // id 39: a start with no finish; id 40: a finish on a lane with no slice to bind to.
    assert!(t.flows.is_empty());
    assert_eq!(t.stats.unbound_flow_ends, 2);
}

// ---------------------------------------------------------------------------------------------
// Steps and device kind

#[test]
fn profiler_steps() {
    let text = r#"[
        {"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","pid":1,"tid":1,"ts":100,"dur":90},
        {"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":0,"dur":95},
        {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":5},
        {"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#2","pid":0,"tid":7,"ts":20,"dur":80},
        {"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#3","pid":0,"tid":7,"ts":120,"dur":60},
        {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":30,"dur":5},
        {"ph":"X","cat":"python_function","name":"ProfilerStep#9","pid":1,"tid":1,"ts":0,"dur":1},
        {"ph":"X","cat":"user_annotation","name":"ProfilerStep#x","pid":1,"tid":2,"ts":0,"dur":1}
    ]"#;
    let t = load_str(text);
    let steps: Vec<(&str, Option<i64>, i64, i64)> = t
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.number, s.start, s.dur))
        .collect();
    assert_eq!(
        steps,
        [
            ("ProfilerStep#2", Some(2), 0, 95_000),
            ("ProfilerStep#3", Some(3), 100_000, 90_000),
        ]
    );
    for s in &t.steps {
        assert_eq!(t.tracks[s.track as usize].kind, TrackKind::HostThread);
        assert_eq!(t.slice_name(s.slice), s.name);
        assert_eq!(s.source, 0);
        assert_eq!(s.end(), s.start + s.dur);
    }
}

#[test]
fn step_with_unparsable_number() {
    let text = r#"[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#x","pid":1,"tid":2,"ts":0,"dur":1}]"#;
    let t = load_str(text);
    assert_eq!(t.steps.len(), 1);
    assert_eq!(t.steps[0].number, None);
}

#[test]
fn device_kind_detection() {
    let runtime = |cat: &str, name: &str| {
        format!(r#"[{{"ph":"X","cat":"{cat}","name":"{name}","pid":1,"tid":1,"ts":0,"dur":1}}]"#)
    };
    let cases = [
        (
            runtime("cuda_runtime", "cudaLaunchKernel"),
            DeviceKind::Cuda,
            1,
        ),
        (
            runtime("cuda_driver", "cuLaunchKernel"),
            DeviceKind::Cuda,
            1,
        ),
        // ROCm writes HIP calls under the `cuda_runtime` category.
        (
            runtime("cuda_runtime", "hipLaunchKernel"),
            DeviceKind::Rocm,
            1,
        ),
        (runtime("cpu_op", "aten::mm"), DeviceKind::Cpu, 0),
        (
            runtime("mtia_ccp_events", "fc-dtype_Float"),
            DeviceKind::Mtia,
            1,
        ),
        (runtime("mtia_runtime", "runFunction"), DeviceKind::Mtia, 1),
        (runtime("hpu_op", "hpu::add"), DeviceKind::Hpu, 1),
    ];
    for (text, kind, count) in cases {
        let t = load_str(&text);
        assert_eq!(t.device.kind, kind, "{text}");
        assert_eq!(t.device.count, count, "{text}");
    }
    // Device properties give the name and the count.
    let text = r#"{"deviceProperties":[{"id":0,"name":"NVIDIA A100-SXM4-40GB"},{"id":1,"name":"NVIDIA A100-SXM4-40GB"}],
                   "traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":1}]}"#;
    let t = load_str(text);
    assert_eq!(t.device.kind, DeviceKind::Cuda);
    assert_eq!(t.device.name.as_deref(), Some("NVIDIA A100-SXM4-40GB"));
    let text = r#"{"deviceProperties":[{"id":0,"name":"AMD Instinct MI250X","gcnArchName":"gfx90a"}],
                   "traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":1}]}"#;
    assert_eq!(load_str(text).device.kind, DeviceKind::Rocm);
}

// ---------------------------------------------------------------------------------------------
// Lazy args

#[test]
fn lazy_args() {
    let text = r#"[
        {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":10,
         "args":{"External id": 42, "Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"],
                 "Sequence number": "17", "Call\"stack": "a\nb", "empty": {}}},
        {"ph":"X","cat":"cpu_op","name":"no_args","pid":1,"tid":1,"ts":20,"dur":1},
        {"ph":"X","cat":"cpu_op","name":"empty_args","pid":1,"tid":1,"ts":30,"dur":1,"args":{}}
    ]"#;
    let t = load_str(text);
    let mm = slice_named(&t, "aten::mm");
    let args = t.args(mm).expect("args");
    assert_eq!(args.len(), 6);
    assert_eq!(args["External id"], serde_json::json!(42));
    assert_eq!(args["Input Dims"], serde_json::json!([[2, 3], [3, 4]]));
    assert_eq!(t.arg_raw(mm, "Input Dims"), Some(&b"[[2, 3], [3, 4]]"[..]));
    assert_eq!(t.arg_raw(mm, "External id"), Some(&b"42"[..]));
    assert_eq!(t.arg_raw(mm, "missing"), None);
    assert_eq!(t.arg_i64(mm, "External id"), Some(42));
    assert_eq!(t.arg_i64(mm, "Sequence number"), Some(17));
    assert_eq!(t.arg_i64(mm, "Input Dims"), None);
    assert_eq!(t.arg_str(mm, "Sequence number").as_deref(), Some("17"));
    assert_eq!(t.arg_str(mm, "External id").as_deref(), Some("42"));
    assert_eq!(t.arg_str(mm, "Call\"stack").as_deref(), Some("a\nb"));
    assert_eq!(
        t.arg_str(mm, "Input type").as_deref(),
        Some(r#"["float", "float"]"#)
    );
    let raw = t.args_raw(mm).unwrap();
    assert!(raw.starts_with(b"{\"External id\"") && raw.ends_with(b"}"));
    let none = slice_named(&t, "no_args");
    assert_eq!(t.args_raw(none), None);
    assert_eq!(t.args(none), None);
    assert_eq!(t.arg_i64(none, "External id"), None);
    let empty = slice_named(&t, "empty_args");
    assert_eq!(t.args(empty).map(|m| m.len()), Some(0));
    assert_eq!(t.arg_raw(empty, "x"), None);
}

// ---------------------------------------------------------------------------------------------
// gzip

/// `n` X events `e0…` with varied numbers, so that a trace of them compresses poorly enough
/// to be cut in the middle of its gzip stream.
fn varied_events(n: usize) -> Vec<String> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let ts = i as u64 * 1000 + state % 500;
            format!(
                r#"{{"ph":"X","cat":"cpu_op","name":"e{i}","pid":1,"tid":1,"ts":{ts}.{:03},"dur":{},"args":{{"r":{state}}}}}"#,
                state % 1000,
                state % 400
            )
        })
        .collect()
}

const VARIED_HEAD: &str = r#"{"traceEvents":["#;
const VARIED_SEP: &str = ",\n";

fn varied_trace(n: usize) -> String {
    format!(
        r#"{VARIED_HEAD}{}],"traceName":"x"}}"#,
        varied_events(n).join(VARIED_SEP)
    )
}

#[test]
fn gzip_input() {
    let text = varied_trace(50);
    let dir = TempDir::new().unwrap();
    let plain = write(&dir, "a.json", text.as_bytes());
    let gz_bytes = gzip(text.as_bytes());
    let gz = write(&dir, "a.json.gz", &gz_bytes);
    // The name does not matter: content decides.
    let disguised = write(&dir, "a.txt", &gz_bytes);
    let a = checked(load(&plain, &LoadOptions::default(), None).unwrap());
    for path in [gz, disguised] {
        let b = checked(load(&path, &LoadOptions::default(), None).unwrap());
        let info = &b.sources[0];
        assert!(info.compressed);
        assert_eq!(info.stored_bytes, gz_bytes.len() as u64);
        assert_eq!(info.bytes, text.len() as u64);
        assert_eq!(info.events, 50);
        assert_eq!(a.slices.start, b.slices.start);
        assert_eq!(a.slices.dur, b.slices.dur);
        assert_eq!(names(&a), names(&b));
        assert_eq!(a.arg_raw(7, "r"), b.arg_raw(7, "r"));
        assert!(info.warnings.is_empty(), "{:?}", info.warnings);
    }
    assert!(!a.sources[0].compressed);
    assert_eq!(a.sources[0].stored_bytes, text.len() as u64);
}

#[test]
fn concatenated_gzip_members_are_read_whole() {
    let events = x_events(4);
    let first = format!("[{},", events[..2].join(","));
    let second = format!("{}]", events[2..].join(","));
    let mut bytes = gzip(first.as_bytes());
    bytes.extend(gzip(second.as_bytes()));
    let t = checked(try_load_bytes(&bytes).unwrap());
    assert_eq!(t.event_count(), 4);
    assert!(warnings(&t).is_empty(), "{:?}", warnings(&t));
}

/// Two members of the same inflated size are both read: a decoder that trusted the size the
/// file's last trailer states would take the first member for the whole file.
#[test]
fn concatenated_gzip_members_of_equal_size_are_read_whole() {
    let event = |name: &str| {
        format!(r#"{{"ph":"X","cat":"cpu_op","name":"{name}","pid":1,"tid":1,"ts":1,"dur":1}}"#)
    };
    let first = format!("[{},", event("aa"));
    let second = format!("{}]", event("bbb"));
    assert_eq!(first.len(), second.len());
    let mut bytes = gzip(first.as_bytes());
    bytes.extend(gzip(second.as_bytes()));
    let t = checked(try_load_bytes(&bytes).unwrap());
    assert_eq!(t.event_count(), 2);
    assert!(warnings(&t).is_empty(), "{:?}", warnings(&t));
}

#[test]
fn truncated_gzip_keeps_the_events_before_the_cut() {
    let n = 3000;
    let text = varied_trace(n);
    let gz = gzip(text.as_bytes());
    let cut = &gz[..gz.len() / 2];
    let t = checked(try_load_bytes(cut).unwrap());
    let info = &t.sources[0];
    assert!(info.compressed);
    assert_eq!(info.stored_bytes, cut.len() as u64);
    let inflated = info.bytes as usize;
    assert!(inflated > 0 && inflated < text.len(), "inflated {inflated}");
    let gz_warning = warning(&t, "damaged_gzip");
    assert_eq!(gz_warning.offset, Some(inflated as u64));
    // The JSON is cut where the inflated bytes end.
    let kept = info.events as usize;
    assert!(kept > 100 && kept < n, "kept {kept}");
    assert_damaged(&t, kept, inflated);
    // The events kept are exactly those whose closing brace is in the inflated prefix.
    let mut end = VARIED_HEAD.len();
    let mut complete = 0;
    for (i, event) in varied_events(n).iter().enumerate() {
        end += event.len() + if i > 0 { VARIED_SEP.len() } else { 0 };
        if end > inflated {
            break;
        }
        complete += 1;
    }
    assert_eq!(kept, complete);
    assert_eq!(codes(&t), ["damaged_gzip", "damaged"]);
}

#[test]
fn gzip_header_then_garbage_is_a_gzip_error() {
    let mut bytes = vec![0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff];
    bytes.extend([0xff; 32]);
    let err = load_err(&bytes);
    assert!(
        matches!(&err, IngestError::Gzip { offset: 0, .. }),
        "{err:?}"
    );
    assert_eq!(err.code(), "damaged");
    assert!(err.to_string().contains("trace.json"), "{err}");
    // Just the magic.
    let err = load_err(&[0x1f, 0x8b]);
    assert!(matches!(&err, IngestError::Gzip { .. }), "{err:?}");
}

#[test]
fn gzip_of_nothing_is_not_a_trace() {
    let err = load_err(&gzip(b""));
    assert!(matches!(&err, IngestError::NotATrace { .. }), "{err:?}");
    assert_eq!(err.code(), "not_a_trace");
}

#[test]
fn inflated_size_limit() {
    let text = varied_trace(20);
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "big.json.gz", &gzip(text.as_bytes()));
    let options = LoadOptions {
        max_inflated_bytes: 100,
        ..LoadOptions::default()
    };
    let err = load(&path, &options, None).unwrap_err();
    assert!(matches!(&err, IngestError::LimitExceeded { .. }), "{err:?}");
    assert_eq!(err.code(), "limit_exceeded");
    let options = LoadOptions {
        max_inflated_bytes: text.len() as u64,
        ..LoadOptions::default()
    };
    assert_eq!(load(&path, &options, None).unwrap().event_count(), 20);
}

// ---------------------------------------------------------------------------------------------
// Errors

fn assert_not_a_trace(bytes: &[u8]) -> String {
    let err = load_err(bytes);
    assert!(matches!(&err, IngestError::NotATrace { .. }), "{err:?}");
    assert_eq!(err.code(), "not_a_trace");
    let text = err.to_string();
    assert!(text.contains("trace.json"), "{text}");
    text
}

#[test]
fn empty_and_blank_files_are_not_traces() {
    assert!(assert_not_a_trace(b"").contains("empty"));
    assert!(assert_not_a_trace(b"  \n\t \r\n").contains("empty"));
}

#[test]
fn json_that_is_not_a_trace() {
    assert!(assert_not_a_trace(br#"{"a":1}"#).contains("traceEvents"));
    assert_not_a_trace(b"{}");
    assert_not_a_trace(br#"{"traceEvents": {"ph": "X"}}"#);
    // An array with elements, none of them an event object.
    assert_not_a_trace(b"[1,2,3]");
    assert_not_a_trace(br#"["a", null, [1]]"#);
    assert_not_a_trace(br#"{"traceEvents": [1, 2]}"#);
    // Scalars.
    assert_not_a_trace(b"123");
    assert_not_a_trace(b"null");
    assert_not_a_trace(br#""text""#);
}

#[test]
fn invalid_json_without_trace_markers_is_not_a_trace() {
    assert_not_a_trace(br#"{"a": 1,, "b": 2}"#);
    assert_not_a_trace(b"{not json at all");
}

#[test]
fn random_binary_is_not_a_trace() {
    let mut state = 12345u32;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (state >> 16) as u8
        })
        .collect();
    assert!(!matches!(bytes[0], 0x1f | 0x0a | b'{' | b'[' | b'P'));
    assert_not_a_trace(&bytes);
    assert_not_a_trace(b"\x00\x01\x02\x03\xfe\xff");
    assert_not_a_trace(b"hello world\n");
    // Starts with a newline (the Perfetto packet tag), but is no protobuf.
    assert_not_a_trace(b"\nhello world\n");
    assert_not_a_trace(b"\n\x05ab");
}

#[test]
fn other_formats_are_unsupported() {
    // (ZIP archives are read as `.hltv`: see tests/hltv.rs.)
    for (bytes, what) in [
        // Two `Trace.packet` records (tag 0x0a, length, payload) with no TrackEvent data.
        (&b"\x0a\x02\x08\x01\x0a\x02\x10\x02"[..], "Perfetto"),
        (&b"a,b,c\n1,2,3\n"[..], "CSV"),
    ] {
        let err = load_err(bytes);
        assert!(matches!(&err, IngestError::Unsupported { .. }), "{err:?}");
        assert_eq!(err.code(), "unsupported");
        assert!(err.to_string().contains(what), "{err}");
    }
}

#[test]
fn a_directory_is_not_a_trace() {
    let dir = TempDir::new().unwrap();
    let err = load(dir.path(), &LoadOptions::default(), None).unwrap_err();
    assert!(matches!(&err, IngestError::NotATrace { .. }), "{err:?}");
    assert_eq!(err.code(), "not_a_trace");
    assert!(err.to_string().contains("directory"), "{err}");
}

#[test]
fn a_missing_file_is_an_io_error() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("missing.json");
    let err = load(&path, &LoadOptions::default(), None).unwrap_err();
    match &err {
        IngestError::Io { path: p, source } => {
            assert_eq!(Path::new(p), path);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected Io, got {other:?}"),
    }
    assert_eq!(err.code(), "io");
    assert!(err.to_string().contains("missing.json"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Several files

#[test]
fn load_many_keeps_sources_apart() {
    let dir = TempDir::new().unwrap();
    let trace = |step: &str, ts: i64| {
        format!(
            r#"{{"distributedInfo":{{"rank":{r}}},"traceEvents":[
                {{"ph":"X","cat":"user_annotation","name":"{step}","pid":1,"tid":1,"ts":{ts},"dur":50}},
                {{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":{},"dur":5}},
                {{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{},"dur":5}},
                {{"ph":"C","name":"mem","pid":1,"ts":{ts},"args":{{"mem":1}}}}
            ]}}"#,
            ts + 1,
            ts + 2,
            r = ts / 1000
        )
    };
    let a = write(&dir, "rank0.json", trace("ProfilerStep#5", 0).as_bytes());
    let b = write(
        &dir,
        "rank1.json.gz",
        &gzip(trace("ProfilerStep#5", 1000).as_bytes()),
    );
    let t = checked(load_many(&[&a, &b], &LoadOptions::default(), None).unwrap());
    assert_eq!(t.sources.len(), 2);
    assert_eq!(t.sources[0].path, a.display().to_string());
    assert_eq!(t.sources[1].path, b.display().to_string());
    assert_eq!((t.sources[0].rank, t.sources[1].rank), (Some(0), Some(1)));
    assert!(t.sources[1].compressed);
    assert_eq!(t.event_count(), 8);
    // Same pid/tid in both files, yet distinct tracks, grouped by source.
    let tracks: Vec<(u16, &str)> = t
        .tracks
        .iter()
        .map(|tr| (tr.source, tr.kind.label()))
        .collect();
    assert_eq!(
        tracks,
        [
            (0, "host"),
            (0, "device"),
            (0, "counter"),
            (1, "host"),
            (1, "device"),
            (1, "counter"),
        ]
    );
    for (i, tr) in t.tracks.iter().enumerate() {
        for s in tr.slices.clone() {
            assert_eq!(t.slices.track[s as usize] as usize, i);
        }
    }
    let steps: Vec<(u16, &str, i64)> = t
        .steps
        .iter()
        .map(|s| (s.source, s.name.as_str(), s.start))
        .collect();
    assert_eq!(
        steps,
        [(0, "ProfilerStep#5", 0), (1, "ProfilerStep#5", 1_000_000)]
    );
    assert_eq!(t.device.count, 2, "one device lane per source");
    // Args resolve against their own source.
    let op1 = (0..t.slices.len() as SliceId)
        .filter(|&i| t.slice_name(i) == "op")
        .collect::<Vec<_>>();
    assert_eq!(op1.len(), 2);
    assert_eq!(t.slice_track(op1[1]).unwrap().source, 1);
    // A failing file fails the whole load.
    let missing = dir.path().join("nope.json");
    let err = load_many(&[&a, &missing], &LoadOptions::default(), None).unwrap_err();
    assert_eq!(err.code(), "io");
}

#[test]
fn progress_is_reported_for_large_inputs() {
    let text = varied_trace(70_000);
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "big.json", text.as_bytes());
    let mut calls: Vec<(u64, u64)> = Vec::new();
    let mut cb = |done: u64, total: u64| calls.push((done, total));
    let t = load(&path, &LoadOptions::default(), Some(&mut cb)).unwrap();
    assert_eq!(t.event_count(), 70_000);
    assert_eq!(calls.len(), 1, "one report per 65,536 events");
    assert_eq!(calls[0].1, text.len() as u64);
    assert!(calls[0].0 > 0 && calls[0].0 < calls[0].1);
}

#[test]
fn a_slice_ending_past_the_last_nanosecond_is_cut_and_counted() {
    // 9223372036854775 µs is 9223372036854775000 ns: 807 ns short of i64::MAX, so 1 ms more
    // would overflow `start + dur`.
    let t =
        load_str(r#"[{"ph":"X","name":"late","pid":1,"tid":1,"ts":9223372036854775,"dur":1000}]"#);
    assert_eq!(t.slices.len(), 1);
    assert_eq!(t.slices.end(0), i64::MAX);
    assert!(t.slices.end(0) >= t.slices.start[0]);
    let (a, b) = t.time_range().expect("one slice");
    assert!(b >= a);
    assert!(
        warnings(&t).iter().any(|w| w.code == "time_clamped"),
        "{:?}",
        warnings(&t)
    );
}

#[test]
fn begin_end_pairs_at_extreme_times_do_not_overflow() {
    let t = load_str(
        r#"[{"ph":"B","name":"a","pid":1,"tid":1,"ts":-9223372036854775},
            {"ph":"E","pid":1,"tid":1,"ts":9223372036854775},
            {"ph":"B","name":"b","pid":1,"tid":1,"ts":9223372036854775},
            {"ph":"E","pid":1,"tid":1,"ts":9223372036854775.5}]"#,
    );
    for i in 0..t.slices.len() as u32 {
        assert!(t.slices.end(i) >= t.slices.start[i as usize]);
        assert!(t.slices.dur[i as usize] >= 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile and broken inputs, read on past the damage

#[test]
fn an_event_with_a_field_of_the_wrong_type_is_skipped_alone() {
    // Each bad event would once have ended the read ("dropped the rest").
    let text = r#"{"traceEvents":[
        {"ph":"X","cat":"cpu_op","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":100},
        {"ph":"X","cat":"cpu_op","name":"a","pid":{"x":1},"tid":1,"ts":1,"dur":1},
        {"ph":"X","cat":"cpu_op","name":5,"pid":1,"tid":1,"ts":2,"dur":1},
        {"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":[3],"dur":1},
        {"ph":"X","cat":"cpu_op","name":"c","pid":1,"tid":1,"ts":4,"dur":{"v":1}},
        {"ph":7,"cat":"cpu_op","name":"d","pid":1,"tid":1,"ts":5,"dur":1},
        {"ph":"X","cat":["x"],"name":"e","pid":1,"tid":1,"ts":6,"dur":1},
        {"ph":"X","cat":"cpu_op","name":"f","pid":1,"tid":true,"ts":7,"dur":1},
        {"ph":"X","cat":"cpu_op","name":"kept","pid":1,"tid":1,"ts":10,"dur":5},
        {"ph":"X","cat":"cpu_op","name":"ProfilerStep#2","pid":1,"tid":1,"ts":100,"dur":100}
    ]}"#;
    let t = load_str(text);
    assert_eq!(names(&t), ["ProfilerStep#1", "kept", "ProfilerStep#2"]);
    assert_eq!(t.steps.len(), 2);
    let w = warning(&t, "wrong_field_type");
    assert!(w.message.contains("skipped 7 events"), "{}", w.message);
    for field in [
        "`pid` on 1",
        "`name` on 1",
        "`ts` on 1",
        "`dur` on 1",
        "`ph` on 1",
        "`cat` on 1",
        "`tid` on 1",
    ] {
        assert!(w.message.contains(field), "{field}: {}", w.message);
    }
    assert!(!codes(&t).contains(&"damaged"));
}

#[test]
fn wrong_types_are_skipped_on_both_threads_of_a_split_read() {
    // Large enough for the event array to be split over two threads: bad events in both
    // halves are skipped and counted the same way.
    let mut events = varied_events(40_000);
    for at in [100, 39_000] {
        events[at] =
            r#"{"ph":"X","cat":"cpu_op","name":"bad","pid":{"x":1},"tid":1,"ts":1,"dur":1}"#.into();
    }
    let text = format!(r#"{VARIED_HEAD}{}]}}"#, events.join(VARIED_SEP));
    let t = load_str(&text);
    assert_eq!(t.slices.len(), 39_998);
    assert!(
        warning(&t, "wrong_field_type")
            .message
            .contains("skipped 2 events with a field of the wrong type (`pid` on 2)")
    );
}

#[test]
fn begin_and_end_pair_in_time_order_not_file_order() {
    // B@1000 B@1100 E@1050 E@1150 on one thread: by time, two 50 µs slices one after the other
    // (file order would give 150 µs around 0 ns).
    let text = r#"[
        {"ph":"B","name":"ProfilerStep#1","cat":"cpu_op","pid":1,"tid":1,"ts":1000},
        {"ph":"B","name":"ProfilerStep#2","cat":"cpu_op","pid":1,"tid":1,"ts":1100},
        {"ph":"E","pid":1,"tid":1,"ts":1050},
        {"ph":"E","pid":1,"tid":1,"ts":1150}
    ]"#;
    let t = load_str(text);
    assert_eq!(names(&t), ["ProfilerStep#1", "ProfilerStep#2"]);
    assert_eq!(t.slices.start, [1_000_000, 1_100_000]);
    assert_eq!(t.slices.dur, [50_000, 50_000]);
    assert!(codes(&t).is_empty(), "{:?}", warnings(&t));
}

#[test]
fn large_negative_durations_are_not_called_rounding() {
    let text = r#"[
        {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":100,"dur":-1000},
        {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":200,"dur":-554000000},
        {"ph":"X","cat":"kernel","name":"k3","pid":0,"tid":7,"ts":300,"dur":-0.002}
    ]"#;
    let t = load_str(text);
    let messages: Vec<&str> = warnings(&t)
        .iter()
        .filter(|w| w.code == "negative_duration")
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].starts_with("2 slices end before they start by 1 µs or more"));
    assert!(messages[0].contains("-554000000000 ns"));
    assert!(!messages[0].contains("rounding)"));
    assert!(messages[1].starts_with("1 slices had a negative duration under 1 µs"));
}

#[test]
fn a_complete_gzip_with_trailing_bytes_keeps_its_last_step() {
    let text = r#"{"traceEvents":[
        {"ph":"X","cat":"cpu_op","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":100},
        {"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":10,"dur":5},
        {"ph":"X","cat":"cpu_op","name":"ProfilerStep#2","pid":1,"tid":1,"ts":100,"dur":100},
        {"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":110,"dur":5}
    ]}"#;
    let whole = gzip(text.as_bytes());
    let mut junk = whole.clone();
    junk.extend_from_slice(b"\x00garbage after the stream");
    let mut bad_crc = whole;
    let n = bad_crc.len();
    bad_crc[n - 8] ^= 0xff;
    for (what, bytes) in [("trailing junk", junk), ("bad CRC", bad_crc)] {
        let t = checked(try_load_bytes(&bytes).unwrap_or_else(|e| panic!("{what}: {e}")));
        assert_eq!(t.steps.len(), 2, "{what}: {:?}", warnings(&t));
        assert_eq!(codes(&t), ["trailing_data"], "{what}");
        assert!(
            warning(&t, "trailing_data")
                .message
                .contains("every event was read")
        );
    }
}
