//! The kernel tables (by name, and by name, op and launch shape) and the Tensor Core share of
//! kernel time.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};
use steplens_ingest::Timeline;

use super::kernel_facts::{Facts, KernelFacts};
use super::steps_and_links::enclosing_op;
use super::{KernelRow, LaunchShape, Links, pct};

#[derive(Default)]
struct KernelAcc {
    calls: u64,
    total: i64,
    max: i64,
    min: i64,
    bps: f64,
    occ: f64,
    tensor_cores: bool,
    op_tc_eligible: Option<bool>,
}

impl KernelAcc {
    fn add(&mut self, dur: i64, f: &KernelFacts) {
        if self.calls == 0 {
            self.min = dur;
        }
        self.calls += 1;
        self.total += dur;
        self.max = self.max.max(dur);
        self.min = self.min.min(dur);
        self.bps += f.blocks_per_sm.unwrap_or(0.0) * dur as f64;
        self.occ += f.occupancy.unwrap_or(0.0) * dur as f64;
        self.tensor_cores = f.tensor_cores;
    }

    fn row(self, name: String, op: Option<String>, launch: Option<LaunchShape>) -> KernelRow {
        let weighted = |v: f64| {
            if self.total > 0 {
                v / self.total as f64
            } else {
                0.0
            }
        };
        KernelRow {
            name,
            op,
            launch,
            calls: self.calls,
            total_ns: self.total,
            mean_ns: self.total as f64 / self.calls.max(1) as f64,
            max_ns: self.max,
            min_ns: self.min,
            tensor_cores: self.tensor_cores,
            op_tc_eligible: self.op_tc_eligible,
            blocks_per_sm: weighted(self.bps),
            occupancy_pct: weighted(self.occ),
        }
    }
}

pub(super) fn kernels(
    t: &Timeline,
    links: &Links,
    eligible_ops: &FxHashSet<String>,
    facts: &Facts,
) -> (Vec<KernelRow>, Vec<KernelRow>, f64) {
    let mut by_name: FxHashMap<u32, KernelAcc> = FxHashMap::default();
    let mut by_op: FxHashMap<(u32, Option<u32>, u32), KernelAcc> = FxHashMap::default();
    let (mut tc, mut all) = (0i64, 0i64);
    for f in &facts.kernels {
        let dur = t.slices.dur[f.slice as usize];
        all += dur;
        if f.tensor_cores {
            tc += dur;
        }
        let name = t.slices.name[f.slice as usize];
        by_name.entry(name).or_default().add(dur, f);
        let op = links
            .launcher(f.slice)
            .and_then(|r| enclosing_op(t, r))
            .map(|o| t.slices.name[o as usize]);
        let acc = by_op.entry((name, op, f.launch)).or_default();
        if acc.calls == 0 {
            acc.op_tc_eligible = Some(op.is_some_and(|o| eligible_ops.contains(t.strings.get(o))));
        }
        acc.add(dur, f);
    }
    let by_name: BTreeMap<String, KernelAcc> = by_name
        .into_iter()
        .map(|(name, acc)| (t.strings.get(name).to_owned(), acc))
        .collect();
    let by_op: BTreeMap<(String, String, LaunchShape), KernelAcc> = by_op
        .into_iter()
        .map(|((name, op, launch), acc)| {
            (
                (
                    t.strings.get(name).to_owned(),
                    op.map_or_else(|| "N/A".to_owned(), |o| t.strings.get(o).to_owned()),
                    facts.shapes[launch as usize].clone(),
                ),
                acc,
            )
        })
        .collect();
    let mut names: Vec<KernelRow> = by_name
        .into_iter()
        .map(|(name, a)| a.row(name, None, None))
        .collect();
    names.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    let mut ops: Vec<KernelRow> = by_op
        .into_iter()
        .map(|((name, op, shape), a)| a.row(name, Some(op), Some(shape)))
        .collect();
    ops.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    (names, ops, pct(tc, all))
}
