//! The report's own tables: ops, and ranks of a multi-rank run.

use super::{Cell, ColumnSpec, Show, Unit, data, nullable, opt_ns};
use crate::ops::OpStats;
use crate::ranks::RankStats;

/// The op summary ([`crate::report::Report::ops`]), whose rows come sorted by total time,
/// longest first.
pub const OP_COLUMNS: &[ColumnSpec<OpStats>] = &[
    ColumnSpec {
        cut: 60,
        ..ColumnSpec::new("name", "op", Unit::Text, |o| Cell::Text(&o.name))
    },
    ColumnSpec::new("track_kind", "where", Unit::Text, |o| {
        Cell::Text(&o.track_kind)
    }),
    ColumnSpec {
        show: Show::Wide,
        ..ColumnSpec::new("category", "category", Unit::Text, |o| {
            Cell::Text(&o.category)
        })
    },
    ColumnSpec::new("count", "count", Unit::Count, |o| Cell::Count(o.count)),
    ColumnSpec::new("total_ns", "total", Unit::Ns, |o| Cell::Ns(o.total_ns)),
    ColumnSpec::new("self_ns", "self", Unit::Ns, |o| Cell::Ns(o.self_ns)),
    ColumnSpec::new("mean_ns", "mean", Unit::Ns, |o| Cell::Ns(o.mean_ns)),
    ColumnSpec::new("p50_ns", "p50", Unit::Ns, |o| Cell::Ns(o.p50_ns)),
    ColumnSpec::new("p99_ns", "p99", Unit::Ns, |o| Cell::Ns(o.p99_ns)),
    // Gaudi device nodes run on several engines at once: on how many, and their engine time
    // beside the wall time.
    ColumnSpec {
        optional: true,
        ..ColumnSpec::new("max_engines", "engines", Unit::Count, |o| {
            o.max_engines
                .map_or(Cell::Empty, |n| Cell::AtMost(u64::from(n)))
        })
    },
    ColumnSpec {
        optional: true,
        ..ColumnSpec::new("engine_ns", "engine time", Unit::Ns, |o| {
            opt_ns(o.engine_ns)
        })
    },
    // CUDA/HIP graph launches: the device work each graph ran, as one unit.
    ColumnSpec {
        optional: true,
        ..ColumnSpec::new("graph_kernels", "graph kernels", Unit::Count, |o| {
            o.graph_kernels.map_or(Cell::Empty, Cell::Count)
        })
    },
    ColumnSpec {
        optional: true,
        ..ColumnSpec::new("graph_device_ns", "graph device", Unit::Ns, |o| {
            opt_ns(o.graph_device_ns)
        })
    },
];

/// The rank table of a multi-rank run ([`crate::ranks::RanksReport::ranks`]), in rank order.
pub const RANK_COLUMNS: &[ColumnSpec<RankStats>] = &[
    ColumnSpec::new("rank", "rank", Unit::Id, |r| Cell::Id(r.rank)),
    ColumnSpec::new("rank_from", "from", Unit::Text, |r| {
        Cell::Text(&r.rank_from)
    }),
    data(ColumnSpec::new("source", "input", Unit::Count, |r| {
        Cell::Count(u64::from(r.source))
    })),
    ColumnSpec::new("steps", "steps", Unit::Count, |r| {
        Cell::Count(r.steps as u64)
    }),
    nullable(ColumnSpec::new(
        "step_p50_ns",
        "median step",
        Unit::Ns,
        |r| opt_ns(r.step_p50_ns),
    )),
    nullable(ColumnSpec::new(
        "compute_p50_ns",
        "compute",
        Unit::Ns,
        |r| opt_ns(r.compute_p50_ns),
    )),
    nullable(ColumnSpec::new(
        "collective_p50_ns",
        "in collectives",
        Unit::Ns,
        |r| opt_ns(r.collective_p50_ns),
    )),
    nullable(ColumnSpec::new(
        "exposed_comm_p50_ns",
        "exposed",
        Unit::Ns,
        |r| opt_ns(r.exposed_comm_p50_ns),
    )),
    ColumnSpec::new("last_arrivals", "last to arrive", Unit::Count, |r| {
        Cell::OutOf(r.last_arrivals as u64, r.collectives as u64)
    }),
    data(ColumnSpec::new(
        "collectives",
        "collectives",
        Unit::Count,
        |r| Cell::Count(r.collectives as u64),
    )),
    ColumnSpec::new("wait_ns", "waited", Unit::Ns, |r| Cell::Ns(r.wait_ns)),
    data(ColumnSpec::new(
        "clock_offset_ns",
        "clock offset",
        Unit::Ns,
        |r| Cell::Ns(r.clock_offset_ns),
    )),
    nullable(ColumnSpec::new(
        "comm_overlap_pct",
        "comm hidden",
        Unit::Pct,
        |r| r.comm_overlap_pct.map_or(Cell::Empty, Cell::Pct),
    )),
];
