//! steplens ingest: sniff a trace's format, read it (memory-mapped, gzip), parse it, and build
//! the [`model::Timeline`].
//!
//! The Timeline is the only thing that leaves this crate. Formats are recognised by content,
//! never by file extension ([`sniff`]). Damaged input loads as far as it is readable, with
//! [`model::Warning`]s on its [`model::SourceInfo`]; input that is not a trace is an
//! [`IngestError`].
//!
//! ```no_run
//! use steplens_ingest::{load, LoadOptions};
//! let timeline = load(std::path::Path::new("trace.json.gz"), &LoadOptions::default(), None)?;
//! println!("{} slices on {} tracks", timeline.slices.len(), timeline.tracks.len());
//! # Ok::<(), steplens_ingest::IngestError>(())
//! ```

pub mod builder;
mod concat;
mod correlation;
mod csv;
mod derived_steps;
pub mod documents;
pub mod error;
mod feed;
mod format;
mod gaudi;
mod habana_csv;
mod habana_metrics;
mod habana_nodes;
mod heap;
mod hltv;
mod inflating;
pub mod intervals;
mod invariants;
pub mod json;
mod kineto;
pub mod limits;
pub mod model;
pub mod open;
mod options;
pub mod perfetto;
mod reader;
mod readers;
pub mod source;
mod warning;

use std::path::Path;

pub use builder::TimelineBuilder;
pub use error::IngestError;
pub use format::{Format, FormatId};
pub use limits::Limits;
pub use model::Timeline;
pub use options::{DEFAULT_MAX_INFLATED_BYTES, LoadOptions, rank_by_regex};
pub use reader::Progress;
pub use readers::sniff;
/// Most entries of a `.hltv` ZIP archive steplens examines (a guard against zip bombs).
pub const MAX_ARCHIVE_ENTRIES: usize = hltv::MAX_ENTRIES;

/// Loads one trace file (`-` reads stdin).
///
/// # Errors
/// When the file cannot be read, is not a trace, or is damaged before its first event.
pub fn load(
    path: &Path,
    options: &LoadOptions,
    progress: Option<Progress<'_>>,
) -> Result<Timeline, IngestError> {
    handing_back_freed(load_keeping_freed(path, options, progress))
}

/// What a load a caller asked for gives, after the pages it freed are handed back
/// ([`heap::release_freed`]) and the mapped inputs' pages are out of the resident set
/// ([`SourceData::release_resident`]): once per such load, not once per rank of a parallel one.
fn handing_back_freed(loaded: Result<Timeline, IngestError>) -> Result<Timeline, IngestError> {
    heap::release_freed();
    if let Ok(t) = &loaded {
        for data in &t.data {
            data.release_resident();
        }
    }
    loaded
}

/// [`load`] without handing the freed pages back: each of the ranks loaded in parallel, which
/// hand them back once, when all are loaded.
fn load_keeping_freed(
    path: &Path,
    options: &LoadOptions,
    progress: Option<Progress<'_>>,
) -> Result<Timeline, IngestError> {
    let mut builder = TimelineBuilder::default();
    add_file(&mut builder, path, options, progress)?;
    Ok(builder.finish())
}

/// Loads several traces (ranks, or related files) into one Timeline; each keeps its own tracks.
///
/// # Errors
/// As [`load`], for the first file that fails.
pub fn load_many(
    paths: &[&Path],
    options: &LoadOptions,
    progress: Option<Progress<'_>>,
) -> Result<Timeline, IngestError> {
    handing_back_freed(load_many_keeping_freed(paths, options, progress))
}

/// [`load_many`] without handing the freed pages back.
fn load_many_keeping_freed(
    paths: &[&Path],
    options: &LoadOptions,
    mut progress: Option<Progress<'_>>,
) -> Result<Timeline, IngestError> {
    // Independent traces (ranks) load in parallel, one per core; a set whose inputs bind each
    // other (a device-only capture, a node table) is read into one builder.
    let from_stdin = paths.iter().any(|p| p.as_os_str() == "-");
    if paths.len() > 1 && !from_stdin {
        let total = paths.len() as u64;
        if let Some(timeline) = concat::load_parallel(paths, options)? {
            if let Some(p) = progress.as_mut() {
                p(total, total);
            }
            return Ok(timeline);
        }
    }
    let mut builder = TimelineBuilder::default();
    for path in paths {
        match progress.as_mut() {
            Some(p) => add_file(&mut builder, path, options, Some(&mut **p))?,
            None => add_file(&mut builder, path, options, None)?,
        }
    }
    Ok(builder.finish())
}

/// Reads one file into `builder`.
///
/// # Errors
/// As [`load`].
pub fn add_file(
    builder: &mut TimelineBuilder,
    path: &Path,
    options: &LoadOptions,
    progress: Option<Progress<'_>>,
) -> Result<(), IngestError> {
    let display = path.display().to_string();
    builder.set_limits(options.limits);
    builder.set_step_marker(options.step_marker.clone());
    let stored = source::read_stored(path, options, |head| {
        !matches!(readers::sniff(head), Format::Unknown)
    })?;
    if source::is_gzip(stored.bytes()) && inflating::worth_it(stored.bytes()) {
        return inflating::add_gzip(builder, display, &stored, options, progress);
    }
    let input = source::finish_input(stored, &display, options)?;
    add_read_input(builder, display, input, options, progress)
}

/// Loads a trace held in memory (gzip, ZIP and every format `load` reads); `name` stands for
/// the path in messages.
///
/// # Errors
/// As [`load`].
pub fn load_bytes(
    name: &str,
    bytes: Vec<u8>,
    options: &LoadOptions,
) -> Result<Timeline, IngestError> {
    let mut builder = TimelineBuilder::default();
    builder.set_limits(options.limits);
    builder.set_step_marker(options.step_marker.clone());
    let input = source::finish_input(source::SourceData::Owned(bytes), name, options)?;
    add_read_input(&mut builder, name.to_owned(), input, options, None)?;
    handing_back_freed(Ok(builder.finish()))
}

fn add_read_input(
    builder: &mut TimelineBuilder,
    display: String,
    input: source::Input,
    options: &LoadOptions,
    progress: Option<Progress<'_>>,
) -> Result<(), IngestError> {
    let first_new = builder.source_count();
    let format = sniff(input.data.bytes());
    // A document steplens wrote is not a trace: refused at once, naming what reads it.
    let body = format::without_bom(input.data.bytes());
    if matches!(format, Format::Trace(_))
        && let Some(schema) = open::document_schema(&body[..body.len().min(open::HEAD_BYTES)])
    {
        return Err(IngestError::NotATrace {
            path: display,
            reason: documents::Document::refusal(&schema),
        });
    }
    let read = if format == Format::Zip {
        hltv::read_archive(builder, input.data.bytes(), &display, options)
    } else {
        readers::read_input(builder, &display, input, progress)
    };
    after_read(builder, display, first_new, read, options)
}

/// Whether a second thread can run beside this one (more than one CPU is available): the
/// readers and analysis' Perfetto writer ask before splitting their work over two threads.
#[must_use]
pub fn spare_core() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// A gzip stream that fails after a JSON trace document that parsed to its end (trailing bytes,
/// a bad checksum, a second member that is junk) lost nothing: its damage is trailing data,
/// and no step is cut for it.
fn complete_document_keeps_its_steps(info: &mut model::SourceInfo) {
    use warning::WarningCode;
    let json = matches!(
        info.format,
        FormatId::KinetoJson | FormatId::HabanaBridgeJson | FormatId::SynapseTefJson
    );
    if !json || info.warnings.iter().any(|w| w.code == WarningCode::Damaged) {
        return;
    }
    for w in &mut info.warnings {
        if w.code == WarningCode::DamagedGzip {
            w.code = WarningCode::TrailingData;
            w.message = "the gzip stream fails after the complete JSON document (trailing \
                bytes or a bad checksum); every event was read"
                .into();
        }
    }
}

/// What every read ends with: ranks named by `--rank-regex`, and a limit the builder hit
/// (which stops the load even when the reader itself carried on).
fn after_read(
    builder: &mut TimelineBuilder,
    display: String,
    first_new: usize,
    read: Result<(), IngestError>,
    options: &LoadOptions,
) -> Result<(), IngestError> {
    if let Some(pattern) = &options.rank_regex {
        for source in first_new..builder.source_count() {
            // The flag wins over `distributedInfo` where it matches: it is how two traces that
            // both claim one rank are told apart.
            if let Some(info) = builder.source_mut(u16::try_from(source).unwrap_or(u16::MAX))
                && let Some(rank) = rank_by_regex(pattern, &info.path)
            {
                info.rank = Some(rank);
            }
        }
    }
    for source in first_new..builder.source_count() {
        if let Some(info) = builder.source_mut(u16::try_from(source).unwrap_or(u16::MAX)) {
            complete_document_keeps_its_steps(info);
        }
    }
    // A limit hit while reading stops the load, even when the reader itself carried on.
    if let Some(hit) = builder.take_limit_hit() {
        return Err(IngestError::LimitExceeded {
            path: display,
            what: hit.what,
            limit: hit.limit,
            flag: hit.flag,
        });
    }
    read
}
