"""The flows suite's report (suites/flows/summary.py): one catalogue entry per tallied row, the
families' sizes, the values report.json keeps, and why a row is not run."""

from __future__ import annotations

from helpers.flows_cells import (
    suite_results,
    suite_settings,
    summarise_cells,
    tallied_row,
)

from tokengeo.experiments import catalogue


def test_every_tallied_row_is_one_catalogue_entry_and_the_report_keeps_the_contract(tmp_path):
    out = summarise_cells(tmp_path, suite_results())
    tallied = [c for c in out.claims if c.kind in ("paper", "stand-in")]
    ids = [c.catalogue for c in tallied]
    assert None not in ids and len(ids) == len(set(ids))
    rows = [c.to_dict("Massucco et al.") for c in out.claims]
    assert catalogue.check_report(catalogue.load(), rows) == []
    # the old duplicates are one row each: never settles, the identity, stationarity
    assert sum("never settles" in c.text for c in tallied) == 1
    assert sum("identity" in c.text for c in tallied) == 1
    assert sum("stationary" in c.text for c in tallied) == 1
    # every row that names an entry, tallied or not, is its only row: the published verdicts
    # a quick report shows are keyed by entry, so a second row would overwrite the first
    named = [c.catalogue for c in out.claims if c.catalogue]
    assert len(named) == len(set(named))
    for entry in ("pde.input-stability", "pde.weight-perturbation"):
        row = next(c for c in out.claims if c.catalogue == entry)
        assert row.rule_of_family == "all" and len(row.members) == 3  # one per weight path
        assert all(not m.catalogue for m in row.members)


def test_every_catalogue_test_names_a_row_the_suite_writes(tmp_path):
    texts = {f"flows:{c.text}" for c in summarise_cells(tmp_path, suite_results()).claims}
    entries = [e for e in catalogue.load() if e.paper == "pde"]
    assert {e.id for e in entries} >= {"pde.never-settles", "pde.energy-dissipation",
                                       "pde.clustering-not-universal"}
    for e in entries:
        assert set(e.tests) <= texts, e.id


def test_every_member_of_a_flows_family_knows_its_family_size(tmp_path):
    """Fails on the old code: the clustering family's members had holm_size 1."""
    out = summarise_cells(tmp_path, suite_results())
    row = tallied_row(out, "pde.clustering-not-universal")
    assert [m.holm_size for m in row.members] == [3, 3, 3]
    never = tallied_row(out, "pde.never-settles")
    assert {m.holm_size for m in never.members} == {len(never.members)}


def test_values_are_stored_so_the_report_can_be_recomputed(tmp_path):
    out = summarise_cells(tmp_path, suite_results())
    for c in out.claims:
        for m in (c.members or [c]):
            if m.measured is not None:
                assert m.to_dict()["interval"]["values"], m.text


def test_a_missing_cell_leaves_each_row_not_run_with_its_reason(tmp_path):
    results = suite_results()
    del results["long-oscillating-H16"], results["identity-ou-H4"], results["static-ou-H16"]
    out = summarise_cells(tmp_path, results)
    for entry in ("pde.never-settles", "pde.energy-dissipation",
                  "pde.clustering-not-universal"):
        assert tallied_row(out, entry).verdict == "not run: cell missing", entry


def test_without_a_theory_table_no_theory_row_is_written(tmp_path):
    settings = suite_settings()
    del settings["theory"]
    out = summarise_cells(tmp_path, suite_results(), settings)
    assert not [c for c in out.claims if c.catalogue in ("pde.energy-dissipation",
                                                         "pde.input-stability",
                                                         "pde.weight-perturbation")]
    rows = [c.to_dict("Massucco et al.") for c in out.claims]
    problems = catalogue.check_report(catalogue.load(), rows)
    assert problems and all(p.startswith(("pde.energy-dissipation", "pde.input-stability",
                                          "pde.weight-perturbation")) for p in problems)
