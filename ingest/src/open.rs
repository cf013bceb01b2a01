//! Opening what a user names: a directory stands for the traces in it, and one look at a file's
//! first bytes (inflated when gzip) says what it is: a trace a reader takes, a JSON document
//! steplens wrote (a saved report, a baseline set, a rank summary), or neither. The command
//! line, the viewer and the Python package open their inputs through here; the reader that
//! then loads a trace is picked by content in [`crate::readers`].

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::IngestError;
use crate::format::Format;
use crate::source::is_gzip;

/// How much of a file one look reads (and, for gzip, inflates).
pub const HEAD_BYTES: usize = 64 << 10;

/// What a file is, from its first bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A trace, or an archive of traces, in a format steplens reads (its reader checks the
    /// rest). A large JSON object with no steplens schema gets the benefit of the doubt: its
    /// event array may come after a long preamble.
    Trace,
    /// A JSON document steplens wrote, with its `"schema"` tag (`steplens.report/1`,
    /// `steplens.baseline-set/1`, …).
    Steplens {
        /// The schema tag.
        schema: String,
    },
    /// Neither: other CSV, a small JSON object with no event array (a truth file), text.
    Other,
}

/// One look at a file: its first [`HEAD_BYTES`], inflated when it is gzip.
#[derive(Debug, Clone)]
pub struct Head {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// They are all of the file (inflated).
    pub whole: bool,
    /// The file is gzip.
    pub gzip: bool,
}

/// The first [`HEAD_BYTES`] of a regular file, inflated when it is gzip; `None` for stdin
/// (`-`), a FIFO or a device (whose bytes a look would take from the reader), or an unreadable
/// path (the load names the problem).
#[must_use]
pub fn head(path: &Path) -> Option<Head> {
    if path.as_os_str() == "-" || !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let mut raw = Vec::new();
    file.take(HEAD_BYTES as u64).read_to_end(&mut raw).ok()?;
    let whole = raw.len() < HEAD_BYTES;
    if !is_gzip(&raw) {
        return Some(Head {
            bytes: raw,
            whole,
            gzip: false,
        });
    }
    let mut inflated = Vec::new();
    let decoder = flate2::read::MultiGzDecoder::new(raw.as_slice());
    // A short read of a truncated member still gives its first bytes.
    let _ = decoder.take(HEAD_BYTES as u64).read_to_end(&mut inflated);
    // All of it only when the whole file inflated to less than the look.
    let whole = whole && inflated.len() < HEAD_BYTES;
    Some(Head {
        bytes: inflated,
        whole,
        gzip: true,
    })
}

/// What the file at `path` is, from one look at its first bytes; `None` when it cannot be
/// looked at without consuming it (see [`head`]).
#[must_use]
pub fn identify(path: &Path) -> Option<Kind> {
    let head = head(path)?;
    Some(kind_of(&head.bytes, head.whole))
}

/// What a file whose first bytes are `head` is (`whole`: they are all of it).
#[must_use]
pub fn kind_of(head: &[u8], whole: bool) -> Kind {
    match crate::readers::sniff(head) {
        Format::Unknown | Format::Csv => return Kind::Other,
        Format::Zip => return Kind::Trace,
        Format::Trace(_) => {}
    }
    if let Some(schema) = document_schema(head) {
        return Kind::Steplens { schema };
    }
    // A small object with no event array: a truth file or notes, not a trace.
    let body = crate::format::without_bom(head).trim_ascii_start();
    if whole
        && body.first() == Some(&b'{')
        && memchr::memmem::find(body, b"\"traceEvents\"").is_none()
    {
        return Kind::Other;
    }
    Kind::Trace
}

/// The `"schema"` tag of a JSON object steplens wrote, from its first bytes `head` (`None` for
/// anything else). The caller has sniffed them as a trace format: [`kind_of`] does, and so does
/// the load, which refuses such a document before any reader runs.
#[must_use]
pub fn document_schema(head: &[u8]) -> Option<String> {
    let body = crate::format::without_bom(head).trim_ascii_start();
    if body.first() != Some(&b'{') {
        return None;
    }
    steplens_schema(body)
}

/// The `"schema": "steplens.…"` tag of a JSON object's first bytes: the first `"schema"` key
/// whose value is a string starting `steplens.`.
fn steplens_schema(body: &[u8]) -> Option<String> {
    let mut from = 0;
    while let Some(at) = memchr::memmem::find(&body[from..], b"\"schema\"") {
        let rest = body[from + at + 8..].trim_ascii_start();
        from += at + 8;
        let Some(rest) = rest.strip_prefix(b":") else {
            continue;
        };
        let Some(value) = rest.trim_ascii_start().strip_prefix(b"\"") else {
            continue;
        };
        if !value.starts_with(b"steplens.") {
            continue;
        }
        let end = memchr::memchr(b'"', value)?;
        return Some(String::from_utf8_lossy(&value[..end]).into_owned());
    }
    None
}

/// The largest steplens document [`read_document`] reads, inflated (`docs/limits.md`).
pub const MAX_DOCUMENT_BYTES: u64 = 1 << 30;

/// The whole of a steplens document (a saved report, a baseline set), inflated when it is gzip.
///
/// # Errors
/// [`IngestError::Io`] when the file cannot be read or its gzip is damaged;
/// [`IngestError::LimitExceeded`] when it inflates past [`MAX_DOCUMENT_BYTES`].
pub fn read_document(path: &Path) -> Result<Vec<u8>, IngestError> {
    let io = |source| IngestError::Io {
        path: path.display().to_string(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    if !is_gzip(&raw) {
        return Ok(raw);
    }
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(raw.as_slice())
        .take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(IngestError::LimitExceeded {
            path: path.display().to_string(),
            what: "the decompressed size of a steplens document",
            limit: "1 GiB".to_owned(),
            flag: "none: gunzip it first (a saved report is read whole)",
        });
    }
    Ok(text)
}

/// File names a directory stands for: traces, not truth files or saved reports.
fn is_trace_name(name: &str) -> bool {
    let trace = [
        ".json",
        ".json.gz",
        ".pftrace",
        ".perfetto-trace",
        ".csv",
        ".hltv",
        ".gz",
    ]
    .iter()
    .any(|ext| name.ends_with(ext));
    trace
        && !name.ends_with(".truth.json")
        && !name.ends_with(".report.json")
        && !name.starts_with('.')
}

/// Inputs after directories were expanded, and what the directories held besides traces.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The traces, in the order given (a directory's in name order).
    pub paths: Vec<PathBuf>,
    /// Files in a directory that were not read: not traces by name or by content.
    pub skipped: Vec<PathBuf>,
}

impl Inputs {
    /// The skipped files in one line (up to 5 named), or `None` when nothing was skipped.
    #[must_use]
    pub fn skipped_line(&self) -> Option<String> {
        if self.skipped.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .skipped
            .iter()
            .take(5)
            .map(|p| p.display().to_string())
            .collect();
        let more = self.skipped.len().saturating_sub(names.len());
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Some(format!(
            "skipped {} file(s) that are not traces: {}{tail}",
            self.skipped.len(),
            names.join(", ")
        ))
    }
}

/// The inputs with every directory replaced by the traces in it (sorted by name): a run's
/// per-rank traces are usually one directory. Files in a directory that are not traces by name
/// or by [`identify`] (truth files, saved reports, notes) are skipped and listed.
///
/// # Errors
/// When a directory cannot be listed or holds no trace.
pub fn expand_inputs(paths: &[PathBuf]) -> Result<Inputs, IngestError> {
    let mut out = Inputs::default();
    for path in paths {
        if !path.is_dir() {
            out.paths.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|e| IngestError::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        let before = out.paths.len();
        for file in files {
            let by_name = file
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_trace_name);
            // A file that cannot be looked at is kept: the load names its problem.
            if by_name && identify(&file).is_none_or(|kind| kind == Kind::Trace) {
                out.paths.push(file);
            } else {
                out.skipped.push(file);
            }
        }
        if out.paths.len() == before {
            return Err(IngestError::NotATrace {
                path: path.display().to_string(),
                reason: "a directory with no trace files in it".into(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{Kind, kind_of};

    #[test]
    fn one_look_tells_traces_documents_and_notes_apart() {
        let trace = br#"{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}]}"#;
        assert_eq!(kind_of(trace, true), Kind::Trace);
        let report = br#"{
  "schema": "steplens.report/1", "sources": []}"#;
        assert_eq!(
            kind_of(report, true),
            Kind::Steplens {
                schema: "steplens.report/1".into()
            }
        );
        // A trace that merely names a schema in an event's args is still a trace.
        let named = br#"{"traceEvents": [{"ph": "X", "name": "steplens.report/1", "args": {"schema": 3}}]}"#;
        assert_eq!(kind_of(named, true), Kind::Trace);
        let truth = br#"{"steps": 3, "expected": {"sync_point": 1}}"#;
        assert_eq!(kind_of(truth, true), Kind::Other);
        // The same object cut short by the look: its events may come later.
        assert_eq!(kind_of(truth, false), Kind::Trace);
        assert_eq!(kind_of(b"a,b,c\n1,2,3\n", true), Kind::Other);
    }
}
