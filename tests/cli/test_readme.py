"""Every ```python block of README.md and of the documentation pages (docs/, the manual the
README links to) runs as written: each in a fresh subprocess, in a temporary folder, with a
timeout. A block whose optional data set, model or package is not installed is skipped, with
the install message as the written reason. Cluster recipes are fenced ```py: shown, not run
(they submit jobs). The README stays a front page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# the site's pages; incoming/ holds notes not yet folded in, results/ a run's own output
DOC_PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md")
                   if p.relative_to(ROOT / "docs").parts[0] not in ("incoming", "results"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# raised when a source or package is not installed; their message says how to install it
MISSING = ("DataNotFoundError", "MissingDependencyError", "ModuleNotFoundError")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


BLOCKS = [(f"{page.relative_to(ROOT)}:{line}", code) for page in [README, *DOC_PAGES]
          for line, code in python_blocks(page.read_text(encoding="utf-8"))]


def test_readme_has_python_blocks():
    assert any(where.startswith("README.md:") for where, _ in BLOCKS)
    assert len(BLOCKS) >= 10  # the README's example and the manual's
    assert python_blocks("x\n```python\na = 1\n```\n```bash\nls\n```\n") == [(3, "a = 1\n")]


def test_readme_is_a_front_page():
    """At most 250 lines, the two commands, and every relative link resolves."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "make run" in text and "make test" in text
    links = re.findall(r"\]\((?!https?://|#)([^)#]+)", text)
    assert links, "the README links into the documentation"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


@pytest.mark.slow  # ~60 s in all: each block imports torch (some load data or a model)
@pytest.mark.parametrize("where,code", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_readme_python_block_runs(where, code, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    try:
        res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}: the block ran longer than 300 s")
    if res.returncode != 0:
        last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ""
        if last.split(":")[0].split(".")[-1] in MISSING:
            pytest.skip(f"{where} needs something not installed here: {last}")
        pytest.fail(f"{where} fails:\n{res.stderr[-3000:]}")
