//! The `steplens` command line: `report`, `info`, `check`, `diff`, `export` and `bench`.
//!
//! This is the only place that uses `anyhow`: library errors get their context here and are
//! printed as one line. Exit status: 0 on success, 1 when `check` finds a regression, 2 on bad
//! input or usage.

mod baseline_cmd;
mod check_cmd;
mod diff_cmd;
mod export_cmd;
mod export_perfetto;
mod progress;
#[cfg(unix)]
mod sigbus;
mod summaries_cmd;

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use steplens::output_path;
use steplens::run_input::{
    error_code, expand_dirs, one_line, parse_regex, read_optional_budget, with_budget_marker,
};
use steplens_ingest::{IngestError, LoadOptions, Timeline, limits};

/// Where each training step's time goes, from PyTorch profiler and Gaudi traces.
#[derive(Debug, Parser)]
#[command(name = "steplens", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Step breakdown, op summary and findings for one or more traces.
    Report(ReportArgs),
    /// What a trace holds: format, device, counts, warnings. Fast.
    Info(InfoArgs),
    /// Compare a run with a baseline under a budget; exit 1 when it regressed (for CI).
    Check(check_cmd::CheckArgs),
    /// Two runs side by side: steps, engines, ops and findings.
    Diff(diff_cmd::DiffArgs),
    /// Keep a rolling set of accepted runs for `check --baseline` (`baseline update FILE RUN…`).
    #[command(subcommand)]
    Baseline(baseline_cmd::BaselineCommand),
    /// Write tables (Parquet/CSV) or a Perfetto trace with the findings drawn on it.
    Export(export_cmd::ExportArgs),
    /// Moved to the developer tools: `cargo run --release -p steplens-tools --bin steplens-bench`.
    #[command(hide = true)]
    Bench {
        /// Whatever was given.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Summarize one rank's trace for `report --summaries` (run it next to each rank's trace).
    Summarize(summaries_cmd::SummarizeArgs),
    /// Open the desktop timeline viewer (traces load in the background; none opens an empty window).
    #[command(long_about = concat!(
        "Open the desktop timeline viewer (traces load in the background; none opens an empty ",
        "window).\n",
        "\n",
        "Keys and mouse in the window (? there shows this list too):\n",
        "  W / S                    zoom in / out around the pointer (a press: one step;\n",
        "                           held: on and on)\n",
        "  A / D                    pan earlier / later (a press: one step; held: on and on)\n",
        "  F                        fit the selected range, else the selected slice\n",
        "  Escape                   clear the range selection, then the slice selection\n",
        "  ?                        show or hide the list of keys\n",
        "  Enter / Shift+Enter      in the search box: next / previous match\n",
        "  Enter in the path field  open the traces typed there\n",
        "  Wheel                    scroll the tracks up and down\n",
        "  Shift+wheel              pan earlier / later\n",
        "  Ctrl+wheel, pinch        zoom around the pointer\n",
        "  Drag                     pan (and scroll the tracks)\n",
        "  Drag on the ruler, Shift+drag\n",
        "                           select a time range\n",
        "  Click a slice            select it (its details in the bottom panel)\n",
        "  Double-click a slice     zoom to it\n",
        "  Click a group header     collapse or expand the group\n",
        "  Click a thread name with ▸ / ▾\n",
        "                           unfold or fold its deep rows (Python stacks)\n",
        "  Drop files on the window\n",
        "                           open them",
    ))]
    View {
        /// Trace files, or directories of them, to open.
        traces: Vec<PathBuf>,
        /// How traces load, here and when opened from the window's path field.
        #[command(flatten)]
        load: LoadArgs,
    },
}

#[derive(Debug, clap::Args)]
struct LoadArgs {
    /// Read files with read() instead of mapping them (for files still being written).
    #[arg(long)]
    no_mmap: bool,
    /// Largest decompressed size accepted from a .gz input, a ZIP archive or a stream (stdin, a
    /// FIFO, a device), bytes. A stream, held in memory whole, is capped by default at the
    /// smaller of 16 GiB and the free memory.
    #[arg(long, value_name = "BYTES", default_value_t = steplens_ingest::DEFAULT_MAX_INFLATED_BYTES)]
    max_inflated_bytes: u64,
    /// Largest decompressed/compressed ratio of a .gz input or an archive member past its first
    /// 256 MiB.
    #[arg(long, value_name = "N", default_value_t = limits::DEFAULT_MAX_INFLATE_RATIO)]
    max_inflate_ratio: u64,
    /// Most tracks (threads, streams, engine lanes, counters) over all inputs.
    #[arg(long, value_name = "N", default_value_t = limits::DEFAULT_MAX_TRACKS)]
    max_tracks: usize,
    /// Longest name or category accepted, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = limits::DEFAULT_MAX_NAME_BYTES)]
    max_name_bytes: usize,
    /// Deepest nesting of JSON arrays and objects (event args) accepted.
    #[arg(long, value_name = "N", default_value_t = limits::DEFAULT_MAX_JSON_DEPTH)]
    max_json_depth: usize,
    /// The rank of a trace without `distributedInfo`, from its path: the first capture group of
    /// this regex (default: `rank3`, `rank-3`, `_r3` in the file name).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    rank_regex: Option<regex::Regex>,
    /// The annotations that mark steps: names matching this regex, on every input, instead of
    /// `ProfilerStep#N` (default: `ProfilerStep#N`; without it, the inference engines' markers
    /// `step[…]` and `execute_model`). Each marked range is a step, numbered in time order.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    step_marker: Option<regex::Regex>,
}

impl LoadArgs {
    fn options(&self) -> LoadOptions {
        LoadOptions {
            mmap: !self.no_mmap,
            max_inflated_bytes: self.max_inflated_bytes,
            limits: steplens_ingest::Limits {
                max_tracks: self.max_tracks,
                max_name_bytes: self.max_name_bytes,
                max_json_depth: self.max_json_depth,
                max_inflate_ratio: self.max_inflate_ratio,
            },
            map_fresh_files: false,
            rank_regex: self.rank_regex.clone(),
            step_marker: self.step_marker.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
    /// Aligned tables for the terminal.
    Text,
    /// Markdown tables (PR comments, job summaries).
    Md,
    /// JSON: the `steplens.report/1` contract (`report`), `steplens.diff/1` (`diff`).
    Json,
    /// One self-contained HTML page with charts (open it in a browser; no network needed).
    Html,
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// Trace files or directories of them (`-` reads stdin). Several files (ranks) make one
    /// report; a directory stands for the traces in it (truth files and reports are skipped).
    /// A saved `steplens.report/1` JSON report renders in any format as its traces did.
    #[arg(required_unless_present = "summaries")]
    traces: Vec<PathBuf>,
    /// Merge rank summaries (`steplens summarize` files, or directories of `*.summary.json`)
    /// into the rank and collective tables and stragglers, instead of reading traces.
    #[arg(long, value_name = "PATH", num_args = 1.., conflicts_with = "traces")]
    summaries: Vec<PathBuf>,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
    /// Write the report to FILE instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Ops shown in the text and Markdown op tables (JSON has all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Budget file (TOML) whose `[thresholds]` table overrides detector thresholds
    /// (docs/findings.md lists them).
    #[arg(long, value_name = "FILE")]
    budget: Option<PathBuf>,
    /// Add the critical path table to text and Markdown: per step, what bounds it (host
    /// compute, launch overhead, device compute, communication, kernel gaps, sync waits, data
    /// loading, compiles) and the event with the most time on the path. JSON always has it.
    #[arg(long)]
    critical_path: bool,
    /// Show the TensorBoard profiler plugin's views instead of the report, with its numbers
    /// (text and Markdown; JSON and HTML always have them): `overview` (step-time breakdown,
    /// GPU summary), `operators`, `kernels`, `distributed`; and `roofline`, the per-op
    /// performance model (FLOPs, bytes, achieved TFLOP/s and TB/s, share of the device's peak).
    /// Repeat or separate with commas.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VIEW")]
    view: Vec<ViewArg>,
    #[command(flatten)]
    load: LoadArgs,
}

/// `report --view` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ViewArg {
    Overview,
    Operators,
    Kernels,
    Distributed,
    Roofline,
}

impl ViewArg {
    fn view(self) -> steplens_output::views::View {
        use steplens_output::views::View;
        match self {
            Self::Overview => View::Overview,
            Self::Operators => View::Operators,
            Self::Kernels => View::Kernels,
            Self::Distributed => View::Distributed,
            Self::Roofline => View::Roofline,
        }
    }
}

#[derive(Debug, clap::Args)]
struct InfoArgs {
    /// Trace file (`-` reads stdin).
    trace: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also list every track (kind, engine class, process, name, slice count).
    #[arg(long)]
    tracks: bool,
    #[command(flatten)]
    load: LoadArgs,
}

/// `report --help`'s list of detectors, from the registry: each one's kinds and what fixing them
/// saves, the thresholds it owns with their defaults, and its advice.
fn detectors_help() -> String {
    use steplens_analysis::detect::DETECTORS;
    use steplens_analysis::detect::registry::{REPORT_THRESHOLDS, Saves, Threshold};
    let setting = |t: &Threshold| format!("{} = {}", t.key, t.value());
    let mut out = String::from(
        "Detectors: the finding kinds each raises (and what fixing one saves), the thresholds it \
         owns with their defaults (a budget file's [thresholds] table overrides them; \
         docs/findings.md explains each), and its advice.\n",
    );
    for d in DETECTORS {
        let kinds: Vec<String> = d
            .raises
            .iter()
            .map(|r| {
                let saves = match r.saves {
                    Saves::HostTime => "host time",
                    Saves::DeviceWork => "device work",
                    Saves::NotStepTime => "not step time",
                };
                format!("{} ({saves})", r.kind.as_str())
            })
            .collect();
        out.push_str(&format!("\n  {}: {}\n", d.name, kinds.join(", ")));
        if !d.thresholds.is_empty() {
            let owned: Vec<String> = d.thresholds.iter().map(setting).collect();
            out.push_str(&format!("      {}\n", owned.join(", ")));
        }
        out.push_str(&format!("      {}\n", d.advice));
    }
    let report: Vec<String> = REPORT_THRESHOLDS
        .iter()
        .map(|(t, what)| format!("{} ({what})", setting(t)))
        .collect();
    out.push_str(&format!("\n  the report itself: {}\n", report.join(", ")));
    out
}

fn main() -> ExitCode {
    let command = Cli::command().mut_subcommand("report", |c| c.after_long_help(detectors_help()));
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    #[cfg(unix)]
    steplens::run_input::before_mapping(sigbus::install);
    // What a load says while it waits (a FIFO with no writer), as the progress bar would.
    steplens_ingest::source::on_notice(|line| {
        let shown = steplens_output::escape::terminal(line).into_owned();
        let _ = writeln!(io::stderr().lock(), "steplens: {shown}");
    });
    let json_errors = match &cli.command {
        Command::Report(args) => args.format == ReportFormat::Json,
        Command::Info(args) => args.json,
        Command::Check(args) => args.json_output(),
        Command::Diff(args) => args.json_output(),
        Command::Export(_)
        | Command::Bench { .. }
        | Command::Baseline(_)
        | Command::Summarize(_)
        | Command::View { .. } => false,
    };
    let result = match cli.command {
        Command::Report(args) => report(&args).map(|()| true),
        Command::Info(args) => info(&args).map(|()| true),
        Command::Check(args) => check_cmd::run(&args),
        Command::Diff(args) => diff_cmd::run(&args).map(|()| true),
        Command::Baseline(command) => baseline_cmd::run(&command).map(|()| true),
        Command::Export(args) => export_cmd::run(&args).map(|()| true),
        Command::Bench { args } => Err(anyhow::anyhow!(
            "the benchmark is not part of the installed binary: run `cargo run --release -p steplens-tools --bin steplens-bench -- {}`",
            args.join(" ")
        )),
        Command::Summarize(args) => summaries_cmd::summarize(&args).map(|()| true),
        Command::View { traces, load } => view(&traces, load.options()).map(|()| true),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) => {
            // A closed pipe (`steplens report … | head`) is not an error.
            if err.chain().any(|e| {
                e.downcast_ref::<io::Error>()
                    .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            let line = one_line(&err);
            if json_errors {
                // Scripts that asked for JSON get the error as JSON too, with its stable code.
                let doc = serde_json::json!({
                    "schema": "steplens.error/1",
                    "error": { "code": error_code(&err), "message": line },
                });
                let _ = writeln!(io::stdout().lock(), "{doc}");
            }
            // The line names files and what is in them: their control characters stay visible.
            let mut stderr = io::stderr().lock();
            let _ = writeln!(
                stderr,
                "steplens: error: {}",
                steplens_output::escape::terminal(&line)
            );
            ExitCode::from(2)
        }
    }
}

/// Loads the traces with a progress bar on stderr for slow loads.
#[cfg(feature = "viewer")]
fn view(traces: &[PathBuf], load: LoadOptions) -> anyhow::Result<()> {
    // A directory without traces fails here, before a window opens; the window expands the
    // directories itself and names what they held besides traces.
    steplens_ingest::open::expand_inputs(traces)?;
    steplens_viewer::run(traces.to_vec(), load)
        .map_err(|e| anyhow::anyhow!("cannot open the viewer window: {e}"))
}

/// A CLI-only build keeps the command, so scripts and muscle memory get a reason, not clap's
/// "unrecognized subcommand".
#[cfg(not(feature = "viewer"))]
fn view(_traces: &[PathBuf], _load: LoadOptions) -> anyhow::Result<()> {
    anyhow::bail!(
        "this steplens was built without its viewer (--no-default-features): `cargo install \
         steplens` gives `steplens view`"
    )
}

fn load(paths: &[PathBuf], options: &LoadOptions) -> Result<Timeline, IngestError> {
    let expanded = expand_dirs(paths)?;
    #[cfg(unix)]
    sigbus::install(&expanded);
    let paths = expanded.as_slice();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let label = match paths {
        [one] => one.display().to_string(),
        _ => format!("{} traces", paths.len()),
    };
    let mut bar = progress::ProgressBar::new(&label);
    let mut callback = |done: u64, total: u64| bar.update(done, total);
    let timeline = steplens_ingest::load_many(&refs, options, Some(&mut callback));
    bar.finish();
    timeline
}

/// Where a command's output goes: a file (checked at once not to be one of the run's inputs,
/// so that a refused path fails before the work) or stdout. What is written is held in memory
/// and written out by [`Output::finish`] (a file through a temporary file renamed into place,
/// [`output_path::write_atomically`]), so a failed write (a full disk, a closed pipe) is one
/// error that names the file, with code `io`, whichever writer (text, JSON, HTML) ran into it,
/// and leaves no half-written file.
pub(crate) struct Output {
    file: Option<PathBuf>,
    buf: Vec<u8>,
}

impl Output {
    /// Writes what was rendered to its destination.
    pub(crate) fn finish(self) -> Result<()> {
        let Some(path) = self.file else {
            let mut stdout = io::stdout().lock();
            return stdout
                .write_all(&self.buf)
                .and_then(|()| stdout.flush())
                .context("cannot write standard output");
        };
        output_path::write_atomically(&path, |file| Ok(file.write_all(&self.buf)?))?;
        said_written(&path, self.buf.len() as u64);
        Ok(())
    }

    /// Like [`Output::finish`], but what `render` writes goes to the destination as it renders
    /// (after anything already written here) instead of being held: a large HTML page is never
    /// whole in memory. A file still goes through a temporary file renamed into place.
    pub(crate) fn stream(
        self,
        render: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
        let Some(path) = self.file else {
            let mut stdout = io::BufWriter::with_capacity(1 << 20, io::stdout().lock());
            return stdout
                .write_all(&self.buf)
                .and_then(|()| render(&mut stdout))
                .and_then(|()| stdout.flush())
                .context("cannot write standard output");
        };
        let bytes = output_path::write_atomically(&path, |file| {
            let mut counted = Counted {
                inner: file,
                bytes: 0,
            };
            counted.write_all(&self.buf)?;
            render(&mut counted)?;
            Ok(counted.bytes)
        })?;
        said_written(&path, bytes);
        Ok(())
    }
}

/// A file written is said in one line, as `export` does.
fn said_written(path: &Path, bytes: u64) {
    let _ = writeln!(
        io::stderr().lock(),
        "wrote {} ({})",
        steplens_output::escape::terminal(&path.display().to_string()),
        steplens_analysis::units::human_bytes(bytes)
    );
}

/// A writer that counts the bytes through it (for the `wrote FILE (size)` line).
struct Counted<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(bytes)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Write for Output {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The output for `path` (stdout when `None`), and whether it is a colour terminal. A path
/// that is one of `inputs` (what the run reads: traces, directories of them, budget files) is
/// refused.
pub(crate) fn output(path: Option<&Path>, inputs: &[PathBuf]) -> Result<(Output, bool)> {
    match path {
        Some(path) => {
            output_path::check_not_an_input(path, inputs)?;
            Ok((
                Output {
                    file: Some(path.to_owned()),
                    buf: Vec::new(),
                },
                false,
            ))
        }
        None => {
            let color = io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            Ok((
                Output {
                    file: None,
                    buf: Vec::new(),
                },
                color,
            ))
        }
    }
}

fn report(args: &ReportArgs) -> Result<()> {
    if !args.summaries.is_empty() {
        return summaries_cmd::report_summaries(
            &args.summaries,
            args.format,
            args.output.as_deref(),
        );
    }
    let inputs: Vec<PathBuf> = args.traces.iter().chain(&args.budget).cloned().collect();
    let (mut out, color) = output(args.output.as_deref(), &inputs)?;
    let budget = read_optional_budget(args.budget.as_deref())?;
    let options = with_budget_marker(args.load.options(), &budget);
    // A saved report renders as the trace it was made from did: every format is drawn from the
    // report alone.
    let saved = match args.traces.as_slice() {
        [one] => steplens::run_input::read_saved_report(one)?,
        _ => None,
    };
    let report = match saved {
        Some(report) => report,
        None => {
            let timeline = load(&args.traces, &options)?;
            // The text and Markdown reports show the TensorBoard views only under `--view`.
            let parts = match args.format {
                ReportFormat::Text | ReportFormat::Md if args.view.is_empty() => {
                    steplens_analysis::report::Parts::WITHOUT_VIEWS
                }
                _ => steplens_analysis::report::Parts::ALL,
            };
            steplens_analysis::report::build_report_parts(
                &timeline,
                &budget.thresholds,
                parts,
                None,
            )
        }
    };
    match args.format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        ReportFormat::Text | ReportFormat::Md if !args.view.is_empty() => {
            let views: Vec<_> = args.view.iter().map(|v| v.view()).collect();
            if args.format == ReportFormat::Text {
                steplens_output::views::views_text(&mut out, &report, &views, args.top, color)?;
            } else {
                steplens_output::views::views_markdown(&mut out, &report, &views, args.top)?;
            }
        }
        ReportFormat::Text => {
            steplens_output::text::text(&mut out, &report, args.top, color)?;
            if args.critical_path {
                steplens_output::text::critical_path_text(&mut out, &report, color)?;
            }
        }
        ReportFormat::Md => {
            steplens_output::text::markdown(&mut out, &report, args.top)?;
            if args.critical_path {
                steplens_output::text::critical_path_markdown(&mut out, &report)?;
            }
        }
        ReportFormat::Html => {
            // Written to the file (or stdout) as it renders, never held whole (issue 45).
            return out.stream(|w| steplens_output::html::write_report_page(w, &report));
        }
    }
    out.finish()?;
    Ok(())
}

fn info(args: &InfoArgs) -> Result<()> {
    let timeline = load(std::slice::from_ref(&args.trace), &args.load.options())?;
    let info = steplens_analysis::trace_info::TraceInfo::of(&timeline, args.tracks);
    let (mut out, color) = output(None, &[])?;
    if args.json {
        serde_json::to_writer_pretty(&mut out, &steplens_output::info::info_json(&info))?;
        writeln!(out)?;
    } else {
        steplens_output::info::info_text(&mut out, &info, color)?;
        if args.tracks {
            steplens_output::info::tracks_text(&mut out, &info)?;
        }
    }
    out.finish()?;
    Ok(())
}
