//! Per-kernel facts the GPU summary and the kernel tables share (device, blocks per SM,
//! occupancy, Tensor Cores, launch shape), read from each kernel's args in one pass.

use rustc_hash::FxHashMap;
use steplens_ingest::Timeline;
use steplens_ingest::model::{ARGS_AHEAD, CategoryClass, SliceId, TrackKind};

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
    /// Its launch shape: an index into [`Facts::shapes`].
    pub(super) launch: u32,
}

/// A launch-shape arg as the plugin prints it (`[1, 1, 1]`), `0` when absent.
fn launch_text(raw: Option<&[u8]>) -> String {
    raw.map_or_else(
        || "0".to_owned(),
        |raw| python_repr(raw).trim_matches('\'').to_owned(),
    )
}

/// Every kernel's facts, and the distinct launch shapes they name (`KernelFacts::launch`).
pub(super) struct Facts {
    pub(super) kernels: Vec<KernelFacts>,
    pub(super) shapes: Vec<LaunchShape>,
}

pub(super) fn kernel_facts(t: &Timeline) -> Facts {
    let mut tc_by_name: FxHashMap<u32, bool> = FxHashMap::default();
    // Launch shapes by their raw arg bytes: a trace has few distinct shapes and many kernels.
    type RawShape<'t> = [Option<&'t [u8]>; 4];
    let mut shape_ids: FxHashMap<RawShape<'_>, u32> = FxHashMap::default();
    let mut shapes: Vec<LaunchShape> = Vec::new();
    let mut by_text: FxHashMap<LaunchShape, u32> = FxHashMap::default();
    let mut out = Vec::new();
    for track in &t.tracks {
        let TrackKind::DeviceEngine { device, .. } = track.kind else {
            continue;
        };
        let kernels: Vec<SliceId> = track
            .slices
            .clone()
            .filter(|&k| t.slice_class(k) == CategoryClass::Kernel)
            .collect();
        for (n, &k) in kernels.iter().enumerate() {
            // A kernel's launch args: the next kernels' fetched together.
            if n % ARGS_AHEAD == 0 {
                let ahead = kernels.iter().skip(n + ARGS_AHEAD).take(ARGS_AHEAD);
                t.touch_args(ahead.copied(), 512);
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
            // Two spellings of one shape (`[1,1,1]`, `[1, 1, 1]`) print alike: one id.
            let launch = *shape_ids
                .entry([grid, block, regs, shared])
                .or_insert_with(|| {
                    let shape = LaunchShape {
                        grid: launch_text(grid),
                        block: launch_text(block),
                        registers_per_thread: launch_text(regs),
                        shared_memory: launch_text(shared),
                    };
                    *by_text.entry(shape.clone()).or_insert_with(|| {
                        shapes.push(shape);
                        shapes.len() as u32 - 1
                    })
                });
            out.push(KernelFacts {
                slice: k,
                source: track.source,
                device: number(dev).map_or(device.unwrap_or(0), |d| d as i64),
                blocks_per_sm: number(bps),
                occupancy: number(occ),
                tensor_cores,
                launch,
            });
        }
    }
    Facts {
        kernels: out,
        shapes,
    }
}
