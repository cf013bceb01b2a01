//! `unfused_pointwise`: a chain of elementwise ops over one tensor shape, each its own op (and
//! kernel), where one fused kernel would read the input once and write the result once.
//!
//! A chain: at least `pointwise_chain_min_ops` consecutive outermost ops on one thread (only
//! Python frames between them) that are all elementwise (`aten::mul`, `aten::add`, `aten::tanh`,
//! `aten::pow`, …) with the same first-input shape of at least `pointwise_min_elems` elements.
//! The forward pass only: ops under the optimizer step (`unfused_optimizer`'s), autograd's
//! backward nodes, the data loader and torch.compile are left out, and a chain must come back in
//! at least two steps (it is the code of the step, not a one-off).
//!
//! Counted per step and call site (the chain's first op); a pattern finding, reported whatever
//! its share. Lost time, the model: a fused kernel costs about as much as the chain's most
//! expensive op (one pass over memory, one launch), so the rest of the chain's time is lost.

use std::collections::{BTreeMap, BTreeSet};

use steplens_ingest::model::{CategoryClass, OpArg, SliceId};

use super::registry::{Detector, Raises, Saves, Threshold};
use super::torch_ops::tensor_arg;
use super::{MAX_EVIDENCE, Under, at_site, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};

const POINTWISE_CHAIN_MIN_OPS: Threshold = Threshold::int(
    "pointwise_chain_min_ops",
    4,
    "a flagged chain has at least this many elementwise ops.",
);

const POINTWISE_MIN_ELEMS: Threshold = Threshold::int(
    "pointwise_min_elems",
    1024,
    "a flagged chain works on tensors of at least this many elements.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "pointwise",
    raises: &[Raises::new(
        FindingKind::UnfusedPointwise,
        Saves::DeviceWork,
    )],
    thresholds: &[POINTWISE_CHAIN_MIN_OPS, POINTWISE_MIN_ELEMS],
    advice: "Fuse the chain: torch.compile, a fused op (e.g. F.gelu, addcmul) or a custom kernel.",
    detect,
};

const ADVICE: &str = "These elementwise ops each read and write the whole tensor and launch \
    their own kernel. Wrap the function in torch.compile (or write it as one fused op, e.g. \
    F.gelu instead of its formula), so the chain runs as a single kernel.";

/// Where a chain was found.
struct Chain {
    source: u16,
    step: usize,
    ops: Vec<SliceId>,
}

pub(crate) fn detect(ctx: &Context<'_>, shared: &super::Shared) -> Vec<Raised> {
    let t = ctx.timeline;
    let th = ctx.thresholds;
    let min_ops = th.pointwise_chain_min_ops.max(2);
    let mut chains: Vec<Chain> = Vec::new();
    for (_, track) in ctx.host_tracks() {
        // Runs of consecutive outermost elementwise ops, by name alone; only a run long enough
        // to hold a chain has its shapes read (args are costly to read, and most elementwise
        // ops stand alone between matmuls).
        let mut run: Vec<SliceId> = Vec::new();
        // End of the run's last op: an op that starts later and is not a link breaks it.
        let mut run_end = i64::MIN;
        let mut close = |run: &mut Vec<SliceId>| {
            if run.len() >= min_ops {
                for ops in same_shape_chains(ctx, run, min_ops) {
                    if let Some(step) = ctx.step_at(track.source, t.slices.start[ops[0] as usize]) {
                        chains.push(Chain {
                            source: track.source,
                            step,
                            ops,
                        });
                    }
                }
            }
            run.clear();
        };
        for i in track.slices.clone() {
            if t.slice_class(i) != CategoryClass::CpuOp {
                continue;
            }
            if !shared.is_pointwise_op(ctx, i) {
                // Any op after the run's last op breaks it: an outermost one directly, a nested
                // one through the outer op already met (no ancestor walk needed).
                if !run.is_empty() && t.slices.start[i as usize] >= run_end {
                    close(&mut run);
                }
                continue;
            }
            // A pointwise op inside another op is that op's implementation, not a link.
            if !ctx.is_outermost_op(i) {
                continue;
            }
            run_end = t.slices.end(i);
            run.push(i);
        }
        close(&mut run);
    }
    // A chain's identity across steps: its call site, or its op names.
    let key = |c: &Chain| -> String {
        chain_site(ctx, c).unwrap_or_else(|| {
            c.ops
                .iter()
                .map(|&i| t.slice_name(i))
                .collect::<Vec<_>>()
                .join(">")
        })
    };
    let mut steps_of: BTreeMap<(u16, String), BTreeSet<usize>> = BTreeMap::new();
    for c in &chains {
        steps_of
            .entry((c.source, key(c)))
            .or_default()
            .insert(c.step);
    }
    let mut groups: BTreeMap<(u16, usize, String), Vec<Chain>> = BTreeMap::new();
    for c in chains {
        let k = key(&c);
        let steps_with_chain = steps_of
            .get(&(c.source, k.clone()))
            .map_or(0, BTreeSet::len);
        let steps_in_source = t.steps.iter().filter(|s| s.source == c.source).count();
        if steps_in_source >= 2 && steps_with_chain < 2 {
            continue;
        }
        groups.entry((c.source, c.step, k)).or_default().push(c);
    }
    groups
        .into_iter()
        .map(|((source, step, _), chains)| finding(ctx, source, step, &chains))
        .collect()
}

/// The chains in a run of consecutive elementwise ops: maximal stretches whose first input has
/// one shape of at least `pointwise_min_elems` elements, at least `min_ops` long.
fn same_shape_chains(ctx: &Context<'_>, run: &[SliceId], min_ops: usize) -> Vec<Vec<SliceId>> {
    let mut out = Vec::new();
    let mut current: Vec<SliceId> = Vec::new();
    let mut shape: Option<Vec<i64>> = None;
    for &i in run {
        // Exclusion first: it is a look-up, the shape a parse of the op's args.
        let link = if excluded(ctx, i) {
            None
        } else {
            tensor_arg(ctx, i, OpArg::InputDims, 0)
                .filter(|s| s.iter().product::<i64>() >= ctx.thresholds.pointwise_min_elems)
        };
        if link.is_some() && link == shape {
            current.push(i);
            continue;
        }
        if current.len() >= min_ops {
            out.push(std::mem::take(&mut current));
        }
        current.clear();
        if link.is_some() {
            current.push(i);
        }
        shape = link;
    }
    if current.len() >= min_ops {
        out.push(current);
    }
    out
}

/// Whether an op belongs to another detector's code or to no user code.
fn excluded(ctx: &Context<'_>, op: SliceId) -> bool {
    ctx.under_compile(op)
        || ctx.is_under(op, Under::OPTIMIZER_STEP)
        || ctx.is_under(op, Under::ZERO_GRAD)
        || ctx.is_under(op, Under::DATALOADER)
        || ctx.is_under(op, Under::BACKWARD)
}

/// The line of the chain: Python operators (`x * 0.5`) leave no frame of their own, so an op
/// reached through a builtin call (`torch.tanh`) on the same line names it; without one, the
/// first op's call site.
fn chain_site(ctx: &Context<'_>, chain: &Chain) -> Option<String> {
    let t = ctx.timeline;
    chain
        .ops
        .iter()
        .find_map(|&op| {
            let frame = ctx
                .ancestors(op)
                .find(|&a| t.slice_class(a) == CategoryClass::PythonFunction)?;
            if !t.slice_name(frame).starts_with("<built-in") {
                return None;
            }
            ctx.call_site(op)
        })
        .or_else(|| ctx.call_site(chain.ops[0]))
}

fn finding(ctx: &Context<'_>, source: u16, step: usize, chains: &[Chain]) -> Raised {
    let t = ctx.timeline;
    let s = &t.steps[step];
    let mut ranges = Vec::new();
    let mut lost = 0;
    for c in chains {
        let durs: Vec<i64> = c.ops.iter().map(|&i| t.slices.dur[i as usize]).collect();
        let keep = durs.iter().copied().max().unwrap_or(0);
        lost += durs.iter().sum::<i64>() - keep;
        ranges.extend(
            c.ops
                .iter()
                .map(|&i| (t.slices.start[i as usize], t.slices.end(i))),
        );
    }
    let first = chains[0].ops[0];
    let names: Vec<String> = chains[0]
        .ops
        .iter()
        .map(|&i| t.slice_name(i).trim_start_matches("aten::").to_owned())
        .collect();
    let call_site = chain_site(ctx, &chains[0]);
    Raised {
        kind: FindingKind::UnfusedPointwise,
        severity: Severity::of_share(lost, s.dur),
        title: format!(
            "{}× chain of {} elementwise ops ({}){} in {} ({} beyond one fused kernel)",
            chains.len(),
            chains[0].ops.len(),
            names.join(" → "),
            at_site(call_site.as_deref()),
            s.name,
            human_ns(lost)
        ),
        step: Some(step),
        start_ns: t.slices.start[first as usize],
        end_ns: chains[0]
            .ops
            .last()
            .map_or(t.slices.end(first), |&l| t.slices.end(l)),
        track: ctx.track_name(first),
        ops: {
            let mut ops: Vec<String> = chains
                .iter()
                .flat_map(|c| c.ops.iter().map(|&i| t.slice_name(i).to_owned()))
                .collect();
            ops.sort();
            ops.dedup();
            ops
        },
        call_site,
        count: chains.len() as u64,
        lost_ns: lost,
        evidence: chains
            .iter()
            .flat_map(|c| c.ops.iter())
            .take(MAX_EVIDENCE)
            .map(|&i| ctx.evidence(i))
            .collect(),
        cost: Cost::pattern(source, ranges),
        recommendation: ADVICE.into(),
    }
}
