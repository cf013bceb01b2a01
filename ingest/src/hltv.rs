//! `hltv`: the Gaudi profiler's `.hltv` archive, a ZIP of traces and views. Members whose content
//! is a format steplens reads (`views/trace_analyzer.json` — analyzed nodes —, trace JSON, HW
//! CSV, metrics) are loaded as sources named `archive.hltv!member`; the others are listed in a
//! warning.
//!
//! Zip bombs are bounded: at most [`MAX_ENTRIES`] entries are looked at, and the members read
//! may inflate to at most `LoadOptions::max_inflated_bytes` in total (`--max-inflated-bytes`).

use std::io::{Cursor as IoCursor, Read};

use crate::builder::TimelineBuilder;
use crate::error::IngestError;
use crate::format::{Format, FormatId};
use crate::model::{Warning, WarningCode};
use crate::options::LoadOptions;
use crate::readers::sniff;
use crate::source::{Input, SourceData};

/// Most archive entries examined.
pub(crate) const MAX_ENTRIES: usize = 10_000;

/// Members listed by name in the "skipped" warning.
const LISTED: usize = 10;

pub(crate) fn read_archive(
    builder: &mut TimelineBuilder,
    bytes: &[u8],
    path: &str,
    options: &LoadOptions,
) -> Result<(), IngestError> {
    let damaged = |reason: String| IngestError::Damaged {
        path: path.to_owned(),
        offset: 0,
        reason,
    };
    let mut archive = zip::ZipArchive::new(IoCursor::new(bytes))
        .map_err(|e| damaged(format!("not a readable ZIP archive: {e}")))?;
    if archive.len() > MAX_ENTRIES {
        return Err(IngestError::LimitExceeded {
            path: path.to_owned(),
            what: "the number of archive entries",
            limit: format!("{MAX_ENTRIES} entries"),
            flag: "(none: split the archive)",
        });
    }
    let mut budget = options.max_inflated_bytes;
    let mut skipped: Vec<String> = Vec::new();
    let mut problems: Vec<Warning> = Vec::new();
    let mut loaded = 0usize;
    for index in 0..archive.len() {
        let mut entry = match archive.by_index(index) {
            Ok(entry) => entry,
            Err(e) => {
                problems.push(Warning {
                    code: WarningCode::Damaged,
                    offset: None,
                    message: format!("{path}: archive entry {index} unreadable: {e}"),
                });
                continue;
            }
        };
        if entry.is_dir() {
            continue;
        }
        let name = entry
            .name()
            .map_or_else(|_| format!("entry {index}"), |n| n.into_owned());
        let mut data = Vec::with_capacity(usize::try_from(entry.size().min(budget)).unwrap_or(0));
        let read = (&mut entry)
            .take(budget.saturating_add(1))
            .read_to_end(&mut data);
        if data.len() as u64 > budget {
            return Err(IngestError::LimitExceeded {
                path: path.to_owned(),
                what: "the decompressed size of the archive's members",
                limit: format!("{} bytes", options.max_inflated_bytes),
                flag: "--max-inflated-bytes",
            });
        }
        budget -= data.len() as u64;
        if let Err(e) = read {
            problems.push(Warning {
                code: WarningCode::Damaged,
                offset: Some(data.len() as u64),
                message: format!(
                    "{path}!{name}: damaged after {} bytes ({e}); skipped",
                    data.len()
                ),
            });
            continue;
        }
        // Perfetto traces are not what a Gaudi archive holds: its other binary members are not
        // read either.
        let format = sniff(&data);
        if !matches!(format, Format::Trace(id) if id != FormatId::PerfettoProto) {
            skipped.push(name);
            continue;
        }
        let member = format!("{path}!{name}");
        let input = Input {
            stored_bytes: entry.compressed_size(),
            compressed: entry.compressed_size() < entry.size(),
            data: SourceData::Owned(data),
            warnings: Vec::new(),
        };
        match crate::readers::read_input(builder, &member, input, None) {
            Ok(()) => loaded += 1,
            Err(e) => problems.push(Warning {
                code: WarningCode::SkippedMembers,
                offset: None,
                message: format!("{e}; member skipped"),
            }),
        }
    }
    if loaded == 0 {
        return Err(IngestError::NotATrace {
            path: path.to_owned(),
            reason: format!(
                "a ZIP archive with no member steplens can read ({} entries: {})",
                archive.len(),
                skipped
                    .iter()
                    .take(LISTED)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    if !skipped.is_empty() {
        let more = skipped.len().saturating_sub(LISTED);
        problems.push(Warning {
            code: WarningCode::SkippedMembers,
            offset: None,
            message: format!(
                "{path}: skipped {} archive members of formats steplens does not read: {}{}",
                skipped.len(),
                skipped
                    .iter()
                    .take(LISTED)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ),
        });
    }
    // Archive-level problems go to the first source read from it.
    let first = builder.source_count() - loaded;
    if let Some(info) = builder.source_mut(u16::try_from(first).unwrap_or(u16::MAX)) {
        info.warnings.extend(problems);
    }
    Ok(())
}
