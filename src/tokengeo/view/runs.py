"""A ``tokengeo reproduce`` folder for the explorer: each suite's claims, tables and figures.

Read from the folder's ``report.md`` (written with ``report.html`` from the same objects by
:mod:`tokengeo.experiments.report`): one section per ``## heading``; bullet claims, pipe
tables and ``![name](figures/...png)`` figures. Figures are embedded as base64 PNG, and only
those whose resolved path lies inside the folder's ``figures/`` (the report's own rule).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from tokengeo.errors import ConfigError

FIGURE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)\s*$")
BOLD = re.compile(r"\*\*(.+?)\*\*")
ITALIC = re.compile(r"(?<!\*)\*(?!\*)(.+?)(?<!\*)\*(?!\*)")


def read_run(folder: str | Path) -> dict:
    """The payload of a reproduce folder (``report.md`` and ``figures/``)."""
    root = Path(folder).expanduser()
    report = root / "report.md"
    if not report.is_file():
        raise ConfigError(f"--run {str(root)!r} has no report.md; give the --out folder of a "
                          "finished `tokengeo reproduce` run")
    from tokengeo.io import read_text

    text = read_text(report, str(report), limit=REPORT_LIMIT)  # a FIFO is refused, not read
    lines = text.splitlines()
    title = lines[0].lstrip("# ").strip() if lines and lines[0].startswith("# ") else "report"
    sections, current = [], {"title": "Overview", "lines": []}
    for line in lines[1:]:
        if line.startswith("## "):
            sections.append(current)
            current = {"title": line[3:].strip(), "lines": []}
        else:
            current["lines"].append(line)
    sections.append(current)
    budget = _Figures(root)
    out = [{"title": s["title"], "html": f"<h2>{html.escape(s['title'])}</h2>"
            + markdown_html(s["lines"], root, budget)}
           for s in sections if any(x.strip() for x in s["lines"])]
    return {"kind": "run", "title": title, "source": str(root), "sections": out,
            "report": "report.html" if (root / "report.html").is_file() else ""}


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    return ITALIC.sub(r"<i>\1</i>", BOLD.sub(r"<b>\1</b>", out))


REPORT_LIMIT = 16 << 20  # report.md is a few kB
FIGURES_LIMIT = 64 << 20  # bytes of figures a page embeds in all (each figure once)


class _Figures:
    """The figures a page has embedded so far: each file once, all of them within
    :data:`FIGURES_LIMIT` (a report naming one large figure 200 times gives one copy)."""

    def __init__(self, root: Path) -> None:
        self.root, self.seen, self.spent = root, set(), 0

    def take(self, path: Path) -> str | None:
        """Why ``path`` is not embedded (None: embed it)."""
        if path in self.seen:
            return "is shown above"
        size = path.stat().st_size
        if self.spent + size > FIGURES_LIMIT:
            return f"would take the page past {FIGURES_LIMIT >> 20} MB of figures"
        self.seen.add(path)
        self.spent += size
        return None


def _figure(name: str, target: str, root: Path, budget: _Figures | None = None) -> str:
    from tokengeo.io import read_small

    path = (root / target).resolve()
    figures = (root / "figures").resolve()
    if not (path.is_relative_to(figures) and path.suffix.lower() == ".png" and path.is_file()):
        return f"<p class='muted'>Figure {html.escape(name)}: {html.escape(target)} is not a " \
               "PNG inside the run's figures/ folder; not shown.</p>"
    why = (budget or _Figures(root)).take(path)
    if why is not None:
        return f"<p class='muted'>Figure {html.escape(name)}: {html.escape(target)} {why}; " \
               "not embedded again.</p>"
    data = base64.b64encode(read_small(path, FIGURES_LIMIT)).decode("ascii")
    return (f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(name)} · <a download='{html.escape(path.name)}' "
            f"href='data:image/png;base64,{data}'>PNG</a></figcaption></figure>")


def markdown_html(lines: list[str], root: Path, budget: _Figures | None = None) -> str:
    """The subset of Markdown ``report.md`` uses: paragraphs, bullets, tables, figures."""
    parts: list[str] = []
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("|"):
            rows = []
            while k < len(lines) and lines[k].startswith("|"):
                rows.append([c.strip() for c in lines[k].strip().strip("|").split("|")])
                k += 1
            body = [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)]
            parts.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in rows[0])
                         + "</tr>" + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r)
                                             + "</tr>" for r in body) + "</table>")
            continue
        if (m := FIGURE.match(line)) is not None:
            parts.append(_figure(m.group(1), m.group(2), root, budget))
        elif line.startswith("- "):
            parts.append(f"<li>{_inline(line[2:])}</li>")
        elif line.startswith("  ") and line.strip():
            parts.append(f"<div class='muted' style='margin-left:1.5em'>{_inline(line.strip())}"
                         "</div>")
        elif line.strip():
            parts.append(f"<p>{_inline(line)}</p>")
        k += 1
    return "\n".join(parts)
