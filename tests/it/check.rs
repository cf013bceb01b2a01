//! End-to-end tests of `steplens check`, `diff` and `export --tables`: verdicts and exit
//! statuses, a saved report as baseline, JUnit structure, GitHub annotations, the Markdown
//! summary, tables read back, and bad input (exit 2).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::Path;

use crate::support::{corpus_path, fails, json, ok, stderr, stdout, steplens, temp_file};
use serde_json::Value;
use steplens_analysis::export::table::{TableFormat, read_shape};
use tempfile::TempDir;

const CLEAN: &str = "samples/torch-cpu/train_clean.json";
const SYNC: &str = "samples/torch-cpu/train_sync.json.gz";
const GAUDI: &str = "samples/gaudi/train_hpu.bridge.json.gz";

fn rule<'a>(outcome: &'a Value, name: &str) -> &'a Value {
    outcome["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == name)
        .unwrap_or_else(|| panic!("no rule {name} in {outcome:#}"))
}

/// Runs `check` expecting exit status `code`; returns stdout.
fn check_exits(args: &[&str], code: i32) -> String {
    let out = steplens(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "steplens {args:?}:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// Whether the check's table has a FAIL row for `rule`.
fn failed_row(text: &str, rule: &str) -> bool {
    text.lines().any(|l| {
        let mut cells = l.split_whitespace();
        cells.next() == Some("FAIL") && cells.next() == Some(rule)
    })
}

#[test]
fn clean_run_against_itself_passes() {
    let text = check_exits(&["check", CLEAN, "--baseline", CLEAN], 0);
    assert!(text.starts_with("steplens check: passed"), "{text}");
    assert!(text.contains("3 steps, 1 warm-up left out"), "{text}");
    assert!(!text.contains("FAIL"), "{text}");

    let gaudi = check_exits(&["check", GAUDI, "--baseline", GAUDI, "-f", "json"], 0);
    let outcome: Value = serde_json::from_str(&gaudi).unwrap();
    assert_eq!(outcome["passed"], true);
    // Engine rules exist for a Gaudi run and compare equal.
    assert_eq!(rule(&outcome, "engine_utilization.MME")["status"], "pass");
    assert_eq!(rule(&outcome, "device_busy")["status"], "pass");
}

#[test]
fn an_added_sync_point_fails_naming_the_rule_and_call_site() {
    let text = check_exits(&["check", SYNC, "--baseline", CLEAN], 1);
    assert!(text.starts_with("steplens check: REGRESSED"), "{text}");
    assert!(failed_row(&text, "new_findings.sync_point"), "{text}");
    assert!(
        text.contains("sync_point @ make_torch_samples.py:109"),
        "{text}"
    );

    let json_out = check_exits(&["check", SYNC, "--baseline", CLEAN, "-f", "json"], 1);
    let outcome: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(outcome["schema"], "steplens.check/1");
    assert_eq!(outcome["passed"], false);
    let new = rule(&outcome, "new_findings.sync_point");
    assert_eq!(new["status"], "fail");
    let sites: Vec<&str> = new["new_findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["key"]["site"].as_str().unwrap())
        .collect();
    assert!(sites.contains(&"make_torch_samples.py:109"), "{sites:?}");
    assert_eq!(outcome["baseline"]["steps_measured"], 2);
    assert_eq!(outcome["current"]["warmup_skipped"], 1);
}

#[test]
fn the_budget_can_allow_a_finding_and_loosen_limits() {
    let dir = TempDir::new().unwrap();
    let budget = temp_file(
        &dir,
        "steplens.toml",
        br#"
[check]
warmup_steps = 1
top_ops = 0
allow_new = ["sync_point"]

[check.step_time]
max_increase_pct = 50

[check.step_time_mean]
max_increase_pct = 50
"#,
    );
    let budget = budget.to_str().unwrap();
    let text = check_exits(&["check", SYNC, "--baseline", CLEAN, "--budget", budget], 0);
    assert!(
        text.contains("(allowed by the budget)") || text.contains("allowed"),
        "{text}"
    );

    // A ceiling fails even the clean run against itself.
    let strict = temp_file(&dir, "strict.toml", b"[check.step_time]\nmax_ms = 1.0\n");
    let text = check_exits(
        &[
            "check",
            CLEAN,
            "--baseline",
            CLEAN,
            "--budget",
            strict.to_str().unwrap(),
        ],
        1,
    );
    assert!(text.contains("over the ceiling of 1 ms"), "{text}");
}

#[test]
fn a_saved_report_baseline_works_like_its_trace() {
    let dir = TempDir::new().unwrap();
    let saved = dir.path().join("baseline.json");
    let out = steplens(&["report", CLEAN, "-f", "json", "-o", saved.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let saved = saved.to_str().unwrap();

    let from_trace: Value = serde_json::from_str(&check_exits(
        &["check", SYNC, "--baseline", CLEAN, "-f", "json"],
        1,
    ))
    .unwrap();
    let from_report: Value = serde_json::from_str(&check_exits(
        &["check", SYNC, "--baseline", saved, "-f", "json"],
        1,
    ))
    .unwrap();
    assert_eq!(from_trace["rules"], from_report["rules"]);
    assert_eq!(from_trace["baseline"], from_report["baseline"]);
    // And as the current run: a saved report against itself passes.
    check_exits(&["check", saved, "--baseline", CLEAN], 0);
    let text = check_exits(&["check", saved, "--baseline", saved], 0);
    assert!(text.contains("(saved report)"), "{text}");
}

#[test]
fn junit_github_and_markdown_outputs() {
    let dir = TempDir::new().unwrap();
    let junit = dir.path().join("check.xml");
    let summary = dir.path().join("summary.md");
    let out = check_exits(
        &[
            "check",
            SYNC,
            "--baseline",
            CLEAN,
            "--github",
            "--junit",
            junit.to_str().unwrap(),
            "--summary-md",
            summary.to_str().unwrap(),
        ],
        1,
    );

    // GitHub: the new sync point is annotated on its source line; every line is a command.
    assert!(
        out.contains(
            "::error file=make_torch_samples.py,line=109,title=steplens new sync_point::host-device sync"
        ),
        "{out}"
    );
    let commands: Vec<&str> = out.lines().filter(|l| l.starts_with("::")).collect();
    assert!(commands.iter().all(|l| !l.contains('\n')));
    assert!(
        commands
            .last()
            .unwrap()
            .starts_with("::notice title=steplens check::")
    );

    // JUnit: the structure the Ant/Jenkins schema requires.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 1);
    let suite = suites[0];
    assert_eq!(suite.tag_name().name(), "testsuite");
    for attr in [
        "name",
        "tests",
        "failures",
        "errors",
        "skipped",
        "time",
        "timestamp",
        "hostname",
    ] {
        assert!(suite.attribute(attr).is_some(), "testsuite lacks {attr}");
    }
    let children: Vec<&str> = suite
        .children()
        .filter(|n| n.is_element())
        .map(|n| n.tag_name().name())
        .collect();
    assert_eq!(children.first(), Some(&"properties"));
    assert_eq!(
        &children[children.len() - 2..],
        ["system-out", "system-err"]
    );
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let count = |attr: &str| suite.attribute(attr).unwrap().parse::<usize>().unwrap();
    assert_eq!(cases.len(), count("tests"));
    let failed: Vec<_> = cases
        .iter()
        .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
        .collect();
    assert_eq!(failed.len(), count("failures"));
    assert!(
        failed
            .iter()
            .any(|c| c.attribute("name") == Some("new_findings.sync_point"))
    );
    let skipped = cases
        .iter()
        .filter(|c| c.children().any(|n| n.has_tag_name("skipped")))
        .count();
    assert_eq!(skipped, count("skipped"));
    for case in &cases {
        assert!(case.attribute("name").is_some() && case.attribute("classname").is_some());
    }
    let timestamp = suite.attribute("timestamp").unwrap();
    assert_eq!(timestamp.len(), 19, "{timestamp}");
    assert_eq!(&timestamp[10..11], "T");

    // Markdown: a verdict heading, the rules table and what regressed.
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.starts_with("### ❌ steplens check REGRESSED"), "{md}");
    assert!(md.contains("| ❌ | `new_findings.sync_point` |"), "{md}");
    assert!(md.contains("**What regressed**"), "{md}");
}

#[test]
fn a_recompile_fails_its_rule() {
    let (Some(base), Some(cur)) = (
        corpus_path("torch-cpu/clean_baseline.json.gz"),
        corpus_path("torch-cpu/recompile_shapes_static.json.gz"),
    ) else {
        return;
    };
    let (base, cur) = (base.to_str().unwrap(), cur.to_str().unwrap());
    let outcome: Value = serde_json::from_str(&check_exits(
        &["check", cur, "--baseline", base, "-f", "json"],
        1,
    ))
    .unwrap();
    assert_eq!(rule(&outcome, "new_findings.recompile")["status"], "fail");
    check_exits(&["check", base, "--baseline", base], 0);
}

#[test]
fn check_bad_input_exits_2() {
    let dir = TempDir::new().unwrap();
    fails(
        &["check", CLEAN, "--baseline", "no/such/base.json"],
        "no/such/base.json",
    );

    let future = temp_file(
        &dir,
        "future.json",
        br#"{ "schema": "steplens.report/2", "sources": [] }"#,
    );
    let line = fails(
        &["check", CLEAN, "--baseline", future.to_str().unwrap()],
        "future.json",
    );
    assert!(
        line.contains("steplens.report/2 is not supported"),
        "{line}"
    );

    let broken = temp_file(
        &dir,
        "broken.json",
        br#"{ "schema": "steplens.report/1", "sources": 5 }"#,
    );
    let line = fails(
        &["check", CLEAN, "--baseline", broken.to_str().unwrap()],
        "broken.json",
    );
    assert!(line.contains("line 1 column"), "{line}");

    let typo = temp_file(
        &dir,
        "typo.toml",
        b"[check.step_time]\nmax_increase_precent = 5\n",
    );
    let line = fails(
        &[
            "check",
            CLEAN,
            "--baseline",
            CLEAN,
            "--budget",
            typo.to_str().unwrap(),
        ],
        "typo.toml",
    );
    assert!(line.contains("line 2"), "{line}");

    let out = steplens(&["check", CLEAN]);
    assert_eq!(out.status.code(), Some(2), "--baseline is required");
}

#[test]
fn diff_shows_what_changed() {
    let text = ok(&["diff", CLEAN, SYNC]);
    assert!(text.contains("median step"), "{text}");
    assert!(
        text.contains("appeared  sync_point @ make_torch_samples.py:109"),
        "{text}"
    );
    assert!(
        text.contains("joined on op name and input shapes"),
        "{text}"
    );

    let d = json(&["diff", CLEAN, SYNC, "-f", "json"]);
    assert_eq!(d["schema"], "steplens.diff/1");
    assert_eq!(d["ops_by_shape"], true);
    let ops = d["ops"].as_array().unwrap();
    let item = ops
        .iter()
        .find(|o| o["name"] == "aten::item")
        .expect("aten::item is in the sync run only");
    assert_eq!(item["status"], "added");
    assert!(
        d["appeared"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["key"]["kind"] == "sync_point")
    );
    assert!(d["gone"].as_array().unwrap().is_empty());

    // A run against itself: nothing changed.
    let same = json(&["diff", CLEAN, CLEAN, "-f", "json"]);
    assert!(
        same["ops"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["status"] == "same")
    );
    assert!(same["appeared"].as_array().unwrap().is_empty());

    let md = ok(&["diff", CLEAN, SYNC, "-f", "md"]);
    assert!(md.starts_with("## steplens diff"), "{md}");
    assert!(
        md.contains("| appeared | sync_point @ make_torch_samples.py:109 |"),
        "{md}"
    );
}

#[test]
fn diff_with_a_saved_report_joins_on_names() {
    let dir = TempDir::new().unwrap();
    let saved = dir.path().join("clean.json");
    let out = steplens(&["report", CLEAN, "-f", "json", "-o", saved.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let d = json(&["diff", saved.to_str().unwrap(), SYNC, "-f", "json"]);
    assert_eq!(d["ops_by_shape"], false);
    assert!(
        d["appeared"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["key"]["kind"] == "sync_point")
    );
}

fn table_shape(path: &Path, format: TableFormat) -> (Vec<String>, usize) {
    let shape = read_shape(format, std::fs::read(path).unwrap()).unwrap();
    (
        shape.columns.into_iter().map(|(c, _)| c).collect(),
        shape.rows,
    )
}

#[test]
fn export_tables_read_back() {
    let dir = TempDir::new().unwrap();
    let out = steplens(&["export", GAUDI, "--tables", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let note = stderr(&out);
    assert!(note.starts_with("steplens: wrote 6 tables to"), "{note}");

    let report = support::sample("gaudi/train_hpu.bridge.json.gz");
    let info = json(&["info", GAUDI, "--json"]);
    let slices = info["slices"].as_u64().unwrap() as usize;

    let (columns, rows) = table_shape(&dir.path().join("slices.parquet"), TableFormat::Parquet);
    assert_eq!(rows, slices);
    for c in [
        "track_name",
        "name",
        "category",
        "start_ns",
        "dur_ns",
        "self_ns",
        "depth",
        "step",
    ] {
        assert!(
            columns.iter().any(|x| x == c),
            "slices lacks {c}: {columns:?}"
        );
    }
    let (columns, rows) = table_shape(&dir.path().join("steps.parquet"), TableFormat::Parquet);
    assert_eq!(rows, report.steps.len());
    assert!(columns.iter().any(|c| c == "engine_MME_ns"), "{columns:?}");
    let (_, rows) = table_shape(&dir.path().join("ops.parquet"), TableFormat::Parquet);
    assert_eq!(rows, report.ops.len());
    let (columns, rows) = table_shape(&dir.path().join("findings.parquet"), TableFormat::Parquet);
    assert_eq!(rows, report.findings.len());
    assert!(rows > 0);
    assert!(columns.iter().any(|c| c == "recommendation"));
    let (_, rows) = table_shape(&dir.path().join("engines.parquet"), TableFormat::Parquet);
    assert_eq!(rows, report.engines.len());

    let csv_dir = dir.path().join("csv");
    let out = steplens(&[
        "export",
        CLEAN,
        "--tables",
        csv_dir.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(csv_dir.join("slices.csv")).unwrap();
    assert!(text.starts_with("source,track,track_name,process,track_kind,name,category,"));
    let (_, rows) = table_shape(&csv_dir.join("steps.csv"), TableFormat::Csv);
    assert_eq!(rows, 3);
    // Step names are filled in for slices inside a step.
    assert!(text.contains("ProfilerStep#3"));
}

#[test]
fn export_bad_input_exits_2() {
    let dir = TempDir::new().unwrap();
    let file = temp_file(&dir, "not_a_dir", b"x");
    let target = file.join("tables");
    fails(
        &["export", CLEAN, "--tables", target.to_str().unwrap()],
        "not_a_dir",
    );
    fails(&["export", "missing.json", "--tables", "x"], "missing.json");
    let line = fails(&["export", CLEAN], "--tables");
    assert!(line.contains("nothing to export"), "{line}");
}

#[test]
fn the_readme_example_against_the_committed_baseline() {
    let args = |current: &'static str| {
        [
            "check",
            current,
            "--baseline",
            "samples/ci/baseline.report.json",
            "--budget",
            "samples/ci/steplens.toml",
        ]
    };
    check_exits(&args(CLEAN), 0);
    let text = check_exits(&args(SYNC), 1);
    assert!(failed_row(&text, "new_findings.sync_point"), "{text}");
}
