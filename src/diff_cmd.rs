//! `steplens diff A B`: two runs side by side as text, Markdown or JSON.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use steplens_analysis::compare::diff::{DiffSide, diff};
use steplens_analysis::compare::figures::RunFigures;

use crate::{LoadArgs, ReportFormat, output};
use steplens::run_input::load_pair;
use steplens::run_input::{read_optional_budget, with_budget_marker};
use steplens_output::diff::write;
use steplens_output::table::Style;

#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// Run A (the reference): a trace or a saved JSON report.
    a: PathBuf,
    /// Run B: a trace or a saved JSON report.
    b: PathBuf,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
    /// Write the diff to FILE instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Changed ops shown in text and Markdown (JSON has all).
    #[arg(long, default_value_t = 15)]
    top: usize,
    /// Steps left out at the start of each input.
    #[arg(long, value_name = "N", default_value_t = 1)]
    warmup: usize,
    /// Budget file whose `[thresholds]` table overrides detector thresholds.
    #[arg(long, value_name = "FILE")]
    budget: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

impl DiffArgs {
    /// Whether the output is JSON (errors are then written as JSON too).
    pub(crate) fn json_output(&self) -> bool {
        self.format == ReportFormat::Json
    }
}

pub(crate) fn run(args: &DiffArgs) -> Result<()> {
    let inputs: Vec<PathBuf> = [&args.a, &args.b]
        .into_iter()
        .chain(&args.budget)
        .cloned()
        .collect();
    let (mut out, color) = output(args.output.as_deref(), &inputs)?;
    let budget = read_optional_budget(args.budget.as_deref())?;
    let (a, b) = load_pair(
        std::slice::from_ref(&args.a),
        std::slice::from_ref(&args.b),
        &with_budget_marker(args.load.options(), &budget),
        &budget.thresholds,
        true,
    )?;
    let fa = RunFigures::of(&a.report, args.warmup);
    let fb = RunFigures::of(&b.report, args.warmup);
    let result = diff(
        &DiffSide {
            label: a.label.clone(),
            figures: &fa,
            ops: &a.ops,
        },
        &DiffSide {
            label: b.label.clone(),
            figures: &fb,
            ops: &b.ops,
        },
    );
    match args.format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &result)?;
            writeln!(out)?;
        }
        ReportFormat::Text => write(&mut out, &result, args.top, Some(Style { color }))?,
        ReportFormat::Md => write(&mut out, &result, args.top, None)?,
        ReportFormat::Html => {
            out.write_all(steplens_output::html::diff_page(&result).as_bytes())?;
        }
    }
    out.finish()?;
    Ok(())
}
