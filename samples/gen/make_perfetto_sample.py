#!/usr/bin/env python3
"""Write samples/perfetto/synthetic.pftrace with the official Perfetto protobuf classes
(`pip install perfetto`, module perfetto.protos.perfetto.trace.perfetto_trace_pb2), the way
the Perfetto SDK and other tools write TrackEvent traces, to test steplens' reader on input it
did not write itself. Deterministic: the same file on every run.

What is in it (times in ns):
- sequence 1: process 100 "train.py" with thread 101 "MainThread" (thread track) and a
  "GPU 0" group with a custom track "stream 7"; interned names, categories, annotation names
  and string values; ProfilerStep#1 [1000, 9000] > aten::linear [2000, 5000] >
  cudaLaunchKernel [2500, 3000] (flow 42 leaves it), kernel "gemm" [4000, 6000] on stream 7
  (flow 42 ends there); an instant "mark"; a counter track "GPU memory" with 3 samples;
  debug annotations (int, string, interned string, nested dict, array).
- sequence 2: thread 102 "DataLoader" with sequence defaults (track_uuid) and an incremental
  clock (id 64, 1 unit = 1 ns, deltas): "next_batch" [1500, 2500] and [7000, 8000].
- a compressed_packets packet holding sequence 1 slice "optimizer.step" [9500, 9900].
- an ftrace packet (skipped and counted) and one packet on sequence 1 flagged
  previous_packet_dropped (data loss warning).
- sequence 3: a packet needing incremental state before any clear (dropped, counted).
"""

import sys
import zlib
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TE = pb.TrackEvent
CLEARED, NEEDS = 1, 2


def packet(trace, seq, ts=None, flags=NEEDS):
    p = trace.packet.add()
    p.trusted_packet_sequence_id = seq
    if flags is not None:
        p.sequence_flags = flags
    if ts is not None:
        p.timestamp = ts
    return p


def slice_begin(trace, seq, ts, track, name_iid, cat_iid, flows=(), term=(), annotations=None):
    p = packet(trace, seq, ts)
    e = p.track_event
    e.type = TE.TYPE_SLICE_BEGIN
    e.track_uuid = track
    e.name_iid = name_iid
    e.category_iids.append(cat_iid)
    e.flow_ids.extend(flows)
    e.terminating_flow_ids.extend(term)
    if annotations:
        annotations(e)
    return p


def slice_end(trace, seq, ts, track):
    p = packet(trace, seq, ts)
    p.track_event.type = TE.TYPE_SLICE_END
    p.track_event.track_uuid = track


def main(out):
    trace = pb.Trace()
    # Sequence 1: descriptors and interned data.
    p = packet(trace, 1, flags=CLEARED | NEEDS)
    d = p.track_descriptor
    d.uuid = 10
    d.process.pid = 100
    d.process.process_name = "train.py"
    i = p.interned_data
    for iid, name in [(1, "ProfilerStep#1"), (2, "aten::linear"), (3, "cudaLaunchKernel"),
                      (4, "gemm"), (5, "mark"), (6, "optimizer.step")]:
        n = i.event_names.add(); n.iid = iid; n.name = name
    for iid, name in [(1, "user_annotation"), (2, "cpu_op"), (3, "cuda_runtime"), (4, "kernel")]:
        c = i.event_categories.add(); c.iid = iid; c.name = name
    for iid, name in [(1, "External id"), (2, "Input Dims"), (3, "shape"), (4, "dtype"),
                      (5, "meta")]:
        n = i.debug_annotation_names.add(); n.iid = iid; n.name = name
    s = i.debug_annotation_string_values.add(); s.iid = 1; s.str = b"float32"

    p = packet(trace, 1)
    d = p.track_descriptor
    d.uuid = 11
    d.parent_uuid = 10
    d.thread.pid = 100
    d.thread.tid = 101
    d.thread.thread_name = "MainThread"
    p = packet(trace, 1)
    p.track_descriptor.uuid = 20
    p.track_descriptor.name = "GPU 0"
    p = packet(trace, 1)
    p.track_descriptor.uuid = 21
    p.track_descriptor.parent_uuid = 20
    p.track_descriptor.name = "stream 7"
    p = packet(trace, 1)
    p.track_descriptor.uuid = 30
    p.track_descriptor.parent_uuid = 10
    p.track_descriptor.name = "GPU memory"
    p.track_descriptor.counter.unit = pb.CounterDescriptor.UNIT_SIZE_BYTES

    def linear_args(e):
        a = e.debug_annotations.add(); a.name_iid = 1; a.int_value = 7
        a = e.debug_annotations.add(); a.name_iid = 2
        for dims in ([8, 32], [32, 128]):
            arr = a.array_values.add()
            for v in dims:
                arr.array_values.add().int_value = v
        a = e.debug_annotations.add(); a.name_iid = 5
        k = a.dict_entries.add(); k.name_iid = 4; k.string_value_iid = 1
        k = a.dict_entries.add(); k.name = "note"; k.string_value = "a \"quoted\" word"

    slice_begin(trace, 1, 1000, 11, 1, 1)
    slice_begin(trace, 1, 2000, 11, 2, 2, annotations=linear_args)
    slice_begin(trace, 1, 2500, 11, 3, 3, flows=[42])
    slice_end(trace, 1, 3000, 11)
    slice_end(trace, 1, 5000, 11)
    slice_begin(trace, 1, 4000, 21, 4, 4, term=[42])
    slice_end(trace, 1, 6000, 21)
    p = packet(trace, 1, 5500)
    p.track_event.type = TE.TYPE_INSTANT
    p.track_event.track_uuid = 11
    p.track_event.name_iid = 5
    p.track_event.category_iids.append(1)
    for ts, v in [(1000, 1024), (4000, 4096), (6000, 2048)]:
        p = packet(trace, 1, ts)
        p.track_event.type = TE.TYPE_COUNTER
        p.track_event.track_uuid = 30
        p.track_event.counter_value = v
    slice_end(trace, 1, 9000, 11)

    # Sequence 2: defaults and an incremental clock.
    p = packet(trace, 2, flags=CLEARED | NEEDS)
    d = p.track_descriptor
    d.uuid = 12
    d.parent_uuid = 10
    d.thread.pid = 100
    d.thread.tid = 102
    d.thread.thread_name = "DataLoader"
    p.trace_packet_defaults.timestamp_clock_id = 64
    p.trace_packet_defaults.track_event_defaults.track_uuid = 12
    n = p.interned_data.event_names.add(); n.iid = 1; n.name = "next_batch"
    c = p.interned_data.event_categories.add(); c.iid = 1; c.name = "user_annotation"
    p = packet(trace, 2)
    clk = p.clock_snapshot.clocks.add()
    clk.clock_id = 64; clk.timestamp = 0; clk.is_incremental = True; clk.unit_multiplier_ns = 1
    clk = p.clock_snapshot.clocks.add()
    clk.clock_id = 6; clk.timestamp = 0
    for delta, kind in [(1500, TE.TYPE_SLICE_BEGIN), (1000, TE.TYPE_SLICE_END),
                        (4500, TE.TYPE_SLICE_BEGIN), (1000, TE.TYPE_SLICE_END)]:
        p = packet(trace, 2, delta)
        p.track_event.type = kind
        if kind == TE.TYPE_SLICE_BEGIN:
            p.track_event.name_iid = 1
            p.track_event.category_iids.append(1)

    # Compressed packets of sequence 1.
    inner = pb.Trace()
    slice_begin(inner, 1, 9500, 11, 6, 2)
    slice_end(inner, 1, 9900, 11)
    p = trace.packet.add()
    p.compressed_packets = zlib.compress(inner.SerializeToString())

    # Skipped and lost.
    p = trace.packet.add()
    p.ftrace_events.cpu = 0
    p = packet(trace, 1, 9950)
    p.previous_packet_dropped = 1
    p.track_event.type = TE.TYPE_INSTANT
    p.track_event.track_uuid = 11
    p.track_event.name = "after loss"
    p = packet(trace, 3, 9960)
    p.track_event.type = TE.TYPE_INSTANT
    p.track_event.name_iid = 1

    Path(out).write_bytes(trace.SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else
         str(Path(__file__).resolve().parent.parent / "perfetto" / "synthetic.pftrace"))
