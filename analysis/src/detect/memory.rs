//! `memory_growth` and `reserved_slack`: the allocator's figures per device over the steps
//! ([`crate::memory`], the report's memory table, reads the same per-device series).

use super::registry::{Detector, Raises, Saves, Threshold};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
use crate::memory::{DeviceMemory, human_bytes};

const MEMORY_GROWTH_MIN_BYTES: Threshold = Threshold::int(
    "memory_growth_min_bytes",
    1_048_576,
    "the allocated baseline must rise by at least this much over the run of steps, bytes.",
);

const RESERVED_SLACK_MIN_BYTES: Threshold = Threshold::int(
    "reserved_slack_min_bytes",
    268_435_456,
    "reserved − allocated at their peaks must reach this, bytes.",
);

const RESERVED_SLACK_MIN_PCT: Threshold = Threshold::float(
    "reserved_slack_min_pct",
    30.0,
    "reserved − allocated at their peaks must also reach this share of the peak reserved, percent.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "memory",
    raises: &[
        Raises::new(FindingKind::MemoryGrowth, Saves::NotStepTime),
        Raises::new(FindingKind::ReservedSlack, Saves::NotStepTime),
    ],
    thresholds: &[
        MEMORY_GROWTH_MIN_BYTES,
        RESERVED_SLACK_MIN_BYTES,
        RESERVED_SLACK_MIN_PCT,
    ],
    advice: "Free what each step keeps alive (detach logged tensors, clear caches of outputs), and cap the allocator's cache (PYTORCH_CUDA_ALLOC_CONF) where reserved memory sits unused.",
    detect: |ctx, _| findings(ctx, ctx.memory()),
};

const GROWTH_ADVICE: &str = "Memory allocated at the start of each step keeps rising: something \
    outlives its step. Look for tensors kept across iterations (a list of losses or outputs \
    without .item()/.detach(), caches keyed by step, hooks that store activations) and release \
    them, or store detached CPU copies of what you log.";

/// `memory_growth` on a Gaudi (`hpu:N`): the same references to release, and where lazy mode
/// needs its mark_steps (Intel Gaudi docs: Optimization in PyTorch Models, "Usage of
/// mark_step").
const HPU_GROWTH_ADVICE: &str = "HPU memory allocated at the start of each step keeps rising: \
    something outlives its step. Release tensors kept across iterations (a list of losses or \
    outputs without .item()/.detach(), caches keyed by step, hooks that store activations), or \
    keep detached CPU copies of what you log. In lazy mode call htcore.mark_step() after \
    loss.backward() and after optimizer.step(), so that each step's graph runs and frees its \
    intermediates instead of growing into the next step.";

const SLACK_ADVICE: &str = "The caching allocator holds far more memory than is allocated \
    (fragmentation from changing tensor sizes). Set \
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, keep shapes steady (pad or bucket), and \
    release the cache deliberately (torch.cuda.empty_cache()) only between phases, never \
    inside the step.";

/// Whether `device` (as [`DeviceMemory::device`] names it) is a Gaudi.
fn is_hpu(device: &str) -> bool {
    device.starts_with("hpu:")
}

/// `memory_growth` and `reserved_slack` findings from the per-device memory.
#[must_use]
fn findings(ctx: &Context<'_>, memory: &[DeviceMemory]) -> Vec<Raised> {
    let th = ctx.thresholds;
    let source = ctx.timeline.steps.first().map_or(0, |s| s.source);
    let mut out = Vec::new();
    for m in memory {
        if let Some(f) = growth(ctx, m, source) {
            out.push(f);
        }
        let slack = m.peak_reserved_bytes - m.peak_allocated_bytes;
        // A Gaudi's `Total Reserved` is the bridge's memory pool, taken whole when the device
        // opens, not memory a caching allocator grew into: its slack is by design, not
        // fragmentation. (gaudi-pytorch-bridge: `device_memory` creates the pool in its
        // constructor; `CoalescedStringentPooling::pool_create` takes
        // `PT_HPU_POOL_MEM_ACQUIRE_PERC`, default 100, % of the free HBM with one
        // `synDeviceMalloc`; `device_memory::record` writes the pool's `memory_limit` as every
        // `[memory]` event's `Total Reserved`.)
        if !is_hpu(&m.device)
            && m.peak_reserved_bytes > 0
            && slack >= th.reserved_slack_min_bytes
            && slack as f64 >= m.peak_reserved_bytes as f64 * th.reserved_slack_min_pct / 100.0
        {
            out.push(Raised {
                kind: FindingKind::ReservedSlack,
                severity: Severity::Warning,
                title: format!(
                    "{}: {} reserved at peak but at most {} allocated ({} never used by tensors)",
                    m.device,
                    human_bytes(m.peak_reserved_bytes),
                    human_bytes(m.peak_allocated_bytes),
                    human_bytes(slack)
                ),
                step: None,
                start_ns: m.peak_allocated_ns,
                end_ns: m.peak_allocated_ns,
                track: None,
                ops: Vec::new(),
                call_site: None,
                count: 1,
                lost_ns: 0,
                evidence: Vec::new(),
                cost: Cost::pattern(source, Vec::new()),
                recommendation: SLACK_ADVICE.into(),
            });
        }
    }
    out
}

/// The longest run of ≥ 3 steps whose start baseline rises at every step, when it rises by at
/// least `memory_growth_min_bytes` in all.
fn growth(ctx: &Context<'_>, m: &DeviceMemory, source: u16) -> Option<Raised> {
    let steps = &m.steps;
    let (mut best, mut run_start) = ((0, 0), 0);
    for k in 1..steps.len() {
        if steps[k].start_allocated_bytes <= steps[k - 1].start_allocated_bytes {
            run_start = k;
        }
        if k - run_start > best.1 - best.0 {
            best = (run_start, k);
        }
    }
    let (first, last) = best;
    if last - first + 1 < 3 {
        return None;
    }
    let rise = steps[last].start_allocated_bytes - steps[first].start_allocated_bytes;
    if rise < ctx.thresholds.memory_growth_min_bytes {
        return None;
    }
    let per_step = rise / (last - first) as i64;
    let t = ctx.timeline;
    let window = |name: &str| t.step_named(source, name).map(|i| &t.steps[i]);
    let (start_ns, end_ns) = (
        window(&steps[first].step).map_or(0, |s| s.start),
        window(&steps[last].step).map_or(0, |s| s.start),
    );
    let top = m.never_freed.first();
    Some(Raised {
        kind: FindingKind::MemoryGrowth,
        severity: Severity::Warning,
        title: format!(
            "{}: allocated memory at step start grows {} per step over {} steps (+{}){}",
            m.device,
            human_bytes(per_step),
            last - first + 1,
            human_bytes(rise),
            top.map(|h| format!(
                "; never freed: {} in {} allocation(s) from {}{}",
                human_bytes(h.bytes),
                h.count,
                h.op,
                crate::detect::at_site(h.call_site.as_deref())
            ))
            .unwrap_or_default()
        ),
        step: None,
        start_ns,
        end_ns,
        track: None,
        ops: m.never_freed.iter().take(3).map(|h| h.op.clone()).collect(),
        call_site: top.and_then(|h| h.call_site.clone()),
        count: top.map_or(0, |h| h.count),
        lost_ns: 0,
        evidence: Vec::new(),
        cost: Cost::pattern(source, Vec::new()),
        recommendation: if is_hpu(&m.device) {
            HPU_GROWTH_ADVICE
        } else {
            GROWTH_ADVICE
        }
        .into(),
    })
}
