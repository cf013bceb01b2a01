//! Detectors: each module looks for one kind of problem in a Timeline and returns
//! [`Finding`]s that say what it costs and what to change.
//!
//! The detectors share a [`Context`] (the Timeline, its steps, call-site resolution, evidence
//! references) and one [`Thresholds`] table, the single documented place for every threshold
//! (also in `docs/findings.md`); a budget file can override any of them.

mod collectives;
mod data_parallel;
mod dataloader_stall;
mod debug_api;
mod enclosure;
mod exposed_comm;
mod gaudi;
mod host_bound_gap;
mod host_copies;
mod layer_patterns;
mod mme_idle;
mod non_logical_transpose;
mod optimizer;
mod pointwise;
mod precision;
mod python_data_tensor;
mod recompile;
mod savings;
mod slow_gemm;
mod slow_zero_grad;
mod sync_point;
mod torch_ops;

pub(crate) use torch_ops::is_pointwise as is_pointwise_name;

use serde::{Deserialize, Serialize};
use steplens_ingest::model::{
    ArgKeys, CategoryClass, NO_PARENT, OpArg, SliceId, Timeline, TrackKind,
};

use crate::finding::{Evidence, Finding, FindingKind, Severity};
use crate::intervals::IntervalSet;
use crate::step_windows::StepWindow;
use crate::steps::Channels;

pub(crate) use crate::finding::MAX_EVIDENCE;
/// Durations in titles read as in the tables.
pub(crate) use crate::units::human_ns;
pub(crate) use enclosure::Under;

/// Every detector threshold, with its default. Field names are the keys of the budget file's
/// `[thresholds]` table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// `dataloader_stall`: data wait (DataLoader time not covered by any op) must reach this
    /// share of the step, percent.
    pub dataloader_stall_min_pct: f64,
    /// `dataloader_stall`: … and at least this long, ns.
    pub dataloader_stall_min_ns: i64,
    /// `host_bound_gap`: a device-idle gap shorter than this is launch jitter, not a finding, ns.
    pub host_gap_min_ns: i64,
    /// `host_bound_gap`: the host-bound idle time of a step must reach this share of the step,
    /// percent.
    pub host_gap_min_pct: f64,
    /// Idle breakdown: a gap between kernels on a stream shorter than this, not caused by a
    /// late launch, is kernel-launch overhead ("kernel wait"), ns. HTA's default (30 µs).
    pub kernel_wait_max_ns: i64,
    /// `mme_idle_behind_tpc`: MME idle time behind TPC work per step must reach this, ns.
    pub mme_idle_min_ns: i64,
    /// `mme_idle_behind_tpc` without steps: device work separated by this long with every
    /// engine idle belongs to different graph launches, ns.
    pub graph_gap_ns: i64,
    /// `straggler`: the slowest rank's extra compute per step must reach this share of its
    /// step, percent.
    pub straggler_min_pct: f64,
    /// `straggler`: collectives matched across the ranks needed to name one, count.
    pub straggler_min_collectives: usize,
    /// `mme_idle_behind_tpc`: a stretch with less TPC work than this is node-to-node jitter,
    /// not counted, ns.
    pub mme_idle_stretch_min_ns: i64,
    /// `non_logical_transpose` on Gaudi device lanes: transpose kernels (`transpose_*`,
    /// `DmaTranspose`) are flagged when they take at least this share of the step, percent.
    pub device_transpose_min_pct: f64,
    /// Gaudi `recompile`: graph compiles in the first this many steps (or `mark_step` metric
    /// dumps) are warm-up.
    pub gaudi_warmup_steps: usize,
    /// `recompile`: compiles with an index below this are warm-up, not recompiles (`F/0` is the
    /// first compile of frame `F`).
    pub recompile_warmup_compiles: u32,
    /// Materiality: a finding with a measured cost must cost at least this share of its step
    /// (of the trace, without steps), percent …
    pub min_finding_pct: f64,
    /// … and at least this long, ns.
    pub min_finding_ns: i64,
    /// `memory_growth`: the allocated baseline must rise by at least this much over the run of
    /// steps, bytes.
    pub memory_growth_min_bytes: i64,
    /// `reserved_slack`: reserved − allocated at their peaks must reach this, bytes …
    pub reserved_slack_min_bytes: i64,
    /// … and this share of the peak reserved, percent.
    pub reserved_slack_min_pct: f64,
    /// `no_mixed_precision`: fp32 matrix kernels must take at least this share of the step,
    /// percent.
    pub fp32_compute_min_pct: f64,
    /// `unfused_pointwise`: a chain has at least this many elementwise ops …
    pub pointwise_chain_min_ops: usize,
    /// … over a tensor of at least this many elements.
    pub pointwise_min_elems: i64,
    /// `unfused_optimizer`: per-parameter math ops in one optimizer step before it counts as a
    /// loop.
    pub optimizer_loop_min_ops: usize,
    /// … and its estimated cost must reach this share of the step, percent.
    pub optimizer_loop_min_pct: f64,
    /// `fragmented_collectives`: collectives of one kind in one step before they count as
    /// fragmented …
    pub fragmented_min_per_step: usize,
    /// … and, where every call's size is recorded, more than this many times the all-reduces
    /// DDP's default 25 MiB buckets would need for the step's bytes.
    pub fragmented_over_needed: f64,
    /// `exposed_communication`: collective time with no compute beside it must reach this
    /// share of the step, percent.
    pub exposed_comm_min_pct: f64,
    /// `slow_gemm`: a GEMM signature whose rate is below this share of what the trace's
    /// well-shaped GEMMs of its dtype reach (or its memory roof) runs slow, percent.
    pub slow_gemm_max_pct: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            dataloader_stall_min_pct: 5.0,
            dataloader_stall_min_ns: 1_000_000,
            host_gap_min_ns: 50_000,
            host_gap_min_pct: 5.0,
            kernel_wait_max_ns: 30_000,
            mme_idle_min_ns: 20_000,
            mme_idle_stretch_min_ns: 10_000,
            graph_gap_ns: 100_000,
            straggler_min_pct: 5.0,
            straggler_min_collectives: 3,
            gaudi_warmup_steps: 2,
            device_transpose_min_pct: 2.0,
            recompile_warmup_compiles: 1,
            min_finding_pct: 1.0,
            min_finding_ns: 20_000,
            memory_growth_min_bytes: 1 << 20,
            reserved_slack_min_bytes: 256 << 20,
            reserved_slack_min_pct: 30.0,
            fp32_compute_min_pct: 10.0,
            pointwise_chain_min_ops: 4,
            pointwise_min_elems: 1024,
            optimizer_loop_min_ops: 8,
            optimizer_loop_min_pct: 5.0,
            fragmented_min_per_step: 8,
            exposed_comm_min_pct: 5.0,
            fragmented_over_needed: 2.0,
            slow_gemm_max_pct: 50.0,
        }
    }
}

/// What every detector reads.
pub struct Context<'a> {
    /// The trace.
    pub timeline: &'a Timeline,
    /// Thresholds in force.
    pub thresholds: &'a Thresholds,
    /// Interval sets per input.
    pub channels: &'a rustc_hash::FxHashMap<u16, Channels>,
    /// Where the op args the detectors read are, memoized per slice.
    op_args: ArgKeys,
    /// What encloses each slice, made on first use.
    enclosure: std::sync::OnceLock<enclosure::Enclosure>,
    /// Per interned name, whether it is an elementwise ATen op; made on first use.
    pointwise_names: std::sync::OnceLock<NameSet>,
    /// The critical path of every step, made on first use (the step table and the savings
    /// both read it, from two threads).
    critical_paths: std::sync::OnceLock<crate::critical_path::CriticalPaths>,
    /// The rank matching of a multi-input run, made on first use (the rank table and the
    /// critical paths' collective waits both read it).
    ranks: std::sync::OnceLock<Option<crate::ranks::RankAnalysis>>,
    /// The launch links, made on first use.
    launches: std::sync::OnceLock<crate::step_windows::Launches>,
    /// Every step's device-inclusive window, in `timeline.steps` order, made on first use.
    windows: std::sync::OnceLock<Vec<StepWindow>>,
    /// Each input's collectives, collected on first use (two detectors read them).
    collectives: std::sync::OnceLock<Collectives>,
    /// The op signatures of the performance model, made on first use (`op_perf[]` and
    /// `slow_gemm` read them).
    op_signatures: std::sync::OnceLock<crate::op_perf::Signatures>,
    /// Per interned name, whether it launches a CUDA/HIP graph; made on first use.
    graph_launch_names: std::sync::OnceLock<NameSet>,
    /// Whether every op's arg places are found (once, on both cores), when the TensorBoard
    /// views run: they and the performance model read the args of nearly every op.
    op_args_found: std::sync::OnceLock<()>,
    /// Whether the report computes the TensorBoard views.
    views: bool,
    /// Where each pass's time is recorded (`steplens-bench`), if anywhere.
    ledger: Option<&'a crate::ledger::Ledger>,
}

/// Each input's collectives ([`crate::ranks::collect`]) and the name classes they were read with.
pub(crate) struct Collectives {
    /// How the trace's names read as collectives.
    pub(crate) names: crate::ranks::CollectiveNames,
    /// Per input (in input order), its collectives in time order.
    pub(crate) per_input: Vec<Vec<crate::ranks::Occurrence>>,
}

/// Per interned name, whether it passes a test: detectors look at every slice's name, and a
/// trace has far fewer names than slices, so each name is tested once.
pub(crate) struct NameSet(Vec<bool>);

impl NameSet {
    /// The names of `timeline` that pass `test`.
    pub(crate) fn new(timeline: &Timeline, test: impl Fn(&str) -> bool) -> Self {
        Self(
            timeline
                .strings
                .iter()
                .map(|(_, name)| test(name))
                .collect(),
        )
    }

    /// Whether slice `slice`'s name is in the set.
    pub(crate) fn has(&self, timeline: &Timeline, slice: SliceId) -> bool {
        timeline
            .slices
            .name
            .get(slice as usize)
            .and_then(|&n| self.0.get(n as usize))
            .copied()
            .unwrap_or(false)
    }
}

impl<'a> Context<'a> {
    /// The context of one analysis of `timeline`.
    #[must_use]
    pub fn new(
        timeline: &'a Timeline,
        thresholds: &'a Thresholds,
        channels: &'a rustc_hash::FxHashMap<u16, Channels>,
    ) -> Self {
        Self {
            timeline,
            thresholds,
            channels,
            op_args: ArgKeys::default(),
            enclosure: std::sync::OnceLock::new(),
            pointwise_names: std::sync::OnceLock::new(),
            critical_paths: std::sync::OnceLock::new(),
            ranks: std::sync::OnceLock::new(),
            launches: std::sync::OnceLock::new(),
            windows: std::sync::OnceLock::new(),
            collectives: std::sync::OnceLock::new(),
            op_signatures: std::sync::OnceLock::new(),
            graph_launch_names: std::sync::OnceLock::new(),
            op_args_found: std::sync::OnceLock::new(),
            views: false,
            ledger: None,
        }
    }

    /// The same context for a report that computes the TensorBoard views.
    #[must_use]
    pub(crate) fn with_views(mut self) -> Self {
        self.views = true;
        self
    }

    /// Finds the arg places of every op once, half the ops on each core, when the views run.
    /// The operators view and the performance model each read the args of nearly every op, on
    /// two threads at once: left to each, both walked the same args (cold in memory) at the
    /// same time. Whichever asks first finds them all; the other waits for it.
    pub(crate) fn find_op_args(&self) {
        if !self.views {
            return;
        }
        self.op_args_found.get_or_init(|| {
            self.timed("op args", || {
                let t = self.timeline;
                let ops: Vec<SliceId> = (0..t.slices.len() as SliceId)
                    .filter(|&i| t.slice_class(i) == CategoryClass::CpuOp)
                    .collect();
                let (first, second) = ops.split_at(ops.len() / 2);
                let find = |half: &[SliceId]| {
                    for &op in half {
                        // Only the memo it fills is wanted.
                        let _ = self.op_args.get(t, op, OpArg::InputDims);
                    }
                };
                side_by_side(|| find(first), || find(second));
            });
        });
    }

    /// The same context, recording each pass's time in `ledger`.
    #[must_use]
    pub fn with_ledger(mut self, ledger: &'a crate::ledger::Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Runs `pass`, recording it under `name` when a ledger is kept.
    pub(crate) fn timed<T>(&self, name: &str, pass: impl FnOnce() -> T) -> T {
        crate::ledger::timed(self.ledger, name, pass)
    }

    /// Each input's collectives.
    pub(crate) fn collectives(&self) -> &Collectives {
        self.collectives.get_or_init(|| {
            self.timed("collectives", || {
                let t = self.timeline;
                let names = crate::ranks::CollectiveNames::of_timeline(t);
                let per_input = (0..t.sources.len())
                    .map(|source| crate::ranks::collect(t, source as u16, &names))
                    .collect();
                Collectives { names, per_input }
            })
        })
    }

    /// The op signatures of the performance model ([`crate::op_perf`]).
    pub(crate) fn op_signatures(&self) -> &crate::op_perf::Signatures {
        self.op_signatures.get_or_init(|| {
            let launches = self.launches();
            // Without launches no op's args are read.
            if !launches.is_empty() {
                self.find_op_args();
            }
            self.timed("op perf: signatures", || {
                crate::op_perf::Signatures::new(self.timeline, launches, &|op, arg| {
                    self.arg(op, arg)
                })
            })
        })
    }

    /// The `op_perf[]` rows of the trace ([`crate::op_perf`]): one per op signature whose calls
    /// launched device work, by kernel time.
    #[must_use]
    pub fn op_perf(&self) -> Vec<crate::op_perf::OpPerf> {
        crate::op_perf::rows(self.timeline, self.op_signatures())
    }

    /// The launch links (runtime call ↔ device work).
    pub(crate) fn launches(&self) -> &crate::step_windows::Launches {
        self.launches.get_or_init(|| {
            self.timed("launch index", || {
                crate::step_windows::Launches::new(self.timeline)
            })
        })
    }

    /// Every step's device-inclusive window ([`crate::step_windows`]), in `timeline.steps`
    /// order.
    pub fn step_windows(&self) -> &[StepWindow] {
        self.windows.get_or_init(|| {
            let launches = self.launches();
            self.timed("step windows", || {
                crate::step_windows::step_windows_with(self.timeline, launches)
            })
        })
    }

    /// Step `index`'s device-inclusive window.
    pub fn step_window(&self, index: usize) -> Option<&StepWindow> {
        self.step_windows().get(index)
    }

    /// The step (index into `timeline.steps`) whose device-inclusive window contains `ts` on
    /// input `source`'s clock: where device work that ran at `ts` belongs.
    pub fn device_step_at(&self, source: u16, ts: i64) -> Option<usize> {
        let clock = self.timeline.step_source(source);
        let steps = &self.timeline.steps;
        let windows = self.step_windows();
        // Steps of one clock are contiguous (sorted by clock, then start) and their windows
        // ordered and disjoint.
        let after = steps.partition_point(|s| s.source < clock);
        let until = steps.partition_point(|s| s.source <= clock);
        let run = windows.get(after..until)?;
        let i = run.partition_point(|w| w.start <= ts).checked_sub(1)?;
        (ts < run[i].end).then_some(after + i)
    }

    /// The critical path of every step (of each input without steps).
    pub fn critical_paths(&self) -> &crate::critical_path::CriticalPaths {
        self.critical_paths.get_or_init(|| {
            let waits = self.ranks().map_or(&[][..], |r| r.waits.as_slice());
            let windows = self.step_windows();
            self.timed("critical path", || {
                crate::critical_path::critical_paths_with(self.timeline, waits, windows)
            })
        })
    }

    /// The rank matching of a run (`None` without collectives).
    pub fn ranks(&self) -> Option<&crate::ranks::RankAnalysis> {
        self.ranks
            .get_or_init(|| {
                let windows = self.step_windows();
                self.timed("ranks", || {
                    crate::ranks::rank_analysis_with(self.timeline, self.thresholds, windows)
                })
            })
            .as_ref()
    }

    /// Whether slice `slice` is an elementwise ATen op ([`torch_ops::is_pointwise`] of its
    /// name, classified once per name: a transformer trace has a million ops).
    pub(crate) fn is_pointwise_op(&self, slice: SliceId) -> bool {
        self.pointwise_names
            .get_or_init(|| NameSet::new(self.timeline, torch_ops::is_pointwise))
            .has(self.timeline, slice)
    }

    /// Whether `slice` is inside a range of the kind `what` (at any depth).
    pub(crate) fn is_under(&self, slice: SliceId, what: Under) -> bool {
        self.enclosure
            .get_or_init(|| enclosure::Enclosure::new(self.timeline))
            .is_under(slice, what)
    }

    /// The raw JSON value of one of slice `slice`'s op args (`Timeline::arg_raw` of its key;
    /// the first read walks the slice's args once and remembers where all four start).
    pub(crate) fn arg(&self, slice: SliceId, arg: OpArg) -> Option<&'a [u8]> {
        self.op_args.get(self.timeline, slice, arg)
    }
}

/// Runtime calls that block the host until the device is done.
pub(crate) const BLOCKING_CALLS: &[&str] = &[
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventSynchronize",
    "hipMemcpy",
    "hipMemcpyWithStream",
    "synStreamSynchronize",
    "synEventSynchronize",
    "synDeviceSynchronize",
];

/// The `n` names with the most time in `by_name`, most first (ties by name id).
pub(crate) fn ranked_names(
    t: &Timeline,
    by_name: rustc_hash::FxHashMap<u32, i64>,
    n: usize,
) -> Vec<String> {
    let mut ranked: Vec<(u32, i64)> = by_name.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
        .iter()
        .take(n)
        .map(|&(id, _)| t.strings.get(id).to_owned())
        .collect()
}

/// Top-level module paths that are libraries, not the user's code, in `CallFrom` values.
const LIBRARY_ROOTS: &[&str] = &[
    "torch/",
    "torchvision/",
    "torchaudio/",
    "tqdm/",
    "numpy/",
    "transformers/",
    "accelerate/",
    "lightning/",
    "pytorch_lightning/",
    "deepspeed/",
    "habana_frameworks/",
    "optimum/",
    "apex/",
    "triton/",
    "functorch/",
    "datasets/",
    "<frozen",
    "contextlib.py",
    "threading.py",
    "functools.py",
    "runpy.py",
    "typing.py",
    "abc.py",
];

impl Context<'_> {
    /// Ancestors of `slice`, innermost first.
    pub fn ancestors(&self, slice: SliceId) -> impl Iterator<Item = SliceId> + '_ {
        let parents = &self.timeline.slices.parent;
        std::iter::successors(parents.get(slice as usize).copied(), move |&p| {
            parents.get(p as usize).copied()
        })
        .take_while(|&p| p != NO_PARENT)
    }

    /// The slices nested (at any depth) inside `slice` on its track, in track order.
    pub fn descendants(&self, slice: SliceId) -> impl Iterator<Item = SliceId> + '_ {
        let t = self.timeline;
        let (start, end) = (t.slices.start[slice as usize], t.slices.end(slice));
        let range = t.slice_track(slice).map_or(0..0, |track| {
            t.track_slices_between(track, start, end.saturating_add(1))
        });
        // Whether each slice of the range so far is inside `slice`: a parent comes before its
        // children in track order, so each answer takes one look at the parent's, not a walk
        // up the ancestors.
        let first = range.start;
        let mut inside: Vec<bool> = Vec::with_capacity(range.len());
        range.filter(move |&j| {
            let parent = t.slices.parent[j as usize];
            let yes = j != slice
                && (parent == slice
                    || if (first..j).contains(&parent) {
                        inside[(parent - first) as usize]
                    } else if parent > j && parent != NO_PARENT {
                        // Not in track order (never built so): ask the ancestors.
                        self.ancestors(j).any(|a| a == slice)
                    } else {
                        false
                    });
            inside.push(yes);
            yes
        })
    }

    /// Whether `slice` is an op with no op around it (the call the user's code made; the ops
    /// inside it are its implementation).
    pub fn is_outermost_op(&self, slice: SliceId) -> bool {
        let t = self.timeline;
        t.slice_class(slice) == CategoryClass::CpuOp && !self.is_under(slice, Under::OP)
    }

    /// The outermost op that ends last before `op` starts on its thread.
    pub fn previous_outermost_op(&self, op: SliceId) -> Option<SliceId> {
        let t = self.timeline;
        let track = t.slice_track(op)?;
        let start = t.slices.start[op as usize];
        (track.slices.start..op)
            .rev()
            .find(|&j| t.slices.end(j) <= start && self.is_outermost_op(j))
    }

    /// The outermost op that starts first after `op` ends on its thread.
    pub fn next_outermost_op(&self, op: SliceId) -> Option<SliceId> {
        let t = self.timeline;
        let track = t.slice_track(op)?;
        let end = t.slices.end(op);
        (op + 1..track.slices.end)
            .find(|&j| t.slices.start[j as usize] >= end && self.is_outermost_op(j))
    }

    /// Whether `slice` runs inside torch.compile's machinery.
    pub fn under_compile(&self, slice: SliceId) -> bool {
        self.is_under(slice, Under::COMPILE)
    }

    /// The user's call site (`file.py:line`) of `slice`: the innermost enclosing Python frame
    /// called from outside the Python and torch installation, from `python_function` frames'
    /// `CallFrom`; in traces without Python frames (PyTorch 1.8–1.10 `with_stack`), the first
    /// user frame of the innermost op's `Call stack` arg. `None` when the trace has neither.
    pub fn call_site(&self, slice: SliceId) -> Option<String> {
        for a in self.ancestors(slice) {
            if self.timeline.slice_class(a) != CategoryClass::PythonFunction {
                continue;
            }
            let Some(from) = self.timeline.arg_str(a, "CallFrom") else {
                continue;
            };
            if !is_library_path(&from) {
                return Some(from);
            }
        }
        std::iter::once(slice)
            .chain(self.ancestors(slice))
            .find_map(|a| self.timeline.arg_str(a, "Call stack"))
            .and_then(|stack| user_frame_of_call_stack(&stack))
    }

    /// The step (index into `timeline.steps`) whose range contains `ts` on input `source`.
    pub fn step_at(&self, source: u16, ts: i64) -> Option<usize> {
        self.timeline.step_at(source, ts)
    }

    /// The step name for `slice`, if it falls in one.
    pub fn step_name(&self, slice: SliceId) -> Option<String> {
        let track = self.timeline.slice_track(slice)?;
        let ts = *self.timeline.slices.start.get(slice as usize)?;
        self.step_at(track.source, ts)
            .map(|i| self.timeline.steps[i].name.clone())
    }

    /// The graph launch (`cudaGraphLaunch`, `hipGraphLaunch`, …) that ran device slice `d`,
    /// when a replayed CUDA/HIP graph ran it (the launch index links every kernel of the replay
    /// to that one call).
    pub(crate) fn graph_launch_of(&self, d: SliceId) -> Option<SliceId> {
        let call = self.launches().launcher(d)?;
        self.graph_launch_names
            .get_or_init(|| NameSet::new(self.timeline, crate::ops::is_graph_launch))
            .has(self.timeline, call)
            .then_some(call)
    }

    /// A graph launch as one unit, for titles: `CompiledFunctionBackward: CUDA graph of 20
    /// kernels` (the innermost op around the launch; else the launch call's name).
    pub(crate) fn graph_label(&self, call: SliceId) -> String {
        let t = self.timeline;
        let name = t.slice_name(call);
        let kind = if name.starts_with("hip") {
            "HIP"
        } else {
            "CUDA"
        };
        let kernels = self.launches().launched_by(call).count();
        let graph = format!(
            "{kind} graph of {kernels} kernel{}",
            if kernels == 1 { "" } else { "s" }
        );
        match self
            .ancestors(call)
            .find(|&a| t.slice_class(a) == CategoryClass::CpuOp)
        {
            Some(op) => format!("{}: {graph}", t.slice_name(op)),
            None => format!("{graph} ({name})"),
        }
    }

    /// An evidence reference to `slice` the viewer can jump to.
    pub fn evidence(&self, slice: SliceId) -> Evidence {
        let t = self.timeline;
        let i = slice as usize;
        Evidence::Slice {
            slice,
            name: t.slice_name(slice).to_owned(),
            track: t.slice_track(slice).map(|tr| tr.name.clone()),
            start_ns: t.slices.start[i],
            dur_ns: t.slices.dur[i],
        }
    }

    /// Display name of the track of `slice`.
    pub fn track_name(&self, slice: SliceId) -> Option<String> {
        self.timeline.slice_track(slice).map(|t| t.name.clone())
    }

    /// Host-thread tracks.
    pub fn host_tracks(&self) -> impl Iterator<Item = (u32, &steplens_ingest::model::Track)> {
        self.timeline
            .tracks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.kind == TrackKind::HostThread)
            .map(|(i, t)| (i as u32, t))
    }
}

/// The first frame outside the libraries of a `Call stack` arg (frames innermost first,
/// separated by `;`, each `path(line): function`), as `file:line`.
fn user_frame_of_call_stack(stack: &str) -> Option<String> {
    stack.split(';').find_map(|frame| {
        let head = frame
            .trim()
            .split_once("): ")
            .map_or(frame.trim(), |(h, _)| h);
        let (path, line) = head.trim_end_matches(')').rsplit_once('(')?;
        let line: u32 = line.trim().parse().ok()?;
        let path = path.trim();
        // The file name alone, as a `CallFrom` of a script run from its own directory reads.
        let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
        (!path.is_empty() && !is_library_path(path)).then(|| format!("{file}:{line}"))
    })
}

fn is_library_path(path: &str) -> bool {
    path.contains("site-packages/")
        || path.contains("dist-packages/")
        || path.contains("/lib/python")
        || LIBRARY_ROOTS.iter().any(|root| {
            // A root at the start of a module path, or after a directory of an absolute one.
            path.match_indices(root)
                .any(|(i, _)| i == 0 || path.as_bytes().get(i - 1) == Some(&b'/'))
        })
}

/// Runs every detector and ranks the findings by lost time, largest first.
#[must_use]
pub fn run_all(ctx: &Context<'_>) -> Vec<Finding> {
    // The detectors read the timeline only: two halves run on two cores, their findings
    // concatenated in this fixed order, so the report does not depend on the scheduling.
    let (mut findings, second) = side_by_side(
        || {
            let mut findings = Vec::new();
            findings.extend(ctx.timed("detector dataloader_stall", || {
                dataloader_stall::detect(ctx)
            }));
            findings.extend(ctx.timed("detector recompile", || recompile::detect(ctx)));
            findings.extend(ctx.timed("detector mme_idle", || mme_idle::detect(ctx)));
            findings.extend(ctx.timed("detector gaudi", || gaudi::detect(ctx)));
            // The costliest detector on torch traces (it reads the shapes of every transpose
            // and copy): the other half takes the rest.
            findings.extend(ctx.timed("detector non_logical_transpose", || {
                non_logical_transpose::detect(ctx)
            }));
            findings
        },
        || {
            let mut findings = Vec::new();
            // Host-to-device copies from pageable or freshly made host tensors are their own
            // findings', not syncs.
            let copies = ctx.timed("detector host copies (index)", || {
                host_copies::host_copies(ctx)
            });
            findings.extend(ctx.timed("detector sync_point", || {
                sync_point::detect(ctx, &host_copies::claimed_copy_ops(&copies))
            }));
            findings
                .extend(ctx.timed("detector host_copies", || host_copies::detect(ctx, &copies)));
            findings.extend(ctx.timed("detector python_data_tensor", || {
                python_data_tensor::detect(ctx)
            }));
            findings.extend(ctx.timed("detector host_bound_gap", || host_bound_gap::detect(ctx)));
            findings.extend(ctx.timed("detector slow_zero_grad", || slow_zero_grad::detect(ctx)));
            findings.extend(ctx.timed("detector debug_api", || debug_api::detect(ctx)));
            findings.extend(ctx.timed("detector layer_patterns", || layer_patterns::detect(ctx)));
            findings.extend(ctx.timed("detector precision", || precision::detect(ctx)));
            findings.extend(ctx.timed("detector slow_gemm", || slow_gemm::detect(ctx)));
            findings.extend(ctx.timed("detector data_parallel", || data_parallel::detect(ctx)));
            findings.extend(ctx.timed("detector pointwise", || pointwise::detect(ctx)));
            findings.extend(ctx.timed("detector optimizer", || optimizer::detect(ctx)));
            findings.extend(ctx.timed("detector collectives", || collectives::detect(ctx)));
            findings.extend(ctx.timed("detector exposed_comm", || exposed_comm::detect(ctx)));
            findings
        },
    );
    findings.extend(second);
    let claimed: Vec<i64> = findings.iter().map(|f| f.lost_ns).collect();
    ctx.timed("findings: one owner per ns", || {
        settle_lost_time(ctx, &mut findings);
    });
    let compiling = compile_time_per_step(ctx, &findings);
    let material: Vec<bool> = findings
        .iter()
        .map(|f| is_material(ctx, f, &compiling))
        .collect();
    let (mut findings, claimed): (Vec<Finding>, Vec<i64>) = findings
        .into_iter()
        .zip(claimed)
        .zip(material)
        .filter(|(_, keep)| *keep)
        .map(|(pair, _)| pair)
        .unzip();
    ctx.timed("findings: savings", || {
        savings::settle_savings(ctx, &mut findings, &claimed);
    });
    rank_by_saving(&mut findings);
    findings
}

/// Ranks findings by what fixing them saves, then by the time they own, largest first.
pub fn rank_by_saving(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.saving_ns
            .cmp(&a.saving_ns)
            .then_with(|| b.lost_ns.cmp(&a.lost_ns))
            .then_with(|| a.start_ns.cmp(&b.start_ns))
            .then_with(|| a.kind.cmp(&b.kind))
    });
}

/// Runs `first` on this thread and `second` on another, and returns both results; a panic in
/// `second` (a bug) is raised here rather than lost.
pub(crate) fn side_by_side<A, B: Send>(
    first: impl FnOnce() -> A,
    second: impl FnOnce() -> B + Send,
) -> (A, B) {
    std::thread::scope(|scope| {
        let other = scope.spawn(second);
        let mine = first();
        let theirs = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (mine, theirs)
    })
}

/// The step a finding names, as its device-inclusive window `(start, end)` on the clock of input
/// `source`, and that window's duration. A cost outside the window (host work of a device-bound
/// step that ran ahead of the device) costs the step nothing.
fn step_window(ctx: &Context<'_>, source: u16, step: Option<&str>) -> Option<((i64, i64), i64)> {
    let name = step?;
    let source = ctx.timeline.step_source(source);
    let index = ctx
        .timeline
        .steps
        .iter()
        .position(|s| s.source == source && s.name == name)?;
    let w = ctx.step_window(index)?;
    Some(((w.start, w.end), w.dur()))
}

/// A step on one input's clock: (clock source, step name; `None` outside every step).
type StepOfClock = (u16, Option<String>);

/// One owner for each lost nanosecond: within an input's clock, findings take their lost
/// intervals (clipped to their step) in [`FindingKind::OWNER_ORDER`]; what an earlier finding owns is taken
/// off a later one's `lost_ns`, and the title says where it went. Per step, the findings' lost
/// time then adds up to at most the step.
fn settle_lost_time(ctx: &Context<'_>, findings: &mut [Finding]) {
    let t = ctx.timeline;
    let mut order: Vec<usize> = (0..findings.len()).collect();
    order.sort_by_key(|&i| (findings[i].kind.owner_rank(), findings[i].start_ns));
    // Per clock and step (steps of one clock never overlap, so findings of different steps
    // cannot claim the same nanosecond): (owner kind, intervals it owns).
    let mut owned: rustc_hash::FxHashMap<StepOfClock, Vec<(FindingKind, IntervalSet)>> =
        rustc_hash::FxHashMap::default();
    for i in order {
        let f = &mut findings[i];
        let Some(source) = f.cost.source else {
            continue;
        };
        if f.cost.ranges.is_empty() {
            continue;
        }
        let clock = t.step_source(source);
        let window = step_window(ctx, source, f.step.as_deref());
        let mine = IntervalSet::from_ranges(f.cost.ranges.clone());
        let inside = match window {
            Some(((a, b), _)) => IntervalSet::from_ranges(mine.within(a, b)),
            None => mine.clone(),
        };
        let owners = owned.entry((clock, f.step.clone())).or_default();
        let mut free = inside.clone();
        let mut taken_by: Vec<(FindingKind, i64)> = Vec::new();
        for (kind, set) in owners.iter() {
            let before = free.total();
            free = free.minus(set);
            let taken = before - free.total();
            if taken > 0 {
                match taken_by.iter_mut().find(|(k, _)| k == kind) {
                    Some(entry) => entry.1 += taken,
                    None => taken_by.push((*kind, taken)),
                }
            }
        }
        let taken = mine.total() - free.total();
        let lost = (f.lost_ns - taken.max(0)).clamp(0, free.total());
        if lost != f.lost_ns {
            if !taken_by.is_empty() {
                // "[302 µs of it is counted under MME idle behind TPC]"
                let parts: Vec<String> = taken_by
                    .iter()
                    .map(|(k, ns)| {
                        format!("{} of it is counted under {}", human_ns(*ns), k.title())
                    })
                    .collect();
                f.title.push_str(&format!(" [{}]", parts.join("; ")));
            }
            f.lost_ns = lost;
            if !f.cost.pattern {
                let step_ns = window.map_or(0, |(_, dur)| dur);
                f.severity = Severity::of_share(lost, step_ns);
            }
        }
        owners.push((f.kind, free));
    }
}

/// Recompile time per (clock, step name), after settling.
fn compile_time_per_step(
    ctx: &Context<'_>,
    findings: &[Finding],
) -> rustc_hash::FxHashMap<(u16, String), i64> {
    let mut out = rustc_hash::FxHashMap::default();
    for f in findings.iter().filter(|f| f.kind == FindingKind::Recompile) {
        if let (Some(source), Some(step)) = (f.cost.source, &f.step) {
            *out.entry((ctx.timeline.step_source(source), step.clone()))
                .or_insert(0) += f.lost_ns;
        }
    }
    out
}

/// Materiality: a finding whose cost this trace measures must cost at least `min_finding_pct`
/// of its step (of the trace, without a step) and `min_finding_ns`. The step's share leaves out
/// the step's recompile time: a one-off compile does not dilute the step's other costs. Pattern
/// findings, and counts without a time range (metrics files), are exempt.
fn is_material(
    ctx: &Context<'_>,
    f: &Finding,
    compiling: &rustc_hash::FxHashMap<(u16, String), i64>,
) -> bool {
    if f.cost.pattern || f.cost.ranges.is_empty() {
        return true;
    }
    let th = ctx.thresholds;
    let in_step = f.cost.source.and_then(|source| {
        let (_, dur) = step_window(ctx, source, f.step.as_deref())?;
        let clock = ctx.timeline.step_source(source);
        let compile = if f.kind == FindingKind::Recompile {
            0
        } else {
            f.step
                .as_ref()
                .and_then(|s| compiling.get(&(clock, s.clone())))
                .copied()
                .unwrap_or(0)
        };
        Some((dur - compile).max(0))
    });
    let base = in_step
        .or_else(|| ctx.timeline.time_range().map(|(a, b)| b - a))
        .unwrap_or(0);
    f.lost_ns >= th.min_finding_ns && f.lost_ns as f64 * 100.0 >= th.min_finding_pct * base as f64
}

/// ` at file.py:12` for a title, or nothing without a call site.
pub(crate) fn at_site(call_site: Option<&str>) -> String {
    call_site.map(|c| format!(" at {c}")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{is_library_path, user_frame_of_call_stack};

    #[test]
    fn call_stack_arg_gives_the_first_user_frame() {
        let stack = "/opt/conda/lib/python3.8/site-packages/torch/_tensor.py(613): item;\
                     /home/ml/proj/train.py(42): train_step;/home/ml/proj/train.py(88): main";
        assert_eq!(
            user_frame_of_call_stack(stack).as_deref(),
            Some("train.py:42")
        );
        assert_eq!(
            user_frame_of_call_stack(
                "/src/pytorch/torch/nn/modules/module.py(1051): _call_impl;train.py(7): <module>"
            )
            .as_deref(),
            Some("train.py:7")
        );
        assert_eq!(user_frame_of_call_stack(""), None);
        assert_eq!(user_frame_of_call_stack("garbage;also(x): y"), None);
    }

    #[test]
    fn library_paths() {
        assert!(is_library_path("torch/_tensor_str.py:590"));
        assert!(is_library_path("tqdm/std.py:1200"));
        assert!(is_library_path(
            "/usr/lib/python3.11/site-packages/foo.py:3"
        ));
        assert!(!is_library_path("sync_points.py:43"));
        assert!(!is_library_path("myproj/train.py:10"));
    }
}
