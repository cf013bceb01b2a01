//! What several views share: the plugin's own steps of each input and the role ranges (Kernel
//! … CPU Exec) its Overview and distributed view split them by, the op a launch sits under, and
//! which collective a kernel serves (by its launch, else by its `external id`).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::Timeline;
use steplens_ingest::model::{CategoryClass, NO_PARENT, SliceId, TrackKind};

use super::{Links, is_comm_op};
use crate::op_names::NameFlags;
use steplens_ingest::intervals::IntervalSet;

pub(super) fn is_dataloader(name: &str) -> bool {
    (name.starts_with(crate::op_names::DATALOADER_PREFIX) && name.ends_with(".__next__"))
        || name.starts_with("enumerate(DataPipe)#")
}

pub(super) fn is_step(name: &str) -> bool {
    name.starts_with("ProfilerStep#")
}

/// What the views ask of a slice's name, as [`NameFlags`] bits: a collective op, a data-loader
/// step, a `ProfilerStep`.
const COMM: u8 = 1;
const DATALOADER: u8 = 2;
const STEP: u8 = 4;

/// The views' flags of every name of `t`.
fn view_names(t: &Timeline) -> NameFlags {
    NameFlags::new(t, |name| {
        let mut f = 0;
        if is_comm_op(name) {
            f |= COMM;
        }
        if is_dataloader(name) {
            f |= DATALOADER;
        }
        if is_step(name) {
            f |= STEP;
        }
        f
    })
}

/// One of the plugin's steps.
#[derive(Debug, Clone)]
pub(super) struct PluginStep {
    /// The step number (`ProfilerStep#N` → `N`; `0` for a trace without steps).
    pub(super) number: String,
    /// The `ProfilerStep` slice it is, which is also the Timeline step's slice (none for the
    /// one step the plugin makes of a trace without them).
    pub(super) slice: Option<SliceId>,
    /// Start of the device-extended step, ns.
    pub(super) start: i64,
    /// Its end, ns.
    pub(super) end: i64,
}

/// The plugin's steps of each input.
pub(super) type PluginSteps = BTreeMap<u16, Vec<PluginStep>>;
/// The nearest ancestor of `slice` that is an op (`cpu_op`), when there is one.
pub(super) fn enclosing_op(t: &Timeline, slice: SliceId) -> Option<SliceId> {
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
fn is_comm_kernel(t: &Timeline, links: &Links, names: &NameFlags, k: SliceId) -> bool {
    let Some(runtime) = links.launcher(k) else {
        return false;
    };
    let mut at = t.slices.parent[runtime as usize];
    while at != NO_PARENT {
        if names.of(t, at) & COMM != 0 {
            return true;
        }
        at = t.slices.parent[at as usize];
    }
    false
}

/// The collectives of one input by their `External id`: a trace without runtime events (the
/// plugin's own test traces) links a kernel to the op it serves only by the kernel's
/// `external id`, and the plugin matches NCCL kernels to their op that way.
pub(super) fn comm_ops_by_external_id(t: &Timeline, source: u16) -> FxHashMap<i64, SliceId> {
    let names = view_names(t);
    let mut out = FxHashMap::default();
    for track in t.tracks.iter().filter(|tr| tr.source == source) {
        if track.kind != TrackKind::HostThread {
            continue;
        }
        for i in track.slices.clone() {
            if matches!(
                t.slice_class(i),
                CategoryClass::CpuOp | CategoryClass::UserAnnotation
            ) && names.of(t, i) & COMM != 0
                && let Some(id) = t.arg_i64(i, "External id")
            {
                out.insert(id, i);
            }
        }
    }
    out
}

/// The collective a kernel that no launch links serves, by its `external id`.
pub(super) fn comm_op_by_id(
    t: &Timeline,
    by_id: &FxHashMap<i64, SliceId>,
    k: SliceId,
) -> Option<SliceId> {
    if by_id.is_empty() {
        return None;
    }
    t.arg_i64(k, "external id")
        .or_else(|| t.arg_i64(k, "External id"))
        .and_then(|id| by_id.get(&id).copied())
}

/// The plugin's steps of one input: `(name, start, end)`.
pub(super) fn plugin_steps(t: &Timeline, links: &Links, source: u16) -> Vec<PluginStep> {
    let names = view_names(t);
    let mut host: Vec<(i64, i64, String, Option<SliceId>)> = Vec::new();
    let (mut cpu_min, mut cpu_max) = (i64::MAX, i64::MIN);
    for track in t.tracks.iter().filter(|tr| tr.source == source) {
        if track.kind != TrackKind::HostThread {
            continue;
        }
        for i in track.slices.clone() {
            let class = t.slice_class(i);
            let (start, end) = (t.slices.start[i as usize], t.slices.end(i));
            if matches!(class, CategoryClass::CpuOp | CategoryClass::UserAnnotation)
                && names.of(t, i) & STEP != 0
            {
                let number = t
                    .slice_name(i)
                    .trim_start_matches("ProfilerStep#")
                    .to_owned();
                host.push((start, end, number, Some(i)));
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
        host.push((cpu_min, cpu_max, "0".to_owned(), None));
    }
    host.sort();
    let host_ranges: Vec<(i64, i64)> = host.iter().map(|h| (h.0, h.1)).collect();
    let windows = crate::step_windows::stretch(t, links, |s| s == source, &host_ranges);
    let matched: Vec<usize> = windows.iter().map(|w| w.launched).collect();
    let mut steps: Vec<PluginStep> = host
        .into_iter()
        .zip(&windows)
        .map(|((_, _, number, slice), w)| PluginStep {
            number,
            slice,
            start: w.start,
            end: w.end,
        })
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
pub(super) fn role_ranges(t: &Timeline, links: &Links, source: u16) -> [IntervalSet; 7] {
    let mut roles: [Vec<(i64, i64)>; 7] = Default::default();
    let by_id = comm_ops_by_external_id(t, source);
    let names = view_names(t);
    for track in t.tracks.iter().filter(|tr| tr.source == source) {
        for i in track.slices.clone() {
            let range = (t.slices.start[i as usize], t.slices.end(i));
            let flags = names.of(t, i);
            let role = match t.slice_class(i) {
                CategoryClass::Kernel if is_comm_kernel(t, links, &names, i) => 3,
                CategoryClass::Kernel
                    if links.launcher(i).is_none() && comm_op_by_id(t, &by_id, i).is_some() =>
                {
                    3
                }
                CategoryClass::Kernel => 0,
                CategoryClass::Memcpy => 1,
                CategoryClass::Memset => 2,
                CategoryClass::Runtime => 4,
                CategoryClass::CpuOp | CategoryClass::UserAnnotation if flags & COMM != 0 => 3,
                CategoryClass::CpuOp | CategoryClass::UserAnnotation if flags & DATALOADER != 0 => {
                    5
                }
                CategoryClass::CpuOp | CategoryClass::UserAnnotation if flags & STEP != 0 => {
                    continue;
                }
                CategoryClass::CpuOp
                | CategoryClass::UserAnnotation
                | CategoryClass::DeviceAnnotation => 6,
                _ => continue,
            };
            // A track's slices come in start order, children inside their parents: a range
            // that starts inside the role's last one extends it, so the lists hold about one
            // range per top-level slice, not one per slice (the union is the same).
            if range.1 <= range.0 {
                continue;
            }
            let ranges = &mut roles[role];
            match ranges.last_mut() {
                Some(last) if last.0 <= range.0 && range.0 <= last.1 => {
                    last.1 = last.1.max(range.1);
                }
                _ => ranges.push(range),
            }
        }
    }
    roles.map(IntervalSet::from_ranges)
}
