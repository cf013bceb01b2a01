//! `steplens export --perfetto OUT.pftrace`: write the loaded Timeline and its report as a
//! Perfetto trace and say in one line on stderr what was written.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use steplens_analysis::Report;
use steplens_analysis::perfetto_export::write_perfetto;
use steplens_ingest::Timeline;

use steplens_output::text::{human_bytes, thousands};

/// Writes `timeline` with `report` drawn on it to `path`.
pub(crate) fn write(timeline: &Timeline, report: &Report, path: &Path) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let stats = write_perfetto(timeline, report, &mut out)
        .with_context(|| format!("cannot write {}", path.display()))?;
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(
        io::stderr().lock(),
        "wrote {}: {}, {} slices on {} tracks, {} steps, {} findings, {} flows (open it in ui.perfetto.dev)",
        path.display(),
        human_bytes(stats.bytes),
        thousands(stats.slices),
        thousands(stats.tracks),
        stats.steps,
        stats.findings,
        thousands(stats.flows),
    )?;
    if stats.slices_dropped > 0 {
        writeln!(
            io::stderr().lock(),
            "steplens: warning: {}: left out {} slices of tracks that overlap themselves more than {} deep (the report counts them all)",
            path.display(),
            thousands(stats.slices_dropped),
            steplens_ingest::perfetto::write::MAX_LAYERS,
        )?;
    }
    if stats.args_dropped > 0 {
        writeln!(
            io::stderr().lock(),
            "steplens: warning: {}: {} slices written without their args, which are not a well-formed JSON object or nest too deep",
            path.display(),
            thousands(stats.args_dropped),
        )?;
    }
    Ok(())
}
