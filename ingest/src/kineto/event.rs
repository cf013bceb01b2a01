//! One element of a Trace Event array, parsed: [`parse_event`] reads the fields steplens uses
//! into a [`RawEvent`] without touching the builder, so it can run on either thread of a split
//! read.

use std::borrow::Cow;

use crate::json::{self, Cursor};

/// Event keys with a meaning steplens reads past on purpose: thread-clock times, stack frames,
/// the second id of old async events, display colours. Each is counted in an `ignored_keys`
/// warning, so nothing a trace says is dropped silently.
pub(super) const IGNORED_KEYS: &[&str] = &["tts", "tdur", "sf", "stack", "esf", "estack", "cname"];

/// Fields whose value must have one JSON type; an event with any other type in one of them is
/// skipped (and counted by field), not read as damage that ends the trace.
pub(super) const TYPED_FIELDS: &[&str] = &[
    "ph", "name", "cat", "ts", "dur", "pid", "tid", "id", "bind_id", "bp", "s",
];

/// The [`TYPED_FIELDS`] index of `key`, plus one (0: none).
fn typed_field(key: &[u8]) -> u8 {
    TYPED_FIELDS
        .iter()
        .position(|k| k.as_bytes() == key)
        .map_or(0, |i| i as u8 + 1)
}

/// A pid or tid as written: a number (or a string of digits), or a name the builder interns
/// when the event is dispatched (parsing needs no builder, so it can run on another thread).
pub(super) enum RawLane<'a> {
    Int(i64),
    Str(Cow<'a, str>),
}

#[derive(Default)]
pub(super) struct RawEvent<'a> {
    pub(super) ph: u8,
    pub(super) name: Option<Cow<'a, str>>,
    pub(super) cat: Option<Cow<'a, str>>,
    pub(super) ts: Option<i64>,
    pub(super) dur: Option<i64>,
    pub(super) pid: Option<RawLane<'a>>,
    pub(super) tid: Option<RawLane<'a>>,
    pub(super) id: Option<u64>,
    /// The id came as `id2: {"local": …}`: it names an async track of the process, not of the
    /// whole trace.
    pub(super) id_local: bool,
    pub(super) bind_enclosing: bool,
    /// Flow v2: the flow id a slice binds to, and which ends it is.
    pub(super) bind_id: Option<u64>,
    pub(super) flow_in: bool,
    pub(super) flow_out: bool,
    pub(super) scope: u8,
    pub(super) args: Option<std::ops::Range<usize>>,
    /// The first field whose value had the wrong type ([`TYPED_FIELDS`] index + 1; 0: none).
    pub(super) bad_field: u8,
}

fn parse_lane<'a>(cur: &mut Cursor<'a>) -> json::Result<RawLane<'a>> {
    if cur.peek() == Some(b'"') {
        let s = cur.string()?;
        if !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && let Some(v) = json::lenient_int(s.as_bytes())
        {
            return Ok(RawLane::Int(v));
        }
        return Ok(RawLane::Str(s));
    }
    let text = cur.scalar_text()?;
    Ok(RawLane::Int(json::lenient_int(text).unwrap_or(0)))
}

/// A number, also accepted when written as a string.
fn number_text<'a>(cur: &mut Cursor<'a>) -> json::Result<&'a [u8]> {
    if cur.peek() == Some(b'"') {
        Ok(cur.raw_string()?.0)
    } else {
        cur.scalar_text()
    }
}

fn flow_id(cur: &mut Cursor<'_>) -> json::Result<Option<u64>> {
    if cur.peek() == Some(b'"') {
        let s = cur.string()?;
        let parsed = match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        };
        return Ok(Some(parsed.unwrap_or_else(|| {
            use std::hash::{Hash, Hasher};
            let mut h = rustc_hash::FxHasher::default();
            s.hash(&mut h);
            h.finish()
        })));
    }
    Ok(json::lenient_int(cur.scalar_text()?).map(|v| v as u64))
}

/// Parses the event object at the cursor (which is on its `{`), counting the keys of
/// [`IGNORED_KEYS`] it reads past. Needs no builder: it may run on another thread.
pub(super) fn parse_event<'a>(
    cur: &mut Cursor<'a>,
    ignored_keys: &mut [u64; IGNORED_KEYS.len()],
) -> json::Result<RawEvent<'a>> {
    cur.pos += 1;
    let mut ev = RawEvent {
        scope: b't',
        ..RawEvent::default()
    };
    if cur.peek() == Some(b'}') {
        cur.pos += 1;
        return Ok(ev);
    }
    loop {
        let (key, _) = cur.raw_string()?;
        cur.expect(b':', "':' after a key")?;
        let next = cur.peek();
        let string = next == Some(b'"');
        // A number, or a number written as a string.
        let number = !matches!(next, Some(b'{' | b'[' | b't' | b'f' | b'n'));
        // One match on the key: each typed field's arm reads a value of its type, and a value
        // of the wrong type (`"pid": {…}`, `"name": 5`) falls to the arm after them, which reads
        // it past whole and marks the event, so one bad field costs one event, not the rest of
        // the trace.
        match key {
            b"ph" if string => ev.ph = cur.raw_string()?.0.first().copied().unwrap_or(0),
            b"name" if string => ev.name = Some(cur.string()?),
            b"cat" if string => ev.cat = Some(cur.string()?),
            b"ts" if number => ev.ts = json::micros_to_ns(number_text(cur)?),
            b"dur" if number => ev.dur = json::micros_to_ns(number_text(cur)?),
            b"pid" if number => ev.pid = Some(parse_lane(cur)?),
            b"tid" if number => ev.tid = Some(parse_lane(cur)?),
            b"id" if number => ev.id = flow_id(cur)?,
            b"bind_id" if number => ev.bind_id = flow_id(cur)?,
            b"bp" if string => ev.bind_enclosing = cur.raw_string()?.0 == b"e",
            b"s" if string => {
                ev.scope = cur.raw_string()?.0.first().copied().unwrap_or(b't');
            }
            b"ph" | b"name" | b"cat" | b"ts" | b"dur" | b"pid" | b"tid" | b"id" | b"bind_id"
            | b"bp" | b"s" => {
                if ev.bad_field == 0 {
                    ev.bad_field = typed_field(key);
                }
                cur.skip_value()?;
            }
            b"id2" if next == Some(b'{') => {
                // `{"global": id}` or `{"local": id}`, as Chrome's tracing writes them.
                cur.pos += 1;
                if cur.peek() == Some(b'}') {
                    cur.pos += 1;
                } else {
                    loop {
                        let (scope, _) = cur.raw_string()?;
                        cur.expect(b':', "':' in id2")?;
                        match scope {
                            b"global" => ev.id = flow_id(cur)?,
                            b"local" => {
                                ev.id = flow_id(cur)?;
                                ev.id_local = true;
                            }
                            _ => {
                                cur.skip_value()?;
                            }
                        }
                        if !cur.next_member(b'}', "',' or '}' in id2")? {
                            break;
                        }
                    }
                }
            }
            b"flow_in" => ev.flow_in = cur.scalar_text()? == b"true",
            b"flow_out" => ev.flow_out = cur.scalar_text()? == b"true",
            b"args" if next == Some(b'{') => {
                ev.args = Some(cur.skip_value()?);
            }
            other => {
                if let Some(k) = IGNORED_KEYS.iter().position(|k| k.as_bytes() == other) {
                    ignored_keys[k] += 1;
                }
                cur.skip_value()?;
            }
        }
        if !cur.next_member(b'}', "',' or '}' in an event")? {
            return Ok(ev);
        }
    }
}
