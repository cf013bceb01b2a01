//! Helpers the root integration tests share: where things are, loading a trace into a report,
//! and the corpus gate (a missing `../shared/corpus` skips with a note, but fails under
//! `CI=true`).

// Each test crate uses a different subset.
#![allow(
    dead_code,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use steplens_analysis::report::Finding;
use steplens_analysis::{Report, build_report};
use steplens_ingest::{LoadOptions, load};
use tempfile::TempDir;

/// The repository root.
pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The report of one trace, with default thresholds.
pub(crate) fn report(path: &Path) -> Report {
    let timeline = load(path, &LoadOptions::default(), None)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    build_report(&timeline)
}

/// The report of `samples/<rel>`.
pub(crate) fn sample(rel: &str) -> Report {
    report(&repo().join("samples").join(rel))
}

/// Every JSON trace under `samples/`, sorted.
pub(crate) fn sample_traces() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("list samples") {
            let path = entry.expect("entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                walk(&path, out);
            } else if (name.ends_with(".json") || name.ends_with(".json.gz"))
                && !name.ends_with(".truth.json")
                // Saved reports (the check baseline) are not traces.
                && !name.ends_with(".report.json")
                && name != "corpus_counts.json"
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo().join("samples"), &mut out);
    out.sort();
    out
}

/// Every `*.truth.json` in `dir`, sorted.
pub(crate) fn truth_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".truth.json"))
        })
        .collect();
    out.sort();
    out
}

/// The findings of one kind.
pub(crate) fn findings_of<'r>(report: &'r Report, kind: &str) -> Vec<&'r Finding> {
    report.findings.iter().filter(|f| f.kind == kind).collect()
}

/// `../shared/corpus/<rel>`, or `None` (with a note) when it is missing outside CI.
pub(crate) fn corpus_path(rel: &str) -> Option<PathBuf> {
    let path = repo().join("../shared/corpus").join(rel);
    if path.exists() {
        return Some(path);
    }
    let msg = format!("corpus {} is missing", path.display());
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{msg}; CI=true, cannot skip"
    );
    eprintln!("note: {msg}; skipping");
    None
}

/// `../shared/corpus/torch-cpu/<name>.json.gz`, gated as [`corpus_path`].
pub(crate) fn torch_cpu_trace(name: &str) -> Option<PathBuf> {
    corpus_path(&format!("torch-cpu/{name}.json.gz"))
}

/// The finding kind a fix pair's problem trace plants (`samples/whatif/<pair>.problem.json.gz`,
/// from `<pair>.truth.json`'s `finding_kind`).
pub(crate) fn whatif_kind(trace: &Path) -> Option<String> {
    let name = trace.file_name()?.to_str()?;
    let pair = name.strip_suffix(".problem.json.gz")?;
    let truth = trace.with_file_name(format!("{pair}.truth.json"));
    truth
        .exists()
        .then(|| {
            read_json(&truth)["finding_kind"]
                .as_str()
                .map(str::to_owned)
        })
        .flatten()
}

/// Every finding kind a fix pair's trace truly has: the pair's own kind (problem trace) and
/// the kinds its truth says both variants have by construction (`also_present`).
pub(crate) fn whatif_kinds(trace: &Path) -> Vec<String> {
    let Some(name) = trace.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let Some((pair, problem)) = name
        .strip_suffix(".problem.json.gz")
        .map(|p| (p, true))
        .or_else(|| name.strip_suffix(".fixed.json.gz").map(|p| (p, false)))
    else {
        return Vec::new();
    };
    let truth = trace.with_file_name(format!("{pair}.truth.json"));
    if !truth.exists() {
        return Vec::new();
    }
    let t = read_json(&truth);
    let mut kinds: Vec<String> = t["also_present"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if problem && let Some(kind) = t["finding_kind"].as_str() {
        kinds.push(kind.to_owned());
    }
    kinds
}

/// Whether the truth file beside `trace` (`<stem>.truth.json`) plants a finding of `kind` in
/// some step (the generated Gaudi cases of `samples/gaudi-cases/`, the fix pairs of
/// `samples/whatif/`).
pub(crate) fn truth_plants(trace: &Path, kind: &str) -> bool {
    if whatif_kinds(trace).iter().any(|k| k == kind) {
        return true;
    }
    let name = trace.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let stem = name
        .strip_suffix(".json.gz")
        .or_else(|| name.strip_suffix(".json"))
        .unwrap_or(name);
    let truth = trace.with_file_name(format!("{stem}.truth.json"));
    if !truth.exists() {
        return false;
    }
    read_json(&truth)["steps"]
        .as_array()
        .is_some_and(|steps| steps.iter().any(|s| !s["findings"][kind].is_null()))
}

/// Asserts that no sample other than `only_in` (a file name), or one whose truth file plants
/// that kind, gets a finding of `kind`.
pub(crate) fn assert_no_other_sample_has(kind: &str, only_in: &str) {
    let traces = sample_traces();
    assert!(traces.len() >= 9, "{traces:?}");
    for path in traces
        .iter()
        .filter(|p| !p.ends_with(only_in) && !truth_plants(p, kind))
    {
        let r = report(path);
        let fired: Vec<&str> = findings_of(&r, kind)
            .iter()
            .map(|f| f.title.as_str())
            .collect();
        assert!(fired.is_empty(), "{}: {fired:#?}", path.display());
    }
}

/// Asserts that the corpus torch-cpu scenarios `names` get no finding of `kind`, after
/// `truth_agrees` checked that each scenario's truth file expects none.
pub(crate) fn assert_corpus_has_none(
    kind: &str,
    names: &[&str],
    truth_agrees: impl Fn(&str, &Value),
) {
    for name in names {
        let Some(path) = torch_cpu_trace(name) else {
            continue;
        };
        truth_agrees(
            name,
            &read_json(&path.with_file_name(format!("{name}.truth.json"))),
        );
        let r = report(&path);
        let fired: Vec<&str> = findings_of(&r, kind)
            .iter()
            .map(|f| f.title.as_str())
            .collect();
        assert!(fired.is_empty(), "{name}: {fired:#?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Running the binary

/// Runs `steplens ARGS` in the repository root, with color and terminal detection off.
pub(crate) fn steplens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_steplens"))
        .args(args)
        .current_dir(repo())
        .env_remove("CI")
        .output()
        .expect("run steplens")
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

/// Asserts success and returns stdout.
pub(crate) fn ok(args: &[&str]) -> String {
    let out = steplens(args);
    assert!(
        out.status.success(),
        "steplens {args:?} failed ({:?}):\n{}",
        out.status.code(),
        stderr(&out)
    );
    assert!(stderr(&out).is_empty(), "stderr: {}", stderr(&out));
    stdout(&out)
}

pub(crate) fn json(args: &[&str]) -> Value {
    let text = ok(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}):\n{text}"))
}

/// Asserts the run failed with status 2, nothing on stdout, and exactly one error line on
/// stderr that names `file`; returns that line.
pub(crate) fn fails(args: &[&str], file: &str) -> String {
    let out = steplens(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "steplens {args:?}: {}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty(), "stdout: {}", stdout(&out));
    let err = stderr(&out);
    assert!(err.ends_with('\n'), "{err:?}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got {err:?}");
    assert!(lines[0].starts_with("steplens: error: "), "{err:?}");
    assert!(lines[0].contains(file), "{err:?} should name {file}");
    lines[0].to_owned()
}

pub(crate) fn temp_file(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write temp file");
    path
}

/// `samples/whatif-cuda/fp32_matmul`: the problem run's device-inclusive step as its generator
/// timed it (the unprofiled loop between two `torch.cuda.synchronize()` calls, mean of its runs),
/// ns.
pub(crate) fn fp32_matmul_synced_step_ns() -> f64 {
    let truth = read_json(&repo().join("samples/whatif-cuda/fp32_matmul.truth.json"));
    let synced: Vec<f64> = truth["unprofiled"]["synced_mean_step_ns"]["problem"]
        .as_array()
        .expect("synced_mean_step_ns")
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    synced.iter().sum::<f64>() / synced.len() as f64
}
