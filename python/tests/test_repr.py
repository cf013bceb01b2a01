"""``repr(run)`` counts steps and findings as the CLI does (issue 49): ``20 steps × 4 ranks``,
``2 groups · 81 findings``."""

import re
import subprocess

import steplens

from test_api import SAMPLES, cli

STRAGGLER = [SAMPLES / "ci-aa" / f"straggler_rank{r}.json.gz" for r in range(4)]
SYNC = SAMPLES / "torch-cpu" / "train_sync.json.gz"


def cli_counts(*paths):
    out = subprocess.run([cli(), "report", *map(str, paths)], capture_output=True, text=True,
                         check=True).stdout
    steps = re.search(r"^  summary  (.+?), mean", out, re.M).group(1)
    found = re.search(r"^Findings \((.+?), by what", out, re.M).group(1)
    return steps, found


def test_repr_counts_steps_and_findings_as_the_cli():
    for paths in (STRAGGLER, [SYNC]):
        steps, found = cli_counts(*paths)
        text = repr(steplens.load(*paths))
        assert text.endswith(f": {steps}, {found}>"), (text, steps, found)
    assert "20 steps × 4 ranks, 2 groups · 81 findings>" in repr(steplens.load(*STRAGGLER))
