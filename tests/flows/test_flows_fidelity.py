"""Issue #17, items 1-2: the flows presets at the authors' settings and the settling test."""

from __future__ import annotations

import math

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.experiments.cells import CellResult
from tokengeo.flows import simulate
from tokengeo.flows.diagnostics import SETTLING_VERDICTS, classify_settling, g2_trend
from tokengeo.flows.presets import PRESETS, get_preset, initial_tokens

F64 = torch.float64

pytestmark = pytest.mark.usefixtures("one_thread")


def _vertices(d: int) -> torch.Tensor:
    return torch.cat([torch.eye(d), -torch.eye(d)]).double()  # (2d, d)


def test_oscillating_preset_has_no_weight_noise_and_ou_keeps_it():
    osc, ou = get_preset("s2-oscillating"), get_preset("s2-ou")
    assert osc.drift == "oscillating" and osc.noise_var == 0.0
    assert osc.flow_config().noise_var == 0.0
    assert ou.drift == "ou" and ou.noise_var == 2.0
    for p in (osc, ou):
        assert (p.n_tokens, p.T, p.dt, p.n_paths, p.init_std) == (200, 20.0, 5e-3, 10, 0.05)


def test_the_old_noisy_oscillating_variant_keeps_its_own_name():
    noisy, osc = get_preset("s2-oscillating-noisy"), get_preset("s2-oscillating")
    assert noisy.drift == "oscillating" and noisy.noise_var == 2.0
    assert {"s2-ou", "s2-oscillating", "s2-oscillating-noisy"} <= set(PRESETS)
    same = [f for f in ("d", "n_tokens", "T", "dt", "n_paths", "init", "init_std", "seed")
            if getattr(noisy, f) == getattr(osc, f)]
    assert len(same) == 8


@pytest.mark.parametrize("name", ["s2-ou", "s2-oscillating", "s2-oscillating-inphase",
                                  "s1-oscillating"])
def test_every_path_starts_from_one_shared_token_state(name):
    p = get_preset(name, n_paths=4, n_tokens=30)
    x0, D0 = p.initial_state(3)
    assert x0.shape == (4, 30, p.d) and D0.shape == (4, 3, p.d, p.d)
    for k in range(1, 4):
        assert torch.equal(x0[k], x0[0])
        assert torch.equal(D0[k], D0[0])  # one D_h(0) for every path, as the authors do
    assert torch.equal(p.initial_state(5)[0], x0)  # and every H starts from the same tokens
    x0[0, 0, 0] = 7.0  # a copy, not a view of one row
    D0[0, 0, 0, 0] = 7.0
    assert x0[1, 0, 0] != 7.0 and D0[1, 0, 0, 0] != 7.0


def test_per_path_weights_are_an_option_whose_first_path_is_the_shared_draw():
    shared = get_preset("s2-ou", n_paths=4, n_tokens=30).initial_state(3)
    p = get_preset("s2-ou", n_paths=4, n_tokens=30, per_path_weights=True)
    x0, D0 = p.initial_state(3)
    assert torch.equal(x0, shared[0]) and torch.equal(D0[0], shared[1][0])
    assert all(not torch.equal(D0[k], D0[0]) for k in range(1, 4))
    assert torch.equal(D0, D0.mT)
    with pytest.raises(ConfigError, match="per_path_weights"):
        get_preset("s2-ou", per_path_weights="yes")


def test_initial_tokens_take_a_random_vertex_per_token():
    n = 6000
    x = initial_tokens("octahedron", n, 3, 0.05, torch.Generator().manual_seed(0), dtype=F64)
    nearest = (x @ _vertices(3).T).argmax(-1)  # (n,)
    counts = torch.bincount(nearest, minlength=6).double()
    assert ((counts / n - 1 / 6).abs() < 0.02).all()  # uniform over the 6 vertices
    cyclic = (nearest == torch.arange(n) % 6).double().mean()
    assert abs(cyclic - 1 / 6) < 0.03  # not token i at vertex i mod 2d


def test_initial_token_noise_has_standard_deviation_0_05():
    p = get_preset("s2-ou", n_tokens=20000, n_paths=1)
    x = p.initial_state(1)[0][0]  # (n, 3)
    v = _vertices(3)
    center = v[(x @ v.T).argmax(-1)]  # (n, 3)
    # the offset's two components across the vertex: x_t = 0.05 g_t / |c + 0.05 g| ~ 0.05 g_t
    tangent = (x - center * (x * center).sum(-1, keepdim=True))[center.abs().sum(-1) > 0]
    tangent = tangent[center == 0].reshape(-1)  # (2n,)
    assert tangent.std().item() == pytest.approx(0.05, rel=0.03)
    assert tangent.mean().abs().item() < 2e-3


def test_without_weight_noise_paths_differ_only_by_their_initial_weights():
    p = get_preset("s2-oscillating", n_tokens=10, n_paths=3, T=0.2, dt=0.02, record_every=2,
                   per_path_weights=True)
    x0, D0 = p.initial_state(2)
    D0[2] = D0[0]  # path 2 gets path 0's weights
    r = simulate(x0, D0, p.flow_config())
    assert torch.equal(r.G2[2], r.G2[0]) and torch.equal(r.x_final[2], r.x_final[0])
    assert not torch.allclose(r.G2[1], r.G2[0])


# ---- the settling statistic on synthetic G² curves ------------------------------------------

T_GRID = torch.linspace(0.0, 20.0, 401, dtype=F64)  # (R,)


def _paths(curve, heads, P=6, seed=0):
    """Per H, P paths of curve(t, H, path_noise (R,)), each (P, R)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.stack([curve(T_GRID, H, torch.randn(T_GRID.shape, generator=g, dtype=F64))
                         for _ in range(P)]) for H in heads]


def _verdict(series, heads):
    trends = [g2_trend(T_GRID, s, 10.0) for s in series]
    levels = [s[:, T_GRID >= 10.0].mean(1) for s in series]
    return classify_settling(heads, trends, levels)


def test_g2_trend_counts_decades_over_the_window():
    series = torch.stack([10 ** (-T_GRID / 5), 3 + 0 * T_GRID, 10 ** (T_GRID / 20)])  # (3, R)
    trend = g2_trend(T_GRID, series, 10.0)
    torch.testing.assert_close(trend, torch.tensor([-2.0, 0.0, 0.5], dtype=F64))
    with pytest.raises(ConfigError, match="records"):
        g2_trend(T_GRID, series, 19.99)


HEADS = [1, 10, 100]


def test_a_curve_decaying_to_a_one_over_h_floor_settles():
    def ou_like(t, H, xi):  # fast transient, then a noisy floor ~ 1/H
        return 5 * torch.exp(-4 * t) + 0.5 / H * torch.exp(0.3 * xi)

    s = _verdict(_paths(ou_like, HEADS), HEADS)
    assert s.verdict == "settles at a noise floor"
    assert all(abs(m) < 0.2 for m in s.trend) and s.exponent == pytest.approx(-1, abs=0.05)
    # the old rule (late/early G² < 0.1 over the first and last 10% of time) is not it:
    old = [(x[:, T_GRID >= 18].mean(1) / x[:, T_GRID <= 2].mean(1)) for x in
           _paths(lambda t, H, xi: 0.5 / H * torch.exp(0.3 * xi) + 0 * t, HEADS)]
    assert all((r > 0.1).all() for r in old)  # a floor from t = 0 fails it, yet settles


def test_a_flat_oscillating_curve_never_settles():
    def oscillating(t, H, xi):  # H-independent, periodic, a random phase per path
        return 0.3 * (1 + 0.5 * torch.sin(2 * t + xi[0]))

    s = _verdict(_paths(oscillating, HEADS), HEADS)
    assert s.verdict == "never settles" and abs(s.exponent) < 0.05


def test_a_collapsing_or_growing_curve_is_named_so():
    collapse = _verdict(_paths(lambda t, H, xi: torch.exp(-0.5 * t) / H, HEADS), HEADS)
    assert collapse.verdict == "collapses" and collapse.trend[-1] == pytest.approx(-2.17, abs=0.01)
    grow = _verdict(_paths(lambda t, H, xi: torch.exp(0.5 * t), HEADS), HEADS)
    assert grow.verdict == "grows"
    assert {collapse.verdict, grow.verdict} < set(SETTLING_VERDICTS)


def test_classify_settling_bad_input():
    one = torch.ones(3, dtype=F64)
    with pytest.raises(ConfigError, match="per H"):
        classify_settling([1, 2], [one], [one, one])
    with pytest.raises(ConfigError, match="tolerance"):
        classify_settling([1, 2], [one, one], [one, 2 * one], tolerance=0.0)


def _cell(t, g2, H):
    P = g2.shape[0]
    summary = {"n_heads": H, "seconds": 0.0, "relative_residual_T": [0.01] * P,
               "residual_T": [0.01] * P, "terms_T": {"G2_int": [1.0] * P},
               "clusters_T": [1] * P, "mean_cosine_T": [0.9] * P, "mean_cosine_0": 0.0,
               "clusters_0": 6,
               "g2_avg": g2[:, t >= t[-1] / 2].mean(1).tolist()}
    return {"summary": summary, "t": t.tolist(), "G2": g2.tolist(), "figures": []}


def test_suite_settling_claims_separate_a_noise_floor_from_a_collapse(tmp_path):
    from tokengeo.experiments.suites import flows as suite

    heads = [1, 4, 16]
    floor = _paths(lambda t, H, xi: 0.5 / H * torch.exp(0.3 * xi), heads)
    collapse = _paths(lambda t, H, xi: torch.exp(-0.5 * t) / H**2, heads)
    flat = _paths(lambda t, H, xi: 0.3 + 0 * t, heads, P=1)
    results = {f"{drift}-H{H}": CellResult(f"{drift}-H{H}", _cell(T_GRID, s, H))
               for drift, series in (("ou", floor), ("oscillating", collapse),
                                     ("inphase", flat))
               for H, s in zip(heads, series, strict=True)}
    settings = {"heads": heads, "preset": {}, "exponent_tolerance": 0.3,
                "residual_tolerance": 0.05, "settling_tolerance": 0.5}
    from tokengeo.experiments.suite import SuiteContext

    out = suite.summarise(settings, results, SuiteContext(tmp_path, tmp_path / "figures"))
    settle = {c.text.split(":")[0]: c for c in out.claims if "settle" in c.text}
    ou, osc = settle["OU weights"], settle[suite.DRIFT_LABEL["oscillating"]]
    inphase = settle[suite.DRIFT_LABEL["inphase"]]
    assert ou.verdict == "reproduced" and "settles at a noise floor" in ou.detail
    assert osc.verdict == "not reproduced" and "collapses" in osc.detail
    assert osc.kind == "stand-in" and "693474c" in osc.proxy
    assert "H=1: -2.17 falling" in osc.detail  # judged per H, not only at the largest
    assert math.isclose(osc.measured.mean, -2.17, abs_tol=0.01)
    # a flat G² settles: "never settles" (a region disjoint from "settles") does not hold
    assert inphase.verdict == "not reproduced" and inphase.kind == "paper"
    exps = {c.text.split(":")[0]: c for c in out.claims if "b " in c.text or "b <" in c.text}
    b_in = exps[suite.DRIFT_LABEL["inphase"].replace(" (496b2f6)", "")
                + " (the paper's figure, commit 496b2f6)"]
    assert b_in.measured.exact and abs(b_in.measured.mean) < 1e-9
    assert b_in.verdict == "reproduced" and b_in.paper_effect == 0.0
    b_osc = next(c for c in out.claims if "693474c" in c.text and "b < 0" in c.text)
    assert b_osc.verdict == "reproduced" and math.isclose(b_osc.measured.mean, -2.0,
                                                          abs_tol=0.05)
    assert "curve_fit" in b_osc.detail and "Local slopes" in b_osc.detail
    assert any("496b2f6" in n and "by construction" in n for n in out.notes)


def _balance_run(tmp_path, residual_by_heads, heads=(1, 4, 16)):
    """The flows suite on OU cells whose residual at T is ``residual_by_heads[H]`` (one
    value per path, or one for all) of a dissipated energy ∫G² = 0.5."""
    from tokengeo.experiments.suite import SuiteContext
    from tokengeo.experiments.suites import flows as suite

    heads = list(heads)
    series = _paths(lambda t, H, xi: 0.5 / H * torch.exp(0.3 * xi), heads)
    results = {f"ou-H{H}": CellResult(f"ou-H{H}", _cell(T_GRID, s, H))
               for H, s in zip(heads, series, strict=True)}
    for H in heads:
        summary = results[f"ou-H{H}"].value["summary"]
        n = len(summary["residual_T"])
        res = residual_by_heads[H]
        summary["residual_T"] = list(res) if isinstance(res, list) else [res] * n
        summary["terms_T"]["G2_int"] = [0.5] * len(summary["residual_T"])
    settings = {"heads": heads, "preset": {}, "exponent_tolerance": 0.3,
                "residual_tolerance": 0.05, "settling_tolerance": 0.5}
    return suite.summarise(settings, results, SuiteContext(tmp_path, tmp_path / "figures"))


def test_the_runs_table_and_the_balance_claim_share_one_signed_normalisation(tmp_path):
    # H = 1: residual −0.02 of ∫G² = 0.5 (−0.04); H > 1: +0.2 (+0.4), where the paper
    # states no identity (the multi-head velocity is not a gradient of E)
    out = _balance_run(tmp_path, {1: -0.02, 4: 0.2, 16: 0.2})
    col = out.tables[0][1].index("residual / ∫G² (largest |·|)")
    assert [row[col] for row in out.tables[0][2]] == ["-4.00e-02", "+4.00e-01", "+4.00e-01"]
    balance = next(c for c in out.claims if "identity closes in every H = 1 run" in c.text)
    assert balance.kind == "paper" and balance.margin == 0.05  # tallied, its margin stated
    assert (balance.region.low, balance.region.high) == (-0.05, 0.05)
    assert balance.measured.mean == pytest.approx(-0.04)  # the same number, signed
    assert balance.verdict == "reproduced"  # H > 1 runs are reported, not judged
    assert "at H = 1: from -4.00e-02" in balance.detail
    assert "H > 1 (not judged" in balance.detail and "+4.00e-01" in balance.detail


def test_the_balance_is_judged_on_the_h1_path_with_the_least_slack(tmp_path):
    paths = next(len(c.measured.values) for c in _balance_run(
        tmp_path / "b", {1: 0.0, 4: 0.0, 16: 0.0}).claims if "every H = 1 run" in c.text)
    assert paths >= 2  # OU: several paths of the H = 1 run
    # one path at +0.03·0.5, one at −0.045·0.5: the worst is the negative one (least slack)
    h1 = [0.015, -0.0225] + [0.0] * (paths - 2)
    out = _balance_run(tmp_path / "c", {1: h1, 4: 0.5, 16: 0.5})
    balance = next(c for c in out.claims if "every H = 1 run" in c.text)
    assert balance.measured.mean == pytest.approx(-0.045) and balance.verdict == "reproduced"
    h1[0] = 0.03  # +0.06 of ∫G²: outside the margin
    out = _balance_run(tmp_path / "d", {1: h1, 4: 0.0, 16: 0.0})
    balance = next(c for c in out.claims if "every H = 1 run" in c.text)
    assert balance.measured.mean == pytest.approx(0.06) and balance.verdict == "not reproduced"


def test_no_h1_run_leaves_the_identity_not_run_with_its_reason(tmp_path):
    out = _balance_run(tmp_path, {4: 0.1, 16: 0.1}, heads=(4, 16))
    balance = next(c for c in out.claims if "every H = 1 run" in c.text)
    assert balance.not_run and "add 1 to `heads`" in balance.not_run
