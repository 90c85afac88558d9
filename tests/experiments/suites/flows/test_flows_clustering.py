"""Clustering (suites/flows/clustering.py): each drift against the static flow at its own
time-averaged weights, whose clustering is the row's precondition."""

from __future__ import annotations

from helpers.flows_cells import (
    suite_results,
    summarise_cells,
    tallied_row,
)

from tokengeo.experiments.stats import INCONCLUSIVE, REPRODUCED


def test_clustering_is_judged_against_each_drifts_own_static_average(tmp_path):
    results = suite_results(osc_cos=0.999)
    results["static-oscillating-H16"].value["summary"]["mean_cosine_T"] = [0.96]
    out = summarise_cells(tmp_path, results)
    row = tallied_row(out, "pde.clustering-not-universal")
    by = {m.label: m for m in row.members}
    assert by["inphase"].verdict == REPRODUCED  # 0.0 − 0.99: far below its static flow
    assert by["oscillating"].verdict == INCONCLUSIVE  # 0.999 − 0.96: within the margin
    assert row.rule_of_family == "any" and row.verdict == REPRODUCED
    assert "static at D̄" in by["ou"].detail


def test_a_static_flow_that_spreads_cannot_show_prevention(tmp_path):
    results = suite_results()
    results["static-ou-H16"].value["summary"]["mean_cosine_T"] = [0.99, -0.01, 0.99]
    row = tallied_row(summarise_cells(tmp_path, results), "pde.clustering-not-universal")
    assert row.verdict.startswith("not testable here: the precondition")
    assert all(m.measured is not None for m in row.members)
