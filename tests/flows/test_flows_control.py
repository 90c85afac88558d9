"""The flows diagnostics: the static attractive control, clusters over time, the
time-averaged weights and the stationarity of the tokens under the limiting energy
(arXiv 2605.18870, Sec. 5-6)."""

from __future__ import annotations

import math

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.flows import FlowConfig, interaction_energy, simulate
from tokengeo.flows.diagnostics import (
    clusters_over_time,
    count_clusters,
    energy_stationarity,
    mean_cosine,
    time_averaged_weights,
)
from tokengeo.flows.presets import get_preset, scaling_run

F64 = torch.float64

pytestmark = pytest.mark.usefixtures("one_thread")


def octahedron() -> torch.Tensor:
    """The 6 vertices +-e_k of the octahedron, (1, 6, 3)."""
    eye = torch.eye(3, dtype=F64)
    return torch.cat([eye, -eye]).unsqueeze(0)


@pytest.mark.parametrize("beta", [1.0, -2.0])
def test_a_symmetric_configuration_is_stationary_and_a_perturbed_one_is_not(beta):
    """At the octahedron with D = beta I, sum_j K_ij D x_j is parallel to x_i by symmetry."""
    x = octahedron()
    D = beta * torch.eye(3, dtype=F64).expand(1, 2, 3, 3)
    st = energy_stationarity(x, D)
    assert st.grad_norm2[0] < 1e-28 and st.relative[0] < 1e-14
    assert st.field_relative[0] < 1e-14
    y = x.clone()
    y[0, 0] = torch.tensor([1.0, 0.1, 0.0], dtype=F64)
    y[0, 0] /= y[0, 0].norm()
    moved = energy_stationarity(y, D)
    assert moved.grad_norm2[0] > 1e-4 and 0.01 < moved.relative[0] <= 1.0


def test_grad_norm_is_the_projected_autograd_gradient_of_the_energy():
    """grad_norm2 = (1/n) sum_i |n P_{x_i} dE/dx_i|^2, E = 1/(2Hn^2) sum exp(<x_i, D_h x_j>)
    written out (its value checked against interaction_energy)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 7, 4, generator=g, dtype=F64)
    x = x / x.norm(dim=-1, keepdim=True)
    z = torch.randn(2, 3, 4, 4, generator=g, dtype=F64)
    D = (z + z.mT) / 2
    n, H = x.shape[1], D.shape[1]
    leaf = x.clone().requires_grad_(True)
    energy = torch.einsum("pia,phab,pjb->phij", leaf, D, leaf).exp().sum((1, 2, 3)) / (
        2 * H * n * n)
    torch.testing.assert_close(energy.detach(), interaction_energy(x, D), rtol=1e-12, atol=0)
    (grad,) = torch.autograd.grad(energy.sum(), leaf)
    tangent = n * (grad - x * (x * grad).sum(-1, keepdim=True))
    want = tangent.square().sum((1, 2)) / n
    whole = (n * grad).square().sum((1, 2))
    st = energy_stationarity(x, D)
    torch.testing.assert_close(torch.tensor(st.grad_norm2, dtype=F64), want, rtol=1e-10,
                               atol=0)
    torch.testing.assert_close(torch.tensor(st.relative, dtype=F64),
                               (want * n / whole).sqrt(), rtol=1e-10, atol=0)


def test_one_head_energy_gradient_and_flow_field_vanish_together():
    """H = 1: w_i = n u_i / N_i, so both tangential shares are 0 at a rest point only."""
    x = octahedron()
    D = torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=F64)).expand(1, 1, 3, 3)
    assert energy_stationarity(x, D).relative[0] < 1e-14  # eigenvectors: stationary
    y = torch.nn.functional.normalize(x + 0.1, dim=-1)
    st = energy_stationarity(y, D)
    assert st.relative[0] > 1e-3 and st.field_relative[0] > 1e-3


def test_stationarity_bad_shapes():
    with pytest.raises(ConfigError, match=r"\(P, n, d\) and D \(P, H, d, d\)"):
        energy_stationarity(octahedron()[0], torch.eye(3, dtype=F64).expand(1, 1, 3, 3))


def test_time_average_of_a_linear_weight_path_is_its_midpoint():
    """D(t) = A + t S averaged over [T/2, T] is A + (3T/4) S (trapezoid exact on lines)."""
    t = torch.linspace(0, 2.0, 21, dtype=F64)
    A, S = torch.randn(2, 3, 3, 3, dtype=F64), torch.randn(2, 3, 3, 3, dtype=F64)
    path = A[:, None] + t[None, :, None, None, None] * S[:, None]  # (P, R, H, d, d)
    torch.testing.assert_close(time_averaged_weights(t, path, 1.0), A + 1.5 * S, rtol=1e-12,
                               atol=1e-12)


def test_clusters_over_time_sample_the_first_and_last_records():
    g = torch.Generator().manual_seed(1)
    x = torch.nn.functional.normalize(torch.randn(2, 23, 9, 3, generator=g, dtype=F64), dim=-1)
    x[:, -1] = x[:, -1, :1]  # the last record: every token at one point
    index, clusters, cosine = clusters_over_time(x, points=5)
    assert index[0] == 0 and index[-1] == 22 and len(index) == 5
    assert torch.equal(clusters, count_clusters(x[:, index]))
    assert (clusters[:, -1] == 1).all()
    torch.testing.assert_close(cosine, mean_cosine(x[:, index]))
    with pytest.raises(ConfigError, match="record_trajectory"):
        clusters_over_time(x[:, 0])


def test_attractive_preset_has_negative_definite_weights_and_its_tokens_cluster():
    """Frozen D_h = -W_h (W_h positive definite) cluster the tokens into one; the same run
    with D_h = +W_h (repulsive in this sign) does not."""
    p = get_preset("s2-attractive", n_tokens=30, n_paths=1, T=8.0, dt=0.02, record_every=40)
    x0, D0 = p.initial_state(3)
    assert (torch.linalg.eigvalsh(D0) <= -1 + 1e-12).all()  # -(I + Z Z^T / d)
    r = simulate(x0, D0, p.flow_config(record_trajectory=True))
    _, clusters, cosine = clusters_over_time(r.x)
    assert cosine[0, -1] > 0.99 and clusters[0, -1] == 1 and cosine[0, 0] < 0.2
    repulsive = simulate(x0, -D0, p.flow_config())
    assert mean_cosine(repulsive.x_final)[0] < 0.2


def test_scaling_run_appends_the_main_run_and_checks_the_integrator():
    preset, heads = scaling_run("s2-ou", {"n_heads": 7, "T": 1.0}, (1, 4))
    assert heads == (1, 4, 7) and preset.n_heads == 7 and preset.T == 1.0
    assert scaling_run("s2-ou", {})[1] == (1, 10, 100)
    with pytest.raises(ConfigError, match="rk4"):
        scaling_run("s2-ou", {"integrator": "rk4"})
    assert math.isclose(get_preset("s2-ou").flow_config().seed, 1)
    assert get_preset("s2-ou").flow_config(record_weights=True).record_weights


def test_flow_config_of_a_preset_runs_the_preset():
    p = get_preset("s2-oscillating", n_tokens=10, n_paths=1, T=0.1, dt=0.01, record_every=5)
    cfg = p.flow_config()
    assert isinstance(cfg, FlowConfig)
    assert (cfg.drift, cfg.noise_var, cfg.T, cfg.record_every) == ("oscillating", 0.0, 0.1, 5)
