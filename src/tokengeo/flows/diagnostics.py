"""Clustering diagnostics and the H-scaling fit of the strong gradient.

arXiv 2605.18870, Sec. 6: tokens cluster under the flow, and the time-averaged strong
gradient over the second half of the run scales like H^b (b ~ -1 with Ornstein-Uhlenbeck
weights, b ~ 0 with oscillating weights); :func:`g2_trend` says how many decades G^2 moves by
over [T/2, T] (shown in the flows runs table; whether the cloud settles is read from its
W_2 movement, :mod:`tokengeo.flows.transport`).
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


def g2_trend(t: Tensor, series: Tensor, start: float) -> Tensor:
    """Per path, how many decades ``series`` (P, R) changes by over the records t >= start.

    With s = log10 G^2 and the least-squares slope k = sum (t - tbar)(s - sbar) / sum (t - tbar)^2
    over the window [start, T], returns k (T - start), (P,): 0 for a stationary series (a
    noise floor, or an oscillation over whole periods), -1 for one falling tenfold across the
    window. Zero records are clamped to the smallest positive float.
    """
    keep = t >= start - 1e-12
    if keep.sum() < 3:
        raise ConfigError(f"fewer than 3 records at t >= {start}; record more often")
    tt = t[keep].to(torch.float64)
    s = series[:, keep].to(torch.float64).clamp_min(torch.finfo(torch.float64).tiny).log10()
    dt = tt - tt.mean()  # (R',)
    slope = (s - s.mean(-1, keepdim=True)) @ dt / dt.square().sum()  # (P,)
    return slope * (tt[-1] - tt[0])


CLUSTER_COSINE = 0.99  # tokens within arccos(0.99) = 8.1 degrees are linked into one cluster


def describe_tokens(cos_0: float, cos_T: float, clusters_0: float, clusters_T: float) -> str:
    """Words for what the tokens did between t = 0 and T, from the mean pairwise <x_i, x_j>
    (:func:`mean_cosine`) and the clusters at cosine >= :data:`CLUSTER_COSINE`
    (:func:`count_clusters`), both at 0 and T (means over paths):

    * mean cosine >= 0.99 at T: ``collapse to one cluster``;
    * fewer clusters and a larger mean cosine: ``contract`` (they merge);
    * more clusters and a smaller mean cosine: ``spread`` (the groups break up);
    * otherwise ``keep`` their clusters.
    """
    numbers = (f"mean <xi,xj> {cos_0:.3f} -> {cos_T:.3f}, clusters at cos >= "
               f"{CLUSTER_COSINE} {clusters_0:.1f} -> {clusters_T:.1f}")
    if cos_T >= 0.99:
        return f"collapse to one cluster ({numbers})"
    if clusters_T < clusters_0 and cos_T > cos_0:
        return f"contract, merging into {clusters_T:.1f} clusters ({numbers})"
    if clusters_T > clusters_0 and cos_T < cos_0:
        return f"spread: the initial groups break up ({numbers})"
    return f"keep their clusters ({numbers})"


def clusters_over_time(x: Tensor, threshold: float = CLUSTER_COSINE, *, points: int = 11
                       ) -> tuple[list[int], Tensor, Tensor]:
    """Clusters and mean <x_i, x_j> along a recorded trajectory x (P, R, n, d).

    Returns the record indices (about ``points`` of them, evenly spaced, first and last
    included), the clusters at cosine >= ``threshold`` (:func:`count_clusters`) and the mean
    pairwise cosine (:func:`mean_cosine`) at those records, each (P, len(indices)).
    """
    if x.ndim != 4:
        raise ConfigError(f"clusters_over_time needs a trajectory (P, R, n, d); got "
                          f"{tuple(x.shape)}: simulate with record_trajectory=True")
    R = x.shape[1]
    index = sorted({round(k * (R - 1) / max(1, points - 1)) for k in range(points)})
    picked = x[:, index]  # (P, K, n, d)
    return index, count_clusters(picked, threshold), mean_cosine(picked)


def time_averaged_weights(t: Tensor, weight_path: Tensor, start: float) -> Tensor:
    """D̄_h = (1/(T - start)) ∫_start^T D_h(t) dt, trapezoidal over the records, (P, H, d, d).

    ``weight_path`` is :attr:`FlowResult.weight_path`, (P, R, H, d, d) at times ``t`` (R,)
    (simulate with ``record_weights=True``). With OU weights D̄ → I as T grows; the limiting
    energy of arXiv 2605.18870's integrable regime is E(x; D̄).
    """
    P, R = weight_path.shape[:2]
    flat = weight_path.reshape(P, R, -1).transpose(1, 2).reshape(-1, R)  # (P H d d, R)
    mean = time_average(t, flat, start)  # (P H d d,)
    return mean.reshape(P, *weight_path.shape[2:])


@dataclass
class Stationarity:
    """How far tokens are from a stationary point of E(x; D), per path (P,)."""

    grad_norm2: list[float]  # |grad E|^2_mu, the squared Wasserstein gradient norm
    relative: list[float]  # |tangential part| / |whole| of the gradient field, in [0, 1]
    field_relative: list[float]  # the same for the flow's own field under D (rest points)

    def to_dict(self) -> dict:
        return asdict(self)


def energy_stationarity(x: Tensor, D: Tensor) -> Stationarity:
    """The Riemannian gradient of the interaction energy at tokens x (P, n, d) under symmetric
    weights D (P, H, d, d) (arXiv 2605.18870, Sec. 5: the ω-limit set in the integrable
    regime is made of stationary points of the limiting energy).

    With E(x; D) = 1/(2 H n^2) sum_h sum_ij exp(<x_i, D_h x_j>) and μ = (1/n) sum_i δ_{x_i},
    the Wasserstein gradient of E at x_i is the tangential part of

        u_i = (1/(H n)) sum_h sum_j exp(<x_i, D_h x_j>) D_h x_j      (= n ∂E/∂x_i),

    g_i = P_{x_i} u_i = u_i - x_i <x_i, u_i>, and

        grad_norm2 = (1/n) sum_i |g_i|^2,     relative = sqrt(sum_i |g_i|^2 / sum_i |u_i|^2).

    Both are 0 exactly at a stationary point of E on (S^{d-1})^n (every u_i normal to the
    sphere); ``relative`` is scale-free (1: the whole gradient is tangential).
    ``field_relative`` is the same ratio for the flow's own field under frozen D,
    w_i = (1/H) sum_h sum_j A^h_ij D_h x_j with A^h_ij = K^h_ij / sum_k K^h_ik (the velocity
    is P_{x_i} w_i): 0 at a rest point of that flow. For H = 1 the two vanish together
    (w_i = n u_i / N_i); for H > 1 they need not (the heads are weighted by 1/N_{h,i} in
    the flow and not in grad E). One head at a time, each (P, n, n) kernel held once.
    """
    if x.ndim != 3 or D.ndim != 4 or D.shape[0] != x.shape[0] or D.shape[-1] != x.shape[-1]:
        raise ConfigError(f"energy_stationarity needs x (P, n, d) and D (P, H, d, d); got "
                          f"{tuple(x.shape)} and {tuple(D.shape)}")
    P, n, d = x.shape
    H = D.shape[1]
    u, w = torch.zeros_like(x), torch.zeros_like(x)  # (P, n, d)
    for h in range(H):
        dx = x @ D[:, h]  # (P, n, d)  rows (D_h x_j)^T (D_h symmetric)
        kernel = torch.exp(x @ dx.mT)  # (P, n, n)  exp(<x_i, D_h x_j>)
        kdx = kernel @ dx  # (P, n, d)
        u += kdx
        w += kdx / kernel.sum(-1, keepdim=True)
    u /= H * n
    w /= H

    def tangential_share(vec: Tensor) -> tuple[Tensor, Tensor]:
        tangential = (vec - x * (x * vec).sum(-1, keepdim=True)).square().sum((1, 2))  # (P,)
        return tangential, (tangential / vec.square().sum((1, 2)).clamp_min(1e-300)).sqrt()

    grad2, relative = tangential_share(u)
    return Stationarity((grad2 / n).tolist(), relative.tolist(), tangential_share(w)[1].tolist())
