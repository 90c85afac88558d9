"""The model skeleton shared by every family (ViT, GPT, text encoder, L-Transformer).

:class:`TokengeoModel` owns the config, the block stack, the final norm, the hook points
``hook_embed`` / ``hook_final`` and the uniform timm-like API (``forward_features``,
``forward_head``, ``forward_intermediates``, ``num_parameters``). A family implements
``embed`` and sets what differs: its block class, its final norm, how its residual stream
is shown as tokens, and how features leave the stream (the L-Transformer's transform out).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint, name_hook_points
from tokengeo.models.config import TransformerConfig
from tokengeo.nn.block import Block
from tokengeo.nn.norm import HookedLayerNorm


class TokengeoModel(nn.Module):
    """Base of every family: config, blocks, hook names and the uniform timm-like API.

    Subclasses implement ``embed`` (inputs -> the blocks' input stream and an optional
    (B, T) key padding mask), set ``head`` (and ``cls_token``, None for mean pooling) or
    override ``forward_head``, and call :meth:`finish_init` last.

    Hook points, each editable (what a hook returns flows on): ``hook_embed`` (the blocks'
    input, (B, T, width)), the blocks' (``blocks.{l}.hook_resid_pre``, ...,
    ``blocks.{l}.attn.hook_pattern``; see :class:`~tokengeo.nn.block.Block`) and
    ``hook_final`` (the features after the final norm, (B, T, d)).
    """

    family: str = ""
    causal: bool = False  # causal self-attention (the GPT family)

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.config = cfg
        self.hook_embed = HookPoint()
        self.blocks = nn.ModuleList(self.make_block(kinds) for kinds in cfg.head_kinds())
        self.ln_final = self.make_final_norm()
        self.hook_final = HookPoint()

    # ------------------------------------------------------------ what a family may change

    def make_block(self, head_kinds: Sequence[str]) -> nn.Module:
        """One layer, with that layer's head kinds."""
        return Block(self.config, head_kinds, causal=self.causal)

    def make_final_norm(self) -> nn.Module:
        cfg = self.config
        return HookedLayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)

    def stream_to_tokens(self, h: torch.Tensor) -> torch.Tensor:
        """The blocks' residual stream as tokens (B, T, width), as hooks see it."""
        return h

    def tokens_to_stream(self, h: torch.Tensor) -> torch.Tensor:
        """The inverse of :meth:`stream_to_tokens` (a hook's returned tensor)."""
        return h

    def features_out(self, h: torch.Tensor) -> torch.Tensor:
        """The blocks' output stream -> the final features (B, T, d)."""
        return self.ln_final(h)

    def encoder_modules(self) -> list[nn.Module]:
        """What ``num_parameters(only_blocks=True)`` counts."""
        return [self.blocks]

    # ------------------------------------------------------------ shared

    def finish_init(self) -> None:
        """Initialise weights (GPT-2/timm style) and name the hook points; call last."""
        self.apply(init_weights)
        name_hook_points(self)

    def _hook_stream(self, point: HookPoint, h: torch.Tensor) -> torch.Tensor:
        if type(self).stream_to_tokens is TokengeoModel.stream_to_tokens:
            return point(h)  # the stream is the tokens: an identity call, hooked or not
        if not point.is_active():  # showing the stream as tokens costs a copy: only if hooked
            return h
        return self.tokens_to_stream(point(self.stream_to_tokens(h)))

    def forward_features(
        self, x: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Tokens after the final norm, (B, T, d). ``attention_mask``: (B, T), 1 = real token."""
        h, mask = self.embed(x, attention_mask)  # the stream, (B, T) mask or None
        h = self._hook_stream(self.hook_embed, h)
        for block in self.blocks:
            h = block(h, mask)
        return self.hook_final(self.features_out(h))  # (B, T, d)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.forward_head(self.forward_features(x, attention_mask), attention_mask)

    def forward_intermediates(
        self, x: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> list[torch.Tensor]:
        """The residual stream after every block, as tokens (timm's ``forward_intermediates``)."""
        h, mask = self.embed(x, attention_mask)
        outs = []
        for block in self.blocks:
            h = block(h, mask)
            outs.append(self.stream_to_tokens(h))
        return outs

    def pool(
        self, features: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The cls token when the family has one, else the mean over real tokens: (B, d)."""
        if self.cls_token is not None:
            return features[:, 0]
        if attention_mask is None:
            return features.mean(dim=1)
        w = attention_mask.to(features.dtype).unsqueeze(-1)  # (B, T, 1)
        return (features * w).sum(1) / w.sum(1).clamp_min(1.0)  # (B, d)

    def forward_head(
        self, features: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Pooled features through the linear head: (B, num_classes)."""
        return self.head(self.pool(features, attention_mask))

    def num_parameters(self, *, only_blocks: bool = False) -> int:
        """All parameters, or the encoder's (:meth:`encoder_modules`)."""
        modules = self.encoder_modules() if only_blocks else [self]
        return sum(p.numel() for m in modules for p in m.parameters())


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
