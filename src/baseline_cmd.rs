//! `steplens baseline update FILE RUN…`: keeps a rolling set of the last N accepted runs in one
//! JSON file (`steplens.baselines/1`) that a repository can commit or a CI cache can keep;
//! `steplens check --baseline FILE` pools them and measures the run-to-run noise from them.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::LoadArgs;
use steplens::output_path::{check_not_an_input, write_atomically};
use steplens::run_input::{
    BASELINE_SET_SCHEMA, BaselineSet, is_baseline_set, load_run, read_baseline_set,
};
use steplens::run_input::{read_optional_budget, with_budget_marker};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum BaselineCommand {
    /// Add an accepted run to the set in FILE (created if missing), keeping the newest `--keep`.
    Update(UpdateArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct UpdateArgs {
    /// The baseline set to update.
    file: PathBuf,
    /// The accepted run: trace files (several for ranks) or one saved JSON report.
    #[arg(required = true)]
    run: Vec<PathBuf>,
    /// Runs the set keeps (oldest dropped first).
    #[arg(long, default_value_t = 5)]
    keep: usize,
    /// Budget file whose `[thresholds]` table the run is analysed with.
    #[arg(long, value_name = "FILE")]
    budget: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

pub(crate) fn run(command: &BaselineCommand) -> Result<()> {
    let BaselineCommand::Update(args) = command;
    // The set is read and replaced; the run and the budget only read.
    let inputs: Vec<PathBuf> = args.run.iter().chain(&args.budget).cloned().collect();
    check_not_an_input(&args.file, &inputs)?;
    let budget = read_optional_budget(args.budget.as_deref())?;
    let mut set = if args.file.exists() {
        if !is_baseline_set(&args.file) {
            anyhow::bail!(
                "{}: not a {BASELINE_SET_SCHEMA} file (refusing to overwrite it)",
                args.file.display()
            );
        }
        read_baseline_set(&args.file)?
    } else {
        BaselineSet {
            schema: BASELINE_SET_SCHEMA.to_owned(),
            keep: args.keep,
            runs: Vec::new(),
        }
    };
    let run = load_run(
        &args.run,
        &with_budget_marker(args.load.options(), &budget),
        &budget.thresholds,
        false,
    )?;
    set.keep = args.keep.max(1);
    set.runs.push(run.report);
    let excess = set.runs.len().saturating_sub(set.keep);
    set.runs.drain(..excess);
    // Written beside the file and renamed over it, so a killed job never leaves half a set.
    let text = serde_json::to_string(&set)?;
    write_atomically(&args.file, |file| Ok(file.write_all(text.as_bytes())?))?;
    eprintln_summary(&args.file, set.runs.len(), set.keep);
    Ok(())
}

#[allow(clippy::print_stderr)]
fn eprintln_summary(file: &std::path::Path, runs: usize, keep: usize) {
    eprintln!(
        "{}: {runs} run(s) kept (at most {keep})",
        steplens_output::escape::terminal(&file.display().to_string())
    );
}
