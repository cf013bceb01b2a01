//! One saving on every screen (issue 49): the HTML report of every sample charts what fixing
//! each kind of finding saves, in the findings' order and with their figures; no text a user
//! reads names a finding by its kind id; and on every multi-rank run the per-step figures are
//! per rank (at most a step) and the headline's parts add up to at most 100 %.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use steplens_analysis::{FindingKind, Report};
use steplens_ingest::{LoadOptions, Timeline};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every single-file trace under `samples/` (a file that does not load alone is left out).
fn sample_traces() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("list samples") {
            let path = entry.expect("entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if name != "gen" {
                    walk(&path, out);
                }
                continue;
            }
            if [".json", ".json.gz", ".csv", ".pftrace", ".tef", ".hltv"]
                .iter()
                .any(|e| name.ends_with(e))
                && !name.ends_with(".truth.json")
                && !name.ends_with(".report.json")
            {
                out.push(path);
            }
        }
    }
    let mut traces = Vec::new();
    walk(&repo().join("samples"), &mut traces);
    traces.sort();
    traces
}

/// The multi-rank runs: each `samples/ranks/<run>/` and the two 4-rank runs of `samples/ci-aa/`.
fn rank_runs() -> Vec<Vec<PathBuf>> {
    let mut runs = Vec::new();
    let ranks = repo().join("samples/ranks");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&ranks)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("_rank") && !p.ends_with(".truth.json"))
            .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
            .collect();
        files.sort();
        runs.push(files);
    }
    for prefix in ["ddp", "straggler"] {
        runs.push(
            (0..4)
                .map(|r| repo().join(format!("samples/ci-aa/{prefix}_rank{r}.json.gz")))
                .collect(),
        );
    }
    assert!(runs.len() >= 3 && runs.iter().all(|r| r.len() > 1));
    runs
}

fn load(paths: &[PathBuf]) -> Option<Timeline> {
    let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    steplens_ingest::load_many(&paths, &LoadOptions::default(), None).ok()
}

/// The page's text as a reader sees it: no scripts or styles, no tags (so no attributes).
fn visible_text(html: &str) -> String {
    let mut out = html.to_owned();
    for block in ["script", "style"] {
        let (open, close) = (format!("<{block}"), format!("</{block}>"));
        while let Some(at) = out.find(&open) {
            let end = out[at..]
                .find(&close)
                .map_or(out.len(), |e| at + e + close.len());
            out.replace_range(at..end, "");
        }
    }
    let mut text = String::new();
    let mut in_tag = false;
    for c in out.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

/// The savings chart's bars, in order: (label, ns).
fn savings_bars(html: &str) -> Vec<(String, i64)> {
    let Some(at) = html.find("data-chart=\"savings-by-kind\"") else {
        return Vec::new();
    };
    let chart = &html[at..at + html[at..].find("</div>").unwrap()];
    chart
        .split("<rect ")
        .skip(1)
        .map(|bar| {
            let ns = bar.split("data-ns=\"").nth(1).unwrap();
            let ns: i64 = ns[..ns.find('"').unwrap()].parse().unwrap();
            let title = bar.split("<title>").nth(1).unwrap();
            let label = title[..title.find("</title>").unwrap()]
                .rsplit_once(": ")
                .unwrap()
                .0
                .to_owned();
            (label, ns)
        })
        .collect()
}

/// What the chart must show: every kind with a saving, by saving (ties by kind), from the
/// findings themselves.
fn expected_bars(report: &Report) -> Vec<(String, i64)> {
    let mut by_kind: std::collections::BTreeMap<FindingKind, i64> = Default::default();
    for f in &report.findings {
        *by_kind.entry(f.kind).or_insert(0) += f.saving_ns;
    }
    assert_eq!(
        by_kind.iter().filter(|(_, v)| **v != 0).collect::<Vec<_>>(),
        report
            .summary
            .saving_ns_by_kind
            .iter()
            .filter(|(_, v)| **v != 0)
            .collect::<Vec<_>>(),
        "summary.saving_ns_by_kind is the findings' savings added up"
    );
    let mut kinds: Vec<(FindingKind, i64)> = by_kind.into_iter().filter(|k| k.1 > 0).collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    kinds
        .into_iter()
        .map(|(k, v)| (k.title().to_owned(), v))
        .collect()
}

/// Kind ids a reader could mistake for prose are left out: one-word ids are English words.
fn kind_ids_in(text: &str, report: &Report) -> Vec<&'static str> {
    // What the trace itself named (paths, call sites, ops) may contain anything.
    let mut text = text.to_owned();
    for s in &report.sources {
        text = text.replace(&s.path, "");
    }
    for f in &report.findings {
        if let Some(site) = &f.call_site {
            text = text.replace(site, "");
        }
    }
    FindingKind::ALL
        .iter()
        .map(|k| k.as_str())
        .filter(|id| id.contains('_') && text.contains(id))
        .collect()
}

fn check_page(name: &str, report: &Report) {
    let html = steplens_output::html::report_page(report);
    assert_eq!(
        savings_bars(&html),
        expected_bars(report),
        "{name}: the savings chart"
    );
    // Groups (what every output lists) are ranked by saving.
    let groups = report.groups();
    assert!(
        groups.windows(2).all(|w| w[0].saving_ns >= w[1].saving_ns),
        "{name}: groups by saving"
    );
    let ids = kind_ids_in(&visible_text(&html), report);
    assert!(ids.is_empty(), "{name}: kind ids in the HTML text: {ids:?}");
    let mut md = Vec::new();
    steplens_output::text::markdown(&mut md, report, 10).unwrap();
    let ids = kind_ids_in(&String::from_utf8(md).unwrap(), report);
    assert!(ids.is_empty(), "{name}: kind ids in the Markdown: {ids:?}");
}

#[test]
fn every_samples_html_charts_the_findings_savings_and_no_kind_ids() {
    let traces = sample_traces();
    assert!(traces.len() > 50);
    let mut checked = 0;
    for path in &traces {
        let Some(t) = load(std::slice::from_ref(path)) else {
            continue;
        };
        let report = steplens_analysis::build_report(&t);
        check_page(&path.display().to_string(), &report);
        checked += 1;
    }
    assert!(checked > 50, "{checked} samples checked");
}

/// `1.04 s`, `36.2 ms`, `241 µs`, `12 ns` back to ns.
fn parse_human(text: &str) -> i64 {
    let (num, unit) = text.trim().split_once(' ').unwrap();
    let num: f64 = num.replace(',', "").parse().unwrap();
    let scale = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "µs" => 1e3,
        "ns" => 1.0,
        other => panic!("unit {other}"),
    };
    (num * scale) as i64
}

#[test]
fn multi_rank_figures_are_per_rank_and_the_headline_adds_up() {
    let mut waits = 0;
    for run in rank_runs() {
        let name = run[0].parent().unwrap().display().to_string();
        let t = load(&run).unwrap_or_else(|| panic!("{name} loads"));
        let report = steplens_analysis::build_report(&t);
        assert!(report.steps.iter().any(|s| s.rank.is_some()), "{name}");
        let longest = report.steps.iter().map(|s| s.dur_ns).max().unwrap();
        let all_steps = report.steps.len() as i64;
        for f in &report.findings {
            // Per step and per rank: a per-step finding's saving is one step's, a whole-run
            // one's (counted once per rank) spreads over every rank's steps.
            let per_step = match &f.step {
                Some(_) => f.saving_ns,
                None => f.saving_ns / all_steps,
            };
            assert!(
                per_step <= longest,
                "{name}: {} saves {per_step} ns per step, longest step {longest} ns",
                f.kind
            );
            if let Some((_, wait)) = f.title.split_once("waits ") {
                let wait = parse_human(wait.split(" per step").next().unwrap());
                waits += 1;
                assert!(
                    wait <= longest,
                    "{name}: {} says each rank waits {wait} ns per step, longest step {longest} ns",
                    f.title
                );
            }
            assert!(
                !f.title.contains("the other ranks wait"),
                "{name}: a summed wait in {}",
                f.title
            );
        }
        if let Some(pct) = report.summary.saving_pct_of_steps {
            assert!(pct <= 100.0, "{name}: {pct}");
        }
        let html = steplens_output::html::report_page(&report);
        let headline = html.split("<p class=\"headline\">").nth(1).unwrap();
        let headline = visible_text(&headline[..headline.find("</p>").unwrap()]);
        if let Some((_, parts)) = headline.split_once("% of step time: ") {
            let shares: Vec<f64> = parts
                .split(", ")
                .map(|p| p.split('%').next().unwrap().trim().parse().unwrap())
                .collect();
            // Each share is rounded to a whole percent.
            let sum: f64 = shares.iter().sum();
            assert!(
                sum <= 100.0 + 0.5 * shares.len() as f64,
                "{name}: the headline's parts add up to {sum}%: {parts}"
            );
        }
        check_page(&name, &report);
    }
    assert!(waits > 0, "no straggler among the runs");
}
