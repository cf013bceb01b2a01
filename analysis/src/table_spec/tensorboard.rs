//! The TensorBoard plugin's tables: operators, kernels, and the distributed view's workers and
//! their collectives.

use super::{Cell, ColumnSpec, Unit, nullable, opt_decimal, opt_text};

/// The plugin's GPU summary, one row per device; the input column first, for a run of several
/// inputs ([`gpu_summary_columns`]).
const GPU_SUMMARY_COLUMNS: &[ColumnSpec<GpuSummary>] = &[
    ColumnSpec::new("source", "input", Unit::Count, |g| {
        Cell::Count(u64::from(g.source))
    }),
    ColumnSpec::new("device", "device", Unit::Id, |g| Cell::Id(g.device)),
    ColumnSpec::new("name", "name", Unit::Text, |g| opt_text(g.name.as_deref())),
    ColumnSpec::new("utilization_pct", "GPU utilization %", Unit::Decimal, |g| {
        Cell::Decimal(g.utilization_pct, 2)
    }),
    nullable(ColumnSpec::new(
        "sm_efficiency_pct",
        "est. SM efficiency %",
        Unit::Decimal,
        |g| opt_decimal(g.sm_efficiency_pct, 2),
    )),
    nullable(ColumnSpec::new(
        "achieved_occupancy_pct",
        "est. achieved occupancy %",
        Unit::Decimal,
        |g| opt_decimal(g.achieved_occupancy_pct, 2),
    )),
    nullable(ColumnSpec::new(
        "tensor_core_pct",
        "kernel time using Tensor Cores %",
        Unit::Decimal,
        |g| opt_decimal(g.tensor_core_pct, 2),
    )),
];

/// The GPU summary's columns: with the input's index when the run has several inputs.
#[must_use]
pub fn gpu_summary_columns(several_inputs: bool) -> &'static [ColumnSpec<GpuSummary>] {
    if several_inputs {
        GPU_SUMMARY_COLUMNS
    } else {
        &GPU_SUMMARY_COLUMNS[1..]
    }
}

use crate::tensorboard::{
    AverageStep, CommOpRow, DistributedRow, GpuSummary, KernelRow, OperatorRow, OverviewStep,
};

/// The TensorBoard plugin's operator tables ([`crate::report::Report::operators`] and
/// [`crate::report::Report::operators_by_shape`]); the input shape shows in the second.
pub const OPERATOR_COLUMNS: &[ColumnSpec<OperatorRow>] = &[
    ColumnSpec {
        cut: 60,
        ..ColumnSpec::new("name", "op", Unit::Text, |r| Cell::Text(&r.name))
    },
    ColumnSpec {
        cut: 40,
        optional: true,
        ..ColumnSpec::new("input_shape", "input shape", Unit::Text, |r| {
            opt_text(r.input_shape.as_deref())
        })
    },
    ColumnSpec::new("calls", "calls", Unit::Count, |r| Cell::Count(r.calls)),
    ColumnSpec::new("device_self_ns", "device self", Unit::Ns, |r| {
        Cell::Ns(r.device_self_ns)
    }),
    ColumnSpec::new("device_total_ns", "device total", Unit::Ns, |r| {
        Cell::Ns(r.device_total_ns)
    }),
    ColumnSpec::new("host_self_ns", "host self", Unit::Ns, |r| {
        Cell::Ns(r.host_self_ns)
    }),
    ColumnSpec::new("host_total_ns", "host total", Unit::Ns, |r| {
        Cell::Ns(r.host_total_ns)
    }),
    ColumnSpec::new("tc_eligible", "TC eligible", Unit::Text, |r| {
        Cell::Flag(r.tc_eligible)
    }),
    ColumnSpec::new("tc_self_pct", "TC self %", Unit::Decimal, |r| {
        Cell::Decimal(r.tc_self_pct, 2)
    }),
    ColumnSpec::new("tc_total_pct", "TC total %", Unit::Decimal, |r| {
        Cell::Decimal(r.tc_total_pct, 2)
    }),
];

/// The TensorBoard plugin's kernel tables ([`crate::report::Report::kernels`] and
/// [`crate::report::Report::kernels_by_op`]); the launching op and launch shape show in the
/// second.
pub const KERNEL_COLUMNS: &[ColumnSpec<KernelRow>] = &[
    ColumnSpec {
        cut: 60,
        ..ColumnSpec::new("name", "kernel", Unit::Text, |r| Cell::Text(&r.name))
    },
    ColumnSpec {
        cut: 40,
        optional: true,
        ..ColumnSpec::new("op", "op", Unit::Text, |r| opt_text(r.op.as_deref()))
    },
    ColumnSpec {
        optional: true,
        ..ColumnSpec::new("grid", "grid", Unit::Text, |r| {
            opt_text(r.launch.as_ref().map(|l| l.grid.as_str()))
        })
    },
    ColumnSpec {
        optional: true,
        ..ColumnSpec::new("block", "block", Unit::Text, |r| {
            opt_text(r.launch.as_ref().map(|l| l.block.as_str()))
        })
    },
    ColumnSpec::new("calls", "calls", Unit::Count, |r| Cell::Count(r.calls)),
    ColumnSpec::new("total_ns", "total", Unit::Ns, |r| Cell::Ns(r.total_ns)),
    ColumnSpec::new("mean_ns", "mean", Unit::Ns, |r| {
        Cell::Ns(r.mean_ns.round() as i64)
    }),
    ColumnSpec::new("max_ns", "max", Unit::Ns, |r| Cell::Ns(r.max_ns)),
    ColumnSpec::new("min_ns", "min", Unit::Ns, |r| Cell::Ns(r.min_ns)),
    ColumnSpec::new("tensor_cores", "Tensor Cores", Unit::Text, |r| {
        Cell::Flag(r.tensor_cores)
    }),
    ColumnSpec::new("blocks_per_sm", "blocks per SM", Unit::Decimal, |r| {
        Cell::Decimal(r.blocks_per_sm, 2)
    }),
    ColumnSpec::new("occupancy_pct", "est. occupancy %", Unit::Decimal, |r| {
        Cell::Decimal(r.occupancy_pct, 2)
    }),
];

/// The TensorBoard plugin's distributed view, one row per worker: its mean step split into
/// computation, overlap, communication and other time.
pub const WORKER_COLUMNS: &[ColumnSpec<DistributedRow>] = &[
    ColumnSpec::new("rank", "rank", Unit::Id, |r| Cell::Id(r.rank)),
    ColumnSpec::new("computation_ns", "computation", Unit::Ns, |r| {
        Cell::Ns(r.computation_ns)
    }),
    ColumnSpec::new("overlap_ns", "overlap", Unit::Ns, |r| {
        Cell::Ns(r.overlap_ns)
    }),
    ColumnSpec::new("communication_ns", "communication", Unit::Ns, |r| {
        Cell::Ns(r.communication_ns)
    }),
    ColumnSpec::new("other_ns", "other", Unit::Ns, |r| Cell::Ns(r.other_ns)),
    ColumnSpec::new("transfer_ns", "data transfer", Unit::Ns, |r| {
        Cell::Ns(r.transfer_ns)
    }),
    ColumnSpec::new("sync_ns", "synchronizing", Unit::Ns, |r| {
        Cell::Ns(r.sync_ns)
    }),
];

/// One collective of one worker, a row of [`WORKER_COLLECTIVE_COLUMNS`].
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerCollective {
    /// The worker's rank.
    pub rank: i64,
    /// The collective's totals on that worker.
    pub op: CommOpRow,
}

impl WorkerCollective {
    /// Every worker's collectives, worker by worker.
    #[must_use]
    pub fn of(workers: &[DistributedRow]) -> Vec<Self> {
        workers
            .iter()
            .flat_map(|w| {
                w.comm_ops.iter().map(|op| Self {
                    rank: w.rank,
                    op: op.clone(),
                })
            })
            .collect()
    }

    fn per_call(&self, total: f64) -> f64 {
        total / self.op.calls.max(1) as f64
    }
}

/// The distributed view's collectives per worker: calls, bytes and latency, in total and per
/// call.
pub const WORKER_COLLECTIVE_COLUMNS: &[ColumnSpec<WorkerCollective>] = &[
    ColumnSpec::new("rank", "rank", Unit::Id, |r| Cell::Id(r.rank)),
    ColumnSpec::new("collective", "collective", Unit::Text, |r| {
        Cell::Text(&r.op.name)
    }),
    ColumnSpec::new("calls", "calls", Unit::Count, |r| Cell::Count(r.op.calls)),
    ColumnSpec::new("bytes", "total bytes", Unit::Count, |r| {
        Cell::Count(r.op.bytes)
    }),
    ColumnSpec::new("mean_bytes", "avg bytes", Unit::Count, |r| {
        Cell::Count(r.per_call(r.op.bytes as f64).round() as u64)
    }),
    ColumnSpec::new("latency_ns", "total latency", Unit::Ns, |r| {
        Cell::Ns(r.op.latency_ns)
    }),
    ColumnSpec::new("mean_latency_ns", "avg latency", Unit::Ns, |r| {
        Cell::Ns(r.per_call(r.op.latency_ns as f64).round() as i64)
    }),
    ColumnSpec::new("transfer_ns", "data transfer", Unit::Ns, |r| {
        Cell::Ns(r.op.transfer_ns)
    }),
];

/// One row of the plugin's step-time breakdown: a step, or an input's average step.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakdownRow {
    /// The step's label (its name, with its input or rank in a run of several).
    pub label: String,
    /// Its duration, ns.
    pub dur_ns: i64,
    /// Its parts, ns, in [`crate::tensorboard::Breakdown::LABELS`] order.
    pub parts: [i64; 8],
    /// Each part's share of the step, percent: an average step's row gives them, as the
    /// plugin's summary does.
    pub shares: Option<[f64; 8]>,
}

impl BreakdownRow {
    /// Step `step`'s row, labelled `label`.
    #[must_use]
    pub fn step(label: String, step: &OverviewStep) -> Self {
        Self {
            label,
            dur_ns: step.dur_ns,
            parts: step.breakdown.parts(),
            shares: None,
        }
    }

    /// An input's average step, labelled `label`: its mean parts rounded to the ns, with their
    /// shares of the mean step.
    #[must_use]
    pub fn average(label: String, average: &AverageStep) -> Self {
        let parts = average.breakdown.parts();
        let share = |v: f64| {
            if average.dur_ns > 0.0 {
                v * 100.0 / average.dur_ns
            } else {
                0.0
            }
        };
        Self {
            label,
            dur_ns: average.dur_ns.round() as i64,
            parts: parts.map(|v| v.round() as i64),
            shares: Some(parts.map(share)),
        }
    }

    /// Part `k`, with its share where the row has them.
    fn part(&self, k: usize) -> Cell<'static> {
        match self.shares {
            Some(shares) => Cell::NsShare(self.parts[k], shares[k]),
            None => Cell::Ns(self.parts[k]),
        }
    }
}

/// The plugin's step-time breakdown, one row per step, then the average steps.
pub const BREAKDOWN_COLUMNS: &[ColumnSpec<BreakdownRow>] = &[
    ColumnSpec::new("step", "step", Unit::Text, |r| Cell::Text(&r.label)),
    ColumnSpec::new("dur_ns", "total", Unit::Ns, |r| Cell::Ns(r.dur_ns)),
    ColumnSpec::new("kernel_ns", "Kernel", Unit::Ns, |r| r.part(0)),
    ColumnSpec::new("memcpy_ns", "Memcpy", Unit::Ns, |r| r.part(1)),
    ColumnSpec::new("memset_ns", "Memset", Unit::Ns, |r| r.part(2)),
    ColumnSpec::new("communication_ns", "Communication", Unit::Ns, |r| r.part(3)),
    ColumnSpec::new("runtime_ns", "Runtime", Unit::Ns, |r| r.part(4)),
    ColumnSpec::new("dataloader_ns", "DataLoader", Unit::Ns, |r| r.part(5)),
    ColumnSpec::new("cpu_exec_ns", "CPU Exec", Unit::Ns, |r| r.part(6)),
    ColumnSpec::new("other_ns", "Other", Unit::Ns, |r| r.part(7)),
];
