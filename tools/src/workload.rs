//! The synthetic workload both benchmarks run on: one generator of Kineto-shaped CUDA training
//! steps (DataLoader and ProfilerStep annotations, nested aten ops with shapes, runtime launches
//! with `ac2g` flows to kernels on two streams, a backward thread with `fwdbwd` flows, copies, a
//! `loss.item()` sync), written through a [`Sink`]: as pretty-printed Kineto JSON of a given
//! size ([`generate`], for `steplens-bench` and `bench/compare.py`), or straight into a
//! Timeline of a given slice count ([`synthesize`], for `frame-bench`, whose 10 M slices would
//! be gigabytes of JSON).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use rustc_hash::FxHashMap;
use steplens_ingest::TimelineBuilder;
use steplens_ingest::model::{ArgsRef, CatId, LaneId, StrId, Timeline, TrackId};

/// A process id and thread (or stream) id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lane {
    /// Process id (0: the GPU).
    pub pid: u64,
    /// Thread id, or stream.
    pub tid: u64,
}

/// A metadata event's one arg.
#[derive(Debug, Clone, Copy)]
pub enum Meta<'a> {
    /// A string arg (`name`, `labels`).
    Str(&'a str, &'a str),
    /// An integer arg (`sort_index`).
    Int(&'a str, i64),
}

/// Which end of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowEnd {
    /// `s`: where it leaves.
    Start,
    /// `f` with `bp: "e"`: the slice it arrives in.
    Finish,
}

/// Where the generator's events go. Times are ns.
pub trait Sink {
    /// A metadata event (`process_name`, `thread_name`, …).
    ///
    /// # Errors
    /// When the sink cannot be written.
    fn meta(&mut self, lane: Lane, name: &str, value: Meta<'_>, ts: u64) -> io::Result<()>;

    /// A complete slice; `args` is the inside of its `args` object, as JSON text.
    ///
    /// # Errors
    /// When the sink cannot be written.
    #[allow(clippy::too_many_arguments)]
    fn slice(
        &mut self,
        lane: Lane,
        cat: &str,
        name: &str,
        start: u64,
        dur: u64,
        args: &str,
    ) -> io::Result<()>;

    /// One end of a flow.
    ///
    /// # Errors
    /// When the sink cannot be written.
    fn flow(&mut self, end: FlowEnd, cat: &str, id: u64, lane: Lane, ts: u64) -> io::Result<()>;

    /// Whether the workload is big enough: the generator stops after the step in progress.
    fn full(&self) -> bool;
}

/// Pretty-printed Kineto JSON, as the PyTorch profiler writes it.
struct JsonSink<W: Write> {
    out: W,
    written: u64,
    target: u64,
    line: String,
}

impl<W: Write> JsonSink<W> {
    fn raw(&mut self, s: &str) -> io::Result<()> {
        self.written += s.len() as u64;
        self.out.write_all(s.as_bytes())
    }

    fn flush_line(&mut self) -> io::Result<()> {
        let line = std::mem::take(&mut self.line);
        self.raw(&line)?;
        self.line = line;
        self.line.clear();
        Ok(())
    }
}

impl<W: Write> Sink for JsonSink<W> {
    fn meta(&mut self, lane: Lane, name: &str, value: Meta<'_>, ts: u64) -> io::Result<()> {
        let args = match value {
            Meta::Str(key, v) => format!("\"{key}\": \"{v}\""),
            Meta::Int(key, v) => format!("\"{key}\": {v}"),
        };
        self.line = format!(
            "  {{\n    \"name\": \"{name}\", \"ph\": \"M\", \"ts\": {}, \"pid\": {}, \"tid\": {},\n    \"args\": {{\n      {args}\n    }}\n  }},\n",
            fmt_us(ts),
            lane.pid,
            lane.tid
        );
        self.flush_line()
    }

    fn slice(
        &mut self,
        lane: Lane,
        cat: &str,
        name: &str,
        start: u64,
        dur: u64,
        args: &str,
    ) -> io::Result<()> {
        self.line = format!(
            "  {{\n    \"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{name}\", \"pid\": {}, \"tid\": {},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      {args}\n    }}\n  }},\n",
            lane.pid,
            lane.tid,
            fmt_us(start),
            fmt_us(dur)
        );
        self.flush_line()
    }

    fn flow(&mut self, end: FlowEnd, cat: &str, id: u64, lane: Lane, ts: u64) -> io::Result<()> {
        let (ph, bind) = match end {
            FlowEnd::Start => ("s", ""),
            FlowEnd::Finish => ("f", ", \"bp\": \"e\""),
        };
        self.line = format!(
            "  {{\n    \"ph\": \"{ph}\", \"id\": {id}, \"pid\": {}, \"tid\": {}, \"ts\": {}, \"cat\": \"{cat}\", \"name\": \"{cat}\"{bind}\n  }},\n",
            lane.pid,
            lane.tid,
            fmt_us(ts)
        );
        self.flush_line()
    }

    fn full(&self) -> bool {
        self.written >= self.target
    }
}

/// Slices pushed straight into a [`TimelineBuilder`] (one input, no args). Flows are left out:
/// what reads this Timeline (the frame benchmark) draws none.
struct BuilderSink {
    builder: TimelineBuilder,
    target_slices: usize,
    tracks: FxHashMap<Lane, TrackId>,
    names: FxHashMap<String, StrId>,
    cats: FxHashMap<String, CatId>,
}

impl BuilderSink {
    fn track(&mut self, lane: Lane) -> TrackId {
        let builder = &mut self.builder;
        *self
            .tracks
            .entry(lane)
            .or_insert_with(|| builder.track(0, lane_id(lane.pid), lane_id(lane.tid)))
    }
}

fn lane_id(id: u64) -> LaneId {
    LaneId::Int(i64::try_from(id).unwrap_or(i64::MAX))
}

impl Sink for BuilderSink {
    fn meta(&mut self, lane: Lane, name: &str, value: Meta<'_>, _ts: u64) -> io::Result<()> {
        let (pid, tid) = (lane_id(lane.pid), lane_id(lane.tid));
        match (name, value) {
            ("process_name", Meta::Str(_, v)) => {
                self.builder
                    .process_meta(0, pid, Some(v.to_owned()), None, None);
            }
            ("process_labels", Meta::Str(_, v)) => {
                self.builder
                    .process_meta(0, pid, None, Some(v.to_owned()), None);
            }
            ("process_sort_index", Meta::Int(_, v)) => {
                self.builder.process_meta(0, pid, None, None, Some(v));
            }
            ("thread_name", Meta::Str(_, v)) => {
                self.builder
                    .thread_meta(0, pid, tid, Some(v.to_owned()), None);
            }
            _ => {}
        }
        Ok(())
    }

    fn slice(
        &mut self,
        lane: Lane,
        cat: &str,
        name: &str,
        start: u64,
        dur: u64,
        _args: &str,
    ) -> io::Result<()> {
        let track = self.track(lane);
        let builder = &mut self.builder;
        let name = match self.names.get(name) {
            Some(&id) => id,
            None => {
                let id = builder.intern(name);
                self.names.insert(name.to_owned(), id);
                id
            }
        };
        let cat = match self.cats.get(cat) {
            Some(&id) => id,
            None => {
                let id = builder.intern_cat(cat);
                self.cats.insert(cat.to_owned(), id);
                id
            }
        };
        let ns = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        builder.push_slice(track, ns(start), ns(dur), name, cat, ArgsRef::NONE);
        Ok(())
    }

    fn flow(&mut self, _: FlowEnd, _: &str, _: u64, _: Lane, _: u64) -> io::Result<()> {
        Ok(())
    }

    fn full(&self) -> bool {
        self.builder.slice_count() >= self.target_slices
    }
}

/// Writes the training trace as Kineto JSON of at least `target` bytes.
///
/// # Errors
/// When the file cannot be written.
pub fn generate(path: &Path, target: u64) -> io::Result<u64> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut sink = JsonSink {
        out: BufWriter::with_capacity(1 << 20, File::create(path)?),
        written: 0,
        target,
        line: String::with_capacity(4096),
    };
    sink.raw(
        "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\n      \"id\": 0, \"name\": \"NVIDIA A100-SXM4-80GB\", \"totalGlobalMem\": 85097971712,\n      \"computeMajor\": 8, \"computeMinor\": 0,\n      \"maxThreadsPerBlock\": 1024, \"numSms\": 108\n    }\n  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1},\n  \"record_shapes\": 1,\n  \"displayTimeUnit\": \"ms\",\n  \"traceEvents\": [\n",
    )?;
    let mut w = Gen::new(sink);
    w.run()?;
    let end = w.host_ts + 10_000;
    let mut sink = w.sink;
    sink.raw(
        "  {\n    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": \"\",\n    \"ts\": ",
    )?;
    sink.raw(&format!(
        "{}\n  }}\n],\n  \"traceName\": \"{}\"\n}}\n",
        fmt_us(end),
        path.display()
    ))?;
    sink.out.flush()?;
    Ok(sink.written)
}

/// The same training steps as [`generate`], pushed straight into a Timeline of at least
/// `slices` slices (no args, no flows).
#[must_use]
pub fn synthesize(slices: usize) -> Timeline {
    let sink = BuilderSink {
        builder: TimelineBuilder::with_capacity(slices),
        target_slices: slices,
        tracks: FxHashMap::default(),
        names: FxHashMap::default(),
        cats: FxHashMap::default(),
    };
    let mut w = Gen::new(sink);
    // Pushing into memory cannot fail.
    let _ = w.run();
    w.sink.builder.finish()
}

const PID: u64 = 2_847_291;
const BWD_TID: u64 = 2_847_512;

fn op_dur(k: u64) -> u64 {
    22_000 + (k % 13) * 1_700
}

fn fmt_us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// The training-step schedule: what runs when, on which lane. It knows nothing of how events
/// are stored; its [`Sink`] does.
struct Gen<S: Sink> {
    sink: S,
    host_ts: u64,
    gpu_ts: u64,
    external_id: u64,
    correlation: u64,
    flow_id: u64,
    ev_idx: u64,
}

impl<S: Sink> Gen<S> {
    fn new(sink: S) -> Self {
        Self {
            sink,
            host_ts: 4_203_669_603_069_091,
            gpu_ts: 4_203_669_603_069_091,
            external_id: 1,
            correlation: 1,
            flow_id: 1,
            ev_idx: 0,
        }
    }

    /// Steps until the sink has enough.
    fn run(&mut self) -> io::Result<()> {
        self.metadata()?;
        let mut step = 0u64;
        while !self.sink.full() {
            self.step(step)?;
            step += 1;
        }
        Ok(())
    }

    fn metadata(&mut self) -> io::Result<()> {
        let ts = self.host_ts;
        let meta = [
            (PID, 0, "process_name", Meta::Str("name", "python3")),
            (PID, 0, "process_labels", Meta::Str("labels", "CPU")),
            (0, 0, "process_name", Meta::Str("name", "python3")),
            (0, 0, "process_labels", Meta::Str("labels", "GPU 0")),
            (
                0,
                0,
                "process_sort_index",
                Meta::Int("sort_index", 16_777_216),
            ),
            (
                PID,
                PID,
                "thread_name",
                Meta::Str("name", "thread 2847291 (python3)"),
            ),
            (
                PID,
                BWD_TID,
                "thread_name",
                Meta::Str("name", "thread 2847512 (pt_autograd_0)"),
            ),
            (0, 7, "thread_name", Meta::Str("name", "stream 7 ")),
            (0, 20, "thread_name", Meta::Str("name", "stream 20 ")),
        ];
        for (pid, tid, name, value) in meta {
            self.sink.meta(Lane { pid, tid }, name, value, ts)?;
        }
        Ok(())
    }

    /// A host slice. Returns its external id.
    fn cpu(
        &mut self,
        tid: u64,
        cat: &str,
        name: &str,
        start: u64,
        dur: u64,
        shapes: &str,
    ) -> io::Result<u64> {
        let ext = self.external_id;
        self.external_id += 1;
        self.ev_idx += 1;
        let args = format!(
            "\"External id\": {ext},\"Record function id\": 0, \"Ev Idx\": {}{shapes}",
            self.ev_idx
        );
        self.sink
            .slice(Lane { pid: PID, tid }, cat, name, start, dur, &args)?;
        Ok(ext)
    }

    /// A runtime launch on the host plus the device work it starts, linked by an `ac2g` flow.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &mut self,
        tid: u64,
        ext: u64,
        runtime: &str,
        cat: &str,
        kernel: &str,
        start: u64,
        gpu_dur: u64,
        stream: u64,
    ) -> io::Result<()> {
        let corr = self.correlation;
        self.correlation += 1;
        let dur = 4_000 + (corr % 7) * 350;
        let host = Lane { pid: PID, tid };
        let device = Lane {
            pid: 0,
            tid: stream,
        };
        self.sink.slice(
            host,
            "cuda_runtime",
            runtime,
            start,
            dur,
            &format!("\"External id\": {ext}, \"cbid\": 211, \"correlation\": {corr}"),
        )?;
        let gpu_start = self.gpu_ts.max(start + dur + 2_000);
        self.gpu_ts = gpu_start + gpu_dur + 1_500;
        let extra = if cat == "kernel" {
            ", \"registers per thread\": 128, \"shared memory\": 49152, \"blocks per SM\": 1.185185, \"warps per SM\": 9.481482, \"grid\": [128, 1, 1], \"block\": [256, 1, 1], \"est. achieved occupancy %\": 13"
        } else {
            ", \"bytes\": 3211264, \"memory bandwidth (GB/s)\": 412.518"
        };
        self.sink.slice(
            device,
            cat,
            kernel,
            gpu_start,
            gpu_dur,
            &format!(
                "\"External id\": {ext}, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": {stream}, \"correlation\": {corr}{extra}"
            ),
        )?;
        self.sink.flow(FlowEnd::Start, "ac2g", corr, host, start)?;
        self.sink
            .flow(FlowEnd::Finish, "ac2g", corr, device, gpu_start)
    }

    /// One op: outer aten op > inner op > launch of one kernel. Returns the time it ends.
    fn op(
        &mut self,
        tid: u64,
        at: u64,
        outer: &str,
        inner: &str,
        kernel: &str,
        k: u64,
    ) -> io::Result<u64> {
        let shapes = format!(
            ",\n      \"Input Dims\": [[64, {}], [{}, {}], []], \"Input type\": [\"float\", \"float\", \"Scalar\"],\n      \"Input Strides\": [[{}, 1], [{}, 1], []], \"Concrete Inputs\": [\"\", \"\", \"1\"]",
            256 + k % 8 * 128,
            512,
            256 + k % 8 * 128,
            256 + k % 8 * 128,
            256 + k % 8 * 128
        );
        let dur = op_dur(k);
        self.cpu(tid, "cpu_op", outer, at, dur, &shapes)?;
        let ext = self.cpu(tid, "cpu_op", inner, at + 3_000, dur - 6_000, &shapes)?;
        self.launch(
            tid,
            ext,
            "cudaLaunchKernel",
            "kernel",
            kernel,
            at + 6_000,
            30_000 + (k % 11) * 9_000,
            7,
        )?;
        Ok(at + dur + 1_000)
    }

    fn step(&mut self, n: u64) -> io::Result<()> {
        let tid = PID;
        let start = self.host_ts;
        let mut t = start + 1_000;
        // Data loading, then the batch's host-to-device copy.
        let dl_dur = 180_000 + (n % 5) * 10_000;
        self.cpu(
            tid,
            "user_annotation",
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            t,
            dl_dur,
            "",
        )?;
        self.cpu(tid, "cpu_op", "aten::stack", t + 20_000, 120_000, "")?;
        t += dl_dur + 2_000;
        let ext = self.cpu(tid, "cpu_op", "aten::to", t, 40_000, "")?;
        self.launch(
            tid,
            ext,
            "cudaMemcpyAsync",
            "gpu_memcpy",
            "Memcpy HtoD (Pageable -> Device)",
            t + 10_000,
            60_000,
            20,
        )?;
        t += 42_000;
        // Forward.
        let fwd_ops = [
            ("aten::linear", "aten::addmm", "ampere_sgemm_128x64_tn"),
            (
                "aten::relu",
                "aten::clamp_min",
                "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::clamp_min_scalar_kernel_impl>",
            ),
            (
                "aten::layer_norm",
                "aten::native_layer_norm",
                "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
            ),
            (
                "aten::dropout",
                "aten::native_dropout",
                "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>",
            ),
        ];
        for k in 0..160u64 {
            let (outer, inner, kernel) = fwd_ops[(k % 4) as usize];
            let fwd_at = t;
            t = self.op(tid, t, outer, inner, kernel, k)?;
            // fwd -> bwd flow from this op; its backward node runs later on the autograd thread.
            self.sink.flow(
                FlowEnd::Start,
                "fwdbwd",
                self.flow_id + k,
                Lane { pid: PID, tid },
                fwd_at,
            )?;
        }
        // Backward on the autograd thread.
        let mut b = t + 5_000;
        for k in (0..160u64).rev() {
            let dur = op_dur(k) + 3_000;
            self.cpu(
                BWD_TID,
                "cpu_op",
                "autograd::engine::evaluate_function: AddmmBackward0",
                b,
                dur,
                "",
            )?;
            self.sink.flow(
                FlowEnd::Finish,
                "fwdbwd",
                self.flow_id + k,
                Lane {
                    pid: PID,
                    tid: BWD_TID,
                },
                b,
            )?;
            self.op(
                BWD_TID,
                b + 1_000,
                "AddmmBackward0",
                "aten::mm",
                "ampere_sgemm_64x64_nn",
                k,
            )?;
            b += dur + 1_000;
        }
        self.flow_id += 160;
        t = b + 3_000;
        // Optimizer and a loss.item() sync.
        let opt_start = t;
        for k in 0..12u64 {
            t = self.op(
                tid,
                t + 2_000,
                "aten::_foreach_add_",
                "aten::_foreach_add_",
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel",
                k,
            )?;
        }
        self.cpu(
            tid,
            "user_annotation",
            "Optimizer.step#SGD.step",
            opt_start,
            t - opt_start + 1_000,
            "",
        )?;
        t += 5_000;
        let ext = self.cpu(tid, "cpu_op", "aten::item", t, 90_000, "")?;
        self.launch(
            tid,
            ext,
            "cudaMemcpyAsync",
            "gpu_memcpy",
            "Memcpy DtoH (Device -> Pageable)",
            t + 5_000,
            3_000,
            7,
        )?;
        t += 95_000;
        let end = t.max(self.gpu_ts) + 5_000;
        self.cpu(
            tid,
            "user_annotation",
            &format!("ProfilerStep#{n}"),
            start,
            end - start,
            "",
        )?;
        self.host_ts = end + 1_000;
        Ok(())
    }
}
