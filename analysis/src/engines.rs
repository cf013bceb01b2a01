//! Per-engine-class utilization over the whole trace: how many engines of each class ran work,
//! how much of the trace at least one of them was busy, and how busy the average engine was.
//! For Gaudi, also how long the matrix engine (MME) and the vector engines (TPC) overlapped.
//! And the same busy time over the trace in equal bins ([`Utilization`], the HTML page's chart).

use std::borrow::Cow;
use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use steplens_ingest::intervals::IntervalSet;
use steplens_ingest::model::{EngineClass, Timeline};

use crate::busy::{Channels, EngineBusy};

/// Utilization of one engine class.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EngineStats {
    /// Engine class (`MME`, `TPC`, `DMA`, `compute-stream`, …).
    pub class: String,
    /// Engines (tracks) of the class that ran work.
    pub engines: usize,
    /// Time at least one engine of the class was busy, ns.
    pub busy_ns: i64,
    /// `busy_ns` as a share of the trace's time span, percent.
    pub busy_pct: f64,
    /// Mean over the class's engines of each engine's busy share of the span, percent.
    pub mean_engine_utilization_pct: f64,
}

/// Bins of the utilization over the trace.
pub const UTILIZATION_BINS: usize = 120;

/// The busy share of each engine class over the trace, in [`UTILIZATION_BINS`] equal bins.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Utilization {
    /// The trace's first event, ns.
    pub from_ns: i64,
    /// The trace's last event end, ns.
    pub to_ns: i64,
    /// Per engine class, by class name (a class never busy has only zeros).
    pub classes: Vec<ClassUtilization>,
}

/// One engine class's busy share per bin.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassUtilization {
    /// Engine class.
    pub class: String,
    /// Per bin: the class's busy time over the bin's length and the inputs that have the
    /// class (its mean over inputs), at most 1.
    pub busy_share: Vec<f64>,
}

/// The busy share of each engine class over the trace in equal bins, from the inputs' busy
/// sets ([`crate::busy::channels`]); `None` without device engines or time.
#[must_use]
pub fn utilization(
    timeline: &Timeline,
    channels: &FxHashMap<u16, Channels>,
) -> Option<Utilization> {
    let mut engines: BTreeMap<&String, Vec<&IntervalSet>> = BTreeMap::new();
    for c in channels.values() {
        for (name, set) in &c.engines {
            engines.entry(name).or_default().push(set);
        }
    }
    let (from, to) = timeline.time_range()?;
    if engines.is_empty() || to <= from {
        return None;
    }
    let span = (to - from) as f64;
    let bins = UTILIZATION_BINS;
    let classes = engines
        .into_iter()
        .map(|(name, sets)| ClassUtilization {
            class: name.clone(),
            busy_share: (0..bins)
                .map(|b| {
                    let a = from + (span * b as f64 / bins as f64) as i64;
                    let z = from + (span * (b + 1) as f64 / bins as f64) as i64;
                    let busy: i64 = sets.iter().map(|set| set.covered(a, z)).sum();
                    (busy as f64 / (z - a).max(1) as f64 / sets.len() as f64).min(1.0)
                })
                .collect(),
        })
        .collect();
    Some(Utilization {
        from_ns: from,
        to_ns: to,
        classes,
    })
}

/// The engine table, by class name, and the MME/TPC overlap (ns) when both classes exist, from
/// the inputs' busy sets ([`crate::busy::channels`]): a class's busy time is the union over
/// inputs, its engines and their own busy times are summed.
#[must_use]
pub fn engine_utilization(
    timeline: &Timeline,
    channels: &FxHashMap<u16, Channels>,
) -> (Vec<EngineStats>, Option<i64>) {
    let span = timeline.time_range().map_or(0, |(a, b)| b - a);
    let mut per_class: BTreeMap<&str, (EngineBusy, Vec<&IntervalSet>)> = BTreeMap::new();
    for c in channels.values() {
        for (class, busy) in &c.engine_busy {
            let entry = per_class.entry(class).or_default();
            entry.0.engines += busy.engines;
            entry.0.own_busy_ns += busy.own_busy_ns;
            if let Some(set) = c.engines.get(class) {
                entry.1.push(set);
            }
        }
    }
    let mut rows = Vec::new();
    let mut by_class: BTreeMap<&str, Cow<'_, IntervalSet>> = BTreeMap::new();
    for (class, (busy, sets)) in per_class {
        // One input's set is the class's; several are joined.
        let set = if let [one] = sets[..] {
            Cow::Borrowed(one)
        } else {
            Cow::Owned(IntervalSet::from_ranges(
                sets.iter().flat_map(|s| s.iter()).collect(),
            ))
        };
        let pct = |v: i64, n: usize| {
            if span > 0 && n > 0 {
                crate::units::round2(v as f64 * 100.0 / (span as f64 * n as f64))
            } else {
                0.0
            }
        };
        rows.push(EngineStats {
            class: class.to_owned(),
            engines: busy.engines,
            busy_ns: set.total(),
            busy_pct: pct(set.total(), 1),
            mean_engine_utilization_pct: pct(busy.own_busy_ns, busy.engines),
        });
        by_class.insert(class, set);
    }
    let overlap = match (
        by_class.get(EngineClass::Mme.as_str()),
        by_class.get(EngineClass::Tpc.as_str()),
    ) {
        (Some(mme), Some(tpc)) => Some(mme.iter().map(|(a, b)| tpc.covered(a, b)).sum()),
        _ => None,
    };
    (rows, overlap)
}

#[cfg(test)]
mod tests {
    use steplens_ingest::TimelineBuilder;
    use steplens_ingest::model::{ArgsRef, LaneId};

    use super::engine_utilization;
    use crate::busy::channels;

    #[test]
    fn mme_tpc_utilization_and_overlap() {
        let mut b = TimelineBuilder::default();
        let device = LaneId::Int(0);
        b.process_meta(0, device, Some("accel0".into()), Some("HPU 0".into()), None);
        let kernel = b.intern_cat("Kernel");
        let name = b.intern("node");
        let lanes = [
            ("[HD0] MME", 1, vec![(0, 100)]),
            ("[HD0] TPC 0", 2, vec![(50, 100)]),
            ("[HD0] TPC 1", 3, vec![(140, 10)]),
        ];
        for (lane, tid, slices) in lanes {
            let tid = LaneId::Int(tid);
            b.thread_meta(0, device, tid, Some(lane.into()), None);
            let track = b.track(0, device, tid);
            for (start, dur) in slices {
                b.push_slice(track, start, dur, name, kernel, ArgsRef::NONE);
            }
        }
        let timeline = b.finish();
        let (rows, overlap) = engine_utilization(&timeline, &channels(&timeline));
        let got: Vec<(&str, usize, i64)> = rows
            .iter()
            .map(|r| (r.class.as_str(), r.engines, r.busy_ns))
            .collect();
        assert_eq!(got, [("MME", 1, 100), ("TPC", 2, 100)]);
        // Span 0..150: MME busy 100/150; TPC engines 100/150 and 10/150 on average.
        assert!((rows[0].busy_pct - 66.67).abs() < 0.01);
        assert!((rows[1].mean_engine_utilization_pct - 36.67).abs() < 0.01);
        assert_eq!(overlap, Some(50));
    }
}
