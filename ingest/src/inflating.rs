//! A gzip input read while it inflates: a second thread inflates into a [`Feed`] and, when the
//! content is Trace Event JSON, the reader parses behind it (`KinetoReader::with_feed`); once
//! the inflater is done, what is left of the event array is split over two threads as for a
//! plain file. Other gzip content (a Perfetto trace, a CSV, a ZIP) waits for the whole stream
//! and is read as before; the inflate itself is the same work either way.

use std::io::Read;
use std::sync::Arc;

use flate2::read::MultiGzDecoder;

use crate::builder::TimelineBuilder;
use crate::error::IngestError;
use crate::feed::{Feed, FillEnd};
use crate::format::{FormatId, without_bom};
use crate::options::LoadOptions;
use crate::reader::Progress;
use crate::source::{self, Input, SourceData};

/// Compressed inputs smaller than this are inflated before they are read: a second thread
/// and a mapping cost more than the overlap saves.
const MIN_COMPRESSED: usize = 1 << 20;

/// Inflated bytes looked at to tell the content (as many as the Trace Event sniff reads).
const HEAD: usize = 64 << 10;

/// Whether inflating `compressed` beside its parse is worth a thread.
pub(crate) fn worth_it(compressed: &[u8]) -> bool {
    compressed.len() >= MIN_COMPRESSED && crate::spare_core()
}

/// Reads the gzip input `stored` into `builder`, inflating it on a second thread.
pub(crate) fn add_gzip(
    builder: &mut TimelineBuilder,
    display: String,
    stored: &SourceData,
    options: &LoadOptions,
    progress: Option<Progress<'_>>,
) -> Result<(), IngestError> {
    let compressed = stored.bytes();
    let limit = source::inflate_limit(compressed.len(), options);
    let expected = source::gzip_size_hint(compressed).min(limit as usize);
    // Room for exactly what may be inflated: a byte more is `FillEnd::Overflow`.
    let capacity = usize::try_from(limit).unwrap_or(usize::MAX);
    let Ok(feed) = Feed::new(capacity, expected) else {
        // No address space to be had for it: inflate first, then read.
        let input =
            source::finish_input(SourceData::Owned(compressed.to_vec()), &display, options)?;
        return crate::add_read_input(builder, display, input, options, progress);
    };
    let first_new = builder.source_count();
    let mut progress = progress;
    let (read, end) = std::thread::scope(|scope| {
        let inflater = scope.spawn(|| {
            let mut decoder = MultiGzDecoder::new(compressed);
            feed.fill(|out| decoder.read(out))
        });
        let head = wait_for(&feed, HEAD);
        // (A ZIP's head is no reader's: it never passes.)
        let is_trace_events = crate::readers::reader_for(without_bom(head), &display)
            .is_some_and(|r| r.id() == FormatId::KinetoJson);
        let read = is_trace_events.then(|| {
            let source = crate::readers::register(
                builder,
                &display,
                FormatId::KinetoJson,
                Arc::new(SourceData::Owned(Vec::new())),
                (compressed.len() as u64, true),
                Vec::new(),
            );
            let summary = crate::kineto::KinetoReader::with_feed(
                &feed,
                &display,
                builder,
                source,
                progress.take(),
            )
            .read();
            (source, summary)
        });
        let end = inflater
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (read, end)
    });
    let io_error = |source| IngestError::Io {
        path: display.clone(),
        source,
    };
    let (map, len) = feed.finish().map_err(io_error)?;
    let data = SourceData::Inflated { map, len };
    let mut warnings = Vec::new();
    match end {
        FillEnd::Complete => {}
        FillEnd::Overflow => {
            return Err(source::inflated_too_large(
                &display,
                compressed.len(),
                limit,
                options,
            ));
        }
        FillEnd::Failed(e) => warnings.push(source::damaged_gzip(&display, len, &e)?),
    }
    let Some((source, summary)) = read else {
        let input = Input {
            data,
            stored_bytes: compressed.len() as u64,
            compressed: true,
            warnings,
        };
        return crate::add_read_input(builder, display, input, options, progress);
    };
    let bytes = data.bytes().len() as u64;
    builder.set_source_data(source, Arc::new(data));
    if let Some(info) = builder.source_mut(source) {
        info.bytes = bytes;
        info.warnings = warnings;
    }
    let read = summary.map(|summary| crate::readers::apply_summary(builder, source, summary));
    crate::after_read(builder, display, first_new, read, options)
}

/// The first `n` bytes of `feed` (all of it when it is shorter), once they are there.
fn wait_for(feed: &Feed, n: usize) -> &[u8] {
    loop {
        let done = feed.is_done();
        let now = feed.available();
        if now.len() >= n || done {
            return now;
        }
        feed.wait_beyond(now.len());
    }
}
