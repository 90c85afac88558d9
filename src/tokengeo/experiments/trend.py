"""Trend of a metric over the number of Laplacian heads k: slope with its interval, and a
monotone-trend test.

Zhang & Papyan (arXiv 2602.09297, Fig. 2 and Tab. 1) report that accuracy rises nearly
monotonically with the number of Laplacian heads. Given the metric ``y[s, j]`` of seed s at
``k_j`` (every seed run at every k: seeds are blocks), this computes

* the **slope**: per seed, the least-squares slope of y on k,
  ``β_s = Σ_j (k_j − k̄)(y_sj − ȳ_s) / Σ_j (k_j − k̄)²``; reported as the mean of β_s with its
  Student-t 95% interval over seeds (the seed is the unit of replication);
* **Page's L test** for an ordered alternative in a blocked design (Page 1963, JASA 58:216):
  ranks r_sj of y within each seed, ``L = Σ_j j · Σ_s r_sj``; the one-sided p-values for an
  increasing and a decreasing trend are those of ``scipy.stats.page_trend_test`` (its exact
  null distribution for small tables, else its normal approximation: ``method`` says which;
  the decreasing one predicts the ranks in reverse order; with ties, the exact null is that
  of untied ranks, as scipy computes it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import torch

from tokengeo.errors import ConfigError
from tokengeo.experiments.stats import t975


@dataclass(frozen=True)
class Trend:
    ks: tuple[int, ...]
    n_seeds: int
    slope: float  # mean per-seed slope, metric units per head
    slope_lo: float
    slope_hi: float
    page_l: float
    p_increasing: float  # one-sided, Page's L
    p_decreasing: float
    method: str  # scipy.stats.page_trend_test's: "exact" or "asymptotic"
    slopes: tuple[float, ...] = ()  # β_s, one per seed (the unit of replication)

    def to_dict(self) -> dict:
        return asdict(self)


def _matrix(values: Mapping[int, Sequence[float]]) -> tuple[tuple[int, ...], torch.Tensor]:
    ks = tuple(sorted(values))
    if len(ks) < 3:
        raise ConfigError(f"a trend over k needs at least 3 values of k; got {list(ks)}")
    counts = {len(values[k]) for k in ks}
    if len(counts) != 1 or min(counts) < 2:
        raise ConfigError(
            f"a trend over k needs the same seeds (at least 2) at every k; got counts "
            f"{ {k: len(values[k]) for k in ks} }")
    y = torch.tensor([list(map(float, values[k])) for k in ks], dtype=torch.float64).T
    if not torch.isfinite(y).all():
        raise ConfigError("a trend over k needs finite values")
    return ks, y  # (S, J)


def _page(y: torch.Tensor) -> tuple[float, float, float, str]:
    """(L, p increasing, p decreasing, method) of Page's test on y (S seeds, J values of k)."""
    from tokengeo._deps import require

    page_trend_test = require("scipy.stats").page_trend_test
    data = y.numpy()
    J = data.shape[1]
    up = page_trend_test(data)
    down = page_trend_test(data, predicted_ranks=list(range(J, 0, -1)), method=up.method)
    return float(up.statistic), float(up.pvalue), float(down.pvalue), up.method


def trend_over_k(values: Mapping[int, Sequence[float]]) -> Trend:
    """Slope and Page's L trend test of ``values`` {k: [metric per seed]} (module docstring).
    The i-th entry of every list belongs to the same seed."""
    ks, y = _matrix(values)
    S, J = y.shape
    k = torch.tensor(ks, dtype=torch.float64)
    kc = k - k.mean()
    slopes = ((y - y.mean(1, keepdim=True)) * kc).sum(1) / kc.square().sum()  # (S,)
    mean, sd = slopes.mean().item(), slopes.std().item()
    half = t975(S - 1) * sd / math.sqrt(S)
    L, p_inc, p_dec, method = _page(y)
    return Trend(ks=ks, n_seeds=S, slope=mean, slope_lo=mean - half, slope_hi=mean + half,
                 page_l=L, p_increasing=p_inc, p_decreasing=p_dec, method=method,
                 slopes=tuple(slopes.tolist()))
