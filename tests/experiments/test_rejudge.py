"""Re-judging a format-1 report.json: one verdict per family from its members' verdicts."""

import json
from pathlib import Path

from tokengeo.experiments.rejudge import rejudge_families

# The format-1 run of 2026-12-05, re-judged in place (issue 40) and kept when the run of
# 2026-12-06 replaced it in docs/results/; re-judging applies to such flat reports only.
PUBLISHED = Path(__file__).parents[2] / "docs" / "results-2026-12-05" / "report.json"


def _report(rule, raw, holm, verdict):
    members = [{"verdict": v, "verdict_holm": h} for v, h in zip(raw, holm, strict=True)]
    claim = {"paper": "P", "kind": "stand-in", "claim": "c", "verdict": verdict,
             "verdict_holm": "inconclusive", "family_rule": rule, "not_run": None,
             "rule": "reproduced if every member is reproduced; each member: x. Holm's "
                     "adjustment across the members is shown beside the raw verdict",
             "members": members}
    counts = dict.fromkeys(["reproduced", "not reproduced", "inconclusive", "no change",
                            "not run"], 0)
    counts[verdict] = 1
    return {"claims": [claim], "tally": {"papers": {"P": dict(counts)},
                                         "kinds": {"stand-in": dict(counts)}, "verified": []}}


def test_a_raw_failure_without_adjusted_evidence_becomes_inconclusive():
    data = _report("all", ["not reproduced", "reproduced"], ["inconclusive", "reproduced"],
                   "not reproduced")
    (line,) = rejudge_families(data)
    assert "not reproduced -> inconclusive" in line
    c = data["claims"][0]
    assert c["verdict"] == "inconclusive" and c["verdict_raw"] == "not reproduced"
    assert "verdict_holm" not in c and c["rule"].endswith("Each member: x")
    assert data["tally"]["papers"]["P"]["inconclusive"] == 1
    assert data["tally"]["papers"]["P"]["not reproduced"] == 0


def test_the_published_report_is_already_rejudged():
    data = json.loads(PUBLISHED.read_text())
    assert rejudge_families(data) == []
    laplacian = data["tally"]["papers"]["Zhang & Papyan (Laplacian heads)"]
    # the recount of the families, 6 / 9 / 33 / 4, less the DINO segmentation claim
    # whose precondition fails (inconclusive -> not testable here)
    assert [laplacian[v] for v in ("reproduced", "not reproduced", "inconclusive", "not run",
                                   "not testable here")] == [6, 9, 32, 4, 1]


def test_the_published_flows_claims_are_rejudged_and_the_step_is_idempotent():
    from tokengeo.experiments.rejudge import rejudge_flows, rejudge_kinds, rejudge_preconditions

    data = json.loads(PUBLISHED.read_text())
    assert rejudge_flows(data) == [] and rejudge_kinds(data) == []  # already applied
    assert rejudge_preconditions(data) == []
    from tokengeo.experiments.rejudge import rejudge_attention

    assert rejudge_attention(data) == []
    from tokengeo.experiments.rejudge import rejudge_power_laws

    assert rejudge_power_laws(data) == []
    per_head = next(c for c in data["claims"] if "G² falls with H, b < 0" in c["claim"])
    assert per_head["detail"].startswith("not a power law in H")
    assert "not an exponent" in per_head["quantity"]
    beyond = [c for c in data["claims"] if "attention does not" in c["claim"]]
    assert len(beyond) == 6 and all(c["region"] == "> 0.5" for c in beyond)
    assert all("ΔAUC (S − A)" in c["detail"] for c in beyond)
    seg = [c for c in data["claims"] if c["suite"] == "dino" and c["kind"] == "stand-in"
           and "segmentation" in c["claim"] and not c["not_run"]]
    assert seg and all(c["verdict"].startswith("not testable here") for c in seg)
    kinds = {c["claim"]: c["kind"] for c in data["claims"] if c["suite"] == "flows"}
    assert {k for t, k in kinds.items() if "Grönwall" in t} == {"construction"}
    flows = {c["claim"]: c for c in data["claims"] if c["suite"] == "flows"}
    inphase_b = next(c for t, c in flows.items() if t.endswith("b ≈ 0"))
    assert inphase_b["vs_paper"] == "consistent" and inphase_b["margin"] == 0.3
    assert inphase_b["interval"]["method"] == "deterministic"
    never = [c for t, c in flows.items() if "never settles" in t]
    settles = next(c for t, c in flows.items() if "cloud settles" in t)
    assert never and all(c["region"].startswith("> 0.5") for c in never)
    assert settles["region"] == "within 0 ± 0.5"  # disjoint from "> 0.5"
