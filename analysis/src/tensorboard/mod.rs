//! The PyTorch TensorBoard profiler plugin's views, computed by its definitions so that its
//! users find the numbers they know: the step-time breakdown (Overview), the GPU summary, the
//! operator and kernel tables, and the distributed view. `docs/research/tensorboard-plugin.md`
//! states each rule as read from the plugin's sources; `docs/report-schema.md` the fields.
//!
//! The plugin's steps are not steplens' steps: each `ProfilerStep` host range is stretched to
//! the end of the device work its runtime calls launched, starts no earlier than the previous
//! step ended, and trailing steps without device work are dropped. Every figure here uses those
//! steps; steplens' own step table keeps the host ranges.
//!
//! Tensor Core rules (kernel-name fragments, eligible op names) are the plugin's own lists,
//! in [`tensor_cores`].
//!
//! One file per view (`overview`, `gpu_summary`, `operators`, `kernels`, `distributed`); what
//! several of them read sits in `steps_and_links` (the plugin's steps and role ranges, the op a
//! launch sits under, the collective a kernel serves), `kernel_facts` (each kernel's args read
//! once) and `arg_text` (arg values as the plugin prints them).

use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};
use steplens_ingest::Timeline;
use steplens_ingest::model::{OpArg, SliceId};

mod arg_text;
mod distributed;
mod gpu_summary;
mod kernel_facts;
mod kernels;
mod operators;
mod overview;
mod steps_and_links;
pub mod tensor_cores;

use distributed::distributed;
use gpu_summary::gpu_summary;
use kernel_facts::kernel_facts;
use kernels::kernels;
use operators::operators;
use overview::overview;

/// Time split of one step, in the plugin's priority order: each nanosecond of the step goes to
/// the first role that covers it (Kernel > Memcpy > Memset > Communication > Runtime >
/// DataLoader > CPU Exec), the rest is Other; the parts add up to the step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Device kernels (not communication).
    pub kernel_ns: i64,
    /// Device copies.
    pub memcpy_ns: i64,
    /// Device memsets.
    pub memset_ns: i64,
    /// Collectives: `nccl:*`/`gloo:*` host ops and their kernels.
    pub communication_ns: i64,
    /// Runtime API calls (`cudaLaunchKernel`, `cudaMemcpyAsync`, …).
    pub runtime_ns: i64,
    /// `enumerate(DataLoader)#….__next__`.
    pub dataloader_ns: i64,
    /// Other host ops and annotations.
    pub cpu_exec_ns: i64,
    /// Nothing of the above.
    pub other_ns: i64,
}

impl Breakdown {
    fn parts_mut(&mut self) -> [&mut i64; 8] {
        [
            &mut self.kernel_ns,
            &mut self.memcpy_ns,
            &mut self.memset_ns,
            &mut self.communication_ns,
            &mut self.runtime_ns,
            &mut self.dataloader_ns,
            &mut self.cpu_exec_ns,
            &mut self.other_ns,
        ]
    }

    /// The parts in priority order.
    #[must_use]
    pub fn parts(&self) -> [i64; 8] {
        [
            self.kernel_ns,
            self.memcpy_ns,
            self.memset_ns,
            self.communication_ns,
            self.runtime_ns,
            self.dataloader_ns,
            self.cpu_exec_ns,
            self.other_ns,
        ]
    }

    /// The parts' names, as the plugin labels them.
    pub const LABELS: [&'static str; 8] = [
        "Kernel",
        "Memcpy",
        "Memset",
        "Communication",
        "Runtime",
        "DataLoader",
        "CPU Exec",
        "Other",
    ];
}

/// One step as the plugin draws it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverviewStep {
    /// The step number (`ProfilerStep#N` → `N`), or `0` for a trace without steps.
    pub name: String,
    /// Input the step is from.
    pub source: u16,
    /// Rank of that input, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    /// Start of the device-extended step, ns.
    pub start_ns: i64,
    /// Length of the device-extended step, ns (the breakdown's parts add up to it).
    pub dur_ns: i64,
    /// Its time split.
    pub breakdown: Breakdown,
}

/// The Overview: every step and their mean, per input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// Steps, by input then time.
    pub steps: Vec<OverviewStep>,
    /// The mean step per input (a plain mean over its steps).
    pub average: Vec<AverageStep>,
    /// Kernel time in kernels the plugin counts as Tensor Core kernels, of all kernel time,
    /// percent: with `tc_eligible_kernel_pct` above 0 and this at 0 the plugin advised AMP.
    pub tc_used_pct: f64,
    /// Self kernel time of the innermost Tensor Core eligible ops, of all ops' self kernel
    /// time, percent (the figure the plugin's AMP advice quoted).
    pub tc_eligible_kernel_pct: f64,
}

/// The mean step of one input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AverageStep {
    /// Input.
    pub source: u16,
    /// Rank, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    /// Mean step length, ns.
    pub dur_ns: f64,
    /// Mean of each part, ns.
    pub breakdown: MeanBreakdown,
}

/// [`Breakdown`] averaged (fractional ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct MeanBreakdown {
    pub kernel_ns: f64,
    pub memcpy_ns: f64,
    pub memset_ns: f64,
    pub communication_ns: f64,
    pub runtime_ns: f64,
    pub dataloader_ns: f64,
    pub cpu_exec_ns: f64,
    pub other_ns: f64,
}

impl MeanBreakdown {
    fn parts_mut(&mut self) -> [&mut f64; 8] {
        [
            &mut self.kernel_ns,
            &mut self.memcpy_ns,
            &mut self.memset_ns,
            &mut self.communication_ns,
            &mut self.runtime_ns,
            &mut self.dataloader_ns,
            &mut self.cpu_exec_ns,
            &mut self.other_ns,
        ]
    }

    /// The parts in priority order ([`Breakdown::LABELS`]).
    #[must_use]
    pub fn parts(&self) -> [f64; 8] {
        [
            self.kernel_ns,
            self.memcpy_ns,
            self.memset_ns,
            self.communication_ns,
            self.runtime_ns,
            self.dataloader_ns,
            self.cpu_exec_ns,
            self.other_ns,
        ]
    }
}

/// The GPU summary of one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSummary {
    /// Input.
    pub source: u16,
    /// Device index (the kernels' `device` arg).
    pub device: i64,
    /// Device name, from `deviceProperties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Time at least one kernel ran, over the steps' span, percent.
    pub utilization_pct: f64,
    /// Estimated SM efficiency: per moment min(Σ blocks per SM of the running kernels, 1), over
    /// the steps' span, percent (none without `blocks per SM` args).
    pub sm_efficiency_pct: Option<f64>,
    /// Estimated achieved occupancy, weighted by kernel time in the steps' span, percent (none
    /// without `est. achieved occupancy %` args).
    pub achieved_occupancy_pct: Option<f64>,
    /// Kernel time in kernels that use Tensor Cores, of all kernel time launched by ops, percent.
    pub tensor_core_pct: Option<f64>,
}

/// One row of the operator table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorRow {
    /// Op name.
    pub name: String,
    /// `Input Dims` as the plugin prints them (`[[32, 3], []]`), in the by-shape table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_shape: Option<String>,
    /// Occurrences.
    pub calls: u64,
    /// Device time of the kernels, copies and memsets the op's own runtime calls launched.
    pub device_self_ns: i64,
    /// Device time of the op and everything under it.
    pub device_total_ns: i64,
    /// Host time less its child ops and its own runtime calls.
    pub host_self_ns: i64,
    /// Host time.
    pub host_total_ns: i64,
    /// Whether the op can use Tensor Cores (the plugin's list, or a child that can, or a Tensor
    /// Core kernel of its own).
    pub tc_eligible: bool,
    /// Share of the self kernel time in Tensor Core kernels, percent.
    pub tc_self_pct: f64,
    /// Share of the total kernel time in Tensor Core kernels, percent.
    pub tc_total_pct: f64,
    /// Distinct `Call stack`s of the op (at most five), where the trace has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call_stacks: Vec<String>,
}

/// One row of the kernel table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelRow {
    /// Kernel name.
    pub name: String,
    /// Launching op, in the by-op table (`N/A` when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// `grid`, `block`, `registers per thread`, `shared memory` as written, in the by-op table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<LaunchShape>,
    /// Occurrences.
    pub calls: u64,
    /// Total duration.
    pub total_ns: i64,
    /// Mean duration.
    pub mean_ns: f64,
    /// Longest.
    pub max_ns: i64,
    /// Shortest.
    pub min_ns: i64,
    /// Whether the kernel uses Tensor Cores (by its name).
    pub tensor_cores: bool,
    /// Whether the launching op is Tensor Core eligible, in the by-op table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_tc_eligible: Option<bool>,
    /// Mean `blocks per SM`, weighted by duration (missing as 0).
    pub blocks_per_sm: f64,
    /// Mean `est. achieved occupancy %`, weighted by duration (missing as 0).
    pub occupancy_pct: f64,
}

/// A kernel's launch configuration, as its args write it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct LaunchShape {
    pub grid: String,
    pub block: String,
    pub registers_per_thread: String,
    pub shared_memory: String,
}

/// One worker (rank) of the distributed view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DistributedRow {
    /// Rank (the input's index when the trace names none).
    pub rank: i64,
    /// Input.
    pub source: u16,
    /// Mean per step: computation not overlapped by communication.
    pub computation_ns: i64,
    /// Mean per step: computation overlapped by communication.
    pub overlap_ns: i64,
    /// Mean per step: communication not overlapped by computation.
    pub communication_ns: i64,
    /// Mean per step: the rest of the step.
    pub other_ns: i64,
    /// Mean per step: communication time spent moving data (the shortest any rank took for
    /// each matched collective).
    pub transfer_ns: i64,
    /// Mean per step: communication time spent waiting for the other ranks.
    pub sync_ns: i64,
    /// Per collective name.
    pub comm_ops: Vec<CommOpRow>,
}

/// One collective name of a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommOpRow {
    /// `nccl:all_reduce`, ….
    pub name: String,
    /// Occurrences.
    pub calls: u64,
    /// Total size of the inputs, from `Input Dims` × the size of `Input type`.
    pub bytes: u64,
    /// Time the host op or its kernels ran (union).
    pub latency_ns: i64,
    /// Of that, data transfer.
    pub transfer_ns: i64,
}

/// The plugin's views of a Timeline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Views {
    /// Steps and their breakdown.
    pub overview: Overview,
    /// The overview's breakdown of each Timeline step, by index into `Timeline::steps` (none
    /// for a step the plugin does not draw): how the step table carries its breakdown.
    pub step_breakdowns: Vec<Option<Breakdown>>,
    /// Per device.
    pub gpu_summary: Vec<GpuSummary>,
    /// Per op name.
    pub operators: Vec<OperatorRow>,
    /// Per op name and input shape.
    pub operators_by_shape: Vec<OperatorRow>,
    /// Per kernel name.
    pub kernels: Vec<KernelRow>,
    /// Per kernel, launching op and launch shape.
    pub kernels_by_op: Vec<KernelRow>,
    /// Per worker, when several ranks with collectives were loaded.
    pub distributed: Vec<DistributedRow>,
}

/// The communication op names the plugin counts (with `nccl:` or `gloo:` before them).
const COMM_OPS: [&str; 5] = [
    "broadcast",
    "reduce",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
];

/// Whether `name` is a collective the plugin counts: `nccl:all_reduce`, `gloo:broadcast`, ….
#[must_use]
pub fn is_comm_op(name: &str) -> bool {
    name.strip_prefix("nccl:")
        .or_else(|| name.strip_prefix("gloo:"))
        .is_some_and(|op| COMM_OPS.contains(&op))
}

/// The launch links every view reads ([`steplens_ingest::model::Launches`]).
pub(crate) type Links = steplens_ingest::model::Launches;
fn pct(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        part as f64 * 100.0 / whole as f64
    } else {
        0.0
    }
}
/// Computes every view.
#[must_use]
pub fn views(t: &Timeline) -> Views {
    let memo = steplens_ingest::model::ArgKeys::default();
    views_with(t, &Links::new(t), &|op, arg| memo.get(t, op, arg), None)
}

/// Computes every view from the launch links (the report's, which the step windows read too),
/// reading ops' `Input Dims` through `op_arg` (the report's memo, which the detectors fill too).
pub(crate) fn views_with<'t>(
    t: &'t Timeline,
    links: &Links,
    op_arg: &dyn Fn(SliceId, OpArg) -> Option<&'t [u8]>,
    ledger: Option<&crate::ledger::Ledger>,
) -> Views {
    use crate::ledger::timed;
    let facts = timed(ledger, "view: kernel facts", || kernel_facts(t));
    let (mut overview, step_breakdowns, steps) =
        timed(ledger, "view: overview", || overview(t, links));
    let gpu_summary = timed(ledger, "view: GPU summary", || {
        gpu_summary(t, links, &steps, &facts.kernels)
    });
    let (operators, operators_by_shape, tc_eligible_share) =
        timed(ledger, "view: operators", || operators(t, links, op_arg));
    let eligible: FxHashSet<String> = operators
        .iter()
        .filter(|r| r.tc_eligible)
        .map(|r| r.name.clone())
        .collect();
    let (kernels, kernels_by_op, tc_used_pct) = timed(ledger, "view: kernels", || {
        kernels(t, links, &eligible, &facts)
    });
    overview.tc_used_pct = tc_used_pct;
    overview.tc_eligible_kernel_pct = tc_eligible_share * 100.0;
    let distributed = timed(ledger, "view: distributed", || {
        distributed(t, links, &steps)
    });
    Views {
        overview,
        step_breakdowns,
        gpu_summary,
        operators,
        operators_by_shape,
        kernels,
        kernels_by_op,
        distributed,
    }
}
