"""The ``catalogue`` doc block (docs/claims.md): every claim of every paper in the catalogue,
its test, its verdict in a report.json, and the coverage per paper.

A row is found by the catalogue id it carries; a report written before rows carried ids is
read by the test's ``"<suite>:<claim text>"``. The tally per paper counts rows, so a claim
read by several tests shows each one's verdict.
"""

from __future__ import annotations

from tokengeo.experiments.catalogue import PAPERS, Entry, coverage, load


def _verdict(row: dict) -> str:
    v = row["verdict"]
    return "not run" if v.startswith("not run") else v.split(":")[0]


def _rows_for(entry: Entry, claims: list[dict]) -> list[dict]:
    by_id = [c for c in claims if c.get("catalogue") == entry.id]
    if by_id:
        return by_id
    texts = set(entry.tests)
    return [c for c in claims if f"{c['suite']}:{c['claim']}" in texts]


def _test_cell(entry: Entry, claims: list[dict]) -> tuple[str, str]:
    """(the test, its verdict in this run) of ``entry``."""
    if not entry.tested:
        return f"not tested: {entry.not_tested}", "—"
    rows = _rows_for(entry, claims)
    if not rows:
        return "; ".join(f"`{t.split(':', 1)[0]}`: {t.split(':', 1)[1]}"
                         for t in entry.tests), "not in this report"
    tests = "; ".join(f"`{r['suite']}`: {r['claim']} ({r['kind']})" for r in rows)
    return tests, "; ".join(_verdict(r) for r in rows)


def render_catalogue(data: dict, _arg: str = "") -> str:
    """Coverage per paper, then one table per paper: id, section, the paper's statement and
    value, the test (or why none), the verdict in ``data``'s run."""
    from tokengeo.experiments.docblocks import _table

    entries = load()
    cov = coverage(entries)
    claims = data["claims"]
    out = [_table(["paper", "claims stated", "tested", "not tested"],
                  [[PAPERS[p], str(n["stated"]), str(n["tested"]), str(n["not tested"])]
                   for p, n in cov.items()]), ""]
    for paper, title in PAPERS.items():
        mine = [e for e in entries if e.paper == paper]
        out += [f"### {title}", ""]
        if not mine:
            out += [f"No claims catalogued yet (`{paper}.toml`).", ""]
            continue
        rows = []
        for e in mine:
            test, verdict = _test_cell(e, claims)
            statement = e.statement + (f" ({e.value})" if e.value else "")
            rows.append([f"`{e.id}`", e.section, statement, test, verdict])
        out += [_table(["id", "where", "the paper's claim", "tokengeo's test", "verdict"],
                       rows), ""]
    return "\n".join(out).rstrip()
