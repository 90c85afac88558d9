"""A ``tokengeo reproduce`` folder for the explorer: each suite's claims, tables and figures.

Read from the folder's ``report.json`` (the machine-readable report, format
``tokengeo-report/2`` or the older ``/1``, written beside ``report.md`` and ``report.html``
from the same objects by :mod:`tokengeo.experiments.report`): an overview (the tally per paper
and per claim kind), then one section per suite with its claims (verdict, interval, detail),
its tables and the PNG figures of ``figures/<suite>/``. Only figures whose resolved path lies
inside the folder's ``figures/`` are embedded (base64), the report's own rule.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from tokengeo.errors import ConfigError

FORMATS = ("tokengeo-report/1", "tokengeo-report/2")
REPORT_LIMIT = 64 << 20  # report.json is a few MB at most
FIGURES_LIMIT = 64 << 20  # bytes of figures a page embeds in all


def read_report(root: Path) -> dict:
    """The parsed ``report.json`` of a reproduce folder, or one ConfigError naming why not."""
    path = root / "report.json"
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path} is not a regular file (a FIFO or a device is never read); "
                          "give the --out folder of a finished `tokengeo reproduce` run")
    if not path.is_file():
        raise ConfigError(f"--report {str(root)!r} has no report.json; give the --out folder "
                          "of a finished `tokengeo reproduce` run")
    from tokengeo.io import read_json

    # bounded (size, depth), never through a FIFO; NaN stands for a missing measurement
    report = read_json(path, dict, limit=REPORT_LIMIT, allow_nan=True)
    if report.get("format") not in FORMATS:
        raise ConfigError(f"{path} is not a tokengeo report (format {FORMATS[-1]!r} expected)")
    for key in ("claims", "tables"):
        if not isinstance(report.get(key), list):
            raise ConfigError(f"{path} has no list of {key}; rewrite it with `tokengeo "
                              "reproduce` (it resumes from the cached cells)")
    return report


def read_run(folder: str | Path) -> dict:
    """The payload of a reproduce folder (``report.json`` and ``figures/``)."""
    root = Path(folder).expanduser()
    report = read_report(root)
    suites = list(dict.fromkeys([c.get("suite", "") for c in report["claims"]]
                                + [t.get("suite", "") for t in report["tables"]]))
    sections = [{"title": "Overview", "html": "<h2>Overview</h2>" + _tally(report)}]
    for suite in suites:
        claims = [c for c in report["claims"] if c.get("suite") == suite]
        tables = [t for t in report["tables"] if t.get("suite") == suite]
        papers = ", ".join(dict.fromkeys(c.get("paper", "") for c in claims if c.get("paper")))
        title = f"{suite} — {papers}" if papers else suite
        body = ("<ul>" + "".join(_claim(c) for c in claims) + "</ul>" if claims else "")
        body += "".join(_table(t) for t in tables) + _figures(root, suite)
        sections.append({"title": title, "html": f"<h2>{html.escape(title)}</h2>" + body})
    commit = str(report.get("commit") or "")[:10]
    title = f"tokengeo reproduce --{report.get('mode', '?')}" + (f" ({commit})" if commit else "")
    return {"kind": "run", "title": title, "source": str(root), "sections": sections,
            "report": "report.html" if (root / "report.html").is_file() else ""}


def _tally(report: dict) -> str:
    tally = report.get("tally") or {}
    parts = []
    for what in ("papers", "kinds"):
        rows = tally.get(what) or {}
        if not rows:
            continue
        verdicts = list(dict.fromkeys(v for counts in rows.values() for v in counts))
        parts.append(_table({"caption": f"verdicts per {what[:-1]}",
                             "header": [what[:-1], *verdicts],
                             "rows": [[name, *(counts.get(v, 0) for v in verdicts)]
                                      for name, counts in rows.items()]}))
    return "".join(parts) or "<p class='muted'>The report has no tally.</p>"


def _claim(c: dict) -> str:
    verdict = c.get("verdict_holm") or c.get("verdict") or ""
    iv = c.get("interval") or {}
    interval = ""
    if isinstance(iv, dict) and iv.get("mean") is not None:
        lo, hi = iv.get("low"), iv.get("high")
        bounds = f" [{_num(lo)}, {_num(hi)}]" if lo is not None and hi is not None else ""
        interval = f" {html.escape(str(c.get('quantity', '')))}: {_num(iv['mean'])}{bounds}" \
                   f" (n={iv.get('n', '?')})"
    detail = c.get("not_run") or c.get("detail") or ""
    return (f"<li><b>{html.escape(verdict)}</b> — {html.escape(str(c.get('claim', '')))}"
            f" <i>({html.escape(str(c.get('kind', '')))})</i>{interval}"
            + (f"<div class='muted' style='margin-left:1.5em'>{html.escape(str(detail))}</div>"
               if detail else "") + "</li>")


def _num(x) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) else html.escape(str(x))


def _table(t: dict) -> str:
    header = "".join(f"<th>{html.escape(str(h))}</th>" for h in t.get("header", []))
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in t.get("rows", []))
    caption = html.escape(str(t.get("caption", "")))
    return f"<table><caption>{caption}</caption><tr>{header}</tr>{rows}</table>"


def _figures(root: Path, suite: str) -> str:
    figures = (root / "figures").resolve()
    folder = (root / "figures" / suite).resolve()
    if not folder.is_relative_to(figures) or not folder.is_dir():
        return ""
    budget = [FIGURES_LIMIT]
    return "".join(_figure(p, figures, budget) for p in sorted(folder.glob("*.png")))


def _figure(path: Path, figures: Path, budget: list[int]) -> str:
    """One embedded PNG; none past the page's :data:`FIGURES_LIMIT` (``budget``: bytes left)."""
    from tokengeo.io import read_small

    path = path.resolve()
    if not (path.is_relative_to(figures) and path.is_file()):
        return ""  # a link out of figures/ (or a FIFO) is not followed
    size = path.stat().st_size
    if size > budget[0]:
        return (f"<p class='muted'>Figure {html.escape(path.name)} would take the page past "
                f"{FIGURES_LIMIT >> 20} MB of figures; not embedded.</p>")
    budget[0] -= size
    data = base64.b64encode(read_small(path, FIGURES_LIMIT)).decode("ascii")
    name = html.escape(path.stem)
    return (f"<figure><img alt='{name}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{name} · <a download='{html.escape(path.name)}' "
            f"href='data:image/png;base64,{data}'>PNG</a></figcaption></figure>")
