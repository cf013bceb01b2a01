//! The `sync_point`, `dataloader_stall`, `recompile` and `host_bound_gap` detectors against
//! the corpus truth files (`../shared/corpus/torch-cpu/*.truth.json`) and the samples: exact
//! counts per step for the planted problems, and nothing of those kinds on clean traces.
//!
//! Without the corpus the corpus tests print a note and pass, except under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::Path;

use steplens_analysis::Report;

use crate::support;

use crate::support::{report, sample, torch_cpu_trace};

const MY_KINDS: &[&str] = &[
    "sync_point",
    "dataloader_stall",
    "recompile",
    "host_bound_gap",
];

/// `../shared/corpus/torch-cpu/<name>.json.gz`, or `None` outside CI when it is absent.
fn corpus(name: &str) -> Option<Report> {
    torch_cpu_trace(name).map(|path| report(&path))
}

/// `(kind, step) -> count` of findings.
fn per_step(report: &Report, kind: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for f in report.findings.iter().filter(|f| f.kind == kind) {
        *out.entry(f.step.clone().unwrap_or_default()).or_insert(0) += 1;
    }
    out
}

/// `(step, call site) -> calls` of sync findings.
fn sync_sites(report: &Report) -> BTreeMap<(String, String), u64> {
    report
        .findings
        .iter()
        .filter(|f| f.kind == "sync_point")
        .map(|f| {
            (
                (
                    f.step.clone().unwrap_or_default(),
                    f.call_site.clone().unwrap_or_default(),
                ),
                f.count,
            )
        })
        .collect()
}

fn assert_none_of(report: &Report, kinds: &[&str], label: &str) {
    let fired: Vec<&str> = report
        .findings
        .iter()
        .filter(|f| kinds.contains(&f.kind.as_str()))
        .map(|f| f.title.as_str())
        .collect();
    assert!(fired.is_empty(), "{label}: unexpected findings: {fired:#?}");
}

#[test]
fn corpus_sync_points_per_step_and_call_site() {
    let Some(r) = corpus("sync_points") else {
        return;
    };
    // Truth: user sync sites per step 43 (loss.item()), 45 (print: 5 is_nonzero + 2 item +
    // 1 masked_select) and 46 (set_postfix(loss=loss.item())); .cpu() at 44 is invisible on CPU.
    let mut want = BTreeMap::new();
    for step in ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"] {
        want.insert((step.to_owned(), "sync_points.py:43".to_owned()), 1);
        want.insert((step.to_owned(), "sync_points.py:45".to_owned()), 8);
        want.insert((step.to_owned(), "sync_points.py:46".to_owned()), 1);
    }
    assert_eq!(sync_sites(&r), want);
    assert_none_of(
        &r,
        &["dataloader_stall", "recompile", "host_bound_gap"],
        "sync_points",
    );
    let print = r
        .findings
        .iter()
        .find(|f| f.call_site.as_deref() == Some("sync_points.py:45"));
    let print = print.expect("print finding");
    assert_eq!(
        print.ops,
        ["aten::is_nonzero", "aten::item", "aten::masked_select"]
    );
    assert!(print.recommendation.contains("Printing a tensor"));
    assert_eq!(print.evidence.len(), 8);
}

#[test]
fn corpus_clean_traces_have_no_findings_of_these_kinds() {
    for name in ["clean_baseline", "transposes"] {
        if let Some(r) = corpus(name) {
            assert_none_of(&r, MY_KINDS, name);
        }
    }
}

#[test]
fn corpus_dataloader_stall_every_step_and_std_items_are_not_syncs() {
    let Some(r) = corpus("dataloader_stall") else {
        return;
    };
    let steps = per_step(&r, "dataloader_stall");
    assert_eq!(steps.len(), 3, "{steps:?}");
    for f in r.findings.iter().filter(|f| f.kind == "dataloader_stall") {
        // Truth: 33.7–34.1 ms per step not covered by any op.
        assert!(
            (33_000_000..35_000_000).contains(&f.lost_ns),
            "{}: {}",
            f.title,
            f.lost_ns
        );
        assert_eq!(f.severity, "critical");
    }
    // 16 aten::item per step sit inside aten::std in __getitem__: not user syncs.
    assert_none_of(
        &r,
        &["sync_point", "recompile", "host_bound_gap"],
        "dataloader_stall",
    );
}

#[test]
fn corpus_recompiles_counted_with_their_shapes() {
    let Some(r) = corpus("recompile_shapes_static") else {
        return;
    };
    let found: Vec<(String, String)> = r
        .findings
        .iter()
        .filter(|f| f.kind == "recompile")
        .map(|f| (f.step.clone().unwrap_or_default(), f.ops.join(",")))
        .collect();
    let mut found_sorted = found;
    found_sorted.sort();
    assert_eq!(
        found_sorted,
        [
            (
                "ProfilerStep#3".to_owned(),
                "Torch-Compiled Region: 0/1".to_owned()
            ),
            (
                "ProfilerStep#4".to_owned(),
                "Torch-Compiled Region: 0/2".to_owned()
            ),
            (
                "ProfilerStep#5".to_owned(),
                "Torch-Compiled Region: 0/3".to_owned()
            ),
        ]
    );
    // The generator's truth file holds each step's compile time (`compile_ms`, summed over the
    // step's compile events): a recompile owns that time, within 0.1 % (the truth rounds to
    // µs and counts the compile region, which our cost ends at the last compiler op).
    let truth_path = support::torch_cpu_trace("recompile_shapes_static")
        .map(|p| p.with_file_name("recompile_shapes_static.truth.json"))
        .expect("truth beside the trace");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(truth_path).unwrap()).unwrap();
    let compile_ns = |step: &str| -> i64 {
        truth["observed_summary_per_step"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == step)
            .and_then(|s| s["compile_ms"].as_f64())
            .map(|ms| (ms * 1e6) as i64)
            .unwrap()
    };
    for f in r.findings.iter().filter(|f| f.kind == "recompile") {
        let want = compile_ns(f.step.as_deref().unwrap());
        assert!(
            (f.lost_ns - want).abs() * 1000 <= want,
            "{}: owns {} ns, truth {want} ns",
            f.title,
            f.lost_ns
        );
        assert!(
            f.title.contains("inputs changed: input 10: [16, "),
            "{}",
            f.title
        );
    }
    let first = r
        .findings
        .iter()
        .find(|f| f.ops[0].ends_with("0/1"))
        .unwrap();
    assert!(
        first.title.contains("[16, 32] -> [16, 40]"),
        "{}",
        first.title
    );
    // aten::item inside the compiler's passes is not a user sync.
    assert_none_of(
        &r,
        &["sync_point", "dataloader_stall", "host_bound_gap"],
        "recompile",
    );
}

#[test]
fn samples_sync_stall_and_clean() {
    let sync = sample("torch-cpu/train_sync.json.gz");
    let sites: BTreeMap<String, u64> = sync_sites(&sync)
        .into_iter()
        .filter(|((step, _), _)| step == "ProfilerStep#3")
        .map(|((_, site), n)| (site, n))
        .collect();
    assert_eq!(
        sites,
        BTreeMap::from([
            ("make_torch_samples.py:108".to_owned(), 1),
            ("make_torch_samples.py:109".to_owned(), 8),
        ])
    );
    assert_eq!(per_step(&sync, "sync_point").len(), 3);

    let stall = sample("torch-cpu/train_stall.json.gz");
    assert_eq!(
        per_step(&stall, "dataloader_stall").values().sum::<usize>(),
        3
    );
    assert_none_of(
        &stall,
        &["sync_point", "recompile", "host_bound_gap"],
        "train_stall",
    );

    let clean = sample("torch-cpu/train_clean.json");
    assert_none_of(&clean, MY_KINDS, "train_clean");
}

#[test]
fn gpu_sample_measures_blocked_time_and_host_bound_gaps() {
    let r = sample("hta/cuda_event_sync.json.gz");
    let event_sync = r
        .findings
        .iter()
        .find(|f| f.kind == "sync_point" && f.ops == ["cudaEventSynchronize"])
        .expect("cudaEventSynchronize sync");
    assert_eq!(event_sync.lost_ns, 34_000);
    let gap = r
        .findings
        .iter()
        .find(|f| f.kind == "host_bound_gap")
        .expect("host-bound gap");
    assert_eq!(gap.step.as_deref(), Some("ProfilerStep#100"));
    assert!(gap.lost_ns > 0 && gap.lost_ns <= r.steps[0].device_idle_ns.unwrap());
    // Findings are ranked by lost time.
    assert!(r.findings.windows(2).all(|w| w[0].lost_ns >= w[1].lost_ns));
    // The summary adds them up by kind.
    let total: i64 = r.findings.iter().map(|f| f.lost_ns).sum();
    assert_eq!(r.summary.lost_ns_by_kind.values().sum::<i64>(), total);
}

#[test]
fn idle_breakdown_matches_hta() {
    // HTA 0.5.0 get_idle_time_breakdown on this integer-µs trace: stream 20 host wait 32 µs,
    // streams 24 and 28 kernel wait 15 µs each.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/hta");
    let path = dir.join("critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz");
    if path.exists() {
        let r = report(&path);
        let got: Vec<(&str, i64, i64, i64)> = r
            .idle
            .iter()
            .map(|s| {
                (
                    s.stream.as_str(),
                    s.host_wait_ns,
                    s.kernel_wait_ns,
                    s.other_ns,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("stream 20", 32_000, 0, 0),
                ("stream 24", 0, 15_000, 0),
                ("stream 28", 0, 15_000, 0)
            ]
        );
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{} missing",
            path.display()
        );
    }
    // ROCm sample: HTA's get_idle_time_breakdown gives 8780 µs of host wait. HTA reads ts and
    // dur as whole µs, so each of the stream's gaps (one fewer than its 16 kernels) can move by
    // under 2 µs (its start and its end rounded); we keep the ns. The two agree within that.
    let amd = sample("hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
    assert_eq!(amd.idle.len(), 1);
    let kernels = amd.idle[0].kernels;
    assert_eq!(kernels, 16);
    let hta_host_wait_ns: i64 = 8_780_000;
    let tolerance_ns = 2_000 * (kernels as i64 - 1);
    assert!(
        (amd.idle[0].host_wait_ns - hta_host_wait_ns).abs() < tolerance_ns,
        "host wait {} ns, HTA {hta_host_wait_ns} ns ± {tolerance_ns}",
        amd.idle[0].host_wait_ns
    );
    // All of that stream's idle time is host wait.
    assert_eq!(amd.idle[0].idle_ns, amd.idle[0].host_wait_ns);
    // CPU-only traces have no streams.
    assert!(sample("torch-cpu/train_clean.json").idle.is_empty());
}

/// On a trace with a device, a value op (`aten::item`) with no blocking runtime call in it shows
/// no wait, so it is no finding ("host blocked 0 ns"); one whose synchronize waited for a
/// kernel is. Rule: a sync point's cost is the time its blocking calls took.
#[test]
fn a_sync_that_shows_no_wait_is_no_finding() {
    let trace = r#"{"traceEvents":[
      {"ph":"X","name":"ProfilerStep#1","cat":"user_annotation","pid":1,"tid":1,"ts":0,"dur":1000},
      {"ph":"X","name":"aten::mm","cat":"cpu_op","pid":1,"tid":1,"ts":5,"dur":20},
      {"ph":"X","name":"cudaLaunchKernel","cat":"cuda_runtime","pid":1,"tid":1,"ts":10,"dur":5,"args":{"correlation":1}},
      {"ph":"X","name":"aten::item","cat":"cpu_op","pid":1,"tid":1,"ts":500,"dur":30},
      {"ph":"X","name":"ProfilerStep#2","cat":"user_annotation","pid":1,"tid":1,"ts":1000,"dur":1000},
      {"ph":"X","name":"aten::mm","cat":"cpu_op","pid":1,"tid":1,"ts":1005,"dur":20},
      {"ph":"X","name":"cudaLaunchKernel","cat":"cuda_runtime","pid":1,"tid":1,"ts":1010,"dur":5,"args":{"correlation":3}},
      {"ph":"X","name":"aten::item","cat":"cpu_op","pid":1,"tid":1,"ts":1100,"dur":820},
      {"ph":"X","name":"cudaStreamSynchronize","cat":"cuda_runtime","pid":1,"tid":1,"ts":1105,"dur":810,"args":{"correlation":4}},
      {"ph":"X","name":"sgemm","cat":"kernel","pid":0,"tid":7,"ts":20,"dur":100,"args":{"device":0,"stream":7,"correlation":1}},
      {"ph":"X","name":"sgemm","cat":"kernel","pid":0,"tid":7,"ts":1020,"dur":880,"args":{"device":0,"stream":7,"correlation":3}},
      {"ph":"s","id":1,"pid":1,"tid":1,"ts":10,"cat":"ac2g","name":"ac2g"},
      {"ph":"f","id":1,"pid":0,"tid":7,"ts":20,"cat":"ac2g","name":"ac2g","bp":"e"},
      {"ph":"s","id":3,"pid":1,"tid":1,"ts":1010,"cat":"ac2g","name":"ac2g"},
      {"ph":"f","id":3,"pid":0,"tid":7,"ts":1020,"cat":"ac2g","name":"ac2g","bp":"e"}
    ]}"#;
    let t = steplens_ingest::load_bytes(
        "sync.json",
        trace.as_bytes().to_vec(),
        &steplens_ingest::LoadOptions::default(),
    )
    .unwrap();
    let r = steplens_analysis::build_report(&t);
    let syncs: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind == steplens_analysis::FindingKind::SyncPoint)
        .collect();
    assert_eq!(syncs.len(), 1, "{syncs:#?}");
    assert_eq!(syncs[0].step.as_deref(), Some("ProfilerStep#2"));
    assert!(syncs[0].lost_ns > 0);
    assert!(
        !syncs[0].title.contains("blocked 0 ns"),
        "{}",
        syncs[0].title
    );
}

/// A blocking call saves at most the device work it waited for. Shape of a real SGLang decode
/// trace: `aten::copy_` blocks the host in `hipMemcpyWithStream` for 463 ms while the device runs
/// nothing (the wait was on the scheduler, not the GPU). The finding says so, and its saving is
/// the device work during the wait (none); the same wait over a running kernel keeps its saving.
#[test]
fn a_long_wait_with_the_device_idle_saves_nothing_and_says_why() {
    let trace = r#"{"deviceProperties":[{"id":0,"name":"AMD Instinct MI300X"}],"traceEvents":[
      {"ph":"X","name":"ProfilerStep#1","cat":"user_annotation","pid":1,"tid":1,"ts":0,"dur":470000},
      {"ph":"X","name":"aten::mm","cat":"cpu_op","pid":1,"tid":1,"ts":5,"dur":20},
      {"ph":"X","name":"hipLaunchKernel","cat":"cuda_runtime","pid":1,"tid":1,"ts":10,"dur":5,"args":{"correlation":1}},
      {"ph":"X","name":"aten::copy_","cat":"cpu_op","pid":1,"tid":1,"ts":1000,"dur":463500},
      {"ph":"X","name":"hipMemcpyWithStream","cat":"cuda_runtime","pid":1,"tid":1,"ts":1100,"dur":463000,"args":{"correlation":2}},
      {"ph":"X","name":"Cijk_gemm","cat":"kernel","pid":0,"tid":7,"ts":20,"dur":300,"args":{"device":0,"stream":7,"correlation":1}},
      {"ph":"X","name":"Memcpy DtoH (Device -> Host)","cat":"gpu_memcpy","pid":0,"tid":7,"ts":464050,"dur":30,"args":{"device":0,"stream":7,"correlation":2}},
      {"ph":"X","name":"ProfilerStep#2","cat":"user_annotation","pid":1,"tid":1,"ts":470000,"dur":10000},
      {"ph":"X","name":"aten::mm","cat":"cpu_op","pid":1,"tid":1,"ts":470005,"dur":20},
      {"ph":"X","name":"hipLaunchKernel","cat":"cuda_runtime","pid":1,"tid":1,"ts":470010,"dur":5,"args":{"correlation":3}},
      {"ph":"X","name":"aten::copy_","cat":"cpu_op","pid":1,"tid":1,"ts":470100,"dur":8100},
      {"ph":"X","name":"hipMemcpyWithStream","cat":"cuda_runtime","pid":1,"tid":1,"ts":470105,"dur":8000,"args":{"correlation":4}},
      {"ph":"X","name":"Cijk_gemm","cat":"kernel","pid":0,"tid":7,"ts":470020,"dur":7900,"args":{"device":0,"stream":7,"correlation":3}},
      {"ph":"X","name":"Memcpy DtoH (Device -> Host)","cat":"gpu_memcpy","pid":0,"tid":7,"ts":477950,"dur":30,"args":{"device":0,"stream":7,"correlation":4}},
      {"ph":"s","id":1,"pid":1,"tid":1,"ts":10,"cat":"ac2g","name":"ac2g"},
      {"ph":"f","id":1,"pid":0,"tid":7,"ts":20,"cat":"ac2g","name":"ac2g","bp":"e"},
      {"ph":"s","id":2,"pid":1,"tid":1,"ts":1100,"cat":"ac2g","name":"ac2g"},
      {"ph":"f","id":2,"pid":0,"tid":7,"ts":464050,"cat":"ac2g","name":"ac2g","bp":"e"},
      {"ph":"s","id":3,"pid":1,"tid":1,"ts":470010,"cat":"ac2g","name":"ac2g"},
      {"ph":"f","id":3,"pid":0,"tid":7,"ts":470020,"cat":"ac2g","name":"ac2g","bp":"e"},
      {"ph":"s","id":4,"pid":1,"tid":1,"ts":470105,"cat":"ac2g","name":"ac2g"},
      {"ph":"f","id":4,"pid":0,"tid":7,"ts":477950,"cat":"ac2g","name":"ac2g","bp":"e"}
    ]}"#;
    let t = steplens_ingest::load_bytes(
        "idle_wait.json",
        trace.as_bytes().to_vec(),
        &steplens_ingest::LoadOptions::default(),
    )
    .unwrap();
    let r = steplens_analysis::build_report(&t);
    let sync = |step: &str| {
        r.findings
            .iter()
            .find(|f| {
                f.kind == steplens_analysis::FindingKind::SyncPoint
                    && f.step.as_deref() == Some(step)
            })
            .unwrap_or_else(|| panic!("no sync_point in {step}: {:#?}", r.findings))
    };
    let idle = sync("ProfilerStep#1");
    assert!(
        idle.title.contains("with the device idle"),
        "{}",
        idle.title
    );
    assert!(
        idle.recommendation.contains("outside") || idle.recommendation.contains("does not show")
    );
    // The device ran 30 µs of copy during the 463 ms wait: the fix saves at most that.
    assert!(idle.saving_ns <= 30_000, "{}", idle.saving_ns);
    assert!(
        idle.lost_ns >= 400_000_000,
        "it still owns its wait: {}",
        idle.lost_ns
    );
    let busy = sync("ProfilerStep#2");
    assert!(busy.title.contains("host-device sync"), "{}", busy.title);
}
