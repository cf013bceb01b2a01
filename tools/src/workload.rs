//! The synthetic workloads both benchmarks run on: a Kineto-shaped CUDA training trace written
//! as JSON of a given size ([`generate`], for `steplens-bench` and `bench/compare.py`), and the
//! same host-op / kernel shape pushed straight into a Timeline of a given slice count
//! ([`synthesize`], for `frame-bench`, whose 10 M slices would be gigabytes of JSON).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use steplens_ingest::TimelineBuilder;
use steplens_ingest::model::{ArgsRef, LaneId, Timeline};

/// Host threads of [`synthesize`].
pub const HOST_TRACKS: i64 = 8;
/// Device streams of [`synthesize`].
pub const DEVICE_TRACKS: i64 = 8;

/// Writes a Kineto-shaped CUDA training trace of at least `target` bytes: pretty-printed like
/// Kineto, ProfilerStep and DataLoader annotations, nested aten ops with shapes, runtime
/// launches with `ac2g` flows to kernels on two streams, a backward thread with `fwdbwd` flows,
/// copies, a `loss.item()` sync, and process/thread metadata.
///
/// # Errors
/// When the file cannot be written.
pub fn generate(path: &Path, target: u64) -> io::Result<u64> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut w = Gen::new(BufWriter::with_capacity(1 << 20, File::create(path)?));
    w.raw(
        "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\n      \"id\": 0, \"name\": \"NVIDIA A100-SXM4-80GB\", \"totalGlobalMem\": 85097971712,\n      \"computeMajor\": 8, \"computeMinor\": 0,\n      \"maxThreadsPerBlock\": 1024, \"numSms\": 108\n    }\n  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1},\n  \"record_shapes\": 1,\n  \"displayTimeUnit\": \"ms\",\n  \"traceEvents\": [\n",
    )?;
    w.metadata()?;
    let mut step = 0u64;
    while w.written < target {
        w.step(step)?;
        step += 1;
    }
    w.raw(
        "  {\n    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": \"\",\n    \"ts\": ",
    )?;
    let end = w.host_ts + 10_000;
    w.raw(&format!(
        "{}\n  }}\n],\n  \"traceName\": \"{}\"\n}}\n",
        fmt_us(end),
        path.display()
    ))?;
    w.out.flush()?;
    Ok(w.written)
}

const PID: u64 = 2_847_291;
const BWD_TID: u64 = 2_847_512;

fn op_dur(k: u64) -> u64 {
    22_000 + (k % 13) * 1_700
}

fn fmt_us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

struct Gen<W: Write> {
    out: W,
    written: u64,
    host_ts: u64,
    gpu_ts: u64,
    external_id: u64,
    correlation: u64,
    flow_id: u64,
    ev_idx: u64,
    line: String,
}

impl<W: Write> Gen<W> {
    fn new(out: W) -> Self {
        Self {
            out,
            written: 0,
            host_ts: 4_203_669_603_069_091,
            gpu_ts: 4_203_669_603_069_091,
            external_id: 1,
            correlation: 1,
            flow_id: 1,
            ev_idx: 0,
            line: String::with_capacity(4096),
        }
    }

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

    fn metadata(&mut self) -> io::Result<()> {
        let meta = [
            (
                PID.to_string(),
                "0".to_owned(),
                "process_name",
                "\"name\": \"python3\"",
            ),
            (
                PID.to_string(),
                "0".to_owned(),
                "process_labels",
                "\"labels\": \"CPU\"",
            ),
            (
                "0".to_owned(),
                "0".to_owned(),
                "process_name",
                "\"name\": \"python3\"",
            ),
            (
                "0".to_owned(),
                "0".to_owned(),
                "process_labels",
                "\"labels\": \"GPU 0\"",
            ),
            (
                "0".to_owned(),
                "0".to_owned(),
                "process_sort_index",
                "\"sort_index\": 16777216",
            ),
            (
                PID.to_string(),
                PID.to_string(),
                "thread_name",
                "\"name\": \"thread 2847291 (python3)\"",
            ),
            (
                PID.to_string(),
                BWD_TID.to_string(),
                "thread_name",
                "\"name\": \"thread 2847512 (pt_autograd_0)\"",
            ),
            (
                "0".to_owned(),
                "7".to_owned(),
                "thread_name",
                "\"name\": \"stream 7 \"",
            ),
            (
                "0".to_owned(),
                "20".to_owned(),
                "thread_name",
                "\"name\": \"stream 20 \"",
            ),
        ];
        for (pid, tid, name, args) in meta {
            let ts = fmt_us(self.host_ts);
            let _ = write!(
                self.line,
                "  {{\n    \"name\": \"{name}\", \"ph\": \"M\", \"ts\": {ts}, \"pid\": {pid}, \"tid\": {tid},\n    \"args\": {{\n      {args}\n    }}\n  }},\n"
            );
            self.flush_line()?;
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
        let _ = write!(
            self.line,
            "  {{\n    \"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{name}\", \"pid\": {PID}, \"tid\": {tid},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext},\"Record function id\": 0, \"Ev Idx\": {}{shapes}\n    }}\n  }},\n",
            fmt_us(start),
            fmt_us(dur),
            self.ev_idx
        );
        self.flush_line()?;
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
        let _ = write!(
            self.line,
            "  {{\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"{runtime}\", \"pid\": {PID}, \"tid\": {tid},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext}, \"cbid\": 211, \"correlation\": {corr}\n    }}\n  }},\n",
            fmt_us(start),
            fmt_us(dur)
        );
        let gpu_start = self.gpu_ts.max(start + dur + 2_000);
        self.gpu_ts = gpu_start + gpu_dur + 1_500;
        let extra = if cat == "kernel" {
            ", \"registers per thread\": 128, \"shared memory\": 49152, \"blocks per SM\": 1.185185, \"warps per SM\": 9.481482, \"grid\": [128, 1, 1], \"block\": [256, 1, 1], \"est. achieved occupancy %\": 13"
        } else {
            ", \"bytes\": 3211264, \"memory bandwidth (GB/s)\": 412.518"
        };
        let _ = write!(
            self.line,
            "  {{\n    \"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{kernel}\", \"pid\": 0, \"tid\": {stream},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext}, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": {stream}, \"correlation\": {corr}{extra}\n    }}\n  }},\n",
            fmt_us(gpu_start),
            fmt_us(gpu_dur)
        );
        let _ = write!(
            self.line,
            "  {{\n    \"ph\": \"s\", \"id\": {corr}, \"pid\": {PID}, \"tid\": {tid}, \"ts\": {}, \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }},\n  {{\n    \"ph\": \"f\", \"id\": {corr}, \"pid\": 0, \"tid\": {stream}, \"ts\": {}, \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }},\n",
            fmt_us(start),
            fmt_us(gpu_start)
        );
        self.flush_line()
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
            let _ = write!(
                self.line,
                "  {{\n    \"ph\": \"s\", \"id\": {}, \"pid\": {PID}, \"tid\": {tid}, \"ts\": {}, \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"\n  }},\n",
                self.flow_id + k,
                fmt_us(fwd_at)
            );
            self.flush_line()?;
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
            let _ = write!(
                self.line,
                "  {{\n    \"ph\": \"f\", \"id\": {}, \"pid\": {PID}, \"tid\": {BWD_TID}, \"ts\": {}, \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\", \"bp\": \"e\"\n  }},\n",
                self.flow_id + k,
                fmt_us(b)
            );
            self.flush_line()?;
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

/// 60 % of the slices on host threads (3 levels: op, two children, evenly packed over 1 s),
/// 40 % as kernels on device streams (in bursts, gaps at every scale), one counter with 100 k
/// samples.
#[must_use]
pub fn synthesize(total: i64) -> Timeline {
    let mut b = TimelineBuilder::with_capacity(total as usize);
    let names: Vec<u32> = (0..64)
        .map(|i| b.intern(&format!("aten::op_{i}")))
        .collect();
    let cpu = b.intern_cat("cpu_op");
    let kernel = b.intern_cat("kernel");
    let ops_per_host = total * 6 / 10 / 3 / HOST_TRACKS;
    let kernels_per_device = total * 4 / 10 / DEVICE_TRACKS;
    let span: i64 = 1_000_000_000;
    for h in 0..HOST_TRACKS {
        let track = b.track(0, LaneId::Int(1), LaneId::Int(100 + h));
        let period = span / ops_per_host;
        for k in 0..ops_per_host {
            let t = k * period;
            let n = names[(k % 64) as usize];
            b.push_slice(track, t, period * 9 / 10, n, cpu, ArgsRef::NONE);
            b.push_slice(
                track,
                t + 1,
                period * 4 / 10,
                names[((k + 1) % 64) as usize],
                cpu,
                ArgsRef::NONE,
            );
            b.push_slice(
                track,
                t + period / 2,
                period * 3 / 10,
                names[((k + 2) % 64) as usize],
                cpu,
                ArgsRef::NONE,
            );
        }
    }
    for d in 0..DEVICE_TRACKS {
        let track = b.track(0, LaneId::Int(2), LaneId::Int(d));
        let period = span / kernels_per_device;
        // Kernels in bursts: the gap after kernel k grows with the trailing zeros of k, so there
        // are gaps at every scale and density runs break at every zoom (the hard case for the
        // level of detail, unlike the evenly packed host threads).
        let mut t = 0;
        for k in 0..kernels_per_device {
            let dur = period * 3 / 4;
            b.push_slice(
                track,
                t,
                dur,
                names[(k % 64) as usize],
                kernel,
                ArgsRef::NONE,
            );
            let gap = (period / 8) << i64::from(k.trailing_zeros().min(16));
            t += dur + gap;
        }
    }
    for k in 0..100_000i64 {
        b.push_counter(
            0,
            LaneId::Int(2),
            "memory",
            k * 10_000,
            ((k * 7919) % 1000) as f64,
        );
    }
    b.finish()
}
