//! The per-op performance model: the work each op signature does (FLOPs and bytes moved per
//! call, [`work`]), what its kernels achieved, and how close that is to the device's peak
//! (`device_rates`), as `op_perf[]` in the report; the `slow_gemm` detector reads the same
//! signatures.
//!
//! A signature is an op name with its input shapes, dtypes and concrete inputs. Its calls' kernels
//! are the device work the op's own runtime calls launched (the innermost op around the launch;
//! driver-API launches count, as cuBLASLt launches its GEMMs through them).

mod work;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use steplens_ingest::model::{ARGS_AHEAD, CategoryClass, NO_PARENT, OpArg, SliceId, Timeline};

use crate::device_rates::DeviceClass;
pub use work::{Family, GemmDims, Operand, Work, work_of};

/// One op signature and its calls.
pub(crate) struct Signature {
    /// Op name.
    pub(crate) name: String,
    /// `Input Dims` as the trace writes them.
    pub(crate) shape: String,
    /// The first input's dtype.
    pub(crate) dtype: String,
    /// The work of one call.
    pub(crate) work: Work,
    /// Per call: the op's slice and its kernels' time, ns, in slice order.
    pub(crate) calls: Vec<(SliceId, i64)>,
}

/// Every signature whose calls launched device work, with the launches they were built from.
pub(crate) struct Signatures {
    /// The signatures, in order of their first call's slice.
    pub(crate) list: Vec<Signature>,
    /// (op, device slice) for every launch counted, sorted.
    launched: Vec<(SliceId, SliceId)>,
}

impl Signatures {
    /// The signatures of `t`, from its launch index and its ops' args (read through `arg`, the
    /// analysis' memo).
    pub(crate) fn new<'t>(
        t: &'t Timeline,
        launches: &steplens_ingest::model::Launches,
        arg: &dyn Fn(SliceId, OpArg) -> Option<&'t [u8]>,
    ) -> Self {
        // cuBLASLt launches its GEMMs through the driver API: those links count here.
        let mut launched: Vec<(SliceId, SliceId)> = Vec::new();
        for track in t.tracks.iter().filter(|tr| tr.kind.is_device()) {
            for d in track.slices.clone() {
                if !t.slice_class(d).is_device_work() {
                    continue;
                }
                let Some(runtime) = launches.launcher_or_driver(d) else {
                    continue;
                };
                let mut at = t.slices.parent[runtime as usize];
                while at != NO_PARENT && t.slice_class(at) != CategoryClass::CpuOp {
                    at = t.slices.parent[at as usize];
                }
                if at != NO_PARENT {
                    launched.push((at, d));
                }
            }
        }
        launched.sort_unstable();
        // Keyed by the name and the raw `Input Dims`, `Input type` and `Concrete Inputs`
        // bytes: parsed once per signature, not once per call.
        type SigKey<'a> = (u32, &'a [u8], &'a [u8], &'a [u8]);
        let mut index: FxHashMap<SigKey<'_>, usize> = FxHashMap::default();
        let mut list: Vec<Signature> = Vec::new();
        let runs: Vec<&[(SliceId, SliceId)]> = launched.chunk_by(|a, b| a.0 == b.0).collect();
        for (k, run) in runs.iter().enumerate() {
            // The args of the ops' shapes and types: the next ops' fetched together.
            if k % ARGS_AHEAD == 0 {
                let ahead = runs.iter().skip(k + ARGS_AHEAD).take(ARGS_AHEAD);
                t.touch_args(ahead.map(|run| run[0].0), 256);
            }
            let op = run[0].0;
            let kernel_ns: i64 = run.iter().map(|&(_, d)| t.slices.dur[d as usize]).sum();
            let dims = arg(op, OpArg::InputDims);
            let types = arg(op, OpArg::InputType);
            let concrete = arg(op, OpArg::ConcreteInputs);
            let key = (
                t.slices.name[op as usize],
                dims.unwrap_or_default(),
                types.unwrap_or_default(),
                concrete.unwrap_or_default(),
            );
            let at = *index.entry(key).or_insert_with(|| {
                let inputs = operands(dims, types);
                let name = t.slice_name(op).to_owned();
                let work = work_of(&name, &inputs, &concrete_inputs(concrete));
                list.push(Signature {
                    dtype: inputs.first().map(|o| o.dtype.clone()).unwrap_or_default(),
                    shape: dims
                        .map(|d| String::from_utf8_lossy(d).into_owned())
                        .unwrap_or_default(),
                    name,
                    work,
                    calls: Vec::new(),
                });
                list.len() - 1
            });
            list[at].calls.push((op, kernel_ns));
        }
        Self { list, launched }
    }

    /// The device work op `op` launched, in slice order.
    pub(crate) fn kernels_of(&self, op: SliceId) -> impl Iterator<Item = SliceId> + '_ {
        let from = self.launched.partition_point(|&(o, _)| o < op);
        self.launched[from..]
            .iter()
            .take_while(move |&&(o, _)| o == op)
            .map(|&(_, d)| d)
    }
}

/// One row of `op_perf[]`: an op signature, its work per call and what its kernels achieved.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpPerf {
    /// Op name.
    pub name: String,
    /// Its family (`gemm`, `conv`, `attention`, `norm`, `elementwise`, `reduce`,
    /// `communication`, `other`).
    pub family: Family,
    /// `Input Dims` as the trace writes them.
    pub input_shape: String,
    /// The first input's dtype.
    pub dtype: String,
    /// Calls.
    pub calls: u64,
    /// Kernel time of the calls, ns (the device work their own launches started).
    pub kernel_ns: i64,
    /// Shortest and longest call's kernel time, ns.
    pub kernel_min_ns: i64,
    /// …
    pub kernel_max_ns: i64,
    /// FLOPs per call (null outside the model's families).
    pub flops_per_call: Option<f64>,
    /// Bytes moved per call (null without shapes and dtypes).
    pub bytes_per_call: Option<f64>,
    /// FLOPs per byte.
    pub flops_per_byte: Option<f64>,
    /// Mean over calls of FLOPs / kernel time, TFLOP/s.
    pub tflops_per_s_mean: Option<f64>,
    /// All calls' FLOPs / all their kernel time, TFLOP/s.
    pub tflops_per_s: Option<f64>,
    /// Mean over calls of bytes / kernel time, TB/s.
    pub tbytes_per_s_mean: Option<f64>,
    /// The aggregate achieved rate as a share of the device's dense peak for the op's own
    /// dtype, percent (null without a known device or dtype).
    pub pct_of_peak_compute: Option<f64>,
    /// The aggregate bytes per second as a share of the device's memory bandwidth, percent.
    pub pct_of_peak_bandwidth: Option<f64>,
    /// `compute` or `memory`: the arithmetic intensity against the device's ridge point for the
    /// dtype (null without both).
    pub bound: Option<String>,
    /// A GEMM's dimensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemm: Option<GemmDims>,
}

impl OpPerf {
    /// All calls' bytes over all their kernel time, TB/s.
    #[must_use]
    pub fn tbytes_per_s(&self) -> Option<f64> {
        self.bytes_per_call
            .filter(|_| self.kernel_ns > 0)
            .map(|b| b * self.calls as f64 / self.kernel_ns as f64 / 1000.0)
    }
}

/// Parses one signature's args.
fn operands(dims: Option<&[u8]>, types: Option<&[u8]>) -> Vec<Operand> {
    let dims: Vec<serde_json::Value> = dims
        .and_then(|raw| serde_json::from_slice(raw).ok())
        .unwrap_or_default();
    let types: Vec<serde_json::Value> = types
        .and_then(|raw| serde_json::from_slice(raw).ok())
        .unwrap_or_default();
    dims.iter()
        .enumerate()
        .map(|(i, d)| Operand {
            dims: d
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_i64).collect())
                .unwrap_or_default(),
            dtype: types
                .get(i)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        })
        .collect()
}

fn concrete_inputs(raw: Option<&[u8]>) -> Vec<String> {
    let values: Vec<serde_json::Value> = raw
        .and_then(|r| serde_json::from_slice(r).ok())
        .unwrap_or_default();
    values
        .iter()
        .map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// The dense peak for a dtype, TFLOP/s (`None`: no peak known for it).
pub(crate) fn peak_for(class: &DeviceClass, dtype: &str) -> Option<f64> {
    let lower = dtype.to_ascii_lowercase();
    if lower == "float" || lower == "float32" {
        Some(class.peak.fp32)
    } else if lower.contains("bfloat16") || lower.contains("half") || lower == "float16" {
        Some(class.peak.bf16)
    } else {
        None
    }
}

/// The `op_perf[]` rows of `t`'s signatures: one per op signature whose calls launched device
/// work, by kernel time (`context::Context::op_perf` gives them for an analysis).
#[must_use]
pub(crate) fn rows(t: &Timeline, signatures: &Signatures) -> Vec<OpPerf> {
    let class = t
        .device
        .name
        .as_deref()
        .and_then(crate::device_rates::device_class);
    let mut rows: Vec<OpPerf> = signatures.list.iter().map(|sig| row(sig, class)).collect();
    rows.sort_by(|a, b| {
        b.kernel_ns
            .cmp(&a.kernel_ns)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.input_shape.cmp(&b.input_shape))
            .then_with(|| a.dtype.cmp(&b.dtype))
    });
    rows
}

fn row(sig: &Signature, class: Option<&DeviceClass>) -> OpPerf {
    let calls = sig.calls.len() as u64;
    let kernel_ns: i64 = sig.calls.iter().map(|c| c.1).sum();
    // FLOPs per ns = GFLOP/s; / 1000 = TFLOP/s. Bytes per ns = GB/s; / 1000 = TB/s.
    let mean_rate = |per_call: Option<f64>| {
        let per_call = per_call?;
        let rates: Vec<f64> = sig
            .calls
            .iter()
            .filter(|c| c.1 > 0)
            .map(|c| per_call / c.1 as f64 / 1000.0)
            .collect();
        (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64)
    };
    let total = |per_call: Option<f64>| {
        per_call
            .filter(|_| kernel_ns > 0)
            .map(|v| v * calls as f64 / kernel_ns as f64 / 1000.0)
    };
    let tflops = total(sig.work.flops);
    let tbytes = total(sig.work.bytes);
    let peak = class.and_then(|c| peak_for(c, &sig.dtype));
    let ai = sig.work.arithmetic_intensity();
    let bound = class.zip(peak).zip(ai).map(|((c, p), ai)| {
        let ridge = p / c.memory_tbps;
        if ai >= ridge { "compute" } else { "memory" }.to_owned()
    });
    OpPerf {
        name: sig.name.clone(),
        family: sig.work.family.unwrap_or(Family::Other),
        input_shape: sig.shape.clone(),
        dtype: sig.dtype.clone(),
        calls,
        kernel_ns,
        kernel_min_ns: sig.calls.iter().map(|c| c.1).min().unwrap_or(0),
        kernel_max_ns: sig.calls.iter().map(|c| c.1).max().unwrap_or(0),
        flops_per_call: sig.work.flops,
        bytes_per_call: sig.work.bytes,
        flops_per_byte: ai.map(round3),
        tflops_per_s_mean: mean_rate(sig.work.flops).map(round3),
        tflops_per_s: tflops.map(round3),
        tbytes_per_s_mean: mean_rate(sig.work.bytes).map(round3),
        pct_of_peak_compute: tflops
            .zip(peak)
            .map(|(r, p)| crate::units::round2(r * 100.0 / p)),
        pct_of_peak_bandwidth: tbytes
            .zip(class)
            .map(|(r, c)| crate::units::round2(r * 100.0 / c.memory_tbps)),
        bound,
        gemm: sig.work.gemm,
    }
}

/// The `op_perf[]` row of the op that slice `slice` of `t` is, or that launched it (device
/// work: the innermost op around the host call that launched it), matched by name, raw
/// `Input Dims` and first `Input type`.
#[must_use]
pub fn row_of<'r>(rows: &'r [OpPerf], t: &Timeline, slice: SliceId) -> Option<&'r OpPerf> {
    let mut op = slice;
    if t.slice_class(slice).is_device_work() {
        op = t.launches().host_of(slice)?;
    }
    while t.slice_class(op) != CategoryClass::CpuOp {
        op = *t.slices.parent.get(op as usize)?;
        if op == NO_PARENT {
            return None;
        }
    }
    let name = t.slice_name(op);
    let dims = t.arg_raw(op, OpArg::InputDims.key());
    let shape = dims
        .map(|d| String::from_utf8_lossy(d).into_owned())
        .unwrap_or_default();
    let dtype = operands(dims, t.arg_raw(op, OpArg::InputType.key()))
        .first()
        .map(|o| o.dtype.clone())
        .unwrap_or_default();
    rows.iter()
        .find(|r| r.name == name && r.input_shape == shape && r.dtype == dtype)
}

/// One op family's share of the kernels `op_perf[]` counts.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilySummary {
    /// The family.
    pub family: Family,
    /// Its kernel time, ns.
    pub kernel_ns: i64,
    /// Its share of all counted kernel time, percent.
    pub pct_of_kernel_time: f64,
    /// The FLOP-weighted mean of its rows' `pct_of_peak_compute` (null without one).
    pub pct_of_peak: Option<f64>,
}

/// `op_perf[]` summed by family, by kernel time.
#[must_use]
pub fn by_family(rows: &[OpPerf]) -> Vec<FamilySummary> {
    let mut families: BTreeMap<Family, (i64, f64, f64)> = BTreeMap::new();
    let total: i64 = rows.iter().map(|r| r.kernel_ns).sum();
    for r in rows {
        let e = families.entry(r.family).or_default();
        e.0 += r.kernel_ns;
        if let (Some(pct), Some(f)) = (r.pct_of_peak_compute, r.flops_per_call) {
            let flops = f * r.calls as f64;
            e.1 += pct * flops;
            e.2 += flops;
        }
    }
    let mut out: Vec<FamilySummary> = families
        .into_iter()
        .map(|(family, (ns, weighted, flops))| FamilySummary {
            family,
            kernel_ns: ns,
            pct_of_kernel_time: if total > 0 {
                ns as f64 * 100.0 / total as f64
            } else {
                0.0
            },
            pct_of_peak: (flops > 0.0).then(|| weighted / flops),
        })
        .collect();
    out.sort_by(|a, b| {
        b.kernel_ns
            .cmp(&a.kernel_ns)
            .then_with(|| a.family.as_str().cmp(b.family.as_str()))
    });
    out
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
