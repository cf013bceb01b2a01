//! `kineto-json`: the PyTorch profiler's Chrome trace (and any Trace Event Format JSON).
//!
//! Longer than 800 lines on purpose: it is one streaming reader whose event loop and per-phase
//! handlers share the cursor, the builder and the counters; split apart they would pass that
//! state through every call on the hottest path of a load.
//!
//! One pass over the bytes with [`crate::json::Cursor`]: each element of `traceEvents` is read
//! field by field and written straight into the [`TimelineBuilder`] (a large array's second
//! half is parsed on a second thread, `packed.rs`, and sent over in batches that are written
//! after the first half while the rest is still being parsed); args are kept as a byte range.
//! Handles a bare top-level array, keys after `traceEvents`, string or integer pid/tid,
//! ns-resolution timestamps, and input cut short (everything before the damage is kept and a
//! warning names the byte offset).

use std::borrow::Cow;

use crate::builder::{FlowPhase, TimelineBuilder};
use crate::error::IngestError;
use crate::feed::Feed;
use crate::format::{FormatId, first_non_space};
use crate::json::{self, Cursor, SyntaxError};
use crate::model::{ArgsRef, CategoryClass, LaneId, TrackId, Warning, WarningCode};
use crate::reader::{Progress, ReadInput, ReadSummary, Reader};

mod event;
mod packed;

use event::{IGNORED_KEYS, RawEvent, RawLane, TYPED_FIELDS, parse_event};

use std::sync::mpsc::Receiver;

use packed::{Parsed, parse_rest};

/// How often (in events) progress is reported.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Top-level values longer than this are not kept as metadata text.
const MAX_TOP_LEVEL_VALUE: usize = 1 << 20;

/// Event arrays at least this long are parsed by two threads ([`KinetoReader::events_split`]).
/// Ids of the flow v2 bindings made by place (a `B` end), apart from any id a trace writes.
const V2_POINT_IDS: u64 = 1 << 62;

/// One end of a flow v2 on a slice.
#[derive(Clone, Copy)]
struct FlowV2End {
    id: u64,
    slice: V2Slice,
    track: TrackId,
    ts: i64,
    flow_in: bool,
    flow_out: bool,
}

/// The slice a flow v2 end is on: a complete (`X`) slice by push index, or a `B` slice by its
/// track and start (its index is known only when its `E` closes it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum V2Slice {
    Index(usize),
    Begin(TrackId, i64),
}

const SPLIT_MIN_BYTES: usize = 8 << 20;
/// Share of the array the reading thread parses; the other thread's part is fed to the
/// builder after it, batch by batch as it is parsed. On the real torch trace the parse thread
/// finished first at a half when the machine was quiet (0.45 was ~5 % quicker then) and lagged
/// by up to 0.15 s in busy spells, where a smaller share for the reading thread costs more.
const SPLIT_FRACTION: f64 = 0.5;

/// How [`KinetoReader::events_until`] stopped.
enum Until {
    /// The array ended (its `]` was read).
    End,
    /// The next element starts at this offset, at or past the stop.
    Reached(usize),
}

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

    /// Writes the `[memory]` samples as counters, now that the whole document (its
    /// `deviceProperties` included) says which device they are on.
    fn push_memory(&mut self) {
        let samples = std::mem::take(&mut self.memory);
        if samples.is_empty() {
            return;
        }
        let on_hpu = self.builder.device_hints(self.source).memory_on_hpu();
        for (pid, ts, sample) in &samples {
            sample.push(self.builder, self.source, *pid, *ts, on_hpu);
        }
    }

    /// Joins flow v2 ends as Perfetto does, in time order (file order on ties): a slice with
    /// `flow_in` ends the flow its `bind_id` carries from the last slice with `flow_out` on that
    /// id (several may end the same one); a slice with `flow_out` then carries it on, so one
    /// with both passes the flow through. An end without its partner is counted as unbound.
    fn bind_flows_v2(&mut self) {
        if self.flow_v2.is_empty() {
            return;
        }
        let cat = self.builder.intern_cat("flow");
        let mut ends = std::mem::take(&mut self.flow_v2);
        // Stable: file order on equal times.
        ends.sort_by_key(|e| e.ts);
        // Per id: the slice the flow leaves, and whether it arrived anywhere yet.
        let mut carried: rustc_hash::FxHashMap<u64, (FlowV2End, bool)> =
            rustc_hash::FxHashMap::default();
        let mut bound = 0u64;
        for end in ends {
            if end.flow_in {
                match carried.get_mut(&end.id) {
                    Some((from, arrived)) if from.slice != end.slice => {
                        *arrived = true;
                        match (from.slice, end.slice) {
                            (V2Slice::Index(a), V2Slice::Index(b)) => {
                                self.builder.push_slice_flow(cat, end.id, a, b);
                            }
                            // A `B` slice is only made when its `E` closes it: bind by place,
                            // under an id of its own.
                            _ => {
                                bound += 1;
                                let id = V2_POINT_IDS | bound;
                                let (ft, fts) = (from.track, from.ts);
                                self.builder
                                    .push_flow(cat, id, FlowPhase::Start, ft, fts, true);
                                self.builder.push_flow(
                                    cat,
                                    id,
                                    FlowPhase::Finish,
                                    end.track,
                                    end.ts,
                                    true,
                                );
                            }
                        }
                    }
                    _ => self.builder.count_unbound_flow_end(),
                }
            }
            if end.flow_out {
                if let Some((_, false)) = carried.get(&end.id) {
                    self.builder.count_unbound_flow_end();
                }
                carried.insert(end.id, (end, false));
            }
        }
        for (_, arrived) in carried.values() {
            if !arrived {
                self.builder.count_unbound_flow_end();
            }
        }
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

    fn object(&mut self) -> Result<(), IngestError> {
        self.cur.pos += 1;
        let mut saw_events = false;
        let result = self.object_members(&mut saw_events);
        if let Err(e) = result {
            if saw_events {
                // Damage after the events (e.g. a cut `traceName`) loses nothing that matters,
                // but is still worth a line.
                self.damaged(e)?;
                return Ok(());
            }
            if self.events == 0 && !looks_like_trace(self.cur.buf) {
                return Err(self.not_a_trace(format!(
                    "invalid JSON at byte {} (expected {}) and no trace events",
                    e.offset, e.expected
                )));
            }
            self.damaged(e)?;
            return Ok(());
        }
        if !saw_events {
            return Err(self.not_a_trace(self.what_object_is()));
        }
        Ok(())
    }

    fn object_members(&mut self, saw_events: &mut bool) -> json::Result<()> {
        if self.resumable(Self::next_byte)? == Some(b'}') {
            self.cur.pos += 1;
            self.wait_for_all();
            return Ok(());
        }
        loop {
            let (key, is_array) = self.resumable(|r| {
                let key = r.cur.string()?;
                r.cur.expect(b':', "':' after a key")?;
                Ok((key, r.next_byte()? == Some(b'[')))
            })?;
            if key == "traceEvents" && is_array {
                *saw_events = true;
                self.events_array()?;
            } else {
                let range = self.resumable(|r| r.cur.skip_value())?;
                self.top_level_value(&key, range);
            }
            if !self.resumable(|r| {
                r.cur
                    .next_member(b'}', "',' or '}' in the top-level object")
            })? {
                break;
            }
        }
        self.wait_for_all();
        if !self.cur.at_end() {
            self.warnings.push(Warning {
                code: WarningCode::TrailingData,
                offset: Some(self.cur.pos as u64),
                message: format!(
                    "ignored data after the end of the JSON at byte {}",
                    self.cur.pos
                ),
            });
        }
        Ok(())
    }

    /// What a top-level object without a `traceEvents` array is, from its keys: a steplens
    /// document (with or without its `schema` key), else the keys it has.
    fn what_object_is(&self) -> String {
        let has = |key: &str| self.top_keys.iter().any(|k| k == key);
        let schema = self
            .top_level
            .iter()
            .find(|(k, _)| k == "schema")
            .map(|(_, v)| v.trim().trim_matches('"').to_owned());
        if let Some(schema) = schema.filter(|s| s.starts_with("steplens.")) {
            return format!(
                "a {schema} document written by steplens (give it to check --baseline or diff, \
                 or give the traces it came from)"
            );
        }
        if has("sources") && has("summary") && has("findings") {
            return "a steplens report without its \"schema\" key (\"schema\": \
                    \"steplens.report/1\"): write it again with steplens report -f json, or \
                    give the traces it came from"
                .to_owned();
        }
        let mut keys: Vec<&str> = self.top_keys.iter().map(String::as_str).take(8).collect();
        if self.top_keys.len() > 8 {
            keys.push("…");
        }
        if keys.is_empty() {
            "an empty JSON object, no \"traceEvents\" array (expected a Chrome/Kineto trace)"
                .to_owned()
        } else {
            format!(
                "a JSON object with the keys {} and no \"traceEvents\" array (expected a \
                 Chrome/Kineto trace)",
                keys.join(", ")
            )
        }
    }

    fn top_level_value(&mut self, key: &str, range: std::ops::Range<usize>) {
        if self.top_keys.len() < 32 {
            // Only to be named in an error: a key of any length is cut to 40 characters.
            self.top_keys.push(match key.char_indices().nth(40) {
                Some((at, _)) => format!("{}…", &key[..at]),
                None => key.to_owned(),
            });
        }
        let Some(raw) = self.cur.buf.get(range) else {
            return;
        };
        match key {
            "deviceProperties" => self.device_properties(raw),
            "distributedInfo" => {
                if let Ok(info) = serde_json::from_slice::<serde_json::Value>(raw) {
                    self.rank = info.get("rank").and_then(serde_json::Value::as_i64);
                    self.world_size = info.get("world_size").and_then(serde_json::Value::as_i64);
                }
            }
            _ => {}
        }
        if raw.len() <= MAX_TOP_LEVEL_VALUE {
            self.top_level
                .push((key.to_owned(), String::from_utf8_lossy(raw).into_owned()));
        }
    }

    fn device_properties(&mut self, raw: &[u8]) {
        let Ok(serde_json::Value::Array(devices)) = serde_json::from_slice(raw) else {
            return;
        };
        let hints = self.builder.device_hints(self.source);
        hints.property_count = devices.len();
        for device in &devices {
            if hints.memory_bytes.is_none() {
                hints.memory_bytes = device
                    .get("totalGlobalMem")
                    .and_then(serde_json::Value::as_i64);
            }
            if hints.compute_capability.is_none() {
                let part = |key| device.get(key).and_then(serde_json::Value::as_i64);
                hints.compute_capability = part("computeMajor")
                    .map(|major| format!("{major}.{}", part("computeMinor").unwrap_or(0)));
            }
            if let Some(name) = device.get("name").and_then(serde_json::Value::as_str) {
                hints.names.push(name.to_owned());
                if name.contains("HPU") || name.contains("GAUDI") || name.contains("Gaudi") {
                    hints.saw_hpu = true;
                }
            }
            if device.get("maxSharedMemoryPerMultiProcessor").is_some()
                || device.get("gcnArchName").is_some()
            {
                hints.rocm_properties = true;
            }
        }
    }

    fn events_array(&mut self) -> json::Result<()> {
        let empty = self.resumable(|r| {
            r.cur.expect(b'[', "'['")?;
            Ok(r.next_byte()? == Some(b']'))
        })?;
        if empty {
            self.cur.pos += 1;
            return Ok(());
        }
        if self.feed.is_some() {
            // Parse behind the inflater until it is done; then what is left may be split.
            if let Until::End = self.events_until(None)? {
                return Ok(());
            }
        }
        match self.split_point() {
            Some(split) => self.events_split(split),
            None => self.events_until(None).map(|_| ()),
        }
    }

    /// Reads and dispatches events from the cursor until the array ends, or until the next
    /// element starts at or past `stop`; with a feed, also when the feed is done.
    fn events_until(&mut self, stop: Option<usize>) -> json::Result<Until> {
        loop {
            self.cur.skip_ws();
            if stop.is_some_and(|stop| self.cur.pos >= stop) || self.feed_done() {
                return Ok(Until::Reached(self.cur.pos));
            }
            let parsed = self.resumable(|r| {
                if r.next_byte()? == Some(b'{') {
                    // Counted apart, so that a step run again does not count twice.
                    let mut ignored = [0; IGNORED_KEYS.len()];
                    Ok(Some((parse_event(&mut r.cur, &mut ignored)?, ignored)))
                } else {
                    // Not an event object (a stray number or null): skip it, it is no event.
                    r.cur.skip_value()?;
                    Ok(None)
                }
            })?;
            match parsed {
                Some((ev, ignored)) => {
                    for (total, n) in self.ignored_keys.iter_mut().zip(ignored) {
                        *total += n;
                    }
                    self.dispatch(&ev);
                    self.counted_event();
                }
                None => self.non_object(),
            }
            if !self.resumable(|r| r.cur.next_member(b']', "',' or ']' between events"))? {
                return Ok(Until::End);
            }
        }
    }

    /// Where a second thread may start parsing the rest of a large event array: the first
    /// `{` past [`SPLIT_FRACTION`] of the array that follows `}` and `,` (whitespace aside).
    /// Only a guess: a string may hold `}, {`, so [`Self::events_split`] checks it.
    fn split_point(&self) -> Option<usize> {
        let start = self.cur.pos;
        let remaining = self.cur.buf.len().saturating_sub(start);
        if remaining < self.split_min_bytes || !crate::spare_core() {
            return None;
        }
        let target = start + (remaining as f64 * self.split_fraction) as usize;
        let buf = self.cur.buf;
        let before = |mut at: usize| {
            while at > start {
                at -= 1;
                if !buf[at].is_ascii_whitespace() {
                    return Some((at, buf[at]));
                }
            }
            None
        };
        let mut from = target.max(start);
        while let Some(found) = buf.get(from..).and_then(|rest| memchr::memchr(b'{', rest)) {
            let at = from + found;
            if let Some((comma, b',')) = before(at)
                && let Some((_, b'}')) = before(comma)
            {
                return Some(at);
            }
            from = at + 1;
        }
        None
    }

    /// The event array on two threads: this one reads and dispatches events up to `split`
    /// while another parses the rest into [`PackedEvent`]s; when this thread arrives exactly
    /// at `split` (the guess was an element boundary), it dispatches the other's events in
    /// order, else it drops them and reads on alone. Either way the Timeline, the counts and
    /// the damage reported are the ones the single-threaded loop gives.
    fn events_split(&mut self, split: usize) -> json::Result<()> {
        let buf = self.cur.buf;
        let max_depth = self.cur.max_depth();
        let cancel = &std::sync::atomic::AtomicBool::new(false);
        let (sender, parsed) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let spawned = std::thread::Builder::new()
                .name("steplens-parse".into())
                .spawn_scoped(scope, move || {
                    parse_rest(buf, split, max_depth, cancel, &sender);
                });
            let Ok(worker) = spawned else {
                // No second thread to be had: one thread reads it all.
                return self.events_until(None).map(|_| ());
            };
            let mine = self.events_until(Some(split));
            let aligned = matches!(mine, Ok(Until::Reached(at)) if at == split);
            let outcome = match mine {
                Ok(Until::Reached(_)) if aligned => self.replay(&parsed),
                Ok(Until::Reached(_)) => {
                    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                    drop(parsed);
                    self.events_until(None).map(|_| ())
                }
                Ok(Until::End) => Ok(()),
                Err(e) => Err(e),
            };
            // Whatever is still parsing or queued is not wanted now.
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
            outcome
        })
    }

    /// Dispatches the batches [`parse_rest`] sends, in order, as they arrive, and takes over
    /// its end state.
    fn replay<'t>(&mut self, parsed: &Receiver<Parsed<'t>>) -> json::Result<()> {
        let mut texts: Vec<Cow<'t, str>> = Vec::new();
        // The sender goes only after `End`, unless the parse thread panicked (re-raised when
        // it is joined).
        while let Ok(message) = parsed.recv() {
            match message {
                Parsed::Batch {
                    events,
                    new_texts,
                    parsed_to,
                } => {
                    texts.extend(new_texts);
                    for event in &events {
                        if event.flags & packed::NON_OBJECT != 0 {
                            self.non_object();
                        } else {
                            let ev = event.unpack(&texts);
                            self.dispatch(&ev);
                            self.counted_event_at(parsed_to);
                        }
                    }
                }
                Parsed::End {
                    end,
                    result,
                    ignored_keys,
                } => {
                    for (total, n) in self.ignored_keys.iter_mut().zip(ignored_keys) {
                        *total += n;
                    }
                    self.cur.pos = end;
                    return result;
                }
            }
        }
        Ok(())
    }

    fn counted_event(&mut self) {
        let pos = self.cur.pos;
        self.counted_event_at(pos);
    }

    /// Counts one dispatched event and reports progress every [`PROGRESS_EVERY`], as of byte
    /// `pos`.
    fn counted_event_at(&mut self, pos: usize) {
        self.events += 1;
        if self.events.is_multiple_of(PROGRESS_EVERY) {
            let total = self.total_len() as u64;
            if let Some(progress) = self.progress.as_mut() {
                progress(pos as u64, total);
            }
        }
    }

    fn non_object(&mut self) {
        self.non_objects += 1;
        self.builder.count_malformed();
    }

    /// The builder's id of a pid or tid.
    fn lane(&mut self, lane: &RawLane<'_>) -> LaneId {
        match lane {
            RawLane::Int(v) => LaneId::Int(*v),
            RawLane::Str(s) => LaneId::Str(self.builder.intern(s)),
        }
    }

    fn dispatch(&mut self, ev: &RawEvent<'_>) {
        if ev.bad_field != 0 {
            if let Some(n) = self.wrong_types.get_mut(usize::from(ev.bad_field) - 1) {
                *n += 1;
            }
            return;
        }
        if let Some(slot) = self.by_phase.get_mut(usize::from(ev.ph)) {
            *slot += 1;
        }
        let source = self.source;
        let pid = ev.pid.as_ref().map_or(LaneId::Int(0), |p| self.lane(p));
        // Perfetto puts an event without a tid on the thread whose id is its pid.
        let tid = ev.tid.as_ref().map_or(pid, |t| self.lane(t));
        let args = match ev.args.clone() {
            Some(range) => ArgsRef::new(range.clone()).unwrap_or_else(|| {
                // Too long for a slice's args reference: kept out, and said.
                if !range.is_empty() {
                    self.args_too_long.0 += 1;
                    self.args_too_long.1 = self.args_too_long.1.max(range.len());
                }
                ArgsRef::NONE
            }),
            None => ArgsRef::NONE,
        };
        match ev.ph {
            b'X' | b'B' | b'i' | b'I' | b'R' | b's' | b't' | b'f' => {
                let Some(ts) = ev.ts else {
                    self.builder.count_malformed();
                    return;
                };
                let b = &mut *self.builder;
                let mut cat = b.intern_cat(ev.cat.as_deref().unwrap_or(""));
                if self.flavor == Flavor::SynapseTef
                    && matches!(ev.ph, b'X' | b'B')
                    && b.cat_class(cat) == CategoryClass::Other
                {
                    // Synapse's own categories say nothing steplens can use: an event on an
                    // engine-type process is an engine execution, one on `***Host` an API call.
                    let host = self.tef_host_pids.contains(&pid);
                    cat = b.intern_cat(if host { "Runtime" } else { "Kernel" });
                }
                if matches!(ev.ph, b'X' | b'B')
                    && b.cat_class(cat) == CategoryClass::CpuOp
                    && ev.cat.as_deref().is_some_and(is_legacy_annotation_category)
                    && ev.name.as_deref().is_some_and(is_profiler_annotation)
                {
                    // PyTorch 1.8–1.9 wrote `record_function` ranges as `Operator`s; read them as
                    // the annotations newer traces call them, so steps and ops come out the same.
                    cat = b.intern_cat("user_annotation");
                }
                let track = b.track(source, pid, tid);
                match ev.ph {
                    b'X' => {
                        let Some(dur) = ev.dur else {
                            b.count_malformed();
                            return;
                        };
                        let name = ev.name.as_deref().unwrap_or("");
                        note_device_hints(b, source, b.cat_class(cat), name, ev.cat.as_deref());
                        let name = b.intern(name);
                        let index = b.slice_count();
                        b.push_slice(track, ts, dur, name, cat, args);
                        if let Some(id) = ev.bind_id
                            && b.slice_count() > index
                            && (ev.flow_in || ev.flow_out)
                        {
                            self.flow_v2.push(FlowV2End {
                                id,
                                slice: V2Slice::Index(index),
                                track,
                                ts,
                                flow_in: ev.flow_in,
                                flow_out: ev.flow_out,
                            });
                        }
                    }
                    b'B' => {
                        let name = b.intern(ev.name.as_deref().unwrap_or(""));
                        b.push_begin(track, ts, name, cat, args);
                        if let Some(id) = ev.bind_id
                            && (ev.flow_in || ev.flow_out)
                        {
                            self.flow_v2.push(FlowV2End {
                                id,
                                slice: V2Slice::Begin(track, ts),
                                track,
                                ts,
                                flow_in: ev.flow_in,
                                flow_out: ev.flow_out,
                            });
                        }
                    }
                    b's' | b't' | b'f' => {
                        let Some(id) = ev.id else {
                            b.count_malformed();
                            return;
                        };
                        let phase = match ev.ph {
                            b's' => FlowPhase::Start,
                            b't' => FlowPhase::Step,
                            _ => FlowPhase::Finish,
                        };
                        b.push_flow(cat, id, phase, track, ts, ev.bind_enclosing);
                    }
                    _ => {
                        let name_text = ev.name.as_deref().unwrap_or("");
                        if name_text == "[memory]"
                            && let Some(sample) = ev
                                .args
                                .clone()
                                .and_then(|r| self.cur.buf.get(r))
                                .and_then(MemorySample::parse)
                        {
                            self.memory.push((pid, ts, sample));
                        }
                        let name = b.intern(name_text);
                        b.push_instant(track, ts, name, cat, ev.scope, args);
                    }
                }
            }
            b'E' => {
                let Some(ts) = ev.ts else {
                    self.builder.count_malformed();
                    return;
                };
                let track = self.builder.track(source, pid, tid);
                self.builder.push_end(track, ts);
            }
            b'b' | b'e' | b'n' => self.async_event(ev, pid, args),
            b'C' => self.counter(ev, pid),
            b'M' => self.metadata(ev, pid, tid),
            _ => self.builder.count_unsupported(),
        }
    }

    /// Nestable async events (`b`/`e`/`n`) of one category and id share an async track, as
    /// Perfetto draws them: `b`/`e` pairs become slices, `n` instants. An `id` (or
    /// `id2: {"global": …}`) names a track of the whole trace (`async`), an
    /// `id2: {"local": …}` one of the process (`<pid> async`).
    fn async_event(&mut self, ev: &RawEvent<'_>, pid: LaneId, args: ArgsRef) {
        let (Some(ts), Some(id)) = (ev.ts, ev.id) else {
            self.builder.count_malformed();
            return;
        };
        let b = &mut *self.builder;
        let cat_text = ev.cat.as_deref().unwrap_or("");
        let process = match pid {
            _ if !ev.id_local => "async".to_owned(),
            LaneId::Int(v) => format!("{v} async"),
            LaneId::Str(s) => format!("{} async", b.string(s)),
        };
        let lane = if cat_text.is_empty() {
            format!("{id:#x}")
        } else {
            format!("{cat_text} {id:#x}")
        };
        let (process, lane) = (
            LaneId::Str(b.intern(&process)),
            LaneId::Str(b.intern(&lane)),
        );
        let track = b.track(self.source, process, lane);
        let cat = b.intern_cat(cat_text);
        let name = b.intern(ev.name.as_deref().unwrap_or(""));
        match ev.ph {
            b'b' => b.push_begin(track, ts, name, cat, args),
            b'e' => b.push_end(track, ts),
            _ => b.push_instant(track, ts, name, cat, b't', args),
        }
    }

    fn counter(&mut self, ev: &RawEvent<'_>, pid: LaneId) {
        let (Some(ts), Some(range)) = (ev.ts, ev.args.clone()) else {
            self.builder.count_malformed();
            return;
        };
        let name = ev.name.as_deref().unwrap_or("");
        let mut cur = Cursor::new(self.cur.buf.get(range).unwrap_or(b"{}"));
        let mut series = Vec::new();
        let _ = (|| -> json::Result<()> {
            cur.expect(b'{', "{")?;
            if cur.peek() == Some(b'}') {
                return Ok(());
            }
            loop {
                let key = cur.string()?;
                cur.expect(b':', ":")?;
                let value = if matches!(cur.peek(), Some(b'{' | b'[')) {
                    cur.skip_value()?;
                    None
                } else {
                    let text = if cur.peek() == Some(b'"') {
                        cur.raw_string()?.0
                    } else {
                        cur.scalar_text()?
                    };
                    std::str::from_utf8(text)
                        .ok()
                        .and_then(|t| t.parse::<f64>().ok())
                };
                if let Some(v) = value {
                    series.push((key.into_owned(), v));
                }
                if !cur.next_member(b'}', ",")? {
                    return Ok(());
                }
            }
        })();
        for (key, value) in series {
            let label = if key == name || name.is_empty() {
                key
            } else {
                format!("{name} {key}")
            };
            self.builder
                .push_counter(self.source, pid, &label, ts, value);
        }
    }

    fn metadata(&mut self, ev: &RawEvent<'_>, pid: LaneId, tid: LaneId) {
        let Some(args) = ev.args.clone().and_then(|r| self.cur.buf.get(r)) else {
            return;
        };
        let text = |key: &[u8]| -> Option<String> {
            let raw = json::find_key(args, key)?;
            let mut cur = Cursor::new(raw);
            cur.string().ok().map(Cow::into_owned)
        };
        let int = |key: &[u8]| json::find_key(args, key).and_then(json::lenient_int);
        let source = self.source;
        match ev.name.as_deref().unwrap_or("") {
            "process_name" => {
                let name = text(b"name");
                if let Some(n) = name.as_deref() {
                    if n.contains("HPU") {
                        self.builder.device_hints(self.source).saw_hpu = true;
                        self.flavor = self.flavor.max(Flavor::HabanaBridge);
                    }
                    // Synapse names its processes after engine types: `***Host`, `*MME `….
                    if n.starts_with('*') && crate::gaudi::engine_class(n).is_some()
                        || n.trim() == "***Host"
                    {
                        self.builder.device_hints(self.source).saw_hpu = true;
                        self.flavor = Flavor::SynapseTef;
                    }
                    if n.trim() == "***Host" && !self.tef_host_pids.contains(&pid) {
                        self.tef_host_pids.push(pid);
                    }
                }
                self.builder.process_meta(source, pid, name, None, None);
            }
            "process_labels" => {
                let labels = text(b"labels");
                if labels.as_deref().is_some_and(|l| l.starts_with("MTIA")) {
                    self.builder.device_hints(self.source).saw_mtia = true;
                }
                self.builder.process_meta(source, pid, None, labels, None);
            }
            "process_sort_index" => {
                self.builder
                    .process_meta(source, pid, None, None, int(b"sort_index"));
            }
            "thread_name" => self
                .builder
                .thread_meta(source, pid, tid, text(b"name"), None),
            "thread_sort_index" => {
                self.builder
                    .thread_meta(source, pid, tid, None, int(b"sort_index"));
            }
            _ => {}
        }
    }
}

/// Categories under which old PyTorch versions wrote annotations along with ops.
fn is_legacy_annotation_category(cat: &str) -> bool {
    cat.eq_ignore_ascii_case("operator") || cat == "cpu_op"
}

/// The `record_function` ranges PyTorch itself opens (`ProfilerStep#3`,
/// `enumerate(DataLoader)#…`, `Optimizer.step#SGD.step`, `Optimizer.zero_grad#…`): a `#` and
/// no `::` (ATen and c10d ops always have a namespace).
fn is_profiler_annotation(name: &str) -> bool {
    name.contains('#') && !name.contains("::")
}

/// One `[memory]` instant of a `profile_memory=True` trace: the allocator's totals on one
/// device after an allocation or free.
struct MemorySample {
    /// `Device Type` (a `c10::DeviceType` number) and `Device Id`, named once the document is
    /// read ([`crate::model::memory_device_name`]).
    kind: i64,
    index: i64,
    allocated: Option<f64>,
    reserved: Option<f64>,
}

impl MemorySample {
    fn parse(args: &[u8]) -> Option<Self> {
        let int = |key: &[u8]| json::find_key(args, key).and_then(json::lenient_int);
        let kind = int(b"Device Type")?;
        let index = int(b"Device Id").unwrap_or(0);
        let float = |key: &[u8]| {
            json::find_key(args, key)
                .and_then(|t| std::str::from_utf8(t).ok())
                .and_then(|t| t.trim_matches('"').parse::<f64>().ok())
        };
        Some(Self {
            kind,
            index,
            allocated: float(b"Total Allocated"),
            reserved: float(b"Total Reserved"),
        })
    }

    /// Writes the totals as the counter series `memory allocated <device>` and
    /// `memory reserved <device>` of the process that allocated; `on_hpu`: the document
    /// describes a Gaudi ([`crate::model::memory_device_name`]).
    fn push(&self, b: &mut TimelineBuilder, source: u16, pid: LaneId, ts: i64, on_hpu: bool) {
        let device = crate::model::memory_device_name(self.kind, self.index, on_hpu);
        for (what, value) in [("allocated", self.allocated), ("reserved", self.reserved)] {
            if let Some(v) = value {
                let series = format!("memory {what} {device}");
                b.push_counter(source, pid, &series, ts, v);
            }
        }
    }
}

fn note_device_hints(
    b: &mut TimelineBuilder,
    source: u16,
    class: CategoryClass,
    name: &str,
    cat: Option<&str>,
) {
    let hints = b.device_hints(source);
    match class {
        CategoryClass::Runtime | CategoryClass::Driver => {
            if name.starts_with("hip") {
                hints.saw_hip = true;
            } else if name.starts_with("syn") {
                hints.saw_hpu = true;
            } else if name.starts_with("cu") {
                hints.saw_cuda = true;
            }
            match cat {
                Some("privateuse1_runtime") => hints.saw_hpu = true,
                Some("mtia_runtime") => hints.saw_mtia = true,
                _ => {}
            }
        }
        CategoryClass::Kernel if cat == Some("mtia_ccp_events") => hints.saw_mtia = true,
        CategoryClass::CpuOp if cat == Some("hpu_op") => hints.saw_hpu = true,
        _ => {}
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
        KinetoReader::new(data.bytes(), path, builder, source, progress).read()
    }
}

#[cfg(test)]
mod tests;
