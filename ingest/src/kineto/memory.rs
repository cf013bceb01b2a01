//! `[memory]` instants of a `profile_memory=True` trace: each sample kept while the events are
//! read, and written as counters once the whole document says which device they are on.

use super::KinetoReader;
use crate::builder::TimelineBuilder;
use crate::json;
use crate::model::LaneId;

impl<'a, 'b, 'p> KinetoReader<'a, 'b, 'p> {
    /// Writes the `[memory]` samples as counters, now that the whole document (its
    /// `deviceProperties` included) says which device they are on.
    pub(super) fn push_memory(&mut self) {
        let samples = std::mem::take(&mut self.memory);
        if samples.is_empty() {
            return;
        }
        let on_hpu = self.builder.device_hints(self.source).memory_on_hpu();
        for (pid, ts, sample) in &samples {
            sample.push(self.builder, self.source, *pid, *ts, on_hpu);
        }
    }
}

/// One `[memory]` instant of a `profile_memory=True` trace: the allocator's totals on one
/// device after an allocation or free.
pub(super) struct MemorySample {
    /// `Device Type` (a `c10::DeviceType` number) and `Device Id`, named once the document is
    /// read ([`crate::model::memory_device_name`]).
    kind: i64,
    index: i64,
    allocated: Option<f64>,
    reserved: Option<f64>,
}

impl MemorySample {
    pub(super) fn parse(args: &[u8]) -> Option<Self> {
        let int = |key: &[u8]| json::find_key(args, key).and_then(json::lenient_int);
        let kind = int(b"Device Type")?;
        let index = int(b"Device Id").unwrap_or(0);
        let float = |key: &[u8]| {
            json::find_key(args, key)
                .and_then(|t| std::str::from_utf8(t).ok())
                .and_then(|t| t.trim_matches('"').parse::<f64>().ok())
        };
        Some(Self {
            kind,
            index,
            allocated: float(b"Total Allocated"),
            reserved: float(b"Total Reserved"),
        })
    }

    /// Writes the totals as the counter series `memory allocated <device>` and
    /// `memory reserved <device>` of the process that allocated; `on_hpu`: the document
    /// describes a Gaudi ([`crate::model::memory_device_name`]).
    fn push(&self, b: &mut TimelineBuilder, source: u16, pid: LaneId, ts: i64, on_hpu: bool) {
        let device = crate::model::memory_device_name(self.kind, self.index, on_hpu);
        for (what, value) in [("allocated", self.allocated), ("reserved", self.reserved)] {
            if let Some(v) = value {
                let series = format!("memory {what} {device}");
                b.push_counter(source, pid, &series, ts, v);
            }
        }
    }
}
