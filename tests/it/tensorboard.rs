//! The TensorBoard plugin's views, on a trace small enough to work out by hand: every expected
//! figure below is derived in the comments from the events and the plugin's rules
//! (`docs/research/tensorboard-plugin.md`), not taken from steplens' output. A real H100 trace
//! checks the device-extended steps against the step time its generator measured.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use crate::support::{json, repo, temp_file};
use serde_json::Value;
use tempfile::TempDir;

/// One rank of a two-step run (µs):
///
/// host thread: ProfilerStep#1 [0,100], #2 [100,200], #3 [200,300];
///   aten::linear [10,50] > aten::addmm [15,45] > cudaLaunchKernel [20,25] → K1 [30,130]
///   enumerate(DataLoader)#…__next__ [60,70]; cudaMemcpyAsync [75,80] → memcpy [100,110]
///   aten::relu [110,130] > cudaLaunchKernel [112,116] → K2 [135,150]
///   nccl:all_reduce [140,147] > cudaLaunchKernel [142,146] → K3 [nccl_start,170]
///   aten::add [210,220] (no device work)
/// K1 `volta_h884gemm…` (Tensor Cores by name): 0.5 blocks/SM, occupancy 40 %;
/// K2: 2.0 blocks/SM, 80 %; K3 (NCCL): 0.1 blocks/SM, 10 %.
fn rank_trace(rank: i64, nccl_start: u32) -> String {
    let x = |name: &str, cat: &str, tid: u32, ts: u32, dur: u32, args: &str| {
        format!(
            r#"{{"ph":"X","cat":"{cat}","name":"{name}","pid":{},"tid":{tid},"ts":{ts},"dur":{dur},"args":{{{args}}}}}"#,
            if tid < 7 { 1 } else { 0 }
        )
    };
    let kernel = |name: &str, ts: u32, dur: u32, corr: u32, bps: f64, occ: u32| {
        x(
            name,
            "kernel",
            7,
            ts,
            dur,
            &format!(
                r#""device":0,"stream":7,"correlation":{corr},"grid":[1,1,1],"block":[128,1,1],"registers per thread":32,"shared memory":0,"blocks per SM":{bps},"est. achieved occupancy %":{occ}"#
            ),
        )
    };
    let launch = |name: &str, ts: u32, dur: u32, corr: u32| {
        x(
            name,
            "cuda_runtime",
            1,
            ts,
            dur,
            &format!(r#""correlation":{corr}"#),
        )
    };
    let events = [
        x("ProfilerStep#1", "cpu_op", 1, 0, 100, ""),
        x("ProfilerStep#2", "cpu_op", 1, 100, 100, ""),
        x("ProfilerStep#3", "cpu_op", 1, 200, 100, ""),
        x(
            "aten::linear",
            "cpu_op",
            1,
            10,
            40,
            r#""Input Dims":[[8,16],[32,16],[32]],"Input type":["float","float","float"]"#,
        ),
        x(
            "aten::addmm",
            "cpu_op",
            1,
            15,
            30,
            r#""Input Dims":[[32],[8,16],[16,32]]"#,
        ),
        launch("cudaLaunchKernel", 20, 5, 1),
        x(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            "cpu_op",
            1,
            60,
            10,
            "",
        ),
        launch("cudaMemcpyAsync", 75, 5, 2),
        x("aten::relu", "cpu_op", 1, 110, 20, ""),
        launch("cudaLaunchKernel", 112, 4, 3),
        x(
            "nccl:all_reduce",
            "cpu_op",
            1,
            140,
            7,
            r#""Input Dims":[[1024]],"Input type":["float"]"#,
        ),
        launch("cudaLaunchKernel", 142, 4, 4),
        x("aten::add", "cpu_op", 1, 210, 10, ""),
        kernel("volta_h884gemm_64x64_ldg8_nn", 30, 100, 1, 0.5, 40),
        x(
            "Memcpy HtoD (Pageable -> Device)",
            "gpu_memcpy",
            8,
            100,
            10,
            r#""device":0,"stream":8,"correlation":2"#,
        ),
        kernel("elementwise_relu", 135, 15, 3, 2.0, 80),
        kernel(
            "ncclKernel_AllReduce_RING_LL_Sum_float",
            nccl_start,
            170 - nccl_start,
            4,
            0.1,
            10,
        ),
    ];
    format!(
        r#"{{"distributedInfo":{{"backend":"nccl","rank":{rank},"world_size":2}},"deviceProperties":[{{"id":0,"name":"Test GPU","computeMajor":8,"computeMinor":0}}],"traceEvents":[{}]}}"#,
        events.join(",\n")
    )
}

fn approx(v: &Value, expected: f64) {
    let got = v.as_f64().unwrap_or(f64::NAN);
    assert!((got - expected).abs() < 1e-6, "{got} != {expected}");
}

#[test]
fn overview_gpu_summary_operators_and_kernels_by_hand() {
    let dir = TempDir::new().unwrap();
    let path = temp_file(&dir, "rank0.json", rank_trace(0, 150).as_bytes());
    let r = json(&["report", "-f", "json", path.to_str().unwrap()]);
    let o = &r["overview"];
    // Steps: #1 runs to the end of K1 (130); #2 starts there and ends at its host end (200;
    // its device work ends at 170); #3 launched nothing and is the tail: dropped.
    let steps = o["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{steps:#?}");
    assert_eq!(steps[0]["name"], "1");
    assert_eq!(steps[0]["start_ns"], 0);
    assert_eq!(steps[0]["dur_ns"], 130_000);
    assert_eq!(steps[1]["start_ns"], 130_000);
    assert_eq!(steps[1]["dur_ns"], 70_000);
    // Step 1 [0,130]: Kernel K1 [30,130] = 100; the memcpy [100,110] and the DataLoader
    // [60,70] lie under K1; Runtime [20,25] = 5; CPU Exec: linear/addmm outside K1 and the
    // launch = [10,20] + [25,30] = 15; Other [0,10] = 10.
    let b1 = &steps[0]["breakdown"];
    for (key, us) in [
        ("kernel_ns", 100),
        ("memcpy_ns", 0),
        ("memset_ns", 0),
        ("communication_ns", 0),
        ("runtime_ns", 5),
        ("dataloader_ns", 0),
        ("cpu_exec_ns", 15),
        ("other_ns", 10),
    ] {
        assert_eq!(b1[key], us * 1000, "step 1 {key}");
    }
    // Step 2 [130,200]: Kernel K2 [135,150] = 15; Communication: K3 [150,170] (the host op
    // [140,147] lies under K2) = 20; Other [130,135] + [170,200] = 35.
    let b2 = &steps[1]["breakdown"];
    for (key, us) in [
        ("kernel_ns", 15),
        ("communication_ns", 20),
        ("other_ns", 35),
    ] {
        assert_eq!(b2[key], us * 1000, "step 2 {key}");
    }
    // The report's own step rows carry the same split.
    assert_eq!(r["steps"][0]["breakdown"], *b1);
    let avg = &o["average"][0];
    approx(&avg["dur_ns"], 100_000.0);
    approx(&avg["breakdown"]["kernel_ns"], 57_500.0);
    approx(&avg["breakdown"]["communication_ns"], 10_000.0);
    approx(&avg["breakdown"]["other_ns"], 22_500.0);

    // GPU summary over [0,200]: kernels busy [30,130] + [135,170] = 135 → 67.5 %;
    // SM efficiency 0.5×100 + min(2,1)×15 + 0.1×20 = 67 → 33.5 %; occupancy
    // (40×100 + 80×15 + 10×20) / 135 = 40 %; Tensor Cores: K1 of the op-launched 135 → 74.07 %.
    let g = &r["gpu_summary"][0];
    assert_eq!(g["device"], 0);
    approx(&g["utilization_pct"], 67.5);
    approx(&g["sm_efficiency_pct"], 33.5);
    approx(&g["achieved_occupancy_pct"], 40.0);
    approx(&g["tensor_core_pct"], 100.0 * 100.0 / 135.0);

    // Operators, by device self time: addmm (K1 100), nccl:all_reduce (K3 20), relu (K2 15),
    // then add and linear (0). ProfilerStep and the DataLoader op are not listed.
    let ops = r["operators"].as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "aten::addmm",
            "nccl:all_reduce",
            "aten::relu",
            "aten::add",
            "aten::linear"
        ]
    );
    let op = |name: &str| ops.iter().find(|o| o["name"] == name).unwrap();
    // addmm: host 30 less its launch 5 = 25; device 100, all Tensor Core.
    let addmm = op("aten::addmm");
    assert_eq!(addmm["host_total_ns"], 30_000);
    assert_eq!(addmm["host_self_ns"], 25_000);
    assert_eq!(addmm["device_self_ns"], 100_000);
    assert_eq!(addmm["tc_eligible"], true);
    approx(&addmm["tc_self_pct"], 100.0);
    // linear: host 40 less addmm's 30 = 10; device total is addmm's.
    let linear = op("aten::linear");
    assert_eq!(linear["host_self_ns"], 10_000);
    assert_eq!(linear["device_self_ns"], 0);
    assert_eq!(linear["device_total_ns"], 100_000);
    approx(&linear["tc_total_pct"], 100.0);
    approx(&linear["tc_self_pct"], 0.0);
    let relu = op("aten::relu");
    assert_eq!(relu["host_self_ns"], 16_000);
    assert_eq!(relu["tc_eligible"], false);
    // By input shape, the key prints as Python does.
    let shapes = r["operators_by_shape"].as_array().unwrap();
    assert!(
        shapes
            .iter()
            .any(|o| o["name"] == "aten::linear" && o["input_shape"] == "[[8, 16], [32, 16], [32]]"),
        "{shapes:#?}"
    );

    // Kernels by total time: K1 100, K3 20, K2 15.
    let kernels = r["kernels"].as_array().unwrap();
    assert_eq!(kernels[0]["name"], "volta_h884gemm_64x64_ldg8_nn");
    assert_eq!(kernels[0]["tensor_cores"], true);
    approx(&kernels[0]["blocks_per_sm"], 0.5);
    approx(&kernels[0]["occupancy_pct"], 40.0);
    assert_eq!(kernels[1]["total_ns"], 20_000);
    assert_eq!(kernels[2]["name"], "elementwise_relu");
    assert_eq!(kernels[2]["tensor_cores"], false);
    let by_op = r["kernels_by_op"].as_array().unwrap();
    assert_eq!(by_op[0]["op"], "aten::addmm");
    assert_eq!(by_op[0]["launch"]["grid"], "[1, 1, 1]");
    assert_eq!(by_op[0]["op_tc_eligible"], true);
}

#[test]
fn distributed_view_of_two_ranks_by_hand() {
    let dir = TempDir::new().unwrap();
    // Rank 1's NCCL kernel runs [160,170]: 10 µs against rank 0's 20.
    let a = temp_file(&dir, "rank0.json", rank_trace(0, 150).as_bytes());
    let b = temp_file(&dir, "rank1.json", rank_trace(1, 160).as_bytes());
    let r = json(&[
        "report",
        "-f",
        "json",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    let rows = r["ranks"]["distributed"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{:#}", r["ranks"]);
    // Rank 0: computation = kernels [30,130] + [135,150], communication = [140,147] + [150,170],
    // overlap = [140,147]. Step 1: comp 100, other 30. Step 2: comp 15-7 = 8, overlap 7,
    // comm 27-7 = 20, other 70+7-15-27 = 35. Means of 2 steps: 54, 3.5, 10, 32.5.
    let r0 = &rows[0];
    assert_eq!(r0["rank"], 0);
    assert_eq!(r0["computation_ns"], 54_000);
    assert_eq!(r0["overlap_ns"], 3_500);
    assert_eq!(r0["communication_ns"], 10_000);
    assert_eq!(r0["other_ns"], 32_500);
    // Matched ranges: the host op (7 on both) and the kernel (20 and 10): the shortest of each,
    // ending where each rank's ended, is data transfer: 7 + 10 = 17; rank 0 waited 27 - 17.
    assert_eq!(r0["transfer_ns"], 17_000);
    assert_eq!(r0["sync_ns"], 10_000);
    let r1 = &rows[1];
    assert_eq!(r1["transfer_ns"], 17_000);
    assert_eq!(r1["sync_ns"], 0);
    // 1024 floats = 4096 bytes; latency = union of the host op and the kernel.
    let op = &r0["comm_ops"][0];
    assert_eq!(op["name"], "nccl:all_reduce");
    assert_eq!(op["calls"], 1);
    assert_eq!(op["bytes"], 4096);
    assert_eq!(op["latency_ns"], 27_000);
    assert_eq!(op["transfer_ns"], 17_000);
}

#[test]
fn device_bound_steps_take_the_time_the_gpu_took() {
    // fp32_matmul: the host spans are ~2 ms while the GPU needs ~16.6 ms a step; the generator
    // timed the unprofiled loop between two synchronizations (truth file).
    let dir = repo().join("samples/whatif-cuda");
    let measured = support::fp32_matmul_synced_step_ns();
    let trace = dir.join("fp32_matmul.problem.json.gz");
    let r = json(&["report", "-f", "json", trace.to_str().unwrap()]);
    let steps = r["overview"]["steps"].as_array().unwrap();
    // The first profiled step also drains the warm-up steps' queued work; the rest are the
    // steady state.
    for s in &steps[1..] {
        let dur = s["dur_ns"].as_f64().unwrap();
        assert!(
            (dur - measured).abs() < 0.02 * measured,
            "step {}: {dur} ns vs {measured} ns measured",
            s["name"]
        );
        let parts: i64 = s["breakdown"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_i64().unwrap())
            .sum();
        assert_eq!(parts, s["dur_ns"].as_i64().unwrap());
    }
    // Steps never overlap.
    for w in steps.windows(2) {
        assert!(
            w[0]["start_ns"].as_i64().unwrap() + w[0]["dur_ns"].as_i64().unwrap()
                <= w[1]["start_ns"].as_i64().unwrap()
        );
    }
}

#[test]
fn views_print_as_text_and_markdown() {
    let dir = TempDir::new().unwrap();
    let path = temp_file(&dir, "rank0.json", rank_trace(0, 150).as_bytes());
    let text = support::ok(&[
        "report",
        "--view",
        "overview,operators,kernels,distributed",
        path.to_str().unwrap(),
    ]);
    for needle in [
        "Step time breakdown (µs)",
        "GPU summary",
        "Operators (by name)",
        "Kernels (by launching op and launch shape)",
        // One rank's trace is a run of one: its distributed view has one worker.
        "Distributed: per step, per worker (means)",
        "Collectives per worker",
    ] {
        assert!(text.contains(needle), "{needle}:\n{text}");
    }
    let md = support::ok(&[
        "report",
        "--view",
        "kernels",
        "-f",
        "md",
        path.to_str().unwrap(),
    ]);
    assert!(md.starts_with("## Kernels (by name)\n\n|"), "{md}");
}

#[test]
fn the_views_hold_together_on_every_sample_and_corpus_gpu_trace() {
    // On every trace: each plugin step's parts add up to it, steps do not overlap, utilization
    // and SM efficiency are shares of the span (SM efficiency, capped at 1 per moment, never
    // above utilization), occupancy is a percentage, and every op row's self time fits in its
    // total.
    let mut traces = support::sample_traces();
    for rel in [
        "hta/critical_path/alexnet",
        "hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz",
        "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    ] {
        if let Some(p) = support::corpus_path(rel) {
            traces.push(p);
        }
    }
    let mut checked_steps = 0;
    for trace in traces {
        let out = support::steplens(&["report", "-f", "json", trace.to_str().unwrap()]);
        if !out.status.success() {
            continue; // inputs that are errors on purpose are tested elsewhere
        }
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        let name = trace.display().to_string();
        if let Some(steps) = r["overview"]["steps"].as_array() {
            let mut last_end: Option<(u64, i64)> = None;
            for s in steps {
                let dur = s["dur_ns"].as_i64().unwrap();
                assert!(dur >= 0, "{name}");
                let parts: i64 = s["breakdown"]
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|v| v.as_i64().unwrap())
                    .sum();
                assert_eq!(parts, dur, "{name}: step {}", s["name"]);
                let (source, start) = (
                    s["source"].as_u64().unwrap(),
                    s["start_ns"].as_i64().unwrap(),
                );
                if let Some((prev_source, prev_end)) = last_end
                    && prev_source == source
                {
                    assert!(start >= prev_end, "{name}: steps overlap");
                }
                last_end = Some((source, start + dur));
                checked_steps += 1;
            }
        }
        for g in r["gpu_summary"].as_array().into_iter().flatten() {
            let util = g["utilization_pct"].as_f64().unwrap();
            assert!((0.0..=100.0 + 1e-9).contains(&util), "{name}: {g}");
            if let Some(sm) = g["sm_efficiency_pct"].as_f64() {
                assert!(sm <= util + 1e-6, "{name}: {g}");
            }
            if let Some(occ) = g["achieved_occupancy_pct"].as_f64() {
                assert!((0.0..=100.0 + 1e-9).contains(&occ), "{name}: {g}");
            }
        }
        for row in r["operators"].as_array().into_iter().flatten() {
            let field = |k: &str| row[k].as_i64().unwrap();
            assert!(
                field("host_self_ns") <= field("host_total_ns"),
                "{name}: {row}"
            );
            assert!(
                field("device_self_ns") <= field("device_total_ns"),
                "{name}: {row}"
            );
        }
    }
    assert!(checked_steps > 100, "{checked_steps}");
}

/// The events of one worker of the plugin's own distributed tests (kineto
/// `tb_plugin/test/test_profiler.py`, `TestDistributed`), copied field for field: host ops with
/// `External id`, kernels naming their op only by `external id` (no runtime events), no
/// `ProfilerStep` (one step over the host ops' span).
fn plugin_case(events: &str) -> String {
    format!(r#"{{"schemaVersion":1,"traceEvents":[{events}]}}"#)
}

fn plugin_op(name: &str, tid: &str, ts: u32, dur: u32, args: &str) -> String {
    format!(
        r#"{{"ph":"X","cat":"cpu_op","name":"{name}","pid":23803,"tid":"{tid}","ts":{ts},"dur":{dur},"args":{{{args}}}}}"#
    )
}

fn plugin_kernel(name: &str, stream: u32, ts: u32, dur: u32, corr: u32, ext: u32) -> String {
    format!(
        r#"{{"ph":"X","cat":"Kernel","name":"{name}","pid":0,"tid":"stream {stream}","ts":{ts},"dur":{dur},"args":{{"device":0,"correlation":{corr},"external id":{ext}}}}}"#
    )
}

const BCAST: &str = r#""Input Dims":[[53120]],"Input type":["float"]"#;
const ALLRED: &str = r#""Input Dims":[[2049000]],"Input type":["float"]"#;
const ADD: &str =
    r#""External id":24504,"Input Dims":[[1000],[1000],[]],"Input type":["float","float","Int"]"#;

/// The distributed view of two plugin-case workers: per worker (in µs) the overlap chart
/// `[computation, overlap, communication, other]`, the wait chart `[transfer, sync]`, and per
/// collective `(name, calls, bytes, latency, transfer)` — the plugin test's own assertions.
type Expected<'a> = ([i64; 4], [i64; 2], Vec<(&'a str, u64, u64, i64, i64)>);

fn assert_plugin_distributed(label: &str, w0: &str, w1: &str, want: [Expected<'_>; 2]) {
    let dir = TempDir::new().unwrap();
    let a = temp_file(&dir, "worker0.json", plugin_case(w0).as_bytes());
    let b = temp_file(&dir, "worker1.json", plugin_case(w1).as_bytes());
    let r = json(&[
        "report",
        "-f",
        "json",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    let rows = r["ranks"]["distributed"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{label}: {:#}", r["ranks"]);
    for (row, (overlap, wait, ops)) in rows.iter().zip(want) {
        let us = |key: &str| row[key].as_i64().unwrap() / 1000;
        let got_overlap = [
            us("computation_ns"),
            us("overlap_ns"),
            us("communication_ns"),
            us("other_ns"),
        ];
        assert_eq!(
            got_overlap, overlap,
            "{label} rank {}: overlap",
            row["rank"]
        );
        assert_eq!(
            [us("transfer_ns"), us("sync_ns")],
            wait,
            "{label} rank {}: wait",
            row["rank"]
        );
        let got_ops = row["comm_ops"].as_array().unwrap();
        assert_eq!(got_ops.len(), ops.len(), "{label}: {got_ops:#?}");
        for (name, calls, bytes, latency, transfer) in ops {
            let op = got_ops
                .iter()
                .find(|o| o["name"] == name)
                .unwrap_or_else(|| panic!("{label}: no {name}"));
            assert_eq!(op["calls"], calls, "{label} {name}");
            assert_eq!(op["bytes"], bytes, "{label} {name}");
            assert_eq!(op["latency_ns"], latency * 1000, "{label} {name}");
            assert_eq!(op["transfer_ns"], transfer * 1000, "{label} {name}");
        }
    }
}

/// `test_distributed_nccl`: the NCCL kernels are measured whole, past the step's end (the
/// all-reduce kernel runs 1556 µs in a 235 µs step), and count as communication, not
/// computation, in the overlap chart. Worker 0's step breakdown is the plugin's `steps_costs`.
#[test]
fn plugin_distributed_nccl() {
    let worker =
        |bcast: (u32, u32), bk: (u32, u32), add: (u32, u32), ak: (u32, u32), ark: (u32, u32)| {
            [
                plugin_op(
                    "nccl:broadcast",
                    "23803",
                    bcast.0,
                    bcast.1,
                    &format!(r#""External id":146,{BCAST}"#),
                ),
                plugin_kernel(
                    "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)",
                    16,
                    bk.0,
                    bk.1,
                    28506,
                    146,
                ),
                plugin_op("aten::add_", "23803", add.0, add.1, ADD),
                plugin_kernel(
                    "void at::native::vectorized_elementwise_kernel",
                    7,
                    ak.0,
                    ak.1,
                    99765,
                    24504,
                ),
                plugin_op(
                    "nccl:all_reduce",
                    "25166",
                    160,
                    75,
                    &format!(r#""External id":2513,{ALLRED}"#),
                ),
                plugin_kernel(
                    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
                    16,
                    ark.0,
                    ark.1,
                    33218,
                    2513,
                ),
            ]
            .join(",")
        };
    let w0 = worker((0, 75), (16, 16), (100, 20), (130, 161), (162, 1556));
    let w1 = worker((0, 20), (8, 31), (25, 20), (30, 161), (562, 1058));
    assert_plugin_distributed(
        "nccl",
        &w0,
        &w1,
        [
            (
                [30, 75, 75, 55],
                [1169, 464],
                vec![
                    ("nccl:broadcast", 1, 212_480, 75, 36),
                    ("nccl:all_reduce", 1, 8_196_000, 1558, 1133),
                ],
            ),
            (
                [121, 40, 74, 0],
                [1169, 3],
                vec![
                    ("nccl:broadcast", 1, 212_480, 39, 36),
                    ("nccl:all_reduce", 1, 8_196_000, 1133, 1133),
                ],
            ),
        ],
    );
    // steps_costs of worker 0: [105, 0, 0, 75, 0, 0, 20, 35] µs over its one 235 µs step.
    let dir = TempDir::new().unwrap();
    let a = temp_file(&dir, "worker0.json", plugin_case(&w0).as_bytes());
    let r = json(&["report", "-f", "json", a.to_str().unwrap()]);
    let step = &r["overview"]["steps"][0];
    assert_eq!(step["dur_ns"], 235_000);
    let b = &step["breakdown"];
    let parts: Vec<i64> = [
        "kernel_ns",
        "memcpy_ns",
        "memset_ns",
        "communication_ns",
        "runtime_ns",
        "dataloader_ns",
        "cpu_exec_ns",
        "other_ns",
    ]
    .iter()
    .map(|k| b[k].as_i64().unwrap() / 1000)
    .collect();
    assert_eq!(parts, [105, 0, 0, 75, 0, 0, 20, 35]);
}

/// The Gloo workers of `test_distributed_gloo_gpu` (`gpu`: the add's kernel) and
/// `test_distributed_gloo_cpu` (an `aten::mul` on the host instead).
fn gloo_worker(rank: u32, gpu: bool) -> String {
    let b = |ext: u32, tid: &str, ts: u32, dur: u32| {
        plugin_op(
            "gloo:broadcast",
            tid,
            ts,
            dur,
            &format!(r#""External id":{ext},{BCAST}"#),
        )
    };
    let a = |ext: u32, tid: &str, ts: u32, dur: u32| {
        plugin_op(
            "gloo:all_reduce",
            tid,
            ts,
            dur,
            &format!(r#""External id":{ext},{ALLRED}"#),
        )
    };
    let ((b0, b1, b2), add, work, (a0, a1)) = if rank == 0 {
        (
            ((16, 38), (25, 36), (66, 18)),
            20,
            (30, 101),
            ((110, 18), (120, 36)),
        )
    } else {
        (
            ((20, 28), (28, 30), (77, 6)),
            30,
            (70, 70),
            ((88, 38), (130, 16)),
        )
    };
    let ext = if rank == 0 { 165 } else { 256 };
    let add_op = format!(
        r#"{{"ph":"X","cat":"cpu_op","name":"aten::add_","pid":23803,"tid":"23800","ts":0,"dur":{add},"args":{{{ADD}}}}}"#
    );
    let work = if gpu {
        plugin_kernel(
            "void at::native::vectorized_elementwise_kernel",
            7,
            work.0,
            work.1,
            99765,
            24504,
        )
    } else {
        plugin_op(
            "aten::mul",
            "23800",
            work.0,
            work.1,
            r#""External id":24505"#,
        )
    };
    [
        b(ext, "23803", b0.0, b0.1),
        b(ext + 1, "23805", b1.0, b1.1),
        b(ext + 2, "23803", b2.0, b2.1),
        add_op,
        work,
        a(2513, "23805", a0.0, a0.1),
        a(2516, "23803", a1.0, a1.1),
    ]
    .join(",")
}

#[test]
fn plugin_distributed_gloo_gpu_and_cpu() {
    let ops = |w: u32| {
        if w == 0 {
            vec![
                ("gloo:broadcast", 3, 637_440, 63, 41),
                ("gloo:all_reduce", 2, 16_392_000, 46, 34),
            ]
        } else {
            vec![
                ("gloo:broadcast", 3, 637_440, 44, 44),
                ("gloo:all_reduce", 2, 16_392_000, 54, 34),
            ]
        }
    };
    assert_plugin_distributed(
        "gloo gpu",
        &gloo_worker(0, true),
        &gloo_worker(1, true),
        [
            ([31, 70, 39, 16], [75, 34], ops(0)),
            ([16, 54, 44, 32], [78, 20], ops(1)),
        ],
    );
    assert_plugin_distributed(
        "gloo cpu",
        &gloo_worker(0, false),
        &gloo_worker(1, false),
        [
            ([47, 74, 35, 0], [75, 34], ops(0)),
            ([36, 64, 34, 12], [78, 20], ops(1)),
        ],
    );
}

/// `test_distributed_nccl_user_annotation_has_communication` (kineto issue 640): an
/// `nccl:all_reduce` written as a `user_annotation` is a collective.
#[test]
fn plugin_nccl_user_annotation_is_communication() {
    let dir = TempDir::new().unwrap();
    let a = temp_file(
        &dir,
        "worker0.json",
        plugin_case(
            r#"{"ph":"X","cat":"user_annotation","name":"nccl:all_reduce","pid":128,"tid":999,"ts":1686070155939447,"dur":71,"args":{"Trace name":"PyTorch Profiler","Trace iteration":0,"External id":647,"Profiler Event Index":134}}"#,
        )
        .as_bytes(),
    );
    let r = json(&["report", "-f", "json", a.to_str().unwrap()]);
    let c = &r["ranks"]["collectives"];
    assert_eq!(c[0]["name"], "all_reduce", "{:#}", r["ranks"]);
    assert_eq!(c[0]["count"], 1);
    assert_eq!(c[0]["latency_p50_ns"], 71_000);
}
