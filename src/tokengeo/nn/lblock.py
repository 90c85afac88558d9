"""L-Transformer block: a pre-LN transformer block in every spectral slice at once.

El Ichi et al. (arXiv 2603.05727, the L-Transformer block and its equivalence theorem):
in the transform domain an L-Transformer block acts on each slice X̂_k ∈ R^{T×d_s} as an
ordinary block,

    X̂_k ← X̂_k + L-MHA_k(LN_k(X̂_k)),   X̂_k ← X̂_k + L-FFN_k(LN_k(X̂_k)),

so a stack of them is p independent transformers of width d_s, conjugated by the
transform: Y = (⊕_k Block_k)(X ×₃ Z) ×₃ Z⁻¹. Blocks here take and return X̂ in the
transform domain, slice-major ``(p, B, T, d_s)``; the model transforms once before the first
block and inverts once after the last (Z⁻¹ Z = I between blocks).

``slice_mode="sequential"`` runs the slices one after another through the same code with
one slice's weights at a time (as the paper did); it exists to benchmark what batching the
slices buys, computes the same function, and does not support hook points.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint
from tokengeo.nn.block import Block
from tokengeo.nn.lattention import LMultiHeadAttention
from tokengeo.nn.lproduct import (
    ALL_SLICES,
    Affine,
    SliceLayerNorm,
    SliceLinear,
    slices_to_tokens,
    tokens_to_slices,
)

SLICE_MODES = ("batched", "sequential")
RESIDUAL_HOOKS = ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out",
                  "hook_resid_post")


def hook_slices(point: HookPoint, x: torch.Tensor) -> torch.Tensor:
    """Show ``x`` (p, B, T, d_s) to ``point`` as (B, T, p·d_s); a no-op when unhooked."""
    if not point.is_active():
        return x
    return tokens_to_slices(point(slices_to_tokens(x)), x.shape[0])


class LFeedForward(nn.Module):
    """L-FFN: Ŷ_k = GELU(X̂_k Ŵ¹_k + b¹_k) Ŵ²_k + b²_k in every slice (arXiv 2603.05727, L-FFN)."""

    def __init__(self, p: int, d_slice: int, hidden: int, *, dropout: float = 0.0,
                 bias: bool = True) -> None:
        super().__init__()
        self.fc1 = SliceLinear(p, d_slice, hidden, bias=bias)
        self.act = nn.GELU()
        self.fc2 = SliceLinear(p, hidden, d_slice, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, sl: slice = ALL_SLICES, in_affine: Affine | None = None
    ) -> torch.Tensor:
        """(p', B, T, d_s) -> (p', B, T, d_s); ``in_affine`` is folded into ``fc1``."""
        return self.drop(self.fc2(self.act(self.fc1(x, sl, in_affine)), sl))


class LBlock(nn.Module):
    """Pre-LN L-Transformer block on X̂ (p, B, T, d_s), with TransformerLens-style hooks.

    Residual hook points see the transform-domain stream flattened slice-major,
    (B, T, p·d_s). Z is orthogonal, so token norms and inner products there equal those in
    the original domain.
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
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        bias: bool = True,
        norm_eps: float = 1e-5,
        slice_mode: str = "batched",
    ) -> None:
        super().__init__()
        if slice_mode not in SLICE_MODES:
            raise ConfigError(f"slice_mode={slice_mode!r}; choose one of {list(SLICE_MODES)}")
        self.p, self.d_slice, self.slice_mode = p, d_slice, slice_mode
        self.ln1 = SliceLayerNorm(p, d_slice, eps=norm_eps, bias=bias)
        self.attn = LMultiHeadAttention(
            p, d_slice, n_heads, head_kinds=head_kinds, mixed_init=mixed_init, causal=causal,
            attn_dropout=attn_dropout, proj_dropout=dropout, bias=bias,
        )
        self.ln2 = SliceLayerNorm(p, d_slice, eps=norm_eps, bias=bias)
        self.mlp = LFeedForward(p, d_slice, int(mlp_ratio * d_slice), dropout=dropout, bias=bias)
        for name in RESIDUAL_HOOKS:
            setattr(self, name, HookPoint())

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:  # (p, B, T, d_s) -> (p, B, T, d_s)
        if self.slice_mode == "batched":
            return self._forward(x, key_padding_mask, ALL_SLICES)
        self._check_unhooked()
        outs = [self._forward(x[k:k + 1], key_padding_mask, slice(k, k + 1))
                for k in range(self.p)]
        return torch.cat(outs, dim=0)

    def _forward(self, x: torch.Tensor, mask: torch.Tensor | None, sl: slice) -> torch.Tensor:
        # Each LN's (γ, β) is folded into the next slice linear map (see SliceLinear).
        x = hook_slices(self.hook_resid_pre, x)
        attn = self.attn(self.ln1.normalize(x), mask, sl, in_affine=self.ln1.affine(sl))
        x = hook_slices(self.hook_resid_mid, x + hook_slices(self.hook_attn_out, attn))
        mlp = self.mlp(self.ln2.normalize(x), sl, in_affine=self.ln2.affine(sl))
        return hook_slices(self.hook_resid_post, x + hook_slices(self.hook_mlp_out, mlp))

    def _check_unhooked(self) -> None:
        hooked = [n for n, m in self.named_modules() if isinstance(m, HookPoint) and m.is_active()]
        if hooked:
            raise ConfigError(
                f"hook points {hooked} are not supported with slice_mode='sequential' "
                "(a benchmark mode); use slice_mode='batched'"
            )

    def extra_repr(self) -> str:
        return f"p={self.p}, d_slice={self.d_slice}, slice_mode={self.slice_mode!r}"


def slice_block(lblock: LBlock, k: int) -> Block:
    """The standard :class:`~tokengeo.nn.block.Block` of width d_s that slice ``k`` runs.

    Its weights are copies of slice k's (``nn.Linear`` stores Wᵀ), so by the equivalence
    theorem (arXiv 2603.05727) ``lblock(x̂)[k] == slice_block(lblock, k)(x̂[k])``.
    """
    attn = lblock.attn
    ref = Block(
        lblock.d_slice, attn.n_heads, head_kinds=attn.head_kinds, causal=attn.causal,
        mlp_ratio=lblock.mlp.fc1.d_out / lblock.d_slice, bias=attn.qkv.bias is not None,
        norm_eps=lblock.ln1.eps, dropout=lblock.mlp.drop.p, attn_dropout=attn.attn_dropout,
    ).to(device=attn.qkv.weight.device, dtype=attn.qkv.weight.dtype)
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
