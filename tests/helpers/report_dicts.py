"""Small valid report.json dicts (format 2, ``report.schema.json``) for the renderer's tests:
:func:`claim` and :func:`report` take overrides, so a test states only what it varies."""

from __future__ import annotations

import copy

VERDICTS = ("reproduced", "not reproduced", "inconclusive", "no change", "not run",
            "not testable here")


def interval(**over) -> dict:
    return {"mean": -1.02, "low": -1.1, "high": -0.9, "n": 5, "method": "t",
            "scale": "linear", "std": 0.1, "df": 4.0,
            "values": [-1.0, -1.1, -0.95, -1.05, -1.0], **over}


def claim(**over) -> dict:
    return {"suite": "flows", "paper": "Massucco", "claim": "G2 falls like 1/H", "kind": "paper",
            "proxy": None, "source": "§4", "paper_value": "−1", "quantity": "slope",
            "region": {"low": None, "high": 0.0, "text": "< 0"}, "margin": None,
            "interval": interval(), "verdict": "reproduced", "paper_effect": None,
            "vs_paper": None, "mde_80": None, "seeds_for_80": None, "seeds_for_80_upper": None,
            "holm_size": 1, "power_basis": None, "not_run": None,
            "rule": "reproduced if the 95% interval lies < 0", "detail": "fit over H", **over}


def report(claims: list[dict] | None = None, tables: list[dict] | None = None, **over) -> dict:
    claims = [claim()] if claims is None else claims
    papers: dict[str, dict[str, int]] = {}
    for c in claims:
        if c["kind"] in ("paper", "stand-in"):
            counts = papers.setdefault(c["paper"], dict.fromkeys(VERDICTS, 0))
            v = c["verdict"]
            counts["not run" if v.startswith("not run") else
                   "not testable here" if v.startswith("not testable") else v] += 1
    return copy.deepcopy({
        "format": "tokengeo-report/2", "tokengeo": "0.0", "commit": "abc1234", "mode": "quick",
        "claims": claims, "tables": tables or [],
        "tally": {"papers": papers, "kinds": {}, "verified": []}, "power": [], **over})
