//! Byte-class masks over 16- and 64-byte chunks, for the scanner's hot loops.
//!
//! On x86_64 they are SSE2 compares (part of the baseline, so always available); elsewhere a
//! byte loop gives the same masks. Bit i of a mask stands for byte i of the chunk.

/// Where a string's scan stops.
pub(super) const STRING_STOPS: &[u8] = b"\"\\";
/// JSON whitespace.
pub(super) const WHITESPACE: &[u8] = b" \n\r\t";
/// What ends a number or literal.
pub(super) const SCALAR_STOPS: &[u8] = b",}]:\" \n\r\t";

/// The bytes of `chunk` equal to one of `set`. Inlined with a constant `set`, the compares
/// unroll into one per byte of it.
#[inline(always)]
pub(super) fn any_of(chunk: &[u8; 16], set: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8, _mm_setzero_si128,
        };
        // SAFETY: SSE2 is part of the x86_64 baseline; `chunk` is 16 readable bytes and
        // `loadu` has no alignment requirement.
        #[allow(unsafe_code)]
        let mask = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            let mut hits = _mm_setzero_si128();
            for &b in set {
                hits = _mm_or_si128(hits, _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8)));
            }
            _mm_movemask_epi8(hits)
        };
        // `movemask` fills the low 16 bits of an i32.
        u32::from(mask as u16)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        any_of_bytes(chunk, set)
    }
}

/// [`any_of`] byte by byte: what other targets use, and what the SSE2 masks are tested
/// against.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn any_of_bytes(chunk: &[u8; 16], set: &[u8]) -> u32 {
    chunk
        .iter()
        .enumerate()
        .filter(|&(_, b)| set.contains(b))
        .fold(0, |mask, (i, _)| mask | 1 << i)
}

/// One bit per byte of a 64-byte block, bit i for byte i.
pub(super) struct Masks {
    pub(super) quote: u64,
    pub(super) backslash: u64,
    pub(super) open: u64,
    pub(super) close: u64,
}

impl Masks {
    #[inline]
    pub(super) fn of(block: &[u8; 64]) -> Self {
        let mut masks = Self {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for (lane, chunk) in block.chunks_exact(16).enumerate() {
            let Some(chunk) = chunk.first_chunk::<16>() else {
                continue; // `chunks_exact(16)` gives 16 bytes every time.
            };
            let bits = |set: &[u8]| u64::from(any_of(chunk, set)) << (16 * lane);
            masks.quote |= bits(b"\"");
            masks.backslash |= bits(b"\\");
            masks.open |= bits(b"{[");
            masks.close |= bits(b"}]");
        }
        masks
    }

    /// [`Masks::of`] with two 32-byte compares per class instead of four 16-byte ones. `{[`
    /// and `}]` differ from each other only in bit 5 (0x20), so setting it first leaves one
    /// compare per bracket class: three classes cost four compares a half, not six a quarter.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) fn of_avx2(block: &[u8; 64]) -> Self {
        use std::arch::x86_64::{
            __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
            _mm256_set1_epi8,
        };
        let half = |at: usize| {
            // SAFETY: `at` is 0 or 32, so 32 bytes from it lie inside the 64-byte `block`;
            // `loadu` has no alignment requirement.
            #[allow(unsafe_code)]
            let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(at).cast::<__m256i>()) };
            let folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
            let bits = |hits: __m256i| u64::from(_mm256_movemask_epi8(hits) as u32) << at;
            Self {
                quote: bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8))),
                backslash: bits(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8))),
                open: bits(_mm256_cmpeq_epi8(folded, _mm256_set1_epi8(b'{' as i8))),
                close: bits(_mm256_cmpeq_epi8(folded, _mm256_set1_epi8(b'}' as i8))),
            }
        };
        let (low, high) = (half(0), half(32));
        Self {
            quote: low.quote | high.quote,
            backslash: low.backslash | high.backslash,
            open: low.open | high.open,
            close: low.close | high.close,
        }
    }
}

/// The masks of a 64-byte block: [`Masks::of_avx2`] when `AVX2` (the caller, compiled for AVX2,
/// runs only on a CPU that has it), else [`Masks::of`].
#[inline(always)]
pub(super) fn block_masks<const AVX2: bool>(block: &[u8; 64]) -> Masks {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: `AVX2` is true only in functions compiled for AVX2 that run only on a CPU
        // that has it.
        #[allow(unsafe_code)]
        return unsafe { Masks::of_avx2(block) };
    }
    Masks::of(block)
}

/// `rest`, a text's last partial block (under 64 bytes), padded with spaces to a whole one: a
/// space is in no class of the masks, so the padding adds no structural byte.
pub(super) fn padded_block(rest: &[u8]) -> [u8; 64] {
    let mut block = [b' '; 64];
    let n = rest.len().min(64);
    block[..n].copy_from_slice(&rest[..n]);
    block
}

/// The `:` and `,` of a 64-byte block, which separate an object's members (and an array's
/// elements), as [`block_masks`] chooses its instructions.
#[inline(always)]
pub(super) fn block_separators<const AVX2: bool>(block: &[u8; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: as in `block_masks`.
        #[allow(unsafe_code)]
        return unsafe { separators_avx2(block) };
    }
    let mut separators = 0;
    for (lane, chunk) in block.chunks_exact(16).enumerate() {
        if let Some(chunk) = chunk.first_chunk::<16>() {
            separators |= u64::from(any_of(chunk, b":,")) << (16 * lane);
        }
    }
    separators
}

/// [`block_separators`] with two 32-byte compares per byte.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn separators_avx2(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
        _mm256_set1_epi8,
    };
    let half = |at: usize| {
        // SAFETY: `at` is 0 or 32, so 32 bytes from it lie inside the 64-byte `block`.
        #[allow(unsafe_code)]
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(at).cast::<__m256i>()) };
        let hits = _mm256_or_si256(
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b':' as i8)),
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b',' as i8)),
        );
        u64::from(_mm256_movemask_epi8(hits) as u32) << at
    };
    half(0) | half(32)
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
        assert_eq!(any_of(chunk, STRING_STOPS), 1 << 4 | 1 << 6 | 1 << 15);
        assert_eq!(any_of(chunk, WHITESPACE), 0b1111 | 1 << 10 | 1 << 11);
        let number: &[u8; 16] = b"-1.5e3,}]:\" \t\r\n}";
        assert_eq!(any_of(number, SCALAR_STOPS), 0xFFC0);
        // Bytes with the high bit set are not mistaken for either class.
        assert_eq!(any_of(&[0xA2; 16], STRING_STOPS), 0);
        assert_eq!(any_of(&[0xA0; 16], WHITESPACE), 0);
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
            let mut by_bytes = [0u64; 4];
            for (lane, chunk) in block.chunks_exact(16).enumerate() {
                let chunk: &[u8; 16] = chunk.try_into().unwrap();
                for set in [STRING_STOPS, WHITESPACE, SCALAR_STOPS] {
                    assert_eq!(any_of(chunk, set), any_of_bytes(chunk, set), "{chunk:?}");
                }
                for (mask, set) in by_bytes.iter_mut().zip([&b"\""[..], b"\\", b"{[", b"}]"]) {
                    *mask |= u64::from(any_of_bytes(chunk, set)) << (16 * lane);
                }
            }
            let ours = Masks::of(&block);
            assert_eq!(
                [ours.quote, ours.backslash, ours.open, ours.close],
                by_bytes,
                "{block:?}"
            );
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2, checked just above.
                #[allow(unsafe_code)]
                let wide = unsafe { Masks::of_avx2(&block) };
                assert_eq!(
                    [wide.quote, wide.backslash, wide.open, wide.close],
                    by_bytes,
                    "{block:?}"
                );
            }
        }
    }
}
