"""Docs generated from a run: every number and verdict of a run that the docs show sits in
a block rendered from that run's ``report.json``.

A block in a Markdown file is delimited by two HTML comments (invisible once rendered)::

    <!-- tokengeo:begin NAME -->
    ...rendered from report.json...
    <!-- tokengeo:end NAME -->

Names (:data:`RENDERERS`): ``run`` (mode, commit, claim count), ``tally`` (claims each paper
makes, per verdict), ``kinds`` (all claims per kind), ``claims:SUITE`` (the suite's claims:
paper's value, measurement, verdict, against the paper's effect), ``findings:SUITE`` (its
paper and stand-in claims that reached a verdict, one line each), ``compare:PATH`` (the
tally against an earlier run's report.json at PATH under the root, and every claim whose
verdict changed), ``cells`` (per suite: the cells, their core-hours, the longest cell and
the span they ran in, from the wall seconds stored with each cell),
``table:SUITE:CAPTION-START`` (a suite's tables by the start of their caption, hyphens for
spaces), ``catalogue`` (every claim of the four papers from the claims catalogue: its test,
its verdict in this run, the coverage per paper; docs/claims.md), ``smoothing:SUITE`` (the
smoothing-sign table of a Laplacian suite, and per column the blocks where the mean over
seeds is negative, the head kind smoothing there, or positive). :func:`write_docs`
re-renders every block under a folder; :func:`check_docs` names the first block that
differs. The prose around the blocks says nothing numeric about the run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

from tokengeo.errors import ConfigError
from tokengeo.experiments.catalogue.doc import render_catalogue

BEGIN = "<!-- tokengeo:begin {} -->"
END = "<!-- tokengeo:end {} -->"
BLOCK = re.compile(r"<!-- tokengeo:begin (?P<name>[^ ]+) -->\n(?P<body>.*?)"
                   r"<!-- tokengeo:end (?P=name) -->", re.S)
DOC_GLOBS = ("README.md", "docs/*.md", "docs/*/*.md")
CONTRADICTED_COLUMN = "contradicted at the paper's setting"
VERDICT_COLUMNS = ("reproduced", "not reproduced", CONTRADICTED_COLUMN, "inconclusive",
                   "no change", "not run", "not testable here")
TALLIED = ("paper", "stand-in")


# ---------------------------------------------------------------------- numbers
def _num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "∞"
    return f"{x:.{digits}g}".replace("-", "−")


def measured_text(iv: dict | None) -> str:
    """An interval of report.json as the report shows it."""
    if iv is None:
        return "—"
    log = iv.get("scale") == "log"

    def shown(x, open_side: str = "∞"):
        if x is None:
            return open_side
        return f"×{math.exp(x):.3g}" if log else _num(x)

    m = iv["method"]
    if m == "worst run":
        return f"{shown(iv['mean'])} (worst of {iv['n']} runs)"
    if m == "deterministic":
        return f"{shown(iv['mean'])} (deterministic)"
    if m == "exact" or iv["n"] < 2:
        return shown(iv["mean"]) + ("" if m == "exact" else " (n=1)")
    return (f"{shown(iv['mean'])} [{shown(iv['low'], '−∞')}, {shown(iv['high'])}] "
            f"(n={iv['n']})")


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(out + ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows])


def _verdict(c: dict) -> str:
    v = c["verdict"]
    return "not run" if v.startswith("not run") else v.split(":")[0]


# ---------------------------------------------------------------------- blocks
def render_run(data: dict, _arg: str) -> str:
    commit = (data.get("commit") or "unknown")[:7]
    return (f"Mode `{data['mode']}`, report written by tokengeo {data['tokengeo']} at commit "
            f"`{commit}`: {len(data['claims'])} claims.")


def _columns(counts: dict) -> list[str]:
    """The verdict columns a tally shows: a run judged before an outcome existed has no
    count for it (no column, rather than a 0 it never decided)."""
    first = next(iter(counts.values()), {})
    return [v for v in VERDICT_COLUMNS if v in first or v != CONTRADICTED_COLUMN]


def render_tally(data: dict, _arg: str) -> str:
    cols = _columns(data["tally"]["papers"])
    rows = [[p, *(str(n.get(v, 0)) for v in cols)]
            for p, n in data["tally"]["papers"].items()]
    return _table(["paper (its claims, as stated or through a stand-in)", *cols], rows)


def render_kinds(data: dict, _arg: str) -> str:
    cols = _columns(data["tally"]["kinds"])
    rows = [[k, *(str(n.get(v, 0)) for v in cols)]
            for k, n in data["tally"]["kinds"].items() if sum(n.values())]
    return _table(["kind (all claims)", *cols], rows)


def _suite_claims(data: dict, suite: str) -> list[dict]:
    claims = [c for c in data["claims"] if c["suite"] == suite]
    if not claims:
        raise ConfigError(f"block names suite {suite!r}, which report.json does not hold; "
                          f"suites: {sorted({c['suite'] for c in data['claims']})}")
    return claims


def _family_measured(c: dict) -> str:
    if not c.get("members"):
        return measured_text(c["interval"])
    return "; ".join(  # a nested family (a finding's reading) shows its verdict
        f"{m.get('label', '')}: "
        + (measured_text(m["interval"]) if m["interval"] is not None else m["verdict"])
        for m in c["members"] if m["interval"] is not None or m.get("members")) or "—"


def render_claims(data: dict, suite: str) -> str:
    rows = []
    for c in _suite_claims(data, suite):
        family = (f" (family of {len(c['members'])}, rule: {c['family_rule']})"
                  if c.get("members") else "")
        rows.append([c["claim"] + family, c["kind"], c["paper_value"], _family_measured(c),
                     _verdict(c), c.get("vs_paper") or ""])
    return _table(["claim", "kind", "paper", "measured (mean [95% interval])", "verdict",
                   "vs paper"], rows)


def render_findings(data: dict, suite: str) -> str:
    lines = []
    for c in _suite_claims(data, suite):
        if c["kind"] not in TALLIED or _verdict(c) not in ("reproduced", "not reproduced"):
            continue
        vs = f"; against the paper's effect: {c['vs_paper']}" if c.get("vs_paper") else ""
        lines.append(f"- **{c['verdict']}**: {c['claim']} — {_family_measured(c)}{vs}")
    return "\n".join(lines) or "- (no paper or stand-in claim of this suite reached a verdict)"


SMOOTHING_CAPTION = "smoothing sign"  # the captions smoothing_table() and the mechanism's write


def _leading_number(cell: str) -> float:
    """The mean of a ``"mean ± std"`` table cell."""
    return float(cell.split("±")[0])


def _sign_line(name: str, means: list[tuple[str, float]]) -> str:
    smooth = ", ".join(b for b, m in means if m < 0) or "none"
    sharpen = ", ".join(b for b, m in means if m > 0) or "none"
    return (f"- {name}: mean derivative negative (the heads smooth) in {smooth}; positive "
            f"(they sharpen) in {sharpen}")


def _signs(header: list[str], rows: list[list[str]]) -> list[str]:
    """Per ``dVar/Var`` column (a sweep's table: blocks are rows), or per row (the
    mechanism's: variants are rows, blocks columns), where the mean is negative or positive."""
    columns = [j for j, name in enumerate(header) if name.endswith("dVar/Var")]
    if columns:
        return [_sign_line(header[j].removesuffix(" dVar/Var"),
                           [(row[0], _leading_number(row[j])) for row in rows])
                for j in columns]
    return [_sign_line(row[0], [(header[j], _leading_number(row[j]))
                                for j in range(1, len(header))]) for row in rows]


def render_smoothing(data: dict, suite: str) -> str:
    _suite_claims(data, suite)  # the suite must be in the run
    tables = [t for t in data.get("tables", []) if t["suite"] == suite
              and t["caption"].startswith(SMOOTHING_CAPTION)]
    if not tables:
        return (f"(this run of {suite} has no smoothing-sign table: it predates the "
                "measurement, or its cells did not run)")
    out = []
    for t in tables:
        out += [f"*{t['caption']}*", "", _table(t["header"], t["rows"]), "",
                "Means over seeds, not tests (the suite's claims judge them):",
                *_signs(t["header"], t["rows"])]
    return "\n".join(out)


def render_table(data: dict, arg: str) -> str:
    """``table:SUITE:CAPTION-START``: the suite's tables whose caption starts with
    CAPTION-START, its hyphens read as spaces (``table:laplacian-images:along-training``)."""
    suite, _, start = arg.partition(":")
    _suite_claims(data, suite)  # the suite must be in the run
    if not start:
        raise ConfigError(f"block table:{arg} names no caption; write "
                          "table:SUITE:CAPTION-START (hyphens for spaces)")
    words = start.replace("-", " ")
    tables = [t for t in data.get("tables", []) if t["suite"] == suite
              and t["caption"].startswith(words)]
    if not tables:
        return f"(this run of {suite} has no table whose caption starts with \"{words}\")"
    return "\n\n".join(f"*{t['caption']}*\n\n{_table(t['header'], t['rows'])}"
                         for t in tables)


def _span(t: dict) -> str:
    if not t["first_start"]:
        return "—"
    return f"{t['first_start'].replace('T', ' ')} – {t['last_finish'].replace('T', ' ')}"


def _cells_row(name: str, t: dict, counted: str | None = None) -> list[str]:
    """One row of the cells block; ``counted`` (default: "timed of cells" where some cells
    have no recorded time) replaces the count."""
    if counted is None:
        counted = (str(t["cells"]) if t["timed"] == t["cells"]
                   else f"{t['timed']} of {t['cells']}")
    longest = "—" if t["longest_seconds"] is None else f"{t['longest_seconds']:.0f}"
    return [name, counted, f"{t['core_hours']:.2f}", longest, _span(t)]


def render_cells(data: dict, _arg: str) -> str:
    """Per suite: cells, their core-hours, the longest cell and the span they ran in."""
    times = data.get("cells")
    if not times:
        return "(this run's report.json predates the cell times: it holds none)"
    rows = [_cells_row(suite, t) for suite, t in times.items() if suite != "all"]
    if "all" in times:
        rows.append(_cells_row("**all**", times["all"], counted=str(times["all"]["cells"])))
    return _table(["suite", "cells (timed)", "core-hours", "longest cell (s)",
                   "first start – last finish (UTC)"], rows)


def _all_claims(claims: list[dict], parent: str = "") -> dict[tuple[str, str], tuple]:
    """(suite, text) -> (verdict, the finding it is a member of) over every claim and member."""
    out = {}
    for c in claims:
        out[(c["suite"], c["claim"])] = (_verdict(c), parent)
        out.update(_all_claims(c.get("members") or [], parent or c["claim"]))
    return out


def _earlier_report(path: str, root: Path) -> dict:
    from tokengeo.io import read_json

    file = Path(root) / path
    if not path or not file.is_file():
        raise ConfigError(f"block compare:{path} names no report.json under {root}; give "
                          "the earlier run's report.json, relative to the docs' root")
    return read_json(file, dict, allow_nan=True)


def render_compare(data: dict, path: str, root: Path = Path(".")) -> str:
    """This run against an earlier one (``compare:PATH``, PATH its report.json relative to
    the root): the tally of both, then every claim (or family member) of the same suite and
    text whose verdict changed, and how many claims each run has that the other does not."""
    old = _earlier_report(path, root)
    papers = list(dict.fromkeys([*old["tally"]["papers"], *data["tally"]["papers"]]))
    cols = [v for v in VERDICT_COLUMNS
            if v in _columns(old["tally"]["papers"]) + _columns(data["tally"]["papers"])]
    rows = [[p, *(f"{old['tally']['papers'].get(p, {}).get(v, 0)} → "
                  f"{data['tally']['papers'].get(p, {}).get(v, 0)}" for v in cols)]
            for p in papers]
    before, after = _all_claims(old["claims"]), _all_claims(data["claims"])
    changed = [[key[0], _cell(key[1]), before[key][0], after[key][0],
                _cell(after[key][1]) or "—"]
               for key in before if key in after and before[key][0] != after[key][0]]
    return "\n".join([
        f"Tally of the paper and stand-in claims, earlier run (commit "
        f"`{(old.get('commit') or 'unknown')[:7]}`) → this run:", "",
        _table(["paper", *cols], rows), "",
        f"Claims and family members of the same suite and wording in both runs: "
        f"{sum(k in after for k in before)}; of the earlier run only: "
        f"{sum(k not in after for k in before)}; of this run only: "
        f"{sum(k not in before for k in after)}. Those whose verdict changed:", "",
        _table(["suite", "claim", "earlier", "now", "now a member of"], changed)
        if changed else "(none)"])


RENDERERS: dict[str, Callable[..., str]] = {
    "run": render_run, "tally": render_tally, "kinds": render_kinds,
    "claims": render_claims, "findings": render_findings, "smoothing": render_smoothing,
    "compare": render_compare, "cells": render_cells, "table": render_table,
    "catalogue": render_catalogue,
}
NEEDS_ROOT = {"compare"}


def render(data: dict, name: str, root: Path = Path(".")) -> str:
    """The body of block ``name`` (``kind`` or ``kind:argument``); ``root``: the folder the
    docs are under (``compare`` reads the earlier report relative to it)."""
    kind, _, arg = name.partition(":")
    if kind not in RENDERERS:
        raise ConfigError(f"unknown block {name!r}; blocks are {sorted(RENDERERS)} "
                          "(claims, findings and smoothing take :SUITE, table "
                          ":SUITE:CAPTION-START, compare :PATH)")
    if kind in NEEDS_ROOT:
        return RENDERERS[kind](data, arg, root)
    return RENDERERS[kind](data, arg)


# ---------------------------------------------------------------------- files
def doc_files(root: Path) -> list[Path]:
    """The Markdown files whose blocks are generated: README.md and docs/ (two levels)."""
    root = Path(root)
    return sorted({p for g in DOC_GLOBS for p in root.glob(g) if p.is_file()})


def rendered(text: str, data: dict, root: Path = Path(".")) -> str:
    """``text`` with every block re-rendered from ``data``."""
    return BLOCK.sub(lambda m: (f"{BEGIN.format(m['name'])}\n{render(data, m['name'], root)}\n"
                                f"{END.format(m['name'])}"), text)


def check_docs(data: dict, root: Path) -> list[str]:
    """One line per block name whose text differs from what ``data`` renders, naming the
    files it differs in (empty: every block agrees)."""
    differs: dict[str, list[str]] = {}
    for path in doc_files(root):
        text = path.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            if m["body"] != render(data, m["name"], root) + "\n":
                differs.setdefault(m["name"], []).append(path.relative_to(root).as_posix())
    return [f"block {name} differs from report.json in {', '.join(files)}"
            for name, files in differs.items()]


def write_docs(data: dict, root: Path) -> list[Path]:
    """Re-render every block under ``root``; return the files that changed."""
    from tokengeo.io import write_text

    changed = []
    for path in doc_files(root):
        text = path.read_text(encoding="utf-8")
        new = rendered(text, data, root)
        if new != text:
            write_text(path, new)
            changed.append(path)
    return changed
