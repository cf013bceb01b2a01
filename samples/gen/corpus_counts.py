#!/usr/bin/env python3
"""Write samples/gen/corpus_counts.json: truth.py's counts for every trace of the shared corpus.

    python3 samples/gen/corpus_counts.py [CORPUS_DIR]   # default ../shared/corpus from the repo root

Keys are paths relative to the corpus folder (e.g. "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
values hold step_count (number of host ProfilerStep# events) and truth.py's events, events_by_ph,
events_by_cat, x_events, flows, steps, dataloader_ns_per_step, cpu_op_count_per_step and top_ops,
with the same definitions. Files are loaded one at a time (peak RSS ~0.6 GB, ~10 s).
"""

import gc
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import truth  # noqa: E402


def main(argv):
    corpus = argv[0] if argv else os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "corpus"))
    paths = []
    for sub in ("hta", "torch-cpu"):
        for root, _dirs, files in os.walk(os.path.join(corpus, sub)):
            for f in files:
                if f.endswith(".json.gz") or (f.endswith(".json") and not f.endswith(".truth.json")):
                    paths.append(os.path.relpath(os.path.join(root, f), corpus))
    out = {}
    for rel in sorted(paths):
        doc = truth.load_trace(os.path.join(corpus, rel))
        t = truth.compute(doc)
        del doc
        gc.collect()
        out[rel] = {
            "events": t["events"],
            "events_by_ph": t["events_by_ph"],
            "events_by_cat": t["events_by_cat"],
            "x_events": t["x_events"],
            "flows": t["flows"],
            "step_count": len(t["steps"]),
            "steps": t["steps"],
            "dataloader_ns_per_step": t["dataloader_ns_per_step"],
            "cpu_op_count_per_step": t["cpu_op_count_per_step"],
            "top_ops": t["top_ops"],
        }
        print(f"{rel}: {t['events']} events, {len(t['steps'])} steps", file=sys.stderr)
    dst = os.path.join(HERE, "corpus_counts.json")
    with open(dst, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(dst, len(out), "traces", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
