//! The path walk: one window's graph built from its host threads' op nesting, the launches,
//! the device work on each stream, the cross-stream and blocking waits, then the longest path
//! from the window's start to its end.

use steplens_ingest::model::{CategoryClass, SliceId, Timeline, TrackKind};

use super::CriticalPath;
use super::graph::{ChainTail, EdgeKind, Graph, longest_path};
use super::sync::{BLOCKING_FLAG, LAUNCH_FLAG, Shared};

/// A time window of one clock: a step, or a whole input.
pub(super) struct Window {
    pub(super) clock: u16,
    pub(super) start: i64,
    pub(super) end: i64,
    /// Where the step's host range ends: past it, the window holds the device work the step
    /// launched, and the path may end in it.
    pub(super) host_end: i64,
    /// The step's thread; `None` for a whole input (the thread with the most host work leads).
    pub(super) main: Option<u32>,
}

/// The start node of a nested op: none, the chain passes through its start.
const PASSED: u32 = u32::MAX;

/// One host thread's chain in a window.
struct HostChain {
    track: u32,
    /// Where the thread's top-level gaps open (`true`: a top-level op ended) and close
    /// (`false`: one starts), as (time, node, opens), in time order.
    gap_points: Vec<(i64, u32, bool)>,
    /// Node ids of the runtime and driver calls (launches, blocking calls): (slice, start
    /// node, end node).
    nodes: Vec<(SliceId, u32, u32)>,
    /// Start and end nodes of the top-level ones.
    top: Vec<(u32, u32)>,
    first: Option<u32>,
    last: Option<u32>,
}

impl Window {
    pub(super) fn path(&self, t: &Timeline, shared: &Shared) -> Option<CriticalPath> {
        let mut graph = shared.graph.borrow_mut();
        let g = &mut *graph;
        g.clear();
        let host_tracks: Vec<u32> = t
            .tracks
            .iter()
            .enumerate()
            .filter(|(_, tr)| {
                tr.kind == TrackKind::HostThread && t.step_source(tr.source) == self.clock
            })
            .map(|(i, _)| i as u32)
            .collect();
        // Without a step, the thread with the most host work in the window leads.
        let main_track = match self.main {
            Some(m) => m,
            None => *host_tracks.iter().max_by_key(|&&tr| {
                let range = t.track_slices_between(&t.tracks[tr as usize], self.start, self.end);
                range
                    .filter(|&i| t.slice_class(i).is_host_work())
                    .map(|i| t.slices.dur[i as usize])
                    .sum::<i64>()
            })?,
        };
        if self.main.is_some() && !self.has_other_work(t, main_track) {
            return Some(self.single_thread_path(t, shared, main_track));
        }
        // The window's start on the main thread: its chain starts from it.
        let source = g.node(self.start, main_track);
        let mut chains: Vec<HostChain> = host_tracks
            .iter()
            .map(|&tr| {
                let from = (tr == main_track).then_some(source);
                self.host_chain(t, shared, g, tr, from)
            })
            .collect();
        let main = chains.iter().position(|c| c.track == main_track)?;
        if self.main.is_none() && chains[main].first.is_none() {
            return None;
        }
        // … and its end.
        let sink = g.node(self.end, main_track);
        {
            let chain = &mut chains[main];
            match chain.last {
                Some(last) => {
                    let l_ts = g.ts[last as usize];
                    g.edge(last, sink, self.end - l_ts, EdgeKind::HostGap);
                }
                None => g.edge(source, sink, self.end - self.start, EdgeKind::HostGap),
            }
            chain.gap_points.insert(0, (self.start, source, true));
            chain.gap_points.push((self.end, sink, false));
        }
        // Other threads hand over to and back from the main thread where it is between ops.
        let main_gaps = &chains[main].gap_points;
        for (ci, chain) in chains.iter().enumerate() {
            if ci == main {
                continue;
            }
            for &(s_node, e_node) in &chain.top {
                let (s_ts, e_ts) = (g.ts[s_node as usize], g.ts[e_node as usize]);
                // Only from inside a main-thread gap: while the main thread runs an op, that op
                // is what the step is doing.
                let before = main_gaps.partition_point(|&(ts, _, _)| ts <= s_ts);
                if let Some(&(ts, node, true)) =
                    before.checked_sub(1).and_then(|i| main_gaps.get(i))
                {
                    g.edge(node, s_node, s_ts - ts, EdgeKind::HostGap);
                }
                let after = main_gaps.partition_point(|&(ts, _, _)| ts < e_ts);
                if let Some(&(ts, node, false)) = main_gaps.get(after) {
                    g.edge(e_node, node, ts - e_ts, EdgeKind::HostGap);
                }
            }
        }
        // Start nodes of the host slices, for launch edges; blocking calls' end nodes. The
        // per-slice tables are the last window's: clear what it set.
        let mut scratch = shared.scratch.borrow_mut();
        let sc = &mut *scratch;
        sc.reset(t.slices.len());
        let mut blocking: Vec<(SliceId, u32)> = Vec::new();
        let mut launches: Vec<(i64, u32)> = Vec::new();
        for chain in &chains {
            for &(slice, s, e) in &chain.nodes {
                sc.set_start(slice, s);
                let flags = shared.flags(t, slice);
                if flags & BLOCKING_FLAG != 0 {
                    blocking.push((slice, e));
                }
                if flags & LAUNCH_FLAG != 0 && t.slice_class(slice) == CategoryClass::Runtime {
                    launches.push((g.ts[s as usize], s));
                }
            }
        }
        launches.sort_unstable();
        // Device work.
        let mut device_ends: Vec<(i64, u32, SliceId)> = Vec::new();
        for (ti, track) in t.tracks.iter().enumerate() {
            let TrackKind::DeviceEngine { class, .. } = &track.kind else {
                continue;
            };
            if !class.does_work() || t.step_source(track.source) != self.clock {
                continue;
            }
            // Work that starts in the window, and work already running at its start.
            let range = t.track_slices_between(track, i64::MIN, self.end);
            let first_in = t.track_slices_between(track, self.start, self.end).start;
            let mut lo = first_in;
            while lo > range.start && t.slices.end(lo - 1) > self.start {
                lo -= 1;
            }
            let mut prev: Option<(u32, i64)> = None;
            for i in lo..range.end {
                if !t.slice_class(i).is_device_work() {
                    continue;
                }
                let (a, b) = (t.slices.start[i as usize], t.slices.end(i));
                if b <= self.start && a < self.start {
                    continue;
                }
                let (a, b) = (a.max(self.start), b.min(self.end));
                let s = g.node(a, ti as u32);
                let e = g.node(b.max(a), ti as u32);
                g.edge(s, e, b - a, EdgeKind::Span(i));
                sc.set_device(i, s, e);
                device_ends.push((b.max(a), e, i));
                let linked = t.launches().host_of(i);
                let launch =
                    linked.and_then(|r| sc.start_of(r).map(|n| (n, t.slices.start[r as usize], r)));
                let launch = launch.or_else(|| {
                    // No launch link (Gaudi graph nodes, older traces): the latest launch call
                    // before the work, when the trace has no link for it at all.
                    if linked.is_some() {
                        return None;
                    }
                    let n = launches.partition_point(|&(ts, _)| ts <= a);
                    n.checked_sub(1).map(|k| {
                        let (ts, node) = launches[k];
                        (node, ts, SliceId::MAX)
                    })
                });
                match (prev, launch) {
                    // Queued behind work that was still running when the launch began.
                    (Some((p_end, p_ts)), Some((_, r_ts, _))) if p_ts >= r_ts => {
                        g.edge(p_end, s, a - p_ts, EdgeKind::KernelGap(i));
                    }
                    (_, Some((r_node, r_ts, _))) => {
                        g.edge(r_node, s, a - r_ts, EdgeKind::Launch(i));
                    }
                    (Some((p_end, p_ts)), None) => {
                        g.edge(p_end, s, a - p_ts, EdgeKind::KernelGap(i));
                    }
                    (None, None) => {
                        g.edge(source, s, a - self.start, EdgeKind::KernelGap(i));
                    }
                }
                prev = Some((e, b.max(a)));
            }
        }
        // Cross-stream waits.
        for (&dest, &src) in &shared.stream_waits {
            if let (Some((d_s, _)), Some((_, s_e))) = (sc.device_of(dest), sc.device_of(src))
                && g.ts[s_e as usize] <= g.ts[d_s as usize]
            {
                g.edge(s_e, d_s, 0, EdgeKind::StreamWait(dest));
            }
        }
        // Blocking calls wait for device work.
        device_ends.sort_unstable();
        for (call, end_node) in blocking {
            let call_end = g.ts[end_node as usize];
            let call_start = t.slices.start[call as usize];
            let waited: Vec<SliceId> = if shared.synced.contains(&call) {
                shared.waits_for.get(&call).cloned().unwrap_or_default()
            } else {
                // The device work that finished last while the call waited.
                let n = device_ends.partition_point(|&(ts, _, _)| ts <= call_end);
                n.checked_sub(1)
                    .map(|k| device_ends[k])
                    .filter(|&(ts, _, _)| ts >= call_start)
                    .map(|(_, _, slice)| vec![slice])
                    .unwrap_or_default()
            };
            for w in waited {
                if let Some((_, e)) = sc.device_of(w)
                    && g.ts[e as usize] <= call_end
                {
                    g.edge(e, end_node, 0, EdgeKind::SyncWake(call));
                }
            }
        }
        // Without steps, and in a step that lasts until its device work is done, the path may
        // end in device work still running after the host is done.
        if self.main.is_none() || self.end > self.host_end {
            let host_done = chains[main].last.map_or(self.start, |n| g.ts[n as usize]);
            for &(ts, node, slice) in device_ends.iter().filter(|(ts, _, _)| *ts > host_done) {
                g.edge(node, sink, self.end - ts, EdgeKind::KernelGap(slice));
            }
        }
        let path = longest_path(g, source, sink)?;
        let edges = path.iter().flat_map(|&ei| g.expand(ei));
        Some(self.summarize(t, shared, main_track, edges))
    }

    /// The path of a window with one host thread at work and no device work: that thread's
    /// chain itself (the graph is that one chain), read in one sweep over its ops.
    fn single_thread_path(&self, t: &Timeline, shared: &Shared, track: u32) -> CriticalPath {
        let tr = &t.tracks[track as usize];
        let ops = t.track_slices_between(tr, self.start, self.end);
        // At most two edges an op (one at its start, one at its end) and one at the window's
        // end: sized once, not grown by copying through a step of tens of thousands of ops.
        let mut edges: Vec<(i64, i64, u32, EdgeKind)> =
            Vec::with_capacity(2 * ops.size_hint().0 + 1);
        let mut at = self.start;
        // Open ops: (slice, end).
        let mut stack: Vec<(SliceId, i64)> = Vec::new();
        let mut emit = |to: i64, stack: &[(SliceId, i64)], at: &mut i64| {
            let kind = stack
                .last()
                .map_or(EdgeKind::HostGap, |&(open, _)| EdgeKind::Span(open));
            edges.push((*at, to, track, kind));
            *at = to;
        };
        for i in ops {
            if t.slices.dur[i as usize] <= 0 || !t.slice_class(i).is_host_work() {
                continue;
            }
            let start = t.slices.start[i as usize];
            while let Some(&(_, end)) = stack.last() {
                if end > start {
                    break;
                }
                emit(end, &stack, &mut at);
                stack.pop();
            }
            emit(start, &stack, &mut at);
            let end = t.slices.end(i).min(self.end);
            let end = stack.last().map_or(end, |p| end.min(p.1));
            stack.push((i, end.max(start)));
        }
        while let Some(&(_, end)) = stack.last() {
            emit(end, &stack, &mut at);
            stack.pop();
        }
        emit(self.end, &stack, &mut at);
        self.summarize(t, shared, track, edges.into_iter())
    }

    /// Whether the window has work on any host thread but `main`, or on the device.
    fn has_other_work(&self, t: &Timeline, main: u32) -> bool {
        t.tracks.iter().enumerate().any(|(i, tr)| {
            if i as u32 == main || t.step_source(tr.source) != self.clock {
                return false;
            }
            let wanted = |c: CategoryClass| match tr.kind {
                TrackKind::HostThread => c.is_host_work(),
                TrackKind::DeviceEngine { .. } => c.is_device_work(),
                _ => false,
            };
            if !matches!(
                tr.kind,
                TrackKind::HostThread | TrackKind::DeviceEngine { .. }
            ) {
                return false;
            }
            // Work that starts in the window, or device work running at its start.
            t.track_slices_between(tr, self.start, self.end)
                .any(|j| wanted(t.slice_class(j)))
                || (tr.kind.is_device()
                    && t.track_slices_between(tr, i64::MIN, self.start)
                        .rev()
                        .take(64)
                        .any(|j| wanted(t.slice_class(j)) && t.slices.end(j) > self.start))
        })
    }

    /// Builds the nodes and nesting edges of one host thread's ops in the window.
    fn host_chain(
        &self,
        t: &Timeline,
        shared: &Shared,
        g: &mut Graph,
        track: u32,
        source: Option<u32>,
    ) -> HostChain {
        // The main thread's chain starts at the window's start (`source`).
        let is_main = source.is_some();
        let tr = &t.tracks[track as usize];
        let mut chain = HostChain {
            track,
            gap_points: Vec::new(),
            nodes: Vec::new(),
            top: Vec::new(),
            first: None,
            last: None,
        };
        // Open slices: (slice, end, start node; `PASSED` for a nested op's start).
        let mut stack: Vec<(SliceId, i64, u32)> = Vec::new();
        let mut tail = ChainTail::new(g, track, source);
        // Only top-level ops (hand-overs between threads) and runtime and driver calls
        // (launches, blocking calls) need nodes of their own; a nested op's start and end are
        // points the chain passes through.
        let needs_nodes = |slice: SliceId, top_level: bool| {
            top_level || t.slice_class(slice) != CategoryClass::CpuOp
        };
        let close = |g: &mut Graph,
                     chain: &mut HostChain,
                     tail: &mut ChainTail,
                     (slice, end, s_node): (SliceId, i64, u32),
                     top_level: bool| {
            let blocking = shared.flags(t, slice) & BLOCKING_FLAG != 0;
            let w = if blocking { 0 } else { end - tail.ts };
            if !needs_nodes(slice, top_level) {
                tail.pass(g, end, w, EdgeKind::Span(slice));
                return;
            }
            let e_node = tail.reach_node(g, end, w, EdgeKind::Span(slice));
            if t.slice_class(slice) != CategoryClass::CpuOp {
                chain.nodes.push((slice, s_node, e_node));
            }
            if top_level {
                chain.gap_points.push((end, e_node, true));
                chain.top.push((s_node, e_node));
            }
        };
        for i in t.track_slices_between(tr, self.start, self.end) {
            let dur = t.slices.dur[i as usize];
            if dur <= 0 || !t.slice_class(i).is_host_work() {
                continue;
            }
            let start = t.slices.start[i as usize];
            let end = t.slices.end(i).min(self.end);
            while let Some(&top) = stack.last() {
                if top.1 > start {
                    break;
                }
                stack.pop();
                close(g, &mut chain, &mut tail, top, stack.is_empty());
            }
            let top_level = stack.is_empty();
            let s_node = match stack.last() {
                Some(&(parent, _, _)) => {
                    let kind = EdgeKind::Span(parent);
                    let w = start - tail.ts;
                    if needs_nodes(i, false) {
                        tail.reach_node(g, start, w, kind)
                    } else {
                        tail.pass(g, start, w, kind);
                        PASSED
                    }
                }
                None => {
                    // Between top-level ops: the main thread's time counts (Python, data
                    // loading); another thread's idle time is no work of the step's.
                    let w = if is_main { start - tail.ts } else { 0 };
                    tail.reach_node(g, start, w, EdgeKind::HostGap)
                }
            };
            if top_level {
                chain.gap_points.push((start, s_node, false));
            }
            if chain.first.is_none() {
                chain.first = Some(s_node);
            }
            // A child that outlives its parent (clock rounding) is closed with it.
            let end = stack.last().map_or(end, |p| end.min(p.1));
            stack.push((i, end.max(start), s_node));
        }
        while let Some(top) = stack.pop() {
            close(g, &mut chain, &mut tail, top, stack.is_empty());
        }
        chain.last = tail.node;
        // gap_points must be in time order for the hand-over search.
        chain.gap_points.sort_by_key(|&(ts, n, _)| (ts, n));
        chain
    }
}
