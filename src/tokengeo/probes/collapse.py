"""Neural collapse NC1-NC4 (Papyan, Han & Donoho, "Prevalence of neural collapse during the
terminal phase of deep learning training", PNAS 2020, Sec. 3 and Fig. 6-9).

Features ``h_i`` with labels ``y_i`` in C classes, class means ``mu_c``, global mean
``mu_G`` (mean of all features), centred means ``M = [mu_c - mu_G]_c`` ``(C, D)``::

    Sigma_W = (1/N) sum_i (h_i - mu_{y_i})(h_i - mu_{y_i})^T
    Sigma_B = (1/C) sum_c (mu_c - mu_G)(mu_c - mu_G)^T
    NC1 = tr(Sigma_W Sigma_B^+) / C                              (0 under perfect collapse)
    NC2 equinorm     = std_c ||mu_c - mu_G|| / mean_c ||mu_c - mu_G||
        equiangular  = std_{c != c'} cos(mu_c - mu_G, mu_c' - mu_G)
        max_angle    = mean_{c != c'} |cos(...) + 1/(C-1)|       (simplex ETF: all 0)
        etf_error    = || M M^T / ||M M^T||_F - (I - 11^T/C) / ||I - 11^T/C||_F ||_F
    NC3 = || W / ||W||_F - M / ||M||_F ||_F                       (classifier W (C, D))
    NC4 = P[argmax_c (W h + b)_c == argmin_c ||h - mu_c||]        (classifier vs nearest mean)

``ncc_accuracy`` (nearest class mean agrees with the label) is always reported; NC3/NC4
need a classifier. On sequences use :func:`neural_collapse_sequences` (features =
sequence means) or :func:`neural_collapse_tokens` (every token carries its sequence's
label).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tokengeo.errors import ConfigError

F64 = torch.float64


@dataclass
class NeuralCollapse:
    nc1: float
    nc2_equinorm: float
    nc2_equiangular: float
    nc2_max_angle: float
    nc2_etf_error: float
    nc3: float | None
    nc4: float | None  # share of disagreement-free predictions (1 = collapse)
    ncc_accuracy: float | None  # None before the second streaming pass
    n_classes: int
    n_samples: int


def _geometry(mus: torch.Tensor, mu_g: torch.Tensor, sigma_w: torch.Tensor,
              weight: torch.Tensor | None) -> dict:
    """NC1-NC3 from class means ``(C, D)``, global mean and within-class covariance."""
    C = mus.shape[0]
    if C < 2:
        raise ConfigError(f"neural collapse needs at least 2 classes, got {C}")
    M = mus - mu_g  # (C, D)
    sigma_b = M.T @ M / C
    nc1 = float(torch.trace(sigma_w @ torch.linalg.pinv(sigma_b, hermitian=True)) / C)
    norms = M.norm(dim=1)
    cos = (M @ M.T) / (norms[:, None] * norms[None, :])
    off = ~torch.eye(C, dtype=torch.bool)
    G = M @ M.T
    etf = torch.eye(C, dtype=F64) - 1.0 / C
    out = {
        "nc1": nc1,
        "nc2_equinorm": float(norms.std(unbiased=False) / norms.mean()),
        "nc2_equiangular": float(cos[off].std(unbiased=False)),
        "nc2_max_angle": float((cos[off] + 1.0 / (C - 1)).abs().mean()),
        "nc2_etf_error": float((G / G.norm() - etf / etf.norm()).norm()),
        "nc3": None,
    }
    if weight is not None:
        W = weight.to(F64)
        out["nc3"] = float((W / W.norm() - M / M.norm()).norm())
    return out


def _nearest_mean(h: torch.Tensor, mus: torch.Tensor) -> torch.Tensor:
    """argmin_c ||h - mu_c||^2 = argmin_c (||mu_c||^2 - 2 h.mu_c)."""
    return (mus.square().sum(1)[None, :] - 2 * h @ mus.T).argmin(1)


def _check(h: torch.Tensor, y: torch.Tensor) -> None:
    if h.dim() != 2 or y.shape != h.shape[:1]:
        raise ConfigError(f"expected features (N, D) and labels (N,), got {tuple(h.shape)} "
                          f"and {tuple(y.shape)}")


def neural_collapse(h: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None = None,
                    bias: torch.Tensor | None = None) -> NeuralCollapse:
    """Dense reference. ``weight`` ``(C, D)`` rows follow the sorted class labels."""
    _check(h, y)
    h = h.to(F64)
    classes = y.unique()  # sorted
    idx = torch.searchsorted(classes, y)
    mus = torch.stack([h[y == c].mean(0) for c in classes])  # (C, D)
    centred = h - mus[idx]
    sigma_w = centred.T @ centred / len(h)
    out = _geometry(mus, h.mean(0), sigma_w, weight)
    ncc = _nearest_mean(h, mus)
    nc4 = None
    if weight is not None:
        logits = h @ weight.to(F64).T + (0 if bias is None else bias.to(F64))
        nc4 = float((logits.argmax(1) == ncc).to(F64).mean())
    return NeuralCollapse(**out, nc4=nc4, ncc_accuracy=float((ncc == idx).to(F64).mean()),
                          n_classes=len(classes), n_samples=len(h))


class NeuralCollapseAccumulator:
    """Streaming :func:`neural_collapse` in two passes over the same data.

    Pass 1 :meth:`update` accumulates class sums and the scatter ``sum h h^T`` (``D x D``),
    enough for NC1-NC3. NC4 and the nearest-mean accuracy compare every feature with the
    *final* class means, so they need pass 2 (:meth:`update_second`).
    """

    def __init__(self, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None):
        self.weight, self.bias = weight, bias
        self.sums: dict[int, torch.Tensor] = {}
        self.counts: dict[int, int] = {}
        self.scatter = None  # (D, D)
        self.total = None
        self.n = 0
        self.agree = self.correct = self.n_second = 0

    def update(self, h: torch.Tensor, y: torch.Tensor) -> None:
        _check(h, y)
        h = h.detach().to(F64)
        self.scatter = h.T @ h if self.scatter is None else self.scatter + h.T @ h
        self.total = h.sum(0) if self.total is None else self.total + h.sum(0)
        self.n += len(h)
        for c in y.unique().tolist():
            sel = h[y == c]
            self.sums[c] = self.sums.get(c, 0) + sel.sum(0)
            self.counts[c] = self.counts.get(c, 0) + len(sel)

    def _means(self) -> tuple[torch.Tensor, torch.Tensor]:
        classes = torch.tensor(sorted(self.sums))
        mus = torch.stack([self.sums[c] / self.counts[c] for c in classes.tolist()])
        return classes, mus

    def update_second(self, h: torch.Tensor, y: torch.Tensor) -> None:
        _check(h, y)
        classes, mus = self._means()
        h = h.detach().to(F64)
        ncc = _nearest_mean(h, mus)
        self.correct += int((classes[ncc] == y).sum())
        if self.weight is not None:
            logits = h @ self.weight.to(F64).T + (0 if self.bias is None else self.bias.to(F64))
            self.agree += int((logits.argmax(1) == ncc).sum())
        self.n_second += len(h)

    def compute(self) -> NeuralCollapse:
        if self.n == 0:
            raise ConfigError("no features were added to the neural-collapse accumulator")
        classes, mus = self._means()
        counts = torch.tensor([self.counts[c] for c in classes.tolist()], dtype=F64)
        sigma_w = (self.scatter - (mus.T * counts) @ mus) / self.n
        out = _geometry(mus, self.total / self.n, sigma_w, self.weight)
        done = self.n_second > 0
        nc4 = self.agree / self.n_second if done and self.weight is not None else None
        return NeuralCollapse(**out, nc4=nc4,
                              ncc_accuracy=self.correct / self.n_second if done else None,
                              n_classes=len(classes), n_samples=self.n)


def sequence_features(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Sequence means ``(N, D)`` of tokens ``(N, T, D)`` (masked tokens left out)."""
    if mask is None:
        return x.mean(1)
    w = mask.to(x.dtype)[..., None]
    return (x * w).sum(1) / w.sum(1).clamp_min(1)


def token_features(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None):
    """Every (unmasked) token with its sequence's label: ``(M, D)``, ``(M,)``."""
    keep = torch.ones(x.shape[:2], dtype=torch.bool) if mask is None else mask.bool()
    return x[keep], y[:, None].expand(x.shape[:2])[keep]


def neural_collapse_sequences(x, y, mask=None, weight=None, bias=None) -> NeuralCollapse:
    """NC1-NC4 of sequence means: ``x`` ``(N, T, D)``, ``y`` ``(N,)``."""
    return neural_collapse(sequence_features(x, mask), y, weight, bias)


def neural_collapse_tokens(x, y, mask=None, weight=None, bias=None) -> NeuralCollapse:
    """NC1-NC4 of tokens labelled by their sequence: ``x`` ``(N, T, D)``, ``y`` ``(N,)``."""
    return neural_collapse(*token_features(x, y, mask), weight, bias)
