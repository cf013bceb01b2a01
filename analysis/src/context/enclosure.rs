//! What encloses each slice, for the questions the detectors ask of nearly every op: is it
//! inside another op, inside torch.compile's machinery, the optimizer step, `zero_grad`, the
//! data loader, the autograd engine? A torch trace recorded with stacks nests each op under
//! tens of Python frames, so walking the ancestors and comparing their names per question and
//! per op was most of the detectors' time. One pass over the slices (parents come before their
//! children in track order) answers all of them, one byte per slice.

use steplens_ingest::model::{CategoryClass, NO_PARENT, SliceId, Timeline};

use crate::op_names::DATALOADER_PREFIX;
use crate::op_names::EVALUATE_PREFIX;
use crate::op_names::is_compile_span;

/// A set of enclosing ranges, as flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Under(u8);

impl Under {
    /// An op (`cpu_op`): the slice is part of that op's implementation.
    pub(crate) const OP: Self = Self(1);
    /// A torch.compile span ([`is_compile_span`]).
    pub(crate) const COMPILE: Self = Self(1 << 1);
    /// `Optimizer.step#…`.
    pub(crate) const OPTIMIZER_STEP: Self = Self(1 << 2);
    /// `Optimizer.zero_grad#…`.
    pub(crate) const ZERO_GRAD: Self = Self(1 << 3);
    /// The data loader's `enumerate(DataLoader)#…`.
    pub(crate) const DATALOADER: Self = Self(1 << 4);
    /// An autograd engine node (`autograd::engine::evaluate_function: …`): the backward pass.
    pub(crate) const BACKWARD: Self = Self(1 << 5);

    const NONE: Self = Self(0);

    const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

/// Which of the flags a range of this name sets for what it encloses.
fn flags_of_name(name: &str) -> Under {
    let mut flags = Under::NONE;
    if is_compile_span(name) {
        flags = flags.union(Under::COMPILE);
    }
    if name.starts_with("Optimizer.step#") {
        flags = flags.union(Under::OPTIMIZER_STEP);
    }
    if name.starts_with("Optimizer.zero_grad#") {
        flags = flags.union(Under::ZERO_GRAD);
    }
    if name.starts_with(DATALOADER_PREFIX) {
        flags = flags.union(Under::DATALOADER);
    }
    if name.starts_with(EVALUATE_PREFIX) {
        flags = flags.union(Under::BACKWARD);
    }
    flags
}

/// Per slice, the union of what its ancestors set.
#[derive(Debug)]
pub(crate) struct Enclosure {
    under: Vec<Under>,
}

impl Enclosure {
    pub(crate) fn new(t: &Timeline) -> Self {
        let by_name: Vec<Under> = t
            .strings
            .iter()
            .map(|(_, name)| flags_of_name(name))
            .collect();
        let own = |i: SliceId| -> Under {
            let named = by_name
                .get(t.slices.name[i as usize] as usize)
                .copied()
                .unwrap_or(Under::NONE);
            if t.slice_class(i) == CategoryClass::CpuOp {
                named.union(Under::OP)
            } else {
                named
            }
        };
        let parents = &t.slices.parent;
        let mut under: Vec<Under> = Vec::with_capacity(parents.len());
        for (i, &p) in parents.iter().enumerate() {
            let flags = if p == NO_PARENT {
                Under::NONE
            } else if (p as usize) < i {
                under[p as usize].union(own(p))
            } else {
                // A parent after its child (never so in a built Timeline): walk up, stopping
                // at a cycle's length.
                let mut flags = Under::NONE;
                let mut a = p;
                for _ in 0..parents.len() {
                    if a == NO_PARENT {
                        break;
                    }
                    flags = flags.union(own(a));
                    a = parents.get(a as usize).copied().unwrap_or(NO_PARENT);
                }
                flags
            };
            under.push(flags);
        }
        Self { under }
    }

    /// Whether an ancestor of `slice` sets every flag of `what`.
    pub(crate) fn is_under(&self, slice: SliceId, what: Under) -> bool {
        self.under
            .get(slice as usize)
            .is_some_and(|u| u.contains(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_match_an_ancestor_walk() {
        let t = steplens_ingest::load_bytes(
            "nesting.json",
            r#"{"traceEvents":[
            {"ph":"X","name":"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__","cat":"user_annotation","pid":1,"tid":1,"ts":0,"dur":10},
            {"ph":"X","name":"aten::stack","cat":"cpu_op","pid":1,"tid":1,"ts":1,"dur":5},
            {"ph":"X","name":"aten::cat","cat":"cpu_op","pid":1,"tid":1,"ts":2,"dur":2},
            {"ph":"X","name":"Optimizer.step#AdamW.step","cat":"user_annotation","pid":1,"tid":1,"ts":20,"dur":10},
            {"ph":"X","name":"aten::mul_","cat":"cpu_op","pid":1,"tid":1,"ts":21,"dur":2},
            {"ph":"X","name":"autograd::engine::evaluate_function: MulBackward0","cat":"cpu_op","pid":1,"tid":2,"ts":0,"dur":10},
            {"ph":"X","name":"MulBackward0","cat":"cpu_op","pid":1,"tid":2,"ts":1,"dur":8},
            {"ph":"X","name":"Torch-Compiled Region","cat":"user_annotation","pid":1,"tid":2,"ts":20,"dur":9},
            {"ph":"X","name":"inductor_compile","cat":"user_annotation","pid":1,"tid":2,"ts":21,"dur":5},
            {"ph":"X","name":"aten::empty","cat":"cpu_op","pid":1,"tid":2,"ts":22,"dur":1}
            ]}"#
            .as_bytes()
            .to_vec(),
            &steplens_ingest::LoadOptions::default(),
        )
        .expect("trace");
        let memo = Enclosure::new(&t);
        let walk = |i: SliceId, what: Under| {
            let mut found = Under::NONE;
            let mut a = t.slices.parent[i as usize];
            while a != NO_PARENT {
                found = found.union(flags_of_name(t.slice_name(a)));
                if t.slice_class(a) == CategoryClass::CpuOp {
                    found = found.union(Under::OP);
                }
                a = t.slices.parent[a as usize];
            }
            found.contains(what)
        };
        let all = [
            Under::OP,
            Under::COMPILE,
            Under::OPTIMIZER_STEP,
            Under::ZERO_GRAD,
            Under::DATALOADER,
            Under::BACKWARD,
        ];
        let mut set = 0;
        for i in 0..t.slices.len() as SliceId {
            for what in all {
                assert_eq!(memo.is_under(i, what), walk(i, what), "slice {i}");
                set += usize::from(memo.is_under(i, what));
            }
        }
        // cat: OP + DATALOADER; stack: DATALOADER; mul_: OPTIMIZER_STEP; MulBackward0: OP +
        // BACKWARD; inductor_compile: none; empty: COMPILE.
        assert_eq!(set, 7);
        let id = |name: &str| {
            (0..t.slices.len() as SliceId)
                .find(|&i| t.slice_name(i) == name)
                .expect("slice")
        };
        assert!(memo.is_under(id("aten::empty"), Under::COMPILE));
        assert!(memo.is_under(id("MulBackward0"), Under::BACKWARD));
        assert!(!memo.is_under(id("aten::stack"), Under::OP));
    }
}
