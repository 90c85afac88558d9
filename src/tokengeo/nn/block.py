"""Pre-LN transformer block and block stack, with TransformerLens-style hook points."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from tokengeo.hooks import HookPoint
from tokengeo.nn.attention import MultiHeadAttention
from tokengeo.nn.mlp import MLP


class Block(nn.Module):
    """``x + Attn(LN(x))`` then ``x + MLP(LN(x))`` (pre-LN, as in GPT-2 and ViT)."""

    def __init__(
        self,
        d_model: int,
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
    ) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model, eps=norm_eps, bias=bias)
        self.attn = MultiHeadAttention(
            d_model, n_heads, head_kinds=head_kinds, mixed_init=mixed_init, causal=causal,
            attn_dropout=attn_dropout, proj_dropout=dropout, bias=bias,
        )
        self.ln2 = nn.LayerNorm(d_model, eps=norm_eps, bias=bias)
        self.mlp = MLP(d_model, int(mlp_ratio * d_model), dropout=dropout, bias=bias)
        for name in ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out",
                     "hook_resid_post"):
            setattr(self, name, HookPoint())

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.hook_attn_out(self.attn(self.ln1(x), key_padding_mask)))
        return self.hook_resid_post(x + self.hook_mlp_out(self.mlp(self.ln2(x))))
