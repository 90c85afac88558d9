"""What a run's suites found, as ``report.json``: the suites' outputs (claims, tables,
notes, figures, referee paragraphs) written as the dict :mod:`tokengeo.reporting` reads and
renders; nothing here renders text for a reader.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokengeo.errors import TokengeoError
from tokengeo.experiments.claims import Claim

JSON_FORMAT = "tokengeo-report/2"


UNRECORDED = "not recorded in tokengeo (see the paper)"  # a paper setting we do not cite


@dataclass
class Referee:
    """A paragraph a referee can read: the paper's question, what this run can say about
    it, and the settings gap (rows: setting, the paper's, ours)."""

    question: str
    can_say: str
    gap: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class SuiteOutput:
    name: str
    title: str
    paper: str
    claims: list[Claim]
    figures: list[Path] = field(default_factory=list)
    tables: list[tuple[str, list[str], list[list[str]]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    paper_key: str = ""  # short name of the paper the tally groups by
    referee: Referee | None = None

    @property
    def paper_name(self) -> str:
        return self.paper_key or self.paper

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


# ---------------------------------------------------------------------- tables
def _claim_dicts(suites: list[SuiteOutput]) -> list[dict]:
    return [c.to_dict(s.paper_name) for s in suites for c in s.claims]


def tally(suites: list[SuiteOutput]) -> dict:
    """Per paper: verdict counts of its ``paper`` and ``stand-in`` claims (the headline);
    per kind: every claim's counts; ``verified``: the construction claims
    (:func:`tokengeo.reporting.text.tally` of the claims as report.json holds them)."""
    from tokengeo.reporting.text import tally as count

    return count(_claim_dicts(suites), [s.paper_name for s in suites])


def power_rows(suites: list[SuiteOutput]) -> list[list[str]]:
    """The power table's rows (:func:`tokengeo.reporting.text.power_rows`)."""
    from tokengeo.reporting.text import power_rows as rows

    return rows(_claim_dicts(suites))


def _suite_json(s: SuiteOutput, out: Path | None) -> dict:
    """What report.json keeps of a suite besides its claims and tables."""
    def rel(f: Path) -> str:
        return Path(os.path.relpath(f, out)).as_posix() if out is not None else str(f)

    ref = s.referee
    return {"name": s.name, "title": s.title, "paper": s.paper,
            "question": ref.question if ref else None, "can_say": ref.can_say if ref else None,
            "gap": [list(g) for g in ref.gap] if ref else [], "notes": list(s.notes),
            "figures": [rel(Path(f)) for f in s.figures]}


# ---------------------------------------------------------------------- JSON
def report_json(suites: list[SuiteOutput], mode: str, version: str,
                commit: str | None, cells: dict | None = None, *, title: str = "",
                preamble: list[str] | None = None, out: Path | None = None,
                published: dict | None = None, run: dict | None = None) -> dict:
    """report.json (``report.schema.json``); ``run``: the run's wall time and peak
    memory over its segments (:mod:`tokengeo.experiments.run_record`); ``cells``: the cell
    times per suite, when the run knows them (:mod:`tokengeo.experiments.cell_times`);
    ``out``: the report's folder
    (figure paths are kept relative to it); ``published``: the published full run's
    verdicts (:func:`tokengeo.reporting.document.published_verdicts`)."""
    from tokengeo.reporting.text import POWER_HEADER
    from tokengeo.reporting.text import power_rows as rows

    claims = _claim_dicts(suites)
    tables = [{"suite": s.name, "caption": cap, "header": list(h), "rows": r}
              for s in suites for cap, h, r in s.tables]
    out_json = {
        "format": JSON_FORMAT, "tokengeo": version, "commit": commit, "mode": mode,
        "claims": claims, "tables": tables, "tally": tally(suites),
        "power": [dict(zip(POWER_HEADER, r, strict=True)) for r in rows(claims)],
        "title": title or "tokengeo reproduction report", "preamble": list(preamble or []),
        "suites": [_suite_json(s, out) for s in suites]}
    if cells is not None:
        out_json["cells"] = cells
    if published is not None:
        out_json["published"] = published
    if run is not None:
        out_json["run"] = run
    return _finite(out_json)


def _finite(obj):
    """``obj`` with NaN and ±inf written as null (JSON has neither)."""
    import math

    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def source_commit() -> str | None:
    """The git commit of the tokengeo source, when it runs from a checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
