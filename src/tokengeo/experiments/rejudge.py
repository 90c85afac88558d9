"""Re-judge a report.json written before the family logic of :func:`tokengeo.experiments.
claims.family_verdict` (format 1: families tallied on their raw verdict).

A family's one verdict needs only what such a report already holds: each member's raw
``verdict`` and its Holm-adjusted ``verdict_holm``. :func:`rejudge_families` rewrites each
family's ``verdict`` (keeping the old combination as ``verdict_raw``), its ``rule`` text,
and the tally's per-paper and per-kind counts; it returns one line per changed verdict.
:func:`rejudge_flows` applies the flows fixes the JSON alone allows: a deterministic value
written as a zero-width ``t`` interval of n = 1 becomes method ``deterministic``; a paper
value "≈ 0" takes its region's tolerance as its equivalence margin (``vs_paper``); "never
settles" takes the region disjoint from "settles" (trend above +tol, not above −tol).
Members, intervals and everything else stay as published.
"""

from __future__ import annotations

import re

from tokengeo.experiments.claims import TALLIED_KINDS, _combine, family_verdict
from tokengeo.experiments.stats import NOT_TESTABLE, REPRODUCED
from tokengeo.experiments.summary import VERDICTS

RULE_TEXT = {
    "all": ("every member must hold: reproduced if every member is reproduced; not "
            "reproduced if some member is, after Holm's adjustment"),
    "any": ("some member must hold: reproduced if some member is reproduced after Holm's "
            "adjustment; not reproduced if every member is"),
}


def _bucket(verdict: str) -> str:
    if verdict.startswith(NOT_TESTABLE):
        return NOT_TESTABLE
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


def _deterministic(iv: dict | None) -> bool:
    return (iv is not None and iv["method"] in ("t", "exact", "deterministic") and iv["n"] == 1
            and iv["std"] == 0 and iv["low"] == iv["high"] == iv["mean"])


def rejudge_flows(data: dict) -> list[str]:
    """The flows claims' deterministic values, equivalence margins and disjoint regions;
    one line per changed verdict or vs_paper."""
    from tokengeo.experiments.stats import Interval
    from tokengeo.experiments.verdicts import vs_paper

    changes = []
    for i, c in enumerate(data["claims"]):
        if c["suite"] != "flows" or c["interval"] is None:
            continue
        iv = c["interval"]
        if _deterministic(iv) and iv["method"] == "t":
            iv["method"] = "deterministic"
        band = re.fullmatch(r"within 0 ± (\S+)", str(c["region"]))
        if c.get("paper_effect") == 0 and band:
            margin = float(band[1])
            c["margin"] = margin
            old = c["vs_paper"]
            value = Interval.exact_value(iv["mean"]) if _deterministic(iv) else Interval(
                iv["mean"], iv["low"], iv["high"], iv["n"], iv["std"])
            c["vs_paper"] = vs_paper(value, 0.0, margin)
            if c["vs_paper"] != old:
                changes.append(f"claims[{i}] ({c['paper']}, {c['kind']}): {c['claim']}: "
                               f"vs_paper {old} -> {c['vs_paper']} (equivalence margin "
                               f"±{margin:g} of the paper's b ≈ 0)")
        never = re.fullmatch(r"> -(\S+)", str(c["region"]))
        if "never settles" in c["claim"] and never:
            tol = float(never[1])
            c["region"] = f"> {tol:g} (beyond the settling band ±{tol:g})"
            c["rule"] = c["rule"].replace(f"lies > -{tol:g}", f"lies {c['region']}")
            c["claim"] = c["claim"].replace("(G² does not fall)",
                                            "(G² keeps rising over [T/2, T])")
            old = c["verdict"]
            lo = iv["mean"] if _deterministic(iv) else iv["low"]
            hi = iv["mean"] if _deterministic(iv) else iv["high"]
            c["verdict"] = ("reproduced" if lo > tol else "not reproduced" if hi <= tol
                            else "inconclusive")
            if c["verdict"] != old:
                changes.append(f"claims[{i}] ({c['paper']}, {c['kind']}): {c['claim']}: "
                               f"{old} -> {c['verdict']} (trend {iv['mean']:.3g}: the region "
                               f"> -{tol:g} overlapped \"settles\", |trend| <= {tol:g}; now "
                               f"> {tol:g})")
    _recount(data)
    return changes


LOCAL = re.compile(r"(\d+)→(\d+): ([+-]?[\d.]+)(?: \[([+-]?[\d.]+), ([+-]?[\d.]+)\])?")


def rejudge_power_laws(data: dict) -> list[str]:
    """An exponent is quoted only where one power law fits the local slopes (each flows
    exponent claim's detail lists them): else a "b ≈ value" claim is not testable and a
    direction claim ("G² falls with H") states the shape, not an exponent."""
    from tokengeo.experiments.suites.flows import power_law_shape

    changes = []
    for i, c in enumerate(data["claims"]):
        if c["suite"] != "flows" or "Local slopes" not in c.get("detail", ""):
            continue
        if c["detail"].startswith("not a power law") or c["verdict"].startswith(NOT_TESTABLE):
            continue
        part = c["detail"].split("Local slopes d log G²/d log H: ", 1)[1].split(". Mean", 1)[0]
        local = [{"h0": int(a), "h1": int(b), "slope": float(v),
                  "lo": float(lo) if lo else float(v), "hi": float(hi) if hi else float(v),
                  "exact": lo is None} for a, b, v, lo, hi in LOCAL.findall(part)]
        tol = float(c["margin"]) if c.get("margin") else 0.3
        shape = power_law_shape(local, tol)
        if shape is None:
            continue
        old = c["verdict"]
        if str(c["region"]).startswith("within"):
            c["verdict"], c["vs_paper"] = f"{NOT_TESTABLE}: {shape}", None
        else:
            c["quantity"] = ("slope of the log-log OLS of avg G² on all H (not an exponent: "
                             "see the shape in the detail)")
        c["detail"] = f"{shape}. {c['detail']}"
        changes.append(f"claims[{i}]: {c['claim']}: {old} -> {c['verdict']} ({shape})")
    _recount(data)
    return changes


def _recount(data: dict) -> None:
    counts = tally_counts(data["claims"], list(data["tally"]["papers"]),
                          list(data["tally"]["kinds"]))
    verified = [{"suite": c["suite"], "claim": c["claim"], "verdict": c["verdict"]}
                for c in data["claims"] if c["kind"] == "construction"]
    data["tally"] = {**data["tally"], **counts, "verified": verified}


def rejudge_preconditions(data: dict) -> list[str]:
    """DINO's segmentation claims need its segmentation sanity check (pre-training beats a
    random backbone): where that is not reproduced they are "not testable here"."""
    claims = data["claims"]
    sanity = next((c for c in claims if c["suite"] == "dino" and c["kind"] == "sanity"
                   and "segmentation" in c["claim"]), None)
    if sanity is None or sanity["verdict"] == REPRODUCED:
        return []
    changes = []
    for i, c in enumerate(claims):
        if (c["suite"] != "dino" or c is sanity or "segmentation" not in c["claim"].lower()
                or c.get("not_run") or c["verdict"].startswith(NOT_TESTABLE)):
            continue
        old = c["verdict"]
        c["verdict"] = (f"{NOT_TESTABLE}: the precondition \"{sanity['claim']}\" is "
                        f"{sanity['verdict']}")
        c["vs_paper"] = None
        changes.append(f"claims[{i}] ({c['paper']}, {c['kind']}): {c['claim']}: {old} -> "
                       f"not testable here (its precondition, claims[{claims.index(sanity)}], "
                       f"is {sanity['verdict']})")
    _recount(data)
    return changes


STRATA = re.compile(r"AUC of S within 10 attention strata (\S+) \[(\S+), (\S+)\] "
                    r"\(0\.5 = nothing beyond attention\); ")


def rejudge_attention(data: dict) -> list[str]:
    """"Output similarity carries information attention does not" is judged on the
    attention-stratified AUC (> 0.5: S separates the pairs within strata of equal
    attention), which each claim's detail holds (rounded to 3 decimals), not on ΔAUC > 0
    (S beating attention outright); ΔAUC moves to the detail."""
    from tokengeo.experiments.stats import Interval, Region, verdict

    changes = []
    for i, c in enumerate(data["claims"]):
        m = STRATA.search(c.get("detail", ""))
        if c["suite"] != "similarity" or "attention does not" not in c["claim"] or not m:
            continue
        old_iv, old = c["interval"], c["verdict"]
        mean, lo, hi = (float(x) for x in m.groups())
        region = Region.above(0.5)
        iv = Interval(mean, lo, hi, old_iv["n"], 0.0, method="bootstrap over inputs")
        c["interval"] = {**old_iv, "mean": mean, "low": lo, "high": hi, "std": 0.0}
        c["region"], c["verdict"] = region.text, verdict(iv, region)
        c["quantity"] = c["quantity"].replace(
            "AUC of the similarity matrix − AUC of the (symmetrised) attention map for "
            "predicting", "AUC of the similarity matrix within 10 strata of the (symmetrised) "
            "attention map (0.5: nothing beyond attention) for predicting")
        c["rule"] = (f"reproduced if the 95% interval of {c['quantity']} lies "
                     f"{region.text}; not reproduced if it lies outside; inconclusive "
                     "otherwise")
        delta = (f"ΔAUC (S − A) {old_iv['mean']:.3f} [{old_iv['low']:.3f}, "
                 f"{old_iv['high']:.3f}]; ")
        c["detail"] = c["detail"].replace(m.group(0), delta)
        if c["verdict"] != old:
            changes.append(f"claims[{i}] ({c['kind']}): {c['claim']}: {old} -> "
                           f"{c['verdict']} (stratified AUC {mean:.3f} [{lo:.3f}, {hi:.3f}] "
                           f"against 0.5, in place of ΔAUC {old_iv['mean']:.3f} against 0)")
    _recount(data)
    return changes


def rejudge_kinds(data: dict) -> list[str]:
    """The flows theory claims' kinds: the H = 1 energy–dissipation identity is the paper's
    (tallied); the Grönwall and weight-path slopes ≈ 1 hold for any smooth ODE
    (construction: verified, not tallied)."""
    changes = []
    for i, c in enumerate(data["claims"]):
        if c["suite"] != "flows":
            continue
        new = c["kind"]
        if c["claim"].startswith("energy–dissipation identity, H=1"):
            new = "paper"
        elif "Grönwall stability" in c["claim"] or "continuity in the weights' path" in c["claim"]:
            new = "construction"
        if new != c["kind"]:
            changes.append(f"claims[{i}]: {c['claim']}: kind {c['kind']} -> {new} "
                           f"({c['verdict']})")
            c["kind"], c["proxy"] = new, (c["proxy"] if new != "construction" else None)
    _recount(data)
    return changes


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
    _recount(data)
    return changes
