//! The dependency graph of one window: nodes at event starts and ends, typed weighted edges and
//! the runs of a host thread's chain between two nodes ([`ChainTail`]), the per-slice node
//! table reused from window to window, and the longest path through it.

use steplens_ingest::model::SliceId;

/// No node (a slice outside the window's graph).
const NO_NODE: u32 = u32::MAX;
/// Marks a device slice's entry in [`Scratch`]: its end node is the one after its start node.
const DEVICE: u32 = 1 << 31;

/// Per-slice node ids of one window's graph, in one array over the Timeline's slices made once
/// and cleared after each window (the slices a window set are few next to all of them). A host
/// slice's entry is its start node; a device slice's is its start node with [`DEVICE`] set, as
/// its end node is always made right after the start.
#[derive(Default)]
pub(super) struct Scratch {
    node: Vec<u32>,
    touched: Vec<SliceId>,
}

impl Scratch {
    pub(super) fn reset(&mut self, slices: usize) {
        if self.node.len() != slices {
            self.node = vec![NO_NODE; slices];
            self.touched.clear();
        }
        for &i in &self.touched {
            self.node[i as usize] = NO_NODE;
        }
        self.touched.clear();
    }

    fn set(&mut self, slice: SliceId, entry: u32) {
        if let Some(n) = self.node.get_mut(slice as usize) {
            *n = entry;
            self.touched.push(slice);
        }
    }

    fn entry(&self, slice: SliceId) -> Option<u32> {
        self.node
            .get(slice as usize)
            .copied()
            .filter(|&n| n != NO_NODE)
    }

    pub(super) fn set_start(&mut self, slice: SliceId, node: u32) {
        self.set(slice, node & !DEVICE);
    }

    pub(super) fn start_of(&self, slice: SliceId) -> Option<u32> {
        self.entry(slice).filter(|&n| n & DEVICE == 0)
    }

    /// Notes device work's nodes; `end` is the node made right after `start`.
    pub(super) fn set_device(&mut self, slice: SliceId, start: u32, end: u32) {
        debug_assert_eq!(end, start + 1);
        self.set(slice, start | DEVICE);
    }

    pub(super) fn device_of(&self, slice: SliceId) -> Option<(u32, u32)> {
        self.entry(slice)
            .filter(|&n| n & DEVICE != 0)
            .map(|n| (n & !DEVICE, (n & !DEVICE) + 1))
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

/// What an edge of the graph stands for.
#[derive(Clone, Copy)]
pub(super) enum Link {
    /// One dependency.
    One(EdgeKind),
    /// A run of a host thread's chain through points no other edge touches (nested ops'
    /// starts and ends): [`Graph::runs`]' entry, whose segments the path lists one by one.
    Run(u32),
}

pub(super) struct Edge {
    pub(super) from: u32,
    pub(super) to: u32,
    pub(super) weight: i64,
    pub(super) link: Link,
}

/// A stretch of a run: where it ends, and what it stands for (it starts where the one before
/// it ends).
type Segment = (i64, EdgeKind);

/// A run edge's segments ([`Graph::segments`]) and its time in events.
pub(super) struct Run {
    segments: std::ops::Range<u32>,
    busy: i64,
}

pub(super) struct Graph {
    pub(super) ts: Vec<i64>,
    pub(super) track: Vec<u32>,
    pub(super) edges: Vec<Edge>,
    /// Where each run's segments end, and what each stands for, in chain order.
    segments: Vec<Segment>,
    runs: Vec<Run>,
    /// Whether each node has an edge out of it yet.
    has_out: Vec<bool>,
    /// No edge went into a node after an edge left it: the edges are in a topological order
    /// as appended (a window of one host thread), and the longest path needs one pass.
    in_order: bool,
    /// The longest path's working arrays, kept with their capacity from window to window.
    work: PathWork,
}

/// What [`longest_path`] works in: per node the best (length, time in events) and the edge it
/// came by, and Kahn's order's arrays.
#[derive(Default)]
struct PathWork {
    best: Vec<Option<(i64, i64)>>,
    pred: Vec<u32>,
    indegree: Vec<u32>,
    out_start: Vec<u32>,
    fill: Vec<u32>,
    out: Vec<u32>,
    order: Vec<u32>,
    queue: Vec<u32>,
}

impl Default for Graph {
    fn default() -> Self {
        Self {
            ts: Vec::new(),
            track: Vec::new(),
            edges: Vec::new(),
            segments: Vec::new(),
            runs: Vec::new(),
            has_out: Vec::new(),
            in_order: true,
            work: PathWork::default(),
        }
    }
}

/// Time in events (ops, kernels) of an edge of this kind and weight: what breaks ties.
fn work(kind: EdgeKind, weight: i64) -> i64 {
    match kind {
        EdgeKind::Span(_) => weight,
        _ => 0,
    }
}

impl Graph {
    /// Empties the graph for the next window, keeping what its arrays have allocated.
    pub(super) fn clear(&mut self) {
        self.ts.clear();
        self.track.clear();
        self.edges.clear();
        self.segments.clear();
        self.runs.clear();
        self.has_out.clear();
        self.in_order = true;
    }

    pub(super) fn node(&mut self, ts: i64, track: u32) -> u32 {
        self.ts.push(ts);
        self.track.push(track);
        self.has_out.push(false);
        (self.ts.len() - 1) as u32
    }

    pub(super) fn edge(&mut self, from: u32, to: u32, weight: i64, kind: EdgeKind) {
        self.push(from, to, weight.max(0), Link::One(kind));
    }

    fn push(&mut self, from: u32, to: u32, weight: i64, link: Link) {
        if self.has_out[to as usize] {
            self.in_order = false;
        }
        self.has_out[from as usize] = true;
        self.edges.push(Edge {
            from,
            to,
            weight,
            link,
        });
    }

    /// Time in events on edge `e`.
    fn busy(&self, e: &Edge) -> i64 {
        match e.link {
            Link::One(kind) => work(kind, e.weight),
            Link::Run(r) => self.runs[r as usize].busy,
        }
    }

    /// Edge `ei` as what the path lists: (from time, to time, track, kind) per dependency, a
    /// run's segments one by one.
    pub(super) fn expand(&self, ei: usize) -> impl Iterator<Item = (i64, i64, u32, EdgeKind)> {
        let e = &self.edges[ei];
        let track = self.track[e.to as usize];
        let (one, run): (Option<Segment>, &[Segment]) = match e.link {
            Link::One(kind) => (Some((self.ts[e.to as usize], kind)), &[]),
            Link::Run(r) => {
                let range = &self.runs[r as usize].segments;
                (
                    None,
                    &self.segments[range.start as usize..range.end as usize],
                )
            }
        };
        let mut at = self.ts[e.from as usize];
        one.into_iter()
            .chain(run.iter().copied())
            .map(move |(to, kind)| {
                let from = std::mem::replace(&mut at, to);
                (from, to, track, kind)
            })
    }
}

/// A host thread's chain as it is built. Points no other edge will touch (nested ops' starts
/// and ends) are not made nodes: the chain's segments through them since its last node become
/// one run edge when the next node is made. The longest path through such points is the chain
/// itself, so the path is the same, with a fraction of the nodes and edges.
pub(super) struct ChainTail {
    track: u32,
    /// The chain's last node.
    pub(super) node: Option<u32>,
    /// The time the chain has reached: its last node's or its last point's.
    pub(super) ts: i64,
    run_start: usize,
    weight: i64,
    busy: i64,
}

impl ChainTail {
    pub(super) fn new(g: &Graph, track: u32, node: Option<u32>) -> Self {
        Self {
            track,
            node,
            ts: node.map_or(0, |n| g.ts[n as usize]),
            run_start: g.segments.len(),
            weight: 0,
            busy: 0,
        }
    }

    /// Extends the chain to `ts` through a point no other edge touches.
    #[inline]
    pub(super) fn pass(&mut self, g: &mut Graph, ts: i64, weight: i64, kind: EdgeKind) {
        if self.node.is_none() {
            // A chain starts at a node.
            self.reach_node(g, ts, weight, kind);
            return;
        }
        let weight = weight.max(0);
        g.segments.push((ts, kind));
        self.weight += weight;
        self.busy += work(kind, weight);
        self.ts = ts;
    }

    /// Extends the chain to a new node at `ts` and returns it; a chain's first node gets no
    /// edge into it.
    #[inline]
    pub(super) fn reach_node(
        &mut self,
        g: &mut Graph,
        ts: i64,
        weight: i64,
        kind: EdgeKind,
    ) -> u32 {
        let node = g.node(ts, self.track);
        if let Some(from) = self.node {
            if g.segments.len() > self.run_start {
                let weight = weight.max(0);
                g.segments.push((ts, kind));
                let run = g.runs.len() as u32;
                g.runs.push(Run {
                    segments: self.run_start as u32..g.segments.len() as u32,
                    busy: self.busy + work(kind, weight),
                });
                g.push(from, node, self.weight + weight, Link::Run(run));
            } else {
                g.edge(from, node, weight, kind);
            }
        }
        self.run_start = g.segments.len();
        self.weight = 0;
        self.busy = 0;
        self.node = Some(node);
        self.ts = ts;
        node
    }
}

/// The longest path from `source` to `sink`, as edge indexes in path order; ties go to the path
/// with more time in events (ops, kernels) than in gaps.
pub(super) fn longest_path(g: &mut Graph, source: u32, sink: u32) -> Option<Vec<usize>> {
    let n = g.ts.len();
    let mut work = std::mem::take(&mut g.work);
    // (length, time in events); unreachable nodes stay at None.
    work.best.clear();
    work.best.resize(n, None);
    work.pred.clear();
    work.pred.resize(n, u32::MAX);
    work.best[source as usize] = Some((0, 0));
    if !g.in_order {
        topological_edges(g, &mut work);
    }
    let PathWork {
        best, pred, order, ..
    } = &mut work;
    let mut relax = |ei: usize, e: &Edge| {
        if let Some((len, busy)) = best[e.from as usize] {
            let cand = (len + e.weight, busy + g.busy(e));
            if best[e.to as usize].is_none_or(|cur| cand > cur) {
                best[e.to as usize] = Some(cand);
                pred[e.to as usize] = ei as u32;
            }
        }
    };
    if g.in_order {
        // Every edge into a node came before the edges out of it: one pass in that order.
        for (ei, e) in g.edges.iter().enumerate() {
            relax(ei, e);
        }
    } else {
        for &ei in order.iter() {
            relax(ei as usize, &g.edges[ei as usize]);
        }
    }
    let path = (|| {
        work.best[sink as usize]?;
        let mut path = Vec::new();
        let mut v = sink as usize;
        while v != source as usize {
            let ei = work.pred[v];
            if ei == u32::MAX {
                return None;
            }
            path.push(ei as usize);
            v = g.edges[ei as usize].from as usize;
        }
        path.reverse();
        Some(path)
    })();
    g.work = work;
    path
}

/// Fills `work.order` with the edges in an order where every edge into a node comes before the
/// edges out of it (Kahn's order of their sources). The graph is acyclic by construction (edges
/// never go back in time, and same-time edges follow creation); a cycle would only leave its
/// edges out.
fn topological_edges(g: &Graph, work: &mut PathWork) {
    let n = g.ts.len();
    let PathWork {
        indegree,
        out_start,
        fill,
        out,
        order,
        queue,
        ..
    } = work;
    indegree.clear();
    indegree.resize(n, 0);
    out_start.clear();
    out_start.resize(n + 1, 0);
    for e in &g.edges {
        indegree[e.to as usize] += 1;
        out_start[e.from as usize + 1] += 1;
    }
    for i in 0..n {
        out_start[i + 1] += out_start[i];
    }
    fill.clear();
    fill.extend_from_slice(out_start);
    out.clear();
    out.resize(g.edges.len(), 0);
    for (ei, e) in g.edges.iter().enumerate() {
        out[fill[e.from as usize] as usize] = ei as u32;
        fill[e.from as usize] += 1;
    }
    order.clear();
    queue.clear();
    queue.extend((0..n as u32).filter(|&v| indegree[v as usize] == 0));
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
}
