//! The second thread of a split parse: [`parse_rest`] parses the tail of a large event array
//! into [`PackedEvent`]s, which the reading thread dispatches once it has read up to the split.
//!
//! A [`RawEvent`] borrows its strings from the input and is about 200 bytes; a packed one keeps
//! byte offsets instead (104 bytes), so holding half a 500 MB trace's events costs ~90 MB, not
//! ~180. Strings that had to be decoded (escapes, invalid UTF-8) go to a side table.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

use super::event::{IGNORED_KEYS, RawEvent, RawLane, parse_event};
use crate::json::{self, Cursor};

/// Bits of [`PackedEvent::flags`].
pub(super) mod flags {
    pub(crate) const NON_OBJECT: u32 = 1;
    pub(crate) const HAS_NAME: u32 = 1 << 1;
    pub(crate) const NAME_OWNED: u32 = 1 << 2;
    pub(crate) const HAS_CAT: u32 = 1 << 3;
    pub(crate) const CAT_OWNED: u32 = 1 << 4;
    pub(crate) const HAS_TS: u32 = 1 << 5;
    pub(crate) const HAS_DUR: u32 = 1 << 6;
    pub(crate) const HAS_PID: u32 = 1 << 7;
    pub(crate) const PID_TEXT: u32 = 1 << 8;
    pub(crate) const PID_OWNED: u32 = 1 << 9;
    pub(crate) const HAS_TID: u32 = 1 << 10;
    pub(crate) const TID_TEXT: u32 = 1 << 11;
    pub(crate) const TID_OWNED: u32 = 1 << 12;
    pub(crate) const HAS_ID: u32 = 1 << 13;
    pub(crate) const HAS_BIND_ID: u32 = 1 << 14;
    pub(crate) const BIND_ENCLOSING: u32 = 1 << 15;
    pub(crate) const FLOW_IN: u32 = 1 << 16;
    pub(crate) const FLOW_OUT: u32 = 1 << 17;
    pub(crate) const HAS_ARGS: u32 = 1 << 18;
}

pub(super) use flags::NON_OBJECT;

/// Events per batch of [`ParsedRest::batches`] (one allocation each, never regrown).
const BATCH: usize = 1 << 16;
/// Events between two looks at the cancel flag.
const CANCEL_EVERY: usize = 1024;

/// A string of an event: a byte range of the input, or an index into the side table.
#[derive(Clone, Copy, Default)]
struct Text {
    at: u64,
    len: u32,
}

/// One element of the event array, parsed, without borrowing anything.
#[derive(Default)]
pub(super) struct PackedEvent {
    ts: i64,
    dur: i64,
    id: u64,
    bind_id: u64,
    /// The pid's value, or its text's offset (or side-table index) with `PID_TEXT`.
    pid: i64,
    tid: i64,
    name_at: u64,
    cat_at: u64,
    args_start: u64,
    args_end: u64,
    name_len: u32,
    cat_len: u32,
    pid_len: u32,
    tid_len: u32,
    pub(super) flags: u32,
    ph: u8,
    scope: u8,
}

/// What the second thread parsed.
pub(super) struct ParsedRest {
    /// Events in file order, with the offset parsing had reached at the end of each batch.
    pub(super) batches: Vec<(Vec<PackedEvent>, usize)>,
    /// Decoded strings the events refer to.
    pub(super) owned: Vec<String>,
    /// Where the cursor stopped: past the array's `]`, or at the damage.
    pub(super) end: usize,
    /// How parsing ended.
    pub(super) result: json::Result<()>,
    pub(super) ignored_keys: [u64; IGNORED_KEYS.len()],
}

/// Parses the event array from `start` (an element's first byte) to its end, as the reading
/// thread's loop does, stopping early (with whatever it has) once `cancel` is set.
pub(super) fn parse_rest(
    buf: &[u8],
    start: usize,
    max_depth: usize,
    cancel: &AtomicBool,
) -> ParsedRest {
    let mut cur = Cursor::with_max_depth(buf, max_depth);
    cur.pos = start;
    let mut rest = ParsedRest {
        batches: Vec::new(),
        owned: Vec::new(),
        end: start,
        result: Ok(()),
        ignored_keys: [0; IGNORED_KEYS.len()],
    };
    let mut batch = Vec::with_capacity(BATCH);
    let result = (|| -> json::Result<()> {
        loop {
            if batch.len() % CANCEL_EVERY == 0 && cancel.load(Ordering::Relaxed) {
                return Ok(());
            }
            if cur.peek() == Some(b'{') {
                let ev = parse_event(&mut cur, &mut rest.ignored_keys)?;
                batch.push(PackedEvent::pack(&ev, buf, &mut rest.owned));
            } else {
                cur.skip_value()?;
                batch.push(PackedEvent {
                    flags: NON_OBJECT,
                    ..PackedEvent::default()
                });
            }
            let more = cur.next_member(b']', "',' or ']' between events")?;
            if batch.len() == BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                rest.batches.push((full, cur.pos));
            }
            if !more {
                return Ok(());
            }
        }
    })();
    rest.batches.push((batch, cur.pos));
    rest.end = cur.pos;
    rest.result = result;
    rest
}

/// A string as a [`Text`]: its range when it lies in `buf` (it was borrowed from the input),
/// else its side-table index (it was decoded: owned).
fn pack_text(text: &str, buf: &[u8], owned: &mut Vec<String>) -> (Text, bool) {
    let at = (text.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
    if at
        .checked_add(text.len())
        .is_some_and(|end| end <= buf.len())
        && let Ok(len) = u32::try_from(text.len())
    {
        return (Text { at: at as u64, len }, false);
    }
    owned.push(text.to_owned());
    (
        Text {
            at: (owned.len() - 1) as u64,
            len: 0,
        },
        true,
    )
}

fn unpack_text<'t>(text: Text, is_owned: bool, buf: &'t [u8], owned: &'t [String]) -> Cow<'t, str> {
    if is_owned {
        return Cow::Borrowed(owned.get(text.at as usize).map_or("", String::as_str));
    }
    let start = usize::try_from(text.at).unwrap_or(usize::MAX);
    let bytes = buf
        .get(start..start.saturating_add(text.len as usize))
        .unwrap_or_default();
    // It was valid UTF-8 when parsed (a borrowed string always is): checked, not decoded.
    json::utf8_lossy(bytes)
}

impl PackedEvent {
    fn pack(ev: &RawEvent<'_>, buf: &[u8], owned: &mut Vec<String>) -> Self {
        let mut p = Self {
            ph: ev.ph,
            scope: ev.scope,
            ..Self::default()
        };
        let mut set = |on: bool, bit: u32| {
            if on {
                p.flags |= bit;
            }
        };
        set(ev.bind_enclosing, flags::BIND_ENCLOSING);
        set(ev.flow_in, flags::FLOW_IN);
        set(ev.flow_out, flags::FLOW_OUT);
        if let Some(name) = &ev.name {
            let (t, is_owned) = pack_text(name, buf, owned);
            (p.name_at, p.name_len) = (t.at, t.len);
            p.flags |= flags::HAS_NAME | if is_owned { flags::NAME_OWNED } else { 0 };
        }
        if let Some(cat) = &ev.cat {
            let (t, is_owned) = pack_text(cat, buf, owned);
            (p.cat_at, p.cat_len) = (t.at, t.len);
            p.flags |= flags::HAS_CAT | if is_owned { flags::CAT_OWNED } else { 0 };
        }
        if let Some(ts) = ev.ts {
            p.ts = ts;
            p.flags |= flags::HAS_TS;
        }
        if let Some(dur) = ev.dur {
            p.dur = dur;
            p.flags |= flags::HAS_DUR;
        }
        if let Some(id) = ev.id {
            p.id = id;
            p.flags |= flags::HAS_ID;
        }
        if let Some(id) = ev.bind_id {
            p.bind_id = id;
            p.flags |= flags::HAS_BIND_ID;
        }
        if let Some(args) = &ev.args {
            p.args_start = args.start as u64;
            p.args_end = args.end as u64;
            p.flags |= flags::HAS_ARGS;
        }
        let mut lane = |lane: &RawLane<'_>, bits: [u32; 3]| -> (i64, u32) {
            p.flags |= bits[0];
            match lane {
                RawLane::Int(v) => (*v, 0),
                RawLane::Str(s) => {
                    let (t, is_owned) = pack_text(s, buf, owned);
                    p.flags |= bits[1] | if is_owned { bits[2] } else { 0 };
                    (t.at as i64, t.len)
                }
            }
        };
        if let Some(pid) = &ev.pid {
            (p.pid, p.pid_len) = lane(pid, [flags::HAS_PID, flags::PID_TEXT, flags::PID_OWNED]);
        }
        if let Some(tid) = &ev.tid {
            (p.tid, p.tid_len) = lane(tid, [flags::HAS_TID, flags::TID_TEXT, flags::TID_OWNED]);
        }
        p
    }

    /// The event again, its strings borrowed from `buf` and `owned`.
    pub(super) fn unpack<'t>(&self, buf: &'t [u8], owned: &'t [String]) -> RawEvent<'t> {
        let has = |bit: u32| self.flags & bit != 0;
        let text = |at: u64, len: u32, owned_bit: u32| {
            unpack_text(Text { at, len }, has(owned_bit), buf, owned)
        };
        let lane = |value: i64, len: u32, bits: [u32; 3]| {
            has(bits[0]).then(|| {
                if has(bits[1]) {
                    RawLane::Str(text(value as u64, len, bits[2]))
                } else {
                    RawLane::Int(value)
                }
            })
        };
        let args_start = usize::try_from(self.args_start).unwrap_or(usize::MAX);
        let args_end = usize::try_from(self.args_end).unwrap_or(usize::MAX);
        RawEvent {
            ph: self.ph,
            name: has(flags::HAS_NAME)
                .then(|| text(self.name_at, self.name_len, flags::NAME_OWNED)),
            cat: has(flags::HAS_CAT).then(|| text(self.cat_at, self.cat_len, flags::CAT_OWNED)),
            ts: has(flags::HAS_TS).then_some(self.ts),
            dur: has(flags::HAS_DUR).then_some(self.dur),
            pid: lane(
                self.pid,
                self.pid_len,
                [flags::HAS_PID, flags::PID_TEXT, flags::PID_OWNED],
            ),
            tid: lane(
                self.tid,
                self.tid_len,
                [flags::HAS_TID, flags::TID_TEXT, flags::TID_OWNED],
            ),
            id: has(flags::HAS_ID).then_some(self.id),
            bind_enclosing: has(flags::BIND_ENCLOSING),
            bind_id: has(flags::HAS_BIND_ID).then_some(self.bind_id),
            flow_in: has(flags::FLOW_IN),
            flow_out: has(flags::FLOW_OUT),
            scope: self.scope,
            args: has(flags::HAS_ARGS).then_some(args_start..args_end),
        }
    }
}
