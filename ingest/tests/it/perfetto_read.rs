//! Reading a Perfetto trace steplens did not write: `samples/perfetto/synthetic.pftrace`, made
//! with the official Python classes by `samples/gen/make_perfetto_sample.py` (thread and
//! custom tracks, interning, sequence defaults, an incremental clock, flows, counters,
//! compressed packets, skipped and lost packets).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use steplens_ingest::model::{EngineClass, TrackKind};
use steplens_ingest::{LoadOptions, load};

#[test]
fn synthetic_perfetto_trace() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/perfetto/synthetic.pftrace");
    let t = load(&path, &LoadOptions::default(), None).expect("loads");
    assert_eq!(t.sources[0].format, "perfetto-proto");
    let tracks: Vec<(String, String, TrackKind)> = t
        .tracks
        .iter()
        .map(|tr| (tr.process_name.clone(), tr.name.clone(), tr.kind.clone()))
        .collect();
    assert_eq!(
        tracks,
        [
            (
                "train.py".into(),
                "MainThread".into(),
                TrackKind::HostThread
            ),
            (
                "train.py".into(),
                "DataLoader".into(),
                TrackKind::HostThread
            ),
            (
                "GPU 0".into(),
                "stream 7".into(),
                TrackKind::DeviceEngine {
                    class: EngineClass::ComputeStream,
                    device: Some(0)
                }
            ),
            ("train.py".into(), "GPU memory".into(), TrackKind::Counter),
        ]
    );
    let slices: Vec<(String, i64, i64, u16, String)> = (0..t.slices.len() as u32)
        .map(|i| {
            let k = i as usize;
            (
                t.slice_name(i).to_owned(),
                t.slices.start[k],
                t.slices.dur[k],
                t.slices.depth[k],
                t.categories.name(t.slices.cat[k]).to_owned(),
            )
        })
        .collect();
    let s = |n: &str, a, d, depth, c: &str| (n.to_owned(), a, d, depth, c.to_owned());
    assert_eq!(
        slices,
        [
            s("ProfilerStep#1", 1000, 8000, 0, "user_annotation"),
            s("aten::linear", 2000, 3000, 1, "cpu_op"),
            s("cudaLaunchKernel", 2500, 500, 2, "cuda_runtime"),
            s("optimizer.step", 9500, 400, 0, "cpu_op"),
            // Sequence 2: delta timestamps on the incremental clock, track from the defaults.
            s("next_batch", 1500, 1000, 0, "user_annotation"),
            s("next_batch", 7000, 1000, 0, "user_annotation"),
            s("gemm", 4000, 2000, 0, "kernel"),
        ]
    );
    // Debug annotations became the slice's args: ints, nested arrays, interned strings, dicts.
    let args = t.args(1).expect("aten::linear has args");
    assert_eq!(args["External id"], 7);
    assert_eq!(args["Input Dims"], serde_json::json!([[8, 32], [32, 128]]));
    assert_eq!(args["meta"]["dtype"], "float32");
    assert_eq!(args["meta"]["note"], "a \"quoted\" word");
    assert_eq!(t.arg_i64(1, "External id"), Some(7));
    // Flow 42: cudaLaunchKernel -> gemm.
    assert_eq!(t.flows.len(), 1);
    assert_eq!((t.flows[0].from, t.flows[0].to), (2, 6));
    assert_eq!(t.counters.value, [1024.0, 4096.0, 2048.0]);
    assert_eq!(t.instants.len(), 2);
    assert_eq!(t.steps.len(), 1);
    let codes: Vec<&str> = t.sources[0]
        .warnings
        .iter()
        .map(|w| w.code.as_str())
        .collect();
    assert_eq!(codes, ["data_loss", "data_loss", "skipped_packets"]);
}
