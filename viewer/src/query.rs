//! Questions the panels ask of the Timeline: search by name, the aggregate of a time range,
//! the details of one slice. Each runs once when its input changes, never per frame.
//!
//! Costs: a search is O(distinct names) to match plus O(slices) to collect; a range aggregate is
//! O(slices in the range + tracks × log slices); slice details are O(children + depth + flows).

use std::collections::HashMap;

use regex::RegexBuilder;
use steplens_analysis::intervals::IntervalSet;
use steplens_ingest::model::{NO_PARENT, SliceId, StrId, Timeline, TrackKind};

/// Slices whose name matches `query` (case-insensitive substring, or a regex), in time order.
///
/// # Errors
/// When `regex` is set and `query` is not a valid regular expression.
pub fn search(timeline: &Timeline, query: &str, regex: bool) -> Result<Vec<SliceId>, regex::Error> {
    if query.is_empty() {
        return Ok(Vec::new());
    }
    let matched: Vec<bool> = if regex {
        let re = RegexBuilder::new(query).case_insensitive(true).build()?;
        timeline
            .strings
            .iter()
            .map(|(_, s)| re.is_match(s))
            .collect()
    } else {
        let needle = query.to_lowercase();
        timeline
            .strings
            .iter()
            .map(|(_, s)| s.to_lowercase().contains(&needle))
            .collect()
    };
    Ok(slices_named(timeline, |name| {
        matched.get(name as usize).copied().unwrap_or(false)
    }))
}

/// Slices whose name satisfies `keep`, in time order.
pub fn slices_named(timeline: &Timeline, keep: impl Fn(StrId) -> bool) -> Vec<SliceId> {
    let mut ids: Vec<SliceId> = timeline
        .slices
        .name
        .iter()
        .enumerate()
        .filter(|&(_, &n)| keep(n))
        .map(|(i, _)| i as SliceId)
        .collect();
    let starts = &timeline.slices.start;
    ids.sort_by_key(|&i| (starts.get(i as usize).copied().unwrap_or(0), i));
    ids
}

/// One row of a range aggregate: a slice name on host or device tracks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregateRow {
    /// Slice name.
    pub name: String,
    /// `host`, `device`, `async`.
    pub kind: &'static str,
    /// Slices overlapping the range.
    pub count: u64,
    /// Their time inside the range, ns.
    pub total_ns: i64,
}

/// Busy time of one track inside the range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackBusy {
    /// Track name (with its engine class for device tracks).
    pub name: String,
    /// Time covered by top-level slices inside the range, ns: the union of their clipped
    /// intervals (top-level siblings may overlap, and overlapping time counts once).
    pub busy_ns: i64,
}

/// What a time-range selection holds (Perfetto's area selection).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeAggregate {
    /// Range start, absolute ns.
    pub start: i64,
    /// Range end, absolute ns.
    pub end: i64,
    /// Per name, by time inside the range (largest first).
    pub rows: Vec<AggregateRow>,
    /// Per track with work in the range, by busy time (largest first).
    pub tracks: Vec<TrackBusy>,
    /// Slices overlapping the range.
    pub slices: u64,
}

/// Aggregates the slices overlapping `[start, end)` (absolute ns) over every track.
#[must_use]
pub fn aggregate(timeline: &Timeline, start: i64, end: i64) -> RangeAggregate {
    let s = &timeline.slices;
    let mut by_name: HashMap<(StrId, &'static str), (u64, i64)> = HashMap::new();
    let mut tracks = Vec::new();
    let mut total = 0u64;
    for track in &timeline.tracks {
        if track.kind == TrackKind::Counter || track.slices.is_empty() {
            continue;
        }
        let kind = track.kind.label();
        let first = track.slices.start as usize;
        let starts = s.start.get(first..track.slices.end as usize).unwrap_or(&[]);
        let a = first + starts.partition_point(|&t| t < start);
        let b = first + starts.partition_point(|&t| t < end);
        // Clipped depth-0 intervals; their union is the busy time (overlapping top-level
        // siblings, which the nesting stage keeps rather than drops, would count twice in a sum).
        let mut top: Vec<(i64, i64)> = Vec::new();
        let mut add = |i: usize, by_name: &mut HashMap<_, (u64, i64)>| {
            let (Some(&st), Some(&d), Some(&n)) = (s.start.get(i), s.dur.get(i), s.name.get(i))
            else {
                return;
            };
            let clipped = (st + d).min(end) - st.max(start);
            if clipped < 0 || (clipped == 0 && d > 0) {
                return;
            }
            let e = by_name.entry((n, kind)).or_insert((0, 0));
            e.0 += 1;
            e.1 += clipped;
            total += 1;
            if s.depth.get(i) == Some(&0) {
                top.push((st.max(start), (st + d).min(end)));
            }
        };
        // Slices that began before the range and reach into it are ancestors of (or are) the
        // last slice that began before it.
        if a > first {
            let mut p = (a - 1) as SliceId;
            loop {
                add(p as usize, &mut by_name);
                match s.parent.get(p as usize) {
                    Some(&q) if q != NO_PARENT => p = q,
                    _ => break,
                }
            }
        }
        for i in a..b {
            add(i, &mut by_name);
        }
        let busy = IntervalSet::from_ranges(top).total();
        if busy > 0 {
            let name = match &track.kind {
                TrackKind::DeviceEngine { class, .. } => format!("{} [{class}]", track.name),
                _ => track.name.clone(),
            };
            tracks.push(TrackBusy {
                name,
                busy_ns: busy,
            });
        }
    }
    let mut rows: Vec<AggregateRow> = by_name
        .into_iter()
        .map(|((n, kind), (count, total_ns))| AggregateRow {
            name: timeline.strings.get(n).to_owned(),
            kind,
            count,
            total_ns,
        })
        .collect();
    rows.sort_by(|x, y| {
        y.total_ns
            .cmp(&x.total_ns)
            .then_with(|| x.name.cmp(&y.name))
    });
    tracks.sort_by(|x, y| y.busy_ns.cmp(&x.busy_ns).then_with(|| x.name.cmp(&y.name)));
    RangeAggregate {
        start,
        end,
        rows,
        tracks,
        slices: total,
    }
}

/// A flow touching the selected slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowLink {
    /// The slice at the other end.
    pub other: SliceId,
    /// Whether the flow leaves the selected slice (launch → device work).
    pub outgoing: bool,
    /// Flow category.
    pub cat: String,
}

/// Everything the details pane shows about one slice, decoded once on selection.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceDetails {
    /// The slice.
    pub id: SliceId,
    /// Name.
    pub name: String,
    /// Category as written.
    pub category: String,
    /// Track name.
    pub track: String,
    /// Start, absolute ns.
    pub start: i64,
    /// Duration, ns.
    pub dur: i64,
    /// Duration minus direct children, ns.
    pub self_ns: i64,
    /// Args as `key = value` text (decoded now, lazily).
    pub args: Vec<(String, String)>,
    /// Enclosing slices, innermost first.
    pub parents: Vec<SliceId>,
    /// Flows in and out.
    pub flows: Vec<FlowLink>,
}

/// The details of slice `id` (`None` for an unknown id).
#[must_use]
pub fn details(timeline: &Timeline, id: SliceId) -> Option<SliceDetails> {
    let s = &timeline.slices;
    let i = id as usize;
    let start = *s.start.get(i)?;
    let dur = *s.dur.get(i)?;
    let end = start + dur;
    let track = timeline.slice_track(id)?;
    // Children follow their parent in slice order and start before its end.
    let mut child_ns = 0;
    let mut k = i + 1;
    while k < track.slices.end as usize && s.start.get(k).is_some_and(|&t| t <= end) {
        if s.parent.get(k) == Some(&id) {
            child_ns += s.dur.get(k).copied().unwrap_or(0);
        }
        k += 1;
    }
    let mut parents = Vec::new();
    let mut p = s.parent.get(i).copied().unwrap_or(NO_PARENT);
    while p != NO_PARENT && parents.len() < 256 {
        parents.push(p);
        p = s.parent.get(p as usize).copied().unwrap_or(NO_PARENT);
    }
    let args = timeline
        .args(id)
        .map(|m| {
            m.into_iter()
                .map(|(k, v)| {
                    let text = match v {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (k, text)
                })
                .collect()
        })
        .unwrap_or_default();
    let flows = timeline
        .flows
        .iter()
        .filter(|f| f.from == id || f.to == id)
        .map(|f| FlowLink {
            other: if f.from == id { f.to } else { f.from },
            outgoing: f.from == id,
            cat: timeline.categories.name(f.cat).to_owned(),
        })
        .collect();
    Some(SliceDetails {
        id,
        name: timeline.slice_name(id).to_owned(),
        category: s
            .cat
            .get(i)
            .map_or("", |&c| timeline.categories.name(c))
            .to_owned(),
        track: track.name.clone(),
        start,
        dur,
        self_ns: (dur - child_ns).max(0),
        args,
        parents,
        flows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use steplens_ingest::TimelineBuilder;
    use steplens_ingest::model::{ArgsRef, LaneId};

    fn timeline() -> Timeline {
        let mut b = TimelineBuilder::default();
        let t = b.track(0, LaneId::Int(1), LaneId::Int(1));
        let cat = b.intern_cat("cpu_op");
        let outer = b.intern("aten::linear");
        let inner = b.intern("aten::addmm");
        b.push_slice(t, 0, 1000, outer, cat, ArgsRef::NONE);
        b.push_slice(t, 100, 300, inner, cat, ArgsRef::NONE);
        b.push_slice(t, 500, 200, inner, cat, ArgsRef::NONE);
        b.push_slice(t, 2000, 100, outer, cat, ArgsRef::NONE);
        b.finish()
    }

    #[test]
    fn search_by_substring_and_regex_in_time_order() {
        let t = timeline();
        assert_eq!(search(&t, "ADDMM", false).unwrap(), vec![1, 2]);
        assert_eq!(search(&t, "^aten::lin", true).unwrap(), vec![0, 3]);
        assert!(search(&t, "(", true).is_err());
        assert!(search(&t, "", false).unwrap().is_empty());
    }

    #[test]
    fn aggregate_clips_to_the_range_and_includes_enclosing_slices() {
        let t = timeline();
        let agg = aggregate(&t, 200, 600);
        let linear = agg.rows.iter().find(|r| r.name == "aten::linear").unwrap();
        assert_eq!((linear.count, linear.total_ns), (1, 400));
        let addmm = agg.rows.iter().find(|r| r.name == "aten::addmm").unwrap();
        assert_eq!((addmm.count, addmm.total_ns), (2, 200 + 100));
        assert_eq!(agg.tracks.len(), 1);
        assert_eq!(agg.tracks[0].busy_ns, 400);
    }

    #[test]
    fn busy_time_counts_overlapping_top_level_slices_once() {
        // Two depth-0 slices that overlap by 100 ns: the second starts inside the first and
        // ends after it, so nesting keeps it as a sibling, not a child.
        let mut b = TimelineBuilder::default();
        let t = b.track(0, LaneId::Int(1), LaneId::Int(1));
        let cat = b.intern_cat("kernel");
        let name = b.intern("gemm");
        b.push_slice(t, 0, 500, name, cat, ArgsRef::NONE);
        b.push_slice(t, 400, 500, name, cat, ArgsRef::NONE);
        let t = b.finish();
        assert_eq!(t.slices.depth, vec![0, 0], "overlapping siblings");
        let agg = aggregate(&t, 0, 1000);
        assert_eq!(agg.tracks.len(), 1);
        // The union [0, 900), not the sum 500 + 500.
        assert_eq!(agg.tracks[0].busy_ns, 900);
        // Per name, each slice's own time still adds up.
        assert_eq!(agg.rows[0].total_ns, 1000);
        // Clipped to [0, 600): 500 ns of the first and 200 of the second, 600 covered.
        let agg = aggregate(&t, 0, 600);
        assert_eq!(agg.tracks[0].busy_ns, 600);
        assert_eq!((agg.rows[0].count, agg.rows[0].total_ns), (2, 700));
    }

    #[test]
    fn details_give_self_time_and_parents() {
        let t = timeline();
        let d = details(&t, 0).unwrap();
        assert_eq!(d.self_ns, 1000 - 300 - 200);
        assert!(d.parents.is_empty());
        let d = details(&t, 2).unwrap();
        assert_eq!(d.parents, vec![0]);
        assert_eq!(d.self_ns, 200);
        assert!(details(&t, 99).is_none());
    }
}
