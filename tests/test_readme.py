"""Every ```python block of README.md runs as written (issue #13): each in a fresh
subprocess, in a temporary folder, with a timeout. A block whose optional data set, model
or package is not installed is skipped, with the install message as the written reason."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# raised when a source or package is not installed; their message says how to install it
MISSING = ("DataNotFoundError", "MissingDependencyError", "ModuleNotFoundError")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 5
    assert python_blocks("x\n```python\na = 1\n```\n```bash\nls\n```\n") == [(3, "a = 1\n")]


@pytest.mark.slow  # ~60 s in all: each block imports torch (some load data or a model)
@pytest.mark.parametrize("line,code", BLOCKS, ids=[f"README.md:{n}" for n, _ in BLOCKS])
def test_readme_python_block_runs(line, code, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    try:
        res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"README.md:{line}: the block ran longer than 300 s")
    if res.returncode != 0:
        last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ""
        if last.split(":")[0].split(".")[-1] in MISSING:
            pytest.skip(f"README.md:{line} needs something not installed here: {last}")
        pytest.fail(f"README.md:{line} fails:\n{res.stderr[-3000:]}")
