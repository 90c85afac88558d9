"""tokengeo.flows: the dynamics, integrators and simulate (arXiv 2605.18870, Eq. 5 and Sec. 6)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tokengeo.errors import ConfigError
from tokengeo.flows import evaluate_field, interaction_energy, oscillating_target, simulate
from tokengeo.flows.simulate import FlowConfig
from tokengeo.flows.weights import ou_drift, symmetric_increment

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")


def sphere(P, n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(P, n, d, generator=g, dtype=F64)
    return x / x.norm(dim=-1, keepdim=True)


def sym(P, H, d, seed=1, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(P, H, d, d, generator=g, dtype=F64)
    return scale * (z + z.mT) / 2


def direct_field(x, B, V):
    """Per-path, per-head loops over the formulas of the paper (no chunking, no symmetry)."""
    P, n, d = x.shape
    H = B.shape[1]
    v, g2, E, M, ito = [], [], [], [], []
    for p in range(P):
        u = torch.zeros(n, d, dtype=F64)
        inv_n = torch.zeros(n, dtype=F64)
        e = ito_p = 0.0
        Mp = torch.zeros(H, d, d, dtype=F64)
        for h in range(H):
            K = torch.exp(x[p] @ B[p, h] @ x[p].T)  # (n, n)
            N = K.sum(1)
            u += (K / N[:, None]) @ (x[p] @ V[p, h].T)
            inv_n += 1 / N
            e += K.sum()
            Mp[h] = torch.einsum("ij,ia,jb->ab", K, x[p], x[p])  # sum_ij K_ij x_i x_j^T
            ito_p += (K * ((x[p] @ x[p].T) ** 2 + 1)).sum()
        u = u / H
        vp = u - x[p] * (x[p] * u).sum(-1, keepdim=True)
        v.append(vp)
        g2.append(((vp**2).sum(-1) / (n * inv_n / H)).mean())
        scale = 1 / (2 * H * n * n)
        E.append(e * scale)
        M.append(Mp * scale)
        ito.append(ito_p * scale)
    return torch.stack(v), torch.stack(g2), torch.stack(E), torch.stack(M), torch.stack(ito)


@pytest.mark.parametrize("d,symmetric", [(3, True), (3, False), (8, True), (8, False)])
def test_field_matches_direct_formulas(d, symmetric):
    """Both Ito paths (pair features for d <= 6, Gram strips above) and both tilings."""
    x, D = sphere(2, 20, d), sym(2, 3, d)  # 2 strips of 10 x 20 tokens, one head at a time
    B = D if symmetric else D + 0.2 * torch.randn(2, 3, d, d, dtype=F64)
    ev = evaluate_field(x, B, D, energy=True, ito=True, chunk_elems=2 * 10 * 20)
    v, g2, E, M, ito = direct_field(x, B, D)
    for got, want in ((ev.velocity, v), (ev.g2, g2), (ev.energy, E), (ev.moment, M),
                      (ev.ito_kernel, ito)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-13)


def test_velocity_is_mobility_times_projected_gradient_for_one_head():
    """H = 1, symmetric D: v_i = (n^2 / N_i) P_{x_i} grad_{x_i} E (central differences of E)."""
    n, d, h = 6, 3, 1e-6
    x, D = sphere(1, n, d, seed=3), sym(1, 1, d, seed=4)
    grad = torch.zeros(n, d, dtype=F64)
    for i in range(n):
        for a in range(d):
            e = torch.zeros_like(x)
            e[0, i, a] = h
            diff = interaction_energy(x + e, D) - interaction_energy(x - e, D)
            grad[i, a] = diff.item() / (2 * h)
    proj = grad - x[0] * (x[0] * grad).sum(-1, keepdim=True)
    N = torch.exp(x[0] @ D[0, 0] @ x[0].T).sum(1)
    v = evaluate_field(x, D, energy=False).velocity[0]
    torch.testing.assert_close(v, (n * n / N)[:, None] * proj, rtol=1e-7, atol=1e-9)


def test_multi_head_velocity_is_mean_of_single_head_velocities():
    x, D = sphere(2, 9, 3, seed=5), sym(2, 4, 3, seed=6)
    v = evaluate_field(x, D, energy=False).velocity
    singles = [evaluate_field(x, D[:, h : h + 1], energy=False).velocity for h in range(4)]
    torch.testing.assert_close(v, torch.stack(singles).mean(0), rtol=1e-12, atol=1e-14)


@settings(max_examples=15, deadline=None)
@given(
    P=st.integers(1, 3), H=st.integers(1, 5), n=st.integers(2, 30), d=st.integers(2, 8),
    chunk=st.integers(1, 3000), symmetric=st.booleans(), seed=st.integers(0, 1000),
)
def test_chunked_evaluation_equals_one_block(P, H, n, d, chunk, symmetric, seed):
    x = sphere(P, n, d, seed)
    B = sym(P, H, d, seed + 1)
    if not symmetric:
        B = B + 0.3 * torch.randn(P, H, d, d, generator=torch.Generator().manual_seed(seed),
                                  dtype=F64)
    V = sym(P, H, d, seed + 2)
    full = evaluate_field(x, B, V, energy=True, ito=True, chunk_elems=1 << 30)
    part = evaluate_field(x, B, V, energy=True, ito=True, chunk_elems=chunk)
    for name in ("velocity", "g2", "energy", "moment", "ito_kernel"):
        torch.testing.assert_close(getattr(part, name), getattr(full, name), rtol=1e-11,
                                   atol=1e-12)


def authors_scheme(x0, D0, *, T, dt, noise_var, seed, drift=ou_drift):
    """The paper's Euler loop, head by head: x <- normalise(x - dt v), D <- D + f dt + sigma dW."""
    gen = torch.Generator().manual_seed(seed)
    x, D = x0.clone(), D0.clone()
    P = D.shape[0]
    sums, xs = torch.zeros(4, P, dtype=F64), [x]
    for k in range(round(T / dt)):
        dW = math.sqrt(noise_var) * symmetric_increment(D.shape, dt, gen, dtype=F64)
        f = drift(D, k * dt)
        v, g2, _, M, ito = direct_field(x, D, D)
        sums[0] += (f * M).sum((1, 2, 3)) * dt
        sums[1] += noise_var / 4 * ito * dt
        sums[2] += g2 * dt
        sums[3] += (dW * M).sum((1, 2, 3))
        x = x - dt * v
        x = x / x.norm(dim=-1, keepdim=True)
        D = D + f * dt + dW
        xs.append(x)
    return torch.stack(xs, 1), sums, D


def test_euler_reproduces_the_authors_scheme():
    x0, D0 = sphere(2, 6, 3, seed=7), sym(2, 3, 3, seed=8, scale=2.0)
    xs, sums, D_T = authors_scheme(x0, D0, T=0.05, dt=0.01, noise_var=2.0, seed=11)
    r = simulate(x0, D0, FlowConfig(
        drift="ou", noise_var=2.0, T=0.05, dt=0.01, n_paths=2, seed=11, record_trajectory=True))
    torch.testing.assert_close(r.x, xs, rtol=0, atol=1e-13)
    torch.testing.assert_close(r.weights, D_T, rtol=0, atol=1e-13)
    got = torch.stack([r.dE_int[:, -1], r.ito_int[:, -1], r.G2_int[:, -1], r.mart_int[:, -1]])
    torch.testing.assert_close(got, sums, rtol=1e-12, atol=1e-14)


def _residual(integrator, dt, x0, D0):
    r = simulate(x0, D0, FlowConfig(
        drift="oscillating", noise_var=0.0, T=0.5, dt=dt, integrator=integrator,
        record_every=10**6))
    return r.residual[0, -1].abs().item()


@pytest.mark.parametrize("integrator,order", [("euler", 1), ("heun", 2), ("rk4", 4)])
def test_balance_residual_shrinks_at_the_integrator_order(integrator, order):
    """H = 1, deterministic oscillating weights: the balance is exact in continuous time."""
    x0, D0 = sphere(1, 12, 3, seed=9), sym(1, 1, 3, seed=10)
    dts = (0.05, 0.025, 0.0125)
    res = [_residual(integrator, dt, x0, D0) for dt in dts]
    rates = [math.log2(a / b) for a, b in zip(res, res[1:], strict=False)]
    assert all(order - 0.3 < r < order + 0.5 for r in rates), (res, rates)


@pytest.mark.parametrize("integrator,order", [("euler", 1), ("heun", 2), ("rk4", 4)])
def test_trajectory_converges_at_the_integrator_order(integrator, order):
    """Successive differences |x(dt) - x(dt/2)| shrink like dt^order."""
    x0, D0 = sphere(1, 10, 3, seed=12), sym(1, 2, 3, seed=13)
    kw = dict(drift="oscillating", noise_var=0.0, T=0.5, integrator=integrator)
    xs = [simulate(x0, D0, FlowConfig(
        dt=dt, **kw)).x_final for dt in (0.05, 0.025, 0.0125, 0.00625)]
    diffs = [(a - b).abs().max().item() for a, b in zip(xs, xs[1:], strict=False)]
    rates = [math.log2(a / b) for a, b in zip(diffs, diffs[1:], strict=False)]
    assert all(order - 0.3 < r < order + 0.5 for r in rates), (diffs, rates)


def test_stochastic_balance_needs_the_ito_correction():
    """With noise the mean residual equals the deterministic O(dt) one: the Ito term (~0.6
    here) accounts for the rest; leaving it out would bias the residual by that much."""
    P = 200
    x0, D0 = sphere(1, 8, 3, seed=14)[0], sym(P, 1, 3, seed=15, scale=2.0)
    kw = dict(drift="ou", T=0.5, dt=0.01, n_paths=P, record_every=10**6, seed=3)
    noisy = simulate(x0, D0, FlowConfig(noise_var=2.0, **kw))
    quiet = simulate(x0, D0, FlowConfig(noise_var=0.0, **kw))
    res = noisy.residual[:, -1]
    se = res.std() / math.sqrt(P)
    assert abs(res.mean() - quiet.residual[:, -1].mean()) < 4 * se
    assert noisy.ito_int[:, -1].mean() > 20 * se


@settings(max_examples=6, deadline=None)
@given(integrator=st.sampled_from(["euler", "heun"]), seed=st.integers(0, 10**6),
       noise=st.sampled_from([0.0, 2.0]), d=st.integers(2, 5))
def test_tokens_stay_on_the_sphere(integrator, seed, noise, d):
    x0, D0 = sphere(2, 15, d, seed), sym(2, 3, d, seed + 1, scale=3.0)
    r = simulate(x0, D0, FlowConfig(
        drift="oscillating", noise_var=noise, T=0.2, dt=0.02, n_paths=2, integrator=integrator,
        seed=seed, record_trajectory=True))
    assert (r.x.norm(dim=-1) - 1).abs().max() < 1e-13


def test_ou_without_noise_drives_D_to_identity():
    x0, D0 = sphere(1, 5, 3), sym(1, 2, 3, scale=3.0)
    r = simulate(x0, D0, FlowConfig(drift="ou", noise_var=0.0, T=5.0, dt=0.01, record_every=10**6))
    eye = torch.eye(3, dtype=F64)
    # Euler on f = I - D: D_N - I = (1 - dt)^N (D_0 - I) exactly
    torch.testing.assert_close(r.weights - eye, (1 - 0.01) ** 500 * (D0 - eye), rtol=1e-9,
                               atol=1e-12)
    assert (r.weights - eye).abs().max() < 0.01 * (D0 - eye).abs().max()


def test_seeded_runs_are_reproducible():
    x0, D0 = sphere(1, 10, 3)[0], sym(3, 2, 3)
    kw = dict(drift="ou", T=0.1, dt=0.01, n_paths=3)
    a, b = simulate(x0, D0, FlowConfig(seed=5, **kw)), simulate(x0, D0, FlowConfig(seed=5, **kw))
    c = simulate(x0, D0, FlowConfig(seed=6, **kw))
    assert torch.equal(a.E, b.E) and torch.equal(a.mart_int, b.mart_int)
    assert not torch.equal(a.E[:, -1], c.E[:, -1])


def test_records_every_k_steps_and_at_T():
    x0, D0 = sphere(1, 5, 3), sym(1, 1, 3)
    r = simulate(x0, D0, FlowConfig(T=0.07, dt=0.01, record_every=3))
    torch.testing.assert_close(r.t, torch.tensor([0.0, 0.03, 0.06, 0.07], dtype=F64))
    assert r.E.shape == r.residual.shape == (1, 4)
    assert r.mean("E").shape == (4,) and torch.equal(r.std("E"), torch.zeros(4, dtype=F64))
    assert r.residual[0, 0] == 0 and r.G2_int[0, 0] == 0


def test_oscillating_target_is_the_papers_for_d3_and_d2():
    t, H = 0.7, 4
    T3 = oscillating_target(t, H, 3)
    for h in range(H):
        s = t + 2 * math.pi * h / H
        want = torch.tensor([
            [2 + 1.5 * math.cos(s), math.sin(2 * s), math.sin(s)],
            [math.sin(2 * s), 2 + 1.5 * math.sin(s), math.cos(2 * s)],
            [math.sin(s), math.cos(2 * s), 2 + 1.5 * math.cos(s + math.pi / 4)],
        ], dtype=F64)
        torch.testing.assert_close(T3[h], want, rtol=0, atol=1e-14)
        want2 = torch.tensor([[2 + 1.5 * math.cos(s), math.sin(2 * s)],
                              [math.sin(2 * s), 2 - 1.5 * math.cos(s)]], dtype=F64)
        torch.testing.assert_close(oscillating_target(t, H, 2)[h], want2, rtol=0, atol=1e-14)
    T5 = oscillating_target(t, H, 5)
    assert torch.equal(T5, T5.mT)
    # period 2 pi in t
    torch.testing.assert_close(oscillating_target(t + 2 * math.pi, H, 5), T5)


def test_general_heads_simulate_with_energy_flagged_undefined():
    x0 = sphere(1, 8, 3)
    D0 = sym(1, 2, 3) + 0.5 * torch.randn(1, 2, 3, 3, dtype=F64)
    r = simulate(x0, D0, FlowConfig(drift="frozen", noise_var=0.0, T=0.1, dt=0.01, energy=False))
    assert not r.energy_defined
    assert torch.isnan(r.E).all() and torch.isnan(r.residual).all()
    assert torch.isfinite(r.G2).all() and r.G2[0, -1] > 0


@pytest.mark.parametrize(
    "change,match",
    [
        (dict(x0=torch.ones(5, 3, dtype=F64)), "unit sphere"),
        (dict(D0=torch.arange(9.0, dtype=F64).reshape(1, 3, 3)), "not symmetric"),
        (dict(dt=0.0), "dt"),
        (dict(dt=-0.1), "dt"),
        (dict(T=0.105), "multiple of dt"),
        (dict(D0=sym(1, 2, 4)[0]), "expected"),
        (dict(n_paths=2, D0=sym(3, 2, 3)), "expected"),
        (dict(x0=sphere(3, 5, 3)), "paths"),
        (dict(integrator="rk4", noise_var=1.0), "deterministic"),
        (dict(integrator="leapfrog"), "integrator"),
        (dict(drift="brownian"), "drift"),
        (dict(drift=lambda D, t: D[..., :2, :]), "drift returned shape"),
        (dict(drift=lambda D, t: torch.triu(D)), "non-symmetric"),
        (dict(record_every=0), "record_every"),
        (dict(noise_var=-1.0), "noise_var"),
    ],
)
def test_bad_input_raises_a_clear_error(change, match):
    kw = dict(x0=sphere(1, 5, 3)[0], D0=sym(1, 2, 3)[0], T=0.1, dt=0.01)
    kw.update(change)
    with pytest.raises(ConfigError, match=match):
        simulate(kw.pop("x0"), kw.pop("D0"), FlowConfig(**kw))


@settings(max_examples=50, deadline=None)
@given(P=st.integers(1, 16), H=st.integers(1, 200), n=st.integers(2, 20000),
       chunk=st.integers(1, 1 << 24))
def test_kernel_blocks_respect_the_chunk_budget(P, H, n, chunk):
    from tokengeo.flows.dynamics import _tiling

    tile, heads = _tiling(P, H, n, chunk)  # strips (P, heads, tile, n)
    assert 1 <= tile <= n and 1 <= heads <= H
    assert P * heads * tile * n <= max(chunk, P * 16 * n)
    assert -(-n // tile) * tile - n < -(-n // tile)  # balanced: every tile nearly full


@pytest.mark.slow
def test_ten_thousand_tokens_run_without_quadratic_memory():
    """n = 10,000, H = 4: one (n, n) float64 kernel alone is 800 MB, all heads 3.2 GB."""
    import resource

    n, H = 10_000, 4
    x0, D0 = sphere(1, n, 3, seed=1), sym(1, H, 3, seed=2)
    r = simulate(x0, D0, FlowConfig(drift="ou", noise_var=2.0, T=0.01, dt=0.01, record_every=1))
    assert torch.isfinite(r.E).all() and (r.x_final.norm(dim=-1) - 1).abs().max() < 1e-12
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert peak_mb < 1500, peak_mb
