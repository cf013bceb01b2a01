//! The regression check's renderers: terminal text, Markdown, JUnit XML and GitHub
//! annotations, one row (or test case, or annotation) per rule.

use std::fmt::Write as _;
use std::io::{self, Write};

use steplens_analysis::compare::check::{CheckOutcome, RuleResult, Status};
use steplens_analysis::compare::figures::RunFigures;
use steplens_analysis::units::human_ns;

use crate::escape;
use crate::text::{Style, Table, truncate};

/// One side of a comparison as the renderers name it.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// What the user named (paths, a baseline set), for headings.
    pub label: &'a str,
    /// Whether it came from a saved report rather than a trace.
    pub from_report: bool,
}

fn side_line(run: &Side<'_>, figures: &RunFigures) -> String {
    let median = figures.step_p50_ns.map_or_else(
        || "no steps".to_owned(),
        |ns| format!("median step {}", human_ns(ns)),
    );
    // A baseline set's label already says "(N runs)": it is saved reports by definition.
    let kind = if run.from_report && !run.label.ends_with(" runs)") {
        " (saved report)"
    } else {
        ""
    };
    format!(
        "{}{kind}: {}, {} warm-up left out, {median}",
        run.label,
        crate::count::plural(figures.steps_total as u64, "step"),
        figures.warmup_skipped
    )
}

fn verdict(outcome: &CheckOutcome) -> String {
    let failed = outcome.failures().count();
    let count = |status: Status| outcome.rules.iter().filter(|r| r.status == status).count();
    let mut also = String::new();
    let inconclusive = count(Status::Inconclusive);
    if inconclusive > 0 {
        also.push_str(&format!("; {inconclusive} inconclusive (within the noise)"));
    }
    let warnings = count(Status::Warn);
    if warnings > 0 {
        also.push_str(&format!(
            "; {}",
            crate::count::plural(warnings as u64, "warning")
        ));
    }
    let rules = crate::count::plural(outcome.rules.len() as u64, "rule");
    if outcome.passed {
        format!("passed ({rules}{also})")
    } else {
        format!("REGRESSED ({failed} of {rules} failed{also})")
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

/// The check as a terminal report: verdict, both sides and one row per rule.
pub fn text(
    out: &mut dyn Write,
    outcome: &CheckOutcome,
    baseline: &Side<'_>,
    current: &Side<'_>,
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
        escape::terminal(&side_line(baseline, &outcome.baseline))
    )?;
    writeln!(
        out,
        "  current   {}",
        escape::terminal(&side_line(current, &outcome.current))
    )?;
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
                escape::terminal(&rule.rule),
                escape::terminal(&rule.message)
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
                escape::terminal(&rule.rule),
                escape::terminal(&rule.message)
            )?;
        }
    }
    Ok(())
}

/// Escapes a GitHub workflow-command message (`%`, CR and LF), and property values (also `:`
/// and `,`); other control characters are written visibly, as in text.
fn gh_escape(s: &str, property: bool) -> String {
    let mut out = s
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    if property {
        out = out.replace(':', "%3A").replace(',', "%2C");
    }
    escape::terminal(&out).into_owned()
}

/// GitHub Actions workflow commands: an `::error` / `::warning` annotation per failed or
/// warned rule.
///
/// # Errors
/// When `out` cannot be written.
pub fn github(out: &mut dyn Write, outcome: &CheckOutcome) -> io::Result<()> {
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

/// The check as Markdown (for `$GITHUB_STEP_SUMMARY`).
pub fn markdown(outcome: &CheckOutcome, baseline: &Side<'_>, current: &Side<'_>) -> String {
    let mut md = String::new();
    let mark = if outcome.passed { "✅" } else { "❌" };
    let _ = writeln!(md, "### {mark} steplens check {}\n", verdict(outcome));
    let _ = writeln!(
        md,
        "- **baseline** {}",
        escape::markdown_code(&side_line(baseline, &outcome.baseline))
    );
    let _ = writeln!(
        md,
        "- **current** {}\n",
        escape::markdown_code(&side_line(current, &outcome.current))
    );
    let icon = |s: Status| match s {
        Status::Pass => "✅",
        Status::Fail => "❌",
        Status::Inconclusive => "❔",
        Status::Warn => "⚠️",
        Status::Skipped => "➖",
    };
    let table = rules_table(outcome, |s| icon(s).to_owned(), str::to_owned).markdown_code(1);
    let mut bytes = Vec::new();
    let _ = table.markdown(&mut bytes);
    md.push_str(&String::from_utf8_lossy(&bytes));
    let failures: Vec<&RuleResult> = outcome.failures().collect();
    if !failures.is_empty() {
        md.push_str("\n**What regressed**\n\n");
        for rule in failures {
            let _ = writeln!(
                md,
                "- {}: {}",
                escape::markdown_code(&rule.rule),
                escape::markdown(&rule.message)
            );
            for new in &rule.new_findings {
                let _ = writeln!(md, "  - {}", escape::markdown(&new.title));
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
/// The check as JUnit XML: one test case per rule.
pub fn junit(
    outcome: &CheckOutcome,
    baseline: &Side<'_>,
    current: &Side<'_>,
    timestamp: &str,
) -> String {
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
    for (name, value) in [("baseline", baseline.label), ("current", current.label)] {
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
