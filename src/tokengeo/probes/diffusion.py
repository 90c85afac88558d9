"""A head's real update as heat diffusion: the finite-step change of the within-sequence
variance and of the Dirichlet energy on the head's own attention graph.

Zhang & Papyan (arXiv 2602.09297, Sec. 3) read a Laplacian head ``X + (I − P) X W_V W_O`` as
one step of heat diffusion on the graph whose edge weights are the head's softmax pattern P
(I − P the random-walk graph Laplacian). Heat diffusion lowers the Dirichlet energy of the
signal on that graph,

    E_P(X) = Σ_seq Σ_i Σ_j P_ij ‖x_i − x_j‖²,

which is not the uniform within-sequence variance when P is not uniform (nor symmetric).
With X the block's residual input (B, T, d) and O a head's write to the residual (B, T, d),
the head's update is X + O (ε = 1, not the derivative at ε = 0):

* :func:`variance_step` = (Var_w(X + O) − Var_w(X)) / Var_w(X), with
  Var_w(X) = Σ_seq Σ_t ‖x_t − x̄‖² (x̄ the sequence's mean);
  = 2⟨X_c, O_c⟩ / Var_w(X) + ‖O_c‖² / Var_w(X): the first-order term
  (:func:`tokengeo.probes.smoothing.variance_derivative`) plus a second-order term that can
  reverse its sign;
* :func:`dirichlet_step` = (E_P(X + O) − E_P(X)) / E_P(X), P the head's pattern.

Both negative: the head smooths (on the uniform graph, on its own graph). Padding (a (B, T)
``mask``, True / 1 for real tokens) is left out of every sum; the pattern's rows of padded
queries are ignored and its columns of padded keys must be 0 (a key-padding mask does so).
"""

from __future__ import annotations

import torch

F64 = torch.float64


def _weights(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """(B, T) real-token weights in float64 (ones without a mask)."""
    if mask is None:
        return torch.ones(x.shape[:2], dtype=F64, device=x.device)
    return mask.to(device=x.device, dtype=F64)


def within_sum(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Var_w(X) = Σ_seq Σ_t ‖x_t − x̄_seq‖² over real tokens (a float64 scalar); x (B, T, d)."""
    w = _weights(x, mask).unsqueeze(-1)  # (B, T, 1)
    x = x.to(F64)
    mean = (x * w).sum(1, keepdim=True) / w.sum(1, keepdim=True).clamp_min(1.0)  # (B, 1, d)
    return ((x - mean).pow(2) * w).sum()


def variance_step(x: torch.Tensor, o: torch.Tensor,
                  mask: torch.Tensor | None = None) -> torch.Tensor:
    """(Var_w(X + O) − Var_w(X)) / Var_w(X): the relative change of the within-sequence
    variance under the update X → X + O (Zhang & Papyan, arXiv 2602.09297: < 0, the head
    smooths). x, o: (B, T, d); a float64 scalar."""
    before = within_sum(x, mask)
    return (within_sum(x.to(F64) + o.to(F64), mask) - before) / before.clamp_min(1e-300)


def dirichlet_energy(x: torch.Tensor, pattern: torch.Tensor,
                     mask: torch.Tensor | None = None) -> torch.Tensor:
    """E_P(X) = Σ_b Σ_i Σ_j P_bij ‖x_bi − x_bj‖² over real i, j: x (B, T, d), pattern
    (B, T, T) (rows: queries i, columns: keys j) or (B, H, T, T) for one energy per head
    (returns (H,)); float64. The Dirichlet energy of the signal X on the graph of edge
    weights P, which one heat-diffusion step X + (P − I) X lowers (Zhang & Papyan, arXiv
    2602.09297, Sec. 3)."""
    x = x.to(F64)
    w = _weights(x, mask)  # (B, T)
    sq = x.pow(2).sum(-1)  # (B, T)
    dist = sq.unsqueeze(-1) + sq.unsqueeze(-2) - 2 * x @ x.transpose(-1, -2)  # (B, T, T)
    dist = dist.clamp_min(0) * (w.unsqueeze(-1) * w.unsqueeze(-2))
    p = pattern.to(F64)
    if p.dim() == 4:  # (B, H, T, T)
        return (p * dist.unsqueeze(1)).sum((0, 2, 3))
    return (p * dist).sum()


def dirichlet_step(x: torch.Tensor, o: torch.Tensor, pattern: torch.Tensor,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """(E_P(X + O) − E_P(X)) / E_P(X) with P one head's pattern (B, T, T): the relative
    change of the Dirichlet energy on the head's own graph under its update X → X + O
    (< 0: the head smooths as heat diffusion does; Zhang & Papyan, arXiv 2602.09297)."""
    before = dirichlet_energy(x, pattern, mask)
    after = dirichlet_energy(x.to(F64) + o.to(F64), pattern, mask)
    return (after - before) / before.clamp_min(1e-300)


def within_share(x: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Share of the token variance inside sequences, within / total
    (:class:`tokengeo.probes.variance.VarianceDecomposition`, the law of total variance):
    x (B, T, d)."""
    from tokengeo.probes.variance import variance_decomposition

    keep = None if mask is None else mask.bool().cpu()
    return variance_decomposition(x.detach().cpu(), mask=keep).within_fraction
