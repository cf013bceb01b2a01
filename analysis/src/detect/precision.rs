//! `no_mixed_precision`: matrix work (matmuls, convolutions, attention) runs in fp32 on a
//! device with fast reduced-precision units.
//!
//! Precision is judged at the innermost evidence: the kernel's own name when it says
//! (`sgemm`, `scudnn`, `tf32`, `f32` are fp32; `hgemm`, `h884`, `bf16`, `f16` are reduced), else
//! the innermost op that launched it (under autocast `aten::linear` still takes fp32 inputs,
//! casts them, and the `aten::addmm` inside takes bf16): its `Input type` first entry.
//!
//! Only where reduced precision is faster: CUDA devices with tensor cores (compute capability
//! 7.0 and up, from `deviceProperties`, or a Volta-or-later kernel name), ROCm devices (matrix
//! cores) and Gaudi (MME). A CPU trace does not show whether the CPU has bf16 units, and without
//! them bf16 is slower, so CPU traces get nothing.
//!
//! One finding per step when the fp32 matrix kernels that start in the step's window take at
//! least `fp32_compute_min_pct` of it (their time inside the window); count = the ops that
//! launched them. Lost time is an estimate: reduced-precision matrix units run at least twice
//! the fp32 (and TF32) rate, so half of each kernel's time in the window (its first half on the
//! clock, for the one-owner rule, where this kind comes after the syncs that wait for it).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, DeviceKind, NO_PARENT, OpArg, SliceId, TrackKind};

use super::{Context, MAX_EVIDENCE, human_ns, ranked_names};
use crate::finding::{Cost, Finding, FindingKind, Severity};
use crate::intervals::IntervalSet;

/// Ops whose kernels are matrix work.
const COMPUTE_OPS: &[&str] = &[
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::addbmm",
    "aten::matmul",
    "aten::linear",
    "aten::_addmm_activation",
    "aten::convolution",
    "aten::_convolution",
    "aten::cudnn_convolution",
    "aten::cudnn_convolution_transpose",
    "aten::miopen_convolution",
    "aten::convolution_backward",
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_efficient_attention_forward",
    "aten::_flash_attention_forward",
];

/// Kernel-name fragments of matrix work.
const MATRIX_KERNELS: &[&str] = &[
    "gemm",
    "conv",
    "fprop",
    "dgrad",
    "wgrad",
    "xmma",
    "cutlass",
    "matmul",
    "attention",
    "fmha",
];
const FP32_KERNELS: &[&str] = &["sgemm", "scudnn", "tf32", "f32f32", "_f32", "fp32", "s1688"];
const REDUCED_KERNELS: &[&str] = &[
    "hgemm", "h884", "h1688", "h16816", "bf16", "f16", "fp16", "half", "fp8", "e4m3", "i8816",
];
/// Kernel-name prefixes of CUDA architectures with tensor cores.
const TENSOR_CORE_ARCHS: &[&str] = &[
    "volta_", "turing_", "ampere_", "sm70", "sm75", "sm80", "sm86", "sm89", "sm90", "sm100",
];

const ADVICE: &str = "Run the forward pass under torch.autocast(device_type, dtype=torch.bfloat16) \
    (or float16 with torch.amp.GradScaler on GPUs without bf16) so matmuls and convolutions use \
    the device's reduced-precision units; keep the loss and optimizer state in fp32.";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Precision {
    Fp32,
    Reduced,
    Unknown,
}

fn precision_of_type(input_type: &str) -> Precision {
    match input_type {
        "float" | "Float" | "float32" => Precision::Fp32,
        "c10::Half" | "c10::BFloat16" | "Half" | "BFloat16" | "c10::Float8_e4m3fn"
        | "c10::Float8_e5m2" => Precision::Reduced,
        _ => Precision::Unknown,
    }
}

fn precision_of_kernel(name: &str) -> Precision {
    let lower = name.to_ascii_lowercase();
    if REDUCED_KERNELS.iter().any(|k| lower.contains(k)) {
        Precision::Reduced
    } else if FP32_KERNELS.iter().any(|k| lower.contains(k)) {
        Precision::Fp32
    } else {
        Precision::Unknown
    }
}

fn is_matrix_kernel(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    MATRIX_KERNELS.iter().any(|k| lower.contains(k))
}

/// Whether the trace's device runs reduced precision faster than fp32.
fn has_fast_reduced_precision(ctx: &Context<'_>) -> bool {
    let t = ctx.timeline;
    match t.device.kind {
        DeviceKind::Hpu | DeviceKind::Rocm => true,
        DeviceKind::Cuda => {
            if let Some(cc) = &t.device.compute_capability {
                let major: i64 = cc
                    .split('.')
                    .next()
                    .and_then(|m| m.parse().ok())
                    .unwrap_or(0);
                return major >= 7;
            }
            t.strings
                .iter()
                .any(|(_, s)| TENSOR_CORE_ARCHS.iter().any(|a| s.starts_with(a)))
        }
        DeviceKind::Mtia | DeviceKind::Cpu => false,
    }
}

/// The first entry of an op's `Input type`.
fn first_input_type(ctx: &Context<'_>, op: SliceId) -> Option<String> {
    let raw = ctx.arg(op, OpArg::InputType)?;
    let all: Vec<serde_json::Value> = serde_json::from_slice(raw).ok()?;
    all.first()?.as_str().map(str::to_owned)
}

/// A matrix kernel with the op that launched it.
struct MatrixKernel {
    kernel: SliceId,
    op: Option<SliceId>,
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Finding> {
    if !has_fast_reduced_precision(ctx) {
        return Vec::new();
    }
    let t = ctx.timeline;
    // The compute ops by name id, so a kernel's launching op is classified without comparing
    // strings.
    let compute_ids: Vec<u32> = COMPUTE_OPS
        .iter()
        .filter_map(|n| t.strings.lookup(n))
        .collect();
    // Kernel → the innermost op around its launch (by slice id; NO_PARENT: none).
    let mut launched_by: Vec<SliceId> = vec![NO_PARENT; t.slices.len()];
    for f in &t.flows {
        if t.slice_class(f.to) != CategoryClass::Kernel {
            continue;
        }
        let op = std::iter::once(f.from)
            .chain(ctx.ancestors(f.from))
            .find(|&a| t.slice_class(a) == CategoryClass::CpuOp);
        if let (Some(op), Some(slot)) = (op, launched_by.get_mut(f.to as usize)) {
            *slot = op;
        }
    }
    let mut per_step: BTreeMap<(u16, usize), Vec<MatrixKernel>> = BTreeMap::new();
    // Kernel names repeat and one op launches several kernels: classify each once.
    let mut by_kernel_name: FxHashMap<u32, (bool, Precision)> = FxHashMap::default();
    let mut by_op: FxHashMap<SliceId, Option<Precision>> = FxHashMap::default();
    for track in &t.tracks {
        if !matches!(track.kind, TrackKind::DeviceEngine { .. }) {
            continue;
        }
        for k in track.slices.clone() {
            if t.slice_class(k) != CategoryClass::Kernel {
                continue;
            }
            let op = launched_by
                .get(k as usize)
                .copied()
                .filter(|&o| o != NO_PARENT);
            let (matrix_name, name_precision) = *by_kernel_name
                .entry(t.slices.name[k as usize])
                .or_insert_with(|| {
                    let name = t.slice_name(k);
                    (is_matrix_kernel(name), precision_of_kernel(name))
                });
            let compute_op = op.filter(|&o| compute_ids.contains(&t.slices.name[o as usize]));
            let precision = match compute_op {
                // A kernel whose name says its precision (`sgemm`, `bf16`) is the innermost
                // evidence there is; otherwise the launching op's input type decides.
                Some(_) if name_precision != Precision::Unknown => name_precision,
                Some(o) => by_op
                    .entry(o)
                    .or_insert_with(|| first_input_type(ctx, o).map(|ty| precision_of_type(&ty)))
                    .unwrap_or(Precision::Unknown),
                None if matrix_name => name_precision,
                None => Precision::Unknown,
            };
            if precision != Precision::Fp32 {
                continue;
            }
            // The step whose window the kernel starts in.
            if let Some(step) = ctx.step_at(track.source, t.slices.start[k as usize]) {
                per_step
                    .entry((track.source, step))
                    .or_default()
                    .push(MatrixKernel { kernel: k, op });
            }
        }
    }
    let min_pct = ctx.thresholds.fp32_compute_min_pct;
    per_step
        .into_iter()
        .filter_map(|((source, step), kernels)| {
            let s = &t.steps[step];
            // Device time inside the step's window, as every per-step device figure.
            let in_window: Vec<(i64, i64)> = kernels
                .iter()
                .map(|m| {
                    let start = t.slices.start[m.kernel as usize].max(s.start);
                    (start, t.slices.end(m.kernel).min(s.end()).max(start))
                })
                .collect();
            let fp32_ns = IntervalSet::from_ranges(in_window.clone()).total();
            if s.dur <= 0 || (fp32_ns as f64) * 100.0 < min_pct * s.dur as f64 {
                return None;
            }
            // What twice the rate saves: the first half of each kernel.
            let halves: Vec<(i64, i64)> = in_window
                .into_iter()
                .map(|(a, b)| (a, a + (b - a) / 2))
                .collect();
            Some(finding(ctx, source, step, &kernels, halves, fp32_ns))
        })
        .collect()
}

fn finding(
    ctx: &Context<'_>,
    source: u16,
    step: usize,
    kernels: &[MatrixKernel],
    ranges: Vec<(i64, i64)>,
    fp32_ns: i64,
) -> Finding {
    let t = ctx.timeline;
    let s = &t.steps[step];
    let mut ops: Vec<SliceId> = kernels.iter().map(|m| m.op.unwrap_or(m.kernel)).collect();
    ops.sort_unstable();
    ops.dedup();
    let mut by_name: FxHashMap<u32, i64> = FxHashMap::default();
    for m in kernels {
        let named = m.op.unwrap_or(m.kernel);
        *by_name.entry(t.slices.name[named as usize]).or_insert(0) +=
            t.slices.dur[m.kernel as usize];
    }
    let names = ranked_names(t, by_name, 5);
    let lost = IntervalSet::from_ranges(ranges.clone()).total();
    let first = kernels[0].kernel;
    let share = fp32_ns as f64 * 100.0 / s.dur as f64;
    Finding {
        kind: FindingKind::NoMixedPrecision,
        severity: Severity::of_share(lost, s.dur),
        title: format!(
            "fp32 matrix work takes {share:.0}% of {} ({} in {} ops: {}); bf16/fp16 would save about {}",
            s.name,
            human_ns(fp32_ns),
            ops.len(),
            names.join(", "),
            human_ns(lost)
        ),
        step: Some(s.name.clone()),
        start_ns: t.slices.start[first as usize],
        end_ns: t.slices.end(first),
        track: ctx.track_name(first),
        ops: names,
        call_site: None,
        count: ops.len() as u64,
        source: None,
        rank: None,
        lost_ns: lost,
        saving_ns: 0,
        evidence: kernels
            .iter()
            .take(MAX_EVIDENCE)
            .map(|m| ctx.evidence(m.kernel))
            .collect(),
        cost: Cost::measured(source, ranges),
        recommendation: ADVICE.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Precision, precision_of_kernel, precision_of_type};

    #[test]
    fn kernel_names_and_types() {
        assert_eq!(
            precision_of_kernel("volta_sgemm_128x64_tn"),
            Precision::Fp32
        );
        assert_eq!(
            precision_of_kernel("sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n"),
            Precision::Fp32
        );
        assert_eq!(
            precision_of_kernel("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn"),
            Precision::Reduced
        );
        assert_eq!(
            precision_of_kernel("ampere_bf16_s16816gemm_bf16_128x64"),
            Precision::Reduced
        );
        assert_eq!(precision_of_kernel("Gemm"), Precision::Unknown);
        assert_eq!(precision_of_type("float"), Precision::Fp32);
        assert_eq!(precision_of_type("c10::BFloat16"), Precision::Reduced);
        assert_eq!(precision_of_type("long int"), Precision::Unknown);
    }
}
