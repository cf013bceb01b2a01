//! The `steplens._steplens` extension module: loading traces, the report, the tables as Arrow
//! streams and the CI check, for the Python package in `python/steplens/`. The Python side
//! wraps these in `steplens.Run`, `steplens.Table` and the HTA-style API.
//!
//! Everything a user sees is computed by the same crates as the CLI, so a figure in a
//! DataFrame equals the one in `steplens report`.
//!
//! `summarize` and `reduce` are the map and the reduce of a job too large for one machine, as
//! `steplens summarize` and `steplens report --summaries` are: a summary crosses to Python as
//! the bytes of its `steplens.rank-summary/1` JSON (small, picklable, ready for Dask or Ray),
//! and `reduce` runs the same rank analysis on any number of them.

// pyo3 hands `#[pyfunction]` arguments over by value (it extracts them from Python objects).
#![allow(clippy::needless_pass_by_value)]

mod arrow;

use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use steplens::run_input::{is_baseline_set, load_run, one_line, read_baseline_set, read_budget};
use steplens_analysis::Report;
use steplens_analysis::compare::figures::RunFigures;
use steplens_analysis::export::columns::{self, ColumnTable, SliceColumns};
use steplens_analysis::ranks::{
    RankSummary, SUMMARY_SCHEMA, SummaryError, parse_summary, rank_summary, ranks_of,
};
use steplens_ingest::{LoadOptions, Timeline};

pyo3::create_exception!(
    _steplens,
    TraceError,
    PyValueError,
    "An input could not be read: the message is the one line `steplens` prints."
);

/// The error as the CLI's one line, raised as `TraceError` with its stable `code`
/// (`not_a_trace`, `damaged`, `limit_exceeded`, `io`, `invalid_input`, …).
fn trace_error(py: Python<'_>, err: &anyhow::Error) -> PyErr {
    let error = TraceError::new_err(one_line(err));
    // Setting an attribute on a fresh exception instance cannot fail in practice; the message
    // alone is still right if it did.
    let _ = error
        .value(py)
        .setattr("code", steplens::run_input::error_code(err));
    error
}

/// Options of a load, as the CLI's load flags.
fn load_options(
    rank_regex: Option<&str>,
    step_marker: Option<&str>,
    no_mmap: bool,
) -> anyhow::Result<LoadOptions> {
    let parse = |what: &str, text: Option<&str>| {
        text.map(|t| {
            steplens::run_input::parse_regex(t).map_err(|why| anyhow::anyhow!("{what}: {why}"))
        })
        .transpose()
    };
    Ok(LoadOptions {
        mmap: !no_mmap,
        rank_regex: parse("rank_regex", rank_regex)?,
        step_marker: parse("step_marker", step_marker)?,
        ..LoadOptions::default()
    })
}

/// A loaded and analysed run: the Timeline (for the slices and the HTML page) and its report.
#[pyclass(frozen, module = "steplens._steplens")]
struct Run {
    timeline: Timeline,
    report: Report,
    files: Vec<String>,
    /// The files directories held besides traces, in one line.
    skipped: Option<String>,
    /// Made by `reduce` from rank summaries: the report holds the rank analysis alone (no
    /// Timeline, no steps), so only its rank tables can be asked for.
    from_summaries: bool,
}

/// Loads traces (files or directories of them) and analyses them, without the GIL.
#[pyfunction]
#[pyo3(signature = (paths, rank_regex = None, no_mmap = false, step_marker = None))]
fn load(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    rank_regex: Option<String>,
    no_mmap: bool,
    step_marker: Option<String>,
) -> PyResult<Run> {
    let loaded = py.detach(|| -> anyhow::Result<Run> {
        if paths.is_empty() {
            anyhow::bail!("load() needs at least one trace file or directory");
        }
        let options = load_options(rank_regex.as_deref(), step_marker.as_deref(), no_mmap)?;
        let inputs = steplens_ingest::open::expand_inputs(&paths)?;
        let expanded = inputs.paths.as_slice();
        let refs: Vec<&std::path::Path> = expanded.iter().map(PathBuf::as_path).collect();
        let timeline = steplens_ingest::load_many(&refs, &options, None)?;
        let report = steplens_analysis::build_report(&timeline);
        Ok(Run {
            timeline,
            report,
            files: expanded.iter().map(|p| p.display().to_string()).collect(),
            skipped: inputs.skipped_line(),
            from_summaries: false,
        })
    });
    loaded.map_err(|e| trace_error(py, &e))
}

/// One rank's summary, as `steplens summarize` writes it: (the `steplens.rank-summary/1` JSON
/// bytes, the rank, the trace's path). Loads and summarizes without the GIL.
#[pyfunction]
#[pyo3(signature = (path, rank_regex = None, no_mmap = false, step_marker = None))]
fn summarize(
    py: Python<'_>,
    path: PathBuf,
    rank_regex: Option<String>,
    no_mmap: bool,
    step_marker: Option<String>,
) -> PyResult<(Py<PyBytes>, Option<i64>, String)> {
    let made = py.detach(|| -> anyhow::Result<(Vec<u8>, Option<i64>, String)> {
        let options = load_options(rank_regex.as_deref(), step_marker.as_deref(), no_mmap)?;
        let timeline = steplens_ingest::load_many(&[path.as_path()], &options, None)?;
        if timeline.sources.len() != 1 {
            anyhow::bail!(
                "{}: a summary is of one rank's trace; this holds {} inputs",
                path.display(),
                timeline.sources.len()
            );
        }
        let self_time = steplens_analysis::ops::SelfTime::new(&timeline);
        let summary = rank_summary(&timeline, 0, &self_time);
        let rank = steplens_analysis::ranks::input_ranks(&timeline)
            .first()
            .and_then(|&(rank, how)| {
                (how != steplens_analysis::ranks::INPUT_ORDER).then_some(rank)
            });
        let json = serde_json::to_vec(&summary)?;
        Ok((json, rank, summary.path))
    });
    let (json, rank, path) = made.map_err(|e| trace_error(py, &e))?;
    Ok((PyBytes::new(py, &json).unbind(), rank, path))
}

/// The rank a summary is of as the rank analysis reads it alone: the one the trace (or
/// `rank_regex`) states, else the one in its file name.
fn summary_rank(summary: &RankSummary) -> Option<i64> {
    let row = ranks_of(std::slice::from_ref(summary))
        .and_then(|(ranks, _)| ranks.ranks.into_iter().next());
    match row {
        Some(row) if row.rank_from != steplens_analysis::ranks::INPUT_ORDER => Some(row.rank),
        _ => summary.rank,
    }
}

/// Names summary `index` (with `label`, its trace, when known) in an error.
fn summary_error(index: usize, label: &str, e: &SummaryError) -> anyhow::Error {
    if label.is_empty() {
        anyhow::anyhow!("summary {index}: {e}")
    } else {
        anyhow::anyhow!("summary {index} ({label}): {e}")
    }
}

/// Reads summaries on every core (a thousand ranks' worth is most of the reduce's time).
fn parse_summaries(docs: &[Vec<u8>], labels: &[String]) -> anyhow::Result<Vec<RankSummary>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(docs.len().max(1));
    steplens_analysis::ranks::parse_summaries(docs, threads)
        .map_err(|(i, e)| summary_error(i, labels.get(i).map_or("", String::as_str), &e))
}

/// The rank analysis of many ranks from their summaries (in input order), as `steplens report
/// --summaries` makes it: a Run whose report holds the ranks, the collectives and the
/// `straggler` findings, computed by the same code as a load of the traces. `labels` name the
/// summaries in errors (their traces' paths).
#[pyfunction]
fn reduce(py: Python<'_>, docs: Vec<Vec<u8>>, labels: Vec<String>) -> PyResult<Run> {
    let reduced = py.detach(|| -> anyhow::Result<Run> {
        if docs.is_empty() {
            anyhow::bail!("reduce() needs at least one summary");
        }
        let summaries = parse_summaries(&docs, &labels)?;
        drop(docs);
        let Some((ranks, mut findings)) = ranks_of(&summaries) else {
            anyhow::bail!(
                "{} summaries: the rank analysis needs every rank to have collectives",
                summaries.len()
            );
        };
        // Two summaries that claim one rank: the rank analysis is refused, as by
        // `report --summaries`, with the warning that names both.
        if let Some(why) = ranks.refusal() {
            anyhow::bail!("{why}");
        }
        // As the report of the traces names them: the input, and its rank where a trace or its
        // file name says it (never from the input order alone).
        let known: Vec<Option<i64>> = if summaries.len() > 1 {
            let mut by_source = vec![None; summaries.len()];
            for row in &ranks.ranks {
                if let Some(slot) = by_source.get_mut(usize::from(row.source)) {
                    *slot = (row.rank_from != steplens_analysis::ranks::INPUT_ORDER)
                        .then_some(row.rank);
                }
            }
            by_source
        } else {
            summaries.iter().map(|s| s.rank).collect()
        };
        for f in &mut findings {
            f.source = f.cost.source;
            f.rank = f
                .cost
                .source
                .and_then(|s| known.get(usize::from(s)).copied().flatten());
        }
        // An empty Timeline's report, with the rank analysis in it: every rank field and
        // finding as the traces' report writes them, nothing that needs the events.
        let mut report = steplens_analysis::build_report(&Timeline::default());
        report.finding_groups = steplens_analysis::finding::group_findings(&findings);
        for f in &findings {
            *report.summary.findings_by_kind.entry(f.kind).or_insert(0) += 1;
            *report.summary.lost_ns_by_kind.entry(f.kind).or_insert(0) += f.lost_ns;
            *report.summary.saving_ns_by_kind.entry(f.kind).or_insert(0) += f.saving_ns;
        }
        report.findings = findings;
        report.ranks = Some(ranks);
        Ok(Run {
            timeline: Timeline::default(),
            report,
            files: summaries.into_iter().map(|s| s.path).collect(),
            skipped: None,
            from_summaries: true,
        })
    });
    reduced.map_err(|e| trace_error(py, &e))
}

/// Reads a summary's rank (as `summary_rank`) and path from its bytes, for a Summary made from
/// bytes alone.
#[pyfunction]
fn summary_info(py: Python<'_>, doc: Vec<u8>) -> PyResult<(Option<i64>, String)> {
    let parsed = py.detach(|| parse_summary(&doc).map_err(|e| summary_error(0, "", &e)));
    let summary = parsed.map_err(|e| trace_error(py, &e))?;
    Ok((summary_rank(&summary), summary.path))
}

/// Critical-path slices of every step (or of the whole trace when it has no steps).
#[derive(serde::Serialize)]
struct CriticalPathRow<'a> {
    step: Option<&'a str>,
    source: Option<u16>,
    name: &'a str,
    track: Option<&'a str>,
    start_ns: i64,
    dur_ns: i64,
    bound: steplens_analysis::critical_path::Bound,
    slice: Option<u32>,
}

fn critical_path_rows(report: &Report) -> Vec<CriticalPathRow<'_>> {
    let per_step = report.steps.iter().filter_map(|s| {
        Some((
            Some(s.name.as_str()),
            Some(s.source),
            s.critical_path.as_ref()?,
        ))
    });
    let whole = report.critical_path.as_ref().map(|p| (None, None, p));
    per_step
        .chain(whole)
        .flat_map(|(step, source, path)| {
            path.slices.iter().map(move |s| CriticalPathRow {
                step,
                source,
                name: &s.name,
                track: s.track.as_deref(),
                start_ns: s.start_ns,
                dur_ns: s.dur_ns,
                bound: s.bound,
                slice: s.slice,
            })
        })
        .collect()
}

fn serde_error(err: &serde_json::Error) -> PyErr {
    PyValueError::new_err(err.to_string())
}

#[pymethods]
impl Run {
    /// The `steplens.report/1` JSON, as text (the Python side parses it).
    fn report_json(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| serde_json::to_string(&self.report))
            .map_err(|e| serde_error(&e))
    }

    /// The report as terminal text (no colour).
    #[pyo3(signature = (top = 20))]
    fn text(&self, top: usize) -> PyResult<String> {
        let mut out = Vec::new();
        steplens_output::text::text(&mut out, &self.report, top, false)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// The self-contained HTML report page.
    fn html(&self, py: Python<'_>) -> String {
        py.detach(|| steplens_output::html::report_page(&self.report))
    }

    /// Whether `reduce` made this Run from rank summaries (it holds the rank analysis alone).
    fn made_from_summaries(&self) -> bool {
        self.from_summaries
    }

    /// The input files, after directories were expanded.
    fn files(&self) -> Vec<String> {
        self.files.clone()
    }

    /// Problems met while loading that did not stop it: (file, code, message).
    fn warnings(&self) -> Vec<(String, String, String)> {
        let skipped = self
            .skipped
            .iter()
            .map(|line| (String::new(), "skipped_files".to_owned(), line.clone()));
        let loaded = self.report.sources.iter().flat_map(|s| {
            s.warnings
                .iter()
                .map(|w| (s.path.clone(), w.code.clone(), w.message.clone()))
        });
        skipped.chain(loaded).collect()
    }

    /// One table as an Arrow stream: `slices` (with `args`, one column per arg key), `steps`,
    /// `ops`, `findings`, `engines`, `idle`, `memory`, `ranks`, `collectives`,
    /// `critical_path`, and the TensorBoard plugin's `overview`, `gpu_summary`, `operators`,
    /// `operators_by_shape`, `kernels`, `kernels_by_op`, `distributed`; Gaudi `device_nodes`;
    /// the performance model per op signature, `op_perf`.
    #[pyo3(signature = (name, args = None))]
    fn table(
        &self,
        py: Python<'_>,
        name: &str,
        args: Option<Vec<String>>,
    ) -> PyResult<arrow::ArrowTable> {
        let args = args.unwrap_or_default();
        let built = py.detach(|| self.build_table(name, &args));
        let table = built?.ok_or_else(|| {
            PyValueError::new_err(format!(
                "no table named {name:?}; tables: {}",
                TABLES.join(", ")
            ))
        })?;
        py.detach(|| arrow::ArrowTable::from_columns(table))
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The names `table` accepts.
    #[staticmethod]
    fn table_names() -> Vec<&'static str> {
        TABLES.to_vec()
    }
}

/// Every table `Run.table` builds.
const TABLES: [&str; 19] = [
    "slices",
    "steps",
    "ops",
    "findings",
    "engines",
    "idle",
    "memory",
    "ranks",
    "collectives",
    "critical_path",
    "overview",
    "gpu_summary",
    "operators",
    "operators_by_shape",
    "kernels",
    "kernels_by_op",
    "distributed",
    "device_nodes",
    "op_perf",
];

/// The tables a Run from `reduce` holds: the rank analysis.
const RANK_TABLES: [&str; 3] = ["ranks", "collectives", "findings"];

impl Run {
    fn build_table(&self, name: &str, args: &[String]) -> Result<Option<ColumnTable<'_>>, PyErr> {
        let r = &self.report;
        let rows = |result: Result<ColumnTable<'static>, serde_json::Error>| {
            result.map(Some).map_err(|e| serde_error(&e))
        };
        let ranks = r.ranks.as_ref();
        if self.from_summaries && TABLES.contains(&name) && !RANK_TABLES.contains(&name) {
            return Err(PyValueError::new_err(format!(
                "{name}: a Run from reduce() holds the rank analysis of the summaries ({}); \
                 load the traces for the rest",
                RANK_TABLES.join(", ")
            )));
        }
        match name {
            "slices" => Ok(Some(columns::slices_table(
                &self.timeline,
                &SliceColumns {
                    provenance: true,
                    args,
                },
            ))),
            "steps" => Ok(Some(columns::steps_table(r))),
            "ops" => Ok(Some(columns::ops_table(r))),
            "findings" => Ok(Some(columns::findings_table(r))),
            "engines" => Ok(Some(columns::engines_table(r))),
            "idle" => Ok(Some(columns::idle_table(r))),
            "ranks" => match ranks {
                Some(ranks) => Ok(Some(columns::ranks_table(ranks))),
                None => rows(columns::rows_table::<u8>("ranks", &[])),
            },
            "memory" => rows(columns::rows_table("memory", &r.memory)),
            "collectives" => {
                let list = ranks.map_or(&[][..], |x| x.collectives.as_slice());
                rows(columns::rows_table("collectives", list))
            }
            "distributed" => {
                let list = ranks.map_or(&[][..], |x| x.distributed.as_slice());
                rows(columns::rows_table("distributed", list))
            }
            "critical_path" => rows(columns::rows_table("critical_path", &critical_path_rows(r))),
            "overview" => {
                let list = r.overview.as_ref().map_or(&[][..], |o| o.steps.as_slice());
                rows(columns::rows_table("overview", list))
            }
            "gpu_summary" => rows(columns::rows_table("gpu_summary", &r.gpu_summary)),
            "operators" => rows(columns::rows_table("operators", &r.operators)),
            "operators_by_shape" => rows(columns::rows_table(
                "operators_by_shape",
                &r.operators_by_shape,
            )),
            "kernels" => rows(columns::rows_table("kernels", &r.kernels)),
            "kernels_by_op" => rows(columns::rows_table("kernels_by_op", &r.kernels_by_op)),
            "device_nodes" => rows(columns::rows_table("device_nodes", &r.device_nodes)),
            "op_perf" => rows(columns::rows_table("op_perf", &r.op_perf)),
            _ => Ok(None),
        }
    }
}

/// One side of a check: a loaded run, or a path (trace, saved report or baseline set).
fn figures_of(
    py: Python<'_>,
    item: &Bound<'_, PyAny>,
    thresholds: &steplens_analysis::Thresholds,
    warmup: usize,
) -> PyResult<(String, Vec<RunFigures>, bool)> {
    if let Ok(run) = item.cast::<Run>() {
        let run = run.get();
        let label = run.files.join(" + ");
        return Ok((label, vec![RunFigures::of(&run.report, warmup)], false));
    }
    let path: PathBuf = item.extract().map_err(|_| {
        PyValueError::new_err(format!(
            "check() takes Runs from steplens.load() or paths, not {}",
            item.get_type()
                .name()
                .map_or_else(|_| "that".to_owned(), |n| n.to_string())
        ))
    })?;
    let loaded = py.detach(|| -> anyhow::Result<(String, Vec<RunFigures>, bool)> {
        if is_baseline_set(&path) {
            let set = read_baseline_set(&path)?;
            let runs: Vec<RunFigures> =
                set.runs.iter().map(|r| RunFigures::of(r, warmup)).collect();
            let label = format!("{} ({} runs)", path.display(), runs.len());
            return Ok((label, runs, true));
        }
        let run = load_run(
            std::slice::from_ref(&path),
            &LoadOptions::default(),
            thresholds,
            false,
        )?;
        Ok((
            run.label,
            vec![RunFigures::of(&run.report, warmup)],
            run.from_report,
        ))
    });
    loaded.map_err(|e| trace_error(py, &e))
}

/// Checks `current` against pooled `baselines` under a budget: the `steplens.check/1` JSON
/// text, as `steplens check -f json` prints it.
#[pyfunction]
#[pyo3(signature = (current, baselines, budget = None, warmup = None))]
fn check(
    py: Python<'_>,
    current: &Bound<'_, PyAny>,
    baselines: Vec<Bound<'_, PyAny>>,
    budget: Option<PathBuf>,
    warmup: Option<usize>,
) -> PyResult<String> {
    let budget = match &budget {
        Some(path) => read_budget(path).map_err(|e| trace_error(py, &e))?,
        None => steplens_analysis::compare::budget::Budget::default(),
    };
    let mut limits = budget.check;
    if let Some(warmup) = warmup {
        limits.warmup_steps = warmup;
    }
    if baselines.is_empty() {
        return Err(PyValueError::new_err("check() needs at least one baseline"));
    }
    let (current_label, current_runs, _) =
        figures_of(py, current, &budget.thresholds, limits.warmup_steps)?;
    let mut labels = Vec::new();
    let mut runs = Vec::new();
    for item in &baselines {
        let (label, figures, _) = figures_of(py, item, &budget.thresholds, limits.warmup_steps)?;
        labels.push(label);
        runs.extend(figures);
    }
    let pooled = RunFigures::pooled(&runs)
        .ok_or_else(|| PyValueError::new_err("the baselines hold no run"))?;
    let current = current_runs
        .into_iter()
        .next()
        .ok_or_else(|| PyValueError::new_err("the current input holds no run"))?;
    let outcome = steplens_analysis::compare::check::check(&pooled, &current, &limits);
    let mut value = serde_json::to_value(&outcome).map_err(|e| serde_error(&e))?;
    if let Some(obj) = value.as_object_mut() {
        obj.insert("baseline_input".into(), labels.join(" | ").into());
        obj.insert("current_input".into(), current_label.into());
    }
    Ok(value.to_string())
}

/// The extension module.
#[pymodule]
fn _steplens(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TraceError", m.py().get_type::<TraceError>())?;
    m.add(
        "__version__",
        PyString::new(m.py(), env!("CARGO_PKG_VERSION")),
    )?;
    m.add_class::<Run>()?;
    m.add_class::<arrow::ArrowTable>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(summarize, m)?)?;
    m.add_function(wrap_pyfunction!(reduce, m)?)?;
    m.add_function(wrap_pyfunction!(summary_info, m)?)?;
    m.add("SUMMARY_SCHEMA", SUMMARY_SCHEMA)?;
    Ok(())
}
