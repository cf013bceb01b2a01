//! `hltv`: the Gaudi profiler's `.hltv` archive, a ZIP of traces and views. Members whose content
//! is a format steplens reads (`views/trace_analyzer.json` — analyzed nodes —, trace JSON, HW
//! CSV, metrics) are loaded as sources named `archive.hltv!member`; the others are listed in a
//! warning.
//!
//! Zip bombs are bounded: at most [`MAX_ENTRIES`] entries are looked at; a member's format is
//! told from its first [`HEAD`] bytes, so one steplens does not read is never inflated further;
//! each member inflates no further than a gzip input of its compressed size may (the ratio cap,
//! `--max-inflate-ratio`), and all of them together no further than a gzip input of the
//! archive's size (`--max-inflated-bytes` and the same ratio).

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

/// Inflated bytes of a member looked at to tell its format.
const HEAD: u64 = 64 << 10;

/// Most bytes reserved ahead for a member from its declared size (it grows past that as read).
const RESERVE_AT_MOST: usize = 64 << 20;

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
    // The members together inflate no further than one gzip input of the archive's size may.
    let mut budget = crate::source::inflate_limit(bytes.len(), options);
    let total_limit = budget;
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
        // Each member may inflate as far as a gzip input of its compressed size, within what
        // the archive has left.
        let member_limit = crate::source::inflate_limit(
            usize::try_from(entry.compressed_size()).unwrap_or(usize::MAX),
            options,
        )
        .min(budget);
        // Whether a member is readable is told by its first bytes: a member of another format
        // is never inflated further.
        let mut data = Vec::new();
        let head = (&mut entry)
            .take(HEAD.min(member_limit))
            .read_to_end(&mut data);
        let format = sniff(&data);
        if head.is_ok() && !matches!(format, Format::Trace(id) if id != FormatId::PerfettoProto) {
            skipped.push(name);
            continue;
        }
        // The declared size is the archive's word, not a fact: reserve no more than the limit.
        data.reserve(
            usize::try_from(entry.size().min(member_limit))
                .unwrap_or(0)
                .min(RESERVE_AT_MOST)
                .saturating_sub(data.len()),
        );
        let read = head.and_then(|_| {
            (&mut entry)
                .take(member_limit.saturating_add(1) - data.len() as u64)
                .read_to_end(&mut data)
        });
        if data.len() as u64 > member_limit {
            if member_limit == budget && member_limit < options.max_inflated_bytes {
                return Err(IngestError::LimitExceeded {
                    path: path.to_owned(),
                    what: "the decompressed size of the archive's members",
                    limit: format!(
                        "{total_limit} bytes for a {}-byte archive (--max-inflated-bytes, --max-inflate-ratio)",
                        bytes.len()
                    ),
                    flag: "--max-inflated-bytes",
                });
            }
            // One member past its own bound: the gzip rule, named after the member.
            return Err(crate::source::inflated_too_large(
                &format!("{path}!{name}"),
                usize::try_from(entry.compressed_size()).unwrap_or(usize::MAX),
                member_limit,
                options,
            ));
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
        let mut seen: Vec<String> = skipped.iter().take(LISTED).cloned().collect();
        seen.extend(problems.iter().take(LISTED).map(|w| w.message.clone()));
        return Err(IngestError::NotATrace {
            path: path.to_owned(),
            reason: if seen.is_empty() {
                format!(
                    "a ZIP archive with no readable member ({} entries)",
                    archive.len()
                )
            } else {
                format!(
                    "a ZIP archive with no member steplens can read ({} entries: {})",
                    archive.len(),
                    seen.join("; ")
                )
            },
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
