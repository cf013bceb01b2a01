//! The formats steplens reads: one [`Reader`] per format, each in its own module, listed in
//! [`READERS`] in the order their content checks are tried.
//!
//! Adding a format is one module with a `Reader` (sniff its first bytes, read into its own
//! input of the builder, return a [`ReadSummary`]), one [`FormatId`] variant (documented in
//! `docs/report-schema.md`; a test holds the two equal) and one entry in [`READERS`]. Readers
//! push slices through the builder's format-free API and never see another input.

use std::sync::Arc;

use crate::builder::TimelineBuilder;
use crate::error::IngestError;
use crate::format::{Format, FormatId};
use crate::kineto::Progress;
use crate::model::Warning;
use crate::source::{Input, SourceData};

/// One input as a reader gets it.
pub(crate) struct ReadInput<'a, 'p> {
    /// The whole (decompressed) input.
    pub(crate) data: &'a Arc<SourceData>,
    /// Its path, for messages.
    pub(crate) path: &'a str,
    /// Its input index in the builder: everything read goes to this input.
    pub(crate) source: u16,
    /// Progress callback (bytes read, total), for readers of large inputs.
    pub(crate) progress: Option<Progress<'p>>,
}

impl ReadInput<'_, '_> {
    /// The input's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.data.bytes()
    }
}

/// What one read produced beyond what went into the builder: the same for every format.
#[derive(Debug, Default)]
pub(crate) struct ReadSummary {
    /// Format id of what was read; a reader may refine its own (`kineto-json` →
    /// `habana-bridge-json`). `None`: the reader's id.
    pub(crate) format: Option<FormatId>,
    /// Events (records, packets, rows) read.
    pub(crate) events: u64,
    /// Events per phase letter.
    pub(crate) by_phase: Vec<(char, u64)>,
    /// What was repaired or dropped.
    pub(crate) warnings: Vec<Warning>,
    /// Top-level keys other than the events, as raw text.
    pub(crate) top_level: Vec<(String, String)>,
    /// Rank the input states.
    pub(crate) rank: Option<i64>,
    /// World size the input states.
    pub(crate) world_size: Option<i64>,
}

/// A trace format.
pub(crate) trait Reader: Sync {
    /// The format id its inputs get in reports.
    fn id(&self) -> FormatId;

    /// Whether `body` (the decompressed input, byte-order mark removed) is this format.
    fn sniff(&self, body: &[u8]) -> bool;

    /// Whether an input that no content check recognised is still this format, by its name
    /// (a damaged file whose first record is cut short); the reader then reports the damage.
    fn claims_by_name(&self, _path: &str, _body: &[u8]) -> bool {
        false
    }

    /// Reads the input into `builder`, as input `input.source`.
    ///
    /// # Errors
    /// When the input is not this format after all, or is damaged before its first event.
    fn read(
        &self,
        input: ReadInput<'_, '_>,
        builder: &mut TimelineBuilder,
    ) -> Result<ReadSummary, IngestError>;
}

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
    let body = crate::format::without_bom(input.data.bytes());
    let Some(reader) = reader_for(body, display) else {
        return Err(match crate::format::sniff(body) {
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
    let info = crate::model::SourceInfo {
        path: display.to_owned(),
        format: reader.id(),
        bytes: data.bytes().len() as u64,
        stored_bytes: input.stored_bytes,
        compressed: input.compressed,
        events: 0,
        events_by_phase: Vec::new(),
        warnings: input.warnings,
        top_level: Vec::new(),
        rank: None,
        world_size: None,
    };
    let source = builder.add_source(info, Arc::clone(&data));
    let summary = reader.read(
        ReadInput {
            data: &data,
            path: display,
            source,
            progress,
        },
        builder,
    )?;
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
    Ok(())
}
