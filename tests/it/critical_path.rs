//! The critical path against Holistic Trace Analysis' model, on HTA's own critical-path test
//! traces (`../shared/corpus/hta/critical_path/`), and its invariants on every sample: the path
//! covers each step once, in time order, and its bounds add up to the step.
//!
//! The expected stretches below are read off the traces' raw events (µs) by HTA's documented
//! rules, not from steplens' output: a launch-delay edge when the stream's previous work ended
//! before the launch began (strictly), else a kernel-to-kernel edge; a blocking call's own span
//! weighs 0 and its end waits for the device work its `cuda_sync` event names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use crate::support::{corpus_path, report, sample_traces};
use steplens_analysis::critical_path::{Bound, CriticalPath, PathSlice};

/// Asserts that `path` holds, one after the other, stretches of these (name prefix, bound,
/// start µs, duration µs).
fn assert_chain(path: &CriticalPath, expected: &[(&str, Bound, i64, i64)]) {
    let first = path
        .slices
        .iter()
        .position(|s| s.start_ns == expected[0].2 * 1000 && s.name.starts_with(expected[0].0))
        .unwrap_or_else(|| panic!("no stretch {:?} on the path", expected[0]));
    for (k, &(name, bound, start_us, dur_us)) in expected.iter().enumerate() {
        let s: &PathSlice = &path.slices[first + k];
        assert!(
            s.name.starts_with(name)
                && s.bound == bound
                && s.start_ns == start_us * 1000
                && s.dur_ns == dur_us * 1000,
            "stretch {k}: expected {name} {bound:?} at {start_us} µs for {dur_us} µs, got {s:?}"
        );
    }
}

fn assert_covers(path: &CriticalPath, start: i64, dur: i64, what: &str) {
    assert_eq!(path.total_ns, dur, "{what}: path length");
    assert_eq!(path.by_bound.values().sum::<i64>(), dur, "{what}: bounds");
    let mut at = start;
    for s in &path.slices {
        assert!(s.dur_ns > 0, "{what}: empty stretch {s:?}");
        if path.slices_total.is_none() {
            assert_eq!(s.start_ns, at, "{what}: gap or overlap before {s:?}");
        } else {
            // Only the longest stretches are listed: in order, without overlap.
            assert!(s.start_ns >= at, "{what}: overlap before {s:?}");
        }
        at = s.start_ns + s.dur_ns;
    }
    if path.slices_total.is_none() {
        assert_eq!(at, start + dur, "{what}: path ends before the step");
    } else {
        assert!(at <= start + dur, "{what}: path ends after the step");
        assert_eq!(
            path.slices.len(),
            steplens_analysis::critical_path::MAX_PATH_SLICES
        );
    }
}

#[test]
fn event_sync_waits_for_the_recorded_kernel_as_hta_says() {
    let Some(path) = corpus_path("hta/critical_path/cuda_event_sync/event_sync_trace.json.gz")
    else {
        return;
    };
    let r = report(&path);
    let step = &r.steps[0];
    let cp = step.critical_path.as_ref().expect("a path");
    assert_covers(cp, step.start_ns, step.dur_ns, "ProfilerStep#100");
    // The pageable DtoH copy: cudaMemcpyAsync (ts …252, 29 µs) is blocking, so its own span
    // weighs 0 and the path runs launch (252 → 270), the copy (2 µs), its wake-up (272 → 281).
    // The spin kernel: launched at …362 after the stream's last work ended (…272), so a launch
    // delay (362 → 372); it runs 36 µs; cudaEventSynchronize (…382, 34 µs) waits for it
    // (`Event Sync` on the record at …376, stream 7) and wakes at …416.
    let t0 = 1_707_417_525_512_000;
    assert_chain(
        cp,
        &[
            ("launch → Memcpy DtoH", Bound::LaunchOverhead, t0 + 252, 18),
            ("Memcpy DtoH", Bound::DeviceCompute, t0 + 270, 2),
            ("cudaMemcpyAsync", Bound::SyncWait, t0 + 272, 9),
        ],
    );
    assert_chain(
        cp,
        &[
            ("launch → at::cuda::", Bound::LaunchOverhead, t0 + 362, 10),
            ("at::cuda::", Bound::DeviceCompute, t0 + 372, 36),
            ("cudaEventSynchronize", Bound::SyncWait, t0 + 408, 8),
        ],
    );
}

#[test]
fn context_sync_after_a_stream_wait_follows_the_last_stream() {
    let Some(path) =
        corpus_path("hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz")
    else {
        return;
    };
    let r = report(&path);
    assert!(r.steps.is_empty());
    let cp = r.critical_path.as_ref().expect("a whole-trace path");
    let first = cp.slices[0].start_ns;
    assert_covers(cp, first, cp.total_ns, "whole trace");
    // Stream 24 after the cudaStreamWaitEvent: cudaMemsetAsync (…368020) launches the memset
    // at …368034 (1 µs); the sgemm's launch (…368035) does not begin strictly after the memset
    // ended (…368035), so HTA links them kernel to kernel (15 µs); the sgemm runs 123 µs and
    // cudaDeviceSynchronize (`Context Sync`, …368166 + 20) wakes 13 µs after it.
    let t0 = 1_712_867_402_368_000;
    assert_chain(
        cp,
        &[
            ("launch → Memset", Bound::LaunchOverhead, t0 + 20, 14),
            ("Memset (Device)", Bound::DeviceCompute, t0 + 34, 1),
            ("gap before ampere_sgemm", Bound::KernelGap, t0 + 35, 15),
            ("ampere_sgemm_128x64_nn", Bound::DeviceCompute, t0 + 50, 123),
            ("cudaDeviceSynchronize", Bound::SyncWait, t0 + 173, 13),
        ],
    );
}

#[test]
fn alexnet_steps_are_covered_once_and_bounded_by_the_device_where_it_waits() {
    let Some(path) =
        corpus_path("hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz")
    else {
        return;
    };
    let r = report(&path);
    let cp = match r.steps.first() {
        Some(step) => {
            let cp = step.critical_path.as_ref().expect("a path");
            assert_covers(cp, step.start_ns, step.dur_ns, &step.name);
            cp
        }
        None => {
            let cp = r.critical_path.as_ref().expect("a whole-trace path");
            assert_covers(cp, cp.slices[0].start_ns, cp.total_ns, "whole trace");
            cp
        }
    };
    // AlexNet on an A100 with 41 syncs: the device work the syncs wait for is on the path.
    assert!(cp.by_bound.get(&Bound::DeviceCompute).copied().unwrap_or(0) > 0);
    assert!(
        cp.by_bound
            .get(&Bound::LaunchOverhead)
            .copied()
            .unwrap_or(0)
            > 0
    );
}

#[test]
fn every_sample_step_path_covers_the_step_once() {
    for trace in sample_traces() {
        let r = report(&trace);
        for step in &r.steps {
            if let Some(cp) = &step.critical_path {
                assert_covers(
                    cp,
                    step.start_ns,
                    step.dur_ns,
                    &format!("{} {}", trace.display(), step.name),
                );
            }
        }
        if let Some(cp) = &r.critical_path {
            assert_covers(
                cp,
                cp.slices[0].start_ns,
                cp.total_ns,
                &format!("{} whole trace", trace.display()),
            );
        }
    }
}

#[test]
fn savings_never_exceed_the_path_time_the_fix_can_remove() {
    // On a device-bound step a host-side fix saves at most the path's non-device time (a
    // pageable copy also its own device time), and the savings of a step add up to at most the
    // step.
    for trace in sample_traces() {
        let r = report(&trace);
        for step in &r.steps {
            let Some(cp) = &step.critical_path else {
                continue;
            };
            let saved: i64 = r
                .findings
                .iter()
                .filter(|f| f.step.as_deref() == Some(step.name.as_str()))
                .filter(|f| r.sources.len() == 1 || f.track.is_some())
                .map(|f| f.saving_ns)
                .sum();
            if r.sources.len() == 1 {
                assert!(
                    saved <= step.dur_ns,
                    "{} {}: savings {saved} > step {}",
                    trace.display(),
                    step.name,
                    step.dur_ns
                );
            }
            let not_device: i64 = cp
                .by_bound
                .iter()
                .filter(|(b, _)| !b.is_device_work())
                .map(|(_, v)| v)
                .sum();
            for f in r
                .findings
                .iter()
                .filter(|f| f.step.as_deref() == Some(step.name.as_str()))
            {
                // A pageable copy's fix also hides the copy itself where the device did
                // nothing else: at most its measured time on top of the host-side part.
                if f.kind == "pageable_copy" && r.sources.len() == 1 {
                    assert!(
                        f.saving_ns <= not_device + f.lost_ns,
                        "{} {}: pageable_copy saves {} but the path has {} off the device and the copy lost {}",
                        trace.display(),
                        step.name,
                        f.saving_ns,
                        not_device,
                        f.lost_ns
                    );
                }
                if matches!(
                    f.kind.as_str(),
                    "sync_point" | "host_created_tensor" | "host_bound_gap"
                ) && r.sources.len() == 1
                {
                    assert!(
                        f.saving_ns <= not_device,
                        "{} {}: {} saves {} but the path has {} off the device",
                        trace.display(),
                        step.name,
                        f.kind,
                        f.saving_ns,
                        not_device
                    );
                }
            }
        }
    }
}

#[test]
fn ranks_that_wait_for_a_straggler_are_bound_by_the_wait() {
    // samples/ci-aa/straggler_rank{0..3}: a real 4-rank gloo DDP run where rank 2 computes an
    // extra matmul every step (its generator's plant), so ranks 0, 1 and 3 wait for it in every
    // all_reduce. A collective cannot start before its last rank arrives: on the waiting ranks
    // that wait is on the path as sync_wait; the straggler never waits for anyone.
    let dir = support::repo().join("samples/ci-aa");
    let paths: Vec<std::path::PathBuf> = (0..4)
        .map(|r| dir.join(format!("straggler_rank{r}.json.gz")))
        .collect();
    let refs: Vec<&std::path::Path> = paths.iter().map(|p| p.as_path()).collect();
    let t =
        steplens_ingest::load_many(&refs, &steplens_ingest::LoadOptions::default(), None).unwrap();
    let r = steplens_analysis::build_report(&t);
    let waited = |source: u16| -> i64 {
        r.steps
            .iter()
            .filter(|s| s.source == source)
            .filter_map(|s| s.critical_path.as_ref())
            .map(|p| p.by_bound.get(&Bound::SyncWait).copied().unwrap_or(0))
            .sum()
    };
    let rank_of = |rank: i64| -> u16 {
        r.sources
            .iter()
            .position(|s| s.rank == Some(rank))
            .map_or(rank as u16, |i| i as u16)
    };
    assert_eq!(waited(rank_of(2)), 0, "the straggler waits for nobody");
    for rank in [0, 1, 3] {
        let w = waited(rank_of(rank));
        assert!(w > 0, "rank {rank} waits for rank 2");
    }
    // Each waiting rank's path still covers its steps once.
    for step in &r.steps {
        let cp = step.critical_path.as_ref().unwrap();
        assert_covers(cp, step.start_ns, step.dur_ns, &step.name);
    }
}

const GRAPH_TRACE: &str = r#"{"traceEvents":[
{"ph":"X","cat":"cpu_op","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":50},
{"ph":"X","cat":"cuda_runtime","name":"cudaGraphLaunch","pid":1,"tid":1,"ts":1,"dur":2,"args":{"correlation":9}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":42,"dur":2,"args":{"correlation":10}},
{"ph":"X","cat":"kernel","name":"graph_k1","pid":0,"tid":7,"ts":5,"dur":15,"args":{"device":0,"stream":7,"correlation":9}},
{"ph":"X","cat":"kernel","name":"graph_k2","pid":0,"tid":7,"ts":21,"dur":19,"args":{"device":0,"stream":7,"correlation":9}},
{"ph":"X","cat":"kernel","name":"graph_k3","pid":0,"tid":7,"ts":45,"dur":45,"args":{"device":0,"stream":7,"correlation":9}},
{"ph":"X","cat":"kernel","name":"other_kernel","pid":0,"tid":8,"ts":50,"dur":2,"args":{"device":0,"stream":8,"correlation":10}},
{"ph":"s","cat":"ac2g","name":"ac2g","id":9,"pid":1,"tid":1,"ts":1},
{"ph":"f","cat":"ac2g","name":"ac2g","id":9,"pid":0,"tid":7,"ts":5,"bp":"e"},
{"ph":"f","cat":"ac2g","name":"ac2g","id":9,"pid":0,"tid":7,"ts":21,"bp":"e"},
{"ph":"f","cat":"ac2g","name":"ac2g","id":9,"pid":0,"tid":7,"ts":45,"bp":"e"},
{"ph":"s","cat":"ac2g","name":"ac2g","id":10,"pid":1,"tid":1,"ts":42},
{"ph":"f","cat":"ac2g","name":"ac2g","id":10,"pid":0,"tid":8,"ts":50,"bp":"e"}
],"deviceProperties":[{"id":0,"name":"Test GPU","computeMajor":9,"computeMinor":0}]}"#;

/// A CUDA graph replay as the profiler writes it (issue 47, item 6): one `cudaGraphLaunch`
/// (correlation 9) and an `ac2g` flow finish on each of the graph's three kernels, all with that
/// correlation id; the host launches an unrelated kernel (`cudaLaunchKernel`, 10) at 42 µs,
/// before the graph's third kernel starts at 45 µs. The graph's kernels are queued at the graph
/// launch: the first is a launch delay from it, the others follow the previous kernel of the
/// graph (gaps), and none is taken for a launch of the later, unrelated call — which the latest
/// launch before a kernel with no link of its own would be.
#[test]
fn a_graphs_kernels_are_queued_at_the_graph_launch() {
    let dir = tempfile::TempDir::new().unwrap();
    let trace = GRAPH_TRACE;
    let path = support::temp_file(&dir, "graph.json", trace.as_bytes());
    let r = report(&path);
    let step = &r.steps[0];
    let cp = step.critical_path.as_ref().expect("a path");
    assert_covers(cp, step.start_ns, step.dur_ns, "ProfilerStep#1");
    assert_chain(
        cp,
        &[
            ("launch → graph_k1", Bound::LaunchOverhead, 1, 4),
            ("graph_k1", Bound::DeviceCompute, 5, 15),
            ("gap before graph_k2", Bound::KernelGap, 20, 1),
            ("graph_k2", Bound::DeviceCompute, 21, 19),
            ("gap before graph_k3", Bound::KernelGap, 40, 5),
            ("graph_k3", Bound::DeviceCompute, 45, 45),
        ],
    );
    assert!(
        !cp.slices.iter().any(|s| &*s.name == "launch → graph_k3"),
        "{:#?}",
        cp.slices
    );
}

/// The op table shows a graph launch as one unit: the `cudaGraphLaunch` row counts its call
/// once and carries the kernels its graph ran (3) and their device time (the union of
/// graph_k1 [5,20], graph_k2 [21,40], graph_k3 [45,90]: 15 + 19 + 45 = 79 µs); the lone
/// `cudaLaunchKernel` has no graph figures.
#[test]
fn a_graph_launch_is_one_op_row_with_its_kernels_and_device_time() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = support::temp_file(&dir, "graph.json", GRAPH_TRACE.as_bytes());
    let r = report(&path);
    let row = |name: &str| {
        r.ops
            .iter()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("no {name} row"))
    };
    let graph = row("cudaGraphLaunch");
    assert_eq!(graph.count, 1);
    assert_eq!(graph.graph_kernels, Some(3));
    assert_eq!(graph.graph_device_ns, Some(79_000));
    let single = row("cudaLaunchKernel");
    assert_eq!(single.graph_kernels, None);
    assert_eq!(single.graph_device_ns, None);
}

/// The text and HTML op tables show the graph launch's kernels and device time beside its row.
#[test]
fn the_op_tables_show_a_graph_as_one_unit() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = support::temp_file(&dir, "graph.json", GRAPH_TRACE.as_bytes());
    let path = path.to_str().unwrap();
    let text = support::stdout(&support::steplens(&["report", path, "--top", "50"]));
    let header = text
        .lines()
        .find(|l| l.contains("graph kernels"))
        .unwrap_or_else(|| panic!("no graph columns:\n{text}"));
    assert!(header.contains("graph device"), "{header}");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("cudaGraphLaunch"))
        .unwrap_or_else(|| panic!("no graph launch row:\n{text}"));
    assert!(row.contains(" 3 ") && row.contains("79.0 µs"), "{row}");
    let html = support::stdout(&support::steplens(&["report", path, "-f", "html"]));
    let ops = &html[html.find("id=\"ops\"").unwrap()..];
    assert!(
        ops.contains("graph kernels") && ops.contains("data-v=\"3\""),
        "graph columns in HTML"
    );
}

/// A real captured-graph trace: `samples/hta/cuda_graphs_rank0.json.gz`, one step of an A100
/// torch.compile run whose compiled regions replay CUDA graphs (HTA's test data, cut by
/// `samples/gen/cut_trace.py`). Its truth file is `samples/gen/graph_truth.py`'s reading of
/// the raw events: each `cudaGraphLaunch` and the device work sharing its correlation id, and
/// the step's device-idle gaps split by whether the work after them was already launched.
#[test]
fn a_real_captured_graph_is_one_unit_and_its_queued_gaps_are_not_the_hosts() {
    let path = support::repo().join("samples/hta/cuda_graphs_rank0.json.gz");
    let truth =
        support::read_json(&support::repo().join("samples/hta/cuda_graphs_rank0.truth.json"));
    let r = report(&path);
    // The op table: every launch one call, its graph's kernels and device time.
    let graphs = &truth["graph_launches"];
    let row = r
        .ops
        .iter()
        .find(|o| o.name == "cudaGraphLaunch")
        .expect("a cudaGraphLaunch row");
    assert_eq!(row.count, graphs["calls"].as_u64().unwrap());
    assert_eq!(row.graph_kernels, graphs["kernels"].as_u64());
    assert_eq!(row.graph_device_ns, graphs["device_ns"].as_i64());
    // Host-bound idle: at most the gaps whose following work the host launched late. The
    // queued gaps (134.8 ms here: the device idle with work already issued) are not the
    // host's; counting them gave 126 ms, more than the 96.9 ms the host could be late for.
    let step = truth["step"].as_str().unwrap();
    let late_ns = (truth["late_gaps"]["total_us"].as_f64().unwrap() * 1000.0) as i64;
    let gap = r
        .findings
        .iter()
        .find(|f| f.kind.as_str() == "host_bound_gap" && f.step.as_deref() == Some(step));
    if let Some(gap) = gap {
        assert!(
            gap.lost_ns <= late_ns,
            "host-bound {} ns > {late_ns} ns of late gaps",
            gap.lost_ns
        );
    }
    // fp32 GEMMs in graphs: named by their graph, shown by its launch, never kernel by kernel.
    let fp32 = r
        .findings
        .iter()
        .find(|f| f.kind.as_str() == "no_mixed_precision")
        .expect("a no_mixed_precision finding");
    let with_gemm = truth["graph_launches_with_fp32_gemm"]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_u64().unwrap())
        .max()
        .unwrap();
    assert!(
        fp32.ops
            .iter()
            .any(|o| o == &format!("CompiledFunctionBackward: CUDA graph of {with_gemm} kernels")),
        "{:?}",
        fp32.ops
    );
    let shown: Vec<&str> = fp32
        .evidence
        .iter()
        .filter_map(|e| match e {
            steplens_analysis::finding::Evidence::Slice { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert!(shown.contains(&"cudaGraphLaunch"), "{shown:?}");
    let t = steplens_ingest::load(&path, &Default::default(), None).unwrap();
    for e in &fp32.evidence {
        let Some(slice) = e.slice() else { continue };
        if t.slice_class(slice).is_device_work() {
            let launched_by_graph = t
                .flows
                .iter()
                .any(|f| f.to == slice && t.slice_name(f.from).contains("GraphLaunch"));
            assert!(
                !launched_by_graph,
                "a graph's kernel shown on its own: {e:?}"
            );
        }
    }
}
