"""The flows suite's claims (tokengeo.experiments.suites.flows): one catalogue entry per tallied
row, "settles" and "never settles" disjoint and read from the same measurements, the
identity judged once as dt -> 0 with each term in its detail, the clustering control at each
drift's own time-averaged weights, stated margins, and the values report.json keeps."""

from __future__ import annotations

import tomllib

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.experiments import catalogue
from tokengeo.experiments.cells import CellResult
from tokengeo.experiments.stats import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from tokengeo.experiments.suite import SuiteContext
from tokengeo.experiments.suites import flows
from tokengeo.experiments.suites.flows import common, identity

HEADS = [1, 4, 16]
T = [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.fixture(autouse=True)
def _no_figures(monkeypatch):
    """The claims, not the sweep figures (drawn and tested in test_figures)."""
    from tokengeo.experiments.suites.flows import scaling

    monkeypatch.setattr(scaling, "_sweep_figures", lambda *args: None)


def _flow(H: int, g2: float, w2: list[float], cos_T: list[float], stationary: float = 0.05):
    """A finished flow cell's value: G² flat at ``g2`` on every path, the cloud's late W₂
    movement ``w2`` and mean cosine at T per path."""
    P = len(w2)
    w2 = [w * (1 + 0.01 * k) for k, w in enumerate(w2)]  # paths differ a little
    return {"summary": {
        "n_heads": H, "seconds": 1.0, "g2_avg": [g2 * (1 + 0.01 * k) for k in range(P)], "E_T": [1.0] * P,
        "residual_T": [0.01] * P, "relative_residual_T": [0.01] * P,
        "terms_T": {"G2_int": [2.0] * P, "dE_int": [0.0] * P, "ito_int": [0.0] * P,
                    "mart_int": [0.0] * P},
        "clusters_T": [1] * P, "mean_cosine_T": cos_T, "mean_cosine_0": 0.0, "clusters_0": 6,
        "t_sampled": [0.0, 4.0], "clusters_t": [[6, 1]] * P,
        "mean_cosine_t": [[0.0, c] for c in cos_T], "w2_late": w2,
        "mean_weights_eig": [-1.0, 2.0],
        "stationarity_T": {"grad_norm2": [0.0] * P, "relative": [stationary] * P,
                           "field_relative": [stationary] * P},
        "stationarity_random": {"grad_norm2": [1.0] * P, "relative": [0.3] * P,
                                "field_relative": [0.3] * P}},
        "t": T, "G2": [[g2] * len(T)] * P, "E_mean": [1.0] * len(T), "figures": []}


def _convergence(H: int, identity_limit: float, gap: float):
    return {"convergence": {
        "n_heads": H, "drift": "x", "noise_var": 0.0, "dts": [0.04, 0.02, 0.01],
        "terms": {}, "balances": {"identity": [[0.1], [0.05], [identity_limit + 0.025]]},
        "dissipated": [1.0],
        "limits": {"identity": [identity_limit], "chain": [identity_limit - gap],
                   "gap": [gap], "arith": [-0.25], "power": [0.8], "metric": [0.7],
                   "strong": [1.3], "explicit": [-1.2]}}}


def _stability():
    part = {"sizes": [0.1, 0.01, 0.001], "max_distance": [[1.0]] * 3,
            "constant": [[1.0]] * 3, "energy_gap": [[1e-3]] * 3, "slopes": [0.99, 1.0, 1.01],
            "slope": {"value": 1.0, "lo": 0.98, "hi": 1.02, "n": 3, "exact": False}}
    return {"tokens": part, "weights": part}


def _settings(**changes):
    return {"heads": HEADS, "preset": {}, "exponent_tolerance": 0.3,
            "residual_tolerance": 0.05, "control_heads": [16], "residual_heads": [1, 2],
            "theory": {"dt_heads": [1, 4], "heads": 4},
            "long_run": {"T": 8.0, "heads": [4, 16]}} | changes


def _results(ou_w2=0.02, inphase_w2=0.6, osc_w2=0.6, long_w2=0.6, osc_cos=0.0, H4_gap=0.17):
    """A run in which OU settles (G² ~ 1/H, still), both oscillating drifts keep moving with
    a flat G², and the H = 4 identity has a kinetic gap."""
    cells = {}
    for H in HEADS:
        cells[f"ou-H{H}"] = _flow(H, 0.5 / H, [ou_w2] * 3, [0.0] * 3)
        cells[f"inphase-H{H}"] = _flow(H, 0.4, [inphase_w2], [0.0])
        cells[f"oscillating-H{H}"] = _flow(H, 0.3, [osc_w2], [osc_cos])
    for H in (4, 16):
        cells[f"long-oscillating-H{H}"] = _flow(H, 0.3, [long_w2], [0.0])
    cells["ou-H2"] = _flow(2, 0.25, [ou_w2] * 3, [0.0] * 3)
    cells["attractive-H16"] = _flow(16, 0.0, [0.0], [0.999])
    cells["ou-quiet-H16"] = _flow(16, 0.0, [0.0], [0.0], stationary=0.01)
    for drift in common.DRIFTS:  # the static flows at D̄ cluster
        P = 3 if drift == "ou" else 1
        cells[f"static-{drift}-H16"] = {"summary": {
            "mean_cosine_T": [0.99] * P, "clusters_T": [1] * P, "mean_weights_eig": [-2, -1]}}
    for drift in identity.IDENTITY_DRIFTS:
        cells[f"identity-{drift}-H1"] = _convergence(1, 1e-4, 0.0)
        cells[f"identity-{drift}-H4"] = _convergence(4, H4_gap, H4_gap)
        cells[f"theory-stability-{drift}"] = _stability()
    cells["theory-stability-inphase"] = _stability()
    return {k: CellResult(k, v) for k, v in cells.items()}


def _summarise(tmp_path, results, settings=None):
    return flows.summarise(settings or _settings(), results,
                           SuiteContext(tmp_path, tmp_path / "figures"))


def _row(out, entry):
    return next(c for c in out.claims if c.catalogue == entry and c.kind in ("paper",
                                                                              "stand-in"))


def test_every_tallied_row_is_one_catalogue_entry_and_the_report_keeps_the_contract(tmp_path):
    out = _summarise(tmp_path, _results())
    tallied = [c for c in out.claims if c.kind in ("paper", "stand-in")]
    ids = [c.catalogue for c in tallied]
    assert None not in ids and len(ids) == len(set(ids))
    rows = [c.to_dict("Massucco et al.") for c in out.claims]
    assert catalogue.check_report(catalogue.load(), rows) == []
    # the old duplicates are one row each: never settles, the identity, stationarity
    assert sum("never settles" in c.text for c in tallied) == 1
    assert sum("identity" in c.text for c in tallied) == 1
    assert sum("stationary" in c.text for c in tallied) == 1


def test_every_catalogue_test_names_a_row_the_suite_writes(tmp_path):
    texts = {f"flows:{c.text}" for c in _summarise(tmp_path, _results()).claims}
    entries = [e for e in catalogue.load() if e.paper == "pde"]
    assert {e.id for e in entries} >= {"pde.never-settles", "pde.energy-dissipation",
                                       "pde.clustering-not-universal"}
    for e in entries:
        assert set(e.tests) <= texts, e.id


def test_a_moving_cloud_with_a_flat_g2_never_settles(tmp_path):
    """Fails on the old rule, which asked G² to rise by > 0.5 decades over [T/2, T]: a flat
    G² was 'not reproduced' although the cloud never stopped."""
    out = _summarise(tmp_path, _results())
    never = _row(out, "pde.never-settles")
    assert never.verdict == REPRODUCED and never.rule_of_family == "all"
    assert [m.label for m in never.members] == [
        "inphase: moves", "inphase: level", "oscillating: moves", "oscillating: level",
        "long: moves", "long: level"]
    assert _row(out, "pde.ou-relaxes").verdict == REPRODUCED


@pytest.mark.parametrize("w2", [0.0, 0.05, 0.08, 0.1, 0.11, 0.13, 0.3])
@pytest.mark.parametrize("g2_falls", [True, False])
def test_settles_and_never_settles_cannot_both_hold(tmp_path, w2, g2_falls):
    results = _results(ou_w2=w2, inphase_w2=w2, osc_w2=w2, long_w2=w2)
    if g2_falls:
        for H in HEADS:
            for drift in ("inphase", "oscillating"):
                results[f"{drift}-H{H}"] = CellResult("k", _flow(H, 0.5 / H, [w2], [0.0]))
    # OU and oscillating read from identical cells: the two claims can never both hold
    for H in HEADS:
        results[f"ou-H{H}"] = results[f"inphase-H{H}"]
    results["static-ou-H16"] = results["static-inphase-H16"]
    settings = _settings(long_run=None)
    out = _summarise(tmp_path, results, settings)
    settles, never = _row(out, "pde.ou-relaxes"), _row(out, "pde.never-settles")
    assert not (settles.verdict == REPRODUCED and never.verdict == REPRODUCED)
    for a, b in zip(settles.members, never.members[:2], strict=True):  # disjoint regions
        assert a.region.high <= b.region.low or b.region.high <= a.region.low


def test_a_long_run_at_one_h_is_read_by_its_movement_only(tmp_path):
    out = _summarise(tmp_path, _results(), _settings(long_run={"T": 8.0, "heads": [16]}))
    labels = [m.label for m in _row(out, "pde.never-settles").members]
    assert labels[-1] == "long: moves" and "long: level" not in labels


def test_a_movement_within_the_stated_margin_is_inconclusive(tmp_path):
    """The margin is applied by the verdict (Region.margin): W₂ 0.11 against > 0.1 ± 0.02."""
    w2 = common.MOVING_W2 + common.MOVING_MARGIN / 2
    out = _summarise(tmp_path, _results(long_w2=w2))
    never = _row(out, "pde.never-settles")
    long = next(m for m in never.members if m.label == "long: moves")
    assert long.region.margin == common.MOVING_MARGIN and long.verdict == INCONCLUSIVE
    assert never.verdict == INCONCLUSIVE


def test_the_identity_is_judged_once_as_dt_goes_to_zero_and_names_the_failing_term(tmp_path):
    out = _summarise(tmp_path, _results())
    row = _row(out, "pde.energy-dissipation")
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


def test_every_member_of_a_flows_family_knows_its_family_size(tmp_path):
    """Fails on the old code: the clustering family's members had holm_size 1."""
    out = _summarise(tmp_path, _results())
    row = _row(out, "pde.clustering-not-universal")
    assert [m.holm_size for m in row.members] == [3, 3, 3]
    never = _row(out, "pde.never-settles")
    assert {m.holm_size for m in never.members} == {len(never.members)}


def test_clustering_is_judged_against_each_drifts_own_static_average(tmp_path):
    results = _results(osc_cos=0.999)
    results["static-oscillating-H16"].value["summary"]["mean_cosine_T"] = [0.96]
    out = _summarise(tmp_path, results)
    row = _row(out, "pde.clustering-not-universal")
    by = {m.label: m for m in row.members}
    assert by["inphase"].verdict == REPRODUCED  # 0.0 − 0.99: far below its static flow
    assert by["oscillating"].verdict == INCONCLUSIVE  # 0.999 − 0.96: within the margin
    assert row.rule_of_family == "any" and row.verdict == REPRODUCED
    assert "static at D̄" in by["ou"].detail


def test_a_static_flow_that_spreads_cannot_show_prevention(tmp_path):
    results = _results()
    results["static-ou-H16"].value["summary"]["mean_cosine_T"] = [0.99, -0.01, 0.99]
    row = _row(_summarise(tmp_path, results), "pde.clustering-not-universal")
    assert row.verdict.startswith("not testable here: the precondition")
    assert all(m.measured is not None for m in row.members)


def test_values_are_stored_so_the_report_can_be_recomputed(tmp_path):
    out = _summarise(tmp_path, _results())
    for c in out.claims:
        for m in (c.members or [c]):
            if m.measured is not None:
                assert m.to_dict()["interval"]["values"], m.text


def test_a_step_in_h_is_a_slope_not_an_exponent(tmp_path):
    results = _results()
    for H, g2 in zip(HEADS, (0.3, 1e-3, 9e-4), strict=True):  # a step between H = 1 and 4
        results[f"oscillating-H{H}"] = CellResult("k", _flow(H, g2, [0.6], [0.0]))
    out = _summarise(tmp_path, results)
    slope = next(c for c in out.claims if "693474c" in c.text and "falls with H" in c.text)
    assert slope.detail.startswith("not a power law") and "b = " not in slope.detail
    assert "slope = " in slope.detail


def test_a_missing_cell_leaves_each_row_not_run_with_its_reason(tmp_path):
    results = _results()
    del results["long-oscillating-H16"], results["identity-ou-H4"], results["static-ou-H16"]
    out = _summarise(tmp_path, results)
    for entry in ("pde.never-settles", "pde.energy-dissipation",
                  "pde.clustering-not-universal"):
        assert _row(out, entry).verdict == "not run: cell missing", entry


def test_the_control_replays_the_flow_cells_weight_path_exactly():
    from tokengeo.experiments.suites.flows.runs import weight_records
    from tokengeo.flows.presets import get_preset
    from tokengeo.flows.simulate import simulate

    p = get_preset("s2-ou", n_tokens=6, n_paths=2, T=0.2, dt=0.02, record_every=2)
    x0, D0 = p.initial_state(3)
    res = simulate(x0, D0, p.flow_config(record_weights=True))
    t, path = weight_records(p, 3)
    torch.testing.assert_close(t, res.t)
    torch.testing.assert_close(path, res.weight_path, rtol=0, atol=0)


def test_the_static_control_cell_runs_at_the_drifts_time_average():
    from tokengeo.experiments.suites.flows.runs import static_mean_cell

    out = static_mean_cell("s2-oscillating-inphase", 2,
                           {"n_tokens": 8, "T": 0.4, "dt": 0.02, "record_every": 2})
    s = out["summary"]
    assert len(s["mean_cosine_T"]) == 1 and -1 <= s["mean_cosine_T"][0] <= 1
    lo, hi = s["mean_weights_eig"]
    assert lo <= hi


@pytest.mark.parametrize("line,match", [
    ("control_heads = [4, 4]", "repeats an H"),
    ("residual_heads = [0]", "whole numbers >= 1"),
    ("long_run = { T = 40.0 }", "long_run must be"),
    ("long_run = { T = -1.0, heads = [4, 8] }", "long_run must be"),
    ("long_run = { T = 4.0, heads = [] }", "long_run must be"),
    ("long_run = { T = 4.0, heads = [4, 4] }", "repeats an H"),
])
def test_bad_flows_settings_are_refused_by_name(line, match, tmp_path):
    from tokengeo.experiments.settings import check_settings

    settings = {"exponent_tolerance": 0.3, "residual_tolerance": 0.05, "heads": [1, 4],
                "preset": {}} | tomllib.loads(line)
    with pytest.raises(ConfigError, match=match):
        check_settings("flows", tmp_path / "flows.toml", settings, flows.SETTINGS)


def test_theory_dts_must_halve(tmp_path):
    from tokengeo.experiments.settings import check_settings

    theory = {"n_tokens": 8, "T": 1.0, "dt": 0.1, "heads": 2, "dt_heads": [1],
              "dts": [0.04, 0.03, 0.01], "eps": [1e-2, 1e-3, 1e-4],
              "deltas": [1e-1, 1e-2, 1e-3], "directions": 2, "record_every": 2}
    settings = {"exponent_tolerance": 0.3, "residual_tolerance": 0.05, "heads": [1, 4],
                "preset": {}, "theory": theory}
    with pytest.raises(ConfigError, match="halve"):
        check_settings("flows", tmp_path / "flows.toml", settings, flows.SETTINGS)

