//! Debug annotations re-encoded as JSON text, so a Perfetto slice's args read like a JSON
//! trace's.

use super::Sequence;
use crate::perfetto::event::{Field, Fields};

pub(super) fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Nested annotations deeper than this are written as `null` (a guard against hostile input).
pub(super) const MAX_ANNOTATION_DEPTH: u32 = 64;

/// Writes one `DebugAnnotation` (its wire bytes) as JSON: `"name":value` when `named`, else
/// the value alone. `None` when the bytes are malformed.
pub(super) fn write_annotation(
    out: &mut Vec<u8>,
    a: &[u8],
    seq: Option<&Sequence>,
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
        match name {
            Some(Field::Varint(iid)) => match seq.and_then(|s| s.annotation_names.get(&iid)) {
                Some(n) => write_str(out, n),
                None => write_str(out, &format!("arg_{iid}")),
            },
            Some(Field::Len(r)) => write_str(out, &String::from_utf8_lossy(a.get(r)?)),
            _ => write_str(out, ""),
        }
        out.push(b':');
    }
    if depth > MAX_ANNOTATION_DEPTH {
        out.extend_from_slice(b"null");
        return Some(());
    }
    match value {
        Some((2, Field::Varint(v))) => {
            out.extend_from_slice(if v != 0 { b"true" } else { b"false" });
        }
        Some((3, Field::Varint(v))) => {
            let _ = serde_json::to_writer(&mut *out, &v);
        }
        Some((4, Field::Varint(v))) => {
            let _ = serde_json::to_writer(&mut *out, &(v as i64));
        }
        Some((5, Field::Fixed64(bits))) => {
            let v = f64::from_bits(bits);
            if v.is_finite() {
                let _ = serde_json::to_writer(&mut *out, &v);
            } else {
                write_str(out, &v.to_string());
            }
        }
        Some((6, Field::Len(r))) => write_str(out, &String::from_utf8_lossy(a.get(r)?)),
        Some((7, Field::Varint(p))) => write_str(out, &format!("{p:#x}")),
        Some((9, Field::Len(r))) => {
            let json = a.get(r)?;
            if serde_json::from_slice::<serde::de::IgnoredAny>(json).is_ok() {
                out.extend_from_slice(json);
            } else {
                write_str(out, &String::from_utf8_lossy(json));
            }
        }
        Some((17, Field::Varint(iid))) => {
            let s = seq.and_then(|s| s.strings.get(&iid));
            write_str(
                out,
                &s.map_or_else(String::new, |b| String::from_utf8_lossy(b).into_owned()),
            );
        }
        Some(_) => return None,
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
                    write_annotation(out, a.get(r)?, seq, depth + 1, dict)?;
                }
            }
            out.push(close);
        }
        // No value and no entries (the writer sends empty objects and arrays as JSON text).
        None => out.extend_from_slice(b"null"),
    }
    Some(())
}
