"""The reproduction report: a summary table of verdicts, then one section per paper.

``report.html`` is self-contained (figures embedded as base64 PNG, inline CSS, no
scripts, nothing fetched), so it opens offline; ``report.md`` links the PNG files.
Only PNG files whose resolved path lies inside the output folder's own ``figures/`` are
embedded or linked: a figure path read from a cell file is not trusted to name anything else
(``/etc/hostname``, ``../x.png``, a symbolic link out of the folder).
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokengeo.errors import TokengeoError
from tokengeo.experiments.claims import Claim
from tokengeo.io import write_text


@dataclass
class SuiteOutput:
    name: str
    title: str
    paper: str
    claims: list[Claim]
    figures: list[Path] = field(default_factory=list)
    tables: list[tuple[str, list[str], list[list[str]]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add_figure(self, make: Callable[..., Path | None], *args, **kwargs) -> None:
        """Append the figure ``make(*args, **kwargs)`` draws; if drawing fails (matplotlib
        missing, a plotting error) the numbers stay and a note says why there is no figure."""
        try:
            path = make(*args, **kwargs)
        except Exception as exc:  # a figure never costs the report its numbers
            self.notes.append(f"Figure not drawn: {figure_error(exc)}")
            return
        if path is not None:
            self.figures.append(Path(path))


def figure_error(exc: BaseException) -> str:
    """One line saying why a figure was not drawn."""
    if isinstance(exc, TokengeoError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


SUMMARY_HEADER = ["suite", "claim", "paper", "tokengeo (mean [95% interval])", "verdict"]


def summary_rows(suites: list[SuiteOutput]) -> list[list[str]]:
    rows = []
    for s in suites:
        for c in s.claims:
            measured = c.measured.fmt() if c.measured is not None else "—"
            rows.append([s.name, c.text, c.paper_value, measured, c.verdict])
    return rows


def text_table(header: list[str], rows: list[list[str]], widths=(12, 48, 26, 34, 16)) -> str:
    def cut(s: str, w: int) -> str:
        return s if len(s) <= w else s[: w - 1] + "…"

    lines = [" ".join(cut(h, w).ljust(w) for h, w in zip(header, widths, strict=False))]
    lines.append(" ".join("-" * w for w in widths))
    for r in rows:
        lines.append(" ".join(cut(c, w).ljust(w) for c, w in zip(r, widths, strict=False)))
    return "\n".join(lines)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = [[c.replace("|", "\\|") for c in r] for r in rows]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(out)


def _html_table(header: list[str], rows: list[list[str]], cls: str = "") -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for r in rows:
        tds = []
        for c in r:
            klass = _verdict_class(c)
            tds.append(f"<td{f' class={klass!r}' if klass else ''}>{html.escape(c)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    rows_html = "".join(body)
    return f"<table class='{cls}'><thead><tr>{th}</tr></thead><tbody>{rows_html}</tbody></table>"


def _verdict_class(cell: str) -> str:
    if cell == "reproduced":
        return "ok"
    if cell == "not reproduced":
        return "bad"
    if cell == "inconclusive":
        return "meh"
    if cell.startswith("not run"):
        return "skip"
    return ""


CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px;width:100%}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0} td.ok{background:#d9f2d9} td.bad{background:#f6d5d5}
td.meh{background:#fff3cd} td.skip{background:#e8e8e8;color:#555}
img{max-width:100%;border:1px solid #ddd;margin:0.5em 0} .rule{color:#555;font-size:13px}
"""


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OUTSIDE = "figure outside the report folder: not embedded"


def figure_problem(fig: Path, out: Path) -> str | None:
    """Why ``fig`` may not be shown in the report of ``out``, or None.

    It must resolve (symbolic links followed) to a PNG file inside ``out/figures/``."""
    try:
        real = Path(fig).resolve()
        inside = real.is_relative_to((Path(out) / "figures").resolve())
    except (OSError, RuntimeError):  # a symbolic link loop
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


def _html_figure(fig: Path, out: Path) -> str:
    """The PNG embedded as base64, or a line saying why it is not."""
    name = html.escape(fig.stem)
    problem = figure_problem(fig, out)
    if problem is not None:
        return f"<p class='rule'>Figure {name}: {html.escape(str(fig))} {problem}.</p>"
    data = base64.b64encode(fig.resolve().read_bytes()).decode()
    return (f"<figure><img alt='{name}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{name}</figcaption></figure>")


def render_html(suites: list[SuiteOutput], title: str, preamble: list[str], out: Path) -> str:
    """The self-contained HTML report; figures are embedded only from ``out/figures/``."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title><style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    parts += [f"<p>{html.escape(p)}</p>" for p in preamble]
    parts.append("<h2>Summary</h2>")
    parts.append(_html_table(SUMMARY_HEADER, summary_rows(suites), "summary"))
    for s in suites:
        parts.append(f"<h2 id='{s.name}'>{html.escape(s.title)}</h2>"
                     f"<p><em>{html.escape(s.paper)}</em></p>")
        for c in s.claims:
            parts.append(f"<h3>{html.escape(c.text)}</h3><p>{html.escape(c.source)}. Paper: "
                         f"{html.escape(c.paper_value)}. Measured ({html.escape(c.quantity)}): "
                         f"{html.escape(c.measured.fmt() if c.measured else '—')}. "
                         f"<b>{html.escape(c.verdict)}</b>.</p>")
            if c.detail:
                parts.append(f"<p>{html.escape(c.detail)}</p>")
            parts.append(f"<p class='rule'>Rule: {html.escape(c.rule)}</p>")
        for caption, header, rows in s.tables:
            parts.append(f"<h4>{html.escape(caption)}</h4>{_html_table(header, rows)}")
        for note in s.notes:
            parts.append(f"<p>{html.escape(note)}</p>")
        for fig in s.figures:
            parts.append(_html_figure(Path(fig), out))
    parts.append("</body></html>")
    return "".join(parts)


def render_markdown(suites: list[SuiteOutput], title: str, preamble: list[str], out: Path) -> str:
    md = [f"# {title}", "", *preamble, "", "## Summary", "",
          _md_table(SUMMARY_HEADER, summary_rows(suites)), ""]
    for s in suites:
        md += [f"## {s.title}", "", f"*{s.paper}*", ""]
        for c in s.claims:
            md += [f"- **{c.text}** ({c.source}). Paper: {c.paper_value}. Measured "
                   f"({c.quantity}): {c.measured.fmt() if c.measured else '—'}. "
                   f"**{c.verdict}**. {c.detail}", f"  Rule: {c.rule}"]
        for caption, header, rows in s.tables:
            md += ["", f"**{caption}**", "", _md_table(header, rows)]
        md += ["", *s.notes, ""]
        md += [_md_figure(Path(f), out) for f in s.figures]
        md.append("")
    return "\n".join(md)


def _md_figure(fig: Path, out: Path) -> str:
    """A relative link to the PNG, or a line saying why it is not linked."""
    problem = figure_problem(fig, out)
    if problem is not None:
        return f"Figure {fig.stem}: {fig} {problem}."
    return f"![{fig.stem}]({Path(os.path.relpath(fig.resolve(), Path(out).resolve())).as_posix()})"


def write_report(out: Path, suites: list[SuiteOutput], title: str, preamble: list[str]) -> Path:
    """Write ``report.html`` and ``report.md`` under ``out``; return the HTML path."""
    out = Path(out)
    write_text(out / "report.md", render_markdown(suites, title, preamble, out))
    path = out / "report.html"
    write_text(path, render_html(suites, title, preamble, out))
    return path
