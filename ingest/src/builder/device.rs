//! Stage: device. Decides the device kind, name and count from what the readers saw.

use super::TimelineBuilder;
use crate::model::{DeviceInfo, DeviceKind, Track, TrackKind};

impl TimelineBuilder {
    pub(super) fn find_device(&mut self) {
        // Per input, as its reader named its memory counters.
        self.timeline.memory_on_hpu = (0..self.timeline.sources.len())
            .map(|s| {
                self.device_hints
                    .get(s)
                    .is_some_and(super::DeviceHints::memory_on_hpu)
            })
            .collect();
        // Every input's hints together: any input that saw a device kind counts, names in input
        // order, the first memory size and compute capability stated.
        let hints = self
            .device_hints
            .iter()
            .fold(super::DeviceHints::default(), |mut all, h| {
                all.saw_hip |= h.saw_hip;
                all.saw_cuda |= h.saw_cuda;
                all.saw_mtia |= h.saw_mtia;
                all.saw_hpu |= h.saw_hpu;
                all.names.extend(h.names.iter().cloned());
                all.property_count += h.property_count;
                all.rocm_properties |= h.rocm_properties;
                all.memory_bytes = all.memory_bytes.or(h.memory_bytes);
                if all.compute_capability.is_none() {
                    all.compute_capability.clone_from(&h.compute_capability);
                }
                all
            });
        let device_tracks: Vec<&Track> = self
            .timeline
            .tracks
            .iter()
            .filter(|t| t.kind.is_device())
            .collect();
        let hpu_lanes = device_tracks
            .iter()
            .any(|t| t.process_name.starts_with("HPU") || t.process_name.contains("/device:HPU"));
        let kind = if hints.saw_hpu || hpu_lanes {
            DeviceKind::Hpu
        } else if hints.saw_mtia {
            DeviceKind::Mtia
        } else if hints.saw_hip || hints.rocm_properties {
            DeviceKind::Rocm
        } else if hints.saw_cuda || hints.property_count > 0 || !device_tracks.is_empty() {
            DeviceKind::Cuda
        } else {
            DeviceKind::Cpu
        };
        let mut devices: Vec<(u16, Option<i64>)> = device_tracks
            .iter()
            .filter_map(|t| match &t.kind {
                TrackKind::DeviceEngine { device, .. } => Some((t.source, *device)),
                _ => None,
            })
            .collect();
        devices.sort_unstable();
        devices.dedup();
        let active = devices.len();
        let mut names = hints.names.clone();
        names.dedup();
        self.timeline.device = DeviceInfo {
            kind,
            name: names.into_iter().next(),
            memory_bytes: hints.memory_bytes,
            compute_capability: hints.compute_capability,
            count: if kind == DeviceKind::Cpu {
                0
            } else {
                active.max(usize::from(active == 0))
            },
        };
    }
}

#[cfg(test)]
mod tests {
    use crate::builder::stage_test::build;
    use crate::model::DeviceKind;

    #[test]
    fn device_properties_and_kernels_name_the_device() {
        let t = build(
            r#"{"deviceProperties":[{"id":0,"name":"NVIDIA A100-SXM4-80GB","totalGlobalMem":85899345920,"computeMajor":8,"computeMinor":0}],
            "traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":5,"dur":1}]}"#,
        );
        assert_eq!(t.device.kind, DeviceKind::Cuda);
        assert_eq!(t.device.name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
        assert_eq!(t.device.count, 1);
        let cpu = build(r#"[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}]"#);
        assert_eq!(cpu.device.kind, DeviceKind::Cpu);
    }
}
