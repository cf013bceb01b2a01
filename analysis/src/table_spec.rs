//! Tables defined once: each column's export name, header, unit, when it shows and how its
//! value is read from a row. The text and Markdown tables, the HTML page, the exported column
//! tables and the viewer all render from these lists, so a column added here appears in each.

use std::cmp::Ordering;

use crate::ops::OpStats;
use crate::ranks::RankStats;
use crate::units::human_ns;

/// One cell's value, typed so each renderer formats and sorts it its own way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    /// Text, shown as is.
    Text(&'a str),
    /// A count.
    Count(u64),
    /// A duration, ns.
    Ns(i64),
    /// An upper bound on a count ("at most n"), as Gaudi's engines per node.
    AtMost(u64),
    /// An identifier that is a number (a rank): shown in plain digits, sorted by value.
    Id(i64),
    /// A count out of a total ("3 of 12"), sorted by the count.
    OutOf(u64, u64),
    /// A percentage, shown without decimals.
    Pct(f64),
    /// No value in this row.
    Empty,
}

impl Cell<'_> {
    /// The value as a number, for sorting and for numeric cells; `None` for text and empty cells.
    #[must_use]
    pub fn number(self) -> Option<f64> {
        match self {
            Self::Pct(p) => Some(p),
            other => other.integer().map(|v| v as f64),
        }
    }

    /// The value as an integer; `None` for text and empty cells (and counts past `i64`).
    #[must_use]
    pub fn integer(self) -> Option<i64> {
        match self {
            Self::Count(n) | Self::AtMost(n) | Self::OutOf(n, _) => i64::try_from(n).ok(),
            Self::Ns(ns) | Self::Id(ns) => Some(ns),
            Self::Text(_) | Self::Pct(_) | Self::Empty => None,
        }
    }

    /// The cell as text, `missing` for an empty one: counts in plain digits, durations as
    /// [`human_ns`] writes them.
    #[must_use]
    pub fn display(self, missing: &str) -> String {
        match self {
            Self::Text(s) => s.to_owned(),
            Self::Count(n) => n.to_string(),
            Self::Id(id) => id.to_string(),
            Self::Ns(ns) => human_ns(ns),
            Self::AtMost(n) => format!("≤{n}"),
            Self::OutOf(n, of) => format!("{n} of {of}"),
            Self::Pct(p) => format!("{p:.0}%"),
            Self::Empty => missing.to_owned(),
        }
    }

    /// Orders two cells of one column: text by text, numbers by value, empty cells first.
    #[must_use]
    pub fn cmp_same_column(self, other: Self) -> Ordering {
        match (self, other) {
            (Self::Text(a), Self::Text(b)) => a.cmp(b),
            (a, b) => a
                .number()
                .unwrap_or(f64::NEG_INFINITY)
                .total_cmp(&b.number().unwrap_or(f64::NEG_INFINITY)),
        }
    }
}

/// What a column's values are: text (left-aligned, sorted alphabetically), or numbers
/// (right-aligned, sorted by value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Text cells.
    Text,
    /// Counts and numeric ids ([`Cell::Count`], [`Cell::AtMost`], [`Cell::OutOf`],
    /// [`Cell::Id`]).
    Count,
    /// Durations ([`Cell::Ns`]).
    Ns,
    /// Percentages ([`Cell::Pct`]).
    Pct,
}

impl Unit {
    /// Whether cells of this unit are text.
    #[must_use]
    pub fn is_text(self) -> bool {
        self == Self::Text
    }
}

/// One column of a table over rows of `T`.
pub struct ColumnSpec<T: 'static> {
    /// Its name as data, with its unit (`total_ns`): the column's name where the table is
    /// exported (the op table's, in Parquet/CSV and Python).
    pub key: &'static str,
    /// Header in rendered tables: `total`.
    pub header: &'static str,
    /// What its values are.
    pub unit: Unit,
    /// What a rendered table shows for a row without a value.
    pub missing: &'static str,
    /// The compact tables cut longer text to this many characters (0: never).
    pub cut: usize,
    /// Only some rows have it (Gaudi nodes, graph launches): rendered tables show it only when
    /// a shown row has a value; exported tables always carry it, null elsewhere.
    pub optional: bool,
    /// Shown in the compact tables (text and Markdown) too, not only in the wide ones (HTML,
    /// viewer, exports).
    pub compact: bool,
    /// The row's value.
    pub value: fn(&T) -> Cell<'_>,
}

impl<T> ColumnSpec<T> {
    /// A column every row has, shown in every table, its text never cut and a missing value
    /// blank; the other fields are set with struct update syntax where a column differs.
    #[must_use]
    pub const fn new(
        key: &'static str,
        header: &'static str,
        unit: Unit,
        value: fn(&T) -> Cell<'_>,
    ) -> Self {
        Self {
            key,
            header,
            unit,
            missing: "",
            cut: 0,
            optional: false,
            compact: true,
            value,
        }
    }
}

/// The columns of `spec` a rendered table of `rows` shows: every column that is not optional,
/// and each optional one that some row has; only the compact ones when `compact`.
#[must_use]
pub fn shown<'s, T>(
    spec: &'s [ColumnSpec<T>],
    rows: &[T],
    compact: bool,
) -> Vec<&'s ColumnSpec<T>> {
    spec.iter()
        .filter(|c| !compact || c.compact)
        .filter(|c| !c.optional || rows.iter().any(|r| (c.value)(r) != Cell::Empty))
        .collect()
}

fn opt_ns(v: Option<i64>) -> Cell<'static> {
    v.map_or(Cell::Empty, Cell::Ns)
}

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
        compact: false,
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

/// A rank column: always shown, its missing values as `-`.
const fn rank_column(
    key: &'static str,
    header: &'static str,
    unit: Unit,
    value: fn(&RankStats) -> Cell<'_>,
) -> ColumnSpec<RankStats> {
    ColumnSpec {
        missing: "-",
        ..ColumnSpec::new(key, header, unit, value)
    }
}

/// The rank table of a multi-rank run ([`crate::ranks::RanksReport::ranks`]), in rank order.
pub const RANK_COLUMNS: &[ColumnSpec<RankStats>] = &[
    rank_column("rank", "rank", Unit::Count, |r| Cell::Id(r.rank)),
    rank_column("rank_from", "from", Unit::Text, |r| {
        Cell::Text(&r.rank_from)
    }),
    rank_column("steps", "steps", Unit::Count, |r| {
        Cell::Count(r.steps as u64)
    }),
    rank_column("step_p50_ns", "median step", Unit::Ns, |r| {
        opt_ns(r.step_p50_ns)
    }),
    rank_column("compute_p50_ns", "compute", Unit::Ns, |r| {
        opt_ns(r.compute_p50_ns)
    }),
    rank_column("collective_p50_ns", "in collectives", Unit::Ns, |r| {
        opt_ns(r.collective_p50_ns)
    }),
    rank_column("exposed_comm_p50_ns", "exposed", Unit::Ns, |r| {
        opt_ns(r.exposed_comm_p50_ns)
    }),
    rank_column("last_arrivals", "last to arrive", Unit::Count, |r| {
        Cell::OutOf(r.last_arrivals as u64, r.collectives as u64)
    }),
    rank_column("wait_ns", "waited", Unit::Ns, |r| Cell::Ns(r.wait_ns)),
    rank_column("comm_overlap_pct", "comm hidden", Unit::Pct, |r| {
        r.comm_overlap_pct.map_or(Cell::Empty, Cell::Pct)
    }),
];

#[cfg(test)]
mod tests {
    use super::{Cell, OP_COLUMNS, Unit, shown};
    use crate::ops::OpStats;

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

    #[test]
    fn export_keys_are_unique_and_name_their_unit() {
        let mut keys: Vec<&str> = OP_COLUMNS.iter().map(|c| c.key).collect();
        for c in OP_COLUMNS {
            let mut full = op("x", Some(1));
            full.engine_ns = Some(1);
            full.max_engines = Some(1);
            full.graph_device_ns = Some(1);
            let sample = (c.value)(&full);
            assert_ne!(sample, Cell::Empty, "{}", c.key);
            let unit = match sample {
                Cell::Text(_) => Unit::Text,
                Cell::Count(_) | Cell::AtMost(_) | Cell::OutOf(..) | Cell::Id(_) => Unit::Count,
                Cell::Ns(_) => Unit::Ns,
                Cell::Pct(_) => Unit::Pct,
                Cell::Empty => unreachable!(),
            };
            assert_eq!(c.unit, unit, "{}", c.key);
            assert_eq!(c.key.ends_with("_ns"), c.unit == Unit::Ns, "{}", c.key);
        }
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), OP_COLUMNS.len());
    }
}
