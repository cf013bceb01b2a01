//! Edge cases: metadata, track kinds and order, flows, steps and device kind, lazy args.

use super::*;

// ---------------------------------------------------------------------------------------------
// Metadata, track kinds and order

#[test]
fn metadata_names_kinds_and_order() {
    let text = r#"{"traceEvents":[
        {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":20,"dur":10},
        {"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":8,"ts":5,"dur":2},
        {"ph":"X","cat":"gpu_memset","name":"Memset (Device)","pid":0,"tid":8,"ts":8,"dur":1},
        {"ph":"X","cat":"cuda_sync","name":"Event Sync","pid":0,"tid":-1,"ts":25,"dur":1},
        {"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#1","pid":0,"tid":9,"ts":0,"dur":40},
        {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":100,"ts":10,"dur":5},
        {"ph":"X","cat":"cpu_op","name":"bwd","pid":100,"tid":200,"ts":10,"dur":5},
        {"ph":"X","cat":"cpu_op","name":"worker","pid":50,"tid":50,"ts":10,"dur":5},
        {"ph":"M","name":"process_name","pid":100,"tid":0,"args":{"name":"python3"}},
        {"ph":"M","name":"process_labels","pid":100,"tid":0,"args":{"labels":"CPU"}},
        {"ph":"M","name":"process_sort_index","pid":100,"tid":0,"args":{"sort_index":1}},
        {"ph":"M","name":"process_sort_index","pid":50,"tid":0,"args":{"sort_index":2}},
        {"ph":"M","name":"thread_name","pid":100,"tid":100,"args":{"name":"thread 100 (python3)"}},
        {"ph":"M","name":"thread_sort_index","pid":100,"tid":100,"args":{"sort_index":300}},
        {"ph":"M","name":"thread_name","pid":100,"tid":200,"args":{"name":"autograd"}},
        {"ph":"M","name":"thread_sort_index","pid":100,"tid":200,"args":{"sort_index":100}},
        {"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"python3"}},
        {"ph":"M","name":"process_labels","pid":0,"tid":0,"args":{"labels":"GPU 0"}},
        {"ph":"M","name":"process_sort_index","pid":0,"tid":0,"args":{"sort_index":16777216}},
        {"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7 "}},
        {"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7 "}},
        {"ph":"M","name":"thread_name","pid":0,"tid":-1,"args":{"name":"Device 0"}}
    ]}"#;
    let t = load_str(text);
    assert_eq!(t.event_count(), 22);
    assert_eq!(phases(&t), [('M', 14), ('X', 8)]);
    let summary: Vec<(&str, &str, String)> = t
        .tracks
        .iter()
        .map(|tr| {
            let kind = match &tr.kind {
                TrackKind::DeviceEngine { class, device } => format!("device {class} {device:?}"),
                other => other.label().to_owned(),
            };
            (tr.process_name.as_str(), tr.name.as_str(), kind)
        })
        .collect();
    assert_eq!(
        summary,
        [
            // Host tracks first, by process then thread sort index.
            ("python3", "autograd", "host".to_owned()),
            ("python3", "thread 100 (python3)", "host".to_owned()),
            ("50", "thread 50", "host".to_owned()),
            // Device lanes: named by their label, device index from "GPU 0", by tid.
            ("GPU 0", "Device 0", "device sync Some(0)".to_owned()),
            (
                "GPU 0",
                "stream 7",
                "device compute-stream Some(0)".to_owned()
            ),
            ("GPU 0", "stream 8", "device memcpy Some(0)".to_owned()),
            ("GPU 0", "stream 9", "device annotation Some(0)".to_owned()),
        ]
    );
    let gemm = t.slice_track(slice_named(&t, "gemm")).unwrap();
    assert_eq!(
        gemm.kind,
        TrackKind::DeviceEngine {
            class: EngineClass::ComputeStream,
            device: Some(0)
        }
    );
    assert_eq!(gemm.sort_key, (16_777_216, 7));
    assert_eq!(t.tracks[0].sort_key, (1, 100));
    assert_eq!(t.device.kind, DeviceKind::Cuda);
    assert_eq!(t.device.count, 1);
    // The device mirror of a step annotation is not a step.
    assert!(t.steps.is_empty());
    assert!(t.has_device());
}

#[test]
fn device_lanes_found_by_label_without_device_work() {
    // An MTIA lane holding only runtime-looking events is still a device lane by its label.
    let text = r#"[
        {"ph":"X","cat":"mtia_ccp_events","name":"dma_request","pid":9,"tid":3,"ts":0,"dur":1},
        {"ph":"X","cat":"other","name":"fw","pid":9,"tid":4,"ts":0,"dur":1},
        {"ph":"M","name":"process_labels","pid":9,"tid":0,"args":{"labels":"MTIA 9"}},
        {"ph":"M","name":"thread_name","pid":9,"tid":3,"args":{"name":"DMA_REQUEST"}},
        {"ph":"M","name":"thread_name","pid":9,"tid":4,"args":{"name":"Stream 1 FW"}}
    ]"#;
    let t = load_str(text);
    let kinds: Vec<(&str, TrackKind)> = t
        .tracks
        .iter()
        .map(|tr| (tr.name.as_str(), tr.kind.clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            (
                "DMA_REQUEST",
                TrackKind::DeviceEngine {
                    class: EngineClass::Dma,
                    device: Some(9)
                }
            ),
            (
                "Stream 1 FW",
                TrackKind::DeviceEngine {
                    class: EngineClass::ComputeStream,
                    device: Some(9)
                }
            ),
        ]
    );
    assert_eq!(t.device.kind, DeviceKind::Mtia);
}

// ---------------------------------------------------------------------------------------------
// Flows

#[test]
fn flows_bind_to_slices() {
    let text = r#"[
        {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":100,"tid":100,"ts":8,"dur":10},
        {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":100,"ts":10,"dur":5},
        {"ph":"s","cat":"ac2g","name":"ac2g","id":7,"pid":100,"tid":100,"ts":10},
        {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":20,"dur":10},
        {"ph":"f","cat":"ac2g","name":"ac2g","id":7,"pid":0,"tid":7,"ts":20,"bp":"e"},
        {"ph":"X","cat":"cpu_op","name":"aten::add","pid":100,"tid":100,"ts":40,"dur":4},
        {"ph":"s","cat":"fwdbwd","name":"fwdbwd","id":3,"pid":100,"tid":100,"ts":40,"bp":"e"},
        {"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: AddBackward0","pid":100,"tid":200,"ts":60,"dur":6},
        {"ph":"f","cat":"fwdbwd","name":"fwdbwd","id":3,"pid":100,"tid":200,"ts":60,"bp":"e"},
        {"ph":"X","cat":"cuda_runtime","name":"cudaStreamWaitEvent","pid":100,"tid":100,"ts":50,"dur":1},
        {"ph":"f","cat":"ac2g","name":"ac2g","id":99,"pid":100,"tid":100,"ts":50,"bp":"e"}
    ]"#;
    let t = load_str(text);
    assert_eq!(t.event_count(), 11);
    assert_eq!(phases(&t), [('X', 6), ('f', 3), ('s', 2)]);
    let by_cat = |cat: &str| {
        let id = t.categories.lookup(cat).unwrap();
        t.flows
            .iter()
            .filter(|f| f.cat == id)
            .copied()
            .collect::<Vec<_>>()
    };
    let ac2g = by_cat("ac2g");
    assert_eq!(ac2g.len(), 1);
    assert_eq!(ac2g[0].id, 7);
    // The start binds to the deepest enclosing slice (the runtime call, not the op).
    assert_eq!(t.slice_name(ac2g[0].from), "cudaLaunchKernel");
    assert_eq!(t.slice_name(ac2g[0].to), "gemm");
    assert_eq!(t.slice_class(ac2g[0].from), CategoryClass::Runtime);
    assert_eq!(t.slice_class(ac2g[0].to), CategoryClass::Kernel);
    let fwdbwd = by_cat("fwdbwd");
    assert_eq!(fwdbwd.len(), 1);
    assert_eq!(fwdbwd[0].id, 3);
    assert_eq!(t.slice_name(fwdbwd[0].from), "aten::add");
    assert_eq!(
        t.slice_name(fwdbwd[0].to),
        "autograd::engine::evaluate_function: AddBackward0"
    );
    assert_eq!(t.flows.len(), 2);
    // The `f` with id 99 has no `s`.
    assert_eq!(t.stats.unbound_flow_ends, 1);
    assert_eq!(t.device.kind, DeviceKind::Cuda);
}

#[test]
fn flow_start_without_finish_and_unbindable_finish_are_counted() {
    let text = r#"[
        {"ph":"X","cat":"cuda_runtime","name":"cudaDeviceSynchronize","pid":1,"tid":1,"ts":0,"dur":5},
        {"ph":"s","cat":"ac2g","id":39,"pid":1,"tid":1,"ts":1},
        {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":10,"dur":5},
        {"ph":"s","cat":"ac2g","id":40,"pid":1,"tid":1,"ts":10},
        {"ph":"f","cat":"ac2g","id":40,"pid":0,"tid":7,"ts":30,"bp":"e"}
    ]"#;
    let t = load_str(text);
    // id 39: a start with no finish; id 40: a finish on a lane with no slice to bind to.
    assert!(t.flows.is_empty());
    assert_eq!(t.stats.unbound_flow_ends, 2);
}

// ---------------------------------------------------------------------------------------------
// Steps and device kind

#[test]
fn profiler_steps() {
    let text = r#"[
        {"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","pid":1,"tid":1,"ts":100,"dur":90},
        {"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":0,"dur":95},
        {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":5},
        {"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#2","pid":0,"tid":7,"ts":20,"dur":80},
        {"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#3","pid":0,"tid":7,"ts":120,"dur":60},
        {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":30,"dur":5},
        {"ph":"X","cat":"python_function","name":"ProfilerStep#9","pid":1,"tid":1,"ts":0,"dur":1},
        {"ph":"X","cat":"user_annotation","name":"ProfilerStep#x","pid":1,"tid":2,"ts":0,"dur":1}
    ]"#;
    let t = load_str(text);
    let steps: Vec<(&str, Option<i64>, i64, i64)> = t
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s.number, s.start, s.dur))
        .collect();
    assert_eq!(
        steps,
        [
            ("ProfilerStep#2", Some(2), 0, 95_000),
            ("ProfilerStep#3", Some(3), 100_000, 90_000),
        ]
    );
    for s in &t.steps {
        assert_eq!(t.tracks[s.track as usize].kind, TrackKind::HostThread);
        assert_eq!(t.slice_name(s.slice), s.name);
        assert_eq!(s.source, 0);
        assert_eq!(s.end(), s.start + s.dur);
    }
}

#[test]
fn step_with_unparsable_number() {
    let text = r#"[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#x","pid":1,"tid":2,"ts":0,"dur":1}]"#;
    let t = load_str(text);
    assert_eq!(t.steps.len(), 1);
    assert_eq!(t.steps[0].number, None);
}

#[test]
fn device_kind_detection() {
    let runtime = |cat: &str, name: &str| {
        format!(r#"[{{"ph":"X","cat":"{cat}","name":"{name}","pid":1,"tid":1,"ts":0,"dur":1}}]"#)
    };
    let cases = [
        (
            runtime("cuda_runtime", "cudaLaunchKernel"),
            DeviceKind::Cuda,
            1,
        ),
        (
            runtime("cuda_driver", "cuLaunchKernel"),
            DeviceKind::Cuda,
            1,
        ),
        // ROCm writes HIP calls under the `cuda_runtime` category.
        (
            runtime("cuda_runtime", "hipLaunchKernel"),
            DeviceKind::Rocm,
            1,
        ),
        (runtime("cpu_op", "aten::mm"), DeviceKind::Cpu, 0),
        (
            runtime("mtia_ccp_events", "fc-dtype_Float"),
            DeviceKind::Mtia,
            1,
        ),
        (runtime("mtia_runtime", "runFunction"), DeviceKind::Mtia, 1),
        (runtime("hpu_op", "hpu::add"), DeviceKind::Hpu, 1),
    ];
    for (text, kind, count) in cases {
        let t = load_str(&text);
        assert_eq!(t.device.kind, kind, "{text}");
        assert_eq!(t.device.count, count, "{text}");
    }
    // Device properties give the name and the count.
    let text = r#"{"deviceProperties":[{"id":0,"name":"NVIDIA A100-SXM4-40GB"},{"id":1,"name":"NVIDIA A100-SXM4-40GB"}],
                   "traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":1}]}"#;
    let t = load_str(text);
    assert_eq!(t.device.kind, DeviceKind::Cuda);
    assert_eq!(t.device.name.as_deref(), Some("NVIDIA A100-SXM4-40GB"));
    let text = r#"{"deviceProperties":[{"id":0,"name":"AMD Instinct MI250X","gcnArchName":"gfx90a"}],
                   "traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":1}]}"#;
    assert_eq!(load_str(text).device.kind, DeviceKind::Rocm);
}

// ---------------------------------------------------------------------------------------------
// Lazy args

#[test]
fn lazy_args() {
    let text = r#"[
        {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":10,
         "args":{"External id": 42, "Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"],
                 "Sequence number": "17", "Call\"stack": "a\nb", "empty": {}}},
        {"ph":"X","cat":"cpu_op","name":"no_args","pid":1,"tid":1,"ts":20,"dur":1},
        {"ph":"X","cat":"cpu_op","name":"empty_args","pid":1,"tid":1,"ts":30,"dur":1,"args":{}}
    ]"#;
    let t = load_str(text);
    let mm = slice_named(&t, "aten::mm");
    let args = t.args(mm).expect("args");
    assert_eq!(args.len(), 6);
    assert_eq!(args["External id"], serde_json::json!(42));
    assert_eq!(args["Input Dims"], serde_json::json!([[2, 3], [3, 4]]));
    assert_eq!(t.arg_raw(mm, "Input Dims"), Some(&b"[[2, 3], [3, 4]]"[..]));
    assert_eq!(t.arg_raw(mm, "External id"), Some(&b"42"[..]));
    assert_eq!(t.arg_raw(mm, "missing"), None);
    assert_eq!(t.arg_i64(mm, "External id"), Some(42));
    assert_eq!(t.arg_i64(mm, "Sequence number"), Some(17));
    assert_eq!(t.arg_i64(mm, "Input Dims"), None);
    assert_eq!(t.arg_str(mm, "Sequence number").as_deref(), Some("17"));
    assert_eq!(t.arg_str(mm, "External id").as_deref(), Some("42"));
    assert_eq!(t.arg_str(mm, "Call\"stack").as_deref(), Some("a\nb"));
    assert_eq!(
        t.arg_str(mm, "Input type").as_deref(),
        Some(r#"["float", "float"]"#)
    );
    let raw = t.args_raw(mm).unwrap();
    assert!(raw.starts_with(b"{\"External id\"") && raw.ends_with(b"}"));
    let none = slice_named(&t, "no_args");
    assert_eq!(t.args_raw(none), None);
    assert_eq!(t.args(none), None);
    assert_eq!(t.arg_i64(none, "External id"), None);
    let empty = slice_named(&t, "empty_args");
    assert_eq!(t.args(empty).map(|m| m.len()), Some(0));
    assert_eq!(t.arg_raw(empty, "x"), None);
}
