//! `recompile`: torch.compile compiled a graph again after warm-up.
//!
//! A compile shows in the trace through its `<phase>_data: …compile_id=F/N` annotations (the
//! only place the id appears) under the compile spans (`dynamo`, `entire_frame_compile`,
//! `entire_backward_compile`); `Torch-Compiled Region: F/N` marks the compiled graph running.
//! `N > 0` is a recompile of frame `F`. The compile time lost is the duration of the compile
//! spans that carry the id; what changed is read from the `Input Dims` of the compiled
//! function's call (`CompiledFunction`) against the previous graph of the same frame.

use std::collections::BTreeMap;

use steplens_ingest::model::{CategoryClass, OpArg, SliceId};

use super::human_ns;
use super::registry::{Detector, Raises, Saves, Threshold};
use crate::context::{Context, NameSet};
use crate::finding::{Cost, Evidence, FindingKind, Raised, Severity};

const RECOMPILE_WARMUP_COMPILES: Threshold = Threshold::int(
    "recompile_warmup_compiles",
    1,
    "compiles with an index below this are warm-up, not recompiles (`F/0` is the first compile of frame `F`).",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "recompile",
    raises: &[Raises::new(FindingKind::Recompile, Saves::HostTime)],
    thresholds: &[RECOMPILE_WARMUP_COMPILES],
    advice: "Keep shapes, dtypes and Python values the compiled code depends on stable (pad to fixed sizes, mark dynamic dims), so the graph compiles once.",
    detect: |ctx, _| detect(ctx),
};

/// Outermost spans of a compile.
const COMPILE_ROOTS: &[&str] = &["dynamo", "entire_frame_compile", "entire_backward_compile"];

/// `F/N` from `…compile_id=F/N…` or `Torch-Compiled Region: F/N`.
fn compile_id(name: &str) -> Option<(u32, u32)> {
    let rest = if let Some(at) = name.find("compile_id=") {
        &name[at + "compile_id=".len()..]
    } else {
        name.strip_prefix("Torch-Compiled Region: ")?
    };
    let text: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '/')
        .collect();
    let (frame, index) = text.split_once('/')?;
    Some((frame.parse().ok()?, index.parse().ok()?))
}

#[derive(Default)]
struct Compile {
    first_ts: Option<(i64, SliceId)>,
    spans: Vec<SliceId>,
    region: Option<SliceId>,
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let mut compiles: BTreeMap<(u16, u32, u32), Compile> = BTreeMap::new();
    let marks = NameSet::new(t, |name| {
        name.contains("compile_id=") || name.starts_with("Torch-Compiled Region: ")
    });
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            if !marks.has(t, i) {
                continue;
            }
            let name = t.slice_name(i);
            let Some((frame, index)) = compile_id(name) else {
                continue;
            };
            let c = compiles.entry((track.source, frame, index)).or_default();
            if name.starts_with("Torch-Compiled Region: ") {
                c.region.get_or_insert(i);
                continue;
            }
            let ts = t.slices.start[i as usize];
            if c.first_ts.is_none_or(|(first, _)| ts < first) {
                c.first_ts = Some((ts, i));
            }
            let root = ctx
                .ancestors(i)
                .filter(|&a| COMPILE_ROOTS.contains(&t.slice_name(a)))
                .last();
            if let Some(root) = root
                && !c.spans.contains(&root)
            {
                c.spans.push(root);
            }
        }
    }
    let warmup = ctx.thresholds.recompile_warmup_compiles;
    let mut findings = Vec::new();
    for (&(source, frame, index), c) in &compiles {
        let Some((ts, marker)) = c.first_ts else {
            continue;
        };
        if index < warmup {
            continue;
        }
        let step = ctx.step_at(source, ts);
        let step_name = step.map(|s| t.steps[s].name.clone());
        let lost: i64 = c.spans.iter().map(|&s| t.slices.dur[s as usize]).sum();
        let previous = (0..index)
            .rev()
            .find_map(|n| compiles.get(&(source, frame, n)).and_then(|p| p.region));
        let change = match (previous, c.region) {
            (Some(before), Some(after)) => shape_change(ctx, before, after),
            _ => None,
        };
        let mut evidence: Vec<Evidence> = c.spans.iter().map(|&s| ctx.evidence(s)).collect();
        evidence.extend(c.region.map(|r| ctx.evidence(r)));
        let (start, end) = c.spans.iter().fold((ts, ts), |(a, b), &s| {
            (a.min(t.slices.start[s as usize]), b.max(t.slices.end(s)))
        });
        let where_ = step_name
            .as_deref()
            .map_or_else(String::new, |s| format!(" in {s}"));
        let mut title = format!(
            "torch.compile recompiled frame {frame} (compile {frame}/{index}){where_}: {} compiling",
            human_ns(lost)
        );
        if let Some(change) = &change {
            title.push_str(&format!("; inputs changed: {change}"));
        }
        findings.push(Raised {
            kind: FindingKind::Recompile,
            severity: Severity::of_share(lost, step.map_or(0, |s| t.steps[s].dur)),
            title,
            step,
            start_ns: start,
            end_ns: end,
            track: ctx.track_name(marker),
            ops: vec![format!("Torch-Compiled Region: {frame}/{index}")],
            call_site: ctx.call_site(marker),
            count: 1,
            lost_ns: lost,
            evidence,
            cost: Cost::measured(
                source,
                c.spans
                    .iter()
                    .map(|&s| (t.slices.start[s as usize], t.slices.end(s)))
                    .collect(),
            ),
            recommendation: "Each new input shape (or Python value baked into the graph) \
                             compiles a new graph. Keep shapes static (pad or bucket sequence \
                             lengths), mark the varying dimensions dynamic \
                             (torch._dynamo.mark_dynamic or dynamic=True), and pass changing \
                             Python scalars as tensors."
                .into(),
        });
    }
    findings
}

/// The compiled function's call inside a `Torch-Compiled Region`: the first op with shapes.
fn compiled_call(ctx: &Context<'_>, region: SliceId) -> Option<SliceId> {
    let t = ctx.timeline;
    let end = t.slices.end(region);
    let track_end = t.slice_track(region)?.slices.end;
    (region + 1..track_end)
        .take_while(|&j| t.slices.start[j as usize] < end)
        .find(|&j| {
            t.slice_class(j) == CategoryClass::CpuOp && ctx.arg(j, OpArg::InputDims).is_some()
        })
}

/// `input 10: [16, 32] -> [16, 40]` for the inputs whose shapes differ.
fn shape_change(ctx: &Context<'_>, before: SliceId, after: SliceId) -> Option<String> {
    let dims = |region| -> Option<Vec<serde_json::Value>> {
        let call = compiled_call(ctx, region)?;
        serde_json::from_slice(ctx.arg(call, OpArg::InputDims)?).ok()
    };
    let (a, b) = (dims(before)?, dims(after)?);
    let changes: Vec<String> = a
        .iter()
        .zip(&b)
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| format!("input {i}: {} -> {}", spaced(x), spaced(y)))
        .collect();
    if changes.is_empty() {
        return None;
    }
    Some(changes.into_iter().take(3).collect::<Vec<_>>().join("; "))
}

/// `[16,40]` as `[16, 40]`.
fn spaced(value: &serde_json::Value) -> String {
    value.to_string().replace(',', ", ")
}

#[cfg(test)]
mod tests {
    use super::compile_id;

    #[test]
    fn compile_ids() {
        assert_eq!(
            compile_id("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=0/2"),
            Some((0, 2))
        );
        assert_eq!(compile_id("Torch-Compiled Region: 3/1"), Some((3, 1)));
        assert_eq!(compile_id("aten::mm"), None);
    }
}
