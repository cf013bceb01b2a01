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
