//! The tables of a trace and its report as plain typed columns: one definition of every table's
//! columns, shared by `export --tables` (converted to polars by the `table` module) and the Python
//! package (converted to Arrow there). Nothing here depends on a DataFrame library.
//!
//! The slices table comes straight from the Timeline's columns; the report's tables are built
//! field by field, and [`rows_table`] turns any list of report rows (memory, collectives, the
//! plugin's views) into columns through serde, one column per field, nested values flattened to
//! `parent.child` or kept as JSON text.

use std::borrow::Cow;

use rustc_hash::FxHashMap;
use serde::Serialize;
use steplens_ingest::model::{LaneId, NO_PARENT, Timeline, TrackKind};

use crate::report::Report;

/// A column's values, one variant per type; `Opt*` columns hold nulls.
#[derive(Debug, Clone, PartialEq)]
pub enum Values<'a> {
    /// Unsigned 32-bit integers.
    U32(Vec<u32>),
    /// Unsigned 32-bit integers or null.
    OptU32(Vec<Option<u32>>),
    /// Unsigned 64-bit integers.
    U64(Vec<u64>),
    /// Signed 64-bit integers.
    I64(Vec<i64>),
    /// Signed 64-bit integers or null.
    OptI64(Vec<Option<i64>>),
    /// Floats.
    F64(Vec<f64>),
    /// Floats or null.
    OptF64(Vec<Option<f64>>),
    /// Booleans or null.
    OptBool(Vec<Option<bool>>),
    /// Strings.
    Str(Vec<Cow<'a, str>>),
    /// Strings or null.
    OptStr(Vec<Option<Cow<'a, str>>>),
}

impl Values<'_> {
    /// Rows in the column.
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Self::U32(v) => v.len(),
            Self::OptU32(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::OptI64(v) => v.len(),
            Self::F64(v) => v.len(),
            Self::OptF64(v) => v.len(),
            Self::OptBool(v) => v.len(),
            Self::Str(v) => v.len(),
            Self::OptStr(v) => v.len(),
        }
    }

    /// Whether the column has no rows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One named column.
#[derive(Debug, Clone, PartialEq)]
pub struct Column<'a> {
    /// Column name.
    pub name: String,
    /// Its values.
    pub values: Values<'a>,
}

impl<'a> Column<'a> {
    fn new(name: impl Into<String>, values: Values<'a>) -> Self {
        Self {
            name: name.into(),
            values,
        }
    }
}

/// A named table of equally long columns.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnTable<'a> {
    /// Table name (`slices`, `steps`, …): the file stem of its export.
    pub name: &'static str,
    /// Rows in every column.
    pub rows: usize,
    /// The columns, in order.
    pub columns: Vec<Column<'a>>,
}

fn strs<'a, T>(rows: &'a [T], get: impl Fn(&'a T) -> &'a str) -> Values<'a> {
    Values::Str(rows.iter().map(|r| Cow::Borrowed(get(r))).collect())
}

fn opt_strs<'a, T>(rows: &'a [T], get: impl Fn(&'a T) -> Option<&'a str>) -> Values<'a> {
    Values::OptStr(rows.iter().map(|r| get(r).map(Cow::Borrowed)).collect())
}

fn ints<T>(rows: &[T], get: impl Fn(&T) -> i64) -> Values<'static> {
    Values::I64(rows.iter().map(get).collect())
}

fn opt_ints<T>(rows: &[T], get: impl Fn(&T) -> Option<i64>) -> Values<'static> {
    Values::OptI64(rows.iter().map(get).collect())
}

fn table<'a>(name: &'static str, rows: usize, columns: Vec<Column<'a>>) -> ColumnTable<'a> {
    debug_assert!(columns.iter().all(|c| c.values.len() == rows), "{name}");
    ColumnTable {
        name,
        rows,
        columns,
    }
}

/// What the slices table holds beyond the columns `export --tables` writes.
#[derive(Debug, Clone, Default)]
pub struct SliceColumns<'k> {
    /// Add `rank`, `file`, `pid`, `tid`, `engine`, `device` and `correlation` (the export partitions
    /// by rank instead, and keeps its columns stable).
    pub provenance: bool,
    /// One column per arg key, named after it: numbers as integers or floats, anything else
    /// as text (strings unquoted), null where a slice lacks the key.
    pub args: &'k [String],
}

/// One row per slice: where it is, what it is, its times and its place in the nesting and in
/// the steps.
#[must_use]
pub fn slices_table<'a>(timeline: &'a Timeline, extra: &SliceColumns<'_>) -> ColumnTable<'a> {
    let slices = &timeline.slices;
    let n = slices.len();
    let self_time = crate::ops::SelfTime::new(timeline);
    let mut steps = timeline.step_cursor();
    let mut step_of = |source: u16, ts: i64| {
        let i = steps.step_at(source, ts)?;
        Some(timeline.steps[i].name.as_str())
    };

    let mut source = Vec::with_capacity(n);
    let mut track_name = Vec::with_capacity(n);
    let mut process = Vec::with_capacity(n);
    let mut track_kind = Vec::with_capacity(n);
    let mut name = Vec::with_capacity(n);
    let mut category = Vec::with_capacity(n);
    let mut end_ns = Vec::with_capacity(n);
    let mut self_ns = Vec::with_capacity(n);
    let mut depth = Vec::with_capacity(n);
    let mut parent = Vec::with_capacity(n);
    let mut step = Vec::with_capacity(n);
    for i in 0..n {
        let t = &timeline.tracks[slices.track[i] as usize];
        source.push(u32::from(t.source));
        track_name.push(Cow::Borrowed(t.name.as_str()));
        process.push(Cow::Borrowed(t.process_name.as_str()));
        track_kind.push(Cow::Borrowed(t.kind.label()));
        name.push(Cow::Borrowed(timeline.strings.get(slices.name[i])));
        category.push(Cow::Borrowed(timeline.categories.name(slices.cat[i])));
        end_ns.push(slices.end(i as u32));
        self_ns.push(self_time.of(timeline, i));
        depth.push(u32::from(slices.depth[i]));
        parent.push((slices.parent[i] != NO_PARENT).then_some(slices.parent[i]));
        step.push(step_of(t.source, slices.start[i]).map(Cow::Borrowed));
    }
    let mut columns = vec![
        Column::new("source", Values::U32(source)),
        Column::new("track", Values::U32(slices.track.clone())),
        Column::new("track_name", Values::Str(track_name)),
        Column::new("process", Values::Str(process)),
        Column::new("track_kind", Values::Str(track_kind)),
        Column::new("name", Values::Str(name)),
        Column::new("category", Values::Str(category)),
        Column::new("start_ns", Values::I64(slices.start.clone())),
        Column::new("dur_ns", Values::I64(slices.dur.clone())),
        Column::new("end_ns", Values::I64(end_ns)),
        Column::new("self_ns", Values::I64(self_ns)),
        Column::new("depth", Values::U32(depth)),
        Column::new("parent", Values::OptU32(parent)),
        Column::new("step", Values::OptStr(step)),
    ];
    if extra.provenance {
        columns.extend(provenance_columns(timeline));
    }
    for key in extra.args {
        columns.push(Column::new(key.clone(), arg_values(timeline, key)));
    }
    table("slices", n, columns)
}

/// `rank`, `file`, `pid`, `tid`, `engine`, `device` and `correlation` of every slice.
fn provenance_columns(timeline: &Timeline) -> Vec<Column<'_>> {
    let slices = &timeline.slices;
    let n = slices.len();
    let mut correlation: Vec<Option<i64>> = vec![None; n];
    for flow in &timeline.flows {
        // `async_cpu_to_gpu` is what older Kineto wrote for the same link.
        if matches!(
            timeline.categories.name(flow.cat),
            "ac2g" | "async_cpu_to_gpu"
        ) {
            let id = i64::try_from(flow.id).ok();
            correlation[flow.from as usize] = id;
            correlation[flow.to as usize] = id;
        }
    }
    let lane = |id: &LaneId| match id {
        LaneId::Int(v) => Some(*v),
        LaneId::Str(_) => None,
    };
    let mut rank = Vec::with_capacity(n);
    let mut file = Vec::with_capacity(n);
    let mut pid = Vec::with_capacity(n);
    let mut tid = Vec::with_capacity(n);
    let mut engine = Vec::with_capacity(n);
    let mut device = Vec::with_capacity(n);
    for i in 0..n {
        let t = &timeline.tracks[slices.track[i] as usize];
        let source = timeline.sources.get(usize::from(t.source));
        rank.push(source.and_then(|s| s.rank));
        file.push(Cow::Borrowed(source.map_or("", |s| s.path.as_str())));
        pid.push(lane(&t.pid));
        tid.push(lane(&t.tid));
        match &t.kind {
            TrackKind::DeviceEngine { class, device: d } => {
                engine.push(Some(Cow::Borrowed(class.as_str())));
                device.push(*d);
            }
            _ => {
                engine.push(None);
                device.push(None);
            }
        }
    }
    vec![
        Column::new("rank", Values::OptI64(rank)),
        Column::new("file", Values::Str(file)),
        Column::new("pid", Values::OptI64(pid)),
        Column::new("tid", Values::OptI64(tid)),
        Column::new("engine", Values::OptStr(engine)),
        Column::new("device", Values::OptI64(device)),
        Column::new("correlation", Values::OptI64(correlation)),
    ]
}

/// One arg of every slice, typed by what the trace wrote.
fn arg_values<'a>(timeline: &Timeline, key: &str) -> Values<'a> {
    enum Seen {
        Int(i64),
        Float(f64),
        Text(String),
    }
    let raw: Vec<Option<Seen>> = (0..timeline.slices.len() as u32)
        .map(|i| {
            let bytes = timeline.arg_raw(i, key)?;
            let text = std::str::from_utf8(bytes).ok()?.trim();
            if text == "null" {
                return None;
            }
            if let Ok(v) = text.parse::<i64>() {
                return Some(Seen::Int(v));
            }
            if text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
                && let Ok(v) = text.parse::<f64>()
            {
                return Some(Seen::Float(v));
            }
            let unquoted = serde_json::from_str::<String>(text).unwrap_or_else(|_| text.to_owned());
            Some(Seen::Text(unquoted))
        })
        .collect();
    let any_text = raw.iter().any(|v| matches!(v, Some(Seen::Text(_))));
    let any_float = raw.iter().any(|v| matches!(v, Some(Seen::Float(_))));
    if any_text {
        return Values::OptStr(
            raw.into_iter()
                .map(|v| {
                    v.map(|v| match v {
                        Seen::Int(i) => Cow::Owned(i.to_string()),
                        Seen::Float(f) => Cow::Owned(f.to_string()),
                        Seen::Text(t) => Cow::Owned(t),
                    })
                })
                .collect(),
        );
    }
    if any_float {
        #[allow(clippy::cast_precision_loss)]
        return Values::OptF64(
            raw.into_iter()
                .map(|v| match v {
                    Some(Seen::Int(i)) => Some(i as f64),
                    Some(Seen::Float(f)) => Some(f),
                    _ => None,
                })
                .collect(),
        );
    }
    Values::OptI64(
        raw.into_iter()
            .map(|v| match v {
                Some(Seen::Int(i)) => Some(i),
                _ => None,
            })
            .collect(),
    )
}

/// One row per step: its times (device-inclusive, and its host range) and its busy/idle split,
/// and one `engine_<class>_ns` column per engine class seen.
#[must_use]
pub fn steps_table(report: &Report) -> ColumnTable<'_> {
    let steps = &report.steps;
    let mut columns = vec![
        Column::new("name", strs(steps, |s| &s.name)),
        Column::new(
            "source",
            Values::U32(steps.iter().map(|s| u32::from(s.source)).collect()),
        ),
        Column::new("rank", opt_ints(steps, |s| s.rank)),
        Column::new("start_ns", ints(steps, |s| s.start_ns)),
        Column::new("dur_ns", ints(steps, |s| s.dur_ns)),
        Column::new("host_start_ns", opt_ints(steps, |s| s.host_start_ns)),
        Column::new("host_dur_ns", opt_ints(steps, |s| s.host_dur_ns)),
        Column::new("host_busy_ns", ints(steps, |s| s.host_busy_ns)),
        Column::new("device_busy_ns", opt_ints(steps, |s| s.device_busy_ns)),
        Column::new("device_idle_ns", opt_ints(steps, |s| s.device_idle_ns)),
        Column::new("dataloader_ns", ints(steps, |s| s.dataloader_ns)),
        Column::new("compile_ns", ints(steps, |s| s.compile_ns)),
    ];
    let mut classes: Vec<&String> = steps.iter().flat_map(|s| s.engines.keys()).collect();
    classes.sort();
    classes.dedup();
    for class in classes {
        columns.push(Column::new(
            format!("engine_{class}_ns"),
            ints(steps, |s| s.engines.get(class).copied().unwrap_or(0)),
        ));
    }
    table("steps", steps.len(), columns)
}

/// One row per op name and track kind: counts and time, with the columns of
/// [`crate::table_spec::OP_COLUMNS`].
#[must_use]
pub fn ops_table(report: &Report) -> ColumnTable<'_> {
    spec_table("ops", crate::table_spec::OP_COLUMNS, &report.ops)
}

/// Every column of `spec` over `rows`, as [`spec_values`] types them.
fn spec_table<'a, T>(
    name: &'static str,
    spec: &[crate::table_spec::ColumnSpec<T>],
    rows: &'a [T],
) -> ColumnTable<'a> {
    let columns = spec
        .iter()
        .map(|c| Column::new(c.key, spec_values(c, rows)))
        .collect();
    table(name, rows.len(), columns)
}

/// One column of a [`crate::table_spec`] table: text as strings, counts as `u64`, durations as
/// `i64` and percentages and other decimals as nullable floats; the other numbers of an optional
/// or nullable column as nullable `i64`.
fn spec_values<'a, T>(column: &crate::table_spec::ColumnSpec<T>, rows: &'a [T]) -> Values<'a> {
    use crate::table_spec::{Cell, Unit};
    let cells = rows.iter().map(|r| (column.value)(r));
    match column.unit {
        Unit::Text => Values::Str(
            cells
                .map(|c| match c {
                    Cell::Text(s) => Cow::Borrowed(s),
                    Cell::Flag(yes) => Cow::Borrowed(if yes { "yes" } else { "no" }),
                    _ => Cow::Borrowed(""),
                })
                .collect(),
        ),
        Unit::Pct | Unit::Decimal => Values::OptF64(cells.map(Cell::number).collect()),
        _ if column.optional || column.nullable => {
            Values::OptI64(cells.map(Cell::integer).collect())
        }
        Unit::Id => Values::I64(cells.map(|c| c.integer().unwrap_or(0)).collect()),
        Unit::Count => Values::U64(
            cells
                .map(|c| match c {
                    Cell::Count(n) | Cell::AtMost(n) | Cell::OutOf(n, _) => n,
                    _ => 0,
                })
                .collect(),
        ),
        Unit::Ns => Values::I64(
            cells
                .map(|c| match c {
                    Cell::Ns(ns) | Cell::NsShare(ns, _) => ns,
                    _ => 0,
                })
                .collect(),
        ),
    }
}

/// One row per finding, ranked as in the report, with its input, rank and group (the index in
/// the report's `finding_groups`: findings of one kind and place); evidence as JSON text.
#[must_use]
pub fn findings_table(report: &Report) -> ColumnTable<'_> {
    let f = &report.findings;
    let mut group = vec![None; f.len()];
    for (g, members) in report.groups().iter().enumerate() {
        for &i in &members.findings {
            if let Some(slot) = group.get_mut(i) {
                *slot = u32::try_from(g).ok();
            }
        }
    }
    table(
        "findings",
        f.len(),
        vec![
            Column::new("kind", strs(f, |x| x.kind.as_str())),
            Column::new("severity", strs(f, |x| x.severity.as_str())),
            Column::new("title", strs(f, |x| &x.title)),
            Column::new("step", opt_strs(f, |x| x.step.as_deref())),
            Column::new("start_ns", ints(f, |x| x.start_ns)),
            Column::new("end_ns", ints(f, |x| x.end_ns)),
            Column::new("track", opt_strs(f, |x| x.track.as_deref())),
            Column::new(
                "ops",
                Values::Str(f.iter().map(|x| Cow::Owned(x.ops.join("; "))).collect()),
            ),
            Column::new("call_site", opt_strs(f, |x| x.call_site.as_deref())),
            Column::new("count", Values::U64(f.iter().map(|x| x.count).collect())),
            Column::new(
                "source",
                Values::OptU32(f.iter().map(|x| x.source.map(u32::from)).collect()),
            ),
            Column::new("rank", opt_ints(f, |x| x.rank)),
            Column::new("group", Values::OptU32(group)),
            Column::new("lost_ns", ints(f, |x| x.lost_ns)),
            Column::new("saving_ns", ints(f, |x| x.saving_ns)),
            Column::new("recommendation", strs(f, |x| &x.recommendation)),
            Column::new(
                "evidence_json",
                Values::Str(
                    f.iter()
                        .map(|x| Cow::Owned(serde_json::to_string(&x.evidence).unwrap_or_default()))
                        .collect(),
                ),
            ),
        ],
    )
}

/// One row per engine class: busy time and utilization.
#[must_use]
pub fn engines_table(report: &Report) -> ColumnTable<'_> {
    let e = &report.engines;
    table(
        "engines",
        e.len(),
        vec![
            Column::new("class", strs(e, |x| &x.class)),
            Column::new(
                "engines",
                Values::U64(e.iter().map(|x| x.engines as u64).collect()),
            ),
            Column::new("busy_ns", ints(e, |x| x.busy_ns)),
            Column::new(
                "busy_pct",
                Values::F64(e.iter().map(|x| x.busy_pct).collect()),
            ),
            Column::new(
                "mean_engine_utilization_pct",
                Values::F64(e.iter().map(|x| x.mean_engine_utilization_pct).collect()),
            ),
        ],
    )
}

/// One row per device stream: its idle time split into host wait, kernel wait and other.
#[must_use]
pub fn idle_table(report: &Report) -> ColumnTable<'_> {
    let d = &report.idle;
    table(
        "idle",
        d.len(),
        vec![
            Column::new(
                "source",
                Values::U32(d.iter().map(|x| u32::from(x.source)).collect()),
            ),
            Column::new("device", opt_ints(d, |x| x.device)),
            Column::new("stream", strs(d, |x| &x.stream)),
            Column::new(
                "kernels",
                Values::U64(d.iter().map(|x| x.kernels).collect()),
            ),
            Column::new("idle_ns", ints(d, |x| x.idle_ns)),
            Column::new("host_wait_ns", ints(d, |x| x.host_wait_ns)),
            Column::new("kernel_wait_ns", ints(d, |x| x.kernel_wait_ns)),
            Column::new("other_ns", ints(d, |x| x.other_ns)),
        ],
    )
}

/// One row per rank of a multi-rank run (the report's rank table).
#[must_use]
pub fn ranks_table(ranks: &crate::ranks::RanksReport) -> ColumnTable<'_> {
    spec_table("ranks", crate::table_spec::RANK_COLUMNS, &ranks.ranks)
}

/// The tables `export --tables` writes, in their fixed order (the rank table comes apart:
/// it exists only for multi-rank runs).
#[must_use]
pub fn export_tables<'a>(timeline: &'a Timeline, report: &'a Report) -> Vec<ColumnTable<'a>> {
    vec![
        slices_table(timeline, &SliceColumns::default()),
        steps_table(report),
        ops_table(report),
        findings_table(report),
        engines_table(report),
        idle_table(report),
    ]
}

/// A table from any list of serializable rows: one column per field in the order fields first
/// appear, typed by the values written (integers, floats, booleans, text; a column mixing types
/// becomes text). Nested objects become `parent.child` columns; lists are JSON text.
///
/// # Errors
/// When a row does not serialize to an object (a bug in the row type).
pub fn rows_table<T: Serialize>(
    name: &'static str,
    rows: &[T],
) -> Result<ColumnTable<'static>, serde_json::Error> {
    let mut order: Vec<String> = Vec::new();
    let mut cells: FxHashMap<String, Vec<Option<serde_json::Value>>> = FxHashMap::default();
    for (i, row) in rows.iter().enumerate() {
        // serde_json's maps sort their keys; the written text keeps the fields' order, which a
        // key tree read back from it recovers.
        let text = serde_json::to_string(row)?;
        let KeyTree::Object(keys) = serde_json::from_str::<KeyTree>(&text)? else {
            return Err(serde::ser::Error::custom(format!(
                "{name}: a row is not an object"
            )));
        };
        let value: serde_json::Value = serde_json::from_str(&text)?;
        let mut flat = Vec::new();
        flatten("", &keys, value, &mut flat);
        for (key, value) in flat {
            let column = cells.entry(key.clone()).or_insert_with(|| {
                order.push(key);
                vec![None; rows.len()]
            });
            column[i] = Some(value);
        }
    }
    let columns = order
        .into_iter()
        .map(|key| {
            let values = cells.remove(&key).unwrap_or_default();
            Column::new(key, typed(values))
        })
        .collect();
    Ok(table(name, rows.len(), columns))
}

/// The keys of a JSON document in the order written, objects within objects kept as trees.
enum KeyTree {
    Object(Vec<(String, KeyTree)>),
    Leaf,
}

impl<'de> serde::Deserialize<'de> for KeyTree {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = KeyTree;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<KeyTree, A::Error> {
                let mut keys = Vec::new();
                while let Some((key, tree)) = map.next_entry::<String, KeyTree>()? {
                    keys.push((key, tree));
                }
                Ok(KeyTree::Object(keys))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<KeyTree, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(KeyTree::Leaf)
            }
            fn visit_bool<E>(self, _: bool) -> Result<KeyTree, E> {
                Ok(KeyTree::Leaf)
            }
            fn visit_i64<E>(self, _: i64) -> Result<KeyTree, E> {
                Ok(KeyTree::Leaf)
            }
            fn visit_u64<E>(self, _: u64) -> Result<KeyTree, E> {
                Ok(KeyTree::Leaf)
            }
            fn visit_f64<E>(self, _: f64) -> Result<KeyTree, E> {
                Ok(KeyTree::Leaf)
            }
            fn visit_str<E>(self, _: &str) -> Result<KeyTree, E> {
                Ok(KeyTree::Leaf)
            }
            fn visit_unit<E>(self) -> Result<KeyTree, E> {
                Ok(KeyTree::Leaf)
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

/// `value`'s fields as `(parent.child, value)` in the order of `keys`; empty objects and
/// lists stay whole.
fn flatten(
    prefix: &str,
    keys: &[(String, KeyTree)],
    value: serde_json::Value,
    out: &mut Vec<(String, serde_json::Value)>,
) {
    let serde_json::Value::Object(mut map) = value else {
        return;
    };
    for (key, tree) in keys {
        let Some(value) = map.remove(key) else {
            continue;
        };
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match (tree, value) {
            (KeyTree::Object(inner), serde_json::Value::Object(v)) if !inner.is_empty() => {
                flatten(&name, inner, serde_json::Value::Object(v), out);
            }
            (_, other) => out.push((name, other)),
        }
    }
}

fn typed(values: Vec<Option<serde_json::Value>>) -> Values<'static> {
    use serde_json::Value;
    let present = || values.iter().flatten().filter(|v| !v.is_null());
    if present().all(|v| v.as_i64().is_some()) {
        return Values::OptI64(values.iter().map(|v| v.as_ref()?.as_i64()).collect());
    }
    if present().all(Value::is_number) {
        return Values::OptF64(values.iter().map(|v| v.as_ref()?.as_f64()).collect());
    }
    if present().all(Value::is_boolean) {
        return Values::OptBool(values.iter().map(|v| v.as_ref()?.as_bool()).collect());
    }
    Values::OptStr(
        values
            .into_iter()
            .map(|v| match v? {
                Value::Null => None,
                Value::String(s) => Some(Cow::Owned(s)),
                other => Some(Cow::Owned(other.to_string())),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        name: &'static str,
        n: Option<i64>,
        x: f64,
        inner: Inner,
        list: Vec<u8>,
    }

    #[derive(Serialize)]
    struct Inner {
        a: u32,
    }

    #[test]
    fn rows_table_types_flattens_and_keeps_nulls() {
        let rows = [
            Row {
                name: "a",
                n: Some(1),
                x: 1.0,
                inner: Inner { a: 7 },
                list: vec![1, 2],
            },
            Row {
                name: "b",
                n: None,
                x: 2.5,
                inner: Inner { a: 8 },
                list: vec![],
            },
        ];
        let t = rows_table("t", &rows).unwrap();
        let names: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["name", "n", "x", "inner.a", "list"]);
        assert_eq!(t.columns[1].values, Values::OptI64(vec![Some(1), None]));
        // 1.0 is written as a float, so the column is one of floats.
        assert_eq!(
            t.columns[2].values,
            Values::OptF64(vec![Some(1.0), Some(2.5)])
        );
        assert_eq!(t.columns[3].values, Values::OptI64(vec![Some(7), Some(8)]));
        assert_eq!(
            t.columns[4].values,
            Values::OptStr(vec![Some("[1,2]".into()), Some("[]".into())])
        );
    }
}
