//! A wire-level view of the packets that carry a `TrackEvent`, the bulk of every trace: their
//! fields are read straight from the bytes, without building prost messages (which costs an
//! allocation per repeated field and per annotation). Other packets go through prost.

use std::ops::Range;

/// Wire types.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;
const FIXED32: u64 = 5;

/// Reads a varint at `*pos`.
#[inline(always)]
pub(super) fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let rest = buf.get(*pos..)?;
    match rest {
        // Field keys, small ids and counts: one byte.
        [b, ..] if *b < 0x80 => {
            *pos += 1;
            Some(u64::from(*b))
        }
        // Timestamps and uuids: unrolled, with no bounds check per byte.
        [a, b, c, d, e, f, g, h, i, j, ..] => {
            let bytes = [*a, *b, *c, *d, *e, *f, *g, *h, *i, *j];
            let mut value = 0u64;
            for (k, byte) in bytes.into_iter().enumerate() {
                value |= u64::from(byte & 0x7f) << (7 * k);
                if byte < 0x80 {
                    *pos += k + 1;
                    return Some(value);
                }
            }
            None
        }
        _ => varint_near_end(rest, pos),
    }
}

/// [`varint`] within the last ten bytes of `rest`.
#[cold]
fn varint_near_end(rest: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for (k, &byte) in rest.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * k);
        if byte < 0x80 {
            *pos += k + 1;
            return Some(value);
        }
    }
    None
}

#[inline]
fn fixed64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let bytes = buf.get(*pos..*pos + 8)?;
    *pos += 8;
    let mut a = [0u8; 8];
    a.copy_from_slice(bytes);
    Some(u64::from_le_bytes(a))
}

#[inline]
fn len_range(buf: &[u8], pos: &mut usize) -> Option<Range<usize>> {
    let len = usize::try_from(varint(buf, pos)?).ok()?;
    let start = *pos;
    let end = start.checked_add(len)?;
    if end > buf.len() {
        return None;
    }
    *pos = end;
    Some(start..end)
}

/// One field: number, wire type, and where its value is.
pub(super) enum Field {
    Varint(u64),
    Fixed64(u64),
    Len(Range<usize>),
    Other,
}

/// Iterates the fields of a message; `None` from `next_field` on malformed bytes.
pub(super) struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// `Some(None)` at the end, `None` when the bytes are malformed.
    #[inline(always)]
    pub(super) fn next_field(&mut self) -> Option<Option<(u32, Field)>> {
        if self.pos >= self.buf.len() {
            return Some(None);
        }
        let key = varint(self.buf, &mut self.pos)?;
        let number = u32::try_from(key >> 3).ok()?;
        let field = match key & 7 {
            VARINT => Field::Varint(varint(self.buf, &mut self.pos)?),
            FIXED64 => Field::Fixed64(fixed64(self.buf, &mut self.pos)?),
            LEN => Field::Len(len_range(self.buf, &mut self.pos)?),
            FIXED32 => {
                self.buf.get(self.pos..self.pos + 4)?;
                self.pos += 4;
                Field::Other
            }
            _ => return None,
        };
        Some(Some((number, field)))
    }
}

/// Up to two values inline, more spilled to the heap (most events have zero or one
/// category, flow or counter).
#[derive(Debug, Default, Clone)]
pub(super) struct Few {
    inline: [u64; 2],
    len: usize,
    more: Vec<u64>,
}

impl Few {
    #[inline]
    fn push(&mut self, v: u64) {
        if self.len < 2 {
            self.inline[self.len] = v;
        } else {
            self.more.push(v);
        }
        self.len += 1;
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.inline[..self.len.min(2)]
            .iter()
            .copied()
            .chain(self.more.iter().copied())
    }

    pub(super) fn get(&self, i: usize) -> Option<u64> {
        self.iter().nth(i)
    }
}

/// Adds a repeated scalar field's value(s): one value, or a packed run of them.
fn repeated(buf: &[u8], field: Field, fixed: bool, out: &mut Few) -> Option<()> {
    match field {
        Field::Varint(v) if !fixed => out.push(v),
        Field::Fixed64(v) if fixed => out.push(v),
        Field::Len(range) => {
            let run = buf.get(range)?;
            let mut pos = 0;
            while pos < run.len() {
                out.push(if fixed {
                    fixed64(run, &mut pos)?
                } else {
                    varint(run, &mut pos)?
                });
            }
        }
        _ => return None,
    }
    Some(())
}

/// The fields of a `TrackEvent` steplens reads.
#[derive(Debug, Default)]
pub(super) struct Event<'a> {
    pub(super) buf: &'a [u8],
    pub(super) kind: u64,
    pub(super) track_uuid: Option<u64>,
    pub(super) name_iid: Option<u64>,
    pub(super) name: Option<&'a [u8]>,
    pub(super) category_iids: Few,
    pub(super) categories: Vec<&'a [u8]>,
    pub(super) counter: Option<f64>,
    pub(super) extra_counter_uuids: Few,
    pub(super) extra_counter_values: Few,
    pub(super) extra_double_uuids: Few,
    pub(super) extra_double_values: Few,
    pub(super) flow_ids: Few,
    pub(super) terminating_flow_ids: Few,
    pub(super) annotations: usize,
    pub(super) timestamp_absolute_us: Option<i64>,
    pub(super) timestamp_delta_us: Option<i64>,
}

/// `TrackEvent.Type` values.
pub(super) const SLICE_BEGIN: u64 = 1;
pub(super) const SLICE_END: u64 = 2;
pub(super) const INSTANT: u64 = 3;
pub(super) const COUNTER: u64 = 4;

impl<'a> Event<'a> {
    /// Reads a `TrackEvent` message; `None` when it is malformed.
    pub(super) fn parse(buf: &'a [u8]) -> Option<Self> {
        let mut e = Event {
            buf,
            ..Self::default()
        };
        let mut fields = Fields::new(buf);
        while let Some((number, field)) = fields.next_field()? {
            match (number, field) {
                (9, Field::Varint(v)) => e.kind = v,
                (11, Field::Varint(v)) => e.track_uuid = Some(v),
                (10, Field::Varint(v)) => {
                    e.name_iid = Some(v);
                    e.name = None;
                }
                (23, Field::Len(r)) => {
                    e.name = Some(buf.get(r)?);
                    e.name_iid = None;
                }
                (3, f) => repeated(buf, f, false, &mut e.category_iids)?,
                (22, Field::Len(r)) => e.categories.push(buf.get(r)?),
                (30, Field::Varint(v)) => e.counter = Some(v as i64 as f64),
                (44, Field::Fixed64(v)) => e.counter = Some(f64::from_bits(v)),
                (31, f) => repeated(buf, f, false, &mut e.extra_counter_uuids)?,
                (12, f) => repeated(buf, f, false, &mut e.extra_counter_values)?,
                (45, f) => repeated(buf, f, false, &mut e.extra_double_uuids)?,
                (46, f) => repeated(buf, f, true, &mut e.extra_double_values)?,
                (47, f) => repeated(buf, f, true, &mut e.flow_ids)?,
                (36, f) => repeated(buf, f, false, &mut e.flow_ids)?,
                (48, f) => repeated(buf, f, true, &mut e.terminating_flow_ids)?,
                (42, f) => repeated(buf, f, false, &mut e.terminating_flow_ids)?,
                (4, Field::Len(_)) => e.annotations += 1,
                (16, Field::Varint(v)) => e.timestamp_absolute_us = Some(v as i64),
                (1, Field::Varint(v)) => e.timestamp_delta_us = Some(v as i64),
                _ => {}
            }
        }
        Some(e)
    }
}

/// The `debug_annotations` messages of a `TrackEvent`'s bytes, in order (as far as the bytes
/// are well-formed).
pub(super) fn annotations(event: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let mut fields = Fields::new(event);
    std::iter::from_fn(move || {
        loop {
            match fields.next_field()?? {
                (4, Field::Len(r)) => return event.get(r),
                _ => continue,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_as_prost_writes_them_wherever_they_end() {
        let mut values = vec![0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        values.extend((0..64).map(|bit| (1u64 << bit) | 5));
        for v in values {
            let mut encoded = Vec::new();
            prost::encoding::encode_varint(v, &mut encoded);
            // Alone (near the end of the buffer) and followed by other bytes.
            for tail in [0, 3, 12] {
                let mut buf = encoded.clone();
                buf.extend(std::iter::repeat_n(0xff, tail));
                let mut pos = 0;
                assert_eq!(varint(&buf, &mut pos), Some(v));
                assert_eq!(pos, encoded.len());
            }
        }
        // Cut short, and eleven continuation bytes.
        for bad in [&[0x80, 0x80][..], &[0xff; 11][..], &[][..]] {
            assert_eq!(varint(bad, &mut 0), None);
        }
    }
}
