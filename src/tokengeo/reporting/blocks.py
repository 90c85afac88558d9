"""The doc blocks: a name -> renderer registry, each ``(report, arg) -> Markdown``.

A block in README.md or docs/ (:mod:`tokengeo.reporting.docfiles`) is re-rendered from a
run's report.json. Names (:data:`RENDERERS`): ``run`` (mode, commit, claim count; the
run's wall time, peak memory, machine and segments when report.json has them), ``tally``
(claims each paper makes, per verdict), ``kinds`` (all claims per kind), ``claims:SUITE``
(the suite's claims: paper's value, measurement, verdict, against the paper's effect),
``findings:SUITE`` (its paper and stand-in claims that reached a verdict, one line each),
``compare:PATH`` (the tally against an earlier run's report.json at PATH under the root, and
every claim whose verdict changed), ``cells`` (per suite: the cells, their core-hours, the
longest cell and the span they ran in), ``table:SUITE:CAPTION-START`` (a suite's tables by
the start of their caption, hyphens for spaces), ``smoothing:SUITE`` (the smoothing-sign
table of a Laplacian suite, and per column the blocks where the mean over seeds is
negative, the head kind smoothing there, or positive), ``catalogue`` (every claim of the
four papers from the claims catalogue: its test, its verdict in this run, the coverage per
paper; docs/claims.md), ``figures:SUITE:PREFIX[:NAMES]`` (the suite's figures, or
those named, linked through PREFIX, the report's folder relative to the page). Another
block is one more entry of :data:`RENDERERS` (a function of the report dict and the text
after the first ``:``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from tokengeo.errors import ConfigError
from tokengeo.reporting import text as tx
from tokengeo.reporting.catalogue import render_catalogue

VERDICT_COLUMNS = tx.VERDICTS


def _verdict(c: dict) -> str:
    return tx.bucket(c["verdict"]).split(":")[0]


def _duration(seconds: float) -> str:
    h, rest = divmod(round(seconds), 3600)
    return f"{h} h {rest // 60:02d} min {rest % 60:02d} s" if h else \
        f"{rest // 60} min {rest % 60:02d} s"


def _segment_row(i: int, s: dict) -> list[str]:
    load = "—" if s["load_1min_at_start"] is None else f"{s['load_1min_at_start']:.2f}"
    return [str(i), s["started"].replace("T", " ").rstrip("Z"), _duration(s["wall_seconds"]),
            f"{s['peak_memory_bytes'] / 1e9:.2f}", f"{s['cells_computed']} of "
            f"{s['cells_to_compute']}", "yes" if s["finished"] else "interrupted",
            f"`{(s['commit'] or 'unknown')[:7]}`", load]


def render_run(data: dict, _arg: str) -> str:
    """Mode, commit, claim count; with report.json's ``run`` (written by ``reproduce``
    itself): wall time, peak memory, the machine and every segment of the run."""
    commit = (data.get("commit") or "unknown")[:7]
    head = (f"Mode `{data['mode']}`, report written by tokengeo {data['tokengeo']} at commit "
            f"`{commit}`: {len(data['claims'])} claims.")
    run = data.get("run")
    if not run:
        return head + " (This report.json holds no `run` object: no wall time or peak "\
                      "memory measured by the run.)"
    segs = run["segments"]
    machines = sorted({tx.md_cell(f"{s['cpu']}, {s['cores']} cores") for s in segs})
    methods = sorted({tx.md_cell(s["memory_method"]) for s in segs})
    return "\n".join([
        head, "",
        f"Wall time **{_duration(run['wall_seconds'])}** ({run['wall_seconds']:.0f} s, the sum "
        f"of {len(segs)} segment{'s' if len(segs) > 1 else ''}: calls of the same command that "
        f"had cells to compute); peak memory **{run['peak_memory_bytes'] / 1e9:.2f} GB** (the "
        f"largest segment's: {'; '.join(methods)}). Machine: {'; '.join(machines)}.", "",
        tx.md_table(["segment", "started (UTC)", "wall time", "peak GB", "cells computed",
                     "finished", "commit", "1-min load at start"],
                    [_segment_row(i + 1, s) for i, s in enumerate(segs)])])


def render_tally(data: dict, _arg: str) -> str:
    counts = data["tally"]["papers"]
    return tx.md_table(["paper (its claims, as stated or through a stand-in)",
                        *tx.columns(counts)], tx.tally_rows(counts))


def render_kinds(data: dict, _arg: str) -> str:
    counts = data["tally"]["kinds"]
    return tx.md_table(["kind (all claims)", *tx.columns(counts)],
                       tx.tally_rows(counts, skip_empty=True))


def suite_claims(data: dict, suite: str) -> list[dict]:
    claims = [c for c in data["claims"] if c["suite"] == suite]
    if not claims:
        raise ConfigError(f"block names suite {suite!r}, which report.json does not hold; "
                          f"suites: {sorted({c['suite'] for c in data['claims']})}")
    return claims


def render_claims(data: dict, suite: str) -> str:
    rows = []
    for c in suite_claims(data, suite):
        family = (f" (family of {len(c['members'])}, rule: {c['family_rule']})"
                  if c.get("members") else "")
        rows.append([c["claim"] + family, c["kind"], c["paper_value"], tx.measured_text(c),
                     _verdict(c), tx.vs_paper(c)])
    return tx.md_table(["claim", "kind", "paper", "measured (mean [95% interval])", "verdict",
                       "vs paper"], rows)


def render_findings(data: dict, suite: str) -> str:
    lines = []
    for c in suite_claims(data, suite):
        if c["kind"] not in tx.TALLIED or _verdict(c) not in (tx.REPRODUCED, tx.NOT_REPRODUCED):
            continue
        vs = f"; against the paper's effect: {tx.vs_paper(c)}" if tx.vs_paper(c) else ""
        lines.append(f"- **{c['verdict']}**: {c['claim']} — {tx.measured_text(c)}{vs}")
    return "\n".join(lines) or "- (no paper or stand-in claim of this suite reached a verdict)"
SMOOTHING_CAPTION = "smoothing sign"  # the captions smoothing_table() and the mechanism's write


def _leading_number(cell: str) -> float:
    """The mean of a ``"mean ± std"`` table cell."""
    try:
        return float(cell.split("±")[0].replace("−", "-"))
    except ValueError:
        raise ConfigError(f"smoothing-sign table cell {cell[:40]!r} is not \"mean ± std\"; "
                          "regenerate report.json with `tokengeo reproduce`") from None


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
    suite_claims(data, suite)  # the suite must be in the run
    tables = [t for t in data.get("tables", []) if t["suite"] == suite
              and t["caption"].startswith(SMOOTHING_CAPTION)]
    if not tables:
        return (f"(this run of {suite} has no smoothing-sign table: it predates the "
                "measurement, or its cells did not run)")
    out = []
    for t in tables:
        if any(len(row) != len(t["header"]) for row in t["rows"]):
            raise ConfigError(f"{suite}'s table {t['caption'][:40]!r} has rows of another "
                              "length than its header; regenerate report.json with "
                              "`tokengeo reproduce`")
        out += [f"*{t['caption']}*", "", tx.md_table(t["header"], t["rows"]), "",
                "Means over seeds, not tests (the suite's claims judge them):",
                *_signs(t["header"], t["rows"])]
    return "\n".join(out)


def render_table(data: dict, arg: str) -> str:
    """``table:SUITE:CAPTION-START``: the suite's tables whose caption starts with
    CAPTION-START, its hyphens read as spaces and the caption's too
    (``table:laplacian-images:along-training``, ``…:within-sequence-share``)."""
    suite, _, start = arg.partition(":")
    suite_claims(data, suite)  # the suite must be in the run
    if not start:
        raise ConfigError(f"block table:{arg} names no caption; write "
                          "table:SUITE:CAPTION-START (hyphens for spaces)")
    words = start.replace("-", " ")
    tables = [t for t in data.get("tables", []) if t["suite"] == suite
              and t["caption"].replace("-", " ").startswith(words)]
    if not tables:
        return f"(this run of {suite} has no table whose caption starts with \"{words}\")"
    return "\n\n".join(f"*{t['caption']}*\n\n{tx.md_table(t['header'], t['rows'])}"
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
    return tx.md_table(["suite", "cells (timed)", "core-hours", "longest cell (s)",
                   "first start – last finish (UTC)"], rows)


def _all_claims(claims: list[dict], parent: str = "") -> dict[tuple[str, str], tuple]:
    """(suite, text) -> (verdict, the finding it is a member of) over every claim and member."""
    out = {}
    for c in claims:
        out[(c["suite"], c["claim"])] = (_verdict(c), parent)
        out.update(_all_claims(c.get("members") or [], parent or c["claim"]))
    return out


def earlier_report(path: str, root: Path) -> dict:
    """The report.json a ``compare:PATH`` block names: PATH relative, inside ``root`` (no
    ``..`` out of it, no absolute path, no symbolic link out of it), read by the validating
    reader."""
    from tokengeo.reporting.reader import read_report

    rel = Path(path)
    fix = "give the earlier run's report.json as a path relative to the docs' root"
    if not path or rel.is_absolute() or ".." in rel.parts:
        raise ConfigError(f"block compare:{path} names no report.json under the root {root}; "
                          f"{fix}")
    file = Path(root) / rel
    try:
        inside = file.resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL byte
        inside = False
    if not inside or not file.is_file():
        raise ConfigError(f"block compare:{path} names no report.json under the root {root} "
                          f"(a missing file, or a link out of the root); {fix}")
    return read_report(file)


def render_compare(data: dict, path: str, root: Path = Path(".")) -> str:
    """This run against an earlier one (``compare:PATH``, PATH its report.json relative to
    the root): the tally of both, then every claim (or family member) of the same suite and
    text whose verdict changed, and how many claims each run has that the other does not."""
    old = earlier_report(path, root)
    papers = list(dict.fromkeys([*old["tally"]["papers"], *data["tally"]["papers"]]))
    cols = tx.columns(old["tally"]["papers"], data["tally"]["papers"])
    rows = [[p, *(f"{old['tally']['papers'].get(p, {}).get(v, 0)} → "
                  f"{data['tally']['papers'].get(p, {}).get(v, 0)}" for v in cols)]
            for p in papers]
    before, after = _all_claims(old["claims"]), _all_claims(data["claims"])
    changed = [[key[0], key[1], before[key][0], after[key][0], after[key][1] or "—"]
               for key in before if key in after and before[key][0] != after[key][0]]
    return "\n".join([
        f"Tally of the paper and stand-in claims, earlier run (commit "
        f"`{(old.get('commit') or 'unknown')[:7]}`) → this run:", "",
        tx.md_table(["paper", *cols], rows), "",
        f"Claims and family members of the same suite and wording in both runs: "
        f"{sum(k in after for k in before)}; of the earlier run only: "
        f"{sum(k not in after for k in before)}; of this run only: "
        f"{sum(k not in before for k in after)}. Those whose verdict changed:", "",
        tx.md_table(["suite", "claim", "earlier", "now", "now a member of"], changed)
        if changed else "(none)"])


FIGURE_PATH = re.compile(r"figures/[\w-]+/[\w.-]+\.png")
PREFIX = re.compile(r"(\.\./|[\w-]+/)*[\w-]+")


def render_figures(data: dict, arg: str) -> str:
    """``figures:SUITE:PREFIX[:NAME,NAME…]``: the suite's figures (those named, by file
    stem, in that order; default all) as Markdown images, linked through PREFIX, the report's
    folder relative to the page (``../results`` from docs/papers/). Paths come from
    report.json (untrusted): only ``figures/<suite>/<name>.png`` is shown."""
    suite, _, rest = arg.partition(":")
    prefix, _, names = rest.partition(":")
    if not PREFIX.fullmatch(prefix) or not re.fullmatch(r"[\w,-]*", names):
        raise ConfigError(f"block figures:{arg} needs figures:SUITE:PREFIX[:NAME,…], PREFIX "
                          "the report's folder relative to the page (e.g. ../results)")
    entry = next((s for s in data.get("suites") or [] if s["name"] == suite), None)
    if entry is None:
        raise ConfigError(f"block figures:{arg} names suite {suite!r}, which report.json "
                          f"does not hold; suites: {[s['name'] for s in data.get('suites') or []]}")
    shown = [f for f in entry.get("figures") or [] if FIGURE_PATH.fullmatch(f)]
    missing = []
    if names:
        by_stem = {Path(f).stem: f for f in shown}
        missing = [n for n in names.split(",") if n not in by_stem]
        shown = [by_stem[n] for n in names.split(",") if n in by_stem]
    if not shown:
        return f"(this run of {suite} has no figures{' of those names' if names else ''})"
    note = [f"(this run of {suite} has no figure {', '.join(missing)})"] if missing else []
    return "\n\n".join([*(f"![{Path(f).stem}]({prefix}/{f})" for f in shown), *note])


RENDERERS: dict[str, Callable[..., str]] = {
    "run": render_run, "tally": render_tally, "kinds": render_kinds,
    "claims": render_claims, "findings": render_findings, "smoothing": render_smoothing,
    "compare": render_compare, "cells": render_cells, "table": render_table,
    "catalogue": render_catalogue, "figures": render_figures,
}
NEEDS_ROOT = {"compare"}


def render(data: dict, name: str, root: Path = Path(".")) -> str:
    """The body of block ``name`` (``kind`` or ``kind:argument``); ``root``: the folder the
    docs are under (``compare`` reads the earlier report relative to it)."""
    kind, _, arg = name.partition(":")
    if kind not in RENDERERS:
        raise ConfigError(f"unknown block {name!r}; blocks are {sorted(RENDERERS)} "
                          "(claims, findings and smoothing take :SUITE, table "
                          ":SUITE:CAPTION-START, figures :SUITE:PREFIX, compare :PATH)")
    if kind in NEEDS_ROOT:
        return RENDERERS[kind](data, arg, root)
    return RENDERERS[kind](data, arg)
