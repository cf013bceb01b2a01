//! The `debug_api_enabled` detector: `samples/torch-cpu/train_anomaly`
//! (`torch.autograd.set_detect_anomaly(True)`) fires once per step with one NaN check per
//! gradient a backward node produced (the truth's `backward_nan_checks`); nothing fires on the
//! other samples nor on the corpus (`expected.debug_apis` is empty in every truth file). A small
//! hand-written trace covers `gradcheck` / `gradgradcheck`, which only Python frames show.
//!
//! Without the corpus the corpus test prints a note and passes, except under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Value, json};
use steplens_analysis::Report;

use crate::support;

use crate::support::{read_json, repo, report};

const KIND: &str = "debug_api_enabled";

#[test]
fn sample_train_anomaly_once_per_step_one_check_per_gradient() {
    let dir = repo().join("samples/torch-cpu");
    let r = report(&dir.join("train_anomaly.json.gz"));
    let truth = read_json(&dir.join("train_anomaly.truth.json"));
    let scenario = &truth["scenario"];
    let per = scenario["expected_findings_per_step"][KIND]
        .as_u64()
        .unwrap() as usize;
    assert_eq!(per, 1);
    let mut want = BTreeMap::new();
    for obs in scenario["observed_per_step"].as_array().unwrap() {
        let checks = &obs["backward_nan_checks"];
        let isnan = checks["aten::isnan"].as_u64().unwrap();
        assert_eq!(checks["aten::_is_any_true"].as_u64(), Some(isnan));
        assert_eq!(checks["aten::item"].as_u64(), Some(isnan));
        want.insert(obs["step"].as_str().unwrap().to_owned(), (per, isnan));
    }
    let mut got: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for f in findings(&r) {
        let e = got.entry(f.step.clone().unwrap()).or_insert((0, 0));
        e.0 += 1;
        e.1 += f.count;
        assert_eq!(f.ops, ["aten::_is_any_true", "aten::isnan", "aten::item"]);
        assert!(
            f.title
                .starts_with("autograd anomaly detection is on: 36 gradient NaN checks"),
            "{}",
            f.title
        );
        assert!(f.lost_ns > 0);
        assert_eq!(f.evidence.len(), 20);
        assert!(f.recommendation.contains("set_detect_anomaly(False)"));
    }
    assert_eq!(got, want);
}

#[test]
fn other_samples_have_none() {
    support::assert_no_other_sample_has(KIND, "train_anomaly.json.gz");
}

#[test]
fn corpus_has_none() {
    let scenarios = [
        "clean_baseline",
        "sync_points",
        "transposes",
        "dataloader_stall",
        "recompile_shapes_static",
    ];
    support::assert_corpus_has_none(KIND, &scenarios, |name, truth| {
        assert_eq!(truth["expected"]["debug_apis"], json!([]), "{name} truth");
    });
}

/// A one-thread trace with Python frames, shaped like torch 2.15's `with_stack=True` output.
fn synthetic(events: &[(&str, &str, i64, i64, Value)]) -> Report {
    let evs: Vec<Value> = events
        .iter()
        .map(|(name, cat, ts, dur, args)| {
            json!({"ph": "X", "cat": cat, "name": name, "pid": 3, "tid": 3,
                   "ts": ts, "dur": dur, "args": args})
        })
        .collect();
    let mut file = tempfile::Builder::new()
        .suffix(".json")
        .tempfile()
        .expect("temp file");
    let doc = json!({"schemaVersion": 1, "traceEvents": evs});
    file.write_all(doc.to_string().as_bytes()).expect("write");
    file.flush().expect("flush");
    report(file.path())
}

#[test]
fn gradcheck_and_gradgradcheck_from_python_frames() {
    let r = synthetic(&[
        ("ProfilerStep#2", "user_annotation", 0, 10_000, json!({})),
        (
            "torch/autograd/gradcheck.py(2045): gradcheck",
            "python_function",
            100,
            1_000,
            json!({"CallFrom": "train.py:21"}),
        ),
        (
            "torch/autograd/gradcheck.py(1385): _as_tuple",
            "python_function",
            110,
            10,
            json!({"CallFrom": "torch/autograd/gradcheck.py:2050"}),
        ),
        ("aten::mul", "cpu_op", 200, 50, json!({})),
        (
            "torch/autograd/gradcheck.py(2182): gradgradcheck",
            "python_function",
            2_000,
            5_000,
            json!({"CallFrom": "train.py:22"}),
        ),
        (
            "torch/autograd/gradcheck.py(2045): gradcheck",
            "python_function",
            2_100,
            4_000,
            json!({"CallFrom": "torch/autograd/gradcheck.py:2300"}),
        ),
        ("aten::mul", "cpu_op", 2_200, 50, json!({})),
        // Not an entry point.
        (
            "torch/autograd/gradcheck.py(635): <genexpr>",
            "python_function",
            8_000,
            10,
            json!({"CallFrom": "torch/autograd/gradcheck.py:635"}),
        ),
    ]);
    let mut got: Vec<(String, Option<String>, u64, i64)> = findings(&r)
        .iter()
        .map(|f| (f.ops.join(","), f.call_site.clone(), f.count, f.lost_ns))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (
                "torch.autograd.gradcheck".to_owned(),
                Some("train.py:21".to_owned()),
                1,
                1_000_000
            ),
            (
                "torch.autograd.gradgradcheck".to_owned(),
                Some("train.py:22".to_owned()),
                1,
                5_000_000
            ),
        ]
    );
    for f in findings(&r) {
        assert_eq!(f.step.as_deref(), Some("ProfilerStep#2"));
        assert!(f.recommendation.contains("test suite"));
    }
}

#[test]
fn an_item_under_a_backward_node_alone_is_not_anomaly_mode() {
    let r = synthetic(&[
        ("ProfilerStep#2", "user_annotation", 0, 10_000, json!({})),
        (
            "autograd::engine::evaluate_function: MulBackward0",
            "cpu_op",
            100,
            100,
            json!({}),
        ),
        ("MulBackward0", "cpu_op", 101, 50, json!({})),
        ("aten::item", "cpu_op", 160, 10, json!({})),
    ]);
    assert!(findings(&r).is_empty(), "{:#?}", r.findings);
}

fn findings(report: &Report) -> Vec<&steplens_analysis::report::Finding> {
    support::findings_of(report, KIND)
}
