//! The advice detectors (`pageable_copy`, `host_created_tensor`,
//! `no_mixed_precision`, `data_parallel`, `unfused_pointwise`, `unfused_optimizer`, `slow_gemm`)
//! on their own samples (`samples/advice/`: real torch CPU runs from `generate_cpu.py`, modelled
//! CUDA runs from `generate_gpu.py` and `generate_gemm.py`; each writes the truth from what it
//! planted): exact per-step counts, call
//! sites and (for the modelled runs) lost time; nothing on the clean twins; and the new kinds
//! nowhere else than where a truth file plants them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::support;

const KINDS: [&str; 7] = [
    "slow_gemm",
    "pageable_copy",
    "host_created_tensor",
    "no_mixed_precision",
    "data_parallel",
    "unfused_pointwise",
    "unfused_optimizer",
];

fn report(path: &Path) -> Value {
    let out = support::steplens(&["report", "-f", "json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", support::stderr(&out));
    serde_json::from_str(&support::stdout(&out)).unwrap()
}

/// (kind, step) → (Σ count, Σ lost, call sites), for the new kinds.
type Figures = BTreeMap<(String, String), (u64, i64, Vec<String>)>;

fn figures(findings: &[Value]) -> Figures {
    let mut out = Figures::new();
    for f in findings {
        let kind = f["kind"].as_str().unwrap();
        if !KINDS.contains(&kind) {
            continue;
        }
        let e = out
            .entry((kind.to_owned(), f["step"].as_str().unwrap().to_owned()))
            .or_default();
        e.0 += f["count"].as_u64().unwrap();
        e.1 += f["lost_ns"].as_i64().unwrap();
        if let Some(site) = f["call_site"].as_str() {
            e.2.push(site.to_owned());
        }
    }
    out
}

#[test]
fn planted_advice_is_found_exactly_and_twins_stay_silent() {
    let dir = support::repo().join("samples/advice");
    let truths = support::truth_files(&dir);
    assert!(truths.len() >= 9, "advice samples missing: {truths:?}");
    let mut bad = Vec::new();
    for truth_path in truths {
        let truth = support::read_json(&truth_path);
        let trace = dir.join(truth["trace"].as_str().unwrap());
        let got = figures(report(&trace)["findings"].as_array().unwrap());
        let expected = truth["expected_findings"].as_array().unwrap();
        let name = trace.file_name().unwrap().to_string_lossy().into_owned();
        for e in expected {
            let key = (
                e["kind"].as_str().unwrap().to_owned(),
                e["step"].as_str().unwrap().to_owned(),
            );
            let Some((count, lost, sites)) = got.get(&key) else {
                bad.push(format!("{name}: missing {key:?}"));
                continue;
            };
            if *count != e["count"].as_u64().unwrap() {
                bad.push(format!(
                    "{name}: {key:?} count {count} (want {})",
                    e["count"]
                ));
            }
            // The modelled runs know their lost time to the nanosecond.
            if let Some(want) = e["lost_ns"].as_i64()
                && *lost != want
            {
                bad.push(format!("{name}: {key:?} lost {lost} (want {want})"));
            }
            if let Some(site) = e["call_site"].as_str()
                && sites.iter().any(|s| s != site)
            {
                bad.push(format!(
                    "{name}: {key:?} call sites {sites:?} (want {site})"
                ));
            }
        }
        for key in got.keys() {
            let planted = expected
                .iter()
                .any(|e| e["kind"] == key.0.as_str() && e["step"] == key.1.as_str());
            if !planted {
                bad.push(format!("{name}: unplanted {key:?}"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Samples whose truth plants one of the new kinds, and what a truth there says of it.
fn planted_kinds(trace: &Path) -> Vec<String> {
    let whatif = support::whatif_kinds(trace);
    if !whatif.is_empty() {
        return whatif;
    }
    let name = trace.file_name().unwrap().to_string_lossy();
    let stem = name.trim_end_matches(".gz").trim_end_matches(".json");
    let truth = trace.with_file_name(format!("{stem}.truth.json"));
    if !truth.exists() {
        return Vec::new();
    }
    let t = support::read_json(&truth);
    let mut kinds: Vec<String> = t["expected_findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["kind"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Some(extra) = t["advice_findings"].as_object() {
        kinds.extend(extra.keys().cloned());
    }
    kinds
}

#[test]
fn the_new_kinds_fire_nowhere_else() {
    for trace in support::sample_traces() {
        let planted = planted_kinds(&trace);
        let r = report(&trace);
        let stray: Vec<&Value> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                let kind = f["kind"].as_str().unwrap();
                KINDS.contains(&kind) && !planted.iter().any(|p| p == kind)
            })
            .collect();
        assert!(stray.is_empty(), "{}: {stray:#?}", trace.display());
    }
}
