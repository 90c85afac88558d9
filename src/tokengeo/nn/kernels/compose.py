"""The plain composition ``a V + b SDPA(q, k, v)`` in autograd: the kernel that always runs.

Head ``h`` outputs ``z_h = a_h V_h + b_h P_h V_h`` (Zhang & Papyan, arXiv 2602.09297, Eq. 2
with P replaced by I − P for Laplacian heads; the reference is
:func:`tokengeo.nn.reference.mix_heads`). ``F.scaled_dot_product_attention`` gives P V with
any mask, dropout or device; the heads' combination follows in plain autograd, which keeps
SDPA's output *and* z for the backward (one (B, T, d) tensor more than standard attention).
:func:`combine_runs` is also what the Hugging Face swap and the other kernels' no-grad and
double-backward paths combine with.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tokengeo.nn.heads import ATTENTION, MIXED, HeadRuns

__all__ = ["combine_runs", "compose"]


def compose(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, coef_a: torch.Tensor,
    coef_b: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False,
    dropout_p: float = 0.0, scale: float | None = None, runs: HeadRuns | None = None,
) -> torch.Tensor:
    """The plain composition in autograd: ``a V + b SDPA(q, k, v)`` as (B, T, H, Dh).

    q, k, v: (B, H, T, Dh); coef_a, coef_b: (H,), or (p, H) for p slices stacked
    slice-major along B (the L-Transformer's per-slice mixed heads). With ``runs`` (the
    heads' kinds), heads of one fixed kind cost what ``V − SDPA`` costs: attention heads
    are SDPA's output, Laplacian heads one subtraction (no ``a·V`` and ``b·P V``
    temporaries); several kinds, or mixed heads, take the general formula over all heads
    (:func:`combine_runs`). Without ``runs`` every head takes the general formula; so do
    all heads when the coefficients require grad (a fixed-kind head's (a, b) then still
    gets its gradient).
    """
    pv = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
    ).transpose(1, 2)  # (B, T, H, Dh)
    if runs is None or coef_a.requires_grad or coef_b.requires_grad:
        runs = HeadRuns(((0, q.shape[1], MIXED),))
    return combine_runs(v.transpose(1, 2), pv, coef_a, coef_b, runs)


def combine_runs(vt, pv, coef_a, coef_b, runs: HeadRuns) -> torch.Tensor:
    """``a V + b P V`` in plain autograd, (B, T, H, Dh) from V and P V of that shape.

    One kind: attention heads are P V itself, Laplacian heads one subtraction, mixed heads
    the general formula. Several kinds: the general formula over all heads at once,
    ``b·P V + a·V`` (exact for the fixed kinds: products by 0, 1 or −1, and
    ``V + (−P V)`` is ``V − P V``); cheaper than a piece per run and their concatenation,
    whose backward zero-fills and copies every piece (:func:`tokengeo.nn.reference.mix_heads`
    is the reference). Coefficients shaped (p, H) act on p slices stacked along the batch.
    """
    (_, _, kind), *rest = runs.runs
    if coef_a.dim() == 2:  # per slice: (p, H) against (p·B, T, H, Dh)
        P = coef_a.shape[0]
        shape = (P, 1, 1, -1, 1)  # (p, 1, 1, H, 1)
        out = torch.addcmul(pv.unflatten(0, (P, -1)) * coef_b.view(shape), coef_a.view(shape),
                            vt.unflatten(0, (P, -1)))
        return out.flatten(0, 1)
    if rest or kind == MIXED:
        shape = (1, 1, -1, 1)  # (1, 1, H, 1)
        return torch.addcmul(pv * coef_b.view(shape), coef_a.view(shape), vt)
    return pv if kind == ATTENTION else torch.sub(vt, pv)
