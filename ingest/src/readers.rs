//! The formats steplens reads: one [`Reader`] per format, each in its own module, listed in
//! [`READERS`] in the order their content checks are tried; [`sniff`] and [`read_input`] pick
//! the reader by content (never by file extension, a damaged Perfetto file excepted). Beside
//! them, [`crate::documents::DOCUMENTS`]: the JSON documents steplens itself writes, which the
//! same first look tells from a trace by their `"schema"` tag.
//!
//! Adding a format is one module with a `Reader` (sniff its first bytes, read into its own
//! input of the builder, return a [`ReadSummary`]), one [`FormatId`] variant (documented in
//! `docs/report-schema.md`; a test holds the two equal) and one entry in [`READERS`]. Readers
//! push slices through the builder's format-free API and never see another input.

use std::sync::Arc;

use crate::builder::TimelineBuilder;
use crate::error::IngestError;
use crate::format::{Format, first_non_space, without_bom};
use crate::reader::{Progress, ReadInput, ReadSummary, Reader};
use crate::source::Input;

/// Every format, in the order their checks are tried: the Gaudi tables and metrics files are
/// JSON or CSV with a mark of their own, so they go before the general Trace Event JSON.
pub(crate) static READERS: &[&dyn Reader] = &[
    &crate::habana_nodes::AnalyzedNodesReader,
    &crate::habana_metrics::MetricsReader,
    &crate::kineto::TraceEventReader,
    &crate::perfetto::read::PerfettoReader,
    &crate::habana_csv::HwCsvReader,
];

/// The reader of `body`, by content, else by name.
pub(crate) fn reader_for(body: &[u8], path: &str) -> Option<&'static dyn Reader> {
    READERS
        .iter()
        .find(|r| r.sniff(body))
        .or_else(|| READERS.iter().find(|r| r.claims_by_name(path, body)))
        .copied()
}

/// Reads one input already in memory (a file, or a member of an archive) into `builder`, with
/// the reader its content names.
pub(crate) fn read_input(
    builder: &mut TimelineBuilder,
    display: &str,
    input: Input,
    progress: Option<Progress<'_>>,
) -> Result<(), IngestError> {
    let body = without_bom(input.data.bytes());
    let Some(reader) = reader_for(body, display) else {
        return Err(match sniff(body) {
            Format::Zip => IngestError::Unsupported {
                path: display.to_owned(),
                format: "ZIP archives nested in archives",
            },
            Format::Csv => IngestError::Unsupported {
                path: display.to_owned(),
                format: "CSV files other than Gaudi HW traces (`Name,Trace Source,Engine,Event type,…`) and Analyzed Nodes tables (`Unit,Unique node id,Node Name,…`)",
            },
            Format::Trace(_) | Format::Unknown => IngestError::NotATrace {
                path: display.to_owned(),
                reason: if body.iter().all(u8::is_ascii_whitespace) {
                    "the file is empty".to_owned()
                } else {
                    "not JSON, gzip, ZIP, protobuf or CSV (expected a PyTorch profiler / Chrome trace)"
                        .to_owned()
                },
            },
        });
    };
    let data = Arc::new(input.data);
    let source = register(
        builder,
        display,
        reader.id(),
        Arc::clone(&data),
        (input.stored_bytes, input.compressed),
        input.warnings,
    );
    let summary = reader.read(
        ReadInput {
            data: &data,
            path: display,
            source,
            progress,
        },
        builder,
    )?;
    apply_summary(builder, source, summary);
    Ok(())
}

/// Adds an input to `builder` before its reader runs: `stored` is its size as stored and
/// whether it was gzip; `warnings` are the ones met getting its bytes.
pub(crate) fn register(
    builder: &mut TimelineBuilder,
    display: &str,
    format: crate::format::FormatId,
    data: Arc<crate::source::SourceData>,
    stored: (u64, bool),
    warnings: Vec<crate::model::Warning>,
) -> u16 {
    let info = crate::model::SourceInfo {
        path: display.to_owned(),
        format,
        bytes: data.bytes().len() as u64,
        stored_bytes: stored.0,
        compressed: stored.1,
        events: 0,
        events_by_phase: Vec::new(),
        warnings,
        top_level: Vec::new(),
        rank: None,
        world_size: None,
    };
    builder.add_source(info, data)
}

/// Records what the reader of input `source` says of it.
pub(crate) fn apply_summary(builder: &mut TimelineBuilder, source: u16, summary: ReadSummary) {
    if let Some(info) = builder.source_mut(source) {
        if let Some(format) = summary.format {
            info.format = format;
        }
        info.events = summary.events;
        info.events_by_phase = summary.by_phase;
        info.warnings.extend(summary.warnings);
        info.top_level = summary.top_level;
        info.rank = summary.rank;
        info.world_size = summary.world_size;
    }
}

/// Recognises a format from the first bytes of the (decompressed) input.
#[must_use]
pub fn sniff(bytes: &[u8]) -> Format {
    let body = without_bom(bytes);
    if body.starts_with(b"PK\x03\x04") {
        return Format::Zip;
    }
    if let Some(reader) = READERS.iter().find(|r| r.sniff(body)) {
        return Format::Trace(reader.id());
    }
    match first_non_space(body) {
        Some(b) if b.is_ascii_graphic() && looks_like_csv(body) => Format::Csv,
        _ => Format::Unknown,
    }
}

fn looks_like_csv(bytes: &[u8]) -> bool {
    let line_end = memchr::memchr(b'\n', bytes).unwrap_or(bytes.len().min(4096));
    let line = &bytes[..line_end];
    std::str::from_utf8(line).is_ok() && line.iter().filter(|&&b| b == b',').count() >= 2
}
