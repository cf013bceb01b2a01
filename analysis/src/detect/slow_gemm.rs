//! `slow_gemm`: matrix multiplies that run far below what their shape allows, with the cause the
//! trace shows.
//!
//! The yardstick is the trace itself, never the datasheet. Per dtype, the trace's well-shaped
//! GEMM signatures ([`crate::op_perf`]) set the reference rate: their FLOPs over their kernel
//! time. Well-shaped means M, N and K are multiples of the Tensor Core alignment (16 bytes of
//! the dtype: 8 elements for 16-bit types, 4 for 32-bit, 16 for 8-bit), M and N at least 128, K
//! at least 64, at least 1 GFLOP per call, and no layout copy beside the call. A signature can
//! reach the reference, or the memory roof where its arithmetic intensity is lower: intensity ×
//! the highest bandwidth an elementwise signature of the trace reached over at least 50 µs of
//! kernels (inputs and output over kernel time; the device's memory bandwidth when no such op
//! ran). A GEMM signature is slow when its calls' FLOPs over their kernel time fall below
//! `slow_gemm_max_pct` of what it can reach, and the trace shows why, first cause first:
//! - `copy`: a sibling op under the same parent copied a tensor on the device (a transposed or
//!   non-contiguous input made contiguous for the GEMM: `contiguous` / `clone` / `reshape` down
//!   to a `copy_` that launched work; a dtype cast through `_to_copy` is not one);
//! - `tiny`: M or N (per batch) below 64, so most of each output tile is padding, or the GEMM is
//!   one of many small launches;
//! - `unaligned`: M, N or K not a multiple of the alignment;
//! - `fp32`: fp32 kernels without TF32 (their names say so) on a device with TF32 units, while
//!   other fp32 GEMMs of the trace use them.
//!
//! A slow signature with none of these is left alone: steplens cannot say what to change.
//!
//! One finding per step and cause. Lost time per call: its kernel time less the time its FLOPs
//! take at the attainable rate, as the first part of each of its kernels (clipped to the step's
//! window). Fixing it removes device work, so the saving is that time where it lies on the
//! step's critical path.

use std::collections::BTreeMap;

use rustc_hash::FxHashSet;
use steplens_ingest::model::{CategoryClass, NO_PARENT, SliceId};

use super::registry::{Detector, Raises, Saves, Threshold};
use super::{MAX_EVIDENCE, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
use crate::op_perf::{Family, GemmDims, Signature};
use steplens_ingest::intervals::IntervalSet;

const SLOW_GEMM_MAX_PCT: Threshold = Threshold::float(
    "slow_gemm_max_pct",
    50.0,
    "a GEMM signature whose rate is below this share of what the trace's well-shaped GEMMs of its dtype reach (or its memory roof) runs slow, percent.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "slow_gemm",
    raises: &[Raises::new(FindingKind::SlowGemm, Saves::DeviceWork)],
    thresholds: &[SLOW_GEMM_MAX_PCT],
    advice: "Give the GEMM well-aligned shapes (multiples of 8/16 in the inner dims) and batch small ones together.",
    detect: |ctx, _| detect(ctx),
};

/// Ops that copy a tensor into a new layout on the device.
const LAYOUT_COPY_OPS: &[&str] = &["aten::copy_", "aten::contiguous", "aten::clone"];
/// The ops a layout copy is made through, from the call that asked for it down to `copy_`.
const LAYOUT_CHAIN_OPS: &[&str] = &[
    "aten::copy_",
    "aten::contiguous",
    "aten::clone",
    "aten::reshape",
];

/// What makes a GEMM signature slow, first cause first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Cause {
    Copy,
    Tiny,
    Unaligned,
    Fp32,
}

impl Cause {
    fn what(self, align: i64) -> String {
        match self {
            Self::Copy => "GEMMs whose input is copied into a new layout first".to_owned(),
            Self::Tiny => "GEMMs with M or N below 64".to_owned(),
            Self::Unaligned => format!("GEMMs with M, N or K not a multiple of {align}"),
            Self::Fp32 => "fp32 GEMMs without TF32".to_owned(),
        }
    }

    fn advice(self) -> &'static str {
        match self {
            Self::Copy => {
                "An input is transposed or non-contiguous and copied before the GEMM. Pass the \
                 view to matmul/linear as it is (GEMMs read transposed operands without a copy), \
                 or make the tensor contiguous once, outside the loop."
            }
            Self::Tiny => {
                "Most of each output tile is padding. Batch the small multiplies (stack them \
                 into one bmm or a grouped GEMM, or raise the batch), or let torch.compile or \
                 CUDA graphs merge the launches."
            }
            Self::Unaligned => {
                "Pad the dimensions to a multiple of 8 elements for 16-bit types (4 for TF32, 16 \
                 for 8-bit): vocabulary, hidden and batch × sequence sizes. Tensor Cores run \
                 aligned shapes at full rate."
            }
            Self::Fp32 => {
                "Let fp32 matrix multiplies use TF32: \
                 torch.set_float32_matmul_precision(\"high\") (or \
                 torch.backends.cuda.matmul.allow_tf32 = True)."
            }
        }
    }
}

/// Elements per 16 bytes of `dtype` (`None`: not a type with an alignment rule).
fn alignment(dtype: &str) -> Option<i64> {
    let size = crate::op_names::dtype_size(dtype)?;
    (1..=8).contains(&size).then(|| 16 / size)
}

fn is_fp32(dtype: &str) -> bool {
    matches!(dtype.to_ascii_lowercase().as_str(), "float" | "float32")
}

fn well_shaped(g: &GemmDims, align: i64, flops: f64) -> bool {
    [g.m, g.n, g.k].iter().all(|d| d % align == 0)
        && g.m >= 128
        && g.n >= 128
        && g.k >= 64
        && flops >= 1e9
}

/// A GEMM signature with what it needs for judging.
struct Gemm<'s> {
    sig: &'s Signature,
    dims: GemmDims,
    flops: f64,
    align: i64,
    kernel_ns: i64,
    copy_beside: bool,
    /// Its kernels run plain fp32 (no TF32), by their names.
    plain_fp32: bool,
}

impl Gemm<'_> {
    /// FLOPs per ns (GFLOP/s).
    fn rate(&self) -> f64 {
        self.flops * self.sig.calls.len() as f64 / self.kernel_ns as f64
    }
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let sigs = &ctx.op_signatures().list;
    if !sigs.iter().any(|s| s.work.family == Some(Family::Gemm)) {
        return Vec::new();
    }
    // The op a layout copy was made under (the first op above the copy's own chain of
    // `contiguous` / `clone` / `reshape` / `copy_`): a GEMM under the same op has the copy
    // beside it. A dtype cast (`aten::to` → `_to_copy` → `copy_`) stops at `_to_copy`, so
    // autocast's casts inside `aten::linear` do not count.
    let copy_ids: Vec<u32> = LAYOUT_COPY_OPS
        .iter()
        .filter_map(|n| t.strings.lookup(n))
        .collect();
    let chain_ids: Vec<u32> = LAYOUT_CHAIN_OPS
        .iter()
        .filter_map(|n| t.strings.lookup(n))
        .collect();
    let mut copy_parents: FxHashSet<SliceId> = FxHashSet::default();
    for sig in sigs {
        let Some(&(first, _)) = sig.calls.first() else {
            continue;
        };
        if !copy_ids.contains(&t.slices.name[first as usize]) {
            continue;
        }
        for &(op, _) in &sig.calls {
            let mut at = t.slices.parent[op as usize];
            while at != NO_PARENT
                && (t.slice_class(at) != CategoryClass::CpuOp
                    || chain_ids.contains(&t.slices.name[at as usize]))
            {
                at = t.slices.parent[at as usize];
            }
            if at != NO_PARENT {
                copy_parents.insert(at);
            }
        }
    }
    let class = t
        .device
        .name
        .as_deref()
        .and_then(crate::device_rates::device_class);
    let has_tf32 = class.map_or_else(
        || {
            t.device
                .compute_capability
                .as_deref()
                .and_then(|cc| cc.split('.').next()?.parse::<i64>().ok())
                .is_some_and(|major| major >= 8)
        },
        |c| c.gemm.tf32 > c.gemm.fp32,
    );
    let signatures = ctx.op_signatures();
    let gemms: Vec<Gemm<'_>> = sigs
        .iter()
        .filter_map(|sig| {
            let dims = sig.work.gemm?;
            let flops = sig.work.flops?;
            let align = alignment(&sig.dtype)?;
            let kernel_ns: i64 = sig.calls.iter().map(|c| c.1).sum();
            if kernel_ns <= 0 || flops <= 0.0 {
                return None;
            }
            let parent_of = |op: SliceId| {
                let mut at = t.slices.parent[op as usize];
                while at != NO_PARENT && t.slice_class(at) != CategoryClass::CpuOp {
                    at = t.slices.parent[at as usize];
                }
                at
            };
            let copy_beside = sig.calls.iter().any(|&(op, _)| {
                let parent = parent_of(op);
                parent != NO_PARENT && copy_parents.contains(&parent)
            });
            // Plain fp32 when some kernel's name says fp32 and none says TF32 or lower.
            let said: Vec<bool> = sig
                .calls
                .iter()
                .flat_map(|&(op, _)| signatures.kernels_of(op))
                .filter_map(|k| super::precision::is_plain_fp32_kernel(t.slice_name(k)))
                .collect();
            let plain_fp32 = is_fp32(&sig.dtype) && !said.is_empty() && said.iter().all(|&p| p);
            Some(Gemm {
                sig,
                dims,
                flops,
                align,
                kernel_ns,
                copy_beside,
                plain_fp32,
            })
        })
        .collect();
    // Per dtype: the well-shaped GEMMs' FLOPs and kernel time.
    let mut reference: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for g in &gemms {
        if !g.copy_beside && well_shaped(&g.dims, g.align, g.flops) {
            let r = reference.entry(g.sig.dtype.as_str()).or_insert((0.0, 0.0));
            r.0 += g.flops * g.sig.calls.len() as f64;
            r.1 += g.kernel_ns as f64;
        }
    }
    let tf32_elsewhere = gemms.iter().any(|g| is_fp32(&g.sig.dtype) && !g.plain_fp32);
    // The memory roof, bytes per ns: the highest bandwidth an elementwise signature of the
    // trace reached over at least 50 µs of kernels (their bytes are exact: inputs and output),
    // else the device's.
    let bandwidth = sigs
        .iter()
        .filter(|s| s.work.family == Some(Family::Elementwise))
        .filter_map(|s| {
            let ns: i64 = s.calls.iter().map(|c| c.1).sum();
            let bytes = s.work.bytes?;
            (ns >= 50_000).then(|| bytes * s.calls.len() as f64 / ns as f64)
        })
        .fold(None, |best: Option<f64>, v| {
            Some(best.map_or(v, |b| b.max(v)))
        })
        .or_else(|| class.map(|c| c.memory_tbps * 1000.0));
    let max_share = ctx.thresholds.slow_gemm_max_pct / 100.0;
    // (source, step, cause) → the slow signatures' lost ranges and what they were.
    let mut groups: BTreeMap<(u16, usize, Cause), Group<'_>> = BTreeMap::new();
    for g in &gemms {
        let Some(&(flops, ns)) = reference.get(g.sig.dtype.as_str()) else {
            continue;
        };
        if ns <= 0.0 {
            continue;
        }
        let mut attainable = flops / ns;
        if let Some((bw, ai)) = bandwidth.zip(g.sig.work.arithmetic_intensity()) {
            attainable = attainable.min(ai * bw);
        }
        if attainable <= 0.0 || g.rate() >= max_share * attainable {
            continue;
        }
        let causes = [
            (g.copy_beside, Cause::Copy),
            (g.dims.m.min(g.dims.n) < 64, Cause::Tiny),
            (
                [g.dims.m, g.dims.n, g.dims.k]
                    .iter()
                    .any(|d| d % g.align != 0),
                Cause::Unaligned,
            ),
            (g.plain_fp32 && has_tf32 && tf32_elsewhere, Cause::Fp32),
        ];
        let Some(cause) = causes.iter().find(|c| c.0).map(|c| c.1) else {
            continue;
        };
        let at_attainable_ns = g.flops / attainable;
        for &(op, kernel_ns) in &g.sig.calls {
            let lost = kernel_ns as f64 - at_attainable_ns;
            if lost <= 0.0 || kernel_ns <= 0 {
                continue;
            }
            for k in signatures.kernels_of(op) {
                let track = &t.tracks[t.slices.track[k as usize] as usize];
                let start = t.slices.start[k as usize];
                let Some(step) = ctx.device_step_at(track.source, start) else {
                    continue;
                };
                let Some(w) = ctx.step_window(step) else {
                    continue;
                };
                let (a, b) = (start.max(w.start), t.slices.end(k).min(w.end));
                if b <= a {
                    continue;
                }
                let group = groups
                    .entry((track.source, step, cause))
                    .or_insert_with(|| Group {
                        align: g.align,
                        dtype: g.sig.dtype.as_str(),
                        ..Group::default()
                    });
                // The call's lost time, shared over its kernels by their time in the window.
                let kept = b - a;
                let part = if kept == kernel_ns {
                    lost
                } else {
                    lost * kept as f64 / kernel_ns as f64
                };
                let cut = a + part.round() as i64;
                group.ranges.push((a, cut));
                group.kernels.push(k);
                group.kernel_ns += b - a;
                group.flops += g.flops * (b - a) as f64 / kernel_ns as f64;
                group.attainable_ns += at_attainable_ns * (b - a) as f64 / kernel_ns as f64;
                *group.by_sig.entry(label(g)).or_insert(0) += cut - a;
            }
        }
    }
    groups
        .into_iter()
        .map(|((source, step, cause), group)| finding(ctx, source, step, cause, group))
        .collect()
}

#[derive(Default)]
struct Group<'s> {
    align: i64,
    dtype: &'s str,
    ranges: Vec<(i64, i64)>,
    kernels: Vec<SliceId>,
    kernel_ns: i64,
    flops: f64,
    attainable_ns: f64,
    by_sig: BTreeMap<SigLabel<'s>, i64>,
}

/// A signature as a user reads it: `aten::bmm M 606 · N 20 · K 160 × 2048 (float)`.
type SigLabel<'s> = (&'s str, String);

fn label<'s>(g: &Gemm<'s>) -> SigLabel<'s> {
    let d = g.dims;
    let batch = if d.b > 1 {
        format!(" × {}", d.b)
    } else {
        String::new()
    };
    (
        g.sig.name.as_str(),
        format!("M {} · N {} · K {}{batch}, {}", d.m, d.n, d.k, g.sig.dtype),
    )
}

fn finding(ctx: &Context<'_>, source: u16, step: usize, cause: Cause, group: Group<'_>) -> Raised {
    let t = ctx.timeline;
    let s = &t.steps[step];
    let step_ns = ctx.step_window(step).map_or(s.dur, |w| w.dur());
    let lost = IntervalSet::from_ranges(group.ranges.clone()).total();
    let mut ranked: Vec<(SigLabel<'_>, i64)> = group.by_sig.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let names: Vec<String> = ranked
        .iter()
        .map(|((name, shape), _)| format!("{name} ({shape})"))
        .collect();
    // FLOPs per ns = GFLOP/s; / 1000 = TFLOP/s.
    let achieved = group.flops / group.kernel_ns.max(1) as f64 / 1000.0;
    let reachable = group.flops / group.attainable_ns.max(1.0) / 1000.0;
    let first = group.kernels[0];
    Raised {
        kind: FindingKind::SlowGemm,
        severity: Severity::of_share(lost, step_ns),
        title: format!(
            "{} run at {achieved:.1} TFLOP/s in {}: {} of kernels in {} signatures ({}); at the {reachable:.1} TFLOP/s their shapes allow (this trace's well-shaped {} GEMMs, or its memory roof) they would take {} less",
            cause.what(group.align),
            s.name,
            human_ns(group.kernel_ns),
            ranked.len(),
            crate::units::name_list(&names),
            group.dtype,
            human_ns(lost),
        ),
        step: Some(step),
        start_ns: t.slices.start[first as usize],
        end_ns: t.slices.end(first),
        track: ctx.track_name(first),
        // The signatures, so that findings of one cause group apart from another's.
        ops: names,
        call_site: None,
        count: ranked.len() as u64,
        lost_ns: lost,
        evidence: group
            .kernels
            .iter()
            .take(MAX_EVIDENCE)
            .map(|&k| ctx.evidence(k))
            .collect(),
        cost: Cost::measured(source, group.ranges),
        recommendation: cause.advice().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::{alignment, well_shaped};
    use crate::op_perf::GemmDims;

    #[test]
    fn alignment_and_shape() {
        assert_eq!(alignment("c10::BFloat16"), Some(8));
        assert_eq!(alignment("float"), Some(4));
        assert_eq!(alignment("c10::Float8_e4m3fn"), Some(16));
        let dims = |m, n, k| GemmDims {
            m,
            n,
            k,
            b: 1,
            bias: false,
        };
        // 2·4096·4096·512 = 17.2 GFLOP: aligned and large.
        assert!(well_shaped(&dims(4096, 4096, 512), 8, 17.2e9));
        // N = 1000 is a multiple of 8 (125 × 8), not of 16.
        assert!(well_shaped(&dims(4096, 1000, 512), 8, 4.2e9));
        assert!(!well_shaped(&dims(4096, 1000, 512), 16, 4.2e9));
        // A vocabulary of 38,313 is odd.
        assert!(!well_shaped(&dims(512, 38_313, 2048), 4, 80.3e9));
        // N = 20 is below a tile.
        assert!(!well_shaped(&dims(606, 20, 160), 4, 8e9));
    }
}
