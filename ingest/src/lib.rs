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
pub mod error;
mod habana_csv;
mod habana_metrics;
mod habana_nodes;
mod hltv;
pub mod intervals;
mod json;
mod kineto;
pub mod limits;
pub mod model;
pub mod perfetto;
pub mod source;

use std::path::Path;
use std::sync::Arc;

pub use builder::TimelineBuilder;
pub use error::IngestError;
pub use kineto::Progress;
pub use limits::Limits;
pub use model::Timeline;
/// Most entries of a `.hltv` ZIP archive steplens examines (a guard against zip bombs).
pub const MAX_ARCHIVE_ENTRIES: usize = hltv::MAX_ENTRIES;

/// How inputs are read.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Map regular files instead of reading them (default). Turn off for files that may change
    /// while they are read.
    pub mmap: bool,
    /// Largest decompressed size accepted from a gzip input, bytes.
    pub max_inflated_bytes: u64,
    /// Caps on tracks, names, JSON nesting and the inflate ratio.
    pub limits: Limits,
    /// Map files even when they changed in the last few seconds. Off by default: a file that
    /// is still being written may shrink under the mapping and crash the process, so such
    /// files are read instead. Benchmarks that just wrote their input turn it on.
    pub map_fresh_files: bool,
    /// The rank of an input that does not say it (no `distributedInfo`), from its path: the
    /// first capture group of this pattern (the whole match without one). Without a pattern,
    /// the analysis reads `rank3`, `rank-3`, `_r3` from the file name.
    pub rank_regex: Option<regex::Regex>,
}

/// Default cap on decompressed gzip input: 64 GiB.
pub const DEFAULT_MAX_INFLATED_BYTES: u64 = 64 << 30;

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            mmap: true,
            max_inflated_bytes: DEFAULT_MAX_INFLATED_BYTES,
            limits: Limits::default(),
            map_fresh_files: false,
            rank_regex: None,
        }
    }
}

/// The rank `pattern` finds in `path`: its first capture group, else the whole match, as an
/// integer.
#[must_use]
pub fn rank_by_regex(pattern: &regex::Regex, path: &str) -> Option<i64> {
    let caps = pattern.captures(path)?;
    let text = caps.get(1).or_else(|| caps.get(0))?.as_str();
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A trace format steplens recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// PyTorch profiler / Chrome Trace Event Format JSON.
    KinetoJson,
    /// A ZIP archive (Gaudi `.hltv`).
    Zip,
    /// Perfetto protobuf.
    PerfettoProto,
    /// Gaudi HW-trace CSV (`Name,Trace Source,Engine,Event type,…`).
    HabanaHwCsv,
    /// Gaudi Trace Analyzer "Analyzed Nodes" table: CSV (`Unit,Unique node id,Node Name,…`) or
    /// JSON (`{"analyzer_metadata": [...]}`).
    HabanaAnalyzedNodes,
    /// Gaudi bridge metrics file (`PT_HPU_METRICS_FILE`): an array of metric dumps.
    HabanaMetrics,
    /// Other comma-separated text.
    Csv,
    /// Something else.
    Unknown,
}

impl Format {
    /// The format id used in reports.
    #[must_use]
    pub fn id(self) -> &'static str {
        match self {
            Self::KinetoJson => "kineto-json",
            Self::Zip => "zip",
            Self::PerfettoProto => "perfetto-proto",
            Self::HabanaHwCsv => "habana-hw-csv",
            Self::HabanaAnalyzedNodes => "habana-analyzed-nodes",
            Self::HabanaMetrics => "habana-metrics",
            Self::Csv => "csv",
            Self::Unknown => "unknown",
        }
    }
}

/// Recognises a format from the first bytes of the (decompressed) input.
#[must_use]
pub fn sniff(bytes: &[u8]) -> Format {
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let first = body.iter().copied().find(|b| !b.is_ascii_whitespace());
    match first {
        Some(b'{') if looks_like_analyzed_nodes_json(body) => Format::HabanaAnalyzedNodes,
        Some(b'[') if habana_metrics::looks_like_metrics(body) => Format::HabanaMetrics,
        Some(b'{' | b'[') => Format::KinetoJson,
        _ if body.starts_with(b"PK\x03\x04") => Format::Zip,
        // A Perfetto trace is a sequence of `Trace.packet` (field 1, length-delimited) records.
        // Its first byte, the tag 0x0a, is also ASCII whitespace, so it is checked on `body`.
        _ if looks_like_perfetto(body) => Format::PerfettoProto,
        _ if body.starts_with(habana_csv::HEADER_PREFIX) => Format::HabanaHwCsv,
        _ if first_line(body)
            .windows(habana_nodes::HEADER_MARK.len())
            .any(|w| w == habana_nodes::HEADER_MARK) =>
        {
            Format::HabanaAnalyzedNodes
        }
        Some(b) if b.is_ascii_graphic() && looks_like_csv(body) => Format::Csv,
        _ => Format::Unknown,
    }
}

/// Whether `bytes` start with a whole `Trace.packet` record (tag 0x0a, varint length, payload)
/// followed by the end of the input or the next packet's tag.
fn looks_like_perfetto(bytes: &[u8]) -> bool {
    if bytes.first() != Some(&0x0a) {
        return false;
    }
    let mut len: u64 = 0;
    for (i, &b) in bytes.iter().enumerate().skip(1).take(10) {
        len |= u64::from(b & 0x7f) << (7 * (i - 1));
        if b & 0x80 == 0 {
            let Some(end) = usize::try_from(len)
                .ok()
                .and_then(|l| (i + 1).checked_add(l))
            else {
                return false;
            };
            return len > 0 && (end == bytes.len() || bytes.get(end) == Some(&0x0a));
        }
    }
    false
}

/// The first line (without its line break), at most 4 KiB.
fn first_line(bytes: &[u8]) -> &[u8] {
    let head = &bytes[..bytes.len().min(4096)];
    let end = memchr::memchr(b'\n', head).unwrap_or(head.len());
    &head[..end]
}

/// A JSON object with an `analyzer_metadata` key in its first 64 KiB and no `traceEvents`
/// before it: the Trace Analyzer's `views/trace_analyzer.json`.
fn looks_like_analyzed_nodes_json(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(64 << 10)];
    match memchr::memmem::find(head, habana_nodes::JSON_KEY) {
        Some(at) => memchr::memmem::find(&head[..at], b"\"traceEvents\"").is_none(),
        None => false,
    }
}

fn looks_like_csv(bytes: &[u8]) -> bool {
    let line_end = memchr::memchr(b'\n', bytes).unwrap_or(bytes.len().min(4096));
    let line = &bytes[..line_end];
    std::str::from_utf8(line).is_ok() && line.iter().filter(|&&b| b == b',').count() >= 2
}

/// Loads one trace file (`-` reads stdin).
///
/// # Errors
/// When the file cannot be read, is not a trace, or is damaged before its first event.
pub fn load(
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
    let input = source::read_input(path, options)?;
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
    let input = source::finish_input(source::SourceData::Owned(bytes), name, options)?;
    add_read_input(&mut builder, name.to_owned(), input, options, None)?;
    Ok(builder.finish())
}

fn add_read_input(
    builder: &mut TimelineBuilder,
    display: String,
    input: source::Input,
    options: &LoadOptions,
    progress: Option<Progress<'_>>,
) -> Result<(), IngestError> {
    let first_new = builder.source_count();
    let read = if sniff(input.data.bytes()) == Format::Zip {
        hltv::read_archive(builder, input.data.bytes(), &display, options)
    } else {
        add_input(builder, &display, input, progress)
    };
    if let Some(pattern) = &options.rank_regex {
        for source in first_new..builder.source_count() {
            if let Some(info) = builder.source_mut(u16::try_from(source).unwrap_or(u16::MAX))
                && info.rank.is_none()
            {
                info.rank = rank_by_regex(pattern, &info.path);
            }
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

/// Reads one input already in memory (a file, or a member of an archive) into `builder`.
pub(crate) fn add_input(
    builder: &mut TimelineBuilder,
    display: &str,
    input: source::Input,
    progress: Option<Progress<'_>>,
) -> Result<(), IngestError> {
    let display = display.to_owned();
    let mut format = sniff(input.data.bytes());
    // A Perfetto trace whose first packet is cut short fails the content check; its name and
    // first byte still say what it is, and the reader then reports the damage.
    if format == Format::Unknown
        && input.data.bytes().first() == Some(&0x0a)
        && [
            ".pftrace",
            ".perfetto-trace",
            ".pftrace.gz",
            ".perfetto-trace.gz",
        ]
        .iter()
        .any(|ext| display.ends_with(ext))
    {
        format = Format::PerfettoProto;
    }
    match format {
        Format::KinetoJson
        | Format::HabanaHwCsv
        | Format::HabanaAnalyzedNodes
        | Format::HabanaMetrics => {}
        Format::Zip => {
            return Err(IngestError::Unsupported {
                path: display,
                format: "ZIP archives nested in archives",
            });
        }
        Format::PerfettoProto => {}
        Format::Csv => {
            return Err(IngestError::Unsupported {
                path: display,
                format: "CSV files other than Gaudi HW traces (`Name,Trace Source,Engine,Event type,…`) and Analyzed Nodes tables (`Unit,Unique node id,Node Name,…`)",
            });
        }
        Format::Unknown => {
            let reason = if input.data.bytes().iter().all(u8::is_ascii_whitespace) {
                "the file is empty".to_owned()
            } else {
                "not JSON, gzip, ZIP, protobuf or CSV (expected a PyTorch profiler / Chrome trace)"
                    .to_owned()
            };
            return Err(IngestError::NotATrace {
                path: display,
                reason,
            });
        }
    }
    let data = Arc::new(input.data);
    let info = model::SourceInfo {
        path: display.clone(),
        format: format.id(),
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
    if format == Format::PerfettoProto {
        let summary = perfetto::read::read_perfetto(&data, &display, builder, source)?;
        if let Some(info) = builder.source_mut(source) {
            info.events = summary.events;
            info.events_by_phase = summary.by_phase;
            info.warnings.extend(summary.warnings);
        }
        return Ok(());
    }
    if format == Format::HabanaMetrics {
        let summary = habana_metrics::read_metrics(data.bytes(), &display, builder, source)?;
        if let Some(info) = builder.source_mut(source) {
            info.rank = habana_metrics::rank_from_path(&display);
            info.events = summary.events;
            info.warnings.extend(summary.warnings);
        }
        return Ok(());
    }
    if matches!(format, Format::HabanaHwCsv | Format::HabanaAnalyzedNodes) {
        let summary = if format == Format::HabanaHwCsv {
            habana_csv::read_hw_csv(data.bytes(), &display, builder, source)?
        } else {
            habana_nodes::read_analyzed_nodes(data.bytes(), &display, builder, source)?
        };
        if let Some(info) = builder.source_mut(source) {
            info.events = summary.events;
            info.events_by_phase = summary.by_phase;
            info.warnings.extend(summary.warnings);
            info.top_level = summary.top_level;
        }
        return Ok(());
    }
    let summary =
        kineto::KinetoReader::new(data.bytes(), &display, builder, source, progress).read()?;
    if let Some(info) = builder.source_mut(source) {
        info.format = summary.format;
        info.events = summary.events;
        info.events_by_phase = summary.by_phase;
        info.warnings.extend(summary.warnings);
        info.top_level = summary.top_level;
        info.rank = summary.rank;
        info.world_size = summary.world_size;
    }
    Ok(())
}
