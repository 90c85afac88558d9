"""Clustering diagnostics and the H-scaling fit of the strong gradient.

arXiv 2605.18870, Sec. 6: tokens cluster under the flow, and the time-averaged strong
gradient over the second half of the run scales like H^b (b ~ -1 with Ornstein-Uhlenbeck
weights, b ~ 0 with oscillating weights).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor

from tokengeo.errors import ConfigError


def mean_cosine(x: Tensor) -> Tensor:
    """Mean pairwise <x_i, x_j> over i != j, (...,) for x (..., n, d) on the sphere.

    sum_{i != j} <x_i, x_j> = |sum_i x_i|^2 - sum_i |x_i|^2, so this is O(n d).
    """
    n = x.shape[-2]
    if n < 2:
        raise ConfigError("mean_cosine needs at least 2 tokens")
    total = x.sum(-2).square().sum(-1) - x.square().sum((-2, -1))
    return total / (n * (n - 1))


def count_clusters(x: Tensor, threshold: float = 0.99, *, chunk: int = 1024) -> Tensor:
    """Number of connected components of the graph i ~ j iff <x_i, x_j> >= threshold.

    x is (..., n, d); returns a long tensor (...,). Min-label propagation with pointer
    jumping, computing the (chunk x n) similarity blocks on the fly (no n x n matrix).
    """
    if not -1.0 <= threshold <= 1.0:
        raise ConfigError(f"threshold={threshold} must lie in [-1, 1] (a cosine)")
    lead = x.shape[:-2]
    flat = x.reshape(-1, *x.shape[-2:])  # (B, n, d)
    counts = [_components(flat[b], threshold, chunk) for b in range(flat.shape[0])]
    return torch.tensor(counts, dtype=torch.long).reshape(lead)


def _components(x: Tensor, threshold: float, chunk: int) -> int:
    n = x.shape[0]
    labels = torch.arange(n, device=x.device)
    for _ in range(n):
        new = labels.clone()
        for i0 in range(0, n, chunk):
            adj = (x[i0 : i0 + chunk] @ x.T) >= threshold  # (c, n)
            neighbour_min = torch.where(adj, labels, n).min(-1).values  # (c,)
            new[i0 : i0 + chunk] = torch.minimum(new[i0 : i0 + chunk], neighbour_min)
        while not torch.equal(new[new], new):  # pointer jumping
            new = new[new]
        if torch.equal(new, labels):
            break
        labels = new
    return int(labels.unique().numel())


def time_average(t: Tensor, series: Tensor, start: float) -> Tensor:
    """Trapezoidal time average of series (P, R) over the records with t >= start, (P,)."""
    keep = t >= start - 1e-12
    if keep.sum() < 2:
        raise ConfigError(f"fewer than 2 records at t >= {start}; record more often")
    tt, ss = t[keep].to(series.dtype), series[:, keep]
    return torch.trapezoid(ss, tt, dim=-1) / (tt[-1] - tt[0])


@dataclass
class PowerLawFit:
    """Least-squares fit log y = log c + b log H of the path means, with a bootstrap CI."""

    exponent: float  # b
    prefactor: float  # c
    ci_low: float
    ci_high: float
    level: float
    n_boot: int
    heads: list[int]
    mean: list[float]  # mean over paths of y, per H
    std: list[float]  # std over paths, per H
    n_paths: list[int]

    def to_dict(self) -> dict:
        return asdict(self)


def fit_power_law(
    heads: list[int],
    samples: list[Tensor],
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> PowerLawFit:
    """Fit y ~ c H^b to the path means of ``samples`` (one (P,) tensor per H).

    The confidence interval is the percentile bootstrap over paths: paths are resampled with
    replacement within each H, the path means refitted, and the (1 - level)/2 quantiles of b
    reported.
    """
    if len(heads) != len(samples) or len(set(heads)) < 2:
        raise ConfigError("fit_power_law needs one sample per H and at least 2 distinct H")
    ys = [np.asarray(s.detach().cpu(), dtype=np.float64) for s in samples]
    if any(y.size == 0 or not np.all(y > 0) for y in ys):
        raise ConfigError("power-law fit needs positive samples for every H")
    logh = np.log(np.asarray(heads, dtype=np.float64))
    means = np.array([y.mean() for y in ys])
    b, a = np.polyfit(logh, np.log(means), 1)
    rng = np.random.default_rng(seed)
    boot = np.empty(n_boot)
    for k in range(n_boot):
        m = [y[rng.integers(0, y.size, y.size)].mean() for y in ys]
        boot[k] = np.polyfit(logh, np.log(m), 1)[0]
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return PowerLawFit(
        exponent=float(b), prefactor=float(math.exp(a)), ci_low=float(lo), ci_high=float(hi),
        level=level, n_boot=n_boot, heads=list(heads), mean=[float(m) for m in means],
        std=[float(y.std(ddof=1)) if y.size > 1 else 0.0 for y in ys],
        n_paths=[int(y.size) for y in ys],
    )
