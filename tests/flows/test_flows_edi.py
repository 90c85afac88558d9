"""The energy-dissipation identity's terms (tokengeo.flows.edi) on hand cases: H = 1 reduces
to the one-head identity, a two-token closed form, the simulator's own field and energy, the
exact kinetic-gap identity, and the dt -> 0 limits with one Brownian path refined."""

import math

import pytest
import torch

from tokengeo.flows.dynamics import evaluate_field
from tokengeo.flows.edi import (
    brownian_increments,
    coarsen,
    edi_convergence,
    edi_terms,
    energy,
    integrate_terms,
    residuals,
)


def _state(P=2, n=7, d=3, H=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(P, n, d, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    z = torch.randn(P, H, d, d, generator=g, dtype=torch.float64)
    return x, (z + z.mT) / 2


def test_one_head_the_four_kinetic_terms_agree_and_the_gap_is_zero():
    x, D = _state(H=1)
    t = edi_terms(x, D)
    for other in (t.metric, t.strong, t.g2_arith):
        torch.testing.assert_close(other, t.power, rtol=1e-12, atol=0)


def test_many_heads_the_gap_is_the_squared_mismatch_of_v_and_b_times_g():
    x, D = _state(H=4)
    t = edi_terms(x, D)
    # independent per-token loop: v, g, b by the module docstring's formulas
    P, n, _ = x.shape
    gap = torch.zeros(P, dtype=torch.float64)
    for p in range(P):
        for i in range(n):
            xi = x[p, i]
            grads, mobs = [], []
            for h in range(D.shape[1]):
                k = torch.exp(x[p] @ D[p, h] @ xi)  # (n,)  exp(<x_j, D x_i>)
                u = (k[:, None] * (x[p] @ D[p, h])).sum(0) / n
                grads.append(u - xi * (xi @ u))
                mobs.append(n / k.sum())
            v = sum(m * gr for m, gr in zip(mobs, grads, strict=True)) / len(grads)
            g = sum(grads) / len(grads)
            b = 1 / (sum(1 / m for m in mobs) / len(mobs))
            gap[p] += (v - b * g).square().sum() / b / (2 * n)
    torch.testing.assert_close((t.metric + t.strong) / 2 - t.power, gap, rtol=1e-10, atol=0)
    assert (gap > 0).all()  # distinct heads: the flow is not b times the gradient


def test_identical_heads_close_the_identity_for_any_h():
    x, D = _state(H=1)
    t = edi_terms(x, D.expand(-1, 5, -1, -1).contiguous())
    torch.testing.assert_close((t.metric + t.strong) / 2, t.power, rtol=1e-12, atol=0)


def test_two_tokens_on_the_circle_closed_form():
    """x1 = (1, 0), x2 = (cos a, sin a), D_h = c_h I: K_11 = e^c, K_12 = e^{c cos a}, the
    tangent gradient at x1 is c e^{c cos a} sin(a) / 2 along e2, m_h = 2 / (e^c + e^{c cos a})."""
    a, cs = 0.7, (0.5, -1.3)
    x = torch.tensor([[[1.0, 0.0], [math.cos(a), math.sin(a)]]], dtype=torch.float64)
    D = torch.stack([c * torch.eye(2, dtype=torch.float64) for c in cs])[None]
    t = edi_terms(x, D)
    grad = [c * math.exp(c * math.cos(a)) * math.sin(a) / 2 for c in cs]  # |P grad phi_h|
    mob = [2 / (math.exp(c) + math.exp(c * math.cos(a))) for c in cs]
    v = sum(m * gr for m, gr in zip(mob, grad, strict=True)) / 2
    g = sum(grad) / 2
    b = 1 / ((1 / mob[0] + 1 / mob[1]) / 2)
    # both tokens see the same scalars by symmetry (|x1 . x2| the same, K symmetric)
    assert t.power.item() == pytest.approx(g * v, rel=1e-12)
    assert t.metric.item() == pytest.approx(v * v / b, rel=1e-12)
    assert t.strong.item() == pytest.approx(b * g * g, rel=1e-12)
    assert t.E.item() == pytest.approx(sum(
        (2 * math.exp(c) + 2 * math.exp(c * math.cos(a))) / 8 for c in cs) / 2, rel=1e-12)


def test_the_terms_match_the_simulators_field_energy_and_gradient():
    x, D = _state(H=3)
    t = edi_terms(x, D)
    ev = evaluate_field(x, D, energy=True)
    torch.testing.assert_close(t.velocity, ev.velocity, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(t.E, ev.energy, rtol=1e-12, atol=0)
    torch.testing.assert_close(t.g2_arith, ev.g2, rtol=1e-12, atol=0)
    # g is n times the tangent part of dE/dx (autograd), so power = n <dE/dx, v> / n
    xr = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(energy(xr, D).sum(), xr)
    grad = grad - x * (x * grad).sum(-1, keepdim=True)
    torch.testing.assert_close(t.power, (grad * t.velocity).sum((1, 2)), rtol=1e-10, atol=0)


def test_the_explicit_term_is_the_weights_derivative_of_the_energy():
    x, D = _state(H=2)
    _, f = _state(H=2, seed=1)
    ev = evaluate_field(x, D, energy=True)
    eps = 1e-6
    fd = (energy(x, D + eps * f) - energy(x, D - eps * f)) / (2 * eps)
    torch.testing.assert_close((f * ev.moment).sum((1, 2, 3)), fd, rtol=1e-7, atol=0)


def test_coarse_increments_are_sums_of_the_fine_ones():
    fine = brownian_increments((1, 2, 3, 3), 8, 0.01, seed=4)
    coarse = coarsen(fine, 4)
    assert coarse.shape == (2, 1, 2, 3, 3)
    torch.testing.assert_close(coarse[1], fine[4:].sum(0))
    torch.testing.assert_close(coarse, coarse.mT)  # still symmetric
    with pytest.raises(Exception, match="halve"):
        coarsen(fine, 3)


def _start(H, seed=0):
    from tokengeo.flows.presets import get_preset

    p = get_preset("s2-ou", n_tokens=8, n_paths=1, seed=seed)
    return p.initial_state(H)


def test_one_head_identity_converges_at_first_order_with_shared_noise():
    x0, D0 = _start(1)
    c = edi_convergence(x0, D0, drift="ou", noise_var=2.0, dts=[0.04, 0.02, 0.01], T=1.0,
                        seed=3)
    ident = [abs(b[0]) for b in c.balances["identity"]]
    assert ident[0] / ident[1] == pytest.approx(2, rel=0.25)  # first order in dt
    assert ident[1] / ident[2] == pytest.approx(2, rel=0.25)
    assert abs(c.limits["identity"][0]) < 0.3 * ident[-1] / c.dissipated[0]  # Richardson
    assert c.limits["gap"][0] == pytest.approx(0, abs=1e-12)


def test_two_heads_the_limit_is_the_kinetic_gap_and_the_chain_rule_closes():
    x0, D0 = _start(2)
    c = edi_convergence(x0, D0, drift="oscillating", noise_var=0.0, dts=[0.04, 0.02, 0.01],
                        T=1.0, seed=3)
    lim = c.limits
    assert lim["gap"][0] > 10 * abs(lim["chain"][0])
    assert lim["identity"][0] == pytest.approx(lim["chain"][0] + lim["gap"][0], rel=1e-9)


def test_integrate_terms_refuses_noise_without_its_increments():
    x0, D0 = _start(1)
    with pytest.raises(Exception, match="Brownian increments"):
        integrate_terms(x0, D0, drift="ou", noise_var=2.0, T=0.1, dt=0.05)
    run = integrate_terms(x0, D0, drift="ou", noise_var=0.0, T=0.1, dt=0.05)
    assert set(residuals(run)) == {"chain", "identity", "gap", "arith"}
