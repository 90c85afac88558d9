"""Reference attention with head kinds: the maths, read top to bottom, no kernels.

Zhang & Papyan (arXiv 2602.09297, Eq. 2 with P replaced by I − P for Laplacian heads):
head h of a layer computes

    P_h = softmax(Q_h K_hᵀ · scale + mask)          (T, T), rows sum to 1
    z_h = a_h V_h + b_h P_h V_h                     (T, Dh)

with (a, b) = (0, 1) for an attention head (z = P V), (1, −1) for a Laplacian head
(z = (I − P) V, the random-walk graph Laplacian of the attention graph acting on the
values) and a learnt pair for a mixed head (:mod:`tokengeo.nn.heads`). The per-head outputs
are then concatenated and projected, as in any multi-head attention.

Everything here materialises P, in float64 if asked, and is slow on purpose: it is what
the fast paths (:mod:`tokengeo.nn.kernels`, ``HeadMixer.combine``, the Hugging Face
swap) are tested against, values and gradients.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def mix_heads(
    v: torch.Tensor, pv: torch.Tensor, coef_a: torch.Tensor, coef_b: torch.Tensor
) -> torch.Tensor:
    """``z_h = a_h V_h + b_h (P V)_h``: the one reference of every head kind's output.

    v, pv: (..., H, Dh) (heads on the second-to-last axis); coef_a, coef_b: (H,), or any
    shape broadcasting against (..., H). Returns (..., H, Dh).
    """
    return coef_a.unsqueeze(-1) * v + coef_b.unsqueeze(-1) * pv


def attention_scores(
    q: torch.Tensor, k: torch.Tensor, attn_mask: torch.Tensor | None = None,
    is_causal: bool = False, scale: float | None = None,
) -> torch.Tensor:
    """The logits of P: ``QKᵀ·scale`` with masked keys at −∞ (scale 1/√Dh by default).

    q, k: (N, H, T, Dh); attn_mask: bool (True = may attend) broadcasting to (N, H, T, T),
    or additive float. Returns (N, H, T, T).
    """
    T, Dh = q.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(Dh) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (N, H, T, T)
    if is_causal:
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return scores


def attention_pattern(
    q: torch.Tensor, k: torch.Tensor, attn_mask: torch.Tensor | None = None,
    is_causal: bool = False, scale: float | None = None,
) -> torch.Tensor:
    """P = softmax(QKᵀ·scale) with masked keys at −∞ (:func:`attention_scores`), (N, H, T, T)."""
    return attention_scores(q, k, attn_mask, is_causal, scale).softmax(dim=-1)


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    coef_a: torch.Tensor,
    coef_b: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Materialise P and return (z, P): z = a V + b P V per head, (B, H, T, Dh).

    q, k, v: (B, H, T, Dh); coef_a, coef_b: (H,). Dropout (if any) acts on P, as in SDPA;
    the returned pattern is P before dropout.
    """
    pattern = attention_pattern(q, k, attn_mask, is_causal, scale)  # (B, H, T, T)
    p = F.dropout(pattern, dropout_p) if dropout_p > 0 else pattern
    pv = p @ v  # (B, H, T, Dh)
    z = mix_heads(v.transpose(1, 2), pv.transpose(1, 2), coef_a, coef_b)  # (B, T, H, Dh)
    return z.transpose(1, 2), pattern


def self_attention_reference(
    x: torch.Tensor, w_qkv: torch.Tensor, w_proj: torch.Tensor, n_heads: int,
    coef_a: torch.Tensor, coef_b: torch.Tensor, *, is_causal: bool = False,
) -> torch.Tensor:
    """One multi-head self-attention layer with head kinds, bias-free, as a reader sees it.

    x: (B, T, d); w_qkv: (3d, d) with rows ``[q | k | v]``, each head-major (H, Dh);
    w_proj: (d, d). Returns (B, T, d) = concat_h(z_h) W_projᵀ.
    """
    B, T, d = x.shape
    q, k, v = (x @ w_qkv.T).view(B, T, 3, n_heads, d // n_heads).unbind(2)  # (B, T, H, Dh)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
    z, _ = attention_reference(q, k, v, coef_a, coef_b, is_causal=is_causal)  # (B, H, T, Dh)
    return z.transpose(1, 2).reshape(B, T, d) @ w_proj.T
