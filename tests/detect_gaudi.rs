//! Gaudi signals: the bridge's metrics file (`habana-metrics`) read on its own and with a trace,
//! `cpu_fallback` and post-warm-up `recompile` findings from it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use steplens_analysis::build_report;
use steplens_ingest::{LoadOptions, load, load_many};
use tempfile::TempDir;

fn dump(metric: &str, trigger: &str, stats: &str) -> String {
    format!(
        "{{\"metric_name\": \"{metric}\", \"triggered_by\": \"{trigger}\", \"generated_on\": \"2026-11-01T10:00:00\", \"statistics\": {stats}}}"
    )
}

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn metrics_file(terminated: bool) -> String {
    let mut dumps = Vec::new();
    for (n, t) in [(3, 9000.0), (5, 15000.0), (5, 15000.0), (6, 17500.0)] {
        dumps.push(dump(
            "graph_compilation",
            "mark_step",
            &format!("{{\"TotalNumber\": {n}, \"TotalTime\": {t}, \"AvgTime\": 1.0}}"),
        ));
    }
    dumps.push(dump(
        "cpu_fallback",
        "process_exit",
        "{\"TotalNumber\": 14, \"FallbackOps\": {\"digamma\": 12, \"aten::_unique2\": 2}}",
    ));
    let body = dumps.join(",\n");
    if terminated {
        format!("[{body}]\n")
    } else {
        format!("[{body},\n")
    }
}

#[test]
fn metrics_file_loads_and_yields_gaudi_findings() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "metrics-rank0.json", &metrics_file(true));
    let t = load(&path, &LoadOptions::default(), None).unwrap();
    assert_eq!(t.sources[0].format, "habana-metrics");
    assert_eq!(t.sources[0].events, 5);
    assert_eq!(t.metrics.len(), 5);
    assert_eq!(t.device.kind.as_str(), "hpu");
    let r = build_report(&t);
    // Compiles grew in mark_steps 2 (warm-up) and 4 (one new graph, 2.5 ms).
    let recompiles: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind == "recompile")
        .collect();
    assert_eq!(recompiles.len(), 1, "{recompiles:#?}");
    assert_eq!(recompiles[0].count, 1);
    assert_eq!(recompiles[0].lost_ns, 2_500_000);
    assert!(
        recompiles[0].title.contains("mark_step 4"),
        "{}",
        recompiles[0].title
    );
    let fallback = r
        .findings
        .iter()
        .find(|f| f.kind == "cpu_fallback")
        .expect("cpu_fallback");
    assert_eq!(fallback.count, 14);
    assert_eq!(fallback.ops, ["digamma", "aten::_unique2"]);
}

#[test]
fn unterminated_metrics_file_keeps_complete_dumps() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "metrics.json", &metrics_file(false));
    let t = load(&path, &LoadOptions::default(), None).unwrap();
    assert_eq!(t.metrics.len(), 5);
    let w = &t.sources[0].warnings;
    assert!(
        w.iter().any(|w| w.code == "damaged" && w.offset.is_some()),
        "{w:?}"
    );
}

#[test]
fn fallback_ops_found_in_a_trace_loaded_alongside() {
    let dir = TempDir::new().unwrap();
    let metrics = write(&dir, "metrics.json", &metrics_file(true));
    let trace = write(
        &dir,
        "trace.json",
        r#"{"traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::digamma", "pid": 1, "tid": 1, "ts": 10, "dur": 40},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 60, "dur": 5}
        ]}"#,
    );
    let t = load_many(&[&trace, &metrics], &LoadOptions::default(), None).unwrap();
    let r = build_report(&t);
    let fallback = r
        .findings
        .iter()
        .find(|f| f.kind == "cpu_fallback")
        .expect("cpu_fallback");
    assert_eq!(fallback.lost_ns, 40_000);
    assert_eq!(fallback.evidence.len(), 1);
}

#[test]
fn metrics_file_without_dumps_is_an_error() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "m.json", "[{\"metric_name\": \"cpu_fallback\",");
    let err = load(&path, &LoadOptions::default(), None).unwrap_err();
    assert_eq!(err.code(), "damaged");
}
