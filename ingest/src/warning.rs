//! Load warnings: what was repaired or dropped while reading, with a stable code per kind.

use std::fmt;

use serde::Serialize;

/// What a [`Warning`] is about: a closed set, documented one row each in
/// `docs/report-schema.md` (a test keeps the two equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningCode {
    /// the JSON (or CSV, protobuf) is cut or broken at a byte offset; everything before it was kept
    Damaged,
    /// the gzip stream is cut or corrupt
    DamagedGzip,
    /// bytes after the end of the document were ignored
    TrailingData,
    /// the trace has no events
    Empty,
    /// a step running past the last surviving event of a damaged trace
    IncompleteStep,
    /// negative durations clamped to 0
    NegativeDuration,
    /// slices longer than 7 days dropped
    OverlongSlice,
    /// slices cut to end at the largest representable time
    TimeClamped,
    /// slices overlapping without nesting, kept as siblings
    Overlap,
    /// `B` events without their `E`
    UnclosedBegin,
    /// `E` events with no open `B`
    UnmatchedEnd,
    /// events of a phase steplens does not model
    UnsupportedPhase,
    /// events missing a field their phase needs
    MalformedEvent,
    /// events with a field of the wrong type (`"pid": {…}`), skipped one by one
    WrongFieldType,
    /// CSV rows that could not be read
    MalformedRow,
    /// event keys steplens reads past on purpose (thread clocks, stack frames, colours)
    IgnoredKeys,
    /// `.hltv` archive members that are not traces
    SkippedMembers,
    /// Perfetto packets lost by the producer or needing state their sequence never set up
    DataLoss,
    /// Perfetto packets without TrackEvent data (ftrace, system, Android)
    SkippedPackets,
    /// Perfetto tracks used before (or without) their descriptor
    UnknownTrack,
    /// Perfetto events on several clocks, not converted between them
    MixedClocks,
    /// SPMU counter values above 2^63
    SpmuWrapped,
    /// a device-only input moved onto another input's clock
    ClockAligned,
    /// a device-only input kept its own clock
    ClockNotAligned,
    /// events whose args are longer than 16 MiB, kept without them
    ArgsTooLong,
}

impl WarningCode {
    /// Every code, in documentation order.
    pub const ALL: &'static [Self] = &[
        Self::Damaged,
        Self::DamagedGzip,
        Self::TrailingData,
        Self::Empty,
        Self::IncompleteStep,
        Self::NegativeDuration,
        Self::OverlongSlice,
        Self::TimeClamped,
        Self::Overlap,
        Self::UnclosedBegin,
        Self::UnmatchedEnd,
        Self::UnsupportedPhase,
        Self::MalformedEvent,
        Self::WrongFieldType,
        Self::MalformedRow,
        Self::IgnoredKeys,
        Self::SkippedMembers,
        Self::DataLoss,
        Self::SkippedPackets,
        Self::UnknownTrack,
        Self::MixedClocks,
        Self::SpmuWrapped,
        Self::ClockAligned,
        Self::ClockNotAligned,
        Self::ArgsTooLong,
    ];

    /// The stable machine-readable name (the serde name).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Damaged => "damaged",
            Self::DamagedGzip => "damaged_gzip",
            Self::TrailingData => "trailing_data",
            Self::Empty => "empty",
            Self::IncompleteStep => "incomplete_step",
            Self::NegativeDuration => "negative_duration",
            Self::OverlongSlice => "overlong_slice",
            Self::TimeClamped => "time_clamped",
            Self::Overlap => "overlap",
            Self::UnclosedBegin => "unclosed_begin",
            Self::UnmatchedEnd => "unmatched_end",
            Self::UnsupportedPhase => "unsupported_phase",
            Self::MalformedEvent => "malformed_event",
            Self::WrongFieldType => "wrong_field_type",
            Self::MalformedRow => "malformed_row",
            Self::IgnoredKeys => "ignored_keys",
            Self::SkippedMembers => "skipped_members",
            Self::DataLoss => "data_loss",
            Self::SkippedPackets => "skipped_packets",
            Self::UnknownTrack => "unknown_track",
            Self::MixedClocks => "mixed_clocks",
            Self::SpmuWrapped => "spmu_wrapped",
            Self::ClockAligned => "clock_aligned",
            Self::ClockNotAligned => "clock_not_aligned",
            Self::ArgsTooLong => "args_too_long",
        }
    }
}

impl fmt::Display for WarningCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for WarningCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A problem met while reading a trace that did not stop it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// Stable machine-readable code (`damaged`, `negative_duration`, `overlap`, …).
    pub code: WarningCode,
    /// Byte offset in the source the warning refers to, when there is one.
    pub offset: Option<u64>,
    /// One line for humans.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
