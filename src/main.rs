//! The `steplens` command line: `report`, `info`, `check`, `diff`, `export` and `bench`.
//!
//! This is the only place that uses `anyhow`: library errors get their context here and are
//! printed as one line. Exit status: 0 on success, 1 when `check` finds a regression, 2 on bad
//! input or usage.

mod bench;
mod check_cmd;
mod diff_cmd;
mod export_cmd;
mod progress;
mod render;
mod run_input;

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use steplens_ingest::{IngestError, LoadOptions, Timeline};

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
    /// Write the slices, steps, ops and findings as Parquet or CSV tables.
    Export(export_cmd::ExportArgs),
    /// Measure ingest and report speed and memory on a (generated) large trace.
    Bench(bench::BenchArgs),
    /// Open the desktop timeline viewer (traces load in the background; none opens an empty window).
    View {
        /// Trace files to open.
        traces: Vec<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct LoadArgs {
    /// Read files with read() instead of mapping them (for files still being written).
    #[arg(long)]
    no_mmap: bool,
    /// Largest decompressed size accepted from a .gz input, bytes.
    #[arg(long, default_value_t = steplens_ingest::DEFAULT_MAX_INFLATED_BYTES)]
    max_inflated_bytes: u64,
}

impl LoadArgs {
    fn options(&self) -> LoadOptions {
        LoadOptions {
            mmap: !self.no_mmap,
            max_inflated_bytes: self.max_inflated_bytes,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
    /// Aligned tables for the terminal.
    Text,
    /// Markdown tables (PR comments, job summaries).
    Md,
    /// The `steplens.report/1` JSON contract.
    Json,
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// Trace files (`-` reads stdin). Several files (ranks) make one report.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
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
    #[command(flatten)]
    load: LoadArgs,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Report(args) => report(&args).map(|()| true),
        Command::Info(args) => info(&args).map(|()| true),
        Command::Check(args) => check_cmd::run(&args),
        Command::Diff(args) => diff_cmd::run(&args).map(|()| true),
        Command::Export(args) => export_cmd::run(&args).map(|()| true),
        Command::Bench(args) => bench::run(&args).map(|()| true),
        Command::View { traces } => steplens_viewer::run(traces)
            .map_err(|e| anyhow::anyhow!("cannot open the viewer window: {e}"))
            .map(|()| true),
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
            let mut stderr = io::stderr().lock();
            let _ = writeln!(stderr, "steplens: error: {}", one_line(&err));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes on one line, without repeating a cause the message already says.
fn one_line(err: &anyhow::Error) -> String {
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

/// Loads the traces with a progress bar on stderr for slow loads.
fn load(paths: &[PathBuf], options: &LoadOptions) -> Result<Timeline, IngestError> {
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

fn output(path: Option<&Path>) -> Result<(Box<dyn Write>, bool)> {
    match path {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok((Box::new(io::BufWriter::new(file)), false))
        }
        None => {
            let stdout = io::stdout();
            let color = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none();
            Ok((Box::new(io::BufWriter::new(stdout.lock())), color))
        }
    }
}

fn report(args: &ReportArgs) -> Result<()> {
    let thresholds = match &args.budget {
        Some(path) => read_budget(path)?.thresholds,
        None => steplens_analysis::Thresholds::default(),
    };
    let timeline = load(&args.traces, &args.load.options())?;
    let report = steplens_analysis::build_report_with(&timeline, &thresholds);
    let (mut out, color) = output(args.output.as_deref())?;
    match args.format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        ReportFormat::Text => render::text(&mut out, &report, args.top, color)?,
        ReportFormat::Md => render::markdown(&mut out, &report, args.top)?,
    }
    out.flush()?;
    Ok(())
}

/// A budget file: detector thresholds and the check's limits.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Budget {
    thresholds: steplens_analysis::Thresholds,
    check: steplens_analysis::check::CheckBudget,
}

fn read_budget(path: &Path) -> Result<Budget> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read budget file", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|span| text[..span.start].matches('\n').count() + 1);
        let message = e.message().to_owned();
        match line {
            Some(line) => anyhow::anyhow!("{}: line {line}: {message}", path.display()),
            None => anyhow::anyhow!("{}: {message}", path.display()),
        }
    })
}

fn info(args: &InfoArgs) -> Result<()> {
    let timeline = load(std::slice::from_ref(&args.trace), &args.load.options())?;
    let (mut out, color) = output(None)?;
    if args.json {
        serde_json::to_writer_pretty(&mut out, &render::info_json(&timeline, args.tracks))?;
        writeln!(out)?;
    } else {
        render::info_text(&mut out, &timeline, color)?;
        if args.tracks {
            render::tracks_text(&mut out, &timeline)?;
        }
    }
    out.flush()?;
    Ok(())
}
