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
  increasing and a decreasing trend come from the exact permutation distribution (ranks
  permuted within each seed) when it is small enough to enumerate, else from 20,000 random
  permutations with a fixed seed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import torch

from tokengeo.errors import ConfigError
from tokengeo.experiments.stats import t975

EXACT_LIMIT = 200_000  # permutations enumerated exactly up to this count
MONTE_CARLO = 20_000


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
    method: str  # "exact" or "monte carlo (20000)"
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


def _ranks(y: torch.Tensor) -> torch.Tensor:
    """Mid-ranks (1-based) of each row of y (S, J): ties share their mean rank
    (``scipy.stats.rankdata``)."""
    from tokengeo._deps import require

    ranks = require("scipy.stats").rankdata(y.numpy(), axis=1)
    return torch.from_numpy(ranks).to(torch.float64)


def _page_null(ranks: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, str]:
    """Page's L under the null: every permutation of each seed's ranks (exact or sampled)."""
    S, J = ranks.shape
    total = math.factorial(J) ** S
    if total <= EXACT_LIMIT:
        perms = torch.tensor(list(itertools.permutations(range(J))))  # (J!, J)
        per_seed = [(ranks[s][perms] * weights).sum(1) for s in range(S)]  # S × (J!,)
        grid = torch.cartesian_prod(*per_seed) if S > 1 else per_seed[0][:, None]
        return grid.reshape(-1, S).sum(1), "exact"
    gen = torch.Generator().manual_seed(0)
    keys = torch.rand(MONTE_CARLO, S, J, generator=gen)
    shuffled = torch.gather(ranks.expand(MONTE_CARLO, S, J), 2, keys.argsort(-1))
    return (shuffled * weights).sum((1, 2)), f"monte carlo ({MONTE_CARLO})"


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
    weights = torch.arange(1, J + 1, dtype=torch.float64)
    ranks = _ranks(y)
    L = (ranks * weights).sum().item()
    null, method = _page_null(ranks, weights)
    eps = 1e-9 * max(abs(L), 1.0)
    p_inc = ((null >= L - eps).double().mean()).item()
    p_dec = ((null <= L + eps).double().mean()).item()
    return Trend(ks=ks, n_seeds=S, slope=mean, slope_lo=mean - half, slope_hi=mean + half,
                 page_l=L, p_increasing=p_inc, p_decreasing=p_dec, method=method,
                 slopes=tuple(slopes.tolist()))
