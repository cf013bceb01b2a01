//! `steplens export TRACE… --tables DIR`: the slices, steps, ops, findings, engines and idle
//! tables as Parquet or CSV files for pandas, polars or DuckDB; `--perfetto OUT.pftrace`: the
//! Timeline with the steps and findings drawn on it, for ui.perfetto.dev.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use steplens_analysis::table::{TableFormat, tables};

use crate::render::thousands;
use crate::{LoadArgs, load, read_budget};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TableFileFormat {
    /// Apache Parquet (zstd).
    Parquet,
    /// CSV with a header row.
    Csv,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// Trace files (`-` reads stdin). Several files (ranks) make one export.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Write the tables into DIR (created if missing): slices, steps, ops, findings, engines,
    /// idle.
    #[arg(long, value_name = "DIR")]
    tables: Option<PathBuf>,
    /// Write a Perfetto protobuf trace (`.pftrace`) with the steps and findings as annotation
    /// tracks.
    #[arg(long, value_name = "OUT.pftrace")]
    perfetto: Option<PathBuf>,
    /// File format of the tables.
    #[arg(long, value_enum, default_value_t = TableFileFormat::Parquet)]
    format: TableFileFormat,
    /// Budget file whose `[thresholds]` table overrides detector thresholds.
    #[arg(long, value_name = "FILE")]
    budget: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

pub(crate) fn run(args: &ExportArgs) -> Result<()> {
    if args.tables.is_none() && args.perfetto.is_none() {
        bail!("nothing to export: give --tables DIR or --perfetto OUT.pftrace");
    }
    let thresholds = match &args.budget {
        Some(path) => read_budget(path)?.thresholds,
        None => steplens_analysis::Thresholds::default(),
    };
    let timeline = load(&args.traces, &args.load.options())?;
    let report = steplens_analysis::build_report_with(&timeline, &thresholds);
    let format = match args.format {
        TableFileFormat::Parquet => TableFormat::Parquet,
        TableFileFormat::Csv => TableFormat::Csv,
    };
    if let Some(path) = &args.perfetto {
        crate::export_perfetto::write(&timeline, &report, path)?;
    }
    let Some(dir) = &args.tables else {
        return Ok(());
    };
    let written = write_tables(&timeline, &report, dir, format)?;
    let mut stderr = std::io::stderr().lock();
    writeln!(
        stderr,
        "steplens: wrote {} tables to {}: {}",
        written.len(),
        dir.display(),
        written
            .iter()
            .map(|(name, rows)| format!("{name} ({} rows)", thousands(*rows as u64)))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    Ok(())
}

fn write_tables(
    timeline: &steplens_ingest::Timeline,
    report: &steplens_analysis::Report,
    dir: &Path,
    format: TableFormat,
) -> Result<Vec<(&'static str, usize)>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Vec::new();
    for mut table in tables(timeline, report)? {
        let path = dir.join(format!("{}.{}", table.name, format.extension()));
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        table
            .write(format, &mut out)
            .with_context(|| format!("cannot write {}", path.display()))?;
        out.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        written.push((table.name, table.rows()));
    }
    Ok(written)
}
