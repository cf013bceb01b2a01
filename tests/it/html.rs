//! `report -f html` and `diff -f html`: one self-contained page (no network reference), charts as
//! inline SVG, every finding, every op row, and text from the trace escaped (a kernel named
//! `<script>` renders as text).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

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
        page.contains("font-size=\"10\" fill=\"#333\" text-anchor=\"middle\">+"),
        "the strip's axis has round times from the window's start (+<time>)"
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

/// Every single-trace sample, and the 4-rank run, each with its report page.
fn sample_pages() -> Vec<(String, String)> {
    sample_reports()
        .into_iter()
        .map(|(name, report)| (name, steplens_output::html::report_page(&report)))
        .collect()
}

/// The report of every sample trace and of the 4-rank run, by the first file's path.
fn sample_reports() -> Vec<(String, steplens_analysis::Report)> {
    use steplens_ingest::LoadOptions;
    let mut runs: Vec<Vec<std::path::PathBuf>> = support::sample_traces()
        .into_iter()
        .map(|p| vec![p])
        .collect();
    let ranks = support::repo().join("samples/ranks/nccl_straggler");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&ranks)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "the 4-rank run");
    runs.push(files);
    runs.iter()
        .filter_map(|paths| {
            let refs: Vec<&std::path::Path> = paths.iter().map(|p| p.as_path()).collect();
            let t = steplens_ingest::load_many(&refs, &LoadOptions::default(), None).ok()?;
            Some((
                paths[0].display().to_string(),
                steplens_analysis::build_report(&t),
            ))
        })
        .collect()
}

/// Each `<svg>…</svg>` of a page, with the legend right before it (empty when none).
fn charts(page: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(at) = rest.find("<svg") {
        let end = at + rest[at..].find("</svg>").unwrap();
        let before = &rest[..at];
        // The legend belongs to this chart when nothing but a heading lies between them.
        let legend = before
            .rfind("<div class=\"legend\">")
            .map(|l| &before[l..])
            .filter(|l| !l.contains("<svg") && !l.contains("<table"))
            .unwrap_or("");
        out.push((legend, &rest[at..end]));
        rest = &rest[end..];
    }
    out
}

/// A tick label's value: `0`, `+50 ms`, `0.5 s`, `40%`, `0.01`, `1k`, `1e6`.
fn tick_value(label: &str) -> f64 {
    let label = label.trim_start_matches('+');
    if let Some(pct) = label.strip_suffix('%') {
        return pct.parse().unwrap();
    }
    if let Some((num, unit)) = label.split_once(' ') {
        let scale = match unit {
            "s" => 1e9,
            "ms" => 1e6,
            "µs" => 1e3,
            "ns" => 1.0,
            other => panic!("unit {other} in {label}"),
        };
        return num.parse::<f64>().unwrap() * scale;
    }
    if let Some(k) = label.strip_suffix('k') {
        return k.parse::<f64>().unwrap() * 1e3;
    }
    if let Some(e) = label.strip_prefix("1e") {
        return 10f64.powi(e.parse().unwrap());
    }
    label
        .parse()
        .unwrap_or_else(|_| panic!("tick label {label}"))
}

/// 1, 2 or 5 × 10^k.
fn is_round(v: f64) -> bool {
    if v <= 0.0 {
        return false;
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
}

/// Every chart's ticks on every sample's page are round: on a linear axis (time, percent) they
/// are 0 and the multiples of one step of 1, 2 or 5 × 10^k of the unit (0, 50, 100, 150 ms, never
/// 66.6/133/266 ms); on the roofline's log axes each is a power of ten. Each legend names only
/// series its chart draws: every name is in the tooltip of a bar of nonzero height, a line or a
/// point of the chart.
#[test]
fn every_samples_charts_have_round_ticks_and_legends_of_what_they_draw() {
    let pages = sample_pages();
    assert!(pages.len() > 50, "{} pages", pages.len());
    let (mut axes, mut legends) = (0, 0);
    for (name, page) in &pages {
        for (legend, svg) in charts(page) {
            let mut by_axis: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
            for tick in svg.split("<text class=\"tick\" data-axis=\"").skip(1) {
                let axis = &tick[..tick.find('"').unwrap()];
                let label = &tick[tick.find('>').unwrap() + 1..tick.find("</text>").unwrap()];
                by_axis.entry(axis).or_default().push(tick_value(label));
            }
            for (axis, values) in &by_axis {
                axes += 1;
                if axis.starts_with("log-") {
                    for v in values {
                        let d = v.log10();
                        assert!((d - d.round()).abs() < 1e-9, "{name}: {axis} tick {v}");
                    }
                    continue;
                }
                assert!(values.len() >= 2, "{name}: {axis} ticks {values:?}");
                assert_eq!(values[0], 0.0, "{name}: {axis} ticks {values:?}");
                let step = values[1];
                assert!(is_round(step), "{name}: {axis} step {step} in {values:?}");
                for (k, v) in values.iter().enumerate() {
                    let want = step * k as f64;
                    assert!(
                        (v - want).abs() <= 1e-6 * want.max(1.0),
                        "{name}: {axis} ticks {values:?} are not multiples of {step}"
                    );
                }
            }
            if legend.is_empty() {
                continue;
            }
            let legend = &legend[..legend.find("</div>").unwrap()];
            // What the chart draws: tooltips of its bars, lines and points, and whether a bar
            // has a height.
            let drawn: Vec<(&str, bool)> = svg
                .split('<')
                .zip(svg.split('<').skip(1))
                .filter_map(|(element, next)| {
                    let tag = element.split([' ', '>']).next()?;
                    let height = match tag {
                        "rect" => element
                            .split("height=\"")
                            .nth(1)
                            .and_then(|h| h[..h.find('"')?].parse::<f64>().ok())
                            .is_some_and(|h| h > 0.0),
                        "polyline" | "circle" => true,
                        _ => return None,
                    };
                    Some((next.strip_prefix("title>")?, height))
                })
                .collect();
            for entry in legend.split("</i>").skip(1) {
                let series = &entry[..entry.find("</span>").unwrap()];
                legends += 1;
                // A bar too thin to see still counts when its tooltip gives a nonzero value.
                let zero = format!("{series} 0 ns");
                assert!(
                    drawn
                        .iter()
                        .any(|(t, height)| t.contains(series) && (*height || !t.contains(&zero))),
                    "{name}: the legend names {series}, which the chart does not draw"
                );
            }
        }
    }
    assert!(axes > 100, "{axes} axes checked");
    assert!(legends > 100, "{legends} legend entries checked");
}

/// A trace with no device work says so, in the HTML overview and in `info`: no "cpu, 0 active".
#[test]
fn a_host_only_trace_has_no_device_line_of_zero_devices() {
    let sample = support::repo().join("samples/torch-cpu/train_sync.json.gz");
    let path = sample.to_str().unwrap();
    let page = html_of(&["report", "-f", "html", path]);
    assert!(
        page.contains("<tr><th>device</th><td>none (host-only trace)</td></tr>"),
        "the overview's device row"
    );
    let info = support::ok(&["info", path]);
    assert!(info.contains("device     none (host-only trace)"), "{info}");
    let text = support::ok(&["report", path]);
    assert!(text.contains("device   none (host-only trace)"), "{text}");
    for out in [&page, &info, &text] {
        assert!(!out.contains("0 active") && !out.contains("device(s)"));
    }
    // With a device, the count is in the singular for one.
    let gpu = support::repo().join("samples/whatif-cuda/item_sync.problem.json.gz");
    let info = support::ok(&["info", gpu.to_str().unwrap()]);
    assert!(info.contains("(1 device active)"), "{info}");
}

/// Output only renders: a report saved as JSON and read back draws the very page its traces did
/// (every sample and the 4-rank run), so nothing on the page comes from anywhere but the report
/// (and every float reads back as written: serde_json's `float_roundtrip`).
#[test]
fn a_saved_report_renders_the_page_its_trace_did() {
    let reports = sample_reports();
    assert!(reports.len() > 20, "only {} samples loaded", reports.len());
    for (name, report) in &reports {
        let saved = serde_json::to_string(report).unwrap();
        let back: steplens_analysis::Report = serde_json::from_str(&saved).unwrap();
        assert!(
            steplens_output::html::report_page(report) == steplens_output::html::report_page(&back),
            "{name}: the saved report draws another page"
        );
    }
}

/// The same through the CLI: `report saved.json -f html` writes the page `report TRACE -f html`
/// did.
#[test]
fn report_of_a_saved_report_writes_the_same_html() {
    let dir = tempfile::tempdir().unwrap();
    let trace = support::repo().join("samples/gaudi/train_hpu.hw.csv");
    let trace = trace.to_str().unwrap();
    let saved = dir.path().join("run.report.json");
    let saved = saved.to_str().unwrap();
    assert!(
        support::steplens(&["report", trace, "-f", "json", "-o", saved])
            .status
            .success()
    );
    let from_trace = support::ok(&["report", trace, "-f", "html"]);
    let from_saved = support::ok(&["report", saved, "-f", "html"]);
    assert!(from_trace.contains("Engine utilization over the trace"));
    assert!(from_trace == from_saved, "the saved report's page differs");
    // Text too: the report alone carries what the text report shows.
    assert_eq!(
        support::ok(&["report", trace]),
        support::ok(&["report", saved])
    );
}
