//! Byte-class masks over 16- and 64-byte chunks, for the scanner's hot loops.
//!
//! On x86_64 they are SSE2 compares (part of the baseline, so always available); elsewhere a
//! byte loop gives the same masks. Bit i of a mask stands for byte i of the chunk.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
};

/// The bytes of a 16-byte chunk equal to `"` or `\` (where a string's scan stops).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn string_stops(chunk: &[u8; 16]) -> u32 {
    // SAFETY: SSE2 is part of the x86_64 baseline; `chunk` is 16 readable bytes and `loadu`
    // has no alignment requirement.
    #[allow(unsafe_code)]
    let mask = unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
        _mm_movemask_epi8(_mm_or_si128(
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
        ))
    };
    // `movemask` fills the low 16 bits of an i32.
    u32::from(mask as u16)
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) use portable::{scalar_stops, string_stops, whitespace};

/// The byte-loop masks: what the other targets use, and what the SSE2 masks are tested against.
#[cfg(any(test, not(target_arch = "x86_64")))]
pub(super) mod portable {
    #[inline]
    pub(in crate::json) fn string_stops(chunk: &[u8; 16]) -> u32 {
        bits16(chunk, |b| b == b'"' || b == b'\\')
    }

    #[inline]
    pub(in crate::json) fn whitespace(chunk: &[u8; 16]) -> u32 {
        bits16(chunk, |b| matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
    }

    #[inline]
    pub(in crate::json) fn scalar_stops(chunk: &[u8; 16]) -> u32 {
        bits16(chunk, |b| {
            matches!(
                b,
                b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t' | b':' | b'"'
            )
        })
    }

    #[inline]
    fn bits16(chunk: &[u8; 16], class: impl Fn(u8) -> bool) -> u32 {
        chunk
            .iter()
            .enumerate()
            .filter(|&(_, &b)| class(b))
            .fold(0, |mask, (i, _)| mask | 1 << i)
    }

    /// [`super::Masks`] of a 64-byte block, byte by byte.
    pub(in crate::json) fn masks(block: &[u8]) -> super::Masks {
        let mut masks = super::Masks {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for (i, &b) in block.iter().enumerate().take(64) {
            let bit = 1u64 << i;
            match b {
                b'"' => masks.quote |= bit,
                b'\\' => masks.backslash |= bit,
                b'{' | b'[' => masks.open |= bit,
                b'}' | b']' => masks.close |= bit,
                _ => {}
            }
        }
        masks
    }
}

/// The bytes of a 16-byte chunk that are JSON whitespace (space, `\n`, `\r`, `\t`).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn whitespace(chunk: &[u8; 16]) -> u32 {
    // SAFETY: as in `string_stops`.
    #[allow(unsafe_code)]
    let mask = unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
        let space_or_newline = _mm_or_si128(
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8)),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8)),
        );
        let tab_or_return = _mm_or_si128(
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\t' as i8)),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\r' as i8)),
        );
        _mm_movemask_epi8(_mm_or_si128(space_or_newline, tab_or_return))
    };
    u32::from(mask as u16)
}

/// The bytes of a 16-byte chunk that end a number or literal: `,` `}` `]` `:` `"` and
/// whitespace.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn scalar_stops(chunk: &[u8; 16]) -> u32 {
    // SAFETY: as in `string_stops`.
    #[allow(unsafe_code)]
    let mask = unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
        let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
        // `}` and `]` differ only in bit 0x20.
        let close = _mm_cmpeq_epi8(
            _mm_or_si128(v, _mm_set1_epi8(0x20)),
            _mm_set1_epi8(b'}' as i8),
        );
        let punctuation = _mm_or_si128(
            _mm_or_si128(eq(b','), eq(b':')),
            _mm_or_si128(eq(b'"'), close),
        );
        let space = _mm_or_si128(
            _mm_or_si128(eq(b' '), eq(b'\n')),
            _mm_or_si128(eq(b'\r'), eq(b'\t')),
        );
        _mm_movemask_epi8(_mm_or_si128(punctuation, space))
    };
    u32::from(mask as u16)
}

/// One bit per byte of a 64-byte block, bit i for byte i.
pub(super) struct Masks {
    pub(super) quote: u64,
    pub(super) backslash: u64,
    pub(super) open: u64,
    pub(super) close: u64,
}

impl Masks {
    #[cfg(target_arch = "x86_64")]
    #[inline]
    pub(super) fn of(block: &[u8]) -> Self {
        // `{` and `[` differ only in bit 0x20, as do `}` and `]`: one compare each after
        // setting it (no other byte maps onto them).
        // SAFETY: SSE2 is part of the x86_64 baseline.
        #[allow(unsafe_code)]
        let [case, quote, backslash, open, close] = unsafe {
            [
                _mm_set1_epi8(0x20),
                _mm_set1_epi8(b'"' as i8),
                _mm_set1_epi8(b'\\' as i8),
                _mm_set1_epi8(b'{' as i8),
                _mm_set1_epi8(b'}' as i8),
            ]
        };
        let mut masks = Self {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for (lane, bytes) in block.chunks_exact(16).enumerate() {
            // SAFETY: SSE2 is part of the x86_64 baseline, so its intrinsics are always
            // available; `bytes` is 16 readable bytes (`chunks_exact`) and `loadu` has no
            // alignment requirement.
            #[allow(unsafe_code)]
            let [q, b, o, c] = unsafe {
                let v = _mm_loadu_si128(bytes.as_ptr().cast::<__m128i>());
                let folded = _mm_or_si128(v, case);
                [
                    _mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)),
                    _mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash)),
                    _mm_movemask_epi8(_mm_cmpeq_epi8(folded, open)),
                    _mm_movemask_epi8(_mm_cmpeq_epi8(folded, close)),
                ]
            };
            // `movemask` fills the low 16 bits of an i32.
            let bits = |m: i32| u64::from(m as u16) << (16 * lane);
            masks.quote |= bits(q);
            masks.backslash |= bits(b);
            masks.open |= bits(o);
            masks.close |= bits(c);
        }
        masks
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline]
    pub(super) fn of(block: &[u8]) -> Self {
        portable::masks(block)
    }
}

/// Bit i of the result is the XOR of bits 0..=i of `bits`.
#[inline]
pub(super) fn prefix_xor(mut bits: u64) -> u64 {
    bits ^= bits << 1;
    bits ^= bits << 2;
    bits ^= bits << 4;
    bits ^= bits << 8;
    bits ^= bits << 16;
    bits ^= bits << 32;
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_mark_each_class() {
        let mut block = [b'a'; 64];
        block[0] = b'"';
        block[17] = b'\\';
        block[33] = b'[';
        block[34] = b'{';
        block[63] = b']';
        block[62] = b'}';
        let m = Masks::of(&block);
        assert_eq!(m.quote, 1);
        assert_eq!(m.backslash, 1 << 17);
        assert_eq!(m.open, 1 << 33 | 1 << 34);
        assert_eq!(m.close, 1 << 62 | 1 << 63);
        assert_eq!(prefix_xor(0b1001), 0b0111);
    }

    #[test]
    fn sixteen_byte_masks() {
        let chunk: &[u8; 16] = b" \n\t\r\"x\\{\x0b\x0c  abc\"";
        assert_eq!(string_stops(chunk), 1 << 4 | 1 << 6 | 1 << 15);
        assert_eq!(whitespace(chunk), 0b1111 | 1 << 10 | 1 << 11);
        let number: &[u8; 16] = b"-1.5e3,}]:\" \t\r\n}";
        assert_eq!(scalar_stops(number), 0xFFC0);
        // Bytes with the high bit set are not mistaken for either class.
        assert_eq!(string_stops(&[0xA2; 16]), 0);
        assert_eq!(whitespace(&[0xA0; 16]), 0);
    }

    /// The target's masks and the byte-loop ones agree on every byte value in every position.
    #[test]
    fn masks_agree_with_the_byte_loop() {
        for first in (0..=255u8).step_by(16) {
            let mut block = [0u8; 64];
            for (i, b) in block.iter_mut().enumerate() {
                *b = first
                    .wrapping_add((i % 16) as u8)
                    .wrapping_add((i / 16) as u8 * 61);
            }
            for chunk in block.chunks_exact(16) {
                let chunk: &[u8; 16] = chunk.try_into().unwrap();
                assert_eq!(
                    string_stops(chunk),
                    portable::string_stops(chunk),
                    "{chunk:?}"
                );
                assert_eq!(whitespace(chunk), portable::whitespace(chunk), "{chunk:?}");
                assert_eq!(
                    scalar_stops(chunk),
                    portable::scalar_stops(chunk),
                    "{chunk:?}"
                );
            }
            let (ours, bytes) = (Masks::of(&block), portable::masks(&block));
            assert_eq!(
                [ours.quote, ours.backslash, ours.open, ours.close],
                [bytes.quote, bytes.backslash, bytes.open, bytes.close],
                "{block:?}"
            );
        }
    }
}
