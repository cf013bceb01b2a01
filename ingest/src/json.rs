//! A small, fast, lenient JSON scanner over a byte slice.
//!
//! Trace ingest never builds a document tree: it walks the bytes once, reads the few event
//! fields it needs, and skips everything else (args are skipped as raw byte ranges and decoded
//! later, on demand). Numbers that are times are parsed from their decimal text straight to
//! integer nanoseconds, because an `f64` cannot hold µs timestamps near 1.7e15 to the ns.
//! Strings with invalid UTF-8 are decoded lossily rather than rejected (old Kineto wrote such).
//!
//! A Timeline keeps args as their JSON text; the few calls that walk such text ([`Cursor`]'s
//! `new`, `peek`, `expect`, `next_member`, `raw_string`, `scalar_text`, [`unescape`],
//! [`utf8_lossy`]) are public, for analysis' Perfetto writer, which converts args with them.

use std::borrow::Cow;

mod members;
mod simd;
mod skip;

pub(crate) use members::members;

/// A syntax error at a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxError {
    /// Offset of the offending byte (or the end of input).
    pub(crate) offset: usize,
    /// What was expected.
    pub(crate) expected: &'static str,
    /// The nesting limit was hit: not damage, a limit the user can raise.
    pub(crate) depth_limit: bool,
}

/// A step of the scanner, or where it failed.
pub type Result<T> = std::result::Result<T, SyntaxError>;

/// A read position in a JSON byte slice.
pub struct Cursor<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
    /// Deepest nesting of arrays/objects the skipper follows.
    max_depth: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`, with the default nesting limit.
    #[must_use]
    pub fn new(buf: &'a [u8]) -> Self {
        Self::with_max_depth(buf, crate::limits::DEFAULT_MAX_JSON_DEPTH)
    }

    pub(crate) fn with_max_depth(buf: &'a [u8], max_depth: usize) -> Self {
        Self {
            buf,
            pos: 0,
            max_depth,
        }
    }

    /// The nesting limit this cursor enforces.
    pub(crate) fn max_depth(&self) -> usize {
        self.max_depth
    }

    fn err<T>(&self, expected: &'static str) -> Result<T> {
        Err(SyntaxError {
            offset: self.pos.min(self.buf.len()),
            expected,
            depth_limit: false,
        })
    }

    #[inline]
    pub(crate) fn skip_ws(&mut self) {
        // Most calls sit on a token already.
        match self.buf.get(self.pos) {
            Some(b' ' | b'\n' | b'\r' | b'\t') => {}
            _ => return,
        }
        // Pretty-printed traces indent every member: skip the run 16 bytes a step.
        while let Some(chunk) = self.buf.get(self.pos..).and_then(|r| r.first_chunk::<16>()) {
            let not_space = !simd::any_of(chunk, simd::WHITESPACE) & 0xFFFF;
            if not_space != 0 {
                self.pos += not_space.trailing_zeros() as usize;
                return;
            }
            self.pos += 16;
        }
        while let Some(&b) = self.buf.get(self.pos) {
            if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                break;
            }
            self.pos += 1;
        }
    }

    /// The next non-whitespace byte, without consuming it.
    #[inline]
    pub fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.buf.get(self.pos).copied()
    }

    /// Consumes `byte` (after whitespace) or fails.
    #[inline]
    pub fn expect(&mut self, byte: u8, expected: &'static str) -> Result<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            self.err(expected)
        }
    }

    /// The error of a step cut short by the end of the bytes so far.
    pub(crate) fn cut_short<T>(&self) -> Result<T> {
        Err(SyntaxError {
            offset: self.buf.len(),
            expected: "more input",
            depth_limit: false,
        })
    }

    pub(crate) fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// After a member or element: consumes `,` and returns true, or consumes `close` and
    /// returns false.
    #[inline]
    pub fn next_member(&mut self, close: u8, expected: &'static str) -> Result<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => self.err(expected),
        }
    }

    /// Reads a string's raw bytes (between the quotes, escapes not decoded) and whether it
    /// contained a backslash.
    #[inline]
    pub fn raw_string(&mut self) -> Result<(&'a [u8], bool)> {
        if self.peek() != Some(b'"') {
            return self.err("a string");
        }
        let start = self.pos + 1;
        match string_end(self.buf, start) {
            Some((end, escaped)) => {
                self.pos = end + 1;
                Ok((&self.buf[start..end], escaped))
            }
            None => {
                self.pos = self.buf.len();
                self.err("the end of a string")
            }
        }
    }

    /// Reads a string, decoding escapes and replacing invalid UTF-8.
    #[inline]
    pub(crate) fn string(&mut self) -> Result<Cow<'a, str>> {
        let (raw, escaped) = self.raw_string()?;
        Ok(if escaped {
            Cow::Owned(unescape(raw))
        } else {
            utf8_lossy(raw)
        })
    }

    /// Skips one value of any kind and returns its byte range.
    pub(crate) fn skip_value(&mut self) -> Result<std::ops::Range<usize>> {
        let Some(first) = self.peek() else {
            return self.err("a value");
        };
        let start = self.pos;
        match first {
            b'"' => {
                self.raw_string()?;
            }
            b'{' | b'[' => self.skip_container()?,
            _ => {
                self.scalar_text()?;
            }
        }
        Ok(start..self.pos)
    }

    /// Skips a balanced object or array starting at the current byte.
    fn skip_container(&mut self) -> Result<()> {
        match skip::container_end(self.buf, self.pos, self.max_depth) {
            skip::Skipped::Closed(end) => {
                self.pos = end;
                Ok(())
            }
            skip::Skipped::Unterminated { in_string } => {
                self.pos = self.buf.len();
                self.err(if in_string {
                    "the end of a string"
                } else {
                    "the end of an object or array"
                })
            }
            skip::Skipped::TooDeep(at) => {
                self.pos = at;
                Err(SyntaxError {
                    offset: at,
                    expected: "shallower nesting",
                    depth_limit: true,
                })
            }
        }
    }

    /// The text of a number or literal (`true`, `null`, `-1.5e3`).
    #[inline]
    pub fn scalar_text(&mut self) -> Result<&'a [u8]> {
        self.skip_ws();
        let start = self.pos;
        // Timestamps run to 17 digits: 16 bytes a step.
        while let Some(chunk) = self.buf.get(self.pos..).and_then(|r| r.first_chunk::<16>()) {
            let stops = simd::any_of(chunk, simd::SCALAR_STOPS);
            if stops != 0 {
                self.pos += stops.trailing_zeros() as usize;
                return self.scalar_end(start);
            }
            self.pos += 16;
        }
        while let Some(&b) = self.buf.get(self.pos) {
            if matches!(
                b,
                b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t' | b':' | b'"'
            ) {
                break;
            }
            self.pos += 1;
        }
        self.scalar_end(start)
    }

    /// The scalar that started at `start` and stops at the cursor.
    #[inline]
    fn scalar_end(&self, start: usize) -> Result<&'a [u8]> {
        if self.pos == start || self.pos >= self.buf.len() {
            return self.err("a number or literal");
        }
        Ok(&self.buf[start..self.pos])
    }
}

/// The offset of the `"` that closes the string whose contents start at `start`, and whether a
/// backslash came before it; `None` when the input ends first.
#[inline]
fn string_end(buf: &[u8], start: usize) -> Option<(usize, bool)> {
    let mut at = start;
    let mut escaped = false;
    // 16 bytes a step: keys and most names end in the first chunk, with no per-byte branch.
    while let Some(chunk) = buf.get(at..).and_then(|rest| rest.first_chunk::<16>()) {
        let stops = simd::any_of(chunk, simd::STRING_STOPS);
        if stops == 0 {
            at += 16;
            continue;
        }
        let hit = at + stops.trailing_zeros() as usize;
        if buf[hit] == b'"' {
            return Some((hit, escaped));
        }
        escaped = true;
        at = hit + 2;
    }
    while let Some(&b) = buf.get(at) {
        match b {
            b'"' => return Some((at, escaped)),
            b'\\' => {
                escaped = true;
                at += 2;
            }
            _ => at += 1,
        }
    }
    None
}

/// Decodes JSON string escapes; invalid sequences and invalid UTF-8 become U+FFFD.
pub fn unescape(raw: &[u8]) -> String {
    let mut out: Vec<u8> = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let Some(&esc) = raw.get(i + 1) else {
            break;
        };
        i += 2;
        let simple = match esc {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'/' => Some(b'/'),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            continue;
        }
        if esc != b'u' {
            out.extend_from_slice("\u{fffd}".as_bytes());
            continue;
        }
        let Some(unit) = hex4(raw.get(i..i + 4)) else {
            out.extend_from_slice("\u{fffd}".as_bytes());
            continue;
        };
        i += 4;
        let code = if (0xD800..0xDC00).contains(&unit) {
            // A high surrogate needs its low half.
            let low = (raw.get(i) == Some(&b'\\') && raw.get(i + 1) == Some(&b'u'))
                .then(|| hex4(raw.get(i + 2..i + 6)))
                .flatten()
                .filter(|low| (0xDC00..0xE000).contains(low));
            match low {
                Some(low) => {
                    i += 6;
                    0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                }
                None => 0xFFFD,
            }
        } else {
            unit
        };
        let c = char::from_u32(code).unwrap_or('\u{fffd}');
        let mut tmp = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
    }
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

fn hex4(bytes: Option<&[u8]>) -> Option<u32> {
    let bytes = bytes?;
    let text = std::str::from_utf8(bytes).ok()?;
    u32::from_str_radix(text, 16).ok()
}

/// Parses decimal microseconds (`1712195495519689.047`, `12`, `-0.001`, `1.5e3`) into integer
/// nanoseconds, rounding half away from zero at the ns. `None` when the text is not a number
/// or the value does not fit.
#[inline]
pub(crate) fn micros_to_ns(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.first()? {
        b'-' => (true, &text[1..]),
        _ => (false, text),
    };
    let mut whole: i64 = 0;
    let mut i = 0;
    while let Some(&b) = digits.get(i) {
        if !b.is_ascii_digit() {
            break;
        }
        whole = whole.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
        i += 1;
    }
    let mut frac_ns: i64 = 0;
    let mut round_up = false;
    if digits.get(i) == Some(&b'.') {
        i += 1;
        let mut scale = 100;
        let mut seen = 0;
        while let Some(&b) = digits.get(i) {
            if !b.is_ascii_digit() {
                break;
            }
            let d = i64::from(b - b'0');
            if seen < 3 {
                frac_ns += d * scale;
                scale /= 10;
            } else if seen == 3 {
                round_up = d >= 5;
            }
            seen += 1;
            i += 1;
        }
    }
    if i == 0 {
        return None;
    }
    if i < digits.len() {
        // Exponent or other notation: take the slow, exact-enough path through f64.
        return micros_to_ns_slow(text);
    }
    let ns = whole
        .checked_mul(1000)?
        .checked_add(frac_ns + i64::from(round_up))?;
    Some(if negative { -ns } else { ns })
}

fn micros_to_ns_slow(text: &[u8]) -> Option<i64> {
    let value: f64 = std::str::from_utf8(text).ok()?.parse().ok()?;
    let ns = (value * 1000.0).round();
    (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
}

/// Parses an integer id leniently: digits beyond `i64` wrap instead of failing (some old
/// traces carry 64-bit unsigned ids), a fraction is dropped.
#[inline]
pub(crate) fn lenient_int(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.first()? {
        b'-' => (true, &text[1..]),
        _ => (false, text),
    };
    let mut value: u64 = 0;
    let mut any = false;
    for &b in digits {
        if !b.is_ascii_digit() {
            break;
        }
        value = value.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
        any = true;
    }
    if !any {
        return None;
    }
    let value = value as i64;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// Finds `key` among the top-level members of the JSON object `object` and returns its raw
/// value text. Does not decode anything else.
pub(crate) fn find_key<'a>(object: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut found = None;
    members(object, &mut |name, value| {
        if name == key {
            found = object.get(value);
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(())
    });
    found
}

/// Finds each of `keys` among the top-level members of `object` in one pass: `out[i]` is the
/// raw value of `keys[i]` (its first occurrence), or `None`.
pub(crate) fn find_keys<'a>(object: &'a [u8], keys: &[&str], out: &mut [Option<&'a [u8]>]) {
    let mut left = keys.len();
    members(object, &mut |name, value| {
        if let Some(slot) = keys
            .iter()
            .position(|k| k.as_bytes() == name)
            .and_then(|i| out.get_mut(i))
            && slot.is_none()
        {
            *slot = object.get(value);
            left -= 1;
            if left == 0 {
                return std::ops::ControlFlow::Break(());
            }
        }
        std::ops::ControlFlow::Continue(())
    });
}

/// `raw` without the commas that end an object or array (`{"a": 1, "b": 2,}`), which Perfetto's
/// JSON reader accepts and strict JSON does not; `None` when it has none. Strings are left as
/// they are.
pub(crate) fn without_trailing_commas(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(raw.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut dropped = false;
    for (i, &b) in raw.iter().enumerate() {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        if b == b'"' {
            in_string = true;
        } else if b == b',' {
            let next = raw[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                dropped = true;
                continue;
            }
        }
        out.push(b);
    }
    dropped.then_some(out)
}

/// `raw` as text, borrowed when it is valid UTF-8 (nearly always: the standard library's check
/// is several times faster than `String::from_utf8_lossy` on valid input), else decoded lossily.
#[inline]
pub fn utf8_lossy(raw: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(raw) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_parse_exactly_to_ns() {
        assert_eq!(
            micros_to_ns(b"1712195495519689.047"),
            Some(1_712_195_495_519_689_047)
        );
        assert_eq!(micros_to_ns(b"12"), Some(12_000));
        assert_eq!(micros_to_ns(b"0.0005"), Some(1));
        assert_eq!(micros_to_ns(b"0.0004"), Some(0));
        assert_eq!(micros_to_ns(b"-0.001"), Some(-1));
        assert_eq!(micros_to_ns(b"1.5e3"), Some(1_500_000));
        assert_eq!(micros_to_ns(b"abc"), None);
        assert_eq!(micros_to_ns(b"99999999999999999999"), None);
    }

    #[test]
    fn strings_and_escapes() {
        let mut cur = Cursor::new(br#""a\"b\u00e9\ud83d\ude00" "plain""#);
        assert_eq!(cur.string().unwrap(), "a\"b\u{e9}\u{1f600}");
        assert_eq!(cur.string().unwrap(), "plain");
        let mut bad = Cursor::new(b"\"abc");
        assert!(bad.string().is_err());
    }

    /// String ends, numbers and whitespace runs of every length up to 40, from every start offset up
    /// to 20, against a byte-at-a-time reading: both scanners step 16 bytes at a time, so this
    /// covers ends and escapes on each side of a chunk boundary and in the short tail.
    #[test]
    fn chunked_scans_agree_with_byte_reading() {
        fn by_bytes(buf: &[u8], start: usize) -> Option<(usize, bool)> {
            let (mut at, mut escaped) = (start, false);
            loop {
                match buf.get(at)? {
                    b'"' => return Some((at, escaped)),
                    b'\\' => (at, escaped) = (at + 2, true),
                    _ => at += 1,
                }
            }
        }
        for start in 0..20 {
            for len in 0..40usize {
                for escape_at in [None, Some(0), Some(len / 2), Some(len.saturating_sub(1))] {
                    let mut buf = vec![b'x'; start];
                    buf.extend((0..len).map(|i| b"ab c\t"[i % 5]));
                    if let Some(e) = escape_at.filter(|&e| e < len) {
                        buf[start + e] = b'\\';
                    }
                    for tail in [&b""[..], b"\"", b"\" rest of the line, long enough"] {
                        let mut whole = buf.clone();
                        whole.extend_from_slice(tail);
                        assert_eq!(
                            string_end(&whole, start),
                            by_bytes(&whole, start),
                            "{:?} from {start}",
                            String::from_utf8_lossy(&whole)
                        );
                    }
                }
                let mut number = vec![b' '; start];
                number.extend((0..len).map(|i| b"-1.5e+09"[i % 8]));
                // (With no digits the scalar would start after the tail's whitespace.)
                let tails: &[&[u8]] = if len == 0 {
                    &[]
                } else {
                    &[b"", b",", b"]", b"\t and more than sixteen bytes"]
                };
                for tail in tails {
                    let mut whole = number.clone();
                    whole.extend_from_slice(tail);
                    let mut cur = Cursor::new(&whole);
                    cur.pos = start;
                    let expected = (!tail.is_empty()).then(|| &whole[start..start + len]);
                    assert_eq!(cur.scalar_text().ok(), expected, "{whole:?}");
                }
                let mut spaced = vec![b'x'; start];
                spaced.extend((0..len).map(|i| b" \n\r\t"[i % 4]));
                for tail in [&b""[..], b"}", b"\x0b and more than sixteen bytes"] {
                    let mut whole = spaced.clone();
                    whole.extend_from_slice(tail);
                    let mut cur = Cursor::new(&whole);
                    cur.pos = start;
                    cur.skip_ws();
                    assert_eq!(cur.pos, start + len, "{whole:?}");
                }
            }
        }
    }

    #[test]
    fn skips_nested_values_and_finds_keys() {
        let obj = br#"{"Input Dims": [[1,2],[]], "s": "x}]", "External id": 42}"#;
        assert_eq!(find_key(obj, b"External id"), Some(&b"42"[..]));
        assert_eq!(find_key(obj, b"s"), Some(&br#""x}]""#[..]));
        assert_eq!(find_key(obj, b"missing"), None);
        let mut cur = Cursor::new(br#"[1, {"a": [2]}] tail"#);
        assert_eq!(cur.skip_value().unwrap(), 0..15);
    }

    #[test]
    fn lenient_ints_wrap() {
        assert_eq!(lenient_int(b"-3"), Some(-3));
        assert_eq!(lenient_int(b"18446744073709551615"), Some(-1));
        assert_eq!(lenient_int(b"7.0"), Some(7));
        assert_eq!(lenient_int(b"x"), None);
    }
}
