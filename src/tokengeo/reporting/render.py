"""The report's blocks (:mod:`tokengeo.reporting.document`) as Markdown, as the
self-contained HTML page (Jinja2 template ``report.html.j2``, autoescaped: every text of a
report.json is escaped by the template engine, none is concatenated into markup), and as
the block views the explorer's run page builds its DOM from.

The figure policy, one for every renderer: a figure is shown only when its path, symbolic
links followed, is a PNG file inside the report folder's own ``figures/``; a page embeds at
most :data:`FIGURES_LIMIT` bytes of figures. A path read from report.json is not trusted to
name anything else (``/etc/hostname``, ``../x.png``, a link out of the folder).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from tokengeo.reporting import text as t
from tokengeo.reporting.document import Block

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OUTSIDE = "figure outside the report folder: not embedded"
FIGURES_LIMIT = 64 << 20  # bytes of figures one page embeds in all
CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px;width:100%}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0} td.ok{background:#d9f2d9} td.bad{background:#f6d5d5}
td.meh{background:#fff3cd} td.skip{background:#e8e8e8;color:#555}
img{max-width:100%;border:1px solid #ddd;margin:0.5em 0} .rule{color:#555;font-size:13px}
"""


# ---------------------------------------------------------------------- figures
def figure_problem(fig: Path, out: Path) -> str | None:
    """Why ``fig`` may not be shown in the report of ``out``, or None (see the module)."""
    try:
        real = (Path(out) / fig).resolve()
        inside = real.is_relative_to((Path(out) / "figures").resolve())
    except (OSError, RuntimeError, ValueError):  # a symbolic link loop, a NUL byte
        inside = False
    if not inside:
        return OUTSIDE
    if not real.is_file():
        return "not found"
    try:
        with open(real, "rb") as f:
            head = f.read(len(PNG_MAGIC))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    return None if head == PNG_MAGIC else "not a PNG file: not embedded"


def figure_view(fig: str, out: Path, budget: list[int]) -> dict:
    """A figure for a page: the PNG as base64, or why it is not embedded (``budget``: the
    bytes of figures the page may still embed)."""
    from tokengeo.errors import ConfigError
    from tokengeo.io import read_small

    path = Path(fig)
    problem = figure_problem(path, out)
    data = ""
    if problem is None:
        real = (Path(out) / path).resolve()
        try:
            raw = read_small(real, budget[0])
        except ConfigError:
            raw, problem = b"", f"past the page's {FIGURES_LIMIT >> 20} MB of figures: not embedded"
        budget[0] -= len(raw)
        data = base64.b64encode(raw).decode("ascii")
    return {"name": path.stem, "path": str(fig), "problem": problem, "data": data}


# ---------------------------------------------------------------------- views
def verdict_class(cell: str) -> str:
    """The colour class of a table cell that holds a verdict ("" for any other text)."""
    return {t.REPRODUCED: "ok", t.NOT_REPRODUCED: "bad", t.INCONCLUSIVE: "meh",
            t.NO_CHANGE: "meh", t.NOT_RUN: "skip", t.NOT_TESTABLE: "skip"}.get(
                t.bucket(cell), "")


def bold_parts(text: str) -> list[tuple[bool, str]]:
    """``**bold**`` spans (the only markup a paragraph carries) as (bold, text) pairs."""
    return [(i % 2 == 1, part) for i, part in enumerate(text.split("**"))]


def block_view(b: Block, out: Path, budget: list[int]) -> dict:
    """What a page needs of one block: plain strings, escaped by whatever shows them (the
    template's autoescape, the viewer's ``textContent``)."""
    view: dict = {"kind": b.kind, "text": b.text}
    if b.kind == "table":
        view.update(header=list(b.header), rows=[[{"text": c, "klass": verdict_class(c)}
                                                  for c in r] for r in b.rows])
    elif b.kind == "figure":
        view.update(figure_view(b.path, out, budget))
    elif b.kind not in ("h1", "h2", "h3", "em", "rule"):
        view["parts"] = bold_parts(b.text)
    return view


def html(blocks: list[Block], title: str, out: Path) -> str:
    """``blocks`` as the self-contained page (no scripts, nothing fetched)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("tokengeo.experiments", "templates"),
                             autoescape=True, keep_trailing_newline=False)
    budget = [FIGURES_LIMIT]
    return env.get_template("report.html.j2").render(
        title=title, css=CSS, blocks=[block_view(b, out, budget) for b in blocks])


# ---------------------------------------------------------------------- Markdown
def _md_figure(fig: str, out: Path) -> str:
    path = Path(fig)
    problem = figure_problem(path, out)
    if problem is not None:
        return f"Figure {path.stem}: {fig} {problem}."
    rel = os.path.relpath((Path(out) / path).resolve(), Path(out).resolve())
    return f"![{path.stem}]({Path(rel).as_posix()})"


def _md_block(b: Block, out: Path) -> list[str]:
    if b.kind in ("h1", "h2", "h3"):
        return ["#" * int(b.kind[1]) + " " + b.text, ""]
    if b.kind == "em":
        return [f"*{b.text}*", ""]
    if b.kind == "table":
        caption = [f"**{b.text}**", ""] if b.text else []
        return [*caption, t.md_table(list(b.header), [list(r) for r in b.rows]), ""]
    if b.kind == "figure":
        return [_md_figure(b.path, out)]
    return [b.text, ""]


def markdown(blocks: list[Block], out: Path) -> str:
    return "\n".join(line for b in blocks for line in _md_block(b, out))
