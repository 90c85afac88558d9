"""The block stack shared by every family, and weight initialisation."""

from __future__ import annotations

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint, name_hook_points
from tokengeo.models.config import TransformerConfig
from tokengeo.nn.block import Block


def build_blocks(cfg: TransformerConfig, *, causal: bool) -> nn.ModuleList:
    """``n_layers`` pre-LN blocks, each with its layer's head kinds from the config."""
    return nn.ModuleList(
        Block(
            cfg.d_model, cfg.n_heads, head_kinds=kinds, mixed_init=cfg.mixed_init,
            causal=causal, mlp_ratio=cfg.mlp_ratio, dropout=cfg.dropout,
            attn_dropout=cfg.attn_dropout, bias=cfg.bias, norm_eps=cfg.norm_eps,
        )
        for kinds in cfg.head_kinds()
    )


class TokengeoModel(nn.Module):
    """Base of every family: config, blocks, hook names and the uniform timm-like API.

    Subclasses implement ``embed`` (inputs → (B, T, d) and an optional key padding mask)
    and ``forward_head`` (final features → outputs).
    """

    family: str = ""

    def __init__(self, cfg: TransformerConfig, *, causal: bool) -> None:
        super().__init__()
        self.config = cfg
        self.hook_embed = HookPoint()
        self.blocks = build_blocks(cfg, causal=causal)
        self.ln_final = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)
        self.hook_final = HookPoint()

    def finish_init(self) -> None:
        """Initialise weights (GPT-2/timm style) and name the hook points; call last."""
        self.apply(init_weights)
        name_hook_points(self)

    def forward_features(
        self, x: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Tokens after the final norm, (B, T, d). ``attention_mask``: (B, T), 1 = real token."""
        h, mask = self.embed(x, attention_mask)  # (B, T, d), (B, T) or None
        h = self.hook_embed(h)
        for block in self.blocks:
            h = block(h, mask)
        return self.hook_final(self.ln_final(h))  # (B, T, d)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.forward_head(self.forward_features(x, attention_mask), attention_mask)

    def forward_intermediates(
        self, x: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> list[torch.Tensor]:
        """The residual stream after every block (timm's ``forward_intermediates``)."""
        h, mask = self.embed(x, attention_mask)
        outs = []
        for block in self.blocks:
            h = block(h, mask)
            outs.append(h)
        return outs

    def num_parameters(self, *, only_blocks: bool = False) -> int:
        params = self.blocks.parameters() if only_blocks else self.parameters()
        return sum(p.numel() for p in params)


def check_length(seq_len: int, limit: int, field: str) -> None:
    """Refuse sequences longer than the model's positions (``max_len`` / ``block_size``)."""
    if seq_len > limit:
        raise ConfigError(
            f"sequence length {seq_len} exceeds {field}={limit}; truncate the inputs or "
            f"create the model with a larger {field}"
        )


def mask_with_prefix(attention_mask: torch.Tensor | None, n_prefix: int = 1):
    """The (B, T) padding mask extended by ``n_prefix`` real tokens in front (a cls token)."""
    if attention_mask is None:
        return None
    ones = attention_mask.new_ones(attention_mask.shape[0], n_prefix)
    return torch.cat([ones, attention_mask], dim=1)  # (B, n_prefix + T)


def init_weights(module: nn.Module) -> None:
    """N(0, 0.02) for linear and embedding weights, zero biases, unit LayerNorm."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
