"""Geometry metrics: hand-built cases, independent references, streaming == dense."""

import numpy as np
import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.probes.geometry import (
    NeuralCollapseAccumulator,
    NextTokenAccumulator,
    SpectrumAccumulator,
    VarianceAccumulator,
    frequent_classes,
    neural_collapse,
    neural_collapse_sequences,
    neural_collapse_tokens,
    next_token_pairs,
    next_token_separability,
    spectral_decay,
    variance_decomposition,
)

F64 = torch.float64


def _simplex(C: int, D: int) -> torch.Tensor:
    """C unit vectors of a simplex ETF in R^D (D >= C)."""
    M = torch.eye(C, dtype=F64) - 1.0 / C
    M = M / M.norm(dim=1, keepdim=True)
    return torch.cat([M, torch.zeros(C, D - C, dtype=F64)], 1)


# ------------------------------------------------------------------ variance
def test_variance_identity_and_numpy_reference():
    x = torch.randn(6, 5, 4, dtype=F64)
    y = torch.tensor([0, 1, 0, 2, 1, 1])
    r = variance_decomposition(x, y)
    flat = x.reshape(-1, 4).numpy()
    assert r.total == pytest.approx(flat.var(0).sum())
    assert r.within_sequence + r.between_sequence == pytest.approx(r.total)
    means = x.mean(1).numpy()
    assert r.between_class + r.within_class == pytest.approx(means.var(0).sum())
    within = np.mean([((x[n].numpy() - means[n]) ** 2).sum(1).mean() for n in range(6)])
    assert r.within_sequence == pytest.approx(within)


def test_variance_hand_built_constant_sequences():
    # every token equals its sequence's vector: no within-sequence variance
    seq = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 3.0], [0.0, 5.0]], dtype=F64)
    x = seq[:, None, :].expand(4, 7, 2)
    r = variance_decomposition(x, torch.tensor([0, 0, 1, 1]))
    assert r.within_sequence == pytest.approx(0.0, abs=1e-12)
    assert r.between_sequence == pytest.approx(r.total)
    # class means (0, 0) and (0, 4) around (0, 2): between = 4; within: (1 + 1 + 1 + 1) / 4
    assert r.between_class == pytest.approx(4.0)
    assert r.within_class == pytest.approx(1.0)


def test_variance_streaming_with_mask_equals_dense():
    x = torch.randn(9, 6, 3, dtype=F64)
    mask = torch.rand(9, 6) > 0.3
    mask[:, 0] = True
    y = torch.randint(0, 3, (9,))
    acc = VarianceAccumulator()
    for a, b in [(0, 4), (4, 5), (5, 9)]:
        acc.update(x[a:b], y[a:b], mask[a:b])
    dense, stream = variance_decomposition(x, y, mask), acc.compute()
    for f in ("total", "within_sequence", "between_sequence", "between_class", "within_class"):
        assert getattr(stream, f) == pytest.approx(getattr(dense, f), rel=1e-9, abs=1e-12)
    assert stream.n_tokens == dense.n_tokens == int(mask.sum())


# ------------------------------------------------------------------ neural collapse
def test_perfect_collapse_gives_zero_nc_metrics():
    C, D = 4, 6
    mus = _simplex(C, D) * 3
    y = torch.arange(C).repeat(5)
    h = mus[y]
    r = neural_collapse(h, y, weight=mus.clone())
    assert r.nc1 == pytest.approx(0.0, abs=1e-10)
    assert r.nc2_equinorm == pytest.approx(0.0, abs=1e-10)
    assert r.nc2_max_angle == pytest.approx(0.0, abs=1e-10)
    assert r.nc2_etf_error == pytest.approx(0.0, abs=1e-10)
    assert r.nc3 == pytest.approx(0.0, abs=1e-10)
    assert r.nc4 == 1.0 and r.ncc_accuracy == 1.0


def test_isotropic_noise_is_far_from_collapse():
    g = torch.Generator().manual_seed(1)
    C, D, n = 3, 5, 400
    mus = _simplex(C, D) * 0.3
    y = torch.arange(C).repeat(n)
    h = mus[y] + torch.randn(len(y), D, generator=g, dtype=F64)
    r = neural_collapse(h, y)
    # Sigma_W ~ I, Sigma_B has rank C-1 with eigenvalues ~ 0.09 * C/(C-1) / C: NC1 >> 1
    assert r.nc1 > 5
    assert r.ncc_accuracy < 0.7 and r.nc3 is None and r.nc4 is None


def test_nc1_matches_formula_and_streaming_matches_dense():
    g = torch.Generator().manual_seed(2)
    h = torch.randn(40, 5, generator=g, dtype=F64)
    y = torch.randint(0, 3, (40,), generator=g)
    W, b = torch.randn(3, 5, generator=g, dtype=F64), torch.randn(3, generator=g, dtype=F64)
    dense = neural_collapse(h, y, W, b)
    # independent NC1 with numpy
    hn, yn = h.numpy(), y.numpy()
    mus = np.stack([hn[yn == c].mean(0) for c in range(3)])
    sw = sum(np.outer(v, v) for v in hn - mus[yn]) / len(hn)
    M = mus - hn.mean(0)
    sb = M.T @ M / 3
    assert dense.nc1 == pytest.approx(np.trace(sw @ np.linalg.pinv(sb)) / 3, rel=1e-8)
    acc = NeuralCollapseAccumulator(W, b)
    for a, c in [(0, 13), (13, 40)]:
        acc.update(h[a:c], y[a:c])
    for a, c in [(0, 25), (25, 40)]:
        acc.update_second(h[a:c], y[a:c])
    stream = acc.compute()
    for f in ("nc1", "nc2_equinorm", "nc2_equiangular", "nc2_max_angle", "nc2_etf_error",
              "nc3", "nc4", "ncc_accuracy"):
        assert getattr(stream, f) == pytest.approx(getattr(dense, f), rel=1e-8, abs=1e-12)


def test_collapse_on_sequences_and_tokens():
    C = 3
    mus = _simplex(C, 4)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    noise = 0.01 * torch.randn(6, 5, 4, dtype=F64)
    x = mus[y][:, None, :] + noise - noise.mean(1, keepdim=True)  # exact sequence means
    seq = neural_collapse_sequences(x, y)
    assert seq.nc1 == pytest.approx(0.0, abs=1e-10)
    tok = neural_collapse_tokens(x, y)
    assert tok.nc1 > 1e-6 and tok.n_samples == 30
    with pytest.raises(ConfigError, match="2 classes"):
        neural_collapse(torch.randn(4, 2), torch.zeros(4, dtype=torch.long))


# ------------------------------------------------------------------ spectrum
def test_spectrum_of_known_power_law():
    g = torch.Generator().manual_seed(3)
    D, N = 20, 4000
    lam = torch.arange(1, D + 1, dtype=F64) ** -2.0
    q, _ = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=F64))
    z = torch.randn(N, D, generator=g, dtype=F64)
    z = (z - z.mean(0)) @ torch.linalg.inv(torch.linalg.cholesky(torch.cov(z.T, correction=0))).T
    x = (z * lam.sqrt()) @ q.T + 5.0  # exact covariance q diag(lam) q^T, shifted mean
    r = spectral_decay(x)
    torch.testing.assert_close(r.singular_values.square() / N, lam, rtol=1e-8, atol=1e-10)
    assert r.decay_alpha == pytest.approx(2.0, rel=1e-6) and r.fit_r2 == pytest.approx(1.0)
    ratio = (lam / lam.sum()).cumsum(0)
    assert r.n_components_99 == int((ratio < 0.99).sum()) + 1


def test_spectrum_isotropic_and_rank_one():
    iso = spectral_decay(torch.randn(5000, 8, dtype=F64))
    assert iso.n_components_99 == 8 and abs(iso.decay_alpha) < 0.2
    line = torch.linspace(-1, 1, 50, dtype=F64)[:, None] * torch.tensor([[1.0, 2.0, 2.0]])
    r1 = spectral_decay(line)
    assert r1.n_components_99 == 1
    assert r1.explained_variance_ratio[0] == pytest.approx(1.0)


def test_spectrum_streaming_equals_dense_on_tokens():
    x = torch.randn(7, 9, 6, dtype=F64) @ torch.randn(6, 6, dtype=F64)
    mask = torch.rand(7, 9) > 0.2
    acc = SpectrumAccumulator()
    acc.update(x[:3], mask[:3])
    acc.update(x[3:], mask[3:])
    d, s = spectral_decay(x, mask), acc.compute()
    torch.testing.assert_close(s.singular_values, d.singular_values, rtol=1e-7, atol=1e-9)
    assert s.n_components_99 == d.n_components_99
    assert s.decay_alpha == pytest.approx(d.decay_alpha, rel=1e-7)


# ------------------------------------------------------------------ next-token separability
def _next_token_data(separated: bool, seed=4):
    g = torch.Generator().manual_seed(seed)
    N, T, D = 20, 12, 6
    ids = torch.randint(0, 4, (N, T), generator=g)
    centres = _simplex(4, D) * 5
    nxt = torch.cat([ids[:, 1:], ids[:, :1]], 1)  # h_t is built from the next token
    h = torch.randn(N, T, D, generator=g, dtype=F64)
    if separated:
        h = 0.05 * h + centres[nxt]
    return h, ids


def test_next_token_separability_hand_built():
    h, ids = _next_token_data(separated=True)
    r = next_token_separability(h, ids, num_classes=4)
    assert r.nearest_mean_accuracy == 1.0 and r.cdnv_mean < 1e-3
    noisy = next_token_separability(*_next_token_data(separated=False), num_classes=4)
    assert noisy.cdnv_mean > 1 and noisy.nearest_mean_accuracy < 0.6


def test_next_token_cdnv_reference_and_streaming():
    h, ids = _next_token_data(separated=False, seed=5)
    h = h + 0.8 * _simplex(4, 6)[torch.cat([ids[:, 1:], ids[:, :1]], 1)]
    mask = torch.rand(ids.shape) > 0.1
    dense = next_token_separability(h, ids, mask, num_classes=3)
    feats, y = next_token_pairs(h, ids, mask)
    cls = dense.classes
    assert cls == frequent_classes(torch.bincount(y), 3)
    mus = {c: feats[y == c].mean(0) for c in cls}
    var = {c: (feats[y == c] - mus[c]).square().sum(1).mean() for c in cls}
    ref = [(var[a] + var[b]) / (2 * (mus[a] - mus[b]).square().sum())
           for i, a in enumerate(cls) for b in cls[i + 1:]]
    assert dense.cdnv_mean == pytest.approx(float(torch.stack(ref).mean()), rel=1e-10)
    acc = NextTokenAccumulator(cls, dim=6)
    for a, b in [(0, 7), (7, 20)]:
        acc.update(h[a:b], ids[a:b], mask[a:b])
    for a, b in [(0, 11), (11, 20)]:
        acc.update_second(h[a:b], ids[a:b], mask[a:b])
    s = acc.compute()
    assert s.cdnv_mean == pytest.approx(dense.cdnv_mean, rel=1e-9)
    assert s.cdnv_median == pytest.approx(dense.cdnv_median, rel=1e-9)
    assert s.nearest_mean_accuracy == pytest.approx(dense.nearest_mean_accuracy)
    assert s.n_tokens == dense.n_tokens
