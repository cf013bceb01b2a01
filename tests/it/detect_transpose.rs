//! The `non_logical_transpose` detector against the corpus truth files
//! (`../shared/corpus/torch-cpu/*.truth.json`, `observed_summary_per_step[].nonlogical_with_copy`
//! and `observed_detail_per_step[].transposes`) and the samples' truth
//! (`scenario.expected_findings_per_step`, `observed_per_step[].transposes`): exact counts per
//! step, the copies' durations as `lost_ns`, and nothing on the clean traces.
//!
//! Without the corpus the corpus tests print a note and pass, except under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::BTreeMap;

use serde_json::Value;
use steplens_analysis::Report;

use crate::support;

use crate::support::{read_json, repo, report, torch_cpu_trace};

const KIND: &str = "non_logical_transpose";

/// The report and truth of `../shared/corpus/torch-cpu/<name>`, or `None` outside CI when the
/// corpus is absent.
fn corpus(name: &str) -> Option<(Report, Value)> {
    let path = torch_cpu_trace(name)?;
    Some((
        report(&path),
        read_json(&path.with_file_name(format!("{name}.truth.json"))),
    ))
}

/// `step -> findings of KIND`.
fn per_step(report: &Report) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for f in report.findings.iter().filter(|f| f.kind == KIND) {
        *out.entry(f.step.clone().unwrap_or_default()).or_insert(0) += 1;
    }
    out
}

/// `step -> sorted lost_ns` of the findings of KIND.
fn lost_per_step(report: &Report) -> BTreeMap<String, Vec<i64>> {
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for f in report.findings.iter().filter(|f| f.kind == KIND) {
        out.entry(f.step.clone().unwrap_or_default())
            .or_default()
            .push(f.lost_ns);
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

#[test]
fn corpus_transposes_five_per_step_with_the_copies_time() {
    let Some((r, truth)) = corpus("transposes") else {
        return;
    };
    // Counts from the truth's summary.
    let want: BTreeMap<String, usize> = truth["observed_summary_per_step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step"].as_str().unwrap().to_owned(),
                s["nonlogical_with_copy"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    assert_eq!(want.values().copied().collect::<Vec<_>>(), [5, 5, 5]);
    assert_eq!(per_step(&r), want);
    // lost_ns = the copy's duration of each flagged transpose (truth: copy_dur_us).
    let mut want_lost: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for step in truth["observed_detail_per_step"].as_array().unwrap() {
        let name = step["step"].as_str().unwrap().to_owned();
        for tr in step["transposes"].as_array().unwrap() {
            if tr["moves_last_dim"].as_bool() == Some(true) && !tr["followed_by_copy"].is_null() {
                let us = tr["copy_dur_us"].as_f64().unwrap();
                want_lost
                    .entry(name.clone())
                    .or_default()
                    .push((us * 1000.0).round() as i64);
            }
        }
    }
    for v in want_lost.values_mut() {
        v.sort_unstable();
    }
    assert_eq!(lost_per_step(&r), want_lost);
    // Per step: 4 forward call sites and the backward of the permute at line 37.
    for step in ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"] {
        let mut sites: Vec<(String, bool)> = r
            .findings
            .iter()
            .filter(|f| f.kind == KIND && f.step.as_deref() == Some(step))
            .map(|f| {
                assert_eq!(f.count, 1, "{}", f.title);
                assert!(
                    f.ops.contains(&"aten::contiguous".to_owned()),
                    "{:?}",
                    f.ops
                );
                assert_eq!(f.evidence.len(), 2, "{}", f.title);
                (
                    f.call_site.clone().unwrap_or_default(),
                    f.title.contains("in backward (PermuteBackward0)"),
                )
            })
            .collect();
        sites.sort();
        assert_eq!(
            sites,
            [
                ("transposes.py:35".to_owned(), false),
                ("transposes.py:37".to_owned(), false),
                ("transposes.py:37".to_owned(), true),
                ("transposes.py:63".to_owned(), false),
                ("transposes.py:65".to_owned(), false),
            ],
            "{step}"
        );
    }
    let t1 = r
        .findings
        .iter()
        .find(|f| f.kind == KIND && f.call_site.as_deref() == Some("transposes.py:35"))
        .unwrap();
    assert!(
        t1.title
            .starts_with("non-logical permute [0, 2, 3, 1] of (16, 16, 32, 32) float"),
        "{}",
        t1.title
    );
    // 16·16·32·32 floats = 1 MiB.
    assert!(t1.title.contains("1.0 MiB gathered"), "{}", t1.title);
    assert!(t1.recommendation.contains("channels-last"));
}

#[test]
fn corpus_traces_without_non_logical_copies_have_none() {
    let scenarios = [
        "clean_baseline",
        "sync_points",
        "dataloader_stall",
        "recompile_shapes_static",
    ];
    support::assert_corpus_has_none(KIND, &scenarios, |name, truth| {
        for s in truth["observed_summary_per_step"].as_array().unwrap() {
            assert_eq!(s["nonlogical_with_copy"].as_u64(), Some(0), "{name} truth");
        }
    });
}

#[test]
fn sample_train_transpose_flags_the_nchw_to_nhwc_copy_only() {
    let dir = repo().join("samples/torch-cpu");
    let r = report(&dir.join("train_transpose.json.gz"));
    let truth = read_json(&dir.join("train_transpose.truth.json"));
    let scenario = &truth["scenario"];
    let per = scenario["expected_findings_per_step"][KIND]
        .as_u64()
        .unwrap() as usize;
    assert_eq!(per, 1);
    let mut want = BTreeMap::new();
    let mut want_lost: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for obs in scenario["observed_per_step"].as_array().unwrap() {
        let step = obs["step"].as_str().unwrap().to_owned();
        let flagged = obs["transposes"]["nonlogical_with_copy_ops"]
            .as_array()
            .unwrap();
        assert_eq!(flagged.len(), per, "truth of {step}");
        // The two logical transposes + copies (head split / merge) are traps.
        assert_eq!(obs["transposes"]["logical_with_copy"].as_u64(), Some(2));
        want.insert(step.clone(), flagged.len());
        want_lost.insert(
            step,
            flagged
                .iter()
                .map(|f| f["copy_dur_ns"].as_i64().unwrap())
                .collect(),
        );
    }
    assert_eq!(per_step(&r), want);
    assert_eq!(lost_per_step(&r), want_lost);
    for f in r.findings.iter().filter(|f| f.kind == KIND) {
        assert!(
            f.title
                .starts_with("non-logical permute [0, 2, 3, 1] of (8, 16, 32, 32) float"),
            "{}",
            f.title
        );
        // 8·16·32·32 floats.
        assert!(f.title.contains("512.0 KiB gathered"), "{}", f.title);
        assert_eq!(f.ops, ["aten::contiguous", "aten::permute"]);
        // No Python frames in the sample: no call site.
        assert_eq!(f.call_site, None);
    }
}

#[test]
fn other_samples_have_none() {
    // train_clean: the (8, 32, 256) -> (8, 256, 32) token transpose is made contiguous inside
    // aten::native_layer_norm, an unrelated op: not a user copy.
    support::assert_no_other_sample_has(KIND, "train_transpose.json.gz");
}
