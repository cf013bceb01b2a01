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

use steplens_ingest::model::{Launches, SliceId, Timeline, TrackKind};

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
    step_windows_with(t, t.launches())
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
