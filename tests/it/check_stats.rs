//! The check's A/A and A/B suites on real torch CPU runs (`samples/ci-aa/`, made by
//! its `generate.py` on this shared 2-core machine) and on the bundled samples.
//!
//! A/A, identical work — never a failure: every ordered pair of the 4 ranks of one DDP run (12),
//! two scripts each run twice (both directions), and every torch-cpu sample's saved report
//! against itself with ±3 % deterministic per-step jitter.
//! A/B, planted regressions — always a failure naming the cause: +25 % work per step (a real
//! run), a new `loss.item()` per step (a real run), +10 % work per step (a real pair recorded
//! back to back), and the steps of each 20-step single-process
//! run made 25 % longer (with the same jitter, against the jittered original). On the DDP ranks,
//! whose steps vary by ±50 %, the same +25 % must be inconclusive or a failure, never a pass.
//! Made 10 % longer (the smallest regression the issue asks for), every run with steady steps
//! must fail (the default run-to-run noise floor of one baseline run is 8 %); runs whose steps
//! scatter by ~10 % may be inconclusive, never a pass.
//!
//! It prints the false-alarm and detection rates that docs/check.md and bench/README.md quote.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support;

fn aa(rel: &str) -> PathBuf {
    support::repo().join("samples/ci-aa").join(rel)
}

/// `steplens check CURRENT --baseline BASELINE --format json`, parsed (exit 0 or 1).
fn check(current: &Path, baseline: &Path) -> Value {
    let out = support::steplens(&[
        "check",
        current.to_str().unwrap(),
        "--baseline",
        baseline.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        support::stderr(&out)
    );
    serde_json::from_str(&support::stdout(&out)).unwrap()
}

fn failed_rules(outcome: &Value) -> Vec<String> {
    outcome["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "fail")
        .map(|r| format!("{}: {}", r["rule"], r["message"]))
        .collect()
}

/// A saved report of `trace`, with every step's duration scaled by `factor` and jittered by a
/// deterministic ±3 %.
fn saved_variant(trace: &Path, factor: f64, dir: &Path, name: &str) -> PathBuf {
    let out = support::steplens(&["report", "-f", "json", trace.to_str().unwrap()]);
    assert!(out.status.success());
    let mut report: Value = serde_json::from_str(&support::stdout(&out)).unwrap();
    for (i, step) in report["steps"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        let jitter = [1.0, 1.03, 0.97, 1.02, 0.98, 1.01, 0.99][i % 7];
        let dur = step["dur_ns"].as_i64().unwrap() as f64 * factor * jitter;
        step["dur_ns"] = Value::from(dur as i64);
    }
    let path = dir.join(name);
    write_saved(&path, report);
    path
}

/// Writes a saved report with its schema tag first, where `check` looks for it.
fn write_saved(path: &Path, mut report: Value) {
    let schema = report
        .as_object_mut()
        .unwrap()
        .remove("schema")
        .expect("a schema tag");
    let rest = serde_json::to_string(&report).unwrap();
    let text = format!("{{\"schema\":{schema},{}", &rest[1..]);
    std::fs::write(path, text).unwrap();
}

/// The `step_time` rule's status in a check outcome.
fn step_time_status(outcome: &Value) -> String {
    outcome["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == "step_time")
        .unwrap()["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The median absolute deviation of a saved report's measured steps (the first is warm-up),
/// relative to their median.
fn relative_mad(saved: &Path) -> f64 {
    let report: Value = support::read_json(saved);
    let mut steps: Vec<f64> = report["steps"].as_array().unwrap()[1..]
        .iter()
        .map(|s| s["dur_ns"].as_f64().unwrap())
        .collect();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        (v[(n - 1) / 2] + v[n / 2]) / 2.0
    };
    let m = median(&mut steps);
    let mut deviations: Vec<f64> = steps.iter().map(|d| (d - m).abs()).collect();
    median(&mut deviations) / m
}

fn torch_cpu_samples() -> Vec<PathBuf> {
    let dir = support::repo().join("samples/torch-cpu");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().ends_with(".truth.json"))
        .collect();
    out.sort();
    out
}

#[test]
fn identical_work_never_fails_and_planted_regressions_always_do() {
    let dir = tempfile::tempdir().unwrap();
    let mut aa_pairs = 0usize;
    let mut false_alarms = Vec::new();
    let mut inconclusive = 0;
    let mut aa_check = |current: &Path, baseline: &Path| {
        let outcome = check(current, baseline);
        aa_pairs += 1;
        inconclusive += outcome["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "inconclusive")
            .count();
        let failed = failed_rules(&outcome);
        if !failed.is_empty() {
            false_alarms.push(format!(
                "{} vs {}: {failed:?}",
                current.display(),
                baseline.display()
            ));
        }
    };
    for a in 0..4 {
        for b in 0..4 {
            if a != b {
                aa_check(
                    &aa(&format!("ddp_rank{a}.json.gz")),
                    &aa(&format!("ddp_rank{b}.json.gz")),
                );
            }
        }
    }
    aa_check(&aa("same_script_a.json.gz"), &aa("same_script_b.json.gz"));
    aa_check(&aa("same_script_b.json.gz"), &aa("same_script_a.json.gz"));
    aa_check(&aa("steady_a.json.gz"), &aa("steady_b.json.gz"));
    aa_check(&aa("steady_b.json.gz"), &aa("steady_a.json.gz"));
    aa_check(&aa("steady_ref.json.gz"), &aa("steady_a.json.gz"));
    for (k, trace) in torch_cpu_samples().iter().enumerate() {
        let base = saved_variant(trace, 1.0, dir.path(), &format!("aa{k}.base.json"));
        let jittered = saved_variant(trace, 1.0, dir.path(), &format!("aa{k}.cur.json"));
        // The same jitter on both sides would be no test: shift the current one by a step.
        let mut cur: Value = support::read_json(&jittered);
        let durations: Vec<Value> = cur["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["dur_ns"].clone())
            .collect();
        for (i, step) in cur["steps"].as_array_mut().unwrap().iter_mut().enumerate() {
            step["dur_ns"] = durations[(i + 1) % durations.len()].clone();
        }
        write_saved(&jittered, cur);
        aa_check(&jittered, &base);
    }

    let mut ab_cases = 0usize;
    let mut missed = Vec::new();
    let mut ab_check = |current: &Path, baseline: &Path, expect_rule: &str| {
        ab_cases += 1;
        let failed = failed_rules(&check(current, baseline));
        if !failed
            .iter()
            .any(|f| f.starts_with(&format!("\"{expect_rule}")))
        {
            missed.push(format!(
                "{}: {expect_rule} not failed ({failed:?})",
                current.display()
            ));
        }
    };
    ab_check(
        &aa("slow25.json.gz"),
        &aa("same_script_a.json.gz"),
        "step_time",
    );
    ab_check(
        &aa("newsync.json.gz"),
        &aa("same_script_a.json.gz"),
        "new_findings.sync_point",
    );
    // The smallest regression the check must catch, as a real pair recorded back to back: one
    // extra matmul per step, 10.4 % of the step's multiply-adds (the generator's own count).
    ab_check(
        &aa("steady_slow10.json.gz"),
        &aa("steady_ref.json.gz"),
        "step_time",
    );
    // Planted slowdowns on the 20-step single-process runs. The DDP ranks' steps vary by ±50 %
    // (4 ranks on 2 shared cores): there a planted +25 % must not pass silently — it is
    // inconclusive ("profile more steps") or a failure.
    // The torch-cpu samples have 2 measured steps each: too few for any verdict but
    // inconclusive, so they serve the A/A set only.
    let runs = [
        "same_script_a",
        "same_script_b",
        "newsync",
        "steady_a",
        "steady_b",
    ]
    .iter()
    .map(|name| aa(&format!("{name}.json.gz")));
    let noisy = ["ddp_rank0", "ddp_rank1", "ddp_rank2", "ddp_rank3"];
    let mut noisy_seen = Vec::new();
    for (k, name) in noisy.iter().enumerate() {
        let trace = aa(&format!("{name}.json.gz"));
        let base = saved_variant(&trace, 1.0, dir.path(), &format!("ddp{k}.base.json"));
        let cur = saved_variant(&trace, 1.25, dir.path(), &format!("ddp{k}.125.json"));
        let step = step_time_status(&check(&cur, &base));
        assert!(
            step == "fail" || step == "inconclusive",
            "{name} +25 %: {step}"
        );
        noisy_seen.push(format!("{name}: {step}"));
    }
    // +10 %, the smallest regression the gate must catch: a failure on every run whose steps
    // are steady (median absolute deviation under 5 % of the median); on a run whose steps
    // scatter more, 20 steps cannot tell 10 % at 99 % — there it is a failure or inconclusive
    // ("profile more steps"), never a pass.
    let (mut planted_10, mut detected_10) = (0, 0);
    let mut scattered_10 = Vec::new();
    let mut missed_10 = Vec::new();
    for (k, trace) in runs.enumerate() {
        let base = saved_variant(&trace, 1.0, dir.path(), &format!("ab{k}.base.json"));
        let cur = saved_variant(&trace, 1.25, dir.path(), &format!("ab{k}.125.json"));
        ab_check(&cur, &base, "step_time");
        let cur = saved_variant(&trace, 1.10, dir.path(), &format!("ab{k}.110.json"));
        let status = step_time_status(&check(&cur, &base));
        let name = trace.file_name().unwrap().to_string_lossy().into_owned();
        if relative_mad(&base) < 0.05 {
            planted_10 += 1;
            if status == "fail" {
                detected_10 += 1;
            } else {
                missed_10.push(format!("{name} +10 %: step_time {status}"));
            }
        } else {
            assert!(
                status == "fail" || status == "inconclusive",
                "{name} +10 %: {status}"
            );
            scattered_10.push(format!("{name}: {status}"));
        }
    }
    eprintln!(
        "A/A: {} of {aa_pairs} pairs failed (false-alarm rate {:.1} %), {inconclusive} rules inconclusive; \
         A/B: {} of {ab_cases} regressions detected ({:.1} %); planted +10 % on steady runs: {detected_10} of {planted_10}, on scattered runs: {scattered_10:?}; +25 % on the noisy DDP ranks: {noisy_seen:?}",
        false_alarms.len(),
        false_alarms.len() as f64 * 100.0 / aa_pairs as f64,
        ab_cases - missed.len(),
        (ab_cases - missed.len()) as f64 * 100.0 / ab_cases as f64
    );
    assert!(false_alarms.is_empty(), "{}", false_alarms.join("\n"));
    assert!(missed.is_empty(), "{}", missed.join("\n"));
    assert!(missed_10.is_empty(), "{}", missed_10.join("\n"));
    assert!(planted_10 >= 2, "only {planted_10} steady runs");
}

/// `steplens baseline update` keeps the newest `--keep` runs in one file, and `check --baseline
/// FILE` pools them: a run of the same work passes, a new sync fails.
#[test]
fn a_baseline_set_keeps_the_newest_runs_and_checks_against_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("baseline.json");
    let set_arg = set.to_str().unwrap();
    for run in ["newsync", "same_script_a", "same_script_b"] {
        let path = aa(&format!("{run}.json.gz"));
        let out = support::steplens(&[
            "baseline",
            "update",
            set_arg,
            path.to_str().unwrap(),
            "--keep",
            "2",
        ]);
        assert!(out.status.success(), "{}", support::stderr(&out));
    }
    let kept = support::read_json(&set);
    assert_eq!(kept["schema"], "steplens.baselines/1");
    assert_eq!(
        kept["runs"].as_array().unwrap().len(),
        2,
        "the oldest run was dropped"
    );
    let same = check(&aa("same_script_a.json.gz"), &set);
    assert!(failed_rules(&same).is_empty(), "{:?}", failed_rules(&same));
    assert_eq!(
        same["baseline"]["run_step_p50_ns"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let sync = check(&aa("newsync.json.gz"), &set);
    assert!(
        failed_rules(&sync)
            .iter()
            .any(|f| f.starts_with("\"new_findings.sync_point")),
        "{:?}",
        failed_rules(&sync)
    );
    // A file that is not a set is never overwritten.
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "keep me").unwrap();
    let out = support::steplens(&[
        "baseline",
        "update",
        other.to_str().unwrap(),
        aa("newsync.json.gz").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "keep me");
}

/// The per-step op samples the op rules compare: the same ops in every step, and summed over
/// the steps no more than the op's self time in the op table (ops outside any step count there
/// only).
#[test]
fn steps_carry_per_step_self_time_of_the_top_ops() {
    let out = support::steplens(&[
        "report",
        "-f",
        "json",
        aa("steady_a.json.gz").to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let report: Value = serde_json::from_str(&support::stdout(&out)).unwrap();
    let steps = report["steps"].as_array().unwrap();
    let keys: Vec<&String> = steps[0]["op_self_ns"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 20);
    assert!(keys.iter().any(|k| k.as_str() == "aten::mm"), "{keys:?}");
    for step in steps {
        let ops = step["op_self_ns"].as_object().unwrap();
        assert_eq!(ops.keys().collect::<Vec<_>>(), keys);
    }
    for key in keys {
        let in_steps: i64 = steps
            .iter()
            .map(|s| s["op_self_ns"][key.as_str()].as_i64().unwrap())
            .sum();
        let table: i64 = report["ops"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|op| op["name"] == key.as_str() && op["track_kind"] == "host")
            .map(|op| op["self_ns"].as_i64().unwrap())
            .sum();
        assert!(
            in_steps > 0 && in_steps <= table,
            "{key}: {in_steps} vs {table}"
        );
    }
}
