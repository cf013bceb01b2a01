//! Resource limits: each one stops a load with `limit_exceeded` and a message naming the flag
//! that raises it, and raising it lets the same input load.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use steplens_ingest::{IngestError, Limits, LoadOptions, load};

fn sample(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples")
        .join(rel)
}

fn with_limits(limits: Limits) -> LoadOptions {
    LoadOptions {
        limits,
        ..LoadOptions::default()
    }
}

fn limit_error(path: &Path, options: &LoadOptions) -> String {
    match load(path, options, None) {
        Err(e @ IngestError::LimitExceeded { .. }) => {
            assert_eq!(e.code(), "limit_exceeded");
            e.to_string()
        }
        Err(e) => panic!("{}: expected a limit error, got {e}", path.display()),
        Ok(_) => panic!("{}: expected a limit error, it loaded", path.display()),
    }
}

#[test]
fn too_many_tracks() {
    let path = sample("hta/cuda_event_sync.json.gz");
    let tracks = load(&path, &LoadOptions::default(), None)
        .unwrap()
        .tracks
        .len();
    assert!(tracks > 2);
    let low = with_limits(Limits {
        max_tracks: 2,
        ..Limits::default()
    });
    let message = limit_error(&path, &low);
    assert!(
        message.contains("the number of tracks exceeds the limit of 2"),
        "{message}"
    );
    assert!(message.contains("--max-tracks"), "{message}");
    let enough = with_limits(Limits {
        max_tracks: tracks,
        ..Limits::default()
    });
    assert_eq!(load(&path, &enough, None).unwrap().tracks.len(), tracks);
}

#[test]
fn a_name_too_long() {
    let path = sample("torch-cpu/train_clean.json");
    let low = with_limits(Limits {
        max_name_bytes: 10,
        ..Limits::default()
    });
    let message = limit_error(&path, &low);
    assert!(message.contains("--max-name-bytes"), "{message}");
    assert!(message.contains("train_clean.json"), "{message}");
}

#[test]
fn json_args_nested_too_deep() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("deep.json");
    let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    let trace = format!(
        r#"{{"traceEvents":[{{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2,"args":{{"x":{deep}}}}}]}}"#
    );
    std::fs::File::create(&path)
        .unwrap()
        .write_all(trace.as_bytes())
        .unwrap();
    let low = with_limits(Limits {
        max_json_depth: 16,
        ..Limits::default()
    });
    let message = limit_error(&path, &low);
    assert!(
        message.contains("JSON nesting depth exceeds the limit of 16 levels"),
        "{message}"
    );
    assert!(message.contains("--max-json-depth"), "{message}");
    let timeline = load(&path, &LoadOptions::default(), None).unwrap();
    assert_eq!(timeline.slices.len(), 1);
}

#[test]
fn a_deflate_bomb_hits_the_ratio_cap() {
    // 270 MiB of spaces inside a trace compress about 1000:1.
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("bomb.json.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::best(),
    );
    gz.write_all(br#"{"traceEvents":["#).unwrap();
    let spaces = vec![b' '; 1 << 20];
    for _ in 0..270 {
        gz.write_all(&spaces).unwrap();
    }
    gz.write_all(b"]}").unwrap();
    gz.finish().unwrap();
    let message = limit_error(&path, &LoadOptions::default());
    assert!(
        message.contains("decompression ratio exceeds the limit of 250:1"),
        "{message}"
    );
    assert!(message.contains("--max-inflate-ratio"), "{message}");
}

#[test]
fn the_track_cap_counts_every_input_loaded_in_parallel() {
    let a = sample("hta/cuda_event_sync.json.gz");
    let b = sample("torch-cpu/train_clean.json");
    let one = load(&a, &LoadOptions::default(), None)
        .unwrap()
        .tracks
        .len();
    let other = load(&b, &LoadOptions::default(), None)
        .unwrap()
        .tracks
        .len();
    // Each input fits on its own; together they do not.
    let cap = with_limits(Limits {
        max_tracks: one.max(other),
        ..Limits::default()
    });
    let err = steplens_ingest::load_many(&[a.as_path(), b.as_path()], &cap, None).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("--max-tracks"), "{message}");
    let enough = with_limits(Limits {
        max_tracks: one + other,
        ..Limits::default()
    });
    let both = steplens_ingest::load_many(&[a.as_path(), b.as_path()], &enough, None).unwrap();
    assert_eq!(both.tracks.len(), one + other);
}

/// A protobuf varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited protobuf field.
fn field_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, field << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A Perfetto trace of `count` track descriptors (uuid 1.., each named `name`) and no events.
fn perfetto_descriptors(count: u64, name: &str) -> Vec<u8> {
    let mut trace = Vec::new();
    let mut descriptor = Vec::new();
    let mut packet = Vec::new();
    for uuid in 1..=count {
        descriptor.clear();
        varint(&mut descriptor, 1 << 3); // uuid
        varint(&mut descriptor, uuid);
        field_bytes(&mut descriptor, 2, name.as_bytes()); // name
        packet.clear();
        field_bytes(&mut packet, 60, &descriptor); // TracePacket.track_descriptor
        field_bytes(&mut trace, 1, &packet); // Trace.packet
    }
    trace
}

fn write_temp(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Each limit on each reader it bounds: (reader, input, the limits lowered, what the message
/// says). A row per reader and limit; raising the limit back loads the input.
#[test]
fn every_limit_is_applied_by_every_reader() {
    let dir = tempfile::TempDir::new().unwrap();
    let low_tracks = Limits {
        max_tracks: 2,
        ..Limits::default()
    };
    let low_names = Limits {
        max_name_bytes: 10,
        ..Limits::default()
    };
    let low_depth = Limits {
        max_json_depth: 16,
        ..Limits::default()
    };
    let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    let metrics = write_temp(
        &dir,
        "deep.metrics.json",
        format!(
            r#"[{{"metric_name": "graph_compilation", "triggered_by": "mark_step", "statistics": {{"TotalNumber": 1, "x": {deep}}}}}]"#
        )
        .as_bytes(),
    );
    let nodes_csv = sample("habana/debug_hw_prof_accel0_001_analyzed_nodes.csv");
    let header = std::fs::read_to_string(&nodes_csv).unwrap();
    let columns: Vec<&str> = header.lines().next().unwrap().split(',').collect();
    let row: serde_json::Map<String, serde_json::Value> = columns
        .iter()
        .map(|c| ((*c).to_owned(), serde_json::Value::String(String::new())))
        .collect();
    let mut row = serde_json::Value::Object(row);
    row["Unit"] = "TPC".into();
    row["Node Name"] = "n".into();
    row["Start time of node"] = "1.0".into();
    row["End time of node"] = "2.0".into();
    row["Input shapes"] = serde_json::from_str(&deep).unwrap_or_default();
    let nodes_json = write_temp(
        &dir,
        "deep_analyzed_nodes.json",
        &serde_json::to_vec(&serde_json::json!({ "analyzer_metadata": [row] })).unwrap(),
    );
    let perfetto_many = write_temp(&dir, "tracks.pftrace", &perfetto_descriptors(3, "t"));
    let perfetto_long = write_temp(
        &dir,
        "long.pftrace",
        &perfetto_descriptors(1, "a track name far past ten bytes"),
    );
    let rows: Vec<(&str, PathBuf, Limits, &str)> = vec![
        (
            "kineto-json",
            sample("hta/cuda_event_sync.json.gz"),
            low_tracks,
            "the number of tracks exceeds the limit of 2",
        ),
        (
            "kineto-json",
            sample("torch-cpu/train_clean.json"),
            low_names,
            "a name exceeds the limit of 10 bytes",
        ),
        (
            "perfetto",
            sample("perfetto/synthetic.pftrace"),
            low_tracks,
            "exceeds the limit of 2",
        ),
        (
            "perfetto (descriptors only)",
            perfetto_many,
            low_tracks,
            "the number of Perfetto track descriptors exceeds the limit of 2",
        ),
        (
            "perfetto (a descriptor's name)",
            perfetto_long,
            low_names,
            "a name exceeds the limit of 10 bytes",
        ),
        (
            "perfetto (event names)",
            sample("perfetto/synthetic.pftrace"),
            low_names,
            "a name exceeds the limit of 10 bytes",
        ),
        (
            "habana-hw-csv",
            sample("gaudi/train_hpu.hw.csv"),
            low_tracks,
            "the number of tracks exceeds the limit of 2",
        ),
        (
            "habana-hw-csv",
            sample("gaudi/train_hpu.hw.csv"),
            low_names,
            "a name exceeds the limit of 10 bytes",
        ),
        (
            "habana-nodes (CSV)",
            nodes_csv.clone(),
            Limits {
                max_tracks: 1,
                ..Limits::default()
            },
            "the number of tracks exceeds the limit of 1",
        ),
        (
            "habana-nodes (CSV)",
            nodes_csv,
            low_names,
            "a name exceeds the limit of 10 bytes",
        ),
        (
            "habana-nodes (JSON)",
            nodes_json,
            low_depth,
            "JSON nesting depth exceeds the limit of 16 levels",
        ),
        (
            "habana-metrics",
            metrics,
            low_depth,
            "JSON nesting depth exceeds the limit of 16 levels",
        ),
    ];
    for (reader, path, limits, said) in rows {
        let message = limit_error(&path, &with_limits(limits));
        assert!(message.contains(said), "{reader}: {message}");
        let flag = if limits.max_tracks != Limits::default().max_tracks {
            "--max-tracks"
        } else if limits.max_name_bytes != Limits::default().max_name_bytes {
            "--max-name-bytes"
        } else {
            "--max-json-depth"
        };
        assert!(message.contains(flag), "{reader}: {message}");
        assert!(
            load(&path, &LoadOptions::default(), None).is_ok(),
            "{reader}: {} loads within the default limits",
            path.display()
        );
    }
}
