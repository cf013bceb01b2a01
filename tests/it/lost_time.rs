//! One owner for each lost nanosecond: on every sample and every corpus trace, the findings of
//! a step lose at most the step's duration between them, every finding's lost time is within
//! its step, and the summary's share agrees with the findings.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{corpus_path, report, sample_traces};

fn assert_lost_within_steps(path: &Path) {
    let r = report(path);
    let durations: BTreeMap<(u16, &str), i64> = r
        .steps
        .iter()
        .map(|s| ((s.source, s.name.as_str()), s.dur_ns))
        .collect();
    let mut lost: BTreeMap<&str, i64> = BTreeMap::new();
    for f in &r.findings {
        assert!(
            f.lost_ns >= 0,
            "{}: negative lost time: {f:?}",
            path.display()
        );
        if let Some(step) = &f.step {
            *lost.entry(step.as_str()).or_insert(0) += f.lost_ns;
        }
    }
    for (step, ns) in lost {
        // Step names are unique per input; a finding names its step, so sum over inputs.
        let dur: i64 = durations
            .iter()
            .filter(|((_, name), _)| *name == step)
            .map(|(_, d)| *d)
            .sum();
        assert!(
            ns <= dur,
            "{}: findings in {step} lose {ns} ns of a {dur} ns step",
            path.display()
        );
    }
    if let Some(pct) = r.summary.lost_pct_of_steps {
        assert!((0.0..=100.0).contains(&pct), "{}: {pct}", path.display());
    }
}

#[test]
fn samples_lose_at_most_their_steps() {
    let traces = sample_traces();
    assert!(traces.len() >= 10, "{traces:?}");
    for path in traces {
        assert_lost_within_steps(&path);
    }
    for csv in [
        "gaudi/train_hpu.hw.csv",
        "habana/debug_hw_prof_accel0_001.csv",
    ] {
        assert_lost_within_steps(&support::repo().join("samples").join(csv));
    }
}

#[test]
fn corpus_traces_lose_at_most_their_steps() {
    let traces: Vec<PathBuf> = [
        "torch-cpu/clean_baseline.json.gz",
        "torch-cpu/dataloader_stall.json.gz",
        "torch-cpu/recompile_shapes_static.json.gz",
        "torch-cpu/sync_points.json.gz",
        "torch-cpu/transposes.json.gz",
        "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
        "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
        "hta/nccl_parser_config/nccl_data.json.gz",
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        "hta/trace_filter/sampled_rank-0.json.gz",
        "hta/negative_queue_length_values_check/rank0.json.gz",
        "hta/df_index_resolver/df_index_resolver.json.gz",
        "habana/debug_hw_prof_accel0_001.csv",
    ]
    .iter()
    .filter_map(|rel| corpus_path(rel))
    .collect();
    for path in traces {
        assert_lost_within_steps(&path);
    }
}

/// The text report's lazy path (no TensorBoard views) gives the full report less the views, on
/// every sample: skipping them changes nothing else.
#[test]
fn a_report_without_views_is_the_full_report_less_them() {
    use steplens_analysis::Thresholds;
    use steplens_analysis::report::{Parts, build_report_parts};
    const VIEW_FIELDS: [&str; 6] = [
        "overview",
        "gpu_summary",
        "operators",
        "operators_by_shape",
        "kernels",
        "kernels_by_op",
    ];
    fn without_views(mut v: serde_json::Value) -> serde_json::Value {
        for field in VIEW_FIELDS {
            v.as_object_mut().unwrap().remove(field);
        }
        for step in v["steps"].as_array_mut().unwrap() {
            step.as_object_mut().unwrap().remove("breakdown");
        }
        if let Some(ranks) = v.get_mut("ranks").and_then(|r| r.as_object_mut()) {
            ranks.remove("distributed");
        }
        v
    }
    let thresholds = Thresholds::default();
    for path in sample_traces() {
        let t = steplens_ingest::load(&path, &steplens_ingest::LoadOptions::default(), None)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let full = build_report_parts(&t, &thresholds, Parts::ALL, None);
        let lazy = build_report_parts(&t, &thresholds, Parts::WITHOUT_VIEWS, None);
        assert!(lazy.overview.is_none() && lazy.operators.is_empty() && lazy.kernels.is_empty());
        assert!(lazy.steps.iter().all(|s| s.breakdown.is_none()));
        assert_eq!(
            without_views(serde_json::to_value(&lazy).unwrap()),
            without_views(serde_json::to_value(&full).unwrap()),
            "{}",
            path.display()
        );
    }
}
