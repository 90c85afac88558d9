"""Per-item spectra (the papers' components for 99%): hand-made ranks, a slow reference."""

import math

import numpy as np
import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.probes.spectrum import (
    per_item_component_counts,
    per_item_components,
    spectral_decay,
)

F64 = torch.float64


def _rank_r_item(T: int, D: int, r: int, offset: torch.Tensor, g) -> torch.Tensor:
    """T tokens (T, D) whose centred cloud has r equal variances along random directions."""
    c = torch.randn(T, r, generator=g, dtype=F64)
    u, _ = torch.linalg.qr(c - c.mean(0))  # (T, r) orthonormal, centred columns
    q, _ = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=F64))
    return u @ q[:, :r].T + offset  # (T, D)


def test_tokens_in_a_3_dim_subspace_need_3_components_per_sequence_not_pooled():
    g = torch.Generator().manual_seed(0)
    T, D, N = 16, 10, 5
    # every sequence is rank 3, but its mean sits along its own direction (10 x the spread)
    x = torch.stack([_rank_r_item(T, D, 3, 10 * torch.eye(D, dtype=F64)[n], g)
                     for n in range(N)])  # (N, T, D)
    assert per_item_component_counts(x).tolist() == [3] * N
    assert per_item_components(x, 0.99) == 3.0
    # the pooled count (the former measure) also counts the directions between sequences
    assert spectral_decay(x).n_components_99 > 3


def test_average_over_items_of_different_ranks_is_fractional():
    g = torch.Generator().manual_seed(1)
    ranks = [1, 2, 3, 5]
    x = torch.stack([_rank_r_item(12, 8, r, torch.randn(8, generator=g, dtype=F64), g)
                     for r in ranks])
    assert per_item_component_counts(x, 0.99).tolist() == ranks
    assert per_item_components(x, 0.99) == pytest.approx(2.75)
    # with equal variances, K components hold K/r of it: 0.5 of a rank-5 item needs 3
    assert per_item_component_counts(x, 0.5).tolist() == [1, 1, 2, 3]


def _reference_counts(x: np.ndarray, keep: np.ndarray, threshold: float) -> list[int]:
    """One item at a time: eigenvalues of the item's covariance, counted in a loop."""
    out = []
    for xi, ki in zip(x, keep, strict=True):
        lam = np.sort(np.linalg.eigvalsh(np.cov(xi[ki].T, bias=True)))[::-1].clip(0)
        acc, k = 0.0, 0
        while acc < threshold * lam.sum() - 1e-12 * lam.sum():
            acc += lam[k]
            k += 1
        out.append(k)
    return out


@pytest.mark.parametrize("threshold", [0.5, 0.9, 0.99])
def test_padded_items_equal_a_per_item_reference(threshold):
    g = torch.Generator().manual_seed(2)
    N, T, D = 9, 14, 6
    scales = torch.logspace(0, -2, D, dtype=F64)  # a decaying spectrum, different per item
    x = torch.randn(N, T, D, generator=g, dtype=F64) * scales * torch.rand(N, 1, D, generator=g)
    lengths = torch.randint(2, T + 1, (N,), generator=g)
    mask = torch.arange(T)[None] < lengths[:, None]
    x_padded = torch.where(mask[..., None], x, torch.full_like(x, 1e3))  # junk on padding
    got = per_item_component_counts(x_padded, threshold, lengths=lengths)
    assert got.tolist() == _reference_counts(x.numpy(), mask.numpy(), threshold)
    assert torch.equal(per_item_component_counts(x_padded, threshold, mask=mask), got)
    assert per_item_components(x_padded, threshold, mask=mask) == pytest.approx(
        got.double().mean().item())


def test_constant_item_counts_zero_and_float32_works():
    x = torch.zeros(2, 5, 3)
    x[1] = torch.randn(5, 3)
    assert per_item_component_counts(x)[0] == 0
    assert 1 <= per_item_component_counts(x)[1] <= 3


def test_per_item_spectrum_rejects_bad_input():
    x = torch.randn(3, 4, 2)
    with pytest.raises(ConfigError, match=r"\(N, T, D\)"):
        per_item_components(x[0])
    with pytest.raises(ConfigError, match="threshold"):
        per_item_components(x, 1.5)
    with pytest.raises(ConfigError, match="fewer than 2 real tokens"):
        per_item_components(x, lengths=torch.tensor([4, 1, 3]))
    with pytest.raises(ConfigError, match="either mask or lengths"):
        per_item_components(x, mask=torch.ones(3, 4), lengths=torch.tensor([4, 4, 4]))
    with pytest.raises(ConfigError, match="mask must"):
        per_item_components(x, mask=torch.ones(3, 5))


def _language_cell(bpc: float, per_sequence: float | None, pooled: int) -> dict:
    geometry = {"components_99": pooled, "decay_alpha": 1.0, "cdnv_mean": 1.0,
                "next_token_nm_accuracy": 0.5}
    if per_sequence is not None:
        geometry["components_99_per_sequence"] = per_sequence
    geometry["within_sequence_share"] = 0.5
    geometry["layers"] = [dict(geometry), dict(geometry)]  # gpt-tiny's two blocks
    return {"final": {"val": {"bits_per_char": bpc, "loss": bpc * math.log(2)}},
            "geometry": geometry, "wall_time_s": 1.0}


def test_language_claim_uses_the_per_sequence_count_and_old_cells_are_recomputed(tmp_path):
    from tokengeo.experiments.cells import CellResult
    from tokengeo.experiments.suites import laplacian_language as suite

    settings = {"ks": [0, 2, 4], "seeds": [0, 1], "train": {
        "model": "gpt-tiny", "data": "x", "model_overrides": {"n_layers": 2}}}

    def results(per_seq: dict):
        return {f"k={k}-s{s}": CellResult(f"k={k}-s{s}", _language_cell(
            3.0, per_seq[k][s], pooled={0: 10, 2: 20, 4: 30}[k]))
            for k in (0, 2, 4) for s in (0, 1)}

    # per sequence falls with k = 4 while the pooled count rises: the claim follows the paper's
    from tokengeo.experiments.suite import SuiteContext

    ctx = SuiteContext.under(tmp_path, suite.NAME)
    out = suite.summarise(settings, results({0: [20.5, 21.0], 2: [18.0, 18.5],
                                             4: [15.25, 15.5]}), ctx)
    (spectral,) = [c for top in out.claims for c in (top, *top.descendants())
                   if c.text.startswith("k=4") and "components" in c.text]  # a reading
    assert "per sequence" in spectral.quantity
    # a ratio, on the log scale: per seed 15.25 / 20.5 and 15.5 / 21.0
    expected = (math.log(15.25 / 20.5) + math.log(15.5 / 21.0)) / 2
    assert spectral.measured.mean == pytest.approx(expected) and spectral.verdict == "reproduced"
    # a cell cached before the per-sequence count lacks a required field: it is recomputed
    cells = suite.cells(settings, ctx)
    assert all(f"geometry.{suite.PER_SEQUENCE}" in c.fields for c in cells)
    assert all("geometry.layers" in c.fields for c in cells)


def test_the_interpolated_count_is_a_continuous_version_of_the_integer_one():
    import math

    from tokengeo.probes.spectrum import interpolated_count, spectral_decay

    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        x = torch.randn(64, 12, generator=g) * torch.linspace(3, 0.1, 12)
        spec = spectral_decay(x)
        c = spec.components_99_interp
        assert math.ceil(c - 1e-9) == spec.n_components_99  # its ceiling is the count
        assert spec.n_components_99 - 1 < c <= spec.n_components_99
    # by hand: ratios 0.5, 0.3, 0.2 (cumulative 0.5, 0.8, 1.0) reach 0.9 in the third
    # component, at 3 - 1 + (0.9 - 0.8) / 0.2 = 2.5
    r = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    assert interpolated_count(r, 0.9) == pytest.approx(2.5)
    assert interpolated_count(r, 0.5) == pytest.approx(1.0)
