//! The historical Kineto schemas (`docs/kineto-compat.md`), one rule at a time on small inline
//! traces: category spellings in any case, annotations written as `Operator`s, events without a
//! tid, launch links from correlation ids when no flow is written, `[memory]` instants as
//! memory counters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use steplens_ingest::model::{CategoryClass, LaneId, TrackKind};
use steplens_ingest::{LoadOptions, Timeline, load};
use tempfile::TempDir;

fn load_str(text: &str) -> Timeline {
    let dir = TempDir::new().expect("temp dir");
    let path = dir.path().join("trace.json");
    std::fs::write(&path, text).expect("write");
    load(&path, &LoadOptions::default(), None).expect("load")
}

/// A PyTorch 1.8 trace: capitalised categories, the step an `Operator`, the device thread a
/// string, no flows; the runtime call and the kernel share a correlation id.
const PT18: &str = r#"{"schemaVersion": 1, "traceEvents": [
 {"ph":"X","cat":"Operator","name":"ProfilerStep#2","pid":100,"tid":"100","ts":0,"dur":1000,"args":{"External id":1}},
 {"ph":"X","cat":"Operator","name":"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__","pid":100,"tid":"100","ts":5,"dur":50,"args":{"External id":2}},
 {"ph":"X","cat":"Operator","name":"aten::addmm","pid":100,"tid":"100","ts":100,"dur":50,"args":{"External id":3}},
 {"ph":"X","cat":"Runtime","name":"cudaLaunchKernel","pid":100,"tid":"100","ts":110,"dur":10,"args":{"cbid":211,"correlation":77,"external id":3}},
 {"ph":"X","cat":"Kernel","name":"volta_sgemm_128x64_nn","pid":0,"tid":"stream 7","ts":900,"dur":300,"args":{"device":0,"stream":7,"correlation":77,"external id":3}},
 {"ph":"X","cat":"Memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":"stream 7","ts":1250,"dur":10,"args":{"correlation":78}},
 {"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","pid":"Spans","tid":"PyTorch Profiler","ts":0,"dur":1300}
]}"#;

#[test]
fn legacy_categories_are_read_in_any_case() {
    for (cat, class) in [
        ("Operator", CategoryClass::CpuOp),
        ("operator", CategoryClass::CpuOp),
        ("cpu_op", CategoryClass::CpuOp),
        ("Runtime", CategoryClass::Runtime),
        ("cuda_runtime", CategoryClass::Runtime),
        ("Kernel", CategoryClass::Kernel),
        ("KERNEL", CategoryClass::Kernel),
        ("Memcpy", CategoryClass::Memcpy),
        ("gpu_memcpy", CategoryClass::Memcpy),
        ("Memset", CategoryClass::Memset),
        ("gpu_memset", CategoryClass::Memset),
        ("User_Annotation", CategoryClass::UserAnnotation),
        ("gpu_user_annotation", CategoryClass::DeviceAnnotation),
        ("Trace", CategoryClass::TraceSpan),
        (
            "a category longer than thirty-two bytes",
            CategoryClass::Other,
        ),
    ] {
        assert_eq!(CategoryClass::of(cat), class, "{cat}");
    }
}

#[test]
fn a_pytorch_1_8_trace_has_its_steps_annotations_and_launches() {
    let t = load_str(PT18);
    assert_eq!(
        t.steps.len(),
        1,
        "ProfilerStep written as an Operator is a step"
    );
    assert_eq!(t.steps[0].name, "ProfilerStep#2");
    // The step and the DataLoader range read as annotations; the ATen op stays an op.
    let class_of = |name: &str| {
        (0..t.slices.len() as u32)
            .find(|&i| t.slice_name(i) == name)
            .map(|i| t.slice_class(i))
    };
    assert_eq!(
        class_of("ProfilerStep#2"),
        Some(CategoryClass::UserAnnotation)
    );
    assert_eq!(
        class_of("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"),
        Some(CategoryClass::UserAnnotation)
    );
    assert_eq!(class_of("aten::addmm"), Some(CategoryClass::CpuOp));
    // The kernel is on a device lane and linked to its launch by the correlation id; the
    // copy's correlation id has no runtime call, so it stays unlinked.
    assert_eq!(t.flows.len(), 1, "{:?}", t.flows);
    let flow = t.flows[0];
    assert_eq!(t.slice_name(flow.from), "cudaLaunchKernel");
    assert_eq!(t.slice_name(flow.to), "volta_sgemm_128x64_nn");
    assert_eq!(flow.id, 77);
    assert!(matches!(
        t.slice_track(flow.to).map(|tr| &tr.kind),
        Some(TrackKind::DeviceEngine { .. })
    ));
}

#[test]
fn correlation_links_are_not_added_when_the_trace_has_launch_flows() {
    let with_flows = PT18.replace(
        r#" {"ph":"X","cat":"Trace""#,
        r#" {"ph":"s","cat":"ac2g","name":"ac2g","id":77,"pid":100,"tid":"100","ts":110},
 {"ph":"f","bp":"e","cat":"ac2g","name":"ac2g","id":77,"pid":0,"tid":"stream 7","ts":900},
 {"ph":"X","cat":"Trace""#,
    );
    let t = load_str(&with_flows);
    assert_eq!(t.flows.len(), 1, "the written flow only: {:?}", t.flows);
}

#[test]
fn an_event_without_a_tid_is_on_the_thread_named_after_its_pid() {
    let t = load_str(
        r#"[{"ph":"X","name":"outer","pid":7,"tid":7,"ts":0,"dur":100},
            {"ph":"X","name":"inner","pid":7,"ts":10,"dur":10}]"#,
    );
    assert_eq!(
        t.tracks.iter().filter(|tr| !tr.slices.is_empty()).count(),
        1
    );
    let inner = (0..t.slices.len() as u32)
        .find(|&i| t.slice_name(i) == "inner")
        .unwrap();
    assert_eq!(t.slices.depth[inner as usize], 1, "nested under `outer`");
    assert_eq!(t.slice_track(inner).unwrap().tid, LaneId::Int(7));
}

#[test]
fn memory_instants_become_allocated_and_reserved_counters_per_device() {
    let t = load_str(
        r#"[{"ph":"X","cat":"cpu_op","name":"aten::empty","pid":1,"tid":1,"ts":0,"dur":10},
            {"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":1,
             "args":{"Device Type":1,"Device Id":0,"Addr":1234,"Bytes":512,"Total Allocated":512,"Total Reserved":2097152}},
            {"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":5,
             "args":{"Device Type":1,"Device Id":0,"Addr":1234,"Bytes":-512,"Total Allocated":0,"Total Reserved":2097152}},
            {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":6,
             "args":{"Device Type":0,"Device Id":-1,"Addr":99,"Bytes":64,"Total Allocated":64,"Total Reserved":0}}]"#,
    );
    let series = |name: &str| -> Vec<(i64, f64)> {
        let track = t
            .tracks
            .iter()
            .position(|tr| tr.kind == TrackKind::Counter && tr.name.ends_with(name))
            .unwrap_or_else(|| {
                panic!(
                    "no counter {name}: {:?}",
                    t.tracks.iter().map(|t| &t.name).collect::<Vec<_>>()
                )
            });
        (0..t.counters.len())
            .filter(|&i| t.counters.track[i] as usize == track)
            .map(|i| (t.counters.ts[i], t.counters.value[i]))
            .collect()
    };
    assert_eq!(
        series("memory allocated cuda:0"),
        vec![(1_000, 512.0), (5_000, 0.0)]
    );
    assert_eq!(
        series("memory reserved cuda:0"),
        vec![(1_000, 2_097_152.0), (5_000, 2_097_152.0)]
    );
    assert_eq!(series("memory allocated cpu"), vec![(6_000, 64.0)]);
    // The instants themselves are kept.
    assert_eq!(t.instants.ts.len(), 3);
}

/// Gaudi memory: the bridge's `Memory Logs` write `Device Type` 1 (CUDA's number) for the HPU,
/// and its `deviceProperties` name the Gaudi. The device is the one the trace describes:
/// `hpu:0`, whether `deviceProperties` comes before the events or after them; the CPU stays
/// `cpu`, and the same events beside an NVIDIA device stay `cuda:0`.
#[test]
fn memory_of_a_trace_describing_a_gaudi_is_the_hpus() {
    let events = r#"[{"ph":"X","cat":"cpu_op","name":"aten::empty","pid":1,"tid":1,"ts":0,"dur":10},
        {"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":30001,"tid":1,"ts":1,
         "args":{"Addr":4096,"Bytes":512,"Device Id":0,"Device Type":1,"Profiler Event Index":1,"Total Allocated":512,"Total Reserved":1048576}},
        {"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":30001,"tid":1,"ts":5,
         "args":{"Addr":4096,"Bytes":-512,"Device Id":0,"Device Type":1,"Profiler Event Index":2,"Total Allocated":0,"Total Reserved":1048576}},
        {"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":6,
         "args":{"Addr":99,"Bytes":64,"Device Id":-1,"Device Type":0,"Total Allocated":64,"Total Reserved":0}}]"#;
    let gaudi = r#"[{"name":"GAUDI3","totalGlobalMem":136365211648}]"#;
    let nvidia = r#"[{"id":0,"name":"NVIDIA A100-SXM4-80GB","totalGlobalMem":85899345920,"computeMajor":8,"computeMinor":0}]"#;
    let counters = |t: &Timeline| -> Vec<String> {
        let mut names: Vec<String> = t
            .tracks
            .iter()
            .filter(|tr| tr.kind == TrackKind::Counter)
            .map(|tr| tr.name.clone())
            .collect();
        names.sort();
        names
    };
    // Per instant in time order.
    let devices = |t: &Timeline| -> Vec<String> {
        let mut by_time: Vec<(i64, String)> = (0..t.instants.len())
            .map(|i| (t.instants.ts[i], t.memory_device(i).unwrap()))
            .collect();
        by_time.sort();
        by_time.into_iter().map(|(_, d)| d).collect()
    };
    for trace in [
        format!(r#"{{"deviceProperties":{gaudi},"traceEvents":{events}}}"#),
        format!(r#"{{"traceEvents":{events},"deviceProperties":{gaudi}}}"#),
    ] {
        let t = load_str(&trace);
        assert_eq!(
            counters(&t),
            [
                "memory allocated cpu",
                "memory allocated hpu:0",
                "memory reserved cpu",
                "memory reserved hpu:0"
            ],
            "{trace}"
        );
        assert_eq!(devices(&t), ["hpu:0", "hpu:0", "cpu"], "{trace}");
        assert_eq!(t.memory_on_hpu, [true]);
    }
    // A backend registered as PrivateUse1 (20) on a Gaudi is the HPU too.
    let t = load_str(&format!(
        r#"{{"deviceProperties":{gaudi},"traceEvents":{}}}"#,
        events.replace(r#""Device Type":1"#, r#""Device Type":20"#)
    ));
    assert_eq!(devices(&t), ["hpu:0", "hpu:0", "cpu"]);
    // The same events beside a CUDA device are the CUDA device's.
    let t = load_str(&format!(
        r#"{{"deviceProperties":{nvidia},"traceEvents":{events}}}"#
    ));
    assert_eq!(devices(&t), ["cuda:0", "cuda:0", "cpu"]);
    assert!(counters(&t).contains(&"memory allocated cuda:0".to_owned()));
    assert_eq!(t.memory_on_hpu, [false]);
}

/// The slice a flow endpoint landed on, by name.
fn flow_names(t: &Timeline) -> Vec<(String, String)> {
    t.flows
        .iter()
        .map(|f| {
            (
                t.slice_name(f.from).to_owned(),
                t.slice_name(f.to).to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_flow_step_binds_to_its_enclosing_slice_as_perfetto_does() {
    // `s` in A, `t` at a time inside B (not at B's start), `f` without `bp` before C: the
    // flow runs A → B → C. Before, the `t` bound to the next slice (C) and B was skipped.
    let t = load_str(
        r#"[{"ph":"X","name":"A","pid":1,"tid":1,"ts":0,"dur":10},
            {"ph":"X","name":"B","pid":1,"tid":2,"ts":20,"dur":10},
            {"ph":"X","name":"C","pid":1,"tid":3,"ts":40,"dur":10},
            {"ph":"s","cat":"x","name":"x","id":5,"pid":1,"tid":1,"ts":5},
            {"ph":"t","cat":"x","name":"x","id":5,"pid":1,"tid":2,"ts":25},
            {"ph":"f","cat":"x","name":"x","id":5,"pid":1,"tid":3,"ts":35}]"#,
    );
    assert_eq!(
        flow_names(&t),
        vec![("A".into(), "B".into()), ("B".into(), "C".into())]
    );
    assert_eq!(t.stats.unbound_flow_ends, 0);
}

#[test]
fn a_flow_start_outside_every_slice_binds_nowhere_and_is_counted() {
    let t = load_str(
        r#"[{"ph":"X","name":"A","pid":1,"tid":1,"ts":10,"dur":10},
            {"ph":"X","name":"C","pid":1,"tid":3,"ts":40,"dur":10},
            {"ph":"s","cat":"x","name":"x","id":5,"pid":1,"tid":1,"ts":5},
            {"ph":"f","bp":"e","cat":"x","name":"x","id":5,"pid":1,"tid":3,"ts":45}]"#,
    );
    assert!(t.flows.is_empty(), "{:?}", flow_names(&t));
    assert!(t.stats.unbound_flow_ends > 0);
}

#[test]
fn flow_v2_bind_ids_join_slices() {
    let t = load_str(
        r#"[{"ph":"X","name":"producer","pid":1,"tid":1,"ts":0,"dur":10,"bind_id":"0x2a","flow_out":true},
            {"ph":"X","name":"consumer","pid":1,"tid":2,"ts":30,"dur":10,"bind_id":"0x2a","flow_in":true},
            {"ph":"X","name":"orphan","pid":1,"tid":2,"ts":50,"dur":10,"bind_id":7,"flow_in":true}]"#,
    );
    assert_eq!(flow_names(&t), vec![("producer".into(), "consumer".into())]);
    assert_eq!(t.flows[0].id, 42);
    assert_eq!(t.stats.unbound_flow_ends, 1, "the orphan's end");
}

/// Perfetto's flow v2 semantics, in the shape of its own JSON test (`flow_events_json_v2`):
/// ends bound in time order (the file is not); a slice with `flow_in` and `flow_out` on one id
/// ends the incoming flow and starts the next, which two later slices end (one of them a `B`).
#[test]
fn flow_v2_passes_through_a_slice_with_both_ends_and_binds_begin_slices() {
    let t = load_str(
        r#"[{"ph":"X","cat":"ipc","name":"send_a","pid":7,"tid":8,"ts":3002,"dur":10,"bind_id":"0x51","flow_out":true},
            {"ph":"X","cat":"ipc","name":"send_b","pid":8,"tid":9,"ts":0,"dur":10,"bind_id":"0x52","flow_out":true,"flow_in":false},
            {"ph":"X","cat":"ipc","name":"recv_b","pid":3,"tid":4,"ts":1001,"dur":100,"bind_id":"0x52","flow_in":true},
            {"ph":"X","cat":"ipc","name":"relay","pid":2,"tid":5,"ts":3200,"dur":500,"bind_id":"0x51","flow_in":true,"flow_out":true},
            {"ph":"X","cat":"ipc","name":"recv_1","pid":1,"tid":6,"ts":3331,"dur":400,"bind_id":"0x51","flow_in":true},
            {"ph":"B","cat":"ipc","name":"recv_2","pid":3,"tid":4,"ts":3333,"bind_id":"0x51","flow_in":true},
            {"ph":"i","cat":"ipc","name":"mark","pid":3,"tid":4,"ts":3366,"s":"t"},
            {"ph":"E","cat":"ipc","name":"recv_2","pid":3,"tid":4,"ts":4330}]"#,
    );
    let mut got = flow_names(&t);
    got.sort();
    let mut want: Vec<(String, String)> = [
        ("relay", "recv_1"),
        ("relay", "recv_2"),
        ("send_a", "relay"),
        ("send_b", "recv_b"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(t.stats.unbound_flow_ends, 0);
}

#[test]
fn async_events_become_slices_on_an_async_track() {
    let t = load_str(
        r#"[{"ph":"X","name":"op","pid":1,"tid":1,"ts":0,"dur":100},
            {"ph":"b","cat":"net","name":"request","id":"0x10","pid":1,"tid":1,"ts":10},
            {"ph":"n","cat":"net","name":"retry","id":"0x10","pid":1,"tid":1,"ts":20},
            {"ph":"e","cat":"net","name":"request","id":"0x10","pid":1,"tid":1,"ts":70}]"#,
    );
    let request = (0..t.slices.len() as u32)
        .find(|&i| t.slice_name(i) == "request")
        .expect("the b/e pair is a slice");
    assert_eq!(t.slices.start[request as usize], 10_000);
    assert_eq!(t.slices.dur[request as usize], 60_000);
    assert_eq!(
        t.slice_track(request).map(|tr| tr.kind.clone()),
        Some(TrackKind::Async)
    );
    assert_eq!(t.instants.ts.len(), 1);
    assert_eq!(t.stats.unsupported_phase, 0);
}

#[test]
fn keys_read_past_on_purpose_are_counted_in_a_warning() {
    let t = load_str(
        r#"[{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":10,"tts":3,"tdur":4,"sf":7},
            {"ph":"X","name":"b","pid":1,"tid":1,"ts":20,"dur":10,"tts":13,"cname":"good"}]"#,
    );
    let w = t.sources[0]
        .warnings
        .iter()
        .find(|w| w.code == "ignored_keys")
        .expect("an ignored_keys warning");
    for part in [
        "`tts` on 2 events",
        "`tdur` on 1 events",
        "`sf` on 1 events",
        "`cname` on 1",
    ] {
        assert!(w.message.contains(part), "{part} in {}", w.message);
    }
    assert_eq!(t.slices.len(), 2, "the events themselves are kept");
}

/// Device hints are per input: a Gaudi metrics file read before a CUDA trace does not make the
/// CUDA trace a bridge trace, in either order.
#[test]
fn a_cuda_trace_keeps_its_format_beside_a_gaudi_metrics_file() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples");
    let cuda = root.join("hta/cuda_event_sync.json.gz");
    let metrics = root.join("gaudi/train_hpu.metrics.json");
    for order in [[&metrics, &cuda], [&cuda, &metrics]] {
        let paths: Vec<&std::path::Path> = order.iter().map(|p| p.as_path()).collect();
        let t = steplens_ingest::load_many(&paths, &LoadOptions::default(), None).expect("load");
        let cuda_source = t
            .sources
            .iter()
            .find(|s| s.path.ends_with("cuda_event_sync.json.gz"))
            .expect("the CUDA source");
        assert_eq!(cuda_source.format, "kineto-json", "order {paths:?}");
    }
}

/// Perfetto's JSON reader accepts an args object with a trailing comma (its `test_args_ordered`
/// trace has one); the events keep their args.
#[test]
fn args_with_a_trailing_comma_are_kept() {
    let t = load_str(
        r#"[{"ph":"X","name":"first","pid":1,"tid":1,"ts":0,"dur":10,"args":{"alpha": 1, "beta": "two",}},
            {"ph":"X","name":"second","pid":1,"tid":1,"ts":20,"dur":10,"args":{"gamma": [1, 2,], "delta": "a,}"}}]"#,
    );
    assert_eq!(t.slices.len(), 2);
    let first = t.args(0).expect("args of the first event");
    assert_eq!(first["alpha"], 1);
    assert_eq!(first["beta"], "two");
    assert_eq!(t.arg_i64(0, "alpha"), Some(1));
    let second = t.args(1).expect("args of the second event");
    assert_eq!(second["gamma"], serde_json::json!([1, 2]));
    assert_eq!(second["delta"], "a,}", "a comma inside a string stays");
}

/// Async events keyed by `id2` (Chrome's tracing writes them; Perfetto's `test_json_id2_*`
/// traces): `id2.global` and `id` name a track of the whole trace, `id2.local` one of the
/// process, and the category is part of the key.
#[test]
fn async_events_keyed_by_id2_become_slices() {
    let t = load_str(
        r#"[{"ph":"b","cat":"cat","name":"global_str","id2":{"global":"0xaa"},"pid":1,"tid":1,"ts":10},
            {"ph":"e","cat":"cat","name":"global_str","id2":{"global":"0xaa"},"pid":2,"tid":2,"ts":20},
            {"ph":"b","cat":"cat","name":"global_int","id2":{"global":7},"pid":1,"tid":1,"ts":30},
            {"ph":"e","cat":"cat","name":"global_int","id":7,"pid":3,"tid":3,"ts":40},
            {"ph":"b","cat":"cat","name":"local_a","id2":{"local":"0xbb"},"pid":1,"tid":1,"ts":50},
            {"ph":"b","cat":"cat","name":"local_b","id2":{"local":"0xbb"},"pid":2,"tid":2,"ts":55},
            {"ph":"e","cat":"cat","name":"local_a","id2":{"local":"0xbb"},"pid":1,"tid":1,"ts":60},
            {"ph":"e","cat":"cat","name":"local_b","id2":{"local":"0xbb"},"pid":2,"tid":2,"ts":65},
            {"ph":"b","cat":"other","name":"other_cat","id2":{"global":"0xaa"},"pid":1,"tid":1,"ts":70},
            {"ph":"e","cat":"other","name":"other_cat","id2":{"global":"0xaa"},"pid":1,"tid":1,"ts":80}]"#,
    );
    let slice = |name: &str| {
        (0..t.slices.len() as u32)
            .find(|&i| t.slice_name(i) == name)
            .unwrap_or_else(|| panic!("{name} is a slice"))
    };
    // A global id ends on another process's event; an `id` ends what an `id2.global` began.
    for (name, dur) in [
        ("global_str", 10),
        ("global_int", 10),
        ("local_a", 10),
        ("local_b", 10),
    ] {
        assert_eq!(t.slices.dur[slice(name) as usize], dur * 1000, "{name}");
    }
    // Local ids of two processes are two tracks; the category keeps its own track.
    let track = |name: &str| t.slices.track[slice(name) as usize];
    assert_ne!(track("local_a"), track("local_b"));
    assert_ne!(track("global_str"), track("other_cat"));
    assert!(
        (0..t.slices.len() as u32)
            .all(|i| t.slice_track(i).map(|tr| tr.kind.clone()) == Some(TrackKind::Async))
    );
    assert_eq!(t.stats.unmatched_ends, 0);
    assert_eq!(t.stats.malformed, 0);
}
