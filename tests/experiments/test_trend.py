"""The trend over k: slope interval and Page's L test on synthetic monotone, flat and
reversed data, against scipy's Page test where both apply."""

import pytest
import torch

from tokengeo.errors import ConfigError
from tokengeo.experiments.trend import trend_over_k


def _data(slope: float, seeds: int = 6, ks=(0, 1, 2, 3, 4), noise: float = 0.3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    offsets = torch.randn(seeds, generator=gen)  # seed effects: blocks
    return {k: (offsets + slope * k + noise * torch.randn(seeds, generator=gen)).tolist()
            for k in ks}


def test_monotone_data_give_a_positive_slope_and_a_small_page_p():
    t = trend_over_k(_data(1.0))
    assert t.slope_lo > 0 and t.slope == pytest.approx(1.0, abs=0.3)
    assert t.p_increasing < 0.01 and t.p_decreasing > 0.5


def test_reversed_data_give_the_opposite():
    t = trend_over_k(_data(-1.0))
    assert t.slope_hi < 0 and t.p_decreasing < 0.01 and t.p_increasing > 0.5


def test_flat_data_straddle_zero_in_most_draws():
    # under the null the test rejects at 5 % about 5 % of the time, not more
    trends = [trend_over_k(_data(0.0, seed=s)) for s in range(40)]
    rejections = sum(t.p_increasing < 0.05 for t in trends)
    straddles = sum(t.slope_lo < 0 < t.slope_hi for t in trends)
    assert rejections <= 6 and straddles >= 34


def _permutation_page(values) -> tuple[float, float, float]:
    """An independent reference: L and its one-sided p-values from every permutation of each
    seed's ranks (Page 1963: the exact null on tie-free data)."""
    import itertools

    from scipy.stats import rankdata

    ks = sorted(values)
    y = torch.tensor([[values[k][s] for k in ks] for s in range(len(values[ks[0]]))],
                     dtype=torch.float64)
    S, J = y.shape
    ranks = torch.from_numpy(rankdata(y.numpy(), axis=1))
    w = torch.arange(1, J + 1, dtype=torch.float64)
    L = float((ranks * w).sum())
    perms = torch.tensor(list(itertools.permutations(range(J))))
    per_seed = [(ranks[s][perms] * w).sum(1) for s in range(S)]
    null = torch.cartesian_prod(*per_seed).sum(1) if S > 1 else per_seed[0]
    return L, float((null >= L - 1e-9).double().mean()), float((null <= L + 1e-9).double().mean())


@pytest.mark.parametrize("slope", [0.4, -0.4, 0.0])
def test_page_test_equals_the_exact_permutation_null(slope):
    values = _data(slope, seeds=3, ks=(0, 1, 2, 3))
    t = trend_over_k(values)
    L, p_inc, p_dec = _permutation_page(values)
    assert t.method == "exact" and t.page_l == pytest.approx(L)
    assert t.p_increasing == pytest.approx(p_inc, abs=1e-9)
    assert t.p_decreasing == pytest.approx(p_dec, abs=1e-9)


def test_large_tables_use_the_normal_approximation():
    from scipy.stats import page_trend_test

    values = _data(0.2, seeds=30, ks=(0, 1, 2, 3, 4, 5))
    t = trend_over_k(values)
    data = [[values[k][s] for k in sorted(values)] for s in range(30)]
    assert t.method == "asymptotic"
    assert t.p_increasing == pytest.approx(page_trend_test(data).pvalue, abs=1e-12)


@pytest.mark.parametrize("values, match", [
    ({0: [1, 2], 1: [1, 2]}, "at least 3 values of k"),
    ({0: [1, 2], 1: [1, 2], 2: [1]}, "same seeds"),
    ({0: [1], 1: [1], 2: [1]}, "same seeds"),
    ({0: [1, 2], 1: [1, float("nan")], 2: [1, 2]}, "finite"),
])
def test_bad_inputs(values, match):
    with pytest.raises(ConfigError, match=match):
        trend_over_k(values)


def _sweep_of(values: dict[int, list[float]]):
    """A SweepResults whose cells hold ``values`` {k: per-seed metric} as test accuracy."""
    from tokengeo.experiments.cells import CellResult
    from tokengeo.experiments.sweep import Sweep, k_variants

    ks = sorted(values)
    seeds = tuple(range(len(values[ks[0]])))
    sweep = Sweep("t", k_variants(ks), seeds, {})
    results = {sweep.key(f"k={k}", s): CellResult(
        sweep.key(f"k={k}", s), {"final": {"test": {"accuracy": values[k][s]}}})
        for k in ks for s in seeds}
    return sweep.results(results)


@pytest.mark.parametrize("slope,higher,verdict", [(1.0, True, "reproduced"),
                                                  (-1.0, True, "not reproduced"),
                                                  (-1.0, False, "reproduced")])
def test_trend_claim_judges_the_mean_per_seed_slope(slope, higher, verdict):
    from tokengeo.experiments.sweep import trend_claim

    values = _data(slope)
    claim = trend_claim("t", _sweep_of(values), "acc rises with k", "src", "rises",
                        {k: f"k={k}" for k in values}, "acc",
                        lambda r: r.metric("test", "accuracy"), higher=higher)
    assert claim.verdict == verdict
    assert claim.measured.mean == pytest.approx(trend_over_k(values).slope)
    assert "Page's L" in claim.detail


def test_trend_claim_with_a_missing_cell_is_not_run():
    from tokengeo.experiments.sweep import trend_claim

    res = _sweep_of(_data(1.0))
    del res.results["k=0-s0"]
    claim = trend_claim("t", res, "acc rises", "src", "rises", {k: f"k={k}" for k in range(5)},
                        "acc", lambda r: r.metric("test", "accuracy"), higher=True)
    assert claim.verdict.startswith("not run") and "k=0-s0" in claim.verdict
