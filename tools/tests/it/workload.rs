//! The two benchmarks run one workload: the Timeline `synthesize` pushes is the one loading the
//! JSON `generate` writes gives (same tracks, slices, names and times; the JSON adds args and
//! flows).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use steplens_ingest::model::Timeline;
use steplens_tools::workload::{generate, synthesize};

/// (track name, slice name, start, duration) of every slice, sorted.
fn slices(t: &Timeline) -> Vec<(String, String, i64, i64)> {
    let mut out: Vec<_> = (0..t.slices.len() as u32)
        .map(|i| {
            let track = t
                .slice_track(i)
                .map(|tr| tr.name.clone())
                .unwrap_or_default();
            (
                track,
                t.slice_name(i).to_owned(),
                t.slices.start[i as usize],
                t.slices.dur[i as usize],
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn synthesized_timeline_equals_the_generated_json_loaded() {
    let dir = std::env::temp_dir().join(format!("steplens-workload-{}", std::process::id()));
    let path = dir.join("small.json");
    let written = generate(&path, 300_000).unwrap();
    assert!(written >= 300_000);
    let loaded = steplens_ingest::load(&path, &steplens_ingest::LoadOptions::default(), None)
        .expect("the generated trace loads");
    let synthesized = synthesize(loaded.slices.len());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(loaded.slices.len() > 1_000, "{}", loaded.slices.len());
    assert_eq!(slices(&synthesized), slices(&loaded));
    // The JSON carries the launch flows and step annotations the frame benchmark does not need.
    assert!(!loaded.flows.is_empty());
    assert!(!loaded.steps.is_empty());
}
