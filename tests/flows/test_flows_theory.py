"""The paper's theory on small cases: Grönwall stability, weight
perturbations, the weight-path replay they rest on, and the fits of the H sweep."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.flows import simulate
from tokengeo.flows.diagnostics import describe_tokens
from tokengeo.flows.fits import linear_power_fit, local_slopes, loglog_ols, scaling_fits
from tokengeo.flows.presets import get_preset
from tokengeo.flows.simulate import FlowConfig
from tokengeo.flows.theory import (
    PathDrift,
    gronwall_stability,
    sample_weight_path,
    weight_perturbation,
)

F64 = torch.float64

pytestmark = pytest.mark.usefixtures("one_thread")


def start(n=12, H=1, seed=0):
    x0, D0 = get_preset("s2-ou", n_tokens=n, n_paths=1, seed=seed).initial_state(H)
    return x0[0], D0[0]  # (n, d), (H, d, d)


def test_a_replayed_weight_path_is_followed_exactly_and_shifts_with_D0():
    x0, D0 = start(H=3)
    path = sample_weight_path(D0, "ou", 2.0, T=0.2, dt=0.01, seed=4)  # (21, H, d, d)
    assert path.shape == (21, 3, 3, 3) and torch.equal(path, path.mT)
    drift = PathDrift(path, 0.01)
    r = simulate(x0, D0, FlowConfig(drift=drift, noise_var=0.0, T=0.2, dt=0.01))
    torch.testing.assert_close(r.weights[0], path[-1], rtol=0, atol=1e-13)
    S = torch.eye(3, dtype=F64).expand(3, 3, 3)
    r2 = simulate(x0, D0 + 0.1 * S, FlowConfig(drift=drift, noise_var=0.0, T=0.2, dt=0.01))
    torch.testing.assert_close(r2.weights[0], path[-1] + 0.1 * S, rtol=0, atol=1e-13)


def test_gronwall_distance_is_linear_in_eps_with_a_bounded_constant():
    x0, D0 = start(n=16, H=3)
    st = gronwall_stability(x0, D0, drift="ou", noise_var=2.0, T=1.0, dt=0.01,
                            eps=[1e-2, 1e-3, 1e-4], n_directions=3, record_every=5)
    C = np.asarray(st.constant)  # (eps, directions)
    assert np.all(C > 0.5) and np.all(C < 50)  # bounded, and at least the start's distance
    assert np.all(np.abs(C / C[-1] - 1) < 0.1), C  # roughly the same for every eps
    assert abs(st.slope.value - 1) < 0.03, st.slope


def test_weight_path_shift_moves_trajectories_and_energy_by_order_delta():
    x0, D0 = start(n=16, H=3)
    st = weight_perturbation(x0, D0, drift="oscillating", noise_var=0.0, T=1.0, dt=0.01,
                             deltas=[1e-1, 1e-2, 1e-3], n_directions=3, record_every=5)
    gap = np.asarray(st.energy_gap)  # (deltas, directions)
    assert 0.9 < st.slope.value < 1.1, st.slope
    assert np.all(gap[1:] < gap[:-1])  # the final energies converge as delta -> 0
    assert np.all(gap[-1] < 1e-2 * gap[0] * 2)


def test_loglog_ols_recovers_a_power_law_and_its_interval_covers_it():
    x = [1, 2, 4, 8, 16]
    rng = np.random.default_rng(0)
    y = [3 * h**-0.7 * math.exp(0.01 * rng.standard_normal()) for h in x]
    est, c = loglog_ols(x, y)
    assert est.lo < -0.7 < est.hi and abs(c - 3) < 0.1
    exact, _ = loglog_ols(x, [2 * h**-1.0 for h in x])
    assert abs(exact.value + 1) < 1e-12 and exact.hi - exact.lo < 1e-9


def test_linear_space_fit_weights_the_first_point_and_loglog_does_not():
    heads, means = [1, 10, 100], [1.0, 0.2, 0.001]  # the last point far below the line
    a, b = linear_power_fit(heads, means)
    assert abs(a - 1.0) < 0.05  # the linear fit is pinned by the large H = 1 value
    assert abs(b - loglog_ols(heads, means)[0].value) > 0.1


def test_scaling_fits_are_exact_for_identical_paths_and_bootstrapped_otherwise():
    heads = [1, 2, 4, 8]
    same = [np.full(3, 2.0 * h**-1.0) for h in heads]
    fits = scaling_fits(heads, same, [1, 2, 8])
    assert fits.loglog_b.exact and abs(fits.loglog_b.value + 1) < 1e-12
    assert abs(fits.paper_linear_b + 1) < 1e-6
    assert all(abs(s["slope"] + 1) < 1e-12 and s["exact"] for s in fits.local)
    rng = np.random.default_rng(1)
    noisy = [2.0 * h**-1.0 * np.exp(0.05 * rng.standard_normal(20)) for h in heads]
    fits = scaling_fits(heads, noisy, [1, 2, 8])
    assert not fits.loglog_b.exact and fits.loglog_b.lo < -1 < fits.loglog_b.hi
    assert len(local_slopes(heads, noisy)) == 3
    with pytest.raises(ConfigError, match="paper_heads"):
        scaling_fits(heads, noisy, [1, 10, 100])


def test_token_words_follow_the_numbers():
    assert describe_tokens(0.0, 0.995, 6, 1).startswith("collapse to one cluster")
    assert describe_tokens(0.0, 0.6, 6, 2).startswith("contract")
    assert describe_tokens(0.1, 0.02, 6, 40).startswith("spread")
    assert describe_tokens(0.1, 0.1, 6, 6).startswith("keep")
