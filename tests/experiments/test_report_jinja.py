"""report.html through Jinja2 from the blocks report.md is written from (both rendered from
report.json): the same page as a hand-built renderer (kept here as the reference), texts
escaped, every block kind, figures only from inside the folder's figures/."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from tokengeo.experiments.report import render_html, render_markdown
from tokengeo.reporting.document import Block
from tokengeo.reporting.render import CSS, figure_problem
from tokengeo.reporting.render import html as render_blocks_html
from tokengeo.reporting.render import verdict_class as _verdict_class

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


# ---- the reference: the string-building renderer report.html used before Jinja2
def _ref_table(b: Block) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
    body = []
    for r in b.rows:
        tds = []
        for c in r:
            klass = _verdict_class(c)
            tds.append(f"<td{f' class={klass!r}' if klass else ''}>{html.escape(c)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    cap = f"<h4>{html.escape(b.text)}</h4>" if b.text else ""
    return f"{cap}<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _ref_figure(fig: str, out: Path) -> str:
    fig = Path(fig)
    name = html.escape(fig.stem)
    problem = figure_problem(fig, out)
    if problem is not None:
        return f"<p class='rule'>Figure {name}: {html.escape(str(fig))} {problem}.</p>"
    data = base64.b64encode((out / fig).resolve().read_bytes()).decode()
    return (f"<figure><img alt='{name}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{name}</figcaption></figure>")


def _ref_block(b: Block, out: Path) -> str:
    if b.kind in ("h1", "h2", "h3"):
        return f"<{b.kind}>{html.escape(b.text)}</{b.kind}>"
    if b.kind == "em":
        return f"<p><em>{html.escape(b.text)}</em></p>"
    if b.kind == "rule":
        return f"<p class='rule'>{html.escape(b.text)}</p>"
    if b.kind == "table":
        return _ref_table(b)
    if b.kind == "figure":
        return _ref_figure(b.path, out)
    parts = html.escape(b.text).split("**")
    return "<p>" + "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts)) + "</p>"


def reference_html(blocks: list[Block], title: str, out: Path) -> str:
    head = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{CSS}</style></head><body>")
    return head + "".join(_ref_block(b, out) for b in blocks) + "</body></html>"


def canonical(page: str) -> str:
    """Whitespace between tags dropped; Jinja2 escapes quotes as &#39; &#34;, html.escape as
    &#x27; &quot;."""
    return (re.sub(r">\s+<", "><", page).replace("&#39;", "&#x27;").replace("&#34;", "&quot;")
            .strip())


def every_kind(tmp_path: Path) -> list[Block]:
    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / "good.png").write_bytes(PNG)
    (figures / "fake.png").write_bytes(b"GIF89a not a png")
    (tmp_path / "outside.png").write_bytes(PNG)
    hostile = "<script>alert('x')</script> & \"quoted\""
    return [
        Block("h1", "Report <1>"), Block("p", "plain & **bold <b>** then **more**"),
        Block("h2", hostile), Block("h3", "a claim"), Block("em", "Zhang & Papyan, 2025"),
        Block("rule", "decided by: x < y"),
        Block("table", "caption <i>", ("claim", "verdict"),
              (("a", "reproduced"), ("b", "not reproduced"), ("c", "inconclusive"),
               ("d", "not run (no GPU)"), ("e", hostile))),
        Block("table", "", ("k",), (("1",),)),
        Block("figure", path="figures/good.png"), Block("figure", path="figures/fake.png"),
        Block("figure", path="outside.png"), Block("figure", path=str(figures / "gone.png")),
        Block("figure", path="/etc/hostname"), Block("figure", path="figures/../outside.png"),
        Block("p", hostile),
    ]


def test_jinja_page_equals_the_reference_for_every_block_kind(tmp_path):
    blocks = every_kind(tmp_path)
    got = render_blocks_html(blocks, "t <&>", tmp_path)
    assert canonical(got) == canonical(reference_html(blocks, "t <&>", tmp_path))
    assert "<script>" not in got and "&lt;script&gt;" in got  # autoescaped
    assert got.count("data:image/png;base64,") == 1  # only figures/good.png is embedded
    assert "not a PNG file: not embedded" in got and "not found" in got
    assert "figure outside the report folder" in got


def test_html_and_markdown_come_from_the_same_blocks(tmp_path):
    from tokengeo.experiments.claims import Claim
    from tokengeo.experiments.report import SuiteOutput, report_dict
    from tokengeo.experiments.stats import Region, mean_interval
    from tokengeo.reporting.document import document

    claim = Claim("demo", "Laplacian heads raise accuracy", "Zhang & Papyan, §5", "+0.9",
                  "accuracy difference", Region.above(0), measured=mean_interval([0.1, 0.2]))
    suite = SuiteOutput("demo", "Demo <suite>", "A paper", [claim],
                        tables=[("numbers", ["k", "acc"], [["0", "0.8"]])],
                        notes=["a **note**"])
    page = render_html([suite], "demo", ["preamble"], tmp_path)
    blocks = document(report_dict([suite], "demo", ["preamble"], tmp_path))
    assert canonical(page) == canonical(reference_html(blocks, "demo", tmp_path))
    md = render_markdown([suite], "demo", ["preamble"], tmp_path)
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            assert html.escape(b.text) in page and b.text in md
