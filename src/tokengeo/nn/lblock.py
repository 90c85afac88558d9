"""L-Transformer block: a pre-LN transformer block in every spectral slice at once.

El Ichi et al. (arXiv 2603.05727, the L-Transformer block and its equivalence theorem):
in the transform domain an L-Transformer block acts on each slice X̂_k ∈ R^{T×d_s} as an
ordinary block,

    X̂_k ← X̂_k + L-MHA_k(LN_k(X̂_k)),   X̂_k ← X̂_k + L-FFN_k(LN_k(X̂_k)),

so a stack of them is p independent transformers of width d_s, conjugated by the
transform: Y = (⊕_k Block_k)(X ×₃ Z) ×₃ Z⁻¹. Blocks here take and return X̂ in the
transform domain, slice-major ``(p, B, T, d_s)``; the model transforms once before the first
block and inverts once after the last (Z⁻¹ Z = I between blocks).

:func:`slice_block` copies slice k's weights into a standard block; the equivalence tests
and the benchmark's slice-after-slice contender (as the paper ran it) use it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import nn

from tokengeo.hooks import HookPoint
from tokengeo.nn.block import RESIDUAL_HOOKS, Block
from tokengeo.nn.config import SliceBlockConfig
from tokengeo.nn.lattention import LMultiHeadAttention
from tokengeo.nn.lproduct import (
    Affine,
    SliceLayerNorm,
    SliceLinear,
    hook_slices,
)


class LFeedForward(nn.Module):
    """L-FFN: Ŷ_k = GELU(X̂_k Ŵ¹_k + b¹_k) Ŵ²_k + b²_k in every slice (arXiv 2603.05727, L-FFN).

    Hook points (TransformerLens' names), each editable, called only when hooked: ``hook_pre``,
    every slice's hidden layer before the GELU, and ``hook_post``, after it, both
    (B, T, p·h) slice-major (h = ⌊r·d_s⌋ per slice)."""

    def __init__(self, cfg: SliceBlockConfig) -> None:
        super().__init__()
        p, d_slice = cfg.p, cfg.d_model // cfg.p
        hidden = int(cfg.mlp_ratio * d_slice)
        self.fc1 = SliceLinear(p, d_slice, hidden, bias=cfg.bias)
        self.act = nn.GELU()
        self.fc2 = SliceLinear(p, hidden, d_slice, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()

    def forward(self, x: torch.Tensor, in_affine: Affine | None = None) -> torch.Tensor:
        """(p, B, T, d_s) -> (p, B, T, d_s); ``in_affine`` is folded into ``fc1``."""
        hidden = hook_slices(self.hook_pre, self.fc1(x, in_affine))  # (p, B, T, h)
        return self.drop(self.fc2(hook_slices(self.hook_post, self.act(hidden))))


class LBlock(nn.Module):
    """Pre-LN L-Transformer block on X̂ (p, B, T, d_s), with TransformerLens-style hooks.

    ``LBlock(cfg, head_kinds, causal=...)`` reads ``p`` and the block sizes from the config
    (d_s = d_model / p, ``n_heads`` per slice). Residual hook points (the names of
    :class:`~tokengeo.nn.block.Block`) see the transform-domain stream flattened
    slice-major, (B, T, p·d_s), and are editable (what a hook returns flows on). Z is
    orthogonal, so token norms and inner products there equal those in the original domain.
    """

    def __init__(
        self, cfg: SliceBlockConfig, head_kinds: Sequence[str] | None = None, *,
        causal: bool = False,
    ) -> None:
        super().__init__()
        self.config = cfg
        self.p, self.d_slice = cfg.p, cfg.d_model // cfg.p
        self.ln1 = SliceLayerNorm(self.p, self.d_slice, eps=cfg.norm_eps, bias=cfg.bias)
        self.attn = LMultiHeadAttention(cfg, head_kinds, causal=causal, kernel=cfg.kernel)
        self.ln2 = SliceLayerNorm(self.p, self.d_slice, eps=cfg.norm_eps, bias=cfg.bias)
        self.mlp = LFeedForward(cfg)
        for name in RESIDUAL_HOOKS:
            setattr(self, name, HookPoint())

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:  # (p, B, T, d_s) -> (p, B, T, d_s)
        # Each LN's (γ, β) is folded into the next slice linear map (see SliceLinear).
        x = hook_slices(self.hook_resid_pre, x)
        attn = self.attn(self.ln1.normalize(x), key_padding_mask, in_affine=self.ln1.affine())
        x = hook_slices(self.hook_resid_mid, x + hook_slices(self.hook_attn_out, attn))
        mlp = self.mlp(self.ln2.normalize(x), in_affine=self.ln2.affine())
        return hook_slices(self.hook_resid_post, x + hook_slices(self.hook_mlp_out, mlp))

    def extra_repr(self) -> str:
        return f"p={self.p}, d_slice={self.d_slice}"


def slice_block(lblock: LBlock, k: int) -> Block:
    """The standard :class:`~tokengeo.nn.block.Block` of width d_s that slice ``k`` runs.

    Its weights are copies of slice k's (``nn.Linear`` stores Wᵀ), so by the equivalence
    theorem (arXiv 2603.05727) ``lblock(x̂)[k] == slice_block(lblock, k)(x̂[k])``. Its
    config is the block's with ``d_model = d_s`` (``lblock.config`` must be a dataclass).
    """
    attn = lblock.attn
    narrow = dataclasses.replace(lblock.config, d_model=lblock.d_slice, p=1)
    ref = Block(narrow, attn.head_kinds, causal=attn.causal).to(
        device=attn.qkv.weight.device, dtype=attn.qkv.weight.dtype)
    pairs = [(ref.ln1, lblock.ln1), (ref.ln2, lblock.ln2)]
    linears = [(ref.attn.qkv, attn.qkv), (ref.attn.proj, attn.proj),
               (ref.mlp.fc1, lblock.mlp.fc1), (ref.mlp.fc2, lblock.mlp.fc2)]
    with torch.no_grad():
        for norm, snorm in pairs:
            norm.weight.copy_(snorm.weight[k])
            if norm.bias is not None:
                norm.bias.copy_(snorm.bias[k])
        for lin, slin in linears:
            lin.weight.copy_(slin.weight[k].T)
            if lin.bias is not None:
                lin.bias.copy_(slin.bias[k])
        if attn.mix_coef is not None:
            ref.attn.mix_coef.copy_(attn.mix_coef[k])
    return ref
