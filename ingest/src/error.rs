//! The one error type of the ingest crate, with stable codes for the JSON report.

use std::io;

/// Why a trace could not be loaded. Every variant names the input it is about.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The file could not be opened or read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// Input path.
        path: String,
        /// Underlying error.
        #[source]
        source: io::Error,
    },
    /// The input is not a trace of any known format (or is empty).
    #[error("{path}: not a trace: {reason}")]
    NotATrace {
        /// Input path.
        path: String,
        /// What was expected and what was found.
        reason: String,
    },
    /// The input is a trace, but damaged before anything usable could be read.
    #[error("{path}: damaged at byte {offset}: {reason}")]
    Damaged {
        /// Input path.
        path: String,
        /// Byte offset of the damage (in the decompressed stream for `.gz`).
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// The compressed input is corrupt.
    #[error("{path}: bad gzip data after {offset} decompressed bytes: {reason}")]
    Gzip {
        /// Input path.
        path: String,
        /// Decompressed bytes produced before the error.
        offset: u64,
        /// The decoder's message.
        reason: String,
    },
    /// A resource limit was exceeded.
    #[error("{path}: {what} exceeds the limit of {limit} (raise it with {flag})")]
    LimitExceeded {
        /// Input path.
        path: String,
        /// What grew too large.
        what: &'static str,
        /// The limit, in words.
        limit: String,
        /// The command-line flag that raises it.
        flag: &'static str,
    },
    /// A known format that this version cannot read yet.
    #[error("{path}: {format} are not supported")]
    Unsupported {
        /// Input path.
        path: String,
        /// What the input looks like.
        format: &'static str,
    },
}

impl IngestError {
    /// Stable machine-readable code of the error class.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Io { .. } => "io",
            Self::NotATrace { .. } => "not_a_trace",
            Self::Damaged { .. } | Self::Gzip { .. } => "damaged",
            Self::LimitExceeded { .. } => "limit_exceeded",
            Self::Unsupported { .. } => "unsupported",
        }
    }
}
