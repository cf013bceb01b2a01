//! The dependency graph of one window: nodes at event starts and ends, typed weighted edges,
//! the per-slice node tables reused from window to window, and the longest path through it.

use steplens_ingest::model::SliceId;

/// No node (a slice outside the window's graph).
const NO_NODE: u32 = u32::MAX;

/// Per-slice node ids of one window's graph, in arrays over the Timeline's slices made once and
/// cleared after each window (the slices a window set are few next to all of them).
#[derive(Default)]
pub(super) struct Scratch {
    start: Vec<u32>,
    device: Vec<(u32, u32)>,
    touched: Vec<SliceId>,
}

impl Scratch {
    pub(super) fn reset(&mut self, slices: usize) {
        if self.start.len() != slices {
            self.start = vec![NO_NODE; slices];
            self.device = vec![(NO_NODE, NO_NODE); slices];
            self.touched.clear();
        }
        for &i in &self.touched {
            self.start[i as usize] = NO_NODE;
            self.device[i as usize] = (NO_NODE, NO_NODE);
        }
        self.touched.clear();
    }

    pub(super) fn set_start(&mut self, slice: SliceId, node: u32) {
        if let Some(n) = self.start.get_mut(slice as usize) {
            *n = node;
            self.touched.push(slice);
        }
    }

    pub(super) fn start_of(&self, slice: SliceId) -> Option<u32> {
        self.start
            .get(slice as usize)
            .copied()
            .filter(|&n| n != NO_NODE)
    }

    pub(super) fn set_device(&mut self, slice: SliceId, start: u32, end: u32) {
        if let Some(n) = self.device.get_mut(slice as usize) {
            *n = (start, end);
            self.touched.push(slice);
        }
    }

    pub(super) fn device_of(&self, slice: SliceId) -> Option<(u32, u32)> {
        self.device
            .get(slice as usize)
            .copied()
            .filter(|&(s, _)| s != NO_NODE)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum EdgeKind {
    /// An event's own span (or the span between nested nodes of it).
    Span(SliceId),
    /// Between top-level ops on the main thread, or a hand-over between threads.
    HostGap,
    /// Launch call start → device work start.
    Launch(SliceId),
    /// Previous device work → this device work on one stream.
    KernelGap(SliceId),
    /// Device work → the end of the blocking call that waited for it.
    SyncWake(SliceId),
    /// Device work on another stream → the work that waited for it.
    StreamWait(SliceId),
}

pub(super) struct Edge {
    pub(super) from: u32,
    pub(super) to: u32,
    pub(super) weight: i64,
    pub(super) kind: EdgeKind,
}

pub(super) struct Graph {
    pub(super) ts: Vec<i64>,
    pub(super) track: Vec<u32>,
    pub(super) edges: Vec<Edge>,
    /// Whether each node has an edge out of it yet.
    has_out: Vec<bool>,
    /// No edge went into a node after an edge left it: the edges are in a topological order
    /// as appended (a window of one host thread), and the longest path needs one pass.
    in_order: bool,
}

impl Default for Graph {
    fn default() -> Self {
        Self {
            ts: Vec::new(),
            track: Vec::new(),
            edges: Vec::new(),
            has_out: Vec::new(),
            in_order: true,
        }
    }
}

impl Graph {
    pub(super) fn node(&mut self, ts: i64, track: u32) -> u32 {
        self.ts.push(ts);
        self.track.push(track);
        self.has_out.push(false);
        (self.ts.len() - 1) as u32
    }

    pub(super) fn edge(&mut self, from: u32, to: u32, weight: i64, kind: EdgeKind) {
        self.push(Edge {
            from,
            to,
            weight: weight.max(0),
            kind,
        });
    }

    pub(super) fn push(&mut self, e: Edge) {
        if self.has_out[e.to as usize] {
            self.in_order = false;
        }
        self.has_out[e.from as usize] = true;
        self.edges.push(e);
    }
}

/// The longest path from `source` to `sink`, as edge indexes in path order; ties go to the path
/// with more time in events (ops, kernels) than in gaps.
pub(super) fn longest_path(g: &Graph, source: u32, sink: u32) -> Option<Vec<usize>> {
    let n = g.ts.len();
    // (length, time in events); unreachable nodes stay at None.
    let mut best: Vec<Option<(i64, i64)>> = vec![None; n];
    let mut pred: Vec<u32> = vec![u32::MAX; n];
    best[source as usize] = Some((0, 0));
    let mut relax = |ei: usize, e: &Edge, best: &mut Vec<Option<(i64, i64)>>| {
        if let Some((len, busy)) = best[e.from as usize] {
            let work = match e.kind {
                EdgeKind::Span(_) => e.weight,
                _ => 0,
            };
            let cand = (len + e.weight, busy + work);
            if best[e.to as usize].is_none_or(|cur| cand > cur) {
                best[e.to as usize] = Some(cand);
                pred[e.to as usize] = ei as u32;
            }
        }
    };
    if g.in_order {
        // Every edge into a node came before the edges out of it: one pass in that order.
        for (ei, e) in g.edges.iter().enumerate() {
            relax(ei, e, &mut best);
        }
    } else {
        for ei in topological_edges(g) {
            relax(ei as usize, &g.edges[ei as usize], &mut best);
        }
    }
    best[sink as usize]?;
    let mut path = Vec::new();
    let mut v = sink as usize;
    while v != source as usize {
        let ei = pred[v];
        if ei == u32::MAX {
            return None;
        }
        path.push(ei as usize);
        v = g.edges[ei as usize].from as usize;
    }
    path.reverse();
    Some(path)
}

/// The edges in an order where every edge into a node comes before the edges out of it
/// (Kahn's order of their sources). The graph is acyclic by construction (edges never go back
/// in time, and same-time edges follow creation); a cycle would only leave its edges out.
fn topological_edges(g: &Graph) -> Vec<u32> {
    let n = g.ts.len();
    let mut indegree = vec![0u32; n];
    let mut out_start = vec![0u32; n + 1];
    for e in &g.edges {
        indegree[e.to as usize] += 1;
        out_start[e.from as usize + 1] += 1;
    }
    for i in 0..n {
        out_start[i + 1] += out_start[i];
    }
    let mut fill = out_start.clone();
    let mut out = vec![0u32; g.edges.len()];
    for (ei, e) in g.edges.iter().enumerate() {
        out[fill[e.from as usize] as usize] = ei as u32;
        fill[e.from as usize] += 1;
    }
    let mut order = Vec::with_capacity(g.edges.len());
    let mut queue: Vec<u32> = (0..n as u32)
        .filter(|&v| indegree[v as usize] == 0)
        .collect();
    let mut head = 0;
    while head < queue.len() {
        let v = queue[head] as usize;
        head += 1;
        for &ei in &out[out_start[v] as usize..out_start[v + 1] as usize] {
            order.push(ei);
            let to = g.edges[ei as usize].to as usize;
            indegree[to] -= 1;
            if indegree[to] == 0 {
                queue.push(to as u32);
            }
        }
    }
    order
}
