//! Debug annotations re-encoded as JSON text, so a Perfetto slice's args read like a JSON
//! trace's.
//!
//! The encoding is two thirds of a decode's work and depends on nothing but the annotation
//! names and strings each sequence interned, so it runs beside the reading thread: the reader
//! batches [`ArgsMsg`]s in file order (interned entries, state resets, events to encode) and
//! gives each event a placeholder [`ArgsRef`] holding its slot. A batch goes to the encoder
//! thread, or, when that thread is a few batches behind, is encoded by the reader itself: both
//! keep every sequence's state, and the slots are resolved against both texts at the end.
//! Small inputs are encoded on the reading thread only.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

use bytes::Bytes;
use rustc_hash::FxHashMap;

use crate::model::ArgsRef;
use crate::perfetto::event::{Field, Fields, annotations};

/// Nested annotations deeper than this are written as `null` (a guard against hostile input).
pub(super) const MAX_ANNOTATION_DEPTH: u32 = 64;

/// Messages per batch.
const BATCH: usize = 4096;
/// Batches the encoder thread may have queued before the reader encodes one itself.
const IN_FLIGHT: usize = 4;

/// What the reader tells the encoders, in file order.
#[derive(Debug)]
enum ArgsMsg {
    /// A sequence's incremental state was cleared.
    Clear(u32),
    /// Interned `debug_annotation_names` of a sequence: iid → name.
    Names(u32, Vec<(u64, String)>),
    /// Interned `debug_annotation_string_values` of a sequence: iid → bytes.
    Strings(u32, Vec<(u64, Bytes)>),
    /// Encode the annotations of the TrackEvent at this range of the batch's bytes.
    Event(u32, Range<usize>),
}

/// Messages whose event ranges point into `bytes`; its events have the slots from
/// `first_slot` on.
#[derive(Debug, Default)]
struct Batch {
    bytes: Bytes,
    msgs: Vec<ArgsMsg>,
    first_slot: usize,
}

/// A sequence's interned annotation names (already JSON-quoted) and string values.
#[derive(Debug, Default)]
struct Interned {
    names: FxHashMap<u64, Vec<u8>>,
    strings: FxHashMap<u64, Bytes>,
}

/// Turns annotations into JSON text: the state the encoding needs, the text, and where each
/// encoded event's text is.
#[derive(Debug, Default)]
struct Encoder {
    sequences: FxHashMap<u32, Interned>,
    out: Vec<u8>,
    refs: Vec<ArgsRef>,
    /// Per encoded batch: its first slot and where its events start in `refs`.
    runs: Vec<(usize, usize)>,
}

impl Encoder {
    fn with_capacity(text: usize) -> Self {
        let mut encoder = Self::default();
        // Reserved capacity is address space until written: the text never needs to move.
        encoder.out.reserve(text);
        encoder
    }

    /// Applies the batch's state messages, and encodes its events when `encode`.
    fn apply(&mut self, batch: &Batch, encode: bool) {
        if encode {
            self.runs.push((batch.first_slot, self.refs.len()));
        }
        for msg in &batch.msgs {
            match msg {
                ArgsMsg::Clear(seq) => {
                    self.sequences.insert(*seq, Interned::default());
                }
                ArgsMsg::Names(seq, names) => {
                    let interned = self.sequences.entry(*seq).or_default();
                    for (iid, name) in names {
                        let mut quoted = Vec::with_capacity(name.len() + 2);
                        json_str(&mut quoted, name.as_bytes());
                        interned.names.insert(*iid, quoted);
                    }
                }
                ArgsMsg::Strings(seq, strings) => {
                    let interned = self.sequences.entry(*seq).or_default();
                    interned.strings.extend(strings.iter().cloned());
                }
                ArgsMsg::Event(seq, range) if encode => {
                    let args = match batch.bytes.get(range.clone()) {
                        Some(event) => self.event(*seq, event),
                        None => ArgsRef::NONE,
                    };
                    self.refs.push(args);
                }
                ArgsMsg::Event(..) => {}
            }
        }
    }

    /// Writes the annotations of `event` (a TrackEvent's bytes) as one JSON object.
    fn event(&mut self, seq: u32, event: &[u8]) -> ArgsRef {
        let start = self.out.len();
        let interned = self.sequences.get(&seq);
        let out = &mut self.out;
        out.push(b'{');
        let mut ok = true;
        for (i, a) in annotations(event).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            ok &= write_annotation(out, a, interned, 0, true).is_some();
        }
        out.push(b'}');
        if !ok {
            // A malformed annotation: no args rather than broken JSON.
            out.truncate(start);
            return ArgsRef::NONE;
        }
        ArgsRef::new(start..out.len()).unwrap_or(ArgsRef::NONE)
    }

    /// Writes the range of each event this encoder encoded into `slots`, `shift` bytes on.
    fn place(&self, slots: &mut [ArgsRef], shift: usize) {
        for (k, &(first_slot, from)) in self.runs.iter().enumerate() {
            let to = self.runs.get(k + 1).map_or(self.refs.len(), |r| r.1);
            let refs = self.refs.get(from..to).unwrap_or_default();
            for (slot, args) in slots.iter_mut().skip(first_slot).zip(refs) {
                *slot = match args.range() {
                    Some(r) => {
                        ArgsRef::new(r.start + shift..r.end + shift).unwrap_or(ArgsRef::NONE)
                    }
                    None => ArgsRef::NONE,
                };
            }
        }
    }
}

/// The encoder thread, and what it has to catch up on.
#[derive(Debug)]
struct Worker {
    batches: Sender<Batch>,
    /// Batches sent and not yet encoded.
    queued: Arc<AtomicUsize>,
    thread: JoinHandle<Encoder>,
    /// State messages of the batches the reader encoded itself, owed to the worker.
    owed: Vec<ArgsMsg>,
}

/// The reader's end of the args encoding.
#[derive(Debug)]
pub(super) struct ArgsPipe {
    batch: Batch,
    local: Encoder,
    worker: Option<Worker>,
    /// Batches the worker may have queued before the reader encodes one itself.
    max_queued: usize,
    slots: usize,
}

impl ArgsPipe {
    /// Encodes on a second thread as well when `threaded`; `expected` is the args text to
    /// reserve room for. The text that [`Self::finish`] returns never moves: the thread's
    /// buffer has room for the reader's share too, which is appended to it.
    pub(super) fn new(threaded: bool, expected: usize) -> Self {
        let worker = threaded.then(|| {
            let (batches, received) = channel::<Batch>();
            let queued = Arc::new(AtomicUsize::new(0));
            let done = Arc::clone(&queued);
            let mut encoder = Encoder::with_capacity(expected);
            let thread = std::thread::spawn(move || {
                for batch in received {
                    encoder.apply(&batch, true);
                    done.fetch_sub(1, Ordering::Release);
                }
                encoder
            });
            Worker {
                batches,
                queued,
                thread,
                owed: Vec::new(),
            }
        });
        // The reader encodes a share when threaded; all of it otherwise.
        let local = Encoder::with_capacity(if threaded { expected / 2 } else { expected });
        Self {
            batch: Batch::default(),
            local,
            worker,
            max_queued: IN_FLIGHT,
            slots: 0,
        }
    }

    /// Makes `bytes` the buffer later events are ranges of.
    #[inline]
    pub(super) fn use_bytes(&mut self, bytes: &Bytes) {
        let same =
            self.batch.bytes.as_ptr() == bytes.as_ptr() && self.batch.bytes.len() == bytes.len();
        if !same {
            self.flush();
            self.batch.bytes = bytes.clone();
        }
    }

    pub(super) fn clear(&mut self, seq: u32) {
        self.push(ArgsMsg::Clear(seq));
    }

    pub(super) fn names(&mut self, seq: u32, names: Vec<(u64, String)>) {
        if !names.is_empty() {
            self.push(ArgsMsg::Names(seq, names));
        }
    }

    pub(super) fn strings(&mut self, seq: u32, strings: Vec<(u64, Bytes)>) {
        if !strings.is_empty() {
            self.push(ArgsMsg::Strings(seq, strings));
        }
    }

    /// Queues the annotations of the TrackEvent at `event` (a range of the current bytes);
    /// returns the placeholder that [`resolve`] turns into its args.
    pub(super) fn event(&mut self, seq: u32, event: Range<usize>) -> ArgsRef {
        let slot = self.slots;
        self.slots += 1;
        self.push(ArgsMsg::Event(seq, event));
        ArgsRef::new(slot..slot + 1).unwrap_or(ArgsRef::NONE)
    }

    #[inline]
    fn push(&mut self, msg: ArgsMsg) {
        self.batch.msgs.push(msg);
        if self.batch.msgs.len() >= BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.batch.msgs.is_empty() {
            return;
        }
        let first_slot = self.batch.first_slot;
        let events = self.slots - first_slot;
        let mut batch = Batch {
            bytes: self.batch.bytes.clone(),
            msgs: std::mem::replace(&mut self.batch.msgs, Vec::with_capacity(BATCH)),
            first_slot,
        };
        self.batch.first_slot = self.slots;
        let Some(worker) = &mut self.worker else {
            self.local.apply(&batch, true);
            return;
        };
        if events > 0 && worker.queued.load(Ordering::Acquire) >= self.max_queued {
            // The encoder thread is behind: this batch is encoded here, and the worker is
            // told its state changes with the next batch it gets.
            self.local.apply(&batch, true);
            let state = batch.msgs.into_iter();
            worker
                .owed
                .extend(state.filter(|m| !matches!(m, ArgsMsg::Event(..))));
            return;
        }
        self.local.apply(&batch, false);
        if !worker.owed.is_empty() {
            worker.owed.append(&mut batch.msgs);
            batch.msgs = std::mem::take(&mut worker.owed);
        }
        worker.queued.fetch_add(1, Ordering::Release);
        // A send fails only when the worker is gone (it panicked): `finish` re-raises that.
        let _ = worker.batches.send(batch);
    }

    /// The args text and the range each slot resolves to.
    pub(super) fn finish(mut self) -> (Vec<u8>, Vec<ArgsRef>) {
        self.flush();
        let mut slots = vec![ArgsRef::NONE; self.slots];
        let Some(worker) = self.worker else {
            self.local.place(&mut slots, 0);
            return (self.local.out, slots);
        };
        drop(worker.batches);
        let mut remote = match worker.thread.join() {
            Ok(encoder) => encoder,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        remote.place(&mut slots, 0);
        // The reader's share goes after the thread's (usually the larger).
        let shift = remote.out.len();
        self.local.place(&mut slots, shift);
        remote.out.extend_from_slice(&self.local.out);
        (remote.out, slots)
    }
}

/// Resolves a placeholder from [`ArgsPipe::event`] against the slots of [`ArgsPipe::finish`].
pub(super) fn resolve(placeholder: ArgsRef, slots: &[ArgsRef]) -> ArgsRef {
    placeholder
        .range()
        .and_then(|r| slots.get(r.start).copied())
        .unwrap_or(ArgsRef::NONE)
}

/// Writes `bytes` as a JSON string, invalid UTF-8 replaced, escaped as `serde_json` does.
pub(super) fn json_str(out: &mut Vec<u8>, bytes: &[u8]) {
    // Most strings are ASCII, which needs no UTF-8 validation.
    if bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
        escape(out, bytes);
    } else {
        escape(out, String::from_utf8_lossy(bytes).as_bytes());
    }
}

fn escape(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut from = 0;
    for (i, &b) in s.iter().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.extend_from_slice(&s[from..i]);
        from = i + 1;
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
    }
    out.extend_from_slice(&s[from..]);
    out.push(b'"');
}

/// Writes one `DebugAnnotation` (its wire bytes) as JSON: `"name":value` when `named`, else
/// the value alone. `None` when the bytes are malformed.
fn write_annotation(
    out: &mut Vec<u8>,
    a: &[u8],
    interned: Option<&Interned>,
    depth: u32,
    named: bool,
) -> Option<()> {
    let mark = out.len();
    match write_in_order(out, a, interned, depth, named)? {
        InOrder::Written => Some(()),
        InOrder::NotSo => {
            out.truncate(mark);
            write_any_order(out, a, interned, depth, named)
        }
    }
}

/// Whether [`write_in_order`] could write an annotation.
enum InOrder {
    Written,
    /// Fields in an order (or a mix) it does not handle: [`write_any_order`] must.
    NotSo,
}

/// Writes an annotation in one pass when its fields come as writers send them: the name, then
/// one value or entries of one kind. Anything else is left to [`write_any_order`] (which gives
/// the same JSON for these).
fn write_in_order(
    out: &mut Vec<u8>,
    a: &[u8],
    interned: Option<&Interned>,
    depth: u32,
    named: bool,
) -> Option<InOrder> {
    if depth > MAX_ANNOTATION_DEPTH {
        return Some(InOrder::NotSo);
    }
    let mut fields = Fields::new(a);
    let mut next = fields.next_field()?;
    if named {
        match next {
            Some((1 | 10, name)) => write_name(out, a, name, interned)?,
            _ => return Some(InOrder::NotSo),
        }
        next = fields.next_field()?;
    }
    let Some((number, field)) = next else {
        out.extend_from_slice(b"null");
        return Some(InOrder::Written);
    };
    // The kind of entries that follow (11 dict, 12 array), or 0 after a scalar value.
    let entries = match (number, field) {
        (11 | 12, Field::Len(r)) => {
            out.push(if number == 11 { b'{' } else { b'[' });
            // A malformed entry may not matter (a value after it wins): the any-order
            // writer decides.
            if write_annotation(out, a.get(r)?, interned, depth + 1, number == 11).is_none() {
                return Some(InOrder::NotSo);
            }
            number
        }
        (2..=7 | 9 | 17, value) => {
            if write_value(out, a, number, value, interned).is_none() {
                return Some(InOrder::NotSo);
            }
            0
        }
        _ => return Some(InOrder::NotSo),
    };
    while let Some((number, field)) = fields.next_field()? {
        match (number, field) {
            (n, Field::Len(r)) if entries != 0 && n == entries => {
                out.push(b',');
                if write_annotation(out, a.get(r)?, interned, depth + 1, n == 11).is_none() {
                    return Some(InOrder::NotSo);
                }
            }
            // A name or value more, or entries of another kind.
            (1 | 10 | 2..=7 | 9 | 17 | 11 | 12, _) => return Some(InOrder::NotSo),
            _ => {}
        }
    }
    match entries {
        11 => out.push(b'}'),
        12 => out.push(b']'),
        _ => {}
    }
    Some(InOrder::Written)
}

/// Writes `"name":` from the annotation's name field.
fn write_name(out: &mut Vec<u8>, a: &[u8], name: Field, interned: Option<&Interned>) -> Option<()> {
    match name {
        Field::Varint(iid) => match interned.and_then(|s| s.names.get(&iid)) {
            Some(quoted) => out.extend_from_slice(quoted),
            None => json_str(out, format!("arg_{iid}").as_bytes()),
        },
        Field::Len(r) => json_str(out, a.get(r)?),
        _ => out.extend_from_slice(b"\"\""),
    }
    out.push(b':');
    Some(())
}

/// Writes a scalar value field; `None` when its wire type does not fit the field.
fn write_value(
    out: &mut Vec<u8>,
    a: &[u8],
    number: u32,
    field: Field,
    interned: Option<&Interned>,
) -> Option<()> {
    match (number, field) {
        (2, Field::Varint(v)) => {
            out.extend_from_slice(if v != 0 { b"true" } else { b"false" });
        }
        (3, Field::Varint(v)) => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
        (4, Field::Varint(v)) => {
            out.extend_from_slice(itoa::Buffer::new().format(v as i64).as_bytes());
        }
        (5, Field::Fixed64(bits)) => {
            let v = f64::from_bits(bits);
            if v.is_finite() {
                let _ = serde_json::to_writer(&mut *out, &v);
            } else {
                json_str(out, v.to_string().as_bytes());
            }
        }
        (6, Field::Len(r)) => json_str(out, a.get(r)?),
        (7, Field::Varint(p)) => json_str(out, format!("{p:#x}").as_bytes()),
        (9, Field::Len(r)) => {
            let json = a.get(r)?;
            // The writer sends empty containers and null this way: no need to validate them.
            let plain = matches!(json, b"null" | b"{}" | b"[]");
            if plain || serde_json::from_slice::<serde::de::IgnoredAny>(json).is_ok() {
                out.extend_from_slice(json);
            } else {
                json_str(out, json);
            }
        }
        (17, Field::Varint(iid)) => match interned.and_then(|s| s.strings.get(&iid)) {
            Some(b) => json_str(out, b),
            None => out.extend_from_slice(b"\"\""),
        },
        _ => return None,
    }
    Some(())
}

/// Writes an annotation whose fields come in any order: the last name and the last value
/// win, a value wins over entries, dict entries over array entries.
fn write_any_order(
    out: &mut Vec<u8>,
    a: &[u8],
    interned: Option<&Interned>,
    depth: u32,
    named: bool,
) -> Option<()> {
    // First pass: the name, a scalar value, and whether entries follow.
    let mut name: Option<Field> = None;
    let mut value: Option<(u32, Field)> = None;
    let (mut dict, mut array) = (false, false);
    let mut fields = Fields::new(a);
    while let Some((number, field)) = fields.next_field()? {
        match number {
            1 | 10 => name = Some(field),
            2..=7 | 9 | 17 => value = Some((number, field)),
            11 => dict = true,
            12 => array = true,
            _ => {}
        }
    }
    if named {
        write_name(out, a, name.unwrap_or(Field::Other), interned)?;
    }
    if depth > MAX_ANNOTATION_DEPTH {
        out.extend_from_slice(b"null");
        return Some(());
    }
    match value {
        Some((number, field)) => write_value(out, a, number, field, interned)?,
        None if dict || array => {
            let (field, open, close) = if dict {
                (11, b'{', b'}')
            } else {
                (12, b'[', b']')
            };
            out.push(open);
            let mut first = true;
            let mut fields = Fields::new(a);
            while let Some((number, f)) = fields.next_field()? {
                if let (true, Field::Len(r)) = (number == field, f) {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    // Not back through the one-pass writer: a fallback at every level would
                    // redo each subtree once per level above it.
                    write_any_order(out, a.get(r)?, interned, depth + 1, dict)?;
                }
            }
            out.push(close);
        }
        // No value and no entries (the writer sends empty objects and arrays as JSON text).
        None => out.extend_from_slice(b"null"),
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut cases: Vec<Vec<u8>> = (0u8..=0x7f).map(|b| vec![b'a', b, b'z']).collect();
        cases.push("naïve \"quoted\" \\ tab\t".as_bytes().to_vec());
        cases.push(b"bad \xff utf-8 \xc3".to_vec());
        cases.push(Vec::new());
        for case in cases {
            let mut ours = Vec::new();
            json_str(&mut ours, &case);
            let theirs = serde_json::to_vec(&String::from_utf8_lossy(&case)).unwrap_or_default();
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "{case:?}"
            );
        }
    }

    fn next(rng: &mut u64, n: u64) -> u64 {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng % n
    }

    /// A random `DebugAnnotation`: fields in any order, some repeated, some of the wrong wire
    /// type, nested entries.
    fn random_annotation(rng: &mut u64, depth: u32) -> Vec<u8> {
        let varint = |out: &mut Vec<u8>, mut v: u64| loop {
            if v < 0x80 {
                out.push(v as u8);
                break;
            }
            out.push((v as u8) | 0x80);
            v >>= 7;
        };
        let mut out = Vec::new();
        // Usually in writer order: name, then one value or entries.
        let fields = if next(rng, 3) == 0 {
            1 + next(rng, 5)
        } else {
            2 + next(rng, 2)
        };
        for k in 0..fields {
            let number = match (k, next(rng, 4)) {
                (0, 0..=2) => 1,
                (_, 0) => [1, 10, 8][next(rng, 3) as usize],
                (_, 1) if depth < 3 => [11, 12][next(rng, 2) as usize],
                _ => [2, 3, 4, 5, 6, 7, 9, 17][next(rng, 8) as usize],
            };
            let wire = match (number, next(rng, 10)) {
                (_, 0) => [0, 1, 2, 5][next(rng, 4) as usize],
                (5, _) => 1,
                (6 | 9 | 10 | 11 | 12, _) => 2,
                _ => 0,
            };
            varint(&mut out, (number << 3) | wire);
            match wire {
                0 => varint(&mut out, next(rng, 300)),
                1 => out.extend_from_slice(&(next(rng, 1000) as f64 / 7.0).to_bits().to_le_bytes()),
                5 => out.extend_from_slice(&[1, 2, 3, 4]),
                _ => {
                    let body = match number {
                        11 | 12 => {
                            let mut inner = random_annotation(rng, depth + 1);
                            // Now and then a nested entry is malformed.
                            if inner.len() > 2 && next(rng, 20) == 0 {
                                inner.truncate(inner.len() - 1);
                            }
                            inner
                        }
                        9 => [&b"[1,2]"[..], b"null", b"{}", b"not json"][next(rng, 4) as usize]
                            .to_vec(),
                        _ => [&b"x"[..], b"q\"uote", b"\xff"][next(rng, 3) as usize].to_vec(),
                    };
                    varint(&mut out, body.len() as u64);
                    out.extend(body);
                }
            }
        }
        out
    }

    #[test]
    fn the_one_pass_writer_gives_what_the_any_order_writer_gives() {
        let mut interned = Interned::default();
        for iid in 0..100 {
            let mut quoted = Vec::new();
            json_str(&mut quoted, format!("name {iid}").as_bytes());
            interned.names.insert(iid, quoted);
            interned.strings.insert(iid, Bytes::from(format!("s{iid}")));
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut written = 0;
        for _ in 0..20_000 {
            let a = random_annotation(&mut rng, 0);
            for named in [true, false] {
                let (mut fast, mut any) = (b"[".to_vec(), b"[".to_vec());
                let f = write_annotation(&mut fast, &a, Some(&interned), 0, named);
                let g = write_any_order(&mut any, &a, Some(&interned), 0, named);
                assert_eq!(f, g, "{a:?}");
                if f.is_some() {
                    written += 1;
                    assert_eq!(
                        String::from_utf8_lossy(&fast),
                        String::from_utf8_lossy(&any)
                    );
                }
            }
        }
        // The generator makes mostly well-formed annotations.
        assert!(written > 20_000, "{written}");
    }

    /// The args of `events` events sent through a pipe; at event 5000 the sequence is cleared
    /// and its name iid 1 comes back meaning another name. From event 6000 on the pipe's
    /// `max_queued` is `then_queued`.
    fn through_pipe(mut pipe: ArgsPipe, events: usize, then_queued: usize) -> Vec<String> {
        let annotation = [0x08, 1, 0x20, 7];
        let mut event = vec![0x22, 4];
        event.extend(annotation);
        let bytes = Bytes::from(event.repeat(events));
        pipe.use_bytes(&bytes);
        pipe.clear(1);
        pipe.names(1, vec![(1, "k".to_owned())]);
        let mut placeholders = Vec::new();
        for i in 0..events {
            if i == 6000 {
                pipe.max_queued = then_queued;
            }
            if i == 5000 {
                pipe.clear(1);
                pipe.names(1, vec![(1, "renamed".to_owned())]);
            }
            placeholders.push(pipe.event(1, i * 6..i * 6 + 6));
        }
        let (text, slots) = pipe.finish();
        placeholders
            .into_iter()
            .map(|p| {
                let r = resolve(p, &slots).range().unwrap_or(0..0);
                String::from_utf8_lossy(&text[r]).into_owned()
            })
            .collect()
    }

    #[test]
    fn encoding_on_both_threads_resolves_slots_as_one_thread_does() {
        let events = 3 * BATCH + 17;
        let inline = through_pipe(ArgsPipe::new(false, 0), events, 0);
        assert_eq!(inline[0], "{\"k\":7}");
        assert_eq!(inline[events - 1], "{\"renamed\":7}");
        assert_eq!(
            inline.iter().filter(|a| a.contains("renamed")).count(),
            events - 5000
        );
        // The worker gets no batch, the ones after 6000 (catching up on the state changes
        // the reader encoded itself), some, or all.
        for (first, then) in [(0, 0), (0, usize::MAX), (1, 1), (IN_FLIGHT, IN_FLIGHT)] {
            let mut pipe = ArgsPipe::new(true, 0);
            pipe.max_queued = first;
            assert_eq!(through_pipe(pipe, events, then), inline, "{first} {then}");
        }
    }
}
