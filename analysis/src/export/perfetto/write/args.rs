//! Slice and instant args as debug annotations, and the annotation names they intern.
//!
//! Converting every slice's JSON args is most of an export's work. On a large Timeline it runs
//! on a second thread ([`convert`]) that walks the slices and instants in the order the writer
//! emits them, so it assigns name iids exactly as the writer would itself: the writer takes
//! each converted item, with the names it interned first, in turn. The file is byte for byte
//! the one written on one thread.

use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender};

use rustc_hash::FxHashMap;
use steplens_ingest::json::{Cursor, unescape, utf8_lossy};
use steplens_ingest::model::{SliceId, Timeline};
use steplens_ingest::perfetto::proto::{self as pb, debug_annotation};

use super::Annotation;
use super::{layers, wire};

/// Turns args into debug annotations, interning their names.
#[derive(Debug, Default)]
pub(super) struct Annotator {
    names: FxHashMap<String, u64>,
    /// Names interned since [`Self::take_new_names`] last ran.
    new_names: Vec<pb::DebugAnnotationName>,
    /// Iids of JSON keys without escapes, by their raw bytes.
    raw_names: FxHashMap<Box<[u8]>, u64>,
}

impl Annotator {
    fn name_iid(&mut self, name: &str) -> u64 {
        if let Some(&iid) = self.names.get(name) {
            return iid;
        }
        let iid = self.names.len() as u64 + 1;
        self.names.insert(name.to_owned(), iid);
        self.new_names.push(pb::DebugAnnotationName {
            iid: Some(iid),
            name: Some(name.to_owned()),
        });
        iid
    }

    /// The names interned since the last call, in order.
    pub(super) fn take_new_names(&mut self) -> Vec<pb::DebugAnnotationName> {
        std::mem::take(&mut self.new_names)
    }

    /// Appends slice args `raw` to `out` as `debug_annotations` fields; `false`, with nothing
    /// appended, when they are not a well-formed JSON object (`Timeline::args` would not
    /// decode them either).
    pub(super) fn slice_args(&mut self, raw: &[u8], out: &mut Vec<u8>) -> bool {
        let mark = out.len();
        let ok = self.json_annotations(raw, out).is_some();
        if !ok {
            out.truncate(mark);
        }
        ok
    }

    /// Instant `i`'s args (on Timeline track `track`) as annotations; none when they are not
    /// a JSON object.
    pub(super) fn instant_args(
        &mut self,
        t: &Timeline,
        track: u32,
        i: usize,
    ) -> Vec<pb::DebugAnnotation> {
        instant_args(t, track, i)
            .map(|map| self.annotations(&map))
            .unwrap_or_default()
    }

    /// Appends the members of the JSON object `raw` to `ev` as `debug_annotations`; `None`
    /// when `raw` is not a well-formed object.
    fn json_annotations(&mut self, raw: &[u8], ev: &mut Vec<u8>) -> Option<()> {
        let mut cur = Cursor::new(raw);
        cur.expect(b'{', "{").ok()?;
        if cur.peek() == Some(b'}') {
            return Some(());
        }
        loop {
            let iid = self.key_iid(&mut cur)?;
            cur.expect(b':', ":").ok()?;
            // A failure anywhere drops all of `ev`'s annotations: no need to undo this one.
            let at = wire::open(ev, 4);
            wire::uint(ev, 1, iid);
            self.json_value(&mut cur, ev, 0)?;
            wire::close(ev, at);
            if !more_members(&mut cur, b'}')? {
                return Some(());
            }
        }
    }

    /// Reads an object key and interns it. Keys without escapes are looked up by their raw
    /// bytes, which skips decoding them again for every slice.
    fn key_iid(&mut self, cur: &mut Cursor<'_>) -> Option<u64> {
        let (raw, escaped) = cur.raw_string().ok()?;
        if escaped {
            return Some(self.name_iid(&unescape(raw)));
        }
        if let Some(&iid) = self.raw_names.get(raw) {
            return Some(iid);
        }
        let iid = self.name_iid(&utf8_lossy(raw));
        self.raw_names.insert(raw.into(), iid);
        Some(iid)
    }

    /// Writes one JSON value as the value fields of a DebugAnnotation.
    pub(super) fn json_value(
        &mut self,
        cur: &mut Cursor<'_>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Option<()> {
        if depth > 64 {
            return None;
        }
        match cur.peek()? {
            b'"' => {
                let (raw, escaped) = cur.raw_string().ok()?;
                if !escaped && raw.is_ascii() {
                    wire::bytes(out, 6, raw);
                } else if escaped {
                    wire::bytes(out, 6, unescape(raw).as_bytes());
                } else {
                    wire::bytes(out, 6, utf8_lossy(raw).as_bytes());
                }
            }
            b'{' => {
                cur.expect(b'{', "{").ok()?;
                if cur.peek() == Some(b'}') {
                    cur.expect(b'}', "}").ok()?;
                    // Empty containers have no entries to tell them apart: sent as JSON text.
                    wire::bytes(out, 9, b"{}");
                    return Some(());
                }
                loop {
                    let iid = self.key_iid(cur)?;
                    cur.expect(b':', ":").ok()?;
                    let at = wire::open(out, 11);
                    wire::uint(out, 1, iid);
                    self.json_value(cur, out, depth + 1)?;
                    wire::close(out, at);
                    if !more_members(cur, b'}')? {
                        break;
                    }
                }
            }
            b'[' => {
                cur.expect(b'[', "[").ok()?;
                if cur.peek() == Some(b']') {
                    cur.expect(b']', "]").ok()?;
                    wire::bytes(out, 9, b"[]");
                    return Some(());
                }
                loop {
                    let at = wire::open(out, 12);
                    self.json_value(cur, out, depth + 1)?;
                    wire::close(out, at);
                    if !more_members(cur, b']')? {
                        break;
                    }
                }
            }
            _ => {
                let text = cur.scalar_text().ok()?;
                match text {
                    b"true" => wire::uint(out, 2, 1),
                    b"false" => wire::uint(out, 2, 0),
                    b"null" => wire::bytes(out, 9, b"null"),
                    _ => number(text, out)?,
                }
            }
        }
        Some(())
    }

    pub(super) fn annotations(
        &mut self,
        map: &serde_json::Map<String, serde_json::Value>,
    ) -> Vec<pb::DebugAnnotation> {
        map.iter()
            .map(|(k, v)| {
                let mut a = self.annotation(v);
                a.name_field = Some(debug_annotation::NameField::NameIid(self.name_iid(k)));
                a
            })
            .collect()
    }

    pub(super) fn annotation(&mut self, v: &serde_json::Value) -> pb::DebugAnnotation {
        use serde_json::Value;
        let mut a = pb::DebugAnnotation::default();
        let legacy = |text: &str| Some(debug_annotation::Value::LegacyJsonValue(text.to_owned()));
        match v {
            Value::Null => a.value = legacy("null"),
            Value::Bool(b) => a.value = Some(debug_annotation::Value::BoolValue(*b)),
            Value::Number(n) => {
                a.value = if let Some(i) = n.as_i64() {
                    Some(debug_annotation::Value::IntValue(i))
                } else if let Some(u) = n.as_u64() {
                    Some(debug_annotation::Value::UintValue(u))
                } else {
                    Some(debug_annotation::Value::DoubleValue(
                        n.as_f64().unwrap_or(0.0),
                    ))
                };
            }
            Value::String(s) => a.value = Some(debug_annotation::Value::StringValue(s.clone())),
            // Empty containers have no entries to tell them apart: sent as JSON text.
            Value::Array(items) if items.is_empty() => a.value = legacy("[]"),
            Value::Object(map) if map.is_empty() => a.value = legacy("{}"),
            Value::Array(items) => {
                a.array_values = items.iter().map(|item| self.annotation(item)).collect();
            }
            Value::Object(map) => a.dict_entries = self.annotations(map),
        }
        a
    }

    pub(super) fn overlay_annotation(
        &mut self,
        name: &str,
        value: &Annotation,
    ) -> pb::DebugAnnotation {
        pb::DebugAnnotation {
            name_field: Some(debug_annotation::NameField::NameIid(self.name_iid(name))),
            value: Some(match value {
                Annotation::Str(s) => debug_annotation::Value::StringValue(s.clone()),
                Annotation::Int(i) => debug_annotation::Value::IntValue(*i),
                Annotation::Double(d) => debug_annotation::Value::DoubleValue(*d),
                Annotation::Bool(b) => debug_annotation::Value::BoolValue(*b),
            }),
            ..Default::default()
        }
    }
}

/// A JSON number as `int_value`, `uint_value` or `double_value`, as serde_json reads it.
pub(super) fn number(text: &[u8], out: &mut Vec<u8>) -> Option<()> {
    if let Some(v) = plain_int(text) {
        wire::uint(out, 4, v as u64);
        return Some(());
    }
    let integral = !text.iter().any(|b| matches!(b, b'.' | b'e' | b'E'));
    let s = std::str::from_utf8(text).ok()?;
    if integral {
        if let Ok(v) = s.parse::<i64>() {
            // int64 is a varint of the two's complement.
            wire::uint(out, 4, v as u64);
            return Some(());
        }
        if let Ok(v) = s.parse::<u64>() {
            wire::uint(out, 3, v);
            return Some(());
        }
    }
    // serde_json's own float parser, so values read back equal what `Timeline::args` gives.
    let v: f64 = serde_json::from_slice(text).ok()?;
    wire::fixed64(out, 5, v.to_bits());
    Some(())
}

/// A number of up to 18 digits with an optional minus sign (which fits an i64), the common case.
#[inline]
fn plain_int(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i64::from(d - b'0');
    }
    Some(if negative { -v } else { v })
}

/// Items per batch the converting thread sends.
const BATCH: usize = 4096;
/// Batches converted ahead of the writer: bounds the memory the converter runs ahead by.
pub(super) const IN_FLIGHT: usize = 8;

/// One converted slice (with args) or instant.
#[derive(Debug, Default)]
pub(super) struct Item {
    /// A slice's `debug_annotations` fields, a range of the batch's bytes
    /// ([`Converted::fragment`]); `None` when its args are not a JSON object.
    pub(super) fragment: Option<Range<usize>>,
    /// An instant's annotations.
    pub(super) instant: Vec<pb::DebugAnnotation>,
    /// The names it interned first.
    pub(super) names: Vec<pb::DebugAnnotationName>,
}

/// Converted items, in the writer's order.
#[derive(Debug, Default)]
pub(super) struct Batch {
    bytes: Vec<u8>,
    items: Vec<Item>,
}

/// The instants of Timeline track `track`.
pub(super) fn instants_of(t: &Timeline, track: u32) -> Range<usize> {
    let list = &t.instants.track;
    list.partition_point(|&x| x < track)..list.partition_point(|&x| x <= track)
}

/// Instant `i`'s args as a JSON object, when they are one.
fn instant_args(
    t: &Timeline,
    track: u32,
    i: usize,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let source = t.tracks.get(track as usize)?.source;
    let raw = t.resolve_args(source, *t.instants.args.get(i)?)?;
    serde_json::from_slice(raw).ok()
}

/// Converts the args of every slice that has args and of every instant, track by track in the
/// order [`super::Writer::track`] writes them (slices layer by layer, then instants), and
/// sends them to `out` in batches. Stops when the writer hangs up.
pub(super) fn convert(t: &Timeline, mut annotator: Annotator, out: &SyncSender<Batch>) {
    let mut batch = Batch::default();
    for track in 0..t.tracks.len() {
        let slices = t.tracks[track].slices.start as usize..t.tracks[track].slices.end as usize;
        let spread = layers(
            &t.slices.start[slices.clone()],
            &t.slices.dur[slices.clone()],
        );
        for layer in 0..spread.count() {
            for &k in spread.members(layer) {
                let i = slices.start + k as usize;
                let Some(raw) = t.args_raw(i as SliceId) else {
                    continue;
                };
                let start = batch.bytes.len();
                let ok = annotator.slice_args(raw, &mut batch.bytes);
                batch.items.push(Item {
                    fragment: ok.then_some(start..batch.bytes.len()),
                    instant: Vec::new(),
                    names: annotator.take_new_names(),
                });
                if batch.items.len() >= BATCH && !send(out, &mut batch) {
                    return;
                }
            }
        }
        for i in instants_of(t, track as u32) {
            let instant = annotator.instant_args(t, track as u32, i);
            batch.items.push(Item {
                fragment: None,
                instant,
                names: annotator.take_new_names(),
            });
            if batch.items.len() >= BATCH && !send(out, &mut batch) {
                return;
            }
        }
    }
    send(out, &mut batch);
}

/// Sends the batch and starts a new one; `false` when the writer has hung up.
fn send(out: &SyncSender<Batch>, batch: &mut Batch) -> bool {
    let full = std::mem::take(batch);
    batch.bytes.reserve(full.bytes.capacity());
    out.send(full).is_ok()
}

/// The writer's end: converted items taken in turn.
#[derive(Debug)]
pub(super) struct Converted {
    batches: Receiver<Batch>,
    batch: Batch,
    next: usize,
}

impl Converted {
    pub(super) fn new(batches: Receiver<Batch>) -> Self {
        Self {
            batches,
            batch: Batch::default(),
            next: 0,
        }
    }

    /// The next item; `None` when the converter stopped short (it panicked).
    pub(super) fn take(&mut self) -> Option<Item> {
        while self.next >= self.batch.items.len() {
            self.batch = self.batches.recv().ok()?;
            self.next = 0;
        }
        let item = std::mem::take(self.batch.items.get_mut(self.next)?);
        self.next += 1;
        Some(item)
    }

    /// The bytes of a taken fragment.
    pub(super) fn fragment(&self, range: Range<usize>) -> &[u8] {
        self.batch.bytes.get(range).unwrap_or_default()
    }
}

/// After a member: whether another follows (`,` and no `close` after it), having read the
/// `close` otherwise. A trailing comma before `close` ends the container, as Perfetto's own JSON
/// reader takes it.
fn more_members(cur: &mut Cursor<'_>, close: u8) -> Option<bool> {
    if !cur
        .next_member(close, "a comma or the container's end")
        .ok()?
    {
        return Some(false);
    }
    if cur.peek() == Some(close) {
        cur.expect(close, "the container's end").ok()?;
        return Some(false);
    }
    Some(true)
}
