"""The H sweep's rows (suites/flows/scaling.py): an exponent only where a power law fits."""

from __future__ import annotations

from helpers.flows_cells import (
    HEADS,
    flow_value,
    suite_results,
    summarise_cells,
)

from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.suites import flows


def test_a_step_in_h_is_a_slope_not_an_exponent(tmp_path):
    results = suite_results()
    for H, g2 in zip(HEADS, (0.3, 1e-3, 9e-4), strict=True):  # a step between H = 1 and 4
        results[f"oscillating-H{H}"] = CellResult("k", flow_value(H, g2, [0.6], [0.0]))
    out = summarise_cells(tmp_path, results)
    slope = next(c for c in out.claims if "693474c" in c.text and "falls with H" in c.text)
    assert slope.detail.startswith("not a power law") and "b = " not in slope.detail
    assert "slope = " in slope.detail


def _slopes(values, exact=True):
    return [{"h0": h, "h1": h * 2, "slope": v, "lo": v - 0.05, "hi": v + 0.05, "exact": exact}
            for h, v in zip((1, 2, 4, 8), values, strict=False)]


def test_an_exponent_is_quoted_only_where_a_power_law_fits():
    assert flows.power_law_shape(_slopes([-1.0, -0.9, -1.1]), 0.3) is None
    # a step between H = 2 and 8, flat beyond (the per-head drift): no exponent
    shape = flows.power_law_shape(_slopes([-0.1, -3.5, -2.0, -0.2]), 0.3)
    assert shape.startswith("not a power law") and "−" not in shape and "-3.50" in shape
    # stochastic slopes: overlapping intervals within the tolerance still fit
    assert flows.power_law_shape(_slopes([-1.0, -1.5], exact=False), 0.3) is None
