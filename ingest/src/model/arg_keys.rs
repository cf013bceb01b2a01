//! A memo of where a few args keys are in each slice's args: the detectors read the same op's
//! "Input Dims", "Input Strides", "Input type" and "Concrete Inputs" many times over, and each
//! [`Timeline::arg_raw`] walks the args from their start. The first read of any memoized key
//! of a slice walks its args once and records where all of them start.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{SliceId, Timeline};
use crate::json::{Cursor, find_key, unescape};

/// Keys one memo holds: four 15-bit offsets fit a slot beside the two flags.
const MAX_KEYS: usize = 4;
const BITS: u32 = 15;
const MASK: u64 = (1 << BITS) - 1;
/// The slot has been filled.
const FILLED: u64 = 1 << 63;
/// A key's value starts too far into the args for a slot: read them with `find_key`.
const TOO_FAR: u64 = 1 << 62;

/// Per slice, where the values of up to four args keys start; filled on first use, safely from
/// several threads (a slot filled twice is filled with the same value).
#[derive(Debug)]
pub struct ArgKeys {
    keys: Vec<Vec<u8>>,
    slots: Box<[AtomicU64]>,
}

impl ArgKeys {
    /// A memo of the first four of `keys` over `timeline`'s slices (other keys are read
    /// directly).
    #[must_use]
    pub fn new(timeline: &Timeline, keys: &[&str]) -> Self {
        Self {
            keys: keys
                .iter()
                .take(MAX_KEYS)
                .map(|k| k.as_bytes().to_vec())
                .collect(),
            slots: (0..timeline.slices.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Slice `i`'s raw value of `key`: what [`Timeline::arg_raw`] gives.
    #[must_use]
    pub fn get<'t>(&self, t: &'t Timeline, i: SliceId, key: &str) -> Option<&'t [u8]> {
        let k = self.keys.iter().position(|x| x == key.as_bytes());
        let (Some(k), Some(slot)) = (k, self.slots.get(i as usize)) else {
            return t.arg_raw(i, key);
        };
        let raw = t.args_raw(i)?;
        let mut packed = slot.load(Ordering::Relaxed);
        if packed & FILLED == 0 {
            packed = self.starts(raw);
            slot.store(packed, Ordering::Relaxed);
        }
        if packed & TOO_FAR != 0 {
            return find_key(raw, key.as_bytes());
        }
        let at = (packed >> (BITS * k as u32)) & MASK;
        let start = usize::try_from(at.checked_sub(1)?).ok()?;
        let value = raw.get(start..)?;
        let range = Cursor::new(value).skip_value().ok()?;
        value.get(range)
    }

    /// One walk over the top-level members of `raw`: where each key's value starts, plus one
    /// (0: absent). The first member of a name counts, and a walk that meets malformed JSON
    /// stops there, as `find_key` does.
    fn starts(&self, raw: &[u8]) -> u64 {
        let mut packed = FILLED;
        let mut cur = Cursor::new(raw);
        if cur.expect(b'{', "{").is_err() || cur.peek() == Some(b'}') {
            return packed;
        }
        loop {
            let Ok((name, escaped)) = cur.raw_string() else {
                return packed;
            };
            if cur.expect(b':', ":").is_err() {
                return packed;
            }
            let Ok(value) = cur.skip_value() else {
                return packed;
            };
            let unescaped;
            let name = if escaped {
                unescaped = unescape(name);
                unescaped.as_bytes()
            } else {
                name
            };
            if let Some(k) = self.keys.iter().position(|x| x == name) {
                let shift = BITS * k as u32;
                if (packed >> shift) & MASK == 0 {
                    let at = value.start as u64 + 1;
                    if at > MASK {
                        return packed | TOO_FAR;
                    }
                    packed |= at << shift;
                }
            }
            if !matches!(cur.next_member(b'}', ", or }"), Ok(true)) {
                return packed;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memoized_keys_read_as_arg_raw_reads_them() {
        let long = "x".repeat(40_000);
        let args = [
            r#"{"Input Dims": [[2, 3], []], "Input type": ["float", ""], "b": 1}"#.to_owned(),
            r#"{"a": {"Input Dims": 1}, "Input\u0020Dims": [[4]], "Input Dims": [[5]]}"#.to_owned(),
            r#"{"Input type": "x", "Input Dims": [[1], oops], "Concrete Inputs": ["", "1"]}"#
                .to_owned(),
            format!(r#"{{"pad": "{long}", "Input Dims": [[7]], "Concrete Inputs": []}}"#),
            r#"{}"#.to_owned(),
            r#"[1, 2]"#.to_owned(),
        ];
        let events: Vec<String> = args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                format!(
                    r#"{{"ph":"X","name":"aten::op","cat":"cpu_op","pid":1,"tid":1,"ts":{},"dur":1,"args":{a}}}"#,
                    i * 10
                )
            })
            .collect();
        let t = crate::builder::stage_test::build(&format!(
            r#"{{"traceEvents":[{}]}}"#,
            events.join(",")
        ));
        let keys = [
            "Input Dims",
            "Input type",
            "Concrete Inputs",
            "Input Strides",
        ];
        let memo = ArgKeys::new(&t, &keys);
        let mut found = 0;
        for i in 0..t.slices.len() as SliceId {
            // Twice: filling the slot, then reading it.
            for _ in 0..2 {
                for key in keys.iter().chain(&["b", "pad"]) {
                    let direct = t.arg_raw(i, key);
                    found += usize::from(direct.is_some());
                    assert_eq!(memo.get(&t, i, key), direct, "slice {i} key {key}");
                }
            }
        }
        assert!(found > 10, "{found}");
    }
}
