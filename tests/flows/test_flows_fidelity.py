"""Issue #17, items 1-2: the flows presets at the authors' settings and the settling test."""

from __future__ import annotations

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.flows import simulate
from tokengeo.flows.diagnostics import g2_trend
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


# ---- the G² trend on synthetic curves ------------------------------------------

T_GRID = torch.linspace(0.0, 20.0, 401, dtype=F64)  # (R,)


def test_g2_trend_counts_decades_over_the_window():
    series = torch.stack([10 ** (-T_GRID / 5), 3 + 0 * T_GRID, 10 ** (T_GRID / 20)])  # (3, R)
    trend = g2_trend(T_GRID, series, 10.0)
    torch.testing.assert_close(trend, torch.tensor([-2.0, 0.0, 0.5], dtype=F64))
    with pytest.raises(ConfigError, match="records"):
        g2_trend(T_GRID, series, 19.99)

