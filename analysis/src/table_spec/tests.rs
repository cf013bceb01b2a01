//! What every table spec promises: units, keys, optional and nullable columns.

use super::{
    BREAKDOWN_COLUMNS, BreakdownRow, Cell, ColumnSpec, FAMILY_COLUMNS, KERNEL_COLUMNS, OP_COLUMNS,
    OP_PERF_COLUMNS, OPERATOR_COLUMNS, RANK_COLUMNS, Show, Unit, WORKER_COLLECTIVE_COLUMNS,
    WORKER_COLUMNS, WorkerCollective, gpu_summary_columns, shown,
};
use crate::op_perf::{Family, OpPerf, by_family};
use crate::ops::OpStats;
use crate::ranks::RankStats;
use crate::tensorboard::{
    AverageStep, CommOpRow, DistributedRow, GpuSummary, KernelRow, LaunchShape, MeanBreakdown,
    OperatorRow,
};

fn op(name: &str, graph_kernels: Option<u64>) -> OpStats {
    OpStats {
        name: name.to_owned(),
        track_kind: "host".to_owned(),
        category: "cpu_op".to_owned(),
        count: 1,
        total_ns: 10,
        self_ns: 10,
        mean_ns: 10,
        p50_ns: 10,
        p99_ns: 10,
        engine_ns: None,
        max_engines: None,
        graph_kernels,
        graph_device_ns: None,
    }
}

#[test]
fn optional_columns_show_only_when_a_row_has_them() {
    let plain = [op("aten::mm", None)];
    let heads = |rows: &[OpStats], compact| {
        shown(OP_COLUMNS, rows, compact)
            .iter()
            .map(|c| c.header)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        heads(&plain, true),
        [
            "op", "where", "count", "total", "self", "mean", "p50", "p99"
        ]
    );
    assert!(heads(&plain, false).contains(&"category"));
    let graphs = [op("cudaGraphLaunch", Some(12)), op("aten::mm", None)];
    assert!(heads(&graphs, true).ends_with(&["graph kernels"]));
}

/// Checks that `spec`'s keys are unique, that each column's value on `full` (a row with
/// every optional value) is present and of the column's unit, and that exactly the
/// duration columns' keys end in `_ns`.
fn keys_are_unique_and_name_their_unit<T>(spec: &[ColumnSpec<T>], full: &T) {
    let mut keys: Vec<&str> = spec.iter().map(|c| c.key).collect();
    for c in spec {
        let sample = (c.value)(full);
        let unit = match sample {
            Cell::Text(_) | Cell::Flag(_) => Unit::Text,
            Cell::Count(_) | Cell::AtMost(_) | Cell::OutOf(..) => Unit::Count,
            Cell::Id(_) => Unit::Id,
            Cell::Ns(_) | Cell::NsShare(..) => Unit::Ns,
            Cell::Pct(_) => Unit::Pct,
            Cell::Decimal(..) => Unit::Decimal,
            Cell::Empty => panic!("{}: no value on a full row", c.key),
        };
        assert_eq!(c.unit, unit, "{}", c.key);
        assert_eq!(c.key.ends_with("_ns"), c.unit == Unit::Ns, "{}", c.key);
    }
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), spec.len());
}

#[test]
fn export_keys_are_unique_and_name_their_unit() {
    let mut full = op("x", Some(1));
    full.engine_ns = Some(1);
    full.max_engines = Some(1);
    full.graph_device_ns = Some(1);
    keys_are_unique_and_name_their_unit(OP_COLUMNS, &full);
    keys_are_unique_and_name_their_unit(
        OPERATOR_COLUMNS,
        &OperatorRow {
            name: "aten::mm".into(),
            input_shape: Some("[[2, 2]]".into()),
            calls: 1,
            device_self_ns: 1,
            device_total_ns: 1,
            host_self_ns: 1,
            host_total_ns: 1,
            tc_eligible: true,
            tc_self_pct: 1.0,
            tc_total_pct: 1.0,
            call_stacks: Vec::new(),
        },
    );
    keys_are_unique_and_name_their_unit(
        KERNEL_COLUMNS,
        &KernelRow {
            name: "gemm".into(),
            op: Some("aten::mm".into()),
            launch: Some(LaunchShape {
                grid: "[1, 1, 1]".into(),
                block: "[128, 1, 1]".into(),
                registers_per_thread: "32".into(),
                shared_memory: "0".into(),
            }),
            calls: 1,
            total_ns: 1,
            mean_ns: 1.0,
            max_ns: 1,
            min_ns: 1,
            tensor_cores: false,
            op_tc_eligible: Some(true),
            blocks_per_sm: 1.0,
            occupancy_pct: 1.0,
        },
    );
    let worker = DistributedRow {
        rank: 3,
        source: 0,
        computation_ns: 1,
        overlap_ns: 1,
        communication_ns: 1,
        other_ns: 1,
        transfer_ns: 1,
        sync_ns: 1,
        comm_ops: vec![CommOpRow {
            name: "allreduce".into(),
            calls: 4,
            bytes: 10,
            latency_ns: 10,
            transfer_ns: 1,
        }],
    };
    keys_are_unique_and_name_their_unit(WORKER_COLUMNS, &worker);
    let gemm = OpPerf {
        name: "aten::mm".into(),
        family: Family::Gemm,
        input_shape: "[[8, 8], [8, 8]]".into(),
        dtype: "float".into(),
        calls: 2,
        kernel_ns: 1_000,
        kernel_min_ns: 500,
        kernel_max_ns: 500,
        flops_per_call: Some(1024.0),
        bytes_per_call: Some(768.0),
        flops_per_byte: Some(1.33),
        tflops_per_s_mean: Some(0.002),
        tflops_per_s: Some(0.002),
        tbytes_per_s_mean: Some(0.0015),
        pct_of_peak_compute: Some(0.01),
        pct_of_peak_bandwidth: Some(0.05),
        bound: Some("memory".into()),
        gemm: None,
    };
    keys_are_unique_and_name_their_unit(OP_PERF_COLUMNS, &gemm);
    let gpu = GpuSummary {
        source: 1,
        device: 0,
        name: Some("NVIDIA H100".into()),
        utilization_pct: 50.0,
        sm_efficiency_pct: Some(40.0),
        achieved_occupancy_pct: Some(30.0),
        tensor_core_pct: Some(20.0),
    };
    keys_are_unique_and_name_their_unit(gpu_summary_columns(true), &gpu);
    // One input: no input column.
    assert_eq!(gpu_summary_columns(false)[0].key, "device");
    assert_eq!(
        gpu_summary_columns(true).len(),
        gpu_summary_columns(false).len() + 1
    );
    keys_are_unique_and_name_their_unit(FAMILY_COLUMNS, &by_family(&[gemm])[0]);
    let collectives = WorkerCollective::of(std::slice::from_ref(&worker));
    keys_are_unique_and_name_their_unit(WORKER_COLLECTIVE_COLUMNS, &collectives[0]);
}

/// A rank without steps or collectives has no medians and no overlap: exactly the nullable
/// columns lack a value, so an export writes null only where the report writes null.
#[test]
fn a_rank_lacks_values_only_in_its_nullable_columns() {
    let bare = RankStats {
        rank: -1,
        source: 2,
        rank_from: "input order".into(),
        steps: 0,
        step_p50_ns: None,
        compute_p50_ns: None,
        collective_p50_ns: None,
        exposed_comm_p50_ns: None,
        collectives: 0,
        last_arrivals: 0,
        wait_ns: 0,
        clock_offset_ns: 0,
        comm_overlap_pct: None,
    };
    for c in RANK_COLUMNS {
        assert_eq!((c.value)(&bare) == Cell::Empty, c.nullable, "{}", c.key);
    }
    let data: Vec<&str> = RANK_COLUMNS
        .iter()
        .filter(|c| c.show == Show::Data)
        .map(|c| c.key)
        .collect();
    assert_eq!(data, ["source", "collectives", "clock_offset_ns"]);
    assert!(
        shown(RANK_COLUMNS, std::slice::from_ref(&bare), false)
            .iter()
            .all(|c| c.show != Show::Data)
    );
}

/// An average step's parts are its mean parts rounded to the ns, each with its share of the
/// mean step; a step's own parts have no share.
#[test]
fn an_average_steps_parts_carry_their_share() {
    let average = AverageStep {
        source: 0,
        rank: None,
        dur_ns: 1000.0,
        breakdown: MeanBreakdown {
            kernel_ns: 250.4,
            other_ns: 749.6,
            ..MeanBreakdown::default()
        },
    };
    let row = BreakdownRow::average("average".into(), &average);
    keys_are_unique_and_name_their_unit(BREAKDOWN_COLUMNS, &row);
    fn cell<'r>(key: &str, row: &'r BreakdownRow) -> Option<Cell<'r>> {
        BREAKDOWN_COLUMNS
            .iter()
            .find(|c| c.key == key)
            .map(|c| (c.value)(row))
    }
    match cell("kernel_ns", &row) {
        Some(Cell::NsShare(250, share)) => assert!((share - 25.04).abs() < 1e-9, "{share}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(cell("dur_ns", &row), Some(Cell::Ns(1000)));
    let step = BreakdownRow {
        shares: None,
        ..row
    };
    assert_eq!(cell("other_ns", &step), Some(Cell::Ns(750)));
}

#[test]
fn per_call_figures_round_and_survive_zero_calls() {
    let mut worker = WorkerCollective {
        rank: 0,
        op: CommOpRow {
            name: "allreduce".into(),
            calls: 4,
            bytes: 10,
            latency_ns: 10,
            transfer_ns: 1,
        },
    };
    let column = |key: &str| {
        WORKER_COLLECTIVE_COLUMNS
            .iter()
            .find(|c| c.key == key)
            .map(|c| c.value)
    };
    let (Some(bytes), Some(latency)) = (column("mean_bytes"), column("mean_latency_ns")) else {
        panic!("no per-call columns");
    };
    assert_eq!(bytes(&worker), Cell::Count(3)); // 2.5 rounds away from 0
    assert_eq!(latency(&worker), Cell::Ns(3));
    worker.op.calls = 0;
    assert_eq!(bytes(&worker), Cell::Count(10));
}

#[test]
fn the_by_shape_and_by_op_columns_show_only_in_their_tables() {
    let heads = |rows: &[KernelRow]| {
        shown(KERNEL_COLUMNS, rows, true)
            .iter()
            .map(|c| c.header)
            .collect::<Vec<_>>()
    };
    let mut row = KernelRow {
        name: "gemm".into(),
        op: None,
        launch: None,
        calls: 1,
        total_ns: 1,
        mean_ns: 1.0,
        max_ns: 1,
        min_ns: 1,
        tensor_cores: false,
        op_tc_eligible: None,
        blocks_per_sm: 0.0,
        occupancy_pct: 0.0,
    };
    assert!(!heads(std::slice::from_ref(&row)).contains(&"op"));
    // "N/A" is the plugin's launching op for a kernel with none: the column shows.
    row.op = Some("N/A".into());
    assert!(heads(std::slice::from_ref(&row)).contains(&"op"));
}
