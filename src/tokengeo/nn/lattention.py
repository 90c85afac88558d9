"""L-MHA: multi-head attention in every spectral slice, as one fused attention call.

El Ichi et al. (arXiv 2603.05727, L-MHA): in the transform domain slice k computes
ordinary multi-head attention with its own weights of width d_s,

    Q̂_k = X̂_k Ŵ^Q_k,  K̂_k = X̂_k Ŵ^K_k,  V̂_k = X̂_k Ŵ^V_k,
    Ẑ_k = concat_h softmax(Q̂_kh K̂_khᵀ / √D_h) V̂_kh,   Ŷ_k = Ẑ_k Ŵ^O_k.

The p slices × H heads are p·H independent heads, so one ``scaled_dot_product_attention``
call with batch p·B computes all of them, and the projections are :class:`SliceLinear`
batched matmuls. Head kinds (Zhang & Papyan, arXiv 2602.09297) apply within each slice:
the same per-head kinds (:mod:`tokengeo.nn.heads`) in every slice, through
:class:`~tokengeo.nn.attention.HeadAttention`; a
``mixed`` head has its own learnt (a, b) in every slice.

Hook points (head index ``k·H + h``, slice-major; all in the transform domain), each
editable (what a hook returns flows on): ``hook_q``, ``hook_k``, ``hook_v``, ``hook_z``
(B, T, p·H, D_h); ``hook_attn_scores`` (B, p·H, T, T), the logits of P
(``Q̂_kh K̂_khᵀ / √D_h``, masked keys at −∞); ``hook_pattern`` (B, p·H, T, T; the returned
pattern is the one applied to V); ``hook_result`` (B, T, p·H, d_s), head (k, h)'s term
``Ẑ_kh Ŵ^O_kh`` of slice k's output (which is the sum over h plus the bias). Reshaping to
these layouts costs a copy, made only when a hook is attached; the scores, the pattern and
the results are formed only then.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint
from tokengeo.nn.attention import ATTENTION_HOOKS, HeadAttention, active, build_attn_mask
from tokengeo.nn.config import SliceBlockConfig
from tokengeo.nn.lproduct import Affine, SliceLinear
from tokengeo.nn.reference import attention_scores


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


def tokens_to_pattern(pattern: torch.Tensor, p: int) -> torch.Tensor:
    """(B, p·H, T, T) -> (p·B, H, T, T), the inverse of :func:`pattern_to_tokens`."""
    B, PH, T, S = pattern.shape
    return pattern.view(B, p, PH // p, T, S).transpose(0, 1).reshape(p * B, PH // p, T, S)


class SliceHeadProjection(SliceLinear):
    """The output projection of p slices × H heads, ``Ŷ_k = Σ_h Ẑ_kh Ŵ^O_kh + b̂_k``; when its
    ``result_point`` (the attention's ``hook_result``) is hooked, the terms ``Ẑ_kh Ŵ^O_kh``
    are formed, shown to it as (B, T, p·H, d_out) and summed. Unhooked it is
    :class:`SliceLinear` (same parameters and state dict)."""

    def __init__(self, p: int, d_in: int, d_out: int, *, bias: bool, n_heads: int) -> None:
        super().__init__(p, d_in, d_out, bias=bias)
        self.n_heads = n_heads

    def forward(self, x: torch.Tensor, in_affine: Affine | None = None) -> torch.Tensor:
        point = self.__dict__.get("result_point")
        if point is None or not active(point) or in_affine is not None:
            return super().forward(x, in_affine)
        P, B, T, _ = x.shape  # (p, B, T, H·Dh)
        heads = x.unflatten(-1, (self.n_heads, -1))  # (p, B, T, H, Dh)
        w = self.weight.unflatten(1, (self.n_heads, -1))  # (p, H, Dh, d_out)
        terms = torch.einsum("pbthk,phkd->btphd", heads, w)  # (B, T, p, H, d_out)
        shown = point(terms.reshape(B, T, P * self.n_heads, self.d_out))
        out = shown.view(B, T, P, self.n_heads, self.d_out).sum(-2).permute(2, 0, 1, 3)
        return out if self.bias is None else out + self.bias.view(P, 1, 1, self.d_out)


class LMultiHeadAttention(HeadAttention):
    """Self-attention of p slices × H heads of width D_h = d_s / H, with per-head kinds.

    Parameters: ``qkv`` (p, d_s, 3·d_s), columns ``[q | k | v]`` each head-major (H, D_h)
    as in :class:`~tokengeo.nn.attention.MultiHeadAttention`; ``proj`` (p, d_s, d_s);
    ``mix_coef`` (p, n_mixed, 2) when some heads are ``mixed``.
    """

    def __init__(
        self, cfg: SliceBlockConfig, head_kinds: Sequence[str] | None = None, *,
        causal: bool = False, kernel: str = "auto",
    ) -> None:
        p, d_slice = cfg.p, cfg.d_model // cfg.p
        if d_slice % cfg.n_heads:
            raise ConfigError(f"d_slice={d_slice} is not divisible by n_heads={cfg.n_heads}")
        super().__init__(cfg.n_heads, head_kinds, cfg.mixed_init, slices=p, kernel=kernel)
        self.p, self.d_slice, self.head_dim = p, d_slice, d_slice // cfg.n_heads
        self.causal, self.attn_dropout = causal, cfg.attn_dropout
        self.qkv = SliceLinear(p, d_slice, 3 * d_slice, bias=cfg.bias)
        self.proj = SliceHeadProjection(p, d_slice, d_slice, bias=cfg.bias, n_heads=cfg.n_heads)
        self.proj_drop = nn.Dropout(cfg.dropout)
        for name in ATTENTION_HOOKS:
            setattr(self, name, HookPoint())
        self.hook_attn_scores = HookPoint()
        self.hook_result = HookPoint()
        self.proj.__dict__["result_point"] = self.hook_result  # a reference, no second name

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
        in_affine: Affine | None = None,
    ) -> torch.Tensor:
        """(p, B, T, d_s) -> (p, B, T, d_s); ``key_padding_mask`` (B, T), 1 = real token.

        ``in_affine``: a per-slice (γ, β) applied to ``x`` first, folded into the qkv weights.
        """
        P, B, T, _ = x.shape
        qkv = self.qkv(x, in_affine).view(P * B, T, 3, self.n_heads, self.head_dim)
        q, k, v = qkv.unbind(dim=2)  # each (P·B, T, H, Dh)
        if active(self.hook_q) or active(self.hook_k) or active(self.hook_v):
            q, k, v = (self._hook(hp, t) for hp, t in
                       zip((self.hook_q, self.hook_k, self.hook_v), (q, k, v), strict=True))
            qkv = None  # a hook may replace q, k, v or watch their gradients
        attn_mask, is_causal = build_attn_mask(key_padding_mask, T, self.causal)
        if attn_mask is not None:
            attn_mask = attn_mask.repeat(P, 1, 1, 1)  # (P·B, 1, 1 or T, T), slice-major
        return self.proj_drop(self.attend_project(
            q, k, v, (P, B, T, self.d_slice), qkv=qkv,
            attn_mask=attn_mask, is_causal=is_causal,
            dropout_p=self.attn_dropout if self.training else 0.0,
            edit_pattern=self._pattern_hook(q, k, attn_mask, is_causal),
            hook_z=self._hook_z if active(self.hook_z) else None))

    def _hook_z(self, z: torch.Tensor) -> torch.Tensor:
        """Show z (p·B, T, H, Dh) to ``hook_z`` as (B, T, p·H, Dh); use what it returns."""
        return tokens_to_heads(self.hook_z(heads_to_tokens(z, self.p)), self.p)

    def _hook(self, point: HookPoint, t: torch.Tensor) -> torch.Tensor:
        """Show ``t`` (p·B, T, H, Dh) to ``point`` as (B, T, p·H, Dh); a no-op when unhooked."""
        if not active(point):
            return t
        return tokens_to_heads(point(heads_to_tokens(t, self.p)), self.p)

    def _edit_pattern(self, pattern: torch.Tensor) -> torch.Tensor:
        """Show P (p·B, H, T, T) to ``hook_pattern`` as (B, p·H, T, T); use what it returns."""
        if not active(self.hook_pattern):
            return pattern
        return tokens_to_pattern(self.hook_pattern(pattern_to_tokens(pattern, self.p)), self.p)

    def _pattern_hook(self, q: torch.Tensor, k: torch.Tensor, attn_mask: torch.Tensor | None,
                      is_causal: bool):
        """What the attention does with a materialised P: nothing when neither the scores nor
        the pattern is hooked; ``hook_pattern`` alone; with ``hook_attn_scores``, P formed
        again from the (hooked) scores of q, k (p·B, T, H, Dh), then ``hook_pattern``."""
        if not active(self.hook_attn_scores):
            return self._edit_pattern if active(self.hook_pattern) else None

        def from_scores(pattern: torch.Tensor) -> torch.Tensor:
            scores = attention_scores(q.transpose(1, 2).to(pattern.dtype),
                                      k.transpose(1, 2).to(pattern.dtype), attn_mask, is_causal)
            shown = self.hook_attn_scores(pattern_to_tokens(scores, self.p))  # (B, p·H, T, T)
            return self._edit_pattern(tokens_to_pattern(shown, self.p).softmax(dim=-1))

        return from_scores

    def extra_repr(self) -> str:
        counts = {k: self.head_kinds.count(k) for k in dict.fromkeys(self.head_kinds)}
        return (f"p={self.p}, d_slice={self.d_slice}, n_heads={self.n_heads}, "
                f"causal={self.causal}, heads={counts}")
