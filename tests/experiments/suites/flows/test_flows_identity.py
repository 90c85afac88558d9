"""The energy-dissipation identity row (suites/flows/identity.py): judged once as dt -> 0,
each term's limit in its members' details, the simulator's residual a table."""

from __future__ import annotations

from helpers.flows_cells import (
    suite_results,
    summarise_cells,
    tallied_row,
)

from tokengeo.experiments.stats import NOT_REPRODUCED, REPRODUCED


def test_the_identity_is_judged_once_as_dt_goes_to_zero_and_names_the_failing_term(tmp_path):
    out = summarise_cells(tmp_path, suite_results())
    row = tallied_row(out, "pde.energy-dissipation")
    assert row.kind == "paper" and row.rule_of_family == "all"
    by = {m.label: m for m in row.members}
    assert by["oscillating H=1"].verdict == REPRODUCED
    assert by["ou H=4"].verdict == NOT_REPRODUCED and by["ou H=4"].measured.exact
    assert row.verdict == NOT_REPRODUCED and "kinetic gap" in row.detail
    # every term's limit, signed, in the member's detail (the sign change is visible)
    detail = by["ou H=4"].detail
    assert "+1.700e-01" in detail and "chain rule" in detail and "-2.500e-01" in detail
    assert "∫|μ'|²" in detail and "∫∂E/∂t" in detail
    # the residual at the run's dt is a table, not a claim
    assert not [c for c in out.claims if "every H = 1 run" in c.text]
    table = next(t for t in out.tables if t[0].startswith("signed energy balance"))
    assert [r[0] for r in table[2]] == ["H=1", "H=2", "H=4", "H=16"]
