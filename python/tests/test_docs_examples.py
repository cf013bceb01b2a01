"""The Python examples of ``README.md`` and ``docs/*.md`` run against the bundled samples.

What ``tests/examples.rs`` (trycmd) does for the ```console blocks, this does for Python. A page's
examples run in order in one namespace (a later block uses the ``run`` an earlier one loaded),
in a scratch directory that reads as a checkout: ``samples``, ``README.md`` and the page's
fixtures (below). Three forms are checked:

- a ```python block of ``>>>`` lines: a doctest session (``...`` in an expected value stands for
  any text);
- a ```python block followed by a ```text block: the block runs as a script and prints what the
  text block shows;
- a ```text block whose first line is ``$ python -c "…"``: the command runs in a fresh
  interpreter and prints the rest of the block.

In shown output, a line ``...`` stands for any lines and ``[..]`` for any part of a line, as in
trycmd; trailing spaces are not compared. A ```python block with no shown output still runs (it
must not raise), unless ``NOT_RUN`` names it with the reason it cannot run here.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# (page, a line of the block) → why the block does not run here. Each entry must still match a
# block, so a reworded example is not silently left out.
NOT_RUN: Dict[Tuple[str, str], str] = {
    ("docs/ranks.md", 'client = Client("tcp://scheduler:8786")'): (
        "needs a Dask scheduler at tcp://scheduler:8786 and traces under /shared/job42; "
        "test_distributed.py runs the same map and reduce on a LocalCluster"
    ),
    ("docs/ranks.md", "ray.init()"): (
        "needs ray (not installed here or in CI); test_distributed.py runs it where ray is"
    ),
}

# What a page's examples take from the prose around them, set up before its first block.
PRELUDE: Dict[str, str] = {
    # "The one line, with `paths` the ranks' traces": the 4-rank sample the text block above uses.
    "docs/ranks.md": "import glob\nimport steplens\n"
    "paths = sorted(glob.glob('samples/ci-aa/straggler_rank*.json.gz'))\n",
}


@dataclass
class Block:
    lang: str
    body: str
    line: int  # 1-based line of the opening fence
    follows_directly: bool  # only blank lines between the previous block's fence and this one


def blocks(text: str) -> List[Block]:
    """The fenced blocks of a Markdown page, in order."""
    found: List[Block] = []
    lines = text.splitlines()
    i = 0
    last_close: Optional[int] = None
    while i < len(lines):
        m = re.match(r"^(```+)\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2), i
        i += 1
        body: List[str] = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        between = lines[last_close + 1 : start] if last_close is not None else ["x"]
        found.append(
            Block(lang, "\n".join(body) + "\n", start + 1, all(not s.strip() for s in between))
        )
        last_close = i
        i += 1
    return found


def matches(expected: str, actual: str) -> bool:
    """trycmd's elisions: a line ``...`` is any lines (none included), ``[..]`` any part of a
    line. Trailing spaces and trailing blank lines are not compared."""
    want = [s.rstrip() for s in expected.rstrip("\n").split("\n")]
    got = [s.rstrip() for s in actual.rstrip("\n").split("\n")]

    def line_ok(pattern: str, text: str) -> bool:
        parts = [re.escape(p) for p in pattern.split("[..]")]
        return re.fullmatch(".*".join(parts), text) is not None

    def match(w: int, g: int) -> bool:
        if w == len(want):
            return g == len(got)
        if want[w] == "...":
            return any(match(w + 1, k) for k in range(g, len(got) + 1))
        return g < len(got) and line_ok(want[w], got[g]) and match(w + 1, g + 1)

    return match(0, 0)


def steplens_bin() -> Optional[str]:
    """The binary test_api.py uses: $STEPLENS_BIN, else the newer of target/{release,debug}."""
    if os.environ.get("STEPLENS_BIN"):
        return os.environ["STEPLENS_BIN"]
    built = [REPO / "target" / p / "steplens" for p in ("release", "debug")]
    built = [p for p in built if p.exists()]
    if built:
        return str(max(built, key=lambda p: p.stat().st_mtime))
    return shutil.which("steplens")


def fixtures(page: str, scratch: pathlib.Path) -> None:
    """The files a page's examples read besides the samples."""
    (scratch / "samples").symlink_to(REPO / "samples")
    (scratch / "README.md").symlink_to(REPO / "README.md")
    if page == "docs/hta.md":
        # `TraceAnalysis(trace_dir="traces/")`: per-rank CUDA traces with NCCL collectives.
        (scratch / "traces").symlink_to(REPO / "samples" / "ranks" / "nccl_straggler")
    if page == "docs/export.md":
        # The polars scan reads the `--tables rank-tables/` export of the page's console block.
        binary = steplens_bin()
        if binary is None:
            pytest.fail("no steplens binary for docs/export.md's rank-tables/ (cargo build)")
        ranks = sorted(str(p) for p in (REPO / "samples" / "ci-aa").glob("straggler_rank*.json.gz"))
        subprocess.run(
            [binary, "export", *ranks, "--tables", str(scratch / "rank-tables")],
            check=True,
            capture_output=True,
        )


def python_pages() -> List[str]:
    out = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        if any(b.lang == "python" or is_python_command(b) for b in blocks(text)):
            out.append(str(path.relative_to(REPO)))
    return out


def is_python_command(block: Block) -> bool:
    return block.lang == "text" and block.body.startswith("$ python -c ")


def skip_reason(page: str, block: Block) -> Optional[str]:
    for (p, line), reason in NOT_RUN.items():
        if p == page and line in block.body:
            return reason
    return None


def run_page(page: str, scratch: pathlib.Path) -> Tuple[List[str], int]:
    """Runs the page's examples in order; returns the failures and the number of blocks run."""
    try:
        import steplens._steplens  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("the steplens extension is not built (pip install ./python)")
        pytest.skip("the steplens extension is not built: pip install ./python")
    found = blocks((REPO / page).read_text(encoding="utf-8"))
    ns: Dict[str, object] = {"__name__": "__docs__"}
    exec(PRELUDE.get(page, "import steplens\n"), ns)
    failures: List[str] = []
    ran = 0
    for i, block in enumerate(found):
        where = f"{page}:{block.line}"
        if is_python_command(block):
            first, _, expected = block.body.partition("\n")
            argv = shlex.split(first[2:])
            proc = subprocess.run(
                [sys.executable, *argv[1:]], cwd=scratch, capture_output=True, text=True
            )
            ran += 1
            if proc.returncode != 0:
                failures.append(f"{where}: exit {proc.returncode}\n{proc.stderr}")
            elif not matches(expected, proc.stdout):
                failures.append(f"{where}: printed\n{proc.stdout}\nthe page shows\n{expected}")
            continue
        if block.lang != "python" or skip_reason(page, block):
            continue
        ran += 1
        if re.search(r"^\s*>>> ", block.body, re.M):
            parser = doctest.DocTestParser()
            test = parser.get_doctest(block.body, ns, where, page, block.line)
            report = io.StringIO()
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            result = runner.run(test, out=report.write, clear_globs=False)
            if result.failed:
                failures.append(f"{where}: doctest\n{report.getvalue()}")
            continue
        after = found[i + 1] if i + 1 < len(found) else None
        expected = after.body if after and after.lang == "text" and after.follows_directly else None
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(block.body, where, "exec"), ns)
        except Exception as e:  # noqa: BLE001 (reported with the block's place)
            failures.append(f"{where}: raised {type(e).__name__}: {e}")
            continue
        if expected is not None and not matches(expected, printed.getvalue()):
            failures.append(f"{where}: printed\n{printed.getvalue()}\nthe page shows\n{expected}")
    return failures, ran


@pytest.mark.parametrize("page", python_pages())
def test_python_examples_print_what_the_page_shows(page, tmp_path, monkeypatch):
    fixtures(page, tmp_path)
    monkeypatch.chdir(tmp_path)
    failures, ran = run_page(page, tmp_path)
    assert not failures, "\n\n".join(failures)
    assert ran > 0 or all(
        skip_reason(page, b) for b in blocks((REPO / page).read_text()) if b.lang == "python"
    )


def test_every_not_run_entry_names_a_block():
    for (page, line), reason in NOT_RUN.items():
        found = [b for b in blocks((REPO / page).read_text(encoding="utf-8")) if line in b.body]
        assert found, f"NOT_RUN names no block of {page} holding {line!r} ({reason})"


def test_the_elisions_match_as_trycmd_does():
    assert matches("a\n...\nd\n", "a\nb\nc\nd\n")
    assert matches("a\n...\nb\n", "a\nb\n")
    assert matches("x = [..] ms\n", "x = 3.2 ms  \n")
    assert not matches("a\nb\n", "a\nc\n")
    assert not matches("a\n", "a\nb\n")
