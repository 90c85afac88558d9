"""Variance decomposition (ANOVA) of token representations.

For tokens ``x_{n,t}`` of sequences ``n`` with means ``m_n`` and the global mean ``mu``
(law of total variance, token-weighted)::

    total            = (1/N_tok) sum_{n,t} ||x_{n,t} - mu||^2
    within_sequence  = (1/N_tok) sum_{n,t} ||x_{n,t} - m_n||^2
    between_sequence = (1/N_tok) sum_n T_n ||m_n - mu||^2        (total = within + between)

and, when sequences carry class labels ``y_n``, the one-way ANOVA of the sequence means
(each sequence one point, class means ``mu_c``, mean of means ``m_bar``)::

    between_class = (1/N) sum_c N_c ||mu_c - m_bar||^2
    within_class  = (1/N) sum_n ||m_n - mu_{y_n}||^2             (their sum = Var(m_n))

This is the decomposition used to measure how attention smooths token representations
within a sequence (Zhang & Papyan, arXiv 2602.09297; cf. the within/between-class
variability of Papyan, Han & Donoho, PNAS 2020).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tokengeo.errors import ConfigError

F64 = torch.float64


@dataclass
class VarianceDecomposition:
    total: float
    within_sequence: float
    between_sequence: float
    between_class: float | None  # of sequence means; None without labels
    within_class: float | None
    n_tokens: int
    n_sequences: int

    @property
    def within_fraction(self) -> float:
        """Share of the total variance inside sequences (1 - between_sequence share)."""
        return self.within_sequence / self.total if self.total > 0 else float("nan")


def _check(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if x.dim() != 3:
        raise ConfigError(f"expected token representations (N, T, D), got shape {tuple(x.shape)}")
    if mask is None:
        return torch.ones(x.shape[:2], dtype=torch.bool)
    if mask.shape != x.shape[:2]:
        raise ConfigError(f"mask shape {tuple(mask.shape)} does not match {tuple(x.shape[:2])}")
    return mask.bool()


def variance_decomposition(x: torch.Tensor, labels: torch.Tensor | None = None,
                           mask: torch.Tensor | None = None) -> VarianceDecomposition:
    """Dense reference: ``x`` ``(N, T, D)``, ``labels`` ``(N,)``, ``mask`` ``(N, T)``."""
    keep = _check(x, mask)
    x = x.to(F64)
    w = keep.to(F64)[..., None]  # (N, T, 1)
    n_t = w.sum(1)  # (N, 1)
    if bool((n_t == 0).any()):
        raise ConfigError("every sequence needs at least one unmasked token")
    m = (x * w).sum(1) / n_t  # (N, D) sequence means
    mu = (x * w).sum((0, 1)) / w.sum()
    total = float(((x - mu).square().sum(-1, keepdim=True) * w).sum() / w.sum())
    within = float(((x - m[:, None]).square().sum(-1, keepdim=True) * w).sum() / w.sum())
    between = float((n_t[:, 0] * (m - mu).square().sum(-1)).sum() / w.sum())
    bc = wc = None
    if labels is not None:
        m_bar = m.mean(0)
        classes = labels.unique()
        mus = torch.stack([m[labels == c].mean(0) for c in classes])  # (C, D)
        counts = torch.stack([(labels == c).sum() for c in classes]).to(F64)
        bc = float((counts * (mus - m_bar).square().sum(-1)).sum() / len(m))
        idx = torch.searchsorted(classes, labels)
        wc = float((m - mus[idx]).square().sum(-1).mean())
    return VarianceDecomposition(total, within, between, bc, wc, int(keep.sum()), len(x))


class VarianceAccumulator:
    """Streaming :func:`variance_decomposition`: ``update`` batches of whole sequences."""

    def __init__(self) -> None:
        self.s1 = None  # sum of token vectors (D,)
        self.s2 = 0.0  # sum of squared token norms
        self.seq_sq = 0.0  # sum_n T_n ||m_n||^2
        self.n_tok = 0.0
        self.means_sum = None  # sum of sequence means (D,)
        self.means_sq = 0.0
        self.n_seq = 0
        self.classes: dict[int, list] = {}  # label -> [sum of means (D,), count]

    def update(self, x: torch.Tensor, labels: torch.Tensor | None = None,
               mask: torch.Tensor | None = None) -> None:
        keep = _check(x, mask)
        x = x.detach().to(F64)
        w = keep.to(F64)[..., None]
        n_t = w.sum(1)  # (N, 1)
        if bool((n_t == 0).any()):
            raise ConfigError("every sequence needs at least one unmasked token")
        m = (x * w).sum(1) / n_t  # (N, D)
        s1 = (x * w).sum((0, 1))
        self.s1 = s1 if self.s1 is None else self.s1 + s1
        self.s2 += float((x.square().sum(-1, keepdim=True) * w).sum())
        self.seq_sq += float((n_t[:, 0] * m.square().sum(-1)).sum())
        self.n_tok += float(w.sum())
        ms = m.sum(0)
        self.means_sum = ms if self.means_sum is None else self.means_sum + ms
        self.means_sq += float(m.square().sum())
        self.n_seq += len(m)
        if labels is not None:
            for c in labels.unique().tolist():
                sel = m[labels == c]
                entry = self.classes.setdefault(c, [torch.zeros_like(ms), 0])
                entry[0] = entry[0] + sel.sum(0)
                entry[1] += len(sel)

    def compute(self) -> VarianceDecomposition:
        if self.n_seq == 0:
            raise ConfigError("no sequences were added to the variance accumulator")
        mu_sq = float(self.s1.square().sum()) / self.n_tok**2
        total = self.s2 / self.n_tok - mu_sq
        within = (self.s2 - self.seq_sq) / self.n_tok
        between = self.seq_sq / self.n_tok - mu_sq
        bc = wc = None
        if self.classes:
            class_sq = sum(float(s.square().sum()) / n for s, n in self.classes.values())
            bc = (class_sq - float(self.means_sum.square().sum()) / self.n_seq) / self.n_seq
            wc = (self.means_sq - class_sq) / self.n_seq
        return VarianceDecomposition(total, within, between, bc, wc, int(self.n_tok), self.n_seq)
