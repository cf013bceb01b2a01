//! Gaudi specifics the format-free builder leaves out: the engine classes named in Gaudi lane
//! names, and the binding of Analyzed Nodes rows to their own slices and to the HW-trace slices
//! they describe.

use rustc_hash::FxHashMap;

use crate::format::FormatId;
use crate::model::{EngineClass, SliceId, StrId, Timeline};

/// Category of the analyzed-node slices (the node reader writes it, node binding looks for it).
pub(crate) const CATEGORY: &str = "analyzed_node";

/// `g_1_conv_0_tpc_packing iter 2` → `g_1_conv_0_tpc_packing`.
#[must_use]
pub(crate) fn base_node_name(name: &str) -> &str {
    if let Some((base, n)) = name.rsplit_once(" iter ")
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
    {
        return base;
    }
    name
}

/// The engine class named in a Gaudi engine lane's name: `[HD3] TPC 5`, `*MME `, `**DMA `,
/// `*EDMA `, `*NIC Internal `, `*ROTATOR`, `MME 0` …. `None` for other names (CUDA streams).
#[must_use]
pub(crate) fn engine_class(name: &str) -> Option<EngineClass> {
    let name = name.trim().trim_start_matches('*').trim();
    // Drop a die prefix such as `[HD3] ` / `[D0] `.
    let name = match name.strip_prefix('[').and_then(|rest| rest.split_once(']')) {
        Some((_, rest)) => rest.trim(),
        None => name,
    };
    let word = name
        .split(|c: char| c == ' ' || c == '_' || c.is_ascii_digit())
        .next()?;
    Some(match word.to_ascii_uppercase().as_str() {
        "MME" => EngineClass::Mme,
        "TPC" => EngineClass::Tpc,
        "DMA" | "EDMA" | "PDMA" | "KDMA" => EngineClass::Dma,
        "NIC" => EngineClass::Nic,
        "ROTATOR" => EngineClass::Rotator,
        _ => return None,
    })
}

/// Binds each Analyzed Nodes row to its own slice (same source, name, start, category
/// `analyzed_node`) and to the device-work slices of `habana-hw-csv` sources with the same
/// node name, ` iter N` suffix removed, that overlap `[start, end)`.
pub(crate) fn bind_node_metrics(timeline: &mut Timeline) {
    if timeline.node_metrics.is_empty() {
        return;
    }
    let t = &timeline;
    let node_cat = t.categories.lookup(CATEGORY);
    let hw_source: Vec<bool> = t
        .sources
        .iter()
        .map(|s| s.format == FormatId::HabanaHwCsv)
        .collect();
    let mut own: FxHashMap<(u16, StrId, i64), SliceId> = FxHashMap::default();
    let mut hw: FxHashMap<StrId, Vec<SliceId>> = FxHashMap::default();
    for track in &t.tracks {
        let is_hw = hw_source
            .get(track.source as usize)
            .copied()
            .unwrap_or(false);
        for i in track.slices.clone() {
            let idx = i as usize;
            if Some(t.slices.cat[idx]) == node_cat {
                own.entry((track.source, t.slices.name[idx], t.slices.start[idx]))
                    .or_insert(i);
            } else if is_hw && t.slice_class(i).is_device_work() {
                hw.entry(t.slices.name[idx]).or_default().push(i);
            }
        }
    }
    // Per name: the slices by start and the longest one, so each node finds the slices that
    // overlap it by binary search (a node runs once per iteration: a scan of every slice of its
    // name per node would be quadratic in iterations).
    let hw: FxHashMap<StrId, (Vec<SliceId>, i64)> = hw
        .into_iter()
        .map(|(name, mut slices)| {
            slices.sort_unstable_by_key(|&i| (t.slices.start[i as usize], i));
            let longest = slices
                .iter()
                .map(|&i| t.slices.dur[i as usize])
                .max()
                .unwrap_or(0);
            (name, (slices, longest))
        })
        .collect();
    let mut nodes = std::mem::take(&mut timeline.node_metrics);
    let t = &timeline;
    for node in &mut nodes {
        node.slice = t
            .strings
            .lookup(&node.name)
            .and_then(|name| own.get(&(node.source, name, node.start_ns)).copied());
        let base = base_node_name(&node.name);
        let Some((candidates, longest)) = t.strings.lookup(base).and_then(|name| hw.get(&name))
        else {
            continue;
        };
        let earliest = node.start_ns.saturating_sub(*longest);
        let first = candidates.partition_point(|&i| t.slices.start[i as usize] < earliest);
        node.hw_slices = candidates[first..]
            .iter()
            .copied()
            .take_while(|&i| t.slices.start[i as usize] < node.end_ns)
            .filter(|&i| t.slices.end(i) > node.start_ns)
            .collect();
        node.hw_slices.sort_unstable();
    }
    timeline.node_metrics = nodes;
}

#[cfg(test)]
mod tests {
    use super::engine_class;
    use crate::model::EngineClass;

    #[test]
    fn gaudi_engine_names() {
        assert_eq!(engine_class("[HD3] TPC 5"), Some(EngineClass::Tpc));
        assert_eq!(engine_class("[HD0] MME"), Some(EngineClass::Mme));
        assert_eq!(engine_class("**MME "), Some(EngineClass::Mme));
        assert_eq!(engine_class("*EDMA "), Some(EngineClass::Dma));
        assert_eq!(engine_class("*NIC Internal "), Some(EngineClass::Nic));
        assert_eq!(engine_class("*ROTATOR"), Some(EngineClass::Rotator));
        assert_eq!(engine_class("TPC_3"), Some(EngineClass::Tpc));
        assert_eq!(engine_class("[D0] Cache Slice"), None);
        assert_eq!(engine_class("stream 7"), None);
        assert_eq!(engine_class("***Host"), None);
    }
}
