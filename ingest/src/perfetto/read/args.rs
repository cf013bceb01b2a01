//! Debug annotations re-encoded as JSON text, so a Perfetto slice's args read like a JSON
//! trace's.
//!
//! The encoding is more than half of a decode's work and depends on nothing but the
//! annotation names and strings each sequence interned, so it runs beside the reading thread:
//! the reader sends [`ArgsMsg`]s in file order (interned entries, state resets, events to
//! encode), gives each event a placeholder [`ArgsRef`] holding its slot, and swaps the real
//! ranges in when the encoder is done. Small inputs run the same encoder inline.

use std::ops::Range;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use bytes::Bytes;
use rustc_hash::FxHashMap;

use crate::model::ArgsRef;
use crate::perfetto::event::{Field, Fields, annotations};

/// Nested annotations deeper than this are written as `null` (a guard against hostile input).
pub(super) const MAX_ANNOTATION_DEPTH: u32 = 64;

/// Messages per batch handed to the encoder thread.
const BATCH: usize = 4096;
/// Batches in flight: bounds the memory the reader can run ahead by.
const IN_FLIGHT: usize = 8;

/// What the reader tells the encoder, in file order.
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

/// Messages whose event ranges point into `bytes`.
#[derive(Debug, Default)]
struct Batch {
    bytes: Bytes,
    msgs: Vec<ArgsMsg>,
}

/// A sequence's interned annotation names (already JSON-quoted) and string values.
#[derive(Debug, Default)]
struct Interned {
    names: FxHashMap<u64, Vec<u8>>,
    strings: FxHashMap<u64, Bytes>,
}

/// Turns annotations into JSON text: the state the encoding needs, the text, and the range of
/// each encoded event (by slot).
#[derive(Debug, Default)]
struct Encoder {
    sequences: FxHashMap<u32, Interned>,
    out: Vec<u8>,
    refs: Vec<ArgsRef>,
}

impl Encoder {
    fn apply(&mut self, batch: Batch) {
        for msg in batch.msgs {
            match msg {
                ArgsMsg::Clear(seq) => {
                    self.sequences.insert(seq, Interned::default());
                }
                ArgsMsg::Names(seq, names) => {
                    let interned = self.sequences.entry(seq).or_default();
                    for (iid, name) in names {
                        let mut quoted = Vec::with_capacity(name.len() + 2);
                        json_str(&mut quoted, name.as_bytes());
                        interned.names.insert(iid, quoted);
                    }
                }
                ArgsMsg::Strings(seq, strings) => {
                    self.sequences
                        .entry(seq)
                        .or_default()
                        .strings
                        .extend(strings);
                }
                ArgsMsg::Event(seq, range) => {
                    let args = match batch.bytes.get(range) {
                        Some(event) => self.event(seq, event),
                        None => ArgsRef::NONE,
                    };
                    self.refs.push(args);
                }
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
}

/// Where batches go: an encoder on this thread, or one on its own thread.
#[derive(Debug)]
enum Sink {
    Inline(Encoder),
    Thread {
        batches: SyncSender<Batch>,
        worker: JoinHandle<Encoder>,
    },
}

/// The reader's end of the args encoding.
#[derive(Debug)]
pub(super) struct ArgsPipe {
    batch: Batch,
    sink: Sink,
    slots: usize,
}

impl ArgsPipe {
    /// An encoder on a second thread when `threaded`, else inline; `expected` is the args
    /// text to reserve room for.
    pub(super) fn new(threaded: bool, expected: usize) -> Self {
        let mut encoder = Encoder::default();
        // Reserved capacity is address space until written: the text never needs to move.
        encoder.out.reserve(expected);
        let sink = if threaded {
            let (batches, received) = sync_channel::<Batch>(IN_FLIGHT);
            let worker = std::thread::spawn(move || {
                for batch in received {
                    encoder.apply(batch);
                }
                encoder
            });
            Sink::Thread { batches, worker }
        } else {
            Sink::Inline(encoder)
        };
        Self {
            batch: Batch::default(),
            sink,
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
    /// returns the placeholder that [`Self::finish`]'s slots resolve.
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
        let batch = Batch {
            bytes: self.batch.bytes.clone(),
            msgs: std::mem::replace(&mut self.batch.msgs, Vec::with_capacity(BATCH)),
        };
        match &mut self.sink {
            Sink::Inline(encoder) => encoder.apply(batch),
            // A send fails only when the worker is gone (it panicked): `finish` re-raises that.
            Sink::Thread { batches, .. } => {
                let _ = batches.send(batch);
            }
        }
    }

    /// The args text and the range each slot resolves to.
    pub(super) fn finish(mut self) -> (Vec<u8>, Vec<ArgsRef>) {
        self.flush();
        let encoder = match self.sink {
            Sink::Inline(encoder) => encoder,
            Sink::Thread { batches, worker } => {
                drop(batches);
                match worker.join() {
                    Ok(encoder) => encoder,
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        };
        (encoder.out, encoder.refs)
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
    match std::str::from_utf8(bytes) {
        Ok(_) => escape(out, bytes),
        Err(_) => escape(out, String::from_utf8_lossy(bytes).as_bytes()),
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

    #[test]
    fn a_threaded_encoder_resolves_slots_as_an_inline_one() {
        // Two events: {"k": 7} with the name interned, then one naming an iid never interned.
        let annotation = |name_iid: u8, value: u8| vec![0x08, name_iid, 0x20, value];
        let event = |a: Vec<u8>| {
            let mut e = vec![0x22, a.len() as u8];
            e.extend(a);
            e
        };
        let mut bytes = event(annotation(1, 7));
        let second = bytes.len();
        bytes.extend(event(annotation(2, 9)));
        let bytes = Bytes::from(bytes);
        let run = |threaded: bool| {
            let mut pipe = ArgsPipe::new(threaded, 0);
            pipe.use_bytes(&bytes);
            pipe.clear(1);
            pipe.names(1, vec![(1, "k".to_owned())]);
            let a = pipe.event(1, 0..second);
            let b = pipe.event(1, second..bytes.len());
            let (text, slots) = pipe.finish();
            let show = |p: ArgsRef| {
                let r = resolve(p, &slots).range().unwrap_or(0..0);
                String::from_utf8_lossy(&text[r]).into_owned()
            };
            (show(a), show(b))
        };
        let inline = run(false);
        assert_eq!(inline, ("{\"k\":7}".to_owned(), "{\"arg_2\":9}".to_owned()));
        assert_eq!(run(true), inline);
    }
}
