"""Rank statistics over masked rows of scores: average ranks, AUC, Spearman, bootstrap.

Every function takes ``(R, M)`` rows (one row = one head on one input, ``M`` token pairs)
and a boolean ``valid`` of the same shape; invalid entries take no part. Ties get average
ranks, so the AUC is the Mann–Whitney statistic with ties counted one half:

    AUC = (Σ_{i ∈ pos} r_i − n₊(n₊+1)/2) / (n₊ n₋)
        = P(s₊ > s₋) + ½ P(s₊ = s₋)

(Mann & Whitney 1947; Hanley & McNeil 1982), and Spearman's ρ is Pearson's correlation of
the average ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

F64 = torch.float64


def average_ranks(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Ranks 1..n of the valid entries of each row of ``x`` (R, M), ties averaged; 0 on
    invalid entries. Invalid entries are sorted last (+inf), so they never shift a rank."""
    R, M = x.shape
    keyed = torch.where(valid, x.to(F64), torch.inf)
    values, order = keyed.sort(dim=-1)  # (R, M)
    new_group = torch.ones_like(values, dtype=torch.bool)
    new_group[:, 1:] = values[:, 1:] != values[:, :-1]
    group = new_group.cumsum(-1) - 1  # (R, M) tie-group index within the row
    flat = (group + torch.arange(R, device=x.device)[:, None] * M).flatten()
    position = torch.arange(1, M + 1, dtype=F64, device=x.device).expand(R, M).flatten()
    total = torch.zeros(R * M, dtype=F64, device=x.device).index_add_(0, flat, position)
    count = torch.zeros(R * M, dtype=F64, device=x.device).index_add_(
        0, flat, torch.ones_like(position))
    mean_rank = (total / count.clamp(min=1))[flat].view(R, M)  # rank of each sorted entry
    ranks = torch.empty_like(mean_rank).scatter_(-1, order, mean_rank)
    return torch.where(valid, ranks, 0.0)


def auc(scores: torch.Tensor, positive: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per row, the AUC with which ``scores`` rank ``positive`` valid entries above the
    negative ones (Mann–Whitney, ties ½); NaN where a row lacks positives or negatives."""
    return auc_from_ranks(average_ranks(scores, valid), positive, valid)


def auc_from_ranks(ranks: torch.Tensor, positive: torch.Tensor,
                   valid: torch.Tensor) -> torch.Tensor:
    """:func:`auc` from the scores' :func:`average_ranks` (to share them across labels)."""
    pos = positive & valid
    n_pos = pos.sum(-1).to(F64)
    n_neg = valid.sum(-1).to(F64) - n_pos
    u = (ranks * pos).sum(-1) - n_pos * (n_pos + 1) / 2
    return torch.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), torch.nan)


def spearman(x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per row, Spearman's rank correlation of ``x`` and ``y`` over the valid entries
    (Pearson's r of the average ranks); NaN where either is constant or n < 2."""
    return spearman_from_ranks(average_ranks(x, valid), average_ranks(y, valid), valid)


def spearman_from_ranks(rx: torch.Tensor, ry: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """:func:`spearman` from the :func:`average_ranks` of x and y."""
    n = valid.sum(-1, keepdim=True).to(F64).clamp(min=1)
    cx = torch.where(valid, rx - rx.sum(-1, keepdim=True) / n, 0.0)
    cy = torch.where(valid, ry - ry.sum(-1, keepdim=True) / n, 0.0)
    denom = (cx.square().sum(-1) * cy.square().sum(-1)).sqrt()
    return torch.where(denom > 0, (cx * cy).sum(-1) / denom, torch.nan)


def conditional_auc(scores: torch.Tensor, covariate: torch.Tensor, positive: torch.Tensor,
                    valid: torch.Tensor, n_bins: int = 10) -> torch.Tensor:
    """The AUC of ``scores`` *within* strata of ``covariate``, pooled (a stratified
    Mann–Whitney statistic): the valid entries of a row are cut into ``n_bins`` equal-count
    bins by the covariate's rank; in bin b, U_b compares the bin's positives and negatives;

        AUC_cond = Σ_b U_b / Σ_b n₊_b n₋_b.

    0.5 when, at a fixed covariate level, ``scores`` tell nothing more about ``positive``
    (e.g. scores = f(covariate) + noise): what the scores know beyond the covariate.
    NaN where no bin holds both classes.
    """
    strata = Strata.of(average_ranks(scores, valid), average_ranks(covariate, valid), valid,
                       n_bins)
    return strata.auc(positive)


@dataclass(frozen=True)
class Strata:
    """Rows cut into covariate bins, with each entry's score rank within its bin; built
    once per (scores, covariate) and reused for every label."""

    within: torch.Tensor  # (R, M) rank of the score inside its bin (0 where invalid)
    flat_bins: torch.Tensor  # (R*M,) row-offset bin index
    below: torch.Tensor  # (R, n_bins) entries in the lower bins of the row
    size: torch.Tensor  # (R, n_bins) entries per bin
    valid: torch.Tensor  # (R, M)

    @staticmethod
    def of(score_ranks: torch.Tensor, covariate_ranks: torch.Tensor, valid: torch.Tensor,
           n_bins: int) -> Strata:
        return Strata.of_bins(score_ranks, quantile_bins(covariate_ranks, valid, n_bins),
                              valid, n_bins)

    @staticmethod
    def of_bins(score_ranks: torch.Tensor, bins: torch.Tensor, valid: torch.Tensor,
                n_bins: int) -> Strata:
        """Strata given each entry's bin (R, M) in 0..n_bins − 1 (joint strata of two
        covariates: ``bins_a * n_b + bins_b``)."""
        R, M = score_ranks.shape
        # sort by (bin, score): a bin offset larger than any score rank, then subtract the
        # entries of the lower bins
        within = average_ranks(bins.to(F64) * (M + 1) + score_ranks, valid)
        flat = (bins + torch.arange(R, device=bins.device)[:, None] * n_bins).flatten()
        size = _per_bin(valid, flat, R, n_bins)
        return Strata(within, flat, size.cumsum(-1) - size, size, valid)

    def auc(self, positive: torch.Tensor) -> torch.Tensor:
        """Σ_b U_b / Σ_b n₊_b n₋_b per row (NaN where no bin holds both classes)."""
        R, n_bins = self.size.shape
        pos = positive & self.valid
        n_pos = _per_bin(pos, self.flat_bins, R, n_bins)
        rank_sum = _per_bin(torch.where(pos, self.within, 0.0), self.flat_bins, R, n_bins)
        u = rank_sum - n_pos * self.below - n_pos * (n_pos + 1) / 2
        total = (n_pos * (self.size - n_pos)).sum(-1)
        return torch.where(total > 0, u.sum(-1) / total.clamp(min=1), torch.nan)


def quantile_bins(ranks: torch.Tensor, valid: torch.Tensor, n_bins: int) -> torch.Tensor:
    """(R, M) equal-count bins 0..n_bins − 1 of each row's valid entries by their
    :func:`average_ranks` ``ranks``."""
    n = valid.sum(-1, keepdim=True).to(F64).clamp(min=1)
    return ((ranks - 1) * n_bins / n).floor().clamp(0, n_bins - 1).long()


def _per_bin(values: torch.Tensor, flat: torch.Tensor, R: int, n_bins: int) -> torch.Tensor:
    """Sums of ``values`` (R, M) per row and bin: (R, n_bins)."""
    out = torch.zeros(R * n_bins, dtype=F64, device=values.device)
    return out.index_add_(0, flat, values.flatten().to(F64)).view(R, n_bins)


@dataclass(frozen=True)
class Bootstrap:
    """A mean over inputs with its percentile bootstrap interval (resampling inputs).

    ``p_le_null``: share of resampled means <= ``null`` (a one-sided bootstrap p-value for
    "the mean exceeds the null"); ``n``: inputs with a value.
    """

    mean: float
    low: float
    high: float
    p_le_null: float
    null: float
    n: int

    def to_dict(self) -> dict:
        return {"mean": self.mean, "ci95": [self.low, self.high], "p_le_null": self.p_le_null,
                "null": self.null, "n_inputs": self.n}


def bootstrap_mean(values: torch.Tensor, *, null: float = 0.0, n_boot: int = 2000,
                   seed: int = 0, level: float = 0.95) -> Bootstrap:
    """Bootstrap over inputs of the mean of ``values`` (N,) (NaN entries dropped first):
    percentile interval at ``level`` and the share of resampled means <= ``null``."""
    v = values.to(F64)
    v = v[~torch.isnan(v)]
    n = int(v.numel())
    if n == 0:
        nan = float("nan")
        return Bootstrap(nan, nan, nan, nan, null, 0)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, n, (n_boot, n), generator=g)
    means = v.cpu()[idx].mean(-1)  # (n_boot,)
    alpha = (1 - level) / 2
    low, high = torch.quantile(means, torch.tensor([alpha, 1 - alpha], dtype=F64)).tolist()
    return Bootstrap(float(v.mean()), low, high, float((means <= null).to(F64).mean()),
                     null, n)
