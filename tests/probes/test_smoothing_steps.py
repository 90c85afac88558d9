"""The finite-step smoothing measures (tokengeo.probes.diffusion) and their rows in
tokengeo.probes.smoothing: hand cases (a head writing −x, +x, −c(I − P)x with P uniform or a
permutation), the identity step = derivative + ‖O_c‖²/Var_w, and slow loop references."""

import pytest
import torch

from tokengeo.models.registry import create_model
from tokengeo.probes.capture import capture
from tokengeo.probes.diffusion import (
    dirichlet_energy,
    dirichlet_step,
    variance_step,
    within_share,
    within_sum,
)
from tokengeo.probes.smoothing import smoothing_reading, variance_derivative
from tokengeo.probes.variance import variance_decomposition

F64 = torch.float64


def _x(seed: int = 0, B: int = 3, T: int = 6, d: int = 5) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(B, T, d, dtype=F64)


def _softmax_pattern(B: int, T: int, seed: int = 9) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(B, T, T, dtype=F64).softmax(-1)


def _loop_energy(x, p, mask=None) -> float:
    """Σ_b Σ_i Σ_j P_ij ‖x_i − x_j‖² over real i, j, one term at a time."""
    B, T, _ = x.shape
    real = torch.ones(B, T, dtype=torch.bool) if mask is None else mask.bool()
    total = 0.0
    for b in range(B):
        for i in range(T):
            for j in range(T):
                if real[b, i] and real[b, j]:
                    total += float(p[b, i, j]) * float((x[b, i] - x[b, j]).pow(2).sum())
    return total


def _loop_within(x, mask=None) -> float:
    B, T, _ = x.shape
    real = torch.ones(B, T, dtype=torch.bool) if mask is None else mask.bool()
    total = 0.0
    for b in range(B):
        tokens = [x[b, t] for t in range(T) if real[b, t]]
        mean = sum(tokens) / len(tokens)
        total += sum(float((t - mean).pow(2).sum()) for t in tokens)
    return total


# ------------------------------------------------------------------ hand cases


@pytest.mark.parametrize("sign,expected", [(-1.0, -1.0), (1.0, 3.0)])
def test_head_writing_minus_or_plus_x(sign, expected):
    """O = −X: X + O = 0, every energy vanishes (−1); O = +X: X + O = 2X, four times (+3)."""
    x = _x()
    p = _softmax_pattern(3, 6)
    assert variance_step(x, sign * x).item() == pytest.approx(expected)
    assert dirichlet_step(x, sign * x, p).item() == pytest.approx(expected)


@pytest.mark.parametrize("c", [0.25, 0.5, 1.0, 2.5])
def test_laplacian_write_with_uniform_pattern(c):
    """O = −c (I − P) X with P = 11ᵀ/T: X + O = (1 − c) X_c + X̄, so both energies scale by
    (1 − c)²: step (1 − c)² − 1 = −2c + c², the derivative −2c plus the second-order c²
    (c = 2.5: the derivative says smooths, the real step sharpens)."""
    x = _x(1)
    T = x.shape[1]
    p = torch.full((3, T, T), 1.0 / T, dtype=F64)
    o = -c * (x - p @ x)
    assert variance_step(x, o).item() == pytest.approx((1 - c) ** 2 - 1)
    assert dirichlet_step(x, o, p).item() == pytest.approx((1 - c) ** 2 - 1)
    assert variance_derivative(x, o).item() == pytest.approx(-2 * c)


@pytest.mark.parametrize("c", [0.5, 0.2, 1.0])
def test_laplacian_write_with_a_pairing_permutation(c):
    """P swaps tokens in pairs (π(π(i)) = i): with O = −c (I − P) X,
    (X + O)_i − (X + O)_π(i) = (1 − 2c)(x_i − x_π(i)), so E_P scales by (1 − 2c)²;
    c = 1/2 averages each pair: the energy on the head's graph vanishes (−1) while the
    uniform variance only falls."""
    x = _x(2, T=6)
    perm = torch.tensor([1, 0, 3, 2, 5, 4])
    p = torch.eye(6, dtype=F64)[perm].expand(3, 6, 6)
    o = -c * (x - p @ x)
    assert dirichlet_step(x, o, p).item() == pytest.approx((1 - 2 * c) ** 2 - 1)
    y = x + o
    expected = (_loop_within(y) - _loop_within(x)) / _loop_within(x)
    assert variance_step(x, o).item() == pytest.approx(expected)


def test_step_is_derivative_plus_second_order_term():
    x, o = _x(3), _x(4)
    oc = o - o.mean(1, keepdim=True)
    second = oc.pow(2).sum() / within_sum(x)
    assert variance_step(x, o).item() == pytest.approx(
        (variance_derivative(x, o) + second).item(), rel=1e-10)


# ------------------------------------------------------------------ loop references


def _padded():
    x = _x(5, B=3, T=7, d=4)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 4:] = False
    mask[2, 2:] = False
    x[~mask] = 1e3  # padding must not count
    scores = torch.randn(3, 7, 7, dtype=F64).masked_fill(~mask[:, None, :], float("-inf"))
    return x, scores.softmax(-1), mask


def test_energies_match_loops_with_padding():
    x, p, mask = _padded()
    assert dirichlet_energy(x, p, mask).item() == pytest.approx(_loop_energy(x, p, mask))
    assert within_sum(x, mask).item() == pytest.approx(_loop_within(x, mask))
    heads = torch.stack([p, p.flip(-1) * mask[:, None, :]], 1)  # (B, 2, T, T)
    per_head = dirichlet_energy(x, heads, mask)
    assert per_head.tolist() == pytest.approx([_loop_energy(x, heads[:, h], mask)
                                               for h in range(2)])


def test_steps_match_loops_with_padding():
    x, p, mask = _padded()
    o = _x(6, B=3, T=7, d=4)
    y = x + o
    assert dirichlet_step(x, o, p, mask).item() == pytest.approx(
        (_loop_energy(y, p, mask) - _loop_energy(x, p, mask)) / _loop_energy(x, p, mask))
    assert variance_step(x, o, mask).item() == pytest.approx(
        (_loop_within(y, mask) - _loop_within(x, mask)) / _loop_within(x, mask))


def test_within_share_is_the_decomposition_share():
    x, _, mask = _padded()
    assert within_share(x, mask) == pytest.approx(
        variance_decomposition(x, mask=mask).within_sequence
        / variance_decomposition(x, mask=mask).total)


# ------------------------------------------------------------------ on models


@pytest.mark.parametrize("name,inputs", [
    ("vit-tiny", lambda: torch.randn(3, 1, 28, 28)),
    ("gpt-tiny", lambda: torch.randint(0, 256, (3, 12))),
])
def test_model_rows_match_a_slow_reference(name, inputs):
    """Each head's steps from the captured stream, z, softmax pattern and raw W_O, by the
    loops above; each sublayer's shares from the captured stream before and after it."""
    torch.manual_seed(7)
    model = create_model(name, n_laplacian=2, n_layers=2)
    x_in = inputs()
    reading = smoothing_reading(model, x_in)
    names = ["blocks.*.hook_resid_pre", "blocks.*.hook_resid_mid", "blocks.*.attn.hook_z",
             "blocks.*.attn.hook_pattern"]
    with torch.no_grad(), capture(model, names) as cache:
        model.eval()(x_in)
    for r in reading.heads:
        attn = model.blocks[r.layer].attn
        x = cache[f"blocks.{r.layer}.hook_resid_pre"].double()
        z = cache[f"blocks.{r.layer}.attn.hook_z"][:, :, r.head].double()
        dh = attn.head_dim
        w_o = attn.proj.weight[:, r.head * dh:(r.head + 1) * dh].detach().double()
        o = z @ w_o.T  # (B, T, d)
        p = cache[f"blocks.{r.layer}.attn.hook_pattern"][:, r.head].double()
        e0, e1 = _loop_energy(x, p), _loop_energy(x + o, p)
        assert r.dirichlet_step == pytest.approx((e1 - e0) / e0, rel=1e-4, abs=1e-7)
        v0, v1 = _loop_within(x), _loop_within(x + o)
        assert r.variance_step == pytest.approx((v1 - v0) / v0, rel=1e-4, abs=1e-7)
    assert [s.layer for s in reading.sublayers] == [0, 1]
    for s in reading.sublayers:
        before = variance_decomposition(cache[f"blocks.{s.layer}.hook_resid_pre"])
        after = variance_decomposition(cache[f"blocks.{s.layer}.hook_resid_mid"])
        assert s.share_before == pytest.approx(before.within_fraction, rel=1e-6)
        assert s.share_after == pytest.approx(after.within_fraction, rel=1e-6)


def test_laplacian_head_pattern_is_the_softmax():
    """A Laplacian head's Dirichlet step is on its softmax P (rows sum to 1), as the
    attention head's: the captured pattern of both kinds is row-stochastic."""
    torch.manual_seed(8)
    model = create_model("gpt-tiny", n_laplacian=2, n_layers=1)
    with torch.no_grad(), capture(model, ["blocks.0.attn.hook_pattern"]) as cache:
        model(torch.randint(0, 256, (2, 9)))
    p = cache["blocks.0.attn.hook_pattern"]
    assert torch.allclose(p.sum(-1), torch.ones(2, 4, 9))
    assert bool((p >= 0).all())
