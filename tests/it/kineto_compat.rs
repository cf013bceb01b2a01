//! End to end over `samples/kineto-compat/`: one GPU training run written in every
//! historical Kineto JSON shape since PyTorch 1.8, each compared with the truth its generator
//! computed from the planted model (`samples/kineto-compat/README.md` states the rules).
//!
//! Per trace: the device is CUDA; the step table has the truth's steps with exact start and
//! duration; per step, the window-clipped device busy time is exact and `device_launched_ns`
//! (the union of the device work the step launched, wherever it ran) is within 0.5 %; the
//! findings are exactly the planted ones (kind, step, count), their lost time within the
//! truth's tolerance (3 % for the data-loader wait, as allowed for that figure), and the user's call
//! site wherever the shape carries a Python stack. So every schema gives the same answer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support;

fn dir() -> PathBuf {
    support::repo().join("samples/kineto-compat")
}

fn report(trace: &Path) -> Value {
    let path = trace.to_str().expect("UTF-8 path");
    let out = support::steplens(&["report", "-f", "json", path]);
    assert!(
        out.status.success(),
        "steplens report {path}: {}",
        support::stderr(&out)
    );
    serde_json::from_str(&support::stdout(&out)).expect("report JSON")
}

fn int(v: &Value, key: &str) -> i64 {
    v[key]
        .as_i64()
        .unwrap_or_else(|| panic!("`{key}` is not an integer in {v}"))
}

fn compare(truth_path: &Path) -> Vec<String> {
    let truth = support::read_json(truth_path);
    let name = truth["trace"].as_str().expect("trace");
    let r = report(&dir().join(name));
    let mut bad = Vec::new();
    let mut fail = |msg: String| bad.push(format!("{name}: {msg}"));
    if r["device"]["kind"] != "cuda" {
        fail(format!("device {} (want cuda)", r["device"]["kind"]));
    }
    let want = truth["steps"].as_array().expect("truth steps");
    let got = r["steps"].as_array().expect("report steps");
    if want.len() != got.len() {
        fail(format!("{} steps (want {})", got.len(), want.len()));
    }
    for (w, g) in want.iter().zip(got) {
        let step = w["name"].as_str().expect("name");
        if g["name"] != w["name"] {
            fail(format!("step {} (want {step})", g["name"]));
        }
        for (gk, wk) in [
            ("start_ns", "start_ns"),
            ("dur_ns", "dur_ns"),
            ("host_start_ns", "host_start_ns"),
            ("host_dur_ns", "host_dur_ns"),
            ("device_busy_ns", "device_busy_in_window_ns"),
        ] {
            if g[gk].as_i64() != w[wk].as_i64() {
                fail(format!("{step}: {gk} {} (want {})", g[gk], w[wk]));
            }
        }
        let launched = int(w, "device_launched_ns");
        match g["device_launched_ns"].as_i64() {
            Some(v) if (v - launched).abs() as f64 <= launched as f64 * 0.005 => {}
            other => fail(format!(
                "{step}: device_launched_ns {other:?} (want {launched} ± 0.5 %)"
            )),
        }
    }
    let tol = &truth["tolerance"];
    let rel = tol["lost_ns_rel"].as_f64().expect("lost_ns_rel");
    let abs = tol["lost_ns_abs"].as_i64().expect("lost_ns_abs");
    let findings = r["findings"].as_array().expect("findings");
    let expected = truth["expected_findings"].as_array().expect("expected");
    for e in expected {
        let (kind, step) = (e["kind"].as_str().unwrap(), e["step"].as_str().unwrap());
        let mine: Vec<&Value> = findings
            .iter()
            .filter(|f| f["kind"] == kind && f["step"] == step)
            .collect();
        let count: i64 = mine.iter().map(|f| int(f, "count")).sum();
        let lost: i64 = mine.iter().map(|f| int(f, "lost_ns")).sum();
        if count != int(e, "count") {
            fail(format!(
                "{step}: {kind} count {count} (want {})",
                e["count"]
            ));
            continue;
        }
        let want_lost = int(e, "lost_ns");
        let rel = if kind == "dataloader_stall" {
            0.03
        } else {
            rel
        };
        if (lost - want_lost).abs() > abs.max((want_lost as f64 * rel) as i64) {
            fail(format!("{step}: {kind} lost {lost} (want {want_lost})"));
        }
        if let Some(site) = e["call_site"].as_str()
            && !mine.iter().any(|f| f["call_site"] == site)
        {
            let sites: Vec<&Value> = mine.iter().map(|f| &f["call_site"]).collect();
            fail(format!("{step}: {kind} call sites {sites:?} (want {site})"));
        }
    }
    for f in findings {
        let planted = expected
            .iter()
            .any(|e| e["kind"] == f["kind"] && e["step"] == f["step"]);
        if !planted {
            fail(format!("unplanted finding: {}", f["title"]));
        }
    }
    bad
}

#[test]
fn every_historical_schema_gives_the_planted_answer() {
    let files = support::truth_files(&dir());
    assert!(files.len() >= 8, "kineto-compat samples missing: {files:?}");
    let bad: Vec<String> = files.iter().flat_map(|p| compare(p)).collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
