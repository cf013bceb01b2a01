//! The top-level members of a JSON object, found from 64-byte block masks.
//!
//! The analysis reads a few args of every op ("Input Dims", a kernel's "grid"): each read walked
//! the args member by member with a [`Cursor`](super::Cursor), a string scan per key and a
//! container skip per value, several thousand instructions per op. Here the quotes, brackets
//! and separators of each block come from a few compares; the bytes inside strings from a prefix
//! XOR of the quote mask; and only the structural bytes outside strings are looked at, one by
//! one, by a small state machine that takes the same steps as the cursor's walk (`expect('{')`,
//! then per member `raw_string`, `expect(':')`, `skip_value`, `next_member`). So it meets the
//! same members, with the same value ranges, and stops where that walk stops on malformed text.
//! An object with a backslash anywhere is left to the cursor: an escaped quote does not open or
//! close a string, so the quote mask cannot tell strings apart there.

use std::ops::{ControlFlow, Range};

use super::simd::{block_masks, block_separators, padded_block, prefix_xor};
use super::{Cursor, unescape};
use crate::limits::DEFAULT_MAX_JSON_DEPTH;

const BLOCK: usize = 64;

/// What [`members`] calls per member: the key's raw bytes and the value's byte range; `Break`
/// ends the walk.
pub(crate) type Visit<'v> = dyn FnMut(&[u8], Range<usize>) -> ControlFlow<()> + 'v;

/// Calls `visit(key, value)` for each top-level member of the object `raw` (the key's bytes,
/// decoded when it has escapes; the value's byte range in `raw`), in order, until `visit`
/// breaks or the cursor's walk would stop: at the object's end, or at malformed text.
pub(crate) fn members(raw: &[u8], visit: &mut Visit<'_>) {
    // The masks cannot tell an escaped quote from a real one: such text takes the cursor.
    if memchr::memchr(b'\\', raw).is_some() {
        by_cursor(raw, visit);
    } else {
        from_masks(raw, visit);
    }
}

/// The member walk of the [`Cursor`]: `expect('{')`, then per member `raw_string`, `:`,
/// `skip_value`, `next_member`; what [`from_masks`] must match.
fn by_cursor(raw: &[u8], visit: &mut Visit<'_>) {
    let mut cur = Cursor::new(raw);
    if cur.expect(b'{', "{").is_err() || cur.peek() == Some(b'}') {
        return;
    }
    while let Ok((name, escaped)) = cur.raw_string() {
        if cur.expect(b':', ":").is_err() {
            return;
        }
        let Ok(value) = cur.skip_value() else {
            return;
        };
        let unescaped;
        let name = if escaped {
            unescaped = unescape(name);
            unescaped.as_bytes()
        } else {
            name
        };
        if visit(name, value).is_break() || !cur.next_member(b'}', ", or }").unwrap_or(false) {
            return;
        }
    }
}

/// [`members`] over text with no backslash, from the block masks (AVX2 where the CPU has it).
fn from_masks(raw: &[u8], visit: &mut Visit<'_>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        #[allow(unsafe_code)]
        unsafe {
            members_avx2(raw, visit);
        }
        return;
    }
    members_with::<false>(raw, visit);
}

/// [`members`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn members_avx2(raw: &[u8], visit: &mut Visit<'_>) {
    members_with::<true>(raw, visit);
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The structural bytes of a text, block by block: every quote, and the brackets, `:` and `,`
/// outside strings, by offset.
struct Structural<'r, const AVX2: bool> {
    raw: &'r [u8],
    /// Offset of the current block.
    at: usize,
    /// The current block's structural bytes not yet taken.
    events: u64,
    /// The current block's brackets outside strings, and which of them open.
    brackets: u64,
    opens: u64,
    /// The current block ended inside a string.
    in_string: bool,
}

impl<'r, const AVX2: bool> Structural<'r, AVX2> {
    #[inline(always)]
    fn new(raw: &'r [u8]) -> Self {
        let mut s = Self {
            raw,
            at: 0,
            events: 0,
            brackets: 0,
            opens: 0,
            in_string: false,
        };
        s.load();
        s
    }

    /// Reads the block at `self.at` (none past the end of the text).
    #[inline(always)]
    fn load(&mut self) {
        let raw = self.raw;
        if self.at >= raw.len() {
            self.events = 0;
            return;
        }
        let block = match raw[self.at..].first_chunk::<BLOCK>() {
            Some(whole) => *whole,
            None => padded_block(&raw[self.at..]),
        };
        let masks = block_masks::<AVX2>(&block);
        let mut inside = prefix_xor(masks.quote);
        if self.in_string {
            inside = !inside;
        }
        self.in_string = inside >> 63 == 1;
        self.brackets = (masks.open | masks.close) & !inside;
        self.opens = masks.open & !inside;
        self.events = masks.quote | self.brackets | (block_separators::<AVX2>(&block) & !inside);
    }

    /// Moves to the next block; false past the end of the text.
    #[inline(always)]
    fn advance(&mut self) -> bool {
        self.at += BLOCK;
        self.load();
        self.at < self.raw.len()
    }

    /// The next structural byte's offset and the byte.
    #[inline(always)]
    fn next(&mut self) -> Option<(usize, u8)> {
        while self.events == 0 {
            if !self.advance() {
                return None;
            }
        }
        let bit = self.events.trailing_zeros() as usize;
        self.events &= self.events - 1;
        let p = self.at + bit;
        Some((p, self.raw[p]))
    }

    /// Just past the bracket that closes the container whose opening bracket was the last
    /// byte taken, as the container skip finds it (any closing bracket closes, nesting past
    /// the limit fails); every structural byte before it is taken.
    #[inline(always)]
    fn container_end(&mut self) -> Option<usize> {
        let mut depth = 1usize;
        loop {
            let brackets = self.events & self.brackets;
            if brackets == 0 {
                if !self.advance() {
                    return None;
                }
                continue;
            }
            let bit = brackets.trailing_zeros() as usize;
            self.events &= (u64::MAX << bit) << 1;
            if self.opens >> bit & 1 == 1 {
                depth += 1;
                if depth > DEFAULT_MAX_JSON_DEPTH {
                    return None;
                }
            } else {
                depth -= 1;
                if depth == 0 {
                    return Some(self.at + bit + 1);
                }
            }
        }
    }

    /// Takes every structural byte before offset `to`.
    #[inline(always)]
    fn skip_to(&mut self, to: usize) {
        while to >= self.at + BLOCK {
            if !self.advance() {
                return;
            }
        }
        if to > self.at {
            self.events &= u64::MAX << (to - self.at);
        }
    }
}

/// The walk of [`members`] over `raw`, which holds no backslash: the cursor's steps, each
/// reading the next structural byte and the whitespace (or scalar) before it.
#[inline(always)]
fn members_with<const AVX2: bool>(raw: &[u8], visit: &mut Visit<'_>) {
    let all_ws = |from: usize, to: usize| raw[from..to].iter().all(|&b| is_ws(b));
    let mut s = Structural::<AVX2>::new(raw);
    // `expect('{')`.
    // Just past the `{` or `,` before the next key.
    let mut last = match s.next() {
        Some((p, b'{')) if all_ws(0, p) => p + 1,
        _ => return,
    };
    loop {
        // `raw_string` for the key: anything but its opening quote (the `}` of `{}`, a stray
        // `,`) ends the walk. Inside a string its closing quote is the only structural byte.
        let Some((open, b'"')) = s.next() else {
            return;
        };
        let Some((close, _)) = s.next() else {
            return;
        };
        if !all_ws(last, open) {
            return;
        }
        let key = &raw[open + 1..close];
        // `expect(':')`.
        let colon = match s.next() {
            Some((c, b':')) if all_ws(close + 1, c) => c,
            _ => return,
        };
        // `skip_value`: a number or literal is the bytes before the next structural byte.
        let value = match s.next() {
            Some((v, _)) if !all_ws(colon + 1, v) => {
                let Some(scalar) = scalar_after(raw, colon + 1) else {
                    return;
                };
                // `next_member` after it.
                match (scalar.end..raw.len()).find(|&i| !is_ws(raw[i])) {
                    Some(comma) if raw[comma] == b',' => {
                        if visit(key, scalar).is_break() {
                            return;
                        }
                        s.skip_to(comma + 1);
                        last = comma + 1;
                        continue;
                    }
                    _ => {
                        let _ = visit(key, scalar);
                        return;
                    }
                }
            }
            Some((v, b'"')) => match s.next() {
                Some((end, _)) => v..end + 1,
                None => return,
            },
            Some((v, b'{' | b'[')) => match s.container_end() {
                Some(end) => v..end,
                None => return,
            },
            // A value cannot start with `:`, `,` or a closing bracket.
            Some(_) => return,
            None => {
                // A scalar with no structural byte after it (`{"a": 1 2`) is still read:
                // whitespace ends it.
                if let Some(scalar) = scalar_after(raw, colon + 1) {
                    let _ = visit(key, scalar);
                }
                return;
            }
        };
        if visit(key, value.clone()).is_break() {
            return;
        }
        // `next_member`: `,` goes on, `}` (the end) or anything else stops.
        last = match s.next() {
            Some((comma, b',')) if all_ws(value.end, comma) => comma + 1,
            _ => return,
        };
    }
}

/// The number or literal that starts at the first non-whitespace byte from `from`: as
/// `scalar_text` reads it, to the first of its stop bytes (an opening bracket is none of them).
/// `None` when there is none, or it runs to the end of the text (an error there).
fn scalar_after(raw: &[u8], from: usize) -> Option<Range<usize>> {
    let start = (from..raw.len()).find(|&i| !is_ws(raw[i]))?;
    let end = (start..raw.len())
        .find(|&i| is_ws(raw[i]) || matches!(raw[i], b',' | b'}' | b']' | b':' | b'"'))?;
    (end > start).then_some(start..end)
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;

    use super::{by_cursor, from_masks, members};

    type Seen = Vec<(Vec<u8>, std::ops::Range<usize>)>;

    /// Every member a walk meets.
    fn collect(walk: fn(&[u8], &mut super::Visit<'_>), raw: &[u8]) -> Seen {
        let mut seen = Vec::new();
        walk(raw, &mut |name, value| {
            seen.push((name.to_vec(), value));
            ControlFlow::Continue(())
        });
        seen
    }

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, m: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % m
        }
    }

    /// Args-shaped objects, mostly well formed, some with a token dropped, doubled or
    /// replaced, so that the walks also meet missing colons, stray scalars, unclosed values,
    /// brackets of the wrong kind and text after the object.
    fn generated(rng: &mut Lcg) -> Vec<u8> {
        const KEYS: &[&str] = &["Input Dims", "grid", "", "k,:{[", "External id", "a b"];
        const SCALARS: &[&str] = &["0", "-12", "1.5e3", "true", "null", "481199", "x"];
        const WS: &[&str] = &["", " ", "\n      ", "\t"];
        let mut tokens: Vec<String> = vec!["{".into()];
        let members = rng.next(9);
        for m in 0..members {
            if m > 0 {
                tokens.push(",".into());
            }
            tokens.push(WS[rng.next(4) as usize].into());
            tokens.push(format!(
                "\"{}\"",
                KEYS[rng.next(KEYS.len() as u64) as usize]
            ));
            tokens.push(WS[rng.next(4) as usize].into());
            tokens.push(":".into());
            tokens.push(WS[rng.next(4) as usize].into());
            tokens.push(match rng.next(5) {
                0 | 1 => SCALARS[rng.next(SCALARS.len() as u64) as usize].into(),
                2 => "\"str,: [{\"".into(),
                3 => "[[64, 1], [\"float\", \"}]\"], []]".into(),
                _ => "{\"nested\": {\"x\": [1, {}]}}".into(),
            });
            tokens.push(WS[rng.next(4) as usize].into());
        }
        tokens.push("}".into());
        if rng.next(3) == 0 {
            tokens.push(" trailing, \"x\": 1}".into());
        }
        // Damage: drop, double or replace a token.
        if rng.next(2) == 0 && tokens.len() > 1 {
            let at = rng.next(tokens.len() as u64) as usize;
            match rng.next(3) {
                0 => {
                    tokens.remove(at);
                }
                1 => tokens.insert(at, tokens[at].clone()),
                _ => {
                    const ODD: &[&str] = &["]", "}", ":", ",", "[", "\"", "7 8", "{"];
                    tokens[at] = ODD[rng.next(ODD.len() as u64) as usize].into();
                }
            }
        }
        let mut raw = String::new();
        for _ in 0..rng.next(3) {
            raw.push(' ');
        }
        raw.extend(tokens);
        raw.into_bytes()
    }

    #[test]
    fn meets_the_members_the_cursor_meets() {
        let mut rng = Lcg(5);
        let mut compared = 0;
        for case in 0..30_000 {
            let mut raw = generated(&mut rng);
            if case % 7 == 0 {
                // Cut anywhere: values, strings and the object left open.
                let cut = rng.next(raw.len() as u64 + 1) as usize;
                raw.truncate(cut);
            }
            // The generator writes no backslash: text with one is the cursor's anyway.
            if !raw.contains(&b'\\') {
                assert_eq!(
                    collect(from_masks, &raw),
                    collect(by_cursor, &raw),
                    "{:?}",
                    String::from_utf8_lossy(&raw)
                );
                compared += 1;
            }
        }
        assert!(compared > 25_000, "{compared}");
    }

    #[test]
    fn stops_when_asked_and_decodes_escaped_keys() {
        let raw = br#"{"a": 1, "b": [2, 3], "c": "4"}"#;
        let mut keys = Vec::new();
        members(raw, &mut |key, _| {
            keys.push(key.to_vec());
            if key == b"b" {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
        // Escapes go to the cursor, which decodes the key.
        assert_eq!(
            collect(members, br#"{"a\"b": "x\"y", "c": 1}"#),
            [(b"a\"b".to_vec(), 9..15), (b"c".to_vec(), 22..23)]
        );
        // A scalar reads through an opening bracket; one with nothing structural after it ends
        // at whitespace.
        for raw in [
            &br#"{"a": 1[2, "b": 3}"#[..],
            br#"{"a": null 7 8"#,
            br#"{"a": 1"#,
        ] {
            assert_eq!(collect(from_masks, raw), collect(by_cursor, raw), "{raw:?}");
        }
        assert_eq!(collect(by_cursor, br#"{"a": 1[2, "b": 3}"#).len(), 2);
        // Members past the first 64 bytes, and a value that straddles a block's end.
        let long = format!(
            r#"{{"pad": "{}", "Input Dims": [[{}]], "z": 1}}"#,
            "p".repeat(70),
            "1, ".repeat(40) + "1"
        );
        let found = collect(from_masks, long.as_bytes());
        assert_eq!(found, collect(by_cursor, long.as_bytes()));
        assert_eq!(found.len(), 3);
    }
}
