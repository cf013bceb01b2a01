//! The `steplens._steplens` extension module: loading traces, the report, the tables as Arrow
//! streams and the CI check, for the Python package in `python/steplens/`. The Python side
//! wraps these in `steplens.Run`, `steplens.Table` and the HTA-style API.
//!
//! Everything a user sees is computed by the same crates as the CLI, so a figure in a
//! DataFrame equals the one in `steplens report`.

// pyo3 hands `#[pyfunction]` arguments over by value (it extracts them from Python objects).
#![allow(clippy::needless_pass_by_value)]

mod arrow;

use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use steplens::run_input::{
    expand_inputs, is_baseline_set, load_run, one_line, read_baseline_set, read_budget,
};
use steplens_analysis::Report;
use steplens_analysis::columns::{self, ColumnTable, SliceColumns};
use steplens_analysis::compare::RunFigures;
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
        let inputs = expand_inputs(&paths)?;
        let expanded = inputs.paths.as_slice();
        let refs: Vec<&std::path::Path> = expanded.iter().map(PathBuf::as_path).collect();
        let timeline = steplens_ingest::load_many(&refs, &options, None)?;
        let report = steplens_analysis::build_report(&timeline);
        Ok(Run {
            timeline,
            report,
            files: expanded.iter().map(|p| p.display().to_string()).collect(),
            skipped: inputs.skipped_line(),
        })
    });
    loaded.map_err(|e| trace_error(py, &e))
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
        py.detach(|| steplens_output::html::report_page(&self.report, &self.timeline))
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
    /// `operators_by_shape`, `kernels`, `kernels_by_op`, `distributed`; Gaudi `device_nodes`.
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
const TABLES: [&str; 18] = [
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
];

impl Run {
    fn build_table(&self, name: &str, args: &[String]) -> Result<Option<ColumnTable<'_>>, PyErr> {
        let r = &self.report;
        let rows = |result: Result<ColumnTable<'static>, serde_json::Error>| {
            result.map(Some).map_err(|e| serde_error(&e))
        };
        let ranks = r.ranks.as_ref();
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
        None => steplens_analysis::budget::Budget::default(),
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
    let outcome = steplens_analysis::check::check(&pooled, &current, &limits);
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
    Ok(())
}
