//! Perfetto export and import: `ingest(export(T))` reproduces T (tracks, slices, nesting,
//! names, categories, args, instants, counters, flows, steps) on every sample and every corpus
//! trace; the analysis overlay is written; damaged protobuf loads up to the damage.
//!
//! The corpus part fails under `CI=true` when `../shared/corpus` is missing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::support;

use std::path::{Path, PathBuf};

use crate::support::{corpus_path, repo, sample_traces};
use steplens_analysis::export::perfetto::write::write_timeline;
use steplens_ingest::model::SliceId;
use steplens_ingest::{LoadOptions, Timeline, load};

fn export(t: &Timeline) -> Vec<u8> {
    let mut out = Vec::new();
    write_timeline(t, None, &mut out).expect("export");
    out
}

fn reload(bytes: &[u8], dir: &Path) -> Timeline {
    let path = dir.join("roundtrip.pftrace");
    std::fs::write(&path, bytes).unwrap();
    load(&path, &LoadOptions::default(), None).unwrap_or_else(|e| panic!("re-read: {e}"))
}

/// Every difference between two Timelines that the export must preserve.
fn differences(a: &Timeline, b: &Timeline) -> Vec<String> {
    let mut d = Vec::new();
    let mut eq = |what: String, x: String, y: String| {
        if x != y && d.len() < 20 {
            let cut = |s: &str| s.chars().take(300).collect::<String>();
            d.push(format!("{what}: {} != {}", cut(&x), cut(&y)));
        }
    };
    eq(
        "tracks".into(),
        a.tracks.len().to_string(),
        b.tracks.len().to_string(),
    );
    for (i, (x, y)) in a.tracks.iter().zip(&b.tracks).enumerate() {
        let key = |t: &steplens_ingest::model::Track, tl: &Timeline| {
            let lane = |l: steplens_ingest::model::LaneId| match l {
                steplens_ingest::model::LaneId::Int(v) => v.to_string(),
                steplens_ingest::model::LaneId::Str(s) => format!("{:?}", tl.strings.get(s)),
            };
            format!(
                "{:?} {:?} {:?} {:?} {} {} {:?} {}",
                t.kind,
                t.name,
                t.process_name,
                t.sort_key,
                lane(t.pid),
                lane(t.tid),
                t.slices,
                t.max_depth
            )
        };
        eq(format!("track {i}"), key(x, a), key(y, b));
    }
    eq(
        "slices".into(),
        a.slices.len().to_string(),
        b.slices.len().to_string(),
    );
    for i in 0..a.slices.len().min(b.slices.len()) {
        let key = |t: &Timeline| {
            let s = &t.slices;
            format!(
                "{} {} {} {:?} {:?} {} {}",
                s.start[i],
                s.dur[i],
                s.track[i],
                t.slice_name(i as SliceId),
                t.categories.name(s.cat[i]),
                s.depth[i],
                s.parent[i]
            )
        };
        eq(format!("slice {i}"), key(a), key(b));
        // An empty args object has no annotation to carry it: it reads back as no args.
        let args = |t: &Timeline| format!("{:?}", t.args(i as SliceId).filter(|m| !m.is_empty()));
        eq(format!("args of slice {i}"), args(a), args(b));
    }
    eq(
        "instants".into(),
        a.instants.len().to_string(),
        b.instants.len().to_string(),
    );
    for i in 0..a.instants.len().min(b.instants.len()) {
        let key = |t: &Timeline| {
            let s = &t.instants;
            format!(
                "{} {} {:?} {:?}",
                s.ts[i],
                s.track[i],
                t.strings.get(s.name[i]),
                t.categories.name(s.cat[i])
            )
        };
        eq(format!("instant {i}"), key(a), key(b));
    }
    let counters = |t: &Timeline| {
        let c = &t.counters;
        (0..c.len())
            .map(|i| format!("{} {} {}", c.track[i], c.ts[i], c.value[i]))
            .collect::<Vec<_>>()
    };
    eq(
        "counters".into(),
        format!("{:?}", counters(a)),
        format!("{:?}", counters(b)),
    );
    let flows = |t: &Timeline| {
        t.flows
            .iter()
            .map(|f| format!("{}->{} {}", f.from, f.to, t.categories.name(f.cat)))
            .collect::<Vec<_>>()
    };
    eq(
        "flows".into(),
        format!("{:?}", flows(a)),
        format!("{:?}", flows(b)),
    );
    let steps = |t: &Timeline| {
        t.steps
            .iter()
            .map(|s| format!("{} {} {} {}", s.name, s.start, s.dur, s.slice))
            .collect::<Vec<_>>()
    };
    eq(
        "steps".into(),
        format!("{:?}", steps(a)),
        format!("{:?}", steps(b)),
    );
    eq(
        "device".into(),
        format!("{:?}", a.device),
        format!("{:?}", b.device),
    );
    d
}

fn round_trip(path: &Path) -> Result<(), String> {
    let t = load(path, &LoadOptions::default(), None).map_err(|e| e.to_string())?;
    let bytes = export(&t);
    let dir = tempfile::tempdir().unwrap();
    let back = reload(&bytes, dir.path());
    assert_eq!(back.sources[0].format, "perfetto-proto");
    let diffs = differences(&t, &back);
    if diffs.is_empty() {
        eprintln!(
            "{}: {} slices, {} flows, {} bytes of pftrace: round trip exact",
            path.display(),
            t.slices.len(),
            t.flows.len(),
            bytes.len()
        );
        Ok(())
    } else {
        Err(format!("{}:\n  {}", path.display(), diffs.join("\n  ")))
    }
}

fn sample_inputs() -> Vec<PathBuf> {
    let mut paths = sample_traces();
    for extra in [
        "habana/debug_hw_prof_accel0_001.csv",
        "habana/debug_hw_prof_accel0_001_analyzed_nodes.csv",
        "gaudi/train_hpu.hw.csv",
    ] {
        paths.push(repo().join("samples").join(extra));
    }
    paths
}

#[test]
fn every_sample_round_trips_exactly() {
    let failures: Vec<String> = sample_inputs()
        .iter()
        .filter_map(|p| round_trip(p).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_corpus_trace_round_trips_exactly() {
    let Some(corpus) = corpus_path("") else {
        return;
    };
    // The corpus traces are the entries of the conformance truth file.
    let counts = support::read_json(&repo().join("samples/gen/corpus_counts.json"));
    let paths: Vec<PathBuf> = counts
        .as_object()
        .expect("corpus_counts.json is an object")
        .keys()
        .map(|rel| corpus.join(rel))
        .collect();
    assert_eq!(paths.len(), 20, "corpus traces");
    let failures: Vec<String> = paths.iter().filter_map(|p| round_trip(p).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The analysis overlay: a `Steps` track with one slice per step, a track per finding kind
/// with one slice per finding, and flows from findings to their evidence slices.
#[test]
fn analysis_overlay_is_written() {
    let path = repo().join("samples/torch-cpu/train_sync.json.gz");
    let t = load(&path, &LoadOptions::default(), None).unwrap();
    let report = steplens_analysis::build_report(&t);
    let mut bytes = Vec::new();
    let stats =
        steplens_analysis::export::perfetto::write_perfetto(&t, &report, &mut bytes).unwrap();
    assert_eq!(stats.bytes, bytes.len() as u64);
    assert_eq!(stats.steps, report.steps.len() as u64);
    assert_eq!(stats.findings, report.findings.len() as u64);
    assert!(!report.findings.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let back = reload(&bytes, dir.path());
    let count = |name: &str| {
        back.tracks
            .iter()
            .filter(|tr| tr.name == name)
            .map(|tr| tr.slices.len())
            .sum::<usize>()
    };
    assert_eq!(count("Steps"), report.steps.len());
    for kind in report.summary.findings_by_kind.keys() {
        assert_eq!(
            count(&format!("finding: {kind}")) as u64,
            report.summary.findings_by_kind[kind],
            "{kind}"
        );
    }
    // The finding slices carry their annotations as args.
    let finding_track = back
        .tracks
        .iter()
        .position(|tr| tr.name.starts_with("finding: "))
        .unwrap();
    let first = back.tracks[finding_track].slices.start;
    let args = back.args(first).unwrap();
    assert!(args.contains_key("recommendation") && args.contains_key("lost_ns"));
    // Flows from the finding tracks land on Timeline slices.
    let evidence: usize = report
        .findings
        .iter()
        .map(|f| f.evidence.iter().filter(|e| e.slice().is_some()).count())
        .sum();
    let overlay_flows = back
        .flows
        .iter()
        .filter(|f| {
            back.slice_track(f.from)
                .is_some_and(|tr| tr.name.starts_with("finding: "))
        })
        .count();
    assert!(evidence > 0);
    assert_eq!(overlay_flows, evidence);
    // The Timeline's own tracks come back unchanged after the overlay tracks.
    let own: Vec<&str> = back
        .tracks
        .iter()
        .filter(|tr| tr.name != "Steps" && !tr.name.starts_with("finding: "))
        .map(|tr| tr.name.as_str())
        .collect();
    let want: Vec<&str> = t.tracks.iter().map(|tr| tr.name.as_str()).collect();
    assert_eq!(own, want);
    assert_eq!(
        back.slices.len(),
        t.slices.len() + stats.steps as usize + stats.findings as usize
    );
}

/// A report on our own annotated export equals the report on the original: the overlay's step
/// and finding slices are derived annotations, not ops or steps. Evidence slice ids are left
/// out of the comparison (the overlay's slices take ids of their own), and the critical path's
/// arrows do not come back as flows.
#[test]
fn report_on_the_annotated_export_equals_the_original() {
    fn without_slice_ids(mut v: serde_json::Value) -> serde_json::Value {
        v["sources"] = serde_json::Value::Null;
        for f in v["findings"].as_array_mut().unwrap() {
            for e in f["evidence"].as_array_mut().unwrap() {
                e["slice"] = serde_json::Value::Null;
            }
        }
        // The critical paths name the same events, by ids that moved too.
        let mut paths: Vec<&mut serde_json::Value> = v["steps"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .map(|s| &mut s["critical_path"])
            .collect();
        for path in &mut paths {
            for p in path["slices"].as_array_mut().into_iter().flatten() {
                p["slice"] = serde_json::Value::Null;
            }
        }
        v
    }
    for rel in [
        "samples/torch-cpu/train_sync.json.gz",
        "samples/gaudi/train_hpu.bridge.json.gz",
    ] {
        let t = load(&repo().join(rel), &LoadOptions::default(), None).unwrap();
        let report = steplens_analysis::build_report(&t);
        let mut bytes = Vec::new();
        steplens_analysis::export::perfetto::write_perfetto(&t, &report, &mut bytes).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let back = steplens_analysis::build_report(&reload(&bytes, dir.path()));
        let (a, b) = (
            without_slice_ids(serde_json::to_value(&report).unwrap()),
            without_slice_ids(serde_json::to_value(&back).unwrap()),
        );
        assert!(
            !back
                .ops
                .iter()
                .any(|op| op.name.starts_with("host-device sync"))
        );
        assert_eq!(a, b, "{rel}");
    }
}

/// An args object with a trailing comma (which Perfetto's JSON reader accepts) is exported with
/// every member, nested objects and arrays included.
#[test]
fn args_with_a_trailing_comma_survive_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("trailing.json");
    std::fs::write(
        &json,
        r#"[{"ph":"X","name":"first","pid":1,"tid":1,"ts":0,"dur":10,"args":{"alpha": 1, "nested": {"k": [1, 2,],}, "beta": "two",}}]"#,
    )
    .unwrap();
    let t = load(&json, &LoadOptions::default(), None).unwrap();
    let mut bytes = Vec::new();
    steplens_analysis::export::perfetto::write::write_timeline(&t, None, &mut bytes).unwrap();
    let back = reload(&bytes, dir.path());
    let args = back.args(0).expect("args after the round trip");
    assert_eq!(args["alpha"], 1);
    assert_eq!(args["beta"], "two");
    assert_eq!(args["nested"]["k"], serde_json::json!([1, 2]));
}
