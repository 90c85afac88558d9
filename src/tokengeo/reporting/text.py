"""The words and numbers of a report, from report.json's dicts: an interval as text, a
verdict's bucket, the tally, the power texts and Markdown tables. One definition each; the
Markdown and HTML report, the doc blocks and the explorer's run page all use these."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
NO_CHANGE, NOT_RUN, NOT_TESTABLE = "no change", "not run", "not testable here"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NO_CHANGE, NOT_RUN, NOT_TESTABLE)
TALLIED = ("paper", "stand-in")  # the kinds a paper's tally counts
KINDS = ("paper", "stand-in", "sanity", "construction", "new")


# ---------------------------------------------------------------------- numbers
def num(x: float | None, digits: int = 3) -> str:
    """A number as the report shows it (``None``: unbounded, ``∞``; minus as ``−``)."""
    if x is None:
        return "∞"
    return f"{x:.{digits}g}".replace("-", "−")


def interval_text(iv: dict | None, digits: int = 3) -> str:
    """An interval of report.json as the report shows it: ``mean [low, high] (n=N)``, a log
    scale as ratios ``×r``, and the methods' own forms (worst run, deterministic, exact,
    an exact sign-flip test's ties)."""
    if iv is None:
        return "—"
    log = iv.get("scale") == "log"

    def shown(x, open_side: str = "∞") -> str:
        if x is None:
            return open_side
        return f"×{math.exp(x):.{digits}g}" if log else num(x, digits)

    m, n, values = iv["method"], iv["n"], iv.get("values") or []
    if iv["mean"] is None:  # a measurement that was not a number (written as null)
        return f"no value (n={n})"
    if m == "worst run":
        return f"{shown(iv['mean'])} (worst of {n} runs)"
    if m == "deterministic":
        return f"{shown(iv['mean'])} (deterministic)"
    if m == "exact" or n < 2:
        return shown(iv["mean"]) + ("" if m == "exact" else " (n=1)")
    if m == "sign-flip" and len(values) >= 2 and all(v == 0 for v in values):
        return f"no change in {n} of {n} seeds"
    if m == "sign-flip" and len(set(values)) == 1:
        return f"{shown(iv['mean'])} in {n} of {n} seeds (exact sign-flip test)"
    return f"{shown(iv['mean'])} [{shown(iv['low'], '−∞')}, {shown(iv['high'])}] (n={n})"


def measured_text(c: dict) -> str:
    """A claim's measurement: its interval, or each member's (a nested family's verdict)."""
    if not c.get("members"):
        return interval_text(c.get("interval"))
    return "; ".join(
        f"{m.get('label', '')}: "
        + (interval_text(m["interval"]) if m["interval"] is not None else m["verdict"])
        for m in c["members"] if m["interval"] is not None or m.get("members")) or "—"


def paper_effect_text(c: dict) -> str:
    """The paper's effect in the unit of the first measurement (a ratio on a log scale)."""
    effect = c.get("paper_effect")
    if effect is None:
        return ""
    first = c
    while first.get("interval") is None and first.get("members"):
        first = first["members"][0]
    if (first.get("interval") or {}).get("scale") == "log":
        return f"×{math.exp(effect):.3g}"
    return f"{effect:+.3g}"


def vs_paper(c: dict) -> str:
    """The claim's measurement against the paper's own effect ("" where the paper gives
    none): the one reader of report.json's ``vs_paper``."""
    return c.get("vs_paper") or ""


def claim_name(c: dict) -> str:
    """A claim's text, with a family member's label where the text does not hold it."""
    label = c.get("label") or ""
    return f"{c['claim']} [{label}]" if label and label not in c["claim"] else c["claim"]


# ---------------------------------------------------------------------- verdicts
def bucket(verdict: str) -> str:
    """The tally column of a verdict (``not run: why`` counts as ``not run``)."""
    if verdict.startswith(NOT_TESTABLE):
        return NOT_TESTABLE
    return NOT_RUN if verdict.startswith(NOT_RUN) else verdict


def descendants(claims: Iterable[dict]) -> Iterator[dict]:
    """Every claim and family member, depth first."""
    for c in claims:
        yield c
        yield from descendants(c.get("members") or [])


def tally(claims: list[dict], papers: Iterable[str] = ()) -> dict:
    """Per paper: verdict counts of its paper and stand-in claims (``papers`` listed first,
    with zero counts); per kind: every claim's counts; ``verified``: the construction claims."""
    by_paper = {p: dict.fromkeys(VERDICTS, 0) for p in papers}
    by_kind = {k: dict.fromkeys(VERDICTS, 0) for k in KINDS}
    verified = []
    for c in claims:
        v = bucket(c["verdict"])
        by_kind.setdefault(c["kind"], dict.fromkeys(VERDICTS, 0))[v] += 1
        if c["kind"] in TALLIED:
            by_paper.setdefault(c["paper"], dict.fromkeys(VERDICTS, 0))[v] += 1
        elif c["kind"] == "construction":
            verified.append({"suite": c["suite"], "claim": c["claim"], "verdict": c["verdict"]})
    return {"papers": by_paper, "kinds": by_kind, "verified": verified}


def tally_rows(counts: dict[str, dict[str, int]], skip_empty: bool = False) -> list[list[str]]:
    """One row per paper (or kind): its name, then its count per verdict column."""
    return [[name, *(str(n.get(v, 0)) for v in VERDICTS)] for name, n in counts.items()
            if not skip_empty or sum(n.values())]


# ---------------------------------------------------------------------- power
POWER_HEADER = ["suite", "claim", "paper's effect", "measured", "MDE at 80% power",
                "seeds for 80% power"]


def undecided(claims: list[dict]) -> list[dict]:
    """The inconclusive paper and stand-in claims (a family's members one by one)."""
    out = []
    for c in claims:
        if c["kind"] not in TALLIED:
            continue
        leaves = [d for d in descendants([c]) if not d.get("members")]
        out += [m for m in leaves if m["verdict"] == INCONCLUSIVE]
    return out


def power_text(c: dict) -> tuple[str, str]:
    """(the smallest effect detected at 80% power, the seeds that would detect the effect)."""
    mde, seeds, basis = c.get("mde_80"), c.get("seeds_for_80"), c.get("power_basis")
    log = (c.get("interval") or {}).get("scale") == "log"
    mde_s = "—" if mde is None else (f"{mde:.3g} (log)" if log else f"{mde:.3g}")
    what = {"paper": "the paper's effect", "observed": "the observed effect"}.get(basis or "", "")
    upper = c.get("seeds_for_80_upper")
    up_s = (f"; {upper:,} at the spread's upper 95% bound" if upper and upper != seeds
            else "; beyond reach at the spread's upper 95% bound" if seeds and not upper
            else "")
    size = c.get("holm_size") or 1
    holm = f", Holm-adjusted over {size}" if size > 1 else ""
    seeds_s = "—" if seeds is None else f"{seeds:,} seeds ({what}{holm}){up_s}"
    if basis == "no effect":
        seeds_s = "no effect to detect (the observed effect is within one standard error)"
    elif seeds is None and basis is not None:
        seeds_s = "beyond reach (> 100,000)"
    return mde_s, seeds_s


def power_rows(claims: list[dict]) -> list[list[str]]:
    return [[c["suite"], claim_name(c), paper_effect_text(c) or "—", measured_text(c),
             *power_text(c)] for c in undecided(claims)]


def deciding_lines(claims: list[dict]) -> list[str]:
    """For each undecided claim, what would decide it (from its power numbers)."""
    lines = []
    for c in undecided(claims):
        mde_s, seeds_s = power_text(c)
        head = f"{claim_name(c)}: the smallest effect this run detects (80% power) is {mde_s}"
        if c.get("power_basis") == "no effect":
            lines.append(f"{head}; {seeds_s}.")
        elif c.get("seeds_for_80"):
            lines.append(f"{head}; {seeds_s} would decide it.")
        else:
            lines.append(f"{head}; no seed count decides it from this spread.")
    return lines


# ---------------------------------------------------------------------- Markdown
def md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table (``|`` escaped, newlines folded in the cells)."""
    out = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    return "\n".join(out + ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows])
