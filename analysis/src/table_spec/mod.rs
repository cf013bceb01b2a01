//! Tables defined once: each column's export name, header, unit, when it shows and how its
//! value is read from a row. The text and Markdown tables, the HTML page, the exported column
//! tables and the viewer all render from these lists, so a column added here appears in each.

mod report;
mod roofline;
mod tensorboard;

use std::cmp::Ordering;

use crate::units::human_ns;

pub use report::{OP_COLUMNS, RANK_COLUMNS};
pub use roofline::{FAMILY_COLUMNS, OP_PERF_COLUMNS};
pub use tensorboard::{
    BREAKDOWN_COLUMNS, BreakdownRow, KERNEL_COLUMNS, OPERATOR_COLUMNS, WORKER_COLLECTIVE_COLUMNS,
    WORKER_COLUMNS, WorkerCollective, gpu_summary_columns,
};

/// One cell's value, typed so each renderer formats and sorts it its own way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    /// Text, shown as is.
    Text(&'a str),
    /// A count.
    Count(u64),
    /// A duration, ns.
    Ns(i64),
    /// A duration, ns, with its share of a whole, percent (an average step's parts).
    NsShare(i64, f64),
    /// An upper bound on a count ("at most n"), as Gaudi's engines per node.
    AtMost(u64),
    /// An identifier that is a number (a rank): shown in plain digits, sorted by value.
    Id(i64),
    /// A count out of a total ("3 of 12"), sorted by the count.
    OutOf(u64, u64),
    /// A percentage, shown without decimals.
    Pct(f64),
    /// A figure shown with this many decimals (the TensorBoard plugin prints its percentages
    /// and ratios with two).
    Decimal(f64, u8),
    /// Yes or no.
    Flag(bool),
    /// No value in this row.
    Empty,
}

impl Cell<'_> {
    /// The value as a number, for sorting and for numeric cells; `None` for text and empty cells.
    #[must_use]
    pub fn number(self) -> Option<f64> {
        match self {
            Self::Pct(p) | Self::Decimal(p, _) => Some(p),
            other => other.integer().map(|v| v as f64),
        }
    }

    /// The value as an integer; `None` for text and empty cells (and counts past `i64`).
    #[must_use]
    pub fn integer(self) -> Option<i64> {
        match self {
            Self::Count(n) | Self::AtMost(n) | Self::OutOf(n, _) => i64::try_from(n).ok(),
            Self::Ns(ns) | Self::NsShare(ns, _) | Self::Id(ns) => Some(ns),
            Self::Text(_) | Self::Pct(_) | Self::Decimal(..) | Self::Flag(_) | Self::Empty => None,
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
            Self::NsShare(ns, share) => format!("{} ({share:.2}%)", human_ns(ns)),
            Self::AtMost(n) => format!("≤{n}"),
            Self::OutOf(n, of) => format!("{n} of {of}"),
            Self::Pct(p) => format!("{p:.0}%"),
            Self::Decimal(v, decimals) => format!("{v:.*}", usize::from(decimals)),
            Self::Flag(yes) => if yes { "yes" } else { "no" }.to_owned(),
            Self::Empty => missing.to_owned(),
        }
    }

    /// Orders two cells of one column: text by text, numbers by value, empty cells first.
    #[must_use]
    pub fn cmp_same_column(self, other: Self) -> Ordering {
        match (self, other) {
            (Self::Text(a), Self::Text(b)) => a.cmp(b),
            (Self::Flag(a), Self::Flag(b)) => a.cmp(&b),
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
    /// Text cells ([`Cell::Text`], [`Cell::Flag`]).
    Text,
    /// Counts ([`Cell::Count`], [`Cell::AtMost`], [`Cell::OutOf`]).
    Count,
    /// Numeric identifiers, which may be negative ([`Cell::Id`]).
    Id,
    /// Durations ([`Cell::Ns`], [`Cell::NsShare`]).
    Ns,
    /// Percentages ([`Cell::Pct`]).
    Pct,
    /// Figures with decimals ([`Cell::Decimal`]).
    Decimal,
}

impl Unit {
    /// Whether cells of this unit are text.
    #[must_use]
    pub fn is_text(self) -> bool {
        self == Self::Text
    }
}

/// Which tables show a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    /// Every table: the compact ones (text and Markdown) and the wide ones.
    Everywhere,
    /// The wide tables (HTML, viewer) and the exported ones.
    Wide,
    /// The exported tables only (Parquet/CSV, Python): what a query joins on, not what a reader
    /// looks at.
    Data,
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
    /// Some rows may have no value (a median of no steps): exported tables carry null there.
    /// Optional columns are nullable too.
    pub nullable: bool,
    /// Which tables show it.
    pub show: Show,
    /// The row's value.
    pub value: fn(&T) -> Cell<'_>,
}

// By hand: derived impls would ask `T: Copy`, and a column holds no `T`.
impl<T> Clone for ColumnSpec<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ColumnSpec<T> {}

impl<T> ColumnSpec<T> {
    /// A column every row has, shown in every table, its text never cut and a missing value
    /// blank; the other fields are set with struct update syntax, or [`data`] and
    /// [`nullable`], where a column differs.
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
            nullable: false,
            show: Show::Everywhere,
            value,
        }
    }
}

/// The columns of `spec` a rendered table of `rows` shows: every column that is not optional,
/// and each optional one that some row has; only those shown [`Show::Everywhere`] when
/// `compact`, never the [`Show::Data`] ones.
#[must_use]
pub fn shown<'s, T>(
    spec: &'s [ColumnSpec<T>],
    rows: &[T],
    compact: bool,
) -> Vec<&'s ColumnSpec<T>> {
    spec.iter()
        .filter(|c| match c.show {
            Show::Everywhere => true,
            Show::Wide => !compact,
            Show::Data => false,
        })
        .filter(|c| !c.optional || rows.iter().any(|r| (c.value)(r) != Cell::Empty))
        .collect()
}

/// A duration some rows lack.
fn opt_ns(v: Option<i64>) -> Cell<'static> {
    v.map_or(Cell::Empty, Cell::Ns)
}

/// `column` in the exported tables only ([`Show::Data`]).
const fn data<T>(column: ColumnSpec<T>) -> ColumnSpec<T> {
    ColumnSpec {
        show: Show::Data,
        ..column
    }
}

/// `column`, some of whose rows lack a value: `-` in rendered tables, null when exported.
const fn nullable<T>(column: ColumnSpec<T>) -> ColumnSpec<T> {
    ColumnSpec {
        missing: "-",
        nullable: true,
        ..column
    }
}

/// A figure with `decimals` decimals that some rows lack.
fn opt_decimal(v: Option<f64>, decimals: u8) -> Cell<'static> {
    v.map_or(Cell::Empty, |v| Cell::Decimal(v, decimals))
}

/// A text some rows lack.
fn opt_text(v: Option<&str>) -> Cell<'_> {
    v.map_or(Cell::Empty, Cell::Text)
}

#[cfg(test)]
mod tests;
