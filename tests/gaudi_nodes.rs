//! Gaudi node occurrences against the Gaudi profiler's own analysis of the same capture: the
//! corpus holds a real Gaudi 3 HW-trace CSV and the `analyzed_nodes.csv` the vendor's tools
//! wrote for it. Every row of the vendor's table is read here with the `csv` rules of the
//! file itself and compared with the report's `device_nodes`, column by column, to the vendor's
//! printed precision (its times are µs with three decimals; ours are whole ns, so an average of
//! half a nanosecond may print one digit apart).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

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
