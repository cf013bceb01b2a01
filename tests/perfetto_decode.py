#!/usr/bin/env python3
"""Decode a steplens-exported .pftrace with the official Perfetto protobuf classes and check
it against what steplens itself reports.

    pip install perfetto
    python3 tests/perfetto_decode.py STEPLENS_BIN TRACE [TRACE...]

For each TRACE: `steplens export TRACE --perfetto OUT`, then decode OUT with
`perfetto.protos.perfetto.trace.perfetto_trace_pb2` (not steplens code) and check:
the first packet clears the sequence's incremental state (flags 3) and later ones need it;
every event name and category resolves through the interned tables; BEGIN/END balance per
track; per Timeline track (`steplens info --json --tracks TRACE`), the name, and the number of
slices; the `Steps` track has one slice per step; the finding tracks have one slice per
finding of `steplens report --format json`. Exits 1 on any mismatch.
"""

import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

NOTE = "steplens track "


def steplens_json(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def check(binary, trace, out_dir):
    errors = []
    out = Path(out_dir) / (Path(trace).name + ".pftrace")
    subprocess.run([binary, "export", trace, "--perfetto", str(out)], check=True,
                   capture_output=True)
    info = steplens_json(binary, "info", "--json", "--tracks", trace)
    report = steplens_json(binary, "report", "--format", "json", trace)

    decoded = pb.Trace.FromString(out.read_bytes())
    packets = list(decoded.packet)
    if packets[0].sequence_flags != 3:
        errors.append(f"first packet flags {packets[0].sequence_flags}, want 3")
    names, cats = {}, {}
    descriptors = {}
    begins, ends = Counter(), Counter()
    unresolved = 0
    by_track_names = defaultdict(Counter)
    for p in packets:
        if p is not packets[0] and p.sequence_flags != 2:
            errors.append(f"packet flags {p.sequence_flags}, want 2")
            break
        for n in p.interned_data.event_names:
            names[n.iid] = n.name
        for c in p.interned_data.event_categories:
            cats[c.iid] = c.name
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            descriptors[d.uuid] = d
        if p.HasField("track_event"):
            e = p.track_event
            if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                begins[e.track_uuid] += 1
                if e.name_iid not in names or any(c not in cats for c in e.category_iids):
                    unresolved += 1
                by_track_names[e.track_uuid][names.get(e.name_iid)] += 1
            elif e.type == pb.TrackEvent.TYPE_SLICE_END:
                ends[e.track_uuid] += 1
    if unresolved:
        errors.append(f"{unresolved} events with uninterned names or categories")
    for uuid in set(begins) | set(ends):
        if begins[uuid] != ends[uuid]:
            errors.append(f"track {uuid}: {begins[uuid]} BEGIN, {ends[uuid]} END")

    # Perfetto tracks grouped by the Timeline track they came from (overlap layers share it).
    per_track = defaultdict(lambda: {"slices": 0, "name": None})
    overlay = defaultdict(int)
    for uuid, d in descriptors.items():
        if d.description.startswith(NOTE):
            note = json.loads(d.description[len(NOTE):])
            row = per_track[note["id"]]
            row["slices"] += begins[uuid]
            row["name"] = note["name"]
            shown = d.thread.thread_name if d.HasField("thread") else d.name
            if not (shown == note["name"] or shown.startswith(note["name"] + " (overlap")):
                errors.append(f"track {uuid} shows {shown!r}, note says {note['name']!r}")
        elif d.name == "Steps" or d.name.startswith("finding: "):
            overlay[d.name] += begins[uuid]

    tracks = info["track_list"]
    if len(per_track) != len(tracks):
        errors.append(f"{len(per_track)} Timeline tracks in the file, steplens has {len(tracks)}")
    for i, t in enumerate(tracks):
        got = per_track.get(i)
        if got is None or got["slices"] != t["slices"] or got["name"] != t["name"]:
            errors.append(f"track {i}: file {got}, steplens {t['name']!r} {t['slices']} slices")
    if overlay.get("Steps", 0) != len(info["steps"]):
        errors.append(f"Steps track: {overlay.get('Steps', 0)} slices, {len(info['steps'])} steps")
    want = Counter(f["kind"] for f in report["findings"])
    got = {k[len("finding: "):]: v for k, v in overlay.items() if k.startswith("finding: ")}
    if dict(want) != got:
        errors.append(f"finding tracks {got}, report {dict(want)}")
    total = sum(r["slices"] for r in per_track.values())
    summary = (f"{trace}: {len(packets)} packets, {len(descriptors)} track descriptors, "
               f"{total} slices on {len(per_track)} Timeline tracks, "
               f"{overlay.get('Steps', 0)} steps, {sum(got.values())} findings, "
               f"{len(names)} interned names")
    return summary, errors


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, traces = sys.argv[1], sys.argv[2:]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for trace in traces:
            summary, errors = check(binary, trace, tmp)
            print(("FAIL " if errors else "ok   ") + summary)
            for e in errors[:20]:
                print("     " + e)
            failed |= bool(errors)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
