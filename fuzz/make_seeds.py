#!/usr/bin/env python3
"""Writes small fuzz seeds (fuzz/seeds/<target>/) from the bundled samples.

Fuzzers work best from small, valid inputs: each seed keeps the head of a sample (the first
events of each phase, the first CSV rows) so every reader's main paths are reached quickly.
Run from anywhere: python3 fuzz/make_seeds.py
"""
import gzip
import io
import json
import pathlib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
SEEDS = ROOT / "fuzz" / "seeds"


def load_json(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # Synapse TEF files end without their closing bracket.
        body = text.rstrip().rstrip(",")
        for tail in ("]", "]}"):
            try:
                return json.loads(body + tail)
            except json.JSONDecodeError:
                pass
        raise


def small_trace(doc, per_phase=12):
    """The metadata and the first events of each phase, in file order."""
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    kept, seen = [], {}
    for e in events:
        ph = e.get("ph", "?") if isinstance(e, dict) else "?"
        if ph == "M" or seen.get(ph, 0) < per_phase:
            seen[ph] = seen.get(ph, 0) + 1
            kept.append(e)
    if isinstance(doc, dict):
        out = {k: v for k, v in doc.items() if k != "traceEvents"}
        out["traceEvents"] = kept
        return out
    return kept


def write(target, name, data):
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def dumps(doc):
    return json.dumps(doc, separators=(",", ":")).encode()


def head_lines(path, n):
    with open(path, "rb") as f:
        return b"".join(f.readlines()[:n])


def main():
    kineto = [
        SAMPLES / "torch-cpu" / "train_clean.json",
        SAMPLES / "torch-cpu" / "train_sync.json.gz",
        SAMPLES / "hta" / "cuda_event_sync.json.gz",
    ]
    for path in kineto:
        if path.exists():
            stem = path.name.split(".")[0]
            write("kineto_json", f"{stem}.json", dumps(small_trace(load_json(path))))
    for path in [SAMPLES / "gaudi" / "train_hpu.bridge.json.gz", SAMPLES / "gaudi" / "train_hpu.tef.json.gz"]:
        stem = path.name.split(".")[1]
        doc = small_trace(load_json(path), per_phase=20)
        write("gaudi_json", f"{stem}.json", dumps(doc))
        # TEF files are often left unterminated by the profiler.
        if stem == "tef":
            write("gaudi_json", "tef_unterminated.json", dumps(doc)[:-2])
    write("habana_hw_csv", "hw.csv", head_lines(SAMPLES / "gaudi" / "train_hpu.hw.csv", 80))
    write("habana_hw_csv", "real.csv", head_lines(SAMPLES / "habana" / "debug_hw_prof_accel0_001.csv", 80))
    write("analyzed_nodes", "nodes.csv",
          head_lines(SAMPLES / "habana" / "debug_hw_prof_accel0_001_analyzed_nodes.csv", 20))
    write("analyzed_nodes", "nodes.json", dumps({"analyzer_metadata": [
        {"Unit": "MME", "Node Name": "mm_0", "Start (us)": 1.0, "End (us)": 3.5, "Duration (us)": 2.5}]}))
    metrics = load_json(SAMPLES / "gaudi" / "train_hpu.metrics.json")
    write("habana_metrics", "metrics.json", dumps(metrics[:3] if isinstance(metrics, list) else metrics))
    # A .hltv-like archive holding a small trace and a CSV.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("trace.json", (SEEDS / "kineto_json" / "train_clean.json").read_bytes())
        z.writestr("hw.csv", (SEEDS / "habana_hw_csv" / "hw.csv").read_bytes())
    write("hltv_zip", "archive.hltv", buf.getvalue())
    write("gzip", "train_clean.json.gz",
          gzip.compress((SEEDS / "kineto_json" / "train_clean.json").read_bytes(), mtime=0))
    write("perfetto", "synthetic.pftrace", (SAMPLES / "perfetto" / "synthetic.pftrace").read_bytes())
    # An exported trace (steplens's own writer: interning, flows, overlay tracks), if the binary
    # is built: target/debug/steplens export fuzz/seeds/kineto_json/train_clean.json --perfetto …
    exported = ROOT / "target" / "fuzz-seed-train_clean.pftrace"
    steplens = ROOT / "target" / "debug" / "steplens"
    if steplens.exists():
        import subprocess
        subprocess.run([str(steplens), "export", str(SEEDS / "kineto_json" / "train_clean.json"),
                        "--perfetto", str(exported)], check=True, capture_output=True)
        write("perfetto", "train_clean.pftrace", exported.read_bytes())
    write("budget", "steplens.toml", (SAMPLES / "ci" / "steplens.toml").read_bytes())
    write("budget", "small.toml", b"[check]\nwarmup_steps = 2\nallow_new = [\"sync_point\"]\n"
          b"[check.lost_time.sync_point]\nmax_increase_ms = 0.5\n[thresholds]\n")
    for d in sorted(SEEDS.iterdir()):
        sizes = ", ".join(f"{p.name} {p.stat().st_size} B" for p in sorted(d.iterdir()))
        print(f"{d.name}: {sizes}")


if __name__ == "__main__":
    main()
