//! Host-to-device copies the performance guides advise against.
//!
//! A host-to-device copy is an op (`aten::to`, `aten::_to_copy`, `aten::copy_`, outermost on
//! its thread) whose runtime call launches a device memcpy named host-to-device (`Memcpy HtoD
//! (…)`, HIP `CopyHostToDevice`), found through the launch index. Two kinds claim such copies,
//! the more specific first, so one copy is one finding's:
//!
//! - `host_created_tensor`: the op just before the copy on the same thread (nothing but Python
//!   frames between) is a factory (`aten::zeros`, `aten::randn`, `aten::arange`, …) that
//!   launched no device work, of as many elements as the copy when the trace records both: a
//!   tensor made on the host only to be sent to the device. Creating it with `device=` makes it
//!   there.
//! - `pageable_copy`: the memcpy reads pageable memory: its name says `Pageable -> Device`, or,
//!   where the name does not say (older and HIP traces), the copy blocked on a stream
//!   synchronize as only a pageable source forces.
//!
//! Both count copies per step and user call site. Lost time (the rule for both): the memcpy's
//! time with no other device work beside it, plus the synchronize calls the copy made the host
//! wait in from the moment its memcpy started on the device (as a union on the clock). The part
//! of a synchronize before that is the host waiting for device work queued earlier, not for the
//! copy: `sync_point` prices it as a sync of the copy op, and leaves the rest to these kinds.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, OpArg, SliceId, TrackKind};

use super::registry::{Detector, Raises, Saves};
use super::torch_ops::tensor_arg;
use super::{BLOCKING_CALLS, MAX_EVIDENCE, Under, at_site, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
use steplens_ingest::intervals::IntervalSet;
/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "host_copies",
    raises: &[
        Raises::new(FindingKind::PageableCopy, Saves::HostTime),
        Raises::new(FindingKind::HostCreatedTensor, Saves::HostTime),
    ],
    thresholds: &[],
    advice: "Copy from pinned memory with non_blocking=True, and make tensors on the device (device=...) instead of on the host.",
    detect: |ctx, shared| detect(ctx, shared.host_copies(ctx)),
};

/// Ops that make a new tensor from nothing (sizes and a fill rule).
const FACTORY_OPS: &[&str] = &[
    "aten::zeros",
    "aten::ones",
    "aten::empty",
    "aten::full",
    "aten::rand",
    "aten::randn",
    "aten::randint",
    "aten::randperm",
    "aten::arange",
    "aten::linspace",
    "aten::eye",
    "aten::scalar_tensor",
];

const PAGEABLE_ADVICE: &str = "Copying from pageable host memory makes the driver stage the \
    data through a pinned buffer and blocks the host until it is done. Pin the source \
    (DataLoader(..., pin_memory=True), or tensor.pin_memory() for a buffer you reuse) and copy \
    with .to(device, non_blocking=True) so the copy overlaps with compute.";

const HOST_CREATED_ADVICE: &str = "This tensor is built on the host every step only to be \
    copied to the device. Create it where it is used (torch.zeros(..., device=x.device), \
    torch.arange(..., device=device)), or build it once outside the loop and reuse it.";

/// A host-to-device copy op.
pub(crate) struct HostCopy {
    /// The outermost copy op on the host.
    pub(super) op: SliceId,
    /// Device memcpys it launched.
    memcpys: Vec<SliceId>,
    /// Blocking runtime calls inside the op, from the moment its first memcpy started: the
    /// host waiting for the copy.
    syncs: Vec<(i64, i64)>,
    /// … and before it: the host waiting for device work queued before the copy.
    waits: Vec<(i64, i64)>,
    /// The memcpy read pageable memory.
    pageable: bool,
    /// The factory op that made the copied tensor, just before the copy.
    factory: Option<SliceId>,
}

impl HostCopy {
    /// The kind of finding that owns this copy, if any.
    fn kind(&self) -> Option<FindingKind> {
        if self.factory.is_some() {
            Some(FindingKind::HostCreatedTensor)
        } else if self.pageable {
            Some(FindingKind::PageableCopy)
        } else {
            None
        }
    }
}

fn is_host_to_device(name: &str) -> bool {
    name.contains("HtoD") || name.contains("HostToDevice")
}

/// The outermost op enclosing `slice`.
fn outermost_cpu_op(ctx: &Context<'_>, slice: SliceId) -> Option<SliceId> {
    let t = ctx.timeline;
    let mut outer = (t.slice_class(slice) == CategoryClass::CpuOp).then_some(slice);
    for a in ctx.ancestors(slice) {
        if t.slice_class(a) == CategoryClass::CpuOp {
            outer = Some(a);
        }
    }
    outer
}

/// Every host-to-device copy op of the trace, in op order.
pub(crate) fn host_copies(ctx: &Context<'_>) -> Vec<HostCopy> {
    let t = ctx.timeline;
    let mut by_op: BTreeMap<SliceId, Vec<SliceId>> = BTreeMap::new();
    let launches = ctx.launches();
    for track in t.tracks.iter().filter(|tr| tr.kind.is_device()) {
        for memcpy in track.slices.clone() {
            if t.slice_class(memcpy) != CategoryClass::Memcpy
                || !is_host_to_device(t.slice_name(memcpy))
            {
                continue;
            }
            // The call that launched it, by the launch index (its runtime call, else its driver
            // call).
            let Some(call) = launches.launcher_or_driver(memcpy) else {
                continue;
            };
            let Some(op) = outermost_cpu_op(ctx, call) else {
                continue;
            };
            if ctx.under_compile(op) || ctx.is_under(op, Under::DATALOADER) {
                continue;
            }
            by_op.entry(op).or_default().push(memcpy);
        }
    }
    by_op
        .into_iter()
        .map(|(op, mut memcpys)| {
            memcpys.sort_unstable();
            memcpys.dedup();
            let blocked = blocking_calls_in(ctx, op);
            let copy_start = memcpys
                .iter()
                .map(|&m| t.slices.start[m as usize])
                .min()
                .unwrap_or(i64::MIN);
            let (mut syncs, mut waits) = (Vec::new(), Vec::new());
            for (from, to) in blocked {
                if from < copy_start {
                    waits.push((from, to.min(copy_start)));
                }
                if to > copy_start {
                    syncs.push((from.max(copy_start), to));
                }
            }
            let named = memcpys.iter().any(|&m| t.slice_name(m).contains("->"));
            let pageable = memcpys
                .iter()
                .any(|&m| t.slice_name(m).contains("Pageable"))
                || (!named && (!syncs.is_empty() || !waits.is_empty()));
            let factory = ctx.previous_outermost_op(op).filter(|&p| {
                FACTORY_OPS.contains(&t.slice_name(p))
                    && ctx.step_name(p).is_some()
                    && ctx.step_name(p) == ctx.step_name(op)
                    && !launches_device_work(ctx, p)
                    && same_size(ctx, p, op)
            });
            HostCopy {
                op,
                memcpys,
                syncs,
                waits,
                pageable,
                factory,
            }
        })
        .collect()
}

/// Whether a runtime call inside `op` launched device work (a factory that did made its
/// tensor on the device).
fn launches_device_work(ctx: &Context<'_>, op: SliceId) -> bool {
    ctx.descendants(op)
        .any(|j| ctx.timeline.slice_class(j) == CategoryClass::Runtime)
}

/// Unless the trace says otherwise, the factory's size (`Concrete Inputs[0]`, `[64, 3, 32, 32]`)
/// and the copied tensor's (`Input Dims[0]`) hold as many elements.
fn same_size(ctx: &Context<'_>, factory: SliceId, copy: SliceId) -> bool {
    let t = ctx.timeline;
    let made = t
        .arg_raw(factory, "Concrete Inputs")
        .and_then(|raw| serde_json::from_slice::<Vec<serde_json::Value>>(raw).ok())
        .and_then(|all| {
            let text = all.first()?.as_str()?.to_owned();
            let dims: Option<Vec<i64>> = text
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .map(|d| d.trim().parse().ok())
                .collect();
            dims
        });
    let copied = tensor_arg(ctx, copy, OpArg::InputDims, 0);
    match (made, copied) {
        (Some(a), Some(b)) => a.iter().product::<i64>() == b.iter().product::<i64>(),
        _ => true,
    }
}

/// Blocking runtime calls inside `op` on its thread.
fn blocking_calls_in(ctx: &Context<'_>, op: SliceId) -> Vec<(i64, i64)> {
    let t = ctx.timeline;
    ctx.descendants(op)
        .filter(|&j| {
            matches!(
                t.slice_class(j),
                CategoryClass::Runtime | CategoryClass::Driver
            ) && BLOCKING_CALLS.contains(&t.slice_name(j))
        })
        .map(|j| (t.slices.start[j as usize], t.slices.end(j)))
        .collect()
}

/// The copy ops these detectors own, sorted, each with the part of its synchronizes that
/// waited for device work queued before the copy: `sync_point` counts only that part of them.
pub(super) fn claimed_copy_ops(copies: &[HostCopy]) -> Vec<(SliceId, Vec<(i64, i64)>)> {
    let mut ops: Vec<(SliceId, Vec<(i64, i64)>)> = copies
        .iter()
        .filter(|c| c.kind().is_some())
        .map(|c| (c.op, c.waits.clone()))
        .collect();
    ops.sort_unstable_by_key(|c| c.0);
    ops
}

/// The findings over `copies` ([`host_copies`] of the same context).
pub(crate) fn detect(ctx: &Context<'_>, copies: &[HostCopy]) -> Vec<Raised> {
    let t = ctx.timeline;
    if copies.iter().all(|c| c.kind().is_none()) {
        return Vec::new();
    }
    let other_device = device_work_besides(ctx, copies);
    // (kind, source, step, call site or op) → copies.
    let mut groups: BTreeMap<(FindingKind, u16, usize, String), Vec<&HostCopy>> = BTreeMap::new();
    for copy in copies {
        let Some(kind) = copy.kind() else { continue };
        let Some(track) = t.slice_track(copy.op) else {
            continue;
        };
        let Some(step) = ctx.step_at(track.source, t.slices.start[copy.op as usize]) else {
            continue;
        };
        let site = ctx
            .call_site(copy.op)
            .unwrap_or_else(|| t.slice_name(copy.op).to_owned());
        groups
            .entry((kind, track.source, step, site))
            .or_default()
            .push(copy);
    }
    groups
        .into_iter()
        .map(|((kind, source, step, _), copies)| {
            let empty = IntervalSet::default();
            let busy = other_device.get(&source).unwrap_or(&empty);
            finding(ctx, kind, source, step, &copies, busy)
        })
        .collect()
}

/// Per input, device work other than the claimed copies' memcpys.
fn device_work_besides(ctx: &Context<'_>, copies: &[HostCopy]) -> FxHashMap<u16, IntervalSet> {
    let t = ctx.timeline;
    let mut claimed: Vec<SliceId> = copies
        .iter()
        .filter(|c| c.kind().is_some())
        .flat_map(|c| c.memcpys.iter().copied())
        .collect();
    claimed.sort_unstable();
    let mut raw: FxHashMap<u16, Vec<(i64, i64)>> = FxHashMap::default();
    for track in t.tracks.iter().filter(|tr| tr.kind.is_device()) {
        if !matches!(track.kind, TrackKind::DeviceEngine { .. }) {
            continue;
        }
        let out = raw.entry(track.source).or_default();
        for j in track.slices.clone() {
            if t.slice_class(j).is_device_work() && claimed.binary_search(&j).is_err() {
                out.push((t.slices.start[j as usize], t.slices.end(j)));
            }
        }
    }
    raw.into_iter()
        .map(|(source, ranges)| (source, IntervalSet::from_ranges(ranges)))
        .collect()
}

/// Where a copy's lost time sits: its memcpys with no other device work beside them, and the
/// synchronizes it blocked the host in once its memcpy had started.
fn lost_ranges(ctx: &Context<'_>, copy: &HostCopy, busy: &IntervalSet) -> Vec<(i64, i64)> {
    let mut ranges = alone_ranges(ctx, copy, busy);
    ranges.extend(copy.syncs.iter().copied());
    ranges
}

/// A copy's memcpys where no other device work ran beside them.
fn alone_ranges(ctx: &Context<'_>, copy: &HostCopy, busy: &IntervalSet) -> Vec<(i64, i64)> {
    let t = ctx.timeline;
    let memcpys = IntervalSet::from_ranges(
        copy.memcpys
            .iter()
            .map(|&m| (t.slices.start[m as usize], t.slices.end(m)))
            .collect(),
    );
    memcpys.minus(busy).iter().collect()
}

fn finding(
    ctx: &Context<'_>,
    kind: FindingKind,
    source: u16,
    step: usize,
    copies: &[&HostCopy],
    busy: &IntervalSet,
) -> Raised {
    let t = ctx.timeline;
    let s = &t.steps[step];
    let ranges: Vec<(i64, i64)> = copies
        .iter()
        .flat_map(|c| lost_ranges(ctx, c, busy))
        .collect();
    let lost = IntervalSet::from_ranges(ranges.clone()).total();
    let first = copies[0].op;
    let bytes: i64 = copies
        .iter()
        .flat_map(|c| c.memcpys.iter())
        .filter_map(|&m| t.arg_i64(m, "bytes"))
        .sum();
    let call_site = ctx.call_site(first);
    let at = at_site(call_site.as_deref());
    let size = if bytes > 0 {
        format!(", {}", crate::units::human_bytes(bytes.unsigned_abs()))
    } else {
        String::new()
    };
    let (title, ops, recommendation) = if kind == FindingKind::HostCreatedTensor {
        let mut factories: Vec<String> = copies
            .iter()
            .filter_map(|c| c.factory)
            .map(|f| t.slice_name(f).to_owned())
            .collect();
        factories.sort();
        factories.dedup();
        (
            format!(
                "{}× tensor made on the host ({}) and copied to the device{at} in {} ({} lost{size})",
                copies.len(),
                factories.join(", "),
                s.name,
                human_ns(lost)
            ),
            factories,
            HOST_CREATED_ADVICE,
        )
    } else {
        (
            format!(
                "{}× host-to-device copy from pageable memory{at} in {} ({} lost{size})",
                copies.len(),
                s.name,
                human_ns(lost)
            ),
            vec![t.slice_name(first).to_owned()],
            PAGEABLE_ADVICE,
        )
    };
    let evidence = copies
        .iter()
        .flat_map(|c| {
            c.factory
                .into_iter()
                .chain(std::iter::once(c.op))
                .chain(c.memcpys.iter().copied())
        })
        .take(MAX_EVIDENCE)
        .map(|i| ctx.evidence(i))
        .collect();
    Raised {
        kind,
        severity: Severity::of_share(lost, s.dur),
        title,
        step: Some(step),
        start_ns: t.slices.start[first as usize],
        end_ns: t.slices.end(first),
        track: ctx.track_name(first),
        ops,
        call_site,
        count: copies.len() as u64,
        lost_ns: lost,
        evidence,
        cost: Cost {
            // A pinned copy issued without blocking runs at full bandwidth behind the previous
            // step's compute: the time the device did nothing but this copy goes too.
            device_ranges: if kind == FindingKind::PageableCopy {
                copies
                    .iter()
                    .flat_map(|c| alone_ranges(ctx, c, busy))
                    .collect()
            } else {
                Vec::new()
            },
            ..Cost::measured(source, ranges)
        },
        recommendation: recommendation.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::is_host_to_device;

    #[test]
    fn host_to_device_names() {
        assert!(is_host_to_device("Memcpy HtoD (Pageable -> Device)"));
        assert!(is_host_to_device("Memcpy HtoD (Pinned -> Device)"));
        assert!(is_host_to_device("CopyHostToDevice"));
        assert!(!is_host_to_device("Memcpy DtoH (Device -> Pageable)"));
        assert!(!is_host_to_device("Memcpy DtoD (Device -> Device)"));
    }
}
