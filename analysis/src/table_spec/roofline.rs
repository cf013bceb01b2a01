//! The per-op performance model's tables: op signatures and their summary by family.

use super::{Cell, ColumnSpec, Show, Unit, nullable, opt_decimal, opt_text};
use crate::op_perf::{FamilySummary, OpPerf};

/// The per-op performance model ([`crate::report::Report::op_perf`]), by kernel time.
pub const OP_PERF_COLUMNS: &[ColumnSpec<OpPerf>] = &[
    ColumnSpec {
        cut: 40,
        ..ColumnSpec::new("name", "op", Unit::Text, |r| Cell::Text(&r.name))
    },
    ColumnSpec {
        show: Show::Wide,
        ..ColumnSpec::new("family", "family", Unit::Text, |r| {
            Cell::Text(r.family.as_str())
        })
    },
    ColumnSpec {
        cut: 40,
        ..ColumnSpec::new("input_shape", "input shape", Unit::Text, |r| {
            Cell::Text(&r.input_shape)
        })
    },
    ColumnSpec::new("dtype", "dtype", Unit::Text, |r| Cell::Text(&r.dtype)),
    ColumnSpec::new("calls", "calls", Unit::Count, |r| Cell::Count(r.calls)),
    ColumnSpec::new("kernel_ns", "kernel time", Unit::Ns, |r| {
        Cell::Ns(r.kernel_ns)
    }),
    nullable(ColumnSpec::new(
        "gflop_per_call",
        "GFLOP/call",
        Unit::Decimal,
        |r| opt_decimal(r.flops_per_call.map(|f| f / 1e9), 3),
    )),
    nullable(ColumnSpec::new(
        "mb_per_call",
        "MB/call",
        Unit::Decimal,
        |r| opt_decimal(r.bytes_per_call.map(|b| b / 1e6), 2),
    )),
    nullable(ColumnSpec::new(
        "flops_per_byte",
        "FLOP/B",
        Unit::Decimal,
        |r| opt_decimal(r.flops_per_byte, 1),
    )),
    nullable(ColumnSpec::new(
        "tflops_per_s",
        "TFLOP/s",
        Unit::Decimal,
        |r| opt_decimal(r.tflops_per_s, 2),
    )),
    nullable(ColumnSpec::new(
        "tbytes_per_s",
        "TB/s",
        Unit::Decimal,
        |r| opt_decimal(r.tbytes_per_s(), 3),
    )),
    nullable(ColumnSpec::new(
        "pct_of_peak_compute",
        "% peak",
        Unit::Decimal,
        |r| opt_decimal(r.pct_of_peak_compute, 1),
    )),
    nullable(ColumnSpec::new(
        "pct_of_peak_bandwidth",
        "% BW",
        Unit::Decimal,
        |r| opt_decimal(r.pct_of_peak_bandwidth, 1),
    )),
    nullable(ColumnSpec::new("bound", "bound", Unit::Text, |r| {
        opt_text(r.bound.as_deref())
    })),
];

/// The performance model by op family ([`crate::op_perf::by_family`]).
pub const FAMILY_COLUMNS: &[ColumnSpec<FamilySummary>] = &[
    ColumnSpec::new("family", "family", Unit::Text, |f| {
        Cell::Text(f.family.as_str())
    }),
    ColumnSpec::new("kernel_ns", "kernel time", Unit::Ns, |f| {
        Cell::Ns(f.kernel_ns)
    }),
    ColumnSpec::new(
        "pct_of_kernel_time",
        "% of kernel time",
        Unit::Decimal,
        |f| Cell::Decimal(f.pct_of_kernel_time, 2),
    ),
    nullable(ColumnSpec::new(
        "pct_of_peak",
        "% of peak (FLOP-weighted)",
        Unit::Decimal,
        |f| opt_decimal(f.pct_of_peak, 1),
    )),
];
