//! Flow v2 (`bind_id` with `flow_in`/`flow_out` on slices): each slice end noted while the
//! events are read, then joined in time order as Perfetto does once the document is read.

use super::KinetoReader;
use crate::builder::FlowPhase;
use crate::model::TrackId;

/// Ids of the flow v2 bindings made by place (a `B` end), apart from any id a trace writes.
const V2_POINT_IDS: u64 = 1 << 62;

/// One end of a flow v2 on a slice.
#[derive(Clone, Copy)]
pub(super) struct FlowV2End {
    pub(super) id: u64,
    pub(super) slice: V2Slice,
    pub(super) track: TrackId,
    pub(super) ts: i64,
    pub(super) flow_in: bool,
    pub(super) flow_out: bool,
}

/// The slice a flow v2 end is on: a complete (`X`) slice by push index, or a `B` slice by its
/// track and start (its index is known only when its `E` closes it).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum V2Slice {
    Index(usize),
    Begin(TrackId, i64),
}

impl<'a, 'b, 'p> KinetoReader<'a, 'b, 'p> {
    /// Joins flow v2 ends as Perfetto does, in time order (file order on ties): a slice with
    /// `flow_in` ends the flow its `bind_id` carries from the last slice with `flow_out` on that
    /// id (several may end the same one); a slice with `flow_out` then carries it on, so one
    /// with both passes the flow through. An end without its partner is counted as unbound.
    pub(super) fn bind_flows_v2(&mut self) {
        if self.flow_v2.is_empty() {
            return;
        }
        let cat = self.builder.intern_cat("flow");
        let mut ends = std::mem::take(&mut self.flow_v2);
        // Stable: file order on equal times.
        ends.sort_by_key(|e| e.ts);
        // Per id: the slice the flow leaves, and whether it arrived anywhere yet.
        let mut carried: rustc_hash::FxHashMap<u64, (FlowV2End, bool)> =
            rustc_hash::FxHashMap::default();
        let mut bound = 0u64;
        for end in ends {
            if end.flow_in {
                match carried.get_mut(&end.id) {
                    Some((from, arrived)) if from.slice != end.slice => {
                        *arrived = true;
                        match (from.slice, end.slice) {
                            (V2Slice::Index(a), V2Slice::Index(b)) => {
                                self.builder.push_slice_flow(cat, end.id, a, b);
                            }
                            // A `B` slice is only made when its `E` closes it: bind by place,
                            // under an id of its own.
                            _ => {
                                bound += 1;
                                let id = V2_POINT_IDS | bound;
                                let (ft, fts) = (from.track, from.ts);
                                self.builder
                                    .push_flow(cat, id, FlowPhase::Start, ft, fts, true);
                                self.builder.push_flow(
                                    cat,
                                    id,
                                    FlowPhase::Finish,
                                    end.track,
                                    end.ts,
                                    true,
                                );
                            }
                        }
                    }
                    _ => self.builder.count_unbound_flow_end(),
                }
            }
            if end.flow_out {
                if let Some((_, false)) = carried.get(&end.id) {
                    self.builder.count_unbound_flow_end();
                }
                carried.insert(end.id, (end, false));
            }
        }
        for (_, arrived) in carried.values() {
            if !arrived {
                self.builder.count_unbound_flow_end();
            }
        }
    }
}
