//! Op time per run for `diff` and `check`: rows by op label and (where the trace records them)
//! input shapes, and the full outer join of two runs' rows. Plain Rust, so the CLI built
//! without the `tables` feature (no polars) still diffs.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, Timeline};

use crate::ops::is_op;
use crate::ops::op_label;
use crate::report::Report;

/// Op time of one run, by op and (where the trace records them) input shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRow {
    /// Op label (see [`op_label`]).
    pub name: String,
    /// Input shapes as recorded (`[[16, 32], []]`), empty when unknown.
    pub shapes: String,
    /// Calls.
    pub count: u64,
    /// Total time, ns.
    pub total_ns: i64,
}

/// Op time by op and input shapes, from a Timeline (host ops carry `Input Dims` when the
/// profiler ran with `record_shapes=True`).
#[must_use]
pub fn ops_by_shape(timeline: &Timeline) -> Vec<OpRow> {
    let slices = &timeline.slices;
    let device_track: Vec<bool> = timeline.tracks.iter().map(|t| t.kind.is_device()).collect();
    let mut groups: FxHashMap<(u32, bool, Vec<u8>), (u64, i64)> = FxHashMap::default();
    for i in 0..slices.len() {
        let class = timeline.categories.class(slices.cat[i]);
        if !is_op(class) {
            continue;
        }
        let device = device_track[slices.track[i] as usize];
        let shapes: Vec<u8> = if class == CategoryClass::CpuOp {
            timeline
                .arg_raw(i as u32, "Input Dims")
                .map(|raw| {
                    raw.iter()
                        .copied()
                        .filter(|b| !b.is_ascii_whitespace())
                        .collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let entry = groups
            .entry((slices.name[i], device, shapes))
            .or_insert((0, 0));
        entry.0 += 1;
        entry.1 += slices.dur[i];
    }
    let mut rows: Vec<OpRow> = groups
        .into_iter()
        .map(|((name, device, shapes), (count, total_ns))| OpRow {
            name: op_label(
                timeline.strings.get(name),
                if device { "device" } else { "host" },
            ),
            shapes: String::from_utf8_lossy(&shapes).into_owned(),
            count,
            total_ns,
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.shapes.cmp(&b.shapes)));
    rows
}

/// Op rows from a report's op summary (no shapes: a saved report does not keep them).
#[must_use]
pub fn ops_from_report(report: &Report) -> Vec<OpRow> {
    let mut by_label: FxHashMap<String, (u64, i64)> = FxHashMap::default();
    for op in &report.ops {
        let entry = by_label
            .entry(op_label(&op.name, &op.track_kind))
            .or_insert((0, 0));
        entry.0 += op.count;
        entry.1 += op.total_ns;
    }
    by_label
        .into_iter()
        .map(|(name, (count, total_ns))| OpRow {
            name,
            shapes: String::new(),
            count,
            total_ns,
        })
        .collect()
}

/// One op in both runs after the join; a side without the op has `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinedOp {
    /// Op label.
    pub name: String,
    /// Input shapes (empty when unknown or when joined on names only).
    pub shapes: String,
    /// Calls and total time in run A.
    pub a: Option<(u64, i64)>,
    /// Calls and total time in run B.
    pub b: Option<(u64, i64)>,
}

/// Full outer join of two runs' ops on op name and input shapes, sorted by name then shapes.
/// When either side lacks shapes, both are folded to names first so a saved report still joins
/// with a trace.
#[must_use]
pub fn join_ops(a: &[OpRow], b: &[OpRow]) -> Vec<JoinedOp> {
    let has_shapes = |rows: &[OpRow]| rows.iter().any(|r| !r.shapes.is_empty());
    let by_name = !(has_shapes(a) && has_shapes(b));
    let mut joined: BTreeMap<(String, String), JoinedOp> = BTreeMap::new();
    for (rows, side_a) in [(a, true), (b, false)] {
        for r in rows {
            // Without shapes on both sides, shape variants of a name are summed.
            let shapes = if by_name {
                String::new()
            } else {
                r.shapes.clone()
            };
            let op = joined
                .entry((r.name.clone(), shapes.clone()))
                .or_insert_with(|| JoinedOp {
                    name: r.name.clone(),
                    shapes,
                    a: None,
                    b: None,
                });
            let side = if side_a { &mut op.a } else { &mut op.b };
            let (count, total) = side.get_or_insert((0, 0));
            *count += r.count;
            *total += r.total_ns;
        }
    }
    joined.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, shapes: &str, count: u64, total_ns: i64) -> OpRow {
        OpRow {
            name: name.into(),
            shapes: shapes.into(),
            count,
            total_ns,
        }
    }

    #[test]
    fn join_keeps_ops_of_either_side() {
        let a = [
            row("aten::mm", "[[2,2]]", 2, 100),
            row("aten::add", "[[2]]", 1, 10),
        ];
        let b = [
            row("aten::mm", "[[2,2]]", 2, 150),
            row("aten::item", "[[]]", 3, 30),
        ];
        let joined = join_ops(&a, &b);
        let find = |n: &str| joined.iter().find(|o| o.name == n).unwrap();
        assert_eq!(joined.len(), 3);
        assert_eq!(find("aten::mm").a, Some((2, 100)));
        assert_eq!(find("aten::mm").b, Some((2, 150)));
        assert_eq!(find("aten::add").b, None);
        assert_eq!(find("aten::item").a, None);
        assert_eq!(find("aten::item").b, Some((3, 30)));
    }

    #[test]
    fn shapes_split_an_op_unless_one_side_lacks_them() {
        let a = [
            row("aten::mm", "[[2,2]]", 1, 100),
            row("aten::mm", "[[4,4]]", 1, 300),
        ];
        let b = [
            row("aten::mm", "[[2,2]]", 1, 100),
            row("aten::mm", "[[8,8]]", 1, 900),
        ];
        let joined = join_ops(&a, &b);
        assert_eq!(joined.len(), 3);
        let names_only = [row("aten::mm", "", 2, 1000)];
        let folded = join_ops(&a, &names_only);
        assert_eq!(folded.len(), 1);
        assert_eq!(folded[0].a, Some((2, 400)));
        assert_eq!(folded[0].b, Some((2, 1000)));
    }
}
