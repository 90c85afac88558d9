"""Write a run's report: ``report.json`` first (what the suites judged,
:func:`tokengeo.experiments.summary.report_json`), then ``report.md`` and ``report.html``
rendered FROM that file by :mod:`tokengeo.reporting`, the renderer of every report.

``report.html`` is self-contained (figures embedded as base64 PNG, inline CSS, no
scripts, nothing fetched), so it opens offline; ``report.md`` links the PNG files. Figures
follow :mod:`tokengeo.reporting.render`'s policy (only PNG files inside the folder's own
``figures/``). A quick run's report shows, beside each verdict, the verdict the published
full run (``docs/results/report.json`` of the source checkout) reached for the same
catalogue entry.
"""

from __future__ import annotations

from pathlib import Path

from tokengeo.experiments.summary import (  # noqa: F401  (re-exported: the report's API)
    Referee,
    SuiteOutput,
    figure_error,
    power_rows,
    report_json,
    source_commit,
    tally,
)
from tokengeo.io import write_json, write_text
from tokengeo.reporting.render import OUTSIDE, figure_problem  # noqa: F401

TEXT_WIDTHS = (12, 10, 44, 22, 30, 14, 10)
PUBLISHED = Path(__file__).resolve().parents[3] / "docs" / "results" / "report.json"


def text_table(header: list[str], rows: list[list[str]], widths=TEXT_WIDTHS) -> str:
    """A table for the terminal: columns cut to ``widths``."""
    def cut(s: str, w: int) -> str:
        return s if len(s) <= w else s[: w - 1] + "…"

    lines = [" ".join(cut(h, w).ljust(w) for h, w in zip(header, widths, strict=False))]
    lines.append(" ".join("-" * w for w in widths))
    for r in rows:
        lines.append(" ".join(cut(c, w).ljust(w) for c, w in zip(r, widths, strict=False)))
    return "\n".join(lines)


def published_run(mode: str, path: Path = PUBLISHED) -> tuple[dict | None, str | None]:
    """The published full run's verdicts for a quick run's report, and a line saying why
    they are not shown when its report.json cannot be read (none for other modes, or where
    the source checkout has no published report)."""
    from tokengeo.errors import ConfigError
    from tokengeo.reporting.document import published_verdicts
    from tokengeo.reporting.reader import read_report

    if mode != "quick" or not path.is_file():
        return None, None
    try:
        return published_verdicts(read_report(path)), None
    except ConfigError as exc:
        return None, f"The published full run's verdicts are not shown: {exc}"


def report_dict(suites: list[SuiteOutput], title: str, preamble: list[str], out: Path,
                mode: str = "quick", cells: dict | None = None,
                published: dict | None = None, run: dict | None = None) -> dict:
    """report.json of ``suites``, checked against the schema (a bug here is caught before
    anything is written)."""
    from tokengeo import __version__
    from tokengeo.reporting.reader import check_report

    data = report_json(suites, mode, __version__, source_commit(), cells=cells, title=title,
                       preamble=preamble, out=Path(out), published=published, run=run)
    return check_report(data, "the report.json being written")


def render_markdown(suites: list[SuiteOutput], title: str, preamble: list[str],
                    out: Path) -> str:
    from tokengeo.reporting.document import document
    from tokengeo.reporting.render import markdown

    return markdown(document(report_dict(suites, title, preamble, out)), Path(out))


def render_html(suites: list[SuiteOutput], title: str, preamble: list[str], out: Path) -> str:
    from tokengeo.reporting.document import document
    from tokengeo.reporting.render import html

    return html(document(report_dict(suites, title, preamble, out)), title, Path(out))


def write_report(out: Path, suites: list[SuiteOutput], title: str, preamble: list[str],
                 mode: str = "quick", cells: dict | None = None, run: dict | None = None
                 ) -> Path:
    """Write ``report.json`` under ``out``, then ``report.md`` and ``report.html`` rendered
    from it; return the HTML path. ``cells``: the run's cell times per suite
    (:func:`tokengeo.experiments.cell_times.cell_times`), kept in report.json; ``run``: its
    wall time and peak memory (:func:`tokengeo.experiments.run_record.run_object`)."""
    from tokengeo.reporting.document import document
    from tokengeo.reporting.reader import read_report
    from tokengeo.reporting.render import html, markdown

    out = Path(out)
    published, problem = published_run(mode)
    data = report_dict(suites, title, [*preamble, *([problem] if problem else [])], out, mode,
                       cells, published, run)
    write_json(out / "report.json", data, indent=1)
    data = read_report(out / "report.json")  # what is rendered is what was written
    blocks = document(data)
    write_text(out / "report.md", markdown(blocks, out))
    path = out / "report.html"
    write_text(path, html(blocks, data["title"], out))
    return path
