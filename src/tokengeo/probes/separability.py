"""Next-token separability ("linguistic collapse", Wu & Papyan, "Linguistic Collapse: Neural
Collapse in (Large) Language Models", NeurIPS 2024).

Each token representation ``h_{n,t}`` is labelled by the *next* token ``y = x_{n,t+1}``;
only the ``num_classes`` most frequent next tokens with at least ``min_count``
occurrences are kept (ties: smaller id first). With class means ``mu_c`` and
``Var_c = E_{h in c} ||h - mu_c||^2``:

    CDNV(c, c') = (Var_c + Var_c') / (2 ||mu_c - mu_c'||^2)

(class-distance normalised variance, Galanti et al., ICLR 2022, Def. 1), reported as its
mean over pairs ``c < c'`` (small = separable), and the nearest-mean accuracy
``P[argmin_c ||h - mu_c|| = y]`` over the kept tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tokengeo.errors import ConfigError

F64 = torch.float64


@dataclass
class NextTokenSeparability:
    classes: list[int]  # the next-token ids kept, most frequent first
    cdnv_mean: float
    cdnv_median: float
    nearest_mean_accuracy: float | None  # None before the second streaming pass
    n_tokens: int


def next_token_pairs(h: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor | None = None):
    """Representations ``(M, D)`` of positions ``t < T-1`` and their next-token ids ``(M,)``."""
    if h.dim() != 3 or ids.shape != h.shape[:2]:
        raise ConfigError(f"expected h (N, T, D) and ids (N, T), got {tuple(h.shape)} and "
                          f"{tuple(ids.shape)}")
    keep = torch.ones(ids.shape, dtype=torch.bool) if mask is None else mask.bool()
    valid = keep[:, :-1] & keep[:, 1:]
    return h[:, :-1][valid], ids[:, 1:][valid]


def frequent_classes(counts: torch.Tensor, num_classes: int, min_count: int = 2) -> list[int]:
    """Ids of the ``num_classes`` largest ``counts`` (a bincount) with ``>= min_count``."""
    order = sorted(range(len(counts)), key=lambda i: (-int(counts[i]), i))
    kept = [i for i in order[:num_classes] if int(counts[i]) >= min_count]
    if len(kept) < 2:
        raise ConfigError(f"need at least 2 next-token classes with >= {min_count} "
                          f"occurrences, found {len(kept)}")
    return kept


def _cdnv(mus: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """CDNV of every pair c < c' from means ``(C, D)`` and variances ``(C,)``."""
    i, j = torch.triu_indices(len(mus), len(mus), 1)
    return (var[i] + var[j]) / (2 * (mus[i] - mus[j]).square().sum(1))


def _nearest(h: torch.Tensor, mus: torch.Tensor) -> torch.Tensor:
    return (mus.square().sum(1)[None, :] - 2 * h @ mus.T).argmin(1)


def next_token_separability(h: torch.Tensor, ids: torch.Tensor,
                            mask: torch.Tensor | None = None, num_classes: int = 50,
                            min_count: int = 2) -> NextTokenSeparability:
    """Dense reference: ``h`` ``(N, T, D)``, ``ids`` ``(N, T)``."""
    feats, y = next_token_pairs(h, ids, mask)
    classes = frequent_classes(torch.bincount(y), num_classes, min_count)
    cls = torch.tensor(classes)
    sel = torch.isin(y, cls)
    feats, y = feats[sel].to(F64), y[sel]
    mus = torch.stack([feats[y == c].mean(0) for c in classes])
    var = torch.stack([(feats[y == c] - mus[k]).square().sum(1).mean()
                       for k, c in enumerate(classes)])
    cd = _cdnv(mus, var)
    acc = float((cls[_nearest(feats, mus)] == y).to(F64).mean())
    return NextTokenSeparability(classes, float(cd.mean()), float(cd.median()), acc, len(y))


class NextTokenAccumulator:
    """Streaming :func:`next_token_separability` for fixed ``classes``.

    Get the classes first from the counts of next tokens (``frequent_classes`` of the
    summed ``torch.bincount`` over batches, cheap: ids only). Pass 1 :meth:`update`
    accumulates per-class sums and squared norms; pass 2 :meth:`update_second` scores the
    nearest-mean classifier with the final means.
    """

    def __init__(self, classes: list[int], dim: int) -> None:
        self.classes = list(classes)
        self.cls = torch.tensor(self.classes)
        C = len(self.classes)
        self.sums = torch.zeros(C, dim, dtype=F64)
        self.sq = torch.zeros(C, dtype=F64)
        self.counts = torch.zeros(C, dtype=F64)
        self.correct = self.n_second = 0

    def _select(self, h, ids, mask):
        feats, y = next_token_pairs(h.detach(), ids, mask)
        sel = torch.isin(y, self.cls)
        # position of each label in self.classes
        slot = (y[sel][:, None] == self.cls[None, :]).to(torch.long).argmax(1)
        return feats[sel].to(F64), slot

    def update(self, h: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor | None = None):
        feats, slot = self._select(h, ids, mask)
        self.sums.index_add_(0, slot, feats)
        self.sq.index_add_(0, slot, feats.square().sum(1))
        self.counts.index_add_(0, slot, torch.ones(len(slot), dtype=F64))

    def update_second(self, h, ids, mask=None) -> None:
        feats, slot = self._select(h, ids, mask)
        self.correct += int((_nearest(feats, self._means()) == slot).sum())
        self.n_second += len(slot)

    def _means(self) -> torch.Tensor:
        if bool((self.counts == 0).any()):
            raise ConfigError("some next-token classes received no tokens")
        return self.sums / self.counts[:, None]

    def compute(self) -> NextTokenSeparability:
        mus = self._means()
        var = self.sq / self.counts - mus.square().sum(1)
        cd = _cdnv(mus, var)
        acc = self.correct / self.n_second if self.n_second else None
        return NextTokenSeparability(self.classes, float(cd.mean()), float(cd.median()), acc,
                                     int(self.counts.sum()))
