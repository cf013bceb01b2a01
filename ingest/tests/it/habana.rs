//! Gaudi CSV ingest (`habana-hw-csv`, `habana-analyzed-nodes`) on the real Gaudi3 sample
//! (`samples/habana/`, a copy of `../shared/corpus/habana/`): exact counts (checked with
//! Python's `csv` module), engine classes and order, counters, damage, header errors, and the
//! binding of Analyzed Nodes rows to HW-trace slices.
//!
//! The corpus copy is compared with the samples copy; without the corpus that test prints a
//! note and passes, except under `CI=true`, where it fails.

// Helpers outside `#[test]` functions panic on failure too, by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use steplens_ingest::model::{CategoryClass, DeviceKind, EngineClass, TrackKind};
use steplens_ingest::{
    Format, FormatId, IngestError, LoadOptions, Timeline, load, load_many, sniff,
};
use tempfile::TempDir;

const HW: &str = "debug_hw_prof_accel0_001.csv";
const NODES: &str = "debug_hw_prof_accel0_001_analyzed_nodes.csv";

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/habana")
}

fn checked(timeline: Timeline) -> Timeline {
    if let Err(e) = common::check_invariants(&timeline) {
        panic!("invariants violated:\n{e}");
    }
    timeline
}

fn load_path(path: &Path) -> Timeline {
    checked(load(path, &LoadOptions::default(), None).unwrap_or_else(|e| panic!("{e}")))
}

fn engines(t: &Timeline, class: &EngineClass) -> Vec<usize> {
    t.tracks
        .iter()
        .enumerate()
        .filter(
            |(_, tr)| matches!(&tr.kind, TrackKind::DeviceEngine { class: c, .. } if c == class),
        )
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn corpus_copy_matches_samples() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/habana");
    if !corpus.is_dir() {
        let msg = format!("Gaudi corpus not found at {}", corpus.display());
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{msg}; CI=true, so this test cannot be skipped"
        );
        eprintln!("note: {msg}: corpus comparison skipped (samples/habana is tested)");
        return;
    }
    for name in [HW, NODES] {
        let a = std::fs::read(corpus.join(name)).unwrap();
        let b = std::fs::read(samples().join(name)).unwrap();
        assert_eq!(a, b, "{name}: samples/habana copy differs from the corpus");
        let t = load_path(&corpus.join(name));
        assert!(t.event_count() > 0);
    }
}

#[test]
fn sniffs_by_header() {
    let hw = std::fs::read(samples().join(HW)).unwrap();
    let nodes = std::fs::read(samples().join(NODES)).unwrap();
    assert_eq!(sniff(&hw), Format::Trace(FormatId::HabanaHwCsv));
    assert_eq!(sniff(&nodes), Format::Trace(FormatId::HabanaAnalyzedNodes));
    assert_eq!(FormatId::HabanaHwCsv.as_str(), "habana-hw-csv");
    assert_eq!(
        FormatId::HabanaAnalyzedNodes.as_str(),
        "habana-analyzed-nodes"
    );
    assert_eq!(sniff(b"a,b,c\n1,2,3\n"), Format::Csv);
    assert_eq!(
        sniff(br#"{"analyzer_metadata": [], "version": 1}"#),
        Format::Trace(FormatId::HabanaAnalyzedNodes)
    );
    assert_eq!(
        sniff(
            br#"{"traceEvents": [{"name": "analyzer_metadata"}], "x": {"analyzer_metadata": 1}}"#
        ),
        Format::Trace(FormatId::KinetoJson)
    );
}

#[test]
fn hw_csv_exact_counts() {
    let t = load_path(&samples().join(HW));
    let src = &t.sources[0];
    assert_eq!(src.format, "habana-hw-csv");
    assert_eq!(src.events, 276);
    assert_eq!(
        src.events_by_phase,
        vec![('B', 56), ('C', 38), ('E', 56), ('i', 126)]
    );
    assert_eq!(t.device.kind, DeviceKind::Hpu);
    assert_eq!(t.device.count, 1);

    // 48 TPC + 8 MME engine tracks, MME first, then by die and index.
    let tpc = engines(&t, &EngineClass::Tpc);
    let mme = engines(&t, &EngineClass::Mme);
    assert_eq!((tpc.len(), mme.len()), (48, 8));
    let device: Vec<&str> = t
        .tracks
        .iter()
        .filter(|tr| tr.kind.is_device())
        .map(|tr| tr.name.as_str())
        .collect();
    assert_eq!(device.len(), 56);
    assert_eq!(&device[..3], ["[HD0] MME", "[HD1] MME", "[HD2] MME"]);
    assert_eq!(
        &device[7..11],
        ["[HD7] MME", "[HD0] TPC 0", "[HD0] TPC 1", "[HD0] TPC 2"]
    );
    assert_eq!(device[55], "[HD7] TPC 5");
    for tr in t.tracks.iter().filter(|tr| tr.kind.is_device()) {
        assert_eq!(tr.process_name, "HPU 0");
        assert!(matches!(
            tr.kind,
            TrackKind::DeviceEngine {
                device: Some(0),
                ..
            }
        ));
    }

    // Slices: 48 TPC (1 per TPC engine), 8 MME, all device work named after the node.
    assert_eq!(t.slices.len(), 56);
    let count_on = |tracks: &[usize], name: &str| {
        tracks
            .iter()
            .flat_map(|&tr| t.tracks[tr].slices.clone())
            .filter(|&i| t.slice_name(i) == name && t.slice_class(i) == CategoryClass::Kernel)
            .count()
    };
    assert_eq!(count_on(&tpc, "g_1_conv_0_tpc_packing"), 48);
    assert_eq!(count_on(&mme, "g_1_conv_0"), 8);
    assert!(t.stats.unmatched_ends == 0 && t.stats.unclosed_begins == 0);

    // The first TPC slice: `[HD0] TPC 5`, BEGIN 554804519.937268 → END 554804520.095267 µs.
    let first = t
        .tracks
        .iter()
        .find(|tr| tr.name == "[HD0] TPC 5")
        .unwrap()
        .slices
        .start;
    assert_eq!(t.slices.start[first as usize], 554_804_519_937);
    assert_eq!(t.slices.dur[first as usize], 158);
    // The first MME slice: 554804527.286214 → 554804545.218083 µs on `[HD0] MME`.
    let mme0 = t.tracks[mme[0]].slices.start;
    assert_eq!(t.tracks[mme[0]].name, "[HD0] MME");
    assert_eq!(t.slices.start[mme0 as usize], 554_804_527_286);
    assert_eq!(t.slices.end(mme0), 554_804_545_218);

    // Instants: 30 QMAN + 48 VPU halt + 48 end-of-kernel writes, on TPC tracks.
    assert_eq!(t.instants.len(), 126);
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, &name) in t.instants.name.iter().enumerate() {
        *by_name.entry(t.strings.get(name)).or_default() += 1;
        let kind = &t.tracks[t.instants.track[i] as usize].kind;
        assert!(matches!(
            kind,
            TrackKind::DeviceEngine {
                class: EngineClass::Tpc,
                ..
            }
        ));
    }
    assert_eq!(
        by_name.into_iter().collect::<Vec<_>>(),
        vec![
            ("TPC_END_OF_KERNEL_MESSAGE_WRITE", 48),
            ("TPC_QMAN_CMD_EXE", 30),
            ("TPC_VPU_HALT", 48)
        ]
    );

    // Counters: 38 samples on 34 series (30 TPC back-pressure, 4 cache slices × 2 samples).
    assert_eq!(t.counters.len(), 38);
    let counter_tracks: Vec<&str> = t
        .tracks
        .iter()
        .filter(|tr| tr.kind == TrackKind::Counter)
        .map(|tr| tr.name.as_str())
        .collect();
    assert_eq!(counter_tracks.len(), 34);
    let cache: Vec<&&str> = counter_tracks
        .iter()
        .filter(|n| n.contains("Cache Slice"))
        .collect();
    assert_eq!(cache.len(), 4);
    assert!(
        counter_tracks.contains(&"[D0] Cache Slice: Outgoing HBM partial writes"),
        "{counter_tracks:?}"
    );
    assert_eq!(
        t.counters.value.iter().filter(|&&v| v > 9.2e18).count(),
        4,
        "wrapped u64 values stay as written"
    );
    let wrapped = src
        .warnings
        .iter()
        .find(|w| w.code == "spmu_wrapped")
        .expect("spmu_wrapped warning");
    assert!(wrapped.message.starts_with("4 SPMU"), "{}", wrapped.message);

    // Operation / Data Type and the recipe are kept as source metadata.
    let top: BTreeMap<&str, &str> = src
        .top_level
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let nodes: serde_json::Value = serde_json::from_str(top["nodes"]).unwrap();
    assert_eq!(nodes["g_1_conv_0"]["Operation"], "Convolution");
    assert_eq!(
        nodes["g_1_conv_0_tpc_packing"]["Operation"],
        "conv_weight_packing_fwd_f32"
    );
    assert_eq!(nodes["g_1_conv_0_tpc_packing"]["Data Type"], "float32");
    let recipes: serde_json::Value = serde_json::from_str(top["recipes"]).unwrap();
    assert_eq!(recipes.as_array().unwrap().len(), 1);
    assert_eq!(recipes[0]["Recipe ID"], "61055");
}

#[test]
fn hw_csv_cut_in_a_row_keeps_the_rows_before() {
    let bytes = std::fs::read(samples().join(HW)).unwrap();
    // Cut in the middle of the 201st data row (line 202).
    let line_starts: Vec<usize> = std::iter::once(0).chain(memchr_lines(&bytes)).collect();
    let row_start = line_starts[201];
    let cut = row_start + 60;
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("cut.csv");
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let t = load_path(&path);
    assert_eq!(t.sources[0].events, 200);
    let w = t.sources[0]
        .warnings
        .iter()
        .find(|w| w.code == "damaged")
        .expect("damaged warning");
    assert_eq!(w.offset, Some(row_start as u64));
    assert!(w.message.contains("line 202"), "{}", w.message);
    assert!(
        w.message.contains(&format!("byte {row_start}")),
        "{}",
        w.message
    );
}

fn memchr_lines(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i + 1)
}

#[test]
fn hw_csv_pairs_quotes_and_unmatched_events() {
    let header = "Name,Trace Source,Engine,Event type,Timestamp[usec],recipeHandle,streamHandle,Recipe ID,Recipe name,Context ID,Device,Operation,Data Type,HW Event port,HW Event description,SPMU value,BMON min,BMON avg,BMON max,BMON matches,BMON configured cycles,NIC Packets amount,Misc\n";
    let row = |name: &str, engine: &str, ev: &str, ts: &str, ctx: &str| {
        format!(
            "{name},HW,{engine},{ev},{ts},0x1,0x2,7,\"/r/a,b\",{ctx},accel1,\"op, \"\"x\"\"\",bf16,1,EVT,,,,,,,,\n"
        )
    };
    let text = [
        header.to_owned(),
        row("\"n,1\"", "[HD0] TPC 0", "BEGIN", "10.000001", "1"),
        row("n2", "[HD0] TPC 0", "BEGIN", "11.0", "2"),
        row("n2", "[HD0] TPC 0", "END", "12.0", "2"),
        row("\"n,1\"", "[HD0] TPC 0", "END", "13.0", "1"),
        row("n3", "[HD0] MME", "END", "14.0", "1"),
        row("n4", "[HD1] MME", "BEGIN", "15.0", "1"),
        row("n4", "[HD1] MME", "INSTANT", "16.5", "1"),
    ]
    .concat();
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("x.csv");
    std::fs::write(&path, &text).unwrap();
    let t = load_path(&path);
    assert_eq!(t.sources[0].events, 7);
    let names: Vec<(&str, i64, i64)> = (0..t.slices.len() as u32)
        .map(|i| {
            (
                t.slice_name(i),
                t.slices.start[i as usize],
                t.slices.dur[i as usize],
            )
        })
        .collect();
    // `[HD1] MME` sorts before `[HD0] TPC 0` (MME first); its BEGIN is closed at the last
    // time seen on the track (its own start: instants do not extend it).
    assert_eq!(
        names,
        vec![
            ("n4", 15_000, 0),
            ("n,1", 10_000, 3_000),
            ("n2", 11_000, 1_000)
        ]
    );
    assert_eq!(t.stats.unmatched_ends, 1);
    assert_eq!(t.stats.unclosed_begins, 1);
    assert!(t.tracks.iter().any(|tr| tr.process_name == "HPU 1"));
    let top = &t.sources[0].top_level;
    let nodes = &top.iter().find(|(k, _)| k == "nodes").unwrap().1;
    assert!(nodes.contains(r#""Operation":"op, \"x\"""#), "{nodes}");
}

#[test]
fn wrong_header_is_an_error_naming_the_file() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("wrong_header.csv");
    std::fs::write(
        &path,
        "Name,Trace Source,Engine,Event type,When,Device\nx,HW,[HD0] MME,BEGIN,1.0,accel0\n",
    )
    .unwrap();
    let err = load(&path, &LoadOptions::default(), None).unwrap_err();
    assert!(matches!(err, IngestError::NotATrace { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("wrong_header.csv"), "{msg}");
    assert!(msg.contains("Timestamp[usec]"), "{msg}");

    let other = dir.path().join("other.csv");
    std::fs::write(&other, "a,b,c\n1,2,3\n").unwrap();
    let err = load(&other, &LoadOptions::default(), None).unwrap_err();
    assert_eq!(err.code(), "unsupported");
    assert!(err.to_string().contains("other.csv"), "{err}");
}

#[test]
fn analyzed_nodes_alone() {
    let t = load_path(&samples().join(NODES));
    assert_eq!(t.sources[0].format, "habana-analyzed-nodes");
    assert_eq!(t.sources[0].events, 4);
    assert_eq!(t.slices.len(), 4);
    assert_eq!(t.node_metrics.len(), 4);
    // Not device work: the node lanes never count as busy engines.
    assert!(!t.has_device());
    assert!((0..4).all(|i| t.slice_class(i) == CategoryClass::Derived));
    let lanes: Vec<&str> = t.tracks.iter().map(|tr| tr.name.as_str()).collect();
    assert_eq!(lanes, ["MME nodes", "TPC nodes"]);
    let mme = &t.node_metrics[0];
    assert_eq!(mme.name, "g_1_conv_0");
    assert_eq!(mme.unit, "MME");
    assert_eq!(mme.op_type.as_deref(), Some("Convolution"));
    assert_eq!(
        (mme.start_ns, mme.end_ns),
        (554_804_527_286, 554_804_546_100)
    );
    assert_eq!(mme.duration_us, Some(18.814));
    assert_eq!(mme.exposed_mme_us, Some(18.814));
    assert_eq!(mme.unexposed_mme_us, Some(0.0));
    assert_eq!(mme.exposed_tpc_us, None);
    assert_eq!(mme.mme_utilization_pct, None);
    assert_eq!(mme.num_activations, Some(8));
    assert_eq!(mme.input_shapes, None, "`[]` is missing");
    assert!(mme.slice.is_some());
    assert!(mme.hw_slices.is_empty());
    let iter2 = &t.node_metrics[2];
    assert_eq!(iter2.name, "g_1_conv_0_tpc_packing iter 2");
    assert_eq!(iter2.num_activations, Some(32));
    assert_eq!(iter2.exposed_tpc_us, Some(1.878));
}

#[test]
fn analyzed_nodes_attach_to_hw_slices() {
    let t = checked(
        load_many(
            &[&samples().join(HW), &samples().join(NODES)],
            &LoadOptions::default(),
            None,
        )
        .unwrap(),
    );
    assert_eq!(t.sources.len(), 2);
    assert_eq!(t.slices.len(), 60);
    assert_eq!(t.device.count, 1);
    assert_eq!(engines(&t, &EngineClass::Tpc).len(), 48);
    assert_eq!(engines(&t, &EngineClass::Mme).len(), 8);
    assert_eq!(t.node_metrics.len(), 4);
    let mut all = Vec::new();
    for node in &t.node_metrics {
        let own = node.slice.expect("own slice");
        assert_eq!(t.slice_name(own), node.name);
        assert_eq!(t.slice_track(own).unwrap().source, 1);
        assert_eq!(
            node.hw_slices.len() as u64,
            node.num_activations.unwrap(),
            "{}",
            node.name
        );
        for &s in &node.hw_slices {
            assert_eq!(t.slice_track(s).unwrap().source, 0);
            assert_eq!(t.slice_class(s), CategoryClass::Kernel);
            assert!(node.name.starts_with(t.slice_name(s)));
            assert!(t.slices.start[s as usize] < node.end_ns && t.slices.end(s) > node.start_ns);
        }
        all.extend(node.hw_slices.iter().copied());
    }
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 56, "every HW slice belongs to exactly one node");
}

#[test]
fn analyzed_nodes_json_variant() {
    let json = r#"{"analyzer_metadata": [
        {"Unit": "TPC", "Unique node id": 3, "Node Name": "n iter 2", "Op Type": "relu_fwd_bf16",
         "Start time of node": "100.000000", "End time of node": 101.5, "Duration (us)": 1.5,
         "Exposed tpc (us)": "nan", "MME Origin Expected (usec)": 2.0, "Input shapes": "[[1, 2]]",
         "Num activations": 4},
        {"Unit": "TPC", "Node Name": "broken"}
    ]}"#;
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("trace_analyzer.json");
    std::fs::write(&path, json).unwrap();
    let t = load_path(&path);
    assert_eq!(t.sources[0].format, "habana-analyzed-nodes");
    assert_eq!(t.node_metrics.len(), 1);
    let n = &t.node_metrics[0];
    assert_eq!((n.start_ns, n.end_ns), (100_000, 101_500));
    assert_eq!(n.duration_us, Some(1.5));
    assert_eq!(n.exposed_tpc_us, None);
    assert_eq!(n.num_activations, Some(4));
    assert_eq!(n.input_shapes.as_deref(), Some("[[1, 2]]"));
    assert!(
        t.sources[0]
            .warnings
            .iter()
            .any(|w| w.code == "malformed_row")
    );
}
