//! Loading several independent traces at once: each input is read into its own Timeline on a
//! worker thread (one per core), and the finished Timelines are laid end to end.
//!
//! Only inputs that need nothing from each other take this path: every part holds one input
//! with host threads, in a format that binds no other input (a Kineto or Perfetto trace, a
//! Gaudi bridge trace). Device-only captures (Synapse TEF, the HW CSV) are aligned to a trace
//! with host threads, and Analyzed Nodes tables and metric files attach to other inputs, so a
//! set with one of them is read into one builder as before. The builder orders tracks by input
//! first and keeps each input's steps, flows and nesting to itself, so laying the parts end to
//! end (with their names, categories, tracks, slices and inputs renumbered) gives the Timeline
//! the single builder would have built; the build-time repairs of each part stay with its own
//! input instead of all going to the first.

use std::path::Path;

use crate::error::IngestError;
use crate::model::{DeviceKind, LaneId, NO_PARENT, SliceId, StrId, Timeline, TrackId, TrackKind};
use crate::options::LoadOptions;

/// Whether a loaded single-input Timeline can be laid next to others as it is.
pub(crate) fn stands_alone(t: &Timeline) -> bool {
    t.sources.len() == 1
        && t.sources[0].format.stands_alone()
        && t.tracks.iter().any(|tr| tr.kind == TrackKind::HostThread)
}

/// Loads `paths` on up to one worker per core; `None` when one of them does not stand alone
/// (the caller then reads them into one builder).
///
/// # Errors
/// The first input (in argument order) that fails to load.
pub(crate) fn load_parallel(
    paths: &[&Path],
    options: &LoadOptions,
) -> Result<Option<Timeline>, IngestError> {
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(paths.len())
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Result<Timeline, IngestError>>> =
        (0..paths.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = paths.get(i) else {
                            break;
                        };
                        done.push((i, crate::load_keeping_freed(path, options, None)));
                    }
                    done
                })
            })
            .collect();
        for handle in handles {
            // A worker that panicked loses its inputs; they are reported as missing below.
            if let Ok(done) = handle.join() {
                for (i, result) in done {
                    results[i] = Some(result);
                }
            }
        }
    });
    let mut parts = Vec::with_capacity(paths.len());
    for (path, result) in paths.iter().zip(results) {
        match result {
            Some(Ok(t)) => parts.push(t),
            Some(Err(e)) => return Err(e),
            None => {
                return Err(IngestError::Io {
                    path: path.display().to_string(),
                    source: std::io::Error::other("the loading thread stopped"),
                });
            }
        }
    }
    if !parts.iter().all(stands_alone) {
        return Ok(None);
    }
    // The track cap is over all inputs, as one builder would count them.
    let max = options.limits.max_tracks.max(1);
    let mut tracks = 0;
    for (path, part) in paths.iter().zip(&parts) {
        tracks += part.tracks.len();
        if tracks > max {
            return Err(IngestError::LimitExceeded {
                path: path.display().to_string(),
                what: "the number of tracks",
                limit: format!("{}", options.limits.max_tracks),
                flag: "--max-tracks",
            });
        }
    }
    Ok(Some(concat(parts)))
}

/// Device kinds by precedence when inputs disagree, as the builder decides them.
fn kind_rank(kind: DeviceKind) -> u8 {
    match kind {
        DeviceKind::Hpu => 4,
        DeviceKind::Mtia => 3,
        DeviceKind::Rocm => 2,
        DeviceKind::Cuda => 1,
        DeviceKind::Cpu => 0,
    }
}

/// Lays finished single-input Timelines end to end, renumbering what each refers to.
pub(crate) fn concat(parts: Vec<Timeline>) -> Timeline {
    let mut out = Timeline::default();
    for part in parts {
        append(&mut out, part);
    }
    out
}

fn append(out: &mut Timeline, part: Timeline) {
    let source_base = u16::try_from(out.sources.len()).unwrap_or(u16::MAX);
    let track_base = TrackId::try_from(out.tracks.len()).unwrap_or(TrackId::MAX);
    let slice_base = SliceId::try_from(out.slices.len()).unwrap_or(SliceId::MAX);
    let names: Vec<StrId> = part
        .strings
        .iter()
        .map(|(_, s)| out.strings.intern(s))
        .collect();
    let name = |id: StrId| names.get(id as usize).copied().unwrap_or(id);
    let cats: Vec<u16> = (0..part.categories.len())
        .map(|c| out.categories.intern(part.categories.name(c as u16)))
        .collect();
    let cat = |id: u16| cats.get(id as usize).copied().unwrap_or(id);
    let lane = |l: LaneId| match l {
        LaneId::Str(s) => LaneId::Str(name(s)),
        other => other,
    };
    let slice = |i: SliceId| {
        if i == NO_PARENT {
            NO_PARENT
        } else {
            i.saturating_add(slice_base)
        }
    };
    for mut track in part.tracks {
        track.source = track.source.saturating_add(source_base);
        track.pid = lane(track.pid);
        track.tid = lane(track.tid);
        track.slices = slice(track.slices.start)..slice(track.slices.end);
        out.tracks.push(track);
    }
    let s = part.slices;
    let o = &mut out.slices;
    o.start.extend(s.start);
    o.dur.extend(s.dur);
    o.track
        .extend(s.track.into_iter().map(|t| t.saturating_add(track_base)));
    o.name.extend(s.name.into_iter().map(name));
    o.cat.extend(s.cat.into_iter().map(cat));
    o.depth.extend(s.depth);
    o.parent.extend(s.parent.into_iter().map(slice));
    o.args.extend(s.args);
    let i = part.instants;
    let oi = &mut out.instants;
    oi.ts.extend(i.ts);
    oi.track
        .extend(i.track.into_iter().map(|t| t.saturating_add(track_base)));
    oi.name.extend(i.name.into_iter().map(name));
    oi.cat.extend(i.cat.into_iter().map(cat));
    oi.scope.extend(i.scope);
    oi.args.extend(i.args);
    let c = part.counters;
    out.counters
        .track
        .extend(c.track.into_iter().map(|t| t.saturating_add(track_base)));
    out.counters.ts.extend(c.ts);
    out.counters.value.extend(c.value);
    out.flows.extend(part.flows.into_iter().map(|mut f| {
        f.cat = cat(f.cat);
        f.from = slice(f.from);
        f.to = slice(f.to);
        f
    }));
    out.steps.extend(part.steps.into_iter().map(|mut st| {
        st.track = st.track.saturating_add(track_base);
        st.slice = slice(st.slice);
        st.source = st.source.saturating_add(source_base);
        st
    }));
    out.node_metrics
        .extend(part.node_metrics.into_iter().map(|mut n| {
            n.source = n.source.saturating_add(source_base);
            n.slice = n.slice.map(slice);
            n.hw_slices = n.hw_slices.into_iter().map(slice).collect();
            n
        }));
    out.metrics.extend(part.metrics.into_iter().map(|mut m| {
        m.source = m.source.saturating_add(source_base);
        m
    }));
    out.clock_of.extend(
        part.clock_of
            .into_iter()
            .map(|c| c.saturating_add(source_base)),
    );
    let mut memory_on_hpu = part.memory_on_hpu;
    memory_on_hpu.resize(part.sources.len(), false);
    out.memory_on_hpu.extend(memory_on_hpu);
    merge_device(out, &part.device);
    merge_stats(&mut out.stats, &part.stats);
    out.sources.extend(part.sources);
    out.data.extend(part.data);
}

fn merge_device(out: &mut Timeline, part: &crate::model::DeviceInfo) {
    let d = &mut out.device;
    if kind_rank(part.kind) > kind_rank(d.kind) {
        d.kind = part.kind;
    }
    if d.name.is_none() {
        d.name.clone_from(&part.name);
    }
    if d.memory_bytes.is_none() {
        d.memory_bytes = part.memory_bytes;
    }
    if d.compute_capability.is_none() {
        d.compute_capability.clone_from(&part.compute_capability);
    }
    d.count += part.count;
}

fn merge_stats(out: &mut crate::model::BuildStats, part: &crate::model::BuildStats) {
    out.negative_durations += part.negative_durations;
    out.large_negative_durations += part.large_negative_durations;
    out.most_negative_ns = out.most_negative_ns.min(part.most_negative_ns);
    out.overlong += part.overlong;
    out.clamped_ends += part.clamped_ends;
    out.partial_overlaps += part.partial_overlaps;
    out.max_overlap_ns = out.max_overlap_ns.max(part.max_overlap_ns);
    out.unclosed_begins += part.unclosed_begins;
    out.unmatched_ends += part.unmatched_ends;
    out.unbound_flow_ends += part.unbound_flow_ends;
    out.unsupported_phase += part.unsupported_phase;
    out.malformed += part.malformed;
}
