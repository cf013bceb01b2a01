//! Golden tests: `steplens report --format md` of the traces in `samples/` (outside the
//! truth-checked sets), and `steplens report --format json` of every trace in `samples/`, one
//! snapshot per file (insta glob: one failing sample does not hide the others), in
//! `tests/it/snapshots/` (named `it__golden__…`: insta prefixes the module path). Reports are deterministic for a given file, so any change in ingest,
//! analysis or rendering shows up here as a reviewable diff.
//!
//! Update after an intended change: `INSTA_UPDATE=always cargo test --test it golden`, then review
//! the `.snap` diffs.

// Helpers outside `#[test]` functions panic on failure too, by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Trace files under `samples/`, as paths relative to the repository root, sorted.
fn sample_traces() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("list samples") {
            let path = entry.expect("entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                // `gen/` holds the generators and their bookkeeping, not traces; `gaudi-cases/`
                // and `kineto-compat/` are checked against their planted truth
                // (`tests/it/gaudi_cases.rs`, `tests/it/kineto_compat.rs`, `tests/it/patterns.rs`,
                // `tests/it/advice.rs`, `tests/it/ranks.rs`) and
                // `ci-aa/` by the check's A/A and A/B suite (`tests/it/check_stats.rs`), and
                // `whatif/` against its fixed runs (`tests/it/whatif.rs`), not pinned here.
                if ![
                    "gen",
                    "gaudi-cases",
                    "kineto-compat",
                    "ci-aa",
                    "patterns",
                    "advice",
                    "ranks",
                    "whatif",
                ]
                .contains(&name)
                {
                    walk(&path, out);
                }
                continue;
            }
            if (name.ends_with(".json") || name.ends_with(".json.gz") || name.ends_with(".csv"))
                && !name.ends_with(".truth.json")
                && !name.ends_with(".report.json")
            {
                out.push(path.strip_prefix(repo()).expect("under repo").to_path_buf());
            }
        }
    }
    let mut traces = Vec::new();
    walk(&repo().join("samples"), &mut traces);
    traces.sort();
    traces
}

/// `samples/hta/cuda_event_sync.json.gz` → `hta__cuda_event_sync_json_gz`.
fn snapshot_name(trace: &Path) -> String {
    let rel = trace.strip_prefix("samples").unwrap_or(trace);
    rel.to_string_lossy()
        .replace('/', "__")
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_")
}

#[test]
fn markdown_reports_of_the_samples() {
    let traces = sample_traces();
    assert!(traces.len() >= 6, "{traces:?}");
    for trace in traces {
        let out = Command::new(env!("CARGO_BIN_EXE_steplens"))
            .args(["report", "--format", "md"])
            .arg(&trace)
            .current_dir(repo())
            .output()
            .expect("run steplens");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", trace.display());
        let text = String::from_utf8(out.stdout).expect("UTF-8 report");
        insta::assert_snapshot!(format!("report_md__{}", snapshot_name(&trace)), text);
    }
}

/// Whether `path` (under `samples/`) is a trace: not a generator, truth file, saved report, note
/// or budget.
fn is_sample_trace(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let trace_ext = [".json", ".json.gz", ".csv", ".pftrace"]
        .iter()
        .any(|ext| name.ends_with(ext));
    // `gen/` holds the generators' bookkeeping (`corpus_counts.json`), not traces; the fix pairs
    // of `whatif/` are held to their fixed runs by `tests/it/whatif.rs`.
    let bookkeeping = path
        .components()
        .any(|c| c.as_os_str() == "gen" || c.as_os_str() == "whatif");
    trace_ext && !bookkeeping && !name.ends_with(".truth.json") && !name.ends_with(".report.json")
}

#[test]
fn json_reports_of_every_sample() {
    insta::glob!("../../samples", "**/*", |path| {
        if !path.is_file() || !is_sample_trace(path) {
            return;
        }
        let rel = path.strip_prefix(repo()).expect("under repo");
        let out = Command::new(env!("CARGO_BIN_EXE_steplens"))
            .args(["report", "--format", "json"])
            .arg(rel)
            .current_dir(repo())
            .output()
            .expect("run steplens");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", rel.display());
        let mut report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        insta::assert_snapshot!(
            serde_json::to_string_pretty(&without_path_stretches(&mut report)).unwrap()
        );
    });
}

/// The report with each critical path's stretches replaced by their count (the stretches are
/// held to the step by `tests/it/critical_path.rs`, and `by_bound` and `top` pin the path here,
/// without a line per stretch of every step in the snapshots), and the operator and kernel
/// tables cut to their first rows.
fn without_path_stretches(report: &mut serde_json::Value) -> &serde_json::Value {
    let shorten = |path: &mut serde_json::Value| {
        if let Some(n) = path["slices"].as_array().map(Vec::len) {
            path["slices"] = serde_json::json!({ "stretches": n });
        }
    };
    if let Some(steps) = report["steps"].as_array_mut() {
        for step in steps {
            shorten(&mut step["critical_path"]);
        }
    }
    if report.get("critical_path").is_some() {
        shorten(&mut report["critical_path"]);
    }
    // The TensorBoard-style tables are pinned by their first rows and their length (the full
    // tables are held to hand-worked figures by `tests/it/tensorboard.rs`).
    for (table, keep) in [
        ("operators", 10),
        ("operators_by_shape", 5),
        ("kernels", 10),
        ("kernels_by_op", 5),
        ("device_nodes", 10),
    ] {
        if let Some(rows) = report.get_mut(table).and_then(|t| t.as_array_mut())
            && rows.len() > keep
        {
            let total = rows.len();
            rows.truncate(keep);
            rows.push(serde_json::json!({ "rows_total": total }));
        }
    }
    report
}
