"""The reproduction report: tallies and a summary table of verdicts, then one section per
paper; ``report.md``, ``report.html`` and ``report.json`` are written from the same objects
(the blocks of :func:`document`, and :func:`tokengeo.experiments.summary.report_json`).

``report.html`` is self-contained (figures embedded as base64 PNG, inline CSS, no
scripts, nothing fetched), so it opens offline; ``report.md`` links the PNG files.
Only PNG files whose resolved path lies inside the output folder's own ``figures/`` are
embedded or linked: a figure path read from a cell file is not trusted to name anything else
(``/etc/hostname``, ``../x.png``, a symbolic link out of the folder).
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

from tokengeo.experiments.summary import (  # noqa: F401  (re-exported: the report's API)
    POWER_HEADER,
    SUMMARY_HEADER,
    Referee,
    SuiteOutput,
    deciding_lines,
    figure_error,
    power_rows,
    report_json,
    source_commit,
    summary_rows,
    tally,
    tally_tables,
)
from tokengeo.io import write_json, write_text

TEXT_WIDTHS = (12, 10, 44, 22, 30, 14, 10)


def text_table(header: list[str], rows: list[list[str]], widths=TEXT_WIDTHS) -> str:
    def cut(s: str, w: int) -> str:
        return s if len(s) <= w else s[: w - 1] + "…"

    lines = [" ".join(cut(h, w).ljust(w) for h, w in zip(header, widths, strict=False))]
    lines.append(" ".join("-" * w for w in widths))
    for r in rows:
        lines.append(" ".join(cut(c, w).ljust(w) for c, w in zip(r, widths, strict=False)))
    return "\n".join(lines)


# ---------------------------------------------------------------------- blocks
@dataclass(frozen=True)
class Block:
    """One piece of the report: ``kind`` in h1 h2 h3 p em rule table figure; ``text`` (or
    the caption); ``header`` and ``rows`` for a table; ``path`` for a figure."""

    kind: str
    text: str = ""
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    path: Path | None = None


def _table(caption: str, header, rows) -> Block:
    return Block("table", caption, tuple(header), tuple(tuple(r) for r in rows))


def _claim_blocks(c) -> list[Block]:
    kind = f"{c.kind}, proxy: {c.proxy}" if c.proxy else c.kind
    verdicts = f"**{c.verdict}**"
    if c.is_family and c.verdict_raw != c.verdict:
        verdicts += f" (unadjusted: {c.verdict_raw})"
    if c.vs_paper:
        verdicts += f"; against the paper's effect {c.paper_effect_text()}: {c.vs_paper}"
    out = [Block("h3", c.text),
           Block("p", f"[{kind}] {c.source}. Paper: {c.paper_value}. Measured "
                      f"({c.quantity}): {c.measured_text()}. {verdicts}."
                      + (f" {c.detail}" if c.detail else ""))]
    if c.is_family:
        rows = member_rows(c)
        out.append(_table("members", ["member", "measured", "verdict", "Holm", "vs paper"],
                          rows))
    out.append(Block("rule", f"Rule: {c.rule}"))
    return out


def member_rows(c, parent: str = "") -> list[list[str]]:
    """The members' table of a family: one row per member, a nested family's members
    after it labelled ``parent › child`` (their Holm column within their own family)."""
    rows = []
    for m, h in zip(c.members, c.members_holm(), strict=True):
        label = f"{parent} › {m.label}" if parent else m.label
        rows.append([label, m.measured_text() if not m.is_family
                     else f"{m.rule_of_family} of {len(m.members)}: {m.verdict_raw} unadjusted",
                     m.verdict, h, m.vs_paper or ""])
        if m.is_family:
            rows += member_rows(m, label)
    return rows


def _referee_blocks(s: SuiteOutput) -> list[Block]:
    out = []
    if s.referee is not None:
        out += [Block("p", f"Question: {s.referee.question}"),
                Block("p", f"What this run can say: {s.referee.can_say}")]
        if s.referee.gap:
            out.append(_table("settings: the paper's and ours", ["setting", "paper", "ours"],
                              s.referee.gap))
    lines = deciding_lines(s)
    if lines:
        out.append(Block("p", "What would decide the undecided claims: " + " ".join(lines)))
    return out


def document(suites: list[SuiteOutput], title: str, preamble: list[str]) -> list[Block]:
    """Every block of the report, in order."""
    blocks = [Block("h1", title), *(Block("p", p) for p in preamble), Block("h2", "Tally")]
    blocks += [_table(cap, h, r) for cap, h, r in tally_tables(tally(suites))]
    blocks += [Block("h2", "Summary"), _table("", SUMMARY_HEADER, summary_rows(suites))]
    rows = power_rows(suites)
    if rows:
        blocks += [Block("h2", "Power of the undecided claims"),
                   Block("p", "For each inconclusive paper or stand-in claim: the smallest "
                              "effect (distance from the claim's boundary) this run's spread "
                              "detects with 80% power, and the seeds that would detect the "
                              "paper's effect with 80% power (the observed effect where the "
                              "paper gives no number or the data already exclude it)."),
                   _table("", POWER_HEADER, rows)]
    for s in suites:
        blocks += [Block("h2", s.title, path=None), Block("em", s.paper),
                   *_referee_blocks(s)]
        for c in s.claims:
            blocks += _claim_blocks(c)
        blocks += [_table(cap, h, r) for cap, h, r in s.tables]
        blocks += [Block("p", n) for n in s.notes]
        blocks += [Block("figure", path=Path(f)) for f in s.figures]
    return blocks


# ---------------------------------------------------------------------- HTML
CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px;width:100%}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0} td.ok{background:#d9f2d9} td.bad{background:#f6d5d5}
td.meh{background:#fff3cd} td.skip{background:#e8e8e8;color:#555}
img{max-width:100%;border:1px solid #ddd;margin:0.5em 0} .rule{color:#555;font-size:13px}
"""


def _verdict_class(cell: str) -> str:
    if cell == "reproduced":
        return "ok"
    if cell in ("not reproduced", "contradicted at the paper's setting"):
        return "bad"
    if cell in ("inconclusive", "no change"):
        return "meh"
    if cell.startswith(("not run", "not testable")):
        return "skip"
    return ""


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


def _figure_view(fig: Path, out: Path) -> dict:
    """A figure block for the template: the PNG as base64, or why it is not embedded."""
    problem = figure_problem(fig, out)
    data = "" if problem else base64.b64encode(fig.resolve().read_bytes()).decode()
    return {"name": fig.stem, "path": str(fig), "problem": problem, "data": data}


def _bold_parts(text: str) -> list[tuple[bool, str]]:
    """``**bold**`` spans (the only markup blocks carry) as (bold, text) pairs."""
    return [(i % 2 == 1, part) for i, part in enumerate(text.split("**"))]


def _html_view(b: Block, out: Path) -> dict:
    """What the template needs of one block (its texts are escaped by the template)."""
    view = {"kind": b.kind, "text": b.text}
    if b.kind == "table":
        view.update(header=b.header, rows=[[{"text": c, "klass": _verdict_class(c)} for c in r]
                                           for r in b.rows])
    elif b.kind == "figure":
        view.update(_figure_view(b.path, out))
    elif b.kind not in ("h1", "h2", "h3", "em", "rule"):
        view["parts"] = _bold_parts(b.text)
    return view


def render_blocks_html(blocks: list[Block], title: str, out: Path) -> str:
    """``blocks`` as the self-contained page, through the Jinja2 template
    ``templates/report.html.j2`` (autoescaped); figures embedded only from ``out/figures/``."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("tokengeo.experiments", "templates"),
                             autoescape=True, keep_trailing_newline=False)
    page = env.get_template("report.html.j2")
    return page.render(title=title, css=CSS, blocks=[_html_view(b, out) for b in blocks])


def render_html(suites: list[SuiteOutput], title: str, preamble: list[str], out: Path) -> str:
    """The self-contained HTML report from the blocks of :func:`document` (the Markdown's)."""
    return render_blocks_html(document(suites, title, preamble), title, out)


# ---------------------------------------------------------------------- Markdown
def _md_table(b: Block) -> list[str]:
    esc = [[c.replace("|", "\\|") for c in r] for r in b.rows]
    out = [f"**{b.text}**", ""] if b.text else []
    out += ["| " + " | ".join(b.header) + " |", "|" + "---|" * len(b.header)]
    return out + ["| " + " | ".join(r) + " |" for r in esc]


def _md_figure(fig: Path, out: Path) -> str:
    """A relative link to the PNG, or a line saying why it is not linked."""
    problem = figure_problem(fig, out)
    if problem is not None:
        return f"Figure {fig.stem}: {fig} {problem}."
    return f"![{fig.stem}]({Path(os.path.relpath(fig.resolve(), Path(out).resolve())).as_posix()})"


def _md_block(b: Block, out: Path) -> list[str]:
    if b.kind in ("h1", "h2", "h3"):
        return ["#" * int(b.kind[1]) + " " + b.text, ""]
    if b.kind == "em":
        return [f"*{b.text}*", ""]
    if b.kind == "table":
        return [*_md_table(b), ""]
    if b.kind == "figure":
        return [_md_figure(b.path, out)]
    return [b.text, ""]


def render_markdown(suites: list[SuiteOutput], title: str, preamble: list[str], out: Path) -> str:
    return "\n".join(line for b in document(suites, title, preamble)
                     for line in _md_block(b, out))


def write_report(out: Path, suites: list[SuiteOutput], title: str, preamble: list[str],
                 mode: str = "quick", cells: dict | None = None) -> Path:
    """Write ``report.json``, ``report.md`` and ``report.html`` under ``out``; return the
    HTML path. ``cells``: the run's cell times per suite
    (:func:`tokengeo.experiments.cell_times.cell_times`), kept in report.json."""
    from tokengeo import __version__

    out = Path(out)
    write_json(out / "report.json",
               report_json(suites, mode, __version__, source_commit(), cells=cells), indent=1)
    write_text(out / "report.md", render_markdown(suites, title, preamble, out))
    path = out / "report.html"
    write_text(path, render_html(suites, title, preamble, out))
    return path
