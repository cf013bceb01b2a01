//! The analysis cache: what every pass of one report reads ([`Context`]): the Timeline, the
//! thresholds, and the indexes built once on first use and shared by the detectors, the tables
//! and the views (launch links, step windows, critical paths, rank matching, collectives, op
//! signatures, op-arg places), plus the questions detectors ask of a slice (its call site, step,
//! enclosing ops, evidence).

pub(crate) mod enclosure;

use steplens_ingest::model::{
    ArgKeys, CategoryClass, NO_PARENT, OpArg, SliceId, Timeline, TrackKind,
};

use self::enclosure::Under;
use crate::busy::Channels;
use crate::finding::Evidence;
use crate::op_names::NameFlags;
use crate::parallel::side_by_side;
use crate::step_windows::StepWindow;
use crate::thresholds::Thresholds;

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
    /// The critical path of every step, made on first use (the step table and the savings
    /// both read it, from two threads).
    critical_paths: std::sync::OnceLock<crate::critical_path::CriticalPaths>,
    /// The rank matching of a multi-input run, made on first use (the rank table and the
    /// critical paths' collective waits both read it).
    ranks: std::sync::OnceLock<Option<crate::ranks::RankAnalysis>>,
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
    /// Each device's memory series, made on first use (the memory table and the memory
    /// findings read it).
    memory: std::sync::OnceLock<Vec<crate::memory::DeviceMemory>>,
    /// Every slice's self time, made on first use (the op table and the rank summaries).
    self_time: std::sync::OnceLock<crate::ops::SelfTime>,
    /// The launch index, once asked for (only its first request is timed in the ledger).
    launch_index: std::sync::OnceLock<&'a steplens_ingest::model::Launches>,
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
/// trace has far fewer names than slices, so each name is tested once (a one-bit
/// [`NameFlags`]).
pub(crate) struct NameSet(NameFlags);

impl NameSet {
    /// The names of `timeline` that pass `test`.
    pub(crate) fn new(timeline: &Timeline, test: impl Fn(&str) -> bool) -> Self {
        Self(NameFlags::new(timeline, |name| u8::from(test(name))))
    }

    /// Whether slice `slice`'s name is in the set.
    pub(crate) fn has(&self, timeline: &Timeline, slice: SliceId) -> bool {
        self.0.of(timeline, slice) != 0
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
            critical_paths: std::sync::OnceLock::new(),
            ranks: std::sync::OnceLock::new(),
            windows: std::sync::OnceLock::new(),
            collectives: std::sync::OnceLock::new(),
            op_signatures: std::sync::OnceLock::new(),
            graph_launch_names: std::sync::OnceLock::new(),
            op_args_found: std::sync::OnceLock::new(),
            memory: std::sync::OnceLock::new(),
            self_time: std::sync::OnceLock::new(),
            launch_index: std::sync::OnceLock::new(),
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

    /// Each device's memory series ([`crate::memory::memory_by_device`]).
    pub fn memory(&self) -> &[crate::memory::DeviceMemory] {
        self.memory
            .get_or_init(|| self.timed("memory", || crate::memory::memory_by_device(self.timeline)))
    }

    /// Every slice's self time ([`crate::ops::SelfTime`]).
    pub fn self_time(&self) -> &crate::ops::SelfTime {
        self.self_time
            .get_or_init(|| self.timed("self time", || crate::ops::SelfTime::new(self.timeline)))
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

    /// The trace's launch index ([`Timeline::launches`]); the ledger times its build here when
    /// this analysis is the first to ask.
    pub(crate) fn launches(&self) -> &'a steplens_ingest::model::Launches {
        let t: &'a Timeline = self.timeline;
        self.launch_index
            .get_or_init(|| self.timed("launch index", || t.launches()))
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

    /// The critical paths, taken out of the cache by the report once no pass reads them.
    pub(crate) fn take_critical_paths(&mut self) -> Option<crate::critical_path::CriticalPaths> {
        self.critical_paths.take()
    }

    /// The rank matching of a run (`None` without collectives).
    pub fn ranks(&self) -> Option<&crate::ranks::RankAnalysis> {
        self.ranks
            .get_or_init(|| {
                let windows = self.step_windows();
                let self_time = self.self_time();
                self.timed("ranks", || {
                    crate::ranks::rank_analysis_with(
                        self.timeline,
                        self.thresholds,
                        windows,
                        self_time,
                    )
                })
            })
            .as_ref()
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

impl Context<'_> {
    /// Ancestors of `slice`, innermost first.
    pub fn ancestors(&self, slice: SliceId) -> impl Iterator<Item = SliceId> + '_ {
        crate::call_site::ancestors(self.timeline, slice)
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
        crate::call_site::call_site(self.timeline, slice)
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
