//! The launch index: which host call launched which device work, and back. The one place that
//! pairs the trace's flows with launches; every analysis, view and detector asks it
//! ([`crate::model::Timeline::launches`]), so no two of them can disagree on who launched a
//! kernel.
//!
//! **The rule.** A flow links a launch when it runs from host work to device work (a kernel,
//! copy, memset or profiler range on a device lane). Of a device slice's links:
//! - its *runtime* link wins (`cudaLaunchKernel`, `cudaMemcpyAsync`, `cudaGraphLaunch`, …): the
//!   call the host made and the TensorBoard plugin's and HTA's rule; with several, the first
//!   in flow order (flows are sorted by their host slice);
//! - without one, its first *driver* link (cuBLASLt and Triton launch through
//!   `cuLaunchKernel`);
//! - without either, its first link from an *op* (a Gaudi bridge op to the graph node it
//!   produced).
//!
//! Readers ask for the tier they mean: [`Launches::launcher`] (runtime only: steps' device
//! windows, the plugin's views), [`Launches::launcher_or_driver`] (when was it launched), or
//! [`Launches::host_of`] (any host link: which step, which collective op). One runtime call may
//! launch many device slices (a CUDA/HIP graph replay): [`Launches::launched_by`].

use rustc_hash::FxHashMap;

use super::{CategoryClass, NO_PARENT, SliceId, Timeline};

/// Which host call launched which device work ([the rule](self)).
#[derive(Debug, Default)]
pub struct Launches {
    /// Device slice → the runtime call that launched it (`NO_PARENT`: none).
    launch_of: Vec<SliceId>,
    /// Device slices with no runtime link → the driver call that launched them.
    driver_of: FxHashMap<SliceId, SliceId>,
    /// Device slices with neither link → the op they came from.
    op_of: FxHashMap<SliceId, SliceId>,
    /// (runtime call, device slice) for every runtime link, sorted.
    launched: Vec<(SliceId, SliceId)>,
}

impl Launches {
    /// The launch links of `t`.
    #[must_use]
    pub fn new(t: &Timeline) -> Self {
        let mut launch_of = vec![NO_PARENT; t.slices.len()];
        let mut driver_of: FxHashMap<SliceId, SliceId> = FxHashMap::default();
        let mut op_of: FxHashMap<SliceId, SliceId> = FxHashMap::default();
        let mut launched: Vec<(SliceId, SliceId)> = Vec::new();
        for flow in &t.flows {
            if !t.slice_class(flow.to).is_device_work() {
                continue;
            }
            match t.slice_class(flow.from) {
                CategoryClass::Runtime if launch_of.get(flow.to as usize) == Some(&NO_PARENT) => {
                    launch_of[flow.to as usize] = flow.from;
                    launched.push((flow.from, flow.to));
                }
                CategoryClass::Driver => {
                    driver_of.entry(flow.to).or_insert(flow.from);
                }
                CategoryClass::CpuOp => {
                    op_of.entry(flow.to).or_insert(flow.from);
                }
                _ => {}
            }
        }
        let unlaunched = |d: &SliceId| launch_of.get(*d as usize) == Some(&NO_PARENT);
        driver_of.retain(|d, _| unlaunched(d));
        op_of.retain(|d, _| unlaunched(d) && !driver_of.contains_key(d));
        launched.sort_unstable();
        Self {
            launch_of,
            driver_of,
            op_of,
            launched,
        }
    }

    /// The runtime call that launched device slice `d`.
    #[must_use]
    pub fn launcher(&self, d: SliceId) -> Option<SliceId> {
        self.launch_of
            .get(d as usize)
            .copied()
            .filter(|&r| r != NO_PARENT)
    }

    /// The runtime call that launched device slice `d`, else the driver call that did.
    #[must_use]
    pub fn launcher_or_driver(&self, d: SliceId) -> Option<SliceId> {
        self.launcher(d).or_else(|| self.driver_of.get(&d).copied())
    }

    /// The host slice linked to device slice `d` by the rule's tiers: its runtime call, else
    /// its driver call, else the op it came from.
    #[must_use]
    pub fn host_of(&self, d: SliceId) -> Option<SliceId> {
        self.launcher_or_driver(d)
            .or_else(|| self.op_of.get(&d).copied())
    }

    /// When device slice `d` was launched: the start of the call that launched it (its
    /// runtime call, else its driver call).
    #[must_use]
    pub fn launched_at(&self, t: &Timeline, d: SliceId) -> Option<i64> {
        self.launcher_or_driver(d)
            .map(|call| t.slices.start[call as usize])
    }

    /// The device work runtime call `r` launched (empty when it launched none).
    pub fn launched_by(&self, r: SliceId) -> impl Iterator<Item = SliceId> + '_ {
        let from = self.launched.partition_point(|&(c, _)| c < r);
        self.launched[from..]
            .iter()
            .take_while(move |&&(c, _)| c == r)
            .map(|&(_, d)| d)
    }

    /// Every runtime link as (runtime call, device slice), sorted by call.
    #[must_use]
    pub fn runtime_links(&self) -> &[(SliceId, SliceId)] {
        &self.launched
    }

    /// Every device slice with a host link of any tier, with that host slice, in device-slice
    /// order.
    pub fn host_links(&self) -> impl Iterator<Item = (SliceId, SliceId)> + '_ {
        let mut others: Vec<(SliceId, SliceId)> = self
            .driver_of
            .iter()
            .chain(&self.op_of)
            .map(|(&d, &h)| (d, h))
            .collect();
        others.sort_unstable();
        let runtime = self
            .launch_of
            .iter()
            .enumerate()
            .filter(|&(_, &r)| r != NO_PARENT)
            .map(|(d, &r)| (d as SliceId, r));
        merge_sorted(runtime, others.into_iter())
    }

    /// Whether the trace has any runtime launch link.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.launched.is_empty()
    }
}

/// Two iterators sorted by their first element, merged in order.
fn merge_sorted(
    a: impl Iterator<Item = (SliceId, SliceId)>,
    b: impl Iterator<Item = (SliceId, SliceId)>,
) -> impl Iterator<Item = (SliceId, SliceId)> {
    let mut a = a.peekable();
    let mut b = b.peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if y.0 < x.0 => b.next(),
        (Some(_), _) => a.next(),
        (None, _) => b.next(),
    })
}

#[cfg(test)]
mod tests {
    use crate::builder::stage_test::build;

    /// A kernel linked from a runtime call, a driver call and an op keeps the runtime call; a
    /// kernel with only a driver link keeps it; one with only an op link is the op's, but was
    /// not launched by a runtime or driver call.
    #[test]
    fn the_runtime_link_wins_then_the_driver_then_the_op() {
        let t = build(
            r#"{"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":40},
            {"ph":"X","cat":"cuda_driver","name":"cuLaunchKernel","pid":1,"tid":1,"ts":2,"dur":2},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":10,"dur":2},
            {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":50,"dur":1},
            {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":60,"dur":1},
            {"ph":"X","cat":"kernel","name":"k3","pid":0,"tid":7,"ts":70,"dur":1},
            {"ph":"s","cat":"ac2g","name":"ac2g","id":1,"pid":1,"tid":1,"ts":0},
            {"ph":"f","cat":"ac2g","name":"ac2g","id":1,"pid":0,"tid":7,"ts":50,"bp":"e"},
            {"ph":"s","cat":"ac2g","name":"ac2g","id":2,"pid":1,"tid":1,"ts":2},
            {"ph":"f","cat":"ac2g","name":"ac2g","id":2,"pid":0,"tid":7,"ts":50,"bp":"e"},
            {"ph":"s","cat":"ac2g","name":"ac2g","id":3,"pid":1,"tid":1,"ts":10},
            {"ph":"f","cat":"ac2g","name":"ac2g","id":3,"pid":0,"tid":7,"ts":50,"bp":"e"},
            {"ph":"s","cat":"ac2g","name":"ac2g","id":4,"pid":1,"tid":1,"ts":2},
            {"ph":"f","cat":"ac2g","name":"ac2g","id":4,"pid":0,"tid":7,"ts":60,"bp":"e"},
            {"ph":"s","cat":"ac2g","name":"ac2g","id":5,"pid":1,"tid":1,"ts":0},
            {"ph":"f","cat":"ac2g","name":"ac2g","id":5,"pid":0,"tid":7,"ts":70,"bp":"e"}]}"#,
        );
        let id = |name: &str| {
            (0..t.slices.len() as u32)
                .find(|&i| t.slice_name(i) == name)
                .unwrap_or(u32::MAX)
        };
        let (mm, driver, runtime) = (id("aten::mm"), id("cuLaunchKernel"), id("cudaLaunchKernel"));
        let (k1, k2, k3) = (id("k1"), id("k2"), id("k3"));
        let l = t.launches();
        assert_eq!(l.launcher(k1), Some(runtime));
        assert_eq!(l.host_of(k1), Some(runtime));
        assert_eq!(l.launcher(k2), None);
        assert_eq!(l.launcher_or_driver(k2), Some(driver));
        assert_eq!(l.host_of(k2), Some(driver));
        assert_eq!(l.launcher_or_driver(k3), None);
        assert_eq!(l.host_of(k3), Some(mm));
        assert_eq!(l.launched_by(runtime).collect::<Vec<_>>(), vec![k1]);
        assert_eq!(
            l.host_links().collect::<Vec<_>>(),
            vec![(k1, runtime), (k2, driver), (k3, mm)]
        );
    }

    /// Files that read a Timeline's flows, each for a reason other than pairing device work with
    /// its launch. Pairing goes through the index: a new reader of the flows fails this test
    /// until it uses [`super::Launches`] or is listed here with its reason.
    const FLOW_READERS: &[(&str, &str)] = &[
        ("ingest/src/model/launches.rs", "the launch index itself"),
        (
            "ingest/src/builder/flows.rs",
            "binds each flow's ends to slices",
        ),
        (
            "ingest/src/correlation.rs",
            "makes the links of pre-1.11 traces from correlation ids",
        ),
        ("ingest/src/invariants.rs", "checks every flow's ends"),
        (
            "analysis/src/export/columns.rs",
            "exports each slice's flow id as the correlation column",
        ),
        (
            "analysis/src/export/perfetto/write/mod.rs",
            "writes the flows to Perfetto",
        ),
        (
            "analysis/src/detect/layer_patterns.rs",
            "autograd (fwdbwd) flows, not launches",
        ),
        (
            "analysis/src/detect/non_logical_transpose.rs",
            "autograd (fwdbwd) flows, not launches",
        ),
        ("analysis/src/trace_info.rs", "counts the flows for `info`"),
        ("viewer/src/query.rs", "lists a selected slice's flows"),
    ];

    /// Whether `text` reads a Timeline's flows (`t.flows`, `timeline.flows`, also across a line
    /// break before the `.`), comments left out.
    fn reads_flows(text: &str) -> bool {
        let mut code = String::new();
        for line in text.lines() {
            let line = line.split("//").next().unwrap_or("").trim();
            if !line.starts_with('.') {
                code.push(' ');
            }
            code.push_str(line);
        }
        ["t.flows", "timeline.flows"].iter().any(|needle| {
            code.match_indices(needle).any(|(i, m)| {
                let before = code[..i].chars().next_back();
                let after = code[i + m.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
    }

    /// Every `.rs` file under `dir`.
    fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn only_the_launch_index_pairs_flows_with_launches() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for crate_src in [
            "ingest/src",
            "analysis/src",
            "output/src",
            "viewer/src",
            "src",
            "python/src",
            "tools/src",
        ] {
            sources(&root.join(crate_src), &mut files);
        }
        assert!(files.len() > 50, "the workspace sources were not found");
        let mut readers = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if reads_flows(&text) {
                let rel = path.strip_prefix(&root).unwrap_or(&path);
                readers.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
        let unlisted: Vec<&String> = readers
            .iter()
            .filter(|r| !FLOW_READERS.iter().any(|(f, _)| f == r))
            .collect();
        assert!(
            unlisted.is_empty(),
            "these read the Timeline's flows; pair device work with its launch through \
             `Timeline::launches` instead, or list the file with its reason: {unlisted:?}"
        );
    }
}
