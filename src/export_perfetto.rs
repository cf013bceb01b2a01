//! `steplens export --perfetto OUT.pftrace`: write the loaded Timeline and its report as a
//! Perfetto trace and say in one line on stderr what was written.

use std::io::{self, Write};
use std::path::Path;

use anyhow::Result;
use steplens_analysis::Report;
use steplens_analysis::export::perfetto::write_perfetto;
use steplens_ingest::Timeline;

use steplens::output_path::write_atomically;
use steplens_output::escape;
use steplens_output::text::{human_bytes, thousands};

/// Writes `timeline` with `report` drawn on it to `path` (the caller checked that it is no
/// input), through a temporary file renamed into place.
pub(crate) fn write(timeline: &Timeline, report: &Report, path: &Path) -> Result<()> {
    let stats = write_atomically(path, |out| Ok(write_perfetto(timeline, report, out)?))?;
    let shown = escape::terminal(&path.display().to_string()).into_owned();
    writeln!(
        io::stderr().lock(),
        "wrote {shown}: {}, {} slices on {} tracks, {} steps, {} findings, {} flows (open it in ui.perfetto.dev)",
        human_bytes(stats.bytes),
        thousands(stats.slices),
        thousands(stats.tracks),
        stats.steps,
        stats.findings,
        thousands(stats.flows),
    )?;
    // Args the load could not keep are missing from the export too: said here, per input.
    for source in &timeline.sources {
        for w in source
            .warnings
            .iter()
            .filter(|w| w.code == steplens_ingest::model::WarningCode::ArgsTooLong)
        {
            writeln!(
                io::stderr().lock(),
                "steplens: warning: {}: {}",
                escape::terminal(&source.path),
                escape::terminal(&w.message)
            )?;
        }
    }
    if stats.args_dropped > 0 {
        writeln!(
            io::stderr().lock(),
            "steplens: warning: {shown}: {} slices written without their args, which are not a well-formed JSON object or nest too deep",
            thousands(stats.args_dropped),
        )?;
    }
    Ok(())
}
