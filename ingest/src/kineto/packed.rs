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

/// Where the strings of packed events live: the input, and a side table for decoded ones.
struct Strings<'s> {
    buf: &'s [u8],
    owned: &'s mut Vec<String>,
}

impl Strings<'_> {
    /// `text` as `(offset, length)` in `buf` when it lies there (it was borrowed from the
    /// input), else as `(side-table index, 0)` with `bits[1]` set (it was decoded); `bits[0]`
    /// says it is there at all.
    fn pack(&mut self, text: Option<&str>, bits: [u32; 2], flags: &mut u32) -> (u64, u32) {
        let Some(text) = text else {
            return (0, 0);
        };
        *flags |= bits[0];
        let at = (text.as_ptr() as usize).wrapping_sub(self.buf.as_ptr() as usize);
        if at
            .checked_add(text.len())
            .is_some_and(|end| end <= self.buf.len())
            && let Ok(len) = u32::try_from(text.len())
        {
            return (at as u64, len);
        }
        *flags |= bits[1];
        self.owned.push(text.to_owned());
        ((self.owned.len() - 1) as u64, 0)
    }

    /// A pid or tid: its value, or its text packed as by [`Self::pack`] with `bits[1..]`.
    fn pack_lane(
        &mut self,
        lane: Option<&RawLane<'_>>,
        bits: [u32; 3],
        flags: &mut u32,
    ) -> (i64, u32) {
        match lane {
            None => (0, 0),
            Some(RawLane::Int(v)) => {
                *flags |= bits[0];
                (*v, 0)
            }
            Some(RawLane::Str(s)) => {
                *flags |= bits[0];
                let (at, len) = self.pack(Some(s), [bits[1], bits[2]], flags);
                (at as i64, len)
            }
        }
    }
}

/// `value`, setting `bit` in `flags`, or the default when absent.
fn present<T: Default>(value: Option<T>, bit: u32, flags: &mut u32) -> T {
    value.map_or_else(T::default, |v| {
        *flags |= bit;
        v
    })
}

fn unpack_text<'t>(
    at: u64,
    len: u32,
    is_owned: bool,
    buf: &'t [u8],
    owned: &'t [String],
) -> Cow<'t, str> {
    if is_owned {
        return Cow::Borrowed(owned.get(at as usize).map_or("", String::as_str));
    }
    let start = usize::try_from(at).unwrap_or(usize::MAX);
    let bytes = buf
        .get(start..start.saturating_add(len as usize))
        .unwrap_or_default();
    // It was valid UTF-8 when parsed (a borrowed string always is): checked, not decoded.
    json::utf8_lossy(bytes)
}

impl PackedEvent {
    fn pack(ev: &RawEvent<'_>, buf: &[u8], owned: &mut Vec<String>) -> Self {
        let mut strings = Strings { buf, owned };
        let mut flags = 0;
        for (on, bit) in [
            (ev.bind_enclosing, flags::BIND_ENCLOSING),
            (ev.flow_in, flags::FLOW_IN),
            (ev.flow_out, flags::FLOW_OUT),
        ] {
            if on {
                flags |= bit;
            }
        }
        let f = &mut flags;
        let (name_at, name_len) =
            strings.pack(ev.name.as_deref(), [flags::HAS_NAME, flags::NAME_OWNED], f);
        let (cat_at, cat_len) =
            strings.pack(ev.cat.as_deref(), [flags::HAS_CAT, flags::CAT_OWNED], f);
        let (pid, pid_len) = strings.pack_lane(
            ev.pid.as_ref(),
            [flags::HAS_PID, flags::PID_TEXT, flags::PID_OWNED],
            f,
        );
        let (tid, tid_len) = strings.pack_lane(
            ev.tid.as_ref(),
            [flags::HAS_TID, flags::TID_TEXT, flags::TID_OWNED],
            f,
        );
        let args = present(ev.args.clone(), flags::HAS_ARGS, f);
        Self {
            ts: present(ev.ts, flags::HAS_TS, f),
            dur: present(ev.dur, flags::HAS_DUR, f),
            id: present(ev.id, flags::HAS_ID, f),
            bind_id: present(ev.bind_id, flags::HAS_BIND_ID, f),
            pid,
            tid,
            name_at,
            cat_at,
            args_start: args.start as u64,
            args_end: args.end as u64,
            name_len,
            cat_len,
            pid_len,
            tid_len,
            flags,
            ph: ev.ph,
            scope: ev.scope,
        }
    }

    /// The event again, its strings borrowed from `buf` and `owned`.
    pub(super) fn unpack<'t>(&self, buf: &'t [u8], owned: &'t [String]) -> RawEvent<'t> {
        let has = |bit: u32| self.flags & bit != 0;
        let text =
            |at: u64, len: u32, owned_bit: u32| unpack_text(at, len, has(owned_bit), buf, owned);
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
