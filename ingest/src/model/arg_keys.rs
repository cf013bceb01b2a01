//! A memo of where the op args the detectors read are in each slice's args: they read "Input
//! Dims", "Input Strides", "Input type" and "Concrete Inputs" of hundreds of thousands of ops,
//! many times over, and each [`Timeline::arg_raw`] walks the args from their start. The first
//! read of any of them walks a slice's args once and records where all four values start.
//!
//! Noting the places while the reader skips the args (the bytes in cache then) was tried: the
//! member walk cost the load about 0.1 s on the 575 MiB torch trace and saved the detectors
//! less, since they read the args of a fifth of the ops.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{SliceId, Timeline};
use crate::json::{Cursor, find_key, members};

/// An op arg the detectors read of nearly every op, its place memoized per slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpArg {
    /// `Input Dims`: each input's shape.
    InputDims,
    /// `Input Strides`: each input's strides.
    InputStrides,
    /// `Input type`: each input's dtype.
    InputType,
    /// `Concrete Inputs`: scalar inputs' values as text.
    ConcreteInputs,
}

impl OpArg {
    /// Every memoized arg, in slot order.
    pub const ALL: [Self; 4] = [
        Self::InputDims,
        Self::InputStrides,
        Self::InputType,
        Self::ConcreteInputs,
    ];

    /// The args key.
    #[must_use]
    pub const fn key(self) -> &'static str {
        match self {
            Self::InputDims => "Input Dims",
            Self::InputStrides => "Input Strides",
            Self::InputType => "Input type",
            Self::ConcreteInputs => "Concrete Inputs",
        }
    }

    fn slot(self) -> u32 {
        self as u32
    }

    /// The arg whose key is `key`.
    fn of_key(key: &[u8]) -> Option<Self> {
        // By length first: most keys of an op's args have another length.
        match key.len() {
            10 => Self::ALL[..]
                .iter()
                .copied()
                .find(|a| a.key().len() == 10 && a.key().as_bytes() == key),
            13 if key == Self::InputStrides.key().as_bytes() => Some(Self::InputStrides),
            15 if key == Self::ConcreteInputs.key().as_bytes() => Some(Self::ConcreteInputs),
            _ => None,
        }
    }
}

const BITS: u32 = 15;
const MASK: u64 = (1 << BITS) - 1;
/// The places are known.
const KNOWN: u64 = 1 << 63;
/// A value starts too far into the args for 15 bits: read them with `find_key`.
const TOO_FAR: u64 = 1 << 62;

/// Where each [`OpArg`]'s value starts in one slice's args: four 15-bit offsets (plus one; 0 =
/// absent) and two flags in a word; 0 when not found yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ArgPlaces(u64);

impl ArgPlaces {
    /// Whether the places are known (absent keys included).
    fn is_known(self) -> bool {
        self.0 & KNOWN != 0
    }

    /// Whether every [`OpArg`] has its place.
    fn all_placed(self) -> bool {
        OpArg::ALL
            .iter()
            .all(|a| (self.0 >> (BITS * a.slot())) & MASK != 0)
    }

    /// Notes that `arg`'s value starts `offset` bytes into the args; the first member of a
    /// name counts.
    fn note(&mut self, arg: OpArg, offset: usize) {
        let shift = BITS * arg.slot();
        if self.0 & TOO_FAR != 0 || (self.0 >> shift) & MASK != 0 {
            return;
        }
        match u64::try_from(offset + 1) {
            Ok(at) if at <= MASK => self.0 |= at << shift,
            _ => self.0 |= TOO_FAR,
        }
    }

    /// One walk over the top-level members of `raw`. The first member of a name counts, and a
    /// walk that meets malformed JSON stops there, as `find_key` does.
    fn find(raw: &[u8]) -> Self {
        let mut places = Self(KNOWN);
        members(raw, &mut |name, value| {
            if let Some(arg) = OpArg::of_key(name) {
                places.note(arg, value.start);
            }
            // Done once every arg is placed: the rest (often a long `Call stack`) is not read.
            if places.0 & TOO_FAR != 0 || places.all_placed() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        places
    }

    /// The raw value of `arg` in `raw`, the args these places were found in.
    fn value(self, raw: &[u8], arg: OpArg) -> Option<&[u8]> {
        if self.0 & TOO_FAR != 0 {
            return find_key(raw, arg.key().as_bytes());
        }
        let at = (self.0 >> (BITS * arg.slot())) & MASK;
        let start = usize::try_from(at.checked_sub(1)?).ok()?;
        let value = raw.get(start..)?;
        let range = Cursor::new(value).skip_value().ok()?;
        value.get(range)
    }
}

/// Per slice, the [`ArgPlaces`] of its args; filled on first use, safely from several threads
/// (a slot filled twice is filled with the same value). One memo serves one Timeline: it is
/// sized by the first Timeline it reads.
#[derive(Debug, Default)]
pub struct ArgKeys {
    /// Made on the first read: an analysis that reads no op arg pays nothing.
    found: std::sync::OnceLock<Box<[AtomicU64]>>,
}

impl ArgKeys {
    /// Slice `i`'s raw value of `arg`: what [`Timeline::arg_raw`] gives for its key.
    #[must_use]
    pub fn get<'t>(&self, t: &'t Timeline, i: SliceId, arg: OpArg) -> Option<&'t [u8]> {
        let raw = t.args_raw(i)?;
        let found = self
            .found
            .get_or_init(|| zeroed_for_writing(t.slices.len()));
        let Some(slot) = found.get(i as usize) else {
            return ArgPlaces::find(raw).value(raw, arg);
        };
        let mut places = ArgPlaces(slot.load(Ordering::Relaxed));
        if !places.is_known() {
            places = ArgPlaces::find(raw);
            slot.store(places.0, Ordering::Relaxed);
        }
        places.value(raw, arg)
    }
}

/// `n` zeroed slots whose pages are already written to.
///
/// A zeroed allocation this large comes from the kernel untouched: a slot's first read maps
/// the shared zero page, and the store after it then copies the page and flushes the TLB of
/// every core running the process (an inter-processor interrupt each). On the 575 MiB torch
/// trace that was ~3,000 such faults and about a tenth of the detectors' time. Writing one
/// slot per page first makes each page's first touch a plain write fault.
fn zeroed_for_writing(n: usize) -> Box<[AtomicU64]> {
    const SLOTS_PER_PAGE: usize = 4096 / std::mem::size_of::<AtomicU64>();
    let slots: Box<[AtomicU64]> = (0..n).map(|_| AtomicU64::new(0)).collect();
    for slot in slots.iter().step_by(SLOTS_PER_PAGE) {
        // An atomic store: not folded away like a plain write of the zero already there.
        slot.store(0, Ordering::Relaxed);
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_cases() -> Vec<String> {
        let long = "x".repeat(40_000);
        vec![
            r#"{"Input Dims": [[2, 3], []], "Input type": ["float", ""], "b": 1}"#.to_owned(),
            r#"{"a": {"Input Dims": 1}, "Input\u0020Dims": [[4]], "Input Dims": [[5]]}"#.to_owned(),
            r#"{"Input type": "x", "Input Dims": [[1], oops], "Concrete Inputs": ["", "1"]}"#
                .to_owned(),
            format!(r#"{{"pad": "{long}", "Input Dims": [[7]], "Concrete Inputs": []}}"#),
            r#"{}"#.to_owned(),
            r#"{ "Input Dims" : [[1]] , "Input Strides":[[1]],"Input type":"Input Dims"}"#
                .to_owned(),
            r#"{"a": 1 "Input Dims": [[2]]}"#.to_owned(),
            r#"{"a": 1, "Input Dims": [[2]],}"#.to_owned(),
            r#"{"a": 1[2], "Input Dims": [[2]]}"#.to_owned(),
            r#"{"a" 1, "Input Dims": [[2]]}"#.to_owned(),
            r#"{"a": 1, "Input Dims": [[2]]]"#.to_owned(),
            r#"{"Input Dims": [[3]], "Input Dims": [[4]], "Input Strides": true}"#.to_owned(),
            r#"{"Input Dims": -1.5e3, "Concrete Inputs": null}"#.to_owned(),
            // Every arg placed before a long stack and a later duplicate: the walk stops early,
            // the first member still counts.
            format!(
                r#"{{"Input Dims": [[8]], "Input Strides": [[1]], "Input type": ["float"], "Concrete Inputs": [""], "Call stack": "{long}", "Input Dims": [[9]]}}"#
            ),
        ]
    }

    /// What a slice's args read as through the memo and through a lookup of the key.
    #[test]
    fn memoized_args_read_as_arg_raw_reads_them() {
        let args = args_cases();
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
        let memo = ArgKeys::default();
        let mut found = 0;
        for i in 0..t.slices.len() as SliceId {
            // Twice: filling the memo, then reading it.
            for _ in 0..2 {
                for arg in OpArg::ALL {
                    let direct = t.arg_raw(i, arg.key());
                    found += usize::from(direct.is_some());
                    assert_eq!(memo.get(&t, i, arg), direct, "slice {i} arg {arg:?}");
                }
            }
        }
        assert!(found > 10, "{found}");
    }
}
