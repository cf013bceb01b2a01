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
//! One finding per step when the fp32 matrix kernels that start in the step's device-inclusive
//! window take at least `fp32_compute_min_pct` of it (their time inside the window); count = the
//! ops that launched them. Lost time is what bf16 takes off each kernel at the rates GEMMs reach
//! on the trace's device class ([`crate::device_rates`]): `1 − rate(fp32) / rate(bf16)` of it
//! (TF32 kernels: `1 − rate(tf32) / rate(bf16)`), as the first part of the kernel on the clock
//! (for the one-owner rule, where this kind comes after the syncs that wait for it). A device
//! steplens has no rates for is priced at half of each kernel: reduced precision at least
//! doubles the matrix rate on every device that has it. The saving is that lost time where it
//! lies on the step's critical path, so a device-bound step saves most of it and a host-bound
//! step next to nothing.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, DeviceKind, OpArg, SliceId, TrackKind};

use super::registry::{Detector, Raises, Saves, Threshold};
use super::{MAX_EVIDENCE, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
use steplens_ingest::intervals::IntervalSet;
const FP32_COMPUTE_MIN_PCT: Threshold = Threshold::float(
    "fp32_compute_min_pct",
    10.0,
    "fp32 matrix kernels must take at least this share of the step, percent.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "precision",
    raises: &[Raises::new(
        FindingKind::NoMixedPrecision,
        Saves::DeviceWork,
    )],
    thresholds: &[FP32_COMPUTE_MIN_PCT],
    advice: "Run the matrix work in bf16/fp16 under torch.autocast, or allow TF32 (torch.backends.cuda.matmul.allow_tf32).",
    detect: |ctx, _| detect(ctx),
};

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
const FP32_KERNELS: &[&str] = &["sgemm", "scudnn", "f32f32", "_f32", "fp32"];
/// TF32 tensor-core kernels (`s1688`/`s16816` are cuBLAS/CUTLASS's TF32 tensor ops).
const TF32_KERNELS: &[&str] = &["tf32", "s1688", "s16816", "xf32"];
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
    /// fp32 data on TF32 tensor cores.
    Tf32,
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
    } else if TF32_KERNELS.iter().any(|k| lower.contains(k)) {
        Precision::Tf32
    } else if FP32_KERNELS.iter().any(|k| lower.contains(k)) {
        Precision::Fp32
    } else {
        Precision::Unknown
    }
}

/// Whether a kernel's name says it runs fp32 without TF32 (`Some(false)`: TF32 or reduced
/// precision; `None`: the name does not say).
pub(super) fn is_plain_fp32_kernel(name: &str) -> Option<bool> {
    match precision_of_kernel(name) {
        Precision::Fp32 => Some(true),
        Precision::Tf32 | Precision::Reduced => Some(false),
        Precision::Unknown => None,
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

/// What a finding names a kernel by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Unit {
    /// The op that launched it (or the kernel itself, launched outside any op).
    Op(SliceId),
    /// The graph launch of the replayed CUDA/HIP graph that ran it.
    Graph(SliceId),
}

/// A matrix kernel with the op that launched it.
struct MatrixKernel {
    kernel: SliceId,
    op: Option<SliceId>,
    /// Runs on TF32 tensor cores (else plain fp32).
    tf32: bool,
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
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
            // The innermost op around the call that launched it (the launch index's link;
            // a driver-API launch where there is no runtime one).
            let op = ctx.launches().launcher_or_driver(k).and_then(|r| {
                std::iter::once(r)
                    .chain(ctx.ancestors(r))
                    .find(|&a| t.slice_class(a) == CategoryClass::CpuOp)
            });
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
            let tf32 = match precision {
                Precision::Fp32 => false,
                Precision::Tf32 => true,
                Precision::Reduced | Precision::Unknown => continue,
            };
            // The step whose device-inclusive window the kernel starts in.
            if let Some(step) = ctx.device_step_at(track.source, t.slices.start[k as usize]) {
                per_step
                    .entry((track.source, step))
                    .or_default()
                    .push(MatrixKernel {
                        kernel: k,
                        op,
                        tf32,
                    });
            }
        }
    }
    let min_pct = ctx.thresholds.fp32_compute_min_pct;
    let class = t
        .device
        .name
        .as_deref()
        .and_then(crate::device_rates::device_class);
    let share_saved = |tf32: bool| class.map_or(0.5, |c| c.reduced_precision_saving(tf32));
    per_step
        .into_iter()
        .filter_map(|((source, step), kernels)| {
            let w = ctx.step_window(step)?;
            // Device time inside the step's window, as every per-step device figure.
            let in_window: Vec<(i64, i64)> = kernels
                .iter()
                .map(|m| {
                    let start = t.slices.start[m.kernel as usize].max(w.start);
                    (start, t.slices.end(m.kernel).min(w.end).max(start))
                })
                .collect();
            let fp32_ns = IntervalSet::from_ranges(in_window.clone()).total();
            if w.dur() <= 0 || (fp32_ns as f64) * 100.0 < min_pct * w.dur() as f64 {
                return None;
            }
            // What bf16's rate takes off: the first part of each kernel.
            let saved: Vec<(i64, i64)> = in_window
                .into_iter()
                .zip(&kernels)
                .map(|((a, b), m)| (a, a + ((b - a) as f64 * share_saved(m.tf32)).round() as i64))
                .collect();
            Some(finding(ctx, source, step, &kernels, saved, fp32_ns, class))
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
    class: Option<&crate::device_rates::DeviceClass>,
) -> Raised {
    let t = ctx.timeline;
    let s = &t.steps[step];
    let step_ns = ctx.step_window(step).map_or(s.dur, |w| w.dur());
    // What each kernel is named by: the op that launched it, or, for a kernel a replayed
    // CUDA/HIP graph ran, that graph as one unit (its launch, its kernel count).
    let unit_of = |m: &MatrixKernel| {
        ctx.graph_launch_of(m.kernel)
            .map_or(Unit::Op(m.op.unwrap_or(m.kernel)), Unit::Graph)
    };
    let mut by_unit: BTreeMap<Unit, i64> = BTreeMap::new();
    for m in kernels {
        *by_unit.entry(unit_of(m)).or_insert(0) += t.slices.dur[m.kernel as usize];
    }
    // Units of one name (ops called alike, graphs of one op and size) are listed as one.
    let mut by_label: FxHashMap<String, i64> = FxHashMap::default();
    for (&unit, &ns) in &by_unit {
        let label = match unit {
            Unit::Graph(call) => ctx.graph_label(call),
            Unit::Op(op) => t.slice_name(op).to_owned(),
        };
        *by_label.entry(label).or_insert(0) += ns;
    }
    let mut ranked: Vec<(String, i64)> = by_label.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let names: Vec<String> = ranked.into_iter().take(5).map(|(n, _)| n).collect();
    let lost = IntervalSet::from_ranges(ranges.clone()).total();
    let first = kernels[0].kernel;
    let share = fp32_ns as f64 * 100.0 / step_ns as f64;
    let (tf32, fp32) = (
        kernels.iter().any(|m| m.tf32),
        kernels.iter().any(|m| !m.tf32),
    );
    let rates = class.map_or_else(
        || "at least twice the rate in bf16".to_owned(),
        |c| {
            let against = match (fp32, tf32) {
                (true, true) => format!("{:.0} in fp32, {:.0} in TF32", c.gemm.fp32, c.gemm.tf32),
                (false, true) => format!("{:.0} in TF32", c.gemm.tf32),
                _ => format!("{:.0} in fp32", c.gemm.fp32),
            };
            format!(
                "{} GEMMs reach about {:.0} TFLOP/s in bf16 against {against}",
                c.name, c.gemm.bf16
            )
        },
    );
    Raised {
        kind: FindingKind::NoMixedPrecision,
        severity: Severity::of_share(lost, step_ns),
        title: format!(
            "fp32 matrix work takes {share:.0}% of {} ({} in {} {}: {}); bf16/fp16 would take about {} off it ({rates})",
            s.name,
            human_ns(fp32_ns),
            by_unit.len(),
            if by_unit.keys().any(|u| matches!(u, Unit::Graph(_))) {
                "ops and graphs"
            } else {
                "ops"
            },
            crate::units::name_list(&names),
            human_ns(lost)
        ),
        step: Some(step),
        start_ns: t.slices.start[first as usize],
        end_ns: t.slices.end(first),
        track: ctx.track_name(first),
        ops: names,
        call_site: None,
        count: by_unit.len() as u64,
        lost_ns: lost,
        // A graph's kernels are shown by its launch, once.
        evidence: {
            let mut shown: Vec<SliceId> = Vec::new();
            for m in kernels {
                let slice = ctx.graph_launch_of(m.kernel).unwrap_or(m.kernel);
                if shown.len() < MAX_EVIDENCE && !shown.contains(&slice) {
                    shown.push(slice);
                }
            }
            shown.into_iter().map(|s| ctx.evidence(s)).collect()
        },
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
            Precision::Tf32
        );
        assert_eq!(
            precision_of_kernel(
                "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma"
            ),
            Precision::Fp32
        );
        assert_eq!(
            precision_of_kernel("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4"),
            Precision::Tf32
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
