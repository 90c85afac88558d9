"""The independent audit (tests/helpers/report_audit.py, scipy.stats) recomputes every interval,
member verdict, Holm verdict, family verdict and the tally of a report.json."""

import copy
import json
from pathlib import Path

from helpers.report_audit import audit
from test_report_json import _suites, validate_report

from tokengeo.experiments.report import write_report

PUBLISHED = Path(__file__).parents[2] / "docs" / "results" / "report.json"


def _written(tmp_path) -> dict:
    write_report(tmp_path, _suites(), "r", ["pre"], mode="quick")
    return json.loads((tmp_path / "report.json").read_text())


def test_the_audit_recomputes_a_written_report(tmp_path):
    data = _written(tmp_path)
    validate_report(data)
    a = audit(data)
    assert a.problems == []
    assert a.taken == 0  # format 2: every verdict recomputed from the values
    assert a.intervals >= 5 and a.families == 1 and a.holm == 2


def test_the_audit_recomputes_the_published_report():
    data = json.loads(PUBLISHED.read_text())
    validate_report(data)
    a = audit(data)
    assert a.problems == []
    # every interval carries its values; only a "not testable here" verdict is taken as
    # stored (the audit does not recompute the precondition that made it untestable)
    untestable = sum(str(c["verdict"]).startswith("not testable here")
                     for c in _all_claims(data["claims"]))
    assert untestable >= 1  # the 2026-12-07 run: clustering's static control spreads
    assert a.intervals >= 170 and a.verdicts >= 195 and a.families >= 50
    assert a.taken == untestable


def _all_claims(claims: list[dict]):
    for c in claims:
        yield c
        yield from _all_claims(c.get("members") or [])


def test_the_audit_catches_a_changed_value_a_verdict_and_the_tally(tmp_path):
    data = _written(tmp_path)
    bad = copy.deepcopy(data)
    paper = next(c for c in bad["claims"] if c["claim"] == "paper claim")
    paper["interval"]["values"][0] = -5.0  # the interval no longer follows from its values
    assert any("interval" in p or "mean" in p for p in audit(bad).problems)
    bad = copy.deepcopy(data)
    fam = next(c for c in bad["claims"] if c.get("members"))
    fam["verdict"] = "reproduced"  # the raw "any" verdict, without Holm's adjustment
    assert any("family verdict" in p for p in audit(bad).problems)
    bad = copy.deepcopy(data)
    bad["tally"]["papers"]["A"]["reproduced"] += 1
    assert any("tally per paper" in p for p in audit(bad).problems)


def _ranking_report(tmp_path) -> dict:
    from test_ltransformer_fair import CTX, SETTINGS, _efficiency_value, _results

    from tokengeo.experiments.cells import CellResult
    from tokengeo.experiments.suites import ltransformer

    results = {**_results(), "efficiency": CellResult("efficiency", _efficiency_value())}
    out = ltransformer.summarise(SETTINGS, results, CTX)
    write_report(tmp_path, [out], "r", ["pre"], mode="full")
    return json.loads((tmp_path / "report.json").read_text())


def test_the_alpha_ranking_carries_its_runs_and_the_audit_recomputes_it(tmp_path):
    data = _ranking_report(tmp_path)
    rank = next(c for c in data["claims"] if c["claim"].startswith("the ranking of the α"))
    iv = rank["interval"]
    assert iv["method"] == "permutation z" and "values" not in iv
    # one row per run (5 seeds), one accuracy per α (identity, linear, harmonic)
    assert [len(iv["values_a"]), len(iv["values_b"])] == [5, 5]
    assert {len(r) for r in iv["values_a"] + iv["values_b"]} == {3}
    validate_report(data)  # the schema takes a unit that is a run's row (the 2026-12-06 run)
    a = audit(data)
    assert a.problems == []
    bad = copy.deepcopy(data)
    rank = next(c for c in bad["claims"] if c["claim"].startswith("the ranking of the α"))
    rank["interval"]["values_b"] = rank["interval"]["values_a"]  # the same ranking twice
    assert any("permutation z" in p for p in audit(bad).problems)


def _nested_report(tmp_path) -> dict:
    """A micro laplacian-images run (the fake cells of its tests): one row per finding, its
    readings nested families (issue 40 item 11)."""
    from test_laplacian_images import SETTINGS, _results

    from tokengeo.experiments.report import SuiteOutput
    from tokengeo.experiments.suite import SuiteContext
    from tokengeo.experiments.suites import laplacian_images as images
    from tokengeo.experiments.suites import laplacian_sweep as lap

    ctx = SuiteContext.under(tmp_path, images.NAME)

    def rows(sign: float) -> list:
        sweep = lap.results(images.NAME, SETTINGS, _results(sign=sign), ctx,
                            images.GEOMETRY_KIND, images.FIELDS)
        return images.claims(SETTINGS, sweep)

    reversed_rows = [c for c in rows(-1.0) if c.members]  # the readings fail
    for c in reversed_rows:
        c.text += " (reversed)"
        c.catalogue = c.catalogue and c.catalogue + "-reversed"  # its own entry
    out = [SuiteOutput(images.NAME, images.TITLE, images.PAPER, rows(1.0),
                       paper_key=images.PAPER_KEY),
           SuiteOutput("rev", "reversed", images.PAPER, reversed_rows, paper_key="Z")]
    write_report(tmp_path / "r", out, "r", ["pre"], mode="quick")
    return json.loads((tmp_path / "r" / "report.json").read_text())


def test_the_audit_recomputes_nested_findings(tmp_path):
    data = _nested_report(tmp_path)
    validate_report(data)
    nested = [c for c in data["claims"] if any(m.get("members") for m in c.get("members", []))]
    assert len(nested) >= 10
    a = audit(data)
    assert a.problems == []
    inner = sum(1 for c in nested for m in c["members"] if m.get("members"))
    assert a.families >= len(nested) + inner and a.taken == 0
    assert {c["verdict"] for c in nested} >= {"reproduced", "not reproduced"}


def test_the_audit_catches_a_changed_nested_verdict(tmp_path):
    data = _nested_report(tmp_path)
    row = next(c for c in data["claims"] if c["verdict"] == "not reproduced"
               and any(m.get("members") for m in c["members"]))
    inner = next(m for m in row["members"] if m.get("members"))
    bad = copy.deepcopy(data)
    bad_inner = next(m for m in next(c for c in bad["claims"] if c["claim"] == row["claim"])
                     ["members"] if m["label"] == inner["label"])
    bad_inner["members"][0]["verdict_holm"] = "reproduced"
    assert any("Holm" in p for p in audit(bad).problems)
    bad = copy.deepcopy(data)
    bad_inner = next(m for m in next(c for c in bad["claims"] if c["claim"] == row["claim"])
                     ["members"] if m["label"] == inner["label"])
    bad_inner["verdict"] = "inconclusive" if inner["verdict"] != "inconclusive" \
        else "reproduced"
    assert any("family verdict" in p and inner["label"] in p for p in audit(bad).problems)


def _not_run_papers_claims(claims: list[dict]):
    for c in claims:
        if c["kind"] in ("paper", "stand-in") and str(c["verdict"]).startswith("not run"):
            yield c
        yield from _not_run_papers_claims(c.get("members") or [])


def test_every_not_run_claim_of_the_published_run_names_its_cost_and_command():
    """Issue 46: a paper or stand-in claim of the published full run is "not run" only with a
    reason that names its cost and the command that runs it."""
    data = json.loads(PUBLISHED.read_text())
    not_run = list(_not_run_papers_claims(data["claims"]))
    assert not_run  # the run's budget cuts (DINO, the L-Transformer's widths)
    for c in not_run:
        reason = c["verdict"]
        assert "core-s" in reason or "core-h" in reason or " s for " in reason, c["claim"]
        assert "tokengeo reproduce" in reason or "make run" in reason, c["claim"]


def _rules_report(tmp_path) -> dict:
    """A report whose rows use the judging rules: a stated margin, a primary reading, a
    verdict decided under normality only, and catalogue ids."""
    from tokengeo.experiments.claims import Claim, family
    from tokengeo.experiments.report import SuiteOutput
    from tokengeo.experiments.stats import Interval, Region, mean_interval

    up = Region.above(0.0)
    near = Claim("s", "exponent", "src", "-1", "b", Region.above(-0.5, margin=0.1),
                 measured=Interval.exact_value(-0.579, "deterministic"), kind="paper",
                 catalogue="x.near")
    members = [Claim("s", "at H", "src", "+", "d", up, label="k=H",
                     measured=mean_interval([-1.0, -1.1, -0.9, -1.05, -0.95])),
               Claim("s", "below", "src", "+", "d", up, label="k<H",
                     measured=mean_interval([0.3, -0.2, 0.1, -0.1, 0.2]))]
    opposite = family("s", "finding", members, primary="k=H", kind="stand-in", proxy="p",
                      catalogue="x.finding")
    few = Claim("s", "three seeds", "src", "+", "d", up, kind="paper", catalogue="x.few",
                measured=mean_interval([1.0, 1.1, 0.9]))
    write_report(tmp_path, [SuiteOutput("s", "S", "P", [near, opposite, few])], "r", [],
                 mode="quick")
    return json.loads((tmp_path / "report.json").read_text())


def test_the_audit_applies_margins_the_papers_setting_and_the_catalogue(tmp_path):
    data = _rules_report(tmp_path)
    validate_report(data)
    assert [c["verdict"] for c in data["claims"]] == [
        "inconclusive", "contradicted at the paper's setting", "reproduced"]
    assert [c["normality_only"] for c in data["claims"]] == [False, True, True]
    assert audit(data).problems == [] and audit(data).uncatalogued == 0
    bad = copy.deepcopy(data)
    bad["claims"][0]["region"]["margin"] = 0.0  # without it, -0.579 is not reproduced
    assert any("verdict 'inconclusive', recomputed 'not reproduced'" in p
               for p in audit(bad).problems)
    bad = copy.deepcopy(data)
    bad["claims"][1]["primary"] = None  # the finding is merely inconclusive then
    assert any("family verdict" in p for p in audit(bad).problems)
    bad = copy.deepcopy(data)
    bad["claims"][2]["catalogue"] = "x.near"
    assert any("already tallied" in p for p in audit(bad).problems)
    bad = copy.deepcopy(data)
    bad["claims"][2]["normality_only"] = False
    assert any("normality_only" in p for p in audit(bad).problems)
    bad = copy.deepcopy(data)
    bad["claims"][2]["catalogue"] = None
    assert audit(bad).uncatalogued == 1
