//! `host_created_tensor`, the host side: a tensor built from Python data (`torch.tensor(list)`,
//! `torch.as_tensor(list)`) inside the step, every step.
//!
//! The trace marks such a construction with `aten::lift_fresh` (the new tensor handed to
//! Python); before it come the op that allocated it (`aten::empty` of a `ScalarList` size) and
//! often `aten::to`. With `with_stack=True` the whole call is one Python frame (`<built-in method
//! tensor of type object …>`), which also covers the walk over the Python list before the
//! allocation. Outside the data loader (where building tensors is its job), the optimizer's
//! step and `zero_grad` (their own bookkeeping tensors) and compiled regions.
//!
//! Lost time: the Python frame of the call where the trace has it, else the allocation through
//! `aten::lift_fresh` (and the `aten::detach_` right after it). One finding per step and call
//! site.

use std::collections::BTreeMap;

use steplens_ingest::model::{CategoryClass, SliceId};

use super::registry::{Detector, Raises, Saves};
use super::{MAX_EVIDENCE, Under, at_site, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "python_data_tensor",
    raises: &[Raises::new(FindingKind::HostCreatedTensor, Saves::HostTime)],
    thresholds: &[],
    advice: "Build the tensor on the device, or once outside the loop, instead of from Python data every step.",
    detect: |ctx, _| detect(ctx),
};

const ADVICE: &str = "This tensor is built from Python data (a list, or scalars) every step: \
    torch.tensor walks the Python objects one by one and copies them. Build it once before the \
    loop (on the device it is used on) and reuse it, or compute it with tensor ops.";

/// Python frames of the calls that build a tensor from Python data.
fn is_constructor_frame(name: &str) -> bool {
    name.starts_with("<built-in method tensor of ")
        || name.starts_with("<built-in method as_tensor of ")
        || name == "<built-in function tensor>"
}

/// One construction: the ranges it took and the slices that show it.
struct Construction {
    range: (i64, i64),
    slices: Vec<SliceId>,
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let Some(lift) = t.strings.lookup("aten::lift_fresh") else {
        return Vec::new();
    };
    let mut groups: BTreeMap<(u16, usize, String), Vec<Construction>> = BTreeMap::new();
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            if t.slices.name[i as usize] != lift
                || t.slice_class(i) != CategoryClass::CpuOp
                || !ctx.is_outermost_op(i)
                || ctx.under_compile(i)
                || ctx.is_under(i, Under::DATALOADER)
                || ctx.is_under(i, Under::OPTIMIZER_STEP)
                || ctx.is_under(i, Under::ZERO_GRAD)
            {
                continue;
            }
            let Some(step) = ctx.step_at(track.source, t.slices.start[i as usize]) else {
                continue;
            };
            let c = construction(ctx, i);
            let site = ctx
                .call_site(i)
                .unwrap_or_else(|| t.slice_name(i).to_owned());
            groups
                .entry((track.source, step, site))
                .or_default()
                .push(c);
        }
    }
    groups
        .into_iter()
        .map(|((source, step, _), cs)| finding(ctx, source, step, &cs))
        .collect()
}

/// The range and slices of the construction that ends in `lift` (an outermost
/// `aten::lift_fresh`).
fn construction(ctx: &Context<'_>, lift: SliceId) -> Construction {
    let t = ctx.timeline;
    if let Some(frame) = ctx.ancestors(lift).find(|&a| {
        t.slice_class(a) == CategoryClass::PythonFunction && is_constructor_frame(t.slice_name(a))
    }) {
        return Construction {
            range: (t.slices.start[frame as usize], t.slices.end(frame)),
            slices: vec![frame, lift],
        };
    }
    // No Python frames: the allocation (at most one op before it) through lift_fresh and the
    // detach_ right after.
    let mut slices = vec![lift];
    let mut start = t.slices.start[lift as usize];
    let mut end = t.slices.end(lift);
    let mut prev = ctx.previous_outermost_op(lift);
    for _ in 0..2 {
        let Some(p) = prev else { break };
        let name = t.slice_name(p);
        if name == "aten::empty" {
            start = t.slices.start[p as usize];
            slices.insert(0, p);
            break;
        }
        if name != "aten::to" && name != "aten::_to_copy" {
            break;
        }
        prev = ctx.previous_outermost_op(p);
    }
    if let Some(next) = ctx.next_outermost_op(lift)
        && t.slice_name(next) == "aten::detach_"
    {
        end = t.slices.end(next);
        slices.push(next);
    }
    Construction {
        range: (start, end),
        slices,
    }
}

fn finding(ctx: &Context<'_>, source: u16, step: usize, cs: &[Construction]) -> Raised {
    let t = ctx.timeline;
    let s = &t.steps[step];
    let ranges: Vec<(i64, i64)> = cs.iter().map(|c| c.range).collect();
    let lost = steplens_ingest::intervals::IntervalSet::from_ranges(ranges.clone()).total();
    let first = cs[0].slices[0];
    let call_site = ctx.call_site(*cs[0].slices.last().unwrap_or(&first));
    let at = at_site(call_site.as_deref());
    Raised {
        kind: FindingKind::HostCreatedTensor,
        severity: Severity::of_share(lost, s.dur),
        title: format!(
            "{}× tensor built from Python data (torch.tensor){at} in {} ({} lost)",
            cs.len(),
            s.name,
            human_ns(lost)
        ),
        step: Some(step),
        start_ns: ranges.iter().map(|r| r.0).min().unwrap_or(0),
        end_ns: ranges.iter().map(|r| r.1).max().unwrap_or(0),
        track: ctx.track_name(first),
        ops: vec!["aten::lift_fresh".to_owned()],
        call_site,
        count: cs.len() as u64,
        lost_ns: lost,
        evidence: cs
            .iter()
            .flat_map(|c| c.slices.iter().copied())
            .take(MAX_EVIDENCE)
            .map(|i| ctx.evidence(i))
            .collect(),
        cost: Cost::measured(source, ranges),
        recommendation: ADVICE.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::is_constructor_frame;

    #[test]
    fn constructor_frames() {
        assert!(is_constructor_frame(
            "<built-in method tensor of type object at 0x7f7b6f2bc100>"
        ));
        assert!(is_constructor_frame(
            "<built-in method as_tensor of type object at 0x7f00>"
        ));
        assert!(!is_constructor_frame(
            "<built-in method zeros of type object at 0x7f00>"
        ));
    }
}
