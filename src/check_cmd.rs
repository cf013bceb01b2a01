//! `steplens check`: the run against a baseline under a budget, and the verdict as terminal text,
//! JSON, JUnit XML, GitHub workflow annotations and a Markdown summary.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use steplens_analysis::check::{CheckOutcome, RuleResult, Status, check};
use steplens_analysis::compare::RunFigures;
use steplens_analysis::units::human_ns;

use crate::render::{Style, Table, truncate};
use crate::run_input::{Run, is_baseline_set, load_pair, load_run, read_baseline_set};
use crate::{LoadArgs, output, read_budget};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CheckFormat {
    /// The verdict and a table of rules.
    Text,
    /// The `steplens.check/1` JSON.
    Json,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The run to check: trace files (several for ranks) or one saved JSON report.
    #[arg(required = true)]
    current: Vec<PathBuf>,
    /// The baseline: trace files (several for ranks), one saved JSON report (`steplens report -f
    /// json`), or a baseline set kept by `steplens baseline update` (its runs are pooled).
    #[arg(long, required = true, num_args = 1.., value_name = "BASE")]
    baseline: Vec<PathBuf>,
    /// Another baseline run of the same work (a trace or a saved report), repeatable: all
    /// baseline runs' steps are pooled and the spread between their median steps sets the
    /// run-to-run noise floor of the step rules.
    #[arg(long, value_name = "RUN")]
    baseline_run: Vec<PathBuf>,
    /// Budget file (TOML): `[check]` limits and allowed findings, `[thresholds]` for detectors.
    #[arg(long, value_name = "FILE")]
    budget: Option<PathBuf>,
    /// Steps left out at the start of each input (overrides the budget; default 1).
    #[arg(long, value_name = "N")]
    warmup: Option<usize>,
    /// Output format on stdout.
    #[arg(long, short = 'f', value_enum, default_value_t = CheckFormat::Text)]
    format: CheckFormat,
    /// Also write JUnit XML (one test case per rule) to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Also print GitHub Actions annotations (`::error …`) for failed rules.
    #[arg(long)]
    github: bool,
    /// Also append a Markdown summary to FILE (e.g. `$GITHUB_STEP_SUMMARY`).
    #[arg(long, value_name = "FILE")]
    summary_md: Option<PathBuf>,
    /// Also write a self-contained HTML page of the verdict to FILE (a CI artifact).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

/// Runs the check; `Ok(false)` means a rule failed.
impl CheckArgs {
    /// Whether the output is JSON (errors are then written as JSON too).
    pub(crate) fn json_output(&self) -> bool {
        self.format == CheckFormat::Json
    }
}

pub(crate) fn run(args: &CheckArgs) -> Result<bool> {
    let budget = match &args.budget {
        Some(path) => read_budget(path)?,
        None => steplens_analysis::budget::Budget::default(),
    };
    let mut limits = budget.check;
    if let Some(warmup) = args.warmup {
        limits.warmup_steps = warmup;
    }
    let (current, mut baseline, mut runs) = match args.baseline.as_slice() {
        // A baseline set (`steplens baseline update`): every kept run, newest shown.
        [path] if is_baseline_set(path) => {
            let set = read_baseline_set(path)?;
            let runs: Vec<RunFigures> = set
                .runs
                .iter()
                .map(|r| RunFigures::of(r, limits.warmup_steps))
                .collect();
            let newest =
                set.runs.into_iter().next_back().with_context(|| {
                    format!("{}: the baseline set holds no run", path.display())
                })?;
            let current = load_run(
                &args.current,
                &args.load.options(),
                &budget.thresholds,
                false,
            )?;
            let baseline = Run {
                label: format!("{} ({} runs)", path.display(), runs.len()),
                ops: steplens_analysis::op_rows::ops_from_report(&newest),
                report: newest,
                from_report: true,
            };
            (current, baseline, runs)
        }
        _ => {
            let (current, baseline) = load_pair(
                &args.current,
                &args.baseline,
                &args.load.options(),
                &budget.thresholds,
                false,
            )?;
            let runs = vec![RunFigures::of(&baseline.report, limits.warmup_steps)];
            (current, baseline, runs)
        }
    };
    for path in &args.baseline_run {
        let run = load_run(
            std::slice::from_ref(path),
            &args.load.options(),
            &budget.thresholds,
            false,
        )?;
        runs.push(RunFigures::of(&run.report, limits.warmup_steps));
        baseline.label = format!("{} | {}", baseline.label, run.label);
    }
    let base_figures = RunFigures::pooled(&runs).context("--baseline names no run")?;
    let cur_figures = RunFigures::of(&current.report, limits.warmup_steps);
    let outcome = check(&base_figures, &cur_figures, &limits);

    let (mut out, color) = output(None)?;
    match args.format {
        CheckFormat::Text => text(&mut out, &outcome, &baseline, &current, Style { color })?,
        CheckFormat::Json => {
            let mut value = serde_json::to_value(&outcome)?;
            if let Some(obj) = value.as_object_mut() {
                obj.insert("baseline_input".into(), baseline.label.clone().into());
                obj.insert("current_input".into(), current.label.clone().into());
            }
            serde_json::to_writer_pretty(&mut out, &value)?;
            writeln!(out)?;
        }
    }
    if args.github {
        github(&mut out, &outcome)?;
    }
    out.flush()?;
    if let Some(path) = &args.junit {
        write_file(
            path,
            &junit(&outcome, &baseline, &current, &timestamp_utc()),
        )?;
    }
    if let Some(path) = &args.summary_md {
        append_file(path, &markdown(&outcome, &baseline, &current))?;
    }
    if let Some(path) = &args.html {
        write_file(
            path,
            &crate::html::check_page(&outcome, &baseline.label, &current.label),
        )?;
    }
    Ok(outcome.passed)
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Appends, as GitHub expects for `$GITHUB_STEP_SUMMARY` (other steps write to it too).
fn append_file(path: &Path, text: &str) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

fn side_line(run: &Run, figures: &RunFigures) -> String {
    let median = figures.step_p50_ns.map_or_else(
        || "no steps".to_owned(),
        |ns| format!("median step {}", human_ns(ns)),
    );
    let kind = if run.from_report {
        " (saved report)"
    } else {
        ""
    };
    format!(
        "{}{kind}: {} steps, {} warm-up left out, {median}",
        run.label, figures.steps_total, figures.warmup_skipped
    )
}

fn verdict(outcome: &CheckOutcome) -> String {
    let failed = outcome.failures().count();
    let count = |status: Status| outcome.rules.iter().filter(|r| r.status == status).count();
    let mut also = String::new();
    for (n, what) in [
        (
            count(Status::Inconclusive),
            "inconclusive (within the noise)",
        ),
        (count(Status::Warn), "warnings"),
    ] {
        if n > 0 {
            also.push_str(&format!("; {n} {what}"));
        }
    }
    if outcome.passed {
        format!("passed ({} rules{also})", outcome.rules.len())
    } else {
        format!(
            "REGRESSED ({failed} of {} rules failed{also})",
            outcome.rules.len()
        )
    }
}

fn status_word(status: Status) -> &'static str {
    match status {
        Status::Pass => "pass",
        Status::Fail => "FAIL",
        Status::Inconclusive => "noise?",
        Status::Warn => "warn",
        Status::Skipped => "skip",
    }
}

fn text(
    out: &mut dyn Write,
    outcome: &CheckOutcome,
    baseline: &Run,
    current: &Run,
    style: Style,
) -> io::Result<()> {
    let head = format!("steplens check: {}", verdict(outcome));
    let head = if outcome.passed {
        style.bold(&head)
    } else {
        style.paint("1;31", &head)
    };
    writeln!(out, "{head}")?;
    writeln!(
        out,
        "  baseline  {}",
        side_line(baseline, &outcome.baseline)
    )?;
    writeln!(out, "  current   {}", side_line(current, &outcome.current))?;
    writeln!(out)?;
    let table = rules_table(
        outcome,
        |s| status_word(s).to_owned(),
        |rule| {
            // Kernel names run to hundreds of characters; the JSON and JUnit keep them whole.
            truncate(rule, 72)
        },
    );
    table.text(out, style)?;
    let failures: Vec<&RuleResult> = outcome.failures().collect();
    if !failures.is_empty() {
        writeln!(out)?;
        for rule in failures {
            writeln!(
                out,
                "  {} {}: {}",
                style.paint("31", "✗"),
                rule.rule,
                rule.message
            )?;
            for new in &rule.new_findings {
                writeln!(out, "      {}", style.dim(&new.title))?;
            }
        }
    }
    let others: Vec<&RuleResult> = outcome
        .rules
        .iter()
        .filter(|r| matches!(r.status, Status::Inconclusive | Status::Warn))
        .collect();
    if !others.is_empty() {
        writeln!(out)?;
        for rule in others {
            writeln!(
                out,
                "  {} {}: {}",
                style.yellow("?"),
                rule.rule,
                rule.message
            )?;
        }
    }
    Ok(())
}

/// Escapes a GitHub workflow-command message (`%`, CR and LF), and property values (also `:`
/// and `,`).
fn gh_escape(s: &str, property: bool) -> String {
    let mut out = s
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    if property {
        out = out.replace(':', "%3A").replace(',', "%2C");
    }
    out
}

fn github(out: &mut dyn Write, outcome: &CheckOutcome) -> io::Result<()> {
    for rule in outcome.failures() {
        if rule.new_findings.is_empty() {
            writeln!(
                out,
                "::error title={}::{}",
                gh_escape(&format!("steplens {}", rule.rule), true),
                gh_escape(&rule.message, false)
            )?;
            continue;
        }
        // A new finding with a call site is annotated on that line of the source.
        for new in &rule.new_findings {
            let location = new
                .key
                .site
                .rsplit_once(':')
                .filter(|(file, line)| {
                    !file.is_empty() && line.chars().all(|c| c.is_ascii_digit()) && !line.is_empty()
                })
                .map(|(file, line)| format!("file={},line={line},", gh_escape(file, true)))
                .unwrap_or_default();
            writeln!(
                out,
                "::error {location}title={}::{}",
                gh_escape(&format!("steplens new {}", new.key.kind), true),
                gh_escape(&new.title, false)
            )?;
        }
    }
    let notice = format!(
        "steplens check {}: median step {} -> {}",
        verdict(outcome),
        outcome
            .baseline
            .step_p50_ns
            .map_or_else(|| "-".into(), human_ns),
        outcome
            .current
            .step_p50_ns
            .map_or_else(|| "-".into(), human_ns)
    );
    writeln!(
        out,
        "::notice title=steplens check::{}",
        gh_escape(&notice, false)
    )
}

fn markdown(outcome: &CheckOutcome, baseline: &Run, current: &Run) -> String {
    let mut md = String::new();
    let mark = if outcome.passed { "✅" } else { "❌" };
    let _ = writeln!(md, "### {mark} steplens check {}\n", verdict(outcome));
    let _ = writeln!(
        md,
        "- **baseline** `{}`",
        side_line(baseline, &outcome.baseline)
    );
    let _ = writeln!(
        md,
        "- **current** `{}`\n",
        side_line(current, &outcome.current)
    );
    let icon = |s: Status| match s {
        Status::Pass => "✅",
        Status::Fail => "❌",
        Status::Inconclusive => "❔",
        Status::Warn => "⚠️",
        Status::Skipped => "➖",
    };
    let table = rules_table(outcome, |s| icon(s).to_owned(), |rule| format!("`{rule}`"));
    let mut bytes = Vec::new();
    let _ = table.markdown(&mut bytes);
    md.push_str(&String::from_utf8_lossy(&bytes));
    let failures: Vec<&RuleResult> = outcome.failures().collect();
    if !failures.is_empty() {
        md.push_str("\n**What regressed**\n\n");
        for rule in failures {
            let _ = writeln!(md, "- `{}`: {}", rule.rule, rule.message);
            for new in &rule.new_findings {
                let _ = writeln!(md, "  - {}", new.title);
            }
        }
    }
    md
}

/// The rules as a table, failures first (so they are on screen), then the rest in rule order.
fn rules_table(
    outcome: &CheckOutcome,
    status_cell: impl Fn(Status) -> String,
    rule_cell: impl Fn(&str) -> String,
) -> Table {
    let mut table = Table::new(&[
        ("", false),
        ("rule", false),
        ("baseline", true),
        ("current", true),
        ("change", true),
        ("interval", true),
        ("limit", false),
    ]);
    let ordered = outcome
        .rules
        .iter()
        .filter(|r| r.status == Status::Fail)
        .chain(outcome.rules.iter().filter(|r| r.status != Status::Fail));
    for rule in ordered {
        table.row(vec![
            status_cell(rule.status),
            rule_cell(&rule.rule),
            rule.baseline.clone(),
            rule.current.clone(),
            rule.change.clone(),
            rule.interval.clone(),
            rule.limit.clone(),
        ]);
    }
    table
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters other than tab and newlines are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML in the structure of the Ant/Jenkins schema: `testsuites` > `testsuite` (with
/// name, tests, failures, errors, skipped, time, timestamp, hostname) > `properties`,
/// `testcase`s, `system-out`, `system-err`.
fn junit(outcome: &CheckOutcome, baseline: &Run, current: &Run, timestamp: &str) -> String {
    let tests = outcome.rules.len();
    let failures = outcome.failures().count();
    let skipped = outcome
        .rules
        .iter()
        .filter(|r| r.status == Status::Skipped)
        .count();
    let mut x = String::new();
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"steplens check\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"0\">"
    );
    let _ = writeln!(
        x,
        "  <testsuite name=\"steplens check\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"0\" timestamp=\"{timestamp}\" hostname=\"localhost\">"
    );
    x.push_str("    <properties>\n");
    for (name, value) in [
        ("baseline", baseline.label.as_str()),
        ("current", current.label.as_str()),
    ] {
        let _ = writeln!(
            x,
            "      <property name=\"{name}\" value=\"{}\"/>",
            xml_escape(value)
        );
    }
    x.push_str("    </properties>\n");
    for rule in &outcome.rules {
        let _ = write!(
            x,
            "    <testcase name=\"{}\" classname=\"steplens.check\" time=\"0\"",
            xml_escape(&rule.rule)
        );
        match rule.status {
            Status::Pass => x.push_str("/>\n"),
            // Not failures: said in the test case's output so a CI page shows them.
            Status::Inconclusive | Status::Warn => {
                let _ = writeln!(
                    x,
                    ">\n      <system-out>{}: {}</system-out>\n    </testcase>",
                    status_word(rule.status).to_lowercase(),
                    xml_escape(&rule.message)
                );
            }
            Status::Skipped => {
                let _ = writeln!(
                    x,
                    ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                    xml_escape(&rule.message)
                );
            }
            Status::Fail => {
                let mut detail = format!(
                    "baseline {}, current {}, change {}, limit {}",
                    rule.baseline, rule.current, rule.change, rule.limit
                );
                for new in &rule.new_findings {
                    detail.push('\n');
                    detail.push_str(&new.title);
                }
                let _ = writeln!(
                    x,
                    ">\n      <failure message=\"{}\" type=\"regression\">{}</failure>\n    </testcase>",
                    xml_escape(&rule.message),
                    xml_escape(&detail)
                );
            }
        }
    }
    let _ = writeln!(
        x,
        "    <system-out>{}</system-out>",
        xml_escape(&format!(
            "baseline: {}\ncurrent: {}",
            side_line(baseline, &outcome.baseline),
            side_line(current, &outcome.current)
        ))
    );
    x.push_str("    <system-err></system-err>\n");
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// Now in UTC as `YYYY-MM-DDTHH:MM:SS` (JUnit's timestamp has no zone).
fn timestamp_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
