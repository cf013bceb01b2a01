//! End-to-end tests of the `steplens` binary: `report` in its three formats, `info`, several
//! inputs, stdin, output files, and how bad input and usage errors are reported (exit status 2,
//! one `steplens: error:` line on stderr naming the file).

// Helpers outside `#[test]` functions panic on failure too, by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use std::process::{Command, Stdio};

use serde_json::Value;
use tempfile::TempDir;

use crate::support::{fails, json, ok, repo, stderr, stdout, steplens, temp_file};

const CLEAN: &str = "samples/torch-cpu/train_clean.json";
const STALL: &str = "samples/torch-cpu/train_stall.json.gz";
const GPU: &str = "samples/hta/cuda_event_sync.json.gz";

fn no_ansi(text: &str) {
    assert!(!text.contains('\x1b'), "ANSI escape in output:\n{text}");
}

// ---------------------------------------------------------------------------------------------
// report

#[test]
fn report_text() {
    let text = ok(&["report", CLEAN]);
    no_ansi(&text);
    assert!(
        text.starts_with("samples/torch-cpu/train_clean.json (kineto-json, 1,583 events)\n"),
        "{text}"
    );
    assert!(
        text.contains("  device   none (host-only trace)\n"),
        "{text}"
    );
    assert!(text.contains("\nSteps (3)\n"), "{text}");
    let step_rows: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("ProfilerStep#"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        step_rows,
        ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    );
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("mean ")),
        "{text}"
    );
    assert!(text.contains("\nFindings\n  none\n"), "{text}");
    assert!(text.contains("Top ops by total time (20 of "), "{text}");
    assert!(!text.contains("warning:"), "{text}");
}

#[test]
fn report_json_contract() {
    let report = json(&["report", "--format", "json", CLEAN]);
    assert_eq!(report["schema"], "steplens.report/1");
    let sources = report["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0]["path"], CLEAN);
    assert_eq!(sources[0]["format"], "kineto-json");
    assert_eq!(sources[0]["events"], 1583);
    assert_eq!(sources[0]["bytes"], 610_232);
    assert_eq!(sources[0]["rank"], Value::Null);
    assert_eq!(sources[0]["warnings"], serde_json::json!([]));
    assert_eq!(report["device"]["kind"], "cpu");
    assert_eq!(report["device"]["count"], 0);

    let steps = report["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    );
    // Exact figures from samples/torch-cpu/train_clean.truth.json.
    let starts: Vec<i64> = steps
        .iter()
        .map(|s| s["start_ns"].as_i64().unwrap())
        .collect();
    assert_eq!(
        starts,
        [
            4_460_081_936_510_658,
            4_460_081_950_098_204,
            4_460_081_964_554_737
        ]
    );
    let durs: Vec<i64> = steps
        .iter()
        .map(|s| s["dur_ns"].as_i64().unwrap())
        .collect();
    assert_eq!(durs, [13_535_558, 14_393_629, 14_274_531]);
    let dataloader: Vec<i64> = steps
        .iter()
        .map(|s| s["dataloader_ns"].as_i64().unwrap())
        .collect();
    assert_eq!(dataloader, [239_818, 209_022, 301_580]);
    for s in steps {
        assert_eq!(s["source"], 0);
        assert_eq!(s["device_busy_ns"], Value::Null);
        assert_eq!(s["device_idle_ns"], Value::Null);
        assert_eq!(s["engines"], serde_json::json!({}));
        let host = s["host_busy_ns"].as_i64().unwrap();
        assert!(host > 0 && host <= s["dur_ns"].as_i64().unwrap());
    }

    assert_eq!(report["findings"], serde_json::json!([]));

    let ops = report["ops"].as_array().unwrap();
    assert!(!ops.is_empty());
    let fields = [
        "name",
        "track_kind",
        "category",
        "count",
        "total_ns",
        "self_ns",
        "mean_ns",
        "p50_ns",
        "p99_ns",
    ];
    for op in ops {
        let obj = op.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = fields.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want, "{op}");
        assert_eq!(op["track_kind"], "host");
        let count = op["count"].as_i64().unwrap();
        let total = op["total_ns"].as_i64().unwrap();
        assert!(count > 0);
        assert!(op["self_ns"].as_i64().unwrap() <= total);
        assert_eq!(op["mean_ns"].as_i64().unwrap(), total / count);
        assert!(op["p50_ns"].as_i64().unwrap() <= op["p99_ns"].as_i64().unwrap());
    }
    // By total time, longest first; no annotations among the ops.
    let totals: Vec<i64> = ops
        .iter()
        .map(|o| o["total_ns"].as_i64().unwrap())
        .collect();
    assert!(totals.windows(2).all(|w| w[0] >= w[1]));
    assert!(
        ops.iter()
            .all(|o| !o["name"].as_str().unwrap().starts_with("ProfilerStep#"))
    );
    // 472 cpu_op per step, 1,416 in all (truth file), all in the op table.
    let cpu_ops: i64 = ops
        .iter()
        .filter(|o| o["category"] == "cpu_op")
        .map(|o| o["count"].as_i64().unwrap())
        .sum();
    assert_eq!(cpu_ops, 1416);

    let summary = report["summary"].as_object().unwrap();
    let mut keys: Vec<&str> = summary.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "device_busy_pct",
            "findings_by_kind",
            "lost_ns_by_kind",
            "lost_pct_of_steps",
            "mean_step_ns",
            "mme_tpc_overlap_ns",
            "p50_step_ns",
            "saving_ns_by_kind",
            "saving_pct_of_steps",
            "steps",
            "trace_ns"
        ]
    );
    assert_eq!(summary["steps"], 3);
    assert_eq!(
        summary["mean_step_ns"],
        (13_535_558 + 14_393_629 + 14_274_531) / 3
    );
    assert_eq!(summary["p50_step_ns"], 14_274_531);
    assert_eq!(summary["device_busy_pct"], Value::Null);
    assert!(summary["trace_ns"].as_i64().unwrap() > 42_000_000);
    assert_eq!(summary["findings_by_kind"], serde_json::json!({}));
    assert_eq!(summary["lost_ns_by_kind"], serde_json::json!({}));
    assert_eq!(summary["saving_ns_by_kind"], serde_json::json!({}));
    assert_eq!(summary["saving_pct_of_steps"], 0.0);
}

#[test]
fn report_markdown() {
    let md = ok(&["report", "--format", "md", CLEAN]);
    no_ansi(&md);
    assert!(md.starts_with("# steplens report\n"), "{md}");
    assert!(md.contains("\n## Steps\n"), "{md}");
    assert!(md.contains("\n| step | duration | host busy |"), "{md}");
    assert!(md.contains("\n| --- | ---: | ---: |"), "{md}");
    assert!(md.contains("\n| ProfilerStep#3 | 14.4 ms |"), "{md}");
    assert!(md.contains("\n## Findings\n\nNone.\n"), "{md}");
    assert!(
        md.contains("\n| op | where | count | total | self | mean | p50 | p99 |\n"),
        "{md}"
    );
    // --top limits the op table.
    let md = ok(&["report", "-f", "md", "--top", "3", CLEAN]);
    assert!(md.contains("## Top ops by total time (3 of "), "{md}");
    let op_rows = md
        .split("## Top ops")
        .nth(1)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| op ") && !l.starts_with("| ---"))
        .count();
    assert_eq!(op_rows, 3);
}

#[test]
fn report_to_a_file() {
    let dir = TempDir::new().unwrap();
    for (format, name) in [("text", "r.txt"), ("md", "r.md"), ("json", "r.json")] {
        let path = dir.path().join(name);
        let out = steplens(&["report", "-f", format, "-o", path.to_str().unwrap(), CLEAN]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(out.stdout.is_empty(), "stdout: {}", stdout(&out));
        let said = stderr(&out);
        assert!(
            said.starts_with(&format!("wrote {} (", path.display())) && said.lines().count() == 1,
            "stderr: {said}"
        );
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(written, ok(&["report", "-f", format, CLEAN]), "{format}");
        no_ansi(&written);
    }
    // An unwritable output is an error naming it.
    let bad = dir.path().join("no/such/dir/r.md");
    fails(&["report", "-o", bad.to_str().unwrap(), CLEAN], "r.md");
}

#[test]
fn report_gpu_trace() {
    let report = json(&["report", "-f", "json", GPU]);
    assert_eq!(report["device"]["kind"], "cuda");
    assert_eq!(report["device"]["name"], "NVIDIA A100-PG509-200");
    assert_eq!(report["device"]["count"], 1);
    assert_eq!(report["sources"][0]["rank"], 0);
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1);
    let step = &steps[0];
    assert_eq!(step["name"], "ProfilerStep#100");
    assert_eq!(step["start_ns"], 1_707_417_525_509_335_000_i64);
    assert_eq!(step["dur_ns"], 3_154_000);
    let busy = step["device_busy_ns"]
        .as_i64()
        .expect("device busy is a number");
    let idle = step["device_idle_ns"]
        .as_i64()
        .expect("device idle is a number");
    assert!(busy > 0);
    assert_eq!(busy + idle, 3_154_000);
    assert!(step["engines"]["compute-stream"].as_i64().unwrap() > 0);
    let pct = report["summary"]["device_busy_pct"].as_f64().unwrap();
    assert!(pct > 0.0 && pct <= 100.0);
    assert!(
        report["ops"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["track_kind"] == "device" && o["category"] == "kernel")
    );
    let text = ok(&["report", GPU]);
    assert!(
        text.contains("  device   cuda, NVIDIA A100-PG509-200 (1 device active)"),
        "{text}"
    );
    assert!(text.contains("device busy"), "{text}");
}

#[test]
fn report_several_files() {
    let report = json(&["report", "-f", "json", CLEAN, STALL]);
    let paths: Vec<&str> = report["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, [CLEAN, STALL]);
    let steps: Vec<(i64, &str)> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["source"].as_i64().unwrap(), s["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        steps,
        [
            (0, "ProfilerStep#2"),
            (0, "ProfilerStep#3"),
            (0, "ProfilerStep#4"),
            (1, "ProfilerStep#2"),
            (1, "ProfilerStep#3"),
            (1, "ProfilerStep#4"),
        ]
    );
    assert_eq!(report["summary"]["steps"], 6);
    let text = ok(&["report", CLEAN, STALL]);
    assert!(text.contains("Steps (3 steps × 2 inputs)"), "{text}");
    assert!(text.contains("  source  step "), "a source column: {text}");
}

#[test]
fn report_reads_stdin() {
    let bytes = std::fs::read(repo().join(CLEAN)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_steplens"))
        .args(["report", "-f", "json", "-"])
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn steplens");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["sources"][0]["path"], "-");
    assert_eq!(report["sources"][0]["events"], 1583);
    assert_eq!(report["steps"].as_array().unwrap().len(), 3);
}

#[test]
fn truncated_trace_warns_with_the_byte_offset() {
    let dir = TempDir::new().unwrap();
    let bytes = std::fs::read(repo().join(CLEAN)).unwrap();
    let path = temp_file(&dir, "cut.json", &bytes[..300_000]);
    let out = steplens(&["report", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let warning = text
        .lines()
        .find(|l| l.contains("warning:") && l.contains("byte 300000"))
        .unwrap_or_else(|| panic!("no warning naming byte 300000:\n{text}"));
    assert!(warning.contains("kept the"), "{warning}");
    let report = json(&["report", "-f", "json", path.to_str().unwrap()]);
    let warnings = report["sources"][0]["warnings"].as_array().unwrap();
    let damaged: Vec<&Value> = warnings.iter().filter(|w| w["code"] == "damaged").collect();
    assert_eq!(damaged.len(), 1, "{warnings:?}");
    assert_eq!(damaged[0]["offset"], 300_000);
    // Steps the cut runs through are left out; the complete first step stays.
    let steps: Vec<&str> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["ProfilerStep#2"]);
}

// ---------------------------------------------------------------------------------------------
// info

#[test]
fn info_text() {
    let text = ok(&["info", GPU]);
    no_ansi(&text);
    let want = [
        "samples/hta/cuda_event_sync.json.gz",
        "  format     kineto-json (gzip, 2.8 KiB stored, 22.1 KiB inflated)",
        "  events     92  (M 36, X 33, f 14, i 2, s 7)",
        "  rank       0",
        "  device     cuda, NVIDIA A100-PG509-200 (1 device active)",
        "  engines    compute-stream 1 (1.6% busy)",
        "  tracks     6 (host 1, device 2, counter 0, other 3)",
        "  slices     33  flows 7  instants 2  counter samples 0",
        "  steps      1 (ProfilerStep#100)",
        "  time span  3.15 ms",
    ];
    assert_eq!(text.lines().collect::<Vec<_>>(), want);
    let text = ok(&["info", CLEAN]);
    assert!(
        text.contains("  format     kineto-json (595.9 KiB)\n"),
        "{text}"
    );
    assert!(
        text.contains("  device     none (host-only trace)\n"),
        "{text}"
    );
    assert!(
        text.contains("  steps      3 (ProfilerStep#2 … ProfilerStep#4)\n"),
        "{text}"
    );
}

#[test]
fn info_json() {
    let info = json(&["info", "--json", GPU]);
    assert_eq!(info["sources"][0]["path"], GPU);
    assert_eq!(info["sources"][0]["format"], "kineto-json");
    assert_eq!(info["sources"][0]["compressed"], true);
    assert_eq!(info["sources"][0]["stored_bytes"], 2877);
    assert_eq!(info["sources"][0]["events"], 92);
    assert_eq!(
        info["sources"][0]["events_by_phase"],
        serde_json::json!({"M": 36, "X": 33, "f": 14, "i": 2, "s": 7})
    );
    assert_eq!(info["device"]["kind"], "cuda");
    assert_eq!(info["slices"], 33);
    assert_eq!(info["steps"], serde_json::json!(["ProfilerStep#100"]));
    assert_eq!(info["time_span_ns"], 3_154_000);
    assert_eq!(info["track_list"], serde_json::json!([]));
    let info = json(&["info", "--json", "--tracks", GPU]);
    let tracks = info["track_list"].as_array().unwrap();
    assert_eq!(tracks.len(), 6);
    assert_eq!(tracks[0]["kind"], "host");
    let slices: i64 = tracks.iter().map(|t| t["slices"].as_i64().unwrap()).sum();
    assert_eq!(slices, 33);
}

#[test]
fn info_tracks_text() {
    let text = ok(&["info", "--tracks", GPU]);
    assert!(text.contains("kind"), "{text}");
    assert!(text.contains("compute-stream (device 0)"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn bad_inputs_fail_with_one_line() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("missing.json");
    let line = fails(&["report", missing.to_str().unwrap()], "missing.json");
    assert!(line.contains("cannot read"), "{line}");
    let cases: [(&str, &[u8], &str); 5] = [
        ("empty.json", b"", "empty"),
        ("notes.txt", b"just some text\nand more\n", "not a trace"),
        ("other.json", br#"{"a": 1}"#, "traceEvents"),
        ("numbers.json", b"[1, 2, 3]", "not a trace"),
        (
            "broken.json.gz",
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff",
            "gzip",
        ),
    ];
    for (name, bytes, says) in cases {
        let path = temp_file(&dir, name, bytes);
        let line = fails(&["report", path.to_str().unwrap()], name);
        assert!(line.contains(says), "{line}");
        let line = fails(&["info", path.to_str().unwrap()], name);
        assert!(line.contains(says), "{line}");
        // Asked for JSON, the error also comes as JSON on stdout, with its stable code.
        let out = steplens(&["report", "-f", "json", CLEAN, path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(doc["schema"], "steplens.error/1");
        let code = doc["error"]["code"].as_str().unwrap();
        assert!(["not_a_trace", "damaged"].contains(&code), "{doc}");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(message.contains(says) && message.contains(name), "{doc}");
        assert_eq!(stderr(&out), format!("steplens: error: {message}\n"));
    }
    fails(&["report", "samples"], "samples");
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["report"][..],
        &["report", "--format", "xml", CLEAN][..],
        &["frobnicate"][..],
        &["info"][..],
    ] {
        let out = steplens(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", stdout(&out));
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
    let out = steplens(&["--help"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("report"));
    let out = steplens(&["--version"]);
    assert!(out.status.success());
    assert!(stdout(&out).starts_with("steplens "));
}

#[test]
fn budget_thresholds_override_detectors() {
    let dir = TempDir::new().unwrap();
    let stall = "samples/torch-cpu/train_stall.json.gz";
    let kinds = |args: &[&str]| -> usize {
        json(args)["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == "dataloader_stall")
            .count()
    };
    assert_eq!(kinds(&["report", stall, "--format", "json"]), 3);
    let lenient = temp_file(
        &dir,
        "lenient.toml",
        b"[thresholds]\ndataloader_stall_min_pct = 60.0\n",
    );
    let lenient = lenient.to_str().unwrap();
    assert_eq!(
        kinds(&["report", stall, "--format", "json", "--budget", lenient]),
        0
    );

    let typo = temp_file(
        &dir,
        "typo.toml",
        b"# budget\n[thresholds]\ndataloader_stall_min_pc = 1\n",
    );
    let line = fails(
        &["report", stall, "--budget", typo.to_str().unwrap()],
        "typo.toml",
    );
    assert!(
        line.contains("line 3") && line.contains("unknown field"),
        "{line}"
    );
    fails(
        &["report", stall, "--budget", "/nonexistent/budget.toml"],
        "budget.toml",
    );
}

/// An inference server's trace (vLLM's shape: an `execute_model` annotation per engine step, no
/// `ProfilerStep#N`) has steps without any flag; `--step-marker` names other annotations.
#[test]
fn inference_annotations_are_steps_and_step_marker_names_others() {
    let dir = TempDir::new().unwrap();
    let mut events = Vec::new();
    for i in 0..3 {
        events.push(format!(
            r#"{{"ph":"X","cat":"user_annotation","name":"execute_model","pid":1,"tid":1,"ts":{},"dur":80}}"#,
            1000 * i
        ));
        events.push(format!(
            r#"{{"ph":"X","cat":"user_annotation","name":"schedule","pid":1,"tid":1,"ts":{},"dur":100}}"#,
            1000 * i + 200
        ));
        events.push(format!(
            r#"{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{},"dur":50}}"#,
            1000 * i + 10
        ));
    }
    let text = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
    let path = temp_file(&dir, "serve.json", text.as_bytes());
    let path = path.to_str().unwrap();
    let names = |r: &Value| -> Vec<String> {
        r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let r = json(&["report", "-f", "json", path]);
    assert_eq!(
        names(&r),
        ["execute_model#1", "execute_model#2", "execute_model#3"]
    );
    let r = json(&["report", "-f", "json", "--step-marker", "^schedule$", path]);
    assert_eq!(names(&r), ["schedule#1", "schedule#2", "schedule#3"]);
    let out = steplens(&["report", "--step-marker", "(", path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a valid regex"),
        "{}",
        stderr(&out)
    );
}

/// A document steplens wrote, given where traces are read, is refused at the first look with
/// what reads it instead; `report` still takes a saved report.
#[test]
fn a_saved_report_given_as_a_trace_names_what_reads_it() {
    let dir = TempDir::new().expect("temp dir");
    let saved = dir.path().join("run.json");
    let saved = saved.to_str().expect("UTF-8 path");
    let wrote = steplens(&[
        "report",
        "samples/torch-cpu/train_clean.json",
        "-f",
        "json",
        "-o",
        saved,
    ]);
    assert!(wrote.status.success(), "{}", stderr(&wrote));
    let line = fails(&["info", saved], saved);
    assert!(
        line.contains("a report saved with report -f json (steplens.report/1)")
            && line.contains("check and diff compare it"),
        "{line}"
    );
    let set = dir.path().join("set.json");
    std::fs::write(
        &set,
        br#"{"schema": "steplens.baselines/1", "keep": 5, "runs": []}"#,
    )
    .expect("write");
    let set = set.to_str().expect("UTF-8 path");
    let line = fails(&["report", set], set);
    assert!(line.contains("check --baseline pools its runs"), "{line}");
    assert!(ok(&["report", saved]).contains("step"));
}

/// Every `"schema"` tag steplens writes has its entry in the document registry, which the
/// first look at a file and the refusal above read.
#[test]
fn every_schema_steplens_writes_is_a_registered_document() {
    let mut tags = std::collections::BTreeSet::new();
    let mut dirs: Vec<std::path::PathBuf> = ["src", "analysis/src", "output/src"]
        .iter()
        .map(|d| repo().join(d))
        .collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read source");
                for piece in text.split("\"steplens.").skip(1) {
                    let tag: String = piece
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '/'))
                        .collect();
                    if tag.contains('/') && piece[tag.len()..].starts_with('"') {
                        tags.insert(format!("steplens.{tag}"));
                    }
                }
            }
        }
    }
    assert!(tags.len() >= 6, "{tags:?}");
    for tag in &tags {
        assert!(
            steplens_ingest::documents::Document::of_schema(tag).is_some(),
            "{tag} has no entry in steplens_ingest::documents::DOCUMENTS"
        );
    }
}
