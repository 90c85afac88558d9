"""L-MHA: multi-head attention in every spectral slice, as one fused attention call.

El Ichi et al. (arXiv 2603.05727, L-MHA): in the transform domain slice k computes
ordinary multi-head attention with its own weights of width d_s,

    Q̂_k = X̂_k Ŵ^Q_k,  K̂_k = X̂_k Ŵ^K_k,  V̂_k = X̂_k Ŵ^V_k,
    Ẑ_k = concat_h softmax(Q̂_kh K̂_khᵀ / √D_h) V̂_kh,   Ŷ_k = Ẑ_k Ŵ^O_k.

The p slices × H heads are p·H independent heads, so one ``scaled_dot_product_attention``
call with batch p·B computes all of them, and the projections are :class:`SliceLinear`
batched matmuls. Head kinds (Zhang & Papyan, arXiv 2602.09297) apply within each slice:
the same per-head kinds in every slice, through :func:`combine_heads`; a ``mixed`` head has
its own learnt (a, b) in every slice.

Hook points (head index ``k·H + h``, slice-major; all in the transform domain):
``hook_q``, ``hook_k``, ``hook_v``, ``hook_z`` (B, T, p·H, D_h) and ``hook_pattern``
(B, p·H, T, T, computed only when hooked). Reshaping to these layouts costs a copy, made
only when a hook is attached.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint
from tokengeo.nn.attention import (
    attention_reference,
    build_attn_mask,
    combine_heads,
    register_head_kinds,
)
from tokengeo.nn.lproduct import ALL_SLICES, Affine, SliceLinear, select_slices


def heads_to_tokens(z: torch.Tensor, p: int) -> torch.Tensor:
    """(p·B, T, H, Dh) slice-major -> (B, T, p·H, Dh), head index k·H + h."""
    PB, T, H, Dh = z.shape
    return z.view(p, PB // p, T, H, Dh).permute(1, 2, 0, 3, 4).reshape(PB // p, T, p * H, Dh)


def tokens_to_heads(z: torch.Tensor, p: int) -> torch.Tensor:
    """(B, T, p·H, Dh) -> (p·B, T, H, Dh), the inverse of :func:`heads_to_tokens`."""
    B, T, PH, Dh = z.shape
    return z.view(B, T, p, PH // p, Dh).permute(2, 0, 1, 3, 4).reshape(p * B, T, PH // p, Dh)


def pattern_to_tokens(pattern: torch.Tensor, p: int) -> torch.Tensor:
    """(p·B, H, T, T) -> (B, p·H, T, T)."""
    PB, H, T, S = pattern.shape
    return pattern.view(p, PB // p, H, T, S).transpose(0, 1).reshape(PB // p, p * H, T, S)


class LMultiHeadAttention(nn.Module):
    """Self-attention of p slices × H heads of width D_h = d_s / H, with per-head kinds.

    Parameters: ``qkv`` (p, d_s, 3·d_s), columns ``[q | k | v]`` each head-major (H, D_h)
    as in :class:`~tokengeo.nn.attention.MultiHeadAttention`; ``proj`` (p, d_s, d_s);
    ``mix_coef`` (p, n_mixed, 2) when some heads are ``mixed``.
    """

    def __init__(
        self,
        p: int,
        d_slice: int,
        n_heads: int,
        *,
        head_kinds: Sequence[str] | None = None,
        mixed_init: str = "laplacian",
        causal: bool = False,
        attn_dropout: float = 0.0,
        proj_dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if d_slice % n_heads:
            raise ConfigError(f"d_slice={d_slice} is not divisible by n_heads={n_heads}")
        self.p, self.d_slice, self.n_heads = p, d_slice, n_heads
        self.head_dim = d_slice // n_heads
        self.causal, self.attn_dropout = causal, attn_dropout
        self.qkv = SliceLinear(p, d_slice, 3 * d_slice, bias=bias)
        self.proj = SliceLinear(p, d_slice, d_slice, bias=bias)
        self.proj_drop = nn.Dropout(proj_dropout)
        register_head_kinds(self, head_kinds or ("attention",) * n_heads, mixed_init, slices=p)
        for name in ("hook_q", "hook_k", "hook_v", "hook_pattern", "hook_z"):
            setattr(self, name, HookPoint())

    def head_coefficients(self, sl: slice = ALL_SLICES) -> tuple[torch.Tensor, torch.Tensor]:
        """(a, b), each (p', H): head h of slice k outputs a_kh V + b_kh P V."""
        n = len(range(self.p)[sl])
        coef = self.coef_fixed.to(self.qkv.weight.dtype).expand(n, -1, -1).clone()  # (p', H, 2)
        if self.mix_coef is not None:
            coef[:, self.mixed_index] = select_slices(self.mix_coef, sl)
        return coef[..., 0], coef[..., 1]

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
        sl: slice = ALL_SLICES, in_affine: Affine | None = None,
    ) -> torch.Tensor:
        """(p', B, T, d_s) -> (p', B, T, d_s); ``key_padding_mask`` (B, T), 1 = real token.

        ``in_affine``: a per-slice (γ, β) applied to ``x`` first, folded into the qkv weights.
        """
        P, B, T, _ = x.shape
        H, Dh = self.n_heads, self.head_dim
        qkv = self.qkv(x, sl, in_affine).view(P * B, T, 3, H, Dh)
        q, k, v = (self._hook(hp, t, P) for hp, t in
                   zip((self.hook_q, self.hook_k, self.hook_v), qkv.unbind(dim=2), strict=True))
        qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))  # (P·B, H, T, Dh)
        attn_mask, is_causal = build_attn_mask(key_padding_mask, T, self.causal)
        if attn_mask is not None:
            attn_mask = attn_mask.repeat(P, 1, 1, 1)  # (P·B, 1, 1 or T, T), slice-major
        dropout_p = self.attn_dropout if self.training else 0.0
        if self.hook_pattern.is_active():
            b = torch.ones(H, dtype=x.dtype, device=x.device)  # P V only: a = 0, b = 1
            a = torch.zeros_like(b)
            pv, pattern = attention_reference(qh, kh, vh, a, b, attn_mask, is_causal, dropout_p)
            self.hook_pattern(pattern_to_tokens(pattern, P))
        else:
            pv = F.scaled_dot_product_attention(
                qh, kh, vh, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
            )  # (P·B, H, T, Dh)
        z = self._combine(v, pv.transpose(1, 2), sl)  # (P·B, T, H, Dh)
        z = self._hook(self.hook_z, z, P)
        return self.proj_drop(self.proj(z.reshape(P, B, T, self.d_slice), sl))

    def _combine(self, v: torch.Tensor, pv: torch.Tensor, sl: slice) -> torch.Tensor:
        """a V + b P V per head, v and pv (P·B, T, H, Dh)."""
        if self.mix_coef is not None:
            a, b = self.head_coefficients(sl)  # (P, H)
            P, H = a.shape
            shape = (P, 1, 1, H, 1)
            out = a.view(shape) * v.unflatten(0, (P, -1)) + b.view(shape) * pv.unflatten(0, (P, -1))
            return out.flatten(0, 1)
        if self.n_laplacian == 0:
            return pv
        all_lap = self.n_laplacian == self.n_heads
        return combine_heads(v, pv, None, None, self.laplacian_mask, all_lap)

    @staticmethod
    def _hook(point: HookPoint, t: torch.Tensor, p: int) -> torch.Tensor:
        """Show ``t`` (p·B, T, H, Dh) to ``point`` as (B, T, p·H, Dh); a no-op when unhooked."""
        if not point.is_active():
            return t
        return tokens_to_heads(point(heads_to_tokens(t, p)), p)

    def extra_repr(self) -> str:
        counts = {k: self.head_kinds.count(k) for k in dict.fromkeys(self.head_kinds)}
        return (f"p={self.p}, d_slice={self.d_slice}, n_heads={self.n_heads}, "
                f"causal={self.causal}, heads={counts}")
