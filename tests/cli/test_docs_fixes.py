"""Documentation that cannot drift from the code: every extra in the extras table, every
supported Hugging Face family in docs/hf.md's table, no paragraph of docs/training.md said
twice, the site searchable from disk, and `make docs` leaving an existing venv alone."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_extras_table_lists_every_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \|", text, flags=re.M))
    assert set(extras) <= rows, f"extras missing from the table: {set(extras) - rows}"


def test_hf_support_table_names_every_supported_family():
    from tokengeo.models.hf.families import FAMILIES

    text = (DOCS / "hf.md").read_text(encoding="utf-8")
    table = text[text.index("| family | model types |"):]
    table = table[:table.index("\n\n")]
    named = set(re.findall(r"`([\w-]+)`", table))
    assert set(FAMILIES) <= named, f"not in docs/hf.md: {set(FAMILIES) - named}"


def test_training_md_says_nothing_twice():
    lines = [line.strip() for line in (DOCS / "training.md").read_text().splitlines()
             if len(line.strip()) > 60]
    repeated = {line for line in lines if lines.count(line) > 1}
    assert not repeated, repeated


def test_the_site_searches_from_disk():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    plugins = config[config.index("plugins:"):config.index("\nhooks:")]
    assert re.search(r"^  - offline\b", plugins, flags=re.M)
    assert "use_directory_urls: false" in config


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_docs_keeps_an_older_venv(tmp_path):
    """A clone whose venv predates pyproject.toml: `make docs` neither rebuilds the venv nor
    reinstalls the package (dry run: the commands make would run)."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    stamp = tmp_path / ".venv" / ".tokengeo-installed"
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    stamp.touch()
    import os
    import time

    old = time.time() - 3600
    os.utime(stamp, (old, old))
    commands = subprocess.run(["make", "-n", "docs"], cwd=tmp_path, capture_output=True,
                              text=True, check=True).stdout
    assert "mkdocs build --strict" in commands
    assert "-m venv" not in commands and "-e '." not in commands and "-e ." not in commands
