//! Loads every trace shipped under `samples/` (`*.json`, `*.json.gz`) and checks the
//! Timeline's structural invariants on each (see `common::check_invariants`).

// Helpers outside `#[test]` functions panic on failure too, by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};

use steplens_ingest::{LoadOptions, load};

fn traces_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            traces_under(&path, out);
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Metrics files hold counters only, no timeline.
        let is_trace =
            (name.ends_with(".json") || name.ends_with(".json.gz") || name.ends_with(".csv"))
                && !name.ends_with(".truth.json")
                && !name.ends_with(".metrics.json")
                && !name.ends_with(".report.json")
                && name != "corpus_counts.json";
        if is_trace {
            out.push(path);
        }
    }
}

fn sample_traces() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples");
    let mut traces = Vec::new();
    traces_under(&root, &mut traces);
    traces
}

#[test]
fn samples_are_all_found() {
    let names: Vec<String> = sample_traces()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "cpu_adamw_foreach.json.gz",
            "cpu_adamw_fused.json.gz",
            "cpu_adamw_loop.json.gz",
            "cpu_bf16_autocast.json.gz",
            "cpu_pointwise.json.gz",
            "cpu_pointwise_clean.json.gz",
            "gpu_clean.json.gz",
            "gpu_data_parallel.json.gz",
            "gpu_gemm_shapes.json.gz",
            "gpu_input_copies.json.gz",
            "ddp_rank0.json.gz",
            "ddp_rank1.json.gz",
            "ddp_rank2.json.gz",
            "ddp_rank3.json.gz",
            "newsync.json.gz",
            "same_script_a.json.gz",
            "same_script_b.json.gz",
            "slow25.json.gz",
            "steady_a.json.gz",
            "steady_b.json.gz",
            "steady_ref.json.gz",
            "steady_slow10.json.gz",
            "straggler_rank0.json.gz",
            "straggler_rank1.json.gz",
            "straggler_rank2.json.gz",
            "straggler_rank3.json.gz",
            "train_hpu.bridge.json.gz",
            "train_hpu.hw.csv",
            "train_hpu.tef.json.gz",
            "clean.bridge.json.gz",
            "clean.plugin.json.gz",
            "clean.plugin_lanes.json.gz",
            "compile_in_sync.bridge.json.gz",
            "compile_in_sync.plugin.json.gz",
            "compile_in_sync.plugin_lanes.json.gz",
            "host_gaps.bridge.json.gz",
            "host_gaps.plugin.json.gz",
            "profiler_flush.bridge.json.gz",
            "profiler_flush.plugin.json.gz",
            "synapse_only_recompile.hw.csv",
            "synapse_only_recompile.tef.json.gz",
            "synapse_recompiles.tef.json.gz",
            "transposes.bridge.json.gz",
            "transposes.plugin.json.gz",
            "debug_hw_prof_accel0_001.csv",
            "debug_hw_prof_accel0_001_analyzed_nodes.csv",
            "cuda_event_sync.json.gz",
            "cuda_graphs_rank0.json.gz",
            "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
            "nccl_ddp_rank0.json.gz",
            "triton_example.json.gz",
            "pt1_10.json.gz",
            "pt1_11.json.gz",
            "pt1_8.json.gz",
            "pt1_8_array.json.gz",
            "pt1_9.json.gz",
            "pt2_0.json.gz",
            "pt2_3.json.gz",
            "pt2_x.json.gz",
            "variant_meta_no_tid.json.gz",
            "variant_string_ids.json.gz",
            "train_clean.json.gz",
            "train_leak.json.gz",
            "bias_bn.json.gz",
            "explicit_pad.json.gz",
            "patterns_clean.json.gz",
            "buckets_1mb_rank0.json.gz",
            "buckets_1mb_rank1.json.gz",
            "buckets_1mb_rank2.json.gz",
            "buckets_1mb_rank3.json.gz",
            "buckets_1mb_default_rank0.json.gz",
            "buckets_1mb_default_rank1.json.gz",
            "buckets_1mb_default_rank2.json.gz",
            "buckets_1mb_default_rank3.json.gz",
            "buckets_default_rank0.json.gz",
            "buckets_default_rank1.json.gz",
            "buckets_default_rank2.json.gz",
            "buckets_default_rank3.json.gz",
            "buckets_tiny_rank0.json.gz",
            "buckets_tiny_rank1.json.gz",
            "buckets_tiny_rank2.json.gz",
            "buckets_tiny_rank3.json.gz",
            "nccl_balanced_rank0.json.gz",
            "nccl_balanced_rank1.json.gz",
            "nccl_balanced_rank2.json.gz",
            "nccl_balanced_rank3.json.gz",
            "nccl_straggler_rank0.json.gz",
            "nccl_straggler_rank1.json.gz",
            "nccl_straggler_rank2.json.gz",
            "nccl_straggler_rank3.json.gz",
            "train_anomaly.json.gz",
            "train_clean.json",
            "train_stall.json.gz",
            "train_sync.json.gz",
            "train_transpose.json.gz",
            "train_zero_grad.json.gz",
            "anomaly_detection.fixed.json.gz",
            "anomaly_detection.problem.json.gz",
            "dataloader_work.fixed.json.gz",
            "dataloader_work.problem.json.gz",
            "explicit_pad.fixed.json.gz",
            "explicit_pad.problem.json.gz",
            "pointwise_chain.fixed.json.gz",
            "pointwise_chain.problem.json.gz",
            "recompile_shapes.fixed.json.gz",
            "recompile_shapes.problem.json.gz",
            "tensor_from_list.fixed.json.gz",
            "tensor_from_list.problem.json.gz",
            "unfused_optimizer.fixed.json.gz",
            "unfused_optimizer.problem.json.gz",
            "zero_grad.fixed.json.gz",
            "zero_grad.problem.json.gz",
            "dataloader_workers.fixed.json.gz",
            "dataloader_workers.problem.json.gz",
            "ddp_nccl_1rank.json.gz",
            "fp32_matmul.fixed.json.gz",
            "fp32_matmul.problem.json.gz",
            "item_sync.fixed.json.gz",
            "item_sync.problem.json.gz",
            "pageable_copy.fixed.json.gz",
            "pageable_copy.problem.json.gz",
            "unfused_optimizer.fixed.json.gz",
            "unfused_optimizer.problem.json.gz",
        ]
    );
}

#[test]
fn every_sample_satisfies_the_invariants() {
    for path in sample_traces() {
        let timeline = load(&path, &LoadOptions::default(), None)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!timeline.slices.is_empty(), "{}: no slices", path.display());
        if let Err(e) = common::check_invariants(&timeline) {
            panic!("{}: invariants violated:\n{e}", path.display());
        }
    }
}

#[test]
fn samples_load_the_same_without_mmap() {
    let no_mmap = LoadOptions {
        mmap: false,
        ..LoadOptions::default()
    };
    for path in sample_traces() {
        let a = load(&path, &LoadOptions::default(), None).expect("mmap load");
        let b = load(&path, &no_mmap, None).expect("read load");
        assert_eq!(a.slices.start, b.slices.start, "{}", path.display());
        assert_eq!(a.slices.dur, b.slices.dur, "{}", path.display());
        assert_eq!(a.slices.parent, b.slices.parent, "{}", path.display());
        assert_eq!(a.flows, b.flows, "{}", path.display());
        assert_eq!(a.stats, b.stats, "{}", path.display());
        assert_eq!(
            a.sources[0].warnings,
            b.sources[0].warnings,
            "{}",
            path.display()
        );
    }
}
