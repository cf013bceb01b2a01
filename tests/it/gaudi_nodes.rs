//! Gaudi node occurrences against the Gaudi profiler's own analysis of the same capture: the
//! corpus holds a real Gaudi 3 HW-trace CSV and the `analyzed_nodes.csv` the vendor's tools
//! wrote for it. Every row of the vendor's table is read here with the `csv` rules of the
//! file itself and compared with the report's `device_nodes`, column by column, to the vendor's
//! printed precision (its times are µs with three decimals; ours are whole ns, so an average of
//! half a nanosecond may print one digit apart).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::Value;

/// µs as the vendor prints them → ns.
fn ns(text: &str) -> f64 {
    text.parse::<f64>().unwrap() * 1000.0
}

#[test]
fn node_occurrences_match_the_vendors_analyzed_nodes() {
    let Some(hw) = support::corpus_path("habana/debug_hw_prof_accel0_001.csv") else {
        return;
    };
    let vendor_path = hw.with_file_name("debug_hw_prof_accel0_001_analyzed_nodes.csv");
    let text = std::fs::read_to_string(&vendor_path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (name_col, start_col) = (col("Node Name"), col("Start time of node"));
    let report = support::json(&["report", "-f", "json", hw.to_str().unwrap()]);
    let ours = report["device_nodes"].as_array().unwrap();
    let mut rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    rows.sort_by(|a, b| {
        a[start_col]
            .parse::<f64>()
            .unwrap()
            .total_cmp(&b[start_col].parse::<f64>().unwrap())
    });
    assert_eq!(ours.len(), rows.len(), "{ours:#?}");
    for (row, node) in rows.iter().zip(ours) {
        // The vendor names a node's later iterations `name iter N`.
        let name = row[name_col].split(" iter ").next().unwrap();
        assert_eq!(node["name"], name);
        for (column, field, tolerance) in [
            ("Duration (us)", "duration_ns", 1.0),
            ("Active (us)", "active_ns", 1.0),
            ("Min single engine (us)", "engine_min_ns", 1.0),
            ("Max single engine (us)", "engine_max_ns", 1.0),
            ("Avg single engine (us)", "engine_avg_ns", 1.0),
        ] {
            let expected = ns(row[col(column)]);
            let got = node[field].as_f64().unwrap();
            assert!(
                (got - expected).abs() <= tolerance,
                "{name} {column}: {got} ns vs the vendor's {expected} ns"
            );
        }
        for (column, field) in [
            ("Num activations", "activations"),
            ("Parallel Engines", "parallel_engines"),
        ] {
            assert_eq!(
                node[field].as_u64().unwrap(),
                row[col(column)].parse::<u64>().unwrap(),
                "{name} {column}"
            );
        }
    }
}

/// A Synapse-only TEF capture, shaped as the Synapse profiler writes it (processes `***Host`,
/// `*MME `, `*TPC `; the host API calls with `recipe id` and `graph name` args; the array left
/// open), of a lazy-mode loop with one `mark_step` per step: one `synLaunchWithExternalEvents`
/// every 5 ms, each followed by 2 ms of MME and TPC work of its recipe. `recipes` lists the
/// recipe id of each launch; a recipe id not seen before is compiled (`synGraphCompile`)
/// right before its launch.
fn synapse_capture(recipes: &[u32]) -> String {
    let mut events = vec![
        r#"{"name":"process_name","ph":"M","pid":11,"tid":0,"args":{"name":"***Host","level":0}}"#
            .to_owned(),
        r#"{"name":"thread_name","ph":"M","pid":11,"tid":0,"args":{"name":"Host API","level":0}}"#
            .to_owned(),
        r#"{"name":"process_name","ph":"M","pid":6,"tid":0,"args":{"name":"*MME ","level":6}}"#
            .to_owned(),
        r#"{"name":"thread_name","ph":"M","pid":6,"tid":0,"args":{"name":"MME 0","level":6}}"#
            .to_owned(),
        r#"{"name":"process_name","ph":"M","pid":7,"tid":0,"args":{"name":"*TPC ","level":7}}"#
            .to_owned(),
        r#"{"name":"thread_name","ph":"M","pid":7,"tid":0,"args":{"name":"TPC 0","level":7}}"#
            .to_owned(),
    ];
    let mut compiled: Vec<u32> = Vec::new();
    for (i, &recipe) in recipes.iter().enumerate() {
        let t0 = 1_000_000.0 + i as f64 * 5_000.0;
        let graph = format!(".graph_dumps/g_0_{recipe}");
        let args = format!(r#"{{"recipe id":{recipe},"graph name":"{graph}"}}"#);
        let mut launch_at = t0;
        if !compiled.contains(&recipe) {
            compiled.push(recipe);
            events.push(format!(
                r#"{{"name":"synGraphCompile","cat":"SW","ph":"X","ts":{t0:.1},"dur":1500.0,"pid":11,"tid":0,"args":{args}}}"#
            ));
            launch_at += 1_600.0;
        }
        events.push(format!(
            r#"{{"name":"synLaunchWithExternalEvents","cat":"SW","ph":"X","ts":{launch_at:.1},"dur":25.0,"pid":11,"tid":0,"args":{args}}}"#
        ));
        let mme = launch_at + 50.0;
        for (pid, name, start, dur) in [
            (6, "g_0_gemm_0", mme, 1_500.0),
            (7, "g_0_add_fwd_0", mme + 1_500.0, 400.0),
        ] {
            events.push(format!(
                r#"{{"name":"{name}","cat":"HW","ph":"X","ts":{start:.1},"dur":{dur:.1},"pid":{pid},"tid":0,"args":{args}}}"#
            ));
        }
    }
    // The Synapse profiler leaves the array open.
    format!("[\n{},\n", events.join(",\n"))
}

#[test]
fn a_synapse_capture_with_renamed_recipes_keeps_one_iteration_per_launch() {
    let dir = tempfile::TempDir::new().unwrap();
    // The recipe ids of a capture where a recompile gives a slot a new id (40963, 40964), and
    // a last launch that closes the sixth iteration (a launch with nothing after it starts no
    // iteration the capture shows whole).
    let path = support::temp_file(
        &dir,
        "synapse.json",
        synapse_capture(&[40962, 40962, 40963, 40962, 40964, 40962, 40962]).as_bytes(),
    );
    let r = support::json(&["report", "-f", "json", path.to_str().unwrap()]);
    let steps = r["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "Iteration#0",
            "Iteration#1",
            "Iteration#2",
            "Iteration#3",
            "Iteration#4",
            "Iteration#5"
        ],
        "{steps:#?}"
    );
    // Each iteration starts at its launch: 5 ms apart (µs × 1000), the compiles inside the
    // iterations that ran a new recipe.
    for w in steps.windows(2) {
        let gap = w[1]["start_ns"].as_i64().unwrap() - w[0]["start_ns"].as_i64().unwrap();
        assert!((3_400_000..=6_600_000).contains(&gap), "{gap}");
    }
    // Both recompiles after the warm-up are reported. Each compile runs just before the launch
    // that needs its recipe, so its time lies at the end of the iteration before: 40963's in #1
    // (launched in #2, past the two warm-up iterations), 40964's in #3.
    let recompiles: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "recompile")
        .collect();
    let in_steps: Vec<&str> = recompiles
        .iter()
        .filter_map(|f| f["step"].as_str())
        .collect();
    assert!(
        in_steps.contains(&"Iteration#1")
            && in_steps.contains(&"Iteration#3")
            && in_steps.len() == 2,
        "{recompiles:#?}"
    );
}
