//! Skipping a balanced JSON object or array 64 bytes at a time.
//!
//! Args objects are most of a torch trace's bytes and are skipped whole at load. A byte-at-a-time
//! skipper branches on every quote and bracket, and those are dense in args (`[[], [128], []]`).
//! Here each 64-byte block becomes four bit masks (quotes, backslashes, openers, closers); the
//! bytes inside strings come from a prefix XOR of the quote mask, and only the brackets outside
//! strings are looked at one by one, and only when the block could close the container or pass
//! the nesting limit. A block with a backslash (rare in traces) is read byte by byte, since an
//! escaped quote does not toggle the string mask.

use super::simd::{Masks, block_masks, padded_block, prefix_xor};

/// How a container skip ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Skipped {
    /// The container closed; the offset just past its closing bracket.
    Closed(usize),
    /// The input ended first, inside a string (`true`) or between values.
    Unterminated { in_string: bool },
    /// An opener at this offset went past the nesting limit.
    TooDeep(usize),
}

/// What the skipper carries from one byte or block to the next.
struct State {
    depth: usize,
    in_string: bool,
    /// The previous byte was a backslash inside a string.
    escape_next: bool,
}

const BLOCK: usize = 64;

/// Skips the container whose opening bracket is at `start`. Same reading as a byte-at-a-time
/// walk: any of `{[` opens, any of `}]` closes (mismatches are not checked), a backslash in a
/// string hides the byte after it, and the nesting limit counts open brackets.
pub(super) fn container_end(buf: &[u8], start: usize, max_depth: usize) -> Skipped {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        #[allow(unsafe_code)]
        return unsafe { container_end_avx2(buf, start, max_depth) };
    }
    container_end_with::<false>(buf, start, max_depth)
}

/// [`container_end`] compiled for AVX2, its block masks two 32-byte compares per class.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn container_end_avx2(buf: &[u8], start: usize, max_depth: usize) -> Skipped {
    container_end_with::<true>(buf, start, max_depth)
}

/// The skip, with the block masks of [`Masks::of_avx2`] when `AVX2` (the caller has checked
/// the CPU has it) or else of [`Masks::of`].
#[inline(always)]
fn container_end_with<const AVX2: bool>(buf: &[u8], start: usize, max_depth: usize) -> Skipped {
    let mut state = State {
        depth: 0,
        in_string: false,
        escape_next: false,
    };
    let mut at = start;
    while at < buf.len() {
        // The last, partial block is padded to a whole one rather than read byte by byte: an
        // op's args are walked member by member, each value skipped in a buffer that ends with
        // the args, so most values end in that block.
        let real = &buf[at..buf.len().min(at + BLOCK)];
        let padded;
        let block = match real.first_chunk::<BLOCK>() {
            Some(whole) => whole,
            None => {
                padded = padded_block(real);
                &padded
            }
        };
        let masks = block_masks::<AVX2>(block);
        let done = if masks.backslash != 0 || state.escape_next {
            bytes(real, at, &mut state, max_depth)
        } else {
            whole_block(&masks, at, &mut state, max_depth)
        };
        if let Some(end) = done {
            return end;
        }
        at += BLOCK;
    }
    Skipped::Unterminated {
        in_string: state.in_string,
    }
}

/// One block with no backslash: strings from the quote mask, brackets outside them counted.
#[inline]
fn whole_block(masks: &Masks, at: usize, state: &mut State, max_depth: usize) -> Option<Skipped> {
    // Bit i of `inside` is set from an opening quote up to (not including) its closing quote.
    let mut inside = prefix_xor(masks.quote);
    if state.in_string {
        inside = !inside;
    }
    state.in_string = inside >> 63 == 1;
    let opens = masks.open & !inside;
    let closes = masks.close & !inside;
    let open_count = opens.count_ones() as usize;
    let close_count = closes.count_ones() as usize;
    // The depth cannot reach zero (or the limit) inside this block: count, don't walk.
    if state.depth > close_count && state.depth + open_count <= max_depth {
        state.depth = state.depth + open_count - close_count;
        return None;
    }
    let mut brackets = opens | closes;
    while brackets != 0 {
        let bit = brackets.trailing_zeros() as usize;
        brackets &= brackets - 1;
        if opens >> bit & 1 == 1 {
            state.depth += 1;
            if state.depth > max_depth {
                return Some(Skipped::TooDeep(at + bit));
            }
        } else {
            state.depth -= 1;
            if state.depth == 0 {
                return Some(Skipped::Closed(at + bit + 1));
            }
        }
    }
    None
}

/// The byte-at-a-time reading of `chunk` (which starts at offset `at`).
fn bytes(chunk: &[u8], at: usize, state: &mut State, max_depth: usize) -> Option<Skipped> {
    for (i, &b) in chunk.iter().enumerate() {
        if state.escape_next {
            state.escape_next = false;
        } else if state.in_string {
            match b {
                b'"' => state.in_string = false,
                b'\\' => state.escape_next = true,
                _ => {}
            }
        } else {
            match b {
                b'"' => state.in_string = true,
                b'{' | b'[' => {
                    state.depth += 1;
                    if state.depth > max_depth {
                        return Some(Skipped::TooDeep(at + i));
                    }
                }
                // The first byte is an opener, so the depth is at least one here.
                b'}' | b']' => {
                    state.depth -= 1;
                    if state.depth == 0 {
                        return Some(Skipped::Closed(at + i + 1));
                    }
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-at-a-time skipper this module replaced, kept as the reference reading.
    fn reference(buf: &[u8], start: usize, max_depth: usize) -> Skipped {
        let mut at = start;
        let mut depth = 0usize;
        while let Some(&b) = buf.get(at) {
            match b {
                b'"' => {
                    at += 1;
                    loop {
                        match buf.get(at) {
                            None => return Skipped::Unterminated { in_string: true },
                            Some(b'"') => break,
                            Some(b'\\') => at += 2,
                            Some(_) => at += 1,
                        }
                    }
                }
                b'{' | b'[' => {
                    depth += 1;
                    if depth > max_depth {
                        return Skipped::TooDeep(at);
                    }
                }
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Skipped::Closed(at + 1);
                    }
                }
                _ => {}
            }
            at += 1;
        }
        Skipped::Unterminated { in_string: false }
    }

    /// A small deterministic generator (no dependency on `rand`).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 33
        }
    }

    #[test]
    fn agrees_with_the_byte_reading_on_generated_containers() {
        // Alphabet weighted to the bytes that matter, so blocks mix strings, escapes and deep
        // brackets, including escapes and strings that straddle a block boundary.
        const ALPHABET: &[u8] = b"\"\"\"\\{}[][]{},: a1\"x";
        let mut rng = Lcg(7);
        for case in 0..20_000 {
            let start = (rng.next() % 70) as usize;
            let len = 1 + (rng.next() % 300) as usize;
            let mut buf = vec![b' '; start];
            buf.push(if case % 2 == 0 { b'{' } else { b'[' });
            buf.extend((1..len).map(|_| ALPHABET[(rng.next() as usize) % ALPHABET.len()]));
            let max_depth = 1 + (rng.next() % 12) as usize;
            let expected = reference(&buf, start, max_depth);
            // The CPU's own path (AVX2 where it has it), and the SSE2 one.
            for got in [
                container_end(&buf, start, max_depth),
                container_end_with::<false>(&buf, start, max_depth),
            ] {
                assert_eq!(
                    got,
                    expected,
                    "case {case}: {:?}",
                    String::from_utf8_lossy(&buf)
                );
            }
        }
    }

    #[test]
    fn args_shaped_containers_close_where_they_should() {
        let args = br#"{"External id": 7355,"Concrete Inputs": ["", "", "Fa\"lse"], "Input Dims": [[128, 64], [], [3]], "x": "}]"}"#;
        let mut buf = b"    ".to_vec();
        buf.extend_from_slice(args);
        buf.extend_from_slice(&[b' '; 100]);
        assert_eq!(container_end(&buf, 4, 64), Skipped::Closed(4 + args.len()));
        // Cut inside the trailing string, and with the final brace missing.
        let cut = &buf[..4 + args.len() - 3];
        assert_eq!(
            container_end(cut, 4, 64),
            Skipped::Unterminated { in_string: true }
        );
        let open = &buf[..4 + args.len() - 1];
        assert_eq!(
            container_end(open, 4, 64),
            Skipped::Unterminated { in_string: false }
        );
        let deep = [b'['; 200];
        assert_eq!(container_end(&deep, 0, 100), Skipped::TooDeep(100));
    }
}
