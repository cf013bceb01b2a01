//! End to end over the independently generated Gaudi runs in `samples/gaudi-cases/`:
//! `steplens report -f json` on every trace there, compared with the truth the generator computed
//! from its own planted model (`samples/gaudi-cases/README.md` states the rules).
//!
//! Per trace: the device is an HPU; the step table has the truth's steps, with start and duration
//! exact; per step and finding kind, the findings' Σ `count` equals the truth's count and Σ
//! `lost_ns` is within the truth's tolerance; no finding of a kind the truth does not expect in
//! that step, and none outside every step; the user's call site where the truth names one; per
//! step Σ `lost_ns` ≤ the step's duration; the clean controls get no finding at all; device
//! transposes count nodes, not engine slices.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support;

fn cases_dir() -> PathBuf {
    support::repo().join("samples/gaudi-cases")
}

/// `steplens report -f json TRACE`, parsed. Warnings on stderr are allowed (the TEF array is
/// left open on purpose); a failed run is not.
fn report(trace: &Path) -> Value {
    let path = trace.to_str().expect("UTF-8 path");
    let out = support::steplens(&["report", "-f", "json", path]);
    assert!(
        out.status.success(),
        "steplens report {path} failed ({:?}): {}",
        out.status.code(),
        support::stderr(&out)
    );
    let text = support::stdout(&out);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: not JSON ({e})"))
}

fn int(v: &Value, key: &str) -> i64 {
    v[key]
        .as_i64()
        .unwrap_or_else(|| panic!("`{key}` is not an integer in {v}"))
}

/// Per kind of the report's findings in step `name`: Σ count, Σ lost_ns and their call sites.
fn findings_in(report: &Value, name: &str) -> BTreeMap<String, (i64, i64, Vec<String>)> {
    let mut out: BTreeMap<String, (i64, i64, Vec<String>)> = BTreeMap::new();
    for f in report["findings"].as_array().expect("findings") {
        if f["step"].as_str() == Some(name) {
            let e = out
                .entry(f["kind"].as_str().expect("kind").to_owned())
                .or_default();
            e.0 += int(f, "count");
            e.1 += int(f, "lost_ns");
            if let Some(site) = f["call_site"].as_str() {
                e.2.push(site.to_owned());
            }
        }
    }
    out
}

/// Compares one trace's report with its truth; returns the mismatches, one line each.
fn compare(truth_path: &Path) -> Vec<String> {
    let truth = support::read_json(truth_path);
    let trace = cases_dir().join(truth["trace"].as_str().expect("trace"));
    let label = trace.file_name().unwrap().to_string_lossy().into_owned();
    let r = report(&trace);
    let mut bad = Vec::new();
    let mut fail = |msg: String| bad.push(format!("{label}: {msg}"));

    if r["device"]["kind"] != "hpu" {
        fail(format!("device kind {} (want hpu)", r["device"]["kind"]));
    }
    let tol = &truth["tolerance"];
    let rel = tol["lost_ns_rel"].as_f64().expect("lost_ns_rel");
    let abs = tol["lost_ns_abs"].as_i64().expect("lost_ns_abs");

    let want_steps = truth["steps"].as_array().expect("truth steps");
    let got_steps = r["steps"].as_array().expect("report steps");
    if want_steps.len() != got_steps.len() {
        fail(format!(
            "{} steps (want {}: {})",
            got_steps.len(),
            want_steps.len(),
            truth["steps_kind"]
        ));
    }
    let profiler_steps = truth["steps_kind"] == "ProfilerStep";
    for (want, got) in want_steps.iter().zip(got_steps) {
        let wname = want["name"].as_str().expect("name");
        let gname = got["name"].as_str().expect("name");
        if profiler_steps && wname != gname {
            fail(format!("step {gname} where {wname} was expected"));
        }
        for key in ["start_ns", "dur_ns"] {
            if int(want, key) != int(got, key) {
                fail(format!(
                    "{wname}: {key} {} (want {})",
                    int(got, key),
                    int(want, key)
                ));
            }
        }
        let got_f = findings_in(&r, gname);
        let want_f = want["findings"].as_object().expect("truth findings");
        for (kind, w) in want_f {
            let Some((count, lost, sites)) = got_f.get(kind) else {
                fail(format!("{wname}: no {kind} finding (want {w})"));
                continue;
            };
            let (count, lost) = (*count, *lost);
            // Where the trace has Python frames, the truth names the user's line.
            if let Some(site) = w["call_site"].as_str()
                && !sites.iter().any(|s| s == site)
            {
                fail(format!(
                    "{wname}: {kind} call sites {sites:?} (want {site})"
                ));
            }
            if count != int(w, "count") {
                fail(format!(
                    "{wname}: {kind} count {count} (want {})",
                    int(w, "count")
                ));
            }
            // A null lost_ns: the file cannot tell the cost (a compile in a HW trace).
            if let Some(want_lost) = w["lost_ns"].as_i64() {
                #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
                let limit = ((want_lost as f64 * rel) as i64).max(abs);
                if (lost - want_lost).abs() > limit {
                    fail(format!(
                        "{wname}: {kind} lost_ns {lost} (want {want_lost} ± {limit})"
                    ));
                }
            }
        }
        for (kind, (count, lost, _)) in &got_f {
            if !want_f.contains_key(kind) {
                fail(format!(
                    "{wname}: unexpected {kind} finding (count {count}, lost_ns {lost})"
                ));
            }
        }
        let lost: i64 = got_f.values().map(|v| v.1).sum();
        if lost > int(got, "dur_ns") {
            fail(format!(
                "{gname}: findings lose {lost} ns in a {} ns step",
                int(got, "dur_ns")
            ));
        }
    }

    let findings = r["findings"].as_array().expect("findings");
    if truth["expect_no_findings"] == true && !findings.is_empty() {
        let titles: Vec<&str> = findings
            .iter()
            .map(|f| f["title"].as_str().unwrap_or(""))
            .collect();
        fail(format!("clean control has findings: {titles:?}"));
    }
    for f in findings.iter().filter(|f| f["step"].is_null()) {
        fail(format!(
            "finding outside every step: {} ({})",
            f["kind"], f["title"]
        ));
    }

    // Device transposes are counted as nodes in the op table too.
    if let Some(nodes) = truth["device_transpose_nodes"].as_i64() {
        let counted: i64 = r["ops"]
            .as_array()
            .expect("ops")
            .iter()
            .filter(|o| o["track_kind"] == "device")
            .filter(|o| o["name"].as_str().is_some_and(|n| n.contains("transpose")))
            .map(|o| int(o, "count"))
            .sum();
        if counted != nodes {
            fail(format!(
                "device transpose ops count {counted} (want {nodes} nodes, not {} engine slices)",
                truth["device_transpose_slices"]
            ));
        }
    }
    bad
}

#[test]
fn every_case_has_a_trace_and_a_truth() {
    let truths = support::truth_files(&cases_dir());
    // 5 torch scenarios × (bridge, plugin), 2 of them also with the plugin's own Synapse lane,
    // + the Synapse-only one × (TEF, HW CSV), + the TEF with two recompiling iterations.
    assert_eq!(truths.len(), 15, "{truths:?}");
    for t in &truths {
        let truth = support::read_json(t);
        let trace = cases_dir().join(truth["trace"].as_str().expect("trace"));
        assert!(trace.exists(), "{}: no {}", t.display(), trace.display());
        assert!(
            !truth["steps"].as_array().expect("steps").is_empty(),
            "{}",
            t.display()
        );
    }
}

#[test]
fn gaudi_cases_match_their_truth() {
    let mut bad = Vec::new();
    for t in support::truth_files(&cases_dir()) {
        bad.extend(compare(&t));
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
