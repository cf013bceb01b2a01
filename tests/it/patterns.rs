//! The layer-pattern detectors (`explicit_pad`, `bias_before_batchnorm`) on real CPU
//! runs with a clean twin (`samples/patterns/`, made by its `generate.py`, which writes the truth
//! from what it planted): exact per-step counts and call sites, nothing on the twin, and neither
//! kind on any other sample.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde_json::Value;

use crate::support;

const KINDS: [&str; 2] = ["explicit_pad", "bias_before_batchnorm"];

fn report(path: &std::path::Path) -> Value {
    let out = support::steplens(&["report", "-f", "json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", support::stderr(&out));
    serde_json::from_str(&support::stdout(&out)).unwrap()
}

/// (kind, step, call site when the truth names one) → Σ count.
type Counts = BTreeMap<(String, String, Option<String>), u64>;

fn counts(findings: &[Value], with_sites: bool) -> Counts {
    let mut out = Counts::new();
    for f in findings {
        let kind = f["kind"].as_str().unwrap().to_owned();
        if !KINDS.contains(&kind.as_str()) {
            continue;
        }
        let site = if with_sites {
            f["call_site"].as_str().map(str::to_owned)
        } else {
            None
        };
        *out.entry((kind, f["step"].as_str().unwrap().to_owned(), site))
            .or_default() += f["count"].as_u64().unwrap();
    }
    out
}

#[test]
fn planted_patterns_are_found_exactly_and_the_twin_stays_silent() {
    for name in ["explicit_pad", "bias_bn", "patterns_clean"] {
        let dir = support::repo().join("samples/patterns");
        let truth = support::read_json(&dir.join(format!("{name}.truth.json")));
        let r = report(&dir.join(format!("{name}.json.gz")));
        let expected = truth["expected_findings"].as_array().unwrap();
        let with_sites = expected.iter().any(|e| e["call_site"].is_string());
        let want = counts(expected, with_sites);
        let got = counts(r["findings"].as_array().unwrap(), with_sites);
        assert_eq!(got, want, "{name}");
        if name == "patterns_clean" {
            assert_eq!(r["findings"], Value::Array(Vec::new()), "the clean twin");
        }
    }
}

#[test]
fn no_other_sample_gets_a_layer_pattern() {
    for trace in support::sample_traces() {
        if trace.to_string_lossy().contains("samples/patterns/") {
            continue;
        }
        let planted = support::whatif_kind(&trace);
        let r = report(&trace);
        let hits: Vec<&Value> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f, f["kind"].as_str().unwrap()))
            .filter(|(_, k)| KINDS.contains(k) && planted.as_deref() != Some(*k))
            .map(|(f, _)| f)
            .collect();
        assert!(hits.is_empty(), "{}: {hits:?}", trace.display());
    }
}
