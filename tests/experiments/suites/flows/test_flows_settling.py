"""Settling (suites/flows/settling.py): 'settles' and 'never settles' read from the same two
measurements (W₂ movement over [T/2, T], G²'s level against H), disjoint, margins applied."""

from __future__ import annotations

import pytest
from helpers.flows_cells import (
    HEADS,
    flow_value,
    suite_results,
    suite_settings,
    summarise_cells,
    tallied_row,
)

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.stats import INCONCLUSIVE, REPRODUCED
from tokengeo.experiments.suites.flows import common


def test_a_moving_cloud_with_a_flat_g2_never_settles(tmp_path):
    """Fails on the old rule, which asked G² to rise by > 0.5 decades over [T/2, T]: a flat
    G² was 'not reproduced' although the cloud never stopped."""
    out = summarise_cells(tmp_path, suite_results())
    never = tallied_row(out, "pde.never-settles")
    assert never.verdict == REPRODUCED and never.rule_of_family == "all"
    assert [m.label for m in never.members] == [
        "inphase: moves", "inphase: level", "oscillating: moves", "oscillating: level",
        "long: moves", "long: level"]
    assert tallied_row(out, "pde.ou-relaxes").verdict == REPRODUCED


@pytest.mark.parametrize("w2", [0.0, 0.05, 0.08, 0.1, 0.11, 0.13, 0.3])
@pytest.mark.parametrize("g2_falls", [True, False])
def test_settles_and_never_settles_cannot_both_hold(tmp_path, w2, g2_falls):
    results = suite_results(ou_w2=w2, inphase_w2=w2, osc_w2=w2, long_w2=w2)
    if g2_falls:
        for H in HEADS:
            for drift in ("inphase", "oscillating"):
                results[f"{drift}-H{H}"] = CellResult("k", flow_value(H, 0.5 / H, [w2], [0.0]))
    # OU and oscillating read from identical cells: the two claims can never both hold
    for H in HEADS:
        results[f"ou-H{H}"] = results[f"inphase-H{H}"]
    results["static-ou-H16"] = results["static-inphase-H16"]
    settings = suite_settings(long_run=None)
    out = summarise_cells(tmp_path, results, settings)
    settles, never = tallied_row(out, "pde.ou-relaxes"), tallied_row(out, "pde.never-settles")
    assert not (settles.verdict == REPRODUCED and never.verdict == REPRODUCED)
    for a, b in zip(settles.members, never.members[:2], strict=True):  # disjoint regions
        assert a.region.high <= b.region.low or b.region.high <= a.region.low


def test_a_long_run_at_one_h_is_read_by_its_movement_only(tmp_path):
    out = summarise_cells(tmp_path, suite_results(), suite_settings(long_run={"T": 8.0, "heads": [16]}))
    labels = [m.label for m in tallied_row(out, "pde.never-settles").members]
    assert labels[-1] == "long: moves" and "long: level" not in labels


def test_a_movement_within_the_stated_margin_is_inconclusive(tmp_path):
    """The margin is applied by the verdict (Region.margin): W₂ 0.11 against > 0.1 ± 0.02."""
    w2 = common.MOVING_W2 + common.MOVING_MARGIN / 2
    out = summarise_cells(tmp_path, suite_results(long_w2=w2))
    never = tallied_row(out, "pde.never-settles")
    long = next(m for m in never.members if m.label == "long: moves")
    assert long.region.margin == common.MOVING_MARGIN and long.verdict == INCONCLUSIVE
    assert never.verdict == INCONCLUSIVE
