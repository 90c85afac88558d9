"""Re-judge a report.json written before the family logic of :func:`tokengeo.experiments.
claims.family_verdict` (format 1: families tallied on their raw verdict).

A family's one verdict needs only what such a report already holds: each member's raw
``verdict`` and its Holm-adjusted ``verdict_holm``. :func:`rejudge_families` rewrites each
family's ``verdict`` (keeping the old combination as ``verdict_raw``), its ``rule`` text,
and the tally's per-paper and per-kind counts; it returns one line per changed verdict.
Members, intervals and everything else stay as published.
"""

from __future__ import annotations

from tokengeo.experiments.claims import TALLIED_KINDS, _combine, family_verdict
from tokengeo.experiments.summary import VERDICTS

RULE_TEXT = {
    "all": ("every member must hold: reproduced if every member is reproduced; not "
            "reproduced if some member is, after Holm's adjustment"),
    "any": ("some member must hold: reproduced if some member is reproduced after Holm's "
            "adjustment; not reproduced if every member is"),
}


def _bucket(verdict: str) -> str:
    return "not run" if verdict.startswith("not run") else verdict


def tally_counts(claims: list[dict], papers: list[str], kinds: list[str]) -> dict:
    """Per paper (its paper and stand-in claims) and per kind: verdict counts."""
    by_paper = {p: dict.fromkeys(VERDICTS, 0) for p in papers}
    by_kind = {k: dict.fromkeys(VERDICTS, 0) for k in kinds}
    for c in claims:
        v = _bucket(c["verdict"])
        by_kind.setdefault(c["kind"], dict.fromkeys(VERDICTS, 0))[v] += 1
        if c["kind"] in TALLIED_KINDS:
            by_paper.setdefault(c["paper"], dict.fromkeys(VERDICTS, 0))[v] += 1
    return {"papers": by_paper, "kinds": by_kind}


def rejudge_families(data: dict) -> list[str]:
    """Rewrite ``data`` (a report.json, in place) with one verdict per family; the lines
    say which claims changed and why."""
    changes = []
    for i, c in enumerate(data["claims"]):
        members = c.get("members")
        if not members or c.get("not_run"):
            continue
        raw = [m["verdict"] for m in members]
        holm = [m.get("verdict_holm", m["verdict"]) for m in members]
        rule = c["family_rule"]
        new = family_verdict(raw, holm, rule)
        old = c["verdict"]
        c["verdict_raw"] = _combine(raw, rule)
        c.pop("verdict_holm", None)
        c["verdict"] = new
        tail = c["rule"].split("each member: ", 1)[-1]
        tail = tail.split(". Holm's adjustment across the members")[0]
        c["rule"] = f"{RULE_TEXT[rule]}; inconclusive otherwise. Each member: {tail}"
        if new != old:
            changes.append(f"claims[{i}] ({c['paper']}, {c['kind']}, {rule}): {c['claim']}: "
                           f"{old} -> {new} (members raw {raw}, Holm {holm})")
    counts = tally_counts(data["claims"], list(data["tally"]["papers"]),
                          list(data["tally"]["kinds"]))
    data["tally"] = {**data["tally"], **counts}
    return changes
