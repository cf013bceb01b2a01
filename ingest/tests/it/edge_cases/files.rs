//! Edge cases: gzip, errors, several files, and hostile or broken inputs read on past the damage.

use super::*;

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
    // (ZIP archives are read as `.hltv`: see `hltv.rs`.)
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
