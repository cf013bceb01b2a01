//! When the profiler's own cost distorts what a trace shows: each recorded op (and each Python
//! frame, with `with_stack=True`) costs the profiler its start and end callbacks, so a step of
//! many small ops runs much slower profiled than not, and a fix that removes ops saves more in
//! the trace than in the run. With `record_shapes` and `with_stack`, steps that allocate a lot can
//! also slow down as the run goes on.
//!
//! Two signs, from the trace alone:
//! - **Per-op cost.** The gap between two consecutive ops nested in one op (`aten::t` ending and
//!   `aten::addmm` starting inside `aten::linear`) is the dispatcher's hand-over plus the
//!   profiler's end and start callbacks: its median over the trace estimates the profiler's cost
//!   per recorded event. Times the events per step, as a share of the median step.
//! - **Drift.** The median of the last third of the steps against the first third's.
//!
//! The report says the profiler distorts the trace when the per-op share reaches
//! [`DISTORTING_SHARE_PCT`] or the drift reaches [`DRIFT_PCT`].

use serde::{Deserialize, Serialize};
use steplens_ingest::model::{CategoryClass, NO_PARENT, Timeline, TrackKind};

/// Estimated profiler cost per step at or above this share of the step distorts the trace.
pub const DISTORTING_SHARE_PCT: f64 = 25.0;
/// Steps of the last third this much slower than the first third's: the run drifts.
pub const DRIFT_PCT: f64 = 20.0;
/// Fewest steps for a drift to be read.
const DRIFT_MIN_STEPS: usize = 6;
/// Fewest nested hand-overs for a per-op estimate.
const MIN_GAPS: usize = 20;

/// How much of the trace the profiler's own cost may be.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProfilerOverhead {
    /// Recorded host events (ops, runtime calls, Python frames) per step, median.
    pub events_per_step: u64,
    /// Estimated profiler cost per recorded event: the median gap between consecutive ops
    /// nested in one op, ns.
    pub per_event_ns: i64,
    /// `events_per_step` × `per_event_ns` as a share of the median step, percent.
    pub share_pct: f64,
    /// Median of the last third of the steps over that of the first third, less 100, percent
    /// (absent with fewer than 6 steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_pct: Option<f64>,
    /// Whether the profiler's cost is large enough to distort the trace (either sign).
    pub distorts: bool,
    /// One line for people: what was seen and what it means for the savings.
    pub message: String,
}

/// The profiler-overhead estimate of a trace with steps; `None` without steps or host ops.
#[must_use]
pub fn profiler_overhead(t: &Timeline) -> Option<ProfilerOverhead> {
    if t.steps.is_empty() {
        return None;
    }
    let mut gaps: Vec<i64> = Vec::new();
    let mut per_step: Vec<u64> = vec![0; t.steps.len()];
    // Slices come track by track in time order: the step lookup remembers its last answer.
    let mut steps = t.step_cursor();
    for track in t
        .tracks
        .iter()
        .filter(|tr| tr.kind == TrackKind::HostThread)
    {
        // Open slices in track (pre)order: (slice, end of its last cpu_op child so far).
        let mut open: Vec<(u32, Option<i64>)> = Vec::new();
        for i in track.slices.clone() {
            let class = t.slice_class(i);
            if (class.is_host_work() || class == CategoryClass::PythonFunction)
                && let Some(step) = steps.step_at(track.source, t.slices.start[i as usize])
            {
                per_step[step] += 1;
            }
            let parent = t.slices.parent[i as usize];
            while open.last().is_some_and(|&(o, _)| o != parent) {
                open.pop();
            }
            if class == CategoryClass::CpuOp
                && parent != NO_PARENT
                && t.slice_class(parent) == CategoryClass::CpuOp
                && let Some((_, last_child)) = open.last_mut()
            {
                if let Some(end) = *last_child {
                    let gap = t.slices.start[i as usize] - end;
                    if gap >= 0 {
                        gaps.push(gap);
                    }
                }
                *last_child = Some(t.slices.end(i));
            }
            open.push((i, None));
        }
    }
    if gaps.len() < MIN_GAPS {
        return None;
    }
    use crate::stats::median;
    let per_event_ns = median(gaps).unwrap_or(0);
    let events_per_step =
        u64::try_from(median(per_step.iter().map(|&n| n as i64).collect()).unwrap_or(0))
            .unwrap_or(0);
    let durations: Vec<i64> = t.steps.iter().map(|s| s.dur).collect();
    let median_step = median(durations.clone()).unwrap_or(0).max(1);
    let share_pct =
        round1(events_per_step as f64 * per_event_ns as f64 * 100.0 / median_step as f64);
    let drift_pct = (durations.len() >= DRIFT_MIN_STEPS).then(|| {
        let third = durations.len() / 3;
        let tail = durations.len() - third;
        let a = median(durations[..third].to_vec()).unwrap_or(0).max(1) as f64;
        let b = median(durations[tail..].to_vec()).unwrap_or(0) as f64;
        round1((b / a - 1.0) * 100.0)
    });
    let drifts = drift_pct.is_some_and(|d| d >= DRIFT_PCT);
    let heavy = share_pct >= DISTORTING_SHARE_PCT;
    let mut parts = Vec::new();
    if heavy {
        parts.push(format!(
            "the profiler's own cost is about {share_pct:.0}% of a step ({events_per_step} \
             recorded events per step at ≈ {} each)",
            crate::units::human_ns(per_event_ns)
        ));
    }
    if let Some(d) = drift_pct.filter(|_| drifts) {
        parts.push(format!(
            "steps slow down through the run (the last third {d:.0}% slower than the first)"
        ));
    }
    let message = if parts.is_empty() {
        format!(
            "profiler cost ≈ {share_pct:.0}% of a step ({events_per_step} recorded events at ≈ \
             {} each): the trace's timings stand",
            crate::units::human_ns(per_event_ns)
        )
    } else {
        format!(
            "{}: savings of fixes that remove many small ops (or Python frames) read larger in \
             this trace than in an unprofiled run; confirm with a run without the profiler, or \
             profile with record_shapes/with_stack off",
            parts.join("; ")
        )
    };
    Some(ProfilerOverhead {
        events_per_step,
        per_event_ns,
        share_pct,
        drift_pct,
        distorts: heavy || drifts,
        message,
    })
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}
