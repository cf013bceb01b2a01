//! The second thread of a split parse: [`parse_rest`] parses the tail of a large event array
//! into [`PackedEvent`]s, sent in batches, which the reading thread dispatches once it has read
//! up to the split (while this thread parses the batches after them).
//!
//! A [`RawEvent`] borrows its strings from the input and is about 200 bytes; a packed one
//! refers to its strings by an index into a table of the distinct strings this thread saw
//! (80 bytes), so holding half a 500 MB trace's events costs ~65 MB, not ~180. The table is also
//! why the replay is cheap: it never goes back to the input's bytes (long out of the cache by
//! then) to read a name, and a trace has a few thousand distinct names among a million events.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;

use rustc_hash::FxHashMap;

use super::event::{IGNORED_KEYS, RawEvent, RawLane, parse_event};
use crate::json::{self, Cursor};
use crate::model::ReleaseBehind;

/// Bits of [`PackedEvent::flags`].
pub(super) mod flags {
    pub(crate) const NON_OBJECT: u32 = 1;
    pub(crate) const HAS_TS: u32 = 1 << 1;
    pub(crate) const HAS_DUR: u32 = 1 << 2;
    pub(crate) const HAS_PID: u32 = 1 << 3;
    pub(crate) const PID_TEXT: u32 = 1 << 4;
    pub(crate) const HAS_TID: u32 = 1 << 5;
    pub(crate) const TID_TEXT: u32 = 1 << 6;
    pub(crate) const HAS_ID: u32 = 1 << 7;
    pub(crate) const HAS_BIND_ID: u32 = 1 << 8;
    pub(crate) const BIND_ENCLOSING: u32 = 1 << 9;
    pub(crate) const FLOW_IN: u32 = 1 << 10;
    pub(crate) const FLOW_OUT: u32 = 1 << 11;
    pub(crate) const HAS_ARGS: u32 = 1 << 12;
    pub(crate) const ID_LOCAL: u32 = 1 << 13;
    /// Bits 16.. hold `RawEvent::bad_field`.
    pub(crate) const BAD_FIELD_SHIFT: u32 = 16;
}

pub(super) use flags::NON_OBJECT;

/// A [`PackedEvent`] string field that is absent.
const NO_TEXT: u32 = u32::MAX;

/// Events per [`Parsed::Batch`] (one allocation each, never regrown): small enough that the
/// reading thread, once past the split, follows the parse closely, so little is left to
/// dispatch when the parse ends.
const BATCH: usize = 1 << 14;
/// Events between two looks at the cancel flag.
const CANCEL_EVERY: usize = 1024;

/// One element of the event array, parsed, without borrowing anything.
pub(super) struct PackedEvent {
    ts: i64,
    dur: i64,
    id: u64,
    bind_id: u64,
    /// The pid's value, or, with `PID_TEXT`, its text's index in the text table
    /// ([`Parsed::Batch::new_texts`]).
    pid: i64,
    tid: i64,
    args_start: u64,
    args_end: u64,
    /// Indexes in the text table ([`Parsed::Batch::new_texts`]), or [`NO_TEXT`].
    name: u32,
    cat: u32,
    pub(super) flags: u32,
    ph: u8,
    scope: u8,
}

impl Default for PackedEvent {
    fn default() -> Self {
        Self {
            ts: 0,
            dur: 0,
            id: 0,
            bind_id: 0,
            pid: 0,
            tid: 0,
            args_start: 0,
            args_end: 0,
            name: NO_TEXT,
            cat: NO_TEXT,
            flags: 0,
            ph: 0,
            scope: 0,
        }
    }
}

/// What the second thread sends the reading thread, in order: batches as they fill, then
/// [`Parsed::End`].
pub(super) enum Parsed<'a> {
    Batch {
        /// Events in file order.
        events: Vec<PackedEvent>,
        /// The strings first seen in this batch, to append to the reader's copy of the table
        /// the events' text indexes refer to (names, categories, textual pids and tids;
        /// borrowed from the input unless they had to be decoded).
        new_texts: Vec<Cow<'a, str>>,
        /// The offset parsing had reached at the end of the batch.
        parsed_to: usize,
    },
    End {
        /// Where the cursor stopped: past the array's `]`, or at the damage.
        end: usize,
        /// How parsing ended.
        result: json::Result<()>,
        ignored_keys: [u64; IGNORED_KEYS.len()],
    },
}

/// Parses the event array from `start` (an element's first byte) to its end, as the reading
/// thread's loop does, sending each batch as it fills so the reading thread can dispatch it
/// while this one parses on. Stops early once `cancel` is set or the receiver is gone.
pub(super) fn parse_rest<'a>(
    buf: &'a [u8],
    start: usize,
    max_depth: usize,
    cancel: &AtomicBool,
    mut behind: ReleaseBehind<'_>,
    out: &Sender<Parsed<'a>>,
) {
    let mut cur = Cursor::with_max_depth(buf, max_depth);
    cur.pos = start;
    let mut texts = Texts::default();
    let mut ignored_keys = [0; IGNORED_KEYS.len()];
    let mut batch = Vec::with_capacity(BATCH);
    let mut receiver_gone = false;
    let result = (|| -> json::Result<()> {
        loop {
            if batch.len() % CANCEL_EVERY == 0 && cancel.load(Ordering::Relaxed) {
                return Ok(());
            }
            if cur.peek() == Some(b'{') {
                let ev = parse_event(&mut cur, &mut ignored_keys)?;
                batch.push(PackedEvent::pack(ev, &mut texts));
            } else {
                cur.skip_value()?;
                batch.push(PackedEvent {
                    flags: NON_OBJECT,
                    ..PackedEvent::default()
                });
            }
            let more = cur.next_member(b']', "',' or ']' between events")?;
            behind.reached(cur.pos);
            if batch.len() == BATCH {
                let full = Parsed::Batch {
                    events: std::mem::replace(&mut batch, Vec::with_capacity(BATCH)),
                    new_texts: texts.take_new(),
                    parsed_to: cur.pos,
                };
                if out.send(full).is_err() {
                    receiver_gone = true;
                    return Ok(());
                }
            }
            if !more {
                return Ok(());
            }
        }
    })();
    if receiver_gone {
        return;
    }
    // A send fails only when the reader stopped listening, and then nothing more is wanted.
    let _ = out.send(Parsed::Batch {
        events: batch,
        new_texts: texts.take_new(),
        parsed_to: cur.pos,
    });
    let _ = out.send(Parsed::End {
        end: cur.pos,
        result,
        ignored_keys,
    });
}

/// The distinct strings of the packed events, each stored once.
#[derive(Default)]
struct Texts<'a> {
    /// Strings added since the last [`Texts::take_new`].
    new: Vec<Cow<'a, str>>,
    /// Every string added, with its index (the count of strings before it).
    index: FxHashMap<Cow<'a, str>, u32>,
}

impl<'a> Texts<'a> {
    /// The index of `text`, added on first sight ([`NO_TEXT`] for none, and past `u32` range).
    fn index(&mut self, text: Option<Cow<'a, str>>) -> u32 {
        let Some(text) = text else {
            return NO_TEXT;
        };
        if let Some(&at) = self.index.get(&text) {
            return at;
        }
        let Some(at) = u32::try_from(self.index.len())
            .ok()
            .filter(|&at| at != NO_TEXT)
        else {
            return NO_TEXT;
        };
        self.new.push(text.clone());
        self.index.insert(text, at);
        at
    }

    /// The strings added since the last call; the next string's index follows theirs.
    fn take_new(&mut self) -> Vec<Cow<'a, str>> {
        std::mem::take(&mut self.new)
    }

    /// A pid or tid: its value, or its text's index with `bits[1]` set; `bits[0]` says it is
    /// there at all.
    fn lane(&mut self, lane: Option<RawLane<'a>>, bits: [u32; 2], flags: &mut u32) -> i64 {
        match lane {
            None => 0,
            Some(RawLane::Int(v)) => {
                *flags |= bits[0];
                v
            }
            Some(RawLane::Str(s)) => {
                *flags |= bits[0] | bits[1];
                i64::from(self.index(Some(s)))
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

impl PackedEvent {
    fn pack<'a>(ev: RawEvent<'a>, texts: &mut Texts<'a>) -> Self {
        let mut flags = 0;
        for (on, bit) in [
            (ev.bind_enclosing, flags::BIND_ENCLOSING),
            (ev.flow_in, flags::FLOW_IN),
            (ev.flow_out, flags::FLOW_OUT),
            (ev.id_local, flags::ID_LOCAL),
        ] {
            if on {
                flags |= bit;
            }
        }
        flags |= u32::from(ev.bad_field) << flags::BAD_FIELD_SHIFT;
        let f = &mut flags;
        let pid = texts.lane(ev.pid, [flags::HAS_PID, flags::PID_TEXT], f);
        let tid = texts.lane(ev.tid, [flags::HAS_TID, flags::TID_TEXT], f);
        let args = present(ev.args, flags::HAS_ARGS, f);
        Self {
            ts: present(ev.ts, flags::HAS_TS, f),
            dur: present(ev.dur, flags::HAS_DUR, f),
            id: present(ev.id, flags::HAS_ID, f),
            bind_id: present(ev.bind_id, flags::HAS_BIND_ID, f),
            pid,
            tid,
            args_start: args.start as u64,
            args_end: args.end as u64,
            name: texts.index(ev.name),
            cat: texts.index(ev.cat),
            flags,
            ph: ev.ph,
            scope: ev.scope,
        }
    }

    /// The event again, its strings borrowed from `texts`.
    pub(super) fn unpack<'t>(&self, texts: &'t [Cow<'_, str>]) -> RawEvent<'t> {
        let has = |bit: u32| self.flags & bit != 0;
        let text = |at: u32| texts.get(at as usize).map(|t| Cow::Borrowed(t.as_ref()));
        let lane = |value: i64, bits: [u32; 2]| {
            has(bits[0]).then(|| {
                if has(bits[1]) {
                    let at = u32::try_from(value).unwrap_or(NO_TEXT);
                    RawLane::Str(text(at).unwrap_or_default())
                } else {
                    RawLane::Int(value)
                }
            })
        };
        let args_start = usize::try_from(self.args_start).unwrap_or(usize::MAX);
        let args_end = usize::try_from(self.args_end).unwrap_or(usize::MAX);
        RawEvent {
            ph: self.ph,
            name: text(self.name),
            cat: text(self.cat),
            ts: has(flags::HAS_TS).then_some(self.ts),
            dur: has(flags::HAS_DUR).then_some(self.dur),
            pid: lane(self.pid, [flags::HAS_PID, flags::PID_TEXT]),
            tid: lane(self.tid, [flags::HAS_TID, flags::TID_TEXT]),
            id: has(flags::HAS_ID).then_some(self.id),
            id_local: has(flags::ID_LOCAL),
            bind_enclosing: has(flags::BIND_ENCLOSING),
            bind_id: has(flags::HAS_BIND_ID).then_some(self.bind_id),
            flow_in: has(flags::FLOW_IN),
            flow_out: has(flags::FLOW_OUT),
            scope: self.scope,
            args: has(flags::HAS_ARGS).then_some(args_start..args_end),
            bad_field: (self.flags >> flags::BAD_FIELD_SHIFT) as u8,
        }
    }
}
