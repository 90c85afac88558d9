"""A report.json as the blocks of the report a person reads: the title and preamble, the
tally, the summary of verdicts, the power of the undecided claims, then per suite its
referee paragraphs, claims, tables, notes and figures. report.md, report.html and the
explorer's run page are the same blocks (:mod:`tokengeo.reporting.render`)."""

from __future__ import annotations

from dataclasses import dataclass

from tokengeo.reporting import text as t

TITLE = "tokengeo reproduction report"
SUMMARY_HEADER = ["suite", "kind", "claim", "paper", "tokengeo (mean [95% interval])",
                  "verdict", "vs paper"]
FULL_RUN = "full run"
POWER_NOTE = ("For each inconclusive paper or stand-in claim: the smallest effect (distance "
              "from the claim's boundary) this run's spread detects with 80% power, and the "
              "seeds that would detect the paper's effect with 80% power (the observed effect "
              "where the paper gives no number or the data already exclude it).")


@dataclass(frozen=True)
class Block:
    """One piece of the report: ``kind`` in h1 h2 h3 p em rule table figure; ``text`` (or
    the caption); ``header`` and ``rows`` for a table; ``path`` (relative to the report's
    folder) for a figure."""

    kind: str
    text: str = ""
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    path: str = ""


def table(caption: str, header, rows) -> Block:
    return Block("table", caption, tuple(str(h) for h in header),
                 tuple(tuple(str(c) for c in r) for r in rows))


# ---------------------------------------------------------------------- published run
def published(report: dict, claim: dict) -> str | None:
    """The published full run's verdict of the catalogue entry ``claim`` tests, if known."""
    known = (report.get("published") or {}).get("verdicts") or {}
    return known.get(claim.get("catalogue")) if claim.get("catalogue") else None


def published_verdicts(full: dict) -> dict:
    """``report.json``'s ``published`` field from a full run's report: its commit and the
    verdict of each row that names a catalogue entry."""
    return {"commit": full.get("commit"),
            "verdicts": {c["catalogue"]: c["verdict"] for c in full["claims"]
                         if c.get("catalogue")}}


def _published_text(report: dict, claim: dict) -> str:
    verdict = published(report, claim)
    if verdict is None:
        return ""
    commit = (report["published"].get("commit") or "unknown")[:7]
    return f" The published full run (commit `{commit}`) found: **{verdict}**."


# ---------------------------------------------------------------------- tables
def tally_tables(tally: dict) -> list[Block]:
    out = [table("Tally per paper: only claims the paper makes (as stated, or through a "
                 "named stand-in)", ["paper (paper and stand-in claims)", *t.VERDICTS],
                 t.tally_rows(tally["papers"]))]
    others = {k: n for k, n in tally["kinds"].items() if k not in t.TALLIED
              and k != "construction"}
    if t.tally_rows(others, skip_empty=True):
        out.append(table("Other claims, counted apart (sanity checks, tokengeo's own "
                         "questions)", ["kind (counted apart)", *t.VERDICTS],
                         t.tally_rows(others, skip_empty=True)))
    if tally.get("verified"):
        out.append(table("Verified (holds by construction or is pinned by a unit test; not "
                         "tallied)", ["suite", "claim", "check"],
                         [[v["suite"], v["claim"], v["verdict"]] for v in tally["verified"]]))
    return out


def summary_table(report: dict) -> Block:
    """One row per claim (construction claims are under "verified"); a quick run's report
    shows the published full run's verdict beside its own."""
    full = bool(report.get("published"))
    rows = [[c["suite"], c["kind"], c["claim"], c.get("paper_value", ""), t.measured_text(c),
             c["verdict"], *([published(report, c) or "—"] if full else []),
             t.vs_paper(c)]
            for c in report["claims"] if c["kind"] != "construction"]
    header = [*SUMMARY_HEADER[:-1], *([FULL_RUN] if full else []), SUMMARY_HEADER[-1]]
    return table("", header, rows)


def member_rows(c: dict, parent: str = "") -> list[list[str]]:
    """A family's members, one row each; a nested family's members after it, labelled
    ``parent › child`` (their Holm column within their own family)."""
    rows = []
    for m in c["members"]:
        label = f"{parent} › {m.get('label', '')}" if parent else m.get("label", "")
        measured = (t.measured_text(m) if not m.get("members") else
                    f"{m.get('family_rule', '')} of {len(m['members'])}: "
                    f"{m.get('verdict_raw', m['verdict'])} unadjusted")
        rows.append([label, measured, m["verdict"], m.get("verdict_holm", m["verdict"]),
                     t.vs_paper(m)])
        if m.get("members"):
            rows += member_rows(m, label)
    return rows


# ---------------------------------------------------------------------- sections
def claim_blocks(report: dict, c: dict) -> list[Block]:
    kind = f"{c['kind']}, proxy: {c['proxy']}" if c.get("proxy") else c["kind"]
    verdicts = f"**{c['verdict']}**"
    if c.get("members") and c.get("verdict_raw", c["verdict"]) != c["verdict"]:
        verdicts += f" (unadjusted: {c['verdict_raw']})"
    if t.vs_paper(c):
        verdicts += f"; against the paper's effect {t.paper_effect_text(c)}: {t.vs_paper(c)}"
    detail = f" {c['detail']}" if c.get("detail") else ""
    out = [Block("h3", c["claim"]),
           Block("p", f"[{kind}] {c.get('source', '')}. Paper: {c.get('paper_value', '')}. "
                      f"Measured ({c['quantity']}): {t.measured_text(c)}. {verdicts}."
                      f"{detail}{_published_text(report, c)}")]
    if c.get("members"):
        out.append(table("members", ["member", "measured", "verdict", "Holm", "vs paper"],
                         member_rows(c)))
    return [*out, Block("rule", f"Rule: {c['rule']}")]


def suites(report: dict) -> list[dict]:
    """The suites in report order: ``report["suites"]``, else the suites its claims and
    tables name (title = name, paper = the papers its claims name)."""
    if report.get("suites"):
        return report["suites"]
    names = dict.fromkeys([c["suite"] for c in report["claims"]]
                          + [x["suite"] for x in report["tables"]])
    return [{"name": s, "title": s, "paper": ", ".join(dict.fromkeys(
        c["paper"] for c in report["claims"] if c["suite"] == s and c["paper"]))}
            for s in names]


def suite_blocks(report: dict, s: dict) -> list[Block]:
    """One suite's section: heading, paper, referee paragraphs, what would decide the
    undecided claims, its claims, tables, notes and figures."""
    claims = [c for c in report["claims"] if c["suite"] == s["name"]]
    out = [Block("h2", s["title"]), Block("em", s["paper"])]
    if s.get("question"):
        out.append(Block("p", f"Question: {s['question']}"))
    if s.get("can_say"):
        out.append(Block("p", f"What this run can say: {s['can_say']}"))
    if s.get("gap"):
        out.append(table("settings: the paper's and ours", ["setting", "paper", "ours"],
                         s["gap"]))
    lines = t.deciding_lines(claims)
    if lines:
        out.append(Block("p", "What would decide the undecided claims: " + " ".join(lines)))
    for c in claims:
        out += claim_blocks(report, c)
    out += [table(x["caption"], x["header"], x["rows"]) for x in report["tables"]
            if x["suite"] == s["name"]]
    out += [Block("p", n) for n in s.get("notes", [])]
    return out + [Block("figure", path=f) for f in s.get("figures", [])]


def overview_blocks(report: dict) -> list[Block]:
    """The tally, the summary and the power of the undecided claims."""
    out = [Block("h2", "Tally"), *tally_tables(report["tally"]),
           Block("h2", "Summary"), summary_table(report)]
    rows = t.power_rows(report["claims"])
    if rows:
        out += [Block("h2", "Power of the undecided claims"), Block("p", POWER_NOTE),
                table("", t.POWER_HEADER, rows)]
    return out


def document(report: dict) -> list[Block]:
    """Every block of the report, in order."""
    head = [Block("h1", report.get("title", TITLE)),
            *(Block("p", p) for p in report.get("preamble", []))]
    return head + overview_blocks(report) + [b for s in suites(report)
                                             for b in suite_blocks(report, s)]
