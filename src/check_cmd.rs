//! `steplens check`: the run against a baseline under a budget, and the verdict as terminal text,
//! JSON, JUnit XML, GitHub workflow annotations and a Markdown summary.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use steplens_analysis::compare::check::check;
use steplens_analysis::compare::figures::RunFigures;

use crate::{LoadArgs, output};
use steplens::output_path::{check_not_an_input, write_atomically};
use steplens::run_input::{Run, is_baseline_set, load_pair, load_run, read_baseline_set};
use steplens::run_input::{read_optional_budget, with_budget_marker};
use steplens_output::check::{Side, github, junit, markdown, text};
use steplens_output::table::Style;

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
    let inputs: Vec<PathBuf> = args
        .current
        .iter()
        .chain(&args.baseline)
        .chain(&args.baseline_run)
        .chain(&args.budget)
        .cloned()
        .collect();
    for path in [&args.junit, &args.summary_md, &args.html]
        .into_iter()
        .flatten()
    {
        check_not_an_input(path, &inputs)?;
    }
    let budget = read_optional_budget(args.budget.as_deref())?;
    let options = with_budget_marker(args.load.options(), &budget);
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
            let current = load_run(&args.current, &options, &budget.thresholds, false)?;
            let baseline = Run {
                label: format!("{} ({} runs)", path.display(), runs.len()),
                ops: steplens_analysis::compare::op_rows::ops_from_report(&newest),
                report: newest,
                from_report: true,
            };
            (current, baseline, runs)
        }
        _ => {
            let (current, baseline) = load_pair(
                &args.current,
                &args.baseline,
                &options,
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
            &options,
            &budget.thresholds,
            false,
        )?;
        runs.push(RunFigures::of(&run.report, limits.warmup_steps));
        baseline.label = format!("{} | {}", baseline.label, run.label);
    }
    let base_figures = RunFigures::pooled(&runs).context("--baseline names no run")?;
    let cur_figures = RunFigures::of(&current.report, limits.warmup_steps);
    let outcome = check(&base_figures, &cur_figures, &limits);

    let (baseline, current) = (side(&baseline), side(&current));
    let (mut out, color) = output(None, &[])?;
    match args.format {
        CheckFormat::Text => text(&mut out, &outcome, &baseline, &current, Style { color })?,
        CheckFormat::Json => {
            let mut value = serde_json::to_value(&outcome)?;
            if let Some(obj) = value.as_object_mut() {
                obj.insert("baseline_input".into(), baseline.label.into());
                obj.insert("current_input".into(), current.label.into());
            }
            serde_json::to_writer_pretty(&mut out, &value)?;
            writeln!(out)?;
        }
    }
    if args.github {
        github(&mut out, &outcome)?;
    }
    out.finish()?;
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
            &steplens_output::html::check_page(&outcome, baseline.label, current.label),
        )?;
    }
    Ok(outcome.passed)
}

/// How the renderers name a run.
fn side(run: &Run) -> Side<'_> {
    Side {
        label: &run.label,
        from_report: run.from_report,
    }
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    write_atomically(path, |file| Ok(file.write_all(text.as_bytes())?))
}

/// Appends, as GitHub expects for `$GITHUB_STEP_SUMMARY` (other steps write to it too): the
/// one file not replaced whole, so written in one call.
fn append_file(path: &Path, text: &str) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
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
