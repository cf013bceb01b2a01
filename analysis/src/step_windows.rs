//! Device-inclusive steps: where each training step begins and ends as the accelerator lived
//! it, not only as the host annotated it.
//!
//! On a run that goes well the device is the bottleneck and the host runs ahead: a
//! `ProfilerStep#N` host range holds the launches of step N, but the device finishes that work
//! long after the range ended. A step is therefore (the TensorBoard plugin's rule, which its
//! Overview uses, and steplens' step table since):
//! - it runs from its host start to whichever is later, its host end or the end of the device
//!   work its launches started (a runtime call wholly inside the host range launched it);
//! - it starts no earlier than the previous step of its input ended;
//! - the first step starts after device work launched before it that ends before the first
//!   step's own device work (a warm-up the device was still busy with).
//!
//! An input without any launch link (a host-only trace, a Gaudi or CUDA trace without flows)
//! keeps the host ranges. One definition, used by the step table, the detectors' step shares,
//! the critical path and the plugin's Overview.

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, NO_PARENT, SliceId, Timeline, TrackKind};

/// Which host call launched which device work, from the trace's launch flows (a runtime or
/// driver call → a kernel, copy or memset), built once per analysis (`Context::launches`).
/// A device slice with several incoming runtime links keeps the first in flow order; one runtime
/// call may launch many (a graph launch). Runtime links are the TensorBoard plugin's rule and
/// what steps and views read; driver-API links (cuBLASLt and Triton launch through
/// `cuLaunchKernel`) count only for readers that ask for them, and only where a device slice has
/// no runtime link.
pub(crate) struct Launches {
    /// Device slice → the runtime call that launched it (`NO_PARENT`: none).
    launch_of: Vec<SliceId>,
    /// Device slices with no runtime link → the driver call that launched them.
    driver_of: FxHashMap<SliceId, SliceId>,
    /// (runtime call, device slice) for every runtime link, sorted.
    launched: Vec<(SliceId, SliceId)>,
}

impl Launches {
    /// The launch links of `t`.
    pub(crate) fn new(t: &Timeline) -> Self {
        let mut launch_of = vec![NO_PARENT; t.slices.len()];
        let mut driver_of: FxHashMap<SliceId, SliceId> = FxHashMap::default();
        let mut launched: Vec<(SliceId, SliceId)> = Vec::new();
        for flow in &t.flows {
            if !t.slice_class(flow.to).is_device_work() {
                continue;
            }
            match t.slice_class(flow.from) {
                CategoryClass::Runtime if launch_of.get(flow.to as usize) == Some(&NO_PARENT) => {
                    launch_of[flow.to as usize] = flow.from;
                    launched.push((flow.from, flow.to));
                }
                CategoryClass::Driver => {
                    driver_of.entry(flow.to).or_insert(flow.from);
                }
                _ => {}
            }
        }
        driver_of.retain(|&d, _| launch_of.get(d as usize) == Some(&NO_PARENT));
        launched.sort_unstable();
        Self {
            launch_of,
            driver_of,
            launched,
        }
    }

    /// The runtime call that launched device slice `d`.
    pub(crate) fn launcher(&self, d: SliceId) -> Option<SliceId> {
        self.launch_of
            .get(d as usize)
            .copied()
            .filter(|&r| r != NO_PARENT)
    }

    /// The runtime call that launched device slice `d`, else the driver call that did.
    pub(crate) fn launcher_or_driver(&self, d: SliceId) -> Option<SliceId> {
        self.launcher(d).or_else(|| self.driver_of.get(&d).copied())
    }

    /// When device slice `d` was launched: the start of the call that launched it (its
    /// runtime call, else its driver call).
    pub(crate) fn launched_at(&self, t: &Timeline, d: SliceId) -> Option<i64> {
        self.launcher_or_driver(d)
            .map(|call| t.slices.start[call as usize])
    }

    /// The device work runtime call `r` launched (empty when it launched none).
    pub(crate) fn launched_by(&self, r: SliceId) -> impl Iterator<Item = SliceId> + '_ {
        let from = self.launched.partition_point(|&(c, _)| c < r);
        self.launched[from..]
            .iter()
            .take_while(move |&&(c, _)| c == r)
            .map(|&(_, d)| d)
    }

    /// Whether the trace has any runtime launch link.
    pub(crate) fn is_empty(&self) -> bool {
        self.launched.is_empty()
    }
}

/// One step as the device lived it (its host range is the `timeline.steps` entry of the same
/// index). All times ns on the step's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepWindow {
    /// Start: the host start, or the previous step's end when that is later.
    pub start: i64,
    /// End: the host end, or the end of the device work the step launched when that is later.
    pub end: i64,
    /// Device slices the step's launches started (0 without launch links).
    pub launched: usize,
}

impl StepWindow {
    /// The device-inclusive duration.
    #[must_use]
    pub fn dur(&self) -> i64 {
        self.end - self.start
    }
}

/// The device-inclusive window of every step of `t`, in `t.steps` order.
#[must_use]
pub fn step_windows(t: &Timeline) -> Vec<StepWindow> {
    step_windows_with(t, &Launches::new(t))
}

/// [`step_windows`] with the launch links already built.
pub(crate) fn step_windows_with(t: &Timeline, launches: &Launches) -> Vec<StepWindow> {
    let mut out = Vec::with_capacity(t.steps.len());
    // `t.steps` is sorted by (clock source, start): one run of steps per clock.
    let mut at = 0;
    while at < t.steps.len() {
        let clock = t.steps[at].source;
        let len = t.steps[at..]
            .iter()
            .take_while(|s| s.source == clock)
            .count();
        let host: Vec<(i64, i64)> = t.steps[at..at + len]
            .iter()
            .map(|s| (s.start, s.end()))
            .collect();
        out.extend(stretch(t, launches, |s| t.step_source(s) == clock, &host));
        at += len;
    }
    out
}

/// Stretches host step ranges (sorted by start, of the inputs `in_input` accepts) to the device
/// work their launches started, by the rules in the module docs.
pub(crate) fn stretch(
    t: &Timeline,
    launches: &Launches,
    in_input: impl Fn(u16) -> bool,
    host: &[(i64, i64)],
) -> Vec<StepWindow> {
    let host_only = || {
        host.iter()
            .map(|&(s, e)| StepWindow {
                start: s,
                end: e,
                launched: 0,
            })
            .collect()
    };
    if host.is_empty() || launches.is_empty() {
        return host_only();
    }
    // The device work each step's runtime calls (those wholly inside it) launched.
    let mut device = vec![(i64::MAX, i64::MIN); host.len()];
    let mut matched = vec![0usize; host.len()];
    let mut inside: Vec<SliceId> = Vec::new();
    for track in t.tracks.iter().filter(|tr| in_input(tr.source)) {
        if track.kind != TrackKind::HostThread {
            continue;
        }
        for r in track.slices.clone() {
            let mut work = launches.launched_by(r).peekable();
            if work.peek().is_none() {
                continue;
            }
            let (rs, re) = (t.slices.start[r as usize], t.slices.end(r));
            let Some(step) = host.partition_point(|s| s.0 <= rs).checked_sub(1) else {
                continue;
            };
            if re > host[step].1 {
                continue;
            }
            for d in work {
                let slot = &mut device[step];
                slot.0 = slot.0.min(t.slices.start[d as usize]);
                slot.1 = slot.1.max(t.slices.end(d));
                matched[step] += 1;
                inside.push(d);
            }
        }
    }
    if matched.iter().all(|&m| m == 0) {
        return host_only();
    }
    let mut prev_end = host[0].0;
    if matched[0] > 0 {
        // Device work launched before any step that ends before the first step's device work
        // holds the device: the first step starts after it.
        inside.sort_unstable();
        for track in t.tracks.iter().filter(|tr| in_input(tr.source)) {
            if !track.kind.is_device() {
                continue;
            }
            for d in track.slices.clone() {
                if t.slice_class(d).is_device_work()
                    && launches.launcher(d).is_some()
                    && t.slices.end(d) < device[0].0
                    && inside.binary_search(&d).is_err()
                {
                    prev_end = prev_end.max(t.slices.end(d));
                }
            }
        }
    }
    host.iter()
        .zip(device.iter().zip(&matched))
        .map(|(&(hs, he), (&(_, device_end), &launched))| {
            let start = prev_end.max(hs);
            let end = if launched > 0 { he.max(device_end) } else { he }.max(start);
            prev_end = end;
            StepWindow {
                start,
                end,
                launched,
            }
        })
        .collect()
}
