"""The documentation site: its navigation, the code maps of the paper pages (every module,
test and benchmark they name exists), the published-results markers, and (slow) the strict
offline build itself."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAPERS = sorted((DOCS / "papers").glob("*.md"))


def nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    return re.findall(r":\s+([\w/.-]+\.md)\s*$", nav, flags=re.M)


def test_every_nav_page_exists_and_incoming_is_excluded():
    pages = nav_pages()
    assert len(pages) >= 15 and "index.md" in pages
    assert [p for p in pages if not (DOCS / p).is_file()] == []
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"exclude_docs: \|\n(  .*\n)*  incoming/", config)
    assert "font: false" in config and "strict: true" in config  # offline, strict


def code_map_files(page: Path) -> list[str]:
    """The ``.py`` files named in the page's code-map table."""
    text = page.read_text(encoding="utf-8")
    table = text[text.index("## Code map"):text.index("\n## ", text.index("## Code map") + 5)]
    return re.findall(r"`([\w/.-]+\.py)`", table)


def _exists(name: str, cell_dir: Path | None) -> bool:
    if "/" in name:
        return any((base / name).is_file() for base in (ROOT, ROOT / "src"))
    return cell_dir is not None and (cell_dir / name).is_file()


@pytest.mark.parametrize("page", PAPERS, ids=[p.stem for p in PAPERS])
def test_code_map_names_real_files(page):
    names = code_map_files(page)
    assert len(names) >= 5
    missing, last_dir = [], None
    for name in names:  # a bare name lives in the folder of the path before it
        if not _exists(name, last_dir):
            missing.append(name)
        if "/" in name:
            last_dir = next(((b / name).parent for b in (ROOT, ROOT / "src")
                             if (b / name).is_file()), None)
    assert missing == [], f"{page.name}: code map names missing files {missing}"
    assert any(n.startswith("tests/") for n in names)


@pytest.mark.parametrize("page", PAPERS, ids=[p.stem for p in PAPERS])
def test_paper_pages_show_their_suites_claims_generated_from_the_run(page):
    """Each paper page holds a generated ``claims:SUITE`` block per suite of the paper, and
    every suite it names is in the published report.json."""
    import json

    report = json.loads((DOCS / "results" / "report.json").read_text(encoding="utf-8"))
    suites = {c["suite"] for c in report["claims"]}
    text = page.read_text(encoding="utf-8")
    named = re.findall(r"<!-- tokengeo:begin claims:(\S+) -->", text)
    assert named and set(named) <= suites, set(named) - suites
    assert "published-results:" not in text  # the old hook showed report.md's old verdicts


def test_no_page_loads_anything_from_the_network():
    for page in DOCS.rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"!\[[^\]]*\]\(https?://", text), page
        assert "<script src=\"http" not in text, page


@pytest.mark.slow  # ~20 s on a loaded 2-core machine
def test_site_builds_strict_offline(tmp_path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists() and shutil.which("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    site = tmp_path / "site"
    res = subprocess.run([str(mkdocs if mkdocs.exists() else "mkdocs"), "build", "--strict",
                          "--site-dir", str(site)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-3000:]
    paper = (site / "papers" / "laplacian-heads.html").read_text(encoding="utf-8")
    assert "Claims and published results" in paper
    assert re.search(r'src="\.\./results/figures/laplacian-images/[\w-]+\.png"', paper)
    api = (site / "api.html").read_text(encoding="utf-8")
    assert "laplacianize" in api and "Zhang" in api  # a docstring made it into the page
    assert not (site / "incoming").exists()
    for html in site.rglob("*.html"):
        assert "fonts.googleapis.com" not in html.read_text(encoding="utf-8"), html
