//! `data_parallel`: the step runs `nn.DataParallel`, one process driving several devices.
//!
//! Every `DataParallel.forward` copies the module to each device (`replicate`: the autograd
//! function `Broadcast`, which the profiler records under its class name), splits the batch
//! (`Scatter`), runs the replicas on Python threads (`parallel_apply`) and gathers the outputs
//! on the first device (`Gather`). The trace shows these functions as ops, and with stacks the
//! frames of `torch/nn/parallel/data_parallel.py`.
//!
//! One finding per step; count = `DataParallel` forward calls (the `Broadcast` ops that
//! replicate the module; the `forward` frames when the trace has stacks). A pattern finding: the
//! real cost, one Python process and its GIL feeding every device, is not one slice; the lost
//! time it names is the host time of replicate, scatter and gather, which
//! DistributedDataParallel does not spend.

use std::collections::BTreeMap;

use steplens_ingest::model::{CategoryClass, SliceId};

use super::registry::{Detector, Raises, Saves};
use super::{MAX_EVIDENCE, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
use steplens_ingest::intervals::IntervalSet;
/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "data_parallel",
    raises: &[Raises::new(FindingKind::DataParallel, Saves::DeviceWork)],
    thresholds: &[],
    advice: "Use DistributedDataParallel, one process per device, instead of nn.DataParallel.",
    detect: |ctx, _| detect(ctx),
};

/// Autograd functions of DataParallel's forward, as the profiler names them.
const REPLICATE: &str = "Broadcast";
const MACHINERY: &[&str] = &["Broadcast", "Scatter", "Gather", "ReduceAddCoalesced"];
/// Python frame of DataParallel's forward.
const FORWARD_FRAME: &str = "torch/nn/parallel/data_parallel.py(";

const ADVICE: &str = "nn.DataParallel drives every device from one Python process: each step \
    copies the model to every device, splits the batch and gathers the outputs on the first \
    one, all under one GIL. Use DistributedDataParallel with one process per device (torchrun \
    --nproc_per_node=N): gradients are all-reduced while backward runs and nothing is \
    replicated per step.";

#[derive(Default)]
struct StepCalls {
    machinery: Vec<SliceId>,
    replicas: usize,
    forward_frames: usize,
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    if t.strings.lookup(REPLICATE).is_none() {
        return Vec::new();
    }
    let mut per_step: BTreeMap<(u16, usize), StepCalls> = BTreeMap::new();
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            let name = t.slice_name(i);
            let class = t.slice_class(i);
            let machinery = MACHINERY.contains(&name) && ctx.is_outermost_op(i);
            let frame = class == CategoryClass::PythonFunction
                && name.starts_with(FORWARD_FRAME)
                && name.ends_with(": forward");
            if !machinery && !frame {
                continue;
            }
            let Some(step) = ctx.step_at(track.source, t.slices.start[i as usize]) else {
                continue;
            };
            let calls = per_step.entry((track.source, step)).or_default();
            if frame {
                calls.forward_frames += 1;
            } else {
                calls.replicas += usize::from(name == REPLICATE);
                calls.machinery.push(i);
            }
        }
    }
    per_step
        .into_iter()
        .filter(|(_, calls)| calls.replicas > 0)
        .map(|((source, step), calls)| {
            let s = &t.steps[step];
            let count = if calls.forward_frames > 0 {
                calls.forward_frames
            } else {
                calls.replicas
            };
            let ranges: Vec<(i64, i64)> = calls
                .machinery
                .iter()
                .map(|&i| (t.slices.start[i as usize], t.slices.end(i)))
                .collect();
            let lost = IntervalSet::from_ranges(ranges.clone()).total();
            let first = calls.machinery[0];
            let mut ops: Vec<String> = calls
                .machinery
                .iter()
                .map(|&i| t.slice_name(i).to_owned())
                .collect();
            ops.sort();
            ops.dedup();
            Raised {
                kind: FindingKind::DataParallel,
                severity: Severity::Warning,
                title: format!(
                    "{count}× nn.DataParallel forward in {} ({} replicating, scattering and gathering on the host)",
                    s.name,
                    human_ns(lost)
                ),
                step: Some(step),
                start_ns: t.slices.start[first as usize],
                end_ns: t.slices.end(first),
                track: ctx.track_name(first),
                ops,
                call_site: ctx.call_site(first),
                count: count as u64,
                lost_ns: lost,
                evidence: calls
                    .machinery
                    .iter()
                    .take(MAX_EVIDENCE)
                    .map(|&i| ctx.evidence(i))
                    .collect(),
                cost: Cost::pattern(source, ranges),
                recommendation: ADVICE.into(),
            }
        })
        .collect()
}
