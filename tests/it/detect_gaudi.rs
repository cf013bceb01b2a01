//! Gaudi signals: the bridge's metrics file (`habana-metrics`) read on its own and with a trace,
//! `cpu_fallback` and post-warm-up `recompile` findings from it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use steplens_analysis::build_report;
use steplens_ingest::{LoadOptions, load, load_many};
use tempfile::TempDir;

use crate::support;

fn dump(metric: &str, trigger: &str, stats: &str) -> String {
    format!(
        "{{\"metric_name\": \"{metric}\", \"triggered_by\": \"{trigger}\", \"generated_on\": \"2026-11-01T10:00:00\", \"statistics\": {stats}}}"
    )
}

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn metrics_file(terminated: bool) -> String {
    let mut dumps = Vec::new();
    for (n, t) in [(3, 9000.0), (5, 15000.0), (5, 15000.0), (6, 17500.0)] {
        dumps.push(dump(
            "graph_compilation",
            "mark_step",
            &format!("{{\"TotalNumber\": {n}, \"TotalTime\": {t}, \"AvgTime\": 1.0}}"),
        ));
    }
    dumps.push(dump(
        "cpu_fallback",
        "process_exit",
        "{\"TotalNumber\": 14, \"FallbackOps\": {\"digamma\": 12, \"aten::_unique2\": 2}}",
    ));
    let body = dumps.join(",\n");
    if terminated {
        format!("[{body}]\n")
    } else {
        format!("[{body},\n")
    }
}

#[test]
fn metrics_file_loads_and_yields_gaudi_findings() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "metrics-rank0.json", &metrics_file(true));
    let t = load(&path, &LoadOptions::default(), None).unwrap();
    assert_eq!(t.sources[0].format, "habana-metrics");
    assert_eq!(t.sources[0].events, 5);
    assert_eq!(t.metrics.len(), 5);
    assert_eq!(t.device.kind.as_str(), "hpu");
    let r = build_report(&t);
    // Compiles grew in mark_steps 2 (warm-up) and 4 (one new graph, 2.5 ms).
    let recompiles: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind == "recompile")
        .collect();
    assert_eq!(recompiles.len(), 1, "{recompiles:#?}");
    assert_eq!(recompiles[0].count, 1);
    assert_eq!(recompiles[0].lost_ns, 2_500_000);
    assert!(
        recompiles[0].title.contains("mark_step 4"),
        "{}",
        recompiles[0].title
    );
    let fallback = r
        .findings
        .iter()
        .find(|f| f.kind == "cpu_fallback")
        .expect("cpu_fallback");
    assert_eq!(fallback.count, 14);
    assert_eq!(fallback.ops, ["digamma", "aten::_unique2"]);
}

#[test]
fn unterminated_metrics_file_keeps_complete_dumps() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "metrics.json", &metrics_file(false));
    let t = load(&path, &LoadOptions::default(), None).unwrap();
    assert_eq!(t.metrics.len(), 5);
    let w = &t.sources[0].warnings;
    assert!(
        w.iter().any(|w| w.code == "damaged" && w.offset.is_some()),
        "{w:?}"
    );
}

#[test]
fn fallback_ops_found_in_a_trace_loaded_alongside() {
    let dir = TempDir::new().unwrap();
    let metrics = write(&dir, "metrics.json", &metrics_file(true));
    let trace = write(
        &dir,
        "trace.json",
        r#"{"traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::digamma", "pid": 1, "tid": 1, "ts": 10, "dur": 40},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 60, "dur": 5}
        ]}"#,
    );
    let t = load_many(&[&trace, &metrics], &LoadOptions::default(), None).unwrap();
    let r = build_report(&t);
    let fallback = r
        .findings
        .iter()
        .find(|f| f.kind == "cpu_fallback")
        .expect("cpu_fallback");
    assert_eq!(fallback.lost_ns, 40_000);
    assert_eq!(fallback.evidence.len(), 1);
}

#[test]
fn metrics_file_without_dumps_is_an_error() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "m.json", "[{\"metric_name\": \"cpu_fallback\",");
    let err = load(&path, &LoadOptions::default(), None).unwrap_err();
    assert_eq!(err.code(), "damaged");
}

// ---- Generated Gaudi run (samples/gaudi, truth from samples/gen/make_gaudi_samples.py) ----

fn gaudi(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/gaudi")
        .join(name)
}

fn truth(name: &str) -> serde_json::Value {
    support::read_json(&gaudi(name))
}

#[test]
fn bridge_trace_steps_and_engine_busy_match_truth() {
    let t = load(
        &gaudi("train_hpu.bridge.json.gz"),
        &LoadOptions::default(),
        None,
    )
    .unwrap();
    let truth = truth("train_hpu.bridge.truth.json");
    assert_eq!(t.sources[0].format, "habana-bridge-json");
    assert_eq!(t.sources[0].events, truth["events"].as_u64().unwrap());
    let r = build_report(&t);
    let want = truth["device_steps"].as_array().unwrap();
    assert_eq!(r.steps.len(), want.len());
    for (got, want) in r.steps.iter().zip(want) {
        assert_eq!(got.name, want["name"].as_str().unwrap());
        assert_eq!(got.start_ns, want["start_ns"].as_i64().unwrap());
        assert_eq!(got.dur_ns, want["dur_ns"].as_i64().unwrap());
        assert_eq!(got.device_busy_ns, want["device_busy_ns"].as_i64());
        for (class, ns) in want["busy_ns_by_class"].as_object().unwrap() {
            let ns = ns.as_i64().unwrap();
            assert_eq!(
                got.engines.get(class).copied().unwrap_or(0),
                ns,
                "{} {class}",
                got.name
            );
        }
    }
}

/// The bridge's `Memory Logs` write `Device Type` 1 (CUDA's number) for the HPU, beside a
/// `deviceProperties` entry naming the GAUDI3: the report (JSON and text, from the binary)
/// names that memory `hpu:0` with the truth's figures, never `cuda:0`, and gives Gaudi advice,
/// not `PYTORCH_CUDA_ALLOC_CONF`. The input batches are freed every step: no `memory_growth`.
#[test]
fn bridge_trace_memory_is_the_hpus_with_gaudi_advice() {
    let trace = gaudi("train_hpu.bridge.json.gz");
    let trace = trace.to_str().unwrap();
    let truth = truth("train_hpu.bridge.truth.json");
    let json = support::ok(&["report", "-f", "json", trace]);
    let text = support::ok(&["report", trace]);
    for out in [&json, &text] {
        assert!(!out.contains("cuda:0"), "{out}");
        assert!(!out.contains("PYTORCH_CUDA_ALLOC_CONF"), "{out}");
        assert!(!out.contains("torch.cuda"), "{out}");
    }
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let want = truth["memory"].as_array().unwrap();
    let got = r["memory"].as_array().expect("a memory section");
    let names = |v: &[serde_json::Value]| -> Vec<String> {
        v.iter()
            .map(|m| m["device"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(got), names(want));
    assert_eq!(names(got), ["cpu", "hpu:0"]);
    for (g, w) in got.iter().zip(want) {
        for key in [
            "allocations",
            "frees",
            "bytes_allocated",
            "peak_allocated_bytes",
            "peak_reserved_bytes",
            "integrity_breaks",
            "never_freed_bytes",
        ] {
            assert_eq!(g[key], w[key], "{} {key}", w["device"]);
        }
        let (gs, ws) = (
            g["steps"].as_array().unwrap(),
            w["steps"].as_array().unwrap(),
        );
        assert_eq!(gs.len(), ws.len());
        for (gs, ws) in gs.iter().zip(ws) {
            for key in ["step", "start_allocated_bytes", "peak_allocated_bytes"] {
                assert_eq!(gs[key], ws[key], "{} {}: {key}", w["device"], ws["step"]);
            }
        }
    }
    let findings = r["findings"].as_array().unwrap();
    let of = |kind: &str| {
        findings
            .iter()
            .filter(|f| f["kind"] == kind)
            .collect::<Vec<_>>()
    };
    assert!(of("memory_growth").is_empty(), "{:#?}", of("memory_growth"));
    // 1 GiB reserved around at most 20 MiB allocated: the HPU's reserved memory is the bridge's
    // pool, taken whole when the device opens, so its slack is no finding (issue 47, item 8).
    let slack = of("reserved_slack");
    assert!(slack.is_empty(), "{slack:#?}");
    let hpu = &r["memory"][1];
    assert_eq!(hpu["device"], "hpu:0");
    assert!(
        hpu["peak_reserved_bytes"].as_i64().unwrap()
            >= 50 * hpu["peak_allocated_bytes"].as_i64().unwrap(),
        "{hpu}"
    );
    assert!(text.contains("memory peak 20.0 MiB on hpu:0"), "{text}");
}

#[test]
fn bridge_trace_planted_problems_are_found() {
    let trace = gaudi("train_hpu.bridge.json.gz");
    let metrics = gaudi("train_hpu.metrics.json");
    let t = load_many(&[&trace, &metrics], &LoadOptions::default(), None).unwrap();
    let planted = truth("train_hpu.bridge.truth.json")["planted"].clone();
    let r = build_report(&t);
    let of = |kind: &str| {
        r.findings
            .iter()
            .filter(|f| f.kind == kind)
            .collect::<Vec<_>>()
    };

    let mme = of("mme_idle_behind_tpc");
    assert_eq!(mme.len(), 1);
    let want = &planted["mme_idle_behind_tpc"];
    assert_eq!(mme[0].step.as_deref(), want["step"].as_str());
    assert_eq!(mme[0].count, 1);
    assert_eq!(mme[0].start_ns, want["mme_idle_start_ns"].as_i64().unwrap());
    assert_eq!(mme[0].end_ns, want["mme_idle_end_ns"].as_i64().unwrap());
    assert_eq!(mme[0].lost_ns, want["tpc_busy_ns"].as_i64().unwrap());
    assert_eq!(mme[0].ops[0], "reduce_sum_fwd_f32");

    let recompile = of("recompile");
    assert_eq!(recompile.len(), 1, "{recompile:#?}");
    assert_eq!(
        recompile[0].step.as_deref(),
        planted["recompile"]["step"].as_str()
    );
    let compile_ns = planted["recompile"]["compile_ns"].as_i64().unwrap();
    assert!(
        (recompile[0].lost_ns - compile_ns).abs() < 1_000,
        "{}",
        recompile[0].lost_ns
    );

    // One loss.item() per step, blocked exactly as long as its synStreamSynchronize (logged on
    // two lanes, counted once), less what the MME-idle stretch of step #3 owns: the host waited
    // through it, and one nanosecond has one owner. Step #3 also syncs inside the CPU-fallback
    // op, for 83 µs of a step whose non-compile time is ~20 ms: under 1 %, not a finding.
    let mme_step = want["step"].as_str().unwrap();
    let mme_ns = want["tpc_busy_ns"].as_i64().unwrap();
    for want in planted["sync_point"]["per_step"].as_array().unwrap() {
        let step = want["step"].as_str().unwrap();
        let item = of("sync_point")
            .into_iter()
            .find(|f| f.step.as_deref() == Some(step) && f.ops == ["aten::item"])
            .unwrap_or_else(|| panic!("no loss.item() sync in {step}"));
        let owned_elsewhere = if step == mme_step { mme_ns } else { 0 };
        assert_eq!(
            item.lost_ns,
            want["blocked_ns"].as_i64().unwrap() - owned_elsewhere,
            "{step}"
        );
    }
    assert_eq!(of("sync_point").len(), 5);

    let fallback = of("cpu_fallback");
    assert_eq!(fallback.len(), 1);
    assert_eq!(fallback[0].ops, ["aten::_unique2"]);

    // Host-bound: step #4's small ops. Steps #0 and #3 idle the device while compiling, which
    // is `recompile`'s time, not dispatch.
    let gaps = of("host_bound_gap");
    assert_eq!(gaps.len(), 1, "{gaps:#?}");
    assert_eq!(
        gaps[0].step.as_deref(),
        planted["host_bound_gap"]["step"].as_str()
    );
}

#[test]
fn tef_and_hw_csv_of_the_same_run_load() {
    let tef = load(
        &gaudi("train_hpu.tef.json.gz"),
        &LoadOptions::default(),
        None,
    )
    .unwrap();
    let truth_tef = truth("train_hpu.tef.truth.json");
    assert_eq!(tef.sources[0].format, "synapse-tef-json");
    assert_eq!(tef.sources[0].events, truth_tef["events"].as_u64().unwrap());
    // Synapse leaves the array open: a warning, nothing lost.
    assert!(tef.sources[0].warnings.iter().any(|w| w.code == "damaged"));
    assert_eq!(tef.device.count, 1);
    let r = build_report(&tef);
    let classes: Vec<&str> = r.engines.iter().map(|e| e.class.as_str()).collect();
    assert!(
        classes.contains(&"MME") && classes.contains(&"TPC"),
        "{classes:?}"
    );

    let hw = load(&gaudi("train_hpu.hw.csv"), &LoadOptions::default(), None).unwrap();
    let truth_hw = truth("train_hpu.hw.truth.json");
    let r = build_report(&hw);
    for (class, n) in truth_hw["slices_by_class"].as_object().unwrap() {
        let got = r.ops.iter().filter(|o| o.track_kind == "device").count();
        assert!(got > 0);
        let slices = hw
            .tracks
            .iter()
            .filter(|t| matches!(&t.kind, steplens_ingest::model::TrackKind::DeviceEngine { class: c, .. } if c.as_str() == class))
            .map(|t| u64::from(t.slices.end - t.slices.start))
            .sum::<u64>();
        assert_eq!(slices, n.as_u64().unwrap(), "{class}");
    }
}

#[test]
fn device_transposes_flagged_above_their_share() {
    use steplens_ingest::TimelineBuilder;
    use steplens_ingest::model::{ArgsRef, LaneId};
    let build = |transpose_us: i64| {
        let mut b = TimelineBuilder::default();
        let device = LaneId::Int(0);
        b.process_meta(
            0,
            device,
            Some("/device:HPU:0".into()),
            Some("HPU 0".into()),
            None,
        );
        let kernel = b.intern_cat("Kernel");
        b.thread_meta(0, device, LaneId::Int(1), Some("[HD0] TPC 0".into()), None);
        let tpc = b.track(0, device, LaneId::Int(1));
        let work = b.intern("gelu_fwd_bf16");
        let transpose = b.intern("transpose_fwd_bf16");
        b.push_slice(tpc, 0, 1_000_000, work, kernel, ArgsRef::NONE);
        b.push_slice(
            tpc,
            1_000_000,
            transpose_us * 1_000,
            transpose,
            kernel,
            ArgsRef::NONE,
        );
        build_report(&b.finish())
    };
    let kinds = |r: &steplens_analysis::Report| {
        r.findings
            .iter()
            .filter(|f| f.kind == "non_logical_transpose")
            .count()
    };
    assert_eq!(kinds(&build(100)), 1, "100 µs of 1.1 ms is 9%");
    assert_eq!(kinds(&build(10)), 0, "10 µs of 1.01 ms is under 2%");
}

#[test]
fn synapse_trace_aligns_to_the_torch_trace_and_csv_finds_the_planted_stretch() {
    let bridge = gaudi("train_hpu.bridge.json.gz");
    let tef = gaudi("train_hpu.tef.json.gz");
    let t = load_many(&[&bridge, &tef], &LoadOptions::default(), None).unwrap();
    let note = t.sources[1]
        .warnings
        .iter()
        .find(|w| w.code == "clock_aligned")
        .expect("aligned");
    // The generator puts the Synapse clock 1,203,456,789,012 ns ahead of the bridge clock.
    assert!(
        note.message.contains("-1203456789012 ns"),
        "{}",
        note.message
    );
    assert_eq!(t.step_source(1), 0);
    let r = build_report(&t);
    let planted = &truth("train_hpu.bridge.truth.json")["planted"]["mme_idle_behind_tpc"];
    let stretches: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind == "mme_idle_behind_tpc")
        .collect();
    // The run is loaded twice, in two formats, on one clock: the same stretch in step #3 is
    // one loss, owned once.
    assert_eq!(stretches.len(), 1);
    for f in stretches {
        assert_eq!(f.step.as_deref(), planted["step"].as_str());
        assert_eq!(f.lost_ns, planted["tpc_busy_ns"].as_i64().unwrap());
    }

    // Without a torch trace, the HW CSV still finds the stretch, in its own graph launch.
    let hw = load(&gaudi("train_hpu.hw.csv"), &LoadOptions::default(), None).unwrap();
    let r = build_report(&hw);
    let found: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind == "mme_idle_behind_tpc")
        .collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].lost_ns, planted["tpc_busy_ns"].as_i64().unwrap());

    // The HW CSV of the same run covers steps #2-#4 and names nodes, not ops: it is aligned by
    // where its busy time lands on the torch trace's device lanes.
    let csv = gaudi("train_hpu.hw.csv");
    let t = load_many(&[&bridge, &csv], &LoadOptions::default(), None).unwrap();
    let note = t.sources[1]
        .warnings
        .iter()
        .find(|w| w.code == "clock_aligned")
        .expect("aligned");
    assert!(note.message.contains("device activity"), "{}", note.message);
    assert!(
        note.message.contains("-1203456789012 ns"),
        "{}",
        note.message
    );

    // A HW CSV of another run matches neither names nor activity: it keeps its clock.
    let other =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/habana/debug_hw_prof_accel0_001.csv");
    let t = load_many(&[&bridge, &other], &LoadOptions::default(), None).unwrap();
    assert!(
        t.sources[1]
            .warnings
            .iter()
            .any(|w| w.code == "clock_not_aligned")
    );
}

#[test]
fn gaudi_host_idle_before_the_first_launch_is_a_data_wait() {
    use steplens_ingest::TimelineBuilder;
    use steplens_ingest::model::{ArgsRef, LaneId};
    const MS: i64 = 1_000_000;
    let mut b = TimelineBuilder::default();
    let (host, device) = (LaneId::Int(100), LaneId::Int(0));
    b.process_meta(
        0,
        device,
        Some("/device:HPU:0".into()),
        Some("HPU 0".into()),
        None,
    );
    b.thread_meta(0, device, LaneId::Int(1), Some("[HD0] MME".into()), None);
    let thread = b.track(0, host, host);
    let mme = b.track(0, device, LaneId::Int(1));
    let (annotation, op, runtime, kernel) = (
        b.intern_cat("user_annotation"),
        b.intern_cat("cpu_op"),
        b.intern_cat("Runtime"),
        b.intern_cat("Kernel"),
    );
    let names = [
        "ProfilerStep#5",
        "aten::add",
        "synLaunchWithExternalEvents",
        "Gemm",
    ]
    .map(|n| b.intern(n));
    b.push_slice(thread, 0, 10 * MS, names[0], annotation, ArgsRef::NONE);
    b.push_slice(thread, 5 * MS, MS, names[1], op, ArgsRef::NONE);
    b.push_slice(thread, 6 * MS, MS / 10, names[2], runtime, ArgsRef::NONE);
    b.push_slice(mme, 7 * MS, 2 * MS, names[3], kernel, ArgsRef::NONE);
    let r = build_report(&b.finish());
    assert_eq!(r.device.kind, "hpu");
    let stall: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.kind == "dataloader_stall")
        .collect();
    assert_eq!(stall.len(), 1, "{stall:#?}");
    // 0..6 ms before the launch, 1 ms of it in aten::add.
    assert_eq!(stall[0].lost_ns, 5 * MS);
    assert_eq!(stall[0].step.as_deref(), Some("ProfilerStep#5"));
}

/// A lazy-mode `loss.item()` whose wait includes a graph compile: in step #3 the Synapse
/// lane's synchronize spans the whole item (2 ms … 10 ms) while `synGraphCompile` runs inside
/// it (3 ms … 8 ms). The compile is the recompile's; the sync keeps the remaining 3 ms; the step
/// loses no nanosecond twice. Steps #0..#2 are ordinary (the first two are warm-up).
#[test]
fn a_compile_inside_a_sync_wait_is_counted_once() {
    use std::fmt::Write as _;
    const MS: i64 = 1_000; // µs per ms, the trace's unit
    let mut events = String::from(
        r#"{"ph":"M","name":"process_name","pid":1,"args":{"name":"python3"}},
{"ph":"M","name":"process_name","pid":0,"args":{"name":"/device:HPU:0"}},
{"ph":"M","name":"thread_name","pid":0,"tid":10,"args":{"name":"[HD0] MME"}},
{"ph":"M","name":"process_name","pid":2,"args":{"name":"Synapse Logger"}}"#,
    );
    for step in 0..4i64 {
        let at = step * 20 * MS;
        let item = at + 12 * MS;
        write!(
            events,
            r#",
{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":1,"tid":1,"ts":{at},"dur":{}}},
{{"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":{},"dur":{}}},
{{"ph":"X","cat":"Kernel","name":"Gemm","pid":0,"tid":10,"ts":{},"dur":{}}},
{{"ph":"X","cat":"cpu_op","name":"aten::item","pid":1,"tid":1,"ts":{item},"dur":{}}},
{{"ph":"X","cat":"cpu_op","name":"aten::_local_scalar_dense","pid":1,"tid":1,"ts":{item},"dur":{}}}"#,
            20 * MS,
            at + 100,
            10 * MS,
            at + 200,
            11 * MS,
            8 * MS,
            8 * MS,
        )
        .unwrap();
        if step == 3 {
            write!(
                events,
                r#",
{{"ph":"X","cat":"Runtime","name":"synStreamSynchronize","pid":2,"tid":2,"ts":{},"dur":{}}},
{{"ph":"X","cat":"Runtime","name":"synGraphCompile","pid":2,"tid":3,"ts":{},"dur":{}}}"#,
                item,
                8 * MS,
                item + MS,
                5 * MS
            )
            .unwrap();
        } else {
            write!(
                events,
                r#",
{{"ph":"X","cat":"Runtime","name":"synStreamSynchronize","pid":2,"tid":2,"ts":{},"dur":{}}}"#,
                item,
                MS / 2
            )
            .unwrap();
        }
    }
    let text = format!(r#"{{"traceEvents":[{events}]}}"#);
    let t = steplens_ingest::load_bytes("item.json", text.into_bytes(), &LoadOptions::default())
        .unwrap();
    let r = build_report(&t);
    let step3: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.step.as_deref() == Some("ProfilerStep#3"))
        .collect();
    let lost = |kind: &str| -> i64 {
        step3
            .iter()
            .filter(|f| f.kind == kind)
            .map(|f| f.lost_ns)
            .sum()
    };
    assert_eq!(lost("recompile"), 5_000_000, "{step3:#?}");
    assert_eq!(lost("sync_point"), 3_000_000, "{step3:#?}");
    let total: i64 = step3.iter().map(|f| f.lost_ns).sum();
    assert!(total <= 20_000_000, "{step3:#?}");
}

/// Each step's `compile_ns` is the host time in graph compiles, the warm-up's included (no
/// `recompile` finding names that one). Truth: the generator's planted recompile for
/// ProfilerStep#3, and for the warm-up step the union of the `synGraphCompile` spans read from
/// the trace's JSON (µs to ns through f64, to within 2 ns of rounding per span).
#[test]
fn steps_count_their_graph_compiles_warm_up_included() {
    let truth =
        support::read_json(&support::repo().join("samples/gaudi/train_hpu.bridge.truth.json"));
    let report = support::sample("gaudi/train_hpu.bridge.json.gz");
    let step = |name: &str| report.steps.iter().find(|s| s.name == name).unwrap();
    assert_eq!(
        step("ProfilerStep#3").compile_ns,
        truth["planted"]["recompile"]["compile_ns"]
            .as_i64()
            .unwrap()
    );
    for clean in truth["planted"]["clean_steps"].as_array().unwrap() {
        assert_eq!(step(clean.as_str().unwrap()).compile_ns, 0, "{clean}");
    }

    let raw =
        std::fs::read(support::repo().join("samples/gaudi/train_hpu.bridge.json.gz")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&raw[..]), &mut text).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let ns = |v: &serde_json::Value| (v.as_f64().unwrap() * 1000.0).round() as i64;
    let warm = events
        .iter()
        .find(|e| e["name"] == "ProfilerStep#0" && e["ph"] == "X")
        .unwrap();
    let (from, to) = (ns(&warm["ts"]), ns(&warm["ts"]) + ns(&warm["dur"]));
    // The compile is written twice: an `X` on the Synapse host lane and a B/E pair on the
    // Synapse Logger's lane; the step's compile time is the union of both.
    let mut spans: Vec<(i64, i64)> = events
        .iter()
        .filter(|e| e["name"] == "synGraphCompile" && e["ph"] == "X")
        .map(|e| (ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"])))
        .collect();
    let begins: Vec<i64> = events
        .iter()
        .filter(|e| e["name"] == "synGraphCompile" && e["ph"] == "B")
        .map(|e| ns(&e["ts"]))
        .collect();
    let ends: Vec<i64> = events
        .iter()
        .filter(|e| e["name"] == "synGraphCompile" && e["ph"] == "E")
        .map(|e| ns(&e["ts"]))
        .collect();
    spans.extend(begins.into_iter().zip(ends));
    let mut spans: Vec<(i64, i64)> = spans
        .into_iter()
        .map(|(a, b)| (a.max(from), b.min(to)))
        .filter(|(a, b)| b > a)
        .collect();
    spans.sort_unstable();
    let mut union = 0;
    let mut reach = i64::MIN;
    for (a, b) in spans.iter().copied() {
        let a = a.max(reach);
        if b > a {
            union += b - a;
            reach = b;
        }
    }
    assert!(union > 0, "the warm-up step compiles");
    let got = step("ProfilerStep#0").compile_ns;
    assert!(
        (got - union).abs() <= 2 * spans.len() as i64,
        "{got} vs {union}"
    );

    // The compiles run on the Synapse thread while the step's launch waits: its critical path
    // names them compile, not launch overhead.
    for name in ["ProfilerStep#0", "ProfilerStep#3"] {
        let s = step(name);
        let on_path = s.critical_path.as_ref().unwrap().by_bound
            [&steplens_analysis::critical_path::Bound::Compile];
        assert!(
            on_path * 10 >= s.compile_ns * 9,
            "{name}: {on_path} of {}",
            s.compile_ns
        );
    }
}

/// A HW-trace-only run has no host events, so no critical path to measure a fix's saving on:
/// its findings say the saving is unknown instead of "saves 0 ns". With host events (the bridge
/// trace of the same run) every time-costing finding's saving is measured.
#[test]
fn savings_without_host_events_are_unknown_not_zero() {
    let hw = support::sample("gaudi/train_hpu.hw.csv");
    let groups = hw.groups();
    assert!(!groups.is_empty());
    for g in groups.iter().filter(|g| g.lost_ns > 0) {
        assert!(g.saving_unknown, "{:?} {}", g.kind, g.place);
        assert_eq!(g.saving_ns, 0);
        assert!(g.figures().contains("saving unknown"), "{}", g.figures());
    }
    let bridge = support::sample("gaudi/train_hpu.bridge.json.gz");
    assert!(bridge.groups().iter().all(|g| !g.saving_unknown));
    assert!(
        bridge
            .findings
            .iter()
            .all(|f| !f.figures().contains("unknown")),
        "measured savings read as savings"
    );
}
