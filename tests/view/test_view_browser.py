"""``tokengeo view`` pages in a real headless Chromium (DevTools protocol over a pipe):
they load from disk with no network request and no console error, show the right panels,
decode the stored matrices to the model's values, react to hover and keys, and export valid
PNG and SVG files."""

from __future__ import annotations

import base64
import json
import shutil
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from helpers.browser import Page

import tokengeo
from tokengeo.cli import main
from tokengeo.view.heads import extract_heads
from tokengeo.view.page import write_page
from tokengeo.view.payloads import heads_payload

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="needs Debian's chromium (make test installs it as root; else apt-get install chromium)",
)
ROOT = Path(__file__).resolve().parents[2]
# 1,024 tokens must draw a head's panels within this (measured in the page, loaded machine)
RENDER_LIMIT_MS = 3000


def heads_page(tmp_path: Path, T: int, *, layers: int = 2, heads: int = 3, name="page.html",
               inline_limit: int | None = None):
    torch.manual_seed(0)
    model = tokengeo.create_model("gpt-tiny", vocab_size=40, block_size=T, n_layers=layers,
                                  n_heads=heads, d_model=8 * heads, n_laplacian=1).eval()
    ids = torch.randint(0, 40, (1, T), generator=torch.Generator().manual_seed(3))
    maps = extract_heads(model, ids, [f"w{i}" for i in range(T)], model_name="tiny")
    payload, chunks = heads_payload(maps, colour="linear")  # the values' bounds below: linear
    kwargs = {} if inline_limit is None else {"inline_limit": inline_limit}
    return write_page(tmp_path / name, payload, chunks, title="test", **kwargs), maps


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def check_clean(page: Page) -> None:
    assert page.errors == [], page.errors
    assert page.requests == [], page.requests


def test_heads_page_panels_values_hover_keys(tmp_path):
    html, maps = heads_page(tmp_path, 24)
    with Page(html, width=1400, height=1000) as page:
        page.wait_for("window.TG && TG.ready && TG.thumbs.length === 6")
        assert page.evaluate("document.querySelectorAll('.panel').length") == 2  # P, S
        assert page.evaluate("document.querySelectorAll('.thumb.laplacian').length") == 2
        # the page decodes the stored codes to the model's values (quantisation bound)
        for i, j in [(5, 2), (23, 0), (7, 7)]:
            p = page.evaluate(f"TG.value('P', {i}, {j})")
            s = page.evaluate(f"TG.value('S', {i}, {j})")
            assert abs(p - float(maps.P[0, 0, i, j])) <= float(maps.P[0, 0].max()) / 500
            assert abs(s - float(maps.S[0, 0, i, j])) <= float(maps.S[0, 0].abs().max()) / 250
        # keys: -> twice reaches head 2, the Laplacian one, with its I - P panel
        page.key("ArrowRight", key_code=39)
        page.key("ArrowRight", key_code=39)
        page.wait_for("document.body.dataset.ready === '0-2'")
        assert page.evaluate("document.querySelectorAll('.panel').length") == 3
        assert page.evaluate("Object.keys(TG.panels).join()") == "P,L,S"
        lp = page.evaluate("TG.value('L', 4, 4)"), page.evaluate("TG.value('L', 4, 1)")
        assert abs(lp[0] - (1 - float(maps.P[0, 2, 4, 4]))) < 1e-2
        assert abs(lp[1] + float(maps.P[0, 2, 4, 1])) < 1e-2
        page.key("ArrowDown", key_code=40)
        page.wait_for("document.body.dataset.ready === '1-2'")
        # hover a cell of P: the state and the highlighted pixels of its row change
        box = page.evaluate("(() => { const r = TG.panels.P.over.getBoundingClientRect();"
                            " return [r.left, r.top, TG.panels.P.M, TG.panels.P.margin]; })()")
        left, top, M, margin = box
        cell = M / 24
        row_px = (f"TG.panels.P.over.getContext('2d').getImageData({margin + 2}, "
                  f"{margin + (10.5) * cell}, 1, 1).data[3]")
        assert page.evaluate(row_px) == 0
        page.mouse_move(left + margin + 3.5 * cell, top + margin + 10.5 * cell)
        page.wait_for("TG.state.hover && TG.state.hover.i === 10")
        assert page.evaluate("[TG.state.hover.i, TG.state.hover.j]") == [10, 3]
        assert page.evaluate(row_px) > 0  # row 10 highlighted
        assert "top P of row 10" in page.evaluate("document.getElementById('info').textContent")
        # hovering a token in the strip highlights it and its row
        page.evaluate("TG.tokenSpans[4].dispatchEvent(new MouseEvent('mouseenter'))")
        assert page.evaluate("[TG.state.hover.i, TG.tokenSpans[4].classList.contains('hl')]") == [4, True]
        page.key("Escape")
        assert page.evaluate("TG.state.hover") is None
        check_clean(page)


def test_export_png_and_svg_at_publication_size(tmp_path):
    html, _ = heads_page(tmp_path, 24)
    with Page(html) as page:
        page.wait_for("window.TG && TG.ready")
        for kind in ("P", "S"):
            png = page.evaluate(f"TG.exportPanel('{kind}', 'png')")
            data = base64.b64decode(png["data"].split(",", 1)[1])
            assert png_size(data) == (png["width"], png["height"])
            assert png["width"] >= 1600 and png["name"].endswith(f"-{kind}.png")
            svg = page.evaluate(f"TG.exportPanel('{kind}', 'svg')")
            root = ET.fromstring(svg["data"])
            assert root.tag == "{http://www.w3.org/2000/svg}svg"
            assert int(root.get("width")) == svg["width"] >= 1600
            texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
            assert "w0" in texts and any("colour" in (t or "") for t in texts)
            image = next(root.iter("{http://www.w3.org/2000/svg}image"))
            assert png_size(base64.b64decode(image.get("href").split(",", 1)[1])) == (24, 24)
        check_clean(page)


def test_folder_mode_loads_heads_from_beside_the_page(tmp_path):
    html, maps = heads_page(tmp_path, 24, inline_limit=10)
    assert (tmp_path / "page_files" / "c-1-2.js").is_file()
    with Page(html) as page:
        page.wait_for("window.TG && TG.ready")
        page.evaluate("TG.select(1, 2)")
        page.wait_for("document.body.dataset.ready === '1-2'")
        p = page.evaluate("TG.value('P', 9, 3)")
        assert abs(p - float(maps.P[1, 2, 9, 3])) <= float(maps.P[1, 2].max()) / 500
        check_clean(page)


def test_run_page_shows_each_suite_with_its_figures(tmp_path):
    results = ROOT / "docs" / "results"
    if not (results / "report.json").is_file():
        pytest.skip("docs/results/report.json (the published run) is not in this checkout")
    out = tmp_path / "run.html"
    assert main(["view", "--report", str(results), "--out", str(out)]) == 0
    from tokengeo.reporting.document import document

    report = json.loads((results / "report.json").read_text(encoding="utf-8"))
    suites = list(dict.fromkeys([c["suite"] for c in report["claims"]]
                                + [t["suite"] for t in report["tables"]]))
    n_figures = sum(len(list((results / "figures" / s).glob("*.png"))) for s in suites)
    with Page(out) as page:
        page.wait_for("window.TG && TG.ready")
        sections = page.evaluate("document.querySelectorAll('section.suite').length")
        assert sections == len(suites) + 1  # the overview, then one per suite
        assert page.evaluate("document.querySelectorAll('section.suite img').length") == n_figures
        n_tables = sum(b.kind == "table" for b in document(report))  # report.md's tables
        assert page.evaluate("document.querySelectorAll('section.suite table').length") == n_tables
        assert page.evaluate("document.querySelectorAll('section.suite h3').length") == len(
            report["claims"])  # a heading per claim
        check_clean(page)


@pytest.mark.slow  # ~40 s: a flow run, its re-simulation and a page
def test_flow_page(tmp_path):
    flow = tmp_path / "flow"
    assert main(["flow", "--preset", "s2-ou", "--T", "1", "--dt", "0.05", "--n-paths", "2",
                 "--scaling-heads", "none", "--record-every", "2", "--no-figures", "--quiet",
                 "--out", str(flow)]) == 0
    out = tmp_path / "flow.html"
    assert main(["view", "--flow", str(flow / "flow.json"), "--out", str(out)]) == 0
    with Page(out) as page:
        page.wait_for("window.TG && TG.ready")
        assert page.evaluate("document.querySelectorAll('.panel').length") == 3  # sphere, E, G2
        page.key("ArrowRight", key_code=39)
        assert page.evaluate("TG.state.r") == 1
        for key in ("sphere", "E", "G2"):
            for fmt in ("png", "svg"):
                r = page.evaluate(f"TG.exportPanel('{key}', '{fmt}')")
                if fmt == "png":
                    assert png_size(base64.b64decode(r["data"].split(",", 1)[1]))[0] >= 1600
                else:
                    assert ET.fromstring(r["data"]).tag.endswith("svg")
        check_clean(page)


@pytest.mark.slow  # ~30 s: 1,024 tokens, and a 30 x 9 page
@pytest.mark.parametrize("T,layers,heads", [(1024, 2, 2), (256, 30, 9)])
def test_large_pages_render_in_time(tmp_path, T, layers, heads):
    html, _ = heads_page(tmp_path, T, layers=layers, heads=heads)
    with Page(html, width=1600, height=1100) as page:
        page.wait_for(f"window.TG && TG.ready && TG.thumbs.length === {layers * heads}")
        assert page.evaluate("TG.timings.render") < RENDER_LIMIT_MS
        page.evaluate(f"TG.select({layers - 1}, {heads - 1})")
        page.wait_for(f"document.body.dataset.ready === '{layers - 1}-{heads - 1}'")
        assert page.evaluate("TG.timings.render") < RENDER_LIMIT_MS
        assert page.evaluate("Object.keys(TG.panels).join()") == "P,L,S"
        check_clean(page)
