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

Two measures of "components for 99% of the variance" live here:

- **pooled** (:func:`spectral_decay`, :class:`SpectrumAccumulator`): all tokens of all
  sequences (images) in one cloud, centred by the global mean;
- **per item** (:func:`per_item_components`, the papers' definition: 547.7 -> 430.4 in
  Zhang & Papyan, Sec. 5.2, are averages over sequences, hence non-integer): the count of
  each sequence's (image's) own ``T`` tokens, centred by that item's mean, averaged over items.
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
    components_99_interp: float = float("nan")  # the continuous count (interpolated_count)


def _flatten(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if x.dim() == 3:
        x = x[mask.bool()] if mask is not None else x.reshape(-1, x.shape[-1])
    if x.dim() != 2:
        raise ConfigError(f"expected features (N, D) or tokens (N, T, D), got {tuple(x.shape)}")
    return x


def interpolated_count(ratio: torch.Tensor, threshold: float = 0.99) -> float:
    """The component count at which the cumulative explained variance reaches
    ``threshold``, interpolated linearly between integers: with ``c_K = sum_{k<=K} r_k``
    and ``K`` the integer count (the first ``c_K >= threshold``),
    ``K - 1 + (threshold - c_{K-1}) / r_K`` (in ``(K - 1, K]``). A continuous version of the
    integer count, so a t interval over seeds has no ties (its ceiling is the count)."""
    cum = ratio.to(F64).cumsum(0)
    k = int((cum < threshold - 1e-12).sum()) + 1
    before = float(cum[k - 2]) if k >= 2 else 0.0
    step = float(ratio[k - 1])
    return k - 1 + (threshold - before) / step if step > 0 else float(k)


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
                         r2 if math.isfinite(r2) else float("nan"), n,
                         interpolated_count(ratio, 0.99))


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


def per_item_component_counts(tokens: torch.Tensor, threshold: float = 0.99,
                              mask: torch.Tensor | None = None,
                              lengths: torch.Tensor | None = None) -> torch.Tensor:
    """Components for ``threshold`` of the variance of each item's tokens: ``(N,)`` long.

    For item ``n`` with real tokens ``x_1 .. x_{T_n}`` (``mask`` ``(N, T)`` or ``lengths``
    ``(N,)``; default: all ``T``), centred by the item's own mean ``mu_n``, the singular
    values ``s_1 >= s_2 >= ...`` of ``X_n - 1 mu_n^T`` give the variances ``lambda_k ~ s_k^2``;
    the count is the smallest ``K`` with ``sum_{k<=K} lambda_k >= threshold sum_k lambda_k``
    (0 for an item whose tokens are all equal). One batched SVD over the items; padded
    tokens are zero rows after centring, which add only zero singular values.
    """
    if tokens.dim() != 3:
        raise ConfigError(f"expected tokens (N, T, D), got shape {tuple(tokens.shape)}")
    if not 0 < threshold <= 1:
        raise ConfigError(f"threshold={threshold} must lie in (0, 1] (a share of variance)")
    keep = _item_mask(tokens.shape[:2], mask, lengths).to(tokens.device)  # (N, T) bool
    n_real = keep.sum(1)  # (N,)
    if int(n_real.min()) < 2:
        bad = int((n_real < 2).sum())
        raise ConfigError(f"{bad} item(s) have fewer than 2 real tokens; a per-item spectrum "
                          "needs at least 2 (drop those items or fix the mask/lengths)")
    w = keep[..., None].to(F64)  # (N, T, 1)
    x = tokens.detach().to(F64)
    mu = (x * w).sum(1, keepdim=True) / n_real[:, None, None]  # (N, 1, D)
    lam = torch.linalg.svdvals((x - mu) * w).square()  # (N, min(T, D)), descending
    total = lam.sum(-1, keepdim=True)  # (N, 1)
    ratio = lam.cumsum(-1) / total.clamp_min(torch.finfo(F64).tiny)
    counts = (ratio < threshold - 1e-12).sum(-1) + 1  # (N,)
    return torch.where(total[:, 0] > 0, counts, torch.zeros_like(counts)).cpu()


def per_item_components(tokens: torch.Tensor, threshold: float = 0.99,
                        mask: torch.Tensor | None = None,
                        lengths: torch.Tensor | None = None) -> float:
    """Mean over items of :func:`per_item_component_counts`: ``(1/N) sum_n K_n``.

    The papers' "principal components for 99% of the variance" (Zhang & Papyan,
    arXiv 2602.09297, Sec. 5.2: 547.7 -> 430.4 on GPT sequences; per image in Sec. 5.1):
    each sequence's (image's) tokens centred by its own mean, counted, then averaged.
    """
    return float(per_item_component_counts(tokens, threshold, mask, lengths).double().mean())


def _item_mask(shape, mask: torch.Tensor | None, lengths: torch.Tensor | None) -> torch.Tensor:
    N, T = shape
    if mask is not None and lengths is not None:
        raise ConfigError("give either mask or lengths, not both")
    if lengths is not None:
        lengths = torch.as_tensor(lengths).cpu()
        if lengths.shape != (N,) or int(lengths.min()) < 0 or int(lengths.max()) > T:
            raise ConfigError(f"lengths must be (N,) = ({N},) integers in [0, {T}], got shape "
                              f"{tuple(lengths.shape)}")
        return torch.arange(T)[None, :] < lengths[:, None]
    if mask is None:
        return torch.ones(N, T, dtype=torch.bool)
    if tuple(mask.shape) != (N, T):
        raise ConfigError(f"mask must have the tokens' (N, T) = ({N}, {T}), got "
                          f"{tuple(mask.shape)}")
    return mask.bool().cpu()
