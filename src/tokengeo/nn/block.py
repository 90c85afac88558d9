"""Pre-LN transformer block, with TransformerLens-style hook points."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from tokengeo.hooks import HookPoint
from tokengeo.nn.attention import MultiHeadAttention
from tokengeo.nn.config import BlockConfig
from tokengeo.nn.mlp import MLP

RESIDUAL_HOOKS = ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out",
                  "hook_resid_post")


class Block(nn.Module):
    """``x + Attn(LN(x))`` then ``x + MLP(LN(x))`` (pre-LN, as in GPT-2 and ViT).

    ``Block(cfg, head_kinds, causal=...)``: the sizes come from the config (nanoGPT's
    ``Block(config)``), as does the attention kernel (``cfg.kernel``); the layer's head
    kinds and the family's causality from the model.
    Hook points, each editable (what a hook returns flows on), all (B, T, d):
    ``hook_resid_pre``, ``hook_attn_out``, ``hook_resid_mid``, ``hook_mlp_out``,
    ``hook_resid_post``; and the attention's (see :class:`MultiHeadAttention`).
    """

    def __init__(
        self, cfg: BlockConfig, head_kinds: Sequence[str] | None = None, *, causal: bool = False
    ) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)
        self.attn = MultiHeadAttention(cfg, head_kinds, causal=causal, kernel=cfg.kernel)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)
        self.mlp = MLP(cfg)
        for name in RESIDUAL_HOOKS:
            setattr(self, name, HookPoint())

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:  # (B, T, d) -> (B, T, d)
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.hook_attn_out(self.attn(self.ln1(x), key_padding_mask)))
        return self.hook_resid_post(x + self.hook_mlp_out(self.mlp(self.ln2(x))))
