"""report.json: written beside report.md / report.html from the same claims, valid against
its schema; the tally counts only paper and stand-in claims."""

import json
from pathlib import Path

import pytest

from tokengeo.experiments.claims import Claim, family
from tokengeo.experiments.report import SuiteOutput, render_markdown, write_report
from tokengeo.experiments.stats import Interval, Region, log_ratio, mean_interval

SCHEMA = Path(__file__).parents[2] / "src" / "tokengeo" / "experiments" / "report.schema.json"


def validate_report(data: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="pip install 'tokengeo[dev]'")
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))


def _suites() -> list[SuiteOutput]:
    up = Region.above(0)
    a = Claim("s1", "paper claim", "src", "+1", "d", up, measured=mean_interval([1, 1.2, 0.9]),
              paper_effect=1.0, catalogue="x.paper-claim")
    b = Claim("s1", "stand-in claim", "src", "+1", "d", up,
              measured=mean_interval([0.1, -0.2, 0.15]), kind="stand-in", proxy="tiny model",
              paper_effect=0.5, catalogue="x.stand-in-claim")
    sane = Claim("s1", "trains above chance", "src", "-", "d", up,
                 measured=mean_interval([1, 1.1, 1.2]), kind="sanity")
    built = Claim("s1", "1/p parameters", "src", "25%", "ratio", Region(0.24, 0.27),
                  measured=Interval.exact_value(0.25), kind="construction")
    new = Claim("s1", "our question", "src", "-", "ratio", Region.ratio_below(1.05),
                measured=log_ratio([1.0, 1.1, 0.02], [1.0, 1.0, 1.0]), kind="new")
    fam = family("s1", "some α helps", [
        Claim("s1", f"α={x}", "src", "+1", "d", up, measured=mean_interval(v), label=f"α={x}",
              kind="stand-in", proxy="tiny model")
        for x, v in (("a", [1, 2, 1.5]), ("b", [0.1, -0.1, 0.0]))], catalogue="x.some-alpha")
    missing = Claim("s2", "not run claim", "src", "-", "d", up, not_run="needs --full",
                    catalogue="y.not-run")
    return [SuiteOutput("s1", "Suite one", "Paper A", [a, b, sane, built, new, fam],
                        tables=[("t", ["x"], [["1"]])], paper_key="A"),
            SuiteOutput("s2", "Suite two", "Paper B", [missing], paper_key="B")]


def test_report_json_is_valid_and_matches_the_markdown(tmp_path):
    suites = _suites()
    write_report(tmp_path, suites, "r", ["pre"], mode="full")
    data = json.loads((tmp_path / "report.json").read_text())
    validate_report(data)
    assert data["mode"] == "full" and len(data["claims"]) == 7
    md = render_markdown(suites, "r", ["pre"], tmp_path)
    assert md == (tmp_path / "report.md").read_text()
    for c in data["claims"]:
        assert c["claim"] in md and c["verdict"].split(":")[0] in md
    fam = next(c for c in data["claims"] if c["claim"] == "some α helps")
    assert [m["label"] for m in fam["members"]] == ["α=a", "α=b"]
    ratio = next(c for c in data["claims"] if c["claim"] == "our question")
    assert ratio["interval"]["scale"] == "log"


def test_a_bad_report_fails_the_schema():
    jsonschema = pytest.importorskip("jsonschema", reason="pip install 'tokengeo[dev]'")
    from tokengeo.experiments.summary import report_json

    data = report_json(_suites(), "quick", "0", None)
    data["claims"][0]["kind"] = "anecdote"
    with pytest.raises(jsonschema.ValidationError):
        validate_report(data)


def test_tally_counts_only_paper_and_stand_in_claims():
    from tokengeo.experiments.summary import tally

    t = tally(_suites())
    # paper A: "paper claim" (reproduced), "stand-in claim" (inconclusive), the family
    # (inconclusive: α=a holds alone, p ≈ 1.7%, but not after Holm's ×2) - not the sanity,
    # construction or new claims
    assert t["papers"]["A"] == {"reproduced": 1, "not reproduced": 0,
                                "contradicted at the paper's setting": 0, "inconclusive": 2,
                                "no change": 0, "not run": 0, "not testable here": 0}
    assert t["papers"]["B"]["not run"] == 1
    assert t["kinds"]["sanity"]["reproduced"] == 1 and t["kinds"]["new"]["inconclusive"] == 1
    assert [v["claim"] for v in t["verified"]] == ["1/p parameters"]


def test_construction_claims_are_listed_as_verified_not_in_the_summary(tmp_path):
    md = render_markdown(_suites(), "r", [], tmp_path)
    summary = md.split("## Summary")[1].split("## ")[0]
    assert "1/p parameters" not in summary
    assert "Verified" in md.split("## Summary")[0]


def test_power_table_lists_the_undecided_paper_claims(tmp_path):
    md = render_markdown(_suites(), "r", [], tmp_path)
    power = md.split("## Power of the undecided claims")[1].split("\n## ")[0]
    assert "stand-in claim" in power and "our question" not in power
    assert "paper's effect" in power


def test_report_json_carries_the_values_behind_every_verdict(tmp_path):
    from tokengeo.experiments.stats import welch_difference

    suites = _suites()
    w = Claim("s1", "unpaired", "src", "-", "d", Region.above(0),
              measured=welch_difference([1.0, 1.2, 0.9], [0.1, 0.3, 0.2]), kind="new")
    suites[0].claims.append(w)
    write_report(tmp_path, suites, "r", ["pre"], mode="quick")
    data = json.loads((tmp_path / "report.json").read_text())
    validate_report(data)
    by_name = {c["claim"]: c for c in data["claims"]}
    assert by_name["paper claim"]["interval"]["values"] == [1, 1.2, 0.9]
    assert by_name["paper claim"]["region"] == {"low": 0, "high": None, "text": "> 0",
                                                "margin": 0.0}
    assert by_name["unpaired"]["interval"]["values_a"] == [1.0, 1.2, 0.9]
    assert by_name["unpaired"]["interval"]["values_b"] == [0.1, 0.3, 0.2]
    assert by_name["1/p parameters"]["region"] == {"low": 0.24, "high": 0.27,
                                                   "text": "within [0.24, 0.27]", "margin": 0.0}
    # the ratio claim's values are the per-seed log ratios its t interval is made from
    ratio = by_name["our question"]["interval"]
    assert ratio["values"] == pytest.approx([0.0, 0.0953102, -3.912023], abs=1e-6)


def test_a_zero_paper_effect_needs_a_margin_and_is_judged_by_equivalence():
    from tokengeo.experiments.stats import Interval

    with pytest.raises(ValueError, match="margin"):
        Claim("f", "b ≈ 0", "src", "b ≈ 0", "b", Region.around(0, 0.25), paper_effect=0.0)
    near = Claim("f", "b ≈ 0", "src", "b ≈ 0", "b", Region.around(0, 0.25), paper_effect=0.0,
                 margin=0.25, measured=Interval.exact_value(0.0014, "deterministic"))
    assert near.vs_paper == "consistent"  # 0.0014 is not "larger" than ≈ 0
    far = Claim("f", "b ≈ 0", "src", "b ≈ 0", "b", Region.around(0, 0.25), paper_effect=0.0,
                margin=0.25, measured=mean_interval([0.5, 0.6, 0.55]))
    assert far.vs_paper == "larger"
    d = near.to_dict("P")
    assert d["interval"]["method"] == "deterministic" and d["interval"]["margin"] == 0.25
    assert d["interval"]["values"] == [0.0014] and "deterministic" in near.measured_text()


def test_a_claim_whose_precondition_fails_is_not_testable_and_counted_apart(tmp_path):
    from tokengeo.experiments.summary import tally

    up = Region.above(0)
    sanity = Claim("d", "pre-training beats random at segmentation", "src", "-", "d", up,
                   measured=mean_interval([-0.01, 0.005, -0.002]), kind="sanity")
    seg = Claim("d", "Laplacian heads raise segmentation", "src", "×1.083", "d", up,
                measured=mean_interval([0.01, 0.02, 0.015]), kind="stand-in", proxy="p",
                precondition=sanity, catalogue="x.segmentation")
    assert sanity.verdict == "inconclusive"
    assert seg.verdict.startswith("not testable here: the precondition")
    assert "inconclusive" in seg.verdict and seg.vs_paper is None
    counts = tally([SuiteOutput("d", "D", "P", [sanity, seg])])["papers"]["P"]
    assert counts["not testable here"] == 1 and counts["reproduced"] == 0
    write_report(tmp_path, [SuiteOutput("d", "D", "P", [sanity, seg])], "r", [], mode="quick")
    data = json.loads((tmp_path / "report.json").read_text())
    validate_report(data)
    from helpers.report_audit import audit

    assert audit(data).problems == []
    good = Claim("d", "s", "src", "-", "d", up, measured=mean_interval([1, 1.1, 0.9]),
                 kind="sanity")
    seg.precondition = good
    assert seg.verdict == "reproduced"  # judged once its precondition holds
