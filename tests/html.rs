//! `report -f html` and `diff -f html`: one self-contained page (no network reference), charts as
//! inline SVG, every finding, every op row, and text from the trace escaped (a kernel named
//! `<script>` renders as text).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

fn html_of(args: &[&str]) -> String {
    let out = support::steplens(args);
    assert!(out.status.success(), "{}", support::stderr(&out));
    support::stdout(&out)
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let out = support::steplens(args);
    assert!(out.status.success(), "{}", support::stderr(&out));
    serde_json::from_str(&support::stdout(&out)).unwrap()
}

fn assert_self_contained(page: &str) {
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    for remote in ["http://", "https://", "src=\"//", "<link"] {
        // The SVG namespace is the only URL a page may name, and it is never fetched.
        let hits = page.matches(remote).count();
        assert_eq!(hits, 0, "{remote} appears in the page");
    }
}

#[test]
fn a_report_page_has_charts_findings_and_every_op() {
    let sample = support::repo().join("samples/kineto-compat/pt2_x.json.gz");
    let page = html_of(&["report", "-f", "html", sample.to_str().unwrap()]);
    assert_self_contained(&page);
    assert!(
        page.matches("<svg").count() >= 5,
        "charts and evidence timelines"
    );
    assert!(page.contains("median step"));
    assert!(page.contains("data-kind=\"dataloader_stall\""));
    assert!(page.contains("data-kind=\"sync_point\""));
    let report = json_of(&["report", "-f", "json", sample.to_str().unwrap()]);
    let ops = report["ops"].as_array().unwrap().len();
    let table = page
        .split("id=\"ops\"")
        .nth(1)
        .and_then(|rest| rest.split("</table>").next())
        .expect("the ops table");
    assert_eq!(
        table.matches("<tr>").count(),
        ops + 1,
        "every op row and the header"
    );
    // The TensorBoard plugin views follow, as sortable tables.
    for id in ["tb-steps", "tb-ops", "tb-ops-shape"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "{id}");
    }
}

#[test]
fn trace_text_is_escaped_in_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("evil.json");
    std::fs::write(
        &trace,
        r#"[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":100},
            {"ph":"X","cat":"cpu_op","name":"<script>alert(1)</script>","pid":1,"tid":1,"ts":1,"dur":50}]"#,
    )
    .unwrap();
    let page = html_of(&["report", "-f", "html", trace.to_str().unwrap()]);
    assert!(!page.contains("<script>alert(1)"), "unescaped trace text");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // The page's own script is the only one.
    assert_eq!(page.matches("<script>").count(), 1);
}

#[test]
fn a_diff_page_compares_the_runs() {
    let a = support::repo().join("samples/ci-aa/same_script_a.json.gz");
    let b = support::repo().join("samples/ci-aa/newsync.json.gz");
    let page = html_of(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-f",
        "html",
    ]);
    assert_self_contained(&page);
    assert!(page.contains("steplens diff"));
    assert!(page.contains("<b>appeared</b> sync_point"), "the new sync");
    assert!(page.contains("id=\"ops\""));
}

#[test]
fn a_check_page_is_written_beside_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let page_path = dir.path().join("check.html");
    let base = support::repo().join("samples/ci-aa/same_script_a.json.gz");
    let cur = support::repo().join("samples/ci-aa/newsync.json.gz");
    let out = support::steplens(&[
        "check",
        cur.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
        "--html",
        page_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "the new sync fails the check");
    let page = std::fs::read_to_string(&page_path).unwrap();
    assert_self_contained(&page);
    assert!(page.contains("REGRESSED"));
    assert!(page.contains("new_findings.sync_point"));
}

#[test]
fn ranks_and_memory_have_their_tables() {
    let ranks: Vec<String> = (0..4)
        .map(|r| {
            support::repo()
                .join(format!("samples/ci-aa/straggler_rank{r}.json.gz"))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut args = vec!["report", "-f", "html"];
    args.extend(ranks.iter().map(String::as_str));
    let page = html_of(&args);
    assert!(page.contains("id=\"ranks\"") && page.contains("id=\"collectives\""));
    assert!(page.contains("data-kind=\"straggler\""));
    let leak = support::repo().join("samples/memory/train_leak.json.gz");
    let page = html_of(&["report", "-f", "html", leak.to_str().unwrap()]);
    assert!(page.contains("id=\"memory\"") && page.contains("id=\"holders\""));
    assert!(page.contains("generate.py:50"));
}

/// The compile steps of a torch.compile run draw as compile in the step chart: the part is the
/// step's `compile_ns` (or its recompile finding's time, whichever is larger), cut to the step;
/// a finding's evidence strip has a caption naming its window and a time axis.
#[test]
fn compile_steps_draw_as_compile_and_evidence_has_an_axis() {
    use steplens_analysis::units::human_ns;
    let sample = support::repo().join("samples/whatif/recompile_shapes.problem.json.gz");
    let page = html_of(&["report", "-f", "html", sample.to_str().unwrap()]);
    let report = json_of(&["report", "-f", "json", sample.to_str().unwrap()]);
    let findings = report["findings"].as_array().unwrap();
    let mut checked = 0;
    for step in report["steps"].as_array().unwrap() {
        let name = step["name"].as_str().unwrap();
        let dur = step["dur_ns"].as_i64().unwrap();
        let recompile: i64 = findings
            .iter()
            .filter(|f| f["kind"] == "recompile" && f["step"] == name)
            .map(|f| f["lost_ns"].as_i64().unwrap())
            .sum();
        let want = step["compile_ns"]
            .as_i64()
            .unwrap_or(0)
            .max(recompile)
            .min(dur);
        if want == 0 {
            continue;
        }
        let part = format!("<title>{name}: compile {} (", human_ns(want));
        assert!(page.contains(&part), "{name}: no {part}");
        checked += 1;
    }
    assert!(checked >= 3, "the sample compiles in at least three steps");
    assert!(page.contains("evidence slice"), "a caption over the strip");
    assert!(
        page.contains("text-anchor=\"end\" fill=\"#333\">+"),
        "the strip's axis ends at +<window>"
    );
}

/// With several ranks, the step chart groups each rank's bars under its name, and a finding
/// card's strip is drawn in its own rank's step.
#[test]
fn rank_steps_are_grouped_and_labelled() {
    let page = html_of(&["report", "-f", "html", "samples/ranks/nccl_straggler"]);
    for rank in 0..4 {
        assert!(
            page.contains(&format!(">rank {rank}</text>")),
            "rank {rank}"
        );
    }
    assert!(page.contains("ProfilerStep#3 [rank 2]: device busy"));
    // A card's strip is drawn in its lead finding's own step and rank (the first card with a
    // step: the straggler, which saves most, belongs to no one step).
    let report = json_of(&["report", "-f", "json", "samples/ranks/nccl_straggler"]);
    let lead = report["finding_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &report["findings"][g["findings"][0].as_u64().unwrap() as usize])
        .find(|f| f["step"].is_string())
        .expect("a card whose lead finding has a step");
    let caption = format!(
        "evidence slice in {} [rank {}]",
        lead["step"].as_str().unwrap(),
        lead["rank"]
    );
    assert!(page.contains(&caption), "{caption}");
}

/// The roofline: one point per op signature with FLOPs and bytes, at the JSON's intensity and
/// rate; the device's roofs drawn; every signature in the table.
#[test]
fn the_roofline_plots_each_signature_against_the_roofs() {
    let sample = support::repo().join("samples/whatif-cuda/fp32_matmul.problem.json.gz");
    let path = sample.to_str().unwrap();
    let page = html_of(&["report", "-f", "html", path]);
    assert_self_contained(&page);
    let report = json_of(&["report", "-f", "json", path]);
    let rows = report["op_perf"].as_array().unwrap();
    let plotted = rows
        .iter()
        .filter(|r| {
            r["flops_per_byte"].as_f64().is_some_and(|v| v > 0.0)
                && r["tflops_per_s"].as_f64().is_some_and(|v| v > 0.0)
        })
        .count();
    assert!(plotted >= 5, "{plotted} signatures with work");
    let section = &page[page.find("id=\"roofline\"").expect("roofline section")..];
    let svg = &section[..section.find("</svg>").unwrap()];
    assert_eq!(svg.matches("<circle").count(), plotted);
    // An H100: both roofs, each a bandwidth slope then a flat peak.
    assert!(svg.contains("fp32 roof: 67 TFLOP/s") && svg.contains("bf16/fp16 roof: 989 TFLOP/s"));
    // Every fp32 GEMM reads as compute-bound, at most its own dtype's peak.
    for r in rows.iter().filter(|r| r["family"] == "gemm") {
        assert_eq!(r["bound"], "compute", "{r}");
        assert!(r["pct_of_peak_compute"].as_f64().unwrap() <= 100.0, "{r}");
    }
    let table = &section[section.find("id=\"roofline-ops\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(table.matches("<tr>").count(), rows.len() + 1);
}
