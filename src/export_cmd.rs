//! `steplens export TRACE… --tables DIR`: the slices, steps, ops, findings, engines and idle
//! tables as Parquet or CSV files for pandas, polars or DuckDB (with several ranks, a
//! hive-partitioned dataset and a ranks table); `--perfetto OUT.pftrace`: the
//! Timeline with the steps and findings drawn on it, for ui.perfetto.dev.

use std::io::Write;
#[cfg(feature = "tables")]
use std::path::Path;
use std::path::PathBuf;

#[cfg(feature = "tables")]
use anyhow::Context;

use anyhow::{Result, bail};
#[cfg(feature = "tables")]
use steplens::output_path::TEMP_PREFIX;
#[cfg(feature = "tables")]
use steplens_analysis::export::table::{TableFormat, tables};

use crate::{LoadArgs, load};
use steplens::run_input::{read_optional_budget, with_budget_marker};
use steplens_output::text::thousands;

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
    /// Write the tables into a directory that holds files steplens did not write (they stay;
    /// tables of the same names are replaced).
    #[arg(long)]
    force: bool,
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
    if args.tables.is_some() && !cfg!(feature = "tables") {
        bail!(
            "--tables needs steplens built with its `tables` feature (polars); this one was \
             built with --no-default-features: `cargo install steplens` gives it"
        );
    }
    let inputs: Vec<PathBuf> = args.traces.iter().chain(&args.budget).cloned().collect();
    if let Some(path) = &args.perfetto {
        steplens::output_path::check_not_an_input(path, &inputs)?;
    }
    if let Some(dir) = &args.tables {
        steplens::output_path::check_dir_holds_no_input(dir, &inputs)?;
    }
    let budget = read_optional_budget(args.budget.as_deref())?;
    let options = with_budget_marker(args.load.options(), &budget);
    let timeline = load(&args.traces, &options)?;
    let report = steplens_analysis::build_report_with(&timeline, &budget.thresholds);
    if let Some(path) = &args.perfetto {
        crate::export_perfetto::write(&timeline, &report, path)?;
    }
    let Some(dir) = &args.tables else {
        return Ok(());
    };
    let written = write_tables(&timeline, &report, dir, args.format, args.force)?;
    let mut stderr = std::io::stderr().lock();
    writeln!(
        stderr,
        "steplens: wrote {} tables to {}: {}",
        written.len(),
        steplens_output::escape::terminal(&dir.display().to_string()),
        written
            .iter()
            .map(|(name, rows)| {
                let unit = if *rows == 1 { "row" } else { "rows" };
                format!("{name} ({} {unit})", thousands(*rows as u64))
            })
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    Ok(())
}

/// Writes the tables; with several ranks, the per-rank tables (slices, steps) as a
/// hive-partitioned dataset (`slices/rank=3/part-0.parquet`) that DuckDB, Spark or DataFusion
/// read as one table with a `rank` column, and a flat `ranks` table.
/// The file that marks a directory as one `export --tables` wrote, listing its entries.
#[cfg(feature = "tables")]
const MARKER: &str = ".steplens-tables";

/// Writes every table into `dir`. They are written into a temporary directory inside it first
/// and then swapped in, entry by entry, and every entry the previous export listed in
/// [`MARKER`] is removed, so no partition of an earlier run (4 ranks, then 2) is left for a
/// `*/rank=*/*.parquet` glob to find. A directory with files steplens did not write is refused
/// unless `force`.
#[cfg(feature = "tables")]
fn write_tables(
    timeline: &steplens_ingest::Timeline,
    report: &steplens_analysis::Report,
    dir: &Path,
    format: TableFileFormat,
    force: bool,
) -> Result<Vec<(&'static str, usize)>> {
    let format = match format {
        TableFileFormat::Parquet => TableFormat::Parquet,
        TableFileFormat::Csv => TableFormat::Csv,
    };
    let previous = owned_entries(dir, force)?;
    let staging = dir.join(format!("{TEMP_PREFIX}{}", std::process::id()));
    std::fs::create_dir_all(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))?;
    let result = stage_tables(timeline, report, &staging, format);
    let (written, entries) = match result {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    for name in previous.iter().chain(&entries) {
        remove_entry(&dir.join(name))?;
    }
    for name in &entries {
        let (from, to) = (staging.join(name), dir.join(name));
        std::fs::rename(&from, &to)
            .with_context(|| format!("cannot move {} to {}", from.display(), to.display()))?;
    }
    std::fs::remove_dir_all(&staging)
        .with_context(|| format!("cannot remove {}", staging.display()))?;
    let marker = entries.join("\n") + "\n";
    steplens::output_path::write_atomically(&dir.join(MARKER), |file| {
        Ok(file.write_all(marker.as_bytes())?)
    })?;
    Ok(written)
}

/// The entries of `dir` that an earlier export wrote (from its [`MARKER`]); an error when the
/// directory holds anything else, unless `force`.
#[cfg(feature = "tables")]
fn owned_entries(dir: &Path, force: bool) -> Result<Vec<String>> {
    if !dir.exists() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        return Ok(Vec::new());
    }
    let listed: Vec<String> = std::fs::read_to_string(dir.join(MARKER))
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default();
    let mut foreign = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let name = entry
            .with_context(|| format!("cannot read {}", dir.display()))?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name != MARKER && !name.starts_with(TEMP_PREFIX) && !listed.contains(&name) {
            foreign.push(name);
        }
    }
    if !foreign.is_empty() && !force {
        foreign.sort();
        bail!(
            "{}: holds files steplens did not write ({}{}): give an empty or new directory, or --force to write the tables beside them",
            dir.display(),
            foreign
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            if foreign.len() > 5 { ", …" } else { "" }
        );
    }
    // Only names without a path separator: a marker edited by hand cannot point elsewhere.
    Ok(listed
        .into_iter()
        .filter(|n| !n.is_empty() && !n.contains(['/', '\\']) && n != "." && n != "..")
        .collect())
}

#[cfg(feature = "tables")]
fn remove_entry(path: &Path) -> Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => return Ok(()),
    };
    removed.with_context(|| format!("cannot remove {}", path.display()))
}

/// A table's name and the rows written.
#[cfg(feature = "tables")]
type TableRows = (&'static str, usize);

/// Writes the tables into `dir` (the staging directory): the rows per table, and the entries
/// made (`steps.parquet`, `slices/`).
#[cfg(feature = "tables")]
fn stage_tables(
    timeline: &steplens_ingest::Timeline,
    report: &steplens_analysis::Report,
    dir: &Path,
    format: TableFormat,
) -> Result<(Vec<TableRows>, Vec<String>)> {
    let mut all = tables(timeline, report)?;
    let rank_of: Vec<(u16, i64)> = report
        .ranks
        .as_ref()
        .map(|r| r.ranks.iter().map(|row| (row.source, row.rank)).collect())
        .unwrap_or_default();
    if let Some(ranks) = &report.ranks {
        all.push(steplens_analysis::export::table::ranks_table(ranks)?);
    }
    let mut written = Vec::new();
    let mut entries = Vec::new();
    for mut table in all {
        let parts = if rank_of.is_empty() || table.name == "ranks" {
            None
        } else {
            table.split_by_rank(&rank_of)?
        };
        let Some(parts) = parts else {
            let file = format!("{}.{}", table.name, format.extension());
            write_one(&mut table, format, &dir.join(&file))?;
            written.push((table.name, table.rows()));
            entries.push(file);
            continue;
        };
        let mut rows = 0;
        for mut part in parts {
            let folder = dir.join(table.name).join(format!("rank={}", part.rank));
            std::fs::create_dir_all(&folder)
                .with_context(|| format!("cannot create {}", folder.display()))?;
            let path = folder.join(format!("part-0.{}", format.extension()));
            write_one(&mut part.table, format, &path)?;
            rows += part.table.rows();
        }
        written.push((table.name, rows));
        entries.push(table.name.to_owned());
    }
    Ok((written, entries))
}

#[cfg(not(feature = "tables"))]
fn write_tables(
    _timeline: &steplens_ingest::Timeline,
    _report: &steplens_analysis::Report,
    _dir: &std::path::Path,
    _format: TableFileFormat,
    _force: bool,
) -> Result<Vec<(&'static str, usize)>> {
    bail!("--tables needs steplens built with its `tables` feature")
}

#[cfg(feature = "tables")]
fn write_one(
    table: &mut steplens_analysis::export::table::Table,
    format: TableFormat,
    path: &Path,
) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    table
        .write(format, &mut out)
        .with_context(|| format!("cannot write {}", path.display()))?;
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
