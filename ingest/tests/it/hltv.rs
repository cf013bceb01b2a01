//! `.hltv` archives: known members load as sources, unknown ones are listed, damage and zip
//! bombs are reported, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use steplens_ingest::{IngestError, LoadOptions, load};
use tempfile::TempDir;
use zip::write::SimpleFileOptions;

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../samples/habana")
            .join(name),
    )
    .unwrap()
}

fn archive(dir: &TempDir, members: &[(&str, &[u8])]) -> PathBuf {
    let path = dir.path().join("run.hltv");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in members {
        zip.start_file(*name, options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
    path
}

#[test]
fn known_members_load_and_unknown_are_listed() {
    let dir = TempDir::new().unwrap();
    let hw = sample("debug_hw_prof_accel0_001.csv");
    let nodes = sample("debug_hw_prof_accel0_001_analyzed_nodes.csv");
    let path = archive(
        &dir,
        &[
            ("traces/hw.csv", &hw),
            ("views/nodes.csv", &nodes),
            ("README.txt", b"viewer notes"),
            ("views/layout.bin", &[0, 1, 2, 3]),
        ],
    );
    let t = load(&path, &LoadOptions::default(), None).unwrap();
    let formats: Vec<&str> = t.sources.iter().map(|s| s.format.as_str()).collect();
    assert_eq!(formats, ["habana-hw-csv", "habana-analyzed-nodes"]);
    assert!(
        t.sources[0].path.ends_with("run.hltv!traces/hw.csv"),
        "{}",
        t.sources[0].path
    );
    assert_eq!(t.slices.len(), 60);
    assert_eq!(t.node_metrics.len(), 4);
    let skipped = t.sources[0]
        .warnings
        .iter()
        .find(|w| w.code == "skipped_members")
        .unwrap();
    assert!(skipped.message.contains("README.txt") && skipped.message.contains("layout.bin"));
}

#[test]
fn archive_without_readable_members_is_not_a_trace() {
    let dir = TempDir::new().unwrap();
    let path = archive(&dir, &[("a.txt", b"hello")]);
    let err = load(&path, &LoadOptions::default(), None).unwrap_err();
    assert_eq!(err.code(), "not_a_trace", "{err}");
    assert!(err.to_string().contains("a.txt"));
}

#[test]
fn corrupt_archive_is_damaged() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("bad.hltv");
    std::fs::write(&path, b"PK\x03\x04 this is not really a zip archive at all").unwrap();
    let err = load(&path, &LoadOptions::default(), None).unwrap_err();
    assert_eq!(err.code(), "damaged", "{err}");
    assert!(err.to_string().contains("bad.hltv"));
}

#[test]
fn zip_bomb_hits_the_inflate_limit() {
    let dir = TempDir::new().unwrap();
    // Starts like a trace (a member that does not is never inflated past its head).
    let mut zeros = br#"{"traceEvents":["#.to_vec();
    zeros.resize(4 << 20, b' ');
    let path = archive(&dir, &[("big.json", &zeros)]);
    let options = LoadOptions {
        max_inflated_bytes: 1 << 20,
        ..LoadOptions::default()
    };
    let err = load(&path, &options, None).unwrap_err();
    assert!(
        matches!(
            err,
            IngestError::LimitExceeded {
                flag: "--max-inflated-bytes",
                ..
            }
        ),
        "{err}"
    );
}
