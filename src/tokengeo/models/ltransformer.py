"""L-Transformer text classifier (El Ichi, Jbilou, El Guide & Dufrenois, arXiv 2603.05727).

The width d is split into p spectral slices of width d_s = d / p by an orthogonal transform
Z along the slice (tube) mode (DCT-II by default). In the transform domain the encoder is p
independent pre-LN transformers of width d_s (the paper's equivalence theorem), run here as
one batched computation: p·H heads in one fused attention call, per-slice weights in one
batched matmul. Pipeline, with X̂ stored slice-major (p, B, T, d_s):

    X  = √d · Embed(ids)                          (B, T, d)      original domain
    X̂  = X ×₃ Z + PE_k(t)                         (p, B, T, d_s) transform domain
    X̂  ← LBlock_L ∘ … ∘ LBlock_1 (X̂)               p narrow transformers at once
    Y  = LN_slice(X̂) ×₃ Z⁻¹                       (B, T, d)      back to the original domain
    logits = Linear(mean over real tokens of Y)   (or a cls token)

Encoder parameters (the blocks, plus a learnable transform's p(p−1)/2) are about 1/p of a
standard encoder's of the same width; :func:`encoder_parameter_count` gives the formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from tokengeo.config import check_choice, check_positive
from tokengeo.errors import ConfigError
from tokengeo.hooks import HookPoint, name_hook_points
from tokengeo.models.config import EncoderConfig
from tokengeo.models.transformer import check_length, init_weights, mask_with_prefix
from tokengeo.nn.lblock import SLICE_MODES, LBlock, hook_slices
from tokengeo.nn.lposition import SlicePositionalEncoding, check_alpha
from tokengeo.nn.lproduct import SliceLayerNorm, slices_to_tokens, tokens_to_slices
from tokengeo.nn.transforms import check_transform, make_transform


@dataclass
class LTransformerConfig(EncoderConfig):
    """An :class:`EncoderConfig` split into ``p`` slices.

    ``n_heads`` counts heads *per slice* (head width d_s / n_heads); ``n_laplacian`` makes the
    last k heads of every slice Laplacian; ``transform`` is one of
    :data:`~tokengeo.nn.transforms.TRANSFORMS`; ``alpha`` one of
    :data:`~tokengeo.nn.lposition.ALPHAS`; ``slice_mode="sequential"`` loops over slices
    (for benchmarks only).
    """

    p: int = 4
    transform: str = "dct"
    alpha: str = "identity"
    slice_mode: str = "batched"

    @property
    def d_slice(self) -> int:
        return self.d_model // self.p

    def validate(self) -> None:
        if not isinstance(self.p, int) or isinstance(self.p, bool) or self.p < 1:
            raise ConfigError(f"p={self.p!r} must be an integer >= 1 (the number of slices)")
        check_positive("d_model", self.d_model)
        check_positive("n_heads", self.n_heads)
        if self.d_model % self.p:
            raise ConfigError(f"d_model={self.d_model} is not divisible by p={self.p}")
        if self.d_slice % self.n_heads:
            raise ConfigError(
                f"n_heads={self.n_heads} (heads per slice) does not divide the slice width "
                f"d_model / p = {self.d_slice}"
            )
        check_transform(self.transform, self.p)
        check_alpha(self.alpha)
        check_choice("slice_mode", self.slice_mode, SLICE_MODES)
        super().validate()


def encoder_parameter_count(cfg: LTransformerConfig) -> int:
    """Parameters of the block stack (and of a learnable transform), by formula.

    Per layer and slice, with h = ⌊r·d_s⌋ the FFN width and n_mix the layer's mixed heads:

        4 d_s² + 2 d_s h            weights of Q, K, V, O and of the FFN
      + 5 d_s + h                   their biases (if ``bias``)
      + 2 d_s (+ 2 d_s)             the two slice LayerNorms' gains (and biases)
      + 2 n_mix                     the (a, b) of each mixed head

    times p slices and summed over layers, plus p(p−1)/2 for a learnable transform. With
    p = 1 it is a standard encoder's count, so the ratio at p slices is about 1/p
    (arXiv 2603.05727, "up to lower-order terms such as biases and normalization
    parameters": weights shrink by p, biases and norms do not).
    """
    d_s, h = cfg.d_slice, int(cfg.mlp_ratio * cfg.d_slice)
    per_slice = 4 * d_s**2 + 2 * d_s * h + 2 * d_s
    if cfg.bias:
        per_slice += 5 * d_s + h + 2 * d_s
    mixed = sum(kinds.count("mixed") for kinds in cfg.head_kinds())
    transform = cfg.p * (cfg.p - 1) // 2 if cfg.transform.startswith("learnable") else 0
    return cfg.p * (cfg.n_layers * per_slice + 2 * mixed) + transform


class LTransformer(nn.Module):
    """Bidirectional L-Transformer classifier: ``model(ids, attention_mask) -> (B, C)``.

    Same inputs and API as the ``encoder`` family (``forward_features``, ``forward_head``,
    ``forward_intermediates``, ``num_parameters``). Hook points: ``hook_embed`` and the
    blocks' residual hooks see the transform-domain stream (B, T, p·d_s), slice k =
    features [k·d_s, (k+1)·d_s); ``blocks.{l}.attn.hook_z|q|k|v`` are (B, T, p·H, D_h) with
    head index k·H + h; ``hook_pattern`` (B, p·H, T, T); ``hook_final`` is in the original
    domain (B, T, d).
    """

    family = "ltransformer"

    def __init__(self, cfg: LTransformerConfig) -> None:
        super().__init__()
        self.config = cfg
        p, d, d_s = cfg.p, cfg.d_model, cfg.d_slice
        self.tok_emb = nn.Embedding(cfg.vocab_size, d)
        self.emb_scale = math.sqrt(d)  # Vaswani et al. (2017), Sec. 3.4
        self.transform = make_transform(cfg.transform, p)
        self.pos_enc = SlicePositionalEncoding(p, d_s, cfg.alpha)
        self.cls_token = nn.Parameter(torch.zeros(p, 1, 1, d_s)) if cfg.pool == "cls" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_embed = HookPoint()
        self.blocks = nn.ModuleList(
            LBlock(p, d_s, cfg.n_heads, head_kinds=kinds, mixed_init=cfg.mixed_init,
                   mlp_ratio=cfg.mlp_ratio, dropout=cfg.dropout, attn_dropout=cfg.attn_dropout,
                   bias=cfg.bias, norm_eps=cfg.norm_eps, slice_mode=cfg.slice_mode)
            for kinds in cfg.head_kinds()
        )
        self.ln_final = SliceLayerNorm(p, d_s, eps=cfg.norm_eps, bias=cfg.bias)
        self.hook_final = HookPoint()
        self.head = nn.Linear(d, cfg.num_classes)
        self.apply(init_weights)  # embedding and head; slice modules initialise themselves
        name_hook_points(self)

    def embed(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """X̂ = (√d · Embed(ids)) ×₃ Z + PE_k(t), (p, B, T, d_s), and the padding mask."""
        B, T = ids.shape
        check_length(T, self.config.max_len, "max_len")
        x = tokens_to_slices(self.tok_emb(ids) * self.emb_scale, self.config.p)  # (p, B, T, d_s)
        x = self.transform(x) + self.pos_enc(T)  # (p, B, T, d_s)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(-1, B, -1, -1), x], dim=2)  # (p, B, 1 + T, d_s)
            attention_mask = mask_with_prefix(attention_mask)
        return self.drop(x), attention_mask

    def forward_features(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Tokens after the final slice norm, back in the original domain: (B, T, d)."""
        x, mask = self.embed(ids, attention_mask)
        x = hook_slices(self.hook_embed, x)
        for block in self.blocks:
            x = block(x, mask)  # (p, B, T, d_s)
        x = self.transform.inverse(self.ln_final(x))
        return self.hook_final(slices_to_tokens(x))  # (B, T, d)

    def forward_head(
        self, features: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Mean over real tokens (or the cls token), then the linear head: (B, C)."""
        if self.cls_token is not None:
            return self.head(features[:, 0])
        if attention_mask is None:
            return self.head(features.mean(dim=1))
        w = attention_mask.to(features.dtype).unsqueeze(-1)  # (B, T, 1)
        return self.head((features * w).sum(1) / w.sum(1).clamp_min(1.0))

    def forward(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.forward_head(self.forward_features(ids, attention_mask), attention_mask)

    def forward_intermediates(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> list[torch.Tensor]:
        """The transform-domain residual stream after every block, each (B, T, p·d_s)."""
        x, mask = self.embed(ids, attention_mask)
        outs = []
        for block in self.blocks:
            x = block(x, mask)
            outs.append(slices_to_tokens(x))
        return outs

    def num_parameters(self, *, only_blocks: bool = False) -> int:
        """All parameters, or the encoder's: the blocks and a learnable transform."""
        if not only_blocks:
            return sum(p.numel() for p in self.parameters())
        encoder = [*self.blocks.parameters(), *self.transform.parameters()]
        return sum(p.numel() for p in encoder)
