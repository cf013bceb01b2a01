//! Memory from `[memory]` events against `samples/memory/*.truth.json`, which
//! `samples/memory/truth.py` computes from the traces' own events (rules in its docstring):
//! per device the counts, peaks, integrity and never-freed bytes exactly, the per-step
//! baselines and peaks exactly, `steps[].memory_peak_bytes`, and `memory_growth` on the leak
//! (naming the planted op and line) and nowhere else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

use crate::support;

fn report(name: &str) -> Value {
    let path = support::repo().join("samples/memory").join(name);
    let out = support::steplens(&["report", "-f", "json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", support::stderr(&out));
    serde_json::from_str(&support::stdout(&out)).unwrap()
}

#[test]
fn memory_matches_the_truth_read_from_the_events() {
    for name in ["train_clean", "train_leak"] {
        let truth =
            support::read_json(&support::repo().join(format!("samples/memory/{name}.truth.json")));
        let r = report(&format!("{name}.json.gz"));
        let want = truth["devices"].as_array().unwrap();
        let got = r["memory"].as_array().expect("a memory section");
        assert_eq!(got.len(), want.len(), "{name}: devices");
        for (w, g) in want.iter().zip(got) {
            for key in [
                "device",
                "allocations",
                "frees",
                "bytes_allocated",
                "peak_allocated_bytes",
                "min_allocated_bytes",
                "peak_reserved_bytes",
                "integrity_breaks",
                "never_freed_bytes",
            ] {
                assert_eq!(g[key], w[key], "{name}: {key}");
            }
            let (ws, gs) = (
                w["steps"].as_array().unwrap(),
                g["steps"].as_array().unwrap(),
            );
            assert_eq!(gs.len(), ws.len(), "{name}: steps");
            for (ws, gs) in ws.iter().zip(gs) {
                for key in ["step", "start_allocated_bytes", "peak_allocated_bytes"] {
                    assert_eq!(gs[key], ws[key], "{name} {}: {key}", ws["step"]);
                }
            }
            for (step, ws) in r["steps"].as_array().unwrap().iter().zip(ws) {
                assert_eq!(step["memory_peak_bytes"], ws["peak_allocated_bytes"]);
            }
        }
        let growth: Vec<&Value> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == "memory_growth")
            .collect();
        let expected = truth["expected_findings"].as_array().unwrap();
        assert_eq!(
            growth.len(),
            expected.len(),
            "{name}: memory_growth findings"
        );
        for (g, e) in growth.iter().zip(expected) {
            assert_eq!(g["ops"][0], e["op"], "{name}");
            assert_eq!(g["call_site"], e["call_site"], "{name}");
            assert_eq!(g["lost_ns"], 0, "memory costs no step time");
        }
        // The clean run gets no finding of any kind.
        if expected.is_empty() {
            assert_eq!(r["findings"], Value::Array(Vec::new()), "{name}");
        }
    }
}

/// A CUDA trace written by hand: 1 GiB reserved around 100 MiB allocated (fragmentation), a
/// lost event (the totals jump by more than `Bytes`), a device of 1.06 GiB.
#[test]
fn reserved_slack_lost_events_and_device_capacity() {
    let mib = 1_i64 << 20;
    let mem = |ts: i64, bytes: i64, total: i64, addr: i64| {
        format!(
            r#"{{"ph":"i","s":"t","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":{ts},
               "args":{{"Device Type":1,"Device Id":0,"Addr":{addr},"Bytes":{bytes},"Total Allocated":{total},"Total Reserved":{}}}}}"#,
            1024 * mib
        )
    };
    let events = [
        r#"{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":100}"#.to_owned(),
        r#"{"ph":"X","cat":"cpu_op","name":"aten::empty","pid":1,"tid":1,"ts":1,"dur":50}"#.to_owned(),
        mem(2, 60 * mib, 60 * mib, 1),
        // 40 MiB allocated with its event lost: the next total is 40 MiB higher than Bytes says.
        mem(3, 10 * mib, 110 * mib, 2),
        mem(60, -10 * mib, 100 * mib, 2),
    ];
    let trace = format!(
        r#"{{"deviceProperties":[{{"id":0,"name":"Tiny GPU","totalGlobalMem":{}}}],"traceEvents":[{}]}}"#,
        1088 * mib,
        events.join(",")
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    std::fs::write(&path, trace).unwrap();
    let out = support::steplens(&["report", "-f", "json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", support::stderr(&out));
    let r: Value = serde_json::from_str(&support::stdout(&out)).unwrap();
    let m = &r["memory"][0];
    assert_eq!(m["device"], "cuda:0");
    assert_eq!(m["peak_allocated_bytes"], 110 * mib);
    assert_eq!(m["slack_at_peak_bytes"], (1024 - 110) * mib);
    assert_eq!(m["integrity_breaks"], 1);
    assert_eq!(m["device_total_bytes"], 1088 * mib);
    assert_eq!(m["never_freed_bytes"], 60 * mib);
    let kinds: Vec<&str> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["reserved_slack"]);
    // 110 MiB of 1088 MiB is far from full: no out-of-memory note.
    let text = support::stdout(&support::steplens(&["report", path.to_str().unwrap()]));
    assert!(text.contains("memory peak 110.0 MiB on cuda:0"), "{text}");
    assert!(!text.contains("close to out of memory"), "{text}");
}
