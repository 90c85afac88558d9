"""Spectral decay of centred token representations.

For features ``X`` ``(N, D)`` centred by their mean, the singular values
``s_1 >= s_2 >= ...`` of ``X - 1 mu^T`` give the covariance eigenvalues
``lambda_k = s_k^2 / N``. Reported: the explained-variance ratios
``r_k = lambda_k / sum_j lambda_j``; the number of components whose cumulative ratio first
reaches 99%; and the decay exponent ``alpha`` of a least-squares power-law fit
``log lambda_k = c - alpha log k`` over ``k = 1 .. K`` (``K`` = the 99% count, at least 2),
the eigenspectrum decay coefficient of Agrawal et al. ("alpha-ReQ", NeurIPS 2022).
Smoothing of token representations (Zhang & Papyan, arXiv 2602.09297) shows as faster
decay and fewer components.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tokengeo.errors import ConfigError

F64 = torch.float64


@dataclass
class SpectralDecay:
    singular_values: torch.Tensor  # (min(N, D),) of the centred features, descending
    explained_variance_ratio: torch.Tensor  # (min(N, D),)
    n_components_99: int
    decay_alpha: float  # lambda_k ~ k^-alpha
    fit_r2: float
    n_samples: int


def _flatten(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if x.dim() == 3:
        x = x[mask.bool()] if mask is not None else x.reshape(-1, x.shape[-1])
    if x.dim() != 2:
        raise ConfigError(f"expected features (N, D) or tokens (N, T, D), got {tuple(x.shape)}")
    return x


def _from_eigenvalues(lam: torch.Tensor, n: int) -> SpectralDecay:
    lam = lam.clamp_min(0).sort(descending=True).values
    total = float(lam.sum())
    if n < 2 or total <= 0:
        raise ConfigError("the spectrum needs at least 2 samples with nonzero variance")
    ratio = lam / total
    k99 = int((ratio.cumsum(0) < 0.99 - 1e-12).sum()) + 1
    K = max(2, min(k99, int((lam > total * 1e-12).sum())))
    k = torch.arange(1, K + 1, dtype=F64).log()
    y = lam[:K].log()
    A = torch.stack([torch.ones_like(k), k], 1)
    coef = torch.linalg.lstsq(A, y[:, None]).solution[:, 0]
    resid = y - A @ coef
    ss = float((y - y.mean()).square().sum())
    r2 = 1 - float(resid.square().sum()) / ss if ss > 0 else 1.0
    return SpectralDecay((lam * n).sqrt(), ratio, k99, -float(coef[1]),
                         r2 if math.isfinite(r2) else float("nan"), n)


def spectral_decay(x: torch.Tensor, mask: torch.Tensor | None = None) -> SpectralDecay:
    """Dense reference via the SVD of the centred features ``(N, D)`` or tokens ``(N, T, D)``."""
    x = _flatten(x, mask).to(F64)
    s = torch.linalg.svdvals(x - x.mean(0))
    return _from_eigenvalues(s.square() / len(x), len(x))


class SpectrumAccumulator:
    """Streaming :func:`spectral_decay` from ``sum x``, ``sum x x^T`` (``D x D``) and N."""

    def __init__(self) -> None:
        self.s1 = self.s2 = None
        self.n = 0

    def update(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        x = _flatten(x.detach(), mask).to(F64)
        self.s1 = x.sum(0) if self.s1 is None else self.s1 + x.sum(0)
        self.s2 = x.T @ x if self.s2 is None else self.s2 + x.T @ x
        self.n += len(x)

    def compute(self) -> SpectralDecay:
        if self.n == 0:
            raise ConfigError("no features were added to the spectrum accumulator")
        mu = self.s1 / self.n
        cov = self.s2 / self.n - torch.outer(mu, mu)
        lam = torch.linalg.eigvalsh(cov)
        # the SVD of (N, D) centred data has min(N, D) values; the rest are zero
        lam = lam.sort(descending=True).values[: min(self.n, len(lam))]
        return _from_eigenvalues(lam, self.n)


def per_item_components(tokens: torch.Tensor, threshold: float = 0.99) -> float:
    """Mean over items of the number of principal components for ``threshold`` of the
    variance of each item's own tokens: ``(1/N) sum_n K_n`` with
    ``K_n = min{k : sum_{j<=k} s_{n,j}^2 >= threshold sum_j s_{n,j}^2}``, ``s_n`` the singular
    values of item n's tokens ``(T, D)`` centred by their own mean (Zhang & Papyan,
    arXiv 2602.09297, Sec. 5: per sequence / per image, then averaged). Items with no
    variance count 0. ``tokens``: ``(N, T, D)``."""
    if tokens.dim() != 3 or tokens.shape[1] < 2:
        raise ConfigError(f"expected tokens (N, T, D) with T >= 2, got {tuple(tokens.shape)}")
    if not 0 < threshold <= 1:
        raise ConfigError(f"threshold={threshold} must be in (0, 1]")
    x = tokens.detach().to(F64)
    lam = torch.linalg.svdvals(x - x.mean(1, keepdim=True)).square()  # (N, min(T, D))
    total = lam.sum(-1, keepdim=True)  # (N, 1)
    ratio = lam.cumsum(-1) / total.clamp_min(torch.finfo(F64).tiny)
    counts = (ratio < threshold - 1e-12).sum(-1) + 1  # (N,)
    counts = torch.where(total[:, 0] > 0, counts, torch.zeros_like(counts))
    return float(counts.double().mean())
