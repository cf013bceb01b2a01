//! `kineto-json`: the PyTorch profiler's Chrome trace (and any Trace Event Format JSON).
//!
//! One streaming reader, [`KinetoReader`]: its event loop and per-phase handlers share the
//! cursor, the builder and the counters as one value, so no state is passed through the calls on
//! the hottest path of a load. Its methods sit beside what they read: the top-level object
//! (`top_level.rs`), the event array on one or two threads (`events.rs`), one event by phase
//! (`dispatch.rs`), flow v2 bindings (`flow_v2.rs`) and `[memory]` samples (`memory.rs`).
//!
//! One pass over the bytes with [`crate::json::Cursor`]: each element of `traceEvents` is read
//! field by field and written straight into the [`TimelineBuilder`] (a large array's second
//! half is parsed on a second thread, `packed.rs`, and sent over in batches that are written
//! after the first half while the rest is still being parsed); args are kept as a byte range.
//! Handles a bare top-level array, keys after `traceEvents`, string or integer pid/tid,
//! ns-resolution timestamps, and input cut short (everything before the damage is kept and a
//! warning names the byte offset).

use crate::builder::TimelineBuilder;
use crate::error::IngestError;
use crate::feed::Feed;
use crate::format::{FormatId, first_non_space};
use crate::json::{self, Cursor, SyntaxError};
use crate::model::{LaneId, ReleaseBehind, Warning, WarningCode};
use crate::reader::{Progress, ReadInput, ReadSummary, Reader};

mod dispatch;
mod event;
mod events;
mod flow_v2;
mod memory;
mod packed;
mod top_level;

use event::{IGNORED_KEYS, TYPED_FIELDS};
use flow_v2::FlowV2End;
use memory::MemorySample;

/// Event arrays at least this long are parsed by two threads ([`KinetoReader::events_split`]).
const SPLIT_MIN_BYTES: usize = 8 << 20;
/// Share of the array the reading thread parses; the other thread's part is fed to the
/// builder after it, batch by batch as it is parsed. On the real torch trace the parse thread
/// finished first at a half when the machine was quiet (0.45 was ~5 % quicker then) and lagged
/// by up to 0.15 s in busy spells, where a smaller share for the reading thread costs more.
const SPLIT_FRACTION: f64 = 0.5;

pub(crate) struct KinetoReader<'a, 'b, 'p> {
    cur: Cursor<'a>,
    builder: &'b mut TimelineBuilder,
    source: u16,
    path: &'a str,
    events: u64,
    /// Elements of the event array that were not objects (numbers, strings, arrays, null).
    non_objects: u64,
    by_phase: [u64; 128],
    warnings: Vec<Warning>,
    top_level: Vec<(String, String)>,
    /// The first keys of the top-level object (to say what a document without events is).
    top_keys: Vec<String>,
    rank: Option<i64>,
    world_size: Option<i64>,
    progress: Option<Progress<'p>>,
    flavor: Flavor,
    /// Synapse TEF: pids of the `***Host` process.
    tef_host_pids: Vec<LaneId>,
    /// Flow v2 (`bind_id` on slices): every slice end, in file order, bound in time order at
    /// the end of the read.
    flow_v2: Vec<FlowV2End>,
    /// `[memory]` samples (process, ts) in file order, written as counters at the end of the
    /// read: which device they name depends on the whole document (`deviceProperties` may come
    /// after the events).
    memory: Vec<(LaneId, i64, MemorySample)>,
    /// Events seen with each of [`IGNORED_KEYS`].
    ignored_keys: [u64; IGNORED_KEYS.len()],
    /// Events whose args are too long to keep (over 16 MiB), and the longest, bytes.
    args_too_long: (u64, usize),
    /// Events skipped for a field of the wrong type, per [`TYPED_FIELDS`] entry.
    wrong_types: [u64; TYPED_FIELDS.len()],
    /// Event arrays at least this long are parsed by two threads ([`SPLIT_MIN_BYTES`]).
    split_min_bytes: usize,
    /// Where the second thread starts, as a share of the array ([`SPLIT_FRACTION`]).
    split_fraction: f64,
    /// While the input is still arriving (a gzip input inflating on another thread): where
    /// more of it comes from. `None` once all of it is in `cur.buf`.
    feed: Option<&'a Feed>,
    /// Drops a mapped input's pages behind the cursor as the events are read.
    behind: ReleaseBehind<'a>,
}

/// Which producer wrote the Trace Event Format JSON, from its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Flavor {
    /// The PyTorch profiler (Kineto), any device.
    Kineto,
    /// A torch trace with HPU lanes from the Gaudi PyTorch bridge (or its Kineto plugin).
    HabanaBridge,
    /// The Synapse profiler's own trace: one process per engine type.
    SynapseTef,
}

impl Flavor {
    fn id(self) -> FormatId {
        match self {
            Self::Kineto => FormatId::KinetoJson,
            Self::HabanaBridge => FormatId::HabanaBridgeJson,
            Self::SynapseTef => FormatId::SynapseTefJson,
        }
    }
}

impl<'a, 'b, 'p> KinetoReader<'a, 'b, 'p> {
    pub(crate) fn new(
        bytes: &'a [u8],
        path: &'a str,
        builder: &'b mut TimelineBuilder,
        source: u16,
        progress: Option<Progress<'p>>,
    ) -> Self {
        Self {
            cur: Cursor::with_max_depth(bytes, builder.limits().max_json_depth),
            builder,
            source,
            path,
            events: 0,
            non_objects: 0,
            by_phase: [0; 128],
            warnings: Vec::new(),
            top_level: Vec::new(),
            top_keys: Vec::new(),
            rank: None,
            world_size: None,
            progress,
            flavor: Flavor::Kineto,
            tef_host_pids: Vec::new(),
            flow_v2: Vec::new(),
            memory: Vec::new(),
            ignored_keys: [0; IGNORED_KEYS.len()],
            args_too_long: (0, 0),
            wrong_types: [0; TYPED_FIELDS.len()],
            split_min_bytes: SPLIT_MIN_BYTES,
            split_fraction: SPLIT_FRACTION,
            feed: None,
            behind: ReleaseBehind::none(),
        }
    }

    /// A reader of an input that is still arriving in `feed`: it parses what is there and
    /// waits for more where an event is cut short by the end of it.
    pub(crate) fn with_feed(
        feed: &'a Feed,
        path: &'a str,
        builder: &'b mut TimelineBuilder,
        source: u16,
        progress: Option<Progress<'p>>,
    ) -> Self {
        let mut reader = Self::new(feed.available(), path, builder, source, progress);
        reader.feed = Some(feed);
        reader
    }

    /// Runs one parse `step` from the cursor. Without a feed that is all; with one, a step cut
    /// short by the end of the bytes so far is run again from where it began once more bytes
    /// are in, so a step succeeds or fails exactly as it would on the whole input. Steps must
    /// leave nothing behind when they fail.
    #[inline]
    fn resumable<T>(
        &mut self,
        mut step: impl FnMut(&mut Self) -> json::Result<T>,
    ) -> json::Result<T> {
        loop {
            let start = self.cur.pos;
            let result = step(self);
            let Some(feed) = self.feed else {
                return result;
            };
            match &result {
                // Cut short: once more is in, run it again; if that was all of it, the
                // step's failure is the input's.
                Err(e) if e.offset >= self.cur.buf.len() && self.more_input(feed) => {
                    self.cur.pos = start;
                }
                _ => return result,
            }
        }
    }

    /// Waits until `feed` holds more than `cur.buf` and takes it; false (and no feed from
    /// then on) when the feed is done and there is no more.
    fn more_input(&mut self, feed: &'a Feed) -> bool {
        let have = self.cur.buf.len();
        self.cur.buf = feed.wait_beyond(have);
        if self.cur.buf.len() == have {
            self.feed = None;
            return false;
        }
        true
    }

    /// With a feed: whether it is done, in which case the whole input is now in `cur.buf`.
    fn feed_done(&mut self) -> bool {
        match self.feed {
            Some(feed) if feed.is_done() => {
                self.cur.buf = feed.available();
                self.feed = None;
                true
            }
            _ => false,
        }
    }

    /// Waits for the whole input.
    fn wait_for_all(&mut self) {
        while let Some(feed) = self.feed {
            self.more_input(feed);
        }
    }

    /// The next non-space byte; with a feed still arriving, a step cut short when there is
    /// none yet.
    fn next_byte(&mut self) -> json::Result<Option<u8>> {
        match self.cur.peek() {
            None if self.feed.is_some() => self.cur.cut_short(),
            next => Ok(next),
        }
    }

    /// The input's size (expected size while it arrives), for progress.
    fn total_len(&self) -> usize {
        self.feed
            .map_or(self.cur.buf.len(), |f| f.expected().max(self.cur.buf.len()))
    }

    fn not_a_trace(&self, reason: impl Into<String>) -> IngestError {
        IngestError::NotATrace {
            path: self.path.to_owned(),
            reason: reason.into(),
        }
    }

    /// Reads the whole document. Its flavour comes from what this document shows: device
    /// hints are per input, so the HPU hint of an input read before it (a Gaudi metrics file
    /// beside a CUDA trace) does not make it a bridge trace.
    pub(crate) fn read(mut self) -> Result<ReadSummary, IngestError> {
        let bom = self.resumable(|r| {
            if r.cur.buf.len() < 3 && r.feed.is_some() {
                r.cur.cut_short()
            } else {
                Ok(r.cur.buf.starts_with(b"\xEF\xBB\xBF"))
            }
        });
        if bom.unwrap_or(false) {
            self.cur.pos = 3;
        }
        match self.resumable(Self::next_byte).unwrap_or(None) {
            None => return Err(self.not_a_trace("the file is empty")),
            Some(b'[') => {
                if let Err(e) = self.events_array() {
                    self.damaged(e)?;
                }
            }
            Some(b'{') => self.object()?,
            Some(other) => {
                return Err(self.not_a_trace(format!(
                    "expected a JSON object or array, found {}",
                    describe_byte(other)
                )));
            }
        }
        if self.events == 0 && self.non_objects > 0 {
            // `[1, 2, 3]` is valid JSON but not a list of trace events.
            return Err(self.not_a_trace(format!(
                "the event array holds {} values and none of them is an event object",
                self.non_objects
            )));
        }
        if self.events == 0 && self.warnings.iter().all(|w| w.code != WarningCode::Damaged) {
            self.warnings.push(Warning {
                code: WarningCode::Empty,
                offset: None,
                message: "the trace has no events".into(),
            });
        }
        self.bind_flows_v2();
        self.push_memory();
        self.warn_ignored_keys();
        self.warn_wrong_types();
        if self.args_too_long.0 > 0 {
            self.warnings.push(Warning {
                code: WarningCode::ArgsTooLong,
                offset: None,
                message: format!(
                    "dropped the args of {} events, longer than the 16 MiB a slice's args may \
                     take (the longest {} bytes; or past the first TiB of the input): the events are kept without them, and \
                     export --perfetto writes them without args",
                    self.args_too_long.0, self.args_too_long.1
                ),
            });
        }
        let by_phase = self
            .by_phase
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(ph, n)| (char::from(ph as u8), *n))
            .collect();
        if self.flavor == Flavor::Kineto && self.builder.device_hints(self.source).saw_hpu {
            // The bridge's Kineto-plugin variant: HPU categories without `/device:HPU` lanes.
            self.flavor = Flavor::HabanaBridge;
        }
        Ok(ReadSummary {
            format: Some(self.flavor.id()),
            events: self.events,
            by_phase,
            warnings: std::mem::take(&mut self.warnings),
            top_level: std::mem::take(&mut self.top_level),
            rank: self.rank,
            world_size: self.world_size,
        })
    }

    fn warn_ignored_keys(&mut self) {
        let seen: Vec<String> = IGNORED_KEYS
            .iter()
            .zip(self.ignored_keys)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("`{k}` on {n} events"))
            .collect();
        if !seen.is_empty() {
            self.warnings.push(Warning {
                code: WarningCode::IgnoredKeys,
                offset: None,
                message: format!(
                    "read past event keys steplens does not model: {}",
                    seen.join(", ")
                ),
            });
        }
    }

    fn warn_wrong_types(&mut self) {
        let seen: Vec<String> = TYPED_FIELDS
            .iter()
            .zip(self.wrong_types)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("`{k}` on {n}"))
            .collect();
        if !seen.is_empty() {
            let total: u64 = self.wrong_types.iter().sum();
            self.warnings.push(Warning {
                code: WarningCode::WrongFieldType,
                offset: None,
                message: format!(
                    "skipped {total} events with a field of the wrong type ({}); read on past them",
                    seen.join(", ")
                ),
            });
        }
    }

    /// Turns a syntax error into a warning (events before it are kept), or into an error when
    /// nothing usable was read.
    fn damaged(&mut self, e: SyntaxError) -> Result<(), IngestError> {
        if e.depth_limit {
            return Err(IngestError::LimitExceeded {
                path: self.path.to_owned(),
                what: "JSON nesting depth",
                limit: format!("{} levels (at byte {})", self.cur.max_depth(), e.offset),
                flag: "--max-json-depth",
            });
        }
        let at_end = e.offset >= self.cur.buf.len();
        if self.events == 0 {
            return Err(IngestError::Damaged {
                path: self.path.to_owned(),
                offset: e.offset as u64,
                reason: if at_end {
                    "the file ends before the first event".into()
                } else {
                    format!("expected {}, found {}", e.expected, self.found(e.offset))
                },
            });
        }
        let message = if at_end {
            format!(
                "trace ends early at byte {} (unterminated; expected {}): kept the {} events before it",
                e.offset, e.expected, self.events
            )
        } else {
            format!(
                "trace damaged at byte {} (expected {}, found {}): kept the {} events before it, dropped the rest",
                e.offset,
                e.expected,
                self.found(e.offset),
                self.events
            )
        };
        self.warnings.push(Warning {
            code: WarningCode::Damaged,
            offset: Some(e.offset as u64),
            message,
        });
        Ok(())
    }

    fn found(&self, offset: usize) -> String {
        self.cur
            .buf
            .get(offset)
            .map_or_else(|| "the end of the file".into(), |&b| describe_byte(b))
    }
}

/// Whether the first bytes look like a trace-event JSON at all (used to tell "not a trace"
/// from "a damaged trace").
pub(crate) fn looks_like_trace(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1 << 16)];
    memchr::memmem::find(head, b"\"traceEvents\"").is_some()
        || memchr::memmem::find(head, b"\"ph\"").is_some()
}

fn describe_byte(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", char::from(b))
    } else {
        format!("byte 0x{b:02x}")
    }
}

/// Trace Event Format JSON: the PyTorch profiler's traces, the Gaudi bridge's and Synapse's.
pub(crate) struct TraceEventReader;

impl Reader for TraceEventReader {
    fn id(&self) -> FormatId {
        FormatId::KinetoJson
    }

    fn sniff(&self, body: &[u8]) -> bool {
        matches!(first_non_space(body), Some(b'{' | b'['))
    }

    fn read(
        &self,
        input: ReadInput<'_, '_>,
        builder: &mut TimelineBuilder,
    ) -> Result<ReadSummary, IngestError> {
        let ReadInput {
            data,
            path,
            source,
            progress,
        } = input;
        let mut reader = KinetoReader::new(data.bytes(), path, builder, source, progress);
        reader.behind = data.release_behind();
        reader.read()
    }
}

#[cfg(test)]
mod tests;
