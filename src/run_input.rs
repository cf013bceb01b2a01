//! What the command line and the Python package read: traces and directories of them, one side
//! of a comparison (`check`, `diff`: traces, or a saved `steplens.report/1` JSON report, which
//! gives the same figures as the trace it came from, less the op shapes), baseline sets and
//! budget files; and an error as the one line both print.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::OnceLock;

use anyhow::{Context, Result, bail};
use steplens_analysis::compare::budget::Budget;
use steplens_analysis::compare::op_rows::{OpRow, ops_by_shape, ops_from_report};
use steplens_analysis::report::SCHEMA;
use steplens_analysis::{Report, Thresholds};
use steplens_ingest::IngestError;
use steplens_ingest::LoadOptions;
use steplens_ingest::documents::{BASELINE_SET, REPORT};
use steplens_ingest::open::{self, Head, Kind};

/// A run, loaded and analysed.
pub struct Run {
    /// What the user named, for headings.
    pub label: String,
    /// Its report.
    pub report: Report,
    /// Op time by name and shapes (shapes only from traces).
    pub ops: Vec<OpRow>,
    /// Whether it came from a saved report rather than a trace.
    pub from_report: bool,
}

/// The schema tag of a steplens document (`steplens.report/1`, a baseline set, …), from one
/// look at the file ([`open::identify`]).
fn steplens_schema(kind: Option<&Kind>) -> Option<&str> {
    match kind {
        Some(Kind::Steplens { schema }) => Some(schema),
        _ => None,
    }
}

/// The largest JSON object searched past its first bytes for a report's schema tag.
const LATE_SCHEMA_MAX_BYTES: u64 = 1 << 30;

/// The schema tag of a saved report whose `"schema"` key comes after the first look (a report
/// rewritten with sorted keys): only for an uncompressed JSON object of at most 1 GiB whose
/// first bytes hold no `"traceEvents"` and that has a report's `"sources"` and `"summary"` keys.
/// (A gzip file is not searched whole: that would inflate every compressed trace twice.)
fn late_report_schema(path: &Path, head: &Head) -> Option<String> {
    if head.gzip {
        return None;
    }
    let head = String::from_utf8_lossy(&head.bytes);
    if !head.trim_start().starts_with('{') || head.contains("\"traceEvents\"") {
        return None;
    }
    if std::fs::metadata(path).ok()?.len() > LATE_SCHEMA_MAX_BYTES {
        return None;
    }
    let text = std::fs::read(path).ok()?;
    let found = |needle: &[u8]| text.windows(needle.len()).position(|w| w == needle);
    found(b"\"sources\"")?;
    found(b"\"summary\"")?;
    let at = found(b"\"steplens.report/")?;
    let tag = text.get(at + 1..)?;
    let end = tag.iter().position(|&b| b == b'"')?;
    Some(String::from_utf8_lossy(&tag[..end]).into_owned())
}

/// The longest span a saved report's run may have: a year.
pub const MAX_SAVED_SPAN_NS: i64 = 366 * 24 * 3600 * 1_000_000_000;

/// How many tracks a saved report's time added up over tracks (an op's total and self time, a
/// finding's lost time and saving) may count at once: that time is at most the run's span
/// times this.
pub const MAX_SAVED_PARALLEL: i64 = 4096;

/// A saved report's figures, checked against the run's own span (`summary.trace_ns`, itself at
/// most [`MAX_SAVED_SPAN_NS`]; a year for a run without slices): every duration of a step (a union of time in the step) between 0
/// and the span; time added up over tracks (ops, findings) between 0 and the span times
/// [`MAX_SAVED_PARALLEL`]; an op's count at most the events the report read, a finding's an
/// int64 (and `summary.steps` the steps listed); percentages between 0 and 100; and every sum the comparison takes fits.
fn check_saved_figures(report: &Report) -> std::result::Result<(), String> {
    let span = report.summary.trace_ns;
    if !(0..=MAX_SAVED_SPAN_NS).contains(&span) {
        return Err(format!(
            "summary.trace_ns is {span}: the run's span must lie between 0 and {MAX_SAVED_SPAN_NS} ns (a year)"
        ));
    }
    // A run with no slices (a metrics file alone) has no span: its findings' time is bounded
    // by the longest span instead.
    let across = if span == 0 {
        MAX_SAVED_SPAN_NS
    } else {
        span.saturating_mul(MAX_SAVED_PARALLEL)
    };
    let within = |what: &dyn Fn() -> String, v: i64, most: i64, of: &str| {
        if (0..=most).contains(&v) {
            Ok(())
        } else {
            Err(format!("{} is {v}, outside 0 to {most} ns ({of})", what()))
        }
    };
    let span_of = "the run's span, summary.trace_ns";
    let tracks_of = "the run's span times 4096 tracks";
    let mut step_sum: i128 = 0;
    for (i, step) in report.steps.iter().enumerate() {
        let at = |name: &str| format!("steps[{i}] ({}): {name}", step.name);
        let figures = [
            ("dur_ns", Some(step.dur_ns)),
            ("host_dur_ns", step.host_dur_ns),
            ("host_busy_ns", Some(step.host_busy_ns)),
            ("device_busy_ns", step.device_busy_ns),
            ("device_idle_ns", step.device_idle_ns),
            ("dataloader_ns", Some(step.dataloader_ns)),
            ("compile_ns", Some(step.compile_ns)),
            ("device_launched_ns", step.device_launched_ns),
        ];
        for (name, value) in figures {
            if let Some(v) = value {
                if v < 0 {
                    return Err(format!(
                        "{} is {v}, and a duration cannot be negative",
                        at(name)
                    ));
                }
                within(&|| at(name), v, span, span_of)?;
            }
        }
        for (class, &v) in step.engines.iter().chain(&step.engines_launched) {
            within(&|| at(&format!("engines.{class}")), v, span, span_of)?;
        }
        for (op, &v) in &step.op_self_ns {
            within(&|| at(&format!("op_self_ns.{op}")), v, across, tracks_of)?;
        }
        step_sum += i128::from(step.dur_ns);
    }
    if step_sum > i128::from(i64::MAX) {
        return Err(format!(
            "the steps' durations add up to {step_sum} ns, past what a duration can hold"
        ));
    }
    if report.summary.steps != report.steps.len() {
        return Err(format!(
            "summary.steps is {} but {} steps are listed",
            report.summary.steps,
            report.steps.len()
        ));
    }
    let events: u64 = report
        .sources
        .iter()
        .fold(0u64, |n, s| n.saturating_add(s.events));
    // A report of a format that counts no events (none read) bounds its counts by nothing
    // smaller than an i64.
    let most = if events > 0 { events } else { i64::MAX as u64 };
    let count_within = |what: &dyn Fn() -> String, v: u64| {
        if v <= most {
            Ok(())
        } else {
            Err(format!(
                "{} is {v}, more than the {most} events the report read",
                what()
            ))
        }
    };
    let (mut lost, mut saving, mut counts): (i128, i128, u128) = (0, 0, 0);
    for (i, f) in report.findings.iter().enumerate() {
        let at = |name: &str| format!("findings[{i}] ({}): {name}", f.kind);
        within(&|| at("lost_ns"), f.lost_ns, across, tracks_of)?;
        within(&|| at("saving_ns"), f.saving_ns, across, tracks_of)?;
        // A finding's count can come from a metric (graph compilations counted by the
        // bridge), not from events: bounded by the schema's int64.
        if f.count > i64::MAX as u64 {
            return Err(format!(
                "{} is {}, past the int64 the schema allows",
                at("count"),
                f.count
            ));
        }
        lost += i128::from(f.lost_ns);
        saving += i128::from(f.saving_ns);
        counts += u128::from(f.count);
    }
    let (mut op_total, mut op_self): (i128, i128) = (0, 0);
    for (i, op) in report.ops.iter().enumerate() {
        let at = |name: &str| format!("ops[{i}] ({}): {name}", op.name);
        within(&|| at("total_ns"), op.total_ns, across, tracks_of)?;
        within(&|| at("self_ns"), op.self_ns, across, tracks_of)?;
        for (name, v) in [
            ("mean_ns", op.mean_ns),
            ("p50_ns", op.p50_ns),
            ("p99_ns", op.p99_ns),
        ] {
            within(&|| at(name), v, span, span_of)?;
        }
        count_within(&|| at("count"), op.count)?;
        op_total += i128::from(op.total_ns);
        op_self += i128::from(op.self_ns);
    }
    for (what, sum) in [
        ("the findings' lost_ns", lost),
        ("the findings' saving_ns", saving),
        ("the ops' total_ns", op_total),
        ("the ops' self_ns", op_self),
    ] {
        if sum > i128::from(i64::MAX) {
            return Err(format!(
                "{what} add up to {sum}, past what a duration can hold"
            ));
        }
    }
    if counts > u128::from(u64::MAX) {
        return Err(format!(
            "the findings' counts add up to {counts}, past what a count can hold"
        ));
    }
    let pct_fields = [("summary.device_busy_pct", report.summary.device_busy_pct)]
        .into_iter()
        .chain(
            report
                .engines
                .iter()
                .map(|e| ("engines[].busy_pct", Some(e.busy_pct))),
        );
    for (name, pct) in pct_fields {
        if let Some(p) = pct
            && !(0.0..=100.0).contains(&p)
        {
            return Err(format!("{name} is {p}, outside 0 to 100 %"));
        }
    }
    Ok(())
}

/// Schema tag of a baseline set (`steplens baseline update`).
pub const BASELINE_SET_SCHEMA: &str = "steplens.baselines/1";

/// A rolling set of accepted runs' reports, newest last, that `check --baseline` pools.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct BaselineSet {
    /// [`BASELINE_SET_SCHEMA`].
    pub schema: String,
    /// How many runs the set keeps.
    pub keep: usize,
    /// The runs' reports, oldest first.
    pub runs: Vec<Report>,
}

/// Whether `path` is a baseline set.
pub fn is_baseline_set(path: &Path) -> bool {
    steplens_schema(open::identify(path).as_ref()).is_some_and(|s| BASELINE_SET.is(s))
}

/// Reads a baseline set.
pub fn read_baseline_set(path: &Path) -> Result<BaselineSet> {
    let text = open::read_document(path)?;
    let set: BaselineSet = serde_json::from_slice(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: line {} column {}: not a valid {BASELINE_SET_SCHEMA} file: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    if set.schema != BASELINE_SET_SCHEMA {
        bail!(
            "{}: baseline schema {} is not supported (this steplens reads {BASELINE_SET_SCHEMA})",
            path.display(),
            set.schema
        );
    }
    for (i, run) in set.runs.iter().enumerate() {
        check_saved_figures(run).map_err(|e| {
            anyhow::anyhow!("{}: runs[{i}]: not a valid report: {e}", path.display())
        })?;
    }
    Ok(set)
}

/// The saved `steplens.report/1` report at `path`, checked; `None` when `path` is not a saved
/// report.
///
/// # Errors
/// A report of another schema, one that does not parse, or one whose figures cannot be.
pub fn read_saved_report(path: &Path) -> Result<Option<Report>> {
    saved_report(path, look(path).as_ref())
}

/// What a look says a file is.
fn kind(look: &Option<(Head, Kind)>) -> Option<&Kind> {
    look.as_ref().map(|(_, kind)| kind)
}

/// One look at a file: its first bytes, and what they say it is.
fn look(path: &Path) -> Option<(Head, Kind)> {
    let head = open::head(path)?;
    let kind = open::kind_of(&head.bytes, head.whole);
    Some((head, kind))
}

/// [`read_saved_report`] of a file already looked at.
fn saved_report(path: &Path, look: Option<&(Head, Kind)>) -> Result<Option<Report>> {
    let schema = match look {
        Some((_, Kind::Steplens { schema })) if REPORT.is(schema) => schema.clone(),
        // A report whose keys were sorted has its schema past the first look.
        Some((head, Kind::Trace | Kind::Other)) => match late_report_schema(path, head) {
            Some(schema) => schema,
            None => return Ok(None),
        },
        Some((_, Kind::Steplens { .. })) | None => return Ok(None),
    };
    if schema != SCHEMA {
        bail!(
            "{}: report schema {schema} is not supported (this steplens reads {SCHEMA})",
            path.display()
        );
    }
    let text = open::read_document(path)?;
    let report: Report = serde_json::from_slice(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: line {} column {}: not a valid {SCHEMA} report: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    check_saved_figures(&report)
        .map_err(|e| anyhow::anyhow!("{}: not a valid {SCHEMA} report: {e}", path.display()))?;
    Ok(Some(report))
}

/// Loads one side: a saved report, or traces analysed with `thresholds`.
pub fn load_run(
    paths: &[PathBuf],
    options: &LoadOptions,
    thresholds: &Thresholds,
    with_shapes: bool,
) -> Result<Run> {
    let label = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    // One look at each file says what it is.
    let looks: Vec<Option<(Head, Kind)>> = paths.iter().map(|p| look(p)).collect();
    if let ([path], [look]) = (paths, looks.as_slice())
        && let Some(schema) = steplens_schema(kind(look))
        && !REPORT.is(schema)
        && !BASELINE_SET.is(schema)
    {
        bail!(
            "{}: a {schema} document, not a report: this command reads a {SCHEMA} report, a {BASELINE_SET_SCHEMA} set or traces",
            path.display()
        );
    }
    if let ([path], [look]) = (paths, looks.as_slice())
        && let Some(report) = saved_report(path, look.as_ref())?
    {
        let ops = ops_from_report(&report);
        return Ok(Run {
            label,
            report,
            ops,
            from_report: true,
        });
    }
    if paths.len() > 1
        && looks
            .iter()
            .any(|look| steplens_schema(kind(look)).is_some_and(|s| REPORT.is(s)))
    {
        bail!("{label}: a saved report stands alone; it cannot be combined with other inputs");
    }
    let expanded = expand_dirs(paths)?;
    if let Some(hook) = BEFORE_MAPPING.get() {
        hook(&expanded);
    }
    let refs: Vec<&Path> = expanded.iter().map(PathBuf::as_path).collect();
    let timeline = steplens_ingest::load_many(&refs, options, None)?;
    let report = steplens_analysis::build_report_with(&timeline, thresholds);
    let ops = if with_shapes {
        ops_by_shape(&timeline)
    } else {
        ops_from_report(&report)
    };
    Ok(Run {
        label,
        report,
        ops,
        from_report: false,
    })
}

/// Loads both sides at once (one thread each): the two ingests are independent.
pub fn load_pair(
    a: &[PathBuf],
    b: &[PathBuf],
    options: &LoadOptions,
    thresholds: &Thresholds,
    with_shapes: bool,
) -> Result<(Run, Run)> {
    std::thread::scope(|scope| {
        let first = scope.spawn(|| load_run(a, options, thresholds, with_shapes));
        let second = load_run(b, options, thresholds, with_shapes);
        let first = match first.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Ok((first?, second?))
    })
}

/// The stable code of an error: the ingest taxonomy (`not_a_trace`, `unsupported`, `damaged`,
/// `limit_exceeded`, `io`), else `io` for other I/O failures and `invalid_input` for the rest
/// (budget files, saved reports, arguments).
pub fn error_code(err: &anyhow::Error) -> &'static str {
    for cause in err.chain() {
        if let Some(ingest) = cause.downcast_ref::<IngestError>() {
            return ingest.code();
        }
    }
    if err
        .chain()
        .any(|c| c.downcast_ref::<std::io::Error>().is_some())
    {
        "io"
    } else {
        "invalid_input"
    }
}

/// The error and its causes on one line, without repeating a cause the message already says.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// The inputs with every directory replaced by the traces in it (sorted by name): a run's
/// per-rank traces are usually one directory. Files in a directory that are not traces (truth
/// files, saved reports, notes) are skipped and said in one warning line on stderr.
///
/// # Errors
/// When a directory cannot be listed or holds no trace.
pub fn expand_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, IngestError> {
    let expanded = open::expand_inputs(paths)?;
    if let Some(line) = expanded.skipped_line() {
        // File names may hold control characters: shown escaped, on one line.
        let _ = writeln!(
            std::io::stderr().lock(),
            "steplens: warning: {}",
            steplens_output::escape::terminal(&line)
        );
    }
    Ok(expanded.paths)
}

/// A `--rank-regex` or `--step-marker` pattern, or why it is not one, on one line.
///
/// # Errors
/// When the pattern does not compile: the regex crate's cause, without its pattern and caret.
pub fn parse_regex(text: &str) -> Result<regex::Regex, String> {
    // The regex crate's message spans several lines (the pattern, a caret, the cause): keep
    // the cause, on one line.
    regex::Regex::new(text).map_err(|e| {
        let cause = e.to_string();
        let last = cause.lines().last().unwrap_or_default().trim().to_owned();
        format!("not a valid regex ({last})")
    })
}

/// Reads and parses a budget file (TOML).
///
/// # Errors
/// When the file cannot be read or is not a valid budget.
pub fn read_budget(path: &Path) -> Result<Budget> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read budget file", path.display()))?;
    let budget = steplens_analysis::compare::budget::parse_budget(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if let Some(marker) = &budget.step_marker {
        parse_regex(marker)
            .map_err(|why| anyhow::anyhow!("{}: step_marker: {why}", path.display()))?;
    }
    Ok(budget)
}

/// The budget file at `path` (the defaults without one), read as [`read_budget`] does.
///
/// # Errors
/// As [`read_budget`].
pub fn read_optional_budget(path: Option<&Path>) -> Result<Budget> {
    path.map_or_else(|| Ok(Budget::default()), read_budget)
}

/// `options` with the budget's `step_marker` where the command line gave none.
#[must_use]
pub fn with_budget_marker(mut options: LoadOptions, budget: &Budget) -> LoadOptions {
    if options.step_marker.is_none() {
        options.step_marker = budget
            .step_marker
            .as_deref()
            .and_then(|m| parse_regex(m).ok());
    }
    options
}

/// What to run on the expanded input paths before they are mapped (the binary's SIGBUS guard;
/// a library user such as the Python package keeps its own signal handling).
static BEFORE_MAPPING: OnceLock<fn(&[PathBuf])> = OnceLock::new();

/// Sets the hook run on every input list before it is mapped; the first call wins.
pub fn before_mapping(hook: fn(&[PathBuf])) {
    let _ = BEFORE_MAPPING.set(hook);
}
