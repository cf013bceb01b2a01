//! The invariant checker is the oracle of the corpus tests and the fuzz targets: each test here
//! breaks one invariant of a real Timeline and expects `check_invariants` to name it, so a
//! checker that passes everything fails here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use steplens_ingest::model::{NO_PARENT, Timeline, TrackKind};
use steplens_ingest::{LoadOptions, load};

/// A sample with nesting, flows, steps, instants and memory counters.
fn sample() -> Timeline {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/memory/train_clean.json.gz");
    let t = load(&path, &LoadOptions::default(), None).unwrap();
    t.check_invariants().expect("the sample itself is sound");
    assert!(!t.flows.is_empty() && !t.steps.is_empty() && t.counters.len() > 1);
    assert!(t.instants.ts.len() > 1);
    t
}

/// Applies `mutate` to a fresh sample and returns the checker's complaint.
fn broken(mutate: impl FnOnce(&mut Timeline)) -> String {
    let mut t = sample();
    mutate(&mut t);
    t.check_invariants()
        .expect_err("a broken Timeline must not pass")
}

/// The first slice with a parent.
fn child(t: &Timeline) -> usize {
    t.slices
        .parent
        .iter()
        .position(|&p| p != NO_PARENT)
        .unwrap()
}

#[test]
fn columns_of_unequal_length() {
    let err = broken(|t| {
        t.slices.dur.pop();
    });
    assert!(err.contains("columns differ in length"), "{err}");
}

#[test]
fn track_ranges_that_do_not_tile() {
    let err = broken(|t| t.tracks[0].slices.start += 1);
    assert!(err.contains("has range"), "{err}");
}

#[test]
fn a_wrong_max_depth() {
    let err = broken(|t| t.tracks[0].max_depth += 1);
    assert!(err.contains("max_depth") || err.contains("depth"), "{err}");
}

#[test]
fn a_negative_duration() {
    let err = broken(|t| t.slices.dur[0] = -5);
    assert!(err.contains("negative duration"), "{err}");
}

#[test]
fn slices_out_of_order() {
    let err = broken(|t| {
        let i = (1..t.slices.len())
            .find(|&i| t.slices.track[i] == t.slices.track[i - 1])
            .unwrap();
        t.slices.start[i] = t.slices.start[i - 1] - 1_000;
    });
    assert!(err.contains("out of (track, start) order"), "{err}");
}

#[test]
fn a_root_with_depth() {
    let err = broken(|t| {
        let root = t
            .slices
            .parent
            .iter()
            .position(|&p| p == NO_PARENT)
            .unwrap();
        t.slices.depth[root] = 3;
    });
    assert!(err.contains("has no parent but depth"), "{err}");
}

#[test]
fn a_parent_after_its_child() {
    let err = broken(|t| {
        let i = child(t);
        t.slices.parent[i] = (i + 1) as u32;
    });
    assert!(err.contains("does not come before it"), "{err}");
}

#[test]
fn a_wrong_depth_under_a_parent() {
    let err = broken(|t| {
        let i = child(t);
        t.slices.depth[i] += 1;
    });
    assert!(err.contains("under parent"), "{err}");
}

#[test]
fn a_child_outside_its_parent() {
    let err = broken(|t| {
        let i = child(t);
        let p = t.slices.parent[i] as usize;
        t.slices.dur[i] = t.slices.dur[p] + 1_000_000;
    });
    assert!(err.contains("is not inside its parent"), "{err}");
}

#[test]
fn a_parent_on_another_track() {
    let err = broken(|t| {
        let i = child(t);
        let track = t.slices.track[i];
        let other = (0..i)
            .rev()
            .find(|&j| t.slices.track[j] != track)
            .or_else(|| (i + 1..t.slices.len()).find(|&j| t.slices.track[j] != track))
            .unwrap();
        // Keep "comes before" true where possible so the track rule is the one broken.
        t.slices.parent[i] = other as u32;
    });
    assert!(
        err.contains("has parent") && (err.contains("on track") || err.contains("come before")),
        "{err}"
    );
}

#[test]
fn a_flow_to_nowhere() {
    let err = broken(|t| {
        let n = t.slices.len() as u32;
        t.flows[0].to = n + 5;
    });
    assert!(err.contains("joins"), "{err}");
}

#[test]
fn a_flow_to_itself() {
    let err = broken(|t| t.flows[0].to = t.flows[0].from);
    assert!(err.contains("joins"), "{err}");
}

#[test]
fn steps_out_of_order() {
    let err = broken(|t| t.steps.swap(0, 1));
    assert!(err.contains("out of (source, start) order"), "{err}");
}

#[test]
fn a_step_on_a_missing_slice() {
    let err = broken(|t| t.steps[0].slice = t.slices.len() as u32 + 1);
    assert!(err.contains("points at missing slice"), "{err}");
}

#[test]
fn a_step_that_does_not_match_its_slice() {
    let err = broken(|t| t.steps[0].dur += 1);
    assert!(
        err.contains("does not match its slice") || err.contains("does not start"),
        "{err}"
    );
}

#[test]
fn instants_out_of_order() {
    let err = broken(|t| t.instants.ts.swap(0, 1));
    assert!(err.contains("instants") && err.contains("order"), "{err}");
}

#[test]
fn an_instant_on_an_unknown_track() {
    let err = broken(|t| t.instants.track[0] = t.tracks.len() as u32 + 1);
    assert!(err.contains("unknown track"), "{err}");
}

#[test]
fn counter_columns_of_unequal_length() {
    let err = broken(|t| {
        t.counters.value.pop();
    });
    assert!(err.contains("counter columns differ"), "{err}");
}

#[test]
fn a_counter_sample_on_a_slice_track() {
    let err = broken(|t| {
        let slice_track = t
            .tracks
            .iter()
            .position(|tr| tr.kind != TrackKind::Counter)
            .unwrap();
        t.counters.track[0] = slice_track as u32;
    });
    assert!(
        err.contains("non-counter track") || err.contains("order"),
        "{err}"
    );
}

#[test]
fn counter_samples_out_of_order() {
    let err = broken(|t| {
        let i = (1..t.counters.len())
            .find(|&i| {
                t.counters.track[i] == t.counters.track[i - 1]
                    && t.counters.ts[i] > t.counters.ts[i - 1]
            })
            .unwrap();
        t.counters.ts.swap(i - 1, i);
    });
    assert!(
        err.contains("counter samples") && err.contains("order"),
        "{err}"
    );
}
