//! Per-kernel facts the GPU summary and the kernel tables share (device, blocks per SM,
//! occupancy, Tensor Cores, launch shape), read from each kernel's args in one pass.

use rustc_hash::FxHashMap;
use steplens_ingest::Timeline;
use steplens_ingest::model::{CategoryClass, SliceId, TrackKind};

use super::arg_text::python_repr;
use super::{LaunchShape, tensor_cores};

/// A numeric kernel arg (`blocks per SM` may be written as a string, `"inf"` included).
fn number(raw: Option<&[u8]>) -> Option<f64> {
    let text = std::str::from_utf8(raw?).ok()?.trim_matches('"');
    text.parse::<f64>().ok()
}

/// Per-kernel facts the summary and the tables share, read from its args in one pass.
pub(super) struct KernelFacts {
    pub(super) slice: SliceId,
    pub(super) source: u16,
    pub(super) device: i64,
    pub(super) blocks_per_sm: Option<f64>,
    pub(super) occupancy: Option<f64>,
    pub(super) tensor_cores: bool,
    pub(super) launch: LaunchShape,
}

/// A launch-shape arg as the plugin prints it (`[1, 1, 1]`), `0` when absent.
fn launch_text(raw: Option<&[u8]>, cache: &mut FxHashMap<Vec<u8>, String>) -> String {
    let Some(raw) = raw else {
        return "0".to_owned();
    };
    if let Some(text) = cache.get(raw) {
        return text.clone();
    }
    let text = python_repr(raw).trim_matches('\'').to_owned();
    cache.insert(raw.to_vec(), text.clone());
    text
}

pub(super) fn kernel_facts(t: &Timeline) -> Vec<KernelFacts> {
    let mut tc_by_name: FxHashMap<u32, bool> = FxHashMap::default();
    let mut texts: FxHashMap<Vec<u8>, String> = FxHashMap::default();
    let mut out = Vec::new();
    for track in &t.tracks {
        let TrackKind::DeviceEngine { device, .. } = track.kind else {
            continue;
        };
        for k in track.slices.clone() {
            if t.slice_class(k) != CategoryClass::Kernel {
                continue;
            }
            let tensor_cores = *tc_by_name
                .entry(t.slices.name[k as usize])
                .or_insert_with(|| tensor_cores::kernel_uses_tensor_cores(t.slice_name(k)));
            let [dev, bps, occ, grid, block, regs, shared] = t.args_raw_of(
                k,
                [
                    "device",
                    "blocks per SM",
                    "est. achieved occupancy %",
                    "grid",
                    "block",
                    "registers per thread",
                    "shared memory",
                ],
            );
            out.push(KernelFacts {
                slice: k,
                source: track.source,
                device: number(dev).map_or(device.unwrap_or(0), |d| d as i64),
                blocks_per_sm: number(bps),
                occupancy: number(occ),
                tensor_cores,
                launch: LaunchShape {
                    grid: launch_text(grid, &mut texts),
                    block: launch_text(block, &mut texts),
                    registers_per_thread: launch_text(regs, &mut texts),
                    shared_memory: launch_text(shared, &mut texts),
                },
            });
        }
    }
    out
}
