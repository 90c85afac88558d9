"""What the report says, as data: the suites' outputs, the tally per paper and kind, the
power table, the referee paragraphs, and ``report.json``. Markdown and HTML
(:mod:`tokengeo.experiments.report`) are both rendered from :func:`document`'s blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokengeo.errors import TokengeoError
from tokengeo.experiments.claims import CLAIM_KINDS, TALLIED_KINDS, Claim
from tokengeo.experiments.stats import (
    CONTRADICTED,
    INCONCLUSIVE,
    NO_CHANGE,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    REPRODUCED,
)

JSON_FORMAT = "tokengeo-report/2"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, CONTRADICTED, INCONCLUSIVE, NO_CHANGE, "not run",
            NOT_TESTABLE)


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


def _bucket(verdict: str) -> str:
    if verdict.startswith(NOT_TESTABLE):
        return NOT_TESTABLE
    return "not run" if verdict.startswith("not run") else verdict


# ---------------------------------------------------------------------- tables
SUMMARY_HEADER = ["suite", "kind", "claim", "paper", "tokengeo (mean [95% interval])",
                  "verdict", "vs paper"]


def summary_rows(suites: list[SuiteOutput]) -> list[list[str]]:
    rows = []
    for s in suites:
        for c in s.claims:
            if c.kind == "construction":
                continue  # listed under "verified"
            rows.append([s.name, c.kind, c.text, c.paper_value, c.measured_text(), c.verdict,
                         c.vs_paper or ""])
    return rows


def tally(suites: list[SuiteOutput]) -> dict:
    """Per paper: verdict counts of its ``paper`` and ``stand-in`` claims (the headline);
    per kind: the other claims' counts; ``verified``: the construction claims."""
    papers: dict[str, dict[str, int]] = {}
    kinds: dict[str, dict[str, int]] = {k: dict.fromkeys(VERDICTS, 0) for k in CLAIM_KINDS}
    verified = []
    for s in suites:
        head = papers.setdefault(s.paper_name, dict.fromkeys(VERDICTS, 0))
        for c in s.claims:
            v = _bucket(c.verdict)
            kinds[c.kind][v] += 1
            if c.kind in TALLIED_KINDS:
                head[v] += 1
            elif c.kind == "construction":
                verified.append({"suite": s.name, "claim": c.text, "verdict": c.verdict})
    return {"papers": papers, "kinds": kinds, "verified": verified}


TALLY_HEADER = ["paper (paper and stand-in claims)", *VERDICTS]
KIND_HEADER = ["kind (counted apart)", *VERDICTS]


def tally_tables(t: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    heads = [[p, *(str(n[v]) for v in VERDICTS)] for p, n in t["papers"].items()]
    others = [[k, *(str(n[v]) for v in VERDICTS)] for k, n in t["kinds"].items()
              if k not in TALLIED_KINDS and k != "construction" and sum(n.values())]
    out = [("Tally per paper: only claims the paper makes (as stated, or through a named "
            "stand-in)", TALLY_HEADER, heads)]
    if others:
        out.append(("Other claims, counted apart (sanity checks, tokengeo's own questions)",
                    KIND_HEADER, others))
    if t["verified"]:
        out.append(("Verified (holds by construction or is pinned by a unit test; not "
                    "tallied)", ["suite", "claim", "check"],
                    [[v["suite"], v["claim"], v["verdict"]] for v in t["verified"]]))
    return out


POWER_HEADER = ["suite", "claim", "paper's effect", "measured", "MDE at 80% power",
                "seeds for 80% power"]


def _undecided(suites: list[SuiteOutput]) -> list[tuple[str, Claim]]:
    """Inconclusive paper / stand-in claims (family members one by one)."""
    out = []
    for s in suites:
        for c in s.claims:
            if c.kind not in TALLIED_KINDS:
                continue
            for m in ([d for d in c.descendants() if not d.is_family] or [c]):
                if m.verdict == INCONCLUSIVE:
                    out.append((s.name, m))
    return out


def _power_text(c: Claim) -> tuple[str, str]:
    mde = c.mde_80
    seeds = c.seeds_for_80
    mde_s = "—" if mde is None else (f"{mde:.3g} (log)" if c.measured.scale == "log"
                                    else f"{mde:.3g}")
    basis = {"paper": "the paper's effect", "observed": "the observed effect"}.get(
        c.power_basis or "", "")
    upper = c.seeds_for_80_upper
    up_s = (f"; {upper:,} at the spread's upper 95% bound" if upper and upper != seeds
            else "; beyond reach at the spread's upper 95% bound" if seeds and not upper
            else "")
    holm = f", Holm-adjusted over {c.holm_size}" if c.holm_size > 1 else ""
    seeds_s = "—" if seeds is None else f"{seeds:,} seeds ({basis}{holm}){up_s}"
    if c.power_basis == "no effect":
        seeds_s = "no effect to detect (the observed effect is within one standard error)"
    elif seeds is None and c.power_basis is not None:
        seeds_s = "beyond reach (> 100,000)"
    return mde_s, seeds_s


def _name(c: Claim) -> str:
    return f"{c.text} [{c.label}]" if c.label and c.label not in c.text else c.text


def power_rows(suites: list[SuiteOutput]) -> list[list[str]]:
    rows = []
    for suite, c in _undecided(suites):
        mde_s, seeds_s = _power_text(c)
        text = _name(c)
        rows.append([suite, text, c.paper_effect_text() or "—", c.measured_text(), mde_s,
                     seeds_s])
    return rows


def deciding_lines(s: SuiteOutput) -> list[str]:
    """For each undecided claim of ``s``, what would decide it (from the power numbers)."""
    lines = []
    for _, c in _undecided([s]):
        mde_s, seeds_s = _power_text(c)
        name = _name(c)
        if c.power_basis == "no effect":
            lines.append(f"{name}: the smallest effect this run detects (80% power) is "
                         f"{mde_s}; {seeds_s}.")
        elif c.seeds_for_80:
            lines.append(f"{name}: the smallest effect this run detects (80% power) is "
                         f"{mde_s}; {seeds_s} would decide it.")
        else:
            lines.append(f"{name}: the smallest effect this run detects (80% power) is "
                         f"{mde_s}; no seed count decides it from this spread.")
    return lines


# ---------------------------------------------------------------------- JSON
def report_json(suites: list[SuiteOutput], mode: str, version: str,
                commit: str | None, cells: dict | None = None) -> dict:
    """report.json (``report.schema.json``); ``cells``: the cell times per suite, when the
    run knows them (:mod:`tokengeo.experiments.cell_times`)."""
    claims = [c.to_dict(s.paper_name) for s in suites for c in s.claims]
    tables = [{"suite": s.name, "caption": cap, "header": list(h), "rows": r}
              for s in suites for cap, h, r in s.tables]
    out = {
        "format": JSON_FORMAT, "tokengeo": version, "commit": commit, "mode": mode,
        "claims": claims, "tables": tables, "tally": tally(suites),
        "power": [dict(zip(POWER_HEADER, r, strict=True)) for r in power_rows(suites)]}
    if cells is not None:
        out["cells"] = cells
    return _finite(out)


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
