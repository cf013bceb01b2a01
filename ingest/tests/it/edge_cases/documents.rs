//! Edge cases: document shapes, damage, lanes and times, nesting, B/E pairs, instants and counters.

use super::*;

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
