//! Memory from the trace itself: the `[memory]` instants a `profile_memory=True` trace carries
//! (one per allocation or free: `Bytes`, `Total Allocated`, `Total Reserved`, `Addr`,
//! `Device Type`, `Device Id`).
//!
//! Per device: allocation and free counts, the peak of `Total Allocated` (and when), the peak
//! of `Total Reserved`, the slack at the allocated peak, what holds the peak (the live
//! allocations then, grouped by the op that made them), the allocations never freed in the
//! window, per-step start / peak / allocated bytes, and integrity (successive totals must differ
//! by exactly `Bytes`; a break means lost events). Two findings come from it:
//! `memory_growth` (the allocated baseline at step start rises across ≥ 3 steps) and
//! `reserved_slack` (the caching allocator holds far more than is allocated).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use steplens_ingest::model::{CategoryClass, SliceId, Timeline};

/// Holders listed per device (largest first).
const TOP_HOLDERS: usize = 10;

/// Memory of one device over the trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceMemory {
    /// Device as PyTorch names it (`cuda:0`, `cpu`, `hpu:0`).
    pub device: String,
    /// Allocations (`Bytes` > 0) in the window.
    pub allocations: u64,
    /// Frees (`Bytes` < 0) in the window.
    pub frees: u64,
    /// Bytes allocated in the window (Σ positive `Bytes`).
    pub bytes_allocated: i64,
    /// Highest `Total Allocated`.
    pub peak_allocated_bytes: i64,
    /// When it was reached, ns.
    pub peak_allocated_ns: i64,
    /// Lowest `Total Allocated` in the window (from the same events as the peak).
    #[serde(default)]
    pub min_allocated_bytes: i64,
    /// Highest `Total Reserved` (0 where the allocator does not cache, as on the CPU).
    pub peak_reserved_bytes: i64,
    /// `Total Reserved − Total Allocated` at the allocated peak.
    pub slack_at_peak_bytes: i64,
    /// Device memory from `deviceProperties` (`totalGlobalMem`), when the trace has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_total_bytes: Option<i64>,
    /// Successive events whose totals do not differ by exactly `Bytes`: events were lost.
    pub integrity_breaks: u64,
    /// The live allocations at the allocated peak, by allocating op, largest first (top 10).
    pub held_at_peak: Vec<MemoryHolder>,
    /// Allocations never freed in the window, by allocating op, largest first (top 10).
    pub never_freed: Vec<MemoryHolder>,
    /// Σ bytes never freed in the window (all ops).
    pub never_freed_bytes: i64,
    /// Per step of the trace.
    pub steps: Vec<StepMemory>,
}

/// Bytes held by the allocations of one op (and call site).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MemoryHolder {
    /// The innermost op around the allocation (`(no op)` outside every op).
    pub op: String,
    /// The user's call site, when the trace has Python frames or call stacks.
    pub call_site: Option<String>,
    /// Bytes held.
    pub bytes: i64,
    /// Allocations.
    pub count: u64,
}

/// One step's memory on one device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepMemory {
    /// Step name.
    pub step: String,
    /// `Total Allocated` when the step starts (the baseline).
    pub start_allocated_bytes: i64,
    /// Highest `Total Allocated` in the step.
    pub peak_allocated_bytes: i64,
    /// Bytes allocated in the step (Σ positive `Bytes`).
    pub allocated_bytes: i64,
    /// Allocations in the step.
    pub allocations: u64,
}

/// One `[memory]` event.
#[derive(Debug, Clone, Copy)]
struct Event {
    ts: i64,
    bytes: i64,
    total: i64,
    reserved: i64,
    addr: i64,
    /// The instant's index, to find the op around it.
    instant: usize,
}

/// The memory of every device with `[memory]` events, devices in name order.
#[must_use]
pub fn memory_by_device(t: &Timeline) -> Vec<DeviceMemory> {
    let Some(memory_name) = t.strings.lookup("[memory]") else {
        return Vec::new();
    };
    let mut per_device: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for i in 0..t.instants.len() {
        if t.instants.name[i] != memory_name {
            continue;
        }
        let int = |key: &str| t.instant_arg_i64(i, key);
        // The device as the trace describes it: a Gaudi's memory is `hpu:N` even where the
        // bridge wrote CUDA's `Device Type` (see `Timeline::memory_device`).
        let (Some(device), Some(bytes), Some(total)) =
            (t.memory_device(i), int("Bytes"), int("Total Allocated"))
        else {
            continue;
        };
        per_device.entry(device).or_default().push(Event {
            ts: t.instants.ts[i],
            bytes,
            total,
            reserved: int("Total Reserved").unwrap_or(0),
            addr: int("Addr").unwrap_or(0),
            instant: i,
        });
    }
    let total_memory = t.device.memory_bytes;
    per_device
        .into_iter()
        .map(|(device, mut events)| {
            events.sort_by_key(|e| (e.ts, e.instant));
            let mut m = analyse(t, &device, &events);
            if device != "cpu" {
                m.device_total_bytes = total_memory;
            }
            m
        })
        .collect()
}

fn analyse(t: &Timeline, device: &str, events: &[Event]) -> DeviceMemory {
    let mut m = DeviceMemory {
        device: device.to_owned(),
        allocations: 0,
        frees: 0,
        bytes_allocated: 0,
        peak_allocated_bytes: 0,
        peak_allocated_ns: 0,
        min_allocated_bytes: events.first().map_or(0, |e| e.total),
        peak_reserved_bytes: 0,
        slack_at_peak_bytes: 0,
        device_total_bytes: None,
        integrity_breaks: 0,
        held_at_peak: Vec::new(),
        never_freed: Vec::new(),
        never_freed_bytes: 0,
        steps: Vec::new(),
    };
    let mut peak_index = None;
    for (k, e) in events.iter().enumerate() {
        if e.bytes > 0 {
            m.allocations += 1;
            m.bytes_allocated += e.bytes;
        } else if e.bytes < 0 {
            m.frees += 1;
        }
        if k > 0 && e.total - events[k - 1].total != e.bytes {
            m.integrity_breaks += 1;
        }
        m.min_allocated_bytes = m.min_allocated_bytes.min(e.total);
        if peak_index.is_none() || e.total > m.peak_allocated_bytes {
            m.peak_allocated_bytes = e.total;
            m.peak_allocated_ns = e.ts;
            // A device whose allocator caches nothing reports no reserved memory (the CPU).
            m.slack_at_peak_bytes = if e.reserved > 0 {
                (e.reserved - e.total).max(0)
            } else {
                0
            };
            peak_index = Some(k);
        }
        m.peak_reserved_bytes = m.peak_reserved_bytes.max(e.reserved);
    }
    // Replay the allocations: live at the peak, and never freed by the end.
    let mut live: FxHashMap<i64, (i64, usize)> = FxHashMap::default();
    let mut held_at_peak = None;
    for (k, e) in events.iter().enumerate() {
        if e.bytes > 0 {
            live.insert(e.addr, (e.bytes, e.instant));
        } else if e.bytes < 0 {
            live.remove(&e.addr);
        }
        if Some(k) == peak_index {
            held_at_peak = Some(live.values().copied().collect::<Vec<_>>());
        }
    }
    let mut ops = OpLookup::default();
    m.held_at_peak = ops.group(t, held_at_peak.unwrap_or_default());
    let never: Vec<(i64, usize)> = live.values().copied().collect();
    m.never_freed_bytes = never.iter().map(|(b, _)| b).sum();
    m.never_freed = ops.group(t, never);
    m.steps = per_step(t, events);
    m
}

fn per_step(t: &Timeline, events: &[Event]) -> Vec<StepMemory> {
    let Some(source) = t.steps.first().map(|s| s.source) else {
        return Vec::new();
    };
    t.steps
        .iter()
        .filter(|s| s.source == source)
        .map(|s| {
            let from = events.partition_point(|e| e.ts < s.start);
            let to = events.partition_point(|e| e.ts < s.end());
            // Allocated at the start: the total after the last event before the step, else
            // the first event's total before its own change.
            let start = match from.checked_sub(1) {
                Some(k) => events[k].total,
                None => events.first().map_or(0, |e| e.total - e.bytes),
            };
            let inside = &events[from..to];
            StepMemory {
                step: s.name.clone(),
                start_allocated_bytes: start,
                peak_allocated_bytes: inside
                    .iter()
                    .map(|e| e.total)
                    .max()
                    .unwrap_or(start)
                    .max(start),
                allocated_bytes: inside.iter().filter(|e| e.bytes > 0).map(|e| e.bytes).sum(),
                allocations: inside.iter().filter(|e| e.bytes > 0).count() as u64,
            }
        })
        .collect()
}

/// Finds the op around a `[memory]` instant, with each op's name and call site looked up once.
#[derive(Default)]
struct OpLookup {
    sites: FxHashMap<SliceId, (String, Option<String>)>,
}

impl OpLookup {
    /// The innermost op (ATen op or annotation, not a Python frame) around instant `i`.
    fn op_of(t: &Timeline, i: usize) -> Option<SliceId> {
        let slice = t.slice_at(t.instants.track[i], t.instants.ts[i])?;
        std::iter::once(slice)
            .chain(crate::call_site::ancestors(t, slice))
            .find(|&s| {
                matches!(
                    t.slice_class(s),
                    CategoryClass::CpuOp | CategoryClass::UserAnnotation
                )
            })
    }

    /// Groups `(bytes, instant)` allocations by op and call site, largest first, top 10.
    fn group(&mut self, t: &Timeline, allocations: Vec<(i64, usize)>) -> Vec<MemoryHolder> {
        let mut by: BTreeMap<(String, Option<String>), (i64, u64)> = BTreeMap::new();
        for (bytes, instant) in allocations {
            let key = match Self::op_of(t, instant) {
                Some(op) => self
                    .sites
                    .entry(op)
                    .or_insert_with(|| {
                        (
                            t.slice_name(op).to_owned(),
                            crate::call_site::call_site(t, op),
                        )
                    })
                    .clone(),
                None => ("(no op)".to_owned(), None),
            };
            let e = by.entry(key).or_default();
            e.0 += bytes;
            e.1 += 1;
        }
        let mut out: Vec<MemoryHolder> = by
            .into_iter()
            .map(|((op, call_site), (bytes, count))| MemoryHolder {
                op,
                call_site,
                bytes,
                count,
            })
            .collect();
        out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.op.cmp(&b.op)));
        out.truncate(TOP_HOLDERS);
        out
    }
}

/// The device whose memory the step table shows: an accelerator when the trace has one with
/// memory events, else the CPU.
#[must_use]
pub fn primary(memory: &[DeviceMemory]) -> Option<&DeviceMemory> {
    memory
        .iter()
        .find(|m| m.device != "cpu")
        .or_else(|| memory.first())
}

/// Bytes in binary units ([`crate::units::human_bytes`] for the signed figures of this module;
/// a negative value reads as 0).
#[must_use]
pub fn human_bytes(bytes: i64) -> String {
    crate::units::human_bytes(bytes.max(0).unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1_048_576), "1.0 MiB");
        assert_eq!(human_bytes(3 * 1_073_741_824 / 2), "1.50 GiB");
        assert_eq!(human_bytes(-2048), "0 B");
    }
}
