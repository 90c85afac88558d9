"""A quick run's report shows, beside each verdict, the published full run's verdict for the
same catalogue entry (matched by the rows' ``catalogue`` id), read through the validating
reader; rows without an id, or ids the full run lacks, show none."""

from __future__ import annotations

import json

from helpers.report_dicts import claim, report

from tokengeo.experiments.report import published_run
from tokengeo.reporting.document import document, published_verdicts
from tokengeo.reporting.reader import check_report
from tokengeo.reporting.render import markdown


def _pair() -> tuple[dict, dict]:
    full = report([claim(claim="settles", catalogue="pde.settles", verdict="not reproduced"),
                   claim(claim="other", catalogue="pde.other", verdict="inconclusive"),
                   claim(claim="no id", verdict="reproduced")], mode="full", commit="f00d1234")
    quick = report([claim(claim="settles", catalogue="pde.settles", verdict="inconclusive"),
                    claim(claim="no id", verdict="inconclusive"),
                    claim(claim="new here", catalogue="pde.new", verdict="inconclusive")])
    return full, quick


def _summary(md: str) -> dict[str, list[str]]:
    rows = md.split("## Summary")[1].split("\n## ")[0].strip().splitlines()[2:]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    return {r[2]: r for r in cells}


def test_the_summary_shows_the_full_runs_verdict_by_catalogue_id(tmp_path):
    full, quick = _pair()
    quick["published"] = published_verdicts(full)
    md = markdown(document(check_report(quick)), tmp_path)
    rows = _summary(md)
    assert "| verdict | full run | vs paper |" in md
    assert rows["settles"][-3:-1] == ["inconclusive", "not reproduced"]
    assert rows["no id"][-2] == "—" and rows["new here"][-2] == "—"
    assert "The published full run (commit `f00d123`) found: **not reproduced**." in md
    assert md.count("The published full run") == 1  # only the row with a matching id


def test_without_published_verdicts_the_report_has_no_full_run_column(tmp_path):
    _, quick = _pair()
    md = markdown(document(check_report(quick)), tmp_path)
    assert "full run" not in md and "published full run" not in md


def test_published_run_reads_through_the_validating_reader(tmp_path):
    full, _ = _pair()
    path = tmp_path / "report.json"
    path.write_text(json.dumps(full))
    verdicts, problem = published_run("quick", path)
    assert problem is None and verdicts == {
        "commit": "f00d1234", "verdicts": {"pde.settles": "not reproduced",
                                           "pde.other": "inconclusive"}}
    assert published_run("full", path) == (None, None)
    assert published_run("quick", tmp_path / "none.json") == (None, None)
    del full["claims"][0]["verdict"]
    path.write_text(json.dumps(full))
    verdicts, problem = published_run("quick", path)
    assert verdicts is None and "claims[0]: the field 'verdict' is missing" in problem


def test_the_published_repository_report_reads_and_keys_by_catalogue():
    from tokengeo.experiments.report import PUBLISHED

    verdicts, problem = published_run("quick", PUBLISHED)
    assert problem is None and verdicts is not None
    ids = [c.get("catalogue") for c in json.loads(PUBLISHED.read_text())["claims"]
           if c.get("catalogue")]
    assert sorted(verdicts["verdicts"]) == sorted(ids)  # empty until the rows carry ids
