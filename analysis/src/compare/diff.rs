//! Two runs side by side: step breakdown, engine utilization, ops added, removed, slower or
//! faster (joined on op name and input shapes), and findings that appeared or went away.
//!
//! Op times are per step, so runs with different step counts compare; a run without steps
//! counts as one step.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::compare::figures::{FindingGroup, FindingKey, RunFigures};
use crate::compare::op_rows::{JoinedOp, OpRow, join_ops};

/// Schema name of the diff's JSON output.
pub const DIFF_SCHEMA: &str = "steplens.diff/1";

/// Smallest change of op time per step that counts as slower or faster: both this share…
pub const OP_CHANGE_MIN_PCT: f64 = 5.0;
/// …and this many ns per step.
pub const OP_CHANGE_MIN_NS: i64 = 1_000;

/// How an op changed from A to B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpStatus {
    /// Only in B.
    Added,
    /// Only in A.
    Removed,
    /// More time per step in B.
    Slower,
    /// Less time per step in B.
    Faster,
    /// Within the noise band.
    Same,
}

/// One op in the diff.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpChange {
    /// Op label (device ops end in ` [device]`).
    pub name: String,
    /// Input shapes, when both runs recorded them.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub shapes: String,
    /// What changed.
    pub status: OpStatus,
    /// Calls per step in A and B.
    pub a_calls_per_step: f64,
    /// Calls per step in B.
    pub b_calls_per_step: f64,
    /// Time per step in A, ns.
    pub a_ns_per_step: i64,
    /// Time per step in B, ns.
    pub b_ns_per_step: i64,
    /// B minus A, ns per step.
    pub delta_ns_per_step: i64,
}

/// A finding key and its figures on one side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingChange {
    /// The finding's key.
    pub key: FindingKey,
    /// Its figures in A (absent when it appeared).
    pub a: Option<FindingGroup>,
    /// Its figures in B (absent when it went away).
    pub b: Option<FindingGroup>,
}

/// One engine class in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineChange {
    /// Engine class.
    pub class: String,
    /// Median per-step utilization in A, percent.
    pub a_pct: Option<f64>,
    /// Median per-step utilization in B, percent.
    pub b_pct: Option<f64>,
}

/// The diff of two runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// `steplens.diff/1`.
    pub schema: String,
    /// Label of run A (its path).
    pub a_label: String,
    /// Label of run B.
    pub b_label: String,
    /// Run A's figures.
    pub a: RunFigures,
    /// Run B's figures.
    pub b: RunFigures,
    /// Engine classes in either run.
    pub engines: Vec<EngineChange>,
    /// Whether ops were joined on input shapes as well as names.
    pub ops_by_shape: bool,
    /// Every op of either run, largest change first.
    pub ops: Vec<OpChange>,
    /// Findings in B but not in A.
    pub appeared: Vec<FindingChange>,
    /// Findings in A but not in B.
    pub gone: Vec<FindingChange>,
    /// Findings in both.
    pub persisting: Vec<FindingChange>,
}

/// One side of a diff: its figures, its op rows and a label.
pub struct DiffSide<'a> {
    /// Path or name shown for the run.
    pub label: String,
    /// Figures from its report.
    pub figures: &'a RunFigures,
    /// Ops by name (and shape when known).
    pub ops: &'a [OpRow],
}

/// Diffs run A against run B.
#[must_use]
pub fn diff(a: &DiffSide<'_>, b: &DiffSide<'_>) -> Diff {
    let per_step_a = a.figures.steps_total.max(1);
    let per_step_b = b.figures.steps_total.max(1);
    let joined = join_ops(a.ops, b.ops);
    let ops_by_shape = joined.iter().any(|o| !o.shapes.is_empty());
    let mut ops: Vec<OpChange> = joined
        .into_iter()
        .map(|op| op_change(op, per_step_a, per_step_b))
        .collect();
    ops.sort_by(|x, y| {
        y.delta_ns_per_step
            .abs()
            .cmp(&x.delta_ns_per_step.abs())
            .then_with(|| {
                y.b_ns_per_step
                    .max(y.a_ns_per_step)
                    .cmp(&x.b_ns_per_step.max(x.a_ns_per_step))
            })
            .then_with(|| x.name.cmp(&y.name))
    });

    let classes: BTreeSet<&String> = a
        .figures
        .engine_pct
        .keys()
        .chain(b.figures.engine_pct.keys())
        .collect();
    let engines = classes
        .into_iter()
        .map(|class| EngineChange {
            class: class.clone(),
            a_pct: a.figures.engine_pct.get(class).copied(),
            b_pct: b.figures.engine_pct.get(class).copied(),
        })
        .collect();

    let keys: BTreeSet<&FindingKey> = a
        .figures
        .findings
        .keys()
        .chain(b.figures.findings.keys())
        .collect();
    let (mut appeared, mut gone, mut persisting) = (Vec::new(), Vec::new(), Vec::new());
    for key in keys {
        let change = FindingChange {
            key: key.clone(),
            a: a.figures.findings.get(key).cloned(),
            b: b.figures.findings.get(key).cloned(),
        };
        match (&change.a, &change.b) {
            (None, Some(_)) => appeared.push(change),
            (Some(_), None) => gone.push(change),
            _ => persisting.push(change),
        }
    }
    let lost = |c: &FindingChange| c.b.as_ref().or(c.a.as_ref()).map_or(0, |g| g.lost_ns);
    for list in [&mut appeared, &mut gone, &mut persisting] {
        list.sort_by_key(|c| std::cmp::Reverse(lost(c)));
    }

    Diff {
        schema: DIFF_SCHEMA.to_owned(),
        a_label: a.label.clone(),
        b_label: b.label.clone(),
        a: a.figures.clone(),
        b: b.figures.clone(),
        engines,
        ops_by_shape,
        ops,
        appeared,
        gone,
        persisting,
    }
}

fn op_change(op: JoinedOp, steps_a: usize, steps_b: usize) -> OpChange {
    let (a_calls, a_total) = op.a.unwrap_or((0, 0));
    let (b_calls, b_total) = op.b.unwrap_or((0, 0));
    let a_ns = a_total / steps_a as i64;
    let b_ns = b_total / steps_b as i64;
    let delta = b_ns - a_ns;
    let status = match (op.a, op.b) {
        (None, _) => OpStatus::Added,
        (_, None) => OpStatus::Removed,
        _ => {
            let base = a_ns.max(1) as f64;
            let big = delta.abs() >= OP_CHANGE_MIN_NS
                && delta.abs() as f64 * 100.0 / base >= OP_CHANGE_MIN_PCT;
            match (big, delta > 0) {
                (false, _) => OpStatus::Same,
                (true, true) => OpStatus::Slower,
                (true, false) => OpStatus::Faster,
            }
        }
    };
    OpChange {
        name: op.name,
        shapes: op.shapes,
        status,
        a_calls_per_step: a_calls as f64 / steps_a as f64,
        b_calls_per_step: b_calls as f64 / steps_b as f64,
        a_ns_per_step: a_ns,
        b_ns_per_step: b_ns,
        delta_ns_per_step: delta,
    }
}
