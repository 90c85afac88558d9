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
        raise ConfigError(f"--report {str(root)!r} has no report.md; give the --out folder of a "
                          "finished `tokengeo reproduce` run")
    try:
        text = report.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{report} cannot be read ({exc})") from None
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
    out = [{"title": s["title"], "html": f"<h2>{html.escape(s['title'])}</h2>"
            + markdown_html(s["lines"], root)}
           for s in sections if any(x.strip() for x in s["lines"])]
    return {"kind": "run", "title": title, "source": str(root), "sections": out,
            "report": "report.html" if (root / "report.html").is_file() else ""}


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    return ITALIC.sub(r"<i>\1</i>", BOLD.sub(r"<b>\1</b>", out))


def _figure(name: str, target: str, root: Path) -> str:
    path = (root / target).resolve()
    figures = (root / "figures").resolve()
    if not (path.is_relative_to(figures) and path.suffix.lower() == ".png" and path.is_file()):
        return f"<p class='muted'>Figure {html.escape(name)}: {html.escape(target)} is not a " \
               "PNG inside the run's figures/ folder; not shown.</p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(name)} · <a download='{html.escape(path.name)}' "
            f"href='data:image/png;base64,{data}'>PNG</a></figcaption></figure>")


def markdown_html(lines: list[str], root: Path) -> str:
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
            parts.append(_figure(m.group(1), m.group(2), root))
        elif line.startswith("- "):
            parts.append(f"<li>{_inline(line[2:])}</li>")
        elif line.startswith("  ") and line.strip():
            parts.append(f"<div class='muted' style='margin-left:1.5em'>{_inline(line.strip())}"
                         "</div>")
        elif line.strip():
            parts.append(f"<p>{_inline(line)}</p>")
        k += 1
    return "\n".join(parts)
