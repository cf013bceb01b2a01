//! `sync_point`: the host blocks until the device catches up.
//!
//! Signals: ops that read a device value on the host (`aten::item`, `aten::_local_scalar_dense`,
//! `aten::is_nonzero`, data-dependent shapes `aten::nonzero`, `aten::masked_select`,
//! `aten::unique*`), runtime synchronize calls (CUDA, HIP, Synapse), and copies whose runtime
//! launch lands on a device-to-host memcpy. Each signal is lifted to the user-issued call: its
//! outermost op. A value-reading op nested in an unrelated op (`aten::item` inside `aten::std`)
//! is an implementation detail, not a user sync; nor is anything under torch.compile's
//! machinery, the DataLoader's fetch, or an optimizer's step, nor the synchronize of a
//! host-to-device copy that `host_copies` owns. Findings group the calls per step and user call
//! site.

use std::collections::BTreeMap;

use steplens_ingest::model::{CategoryClass, SliceId};

use super::registry::{Detector, Raises, Saves};
use super::{BLOCKING_CALLS, MAX_EVIDENCE, Under, human_ns};
use crate::context::{Context, NameSet};
use crate::finding::{Cost, FindingKind, Raised, Severity};
use steplens_ingest::intervals::IntervalSet;
/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "sync_point",
    raises: &[Raises::new(FindingKind::SyncPoint, Saves::HostTime)],
    thresholds: &[],
    advice: "Keep values on the device: log .item()/.cpu()/print results every N steps, or accumulate on the device and read once.",
    detect: |ctx, shared| {
        detect(
            ctx,
            &super::host_copies::claimed_copy_ops(shared.host_copies(ctx)),
        )
    },
};

/// Ops that read a device value (or a value-dependent shape) on the host.
const VALUE_OPS: &[&str] = &[
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::is_nonzero",
    "aten::nonzero",
    "aten::masked_select",
    "aten::unique",
    "aten::_unique",
    "aten::_unique2",
    "aten::unique_dim",
    "aten::unique_consecutive",
];

/// Copy ops that sync when they copy device to host.
const COPY_OPS: &[&str] = &["aten::to", "aten::_to_copy", "aten::copy_", "aten::cpu"];

struct Call {
    op: SliceId,
    /// Blocking calls under (or folded into) the op. A union, not a sum: the Gaudi bridge logs
    /// each Synapse call on two lanes.
    blocked: Vec<(i64, i64)>,
    /// A host-to-device copy (`pageable_copy` / `host_created_tensor` own the copy itself):
    /// `blocked` is its wait for device work queued before it.
    to_device: bool,
}

impl Call {
    fn blocked_ns(&self) -> i64 {
        IntervalSet::from_ranges(self.blocked.clone()).total()
    }
}

/// The sync findings; `claimed` (sorted) are the copy ops `host_copies` owns, each with the
/// part of its synchronizes that waited for earlier device work: only that part is a sync's.
pub(crate) fn detect(ctx: &Context<'_>, claimed: &[(SliceId, Vec<(i64, i64)>)]) -> Vec<Raised> {
    let t = ctx.timeline;
    let dtoh_launches = dtoh_launches(ctx);
    let mut calls: BTreeMap<SliceId, Call> = BTreeMap::new();
    let value_ops = NameSet::new(t, |name| VALUE_OPS.contains(&name));
    let blocking = NameSet::new(t, |name| BLOCKING_CALLS.contains(&name));
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            let class = t.slice_class(i);
            let value_op = class == CategoryClass::CpuOp && value_ops.has(t, i);
            // A blocking API call is one whatever the lane calls it: the Habana plugin writes
            // its Synapse calls as `hpu_op` on a host lane of their own.
            let runtime = (matches!(class, CategoryClass::Runtime | CategoryClass::Driver)
                && (blocking.has(t, i) || dtoh_launches.binary_search(&i).is_ok()))
                || (class == CategoryClass::CpuOp && blocking.has(t, i));
            if !value_op && !runtime {
                continue;
            }
            let lifted = outermost_op(ctx, i);
            // A blocking call under a bridge function of its own lane is still the call the
            // lane-folding below pairs with the op that waited.
            let outer = if runtime
                && class == CategoryClass::CpuOp
                && !is_value_or_copy(t.slice_name(lifted))
            {
                i
            } else {
                lifted
            };
            let outer_name = t.slice_name(outer);
            if value_op
                && outer != i
                && !VALUE_OPS.contains(&outer_name)
                && !COPY_OPS.contains(&outer_name)
            {
                continue;
            }
            if let Ok(k) = claimed.binary_search_by_key(&outer, |c| c.0) {
                // The copy's own wait is the copy finding's; the wait for earlier work is this
                // op's, once.
                if runtime {
                    calls.entry(outer).or_insert_with(|| Call {
                        op: outer,
                        blocked: claimed[k].1.clone(),
                        to_device: true,
                    });
                }
                continue;
            }
            if ctx.under_compile(outer)
                || ctx.is_under(outer, Under::DATALOADER)
                || ctx.is_under(outer, Under::OPTIMIZER_STEP)
            {
                continue;
            }
            let call = calls.entry(outer).or_insert(Call {
                op: outer,
                blocked: Vec::new(),
                to_device: false,
            });
            if runtime {
                call.blocked
                    .push((t.slices.start[i as usize], t.slices.end(i)));
            }
        }
    }
    fold_lane_syncs_into_ops(ctx, &mut calls);
    let has_device = t.has_device();
    // Group per (source, step, call site or op).
    let mut groups: BTreeMap<(u16, Option<usize>, String), Vec<Call>> = BTreeMap::new();
    for call in calls.into_values() {
        let Some(track) = t.slice_track(call.op) else {
            continue;
        };
        let start = t.slices.start[call.op as usize];
        let step = ctx.step_at(track.source, start);
        let key = ctx
            .call_site(call.op)
            .unwrap_or_else(|| t.slice_name(call.op).to_owned());
        groups
            .entry((track.source, step, key))
            .or_default()
            .push(call);
    }
    groups
        .into_iter()
        .filter(|((source, step, _), calls)| step.is_some() || !profiler_flush(ctx, *source, calls))
        // With a device, a call that never blocked (the device was already done) cost nothing:
        // "host blocked 0 ns" is not worth a user's time.
        .filter(|(_, calls)| !has_device || calls.iter().any(|c| c.blocked_ns() > 0))
        .map(|((_, step, site), calls)| finding(ctx, step, &site, &calls, has_device))
        .collect()
}

/// Synchronizes the user did not write: outside every step of an input that has steps, with no
/// op around them (the profiler draining the device when the capture stops, a framework's
/// teardown). They are not in the training loop, so there is nothing to change there.
fn profiler_flush(ctx: &Context<'_>, source: u16, calls: &[Call]) -> bool {
    let t = ctx.timeline;
    let step_source = t.step_source(source);
    let has_steps = t.steps.iter().any(|s| s.source == step_source);
    has_steps
        && calls.iter().all(|c| {
            matches!(
                t.slice_class(c.op),
                CategoryClass::Runtime | CategoryClass::Driver
            ) || BLOCKING_CALLS.contains(&t.slice_name(c.op))
        })
}

/// Whether an op of this name reads a device value or copies one to the host.
fn is_value_or_copy(name: &str) -> bool {
    VALUE_OPS.contains(&name) || COPY_OPS.contains(&name)
}

/// Synapse API calls are logged on their own lane (the Gaudi bridge's `Synapse Logger`, the
/// Habana plugin's `hpu_op` lane), not under the op that issued them: a synchronize with no op
/// around it that runs inside a value-reading op of another host lane of the same input is that
/// op's wait.
fn fold_lane_syncs_into_ops(ctx: &Context<'_>, calls: &mut BTreeMap<SliceId, Call>) {
    let t = ctx.timeline;
    let is_value_op = |i: SliceId| is_value_or_copy(t.slice_name(i));
    // Sorted by start, so each sync looks only at the ops that can contain it.
    let mut ops: Vec<SliceId> = calls.keys().copied().filter(|&i| is_value_op(i)).collect();
    ops.sort_by_key(|&i| t.slices.start[i as usize]);
    let longest = ops
        .iter()
        .map(|&i| t.slices.dur[i as usize])
        .max()
        .unwrap_or(0);
    let standalone: Vec<SliceId> = calls
        .keys()
        .copied()
        .filter(|&i| {
            matches!(
                t.slice_class(i),
                CategoryClass::Runtime | CategoryClass::Driver | CategoryClass::CpuOp
            ) && BLOCKING_CALLS.contains(&t.slice_name(i))
        })
        .collect();
    for sync in standalone {
        let (source, start) = match t.slice_track(sync) {
            Some(track) => (track.source, t.slices.start[sync as usize]),
            None => continue,
        };
        let started = ops.partition_point(|&op| t.slices.start[op as usize] <= start);
        // Of the ops running at the sync, the first one in slice order.
        let owner = ops[..started]
            .iter()
            .rev()
            .take_while(|&&op| t.slices.start[op as usize] >= start - longest)
            .copied()
            .filter(|&op| {
                t.slice_track(op).is_some_and(|tr| tr.source == source)
                    && t.slices.track[op as usize] != t.slices.track[sync as usize]
                    && start < t.slices.end(op)
            })
            .min();
        if let Some(owner) = owner
            && let Some(call) = calls.remove(&sync)
            && let Some(op) = calls.get_mut(&owner)
        {
            op.blocked.extend(call.blocked);
        }
    }
}

/// The outermost op or runtime call enclosing `slice` (itself when it has none).
fn outermost_op(ctx: &Context<'_>, slice: SliceId) -> SliceId {
    let mut outer = slice;
    for a in ctx.ancestors(slice) {
        if matches!(
            ctx.timeline.slice_class(a),
            CategoryClass::CpuOp | CategoryClass::Runtime | CategoryClass::Driver
        ) {
            outer = a;
        }
    }
    outer
}

/// The calls that launched a device-to-host copy (by the launch index), sorted.
fn dtoh_launches(ctx: &Context<'_>) -> Vec<SliceId> {
    let t = ctx.timeline;
    let launches = ctx.launches();
    let mut out: Vec<SliceId> = t
        .tracks
        .iter()
        .filter(|tr| tr.kind.is_device())
        .flat_map(|tr| tr.slices.clone())
        .filter(|&d| t.slice_class(d) == CategoryClass::Memcpy && t.slice_name(d).contains("DtoH"))
        .filter_map(|d| launches.launcher_or_driver(d))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

fn finding(
    ctx: &Context<'_>,
    step: Option<usize>,
    site: &str,
    calls: &[Call],
    has_device: bool,
) -> Raised {
    let t = ctx.timeline;
    let mut ops: Vec<String> = calls
        .iter()
        .map(|c| t.slice_name(c.op).to_owned())
        .collect();
    ops.sort();
    ops.dedup();
    let start = calls
        .iter()
        .map(|c| t.slices.start[c.op as usize])
        .min()
        .unwrap_or(0);
    let end = calls
        .iter()
        .map(|c| t.slices.end(c.op))
        .max()
        .unwrap_or(start);
    // With a device in the trace, the cost is the time the host sat in blocking calls; in a
    // CPU-only trace there is no device to wait for, and the op's own time is all we can see.
    let lost: i64 = if has_device {
        calls.iter().map(Call::blocked_ns).sum()
    } else {
        calls.iter().map(|c| t.slices.dur[c.op as usize]).sum()
    };
    let source = calls
        .first()
        .and_then(|c| t.slice_track(c.op))
        .map_or(0, |tr| tr.source);
    // What the host waited for: the device work that ran while it was blocked. A long wait with
    // the device (nearly) idle was on something outside the trace: removing the call saves at
    // most that device work. (A short wait's own round trip is what removing it saves.)
    let blocked = IntervalSet::from_ranges(
        calls
            .iter()
            .flat_map(|c| c.blocked.iter().copied())
            .collect(),
    );
    let device_during = ctx.channels.get(&source).filter(|c| c.has_device).map(|c| {
        blocked
            .iter()
            .map(|(a, b)| c.device.covered(a, b))
            .sum::<i64>()
    });
    let idle_wait = has_device
        && lost >= IDLE_WAIT_MIN_NS
        && device_during.is_some_and(|d| (d as f64) < IDLE_WAIT_MAX_BUSY_SHARE * lost as f64);
    let cost = if has_device {
        Cost {
            saving_cap_ns: device_during.filter(|_| idle_wait),
            ..Cost::measured(source, blocked.iter().collect())
        }
    } else {
        Cost::pattern(
            source,
            calls
                .iter()
                .map(|c| (t.slices.start[c.op as usize], t.slices.end(c.op)))
                .collect(),
        )
    };
    let step_name = step.map(|i| t.steps[i].name.clone());
    let step_ns = step.map_or(0, |i| t.steps[i].dur);
    let where_ = step_name
        .as_deref()
        .map_or_else(String::new, |s| format!(" in {s}"));
    let count = calls.len() as u64;
    let site_text = if site.contains(".py:") {
        format!(" at {site}")
    } else {
        String::new()
    };
    let title = if idle_wait {
        format!(
            "host waited {} in {}{site_text} ({count}×{where_}) with the device idle: on something outside this trace, not on the device",
            human_ns(lost),
            ops.join(" + ")
        )
    } else if has_device {
        format!(
            "host-device sync: {}{site_text} ({count}×{where_}, host blocked {})",
            ops.join(" + "),
            human_ns(lost)
        )
    } else {
        format!(
            "host-device sync: {}{site_text} ({count}×{where_}; CPU-only trace, wait not visible)",
            ops.join(" + ")
        )
    };
    Raised {
        kind: FindingKind::SyncPoint,
        severity: if has_device {
            Severity::of_share(lost, step_ns)
        } else {
            Severity::Info
        },
        title,
        step,
        start_ns: start,
        end_ns: end,
        track: calls.first().and_then(|c| ctx.track_name(c.op)),
        ops: ops.clone(),
        call_site: site.contains(".py:").then(|| site.to_owned()),
        count,
        lost_ns: lost,
        evidence: calls
            .iter()
            .take(MAX_EVIDENCE)
            .map(|c| ctx.evidence(c.op))
            .collect(),
        recommendation: if idle_wait {
            IDLE_WAIT_ADVICE.to_owned()
        } else {
            let copies_back = calls
                .iter()
                .any(|c| !c.to_device && COPY_OPS.contains(&t.slice_name(c.op)));
            recommendation(&ops, copies_back, calls.iter().any(|c| c.to_device))
        },
        cost,
    }
}

/// A wait at least this long with the device nearly idle throughout is not a wait for the
/// device.
const IDLE_WAIT_MIN_NS: i64 = 1_000_000;
/// "Nearly idle": device work covers less than this share of the wait.
const IDLE_WAIT_MAX_BUSY_SHARE: f64 = 0.1;

const IDLE_WAIT_ADVICE: &str = "The host sat in a blocking call while the device had no work     to finish, so making the call non-blocking saves nothing here: it waited on something this     trace does not show — another process or rank (a scheduler, a data or tokenizer worker, an     IPC queue), the OS, or I/O. Profile that side (py-spy, the other processes' traces) to find     what it waited for.";

/// The advice for a sync of `ops`; `copies_back`: one of them copies a tensor to the host;
/// `to_device`: one is a host-to-device copy that waited for earlier device work.
fn recommendation(ops: &[String], copies_back: bool, to_device: bool) -> String {
    let has = |names: &[&str]| ops.iter().any(|o| names.contains(&o.as_str()));
    let mut advice = Vec::new();
    if has(&["aten::masked_select", "aten::is_nonzero"]) && has(&["aten::item"]) {
        advice.push(
            "Printing a tensor (or using it in `if`/`bool()`) copies it to the host and waits for \
             the device: print or log less often, e.g. every N steps.",
        );
    } else if has(&["aten::is_nonzero"]) {
        advice.push(
            "`if tensor:` / `bool(tensor)` waits for the device: keep the condition on the device \
             (torch.where) or check it every N steps.",
        );
    }
    if has(&["aten::item", "aten::_local_scalar_dense"]) {
        advice.push(
            "`.item()` waits for every queued kernel: keep running values on the device (e.g. \
             accumulate the loss in a tensor) and read them every N steps; update progress bars \
             with a value fetched every N steps, not every step.",
        );
    }
    if has(&[
        "aten::nonzero",
        "aten::masked_select",
        "aten::unique",
        "aten::_unique2",
    ]) {
        advice.push(
            "Ops whose output shape depends on the data (nonzero, masked_select, unique) must \
             read the result's size on the host: use fixed-shape masks (torch.where) instead.",
        );
    }
    if copies_back {
        advice.push(
            "`.cpu()` / `.to(\"cpu\")` copies to the host and waits: keep tensors on the device, \
             or copy with `non_blocking=True` into pinned memory and read it later.",
        );
    }
    if to_device {
        advice.push(
            "A blocking `.to(device)` waits for every kernel queued before it, then for its own \
             copy: copy from pinned memory with `non_blocking=True` (DataLoader(..., \
             pin_memory=True)) so the host goes on queuing work while the device catches up.",
        );
    }
    if advice.is_empty() {
        advice.push(
            "An explicit synchronize stalls the host until the device drains its queue: remove it \
             from the training loop (it is only needed around timing code).",
        );
    }
    advice.join(" ")
}
