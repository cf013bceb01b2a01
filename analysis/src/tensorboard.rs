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

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use steplens_ingest::Timeline;
use steplens_ingest::model::{CategoryClass, NO_PARENT, OpArg, SliceId, TrackKind};

use crate::intervals::IntervalSet;

pub mod tensor_cores;

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

fn is_dataloader(name: &str) -> bool {
    (name.starts_with(crate::op_names::DATALOADER_PREFIX) && name.ends_with(".__next__"))
        || name.starts_with("enumerate(DataPipe)#")
}

fn is_step(name: &str) -> bool {
    name.starts_with("ProfilerStep#")
}

/// One of the plugin's steps: its name (the step number), start and end.
type PluginStep = (String, i64, i64);

/// The plugin's steps of each input.
type PluginSteps = BTreeMap<u16, Vec<PluginStep>>;

/// Time ranges, `(start, end)`.
type Ranges = Vec<(i64, i64)>;

/// The launch links every view reads ([`crate::step_windows::Launches`]).
pub(crate) type Links = crate::step_windows::Launches;

/// The nearest ancestor of `slice` that is an op (`cpu_op`), when there is one.
fn enclosing_op(t: &Timeline, slice: SliceId) -> Option<SliceId> {
    let mut at = t.slices.parent[slice as usize];
    while at != NO_PARENT {
        if t.slice_class(at) == CategoryClass::CpuOp {
            return Some(at);
        }
        at = t.slices.parent[at as usize];
    }
    None
}

/// Whether device slice `k` serves a collective: its launch sits under an `nccl:*`/`gloo:*` op.
fn is_comm_kernel(t: &Timeline, links: &Links, k: SliceId) -> bool {
    let Some(runtime) = links.launcher(k) else {
        return false;
    };
    let mut at = t.slices.parent[runtime as usize];
    while at != NO_PARENT {
        if is_comm_op(t.slice_name(at)) {
            return true;
        }
        at = t.slices.parent[at as usize];
    }
    false
}

/// The collectives of one input by their `External id`: a trace without runtime events (the
/// plugin's own test traces) links a kernel to the op it serves only by the kernel's
/// `external id`, and the plugin matches NCCL kernels to their op that way.
fn comm_ops_by_external_id(t: &Timeline, source: u16) -> FxHashMap<i64, SliceId> {
    let mut out = FxHashMap::default();
    for track in t.tracks.iter().filter(|tr| tr.source == source) {
        if track.kind != TrackKind::HostThread {
            continue;
        }
        for i in track.slices.clone() {
            if matches!(
                t.slice_class(i),
                CategoryClass::CpuOp | CategoryClass::UserAnnotation
            ) && is_comm_op(t.slice_name(i))
                && let Some(id) = t.arg_i64(i, "External id")
            {
                out.insert(id, i);
            }
        }
    }
    out
}

/// The collective a kernel that no launch links serves, by its `external id`.
fn comm_op_by_id(t: &Timeline, by_id: &FxHashMap<i64, SliceId>, k: SliceId) -> Option<SliceId> {
    if by_id.is_empty() {
        return None;
    }
    t.arg_i64(k, "external id")
        .or_else(|| t.arg_i64(k, "External id"))
        .and_then(|id| by_id.get(&id).copied())
}

/// The plugin's steps of one input: `(name, start, end)`.
fn plugin_steps(t: &Timeline, links: &Links, source: u16) -> Vec<PluginStep> {
    let mut host: Vec<(i64, i64, String)> = Vec::new();
    let (mut cpu_min, mut cpu_max) = (i64::MAX, i64::MIN);
    for track in t.tracks.iter().filter(|tr| tr.source == source) {
        if track.kind != TrackKind::HostThread {
            continue;
        }
        for i in track.slices.clone() {
            let class = t.slice_class(i);
            let name = t.slice_name(i);
            let (start, end) = (t.slices.start[i as usize], t.slices.end(i));
            if matches!(class, CategoryClass::CpuOp | CategoryClass::UserAnnotation)
                && is_step(name)
            {
                let number = name.trim_start_matches("ProfilerStep#").to_owned();
                host.push((start, end, number));
            }
            if class == CategoryClass::CpuOp {
                cpu_min = cpu_min.min(start);
                cpu_max = cpu_max.max(end);
            }
        }
    }
    if host.is_empty() {
        if cpu_min > cpu_max {
            return Vec::new();
        }
        host.push((cpu_min, cpu_max, "0".to_owned()));
    }
    host.sort();
    let host_ranges: Vec<(i64, i64)> = host.iter().map(|h| (h.0, h.1)).collect();
    let windows = crate::step_windows::stretch(t, links, |s| s == source, &host_ranges);
    let matched: Vec<usize> = windows.iter().map(|w| w.launched).collect();
    let mut steps: Vec<PluginStep> = host
        .into_iter()
        .zip(&windows)
        .map(|((_, _, name), w)| (name, w.start, w.end))
        .collect();
    if steps.len() > 1
        && let Some(last) = matched.iter().rposition(|&m| m > 0)
    {
        let mut keep = last + 1;
        if last > 0 && matched[last - 1] as f64 * 0.8 > matched[last] as f64 {
            keep = last;
        }
        steps.truncate(keep);
    }
    steps
}

/// The role ranges of one input, in priority order (Kernel … CPU Exec).
fn role_ranges(t: &Timeline, links: &Links, source: u16) -> [IntervalSet; 7] {
    let mut roles: [Vec<(i64, i64)>; 7] = Default::default();
    let by_id = comm_ops_by_external_id(t, source);
    for track in t.tracks.iter().filter(|tr| tr.source == source) {
        for i in track.slices.clone() {
            let range = (t.slices.start[i as usize], t.slices.end(i));
            let name = t.slice_name(i);
            let role = match t.slice_class(i) {
                CategoryClass::Kernel if is_comm_kernel(t, links, i) => 3,
                CategoryClass::Kernel
                    if links.launcher(i).is_none() && comm_op_by_id(t, &by_id, i).is_some() =>
                {
                    3
                }
                CategoryClass::Kernel => 0,
                CategoryClass::Memcpy => 1,
                CategoryClass::Memset => 2,
                CategoryClass::Runtime => 4,
                CategoryClass::CpuOp | CategoryClass::UserAnnotation if is_comm_op(name) => 3,
                CategoryClass::CpuOp | CategoryClass::UserAnnotation if is_dataloader(name) => 5,
                CategoryClass::CpuOp | CategoryClass::UserAnnotation if is_step(name) => continue,
                CategoryClass::CpuOp
                | CategoryClass::UserAnnotation
                | CategoryClass::DeviceAnnotation => 6,
                _ => continue,
            };
            roles[role].push(range);
        }
    }
    roles.map(IntervalSet::from_ranges)
}

/// The Overview of every input.
fn overview(t: &Timeline, links: &Links) -> (Overview, PluginSteps) {
    let mut out = Overview::default();
    let mut all_steps = BTreeMap::new();
    for (source, info) in t.sources.iter().enumerate() {
        let source = source as u16;
        let steps = plugin_steps(t, links, source);
        if steps.is_empty() {
            continue;
        }
        let roles = role_ranges(t, links, source);
        let mut slots = IntervalSet::from_ranges(steps.iter().map(|s| (s.1, s.2)).collect());
        let mut costs: Vec<IntervalSet> = Vec::with_capacity(8);
        for role in &roles {
            let cost = role.intersect(&slots);
            slots = slots.minus(&cost);
            costs.push(cost);
        }
        costs.push(slots);
        let mut sum = MeanBreakdown::default();
        let mut total = 0i64;
        for (name, start, end) in &steps {
            let mut b = Breakdown::default();
            for (part, cost) in b.parts_mut().into_iter().zip(&costs) {
                *part = cost.covered(*start, *end);
            }
            for (acc, v) in sum.parts_mut().into_iter().zip(b.parts()) {
                *acc += v as f64;
            }
            total += end - start;
            out.steps.push(OverviewStep {
                name: name.clone(),
                source,
                rank: info.rank,
                start_ns: *start,
                dur_ns: end - start,
                breakdown: b,
            });
        }
        let n = steps.len() as f64;
        for acc in sum.parts_mut() {
            *acc /= n;
        }
        out.average.push(AverageStep {
            source,
            rank: info.rank,
            dur_ns: total as f64 / n,
            breakdown: sum,
        });
        all_steps.insert(source, steps);
    }
    (out, all_steps)
}

/// A numeric kernel arg (`blocks per SM` may be written as a string, `"inf"` included).
fn number(raw: Option<&[u8]>) -> Option<f64> {
    let text = std::str::from_utf8(raw?).ok()?.trim_matches('"');
    text.parse::<f64>().ok()
}

/// Per-kernel facts the summary and the tables share, read from its args in one pass.
struct KernelFacts {
    slice: SliceId,
    source: u16,
    device: i64,
    blocks_per_sm: Option<f64>,
    occupancy: Option<f64>,
    tensor_cores: bool,
    launch: LaunchShape,
}

/// A launch-shape arg as the plugin prints it (`[1, 1, 1]`), `0` when absent.
fn launch_text(raw: Option<&[u8]>, cache: &mut FxHashMap<Vec<u8>, String>) -> String {
    let Some(raw) = raw else {
        return "0".to_owned();
    };
    if let Some(text) = cache.get(raw) {
        return text.clone();
    }
    let text = python_repr(raw).trim_matches('\'').to_owned();
    cache.insert(raw.to_vec(), text.clone());
    text
}

fn kernel_facts(t: &Timeline) -> Vec<KernelFacts> {
    let mut tc_by_name: FxHashMap<u32, bool> = FxHashMap::default();
    let mut texts: FxHashMap<Vec<u8>, String> = FxHashMap::default();
    let mut out = Vec::new();
    for track in &t.tracks {
        let TrackKind::DeviceEngine { device, .. } = track.kind else {
            continue;
        };
        for k in track.slices.clone() {
            if t.slice_class(k) != CategoryClass::Kernel {
                continue;
            }
            let tensor_cores = *tc_by_name
                .entry(t.slices.name[k as usize])
                .or_insert_with(|| tensor_cores::kernel_uses_tensor_cores(t.slice_name(k)));
            let [dev, bps, occ, grid, block, regs, shared] = t.args_raw_of(
                k,
                [
                    "device",
                    "blocks per SM",
                    "est. achieved occupancy %",
                    "grid",
                    "block",
                    "registers per thread",
                    "shared memory",
                ],
            );
            out.push(KernelFacts {
                slice: k,
                source: track.source,
                device: number(dev).map_or(device.unwrap_or(0), |d| d as i64),
                blocks_per_sm: number(bps),
                occupancy: number(occ),
                tensor_cores,
                launch: LaunchShape {
                    grid: launch_text(grid, &mut texts),
                    block: launch_text(block, &mut texts),
                    registers_per_thread: launch_text(regs, &mut texts),
                    shared_memory: launch_text(shared, &mut texts),
                },
            });
        }
    }
    out
}

fn gpu_summary(
    t: &Timeline,
    links: &Links,
    steps: &PluginSteps,
    facts: &[KernelFacts],
) -> Vec<GpuSummary> {
    let mut out = Vec::new();
    for (&source, steps) in steps {
        let (Some(first), Some(last)) = (steps.first(), steps.last()) else {
            continue;
        };
        let (from, to) = (first.1, last.2);
        let span = (to - from) as f64;
        if span <= 0.0 {
            continue;
        }
        let mut by_device: BTreeMap<i64, Vec<&KernelFacts>> = BTreeMap::new();
        for f in facts.iter().filter(|f| f.source == source) {
            by_device.entry(f.device).or_default().push(f);
        }
        for (device, kernels) in by_device {
            let range = |k: SliceId| (t.slices.start[k as usize], t.slices.end(k));
            let busy = IntervalSet::from_ranges(kernels.iter().map(|f| range(f.slice)).collect());
            let utilization = busy.covered(from, to) as f64 / span;
            // SM efficiency: a sweep over kernel ends, each moment worth min(Σ blocks/SM, 1).
            let mut edges: Vec<(i64, f64)> = Vec::new();
            for f in &kernels {
                if let Some(b) = f.blocks_per_sm.filter(|b| *b > 0.0) {
                    let (s, e) = range(f.slice);
                    edges.push((s, b));
                    edges.push((e, -b));
                }
            }
            let sm_efficiency = (!edges.is_empty()).then(|| {
                edges.sort_by_key(|e| e.0);
                let (mut level, mut acc, mut at) = (0.0f64, 0.0f64, i64::MIN);
                for (x, delta) in edges {
                    if at != i64::MIN && x > at {
                        let (a, b) = (at.max(from), x.min(to));
                        if b > a {
                            acc += level.min(1.0) * (b - a) as f64;
                        }
                    }
                    level += delta;
                    if level < 1e-9 {
                        level = 0.0;
                    }
                    at = x;
                }
                acc / span * 100.0
            });
            let (mut weighted, mut weight) = (0.0, 0.0);
            for f in &kernels {
                if let Some(o) = f.occupancy.filter(|o| *o >= 0.0) {
                    let (s, e) = range(f.slice);
                    let w = (e.min(to) - s.max(from)).max(0) as f64;
                    weighted += o * w;
                    weight += w;
                }
            }
            // Tensor Core time among the kernels ops launched (not clipped to the steps).
            let (mut tc, mut all) = (0i64, 0i64);
            for f in &kernels {
                let launched_by_op = links
                    .launcher(f.slice)
                    .is_some_and(|r| enclosing_op(t, r).is_some());
                if launched_by_op {
                    let dur = t.slices.dur[f.slice as usize];
                    all += dur;
                    if f.tensor_cores {
                        tc += dur;
                    }
                }
            }
            out.push(GpuSummary {
                source,
                device,
                name: t.device.name.clone().filter(|n| !n.is_empty()),
                utilization_pct: utilization * 100.0,
                sm_efficiency_pct: sm_efficiency,
                achieved_occupancy_pct: (weight > 0.0).then(|| weighted / weight),
                tensor_core_pct: (all > 0).then(|| tc as f64 * 100.0 / all as f64),
            });
        }
    }
    out
}

/// Ops looked at to tell whether the trace was recorded with stacks.
const STACK_PROBE: usize = 2000;

/// Ops the operator table lists (others are walked through).
fn listed(name: &str) -> bool {
    !(is_step(name)
        || is_dataloader(name)
        || name == "DataParallel.forward"
        || name == "DistributedDataParallel.forward"
        || name.starts_with("Optimizer."))
}

#[derive(Default)]
struct OpAcc<'t> {
    calls: u64,
    device_self: i64,
    device_total: i64,
    host_self: i64,
    host_total: i64,
    tc_self: i64,
    tc_total: i64,
    tc_eligible: Option<bool>,
    /// Up to five distinct `Call stack` values, raw (decoded when the row is made).
    stacks: Vec<&'t [u8]>,
    first: (i64, SliceId),
}

fn operators<'t>(
    t: &'t Timeline,
    links: &Links,
    op_arg: &dyn Fn(SliceId, OpArg) -> Option<&'t [u8]>,
) -> (Vec<OperatorRow>, Vec<OperatorRow>, f64) {
    // The op tree as flat arrays (a trace holds millions of ops): each op's nearest op
    // ancestor is its parent; each runtime call belongs to its nearest op. Slice → node by a
    // dense array.
    const NONE: u32 = u32::MAX;
    let mut index: Vec<u32> = vec![NONE; t.slices.len()];
    let mut slice_of: Vec<SliceId> = Vec::new();
    for track in &t.tracks {
        if track.kind != TrackKind::HostThread {
            continue;
        }
        for i in track.slices.clone() {
            if t.slice_class(i) == CategoryClass::CpuOp {
                index[i as usize] = slice_of.len() as u32;
                slice_of.push(i);
            }
        }
    }
    let node_of = |slice: SliceId| index.get(slice as usize).copied().filter(|&n| n != NONE);
    let parent: Vec<u32> = slice_of
        .iter()
        .map(|&s| enclosing_op(t, s).and_then(node_of).unwrap_or(NONE))
        .collect();
    let mut child_count = vec![0u32; slice_of.len()];
    for &p in parent.iter().filter(|&&p| p != NONE) {
        child_count[p as usize] += 1;
    }
    // Children before parents: by depth, deepest first.
    let mut by_depth: Vec<u32> = (0..slice_of.len() as u32).collect();
    by_depth.sort_by_key(|&n| std::cmp::Reverse(t.slices.depth[slice_of[n as usize] as usize]));
    // An op whose only child op has its name takes over that child's children and runtimes:
    // `owner` is the node whose figures a node's go to, itself unless folded (parents first).
    let mut owner: Vec<u32> = (0..slice_of.len() as u32).collect();
    for &n in by_depth.iter().rev() {
        let p = parent[n as usize];
        if p != NONE
            && child_count[p as usize] == 1
            && t.slices.name[slice_of[n as usize] as usize]
                == t.slices.name[slice_of[p as usize] as usize]
        {
            owner[n as usize] = owner[p as usize];
        }
    }
    let folded = |n: u32| owner[n as usize] != n;
    // Name tests, once per interned name: a trace has far fewer names than slices.
    let per_name = |test: &dyn Fn(&str) -> bool| -> Vec<bool> {
        t.strings.iter().map(|(_, name)| test(name)).collect()
    };
    let tc_names = per_name(&tensor_cores::kernel_uses_tensor_cores);
    let eligible_names = per_name(&tensor_cores::op_is_eligible);
    let listed_names = per_name(&listed);
    let name_has = |names: &[bool], slice: SliceId| {
        names
            .get(t.slices.name[slice as usize] as usize)
            .copied()
            .unwrap_or(false)
    };
    let tc_kernel =
        |k: SliceId| t.slice_class(k) == CategoryClass::Kernel && name_has(&tc_names, k);
    #[derive(Clone, Copy, Default)]
    struct Figures {
        device_self: i64,
        device_total: i64,
        kernel_self: i64,
        tc_self: i64,
        tc_total: i64,
        /// Host time of its child ops and its runtime calls (what its host self time leaves out).
        host_below: i64,
        eligible: bool,
        has_eligible_below: bool,
        child_eligible: bool,
        own_tc_kernel: bool,
    }
    let mut figures = vec![Figures::default(); slice_of.len()];
    // Self figures: the device work each op's runtime calls launched.
    for track in &t.tracks {
        if track.kind != TrackKind::HostThread {
            continue;
        }
        for r in track.slices.clone() {
            if t.slice_class(r) != CategoryClass::Runtime {
                continue;
            }
            let Some(n) = enclosing_op(t, r).and_then(node_of) else {
                continue;
            };
            let f = &mut figures[owner[n as usize] as usize];
            f.host_below += t.slices.dur[r as usize];
            for d in links.launched_by(r) {
                let dur = t.slices.dur[d as usize];
                f.device_self += dur;
                if t.slice_class(d) == CategoryClass::Kernel {
                    f.kernel_self += dur;
                }
                if tc_kernel(d) {
                    f.tc_self += dur;
                    f.own_tc_kernel = true;
                }
            }
        }
    }
    // Totals bottom-up: each op's own figures plus its (unfolded) children's totals.
    for &n in &by_depth {
        if folded(n) {
            continue;
        }
        let f = {
            let f = &mut figures[n as usize];
            f.device_total += f.device_self;
            f.tc_total += f.tc_self;
            f.eligible = name_has(&eligible_names, slice_of[n as usize])
                || f.child_eligible
                || f.own_tc_kernel;
            *f
        };
        let p = parent[n as usize];
        if p == NONE {
            continue;
        }
        let pf = &mut figures[owner[p as usize] as usize];
        pf.device_total += f.device_total;
        pf.tc_total += f.tc_total;
        pf.host_below += t.slices.dur[slice_of[n as usize] as usize];
        pf.child_eligible |= f.eligible;
        pf.has_eligible_below |= f.eligible || f.has_eligible_below;
    }
    // Keyed by name id and shape index while counting: strings are made once per row.
    let mut by_name: FxHashMap<u32, OpAcc> = FxHashMap::default();
    let mut by_shape: FxHashMap<(u32, usize), OpAcc> = FxHashMap::default();
    // Shapes repeat: each distinct `Input Dims` text is printed once.
    let mut shape_index: FxHashMap<&[u8], usize> = FxHashMap::default();
    let mut shape_texts: Vec<String> = vec!["[]".to_owned()];
    // A trace recorded with stacks has a `Call stack` on nearly every op; one without has none.
    // Looking among the first ops tells which, so the others' args are not searched in vain.
    let has_stacks = slice_of
        .iter()
        .take(STACK_PROBE)
        .any(|&op| t.arg_raw(op, "Call stack").is_some());
    let (mut eligible_bottom_kernel, mut all_kernel_self) = (0i64, 0i64);
    for &n in by_depth.iter().filter(|&&n| !folded(n)) {
        let op = slice_of[n as usize];
        if !name_has(&listed_names, op) {
            continue;
        }
        let f = figures[n as usize];
        let host_total = t.slices.dur[op as usize];
        let host_self = host_total - f.host_below;
        all_kernel_self += f.kernel_self;
        if f.eligible && !f.has_eligible_below {
            eligible_bottom_kernel += f.kernel_self;
        }
        let shape = match op_arg(op, OpArg::InputDims) {
            Some(raw) => *shape_index.entry(raw).or_insert_with(|| {
                shape_texts.push(python_repr(raw));
                shape_texts.len() - 1
            }),
            None => 0,
        };
        let name_id = t.slices.name[op as usize];
        // Raw bytes, compared as they are: decoded only for the five a row keeps.
        let stack = if has_stacks {
            t.arg_raw(op, "Call stack")
        } else {
            None
        };
        for acc in [
            by_name.entry(name_id).or_default(),
            by_shape.entry((name_id, shape)).or_default(),
        ] {
            let start = (t.slices.start[op as usize], op);
            if acc.calls == 0 || start < acc.first {
                acc.first = start;
                acc.tc_eligible = Some(f.eligible);
            }
            acc.calls += 1;
            acc.device_self += f.device_self;
            acc.device_total += f.device_total;
            acc.host_self += host_self;
            acc.host_total += host_total;
            acc.tc_self += f.tc_self;
            acc.tc_total += f.tc_total;
            if let Some(s) = stack
                && acc.stacks.len() < 5
                && !acc.stacks.contains(&s)
            {
                acc.stacks.push(s);
            }
        }
    }
    let has_device = t.tracks.iter().any(|tr| tr.kind.is_device());
    let row = |name: String, shape: Option<String>, a: OpAcc| OperatorRow {
        name,
        input_shape: shape,
        calls: a.calls,
        device_self_ns: a.device_self,
        device_total_ns: a.device_total,
        host_self_ns: a.host_self,
        host_total_ns: a.host_total,
        tc_eligible: a.tc_eligible.unwrap_or(false),
        tc_self_pct: pct(a.tc_self, a.device_self),
        tc_total_pct: pct(a.tc_total, a.device_total),
        call_stacks: a.stacks.iter().map(|raw| json_text(raw)).collect(),
    };
    let sort = |rows: &mut Vec<OperatorRow>| {
        if has_device {
            rows.sort_by(|a, b| {
                b.device_self_ns
                    .cmp(&a.device_self_ns)
                    .then(a.name.cmp(&b.name))
                    .then(a.input_shape.cmp(&b.input_shape))
            });
        } else {
            rows.sort_by(|a, b| {
                b.host_self_ns
                    .cmp(&a.host_self_ns)
                    .then(a.name.cmp(&b.name))
                    .then(a.input_shape.cmp(&b.input_shape))
            });
        }
    };
    let mut names: Vec<OperatorRow> = by_name
        .into_iter()
        .map(|(name, a)| row(t.strings.get(name).to_owned(), None, a))
        .collect();
    sort(&mut names);
    let mut shapes: Vec<OperatorRow> = by_shape
        .into_iter()
        .map(|((name, shape), a)| {
            row(
                t.strings.get(name).to_owned(),
                Some(shape_texts[shape].clone()),
                a,
            )
        })
        .collect();
    sort(&mut shapes);
    let share = if all_kernel_self > 0 {
        eligible_bottom_kernel as f64 / all_kernel_self as f64
    } else {
        0.0
    };
    (names, shapes, share)
}

/// A raw JSON value as text: a string decoded, anything else as written.
fn json_text(raw: &[u8]) -> String {
    if raw.first() == Some(&b'"') {
        serde_json::from_slice::<String>(raw)
            .unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned())
    } else {
        String::from_utf8_lossy(raw).into_owned()
    }
}

fn pct(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        part as f64 * 100.0 / whole as f64
    } else {
        0.0
    }
}

/// A JSON list of lists of numbers as Python prints it (`[[32, 3], []]`), the plugin's
/// grouping key; other text as written.
fn python_repr(raw: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(raw) {
        Ok(v) => repr(&v),
        Err(_) => String::from_utf8_lossy(raw).into_owned(),
    }
}

fn repr(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(repr).collect::<Vec<_>>().join(", ")
            )
        }
        serde_json::Value::String(s) => format!("'{s}'"),
        serde_json::Value::Null => "None".to_owned(),
        serde_json::Value::Bool(b) => if *b { "True" } else { "False" }.to_owned(),
        other => other.to_string(),
    }
}

#[derive(Default)]
struct KernelAcc {
    calls: u64,
    total: i64,
    max: i64,
    min: i64,
    bps: f64,
    occ: f64,
    tensor_cores: bool,
    op_tc_eligible: Option<bool>,
}

impl KernelAcc {
    fn add(&mut self, dur: i64, f: &KernelFacts) {
        if self.calls == 0 {
            self.min = dur;
        }
        self.calls += 1;
        self.total += dur;
        self.max = self.max.max(dur);
        self.min = self.min.min(dur);
        self.bps += f.blocks_per_sm.unwrap_or(0.0) * dur as f64;
        self.occ += f.occupancy.unwrap_or(0.0) * dur as f64;
        self.tensor_cores = f.tensor_cores;
    }

    fn row(self, name: String, op: Option<String>, launch: Option<LaunchShape>) -> KernelRow {
        let weighted = |v: f64| {
            if self.total > 0 {
                v / self.total as f64
            } else {
                0.0
            }
        };
        KernelRow {
            name,
            op,
            launch,
            calls: self.calls,
            total_ns: self.total,
            mean_ns: self.total as f64 / self.calls.max(1) as f64,
            max_ns: self.max,
            min_ns: self.min,
            tensor_cores: self.tensor_cores,
            op_tc_eligible: self.op_tc_eligible,
            blocks_per_sm: weighted(self.bps),
            occupancy_pct: weighted(self.occ),
        }
    }
}

fn kernels(
    t: &Timeline,
    links: &Links,
    eligible_ops: &FxHashSet<String>,
    facts: &[KernelFacts],
) -> (Vec<KernelRow>, Vec<KernelRow>, f64) {
    let mut by_name: FxHashMap<u32, KernelAcc> = FxHashMap::default();
    let mut by_op: FxHashMap<(u32, Option<u32>, &LaunchShape), KernelAcc> = FxHashMap::default();
    let (mut tc, mut all) = (0i64, 0i64);
    for f in facts {
        let dur = t.slices.dur[f.slice as usize];
        all += dur;
        if f.tensor_cores {
            tc += dur;
        }
        let name = t.slices.name[f.slice as usize];
        by_name.entry(name).or_default().add(dur, f);
        let op = links
            .launcher(f.slice)
            .and_then(|r| enclosing_op(t, r))
            .map(|o| t.slices.name[o as usize]);
        let acc = by_op.entry((name, op, &f.launch)).or_default();
        if acc.calls == 0 {
            acc.op_tc_eligible = Some(op.is_some_and(|o| eligible_ops.contains(t.strings.get(o))));
        }
        acc.add(dur, f);
    }
    let by_name: BTreeMap<String, KernelAcc> = by_name
        .into_iter()
        .map(|(name, acc)| (t.strings.get(name).to_owned(), acc))
        .collect();
    let by_op: BTreeMap<(String, String, LaunchShape), KernelAcc> = by_op
        .into_iter()
        .map(|((name, op, launch), acc)| {
            (
                (
                    t.strings.get(name).to_owned(),
                    op.map_or_else(|| "N/A".to_owned(), |o| t.strings.get(o).to_owned()),
                    launch.clone(),
                ),
                acc,
            )
        })
        .collect();
    let mut names: Vec<KernelRow> = by_name
        .into_iter()
        .map(|(name, a)| a.row(name, None, None))
        .collect();
    names.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    let mut ops: Vec<KernelRow> = by_op
        .into_iter()
        .map(|((name, op, shape), a)| a.row(name, Some(op), Some(shape)))
        .collect();
    ops.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    (names, ops, pct(tc, all))
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
    let (mut overview, steps) = timed(ledger, "view: overview", || overview(t, links));
    let gpu_summary = timed(ledger, "view: GPU summary", || {
        gpu_summary(t, links, &steps, &facts)
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
        gpu_summary,
        operators,
        operators_by_shape,
        kernels,
        kernels_by_op,
        distributed,
    }
}

/// A collective of one worker: its host op and the time ranges it ran (the host op's, then its
/// kernels').
struct CommNode {
    op: SliceId,
    ranges: Vec<(i64, i64)>,
    step: Option<usize>,
}

/// Bytes of one element of an `Input type`, as the plugin counts them.
fn dtype_bytes(ty: &str) -> u64 {
    match ty {
        "long int" => 8,
        "float" | "int" => 4,
        "c10::Half" | "c10::BFloat16" => 2,
        "unsigned char" => 1,
        _ => 0,
    }
}

/// The input bytes of op `op`: Σ over inputs of Π `Input Dims` × the size of `Input type`.
fn input_bytes(t: &Timeline, op: SliceId) -> u64 {
    let dims: Vec<serde_json::Value> = t
        .arg_raw(op, OpArg::InputDims.key())
        .and_then(|raw| serde_json::from_slice(raw).ok())
        .unwrap_or_default();
    let types: Vec<serde_json::Value> = t
        .arg_raw(op, OpArg::InputType.key())
        .and_then(|raw| serde_json::from_slice(raw).ok())
        .unwrap_or_default();
    dims.iter()
        .zip(&types)
        .map(|(d, ty)| {
            let elements: u64 = d
                .as_array()
                .map_or(0, |a| a.iter().map(|v| v.as_u64().unwrap_or(0)).product());
            elements * dtype_bytes(ty.as_str().unwrap_or(""))
        })
        .sum()
}

/// The distributed view: per worker, its collectives matched by order with every other
/// worker's; empty unless every worker has the same number of them (the plugin's rule).
fn distributed(t: &Timeline, links: &Links, steps: &PluginSteps) -> Vec<DistributedRow> {
    if t.sources.is_empty() {
        return Vec::new();
    }
    let mut workers: Vec<(u16, Vec<CommNode>)> = Vec::new();
    for (source, plugin_steps) in steps {
        let mut nodes: Vec<CommNode> = Vec::new();
        let mut index: FxHashMap<SliceId, usize> = FxHashMap::default();
        let (mut nccl, mut gloo) = (false, false);
        for track in t.tracks.iter().filter(|tr| tr.source == *source) {
            if track.kind != TrackKind::HostThread {
                continue;
            }
            for i in track.slices.clone() {
                let name = t.slice_name(i);
                if matches!(
                    t.slice_class(i),
                    CategoryClass::CpuOp | CategoryClass::UserAnnotation
                ) && is_comm_op(name)
                {
                    nccl |= name.starts_with("nccl:");
                    gloo |= name.starts_with("gloo:");
                    index.insert(i, nodes.len());
                    nodes.push(CommNode {
                        op: i,
                        ranges: vec![(t.slices.start[i as usize], t.slices.end(i))],
                        step: None,
                    });
                }
            }
        }
        if nccl && gloo {
            nodes.clear();
        }
        // The plugin adds kernels to NCCL collectives only (Gloo runs on the host).
        let by_id = if nccl && !gloo {
            comm_ops_by_external_id(t, *source)
        } else {
            FxHashMap::default()
        };
        for track in t.tracks.iter().filter(|tr| tr.source == *source) {
            if !track.kind.is_device() {
                continue;
            }
            for k in track.slices.clone() {
                if t.slice_class(k) != CategoryClass::Kernel {
                    continue;
                }
                let Some(runtime) = links.launcher(k) else {
                    if let Some(&n) = comm_op_by_id(t, &by_id, k).and_then(|op| index.get(&op)) {
                        nodes[n]
                            .ranges
                            .push((t.slices.start[k as usize], t.slices.end(k)));
                    }
                    continue;
                };
                let mut at = t.slices.parent[runtime as usize];
                while at != NO_PARENT {
                    if let Some(&n) = index.get(&at) {
                        nodes[n]
                            .ranges
                            .push((t.slices.start[k as usize], t.slices.end(k)));
                        break;
                    }
                    at = t.slices.parent[at as usize];
                }
            }
        }
        nodes.sort_by_key(|n| (t.slices.start[n.op as usize], -t.slices.end(n.op)));
        for n in &mut nodes {
            n.ranges.sort_by_key(|&(s, e)| (s, -e));
            let (s, e) = (t.slices.start[n.op as usize], t.slices.end(n.op));
            n.step = plugin_steps.iter().position(|st| s >= st.1 && e <= st.2);
        }
        workers.push((*source, nodes));
    }
    let count = workers.first().map_or(0, |w| w.1.len());
    if count == 0 || workers.iter().any(|w| w.1.len() != count) {
        return Vec::new();
    }
    // The data-transfer part of each range: the shortest that range took on any worker,
    // ending where it ended.
    let mut real: Vec<Vec<Vec<(i64, i64)>>> = workers
        .iter()
        .map(|w| w.1.iter().map(|_| Vec::new()).collect())
        .collect();
    for (i, first) in workers[0].1.iter().enumerate() {
        let ranges = first.ranges.len();
        if workers.iter().any(|w| w.1[i].ranges.len() != ranges) {
            return Vec::new();
        }
        for j in 0..ranges {
            let shortest = workers
                .iter()
                .map(|w| w.1[i].ranges[j].1 - w.1[i].ranges[j].0)
                .min()
                .unwrap_or(0);
            for (w, worker) in workers.iter().enumerate() {
                let end = worker.1[i].ranges[j].1;
                real[w][i].push((end - shortest, end));
            }
        }
    }
    let mut out = Vec::new();
    for (w, (source, nodes)) in workers.iter().enumerate() {
        let source = *source;
        let Some(plugin_steps) = steps.get(&source) else {
            continue;
        };
        let roles = role_ranges(t, links, source);
        let has_kernels = !roles[0].is_empty();
        let comp_role = if has_kernels { &roles[0] } else { &roles[6] };
        let comm_role = &roles[3];
        let both = comp_role.intersect(comm_role);
        let (mut comp, mut ovl, mut comm, mut other) = (0i64, 0i64, 0i64, 0i64);
        for (_, s, e) in plugin_steps {
            let c = comp_role.covered(*s, *e);
            let m = comm_role.covered(*s, *e);
            let o = both.covered(*s, *e);
            comp += c - o;
            ovl += o;
            comm += m - o;
            other += (e - s) + o - c - m;
        }
        let n = plugin_steps.len().max(1) as i64;
        // Transfer and waiting, per step of the collectives (a collective in no step counts
        // under one more key).
        let mut by_step: BTreeMap<Option<usize>, (Ranges, Ranges)> = BTreeMap::new();
        for (i, node) in nodes.iter().enumerate() {
            let entry = by_step.entry(node.step).or_default();
            entry.0.extend(&node.ranges);
            entry.1.extend(&real[w][i]);
        }
        let (mut transfer, mut total) = (0i64, 0i64);
        for (all, moving) in by_step.values() {
            total += IntervalSet::from_ranges(all.clone()).total();
            transfer += IntervalSet::from_ranges(moving.clone()).total();
        }
        let keys = by_step.len().max(1) as i64;
        let mut ops: BTreeMap<String, (u64, u64, Ranges, Ranges)> = BTreeMap::new();
        for (i, node) in nodes.iter().enumerate() {
            let entry = ops.entry(t.slice_name(node.op).to_owned()).or_default();
            entry.0 += 1;
            entry.1 += input_bytes(t, node.op);
            entry.2.extend(&node.ranges);
            entry.3.extend(&real[w][i]);
        }
        out.push(DistributedRow {
            rank: t.sources[source as usize].rank.unwrap_or(i64::from(source)),
            source,
            computation_ns: comp / n,
            overlap_ns: ovl / n,
            communication_ns: comm / n,
            other_ns: other / n,
            transfer_ns: transfer / keys,
            sync_ns: (total - transfer) / keys,
            comm_ops: ops
                .into_iter()
                .map(|(name, (calls, bytes, all, moving))| CommOpRow {
                    name,
                    calls,
                    bytes,
                    latency_ns: IntervalSet::from_ranges(all).total(),
                    transfer_ns: IntervalSet::from_ranges(moving).total(),
                })
                .collect(),
        });
    }
    out.sort_by_key(|r| (r.rank, r.source));
    out
}
