//! The reader interface every format implements: [`Reader`], what it gets ([`ReadInput`]) and
//! what it returns ([`ReadSummary`]). The list of readers is in `readers.rs`.

use std::sync::Arc;

use crate::builder::TimelineBuilder;
use crate::error::IngestError;
use crate::format::FormatId;
use crate::model::Warning;
use crate::source::SourceData;

/// Progress callback: `(bytes done, bytes total)`.
pub type Progress<'p> = &'p mut dyn FnMut(u64, u64);

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
