//! The map and the reduce of a job too large for one machine: `steplens summarize TRACE` runs
//! next to each rank's trace and writes what the rank analysis needs (a
//! `steplens.rank-summary/1` file of a few hundred kilobytes); `steplens report --summaries
//! DIR…` merges any number of them into the same rank table, collectives table and stragglers
//! that loading the traces together gives.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use steplens_analysis::ranks::{RankSummary, rank_summary, ranks_of};

use crate::{LoadArgs, ReportFormat, output};
use steplens_output::escape;
use steplens_output::table::Style;
use steplens_output::text as render;

/// `steplens summarize`.
#[derive(Debug, clap::Args)]
pub(crate) struct SummarizeArgs {
    /// One rank's trace.
    trace: PathBuf,
    /// Write the summary to FILE (default: stdout). Name it `*.summary.json` so that
    /// `report --summaries DIR` finds it.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

pub(crate) fn summarize(args: &SummarizeArgs) -> Result<()> {
    let (mut out, _) = output(args.output.as_deref(), std::slice::from_ref(&args.trace))?;
    let timeline = crate::load(std::slice::from_ref(&args.trace), &args.load.options())?;
    if timeline.sources.len() != 1 {
        bail!(
            "{}: a summary is of one rank's trace; this holds {} inputs",
            args.trace.display(),
            timeline.sources.len()
        );
    }
    let self_time = steplens_analysis::ops::SelfTime::new(&timeline);
    let summary = rank_summary(&timeline, 0, &self_time);
    serde_json::to_writer(&mut out, &summary)?;
    writeln!(out)?;
    out.finish()?;
    Ok(())
}

/// The summary files named by `paths`: files as given, directories for their
/// `*.summary.json` (sorted).
fn summary_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("{}: cannot list the directory", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".summary.json"))
            })
            .collect();
        if found.is_empty() {
            bail!(
                "{}: no *.summary.json files in the directory",
                path.display()
            );
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

fn read_summary(path: &Path) -> Result<RankSummary> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    steplens_analysis::ranks::parse_summary(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// `steplens report --summaries PATH…`.
pub(crate) fn report_summaries(
    paths: &[PathBuf],
    format: ReportFormat,
    output_path: Option<&Path>,
) -> Result<()> {
    let files = summary_files(paths)?;
    let (mut out, color) = output(output_path, &files)?;
    let summaries: Vec<RankSummary> = files
        .iter()
        .map(|f| read_summary(f))
        .collect::<Result<_>>()?;
    let Some((ranks, findings)) = ranks_of(&summaries) else {
        bail!(
            "{} summaries: the rank analysis needs at least two ranks, each with collectives",
            summaries.len()
        );
    };
    if let Some(why) = ranks.refusal() {
        bail!("{}", escape::terminal(&why));
    }
    match format {
        ReportFormat::Json => {
            let doc = serde_json::json!({
                "schema": "steplens.ranks/1",
                "summaries": files.len(),
                "ranks": ranks,
                "findings": findings,
            });
            serde_json::to_writer_pretty(&mut out, &doc)?;
            writeln!(out)?;
        }
        ReportFormat::Md => {
            writeln!(
                out,
                "## Ranks ({}; {})\n",
                ranks.world_size,
                escape::markdown(&ranks.clock)
            )?;
            for w in &ranks.warnings {
                writeln!(out, "- warning: {}", escape::markdown(&w.message))?;
            }
            if !ranks.warnings.is_empty() {
                writeln!(out)?;
            }
            render::ranks_table(&ranks).markdown(&mut out)?;
            writeln!(out)?;
            render::collectives_table(&ranks).markdown(&mut out)?;
            for f in &findings {
                writeln!(
                    out,
                    "\n- **{}** {}: {}",
                    f.kind,
                    escape::markdown(&f.title),
                    escape::markdown_prose(&f.recommendation)
                )?;
            }
        }
        ReportFormat::Text | ReportFormat::Html => {
            if format == ReportFormat::Html {
                bail!("report --summaries writes text, md or json");
            }
            let style = Style { color };
            writeln!(
                out,
                "{}",
                style.bold(&format!(
                    "Ranks ({}; {}) from {} summaries",
                    ranks.world_size,
                    ranks.clock,
                    files.len()
                ))
            )?;
            for w in &ranks.warnings {
                writeln!(
                    out,
                    "  {} {}",
                    style.yellow("warning:"),
                    escape::terminal(&w.message)
                )?;
            }
            render::ranks_table(&ranks).text(&mut out, style)?;
            render::collectives_table(&ranks).text(&mut out, style)?;
            for f in &findings {
                writeln!(out, "  !! {} {}", f.kind, escape::terminal(&f.title))?;
                writeln!(out, "    {}", escape::terminal(&f.recommendation))?;
            }
        }
    }
    out.finish()?;
    Ok(())
}
